"""Elementwise primitives: unary and binary math, comparisons, where, cast, sources.

Each op is declared once with all its rules. Operands of elementwise ops have
one shape and one dtype (the tracing layer inserts explicit `broadcast_to` and
`cast` nodes), so cotangents and tangents keep the operand shape.

Subgradient conventions (documented in docs/differentiation.md):
- maximum(a, b) is differentiated as where(a > b, a, b): at a tie the whole
  cotangent goes to b; minimum(a, b) as where(a < b, a, b). So
  maximum(x, 0) and where(x > 0, x, 0) have the same derivative at 0 (zero).
- abs'(0) = sign(0) = 0; sign, floor and comparisons have zero derivative.
- sqrt'(0) = +inf (the true one-sided derivative); log'(0) = +inf; likewise the
  domain edges of arcsin, arccos, arctanh, arccosh and cbrt'(0) stay infinite.
- hypot and arctan2 at (0, 0), copysign(x1, x2) in x1 at x1 = 0: 0 (as abs'(0));
  ceil, trunc, rint, signbit and copysign in x2 have zero derivative.
The full list, each with its test: docs/differentiation.md, "Conventions at kinks and ties".
"""

from __future__ import annotations

import math

import numpy as np

from .. import lax as L
from ..errors import DTypeError, ShapeError
from ..ir import ConstValue
from .batch import LOOP
from .core import (
    DIVISION, MathFn, Op, bool_dtype, complex_dtype, complex_only, float_only, inexact, real_dtype, real_only, register,
    same_dtype, same_shape,
)

# ----- sources -----


def _input_shape(*_, shape, dtype, index, name=None):
    return shape


def _input_dtype(*_, shape, dtype, index, name=None):
    return dtype


def _no_impl(*args, **kw):
    raise RuntimeError("input nodes are bound by the evaluator, not computed")


register(Op("input", 0, "source", _input_shape, _input_dtype, _no_impl, doc="a graph argument"))


def _const_shape(*_, value: ConstValue):
    return value.array.shape


def _const_dtype(*_, value: ConstValue):
    return value.array.dtype


register(Op("constant", 0, "source", _const_shape, _const_dtype, lambda value: value.array, differentiable=False,
            doc="a constant array (attr value)"))

# ----- unary math: derivative f'(x) given the input x and the output y -----


def _defunary(name: str, impl, deriv, doc: str = "", dtype_rule=float_only, **facts) -> Op:
    """Declare a unary op whose derivative is the elementwise factor deriv(x, y).

    `facts` are the record's other fields (math, magnitude, neg_zero, ...; see `Op`).
    """

    def vjp(ct, node):
        return (ct * deriv(node.inputs[0], node),)

    def jvp(tangents, node):
        (t,) = tangents
        return None if t is None else t * deriv(node.inputs[0], node)

    return register(Op(name, 1, "elementwise", same_shape, dtype_rule, impl, vjp, jvp, doc=doc, **facts))


def _sigmoid(x):
    # Stable for large |x|: never exponentiates a positive number.
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x):
    return _erf_vec(x).astype(x.dtype) if x.size else x.copy()


_defunary("exp", np.exp, lambda x, y: y, "e**x; derivative reuses the output",
          dtype_rule=inexact, math=MathFn("exp", "exp"), neg_zero="never")
_defunary("log", np.log, lambda x, y: 1.0 / x, "natural log", dtype_rule=inexact, math=MathFn("log", "log"), neg_zero="never")
_defunary("log1p", np.log1p, lambda x, y: 1.0 / (x + 1.0), "log(1 + x), accurate near 0", math=MathFn("log1p"))
_defunary("expm1", np.expm1, lambda x, y: y + 1.0, "e**x - 1, accurate near 0", math=MathFn("expm1"))
_defunary("sqrt", np.sqrt, lambda x, y: 0.5 / y, "square root; derivative 0.5/sqrt(x) reuses the output",
          dtype_rule=inexact, math=MathFn("sqrt", "sqrt"))
_defunary("sin", np.sin, lambda x, y: L.unary("cos", x), dtype_rule=inexact, math=MathFn("sin", "sin", ("f64", "f32")), magnitude="unit")
_defunary("cos", np.cos, lambda x, y: -L.unary("sin", x), dtype_rule=inexact, math=MathFn("cos", "cos", ("f64", "f32")),
          magnitude="unit", neg_zero="never")
_defunary("tan", np.tan, lambda x, y: 1.0 + y * y, "derivative 1 + tan**2 reuses the output",
          dtype_rule=inexact, math=MathFn("tan", "tan", ("f64", "f32")))
_defunary("tanh", np.tanh, lambda x, y: 1.0 - y * y, "derivative 1 - tanh**2 reuses the output",
          dtype_rule=inexact, math=MathFn("tanh", "tanh"), magnitude="unit")
_defunary("sigmoid", _sigmoid, lambda x, y: y * (1.0 - y), "logistic 1/(1+e**-x), stable; derivative y(1-y)",
          math=MathFn(None, via="exp"), magnitude="unit", neg_zero="never")
_defunary("erf", _erf, lambda x, y: (2.0 / math.sqrt(math.pi)) * L.unary("exp", -(x * x)), "error function",
          math=MathFn("erf", vector_auto=("f64",)), magnitude="unit")
_defunary("arcsinh", np.arcsinh, lambda x, y: 1.0 / L.unary("sqrt", x * x + 1.0), "inverse hyperbolic sine",
          math=MathFn("asinh"))
_defunary("abs", np.abs, lambda x, y: L.unary("sign", x, float_op=False), "absolute value; abs'(0) = 0",
          dtype_rule=real_only, magnitude="input", neg_zero="never")


def _zero_deriv(name: str, impl, dtype_rule=real_only, doc: str = "") -> Op:
    """A piecewise-constant op: zero derivative (differentiable=False)."""
    return register(Op(name, 1, "elementwise", same_shape, dtype_rule, impl, differentiable=False, doc=doc))


_zero_deriv("sign", np.sign, doc="-1, 0 or 1 (NaN for NaN); zero derivative")
_zero_deriv("floor", np.floor, doc="round toward -inf; zero derivative")
_zero_deriv("logical_not", np.logical_not, dtype_rule=lambda d, **_: np.dtype(bool), doc="boolean not")
_zero_deriv("isnan", np.isnan, dtype_rule=lambda d, **_: np.dtype(bool), doc="NaN test")


def _neg_vjp(ct, node):
    return (-ct,)


def _neg_jvp(t, node):
    return None if t[0] is None else -t[0]


register(Op("neg", 1, "elementwise", same_shape, same_dtype, np.negative, _neg_vjp, _neg_jvp, linear=True, doc="-x",
            magnitude="input", ring=True))


def _identity_vjp(ct, node):
    return (ct,)


def _identity_jvp(t, node):
    return t[0]


register(Op("copy", 1, "elementwise", same_shape, same_dtype, lambda x: x.copy(), _identity_vjp, _identity_jvp,
            linear=True, identity_of=0, magnitude="input", neg_zero=(0,), doc="identity; a fresh node (with a tag) for nested transformations, removed by simplify"))

register(Op("stop_gradient", 1, "elementwise", same_shape, same_dtype, lambda x: x.copy(), differentiable=False,
            identity_of=0, magnitude="input", neg_zero=(0,),
            doc="identity whose derivative is zero"))


def _cast_dtype(d, *, dtype):
    return np.dtype(dtype)


def _cast_impl(x, *, dtype):
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        return x.real.astype(dtype)  # complex to real keeps the real part (NumPy's value, without its ComplexWarning)
    return x.astype(dtype)


def _cast_vjp(ct, node):
    # complex -> real keeps the real part, real -> complex adds a zero imaginary part: under JAX's convention
    # (docs/complex.md) their VJPs are the other cast (a real cotangent gains a zero imaginary part; a complex
    # cotangent of a real -> complex cast keeps its real part)
    x = node.inputs[0]
    if x.dtype.kind not in "fc":
        return (None,)
    return (L.cast(ct, x.dtype),)


def _cast_jvp(t, node):
    if t[0] is None or node.dtype.kind not in "fc":
        return None
    return L.cast(t[0], node.dtype)


register(Op("cast", 1, "elementwise", same_shape, _cast_dtype, _cast_impl, _cast_vjp, _cast_jvp, linear=True,
            cheap=True, neg_zero=(0,),
            doc="dtype conversion (attr dtype); derivative flows float to float only"))

# ----- binary arithmetic -----


def _add_vjp(ct, node):
    return (ct, ct)


def _add_jvp(t, node):
    a, b = t
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _sub_vjp(ct, node):
    return (ct, -ct)


def _sub_jvp(t, node):
    a, b = t
    if b is None:
        return a
    if a is None:
        return -b
    return a - b


def _mul_vjp(ct, node):
    x, y = node.inputs
    return (ct * y, ct * x)


def _mul_jvp(t, node):
    x, y = node.inputs
    return _add_jvp((None if t[0] is None else t[0] * y, None if t[1] is None else x * t[1]), node)


def _div_vjp(ct, node):
    x, y = node.inputs
    # d(x/y)/dy = -x/y**2 = -out/y
    return (ct / y, -(ct * node) / y)


def _div_jvp(t, node):
    x, y = node.inputs
    tx, ty = t
    if ty is None:
        return tx / y
    num = -(node * ty) if tx is None else tx - node * ty
    return num / y


def _safe_log(x):
    # log(x) where x != 0, else 0: the y-derivative of x**y at x = 0 is 0 * log 0,
    # taken as 0 (the limit along y > 0), not NaN.
    zero = x == 0.0
    return L.where(zero, 0.0, L.unary("log", L.where(zero, 1.0, x)))


def _pow_vjp(ct, node):
    x, y = node.inputs
    return (ct * y * (x ** (y - 1.0)), ct * _safe_log(x) * node)


def _pow_jvp(t, node):
    x, y = node.inputs
    tx, ty = t
    a = None if tx is None else tx * y * (x ** (y - 1.0))
    b = None if ty is None else ty * _safe_log(x) * node
    return _add_jvp((a, b), node)


def _pow_impl(x, y):
    return np.power(x, y)


# -0.0 laws: a + b is -0 only if both are -0; a - b only if a is -0.
register(Op("add", 2, "elementwise", same_shape, same_dtype, np.add, _add_vjp, _add_jvp, linear=True, doc="x + y",
            commutative=True, associative=True, neg_zero=(0, 1), ring=True))
register(Op("sub", 2, "elementwise", same_shape, same_dtype, np.subtract, _sub_vjp, _sub_jvp, linear=True, doc="x - y",
            neg_zero=(0,), ring=True))
def _mul_impl(x, y):
    if x.ndim == 0 and x.dtype.kind == "c":
        # NumPy's complex product differs between its array loop (a fused multiply-add) and its scalars' `*`
        # (two roundings); 0-d values in NumPy code are scalars (reductions, indexing), so they take the latter
        return np.asarray(x[()] * y[()])
    return np.multiply(x, y)


register(Op("mul", 2, "elementwise", same_shape, same_dtype, _mul_impl, _mul_vjp, _mul_jvp, doc="x * y",
            commutative=True, associative=True, ring=True))
register(Op("div", 2, "elementwise", same_shape, inexact, np.true_divide, _div_vjp, _div_jvp, doc="x / y",
            cost=DIVISION))
register(Op("pow", 2, "elementwise", same_shape, same_dtype, _pow_impl, _pow_vjp, _pow_jvp,
            doc="x ** y; d/dy at x = 0 taken as 0", math=MathFn("pow", "pow", ("f32",))))


def _select_vjp(mask_fn):
    def vjp(ct, node):
        x, y = node.inputs
        m = mask_fn(x, y)
        return (L.where(m, ct, 0.0), L.where(m, 0.0, ct))

    return vjp


def _select_jvp(mask_fn):
    def jvp(t, node):
        x, y = node.inputs
        tx, ty = t
        if tx is None and ty is None:
            return None
        m = mask_fn(x, y)
        return L.where(m, L.zeros_like(node) if tx is None else tx, L.zeros_like(node) if ty is None else ty)

    return jvp


def _gt(x, y):
    return L.binary("gt", x, y)


def _lt(x, y):
    return L.binary("lt", x, y)


register(Op("maximum", 2, "elementwise", same_shape, real_only, np.maximum, _select_vjp(_gt), _select_jvp(_gt),
            doc="elementwise max (NaN propagates); tie: derivative goes to the second operand", selects=True))
register(Op("minimum", 2, "elementwise", same_shape, real_only, np.minimum, _select_vjp(_lt), _select_jvp(_lt),
            doc="elementwise min (NaN propagates); tie: derivative goes to the second operand", selects=True))

for _name, _fn, _comm in [("lt", np.less, False), ("le", np.less_equal, False), ("gt", np.greater, False),
                          ("ge", np.greater_equal, False), ("eq", np.equal, True), ("ne", np.not_equal, True)]:
    register(Op(_name, 2, "elementwise", same_shape, bool_dtype, _fn, differentiable=False, doc=f"comparison {_fn.__name__}",
                commutative=_comm))

for _name, _fn in [("logical_and", np.logical_and), ("logical_or", np.logical_or)]:
    register(Op(_name, 2, "elementwise", same_shape, bool_dtype, _fn, differentiable=False, doc=_fn.__name__,
                commutative=True, associative=True))

# ----- where -----


def _where_shape(c, a, b, **_):
    return same_shape(c, a, b)


def _where_dtype(c, a, b, **_):
    if np.dtype(c) != np.dtype(bool):
        raise DTypeError(f"where: condition has dtype {c}, expected bool")
    return same_dtype(a, b)


def _where_vjp(ct, node):
    c, a, b = node.inputs
    return (None, L.where(c, ct, 0.0), L.where(c, 0.0, ct))


def _where_jvp(t, node):
    c, a, b = node.inputs
    _, ta, tb = t
    if ta is None and tb is None:
        return None
    return L.where(c, L.zeros_like(node) if ta is None else ta, L.zeros_like(node) if tb is None else tb)


register(Op("where", 3, "elementwise", _where_shape, _where_dtype, np.where, _where_vjp, _where_jvp,
            doc="select(c, a, b); the condition gets no derivative", selects=True))

# ----- counter-based random bits -----

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer (Steele, Lea, Flood 2014), elementwise on uint64."""
    z = z.astype(np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def _rand_shape(k, *, shape, salt, dtype):
    if k != ():
        raise ShapeError(f"random_uniform: the key must be a scalar, got shape {k}")
    return shape


def _rand_dtype(k, *, shape, salt, dtype):
    if np.dtype(k).kind not in "iu":
        raise DTypeError(f"random_uniform: the key must be an integer, got {k}")
    return np.dtype(dtype)


def _rand_impl(key, *, shape, salt, dtype):
    """Uniform [0, 1) from a counter: u_i = top 53 bits of splitmix64(mix(key, salt) + i) / 2**53."""
    n = int(np.prod(shape, dtype=np.int64))
    with np.errstate(over="ignore"):
        base = splitmix64(np.asarray(key, dtype=np.uint64) ^ (np.uint64(salt) * _GOLDEN))
        bits = splitmix64(base + np.arange(n, dtype=np.uint64) * _GOLDEN)
    u = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return u.astype(dtype).reshape(shape)


register(Op("random_uniform", 1, "elementwise", _rand_shape, _rand_dtype, _rand_impl, differentiable=False,
            doc="counter-based uniform [0,1) bits from an integer key (attrs shape, salt, dtype); "
                "regenerated, never stored", random=True, batch=LOOP))

# ----- muladd: a*b + c with two roundings (made by simplify's polynomial stage) -----


def _muladd_impl(a, b, c):
    # Two roundings, never a fused multiply-add: bit for bit equal to mul then add,
    # NaN, inf and the sign of zero included.
    return np.add(np.multiply(a, b), c)


def _muladd_vjp(ct, node):
    a, b, _ = node.inputs
    return (ct * b, ct * a, ct)


def _muladd_jvp(t, node):
    a, b, _ = node.inputs
    ta, tb, tc = t
    prod = _add_jvp((None if ta is None else ta * b, None if tb is None else a * tb), node)
    return _add_jvp((prod, tc), node)


register(Op("muladd", 3, "elementwise", same_shape, inexact, _muladd_impl, _muladd_vjp, _muladd_jvp,
            doc="a*b + c rounded twice (equal to mul then add, not a fused multiply-add); "
                "the Horner steps of simplify's polynomial stage", neg_zero=(2,), commutative=True, ring=True))

# ----- fmod: C's fmod, the exact remainder of truncated division (the base of floor_divide/remainder) -----


def _neg_trunc_quotient(node):
    # -trunc(a/b) = (fmod(a, b) - a) / b, an integer up to one rounding: rounded to it, so that the
    # derivative is exact and piecewise constant (its own derivative is 0, as it should be)
    a, b = node.inputs
    return L.unary("floor", (node - a) / b + 0.5, float_op=False)


def _fmod_vjp(ct, node):
    # fmod(a, b) = a - trunc(a/b) * b
    return (ct, ct * _neg_trunc_quotient(node))


def _fmod_jvp(t, node):
    ta, tb = t
    return _add_jvp((ta, None if tb is None else tb * _neg_trunc_quotient(node)), node)


register(Op("fmod", 2, "elementwise", same_shape, float_only, np.fmod, _fmod_vjp, _fmod_jvp,
            doc="C fmod: a - trunc(a/b)*b, exact, sign of a (NaN for b = 0 or infinite a); "
                "derivatives 1 and -trunc(a/b)", cost=DIVISION))

# ----- integer floor division and remainder (NumPy's integer // and %) -----


def _int_only(*dtypes, **_):
    """Operands share one integer dtype (bool is cast to int8 first, as NumPy's floor_divide does)."""
    d = same_dtype(*dtypes)
    if d.kind not in "iu":
        raise DTypeError(f"needs integer operands, got {d}")
    return d


def _int_floordiv_impl(a, b):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # b = 0 gives 0, MIN // -1 wraps
        return np.floor_divide(a, b)


def _int_mod_impl(a, b):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # b = 0 gives 0
        return np.remainder(a, b)


register(Op("int_floordiv", 2, "elementwise", same_shape, _int_only, _int_floordiv_impl, differentiable=False,
            cost=DIVISION, doc="integer a // b as NumPy: floor toward -inf; b = 0 gives 0; MIN // -1 wraps to MIN"))
register(Op("int_mod", 2, "elementwise", same_shape, _int_only, _int_mod_impl, differentiable=False, cost=DIVISION,
            doc="integer a % b as NumPy: the sign of b; b = 0 gives 0; MIN % -1 is 0"))

# ----- issue 17: the other differentiable NumPy ufuncs -----
#
# Conventions where a derivative is undefined (docs/differentiation.md, "Conventions at kinks and ties"):
# an infinite one-sided derivative at a domain edge stays infinite (arcsin'(+-1), arccos'(+-1), arctanh'(+-1),
# arccosh'(1), cbrt'(0) = +inf, as sqrt'(0)); a kink or a point where two branches meet takes 0, as abs'(0):
# hypot at (0, 0), arctan2 at (0, 0), copysign(x, y) in x at x = 0; piecewise-constant ops (ceil, trunc,
# rint, signbit) and copysign in its second argument have zero derivative.


def _safe_recip_sqrt_product(a, b):
    """1 / (sqrt(a) * sqrt(b)): no overflow of a * b for huge arguments (arccosh'(1e200) is 1e-200, not 0)."""
    return 1.0 / (L.unary("sqrt", a) * L.unary("sqrt", b))


_defunary("arcsin", np.arcsin, lambda x, y: _safe_recip_sqrt_product(1.0 - x, 1.0 + x),
          "inverse sine; derivative 1/sqrt((1-x)(1+x)), +inf at +-1", math=MathFn("asin"), neg_zero=(0,))
_defunary("arccos", np.arccos, lambda x, y: -_safe_recip_sqrt_product(1.0 - x, 1.0 + x),
          "inverse cosine; derivative -1/sqrt((1-x)(1+x)), -inf at +-1", math=MathFn("acos"), neg_zero="never")
_defunary("arctan", np.arctan, lambda x, y: 1.0 / (1.0 + x * x), "inverse tangent; derivative 1/(1+x**2)",
          math=MathFn("atan"), neg_zero=(0,))
_defunary("arccosh", np.arccosh, lambda x, y: _safe_recip_sqrt_product(x - 1.0, x + 1.0),
          "inverse hyperbolic cosine; derivative 1/sqrt((x-1)(x+1)), +inf at 1", math=MathFn("acosh"),
          neg_zero="never")
_defunary("arctanh", np.arctanh, lambda x, y: 1.0 / ((1.0 - x) * (1.0 + x)),
          "inverse hyperbolic tangent; derivative 1/((1-x)(1+x)), +inf at +-1", math=MathFn("atanh"), neg_zero=(0,))
_defunary("cbrt", np.cbrt, lambda x, y: (1.0 / 3.0) / (y * y),
          "real cube root; derivative 1/(3 cbrt(x)**2) reuses the output, +inf at 0", math=MathFn("cbrt"),
          neg_zero=(0,))
_defunary("log2", np.log2, lambda x, y: (1.0 / math.log(2.0)) / x,
          "base-2 logarithm (exact at powers of two); derivative 1/(x ln 2)", math=MathFn("log2"), neg_zero="never")
_defunary("log10", np.log10, lambda x, y: (1.0 / math.log(10.0)) / x,
          "base-10 logarithm; derivative 1/(x ln 10)", math=MathFn("log10", vector_inexact=("f64", "f32")), neg_zero="never")

_zero_deriv("ceil", np.ceil, doc="round toward +inf (ceil(-0.5) = -0.0); zero derivative")
_zero_deriv("trunc", np.trunc, doc="round toward 0; zero derivative")
_zero_deriv("rint", np.rint, dtype_rule=float_only, doc="round to the nearest integer, ties to even; zero derivative")
_zero_deriv("signbit", np.signbit, dtype_rule=lambda d, **_: np.dtype(bool),
            doc="sign bit set (True for -0.0 and negative NaNs; x < 0 for integers)")


def _defbinary(name: str, impl, dx, dy, doc: str = "", dtype_rule=float_only, **facts) -> Op:
    """Declare a binary op whose partial derivatives are the elementwise factors dx(node), dy(node).

    A factor function returns a node, or None for a zero partial derivative.
    """

    def vjp(ct, node):
        factors = [None if d is None else d(node) for d in (dx, dy)]
        return tuple(None if f is None else ct * f for f in factors)

    def jvp(tangents, node):
        terms = [t * d(node) for t, d in zip(tangents, (dx, dy)) if t is not None and d is not None]
        if not terms:
            return None
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]

    return register(Op(name, 2, "elementwise", same_shape, dtype_rule, impl, vjp, jvp, doc=doc, **facts))


def _over_hypot(num, node_r):
    """num / r where r != 0, else 0 (r = hypot of the operands): the (0, 0) convention, NaN-free to any order."""
    zero = L.binary("eq", node_r, L.zeros_like(node_r))
    return L.where(zero, 0.0, num / L.where(zero, 1.0, node_r))


def _hypot_of(node):
    return L.binary("hypot", node.inputs[0], node.inputs[1])


_defbinary("hypot", np.hypot, lambda n: _over_hypot(n.inputs[0], n), lambda n: _over_hypot(n.inputs[1], n),
           "sqrt(x**2 + y**2) without overflow; derivatives x/r and y/r, 0 at (0, 0)", math=MathFn("hypot"),
           commutative=True, neg_zero="never")
_defbinary("arctan2", np.arctan2,
           lambda n: _over_hypot(_over_hypot(n.inputs[1], _hypot_of(n)), _hypot_of(n)),
           lambda n: -_over_hypot(_over_hypot(n.inputs[0], _hypot_of(n)), _hypot_of(n)),
           "angle of the point (x2, x1) in (-pi, pi]; derivatives x2/r**2 and -x1/r**2, 0 at (0, 0)",
           math=MathFn("atan2"))


def _copysign_dx(node):
    x, y = node.inputs
    return L.unary("sign", x, float_op=False) * L.binary("copysign", L.full_like(y, 1.0), y)


_defbinary("copysign", np.copysign, _copysign_dx, None,
           "|x1| with the sign bit of x2 (also of -0.0 and NaN); derivative sign(x1) * (+-1) in x1 "
           "(0 at x1 = 0, as abs), 0 in x2", magnitude="input")

# ----- complex parts (docs/complex.md) -----
#
# Derivatives follow JAX's convention: a cotangent g of a value w stands for the real linear functional
# dw -> Re(g * dw) (no conjugation), so holomorphic ops keep their real rules (ct * f'(z)) and only the
# ops below, which are R-linear but not C-linear, have rules of their own:
#   conj: g -> conj(g);  real: g -> g + 0j;  imag: g -> -1j * g;  complex(x, y): g -> (Re g, -Im g).


def _real_part_dtype(d, **_):
    d = complex_only(d)
    return real_dtype(d)


def _complex_of_dtype(a, b, **_):
    d = same_dtype(a, b)
    if d.kind != "f":
        raise DTypeError(f"complex: needs float32 or float64 parts, got {d}")
    return complex_dtype(d)


def _conj_vjp(ct, node):
    return (L.bind("conj", ct),)


def _conj_jvp(t, node):
    return None if t[0] is None else L.bind("conj", t[0])


def _real_vjp(ct, node):
    return (L.cast(ct, node.inputs[0].dtype),)


def _real_jvp(t, node):
    return None if t[0] is None else L.bind("real", t[0])


def _imag_vjp(ct, node):
    return (L.bind("complex", L.zeros_like(ct), -ct),)


def _imag_jvp(t, node):
    return None if t[0] is None else L.bind("imag", t[0])


def _complex_vjp(ct, node):
    return (L.bind("real", ct), -L.bind("imag", ct))


def _complex_jvp(t, node):
    tx, ty = t
    if tx is None and ty is None:
        return None
    x, y = node.inputs
    return L.bind("complex", L.zeros_like(x) if tx is None else tx, L.zeros_like(y) if ty is None else ty)


def _complex_impl(x, y):
    out = np.empty(np.shape(x), complex_dtype(np.result_type(x, y)))
    out.real = x
    out.imag = y
    return out


register(Op("conj", 1, "elementwise", same_shape, complex_only, np.conjugate, _conj_vjp, _conj_jvp, linear=True,
            doc="complex conjugate x - iy (NumPy's conjugate: the imaginary part's sign flipped, -0.0 included)"))
register(Op("real", 1, "elementwise", same_shape, _real_part_dtype, lambda x: x.real.copy(), _real_vjp, _real_jvp, linear=True,
            copies_input=False, doc="real part of a complex array (complex64 -> float32, complex128 -> float64)"))
register(Op("imag", 1, "elementwise", same_shape, _real_part_dtype, lambda x: x.imag.copy(), _imag_vjp, _imag_jvp, linear=True,
            copies_input=False, doc="imaginary part of a complex array (complex64 -> float32, complex128 -> float64)"))
register(Op("complex", 2, "elementwise", same_shape, _complex_of_dtype, _complex_impl, _complex_vjp, _complex_jvp,
            linear=True, doc="x + iy from float parts, exactly (no arithmetic: -0.0, inf and NaN parts kept)"))


def _cabs_dtype(d, **_):
    return real_dtype(complex_only(d))


def _unit_phase(node):
    """conj(z) / |z| where |z| != 0, else 0 (abs'(0) = 0, as for real abs): the derivative of |z| (node = |z|)."""
    z = node.inputs[0]
    zero = L.binary("eq", node, L.zeros_like(node))
    r = L.cast(L.where(zero, 1.0, node), z.dtype)
    return L.where(zero, 0.0, L.bind("conj", z) / r)


def _cabs_vjp(ct, node):
    return (L.cast(ct, node.inputs[0].dtype) * _unit_phase(node),)


def _cabs_jvp(t, node):
    return None if t[0] is None else L.bind("real", _unit_phase(node) * t[0])


register(Op("complex_abs", 1, "elementwise", same_shape, _cabs_dtype, np.abs, _cabs_vjp, _cabs_jvp,
            neg_zero="never", doc="|z| of a complex array as NumPy computes it (scaled, without overflow); "
                                  "a real result; derivative conj(z)/|z| under JAX's convention, 0 at z = 0"))
