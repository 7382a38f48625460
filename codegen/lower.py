"""Lowering: kernels (codegen.fuse) to LLVM IR with llvmlite's typed IR builder.

One emitter per op, keyed by op name (`EMITTERS` for elementwise ops,
`REDUCERS` for reductions); a test fails when an elementwise or reduction op
of `symgraph.ops.OPS` has none. Emitters build scalar code for one loop
iteration; LLVM's loop vectorizer turns the loops into packed SIMD code.

Conventions of the generated code:
- addressing by GEP only (no ptrtoint/inttoptr);
- every kernel buffer parameter is `noalias` (distinct buffers never overlap;
  a donated input and the output written into it are one parameter);
- no fast-math flags on elementwise arithmetic, so NaN, inf and -0.0 behave
  as in NumPy; reductions carry `reassoc` (and only that) so they vectorize;
- transcendentals go through `math_call`, one function: `codegen.vmath`
  (vectorizable) when it is available, LLVM intrinsics / libm otherwise.

References:
    SplitMix64: G. L. Steele, D. Lea, C. H. Flood, "Fast splittable
    pseudorandom number generators", OOPSLA 2014.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from symgraph.ops import OPS
from symgraph.passes.cost import matmul_flops

from .fuse import Aff, Expr, Kernel, Task, c_strides, task_affs

__all__ = ["EMITTERS", "REDUCERS", "LoweringContext", "ll_type", "mem_type", "math_call", "has_emitter",
           "lower_loop_kernel", "emit_gemm", "gemm_pieces"]

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

try:  # vectorizable math, written by its own module; optional
    from . import vmath as _vmath  # type: ignore[attr-defined]
except Exception:  # noqa: BLE001  (absent or broken: fall back to intrinsics)
    _vmath = None


def vmath_module() -> Any:
    """The codegen.vmath module when it imported, else None."""
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
    from symgraph.errors import DTypeError

    raise DTypeError(f"codegen: dtype {dtype} is not supported by the LLVM backend (float32/64, ints, bool)")


def mem_type(dtype: np.dtype) -> ir.Type:
    """The in-memory type of a numpy dtype (bool is one byte)."""
    dtype = np.dtype(dtype)
    return I8 if dtype.kind == "b" else ll_type(dtype)


def _is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def _signed(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "i"


class LoweringContext:
    """Module-level state shared by emitters: the module, declared functions, options.

    Attributes:
        module: the llvmlite ir.Module being built.
        builder: the current IRBuilder (set by the kernel emitter).
        in_loop: whether emission is inside a loop body (vector math pays off).
        use_vmath: route transcendentals to codegen.vmath when available.
    """

    def __init__(self, module: ir.Module, use_vmath: bool = True):
        self.module = module
        self.builder: ir.IRBuilder | None = None
        self.in_loop = False
        self.use_vmath = use_vmath and _vmath is not None
        self._fns: dict[str, ir.Function] = {}
        self.alloca_builder: ir.IRBuilder | None = None

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
            return b.sitofp(v, td) if _signed(src) else b.uitofp(v, td)
        if td.width < ts.width:
            return b.trunc(v, td)
        if td.width > ts.width:
            return b.sext(v, td) if _signed(src) else b.zext(v, td)
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


# ----- transcendentals: the one switch between vmath and intrinsics -----

def math_call(cx: LoweringContext, name: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value:
    """Emit transcendental `name` (an op whose record has `math`) on scalar args of dtype (float32/float64).

    Uses `codegen.vmath.emit` (vectorizable: libmvec variants or inline
    polynomials) inside loops when that module is available; otherwise the
    record's LLVM intrinsic (llvm.exp.f64, ...) or libm function, which are
    correct but scalar.
    """
    if cx.use_vmath and cx.in_loop:
        return _vmath.emit(cx.builder, name, list(args))
    b = cx.builder
    ty = args[0].type
    op = OPS.get(name)
    spec = op.math if op is not None else None
    if spec is not None and spec.intrinsic:
        return b.call(cx.intrinsic(spec.intrinsic, ty, len(args)), list(args))
    if spec is not None and spec.libm:
        fname = spec.libm + ("f" if ty == F32 else "")
        return b.call(cx.function(fname, ty, [ty] * len(args), attrs=("nounwind", "readnone")), list(args))
    if name == "sigmoid":  # the one composite (MathFn.via)
        # the evaluator's formula: e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e)
        (x,) = args
        one = ir.Constant(ty, 1.0)
        ax = b.call(cx.intrinsic("fabs", ty), [x])
        e = math_call(cx, "exp", [b.fneg(ax)], dtype)
        d = b.fadd(one, e)
        return b.select(b.fcmp_ordered(">=", x, ir.Constant(ty, 0.0)), b.fdiv(one, d), b.fdiv(e, d))
    raise KeyError(f"math_call: unknown function {name!r}")


# ----- elementwise emitters: fn(cx, expr, args) -> value -----

Emitter = Callable[[LoweringContext, Expr, list], ir.Value]
EMITTERS: dict[str, Emitter] = {}


def emitter(*names: str) -> Callable[[Emitter], Emitter]:
    def deco(fn: Emitter) -> Emitter:
        for n in names:
            EMITTERS[n] = fn
        return fn

    return deco


def _arg_dtype(e: Expr, i: int = 0) -> np.dtype:
    return e.args[i].dtype


def _float_or_int(fop: str, iop: str) -> Emitter:
    def emit(cx: LoweringContext, e: Expr, a: list) -> ir.Value:
        b = cx.builder
        if _is_float(e.dtype):
            return getattr(b, fop)(a[0], a[1])
        if e.dtype.kind == "b":
            # bool arithmetic as NumPy: add = or, mul = and, sub is rejected by numpy
            return b.or_(a[0], a[1]) if iop == "add" else b.and_(a[0], a[1]) if iop == "mul" else b.xor(a[0], a[1])
        return getattr(b, iop)(a[0], a[1])

    return emit


EMITTERS["add"] = _float_or_int("fadd", "add")
EMITTERS["sub"] = _float_or_int("fsub", "sub")
EMITTERS["mul"] = _float_or_int("fmul", "mul")


@emitter("div")
def _div(cx, e, a):
    return cx.builder.fdiv(a[0], a[1])


@emitter("neg")
def _neg(cx, e, a):
    b = cx.builder
    if _is_float(e.dtype):
        return b.fneg(a[0])
    return b.neg(a[0])


@emitter("copy", "stop_gradient", "checkpoint_name", "remat_begin", "remat_end")
def _identity(cx, e, a):
    """Identities (markers for transformations and checkpointing); fusion removes them first."""
    return a[0]


@emitter("cast")
def _cast(cx, e, a):
    return cx.cast(a[0], _arg_dtype(e), e.dtype)


@emitter("abs")
def _abs(cx, e, a):
    b = cx.builder
    if _is_float(e.dtype):
        return b.call(cx.intrinsic("fabs", a[0].type), [a[0]])
    if e.dtype.kind == "u" or e.dtype.kind == "b":
        return a[0]
    return b.select(b.icmp_signed("<", a[0], ir.Constant(a[0].type, 0)), b.neg(a[0]), a[0])


@emitter("sign")
def _sign(cx, e, a):
    b = cx.builder
    x = a[0]
    t = x.type
    if _is_float(e.dtype):
        # x > 0 -> 1; x < 0 -> -1; x == 0 -> +0; NaN -> NaN  (numpy)
        one, mone, zero = ir.Constant(t, 1.0), ir.Constant(t, -1.0), ir.Constant(t, 0.0)
        r = b.select(b.fcmp_ordered("==", x, zero), zero, x)
        r = b.select(b.fcmp_ordered("<", x, zero), mone, r)
        return b.select(b.fcmp_ordered(">", x, zero), one, r)
    if e.dtype.kind == "b":
        return x
    zero = ir.Constant(t, 0)
    if e.dtype.kind == "u":
        return b.zext(b.icmp_unsigned("!=", x, zero), t)
    pos = b.zext(b.icmp_signed(">", x, zero), t)
    neg = b.zext(b.icmp_signed("<", x, zero), t)
    return b.sub(pos, neg)


@emitter("floor")
def _floor(cx, e, a):
    if _is_float(e.dtype):
        return cx.builder.call(cx.intrinsic("floor", a[0].type), [a[0]])
    return a[0]


@emitter("isnan")
def _isnan(cx, e, a):
    if _is_float(_arg_dtype(e)):
        return cx.builder.fcmp_unordered("uno", a[0], a[0])
    return ir.Constant(I1, 0)


@emitter("logical_not")
def _logical_not(cx, e, a):
    return cx.builder.not_(cx.to_bool(a[0], _arg_dtype(e)))


@emitter("logical_and")
def _logical_and(cx, e, a):
    d = _arg_dtype(e)
    return cx.builder.and_(cx.to_bool(a[0], d), cx.to_bool(a[1], d))


@emitter("logical_or")
def _logical_or(cx, e, a):
    d = _arg_dtype(e)
    return cx.builder.or_(cx.to_bool(a[0], d), cx.to_bool(a[1], d))


def _compare(op: str) -> Emitter:
    def emit(cx: LoweringContext, e: Expr, a: list) -> ir.Value:
        b = cx.builder
        d = _arg_dtype(e)
        if _is_float(d):
            # ordered comparisons are False with NaN; != is unordered (True with NaN), as in NumPy
            return b.fcmp_unordered(op, a[0], a[1]) if op == "!=" else b.fcmp_ordered(op, a[0], a[1])
        if _signed(d):
            return b.icmp_signed(op, a[0], a[1])
        return b.icmp_unsigned(op, a[0], a[1])

    return emit


for _name, _op in [("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!=")]:
    EMITTERS[_name] = _compare(_op)


def _select_extreme(greater: bool) -> Emitter:
    def emit(cx: LoweringContext, e: Expr, a: list) -> ir.Value:
        # NumPy: maximum(a, b) = (a > b or isnan(a)) ? a : b  (ties give b; NaN propagates)
        b = cx.builder
        x, y = a
        op = ">" if greater else "<"
        if _is_float(e.dtype):
            c = b.or_(b.fcmp_ordered(op, x, y), b.fcmp_unordered("uno", x, x))
        elif _signed(e.dtype):
            c = b.icmp_signed(op, x, y)
        else:
            c = b.icmp_unsigned(op, x, y)
        return b.select(c, x, y)

    return emit


EMITTERS["maximum"] = _select_extreme(True)
EMITTERS["minimum"] = _select_extreme(False)


@emitter("where")
def _where(cx, e, a):
    return cx.builder.select(a[0], a[1], a[2])


@emitter("fmod")
def _fmod(cx, e, a):
    """LLVM's frem: C fmod semantics (exact remainder, sign of the dividend; NaN for b = 0)."""
    return cx.builder.frem(a[0], a[1])


@emitter("muladd")
def _muladd(cx, e, a):
    """a*b + c as fmul then fadd, without contraction flags: two roundings, as the evaluator."""
    b = cx.builder
    return b.fadd(b.fmul(a[0], a[1]), a[2])


def _math(name: str) -> Emitter:
    def emit(cx: LoweringContext, e: Expr, a: list) -> ir.Value:
        return math_call(cx, name, a, e.dtype)

    return emit


@emitter("pow")
def _pow(cx, e, a):
    if _is_float(e.dtype):
        return math_call(cx, "pow", a, e.dtype)
    return _int_pow(cx, a[0], a[1], e.dtype)


# Every other transcendental op (its record has `math`) lowers through `math_call`.
for _op in OPS.values():
    if _op.math is not None and _op.name not in EMITTERS:
        EMITTERS[_op.name] = _math(_op.name)


def _int_pow(cx: LoweringContext, x: ir.Value, y: ir.Value, dtype: np.dtype) -> ir.Value:
    """Integer power by squaring (negative exponents give 0, except bases 1 and -1)."""
    b = cx.builder
    t = x.type
    if dtype.kind == "b":
        return b.or_(x, b.not_(y))  # x**y for bools: 1 if y == 0 else x
    fn = b.function
    pre = b.block
    head = fn.append_basic_block("ipow.head")
    body = fn.append_basic_block("ipow.body")
    done = fn.append_basic_block("ipow.done")
    b.branch(head)
    b.position_at_end(head)
    acc = b.phi(t)
    base = b.phi(t)
    ex = b.phi(t)
    acc.add_incoming(ir.Constant(t, 1), pre)
    base.add_incoming(x, pre)
    zero = ir.Constant(t, 0)
    neg_exp = b.icmp_signed("<", y, zero) if _signed(dtype) else ir.Constant(I1, 0)
    ex.add_incoming(b.select(neg_exp, zero, y) if _signed(dtype) else y, pre)
    b.cbranch(b.icmp_unsigned("!=", ex, zero), body, done)
    b.position_at_end(body)
    bit = b.trunc(ex, I1)
    acc2 = b.select(bit, b.mul(acc, base), acc)
    base2 = b.mul(base, base)
    ex2 = b.lshr(ex, ir.Constant(t, 1))
    acc.add_incoming(acc2, body)
    base.add_incoming(base2, body)
    ex.add_incoming(ex2, body)
    b.branch(head)
    b.position_at_end(done)
    if _signed(dtype):
        # negative exponent: 1 for x == 1, +-1 for x == -1, else 0
        one = ir.Constant(t, 1)
        mone = ir.Constant(t, -1)
        odd = b.trunc(y, I1)
        negres = b.select(b.icmp_signed("==", x, one), one,
                          b.select(b.icmp_signed("==", x, mone), b.select(odd, mone, one), zero))
        return b.select(neg_exp, negres, acc)
    return acc


# splitmix64 finalizer constants (Steele, Lea & Flood 2014), as symgraph.ops.elementwise
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _splitmix64(b: ir.IRBuilder, z: ir.Value) -> ir.Value:
    z = b.mul(b.xor(z, b.lshr(z, ir.Constant(I64, 30))), ir.Constant(I64, _M1))
    z = b.mul(b.xor(z, b.lshr(z, ir.Constant(I64, 27))), ir.Constant(I64, _M2))
    return b.xor(z, b.lshr(z, ir.Constant(I64, 31)))


@emitter("random_uniform")
def _random_uniform(cx, e, a):
    """u_i = top 53 bits of splitmix64(splitmix64(key ^ salt*golden) + i*golden) / 2**53 (bitwise as NumPy)."""
    b = cx.builder
    key, i = a
    kd = _arg_dtype(e, 0)
    k = cx.cast(key, kd, np.dtype(np.int64)) if np.dtype(kd).itemsize != 8 else key
    salt = int(dict(e.attrs)["salt"])
    mix = (salt * _GOLDEN) & ((1 << 64) - 1)
    base = _splitmix64(b, b.xor(k, ir.Constant(I64, mix)))
    bits = _splitmix64(b, b.add(base, b.mul(i, ir.Constant(I64, _GOLDEN))))
    top = b.lshr(bits, ir.Constant(I64, 11))
    u = b.fmul(b.uitofp(top, F64), ir.Constant(F64, 1.0 / 9007199254740992.0))
    return cx.cast(u, np.dtype(np.float64), e.dtype)


# ----- internal index emitters -----


@emitter("_idiv")
def _idiv(cx, e, a):
    return cx.builder.udiv(a[0], ir.Constant(I64, e.attrs[0]))


@emitter("_imod")
def _imod(cx, e, a):
    return cx.builder.urem(a[0], ir.Constant(I64, e.attrs[0]))


@emitter("_gather_index")
def _gather_index(cx, e, a):
    """Wrap a negative index once, then clamp to [0, n-1] (the evaluator's rule)."""
    b = cx.builder
    (n,) = e.attrs
    d = _arg_dtype(e)
    i = cx.cast(a[0], d, np.dtype(np.int64)) if d != np.int64 else a[0]
    nn = ir.Constant(I64, n)
    zero = ir.Constant(I64, 0)
    i = b.select(b.icmp_signed("<", i, zero), b.add(i, nn), i)
    i = b.select(b.icmp_signed("<", i, zero), zero, i)
    hi = ir.Constant(I64, max(n - 1, 0))
    return b.select(b.icmp_signed(">", i, hi), hi, i)


@emitter("_unslice_cond")
def _unslice_cond(cx, e, a):
    """Whether output index i is one of the slice's positions."""
    b = cx.builder
    s, stop, st = e.attrs
    i = a[0]
    c = lambda v: ir.Constant(I64, v)  # noqa: E731
    if st > 0:
        ok = b.and_(b.icmp_signed(">=", i, c(s)), b.icmp_signed("<", i, c(stop)))
        if st != 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(b.sub(i, c(s)), c(st)), c(0)))
        return ok
    ok = b.and_(b.icmp_signed("<=", i, c(s)), b.icmp_signed(">", i, c(stop)))
    if st != -1:
        ok = b.and_(ok, b.icmp_signed("==", b.srem(b.sub(c(s), i), c(-st)), c(0)))
    return ok


@emitter("_unslice_src")
def _unslice_src(cx, e, a):
    """The operand index for output index i, clamped into [0, n-1] (masked by _unslice_cond)."""
    b = cx.builder
    s, st, n = e.attrs
    i = a[0]
    c = lambda v: ir.Constant(I64, v)  # noqa: E731
    j = b.sdiv(b.sub(i, c(s)), c(st)) if st > 0 else b.sdiv(b.sub(c(s), i), c(-st))
    j = b.select(b.icmp_signed("<", j, c(0)), c(0), j)
    return b.select(b.icmp_signed(">", j, c(max(n - 1, 0))), c(max(n - 1, 0)), j)


def has_emitter(op_name: str, kind: str) -> bool:
    """Whether an op of the given kind can be lowered (used by the completeness test)."""
    if kind == "elementwise":
        return op_name in EMITTERS
    if kind == "reduction":
        return op_name in REDUCERS
    return True


# ----- reductions: accumulator dtype, identity, combine -----


class Reducer:
    """How a reduction accumulates: acc_dtype(out dtype), identity, combine(cx, acc, v, dtype, ordered=False).

    `combine` marks float sums and products `reassoc` so that loops of them
    vectorize; ``ordered=True`` leaves the association as written (the
    combination of per-chunk partial results, which must not depend on how
    LLVM rewrites it).
    """

    def __init__(self, acc_dtype: Callable, identity: Callable, combine: Callable, order_matters: bool = False):
        self.acc_dtype = acc_dtype
        self.identity = identity
        self.combine = combine
        # float results depend on the association (sum, prod): they accumulate in lanes (`LoopPlan.lanes`)
        self.order_matters = order_matters


_REASSOC = ("reassoc",)


def _sum_combine(cx, acc, v, dtype, ordered=False):
    b = cx.builder
    if _is_float(dtype):
        return b.fadd(acc, v, flags=() if ordered else _REASSOC)
    if dtype.kind == "b":
        return b.or_(acc, v)
    return b.add(acc, v)


def _prod_combine(cx, acc, v, dtype, ordered=False):
    b = cx.builder
    if _is_float(dtype):
        return b.fmul(acc, v, flags=() if ordered else _REASSOC)
    if dtype.kind == "b":
        return b.and_(acc, v)
    return b.mul(acc, v)


def _extreme_combine(greater: bool):
    def combine(cx, acc, v, dtype, ordered=False):  # exact in any order: `ordered` changes nothing
        b = cx.builder
        if _is_float(dtype):
            # NaN-propagating max/min (llvm.maximum), vectorizable as a reduction
            return b.call(cx.intrinsic("maximum" if greater else "minimum", acc.type, 2), [acc, v])
        if dtype.kind == "b":
            return b.or_(acc, v) if greater else b.and_(acc, v)
        name = ("s" if _signed(dtype) else "u") + ("max" if greater else "min")
        return b.call(cx.intrinsic(name, acc.type, 2), [acc, v])

    return combine


def _extreme_identity(greater: bool):
    def ident(dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            return -math.inf if greater else math.inf
        if dtype.kind == "b":
            return not greater
        info = np.iinfo(dtype)
        return info.min if greater else info.max

    return ident


def _sum_acc(dtype):
    # float32 sums accumulate in float64 (more accurate than NumPy's pairwise float32 sum)
    dtype = np.dtype(dtype)
    return np.dtype(np.float64) if dtype == np.float32 else dtype


REDUCERS: dict[str, Reducer] = {
    "sum": Reducer(_sum_acc, lambda d: 0, _sum_combine, order_matters=True),
    "prod": Reducer(lambda d: np.dtype(d), lambda d: 1, _prod_combine, order_matters=True),
    "max": Reducer(lambda d: np.dtype(d), _extreme_identity(True), _extreme_combine(True)),
    "min": Reducer(lambda d: np.dtype(d), _extreme_identity(False), _extreme_combine(False)),
    # argmax is lowered by the loop emitter (a value and an index accumulator)
    "argmax": Reducer(lambda d: np.dtype(np.int64), lambda d: 0, None),
}


# ----- loop nests -----


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


def _order_matters(t: Task) -> bool:
    """Whether reduce task `t`'s result depends on the association (a float sum or product)."""
    r = REDUCERS.get(t.red_op) if t.kind == "reduce" else None
    return r is not None and r.order_matters and _is_float(r.acc_dtype(t.node.dtype))


#: Lanes of a float sum or product accumulated in registers (`LoopPlan.lanes`): one AVX-512 vector of
#: float64 accumulators (float32 sums accumulate in float64). Row reductions pay per row for the lanes'
#: start and their pairwise tree: 8 lanes measured faster than 16 or 32 on rows of 64-128 elements
#: (a 1024x128 float32 row sum: 14.3, 17.3 and 19.7 us), and no slower on W1's long sum.
REDUCTION_LANES = 8


class LoopPlan:
    """Loop order and axis merging of a loop kernel.

    Attributes:
        groups: loops from outer to inner; each a list of domain axes merged
            into one loop (row-major within the group).
        register: reductions accumulate in registers (reduced loops inner).
        parallel: the outer loop is split across threads.
        partials: full reduction split across threads (per-thread partial results).
        row_partials: a memory-mode reduction over the outer axes that keeps
            the innermost one (column sums such as a bias gradient,
            ``sum(x, 0)``) split across threads over its outer (reduced)
            loop: each thread accumulates its rows into its own vectors of
            partial results (the `partial` argument: per reduction, the
            inner trip count of 8-byte slots), which the caller combines.
        lanes: 1, or `REDUCTION_LANES` when float sums or products accumulate
            in registers along the innermost (reduced) loop: element j of
            that loop is added to lane j mod lanes, each lane in order, and
            the lanes are combined by a fixed pairwise tree (no `reassoc`:
            the association is written in the IR, whatever LLVM vectorizes).
        chunks: None, or the fixed ranges of the outer loop that a reduction
            kernel always runs as, one call each, whatever the thread count
            (`program._decide_chunks`); with `partials` or `row_partials`
            each range has its own partial results, combined in range order.
    """

    def __init__(self, kernel: Kernel):
        dom = kernel.domain
        red = kernel.red_axes
        dims = [i for i, d in enumerate(dom) if d > 1]
        self.has_red = any(t.kind in ("reduce", "argmax") for t in kernel.tasks)
        has_argmax = any(t.kind == "argmax" for t in kernel.tasks)
        self.register = self.has_red and (has_argmax or (bool(dims) and dims[-1] in red) or not dims)
        if self.register:
            order = [d for d in dims if d not in red] + [d for d in dims if d in red]
        else:
            order = dims
        # float sums and products in registers accumulate in REDUCTION_LANES lanes (`KernelEmitter`)
        self.lanes = REDUCTION_LANES if self.register and bool(dims) and dims[-1] in red and any(
            _order_matters(t) for t in kernel.tasks) else 1
        affs = [a for t in kernel.tasks for a in task_affs(t)]
        var_of = {i: Expr.var(i, dom[i]) for i in dims}
        groups: list[list[int]] = []
        for ax in order:
            if groups:
                p = groups[-1][-1]
                # Reduced axes merge only when the inner one fills whole lane rounds, so that an element's
                # lane (its innermost index mod `lanes`) and each lane's order are those of the unmerged
                # nest: the association of a sum does not depend on which other tasks share the kernel.
                lanes_ok = ax not in red or dom[ax] % self.lanes == 0
                if (p in red) == (ax in red) and lanes_ok and all(a.coeff(var_of[p]) == a.coeff(var_of[ax]) * dom[ax]
                                                                 for a in affs):
                    groups[-1].append(ax)
                    continue
            groups.append([ax])
        self.groups = groups
        self.extents = [int(np.prod([dom[a] for a in g], dtype=np.int64)) for g in groups]
        self.n_kept = sum(1 for g in groups if g[0] not in red)
        self.parallel = False
        self.partials = False
        self.row_partials = False
        self.chunks: list[tuple[int, int]] | None = None


class KernelEmitter:
    """Emits one loop kernel as `void kern(ptr noalias bufs..., i64 lo, i64 hi, ptr partial)`."""

    def __init__(self, cx: LoweringContext, kernel: Kernel, index: int, buffer_of: Callable[[Any], Any],
                 plan: LoopPlan):
        self.cx = cx
        self.kernel = kernel
        self.plan = plan
        self.buffer_of = buffer_of
        # distinct buffers touched: loads and stores
        bufs: list = []
        seen = set()
        for t in kernel.tasks:
            for e in t.loads:
                k = buffer_of(e.attrs[0])
                if k not in seen:
                    seen.add(k)
                    bufs.append(k)
            k = buffer_of(t.node)
            if k not in seen:
                seen.add(k)
                bufs.append(k)
        self.buffers = bufs
        fnty = ir.FunctionType(VOID, [PTR] * len(bufs) + [I64, I64, PTR])
        self.fn = ir.Function(cx.module, fnty, f"kern_{index}")
        self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        if cx.use_vmath and hasattr(_vmath, "apply_function_attributes"):
            _vmath.apply_function_attributes(self.fn)  # prefer-vector-width=512 on AVX-512 hosts
        for a in self.fn.args[:len(bufs)]:
            a.add_attribute("noalias")
        self.fn.args[-1].add_attribute("noalias")
        self.ptr = {k: a for k, a in zip(bufs, self.fn.args)}
        self.lo, self.hi, self.partial = self.fn.args[-3:]
        self.loopvals: dict[int, ir.Value] = {}  # group index -> loop value
        self.lane: ir.Value | None = None  # the lane of the element being emitted (`_lane_loops`)
        self.var_group: dict[int, tuple[int, int]] = {}  # axis -> (group, multiplier within group)
        dom = kernel.domain
        for gi, g in enumerate(plan.groups):
            mult = 1
            for ax in reversed(g):
                self.var_group[ax] = (gi, mult)
                mult *= dom[ax]

    # -- expressions --

    def aff(self, a: Aff, memo: dict) -> ir.Value:
        b = self.cx.builder
        total: ir.Value | None = None
        per_group: dict[int, int] = {}
        dyn = []
        for at, c in a.terms:
            if at.op == "var" and at.attrs[0] in self.var_group:
                gi, mult = self.var_group[at.attrs[0]]
                # within a merged group the coefficients are proportional (checked by LoopPlan)
                cg = c // mult
                if gi in per_group and per_group[gi] != cg:
                    raise AssertionError("inconsistent merged loop coefficients")
                per_group[gi] = cg
            else:
                dyn.append((at, c))

        def addterm(v: ir.Value) -> None:
            nonlocal total
            total = v if total is None else b.add(total, v, flags=("nsw",))

        for gi, cg in sorted(per_group.items()):
            v = self.loopvals[gi]
            addterm(v if cg == 1 else b.mul(v, ir.Constant(I64, cg), flags=("nsw",)))
        for at, c in dyn:
            v = self.expr(at, memo)
            addterm(v if c == 1 else b.mul(v, ir.Constant(I64, c), flags=("nsw",)))
        if a.const or total is None:
            addterm(ir.Constant(I64, a.const))
        return total

    def var_value(self, axis: int, memo: dict) -> ir.Value:
        gi, mult = self.var_group[axis]
        b = self.cx.builder
        v = self.loopvals[gi]
        if mult > 1:
            v = b.udiv(v, ir.Constant(I64, mult))
        if len(self.plan.groups[gi]) > 1 and self.plan.groups[gi][0] != axis:
            v = b.urem(v, ir.Constant(I64, self.kernel.domain[axis]))
        return v

    def expr(self, e: Expr, memo: dict) -> ir.Value:
        v = memo.get(e)
        if v is not None:
            return v
        # iterative post-order over the DAG (long fused chains must not recurse)
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:
            x, ready = stack.pop()
            if x in memo:
                continue
            deps = [a for a in x.args if isinstance(a, Expr)]
            for a in x.args:
                if isinstance(a, Aff):
                    deps.extend(a.atoms())
            if not ready:
                stack.append((x, True))
                for a in x.args:
                    if isinstance(a, Aff):  # loop variables inside affine forms are read directly
                        deps = [d for d in deps if not (d.op == "var" and d.attrs[0] in self.var_group)
                                or any(d is e for e in x.args)]
                for d in deps:
                    if d not in memo:
                        stack.append((d, False))
                continue
            memo[x] = self._emit_one(x, memo)
        return memo[e]

    def _emit_one(self, e: Expr, memo: dict) -> ir.Value:
        cx = self.cx
        b = cx.builder
        op = e.op
        if op == "var":
            axis = e.attrs[0]
            if axis in self.var_group:
                return self.var_value(axis, memo)
            return ir.Constant(I64, 0)
        if op == "const":
            return cx.const(e.const_value(), e.dtype)
        if op == "index":
            return self.aff(e.args[0], memo)
        if op == "load":
            node = e.attrs[0]
            sub = self.substitutes.get((node, e.args[0])) if self.substitutes else None
            if sub is not None:
                return self.expr(sub, memo)
            ptr = self.ptr[self.buffer_of(node)]
            mt = mem_type(e.dtype)
            p = b.gep(ptr, [self.aff(e.args[0], memo)], inbounds=True, source_etype=mt)
            v = b.load(p, typ=mt, align=mt.width // 8 if isinstance(mt, ir.IntType) else e.dtype.itemsize)
            if e.dtype.kind == "b":
                v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
            return v
        fn = EMITTERS.get(op)
        if fn is None:
            from symgraph.errors import UnsupportedOpError

            raise UnsupportedOpError(f"codegen: no emitter for op {op!r}")
        args = [memo[a] for a in e.args]
        return fn(cx, e, args)

    def store(self, node: Any, off: Aff, value: ir.Value, dtype: np.dtype, memo: dict) -> None:
        b = self.cx.builder
        mt = mem_type(dtype)
        p = b.gep(self.ptr[self.buffer_of(node)], [self.aff(off, memo)], inbounds=True, source_etype=mt)
        if dtype.kind == "b":
            value = b.zext(value, I8)
        b.store(value, p, align=dtype.itemsize)

    # -- the kernel --

    def emit(self) -> ir.Function:
        cx = self.cx
        entry = self.fn.append_basic_block("entry")
        cx.alloca_builder = ir.IRBuilder(entry)
        body_start = self.fn.append_basic_block("start")
        b = ir.IRBuilder(body_start)
        cx.builder = b
        k = self.kernel
        plan = self.plan
        # values stored by this kernel, reused when another task reads them at the same index
        self.substitutes = {}
        for t in k.tasks:
            if t.kind == "store" and not t.pieced:
                self.substitutes[(t.node, t.offset)] = t.value
        red_tasks = [t for t in k.tasks if t.kind in ("reduce", "argmax")]
        self.acc: dict[int, tuple] = {}
        # row_partials: memory-mode reductions accumulate into this thread's partial vectors
        self.red_base: dict[int, ir.Value] = {}
        if plan.row_partials:
            inner = plan.extents[-1]
            for ri, t in enumerate(t for t in k.tasks if t.kind == "reduce"):
                self.red_base[id(t)] = b.gep(self.partial, [ir.Constant(I64, ri * inner * 8)], source_etype=I8)
        # memory-mode reductions and scatters: initialize their output buffers first
        for t in k.tasks:
            if t.kind == "reduce" and not plan.register:
                self._fill(t.node, REDUCERS[t.red_op].identity(t.node.dtype), self.red_base.get(id(t)))
            elif t.kind == "scatter":
                self._fill(t.node, 0)
        groups = plan.groups
        n_kept = plan.n_kept if plan.register else len(groups)
        if k.size == 0:
            # empty domain: reductions give their identity, scatters zeros
            for t in k.tasks:
                if t.kind == "reduce" and plan.register:
                    self._fill(t.node, REDUCERS[t.red_op].identity(t.node.dtype))
        else:
            self._levels(0, n_kept, red_tasks)
        cx.builder.ret_void()
        cx.alloca_builder.branch(body_start)
        cx.in_loop = False
        return self.fn

    def _levels(self, li: int, n_kept: int, red_tasks: list) -> None:
        """Emit loop level li (and everything inside it)."""
        plan = self.plan
        cx = self.cx
        if plan.register and li == n_kept and red_tasks:
            self._init_accs(red_tasks)
        if li == len(plan.groups):
            cx.in_loop = bool(plan.groups)
            self._body()
        else:
            lo = self.lo if li == 0 else ir.Constant(I64, 0)
            hi = self.hi if li == 0 else ir.Constant(I64, plan.extents[li])

            def inner(i: ir.Value) -> None:
                self.loopvals[li] = i
                self._levels(li + 1, n_kept, red_tasks)

            if plan.lanes > 1 and li == len(plan.groups) - 1:
                self._lane_loops(lo, hi, inner, li)
            else:
                for_range(cx.builder, lo, hi, inner, name=f"l{li}")
        if plan.register and li == n_kept and red_tasks:
            cx.in_loop = False
            self._finish_accs(red_tasks)

    def _lane_loops(self, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None], li: int) -> None:
        """The innermost loop [lo, hi) as rounds of `plan.lanes` elements, element lo + r*W + l in lane l.

        Full rounds first (an inner loop over the lanes, which LLVM vectorizes
        as plain independent updates), then the last partial round; the body
        is emitted for both. Lane l's accumulators see their elements in
        loop order (`_body`, `self.lane`).
        """
        b = self.cx.builder
        W = self.plan.lanes
        w = ir.Constant(I64, W)
        rounds = b.udiv(b.sub(hi, lo), w)
        full_end = b.add(lo, b.mul(rounds, w))

        def one_round(r: ir.Value) -> None:
            base = self.cx.builder.add(lo, self.cx.builder.mul(r, w))

            def lane(ln: ir.Value) -> None:
                self.lane = ln
                body(self.cx.builder.add(base, ln))

            for_range(self.cx.builder, ir.Constant(I64, 0), w, lane, name=f"lane{li}")

        for_range(b, ir.Constant(I64, 0), rounds, one_round, name=f"round{li}")

        def last(ln: ir.Value) -> None:
            self.lane = ln
            body(self.cx.builder.add(full_end, ln))

        for_range(self.cx.builder, ir.Constant(I64, 0), self.cx.builder.sub(hi, full_end), last, name=f"tail{li}")
        self.lane = None

    def _fill(self, node: Any, value: Any, base: ir.Value | None = None) -> None:
        b = self.cx.builder
        mt = mem_type(node.dtype)
        c = self.cx.const(value, node.dtype)
        if node.dtype.kind == "b":
            c = ir.Constant(I8, int(bool(value)))
        ptr = self.ptr[self.buffer_of(node)] if base is None else base

        def body(i: ir.Value) -> None:
            b2 = self.cx.builder
            b2.store(c, b2.gep(ptr, [i], inbounds=True, source_etype=mt), align=node.dtype.itemsize)

        for_range(b, ir.Constant(I64, 0), ir.Constant(I64, node.size), body, name="fill")

    def _init_accs(self, tasks: list[Task]) -> None:
        cx = self.cx
        for t in tasks:
            if t.kind == "argmax":
                vd = t.value.dtype
                best = self.acc.get(id(t), (None, None))[0] or cx.alloca(ll_type(vd), "best")
                idx = self.acc.get(id(t), (None, None))[1] or cx.alloca(I64, "bestidx")
                cx.builder.store(cx.const(_extreme_identity(True)(vd), vd), best)
                cx.builder.store(ir.Constant(I64, 0), idx)
                self.acc[id(t)] = (best, idx)
            else:
                r = REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                if self._in_lanes(t):  # one accumulator per lane
                    W = self.plan.lanes
                    slot = self.acc.get(id(t), (None,))[0] or cx.alloca(ir.ArrayType(ll_type(ad), W), "lanes")
                    for ln in range(W):
                        cx.builder.store(cx.const(r.identity(ad), ad),
                                         cx.builder.gep(slot, [ir.Constant(I64, ln)], source_etype=ll_type(ad)))
                else:
                    slot = self.acc.get(id(t), (None,))[0] or cx.alloca(ll_type(ad), "acc")
                    cx.builder.store(cx.const(r.identity(ad), ad), slot)
                self.acc[id(t)] = (slot,)

    def _in_lanes(self, t: Task) -> bool:
        """Whether reduce task `t` accumulates in lanes (a float sum or product of a `lanes` kernel)."""
        return self.plan.lanes > 1 and _order_matters(t)

    def _finish_accs(self, tasks: list[Task]) -> None:
        cx = self.cx
        b = cx.builder
        memo: dict = {}
        for ri, t in enumerate(tasks):
            if t.kind == "argmax":
                val = b.load(self.acc[id(t)][1], typ=I64)
                od = t.node.dtype
            else:
                r = REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                if self._in_lanes(t):
                    # the lanes combined by a fixed pairwise tree: (l0+l1)+(l2+l3), ...
                    slot = self.acc[id(t)][0]
                    vals = [b.load(b.gep(slot, [ir.Constant(I64, ln)], source_etype=ll_type(ad)), typ=ll_type(ad))
                            for ln in range(self.plan.lanes)]
                    while len(vals) > 1:
                        vals = [r.combine(cx, vals[i], vals[i + 1], ad, ordered=True) for i in range(0, len(vals), 2)]
                    val = vals[0]
                else:
                    val = b.load(self.acc[id(t)][0], typ=ll_type(ad))
                od = t.node.dtype
                if self.plan.partials:
                    # 8-byte slot ri of this thread's partial results
                    p = b.gep(self.partial, [ir.Constant(I64, ri * 8 // ad.itemsize)], source_etype=ll_type(ad))
                    b.store(val, p)
                    continue
                val = cx.cast(val, ad, od)
            self.store(t.node, t.offset, val, od, memo)

    def _body(self) -> None:
        cx = self.cx
        b = cx.builder
        memo: dict = {}
        k = self.kernel
        vals = [self.expr(t.value, memo) for t in k.tasks]
        # all loads happen before any store (donated buffers are updated in place)
        for t, v in zip(k.tasks, vals):
            if t.kind == "store":
                self.store(t.node, t.offset, v, t.node.dtype, memo)
            elif t.kind == "scatter":
                mt = mem_type(t.node.dtype)
                p = b.gep(self.ptr[self.buffer_of(t.node)], [self.aff(t.offset, memo)], inbounds=True,
                          source_etype=mt)
                old = b.load(p, typ=mt)
                if t.node.dtype.kind == "b":
                    new = b.zext(b.or_(b.icmp_unsigned("!=", old, ir.Constant(I8, 0)), v), I8)
                else:
                    new = _sum_combine(cx, old, v, t.node.dtype) if not _is_float(t.node.dtype) \
                        else b.fadd(old, v)
                b.store(new, p)
            elif t.kind == "reduce":
                r = REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                vv = cx.cast(v, t.value.dtype, ad)
                if self.plan.register:
                    slot = self.acc[id(t)][0]
                    if self._in_lanes(t):  # this element's lane, in order
                        slot = b.gep(slot, [self.lane], source_etype=ll_type(ad))
                        b.store(r.combine(cx, b.load(slot, typ=ll_type(ad)), vv, ad, ordered=True), slot)
                    else:
                        b.store(r.combine(cx, b.load(slot, typ=ll_type(ad)), vv, ad), slot)
                else:
                    mt = mem_type(t.node.dtype)
                    base = self.red_base.get(id(t))
                    p = b.gep(self.ptr[self.buffer_of(t.node)] if base is None else base, [self.aff(t.offset, memo)],
                              inbounds=True, source_etype=mt)
                    old = b.load(p, typ=mt)
                    if t.node.dtype.kind == "b":
                        old = b.icmp_unsigned("!=", old, ir.Constant(I8, 0))
                    new = r.combine(cx, cx.cast(old, t.node.dtype, ad), vv, ad)
                    new = cx.cast(new, ad, t.node.dtype)
                    if t.node.dtype.kind == "b":
                        new = b.zext(new, I8)
                    b.store(new, p)
            elif t.kind == "argmax":
                best, bidx = self.acc[id(t)]
                vd = t.value.dtype
                cur = b.load(best, typ=ll_type(vd))
                if _is_float(vd):
                    take = b.or_(b.fcmp_ordered(">", v, cur),
                                 b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", cur, cur)))
                elif _signed(vd):
                    take = b.icmp_signed(">", v, cur)
                else:
                    take = b.icmp_unsigned(">", v, cur)
                (ax,) = tuple(t.red_axes)
                pos = self.var_value(ax, memo) if ax in self.var_group else ir.Constant(I64, 0)
                # the first element always initializes (all -inf / INT_MIN inputs keep index 0)
                b.store(b.select(take, v, cur), best)
                b.store(b.select(take, pos, b.load(bidx, typ=I64)), bidx)


def lower_loop_kernel(cx: LoweringContext, kernel: Kernel, index: int, buffer_of: Callable, plan: LoopPlan
                      ) -> KernelEmitter:
    """Emit kernel `index` as an internal function; returns its emitter (function and buffer list)."""
    ke = KernelEmitter(cx, kernel, index, buffer_of, plan)
    ke.emit()
    return ke


# ----- contractions: BLAS calls -----

CBLAS_ROW_MAJOR = 101
CBLAS_NO_TRANS = 111
CBLAS_TRANS = 112


def emit_gemm(cx: LoweringContext, task: Task, ptr_of: Callable[[Any], ir.Value], blas_names: dict,
              piece: tuple[str, ir.Value, ir.Value] | None = None) -> None:
    """Emit a (batched) matrix product, or one piece of it, as a loop of cblas_?gemm calls (ILP64 ints).

    C[..., m, n] = alpha A[..., m, k] @ B[..., k, n] + beta C with A and B
    strided views (row-major, possibly transposed, with arbitrary batch
    strides); C is a contiguous buffer. alpha and beta come from
    `task.gemm` (default 1 and 0); beta = 1 accumulates a product into a sum
    whose other terms were stored first (see `fuse._Partitioner.plan_accumulation`).

    Args:
        piece: None for the whole product, or (axis, lo, hi): only the rows
            ("m") or columns ("n") numbered [lo, hi) in the batch-major
            flattening of all the batch's rows (columns), i.e. row r of batch
            element i is number i * m + r. lo and hi are i64 values; a piece
            spanning several batch elements makes one call per element.
            Pieces write disjoint parts of C, so they may run concurrently.
            (`gemm_pieces` chooses them; the k == 0 case is never split.)
    """
    b = cx.builder
    node = task.node
    mm = task.gemm.get("mm", node)
    alpha = float(task.gemm.get("alpha", 1.0))
    beta = float(task.gemm.get("beta", 0.0))
    a_in, b_in = mm.inputs
    *batch, m, k = a_in.shape
    n = b_in.shape[-1]
    ty = ll_type(node.dtype)
    mt = ty
    cptr = ptr_of(node)
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta:
            return  # C += 0
        def zero(i: ir.Value) -> None:
            cx.builder.store(ir.Constant(ty, 0.0), cx.builder.gep(cptr, [i], inbounds=True, source_etype=mt))

        for_range(b, ir.Constant(I64, 0), ir.Constant(I64, node.size), zero, name="gz")
        return
    name = blas_names[node.dtype.str]
    fn = cx.function(name, VOID, [I32, I32, I32, I64, I64, I64, ty, PTR, I64, PTR, I64, ty, PTR, I64])
    va, vb = task.gemm["a"], task.gemm["b"]
    aptr, bptr = ptr_of(va["base"]), ptr_of(vb["base"])
    cst = c_strides(node.shape)
    c64 = lambda v: ir.Constant(I64, v)

    def call(bidx: list[ir.Value], sub: tuple[ir.Value, ir.Value] | None = None) -> None:
        bb = cx.builder

        def off(base: int, strides: tuple) -> ir.Value:
            v = c64(base)
            for i, s in zip(bidx, strides):
                if s:
                    v = bb.add(v, bb.mul(i, c64(s)))
            return v

        oa, ob, oc = off(va["offset"], va["batch_strides"]), off(vb["offset"], vb["batch_strides"]), off(0, cst[:-2])
        mv, nv = c64(m), c64(n)
        if sub is not None:  # rows (columns) [s, e) of this batch element
            s, e = sub
            if piece[0] == "m":
                mv = bb.sub(e, s)
                oa = bb.add(oa, s if va["trans"] else bb.mul(s, c64(va["ld"])))
                oc = bb.add(oc, bb.mul(s, c64(n)))
            else:
                nv = bb.sub(e, s)
                ob = bb.add(ob, bb.mul(s, c64(vb["ld"])) if vb["trans"] else s)
                oc = bb.add(oc, s)
        pa = bb.gep(aptr, [oa], source_etype=mt)
        pb = bb.gep(bptr, [ob], source_etype=mt)
        pc = bb.gep(cptr, [oc], source_etype=mt)
        bb.call(fn, [ir.Constant(I32, CBLAS_ROW_MAJOR),
                     ir.Constant(I32, CBLAS_TRANS if va["trans"] else CBLAS_NO_TRANS),
                     ir.Constant(I32, CBLAS_TRANS if vb["trans"] else CBLAS_NO_TRANS),
                     mv, nv, c64(k), ir.Constant(ty, alpha),
                     pa, c64(va["ld"]), pb, c64(vb["ld"]), ir.Constant(ty, beta),
                     pc, c64(n)])

    if piece is not None:
        axis, lo, hi = piece
        ext = m if axis == "m" else n
        bstr = c_strides(tuple(batch))

        def one(bi: ir.Value) -> None:
            bb = cx.builder
            first = bb.mul(bi, c64(ext))
            s = bb.sub(bb.select(bb.icmp_signed(">", lo, first), lo, first), first)
            last = bb.add(first, c64(ext))
            e = bb.sub(bb.select(bb.icmp_signed("<", hi, last), hi, last), first)
            bidx = [bb.urem(bb.udiv(bi, c64(st)), c64(d)) for st, d in zip(bstr, batch)]
            call(bidx, (s, e))

        bi_lo = b.udiv(lo, c64(ext))
        bi_hi = b.udiv(b.add(hi, c64(ext - 1)), c64(ext))
        for_range(b, bi_lo, bi_hi, one, name="gp")
        return

    def nest(d: int, bidx: list[ir.Value]) -> None:
        if d == len(batch):
            call(bidx)
            return
        for_range(cx.builder, ir.Constant(I64, 0), ir.Constant(I64, batch[d]),
                  lambda i: nest(d + 1, bidx + [i]), name=f"gb{d}")

    nest(0, [])


#: Estimated flops above which a gemm is split across threads (measured in
#: tests/test_codegen_threads.py's notes and docs/compile.md: a pool job costs
#: about 1-3 us when the workers are awake, a 2*256*256*10 product takes ~15 us).
GEMM_PAR_MIN_FLOPS = 1 << 20
#: Rows (columns) per piece are rounded up to a multiple of this (OpenBLAS's
#: micro-kernel tiles).
GEMM_PIECE_ALIGN = 16
def _machine_gemm_atoms() -> int:
    """The machine's CPUs (all of them, whatever this process's affinity), rounded down to a power of two, 2 to 8.

    At least 2, so that a product is cut the same way on a 1-CPU machine as on a 2-core one (the pieces then
    run one after the other).
    """
    n = max(2, min(8, os.cpu_count() or 1))
    return 1 << (n.bit_length() - 1)


#: A product cut inside its matrices becomes at most this many pieces, of at least `GEMM_ATOM_MIN`
#: rows (columns) each, whatever SYMGRAPH_NUM_THREADS says: the machine's CPU count (all CPUs, not this
#: process's affinity) rounded down to a power of two, 2 to 8, so the bits are those of this
#: machine on every thread count. As many pieces as cores: on this 2-core machine W6's step took
#: 40.5 ms with 2 pieces of 128+ rows, 41.0 with 4 and 42.6 with 8 of 64+ (loaded, interleaved);
#: every piece packs the shared operand again.
GEMM_ATOMS = _machine_gemm_atoms()
GEMM_ATOM_MIN = 96


def gemm_pieces(task: Task, nthreads: int) -> tuple[str, list[tuple[int, int]]] | None:
    """The pieces a gemm task runs as: (axis, [(lo, hi)]) in `emit_gemm`'s numbering, or None (one call).

    OpenBLAS picks its kernels by shape (a small block of rows takes another
    path than the whole matrix), so a piece of C is not always bitwise the
    same as those rows of the whole product. The BLAS calls of a product
    therefore never depend on the thread count: a product cut inside its
    matrices is always cut into the same pieces on a machine, a power of two up
    to `GEMM_ATOMS` (the machine's CPUs) of at least `GEMM_ATOM_MIN` rows
    (columns), starting on multiples of
    `GEMM_PIECE_ALIGN`, along the larger of m and n (m on ties), over the
    batch-major flattening of the batch; `program` runs them on the thread
    pool, or one after the other. A batch of at least `GEMM_ATOMS` matrices
    is one call per matrix however it is grouped, so it is grouped by whole
    matrices into `nthreads` pieces (none on one thread). A product of fewer
    than `GEMM_PAR_MIN_FLOPS` flops, or without room for two pieces, is one
    call.

    Args:
        task: a gemm task (`fuse.Task` of kind "gemm").
        nthreads: threads available (groups whole matrices of a large batch only).

    Returns:
        None, or the axis ("m" or "n") and two or more half-open ranges
        covering [0, batch * extent).
    """
    mm = task.gemm.get("mm", task.node)
    a_in, b_in = mm.inputs
    *batch, m, k = a_in.shape
    n = b_in.shape[-1]
    nb = math.prod(batch)
    if m == 0 or n == 0 or k == 0 or matmul_flops(a_in.shape, b_in.shape) < GEMM_PAR_MIN_FLOPS:
        return None
    axis, ext = ("m", m) if m >= n else ("n", n)
    total = nb * ext
    if nb >= GEMM_ATOMS:
        if nthreads <= 1:
            return None
        per = -(-nb // nthreads) * ext  # whole matrices per piece
    else:
        pieces = min(GEMM_ATOMS, total // GEMM_ATOM_MIN)
        if pieces < 2:
            return None
        pieces = 1 << (pieces.bit_length() - 1)  # a power of two: balanced on 2, 4 or 8 threads
        per = -(-total // pieces)
        per = -(-per // GEMM_PIECE_ALIGN) * GEMM_PIECE_ALIGN
    ranges = [(lo, min(total, lo + per)) for lo in range(0, total, per)]
    if len(ranges) < 2:
        return None
    return axis, ranges
