"""The lowering context: LLVM types of dtypes, casts, declared functions, and the switch to vector math.

Every emitter of the LLVM backend works through one `LoweringContext` per module: the module
and the current builder, declarations made once (`function`, `intrinsic`), constants and
NumPy's cast rules (`cast`), and `vmath`, the vectorizable math module
(`codegen.llvm.vmath`) or None when it failed to import (then transcendentals are LLVM
intrinsics and libm calls). The import is tried once, here: `_vmath` is the one switch.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from symgraph.errors import DTypeError

__all__ = ["I1", "I8", "I32", "I64", "F32", "F64", "PTR", "VOID", "LoweringContext", "ll_type", "mem_type",
           "is_float", "is_signed", "opaque_alloca", "for_range", "vmath_module"]


I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

try:  # vectorizable math, written by its own module; optional
    from . import vmath as _vmath
except Exception:  # noqa: BLE001  (absent or broken: fall back to intrinsics)
    _vmath = None


def vmath_module() -> Any:
    """The vector-math module (`codegen.llvm.vmath`) when it imported, else None."""
    return _vmath


def ll_type(dtype: np.dtype) -> ir.Type:
    """The register type of a numpy dtype (bool is i1)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if dtype.itemsize == 8:
            return F64
        if dtype.itemsize == 4:
            return F32
    elif dtype.kind == "b":
        return I1
    elif dtype.kind in "iu":
        return ir.IntType(8 * dtype.itemsize)
    raise DTypeError(f"codegen: dtype {dtype} is not supported by the LLVM backend (float32/64, ints, bool)")


def mem_type(dtype: np.dtype) -> ir.Type:
    """The in-memory type of a numpy dtype (bool is one byte)."""
    dtype = np.dtype(dtype)
    return I8 if dtype.kind == "b" else ll_type(dtype)


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def is_signed(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "i"


class LoweringContext:
    """Module-level state shared by emitters: the module, declared functions, options.

    Attributes:
        module: the llvmlite ir.Module being built.
        builder: the current IRBuilder (set by the kernel emitter).
        in_loop: whether emission is inside a loop body (vector math pays off).
        use_vmath: route transcendentals to the vector-math module when available.
        vmath: that module (`codegen.llvm.vmath`) when `use_vmath`, else None.
        indirect_math: outside loops, call the libm functions of transcendentals through
            pointers (`math_pointer`) instead of as intrinsics (llvm.sin.f64) or direct calls:
            set for programs compiled with the light pipeline (`codegen.jit.optimize(light=True)`,
            code generation at level 0). There LLVM's fast instruction selector refuses every
            direct call (the JIT's large code model), so each call went through SelectionDAG on
            its own: on `bench.scale.mixed_chain(100_000)`'s value and gradient (60 scalar kernels,
            29,803 calls of sin, cos, tanh, exp) object emission took 2.13 s of CPU, 0.87 s through
            pointers. The intrinsics lower to calls of the same libm functions at that level, so
            every value is the same, bit for bit.
    """

    def __init__(self, module: ir.Module, use_vmath: bool = True):
        self.module = module
        self.builder: ir.IRBuilder | None = None
        self.in_loop = False
        self.use_vmath = use_vmath and _vmath is not None
        self.vmath = _vmath if self.use_vmath else None
        self._fns: dict[str, ir.Function] = {}
        self.alloca_builder: ir.IRBuilder | None = None
        #: constant Expr -> its ir.Constant (constants belong to no function: kernels share them,
        #: and llvmlite formats each once)
        self.expr_consts: dict[Any, ir.Constant] = {}
        #: what an emitted helper function depends on -> that function, so that equal helpers (the piece
        #: function of every layer's product, `gemm.gemm_piece_fn`) are emitted and compiled once
        self.emitted: dict[tuple, ir.Function] = {}
        #: a plain entry's pool job contexts (`codegen.llvm.pieces.ContextTable`) and node -> its context field
        #: (`pieces.Field`); None elsewhere (contexts are stored field by field, from `ptr_of` values)
        self.context_table: Any = None
        self.field_of: Callable[[Any], Any] | None = None
        self.indirect_math = False
        self._math_ptrs: dict[str, ir.Value] = {}  # libm name -> its pointer loaded in `_math_ptrs_of`'s block
        self._math_ptrs_of: ir.IRBuilder | None = None

    # -- declarations --

    def function(self, name: str, ret: ir.Type, args: list[ir.Type], attrs: tuple = ("nounwind",)) -> ir.Function:
        f = self._fns.get(name)
        if f is None:
            f = self.module.globals.get(name)
            if f is None:
                f = ir.Function(self.module, ir.FunctionType(ret, args), name)
                for a in attrs:
                    f.attributes.add(a)
            self._fns[name] = f
        return f

    def intrinsic(self, name: str, ty: ir.Type, nargs: int = 1) -> ir.Function:
        suffix = {F64: "f64", F32: "f32"}.get(ty) if ty in (F64, F32) else f"i{ty.width}"
        return self.function(f"llvm.{name}.{suffix}", ty, [ty] * nargs, attrs=())

    def math_pointer(self, libm: str, ty: ir.Type, nargs: int) -> ir.Value | None:
        """libm function `libm` (of nargs arguments of type ty) as a pointer loaded in this function's
        entry block (`indirect_math`), or None when there is none (`alloca_builder` unset or another
        function's).

        The pointer is an internal global initialized to the function, loaded once per kernel.
        """
        ab = self.alloca_builder
        if ab is None or self.builder is None or ab.block.parent is not self.builder.block.parent:
            return None
        if self._math_ptrs_of is not ab:  # a new function: its own loads
            self._math_ptrs_of = ab
            self._math_ptrs = {}
        p = self._math_ptrs.get(libm)
        if p is None:
            g = self.module.globals.get(f"sg.fp.{libm}")
            if g is None:
                fn = self.function(libm, ty, [ty] * nargs, attrs=("nounwind",))
                g = ir.GlobalVariable(self.module, PTR, f"sg.fp.{libm}")
                g.linkage = "internal"
                g.initializer = fn
            p = self._math_ptrs[libm] = ab.load(g, typ=PTR, align=8)
        return p

    # -- constants and casts --

    @staticmethod
    def const(value: Any, dtype: np.dtype) -> ir.Constant:
        dtype = np.dtype(dtype)
        t = ll_type(dtype)
        if dtype.kind == "f":
            return ir.Constant(t, float(value))
        if dtype.kind == "b":
            return ir.Constant(I1, int(bool(value)))
        v = int(value)
        if v < 0:
            v &= (1 << t.width) - 1
        return ir.Constant(t, v)

    def cast(self, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
        """NumPy `astype` semantics (float->int saturates; NaN->int gives 0; see docs)."""
        b = self.builder
        src, dst = np.dtype(src), np.dtype(dst)
        if src == dst:
            return v
        ts, td = ll_type(src), ll_type(dst)
        if dst.kind == "b":
            if src.kind == "f":
                return b.fcmp_unordered("!=", v, ir.Constant(ts, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(ts, 0))
        if src.kind == "b":
            return b.uitofp(v, td) if dst.kind == "f" else b.zext(v, td)
        if src.kind == "f" and dst.kind == "f":
            return b.fpext(v, td) if dst.itemsize > src.itemsize else b.fptrunc(v, td)
        if src.kind == "f":
            # through int64 (as C casts do on x86 for narrower ints), saturating instead of UB
            sat = self.function(f"llvm.fptosi.sat.i64.{'f64' if ts == F64 else 'f32'}", I64, [ts], attrs=())
            r = b.call(sat, [v])
            if dst.kind == "u" and dst.itemsize == 8:
                usat = self.function(f"llvm.fptoui.sat.i64.{'f64' if ts == F64 else 'f32'}", I64, [ts], attrs=())
                big = b.fcmp_ordered(">=", v, ir.Constant(ts, 2.0 ** 63))
                r = b.select(big, b.call(usat, [v]), r)
            return r if td.width == 64 else b.trunc(r, td)
        if dst.kind == "f":
            return b.sitofp(v, td) if is_signed(src) else b.uitofp(v, td)
        if td.width < ts.width:
            return b.trunc(v, td)
        if td.width > ts.width:
            return b.sext(v, td) if is_signed(src) else b.zext(v, td)
        return v

    def to_bool(self, v: ir.Value, dtype: np.dtype) -> ir.Value:
        return self.cast(v, dtype, np.dtype(bool))

    def alloca(self, ty: ir.Type, name: str = "") -> ir.Value:
        return opaque_alloca(self.alloca_builder, ty, name)


def opaque_alloca(b: ir.IRBuilder, ty: ir.Type, name: str = "") -> ir.Value:
    """An alloca whose value is an opaque `ptr` (llvmlite types allocas as typed pointers)."""
    a = b.alloca(ty, name=name)
    a.type = PTR
    return a


def for_range(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None], name: str = "i") -> None:
    """Emit `for (i = lo; i < hi; ++i) body(i)` as a guarded, rotated loop."""
    fn = b.function
    pre = b.block
    loop = fn.append_basic_block(f"{name}.loop")
    after = fn.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_signed("<", lo, hi), loop, after)
    b.position_at_end(loop)
    i = b.phi(I64, name=name)
    i.add_incoming(lo, pre)
    body(i)
    nxt = b.add(i, ir.Constant(I64, 1), name=f"{name}.next", flags=("nuw", "nsw"))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, hi), loop, after)
    b.position_at_end(after)
