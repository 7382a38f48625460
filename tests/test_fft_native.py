"""The native FFT of the LLVM backend (codegen/llvm/fft.py, codegen/cpu/fft.py): the kernels against numpy.fft.

The kernel functions are compiled in one module (one entry per transform) and called on NumPy
buffers, for every algorithm (Stockham radix 4/2/3/5, Bluestein (17; 34 through its half), the half-length real transforms,
odd lengths) in float32 and float64, batched: the error is within a small multiple of
eps * log2(n) of the result's scale (numpy.fft in float64 the reference).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from codegen import jit
from codegen.cpu.fft import node_table, node_work_floats, plan, radices
from codegen.llvm.context import F32, F64, I64, PTR, VOID, LoweringContext
from codegen.llvm.fft import fft_node_function

SIZES = (1, 2, 3, 5, 8, 12, 17, 34, 64, 100, 1024, 4096)
DTYPES = (np.float32, np.float64)
#: (kind, inverse)
TRANSFORMS = (("c2c", False), ("c2c", True), ("r2c", False), ("c2r", False))


@pytest.fixture(scope="module")
def kernels():
    """{(kind, inverse, n, dtype): callable} from one compiled module."""
    mod = ir.Module(name="fft_kernels")
    cx = LoweringContext(mod)
    names = {}
    for dt in DTYPES:
        ty = F64 if dt == np.float64 else F32
        for n in SIZES:
            for kind, inv in TRANSFORMS:
                fn = fft_node_function(cx, kind, n, ty, inv)
                name = f"t{len(names)}"
                e = ir.Function(mod, ir.FunctionType(VOID, [PTR] * 6 + [I64]), name)
                b = ir.IRBuilder(e.append_basic_block())
                b.call(fn, list(e.args))
                b.ret_void()
                names[(kind, inv, n, np.dtype(dt).str)] = name
    j = jit.compile_ir(str(mod), entry="t0")
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 6), ctypes.c_int64)
    out = {k: proto(j.engine.get_function_address(v)) for k, v in names.items()}
    out["_jit"] = j  # keeps the engine alive
    return out


def native(kernels, kind, inv, x, n, dt):
    """The kernel's result on x (complex for c2c/c2r, real for r2c), batched over leading axes."""
    f = kernels[(kind, inv, n, np.dtype(dt).str)]
    tab = node_table(kind, n, dt)
    work = np.zeros(max(node_work_floats(kind, n), 1), dt)
    batch = int(np.prod(x.shape[:-1]))
    out = x.shape[:-1] + ((n // 2 + 1,) if kind == "r2c" else (n,))
    if kind == "r2c":
        xr = xi = np.ascontiguousarray(x, dt)
    else:
        xr, xi = np.ascontiguousarray(x.real, dt), np.ascontiguousarray(x.imag, dt)
    yr, yi = np.full(out, np.nan, dt), np.full(out, np.nan, dt)
    f(xr.ctypes.data, xi.ctypes.data, yr.ctypes.data, yi.ctypes.data, tab.ctypes.data, work.ctypes.data, batch)
    return yr if kind == "c2r" else yr + 1j * yi


def reference(kind, inv, x, n):
    x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if kind == "c2c":
        return np.fft.ifft(x, norm="forward") if inv else np.fft.fft(x)
    if kind == "r2c":
        return np.fft.rfft(x)
    return np.fft.irfft(x, n, norm="forward")


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind,inv", TRANSFORMS, ids=["fft", "ifft", "rfft", "irfft"])
def test_kernels_match_numpy_fft(kernels, kind, inv, dt):
    rng = np.random.default_rng(1)
    eps = np.finfo(dt).eps
    worst = 0.0
    for n in SIZES:
        shape = (2, 3, n // 2 + 1 if kind == "c2r" else n)  # batched: six rows
        x = rng.standard_normal(shape)
        if kind != "r2c":
            x = x + 1j * rng.standard_normal(shape)
        x = x.astype(dt if kind == "r2c" else np.result_type(dt, np.complex64))
        got, want = native(kernels, kind, inv, x, n, dt), reference(kind, inv, x, n)
        assert got.shape == want.shape
        scale = np.sqrt(n) * np.max(np.abs(x))  # the size of a transform's terms (Parseval)
        err = np.max(np.abs(got - want)) / (scale * eps * max(np.log2(n), 1.0))
        worst = max(worst, err)
        assert err < 4.0, (kind, inv, n, err)
    assert worst > 0.0  # rounding happened somewhere: the comparison is not vacuous


def test_plans():
    assert plan(1) == ("copy", 1) and plan(1024) == ("stockham", 1024) and plan(100) == ("stockham", 100)
    assert radices(1024) == (4,) * 5 and radices(8) == (4, 2) and radices(100) == (4, 5, 5) and radices(7) is None
    assert plan(17) == ("bluestein", 64) and plan(7) == ("bluestein", 16)
    # the real transforms of even n run on n/2 points and carry W_n^k, k <= n/2, first
    # (the radix-4 first pass of 32 points has its own 3 x 8 twiddles)
    assert node_table("r2c", 64, np.float64).size == 2 * 33 + 2 * 32 + 2 * 3 * 8
    assert node_work_floats("r2c", 64) == 4 * 32 + 4 * 32
