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
