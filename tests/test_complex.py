"""Complex numbers (docs/complex.md): values bit for bit against NumPy, NumPy 2 promotion, JAX's derivative
convention (values computed with jax 0.10 once and written here; the suite does not need jax), finite
differences in the real and imaginary directions, order 2, and the backends (NumPy runs complex graphs,
the LLVM backend compiles them as pairs of real arrays and refuses the rest with an UnsupportedOpError).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import symgraph as sg
from symgraph.batching import vmap

RNG = np.random.default_rng(7)
Z = np.array([0.3 + 1.2j, -0.7 + 0.4j, 1.5 - 0.8j])
W = np.array([1.0 - 0.5j, 0.2 + 0.9j, -1.1 + 0.3j])


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), (a, b)


def _sample(dtype, n=64):
    z = (RNG.standard_normal(n) * 2 + 1j * RNG.standard_normal(n) * 2).astype(dtype)
    z[:8] = [0, complex(-0.0, -0.0), complex(0.0, -0.0), 1j, -1, complex(np.inf, 1), complex(1, np.nan), 1e30 + 1e-30j]
    return z


ELEMENTWISE = {
    "add": lambda z, w: z + w, "sub": lambda z, w: z - w, "mul": lambda z, w: z * w, "div": lambda z, w: z / w,
    "true_divide": lambda z, w: np.true_divide(z, w), "neg": lambda z, w: -z, "exp": lambda z, w: np.exp(z),
    "log": lambda z, w: np.log(z), "sqrt": lambda z, w: np.sqrt(z), "abs": lambda z, w: np.abs(z),
    "absolute": lambda z, w: np.absolute(w), "angle": lambda z, w: np.angle(z), "sin": lambda z, w: np.sin(z),
    "cos": lambda z, w: np.cos(z), "tan": lambda z, w: np.tan(z), "tanh": lambda z, w: np.tanh(z),
    "conj": lambda z, w: np.conj(z), "conjugate": lambda z, w: np.conjugate(z), "real": lambda z, w: np.real(z),
    "imag": lambda z, w: np.imag(z), ".real": lambda z, w: z.real, ".imag": lambda z, w: z.imag,
    ".conj()": lambda z, w: z.conj(), "square": lambda z, w: np.square(z), "**2": lambda z, w: z ** 2,
    "**3": lambda z, w: z ** 3, "**-2": lambda z, w: z ** -2, "**0.5": lambda z, w: z ** 0.5,
    "power(z, 4)": lambda z, w: np.power(z, 4), "power(z, w)": lambda z, w: np.power(z, w),
    "angle(deg)": lambda z, w: np.angle(z, deg=True), "real scalar": lambda z, w: 2.5 * z - 1.0,
    "complex scalar": lambda z, w: z * (1 - 2j) + 0.5j,
}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_elementwise_values_equal_numpy_bit_for_bit(dtype):
    z, w = _sample(dtype), _sample(dtype)[::-1].copy()
    with np.errstate(all="ignore"):
        for name, f in ELEMENTWISE.items():
            want = f(z, w)
            g = sg.trace(f, z, w)
            _bits_equal(g.evaluate(z, w), want)
            _bits_equal(sg.compile(f, backend="numpy")(z, w), want)  # after simplification too


def test_reductions_and_products_equal_numpy():
    a = (RNG.standard_normal((4, 5)) + 1j * RNG.standard_normal((4, 5)))
    b = (RNG.standard_normal((5, 3)) + 1j * RNG.standard_normal((5, 3))).astype(np.complex64)
    cases = {
        "sum": lambda a, b: np.sum(a, axis=1), "sum all": lambda a, b: a.sum(), "mean": lambda a, b: np.mean(a, axis=0),
        "prod": lambda a, b: np.prod(a, axis=1), "matmul": lambda a, b: a @ b, "dot": lambda a, b: np.dot(a, b),
        "einsum": lambda a, b: np.einsum("ij,jk->ik", a, b), "matmul c64": lambda a, b: b.T @ b,
    }
    for name, f in cases.items():
        want = f(a, b)
        _bits_equal(sg.trace(f, a, b).evaluate(a, b), want)


def test_var_std_norm_of_complex_arrays_are_real_as_numpy():
    a = RNG.standard_normal((4, 5)) + 1j * RNG.standard_normal((4, 5))
    cases = [np.var, np.std, lambda a: np.var(a, axis=0), lambda a: a.std(axis=1, ddof=1)]
    for f in cases:
        _bits_equal(sg.trace(f, a).evaluate(a), f(a))
    # norm: NumPy's sqrt(re . re + im . im), but its BLAS dot runs on the strided parts (another summation order)
    for f in (np.linalg.norm, lambda a: np.linalg.norm(a[0], keepdims=True)):
        got, want = sg.trace(f, a).evaluate(a), f(a)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=4e-16)
    sg.check_grads(lambda a: np.std(a, axis=0) + np.linalg.norm(a), (a,), order=2)
    np.testing.assert_allclose(sg.grad(np.linalg.norm)(a), a.conj() / np.linalg.norm(a), rtol=1e-14)  # conj(z)/|z|


def test_promotion_follows_numpy_2():
    x32, x64 = np.ones(3, np.float32), np.ones(3)
    c64, c128 = np.ones(3, np.complex64), np.ones(3, np.complex128)
    i64 = np.arange(3)
    cases = [
        (lambda a, b: a + b, x32, c64, np.complex64), (lambda a, b: a * b, x64, c64, np.complex128),
        (lambda a, b: a - b, x32, c128, np.complex128), (lambda a, b: a + b, i64, c64, np.complex128),
        (lambda a, b: a + 1j, x32, c64, np.complex64),  # a Python complex is weak: float32 + 1j is complex64
        (lambda a, b: b * 2.0, x32, c64, np.complex64), (lambda a, b: np.abs(b), x32, c64, np.float32),
        (lambda a, b: b.real + a, x32, c64, np.float32), (lambda a, b: np.angle(b), x32, c128, np.float64),
        (lambda a, b: a / b, i64, c64, np.complex128),
    ]
    for f, a, b, want in cases:
        got = sg.trace(f, a, b).evaluate(a, b)
        assert got.dtype == want == f(a, b).dtype, (got.dtype, want)


def test_parts_of_real_arrays_and_queries():
    x = np.array([1.5, -2.0])
    for f in (np.real, np.imag, np.conj, lambda x: x.real, lambda x: x.imag, lambda x: x.conj(), np.angle):
        _bits_equal(sg.trace(f, x).evaluate(x), f(x))

    def q(z, x):
        return np.iscomplexobj(z), np.isrealobj(x), np.iscomplexobj(x)

    assert sg.trace(lambda z, x: (z, x), Z, x) and q(Z, x) == (True, True, False)
    g = sg.trace(lambda z: (np.iscomplex(z), np.isreal(z)), np.array([1 + 0j, 2j]))
    ic, ir = g.evaluate(np.array([1 + 0j, 2j]))
    np.testing.assert_array_equal(ic, [False, True])
    np.testing.assert_array_equal(ir, [True, False])


# ----- derivatives: JAX's convention -----


def test_grad_of_real_functions_matches_jax():
    z = np.complex128(3 + 4j)
    _bits_equal(sg.grad(lambda z: np.real(z * np.conj(z)))(z), np.asarray(6 - 8j))  # 2 conj(z), as JAX
    np.testing.assert_allclose(sg.grad(lambda z: np.abs(z) ** 2)(z), 6 - 8j, rtol=1e-15)
    assert sg.grad(np.imag)(z) == -1j and sg.grad(np.real)(z) == 1
    np.testing.assert_allclose(sg.grad(np.abs)(z), 0.6 - 0.8j, rtol=1e-15)  # conj(z)/|z|
    np.testing.assert_allclose(sg.grad(np.angle)(z), -0.16 - 0.12j, rtol=1e-15)
    np.testing.assert_allclose(sg.grad(lambda z: np.real(np.exp(z)))(z), np.exp(z), rtol=1e-15)

    def f(z, w):
        return np.sum(np.abs(np.exp(z) * np.conj(w)) ** 2 + np.angle(z) + np.real(z * w)
                      - np.imag(np.log(z)) * np.abs(z))

    gz, gw = sg.grad(f, argnums=(0, 1))(Z, W)
    np.testing.assert_allclose(gz, [5.41956776 + 0.83268926j, 2.77689039 + 2.40977778j, 51.36093966 + 0.89388995j],
                               rtol=0, atol=1e-8)  # printed to 8 decimals
    np.testing.assert_allclose(gw, [3.9442376 + 3.0221188j, -0.60136121 - 0.04387454j,
                                    -42.68818123 - 12.85132215j], rtol=0, atol=1e-8)  # printed to 8 decimals
    # the convention in words: for real f(x + iy), grad = df/dx - i df/dy (central differences)
    eps = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        dx = (f(Z + e, W) - f(Z - e, W)) / (2 * eps)
        dy = (f(Z + 1j * e, W) - f(Z - 1j * e, W)) / (2 * eps)
        np.testing.assert_allclose(gz[k], dx - 1j * dy, rtol=1e-7)


def test_holomorphic_grad_vjp_and_jvp_match_jax():
    def h(z):
        return np.sum(np.sin(z) * z ** 3 / (1 + z))

    np.testing.assert_allclose(sg.grad(h, holomorphic=True)(Z),
                               [-5.08793788 + 0.88187866j, 3.92347066 + 1.76016337j, 4.32155796 - 1.65565785j],
                               rtol=0, atol=1e-8)  # printed to 8 decimals
    z = np.complex128(0.4 - 1.3j)
    d2 = sg.grad(sg.grad(lambda z: z ** 3 * np.exp(z), holomorphic=True), holomorphic=True)(z)
    np.testing.assert_allclose(d2, (6 * z + 6 * z ** 2 + z ** 3) * np.exp(z), rtol=1e-14)
    _, pull = sg.vjp(lambda z: np.exp(z) * np.conj(z), Z)
    np.testing.assert_allclose(pull(W)[0], [2.66991643 - 2.05131956j, 0.15535976 - 0.73252283j,
                                            -9.75399001 + 0.26045522j], rtol=0, atol=1e-8)  # printed to 8 decimals
    _, t = sg.jvp(lambda z: np.abs(z) * np.conj(z), (Z,), (W,))
    np.testing.assert_allclose(t, [1.164171 + 0.90950859j, -0.02976834 - 0.83475376j,
                                   -3.53764706 - 1.39941176j], rtol=0, atol=1e-8)
    out, t = sg.jvp(np.exp, (np.complex128(1j),), (1.0 + 0j,))  # a Python complex tangent
    np.testing.assert_allclose(t, np.exp(1j), rtol=1e-15)


def test_grad_errors_follow_jax():
    z = np.complex128(1 + 1j)
    with pytest.raises(sg.DTypeError, match="holomorphic=True"):
        sg.grad(np.exp)(z)  # a complex output needs holomorphic=True
    with pytest.raises(sg.DTypeError, match="needs complex inputs"):
        sg.grad(np.exp, holomorphic=True)(1.0)
    with pytest.raises(sg.DTypeError, match="complex output"):
        sg.grad(np.abs, holomorphic=True)(z)
    with pytest.raises(sg.DTypeError, match="pass holomorphic=True"):
        sg.jacobian(np.exp)(Z)
    with pytest.raises(sg.DTypeError, match="a complex output"):
        sg.hessian(lambda z: np.sum(np.abs(z) ** 2))(Z)  # its gradient is not holomorphic
    with pytest.raises(sg.UnsupportedOpError, match="np.maximum on complex values"):
        sg.trace(lambda z: np.maximum(z, 0), Z)  # no order on complex numbers in symgraph
    for f in (np.deg2rad, lambda z: np.logaddexp(z, z), lambda z: np.sort(z)):
        with pytest.raises(sg.UnsupportedOpError, match="on complex values has no rule"):
            sg.trace(f, Z)  # rules written for real numbers are refused, never silently wrong
    import symgraph.scipy.linalg as sla

    with pytest.raises(sg.UnsupportedOpError, match="transposed=True"):
        sg.trace(lambda z: sla.solve(z[:, None] * z + np.eye(3), z, transposed=True), Z)  # as SciPy: complex refused
    with pytest.raises(sg.DTypeError, match="dtype"):
        sg.jvp(np.exp, (Z,), (np.ones(3),))  # a float tangent for a complex primal


def test_holomorphic_jacobian_and_hessian():
    z = Z[:2]
    f = lambda z: np.stack([z[0] ** 2 * z[1], np.sin(z[0]) + z[1] ** 3, np.exp(z[0] * z[1])])  # noqa: E731
    e = np.exp(z[0] * z[1])
    want = np.array([[2 * z[0] * z[1], z[0] ** 2], [np.cos(z[0]), 3 * z[1] ** 2], [z[1] * e, z[0] * e]])
    for jac in (sg.jacobian, sg.jacfwd, sg.jacrev):
        np.testing.assert_allclose(jac(f, holomorphic=True)(z), want, rtol=1e-14)
    h = lambda z: np.sum(z ** 3 * np.exp(z[::-1]))  # noqa: E731
    x, y = z
    hxy = 3 * x ** 2 * np.exp(y) + 3 * y ** 2 * np.exp(x)
    want_h = np.array([[6 * x * np.exp(y) + y ** 3 * np.exp(x), hxy], [hxy, x ** 3 * np.exp(y) + 6 * y * np.exp(x)]])
    np.testing.assert_allclose(sg.hessian(h, holomorphic=True)(z), want_h, rtol=1e-13)


FUNCTIONS = {
    "abs2+angle": (lambda z: np.sum(np.abs(z) ** 2 + np.angle(z)), (Z,)),
    "holomorphic": (lambda z: np.exp(z) * np.sin(z) / np.cos(z) + np.log(z) * np.sqrt(z) + np.tanh(z) * z ** 3, (Z,)),
    "parts": (lambda z, w: np.real(z) * np.imag(w) + np.conj(z) * w - np.abs(w) * z, (Z, W)),
    "mixed real": (lambda z, x: (z * x + x / z).imag + np.abs(z - x) ** 3, (Z, np.array([0.5, -1.0, 2.0]))),
    "products": (lambda a, b: np.einsum("ij,jk->ik", a, b) + np.prod(a, axis=1, keepdims=True) - a @ np.conj(b),
                 (Z.reshape(1, 3) * np.ones((2, 1)), np.stack([W, W * 1j, W - 1], axis=1))),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_check_grads_order2_both_modes(name):
    f, args = FUNCTIONS[name]
    sg.check_grads(f, args, order=2, modes=("fwd", "rev"))
    sg.check_vjp_jvp(f, args, rtol=1e-12)


def test_hvp_of_a_real_function_of_complex_inputs():
    """Forward over reverse: the R-linear map v -> d(grad)[v]; |z|^2 has grad 2 conj(z), so H v = 2 conj(v)."""
    hv = sg.hvp(lambda z: np.sum(np.abs(z) ** 2), (Z,), (W,))
    np.testing.assert_allclose(hv, 2 * np.conj(W), rtol=1e-15)


# ----- transformations and backends -----


def test_vmap_and_numpy_backend_run_complex_graphs():
    zs = np.stack([Z, W, Z * W])
    f = lambda z: np.sum(np.exp(z) * np.conj(z)).real  # noqa: E731
    np.testing.assert_allclose(vmap(f)(zs), [f(z) for z in zs], rtol=1e-15)
    vg = sg.compile(sg.value_and_grad(f), backend="numpy")
    v, g = vg(Z)
    _v, _g = sg.value_and_grad(f)(Z)
    _bits_equal(v, _v)
    _bits_equal(g, _g)


def _rel_err(got, want):
    """max |got - want| / |want|, in units of the dtype's eps (normwise per element)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    eps = np.finfo(want.real.dtype).eps
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), np.finfo(want.real.dtype).tiny)) / eps)


def test_llvm_backend_lowers_complex_arithmetic_natively():
    """Pairs of real arrays in the fused loops (codegen.complex_split): NumPy's values within a few eps."""
    pytest.importorskip("llvmlite")
    z = RNG.standard_normal(200) + 1j * RNG.standard_normal(200)
    w = RNG.standard_normal(200) + 1j * RNG.standard_normal(200)
    z[:3], w[:3] = [0, 1j, -1], [1 + 1j, 0.5, 1e-300j]
    exact = {"add": lambda z, w: z - w * 2.0, "div (Smith, as NumPy)": lambda z, w: z / w,
             "parts": lambda z, w: np.conj(z) + z.real * w.imag, "eq": lambda z, w: z == w}
    close = {"mul": (lambda z, w: z * w, 2), "abs": (lambda z, w: np.abs(z), 2), "exp": (lambda z, w: np.exp(z), 4),
             "sum": (lambda z, w: np.sum(z * np.conj(w)), 4), "complex64": (lambda z, w: z.astype(np.complex64)
                                                                            * w.astype(np.complex64), 2)}
    exact["z ** k (NumPy's repeated products)"] = lambda z, w: z ** 3 + z ** -2 + np.power(w, 13)
    for name, f in exact.items():
        cf = sg.compile(f)
        with np.errstate(invalid="ignore", divide="ignore"):  # 0 ** -2 is NaN in NumPy, with a warning
            want = f(z, w)
        _bits_equal(cf(z, w), want)
        assert cf.stats["complex_split"]
    for name, (f, budget) in close.items():
        assert _rel_err(sg.compile(f)(z, w), f(z, w)) <= budget, name
    a, b = z.reshape(10, 20), w.reshape(20, 10)
    assert np.abs(sg.compile(np.matmul)(a, b) - a @ b).max() <= 16 * np.finfo(float).eps * np.abs(a).max() * np.abs(b).max() * 20
    # a compiled gradient (complex_abs, conj, where, division, casts) against the evaluator
    loss = lambda z, w: np.sum(np.abs(z * w) ** 2 + np.real(np.exp(z) / w))  # noqa: E731
    np.testing.assert_allclose(sg.compile(sg.grad(loss))(z, w), sg.grad(loss)(z, w), rtol=1e-13, atol=1e-13)


#: Every special value C99 Annex G (G.6) names, on both axes: signed zeros, a subnormal, |z| near 1, the
#: negative real axis, pi/2 (tan's poles), the overflow edges of cosh (710, 800, 1e300), infinities and NaN.
SPECIAL = [0.0, -0.0, 1e-310, 1e-20, 0.5, 1.0, 1.2, -1.0, -2.5, 3.0, 30.0, -100.0, 709.5, 710.2, -800.0, 1e300,
           np.inf, -np.inf, np.nan, np.pi / 2]
ELEMENTARY_ULPS = 8  # normwise |f - f_numpy| / |f_numpy| in eps (docs/complex.md); the largest seen is 4.3


def _special_grid(dtype):
    with np.errstate(over="ignore"):
        x = np.array(SPECIAL, np.finfo(dtype).dtype)  # 1e300 is inf in float32
    grid = np.empty((len(x), len(x)), dtype)
    grid.real, grid.imag = np.meshgrid(x, x)
    n = 1000
    z = 10.0 ** RNG.uniform(-6, 3 if dtype == np.complex128 else 1.5, n) * np.exp(1j * RNG.uniform(-np.pi, np.pi, n))
    z[:100] = np.exp(1j * RNG.uniform(-np.pi, np.pi, 100))  # the unit circle: log|z| near 0
    z[100:200] = RNG.uniform(-5, 5, 100) + 1j * RNG.uniform(-1e-8, 1e-8, 100)  # either side of the cut
    return np.concatenate([grid.ravel(), z.astype(dtype)])


def _assert_matches_numpy(got, want, ulps):
    """Zeros and infinities with their signs and NaN where NumPy has them; elsewhere normwise within ulps."""
    assert got.dtype == want.dtype and got.shape == want.shape
    for p, q in ((got.real, want.real), (got.imag, want.imag)):
        exact = np.isnan(q) | np.isinf(q) | (q == 0)
        same = np.where(np.isnan(q), np.isnan(p), (p == q) & (np.signbit(p) == np.signbit(q)))
        bad = exact & ~same
        if np.any(bad):
            i = np.flatnonzero(bad)[:5]
            raise AssertionError(f"special values differ: got {got[i]}, NumPy {want[i]}")
    ok = np.isfinite(want) & (want != 0)
    assert np.all(np.isfinite(got[ok]))
    err = np.abs(got[ok] - want[ok]) / np.abs(want[ok]) / np.finfo(want.real.dtype).eps
    assert err.max() <= ulps, (err.max(), got[ok][np.argmax(err)], want[ok][np.argmax(err)])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_llvm_backend_lowers_complex_elementary_functions_natively(dtype):
    """log, sqrt, sin, cos, tan, tanh, exp (codegen.complex_elementary): NumPy's special values (C99 Annex G:
    signed zeros, the branch cut on the negative real axis, infinities, NaN) exactly, the rest within 8 eps."""
    pytest.importorskip("llvmlite")
    z = _special_grid(dtype)
    names = ("log", "sqrt", "sin", "cos", "tan", "tanh", "exp")
    cf = sg.compile(lambda z: tuple(getattr(np, n)(z) for n in names))
    got = cf(z)
    assert cf.stats["complex_split"]
    with np.errstate(all="ignore"):
        for name, g in zip(names, got):
            _assert_matches_numpy(g, getattr(np, name)(z), ELEMENTARY_ULPS)
    # the branch cut: the sign of the zero imaginary part picks the side
    cut = np.array([complex(-4.0, 0.0), complex(-4.0, -0.0)], dtype)
    _bits_equal(sg.compile(np.sqrt)(cut), np.array([complex(0, 2), complex(0, -2)], dtype))  # +0 real parts
    np.testing.assert_array_equal(sg.compile(np.log)(cut).imag, np.array([np.pi, -np.pi], np.finfo(dtype).dtype))


def test_llvm_backend_lowers_complex_powers_natively():
    """z ** w = exp(w log z) for a non-integer or non-constant exponent, with NumPy's zero rules; the error
    grows with |w log z| (the condition number of exp), so the bound does too."""
    pytest.importorskip("llvmlite")
    z = RNG.standard_normal(300) + 1j * RNG.standard_normal(300)
    w = RNG.standard_normal(300) + 1j * RNG.standard_normal(300)
    z[:5], w[:5] = [0, 0, complex(-0.0, 0.0), 1 + 1j, -2], [1 + 2j, 1j, -0.5, 0, 0.5]
    cases = {"z ** 0.3": (lambda z, w: z ** 0.3, 0.3), "z ** (1 + 2j)": (lambda z, w: z ** (1 + 2j), 1 + 2j),
             "z ** w": (lambda z, w: z ** w, w), "np.power(z, 2.5)": (lambda z, w: np.power(z, 2.5), 2.5)}
    for name, (f, b) in cases.items():
        got = sg.compile(f)(z, w)
        with np.errstate(all="ignore"):
            want = f(z, w)
            k = np.abs(b * np.log(z))
        ok = np.isfinite(want) & (want != 0)
        np.testing.assert_array_equal(got[~ok], want[~ok], err_msg=name)  # 0 ** b: 0 or NaN, as NumPy; z ** 0 = 1
        err = np.abs(got[ok] - want[ok]) / np.abs(want[ok]) / np.finfo(float).eps
        assert np.all(err <= ELEMENTARY_ULPS * (1 + k[ok])), name


def test_compiled_gradients_through_complex_elementary_functions_match_the_evaluator():
    """sg.compile(sg.grad(f)) for real f of complex inputs (JAX's convention), and a holomorphic derivative."""
    pytest.importorskip("llvmlite")

    def f(z, w):
        return np.sum(np.abs(np.log(z) * np.sqrt(w) + np.sin(z)) ** 2 + np.real(np.tan(z) * np.tanh(w) * np.cos(w))
                      + np.imag(z ** 0.7))

    z = RNG.standard_normal(50) + 1j * RNG.standard_normal(50)
    w = RNG.standard_normal(50) + 1j * RNG.standard_normal(50)
    g = sg.grad(f, argnums=(0, 1))
    for got, want in zip(sg.compile(g)(z, w), g(z, w)):
        assert got.dtype == np.complex128
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.abs(want).max())
    h = sg.grad(lambda z: np.sum(np.log(z) * np.sqrt(z) + np.sin(z) * np.tanh(z)), holomorphic=True)
    np.testing.assert_allclose(sg.compile(h)(z), h(z), rtol=1e-13)


def test_llvm_backend_lowers_complex_prod_cumsum_einsum_natively():
    """prod as a fixed pairwise tree of complex products, cumsum part by part (NumPy's bits), einsum as
    real einsums of the parts (4 for two complex operands, 8 for three), isnan; and their gradients."""
    pytest.importorskip("llvmlite")
    a = RNG.standard_normal((3, 7)) + 1j * RNG.standard_normal((3, 7))
    b = RNG.standard_normal((7, 4)) + 1j * RNG.standard_normal((7, 4))
    c = RNG.standard_normal((4, 5)) + 1j * RNG.standard_normal((4, 5))
    prods = {"axis 1": lambda a: np.prod(a, axis=1), "axis 0, keepdims": lambda a: np.prod(a, axis=0, keepdims=True),
             "all": lambda a: np.prod(a), "empty": lambda a: np.prod(a[:, :0], axis=1),
             "complex64": lambda a: np.prod(a.astype(np.complex64), axis=1)}
    for name, f in prods.items():
        got, want = sg.compile(f)(a), f(a)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert _rel_err(got, want) <= 8, name  # a different order of the same products
    _bits_equal(sg.compile(lambda a: np.cumsum(a, axis=1) + a.cumsum(axis=0))(a),
                np.cumsum(a, axis=1) + a.cumsum(axis=0))
    for spec, ops in (("ij,jk->ik", (a, b)), ("ij,jk,kl->il", (a, b, c)), ("ij,jk->ik", (a, b.real)),
                      ("ij->j", (a,))):
        got, want = sg.compile(lambda *x: np.einsum(spec, *x))(*ops), np.einsum(spec, *ops)
        bound = 8 * np.finfo(float).eps * np.einsum(spec, *[np.abs(x) for x in ops])
        assert got.dtype == want.dtype and np.all(np.abs(got - want) <= bound), spec
    z = np.array([1 + 1j, complex(np.nan, 0), complex(0, np.nan), 2j])
    np.testing.assert_array_equal(sg.compile(np.isnan)(z), np.isnan(z))

    def loss(a, b):
        return (np.sum(np.abs(np.prod(a, axis=1))) + np.real(np.cumsum(a, axis=1) ** 2).sum()
                + np.sum(np.abs(np.einsum("ij,jk->ik", a, b)) ** 2))

    g = sg.grad(loss, argnums=(0, 1))
    for got, want in zip(sg.compile(g)(a, b), g(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.abs(want).max())


def test_llvm_backend_compiles_complex_loops_and_branches_natively():
    """scan, fori_loop, while_loop, cond and switch over complex carries, xs, ys and operands: the regions
    over split bodies; values and a gradient through a scan against the evaluator."""
    pytest.importorskip("llvmlite")
    xs = np.linspace(0.0, 1.0, 12).reshape(4, 3) * (1 - 0.5j)

    def scan(z, xs):
        return sg.scan(lambda c, x: (np.sin(c) * x + z, np.abs(c) + np.real(x)), z, xs)

    def loss(z, xs):
        c, ys = scan(z, xs)
        return np.sum(np.abs(c) ** 2) + np.sum(ys)

    cases = {
        "fori_loop": (lambda z: sg.fori_loop(0, 3, lambda i, c: c * z + 1.0, z), (Z,)),
        "scan": (scan, (Z, xs)),
        "while_loop": (lambda z: sg.while_loop(lambda c: np.sum(np.abs(c[0])) < 50.0,
                                               lambda c: (c[0] * (1.1 + 0.3j) + z, c[1] + 1), (z, 0)), (Z,)),
        "cond": (lambda z, k: sg.cond(k > 0, lambda z: np.log(z) * 2j, np.conj, z), (Z, 1)),
        "switch": (lambda z, k: sg.switch(k, [np.exp, lambda z: z * 1j, np.sqrt], z), (Z, 2)),
        "grad through scan": (sg.grad(loss, argnums=(0, 1)), (Z, xs)),
        "a concrete complex init": (lambda xs: sg.scan(lambda c, x: (c * x + 1j, np.abs(c)), np.full(3, 1 + 1j), xs),
                                    (xs,)),
    }
    for name, (f, args) in cases.items():
        cf = sg.compile(f)
        got, want = cf(*args), sg.compile(f, backend="numpy")(*args)
        assert cf.stats["complex_split"], name
        for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype, name
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-14 * np.abs(w).max(), err_msg=name)


def test_llvm_backend_refuses_other_complex_ops_with_a_clear_error():
    """A complex op without a pair rule (the cumprod primitive: np.cumprod refuses complex values at trace time,
    so only a direct bind reaches the backend) is refused by name at its line; complex linear algebra compiles
    (tests/test_linalg_complex_native.py)."""
    pytest.importorskip("llvmlite")
    from symgraph import lax as L

    def f(z):
        return L.bind("cumprod", z, axis=0) * 2.0  # @cumprod

    z = np.array([2.0 + 1j, -1j, 3.0])
    with pytest.raises(sg.UnsupportedOpError, match="backend='numpy'") as e:
        sg.compile(f)(z)
    assert "'cumprod'" in str(e.value) and "complex128" in str(e.value)
    assert e.value.location is not None and e.value.location.lineno == f.__code__.co_firstlineno + 1
    np.testing.assert_allclose(sg.compile(f, backend="numpy")(z), np.cumprod(z) * 2.0, rtol=1e-15)
    a = np.array([[2.0, 1j], [-1j, 3.0]])
    np.testing.assert_allclose(sg.compile(lambda a: np.linalg.inv(a) * 2.0)(a), np.linalg.inv(a) * 2.0, rtol=1e-14)


def test_no_complex_warning_from_derivatives():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sg.grad(lambda x: np.sum(np.abs(x * (1 + 2j)) + np.real(np.exp(1j * x))))(np.array([0.5, 1.5]))
        np.testing.assert_allclose(sg.grad(lambda x: np.abs(x * (1 + 2j)))(1.5), np.sqrt(5.0), rtol=1e-15)


def test_compiled_complex_calls_take_the_generated_fast_path():
    """A complex signature gets a generated fast call (the parts copied in, the real program's fast call, the
    results assembled); non-contiguous, other-dtype or scalar arguments take the checked path, with equal values."""
    pytest.importorskip("llvmlite")
    rng = np.random.default_rng(4)
    z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    w = rng.standard_normal(4)

    def f(p):
        return {"y": np.exp(p["z"]) * p["w"], "s": np.sum(p["z"] * np.conj(p["z"])).real, "z2": p["z"] * 2j}

    cf = sg.compile(f)
    first = cf({"z": z, "w": w})
    sig = cf._last
    assert sig.exe.fast is not None and "complex_split" in sig.stats
    calls = []
    fast = sig.fast
    sig.fast = lambda args: calls.append(1) or fast(args)
    second = cf({"z": z, "w": w})
    assert calls, "the fast path was not taken"
    for k, want in f({"z": z, "w": w}).items():
        for got in (first[k], second[k]):
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(got, want, rtol=1e-14)
    zt = np.asfortranarray(z)  # not C-contiguous: MISS, then the checked path (the same numbers)
    np.testing.assert_allclose(cf({"z": zt, "w": w})["y"], np.exp(z) * w, rtol=1e-14)
    g = sg.compile(lambda c, x: c * x)
    for c in (np.complex128(1.5 - 2j), 1.5 - 2j):  # 0-d parts stay 0-d; a Python complex takes the checked path
        np.testing.assert_allclose(g(c, z), c * z, rtol=1e-15)
        np.testing.assert_allclose(g(c, z), c * z, rtol=1e-15)
