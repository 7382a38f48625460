"""The FFT primitives on (real, imaginary) parts: the form compiled code runs them in.

The LLVM backend splits complex values into pairs of real arrays (codegen/complex_split.py);
there, each FFT primitive of `symgraph.ops.fourier` (fft_c2c, fft_r2c, fft_c2r) becomes one
``fft_parts`` node on real arrays, which compiled code runs with its own FFT
(codegen/llvm/fft.py; no NumPy at run time):

- ``fft_parts(re, im, table; kind="c2c", n, inverse)``: (..., n) parts -> (2, ..., n), the real
  parts of the transform then the imaginary parts (a node has one output, so it packs both);
- ``fft_parts(x, table; kind="r2c", n)``: (..., n) reals -> (2, ..., n//2 + 1);
- ``fft_parts(re, im, table; kind="c2r", n)``: (..., n//2 + 1) parts -> (..., n) reals
  (numpy.fft.irfft(z, n, norm="forward"): the imaginary parts of the DC and, for even n, the
  Nyquist term ignored).

All transform the last axis, unnormalized, batched over the leading axes, float32 or float64
(computed in the input's precision). ``table`` is the transform's constant table
(`codegen.cpu.fft.node_table`: twiddles and Bluestein's chirp, computed in float64 at compile
time), a 1-D array of the parts' dtype that the native code reads and the NumPy reference
implementation ignores; its cotangent is zero. r2c and c2r of one n share one table.

The rules are the adjoint transforms (the op is linear in its parts): c2c's adjoint is the
transform of the other direction; r2c's is c2r of the cotangent with the terms that stand for two
(0 < k < n/2) halved; c2r's is r2c of the cotangent with those terms doubled (the imaginary parts of
DC and Nyquist get the zero they contribute).
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import DTypeError, ShapeError
from .core import Op, register

__all__ = ["fft_parts", "half_weights"]

_LOWERING = {"lowering": "lapack"}  # a library-like routine per node in compiled code (codegen/cpu/lapack.py)


def half_weights(n: int, dtype) -> np.ndarray:
    """(n//2 + 1,) weights: 1 for DC and (even n) Nyquist, 2 for the terms that stand for two."""
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w.astype(dtype)


def _shape(*shapes, kind, n, inverse=False):
    *parts, table = shapes
    if kind not in ("c2c", "r2c", "c2r") or len(parts) != (1 if kind == "r2c" else 2):
        raise ShapeError(f"fft_parts: kind {kind!r} with {len(parts)} parts")
    if len(table) != 1:
        raise ShapeError(f"fft_parts: the table must be 1-D, got shape {table}")
    s = tuple(parts[0])
    if any(tuple(p) != s for p in parts) or not s:
        raise ShapeError(f"fft_parts: parts of shapes {parts}")
    h = n // 2 + 1
    want = h if kind == "c2r" else n
    if s[-1] != want or n < 1:
        raise ShapeError(f"fft_parts({kind}, n={n}): last axis {s[-1]}, expected {want}")
    if kind == "c2c":
        return (2,) + s
    if kind == "r2c":
        return (2,) + s[:-1] + (h,)
    return s[:-1] + (n,)


def _dtype(*dtypes, kind, n, inverse=False):
    d = np.dtype(dtypes[0])
    if d not in (np.float32, np.float64) or any(np.dtype(e) != d for e in dtypes):
        raise DTypeError(f"fft_parts: needs float32 or float64 parts and table of one dtype, got {dtypes}")
    return d


def _impl(*arrays, kind, n, inverse=False):
    *parts, _table = arrays
    d = parts[0].dtype
    if kind == "r2c":
        y = np.fft.rfft(parts[0].astype(np.float64), n)
    else:
        z = parts[0].astype(np.float64) + 1j * parts[1].astype(np.float64)
        if kind == "c2r":
            return np.fft.irfft(z, n, norm="forward").astype(d)
        y = np.fft.ifft(z, norm="forward") if inverse else np.fft.fft(z)
    return np.stack([y.real, y.imag]).astype(d)


def _first(p, i):
    """p[i] of a packed (2, ...) result."""
    nd = len(p.shape)
    s = L.bind("slice", p, starts=(i,) + (0,) * (nd - 1), stops=(i + 1,) + p.shape[1:], steps=(1,) * nd)
    return L.reshape(s, p.shape[1:])


def fft_parts(*parts, table, kind, n, inverse=False):
    """Bind an fft_parts node (see the module docstring)."""
    return L.bind("fft_parts", *parts, table, kind=kind, n=n, inverse=bool(inverse))


def _vjp(ct, node):
    kind, n, inverse = node.attr("kind"), node.attr("n"), node.attr("inverse")
    table = node.inputs[-1]
    if kind == "c2c":
        g = fft_parts(_first(ct, 0), _first(ct, 1), table=table, kind="c2c", n=n, inverse=not inverse)
        return (_first(g, 0), _first(g, 1), None)
    if kind == "r2c":
        w = L.constant(1.0 / half_weights(n, node.dtype))
        return (fft_parts(_first(ct, 0) * w, _first(ct, 1) * w, table=table, kind="c2r", n=n), None)
    g = fft_parts(ct, table=table, kind="r2c", n=n)
    w = L.constant(half_weights(n, node.dtype))
    return (_first(g, 0) * w, _first(g, 1) * w, None)


def _jvp(tangents, node):
    *ts, _ = tangents
    if all(t is None for t in ts):
        return None
    parts = [t if t is not None else L.zeros_like(x) for t, x in zip(ts, node.inputs)]
    return fft_parts(*parts, table=node.inputs[-1], kind=node.attr("kind"), n=node.attr("n"),
                     inverse=node.attr("inverse"))


def _flops(node):
    n = node.attr("n")
    rows = int(np.prod(node.inputs[0].shape[:-1], dtype=np.int64))
    return int(5 * rows * n * max(np.log2(max(n, 1)), 1.0))


register(Op("fft_parts", None, "opaque", _shape, _dtype, _impl, _vjp, _jvp,
            doc="an FFT primitive on (real, imaginary) parts along the last axis, unnormalized (kind c2c, r2c, "
                "c2r; complex results packed (2, ...)); its last input is the native code's constant table",
            flops=_flops, batch="loop", extra=_LOWERING))
