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
(correct, not vectorized); so does one whose record lists the dtype in
`MathFn.vector_inexact` (float64/float32 log10). Which functions exist, their arity, libm names and
"auto" choices are facts of the op records (`symgraph.ops.Op.math`).

Modules: `runtime` (configuration, host features, libmvec loading and calls), `poly`
(the polynomial implementations), `coefficients` (their exact constants); this one chooses
between them (`emit`).

Public names: `FUNCTIONS`, `IMPLS`, `emit`, `prepare_module`,
`function_attributes`, `apply_function_attributes`, `runtime_init`,
`libmvec_available`, `set_default_impl`, `get_default_impl`, `config_key`,
`fit_chebyshev`, `POLY_SIN_COS_EXACT_LIMIT`, `POLY_TRIG_NAN_LIMIT`.
"""

from __future__ import annotations

from llvmlite import ir

from symgraph.ops import OPS

from .coefficients import fit_chebyshev
from .poly import POLY, POLY_SIN_COS_EXACT_LIMIT, POLY_TRIG_NAN_LIMIT, _Ops, poly_helper, sigmoid_from
from .runtime import (FUNCTIONS, IMPLS, _declare, _libm_name, _libmvec_call, _OpenCallAttributes,
                      apply_function_attributes, config_key, function_attributes, get_default_impl,
                      libmvec_available, prepare_module, runtime_init, set_default_impl)
from .runtime import _host_features  # noqa: F401  (tests ask which vector ISA the host has)

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
    impl = impl or get_default_impl()
    if impl not in IMPLS:
        raise ValueError(f"vmath impl must be one of {IMPLS}, got {impl!r}")
    has_poly = name in POLY
    if impl == "poly" and has_poly:
        return "poly"
    if kind in OPS[name].math.vector_inexact:
        return "poly" if has_poly else "libm"
    if impl == "poly" or not libmvec_available(name, "float64" if kind == "f64" else "float32"):
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
        return builder.call(poly_helper(builder.module, name, ty), args)
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
        return sigmoid_from(o, x, e)
    return _libmvec_call(builder, _libm_name(name), args, kind)
