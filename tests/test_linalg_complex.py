"""np.linalg on complex matrices (docs/linalg.md, "Complex matrices"): values against NumPy, derivatives under
JAX's convention (docs/complex.md) by finite differences in the real and imaginary directions (check_grads, both
modes, order 2), holomorphic derivatives against their formulas, and both backends (the LLVM backend's native
complex LAPACK is tested in tests/test_linalg_complex_native.py)."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg

RNG = np.random.default_rng(18)


def _c(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _well(*shape, dtype=np.complex128):
    return (_c(*shape) + 3.0 * np.eye(shape[-1])).astype(dtype)


def _close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    tol = 1e-4 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


CDTYPES = [np.complex128, np.complex64]


# ----- 1. the holomorphic functions: solve, inv, det, tensorinv, tensorsolve -----


@pytest.mark.parametrize("dtype", CDTYPES)
def test_solve_inv_det_values_equal_numpy(dtype):
    a, b, v = _well(2, 4, 4, dtype=dtype), _c(2, 4, 3, dtype=dtype), _c(4, dtype=dtype)
    cases = {"solve": lambda a: np.linalg.solve(a, b), "solve vec": lambda a: np.linalg.solve(a[0], v),
             "inv": np.linalg.inv, "det": np.linalg.det, "slogdet": lambda a: tuple(np.linalg.slogdet(a)),
             "mixed real": lambda a: np.linalg.solve(a, np.real(b).astype(np.real(b).dtype))}
    for name, f in cases.items():
        want = f(a)
        got = sg.trace(f, a).evaluate(a)
        for g, w in zip(got if isinstance(want, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            _close(g, w, dtype)
        sg_backend = sg.compile(f, backend="numpy")(a)
        for g, w in zip(sg_backend if isinstance(want, tuple) else (sg_backend,),
                        want if isinstance(want, tuple) else (want,)):
            _close(g, w, dtype)
    real = np.real(a[0]).astype(np.real(a).dtype)  # a real matrix with a complex right-hand side
    _close(sg.trace(np.linalg.solve, real, v).evaluate(real, v), np.linalg.solve(real, v), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_holomorphic_rules_check_grads_order2(dtype):
    a, b = _well(3, 3, dtype=dtype), _c(3, 2, dtype=dtype)
    for f, args in [(np.linalg.solve, (a, b)), (np.linalg.inv, (a,)), (np.linalg.det, (a,)),
                    (lambda a: np.linalg.det(a[None] * np.array([1.0, 2.0])[:, None, None]), (a,))]:
        sg.check_grads(f, args, order=2 if dtype == np.complex128 else 1, modes=("fwd", "rev"))


def test_holomorphic_derivatives_are_the_complex_derivatives():
    a, b = _well(3, 3), _c(3)
    ai = np.linalg.inv(a)
    # d det / dA = det(A) A^-T, no conjugation (JAX's holomorphic convention)
    np.testing.assert_allclose(sg.grad(np.linalg.det, holomorphic=True)(a), np.linalg.det(a) * ai.T, rtol=1e-12)
    # d (solve(A, b))_i / d b_j = (A^-1)_ij
    np.testing.assert_allclose(sg.jacobian(lambda b: np.linalg.solve(a, b), holomorphic=True)(b), ai, rtol=1e-12)
    # d inv(A) / dA [E] = -A^-1 E A^-1, in both modes
    e = _c(3, 3)
    _, t = sg.jvp(np.linalg.inv, (a,), (e,))
    np.testing.assert_allclose(t, -ai @ e @ ai, rtol=1e-12)
    jac = sg.jacobian(np.linalg.inv, holomorphic=True)(a)
    np.testing.assert_allclose(np.einsum("ijkl,kl->ij", jac, e), -ai @ e @ ai, rtol=1e-12)
    # the second derivative of det at order 2: d²det/dA² [E, E] = 2 det(A) * (tr(A^-1 E)^2 - tr((A^-1 E)^2)) / 2
    h = sg.jvp(lambda a: sg.jvp(np.linalg.det, (a,), (e,))[1], (a,), (e,))[1]
    m = ai @ e
    np.testing.assert_allclose(h, np.linalg.det(a) * (np.trace(m) ** 2 - np.trace(m @ m)), rtol=1e-11)


def test_slogdet_sign_and_logabsdet_derivatives():
    a = _well(3, 3)
    sign, logabs = sg.trace(lambda a: tuple(np.linalg.slogdet(a)), a).evaluate(a)
    assert np.iscomplexobj(sign) and not np.iscomplexobj(logabs)
    # logabsdet = Re(log det A): its gradient (JAX's convention) is log det's complex derivative, A^-T
    np.testing.assert_allclose(sg.grad(lambda a: np.linalg.slogdet(a)[1])(a), np.linalg.inv(a).T, rtol=1e-12)
    sg.check_grads(lambda a: tuple(np.linalg.slogdet(a)), (a,), order=2)
    sg.check_grads(lambda a: tuple(np.linalg.slogdet(a)), (_well(2, 3, 3, dtype=np.complex64),), order=1)
    singular = np.array([[1 + 1j, 2 + 2j], [1.0, 2.0]])
    s, la = sg.trace(lambda a: tuple(np.linalg.slogdet(a)), singular).evaluate(singular)
    assert s == 0 and la == -np.inf and np.linalg.slogdet(singular)[0] == 0  # NumPy's values


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.complex64])
def test_tensorinv_and_tensorsolve_equal_numpy(dtype):
    mk = _c if np.dtype(dtype).kind == "c" else (lambda *s, dtype: RNG.standard_normal(s).astype(dtype))
    t = (mk(4, 6, 8, 3, dtype=dtype) + np.eye(24).reshape(4, 6, 8, 3) * 4).astype(dtype)
    for ind in (1, 2):
        tt = t.reshape(24, 24).reshape((24,) + (8, 3)) if ind == 1 else t
        _close(sg.trace(lambda x: np.linalg.tensorinv(x, ind=ind), tt).evaluate(tt), np.linalg.tensorinv(tt, ind), dtype)
    a, b = (mk(6, 4, 2, 3, 4, dtype=dtype) + np.eye(24).reshape(6, 4, 2, 3, 4) * 4).astype(dtype), mk(6, 4, dtype=dtype)
    _close(sg.trace(np.linalg.tensorsolve, a, b).evaluate(a, b), np.linalg.tensorsolve(a, b), dtype)
    a2 = np.transpose(a, np.argsort([1, 3, 4, 0, 2])).copy()  # axes 0 and 2 moved to the end give a
    f = lambda a, b: np.linalg.tensorsolve(a, b, axes=(0, 2))  # noqa: E731
    _close(sg.trace(f, a2, b).evaluate(a2, b), f(a2, b), dtype)
    if np.dtype(dtype) != np.complex64:
        sg.check_grads(lambda x: np.linalg.tensorinv(x, 2), (t[:2, :3, :2, :3],), order=2)
        small = (mk(2, 3, 2, 3, dtype=dtype) + 3 * np.eye(6).reshape(2, 3, 2, 3)).astype(dtype)
        sg.check_grads(np.linalg.tensorsolve, (small, b[:2, :3]), order=2)


def test_tensorinv_and_tensorsolve_errors_follow_numpy():
    z = _c(2, 3, 6)
    with pytest.raises(sg.ShapeError, match="Invalid ind"):
        sg.trace(lambda x: np.linalg.tensorinv(x, ind=0), z)
    with pytest.raises(sg.LinAlgError, match="square"):
        sg.trace(lambda x: np.linalg.tensorinv(x, ind=1), _c(4, 6))
    with pytest.raises(sg.LinAlgError, match=r"prod\(a.shape\[b.ndim:\]\)"):
        sg.trace(np.linalg.tensorsolve, _c(2, 3, 4), _c(2))
    with pytest.raises(np.linalg.LinAlgError):  # sg.LinAlgError is one: NumPy code that catches it keeps working
        sg.trace(np.linalg.tensorsolve, _c(2, 3, 4), _c(2))


def test_both_backends_compile_complex_linalg():
    """The LLVM backend runs complex LAPACK natively (tests/test_linalg_complex_native.py has the full set)."""
    pytest.importorskip("llvmlite")
    a = _well(3, 3)
    _close(sg.compile(np.linalg.inv)(a), np.linalg.inv(a), np.complex128)
    _close(sg.compile(np.linalg.inv, backend="numpy")(a), np.linalg.inv(a), np.complex128)


# ----- 2. slogdet (above), cholesky, eigh -----


def _hpd(*shape, dtype=np.complex128):
    a = _c(*shape)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_cholesky_of_hermitian_matrices(dtype):
    h = _hpd(2, 4, 4, dtype=dtype)
    # NumPy reads the lower triangle (upper=True: the upper one) and the diagonal's real part
    junk = h + np.triu(_c(4, 4), 1) + 1j * np.diag(RNG.standard_normal(4))
    junk_u = h + np.tril(_c(4, 4), -1) + 1j * np.diag(RNG.standard_normal(4))
    for x, upper in ((h, False), (junk.astype(dtype), False), (junk_u.astype(dtype), True)):
        f = lambda a: np.linalg.cholesky(a, upper=upper)  # noqa: E731
        _close(sg.trace(f, x).evaluate(x), f(x), dtype)
        sg.check_grads(f, (x[0],), order=2 if dtype == np.complex128 else 1)
    lm = sg.trace(np.linalg.cholesky, h).evaluate(h)
    _close(lm @ np.conj(np.swapaxes(lm, -1, -2)), h, dtype)


def test_cholesky_gradient_of_log_det_is_the_hermitian_inverse():
    """log det H = 2 Σ log L_ii; H reads the strictly lower triangle twice (with its conjugate) and the real
    diagonal once, so JAX's gradient is tril(2 H^-T, -1) + diag(H^-1)."""
    h = _hpd(4, 4)
    hi = np.linalg.inv(h)
    g = sg.grad(lambda a: 2 * np.sum(np.log(np.real(np.diagonal(np.linalg.cholesky(a))))))(h)
    np.testing.assert_allclose(g, np.tril(2 * hi.T, -1) + np.diag(np.diag(hi)), rtol=1e-12, atol=1e-14)
    with pytest.raises(sg.LinAlgError, match="not positive definite"):
        sg.trace(np.linalg.cholesky, -h).evaluate(-h)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_complex_matrices_as_autograd_checks(uplo):
    """autograd's test_eigh_complex / test_eigvalh_lower_complex / upper_complex: a random complex D = 6 matrix
    (not Hermitian: NumPy reads one triangle and the diagonal's real part), eigh(x, UPLO), (w, |v|)."""
    x = _c(6, 6)
    w, v = sg.trace(lambda x: tuple(np.linalg.eigh(x, uplo)), x).evaluate(x)
    ww, vv = np.linalg.eigh(x, uplo)
    assert w.dtype == np.float64 and v.dtype == np.complex128
    np.testing.assert_array_equal(w, ww)
    np.testing.assert_array_equal(v, vv)  # LAPACK's phases
    fun = lambda x: (np.linalg.eigh(x, uplo)[0], np.abs(np.linalg.eigh(x, uplo)[1]))  # noqa: E731
    sg.check_grads(fun, (x,), order=2)
    sg.check_grads(lambda x: np.linalg.eigvalsh(x, uplo), (x,), order=2)
    # the projector v vᴴ of each eigenvector is gauge invariant too; batched and complex64
    proj = lambda x: np.einsum("...ij,...kj->...jik", np.linalg.eigh(x, uplo)[1], np.conj(np.linalg.eigh(x, uplo)[1]))  # noqa: E731
    sg.check_grads(proj, (_c(2, 3, 3),), order=1)
    sg.check_grads(fun, (_c(2, 4, 4, dtype=np.complex64),), order=1)
    assert sg.trace(np.linalg.eigvalsh, x.astype(np.complex64)).evaluate(x.astype(np.complex64)).dtype == np.float32


def test_eigh_gradient_of_the_spectrum_is_the_matrix():
    """Σ w² = tr(H²) for the Hermitian H of the lower triangle: JAX's gradient tril(4 Hᵀ, -1) + 2 diag(H)."""
    x = _c(4, 4)
    h = np.tril(x, -1) + np.conj(np.tril(x, -1)).T + np.diag(np.real(np.diag(x)))
    g = sg.grad(lambda x: np.sum(np.linalg.eigvalsh(x) ** 2))(x)
    np.testing.assert_allclose(g, np.tril(4 * h.T, -1) + 2 * np.diag(np.diag(h)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.linalg.eigh(x)[0] ** 2))(x), g, rtol=1e-12, atol=1e-12)


# ----- 3. svd, eig, eigvals -----


@pytest.mark.parametrize("shape", [(3, 5), (4, 3, 5), (4, 4), (3, 4, 4), (5, 3), (4, 5, 3)],
                         ids=["wide-2d", "wide-3d", "square-2d", "square-3d", "tall-2d", "tall-3d"])
def test_svd_of_complex_matrices_as_autograd_checks(shape):
    """autograd's test_svd_{wide,square,tall}_{2d,3d}_complex: (|U|, s, |Vh|) of the reduced SVD."""
    x = _c(*shape)
    for full in (False, True):
        got = sg.trace(lambda x: tuple(np.linalg.svd(x, full_matrices=full)), x).evaluate(x)
        for g, w in zip(got, np.linalg.svd(x, full_matrices=full)):
            np.testing.assert_array_equal(g, w)  # LAPACK's values and phases
    fun = lambda x: (lambda u, s, vh: (np.abs(u), s, np.abs(vh)))(*np.linalg.svd(x, full_matrices=False))  # noqa: E731
    sg.check_grads(fun, (x,), order=2 if len(shape) == 2 else 1)
    if len(shape) == 2:
        proj = lambda x: (lambda u, s, vh: (u @ np.conj(u.T), u @ (s[:, None] * vh)))(*np.linalg.svd(x, full_matrices=False))  # noqa: E731
        sg.check_grads(proj, (x,), order=2)
        sg.check_grads(lambda x: np.linalg.svd(x, compute_uv=False), (x.astype(np.complex64),), order=1)
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        # the nuclear norm Σ s: JAX's gradient conj(U Vh)
        np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.linalg.svd(x, compute_uv=False)))(x), np.conj(u @ vh),
                                   rtol=1e-12, atol=1e-13)


def test_eig_as_autograd_checks():
    """autograd's test_eig_real ((|w|, |v|) of a real D = 8 matrix), test_eig_complex ((w, |v|) of a complex one)
    and test_eig_batched ((w, |v|) of five complex ones)."""
    real, cplx, batch = RNG.standard_normal((8, 8)), _c(8, 8), _c(5, 8, 8)
    for x in (real, cplx, batch):
        w, v = sg.trace(lambda x: tuple(np.linalg.eig(x)), x).evaluate(x)
        ww, vv = np.linalg.eig(x)
        assert w.dtype == v.dtype == np.complex128  # always complex (NumPy: real when all eigenvalues are)
        np.testing.assert_array_equal(w, ww)
        np.testing.assert_array_equal(v, vv)
        np.testing.assert_array_equal(sg.trace(np.linalg.eigvals, x).evaluate(x), np.linalg.eigvals(x))
    sg.check_grads(lambda x: (np.abs(np.linalg.eig(x)[0]), np.abs(np.linalg.eig(x)[1])), (real,), order=1)
    sg.check_grads(lambda x: (np.linalg.eig(x)[0], np.abs(np.linalg.eig(x)[1])), (cplx,), order=2)
    sg.check_grads(lambda x: (np.linalg.eig(x)[0], np.abs(np.linalg.eig(x)[1])), (batch,), order=1)


def test_eig_eigenvectors_differentiate_as_numpys_output():
    """The rules keep ?geev's normalization (unit norm, largest component real), so V itself matches finite
    differences of np.linalg.eig; eigvals is holomorphic for complex input: d Σ w / dA = I, d Π w / dA = det A^-T."""
    x = _c(4, 4)
    sg.check_grads(lambda x: np.linalg.eig(x)[1], (x,), order=1)
    sg.check_grads(lambda x: np.linalg.eig(x)[1], (RNG.standard_normal((4, 4)),), order=1)
    sg.check_grads(np.linalg.eigvals, (_c(2, 3, 3, dtype=np.complex64),), order=1)
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.linalg.eigvals(x)), holomorphic=True)(x), np.eye(4),
                               atol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda x: np.prod(np.linalg.eig(x)[0]), holomorphic=True)(x),
                               np.linalg.det(x) * np.linalg.inv(x).T, rtol=1e-10)
    # a real matrix: the gradient of a real function of the eigenvalues is real
    a = RNG.standard_normal((4, 4))
    g = sg.grad(lambda a: np.sum(np.abs(np.linalg.eigvals(a)) ** 2))(a)
    assert g.dtype == np.float64
    for backend in ("llvm", "numpy"):  # compiled natively (dgeev) and through NumPy
        np.testing.assert_allclose(sg.compile(np.linalg.eigvals, backend=backend)(a), np.linalg.eigvals(a), rtol=1e-14)


# ----- built on them: norms, cond, matrix_rank, pinv, lstsq -----


def test_norms_of_complex_arrays_as_autograd_checks():
    """autograd's *_complex norm cases: vector ords 2..4, every axis, the Frobenius norm over two axes, the
    nuclear norm (2-d and over axes (0, 1)); also the other matrix ords, NumPy's values and real dtypes."""
    v, m, t = _c(6), _c(6, 5), _c(6, 5, 4)
    cases = [(lambda x, o=o: np.linalg.norm(x, ord=o), v) for o in (2, 3, 4, 1, 0, np.inf, -np.inf, -1)]
    cases += [(lambda x, a=a: np.linalg.norm(x, axis=a), t) for a in range(3)]
    cases += [(lambda x: np.linalg.norm(x, axis=(0, 1)), t), (lambda x: np.linalg.norm(x, ord="nuc"), m),
              (lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)), t), (lambda x: np.linalg.norm(x), m)]
    cases += [(lambda x, o=o: np.linalg.norm(x, o), m) for o in ("fro", 1, -1, 2, -2, np.inf, -np.inf)]
    for k, (f, x) in enumerate(cases):
        got, want = sg.trace(f, x).evaluate(x), f(x)
        assert got.dtype == np.asarray(want).dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-14)
        if k != 4 and k % 3 == 0:  # ord 0 counts (no derivative); a third of the rest keeps the test quick
            sg.check_grads(f, (x,), order=1)
    for f, x in (cases[0], cases[9], cases[13], cases[-4]):  # the 2-norm, an axis, 'nuc', the matrix 2-norm
        sg.check_grads(f, (x,), order=1)
    np.testing.assert_allclose(sg.grad(lambda x: np.linalg.norm(x, axis=0).sum())(m), np.conj(m) / np.linalg.norm(m, axis=0),
                               rtol=1e-14)  # conj(x)/|x|, JAX's convention


def test_cond_rank_pinv_lstsq_of_complex_matrices():
    m, low = _c(4, 4), _c(5, 2) @ _c(2, 5)
    for f, x in [(np.linalg.cond, m), (lambda x: np.linalg.cond(x, 1), m), (lambda x: np.linalg.cond(x, -2), m),
                 (np.linalg.matrix_rank, low), (lambda x: np.linalg.matrix_rank(x, hermitian=True), low @ np.conj(low.T)),
                 (np.linalg.pinv, _c(5, 3)), (np.linalg.pinv, _c(2, 3, 5))]:
        got, want = sg.trace(f, x).evaluate(x), f(x)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    sg.check_grads(np.linalg.cond, (m,), order=1)
    sg.check_grads(np.linalg.pinv, (_c(3, 5),), order=2)  # Golub & Pereyra with conjugate transposes
    sg.check_grads(lambda x: np.linalg.pinv(np.conj(x.T) @ x), (_c(3, 5),), order=1)  # a fixed rank 3 of 5
    a, b = _c(6, 3), _c(6, 2)
    for rhs in (b, b[:, 0], np.real(b)):
        for g, w in zip(sg.trace(np.linalg.lstsq, a, rhs).evaluate(a, rhs), np.linalg.lstsq(a, rhs)):
            assert np.asarray(g).dtype == np.asarray(w).dtype  # residuals and s real, as NumPy's
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    sg.check_grads(lambda a, b: np.linalg.lstsq(a, b)[0], (a, b), order=1)


def test_custom_jvp_functions_of_complex_arguments_differentiate_in_reverse_mode():
    """Reverse mode of a custom_jvp transposes its rule; complex arguments used to get no cotangent (pinv's)."""
    @sg.custom_jvp
    def sq(z):
        return z * z

    @sq.defjvp
    def _sq_jvp(primals, tangents):
        return primals[0] * primals[0], 2 * primals[0] * tangents[0]

    z = np.complex128(1 + 2j)
    assert sg.grad(lambda z: np.real(sq(z)))(z) == 2 * z  # Re(z²) = Re of a holomorphic map: its derivative
    sg.check_grads(sq, (np.array([z, 0.5 - 1j]),), order=1)


def test_matrix_power_and_multi_dot_of_complex_matrices():
    a, b, c = _well(3, 3), _c(3, 4), _c(4, 2)
    for f, args in [(lambda a: np.linalg.matrix_power(a, 3), (a,)), (lambda a: np.linalg.matrix_power(a, -2), (a,)),
                    (lambda a, b, c: np.linalg.multi_dot([a, b, c]), (a, b, c))]:
        np.testing.assert_allclose(sg.trace(f, *args).evaluate(*args), f(*args), rtol=1e-12)
    sg.check_grads(lambda a: np.linalg.matrix_power(a, -2), (a,), order=1)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_of_complex_matrices(shape):
    """R's diagonal is real (LAPACK's), which fixes the phases: Q and R themselves differentiate."""
    x = _c(*shape)
    for mode in ("reduced", "complete"):
        got = sg.trace(lambda x: tuple(np.linalg.qr(x, mode)), x).evaluate(x)
        for g, w in zip(got, np.linalg.qr(x, mode)):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(sg.trace(lambda x: np.linalg.qr(x, "r"), x).evaluate(x), np.linalg.qr(x, "r"))
    sg.check_grads(lambda x: tuple(np.linalg.qr(x)), (x,), order=2 if len(shape) == 2 else 1)
