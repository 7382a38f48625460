"""Exact constants and polynomial coefficients of the vector-math polynomials (decimal arithmetic, 100 digits).

Cody-Waite splits of ln 2 and pi/2, the Payne-Hanek table of 2/pi for float32 arguments,
Taylor coefficients computed from exact formulas, and the erf sets fitted with mpmath by
`fit_chebyshev` (the generator; mpmath is a dev dependency, not used at run time). Read by
`codegen.llvm.vmath.poly`.
"""

from __future__ import annotations

import decimal
import math

__all__ = [
    "LN2_F64", "LN2_F32", "LN2_DD", "PIO2_4", "TWO_OVER_PI", "PIO2_TABLE_F32", "PIO2_F64", "LOG2E",
    "TWO_THIRDS_DD", "EXP_F64", "EXP_F32", "EXPM1_F64", "EXPM1_F32", "LOG_F64", "LOG_F32", "LOG_TAIL_F64",
    "SIN_F64", "COS_F64", "SIN_F32", "COS_F32", "ERF_SMALL_F64", "ERF_PIECES_F64", "ERF_SMALL_F32",
    "ERF_PIECES_F32", "fit_chebyshev",
]

_CTX = decimal.Context(prec=100)
_PI = _CTX.create_decimal(
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798")
_LN2 = _CTX.ln(decimal.Decimal(2))


def _round_bits(v: decimal.Decimal, nbits: int) -> float:
    """`v` rounded to `nbits` significant bits (a float whose low bits are zero)."""
    if v == 0:
        return 0.0
    _, e = math.frexp(float(v))
    scaled = _CTX.multiply(v, _CTX.power(decimal.Decimal(2), nbits - e))
    return math.ldexp(int(scaled.to_integral_value(rounding=decimal.ROUND_HALF_EVEN)), e - nbits)


def _split(v: decimal.Decimal, nbits: int, parts: int, last_bits: int = 53) -> tuple[float, ...]:
    """Cody-Waite split: v = sum(out) + tiny; every part but the last has `nbits` bits."""
    out = []
    for i in range(parts):
        part = _round_bits(v, nbits if i < parts - 1 else last_bits)
        out.append(part)
        v = _CTX.subtract(v, decimal.Decimal(part))
    return tuple(out)


def _taylor(start: int, stop: int, step: int = 1, alternate: bool = False) -> list[float]:
    """Coefficients 1/k! (times (-1)^j if alternate) for k = start, start+step, ... < stop."""
    out = []
    for j, k in enumerate(range(start, stop, step)):
        c = _CTX.divide(1, math.factorial(k))
        out.append(float(-c if alternate and j % 2 else c))
    return out


# ln 2 split so that n * hi is exact for |n| < 2**13 (f64) / 2**8 (f32).
LN2_F64 = _split(_LN2, 40, 2)
LN2_F32 = _split(_LN2, 16, 2, last_bits=24)
LN2_DD = _split(_LN2, 53, 2)  # double-double ln 2 for pow
# pi/2 in 4 pieces: 29, 29, 29 bits and a full double: j * piece exact for |j| < 2**24.
PIO2_4 = _split(_CTX.divide(_PI, 2), 29, 4)
TWO_OVER_PI = float(_CTX.divide(2, _PI))


def _pio2_table_f32() -> list[float]:
    """(2**e * 2/pi) mod 4 for e = 0..104 as three 28-bit chunks at weights 2**-26, 2**-54, 2**-82.

    Row e serves float32 x = M * 2**e (M a 24-bit integer): M * chunk is exact
    in float64, and M * (2/pi * 2**e mod 4) = x * 2/pi (mod 4). Payne & Hanek
    (1983) table idea, in floating point like fdlibm's __kernel_rem_pio2.
    """
    two_over_pi = _CTX.divide(2, _PI)  # 100 digits: ~330 bits, the table needs 2/pi to 2**-187
    mask = (1 << 28) - 1
    out = []
    for e in range(105):
        scaled = _CTX.multiply(two_over_pi, _CTX.power(decimal.Decimal(2), e + 82))
        t = int(scaled.to_integral_value(rounding=decimal.ROUND_FLOOR)) % (1 << 84)
        out += [math.ldexp(t >> 56, -26), math.ldexp((t >> 28) & mask, -54), math.ldexp(t & mask, -82)]
    return out


PIO2_TABLE_F32 = _pio2_table_f32()
PIO2_F64 = float(_CTX.divide(_PI, 2))
LOG2E = float(_CTX.divide(1, _LN2))
TWO_THIRDS_DD = _split(_CTX.divide(2, 3), 53, 2)

# exp(r), |r| <= ln2/2: Taylor to degree 13 (f64, truncation < 2**-62) / 7 (f32).
EXP_F64 = _taylor(0, 14)
EXP_F32 = _taylor(0, 8)
# (exp(r) - 1 - r) / r**2 = sum r**(k-2)/k!, k >= 2.
EXPM1_F64 = _taylor(2, 14)
EXPM1_F32 = _taylor(2, 9)
# log(1+f) = 2 atanh(s), s = f/(2+f): R(z) = sum_{j>=1} 2 z**j/(2j+1), z = s**2 <= 0.0295 (fdlibm's form).
LOG_F64 = [float(_CTX.divide(2, 2 * j + 1)) for j in range(1, 11)]
LOG_F32 = [float(_CTX.divide(2, 2 * j + 1)) for j in range(1, 6)]
# pow's double-double log: tail after 2s + (2/3)s**3: s**5 * sum_{j>=2} 2 z**(j-2)/(2j+1).
LOG_TAIL_F64 = [float(_CTX.divide(2, 2 * j + 1)) for j in range(2, 12)]
# sin r = r + r**3 * S(r**2), cos r = 1 - r**2/2 + r**4 * C(r**2), |r| <= pi/4: Taylor.
SIN_F64 = _taylor(3, 23, 2, alternate=True)
SIN_F64 = [-c for c in SIN_F64] if SIN_F64[0] > 0 else SIN_F64
COS_F64 = _taylor(4, 22, 2, alternate=True)
SIN_F32 = [c for c in SIN_F64[:5]]
COS_F32 = [c for c in COS_F64[:5]]

# erf: |x| < 1: erf(x) = x * P(x**2) (P interpolates erf(sqrt u)/sqrt u on u in [0, 1]);
# 1 <= |x| < top: erf(x) = 1 - exp(-x**2) * R(|x|), R(x) = exp(x**2) erfc(x) interpolated on pieces
# in t = x - center. Fitted by `fit_chebyshev` (mpmath, 200 bits, Chebyshev nodes), error bound
# 0.5 ulp of the result measured on 1000 points per piece. Same structure as Cephes/fdlibm erf
# (polynomial near 0, exp(-x**2) times a fitted factor beyond), own coefficients.
ERF_SMALL_F64 = (
    1.1283791670955126, -0.3761263890318375, 0.11283791670954879, -0.026866170645076792, 0.0052239776248180145,
    -0.000854832698083379, 0.0001205533111164271, -1.4925595266831182e-05, 1.6461000484121368e-06,
    -1.6350312701054695e-07, 1.4659775274047436e-08, -1.1372848856791674e-09, 5.957176147748911e-11)
ERF_PIECES_F64 = (  # (upper bound, center, coefficients in t = |x| - center)
    (2.0, 1.5, (0.3215854164543175, -0.16362291773256282, 0.07615103985547814, -0.03293090529915301,
                0.013377340952957192, -0.00514595756566068, 0.0018861348817560994, -0.0006619297304232824,
                0.00022330985450405092, -7.266219599461766e-05, 2.2865187808212496e-05, -6.957954859174092e-06,
                2.06241304824337e-06, -6.409316664251228e-07, 1.7955431767928597e-07)),
    (3.5, 2.75, (0.1936620962790687, -0.06323763756064137, 0.019758592987324287, -0.005934337896564839,
                 0.001719581885194874, -0.0004821950932829294, 0.00013118180233874277, -3.469853951374473e-05,
                 8.940140785092413e-06, -2.247676321583971e-06, 5.520418140550562e-07, -1.3192706697647487e-07,
                 3.105710607611476e-08, -8.01181001890603e-09, 1.8069520510416326e-09)),
    (6.0, 4.75, (0.11630270721024731, -0.023503448598184106, 0.004661326368975751, -0.0009080988965295504,
                 0.00017392830395924388, -3.277578458228431e-05, 6.081115111613391e-06, -1.1115572633944996e-06,
                 2.002902676243289e-07, -3.561197334926809e-08, 6.245076194116008e-09, -1.067362355598649e-09,
                 1.8262093529973392e-10, -3.67690156375927e-11, 6.117844467471036e-12)),
)
ERF_SMALL_F32 = (1.1283791065216064, -0.3761262595653534, 0.11283594369888306, -0.02685421146452427,
                  0.005189087241888046, -0.000801686430349946, 7.875874871388078e-05)
ERF_PIECES_F32 = (
    (2.2, 1.6, (0.3059529662132263, -0.14932958781719208, 0.0670277401804924, -0.0280597023665905,
                0.011036718264222145, -0.004132481291890144, 0.0016060734633356333, -0.0005470365867950022)),
    (4.0, 3.1, (0.1737183928489685, -0.051325030624866486, 0.01461140625178814, -0.004021168686449528,
                0.0010691164061427116, -0.00027726171538233757, 7.73644496803172e-05, -1.896351204777602e-05)),
)


def fit_chebyshev(f, a: float, b: float, degree: int, center: float, prec: int = 200) -> list[float]:
    """Interpolate `f` at Chebyshev nodes of [a, b]; monomial coefficients in t = x - center.

    The generator of the erf coefficient sets above (needs mpmath, a dev
    dependency; not used at run time). Example:
    ``fit_chebyshev(lambda x: mp.exp(x*x) * mp.erfc(x), 1, 2, 14, 1.5)``.

    Args:
        f: an mpmath function of one mpf.
        a: left end of the interval.
        b: right end of the interval.
        degree: polynomial degree.
        center: the expansion point of the returned coefficients.
        prec: mpmath working precision in bits.

    Returns:
        degree + 1 floats, lowest order first.

    References:
        Trefethen, "Approximation Theory and Approximation Practice", ch. 4.
    """
    import mpmath as mp

    with mp.workprec(prec):
        n = degree + 1
        a, b, c = mp.mpf(a), mp.mpf(b), mp.mpf(center)
        xs = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (2 * k + 1) / (2 * n)) for k in range(n)]
        mat = mp.matrix([[(x - c) ** j for j in range(n)] for x in xs])
        sol = mp.lu_solve(mat, mp.matrix([f(x) for x in xs]))
        return [float(v) for v in sol]


# ----- IR building helpers -----
