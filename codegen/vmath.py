"""Vectorizable elementwise math for the LLVM backend (exp, log, tanh, sin, pow, ...).

`emit` writes the *scalar* computation of a transcendental function at an
llvmlite builder's position, in a form that LLVM's LoopVectorizer turns into
packed SIMD code. Two implementations:

- "libmvec" (x86-64 glibc): a scalar libm call that carries the VFABI
  call-site attribute ``vector-function-abi-variant`` naming glibc's libmvec
  vector variants (``_ZGVdN4v_exp`` for AVX2, ``_ZGVeN8v_exp`` for AVX-512);
  the vectorizer replaces the call by the packed variant.
- "poly" (every host): branch-free range reduction + polynomial IR in an
  ``alwaysinline`` helper function, so it vectorizes like any arithmetic.
  Coefficients are Taylor coefficients computed here from exact formulas, or
  Chebyshev interpolants fitted with mpmath (`fit_chebyshev`); the algorithms
  follow Cephes, fdlibm and SLEEF (cited per function). No code was copied.

"auto" (the default) takes libmvec where the op record says so
(`MathFn.vector_auto`: sin/cos/tan, float64 erf and float32 pow) and the
polynomials elsewhere (measurements in docs/vmath.md). A function without a
polynomial here takes libmvec whenever glibc has it, else a scalar libm call
(correct, not vectorized). Which functions exist, their arity, libm names and
"auto" choices are facts of the op records (`symgraph.ops.Op.math`); this
module holds only the polynomial implementations and the libmvec plumbing.

Public names: `FUNCTIONS`, `IMPLS`, `emit`, `prepare_module`,
`function_attributes`, `apply_function_attributes`, `runtime_init`,
`libmvec_available`, `set_default_impl`, `get_default_impl`, `config_key`,
`fit_chebyshev`, `POLY_SIN_COS_EXACT_LIMIT`, `POLY_TRIG_NAN_LIMIT`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import decimal
import math
import os
import platform
import sys
import threading
from functools import cache

import numpy as np
from llvmlite import ir
from llvmlite.ir.instructions import CallInstrAttributes

from symgraph.ops import OPS

__all__ = [
    "FUNCTIONS",
    "IMPLS",
    "POLY_SIN_COS_EXACT_LIMIT",
    "POLY_TRIG_NAN_LIMIT",
    "apply_function_attributes",
    "config_key",
    "emit",
    "fit_chebyshev",
    "function_attributes",
    "get_default_impl",
    "libmvec_available",
    "prepare_module",
    "runtime_init",
    "set_default_impl",
]

#: op name -> number of arguments of every function `emit` knows: the ops whose record has `math`.
FUNCTIONS: dict[str, int] = {op.name: op.nin for op in OPS.values() if op.math is not None}

#: Implementation choices for `emit(impl=...)` and `set_default_impl`.
IMPLS = ("auto", "libmvec", "poly")

#: In the "poly" implementation sin/cos/tan reduce the argument exactly (error
#: < 2 ulp overall) for |x| below this bound (2**24 * pi/2); above it the
#: Cody-Waite reduction is no longer exact and the absolute error grows like
#: |x| * 2**-52 (see docs/vmath.md). The "libmvec" path has no such limit.
POLY_SIN_COS_EXACT_LIMIT = 2.0 ** 24 * (math.pi / 2)
#: ... and between that bound and this one, the float64 "poly" result is f(x + d)
#: with |d| <= ulp(x)/2 (measured); from here on (every double is an integer)
#: it is NaN. float32 "poly" reduces every finite argument exactly (table-driven).
POLY_TRIG_NAN_LIMIT = 2.0 ** 52

# The C names looked up in libmvec (glibc >= 2.35 has most, 2.22 exp/log/sin/cos/pow): every op's libm name.
_LIBM_NAMES: dict[str, int] = {OPS[f].math.libm: n for f, n in FUNCTIONS.items() if OPS[f].math.libm}
# x86 VFABI ISA letters: b = SSE4, c = AVX, d = AVX2, e = AVX-512; vector bits and the host feature.
_ISAS = (("b", 128, "sse4.1"), ("c", 256, "avx"), ("d", 256, "avx2"), ("e", 512, "avx512f"))

_lock = threading.Lock()
_libmvec: dict[tuple[str, str], tuple[tuple[str, int], ...]] | None = None  # (func, "f64"/"f32") -> ((isa, vf),)
_libmvec_path: str | None = None
_default_impl = os.environ.get("SYMGRAPH_VMATH", "auto")
if _default_impl not in IMPLS:  # pragma: no cover - environment misconfiguration
    _default_impl = "auto"


# ----- configuration and runtime -----


def set_default_impl(impl: str) -> str:
    """Choose the implementation `emit` uses when its `impl` argument is None.

    Args:
        impl: "auto" (libmvec for float64 when available, else polynomial),
            "libmvec" (libmvec where it has the function, for float64 and
            float32, else polynomial) or "poly" (polynomial IR only: the
            portable path for macOS/musl/non-x86 hosts).

    Returns:
        The previous default. The environment variable SYMGRAPH_VMATH sets the
        initial value.

    Raises:
        ValueError: for an unknown name.
    """
    global _default_impl
    if impl not in IMPLS:
        raise ValueError(f"vmath impl must be one of {IMPLS}, got {impl!r}")
    previous, _default_impl = _default_impl, impl
    return previous


def get_default_impl() -> str:
    """Return the implementation `emit` uses by default ("auto", "libmvec" or "poly")."""
    return _default_impl


@cache
def _host_features() -> frozenset:
    from llvmlite import binding as llvm

    try:
        fmap = llvm.get_host_cpu_features()
    except RuntimeError:  # pragma: no cover - hosts where LLVM cannot tell
        return frozenset()
    return frozenset(k for k, v in fmap.items() if v)


def _is_x86_64_linux() -> bool:
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


def runtime_init() -> bool:
    """Load glibc's libmvec into the process once and record its vector variants.

    Safe to call any number of times and from several threads; the first call
    does the work. Without libmvec (non-glibc, non-x86-64, old glibc) it
    returns False without error and `emit` uses the polynomial path. Must run
    before MCJIT finalizes code that calls libmvec (emit calls it itself, and
    code loaded from an on-disk object cache needs it too).

    Returns:
        True when libmvec is loaded and at least one variant usable on this
        host's ISA was found.
    """
    global _libmvec, _libmvec_path
    if _libmvec is not None:
        return bool(_libmvec)
    with _lock:
        if _libmvec is not None:
            return bool(_libmvec)
        found: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {}
        if _is_x86_64_linux():
            lib = None
            # the soname first: find_library runs `ldconfig -p` in a subprocess (~2 ms)
            for path in ("libmvec.so.1", None):
                try:
                    path = path or ctypes.util.find_library("mvec")
                    if not path:
                        break
                    lib = ctypes.CDLL(path)
                    from llvmlite import binding as llvm

                    llvm.load_library_permanently(path)
                    break
                except (OSError, RuntimeError):
                    lib = None
            if lib is not None:
                _libmvec_path = path
                feats = _host_features()
                for func, nargs in _LIBM_NAMES.items():
                    for kind, suffix, ebits in (("f64", "", 64), ("f32", "f", 32)):
                        params = "v" * nargs
                        variants = []
                        for isa, vbits, feature in _ISAS:
                            vf = vbits // ebits
                            if feature in feats and hasattr(lib, f"_ZGV{isa}N{vf}{params}_{func}{suffix}"):
                                variants.append((isa, vf))
                        # one variant per vector width: prefer the newest ISA (AVX2 over AVX)
                        by_vf = {vf: isa for isa, vf in variants}
                        if by_vf:
                            found[(func, kind)] = tuple(sorted((isa, vf) for vf, isa in by_vf.items()))
        _libmvec = found
        return bool(found)


def libmvec_available(name: str = "exp", dtype: str = "float64") -> bool:
    """Whether `emit` can use libmvec for `name` at `dtype` on this host (loads it if needed).

    Args:
        name: an op name of `FUNCTIONS` ("arcsinh") or a C name ("asinh").
        dtype: float64 or float32.
    """
    runtime_init()
    kind = "f64" if np.dtype(dtype) == np.float64 else "f32"
    return bool(_libmvec and (_libm_name(name), kind) in _libmvec)


def _libm_name(name: str) -> str:
    """The C function libmvec is searched for: the op's libm name, or for a composite the one it uses."""
    op = OPS.get(name)
    spec = op.math if op is not None else None
    if spec is None:
        return name
    return spec.libm or spec.via


def function_attributes() -> list[str]:
    """Function attributes for kernel functions whose loops call `emit`.

    Returns:
        Attribute strings in LLVM syntax, e.g. ``['"prefer-vector-width"="512"']``
        on AVX-512 hosts (without it the cost model keeps 256-bit vectors and
        the AVX-512 libmvec variants are never chosen). Attach them with
        `apply_function_attributes` (llvmlite's attribute set rejects quoted
        string attributes).
    """
    attrs = []
    if "avx512f" in _host_features():
        attrs.append('"prefer-vector-width"="512"')
    return attrs


class _OpenFunctionAttributes(ir.FunctionAttributes):
    """llvmlite function attributes that also accept ``"key"="value"`` and ``memory(...)``."""

    def add(self, name):
        if name in self._known:
            return super().add(name)
        return set.add(self, name)


class _OpenCallAttributes(CallInstrAttributes):
    """llvmlite call-site attributes that also accept ``"key"="value"`` and ``memory(...)``."""

    def add(self, name):
        if name in self._known:
            return super().add(name)
        return set.add(self, name)


def _open_attributes(fn: ir.Function) -> _OpenFunctionAttributes:
    attrs = fn.attributes
    if not isinstance(attrs, _OpenFunctionAttributes):
        new = _OpenFunctionAttributes()
        for a in attrs:
            set.add(new, a)
        new.alignstack = attrs.alignstack
        new.personality = attrs.personality
        fn.attributes = new
    return fn.attributes


def apply_function_attributes(fn: ir.Function, extra: list[str] | tuple[str, ...] = ()) -> None:
    """Attach `function_attributes()` (and `extra`) to an llvmlite function definition.

    Args:
        fn: the kernel function (llvmlite.ir.Function).
        extra: more attribute strings in LLVM syntax.
    """
    attrs = _open_attributes(fn)
    for a in [*function_attributes(), *extra]:
        attrs.add(a)


def config_key() -> str:
    """A short string naming every choice that changes the code `emit` generates.

    Put it in compile-cache keys next to the CPU name and features.
    """
    runtime_init()
    mv = ",".join(f"{f}.{k}:{'+'.join(f'{i}{v}' for i, v in var)}" for (f, k), var in sorted((_libmvec or {}).items()))
    return f"vmath1;impl={_default_impl};fma={'fma' in _host_features()};libmvec={mv or 'none'}"


# ----- module bookkeeping -----

_USED = "llvm.compiler.used"


def _update_compiler_used(module: ir.Module, fns) -> None:
    """Make `llvm.compiler.used` list `fns` (keeps entries already there)."""
    gv = module.globals.get(_USED)
    refs: list[str] = []
    if gv is not None and gv.initializer is not None:
        refs = [c.get_reference().split(" ", 1)[-1] for c in gv.initializer.constant]
    for fn in fns:
        ref = fn.get_reference()
        if ref not in refs:
            refs.append(ref)
    ptr = ir.PointerType()
    arr = ir.ArrayType(ptr, len(refs))
    if gv is None:
        gv = ir.GlobalVariable(module, arr, _USED)
        gv.linkage = "appending"
        gv.section = "llvm.metadata"
    gv.value_type = arr
    gv.initializer = ir.Constant(arr, [ir.FormattedConstant(ptr, r) for r in refs])


def _module_variants(module: ir.Module) -> list:
    reg = getattr(module, "_symgraph_vmath_variants", None)
    if reg is None:
        reg = []
        module._symgraph_vmath_variants = reg
    return reg


def prepare_module(module: ir.Module) -> None:
    """Add the globals `emit`'s calls need; idempotent, callable before or after `emit`.

    `emit` already declares what it uses and keeps `llvm.compiler.used` (the
    list that keeps libmvec variant declarations alive until the vectorizer
    runs) up to date; this call re-syncs that list (for example after another
    component rebuilt the global) and loads libmvec into the process.

    Args:
        module: the llvmlite module holding the kernels.
    """
    runtime_init()
    variants = _module_variants(module)
    if variants:
        _update_compiler_used(module, variants)


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, fnty, name)
    return fn


def _intrinsic(module: ir.Module, base: str, ty, nargs: int) -> ir.Function:
    suffix = "f64" if isinstance(ty, ir.DoubleType) else "f32"
    return _declare(module, f"{base}.{suffix}", ir.FunctionType(ty, [ty] * nargs))


# ----- exact constants (decimal arithmetic, 100 digits) -----

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
_LN2_F64 = _split(_LN2, 40, 2)
_LN2_F32 = _split(_LN2, 16, 2, last_bits=24)
_LN2_DD = _split(_LN2, 53, 2)  # double-double ln 2 for pow
# pi/2 in 4 pieces: 29, 29, 29 bits and a full double: j * piece exact for |j| < 2**24.
_PIO2_4 = _split(_CTX.divide(_PI, 2), 29, 4)
_TWO_OVER_PI = float(_CTX.divide(2, _PI))


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


_PIO2_TABLE_F32 = _pio2_table_f32()
_PIO2_F64 = float(_CTX.divide(_PI, 2))
_LOG2E = float(_CTX.divide(1, _LN2))
_TWO_THIRDS_DD = _split(_CTX.divide(2, 3), 53, 2)

# exp(r), |r| <= ln2/2: Taylor to degree 13 (f64, truncation < 2**-62) / 7 (f32).
_EXP_F64 = _taylor(0, 14)
_EXP_F32 = _taylor(0, 8)
# (exp(r) - 1 - r) / r**2 = sum r**(k-2)/k!, k >= 2.
_EXPM1_F64 = _taylor(2, 14)
_EXPM1_F32 = _taylor(2, 9)
# log(1+f) = 2 atanh(s), s = f/(2+f): R(z) = sum_{j>=1} 2 z**j/(2j+1), z = s**2 <= 0.0295 (fdlibm's form).
_LOG_F64 = [float(_CTX.divide(2, 2 * j + 1)) for j in range(1, 11)]
_LOG_F32 = [float(_CTX.divide(2, 2 * j + 1)) for j in range(1, 6)]
# pow's double-double log: tail after 2s + (2/3)s**3: s**5 * sum_{j>=2} 2 z**(j-2)/(2j+1).
_LOG_TAIL_F64 = [float(_CTX.divide(2, 2 * j + 1)) for j in range(2, 12)]
# sin r = r + r**3 * S(r**2), cos r = 1 - r**2/2 + r**4 * C(r**2), |r| <= pi/4: Taylor.
_SIN_F64 = _taylor(3, 23, 2, alternate=True)
_SIN_F64 = [-c for c in _SIN_F64] if _SIN_F64[0] > 0 else _SIN_F64
_COS_F64 = _taylor(4, 22, 2, alternate=True)
_SIN_F32 = [c for c in _SIN_F64[:5]]
_COS_F32 = [c for c in _COS_F64[:5]]

# erf: |x| < 1: erf(x) = x * P(x**2) (P interpolates erf(sqrt u)/sqrt u on u in [0, 1]);
# 1 <= |x| < top: erf(x) = 1 - exp(-x**2) * R(|x|), R(x) = exp(x**2) erfc(x) interpolated on pieces
# in t = x - center. Fitted by `fit_chebyshev` (mpmath, 200 bits, Chebyshev nodes), error bound
# 0.5 ulp of the result measured on 1000 points per piece. Same structure as Cephes/fdlibm erf
# (polynomial near 0, exp(-x**2) times a fitted factor beyond), own coefficients.
_ERF_SMALL_F64 = (
    1.1283791670955126, -0.3761263890318375, 0.11283791670954879, -0.026866170645076792, 0.0052239776248180145,
    -0.000854832698083379, 0.0001205533111164271, -1.4925595266831182e-05, 1.6461000484121368e-06,
    -1.6350312701054695e-07, 1.4659775274047436e-08, -1.1372848856791674e-09, 5.957176147748911e-11)
_ERF_PIECES_F64 = (  # (upper bound, center, coefficients in t = |x| - center)
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
_ERF_SMALL_F32 = (1.1283791065216064, -0.3761262595653534, 0.11283594369888306, -0.02685421146452427,
                  0.005189087241888046, -0.000801686430349946, 7.875874871388078e-05)
_ERF_PIECES_F32 = (
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
    nf, k = o.round_shift(o.mul(xc, o.c(_LOG2E)))
    c1, c2 = _LN2_F64 if o.f64 else _LN2_F32
    r = o.sub(o.sub(xc, o.mul(nf, o.c(c1))), o.mul(nf, o.c(c2)))
    return k, r


def _poly_exp(o: _Ops, x):
    """exp: n = round(x/ln2), r = x - n ln2 (Cody-Waite), Taylor e**r, 2**n from exponent bits.

    References: Cephes exp.c (reduction); Cody & Waite, "Software Manual for the
    Elementary Functions" (1980); XLA CPU llvm_ir_runtime (2**n by exponent bits).
    """
    lo, hi = (-746.0, 710.0) if o.f64 else (-104.0, 89.0)
    k, r = _exp_reduce(o, x, lo, hi)
    p = o.poly(r, _EXP_F64 if o.f64 else _EXP_F32)
    return o.scale2(p, k)  # NaN stays NaN; clamped +big -> inf, -big -> 0


def _expm1_core(o: _Ops, x, nonpositive: bool = False):
    """expm1 without the signed-zero fix: 2**k (e**r - 1) + (2**k - 1) (fdlibm s_expm1.c scheme).

    With `nonpositive` (x <= 0 or NaN, as tanh's -2|x|) k <= 0: the large-k branch and the upper clamp
    are left out, the same values with ~14 fewer operations (W2's tanh kernels 15% faster).
    """
    lo, hi = (-45.0, 710.0) if o.f64 else (-20.0, 89.0)
    kbig = 56 if o.f64 else 25
    k, r = _exp_reduce(o, x, lo, None if nonpositive else hi)
    q = o.fma(o.mul(r, r), o.poly(r, _EXPM1_F64 if o.f64 else _EXPM1_F32), r)  # e**r - 1
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
    rz = o.mul(z, o.poly(z, _LOG_F64 if o.f64 else _LOG_F32))
    hi, lo = _LN2_F64 if o.f64 else _LN2_F32
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


def _sigmoid_from(o: _Ops, x, e):
    """Stable logistic given e = exp(-|x|): 1/(1+e) for x >= 0, e/(1+e) otherwise."""
    d = o.add(o.c(1.0), e)
    return o.sel(o.cmp(">=", x, o.c(0.0)), o.div(o.c(1.0), d), o.div(e, d))


def _poly_sigmoid(o: _Ops, x):
    """sigmoid = 1/(1+exp(-x)) without overflow: exp of -|x| only (as the NumPy evaluator)."""
    return _sigmoid_from(o, x, _poly_exp(o, o.neg(o.abs(x))))


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
    p1, p2, p3, p4 = _PIO2_4
    jf = o._call("llvm.roundeven", o.mul(x, o.c(_TWO_OVER_PI)))
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
    `_PIO2_TABLE_F32` (three exact products, 2Sum), j = round(y), r = (y - j) pi/2: correct
    for every finite float32 (Payne-Hanek reduction without integer multiprecision).
    Lanes with |x| < 2**24 get a clamped (unused) row.
    """
    module = d.module
    name = "symgraph.vmath.pio2_table_f32"
    table = module.globals.get(name)
    arr = ir.ArrayType(d.ty, len(_PIO2_TABLE_F32))
    if table is None:
        table = ir.GlobalVariable(module, arr, name)
        table.linkage = "internal"
        table.global_constant = True
        table.initializer = ir.Constant(arr, _PIO2_TABLE_F32)
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
    r = d.mul(d.add(d.sub(s, jf), d.add(e, d.mul(m, chunk(2)))), d.c(_PIO2_F64))
    neg = d.cmp("<", xd, d.c(0.0))
    return d.b.select(neg, d.b.neg(j), j), d.sel(neg, d.neg(r), r)


def _sincos_kernels(o: _Ops, rh, rl):
    """sin and cos of rh + rl, |rh| <= pi/4 (Taylor; fdlibm k_sin.c/k_cos.c correction terms)."""
    z = o.mul(rh, rh)
    if o.f64:
        sin_poly, cos_poly = _SIN_F64, _COS_F64
    else:
        sin_poly, cos_poly = _SIN_F32, _COS_F32
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
    t_hi, t_lo = _TWO_THIRDS_DD
    v, ve = o.two_prod(cub, o.c(t_hi))
    ve = o.add(ve, o.add(o.mul(cub, o.c(t_lo)), o.mul(cube, o.c(t_hi))))
    z = q
    tail = o.mul(o.mul(cub, z), o.poly(z, _LOG_TAIL_F64))  # s**5 (2/5 + 2/7 z + ...)
    a, ae = o.fast_two_sum(o.mul(two, sh), v)
    lo = o.add(o.add(ae, o.mul(two, sl)), o.add(ve, tail))
    l1, l2 = _LN2_F64
    b, be = o.two_sum(o.mul(kf, o.c(l1)), a)
    lo = o.add(o.add(be, lo), o.mul(kf, o.c(l2)))
    return o.fast_two_sum(b, lo)


def _exp_dd(o: _Ops, hi, lo):
    """exp(hi + lo) with |lo| <~ 2**-50 |hi| (float64); hi outside [-746, 710] saturates."""
    ok = o.cmp("<", o.abs(hi), o.c(746.0))
    lo = o.sel(ok, lo, o.c(0.0))
    k, r = _exp_reduce(o, hi, -746.0, 710.0)
    r = o.add(r, lo)
    return o.scale2(o.poly(r, _EXP_F64), k)


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
    small_c, pieces = (_ERF_SMALL_F64, _ERF_PIECES_F64) if o.f64 else (_ERF_SMALL_F32, _ERF_PIECES_F32)
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


_POLY = {
    "exp": _poly_exp, "log": _poly_log, "log1p": _poly_log1p, "expm1": _poly_expm1, "tanh": _poly_tanh,
    "sigmoid": _poly_sigmoid, "sin": _poly_sin, "cos": _poly_cos, "tan": _poly_tan, "pow": _poly_pow,
    "sqrt": _poly_sqrt, "erf": _poly_erf,
}


def _poly_helper(module: ir.Module, name: str, ty) -> ir.Function:
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
    b.ret(_POLY[name](_Ops(b, ty), *fn.args))
    return fn


# ----- libmvec implementation -----


def _libmvec_call(builder: ir.IRBuilder, name: str, args, kind: str):
    """A call whose every evaluation, packed or scalar, is libmvec's widest variant of `name`.

    libmvec's vector functions and libm's scalar ones differ in the last
    bits, so a loop whose body packs libmvec calls and whose remainder calls
    libm gives an element other bits depending on where the loop's vector
    steps fall: on the thread split, the fusion, the checkpoint strategy.
    Here the scalar callee is an internal ``noinline`` wrapper that splats
    its argument into the widest variant (``_ZGVeN8v_sin`` on AVX-512) and
    takes lane 0; the call site's VFABI attribute maps it to that variant
    only, so the vectorizer packs it at that width or calls the wrapper per
    lane. Each element is computed by the same function whatever the loop.
    """
    module = builder.module
    ty = args[0].type
    suffix = "" if kind == "f64" else "f"
    scalar_name = name + suffix
    params = "v" * len(args)
    isa, vf = max(_libmvec[(name, kind)], key=lambda v: (v[1], [i[0] for i in _ISAS].index(v[0])))
    vname = f"_ZGV{isa}N{vf}{params}_{scalar_name}"
    vty = ir.VectorType(ty, vf)
    vfn = _declare(module, vname, ir.FunctionType(vty, [vty] * len(args)))
    wrapper = _mvec_scalar(module, f"sg_mvec_{scalar_name}", vfn, ty, vf, len(args))
    variants = _module_variants(module)
    # The wrapper is listed too: a used function keeps its signature, which the call site's VFABI
    # attribute describes (interprocedural constant propagation once dropped a constant pow exponent
    # from it, and the vectorizer then built an invalid call).
    for f in (vfn, wrapper):
        if f not in variants:
            variants.append(f)
    _update_compiler_used(module, variants)
    call = builder.call(wrapper, list(args))
    call.attributes = _OpenCallAttributes()
    call.attributes.add(f'"vector-function-abi-variant"="_ZGV_LLVM_N{vf}{params}_{wrapper.name}({vname})"')
    call.attributes.add("nounwind")
    call.attributes.add("memory(none)")
    return call


def _mvec_scalar(module: ir.Module, fname: str, vfn: ir.Function, ty, vf: int, nargs: int) -> ir.Function:
    """`ty fname(ty...)`: `vfn` on the arguments splatted to `vf` lanes, lane 0 (defined once per module)."""
    fn = module.globals.get(fname)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), fname)
    fn.linkage = "internal"
    attrs = _open_attributes(fn)
    for a in ("noinline", "nounwind", "willreturn", "memory(none)"):
        attrs.add(a)
    apply_function_attributes(fn)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vty = ir.VectorType(ty, vf)
    vecs = []
    for a in fn.args:
        v = ir.Constant(vty, None)
        for lane in range(vf):
            v = b.insert_element(v, a, ir.Constant(ir.IntType(32), lane))
        vecs.append(v)
    b.ret(b.extract_element(b.call(vfn, vecs), ir.Constant(ir.IntType(32), 0)))
    return fn


# ----- entry point -----


def _choose(name: str, kind: str, impl: str | None) -> str:
    """"poly", "libmvec" or "libm" (a scalar call: no polynomial and no libmvec variant) for `name`.

    What "auto" takes from libmvec is the op record's `MathFn.vector_auto`, by measurement on this
    project's machine (AMD EPYC, AVX-512, 2^20 elements; docs/vmath.md has the table): libmvec
    wins for the trigonometric functions (it also reduces huge arguments exactly) and float64 erf
    and float32 pow; the branch-free polynomials are as fast or faster and at least as accurate
    for the exp/log family, tanh and sigmoid (libmvec's log takes a slow path for negative
    inputs: 21 ns/element).
    """
    impl = impl or _default_impl
    if impl not in IMPLS:
        raise ValueError(f"vmath impl must be one of {IMPLS}, got {impl!r}")
    has_poly = name in _POLY
    if impl == "poly" and has_poly:
        return "poly"
    if impl == "poly" or not runtime_init() or (_libm_name(name), kind) not in _libmvec:
        return "poly" if has_poly else "libm"
    if impl == "auto" and has_poly and kind not in OPS[name].math.vector_auto:
        return "poly"
    return "libmvec"


def emit(builder: ir.IRBuilder, name: str, args, impl: str | None = None) -> ir.Value:
    """Emit the scalar computation of `name(*args)` so that LLVM's loop vectorizer packs it.

    Call inside a loop body; the result has the arguments' type. The poly
    implementation is a call to an ``alwaysinline`` internal helper defined in
    the builder's module (inlined before vectorization, so no call remains);
    the libmvec one is a call carrying the ``vector-function-abi-variant``
    attribute, whose scalar form (the remainder loop) runs the same vector
    function on one lane, so every element gets the same bits wherever the
    loop's vector steps fall (`_libmvec_call`). No fast-math flags are used: NaN, +-inf, -0.0 and denormals
    behave like NumPy (exp(-inf)=0, exp(1000)=inf, log(0)=-inf, log(-1)=nan,
    tanh(+-inf)=+-1, pow per C99, sin(+-inf)=nan).

    Args:
        builder: an llvmlite IRBuilder positioned in a function of a module.
        name: an op name of `FUNCTIONS` (every op whose record has `math`:
            exp, log, log1p, expm1, tanh, sigmoid, sin, cos, tan, pow, sqrt,
            erf, ...).
        args: `FUNCTIONS[name]` values of one type, float (float32) or double
            (float64); pow takes (base, exponent).
        impl: None (the module default, see `set_default_impl`), "auto",
            "libmvec" or "poly". A function without a polynomial uses libmvec
            where glibc has it (except under "poly"), else a scalar libm call.

    Returns:
        The llvmlite value of the result (same type as the arguments).

    Raises:
        ValueError: unknown name or impl.
        TypeError: wrong number of arguments or a non-float argument type.

    References:
        Cody & Waite (1980); Cephes (Moshier 1989); fdlibm (Sun 1993); SLEEF
        (Shibata & Petrogalli 2020); glibc libmvec and the x86 Vector Function
        ABI (Intel, 2015); LLVM LangRef "vector-function-abi-variant".
    """
    if name not in FUNCTIONS:
        raise ValueError(f"vmath.emit: unknown function {name!r}; known: {sorted(FUNCTIONS)}")
    args = list(args)
    if len(args) != FUNCTIONS[name]:
        raise TypeError(f"vmath.emit: {name} takes {FUNCTIONS[name]} argument(s), got {len(args)}")
    ty = args[0].type
    if not isinstance(ty, (ir.DoubleType, ir.FloatType)) or any(a.type != ty for a in args):
        raise TypeError(f"vmath.emit: {name} needs float or double arguments of one type, got "
                        f"{[str(a.type) for a in args]}")
    kind = "f64" if isinstance(ty, ir.DoubleType) else "f32"
    choice = _choose(name, kind, impl)
    if choice == "poly":
        return builder.call(_poly_helper(builder.module, name, ty), args)
    if choice == "libm":
        fname = OPS[name].math.libm + ("" if kind == "f64" else "f")
        fn = _declare(builder.module, fname, ir.FunctionType(ty, [ty] * len(args)))
        call = builder.call(fn, args)
        call.attributes = _OpenCallAttributes()
        call.attributes.add("nounwind")
        call.attributes.add("memory(none)")  # (errno is never read): the vectorizer may replicate it
        return call
    if name == "sigmoid":  # the one composite (MathFn.via): its formula around libmvec's exp
        o = _Ops(builder, ty)
        x = args[0]
        e = _libmvec_call(builder, "exp", [o.neg(o.abs(x))], kind)
        return _sigmoid_from(o, x, e)
    return _libmvec_call(builder, _libm_name(name), args, kind)
