"""Elementwise emitters: one per op, in a table keyed by op name (`EMITTERS`), and the transcendental switch.

An emitter builds the scalar code of one loop iteration, `fn(cx, expr, args) -> value`;
LLVM's loop vectorizer turns the loops into packed SIMD code. No fast-math flags on
elementwise arithmetic, so NaN, inf and -0.0 behave as in NumPy. Transcendentals go through
`math_call`, one function: the vector-math module (`codegen.llvm.vmath`: libmvec variants or
inline polynomials) inside loops when it is available, LLVM intrinsics / libm otherwise. Every
op whose record has `math` lowers through it with no per-op code; tests/test_codegen.py fails
when an elementwise op has no emitter (`has_emitter`).

References:
    SplitMix64: G. L. Steele, D. Lea, C. H. Flood, "Fast splittable
    pseudorandom number generators", OOPSLA 2014.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from llvmlite import ir

from symgraph.ops import OPS

from ..kernels.expr import Expr
from . import fastir
from .context import F32, F64, I1, I64, LoweringContext, is_float, is_signed
from .reduce import REDUCERS

__all__ = ["EMITTERS", "Emitter", "emitter", "math_call", "has_emitter"]


# ----- transcendentals: the one switch between vmath and intrinsics -----

def math_call(cx: LoweringContext, name: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value:
    """Emit transcendental `name` (an op whose record has `math`) on scalar args of dtype (float32/float64).

    Uses `codegen.llvm.vmath.emit` (vectorizable: libmvec variants or inline
    polynomials) inside loops when that module is available; otherwise the
    record's LLVM intrinsic (llvm.exp.f64, ...) or libm function, which are
    correct but scalar.
    """
    if cx.use_vmath and cx.in_loop:
        return cx.vmath.emit(cx.builder, name, list(args))
    b = cx.builder
    ty = args[0].type
    op = OPS.get(name)
    spec = op.math if op is not None else None
    if cx.indirect_math and spec is not None and spec.libm and (spec.intrinsic is None or spec.intrinsic in _VIA_LIBM):
        fname = spec.libm + ("f" if ty == F32 else "")
        p = cx.math_pointer(fname, ty, len(args))
        if p is not None:
            return fastir.call_pointer(b, p, ty, list(args))
    if spec is not None and (spec.intrinsic or spec.libm):
        if spec.intrinsic:
            fn = cx.intrinsic(spec.intrinsic, ty, len(args))
        else:
            fn = cx.function(spec.libm + ("f" if ty == F32 else ""), ty, [ty] * len(args), attrs=("nounwind", "readnone"))
        return fastir.call(b, fn, list(args))
    if name == "sigmoid":  # the one composite (MathFn.via)
        # the evaluator's formula: e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e)
        (x,) = args
        one = ir.Constant(ty, 1.0)
        ax = b.call(cx.intrinsic("fabs", ty), [x])
        e = math_call(cx, "exp", [b.fneg(ax)], dtype)
        d = b.fadd(one, e)
        return b.select(b.fcmp_ordered(">=", x, ir.Constant(ty, 0.0)), b.fdiv(one, d), b.fdiv(e, d))
    raise KeyError(f"math_call: unknown function {name!r}")


#: Intrinsics that code generation at level 0 lowers to a call of the libm function of the same name
#: and that the light pipeline's instcombine rewrites only exactly (sin(-x) = -sin(x)); with
#: `LoweringContext.indirect_math` they are called through pointers to those functions. Not sqrt
#: (an instruction) nor pow (pow(x, 2.0) becomes x*x, which libm's pow need not equal).
_VIA_LIBM = frozenset(("sin", "cos", "tan", "exp", "log", "tanh"))


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
        if is_float(e.dtype):
            return fastir.binop(b, fop, a[0], a[1])
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
    return fastir.binop(cx.builder, "fdiv", a[0], a[1])


@emitter("neg")
def _neg(cx, e, a):
    b = cx.builder
    if is_float(e.dtype):
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
    if is_float(e.dtype):
        return b.call(cx.intrinsic("fabs", a[0].type), [a[0]])
    if e.dtype.kind == "u" or e.dtype.kind == "b":
        return a[0]
    return b.select(b.icmp_signed("<", a[0], ir.Constant(a[0].type, 0)), b.neg(a[0]), a[0])


@emitter("sign")
def _sign(cx, e, a):
    b = cx.builder
    x = a[0]
    t = x.type
    if is_float(e.dtype):
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
    if is_float(e.dtype):
        return cx.builder.call(cx.intrinsic("floor", a[0].type), [a[0]])
    return a[0]


def _rounding(intrinsic: str) -> Emitter:
    def emit(cx: LoweringContext, e: Expr, a: list) -> ir.Value:
        if is_float(e.dtype):
            return cx.builder.call(cx.intrinsic(intrinsic, a[0].type), [a[0]])
        return a[0]  # integers are their own ceil and trunc (NumPy keeps the integer dtype)

    return emit


EMITTERS["ceil"] = _rounding("ceil")
EMITTERS["trunc"] = _rounding("trunc")
EMITTERS["rint"] = _rounding("roundeven")  # rint in the default rounding mode: ties to even


@emitter("signbit")
def _signbit(cx, e, a):
    """The sign bit: of the float's bits (set for -0.0 and negative NaNs), x < 0 for signed integers."""
    b = cx.builder
    d = _arg_dtype(e)
    x = a[0]
    if is_float(d):
        ity = ir.IntType(64 if x.type == F64 else 32)
        return b.icmp_signed("<", b.bitcast(x, ity), ir.Constant(ity, 0))
    if is_signed(d):
        return b.icmp_signed("<", x, ir.Constant(x.type, 0))
    return ir.Constant(I1, 0)


@emitter("copysign")
def _copysign(cx, e, a):
    """llvm.copysign: |x1| with x2's sign bit, bitwise as C copysign (NaN signs included)."""
    return cx.builder.call(cx.intrinsic("copysign", a[0].type, 2), [a[0], a[1]])


@emitter("isnan")
def _isnan(cx, e, a):
    if is_float(_arg_dtype(e)):
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
        if is_float(d):
            # ordered comparisons are False with NaN; != is unordered (True with NaN), as in NumPy
            return b.fcmp_unordered(op, a[0], a[1]) if op == "!=" else b.fcmp_ordered(op, a[0], a[1])
        if is_signed(d):
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
        if is_float(e.dtype):
            c = b.or_(b.fcmp_ordered(op, x, y), b.fcmp_unordered("uno", x, x))
        elif is_signed(e.dtype):
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


def _int_divmod(cx: LoweringContext, e: Expr, a: list) -> tuple[ir.Value, ir.Value]:
    """NumPy's integer (a // b, a % b): floor toward -inf, the remainder with b's sign, 0 and 0 for b = 0.

    LLVM's sdiv/srem are undefined for b = 0 and for MIN / -1 (they trap on x86), so the divisor
    is replaced by 1 there first: MIN // 1 = MIN is NumPy's wrapped MIN // -1, and MIN % 1 = 0.
    Then the truncated quotient is corrected by one where the remainder is nonzero and its sign
    differs from b's (the remainder moves by b). Unsigned: udiv/urem on the guarded divisor.
    """
    b = cx.builder
    x, y = a
    t = x.type
    zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
    bz = b.icmp_unsigned("==", y, zero)
    if not is_signed(e.dtype):
        sy = b.select(bz, one, y)
        return b.select(bz, zero, b.udiv(x, sy)), b.select(bz, zero, b.urem(x, sy))
    lo = ir.Constant(t, -(1 << (t.width - 1)))
    ovf = b.and_(b.icmp_signed("==", x, lo), b.icmp_signed("==", y, ir.Constant(t, -1)))
    sy = b.select(b.or_(bz, ovf), one, y)
    q, r = b.sdiv(x, sy), b.srem(x, sy)
    fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, sy), zero))
    q = b.sub(q, b.zext(fix, t))
    r = b.select(fix, b.add(r, sy), r)
    return b.select(bz, zero, q), b.select(bz, zero, r)


@emitter("int_floordiv")
def _int_floordiv(cx, e, a):
    return _int_divmod(cx, e, a)[0]


@emitter("int_mod")
def _int_mod(cx, e, a):
    return _int_divmod(cx, e, a)[1]


@emitter("muladd")
def _muladd(cx, e, a):
    """a*b + c as fmul then fadd, without contraction flags: two roundings, as the evaluator."""
    b = cx.builder
    return fastir.binop(b, "fadd", fastir.binop(b, "fmul", a[0], a[1]), a[2])


def _math(name: str) -> Emitter:
    def emit(cx: LoweringContext, e: Expr, a: list) -> ir.Value:
        return math_call(cx, name, a, e.dtype)

    return emit


@emitter("pow")
def _pow(cx, e, a):
    if is_float(e.dtype):
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
    zero = ir.Constant(t, 0)
    # the sign test and the starting exponent belong to the entry block: they are the phis' incoming values from it
    neg_exp = b.icmp_signed("<", y, zero) if is_signed(dtype) else ir.Constant(I1, 0)
    ex0 = b.select(neg_exp, zero, y) if is_signed(dtype) else y
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
    ex.add_incoming(ex0, pre)
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
    if is_signed(dtype):
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


# ----- complex parts: not lowered natively yet -----
# `codegen.compile_graph` refuses a graph holding complex values before partitioning (an UnsupportedOpError
# naming the first complex op and suggesting backend="numpy", docs/complex.md), so these ops never reach an
# emitter; the entries state that, and raise the same error if a future caller skips the check.


@emitter("conj", "real", "imag", "complex", "complex_abs")
def _complex_part(cx, e, a):
    from symgraph.errors import UnsupportedOpError

    raise UnsupportedOpError(f"codegen: complex op {e.op!r} is not lowered natively; use backend='numpy'")


def has_emitter(op_name: str, kind: str) -> bool:
    """Whether an op of the given kind can be lowered (used by the completeness test)."""
    if kind == "elementwise":
        return op_name in EMITTERS
    if kind == "reduction":
        return op_name in REDUCERS
    return True
