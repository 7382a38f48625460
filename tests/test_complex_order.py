"""np.max / np.min / np.argmax / np.argmin of complex arrays: NumPy's lexicographic order and NaN rule
(symgraph/numpy/complex_order.py), values in the evaluator and compiled, derivatives to order 2."""

import numpy as np
import pytest

import symgraph as sg

RNG = np.random.default_rng(11)
Z = RNG.normal(size=(3, 4)) + 1j * RNG.normal(size=(3, 4))
TIED = Z.copy()
TIED[1, 2] = TIED[1, 0].real + 5j  # equal real parts: the imaginary part decides
TIED[2, 3] = TIED[0, 1]  # an equal value twice: the first index wins
NAN = Z.copy()
NAN[2, 1] = np.nan + 1j
NAN[0, 3] = 2 + np.nan * 1j  # a NaN part wins every comparison; the first in C order


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("arr", [Z, TIED, NAN, Z[0], np.array([1 + 2j, 1 + 3j, 0.5 + 9j, 1 + 3j])],
                         ids=["random", "ties", "nan", "1-d", "lexicographic"])
def test_values_are_numpy_s(arr, dtype):
    a = arr.astype(dtype)
    axes = [None, 0, -1, (0, 1)] if a.ndim == 2 else [None, 0]
    for ax in axes:
        for fn in (np.max, np.min, np.amax, np.amin):
            want = fn(a, axis=ax)
            for got in (sg.trace(lambda x: fn(x, axis=ax), a).evaluate(a), sg.compile(lambda x: fn(x, axis=ax))(a)):
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
        if isinstance(ax, tuple):
            continue
        for fn in (np.argmax, np.argmin):
            want = fn(a, axis=ax)
            for got in (sg.trace(lambda x: fn(x, axis=ax), a).evaluate(a), sg.compile(lambda x: fn(x, axis=ax))(a)):
                np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sg.trace(lambda x: x.max(axis=0, keepdims=True), a).evaluate(a),
                                  a.max(axis=0, keepdims=True))
    np.testing.assert_array_equal(sg.trace(lambda x: x.argmin(axis=-1), a).evaluate(a), a.argmin(axis=-1))


def test_derivatives_to_order_two():
    sg.check_grads(lambda x: np.abs(np.max(x * x, axis=0)).sum() + np.real(np.min(x)), (Z,), order=2)
    sg.check_grads(lambda x: np.real(np.max(x) * 2j + np.min(x, axis=1).sum()), (Z,), order=2)
    sg.check_grads(lambda x: np.imag(x.max(axis=(0, 1)) + x.min(keepdims=True).sum()), (Z,), order=2)


def test_the_derivative_goes_to_the_chosen_element_and_real_ties_share_it():
    z = np.array([1 + 2j, 0.5 + 9j, 3 - 1j])
    np.testing.assert_array_equal(sg.grad(lambda x: np.imag(np.max(x)))(z), [0, 0, -1j])  # JAX: grad(imag)(z) = -1j
    # equal real parts: a change of either real part moves the maximum's real part (one-sided); shared equally,
    # as real ties are; the imaginary part's derivative goes to the chosen element only
    t = np.array([1 + 2j, 1 + 3j, 0.5 + 9j])
    np.testing.assert_array_equal(sg.grad(lambda x: np.real(np.max(x)))(t), [0.5, 0.5, 0])
    np.testing.assert_array_equal(sg.grad(lambda x: np.imag(np.max(x)))(t), [0, -1j, 0])


def test_vmap_and_compiled_gradient():
    np.testing.assert_array_equal(sg.vmap(np.max)(Z), np.max(Z, axis=1))
    f = lambda x: np.abs(np.min(x, axis=0)).sum()
    np.testing.assert_allclose(sg.compile(sg.grad(f))(Z), sg.grad(f)(Z), rtol=1e-14)
