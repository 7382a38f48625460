"""Dense linear algebra (solve/factor family): values against NumPy/SciPy, derivatives, batching, errors.

np.linalg.solve/inv/det/slogdet/cholesky trace through `__array_function__`; symgraph.scipy.linalg
mirrors scipy.linalg. Values are checked against NumPy and SciPy for several shapes (batched,
float32), derivatives with `check_grads` (both modes, order 2) and against analytic identities,
batching with `vmap`, and failures (singular, not positive definite, non-square, NaN) raise
`sg.LinAlgError`.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import symgraph as sg
import symgraph.scipy.linalg as gl

sl = pytest.importorskip("scipy.linalg")

RNG = np.random.default_rng(18)


def _gen(shape, dtype=np.float64):
    n = shape[-1]
    return (RNG.standard_normal(shape) + 2.0 * np.eye(n)).astype(dtype)


def _spd(shape, dtype=np.float64):
    n = shape[-1]
    a = RNG.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def _ev(f, *args):
    """f traced at args and run by the NumPy evaluator."""
    return sg.trace(f, *args).evaluate(*args)


SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_values(shape, dtype):
    a, s = _gen(shape, dtype), _spd(shape, dtype)
    b = RNG.standard_normal(shape[:-1] + (2,)).astype(dtype)
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for name, f, x in [("solve", lambda a: np.linalg.solve(a, b), a), ("inv", np.linalg.inv, a),
                       ("det", np.linalg.det, a), ("cholesky", np.linalg.cholesky, s),
                       ("cholesky upper", lambda s: np.linalg.cholesky(s, upper=True), s),
                       ("logdet", lambda a: np.linalg.slogdet(a).logabsdet, a),
                       ("sign", lambda a: np.linalg.slogdet(a).sign, a)]:
        got = _ev(f, x)
        assert got.dtype == dtype, name
        np.testing.assert_allclose(got, f(x), **tol, err_msg=name)


def test_solve_numpy2_broadcasting():
    a = _gen((3, 4, 4))
    for b in [RNG.standard_normal(4), RNG.standard_normal((4, 2)), RNG.standard_normal((3, 4, 2)),
              RNG.standard_normal((5, 1, 4, 1))]:
        np.testing.assert_allclose(_ev(lambda a, b: np.linalg.solve(a, b), a, b), np.linalg.solve(a, b),
                                   rtol=1e-10)
    # one matrix, a batch of right-hand sides: one factorization
    a2, b2 = _gen((4, 4)), RNG.standard_normal((3, 2, 4, 5))
    g = sg.trace(lambda a, b: np.linalg.solve(a, b), a2, b2)
    np.testing.assert_allclose(g.evaluate(a2, b2), np.linalg.solve(a2, b2), rtol=1e-10)
    assert sum(n.op.name == "lu" for n in g.toposort()) == 1


def test_int_matrices_compute_in_float64():
    a = np.array([[3, 1], [1, 2]])
    assert _ev(np.linalg.inv, a.astype(float)).dtype == np.float64
    got = _ev(lambda x: np.linalg.solve(a, x), np.ones(2))
    np.testing.assert_allclose(got, np.linalg.solve(a, np.ones(2)))
    np.testing.assert_allclose(_ev(lambda x: np.linalg.det(a) * x, 1.0), np.linalg.det(a))


def test_scipy_values():
    a, s, t = _gen((2, 4, 4)), _spd((2, 4, 4)), np.tril(_gen((2, 4, 4)))
    b, v = RNG.standard_normal((2, 4, 3)), RNG.standard_normal(4)
    cases = [
        (lambda t, b: gl.solve_triangular(t, b, lower=True), sl.solve_triangular(t, b, lower=True), (t, b)),
        (lambda t, b: gl.solve_triangular(t, b, trans="T", lower=True, unit_diagonal=True),
         sl.solve_triangular(t, b, trans="T", lower=True, unit_diagonal=True), (t, b)),
        (lambda t, v: gl.solve_triangular(t, v), sl.solve_triangular(t[0].T, v), (t[0].T, v)),
        (lambda s: gl.cholesky(s), sl.cholesky(s), (s,)),
        (lambda s: gl.cholesky(s, lower=True), sl.cholesky(s, lower=True), (s,)),
        (lambda s, b: gl.cho_solve(gl.cho_factor(s), b), sl.cho_solve(sl.cho_factor(s), b), (s, b)),
        (lambda s, b: gl.cho_solve(gl.cho_factor(s, lower=True), b), sl.cho_solve(sl.cho_factor(s, lower=True), b),
         (s, b)),
        (lambda a: gl.lu_factor(a)[0], sl.lu_factor(a)[0], (a,)),
        (lambda a, b: gl.lu_solve(gl.lu_factor(a), b), sl.lu_solve(sl.lu_factor(a), b), (a, b)),
        (lambda a, b: gl.lu_solve(gl.lu_factor(a), b, trans=1), sl.lu_solve(sl.lu_factor(a), b, trans=1), (a, b)),
        (gl.det, sl.det(a), (a,)), (gl.inv, sl.inv(a), (a,)), (gl.solve, sl.solve(a, b), (a, b)),
        (lambda s, b: gl.solve(s, b, assume_a="pos"), sl.solve(s, b, assume_a="pos"), (s, b)),
        (lambda a, b: gl.solve(a, b, transposed=True), sl.solve(a, b, transposed=True), (a, b)),
    ]
    for i, (f, want, args) in enumerate(cases):
        np.testing.assert_allclose(_ev(f, *args), want, rtol=1e-9, atol=1e-12, err_msg=f"case {i}")
        np.testing.assert_allclose(f(*args), want, rtol=1e-9, atol=1e-12, err_msg=f"case {i} (eager)")
    piv = _ev(lambda a: gl.lu_factor(a)[1], a)
    assert piv.dtype == np.int32 and np.array_equal(piv, sl.lu_factor(a)[1])
    # a plain-array pivot vector (from SciPy) works too
    lu, p = sl.lu_factor(a[0])
    np.testing.assert_allclose(_ev(lambda lu, b: gl.lu_solve((lu, p), b), lu, v), sl.lu_solve((lu, p), v))


# ----- derivatives -----


def _sym(x):
    return 0.5 * (x + np.swapaxes(x, -1, -2))


def test_grads_numpy_order2():
    a, s = _gen((3, 3)), _spd((2, 3, 3))
    b = RNG.standard_normal((3, 2))
    sg.check_grads(lambda a, b: np.sum(np.sin(np.linalg.solve(a, b))), (a, b), order=2)
    sg.check_grads(lambda a: np.sum(np.linalg.inv(a) ** 2), (a,), order=2)
    sg.check_grads(np.linalg.det, (a,), order=2)
    sg.check_grads(lambda a: np.linalg.slogdet(a).logabsdet, (a,), order=2)
    sg.check_grads(lambda s: np.sum(np.tanh(np.linalg.cholesky(s))), (s,), order=2)
    sg.check_grads(lambda s: np.sum(np.linalg.cholesky(s, upper=True) ** 3), (s[0],), order=2)


def test_grads_scipy_order2():
    t, a, s = np.tril(_gen((3, 3))), _gen((3, 3)), _spd((3, 3))
    b = RNG.standard_normal((3, 2))
    sg.check_grads(lambda t, b: np.sum(gl.solve_triangular(t, b, lower=True, trans=1) ** 2), (t, b), order=2)
    sg.check_grads(lambda t, b: np.sum(gl.solve_triangular(t, b, unit_diagonal=True) ** 2), (t.T, b), order=2)
    sg.check_grads(lambda s, b: np.sum(gl.cho_solve(gl.cho_factor(s), b) ** 2), (s, b), order=2)
    sg.check_grads(lambda a, b: np.sum(gl.lu_solve(gl.lu_factor(a), b, trans=1) ** 2), (a, b), order=2)
    sg.check_grads(lambda a: np.sum(gl.lu_factor(a)[0] ** 2), (a,), order=2)


def test_gradient_identities():
    a, s = _gen((4, 4)), _spd((4, 4))
    # d log|det A| / dA = A^-T, d det A / dA = det(A) A^-T (Giles 2008 §2.2.3)
    np.testing.assert_allclose(sg.grad(lambda a: np.linalg.slogdet(a)[1])(a), np.linalg.inv(a).T, rtol=1e-10)
    np.testing.assert_allclose(sg.grad(np.linalg.det)(a), np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-9)
    # cholesky reads the lower triangle: symmetric perturbations of a symmetric matrix give the
    # symmetric convention's derivative, upper-triangle perturbations nothing
    # (sum log diag L = log det(s) / 2, whose symmetric gradient s^-1 / 2 folds onto the lower triangle)
    g = sg.grad(lambda s: np.sum(np.log(np.diagonal(np.linalg.cholesky(s)))))(s)
    si = np.linalg.inv(s)
    np.testing.assert_allclose(g, np.tril(si, -1) + 0.5 * np.diag(np.diag(si)), rtol=1e-10, atol=1e-15)


def test_gp_likelihood_gradient():
    # a Gaussian-process negative log marginal likelihood: Cholesky, triangular solves, log-determinant
    x = np.linspace(0, 1, 6)
    y = np.sin(3 * x)

    def nlml(theta):
        ell, sf = np.exp(theta[0]), np.exp(theta[1])
        k = sf * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / ell ** 2) + 0.1 * np.eye(6)
        c = np.linalg.cholesky(k)
        alpha = gl.solve_triangular(c, y, lower=True)
        return 0.5 * np.sum(alpha ** 2) + np.sum(np.log(np.diagonal(c)))

    theta = np.array([-0.5, 0.2])
    sg.check_grads(nlml, (theta,), order=2)
    k = np.exp(0.2) * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / np.exp(-1.0)) + 0.1 * np.eye(6)
    want = 0.5 * y @ np.linalg.solve(k, y) + 0.5 * np.linalg.slogdet(k)[1]
    np.testing.assert_allclose(_ev(nlml, theta), want, rtol=1e-12)


def test_vmap():
    a, s = _gen((3, 4, 4)), _spd((3, 4, 4))
    b = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(sg.vmap(np.linalg.solve)(a, b), np.linalg.solve(a, b[..., None])[..., 0],
                               rtol=1e-10)
    np.testing.assert_allclose(sg.vmap(lambda b: np.linalg.solve(a[0], b))(b), np.linalg.solve(a[0], b.T).T,
                               rtol=1e-10)
    np.testing.assert_allclose(sg.vmap(lambda a: np.linalg.solve(a, b[0]))(a), np.linalg.solve(a, b[0]), rtol=1e-10)
    np.testing.assert_allclose(sg.vmap(np.linalg.det)(a), np.linalg.det(a), rtol=1e-10)
    np.testing.assert_allclose(sg.vmap(np.linalg.cholesky)(s), np.linalg.cholesky(s), rtol=1e-10)
    np.testing.assert_allclose(sg.vmap(sg.grad(lambda s: np.sum(np.linalg.cholesky(s))))(s),
                               np.stack([sg.grad(lambda s: np.sum(np.linalg.cholesky(s)))(si) for si in s]),
                               rtol=1e-10)


# ----- errors -----


def test_errors_evaluator_and_eager():
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(sg.LinAlgError, match="singular") as e:
        _ev(lambda a: np.linalg.solve(a, np.ones(2)), sing)
    assert isinstance(e.value, np.linalg.LinAlgError) and "test_linalg.py" in str(e.value)
    with pytest.raises(sg.LinAlgError, match="singular"):
        _ev(np.linalg.inv, sing)
    with pytest.raises(sg.LinAlgError, match="positive definite"):
        _ev(np.linalg.cholesky, -np.eye(3))
    with pytest.raises(sg.LinAlgError, match="batch index \\(1,\\)"):
        _ev(np.linalg.cholesky, np.stack([np.eye(2), -np.eye(2)]))
    with pytest.raises(sg.LinAlgError, match="positive definite"):
        _ev(np.linalg.cholesky, np.full((2, 2), np.nan))
    with pytest.raises(sg.LinAlgError, match="square"):
        sg.trace(np.linalg.det, np.ones((2, 3)))
    with pytest.raises(sg.LinAlgError, match="two-dimensional"):
        sg.trace(np.linalg.inv, np.ones(3))
    with pytest.raises(sg.DTypeError, match="float16"):
        sg.trace(np.linalg.inv, np.eye(2, dtype=np.float16))
    with pytest.raises(sg.ShapeError, match="does not fit"):
        sg.trace(lambda a: np.linalg.solve(a, np.ones(3)), np.eye(2))
    with pytest.raises(sg.LinAlgError, match="zero on the diagonal"):
        gl.solve_triangular(np.zeros((2, 2)), np.ones(2))  # eager, on arrays
    with pytest.raises(sg.LinAlgError):
        sg.grad(lambda a: np.sum(np.linalg.solve(a, np.ones(2))))(sing)
    # det of a singular matrix is 0 (NumPy's value); slogdet gives (0, -inf)
    assert _ev(np.linalg.det, sing) == 0.0
    sign, logdet = _ev(lambda a: tuple(np.linalg.slogdet(a)), sing)
    assert sign == 0.0 and logdet == -np.inf


def test_evaluator_without_scipy():
    # the reference implementations fall back to NumPy when SciPy is absent
    code = ("import sys; sys.modules['scipy'] = None; sys.modules['scipy.linalg'] = None\n"
            "import numpy as np, symgraph as sg\n"
            "r = np.random.default_rng(1); a = r.standard_normal((2, 4, 4)) + 2 * np.eye(4); b = r.standard_normal(4)\n"
            "g = sg.trace(lambda a: np.linalg.solve(a, b), a)\n"
            "np.testing.assert_allclose(g.evaluate(a), np.linalg.solve(a, b), rtol=1e-10)\n"
            "np.testing.assert_allclose(sg.trace(np.linalg.det, a).evaluate(a), np.linalg.det(a), rtol=1e-10)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ----- compiled code: ?potrf, ?trsm, ?getrf from NumPy's OpenBLAS, called natively -----


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_equals_evaluator(dtype):
    pytest.importorskip("llvmlite")
    a, s, t = _gen((2, 3, 5, 5), dtype), _spd((2, 3, 5, 5), dtype), _gen((2, 3, 5, 5), dtype)
    b = RNG.standard_normal((2, 3, 5, 2)).astype(dtype)
    v = RNG.standard_normal(5).astype(dtype)

    def f(a, s, t, b, v):
        tri = tuple(gl.solve_triangular(t, b, trans=tr, lower=lo, unit_diagonal=u)
                    for lo in (True, False) for tr in (0, 1) for u in (False, True))  # every trsm variant
        lu, piv = gl.lu_factor(a)
        return tri + (np.linalg.cholesky(s), np.linalg.cholesky(s, upper=True), np.linalg.solve(a, b),
                      np.linalg.solve(a[0, 0], v), np.linalg.inv(a), np.linalg.det(a), *np.linalg.slogdet(a),
                      lu, piv, gl.lu_solve((lu, piv), b, trans=1), gl.cho_solve(gl.cho_factor(s), b),
                      gl.solve(s, b, assume_a="pos"), gl.det(a), gl.inv(a))

    args = (a, s, t, b, v)
    cf = sg.compile(f)
    got, want = cf(*args), _ev(f, *args)
    assert cf.stats["lapack_kernels"] >= 20
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-14)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, i
        np.testing.assert_allclose(g, w, **tol, err_msg=f"output {i}")
    np.testing.assert_array_equal(got[-6], want[-6])  # LU's pivots: the same ?getrf


def test_compiled_expm():
    pytest.importorskip("llvmlite")
    a = RNG.standard_normal((3, 3))  # |a|_1 > theta_13 / 2: one squaring
    np.testing.assert_allclose(sg.compile(gl.expm)(3.0 * a), sl.expm(3.0 * a), rtol=1e-12)


def test_compiled_pivots_to_permutation():
    pytest.importorskip("llvmlite")
    from symgraph import lax as L

    for dt in (np.int64, np.int32, np.uint8):
        ipiv = np.array([[2, 1, 3, 3], [0, 3, 2, 3], [9, 0, 2, 7]], dt)  # 9 and 7: out of range (clamped)
        f = sg.compile(lambda p: L.bind("pivots_to_permutation", p))
        got = f(ipiv)
        assert got.dtype == dt
        np.testing.assert_array_equal(got, sg.trace(lambda p: L.bind("pivots_to_permutation", p), ipiv).evaluate(ipiv))


def test_compiled_errors_name_the_line():
    pytest.importorskip("llvmlite")
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    solve = sg.compile(lambda a: np.linalg.solve(a, np.ones(2)))
    with pytest.raises(sg.LinAlgError, match="singular matrix: a zero on the diagonal") as e:
        solve(sing)
    assert "test_linalg.py" in str(e.value.location)
    np.testing.assert_allclose(solve(np.eye(2) * 2.0), [0.5, 0.5])  # the same program, good input
    with pytest.raises(sg.LinAlgError, match="singular"):
        sg.compile(np.linalg.inv)(np.stack([np.eye(2), sing]))
    chol = sg.compile(lambda s: np.linalg.cholesky(s))
    with pytest.raises(sg.LinAlgError, match=r"not positive definite \(the matrix at batch index \(1,\)\)") as e:
        chol(np.stack([np.eye(2), -np.eye(2)]))
    assert "test_linalg.py" in str(e.value.location)
    for bad in (np.full((2, 2), np.nan), np.array([[1.0, np.inf], [np.inf, 1.0]])):
        with pytest.raises(sg.LinAlgError, match="positive definite"):
            chol(bad)
    np.testing.assert_allclose(chol(4.0 * np.eye(2)), 2.0 * np.eye(2))
    with pytest.raises(sg.LinAlgError, match="positive definite"):
        sg.compile(np.linalg.cholesky)(-np.eye(3, dtype=np.float32))
    tri = sg.compile(lambda t, b: gl.solve_triangular(t, b, lower=True))
    t = np.stack([np.eye(3)] * 3)
    t[2, 1, 1] = np.nan
    with pytest.raises(sg.LinAlgError, match=r"a NaN on the diagonal \(position 1\) of the matrix at batch index \(2,\)"):
        tri(t, np.ones((3, 3, 1)))
    with pytest.raises(sg.LinAlgError, match="singular"):
        sg.compile(lambda a: np.linalg.solve(a, np.ones(2)))(np.array([[1.0, np.nan], [2.0, 3.0]]))
    with pytest.raises(sg.LinAlgError, match="singular"):  # the gradient solves with U too
        sg.compile(sg.grad(lambda a: np.sum(np.linalg.solve(a, np.ones(2)))))(sing)
    assert sg.compile(np.linalg.det)(sing) == 0.0
    sign, logdet = sg.compile(lambda a: tuple(np.linalg.slogdet(a)))(sing)
    assert sign == 0.0 and logdet == -np.inf


def test_compiled_gradients():
    pytest.importorskip("llvmlite")
    a, s = _gen((2, 4, 4)), _spd((2, 4, 4))
    b = RNG.standard_normal((2, 4, 3))

    def loss(a, s, b):
        return (np.sum(np.sin(np.linalg.solve(a, b))) + np.sum(np.linalg.inv(a) ** 2) + np.sum(np.linalg.det(a))
                + np.sum(np.linalg.slogdet(a)[1]) + np.sum(np.tanh(np.linalg.cholesky(s)))
                + np.sum(gl.cho_solve(gl.cho_factor(s), b) ** 2) + np.sum(gl.lu_solve(gl.lu_factor(a), b, trans=1) ** 2)
                + np.sum(gl.solve_triangular(a, b, lower=True, trans=1) ** 2))

    vg = sg.value_and_grad(loss, argnums=(0, 1, 2))
    (v1, g1), (v0, g0) = sg.compile(vg)(a, s, b), vg(a, s, b)
    np.testing.assert_allclose(v1, v0, rtol=1e-13)
    for x, y in zip(g1, g0):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-12)
    # second order: the Hessian of log|det| compiled, and a compiled vmap
    h = sg.hessian(lambda a: np.linalg.slogdet(a)[1])
    np.testing.assert_allclose(sg.compile(h)(a[0]), h(a[0]), rtol=1e-11, atol=1e-13)
    cv = sg.compile(sg.vmap(sg.grad(lambda s: np.sum(np.log(np.diagonal(np.linalg.cholesky(s)))))))
    np.testing.assert_allclose(cv(s), np.stack([np.tril(np.linalg.inv(m), -1) + 0.5 * np.diag(np.diag(np.linalg.inv(m)))
                                               for m in s]), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("block", [3, 128])
def test_compiled_cholesky_vjp_blocked(block, monkeypatch):
    # cholesky's reverse rule is the primitive cholesky_vjp; compiled code runs Murray's blocked algorithm
    # (codegen.llvm.lapack._chol_rev): blocks of 3 columns make many blocks and a ragged last one
    pytest.importorskip("llvmlite")
    import codegen.cpu.lapack as cl
    from symgraph import lax as L

    monkeypatch.setattr(cl, "CHOL_REV_BLOCK", block)
    f = lambda lm, lb: L.bind("cholesky_vjp", lm, lb)  # noqa: E731
    for shape, dtype in [((8, 8), np.float64), ((2, 3, 7, 7), np.float64), ((10, 10), np.float32),
                         ((1, 1), np.float64), ((140, 140), np.float64)]:
        lm = np.linalg.cholesky(_spd(shape)).astype(dtype)
        lb = RNG.standard_normal(shape).astype(dtype)
        lm_up = lm + np.triu(RNG.standard_normal(shape), 1).astype(dtype)   # the upper triangles are not read
        got, want = sg.compile(f)(lm_up, lb), _ev(f, lm, np.tril(lb))
        assert got.dtype == dtype
        tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(got, want, **tol, err_msg=str(shape))
        assert not np.triu(got, 1).any()
    g = sg.compile(sg.grad(lambda s: np.sum(np.log(np.diagonal(np.linalg.cholesky(s))))))
    s = _spd((9, 9))
    got = g(s)
    assert "cholesky_vjp" in g.graph.dump()
    np.testing.assert_allclose(got, np.tril(np.linalg.inv(s), -1) + 0.5 * np.diag(np.diag(np.linalg.inv(s))),
                               rtol=1e-10, atol=1e-13)
    bad = np.eye(4)
    bad[2, 2] = 0.0
    with pytest.raises(sg.LinAlgError, match=r"cholesky_vjp: singular matrix: a zero on the diagonal \(position 2\)"):
        sg.compile(f)(bad, np.ones((4, 4)))
    with pytest.raises(sg.LinAlgError, match=r"cholesky_vjp: singular matrix: a zero on the diagonal \(position 2\)"):
        _ev(f, bad, np.ones((4, 4)))


def test_solve_banded_as_scipy_and_its_derivatives():
    sl = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(5)
    for (lo, up), k in (((1, 1), None), ((1, 2), 3), ((0, 2), None), ((2, 0), 2)):
        n = 6
        ab = rng.standard_normal((lo + up + 1, n))
        ab[up] += 5.0                                     # a dominant main diagonal
        b = rng.standard_normal((n,) if k is None else (n, k))
        want = sl.solve_banded((lo, up), ab, b)
        np.testing.assert_allclose(gl.solve_banded((lo, up), ab, b), want, rtol=1e-13, atol=1e-15)
        f = lambda ab, b: gl.solve_banded((lo, up), ab, b)  # noqa: E731
        np.testing.assert_allclose(sg.trace(f, ab, b).evaluate(ab, b), want, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(sg.compile(f)(ab, b), want, rtol=1e-13, atol=1e-15)
        sg.check_grads(f, (ab, b), order=2)
    # entries outside the band are ignored, so they get no derivative
    ab = rng.standard_normal((3, 4))
    ab[1] += 4.0
    g = sg.grad(lambda ab: np.sum(gl.solve_banded((1, 1), ab, np.ones(4))))(ab)
    assert g[0, 0] == 0.0 and g[2, -1] == 0.0 and np.all(g[1] != 0.0)
    with pytest.raises(sg.ShapeError, match=r"\(l \+ u \+ 1, n\)"):
        gl.solve_banded((1, 1), np.ones((2, 4)), np.ones(4))


def test_solve_sylvester_as_scipy_and_its_derivatives():
    sl = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(6)
    a, b, q = rng.standard_normal((3, 3)), rng.standard_normal((2, 2)), rng.standard_normal((3, 2))
    x = gl.solve_sylvester(a, b, q)
    np.testing.assert_allclose(x, sl.solve_sylvester(a, b, q), rtol=1e-12)
    np.testing.assert_allclose(a @ x + x @ b, q, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sg.compile(gl.solve_sylvester)(a, b, q), sl.solve_sylvester(a, b, q), rtol=1e-12)
    sg.check_grads(gl.solve_sylvester, (a, b, q), order=2)
    # d x / d q in direction dq solves a dx + dx b = dq: the derivative is the solver itself (linear in q)
    dq = rng.standard_normal((3, 2))
    _, t = sg.jvp(lambda q: gl.solve_sylvester(a, b, q), (q,), (dq,))
    np.testing.assert_allclose(t, sl.solve_sylvester(a, b, dq), rtol=1e-12)
    za, zq = a + 1j * rng.standard_normal((3, 3)), q + 1j * rng.standard_normal((3, 2))
    np.testing.assert_allclose(gl.solve_sylvester(za, b, zq), sl.solve_sylvester(za, b, zq), rtol=1e-12)
    with pytest.raises(sg.ShapeError, match="solve_sylvester"):
        gl.solve_sylvester(a, b, q.T)
