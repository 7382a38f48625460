"""log10, log2, exp2, expm1, log1p, sinh, cosh, reciprocal, the six inverse functions, isfinite and isinf on
complex values: NumPy's formulas on the parts (bit for bit where NumPy's formula uses only log / exp /
division; within 8 eps per element otherwise; the inverse functions by Kahan's formulas, within 8 eps of
NumPy's and with its signs on the branch cuts), signed zeros and overflow on the real axis, holomorphic derivatives against the analytic
ones and central differences (both modes, order 2), compiled natively (the complex split) and compiled
gradients against the evaluator's."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.testing import check_grads

RNG = np.random.default_rng(21)
NAMES = ["log10", "log2", "exp2", "expm1", "log1p", "sinh", "cosh", "reciprocal",
         "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]
INVERSE = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]
BITWISE = {"log10", "log2", "exp2", "reciprocal"}  # NumPy's formula is log / exp / Smith's division of 1


def _sample(dtype, n=4000):
    z = (RNG.standard_normal(n) * 3 + 1j * RNG.standard_normal(n) * 3).astype(dtype)
    z[:10] = [0, complex(0, -0.0), complex(-0.0, 0), 800 + 0j, -800 - 0j, complex(-0.0, 2), 1e-20 + 1e-20j,
              complex(3, -0.0), 1j, -2.5]
    return z


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", NAMES)
def test_values_against_numpy(name, dtype):
    f = getattr(np, name)
    z = _sample(dtype)
    with np.errstate(all="ignore"):
        want = f(z)
        ev = sg.compile(f, backend="numpy")(z)
        ll = sg.compile(f)(z)
    eps = np.finfo(np.float32 if dtype == np.complex64 else np.float64).eps
    for got, exact in ((ev, name in BITWISE), (ll, name == "reciprocal")):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
        fin10 = np.isfinite(want[:10])
        np.testing.assert_array_equal(np.signbit(got.imag[:10][fin10]), np.signbit(want.imag[:10][fin10]))  # signed 0
        if exact:
            assert got.tobytes() == want.tobytes()
        fin = np.isfinite(want)
        # relative to max(|want|, 1) for log1p and expm1: NumPy's formulas lose digits near 0 (log of a
        # hypot near 1, expm1(x) cos y - 2 sin^2(y/2)), so both give those values to an absolute eps
        scale = np.maximum(np.abs(want[fin]), 1.0 if name in ("log1p", "expm1") else np.finfo(want.real.dtype).tiny)
        rel = np.abs(got[fin] - want[fin]) / scale
        assert rel.max() <= 8 * eps, (name, rel.max() / eps)


DERIVATIVE = {"log10": lambda z: 1 / (z * np.log(10)), "log2": lambda z: 1 / (z * np.log(2)),
              "exp2": lambda z: np.log(2) * np.exp2(z), "expm1": np.exp, "log1p": lambda z: 1 / (1 + z),
              "sinh": np.cosh, "cosh": np.sinh, "reciprocal": lambda z: -1 / z ** 2,
              "arcsin": lambda z: 1 / np.sqrt(1 - z * z), "arccos": lambda z: -1 / np.sqrt(1 - z * z),
              "arctan": lambda z: 1 / (1 + z * z), "arcsinh": lambda z: 1 / np.sqrt(z * z + 1),
              "arccosh": lambda z: 1 / (np.sqrt(z - 1) * np.sqrt(z + 1)), "arctanh": lambda z: 1 / (1 - z * z)}


@pytest.mark.parametrize("name", NAMES)
def test_holomorphic_derivatives(name):
    f = getattr(np, name)
    w = np.array([0.3 + 0.7j, -1.2 + 0.4j, 2.0 + 0.0j, 0.5 - 0.2j])  # off the logarithms' branch cuts
    if name in INVERSE:
        w[2] = 2.0 + 0.3j  # 2 + 0j lies on the cuts of arcsin, arccos, arccosh and arctanh
    d = sg.vmap(sg.grad(f, holomorphic=True))(w)
    np.testing.assert_allclose(d, DERIVATIVE[name](w), rtol=1e-14)
    check_grads(f, (w,), order=2, modes=("fwd", "rev"))
    g = lambda z: np.sum(np.abs(f(z)) ** 2)  # noqa: E731  (a real function: JAX's gradient convention)
    np.testing.assert_allclose(sg.compile(sg.grad(g))(w), sg.grad(g)(w), rtol=1e-12)


def test_real_axis_overflow_keeps_a_zero_imaginary_part():
    z = np.array([800 + 0j, -800 - 0j, 800 - 0j])
    for f in (np.sinh, np.cosh):
        with np.errstate(all="ignore"):
            want = f(z)
        got = sg.compile(f)(z)
        assert np.array_equal(got.imag, want.imag) and np.array_equal(np.signbit(got.imag), np.signbit(want.imag))
    # and the derivative on the real axis is the real function's
    np.testing.assert_allclose(sg.grad(np.sinh, holomorphic=True)(2.0 + 0j), np.cosh(2.0), rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_isfinite_isinf(dtype):
    inf, nan = np.inf, np.nan
    z = np.array([1 + 1j, complex(inf, 0), complex(0, -inf), complex(nan, 1), complex(inf, nan), 0j], dtype)
    for f in (np.isfinite, np.isinf):
        for backend in ("numpy", "llvm"):
            np.testing.assert_array_equal(sg.compile(f, backend=backend)(z), f(z))


# on and around the branch cuts: the sign of a zero part picks the side, as in NumPy (C99 Annex G)
CUT_POINTS = [0, complex(0, -0.0), complex(-0.0, 0), complex(-0.0, -0.0), 2 + 0j, complex(2, -0.0), -2 + 0j,
              complex(-2, -0.0), 0.5 + 0j, complex(-0.5, -0.0), 1j, -1j, complex(0, 2), complex(-0.0, -2),
              complex(0, -3), 1e-20 + 1e-20j, complex(1e-300, 5)]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_on_branch_cuts(name, dtype):
    f = getattr(np, name)
    z = np.array(CUT_POINTS, dtype)
    with np.errstate(all="ignore"):
        want = f(z)
    eps = np.finfo(want.real.dtype).eps
    for backend in ("numpy", "llvm"):
        got = sg.compile(f, backend=backend)(z)
        np.testing.assert_allclose(got, want, rtol=8 * eps, atol=0)
        np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))
        np.testing.assert_array_equal(np.signbit(got.imag), np.signbit(want.imag))


# ----- sign and sinc of complex values (issue 18) -----

_SPECIAL = [complex(a, b) for a in (0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan)
            for b in (0.0, -0.0, 3.0, -1e-310, np.inf, -np.inf, np.nan)]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_sign_is_numpy2s_z_over_abs_z(dtype):
    """z / |z|, 0 at 0 (NumPy 2): every special case (signed zeros, infinities, NaN, subnormals) bit for bit
    in the evaluator, and in compiled code within 2 eps (its hypot), with the same signs and non-finite cases."""
    z = np.concatenate([np.array(_SPECIAL), _sample(np.complex128, 500)]).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.sign(z)
        ev = sg.compile(np.sign, backend="numpy")(z)
        ll = sg.compile(np.sign)(z)
    assert ev.dtype == ll.dtype == want.dtype
    assert ev.tobytes() == want.tobytes()
    parts = lambda v: v.view(want.real.dtype)  # noqa: E731
    np.testing.assert_array_equal(np.isnan(parts(ll)), np.isnan(parts(want)))
    np.testing.assert_array_equal(np.signbit(parts(ll)), np.signbit(parts(want)))
    fin = np.isfinite(want)
    eps = np.finfo(want.real.dtype).eps
    assert np.abs(ll[fin] - want[fin]).max() <= 2 * eps
    np.testing.assert_allclose(np.abs(want[fin][np.abs(z[fin]) > 0]), 1.0, rtol=2 * eps)  # a check of the sample


def test_sign_derivatives():
    """sign(z) = z/|z| is not holomorphic: its derivatives (JAX's convention) against central differences in
    both directions, both modes, order 2; Re sign(z) = x/r has gradient y²/r³ + i·xy/r³; 0 at z = 0."""
    z = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
    check_grads(np.sign, (z,), order=2)
    check_grads(lambda z: np.abs(np.sign(z) - 0.3j) ** 2, (z,), order=2)
    g = sg.grad(lambda z: np.sum(np.real(np.sign(z))))(np.array([0j, 3 + 4j]))
    np.testing.assert_allclose(g, [0.0, 16 / 125 + 12j / 125], rtol=1e-14, atol=0)
    loss = lambda z: np.sum(np.imag(np.sign(z) * z ** 2))  # noqa: E731
    np.testing.assert_allclose(sg.compile(sg.grad(loss))(z), sg.grad(loss)(z), rtol=1e-13)
    batched = sg.vmap(np.sign)(z.reshape(3, 2))
    np.testing.assert_array_equal(batched, np.sign(z.reshape(3, 2)))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_sinc_values(dtype):
    """NumPy's formula sin(pi z) / (pi z) with z = 0 replaced by 1e-20: bit for bit in the evaluator, within
    8 eps (normwise) compiled; 1 at 0."""
    z = (RNG.standard_normal(400) * 2 + 1j * RNG.standard_normal(400)).astype(dtype)
    z[:4] = [0, 1e-3j, 2.0, -1.5 + 0j]
    want = np.sinc(z)
    ev = sg.compile(np.sinc, backend="numpy")(z)
    ll = sg.compile(np.sinc)(z)
    assert ev.dtype == ll.dtype == want.dtype
    assert ev.tobytes() == want.tobytes()
    assert ll[0] == 1.0
    eps = np.finfo(want.real.dtype).eps
    assert (np.abs(ll - want) / np.maximum(np.abs(want), 1.0)).max() <= 8 * eps


def test_sinc_is_holomorphic():
    """sinc'(z) = (cos(pi z) - sinc(z)) / z (the Taylor branch near 0: sinc'(0) = 0, sinc''(0) = -pi²/3),
    with holomorphic=True to order 2, central differences in both modes, and compiled."""
    d = sg.grad(np.sinc, holomorphic=True)
    dd = sg.grad(d, holomorphic=True)
    for z in (0j, 0.01 + 0.02j, 1.3 - 0.7j, -2.2 + 0.4j):
        z = np.complex128(z)
        want = 0 if z == 0 else (np.cos(np.pi * z) - np.sinc(z)) / z
        np.testing.assert_allclose(d(z), want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(dd(np.complex128(0)), -np.pi ** 2 / 3, rtol=1e-14)
    z = np.array([0j, 0.01 + 0.02j, 1.3 - 0.7j, -0.02 + 1.1j])
    check_grads(np.sinc, (z,), order=2)
    loss = lambda z: np.sum(np.abs(np.sinc(z)) ** 2)  # noqa: E731
    np.testing.assert_allclose(sg.compile(sg.grad(loss))(z), sg.grad(loss)(z), rtol=1e-12, atol=1e-14)
