"""symgraph.scipy.linalg on complex matrices: values against SciPy's, derivatives under JAX's convention
against central differences (both modes, order 2), trans='C' as the conjugate transpose, mixed real and
complex operands, complex64, batches, and the cases SciPy itself refuses."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.scipy.linalg as sla
from symgraph.testing import check_grads

S = pytest.importorskip("scipy.linalg")

RNG = np.random.default_rng(5)
N = 4
A = RNG.standard_normal((N, N)) + 1j * RNG.standard_normal((N, N))
H = A @ A.conj().T + N * np.eye(N)          # Hermitian positive definite
UP = np.triu(A) + 3 * np.eye(N)
LO = np.tril(A) + 3 * np.eye(N)
B = RNG.standard_normal(N) + 1j * RNG.standard_normal(N)
BK = RNG.standard_normal((N, 2)) + 1j * RNG.standard_normal((N, 2))

# name: (symgraph function, SciPy function, matrix)
CASES = {
    "solve_triangular": (lambda a, b: sla.solve_triangular(a, b), lambda a, b: S.solve_triangular(a, b), UP),
    "solve_triangular_T_lower": (lambda a, b: sla.solve_triangular(a, b, trans=1, lower=True),
                                 lambda a, b: S.solve_triangular(a, b, trans=1, lower=True), LO),
    "solve_triangular_C": (lambda a, b: sla.solve_triangular(a, b, trans="C"),
                           lambda a, b: S.solve_triangular(a, b, trans="C"), UP),
    "solve_triangular_C_unit": (lambda a, b: sla.solve_triangular(a, b, trans=2, lower=True, unit_diagonal=True),
                                lambda a, b: S.solve_triangular(a, b, trans=2, lower=True, unit_diagonal=True), LO),
    "cholesky_upper": (lambda a, b: sla.cholesky(a), lambda a, b: S.cholesky(a), H),
    "cholesky_lower": (lambda a, b: sla.cholesky(a, lower=True), lambda a, b: S.cholesky(a, lower=True), H),
    "cho_solve_upper": (lambda a, b: sla.cho_solve(sla.cho_factor(a), b), lambda a, b: S.cho_solve(S.cho_factor(a), b), H),
    "cho_solve_lower": (lambda a, b: sla.cho_solve(sla.cho_factor(a, lower=True), b),
                        lambda a, b: S.cho_solve(S.cho_factor(a, lower=True), b), H),
    "lu_solve": (lambda a, b: sla.lu_solve(sla.lu_factor(a), b), lambda a, b: S.lu_solve(S.lu_factor(a), b), A),
    "lu_solve_T": (lambda a, b: sla.lu_solve(sla.lu_factor(a), b, trans=1),
                   lambda a, b: S.lu_solve(S.lu_factor(a), b, trans=1), A),
    "lu_solve_C": (lambda a, b: sla.lu_solve(sla.lu_factor(a), b, trans=2),
                   lambda a, b: S.lu_solve(S.lu_factor(a), b, trans=2), A),
    "lu_factor": (lambda a, b: sla.lu_factor(a)[0], lambda a, b: S.lu_factor(a)[0], A),
    "det": (lambda a, b: sla.det(a), lambda a, b: S.det(a), A),
    "inv": (lambda a, b: sla.inv(a), lambda a, b: S.inv(a), A),
    "solve": (lambda a, b: sla.solve(a, b), lambda a, b: S.solve(a, b), A),
    "solve_pos": (lambda a, b: sla.solve(a, b, assume_a="pos"), lambda a, b: S.solve(a, b, assume_a="pos"), H),
    "expm": (lambda a, b: sla.expm(0.3 * a), lambda a, b: S.expm(0.3 * a), A),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("rhs", ["vector", "matrix"])
def test_values_against_scipy(name, rhs):
    f, ref, m = CASES[name]
    b = B if rhs == "vector" else BK
    want = ref(m, b)
    for got in (f(m, b), sg.compile(f, backend="numpy")(m, b)):
        got = np.asarray(got)
        assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(CASES))
def test_derivatives_jax_convention(name):
    f, _, m = CASES[name]
    check_grads(f, (m, B), order=2, modes=("fwd", "rev"))


def test_conjugate_transpose_is_not_the_transpose():
    x_c = sla.solve_triangular(UP, B, trans="C")
    x_t = sla.solve_triangular(UP, B, trans="T")
    np.testing.assert_allclose(UP.conj().T @ x_c, B, rtol=1e-13)
    np.testing.assert_allclose(UP.T @ x_t, B, rtol=1e-13)
    assert not np.allclose(x_c, x_t)
    np.testing.assert_allclose(A.conj().T @ sla.lu_solve(sla.lu_factor(A), B, trans="C"), B, rtol=1e-12)
    # real matrices: 'C' is 'T'
    r = UP.real
    np.testing.assert_array_equal(sla.solve_triangular(r, B.real, trans="C"), sla.solve_triangular(r, B.real, trans=1))


def test_mixed_real_and_complex_operands():
    # a real matrix with a complex right-hand side computes in complex128, as SciPy's
    m = H.real  # symmetric positive definite
    for f, ref, a in [(sla.solve, S.solve, m), (sla.solve_triangular, S.solve_triangular, np.triu(m)),
                      (lambda a, b: sla.cho_solve(sla.cho_factor(a), b), lambda a, b: S.cho_solve(S.cho_factor(a), b), m)]:
        got = sg.compile(f, backend="numpy")(a, B)
        assert got.dtype == np.complex128
        np.testing.assert_allclose(got, ref(a, B), rtol=1e-12, atol=1e-13)


def test_complex64_and_batches():
    a64, b64 = A.astype(np.complex64), B.astype(np.complex64)
    x = sla.lu_solve(sla.lu_factor(a64), b64, trans=2)
    assert x.dtype == np.complex64
    np.testing.assert_allclose(x, S.lu_solve(S.lu_factor(a64), b64, trans=2), rtol=2e-5, atol=2e-5)
    stack = np.stack([H, 2 * H, H + np.eye(N)])
    x = sg.compile(lambda a, b: sla.cho_solve(sla.cho_factor(a), b), backend="numpy")(stack, BK)
    for i in range(3):
        np.testing.assert_allclose(x[i], S.cho_solve(S.cho_factor(stack[i]), BK), rtol=1e-12)
    np.testing.assert_allclose(sla.expm(np.stack([0.2 * A, -0.1j * A])),
                               np.stack([S.expm(0.2 * A), S.expm(-0.1j * A)]), rtol=1e-12, atol=1e-13)


def test_refusals_and_errors():
    with pytest.raises(sg.UnsupportedOpError, match="transposed=True"):
        sla.solve(A, B, transposed=True)  # SciPy: NotImplementedError for complex a
    with pytest.raises(sg.LinAlgError):
        sla.cholesky(A @ A.conj().T - 10 * np.eye(N))  # not positive definite
    with pytest.raises(sg.LinAlgError):
        sla.solve_triangular(np.triu(A) - np.diag(np.diag(A)), B)  # a zero on the diagonal
