"""The "poly" vector-math implementation: branch-free range reduction and polynomials in LLVM IR.

Every function is written once for both float types on `_Ops` (scalar float IR helpers at
one builder) and defined in a module as an ``alwaysinline`` internal helper
(`poly_helper`), so it vectorizes like any arithmetic. The algorithms follow Cephes, fdlibm
and SLEEF (cited per function); the coefficients are in `coefficients`. No code was copied.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from .coefficients import (COS_F32, COS_F64, ERF_PIECES_F32, ERF_PIECES_F64, ERF_SMALL_F32, ERF_SMALL_F64,
                           EXP_F32, EXP_F64, EXPM1_F32, EXPM1_F64, LN2_F32, LN2_F64, LOG2E, LOG_F32, LOG_F64,
                           LOG_TAIL_F64, PIO2_4, PIO2_F64, PIO2_TABLE_F32, SIN_F32, SIN_F64, TWO_OVER_PI,
                           TWO_THIRDS_DD)
from .runtime import FUNCTIONS, _host_features, _intrinsic

__all__ = ["POLY", "POLY_SIN_COS_EXACT_LIMIT", "POLY_TRIG_NAN_LIMIT", "poly_helper", "sigmoid_from"]

#: In the "poly" implementation sin/cos/tan reduce the argument exactly (error
#: < 2 ulp overall) for |x| below this bound (2**24 * pi/2); above it the
#: Cody-Waite reduction is no longer exact and the absolute error grows like
#: |x| * 2**-52 (see docs/vmath.md). The "libmvec" path has no such limit.
POLY_SIN_COS_EXACT_LIMIT = 2.0 ** 24 * (math.pi / 2)
#: ... and between that bound and this one, the float64 "poly" result is f(x + d)
#: with |d| <= ulp(x)/2 (measured); from here on (every double is an integer)
#: it is NaN. float32 "poly" reduces every finite argument exactly (table-driven).
POLY_TRIG_NAN_LIMIT = 2.0 ** 52


# ----- IR building helpers -----


class _Ops:
    """Scalar float IR helpers for one float type (float or double) at one builder."""

    def __init__(self, builder: ir.IRBuilder, ty):
        self.b = builder
        self.ty = ty
        self.f64 = isinstance(ty, ir.DoubleType)
        self.ity = ir.IntType(64 if self.f64 else 32)
        self.mant = 52 if self.f64 else 23
        self.bias = 1023 if self.f64 else 127
        self.np = np.float64 if self.f64 else np.float32
        self.module = builder.module
        self.shift = 1.5 * 2.0 ** self.mant  # adding it rounds |v| < 2**(mant-1) to an integer

    # constants
    def c(self, v: float):
        return ir.Constant(self.ty, float(self.np(v)))

    def ci(self, v: int):
        return ir.Constant(self.ity, v)

    # arithmetic (no fast-math flags: IEEE semantics are kept)
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def _call(self, base, *args):
        return self.b.call(_intrinsic(self.module, base, self.ty, len(args)), list(args))

    def fma(self, a, b, c):
        """a*b + c, fused where the target has FMA (llvm.fmuladd)."""
        return self._call("llvm.fmuladd", a, b, c)

    def abs(self, a):
        return self._call("llvm.fabs", a)

    def copysign(self, a, s):
        return self._call("llvm.copysign", a, s)

    def floor(self, a):
        return self._call("llvm.floor", a)

    def poly(self, x, coeffs):
        """Horner: coeffs[0] + coeffs[1] x + ... (coefficients may be IR values)."""
        coeffs = [self.c(v) if isinstance(v, float) else v for v in coeffs]
        acc = coeffs[-1]
        for cf in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, cf)
        return acc

    # comparisons (ordered: false for NaN) and selection
    def cmp(self, op, a, b):
        return self.b.fcmp_ordered(op, a, b)

    def ucmp(self, op, a, b):
        return self.b.fcmp_unordered(op, a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond, a, b):
        return self.b.select(cond, a, b)

    def and_(self, a, b):
        return self.b.and_(a, b)

    def or_(self, a, b):
        return self.b.or_(a, b)

    def not_(self, a):
        return self.b.not_(a)

    # integer views
    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def fbits(self, i):
        return self.b.bitcast(i, self.ty)

    def iadd(self, a, b):
        return self.b.add(a, b)

    def isub(self, a, b):
        return self.b.sub(a, b)

    def shl(self, a, n):
        return self.b.shl(a, n if isinstance(n, ir.Value) else self.ci(n))

    def ashr(self, a, n):
        return self.b.ashr(a, n if isinstance(n, ir.Value) else self.ci(n))

    def iand(self, a, b):
        return self.b.and_(a, b)

    def ixor(self, a, b):
        return self.b.xor(a, b)

    def icmp(self, op, a, b):
        return self.b.icmp_signed(op, a, b)

    # exact transformations (Knuth 2Sum, Dekker/FMA product)
    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, err

    def fast_two_sum(self, a, b):
        """Requires |a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a, b):
        p = self.mul(a, b)
        if "fma" in _host_features():
            return p, self._call("llvm.fma", a, b, self.neg(p))
        split = self.c(2.0 ** (27 if self.f64 else 12) + 1)

        def halves(v):
            t = self.mul(v, split)
            hi = self.sub(t, self.sub(t, v))
            return hi, self.sub(v, hi)

        ah, al = halves(a)
        bh, bl = halves(b)
        err = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl)), self.mul(al, bh)),
                       self.mul(al, bl))
        return p, err

    # building blocks
    def int_to_float(self, k):
        """Small integer (|k| < 2**(mant-1)) to float without sitofp (vectorizes on AVX2 too)."""
        s = self.c(self.shift)
        return self.sub(self.fbits(self.iadd(k, self.bits(s))), s)

    def round_shift(self, v):
        """Nearest integer of |v| < 2**(mant-1): (as float, as integer)."""
        s = self.c(self.shift)
        t = self.add(v, s)
        return self.sub(t, s), self.isub(self.bits(t), self.bits(s))

    def pow2(self, k):
        """2**k for an integer k in the normal exponent range."""
        return self.fbits(self.shl(self.iadd(k, self.ci(self.bias)), self.mant))

    def scale2(self, p, k):
        """p * 2**k for |k| up to about 2 * bias, rounding once (overflow -> inf, gradual underflow)."""
        k1 = self.ashr(k, 1)
        return self.mul(self.mul(p, self.pow2(k1)), self.pow2(self.isub(k, k1)))

    def clamp(self, x, lo, hi):
        """NaN passes through unchanged."""
        x = self.sel(self.cmp(">", x, self.c(hi)), self.c(hi), x)
        return self.sel(self.cmp("<", x, self.c(lo)), self.c(lo), x)


# ----- polynomial implementations (one function per name, any float type) -----


def _exp_reduce(o: _Ops, x, lo, hi):
    """x -> (k, r) with x = k ln2 + r, |r| <= ln2/2 (Cody-Waite, Cephes exp). Clamps x to [lo, hi]
    (to [lo, x] with hi None: x is known not to be above hi)."""
    xc = o.clamp(x, lo, hi) if hi is not None else o.sel(o.cmp("<", x, o.c(lo)), o.c(lo), x)
    nf, k = o.round_shift(o.mul(xc, o.c(LOG2E)))
    c1, c2 = LN2_F64 if o.f64 else LN2_F32
    r = o.sub(o.sub(xc, o.mul(nf, o.c(c1))), o.mul(nf, o.c(c2)))
    return k, r


def _poly_exp(o: _Ops, x):
    """exp: n = round(x/ln2), r = x - n ln2 (Cody-Waite), Taylor e**r, 2**n from exponent bits.

    References: Cephes exp.c (reduction); Cody & Waite, "Software Manual for the
    Elementary Functions" (1980); XLA CPU llvm_ir_runtime (2**n by exponent bits).
    """
    lo, hi = (-746.0, 710.0) if o.f64 else (-104.0, 89.0)
    k, r = _exp_reduce(o, x, lo, hi)
    p = o.poly(r, EXP_F64 if o.f64 else EXP_F32)
    return o.scale2(p, k)  # NaN stays NaN; clamped +big -> inf, -big -> 0


def _expm1_core(o: _Ops, x, nonpositive: bool = False):
    """expm1 without the signed-zero fix: 2**k (e**r - 1) + (2**k - 1) (fdlibm s_expm1.c scheme).

    With `nonpositive` (x <= 0 or NaN, as tanh's -2|x|) k <= 0: the large-k branch and the upper clamp
    are left out, the same values with ~14 fewer operations (W2's tanh kernels 15% faster).
    """
    lo, hi = (-45.0, 710.0) if o.f64 else (-20.0, 89.0)
    kbig = 56 if o.f64 else 25
    k, r = _exp_reduce(o, x, lo, None if nonpositive else hi)
    q = o.fma(o.mul(r, r), o.poly(r, EXPM1_F64 if o.f64 else EXPM1_F32), r)  # e**r - 1
    if nonpositive:
        s = o.pow2(k)
        return o.fma(s, q, o.sub(s, o.c(1.0)))
    big = o.scale2(o.add(q, o.c(1.0)), k)  # k > kbig: the -1 is below half an ulp
    s = o.pow2(o.sel(o.icmp(">", k, o.ci(kbig)), o.ci(kbig), k))
    small = o.fma(s, q, o.sub(s, o.c(1.0)))
    return o.sel(o.icmp(">", k, o.ci(kbig)), big, small)


def _poly_expm1(o: _Ops, x):
    """expm1 (fdlibm s_expm1.c structure, Taylor coefficients); expm1(-0) = -0."""
    return o.sel(o.cmp("==", x, o.c(0.0)), x, _expm1_core(o, x))


def _log_reduce(o: _Ops, x):
    """x > 0 -> (k as float, m) with x = m 2**k, m in [sqrt(1/2), sqrt(2)); denormals scaled first.

    Integer form of frexp as in musl/ARM optimized-routines log.
    """
    minnorm, up = (2.0 ** -1022, 54) if o.f64 else (2.0 ** -126, 25)
    sub = o.cmp("<", x, o.c(minnorm))
    xs = o.sel(sub, o.mul(x, o.c(2.0 ** up)), x)
    kadj = o.sel(sub, o.ci(up), o.ci(0))
    i = o.bits(xs)
    sqrt_half_bits = int(np.array(math.sqrt(0.5), dtype=o.np).view(np.int64 if o.f64 else np.int32))
    k = o.ashr(o.isub(i, o.ci(sqrt_half_bits)), o.mant)
    m = o.fbits(o.isub(i, o.shl(k, o.mant)))
    return o.int_to_float(o.isub(k, kadj)), m


def _log_kernel(o: _Ops, kf, m, c=None):
    """log(m 2**k) + c, m in [sqrt(1/2), sqrt(2)): fdlibm e_log.c form with f = m - 1, s = f/(2+f)."""
    f = o.sub(m, o.c(1.0))
    hfsq = o.mul(o.c(0.5), o.mul(f, f))
    s = o.div(f, o.add(o.c(2.0), f))
    z = o.mul(s, s)
    rz = o.mul(z, o.poly(z, LOG_F64 if o.f64 else LOG_F32))
    hi, lo = LN2_F64 if o.f64 else LN2_F32
    low = o.mul(kf, o.c(lo))
    if c is not None:
        low = o.add(low, c)
    inner = o.sub(o.sub(hfsq, o.fma(s, o.add(hfsq, rz), low)), f)
    return o.sub(o.mul(kf, o.c(hi)), inner)


def _poly_log(o: _Ops, x):
    """log: frexp-style exponent extraction + atanh series (fdlibm e_log.c). log(0)=-inf, log(<0)=nan."""
    kf, m = _log_reduce(o, x)
    r = _log_kernel(o, kf, m)
    r = o.sel(o.cmp("==", x, o.c(math.inf)), x, r)
    r = o.sel(o.cmp("==", x, o.c(0.0)), o.c(-math.inf), r)
    return o.sel(o.ucmp("<", x, o.c(0.0)), o.c(math.nan), r)


def _poly_log1p(o: _Ops, x):
    """log1p: u = 1 + x with the exact rounding error d (Fast2Sum); log(u) + d/u (fdlibm s_log1p.c idea)."""
    one = o.c(1.0)
    u = o.add(one, x)
    d = o.sel(o.cmp("<=", o.abs(x), one), o.add(o.sub(one, u), x), o.add(o.sub(x, u), one))
    kf, m = _log_reduce(o, u)
    r = _log_kernel(o, kf, m, o.div(d, u))
    r = o.sel(o.cmp("==", x, o.c(math.inf)), x, r)
    r = o.sel(o.cmp("==", x, o.c(-1.0)), o.c(-math.inf), r)
    r = o.sel(o.cmp("==", x, o.c(0.0)), x, r)  # log1p(-0) = -0
    return o.sel(o.ucmp("<", x, o.c(-1.0)), o.c(math.nan), r)


def _poly_tanh(o: _Ops, x):
    """tanh = -t/(t+2), t = expm1(-2|x|), sign restored (fdlibm s_tanh.c); tanh(+-inf) = +-1."""
    t = _expm1_core(o, o.mul(o.c(-2.0), o.abs(x)), nonpositive=True)
    return o.copysign(o.div(o.neg(t), o.add(t, o.c(2.0))), x)


def sigmoid_from(o: _Ops, x, e):
    """Stable logistic given e = exp(-|x|): 1/(1+e) for x >= 0, e/(1+e) otherwise."""
    d = o.add(o.c(1.0), e)
    return o.sel(o.cmp(">=", x, o.c(0.0)), o.div(o.c(1.0), d), o.div(e, d))


def _poly_sigmoid(o: _Ops, x):
    """sigmoid = 1/(1+exp(-x)) without overflow: exp of -|x| only (as the NumPy evaluator)."""
    return sigmoid_from(o, x, _poly_exp(o, o.neg(o.abs(x))))


def _reduce_pio2(o: _Ops, x, exact: bool = True):
    """x -> (j mod 4, rh, rl): x = j pi/2 + rh + rl, |rh| <= pi/4, double-double remainder.

    Cody-Waite with pi/2 in 4 parts (29+29+29+53 bits); every j * part is exact
    for |j| < 2**24 and the subtractions are tracked with 2Sum, so the remainder
    is accurate to ~2**-100 even when it cancels heavily. (SLEEF's rempi-free
    path for medium arguments follows the same idea.) Beyond that the products
    round: the result is then the reduction of a number within ~1 ulp of x.
    `o` must be float64. exact=False (float32 callers) skips the 2Sum
    bookkeeping: the remainder is then accurate to ~2**-53 |x| 2**-29, far
    below float32 resolution (rl is returned as None).
    """
    p1, p2, p3, p4 = PIO2_4
    jf = o._call("llvm.roundeven", o.mul(x, o.c(TWO_OVER_PI)))
    quad = o.sub(jf, o.mul(o.c(4.0), o.floor(o.mul(jf, o.c(0.25)))))  # j mod 4, exact, any magnitude
    j = o.b.fptosi(o.sel(o.cmp("ord", quad, quad), quad, o.c(0.0)), o.ity)  # NaN/inf lanes: 0, not poison
    a1 = o.sub(x, o.mul(jf, o.c(p1)))
    if not exact:
        return j, o.sub(o.sub(a1, o.mul(jf, o.c(p2))), o.mul(jf, o.c(p3 + p4))), None
    s, e = o.two_sum(a1, o.neg(o.mul(jf, o.c(p2))))
    s, e2 = o.two_sum(s, o.neg(o.mul(jf, o.c(p3))))
    e = o.sub(o.add(e, e2), o.mul(jf, o.c(p4)))
    rh, rl = o.fast_two_sum(s, e)
    return j, rh, rl


def _reduce_table_f32(d: _Ops, xd):
    """Float32 x (given as float64 xd), |x| >= 2**24 -> (j, r): x = j pi/2 + r, r in float64.

    x = M 2**e with a 24-bit integer M; y = M * T(e) mod 4 with T(e) = (2/pi 2**e) mod 4 from
    `PIO2_TABLE_F32` (three exact products, 2Sum), j = round(y), r = (y - j) pi/2: correct
    for every finite float32 (Payne-Hanek reduction without integer multiprecision).
    Lanes with |x| < 2**24 get a clamped (unused) row.
    """
    module = d.module
    name = "symgraph.vmath.pio2_table_f32"
    table = module.globals.get(name)
    arr = ir.ArrayType(d.ty, len(PIO2_TABLE_F32))
    if table is None:
        table = ir.GlobalVariable(module, arr, name)
        table.linkage = "internal"
        table.global_constant = True
        table.initializer = ir.Constant(arr, PIO2_TABLE_F32)
    bits = d.bits(d.abs(xd))
    e24 = d.isub(d.iand(d.b.lshr(bits, d.ci(52)), d.ci(0x7FF)), d.ci(1075 - 29))
    e24 = d.b.select(d.icmp("<", e24, d.ci(0)), d.ci(0), e24)
    e24 = d.b.select(d.icmp(">", e24, d.ci(104)), d.ci(104), e24)
    m = d.int_to_float(d.b.lshr(d.b.or_(d.iand(bits, d.ci((1 << 52) - 1)), d.ci(1 << 52)), d.ci(29)))
    row = d.b.mul(e24, d.ci(3))
    zero32 = ir.Constant(ir.IntType(32), 0)

    def chunk(k):
        ptr = d.b.gep(table, [zero32, d.iadd(row, d.ci(k))], inbounds=True, source_etype=arr)
        return d.b.load(ptr, typ=d.ty)

    p0 = d.mul(m, chunk(0))
    p0 = d.sub(p0, d.mul(d.c(4.0), d.floor(d.mul(p0, d.c(0.25)))))  # exact: p0 mod 4
    s, e = d.two_sum(p0, d.mul(m, chunk(1)))
    jf, j = d.round_shift(s)
    r = d.mul(d.add(d.sub(s, jf), d.add(e, d.mul(m, chunk(2)))), d.c(PIO2_F64))
    neg = d.cmp("<", xd, d.c(0.0))
    return d.b.select(neg, d.b.neg(j), j), d.sel(neg, d.neg(r), r)


def _sincos_kernels(o: _Ops, rh, rl):
    """sin and cos of rh + rl, |rh| <= pi/4 (Taylor; fdlibm k_sin.c/k_cos.c correction terms)."""
    z = o.mul(rh, rh)
    if o.f64:
        sin_poly, cos_poly = SIN_F64, COS_F64
    else:
        sin_poly, cos_poly = SIN_F32, COS_F32
    # sin(rh + rl) ~ rh + rh z S(z) + rl (1 - z/2)
    corr = o.fma(o.mul(o.c(-0.5), z), rl, rl) if rl is not None else None
    tail = o.mul(o.mul(rh, z), o.poly(z, sin_poly))
    sinr = o.add(rh, o.add(tail, corr) if corr is not None else tail)
    # cos(rh + rl) ~ 1 - z/2 + z**2 C(z) - rh rl; w = 1 - z/2 and its rounding error kept
    hz = o.mul(o.c(0.5), z)
    w = o.sub(o.c(1.0), hz)
    low = o.mul(o.mul(z, z), o.poly(z, cos_poly))
    if rl is not None:
        low = o.sub(low, o.mul(rh, rl))
    cosr = o.add(w, o.add(o.sub(o.sub(o.c(1.0), w), hz), low))
    return sinr, cosr


def _trig(o: _Ops, x, which: str):
    """sin/cos/tan by quadrant from `_reduce_pio2` (float32 reduces in float64)."""
    if o.f64:
        j, rh, rl = _reduce_pio2(o, x)
        q = j
        ko = o
    else:
        d = _Ops(o.b, ir.DoubleType())
        xd = o.b.fpext(x, d.ty)
        j, rhd, _ = _reduce_pio2(d, xd, exact=False)
        jt, rt = _reduce_table_f32(d, xd)
        big = d.cmp(">=", d.abs(xd), d.c(2.0 ** 24))
        q = o.b.trunc(o.b.select(big, jt, j), o.ity)
        rh, rl = o.b.fptrunc(d.sel(big, rt, rhd), o.ty), None
        ko = o
    sinr, cosr = _sincos_kernels(ko, rh, rl)
    if which == "cos":
        q = o.iadd(q, o.ci(1))
    odd = o.icmp("!=", o.iand(q, o.ci(1)), o.ci(0))
    if which == "tan":
        res = o.sel(odd, o.neg(o.div(cosr, sinr)), o.div(sinr, cosr))
    else:
        val = o.sel(odd, cosr, sinr)
        width = 64 if o.f64 else 32
        flip = o.shl(o.iand(q, o.ci(2)), width - 2)  # quadrants 2, 3: negate
        res = o.fbits(o.ixor(o.bits(val), flip))
    # float64 poly: no exact reduction for |x| >= 2**52 (every such x is an integer): NaN, documented
    limit = POLY_TRIG_NAN_LIMIT if o.f64 else math.inf
    res = o.sel(o.cmp(">=", o.abs(x), o.c(limit)), o.c(math.nan), res)
    if which != "cos":
        res = o.sel(o.cmp("==", x, o.c(0.0)), x, res)  # sin(-0) = tan(-0) = -0
    return res


def _poly_sin(o: _Ops, x):
    return _trig(o, x, "sin")


def _poly_cos(o: _Ops, x):
    return _trig(o, x, "cos")


def _poly_tan(o: _Ops, x):
    return _trig(o, x, "tan")


def _log_dd(o: _Ops, ax):
    """log(ax) as a double-double (hi, lo), relative error ~2**-70, for finite ax > 0 (float64).

    s = f/(2+f) in double-double, log(1+f) = 2s + (2/3)s**3 (double-double) + s**5 T(s**2),
    plus k ln2 in double-double. Technique: SLEEF logk (Shibata, "Efficient
    evaluation methods of elementary functions suitable for SIMD computation", 2010).
    """
    kf, m = _log_reduce(o, ax)
    one, two = o.c(1.0), o.c(2.0)
    f = o.sub(m, one)  # exact
    d = o.add(two, f)
    dl = o.add(o.sub(two, d), f)  # 2 + f = d + dl exactly
    sh = o.div(f, d)
    p, pe = o.two_prod(sh, d)
    sl = o.div(o.sub(o.sub(o.sub(f, p), pe), o.mul(sh, dl)), d)
    # s**2 and s**3 in double-double
    q, qe = o.two_prod(sh, sh)
    qe = o.add(qe, o.mul(o.c(2.0), o.mul(sh, sl)))
    cub, cube = o.two_prod(q, sh)
    cube = o.add(cube, o.add(o.mul(qe, sh), o.mul(q, sl)))
    t_hi, t_lo = TWO_THIRDS_DD
    v, ve = o.two_prod(cub, o.c(t_hi))
    ve = o.add(ve, o.add(o.mul(cub, o.c(t_lo)), o.mul(cube, o.c(t_hi))))
    z = q
    tail = o.mul(o.mul(cub, z), o.poly(z, LOG_TAIL_F64))  # s**5 (2/5 + 2/7 z + ...)
    a, ae = o.fast_two_sum(o.mul(two, sh), v)
    lo = o.add(o.add(ae, o.mul(two, sl)), o.add(ve, tail))
    l1, l2 = LN2_F64
    b, be = o.two_sum(o.mul(kf, o.c(l1)), a)
    lo = o.add(o.add(be, lo), o.mul(kf, o.c(l2)))
    return o.fast_two_sum(b, lo)


def _exp_dd(o: _Ops, hi, lo):
    """exp(hi + lo) with |lo| <~ 2**-50 |hi| (float64); hi outside [-746, 710] saturates."""
    ok = o.cmp("<", o.abs(hi), o.c(746.0))
    lo = o.sel(ok, lo, o.c(0.0))
    k, r = _exp_reduce(o, hi, -746.0, 710.0)
    r = o.add(r, lo)
    return o.scale2(o.poly(r, EXP_F64), k)


def _pow_finish(o: _Ops, x, y, mag):
    """C99/NumPy special cases of pow around the magnitude |x|**y (computed for finite |x| > 0)."""
    ax = o.abs(x)
    zero, one, inf = o.c(0.0), o.c(1.0), o.c(math.inf)
    yint = o.cmp("==", o.floor(y), y)  # true for +-inf (treated as even)
    h = o.mul(o.c(0.5), y)
    yodd = o.and_(yint, o.cmp("!=", o.floor(h), h))
    # |x| = 0 or inf: mag from the sign of y
    ypos = o.cmp(">", y, zero)
    mag = o.sel(o.cmp("==", ax, zero), o.sel(ypos, zero, inf), mag)
    mag = o.sel(o.cmp("==", ax, inf), o.sel(ypos, inf, zero), mag)
    # y = +-inf: 1 when |x| = 1, inf when (|x| > 1) == (y > 0), else 0
    yinf = o.cmp("==", o.abs(y), inf)
    grows = o.b.icmp_unsigned("==", o.cmp(">", ax, one), ypos)
    mag = o.sel(yinf, o.sel(o.cmp("==", ax, one), one, o.sel(grows, inf, zero)), mag)
    negx = o.icmp("<", o.bits(x), o.ci(0))  # sign bit (also -0 and -inf)
    res = o.sel(o.and_(negx, yodd), o.neg(mag), mag)
    neg_finite = o.and_(o.cmp("<", x, zero), o.cmp(">", x, o.c(-math.inf)))
    res = o.sel(o.and_(neg_finite, o.not_(yint)), o.c(math.nan), res)
    res = o.sel(o.ucmp("uno", x, y), o.add(x, y), res)
    res = o.sel(o.cmp("==", x, one), one, res)  # pow(1, anything) = 1
    return o.sel(o.cmp("==", y, zero), one, res)


def _poly_pow(o: _Ops, x, y):
    """pow: exp(y log|x|) with log in double-double (float64) or in float64 (float32); C99 specials.

    References: SLEEF xpow (Shibata 2010) for the double-double scheme.
    """
    if o.f64:
        ax = o.abs(x)
        lh, ll = _log_dd(o, ax)
        ph, pe = o.two_prod(y, lh)
        pl = o.add(pe, o.mul(y, ll))
        mag = _exp_dd(o, ph, pl)
        return _pow_finish(o, x, y, mag)
    d = _Ops(o.b, ir.DoubleType())
    xd, yd = o.b.fpext(x, d.ty), o.b.fpext(y, d.ty)
    kf, m = _log_reduce(d, d.abs(xd))
    mag = _poly_exp(d, d.mul(yd, _log_kernel(d, kf, m)))
    return o.b.fptrunc(_pow_finish(d, xd, yd, mag), o.ty)


def _poly_erf(o: _Ops, x):
    """erf: x P(x**2) for |x| < 1, 1 - exp(-x**2) R(|x|) with piecewise R up to 6 (f64) / 4 (f32).

    Structure of Cephes ndtr.c / fdlibm s_erf.c; coefficients fitted here (`fit_chebyshev`).
    """
    small_c, pieces = (ERF_SMALL_F64, ERF_PIECES_F64) if o.f64 else (ERF_SMALL_F32, ERF_PIECES_F32)
    ax = o.abs(x)
    small = o.mul(x, o.poly(o.mul(x, x), list(small_c)))
    # pick the piece's coefficients lane by lane (selects vectorize; no gathers)
    conds = [o.cmp("<", ax, o.c(upper)) for upper, _, _ in pieces[:-1]]

    def pick(values):
        v = o.c(values[-1])
        for cond, val in zip(reversed(conds), reversed(values[:-1]), strict=True):
            v = o.sel(cond, o.c(val), v)
        return v

    center = pick([ctr for _, ctr, _ in pieces])
    ncoef = len(pieces[0][2])
    coeffs = [pick([p[2][i] for p in pieces]) for i in range(ncoef)]
    t = o.sub(ax, center)
    big = o.sub(o.c(1.0), o.mul(_poly_exp(o, o.neg(o.mul(ax, ax))), o.poly(t, coeffs)))
    top = pieces[-1][0]
    res = o.sel(o.cmp(">=", ax, o.c(top)), o.c(1.0), big)
    res = o.copysign(res, x)
    return o.sel(o.cmp("<", ax, o.c(1.0)), small, res)  # NaN: copysign(NaN) stays NaN


def _poly_sqrt(o: _Ops, x):
    return o._call("llvm.sqrt", x)


#: name -> its polynomial implementation, `fn(ops, *args)`.
POLY = {
    "exp": _poly_exp, "log": _poly_log, "log1p": _poly_log1p, "expm1": _poly_expm1, "tanh": _poly_tanh,
    "sigmoid": _poly_sigmoid, "sin": _poly_sin, "cos": _poly_cos, "tan": _poly_tan, "pow": _poly_pow,
    "sqrt": _poly_sqrt, "erf": _poly_erf,
}


def poly_helper(module: ir.Module, name: str, ty) -> ir.Function:
    """The module's alwaysinline helper computing `name` for type `ty` (defined on first use)."""
    kind = "f64" if isinstance(ty, ir.DoubleType) else "f32"
    fname = f"symgraph.vmath.{name}.{kind}"
    fn = module.globals.get(fname)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * FUNCTIONS[name]), fname)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(POLY[name](_Ops(b, ty), *fn.args))
    return fn
