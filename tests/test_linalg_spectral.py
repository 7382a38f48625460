"""Spectral linear algebra: eigh, eigvalsh, svd, svdvals, qr and the composites built on them (pinv, lstsq,
matrix_rank, matrix_power, multi_dot, cond, the singular-value norms): values against NumPy, reconstruction
identities, derivatives of sign-invariant functions to order 2 in both modes, the degeneracy convention,
vmap, compiled code against the evaluator, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.errors import DTypeError, LinAlgError, ShapeError, UnsupportedOpError

rng = np.random.default_rng(18)


def _ev(f, *args):
    """f traced and run by the reference evaluator."""
    return sg.trace(f, *args).evaluate(*args)


def _sym(n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a + np.swapaxes(a, -1, -2)


# ----- values: the same LAPACK routines as NumPy, so the same numbers and the same signs -----


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_eigh_values_match_numpy(dtype, batch):
    a = _sym(4, batch).astype(dtype)
    w, v = _ev(lambda x: tuple(np.linalg.eigh(x)), a)
    w0, v0 = np.linalg.eigh(a)
    assert w.dtype == dtype and v.dtype == dtype
    np.testing.assert_array_equal(w, w0)
    np.testing.assert_array_equal(v, v0)
    np.testing.assert_allclose(_ev(np.linalg.eigvalsh, a), np.linalg.eigvalsh(a), rtol=1e-5, atol=1e-5)


def test_eigh_reads_one_triangle():
    a = rng.standard_normal((4, 4))  # not symmetric: NumPy reads the lower (UPLO='L') or upper triangle
    for uplo in ("L", "U"):
        w, v = _ev(lambda x: tuple(np.linalg.eigh(x, UPLO=uplo)), a)
        w0, v0 = np.linalg.eigh(a, UPLO=uplo)
        np.testing.assert_allclose(w, w0, atol=1e-12)
        np.testing.assert_allclose(np.abs(v), np.abs(v0), atol=1e-10)
    # the gradient with respect to the unread triangle is zero
    g = sg.grad(lambda x: np.sum(np.linalg.eigvalsh(x) ** 2))(a)
    assert np.all(np.triu(g, 1) == 0)
    s = np.tril(a) + np.tril(a, -1).T
    np.testing.assert_allclose(g, np.tril(4 * s, -1) + np.diag(2 * np.diag(s)), atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
def test_svd_values_match_numpy(shape):
    a = rng.standard_normal(shape)
    for full in (False, True):
        u, s, vt = _ev(lambda x: tuple(np.linalg.svd(x, full_matrices=full)), a)
        u0, s0, vt0 = np.linalg.svd(a, full_matrices=full)
        np.testing.assert_array_equal(u, u0)
        np.testing.assert_array_equal(s, s0)
        np.testing.assert_array_equal(vt, vt0)
    np.testing.assert_array_equal(_ev(lambda x: np.linalg.svd(x, compute_uv=False), a), np.linalg.svd(a, compute_uv=False))
    np.testing.assert_array_equal(_ev(np.linalg.svdvals, a), np.linalg.svdvals(a))
    u, s, vt = _ev(lambda x: tuple(np.linalg.svd(x, full_matrices=False)), a)
    np.testing.assert_allclose((u * s[..., None, :]) @ vt, a, atol=1e-12)


def test_hermitian_svd_is_numpys():
    a = _sym(4, (2,))
    for got, want in zip(_ev(lambda x: tuple(np.linalg.svd(x, hermitian=True)), a), np.linalg.svd(a, hermitian=True)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_ev(lambda x: np.linalg.svd(x, compute_uv=False, hermitian=True), a),
                                  np.linalg.svd(a, compute_uv=False, hermitian=True))
    np.testing.assert_allclose(_ev(lambda x: np.linalg.pinv(x, hermitian=True), a), np.linalg.pinv(a, hermitian=True),
                               atol=1e-12)
    sg.check_grads(lambda x: np.sum(np.linalg.svd(x, compute_uv=False, hermitian=True) ** 3), (a[0],), order=2)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
def test_qr_values_match_numpy(shape):
    a = rng.standard_normal(shape)
    for mode in ("reduced", "complete"):
        q, r = _ev(lambda x: tuple(np.linalg.qr(x, mode=mode)), a)
        q0, r0 = np.linalg.qr(a, mode=mode)
        np.testing.assert_array_equal(q, q0)
        np.testing.assert_array_equal(r, r0)
        np.testing.assert_allclose(q @ r, a, atol=1e-12)
    np.testing.assert_array_equal(_ev(lambda x: np.linalg.qr(x, mode="r"), a), np.linalg.qr(a, mode="r"))


def test_composites_match_numpy():
    a = rng.standard_normal((5, 3))
    b = rng.standard_normal(5)
    sq = rng.standard_normal((4, 4))
    np.testing.assert_allclose(_ev(np.linalg.pinv, a), np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(_ev(lambda x: np.linalg.pinv(x, rtol=None), sq), np.linalg.pinv(sq, rtol=None),
                               atol=1e-12)
    for rhs in (b, rng.standard_normal((5, 2))):
        got = _ev(lambda x, y: np.linalg.lstsq(x, y), a, rhs)
        want = np.linalg.lstsq(a, rhs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-12)
    low = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 5))
    assert int(_ev(np.linalg.matrix_rank, low)) == 2 == np.linalg.matrix_rank(low)
    assert int(_ev(np.linalg.matrix_rank, sq)) == 4
    for n in (0, 1, 2, 5, 6):
        np.testing.assert_allclose(_ev(lambda x: np.linalg.matrix_power(x, n), sq), np.linalg.matrix_power(sq, n),
                                   rtol=1e-12)
    mats = [rng.standard_normal(5), rng.standard_normal((5, 8)), rng.standard_normal((8, 2)), rng.standard_normal(2)]
    np.testing.assert_allclose(_ev(lambda *m: np.linalg.multi_dot(list(m)), *mats), np.linalg.multi_dot(mats),
                               rtol=1e-12)
    mats2 = mats[1:3] + [rng.standard_normal((2, 7))]
    np.testing.assert_allclose(_ev(lambda *m: np.linalg.multi_dot(list(m)), *mats2), np.linalg.multi_dot(mats2),
                               rtol=1e-12)
    for p in (None, 2, -2):
        np.testing.assert_allclose(_ev(lambda x: np.linalg.cond(x, p), a), np.linalg.cond(a, p), rtol=1e-12)
    for p in ("fro", "nuc", 1, -np.inf):  # through np.linalg.inv's rule
        np.testing.assert_allclose(_ev(lambda x: np.linalg.cond(x, p), sq), np.linalg.cond(sq, p), rtol=1e-12)
    np.testing.assert_allclose(_ev(lambda x: np.linalg.matrix_power(x, -3), sq), np.linalg.matrix_power(sq, -3),
                               rtol=1e-10)
    for ord_ in (2, -2, "nuc"):
        np.testing.assert_allclose(_ev(lambda x: np.linalg.norm(x, ord_), a), np.linalg.norm(a, ord_), rtol=1e-12)
        t = rng.standard_normal((2, 3, 4))
        np.testing.assert_allclose(_ev(lambda x: np.linalg.norm(x, ord_, axis=(0, 2), keepdims=True), t),
                                   np.linalg.norm(t, ord_, axis=(0, 2), keepdims=True), rtol=1e-12)
    assert sg.numpy.linalg.svd is not None and sg.numpy.linalg.eigh is not None


# ----- derivatives of sign-invariant functions, both modes, order 2 -----


def test_eigh_grads():
    def f(a):
        w, v = np.linalg.eigh(a)
        # eigenvalues, and a projector-type use of eigenvectors (invariant to their signs)
        return np.sum(w ** 2 * np.arange(1.0, 5.0)) + np.sum(v[0] ** 2 * w) + np.sum((v * v) @ w)

    sg.check_grads(f, (_sym(4),), order=2)
    sg.check_grads(lambda a: np.sum(np.sin(np.linalg.eigvalsh(a))), (rng.standard_normal((2, 3, 3)),), order=2)
    sg.check_grads(lambda a: np.sum(np.linalg.eigh(a, UPLO="U")[0] ** 3), (rng.standard_normal((3, 3)),), order=2)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3)])
def test_svd_grads(shape):
    a = rng.standard_normal(shape)

    def f(x):
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        rec = (u * s[..., None, :]) @ vt                 # U diag(s) V^T = x
        proj = u[..., :, :2] @ np.swapaxes(u[..., :, :2], -1, -2)
        return np.sum(rec * np.cos(x)) + np.sum(s ** 3) + np.sum(proj * x[..., :, :1])

    sg.check_grads(f, (a,), order=2)
    sg.check_grads(lambda x: np.sum(np.linalg.svdvals(x) * np.arange(1.0, min(shape[-2:]) + 1)), (a,), order=2)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_qr_and_composite_grads(shape):
    a = rng.standard_normal(shape)

    def f(x):
        q, r = np.linalg.qr(x)
        return np.sum(q * np.sin(q)) + np.sum(r ** 3)

    sg.check_grads(f, (a,), order=2)
    sg.check_grads(lambda x: np.sum(np.linalg.pinv(x) ** 2), (a,), order=2)
    sg.check_grads(lambda x: np.linalg.norm(x, "nuc") + np.linalg.norm(x, 2) * np.linalg.cond(x), (a,), order=2)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_full_decompositions_differentiate_as_reduced(shape):
    # NumPy's default full_matrices=True (and qr's complete mode): the extra columns are any basis of a
    # complement, ignored by the rules (PyTorch's convention); the rest differentiates as the reduced form
    a = rng.standard_normal(shape)
    k = min(shape)

    def full(x):
        u, s, vt = np.linalg.svd(x)
        return np.sum((u[:, :k] * s) @ vt[:k] * np.cos(x)) + np.sum(u[:, :k] ** 4) + np.sum(vt[:k] ** 4)

    def reduced(x):
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        return np.sum((u * s) @ vt * np.cos(x)) + np.sum(u ** 4) + np.sum(vt ** 4)

    np.testing.assert_allclose(sg.grad(full)(a), sg.grad(reduced)(a), rtol=1e-10, atol=1e-12)
    sg.check_grads(full, (a,), order=2)
    sg.check_vjp_jvp(lambda x: tuple(np.linalg.svd(x)), (a,))
    sg.check_grads(lambda x: np.sum(np.linalg.qr(x, mode="complete")[1] ** 3), (a,), order=2)
    sg.check_vjp_jvp(lambda x: tuple(np.linalg.qr(x, mode="complete")), (a,))


def test_lstsq_and_power_grads():
    a, b = rng.standard_normal((6, 3)), rng.standard_normal(6)
    sg.check_grads(lambda x, y: np.sum(np.linalg.lstsq(x, y)[0] ** 2), (a, b), order=2)
    sq = rng.standard_normal((3, 3)) * 0.5
    sg.check_grads(lambda x: np.sum(np.linalg.matrix_power(x, 5)), (sq,), order=2)


def test_pinv_derivative_at_repeated_singular_values():
    # Golub-Pereyra's formula needs no gap: at the identity d pinv = -dA (the SVD's rule would need one)
    da = rng.standard_normal((3, 3))
    _, t = sg.jvp(np.linalg.pinv, (np.eye(3),), (da,))
    np.testing.assert_allclose(t, -da, atol=1e-12)


def test_degenerate_eigenvalues_finite_and_right_for_invariant_functions():
    # a triple eigenvalue: sum(w**2) = |A|_F^2 still has its exact gradient, and eigenvector terms stay finite
    g = sg.grad(lambda a: np.sum(np.linalg.eigh(a)[0] ** 2))(2 * np.eye(3))
    np.testing.assert_allclose(g, 4 * np.eye(3), atol=1e-12)
    g = sg.grad(lambda a: np.sum(np.linalg.eigh(a)[1] ** 3))(np.eye(3))
    assert np.all(np.isfinite(g))
    g = sg.grad(lambda a: np.sum(np.linalg.svd(a)[1]))(np.eye(3))  # nuclear norm of I: gradient I
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)
    g = sg.grad(lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[0] ** 3))(np.zeros((3, 2)))
    assert np.all(np.isfinite(g))
    x = rng.standard_normal((4, 2))
    g = sg.grad(lambda a: np.sum(np.linalg.qr(a)[0] ** 3))(np.concatenate([x, x[:, :1]], axis=1))  # rank 2
    assert np.all(np.isfinite(g))


# ----- batching -----


def test_vmap():
    a = rng.standard_normal((4, 5, 3))
    np.testing.assert_allclose(sg.vmap(lambda x: np.linalg.svd(x, full_matrices=False)[1])(a),
                               np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    s = _sym(3, (4,))
    np.testing.assert_array_equal(sg.vmap(lambda x: np.linalg.eigh(x)[1])(s), np.linalg.eigh(s)[1])
    np.testing.assert_array_equal(sg.vmap(lambda x: np.linalg.qr(x)[1])(a), np.linalg.qr(a)[1])
    gs = sg.vmap(sg.grad(lambda x: np.sum(np.linalg.eigvalsh(x) ** 2)))(s)
    np.testing.assert_allclose(gs, np.stack([sg.grad(lambda x: np.sum(np.linalg.eigvalsh(x) ** 2))(m) for m in s]),
                               atol=1e-12)


# ----- errors -----


def test_errors():
    with pytest.raises(ShapeError, match="square"):
        sg.trace(np.linalg.eigh, np.ones((3, 4)))
    with pytest.raises(ShapeError, match="two dimensions"):
        sg.trace(np.linalg.svd, np.ones(3))
    with pytest.raises(DTypeError, match="float16"):
        sg.trace(np.linalg.qr, np.ones((3, 3), np.float16))
    g = sg.trace(lambda x: np.linalg.eigh(x)[0], np.eye(3))
    bad = np.eye(3)
    bad[2, 0] = np.nan
    with pytest.raises(LinAlgError, match="NaN"):
        g.evaluate(bad)
    assert issubclass(LinAlgError, np.linalg.LinAlgError)
    with pytest.raises(LinAlgError, match="NaN"):
        sg.trace(np.linalg.svdvals, np.eye(2)).evaluate(np.array([[1.0, np.inf], [0.0, 1.0]]))
    with pytest.raises(UnsupportedOpError, match="raw"):
        sg.trace(lambda x: np.linalg.qr(x, mode="raw"), np.eye(2))


# ----- compiled code: the same LAPACK routines as NumPy, called natively -----


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_equals_evaluator(dtype):
    pytest.importorskip("llvmlite")
    a = rng.standard_normal((2, 5, 5)).astype(dtype)
    fns = [lambda x: tuple(np.linalg.eigh(x)), lambda x: np.linalg.eigvalsh(x, UPLO="U"),
           lambda x: tuple(np.linalg.svd(x[:, :, :3])), lambda x: tuple(np.linalg.svd(x[:, :3, :], full_matrices=False)),
           lambda x: np.linalg.svdvals(x.swapaxes(1, 2)[:, :4]), lambda x: tuple(np.linalg.qr(x[:, :, :3])),
           lambda x: tuple(np.linalg.qr(x[:, :3, :])), lambda x: tuple(np.linalg.qr(x[:, :, :2], mode="complete"))]
    for f in fns:
        got = sg.compile(f)(a)
        want = _ev(f, a)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)   # LAPACK's bits, signs included
    np.testing.assert_array_equal(sg.compile(lambda x: np.linalg.eigh(x)[1])(a), np.linalg.eigh(a)[1])


def test_compiled_gradients_and_errors():
    pytest.importorskip("llvmlite")

    def loss(x):
        w, v = np.linalg.eigh(x @ x.T)
        u, s, vt = np.linalg.svd(x[:, :3], full_matrices=False)
        q, r = np.linalg.qr(x)
        return np.sum(w ** 2) + np.sum((u * s) @ vt) + np.sum(r ** 2) + np.linalg.norm(x, "nuc")

    a = rng.standard_normal((4, 4))
    v1, g1 = sg.compile(sg.value_and_grad(loss))(a)
    v0, g0 = sg.value_and_grad(loss)(a)
    np.testing.assert_allclose(v1, v0, rtol=1e-12)
    np.testing.assert_allclose(g1, g0, rtol=1e-10, atol=1e-12)
    f = sg.compile(lambda x: np.linalg.svd(x, compute_uv=False))
    bad = rng.standard_normal((3, 4, 4))
    bad[2, 1, 1] = np.inf
    with pytest.raises(LinAlgError, match=r"np.linalg.svd: the matrix contains NaN or infinity \(found by its internal step svdvals\)") as e:
        f(bad)
    assert "test_linalg_spectral.py" in str(e.value.location)  # the user's line, not generated code
    np.testing.assert_array_equal(f(bad[:2]), np.linalg.svd(bad[:2], compute_uv=False))  # same program, other shape


def test_lapack_status_slot_names_the_call():
    pytest.importorskip("llvmlite")
    from codegen.cpu.lapack import NONFINITE, lapack_error, plan_lapack

    g = sg.trace(lambda x: (np.linalg.eigvalsh(x), np.linalg.svdvals(x)), np.eye(3))
    nodes = [n for n in g.nodes if n.op.name in ("eigvalsh", "svdvals")]
    plan = plan_lapack(nodes, 100)
    assert plan.status_offset >= 100 and plan.scratch_offset >= plan.status_offset + 16
    arena = np.zeros(plan.arena_bytes, np.uint8)
    assert lapack_error(plan, arena) is None
    st = arena[plan.status_offset:plan.status_offset + 16].view(np.int64)
    k = [c.op for c in plan.order].index("svdvals")
    st[:] = (k + 1, 3)
    assert "SVD did not converge" in str(lapack_error(plan, arena)) and "info = 3" in str(lapack_error(plan, arena))
    st[:] = (k + 1, NONFINITE)
    assert "NaN or infinity" in str(lapack_error(plan, arena))


# ----- symgraph.scipy.linalg.expm -----


def test_expm_values_grads_vmap():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    import symgraph.scipy.linalg as sla

    for scale in (1e-3, 0.5, 4.0, 60.0):  # no squaring, and 0, 1, ~4 squarings
        a = rng.standard_normal((2, 4, 4)) * scale
        want = scipy_linalg.expm(a)
        np.testing.assert_allclose(_ev(sla.expm, a), want, rtol=1e-11, atol=1e-13 * np.abs(want).max())
    a = rng.standard_normal((3, 3))
    np.testing.assert_allclose(sla.expm(a), scipy_linalg.expm(a), rtol=1e-12)       # eager, on arrays
    np.testing.assert_allclose(_ev(sla.expm, np.zeros((2, 2))), np.eye(2))
    # d tr(expm(A)) / dA = expm(A)^T
    np.testing.assert_allclose(sg.grad(lambda x: np.trace(sla.expm(x)))(a), scipy_linalg.expm(a).T, rtol=1e-10)
    sg.check_grads(lambda x: np.sum(sla.expm(x) * np.cos(x)), (a,), order=2)
    sg.check_grads(lambda x: np.sum(sla.expm(2.5 * x) ** 2), (a,), order=1)          # through squarings
    b = rng.standard_normal((3, 2, 2))
    np.testing.assert_allclose(sg.vmap(sla.expm)(b), scipy_linalg.expm(b), rtol=1e-12)
    with pytest.raises(ShapeError, match="square"):
        sla.expm(np.ones((2, 3)))


def test_raw_outputs_differentiate_as_lapacks_choice():
    # autograd's cases: the raw eigenvectors and singular vectors (LAPACK's signs, locally smooth) against
    # finite differences, on symmetrized input for eigh
    def sym(f):
        return lambda x: f((np.tril(x) + np.swapaxes(np.tril(x), -1, -2)) / 2.0)

    m = rng.standard_normal((2, 5, 5)) + 5 * np.eye(5)
    sg.check_grads(sym(lambda x: tuple(np.linalg.eigh(x, "U"))), (m @ np.swapaxes(m, -1, -2),))
    for shape in ((3, 5), (2, 5, 3)):
        sg.check_grads(lambda x: tuple(np.linalg.svd(x, full_matrices=False)), (rng.standard_normal(shape),))
    sg.check_grads(lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)), (rng.standard_normal((5, 4, 3)),))


def test_numpy2_vector_and_matrix_norm():
    x = rng.standard_normal((3, 4, 5))
    for kw in ({}, {"axis": 1}, {"axis": (0, 2), "keepdims": True}, {"ord": 1}, {"ord": np.inf, "axis": -1}):
        np.testing.assert_allclose(_ev(lambda v: np.linalg.vector_norm(v, **kw), x), np.linalg.vector_norm(x, **kw),
                                   rtol=1e-14)
    for kw in ({}, {"ord": 2}, {"ord": "nuc", "keepdims": True}, {"ord": -np.inf}):
        np.testing.assert_allclose(_ev(lambda v: np.linalg.matrix_norm(v, **kw), x), np.linalg.matrix_norm(x, **kw),
                                   rtol=1e-14)
    sg.check_grads(lambda v: np.sum(np.linalg.matrix_norm(v, ord=2)) + np.linalg.vector_norm(v, axis=(0, 2))[1],
                   (x,), order=2)
