"""Complex linear algebra compiled natively by the LLVM backend (docs/linalg.md, "Complex matrices in compiled
code"): the complex LAPACK routines on interleaved copies of the split parts (symgraph/ops/lapack_parts.py,
codegen/cpu/lapack.py `plan_complex`, codegen/llvm/lapack_complex.py).

Values against NumPy (complex64 and complex128, batched and unbatched; normwise tolerances: 1e-12 of the largest
entry for complex128, 1e-4 for complex64, whose NumPy solve runs in complex128 while the primitives, as SciPy's,
factor in complex64), compiled gradients against the evaluator's (1e-10 normwise), and LAPACK's failures raising
the evaluator's LinAlgError."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg

pytest.importorskip("llvmlite")

RNG = np.random.default_rng(1818)
CDTYPES = [np.complex128, np.complex64]


def _c(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _well(*shape, dtype=np.complex128):
    return (_c(*shape) + 3.0 * np.eye(shape[-1])).astype(dtype)


def _hpd(*shape, dtype=np.complex128):
    a = _c(*shape)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12


def _close(got, want, tol, what=""):
    """Normwise: max |got - want| <= tol * max |want| (and the same shape and dtype)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-300)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= tol * scale, f"{what}: error {err:.3g} > {tol:g} * {scale:.3g}"


def _leaves(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def _native(f, *args):
    """f compiled by the LLVM backend (checked to be the split, LAPACK-calling program) and its results."""
    cf = sg.compile(f)
    out = cf(*args)
    assert cf.stats["complex_split"] and cf.stats["lapack_kernels"] >= 1, cf.stats
    return out


def _check_values(f, args, dtype, what, want=None):
    want = f(*args) if want is None else want
    got = _native(f, *args)
    for k, (g, w) in enumerate(zip(_leaves(got), _leaves(want))):
        _close(g, w, _tol(dtype), f"{what}[{k}]")


# ----- 1. solve, inv, det, slogdet, cholesky (lu, triangular_solve, cholesky) -----


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)], ids=["2d", "3d", "4d"])
def test_solve_inv_det_slogdet_compiled_equal_numpy(dtype, batch):
    a, b, v = _well(*batch, 5, 5, dtype=dtype), _c(*batch, 5, 3, dtype=dtype), _c(*batch, 5, dtype=dtype)
    cases = {"solve": (np.linalg.solve, (a, b)), "inv": (np.linalg.inv, (a,)), "det": (np.linalg.det, (a,)),
             "slogdet": (lambda a: tuple(np.linalg.slogdet(a)), (a,))}
    if not batch:
        cases["solve vec"] = (np.linalg.solve, (a, v))
    for name, (f, args) in cases.items():
        _check_values(f, args, dtype, name)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("batch", [(), (3,)], ids=["2d", "3d"])
def test_cholesky_compiled_equal_numpy(dtype, batch):
    h = _hpd(*batch, 6, 6, dtype=dtype)
    # only the lower triangle (upper=True: the upper one) and the diagonal's real part are read
    junk = (h + np.triu(_c(6, 6), 1) + 1j * np.diag(RNG.standard_normal(6))).astype(dtype)
    junk_u = (h + np.tril(_c(6, 6), -1) + 1j * np.diag(RNG.standard_normal(6))).astype(dtype)
    for x, upper in ((h, False), (junk, False), (junk_u, True)):
        _check_values(lambda a: np.linalg.cholesky(a, upper=upper), (x,), dtype, f"cholesky upper={upper}")


@pytest.mark.parametrize("dtype", CDTYPES)
def test_triangular_solves_and_lu_compiled_equal_the_evaluator(dtype):
    from symgraph import lax as L

    a, b = _well(2, 4, 4, dtype=dtype), _c(2, 4, 3, dtype=dtype)
    for lower in (True, False):
        for trans in (False, True):
            for unit in (False, True):
                def f(a, b, lower=lower, trans=trans, unit=unit):
                    return L.bind("triangular_solve", a, b, lower=lower, trans=trans, unit_diagonal=unit)
                want = sg.trace(f, a, b).evaluate(a, b)
                _close(_native(f, a, b), want, 1e-5 if dtype == np.complex64 else 1e-13, f"trsm {lower} {trans} {unit}")
    f = lambda a: L.bind("lu", a)  # noqa: E731  (packed factors and pivots, as scipy's lu_factor)
    _close(_native(f, a), sg.trace(f, a).evaluate(a), 1e-5 if dtype == np.complex64 else 1e-13, "lu")


# ----- 2. eigh, eigvalsh, svd, svdvals, qr -----


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("batch", [(), (3,)], ids=["2d", "3d"])
def test_eigh_compiled_equal_numpy(dtype, batch):
    x = _c(*batch, 6, 6, dtype=dtype)  # not Hermitian: NumPy reads one triangle and the diagonal's real part
    for uplo in ("L", "U"):
        _check_values(lambda x: tuple(np.linalg.eigh(x, uplo)), (x,), dtype, f"eigh {uplo}")
        _check_values(lambda x: np.linalg.eigvalsh(x, uplo), (x,), dtype, f"eigvalsh {uplo}")


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(4, 6), (5, 5), (6, 3), (2, 4, 6), (3, 6, 4)])
def test_svd_compiled_equal_numpy(dtype, shape):
    x = _c(*shape, dtype=dtype)
    for full in (False, True):
        _check_values(lambda x: tuple(np.linalg.svd(x, full_matrices=full)), (x,), dtype, f"svd full={full}")
    _check_values(lambda x: np.linalg.svd(x, compute_uv=False), (x,), dtype, "svdvals")


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
def test_qr_compiled_equal_numpy(dtype, shape):
    x = _c(*shape, dtype=dtype)
    for mode in ("reduced", "complete"):
        _check_values(lambda x: tuple(np.linalg.qr(x, mode)), (x,), dtype, f"qr {mode}")
    _check_values(lambda x: np.linalg.qr(x, "r"), (x,), dtype, "qr r")


def test_lstsq_pinv_norms_compiled_equal_numpy():
    a, b = _c(6, 3), _c(6, 2)
    _check_values(lambda a, b: np.linalg.lstsq(a, b)[0], (a, b), np.complex128, "lstsq")
    _check_values(np.linalg.pinv, (_c(2, 3, 5),), np.complex128, "pinv")
    _check_values(lambda x: np.linalg.norm(x, 2), (_c(4, 5),), np.complex128, "norm 2")
    _check_values(np.linalg.cond, (_c(4, 4),), np.complex128, "cond")


# ----- 3. eig, eigvals (complex and real matrices) -----


@pytest.mark.parametrize("dtype", CDTYPES + [np.float64, np.float32])
@pytest.mark.parametrize("batch", [(), (3,)], ids=["2d", "3d"])
def test_eig_compiled_equal_numpy(dtype, batch):
    if np.dtype(dtype).kind == "c":
        x = _c(*batch, 6, 6, dtype=dtype)
    else:  # a real matrix: conjugate pairs and real eigenvalues (dgeev, as NumPy)
        x = RNG.standard_normal(batch + (6, 6)).astype(dtype)
    cdt = np.complex64 if np.dtype(dtype) in (np.float32, np.complex64) else np.complex128
    w, v = np.linalg.eig(x)
    _check_values(lambda x: tuple(np.linalg.eig(x)), (x,), cdt, "eig", want=(w.astype(cdt), v.astype(cdt)))
    _check_values(np.linalg.eigvals, (x,), cdt, "eigvals", want=np.linalg.eigvals(x).astype(cdt))
    if np.dtype(dtype).kind == "f":
        assert np.iscomplex(w).any()  # the case has conjugate pairs


def test_eig_of_a_real_matrix_with_real_eigenvalues_only():
    q, _ = np.linalg.qr(RNG.standard_normal((5, 5)))
    x = q @ np.diag([3.0, -1.0, 2.0, 0.5, 4.0]) @ q.T
    w, v = np.linalg.eig(x)
    got = _native(lambda x: tuple(np.linalg.eig(x)), x)
    _close(got[0], w.astype(np.complex128), 1e-12, "w")
    _close(got[1], v.astype(np.complex128), 1e-12, "v")


# ----- 4. compiled gradients against the evaluator's -----


def _grad_cases():
    a, b, h = _well(4, 4), _c(4, 2), _hpd(4, 4)
    wv, wm = RNG.standard_normal(4), RNG.standard_normal((4, 4))
    x, r = _c(5, 3), RNG.standard_normal((5, 5))
    return {
        "solve": (lambda a: np.sum(np.abs(np.linalg.solve(a, b)) ** 2), a),
        "solve batched": (lambda a: np.sum(np.abs(np.linalg.solve(a, b[None] * np.ones((2, 1, 1)))) ** 2),
                          np.stack([a, a + 0.5])),
        "inv": (lambda a: np.sum(np.real(np.linalg.inv(a) * wm)), a),
        "det": (lambda a: np.abs(np.linalg.det(a)), a),
        "slogdet": (lambda a: np.linalg.slogdet(a)[1], a),
        "cholesky": (lambda h: np.sum(np.abs(np.linalg.cholesky(h)) ** 2 * wm), h),
        "cholesky logdet": (lambda h: 2 * np.sum(np.log(np.real(np.diagonal(np.linalg.cholesky(h))))), h),
        "eigh": (lambda x: np.sum(np.linalg.eigh(x)[0] * wv) + np.sum(np.abs(np.linalg.eigh(x)[1]) ** 2 * wm), _c(4, 4)),
        "eigvalsh": (lambda x: np.sum(np.linalg.eigvalsh(x) ** 2), _c(4, 4)),
        "svd": (lambda x: np.sum(np.linalg.svd(x, full_matrices=False)[1]) +
                np.sum(np.abs(np.linalg.svd(x, full_matrices=False)[0]) ** 2 * wm[:, :3].repeat(2, 0)[:5]), x),
        "svdvals": (lambda x: np.sum(np.linalg.svd(x, compute_uv=False) ** 2), x),
        "qr": (lambda x: np.sum(np.real(np.linalg.qr(x)[0] * wm[:, :3].repeat(2, 0)[:5])) +
               np.sum(np.imag(np.linalg.qr(x)[1])), x),
        "eig": (lambda x: np.sum(np.abs(np.linalg.eig(x)[0]) ** 2) + np.sum(np.abs(np.linalg.eig(x)[1]) * wm),
                _c(4, 4)),
        "eigvals real": (lambda r: np.sum(np.real(np.linalg.eigvals(r)) ** 2), r),
        "pinv": (lambda x: np.sum(np.abs(np.linalg.pinv(x)) ** 2), x),
    }


@pytest.mark.parametrize("name", list(_grad_cases()))
def test_compiled_gradients_equal_the_evaluators(name):
    f, x = _grad_cases()[name]
    g = sg.grad(f)
    want = g(x)
    cg = sg.compile(g)
    got = cg(x)
    assert cg.stats["complex_split"]
    _close(got, want, 1e-10, name)
    assert np.asarray(got).dtype == x.dtype


def test_compiled_value_and_grad_complex64_batched():
    a, b = _well(3, 4, 4, dtype=np.complex64), _c(3, 4, 2, dtype=np.complex64)
    f = lambda a: np.sum(np.abs(np.linalg.solve(a, b)) ** 2) + np.sum(np.linalg.slogdet(a)[1])  # noqa: E731
    vg = sg.value_and_grad(f)
    (v0, g0), (v1, g1) = vg(a), sg.compile(vg)(a)
    _close(v1, v0, 1e-5, "value")
    _close(g1, g0, 1e-4, "grad")
    assert g1.dtype == np.complex64


# ----- 5. LAPACK's failures: the evaluator's errors -----


def _same_error(f, *args):
    with pytest.raises(sg.LinAlgError) as want:
        sg.trace(f, *args).evaluate(*args)
    with pytest.raises(sg.LinAlgError) as got:
        sg.compile(f)(*args)
    return str(want.value), str(got.value), got.value


def test_singular_matrix_raises_the_evaluators_error():
    s = np.array([[1.0, 2j], [1.0, 2j]])  # LU leaves an exact zero on U's diagonal
    want, got, _ = _same_error(lambda a: np.linalg.inv(a), s)
    assert want == got and "singular matrix: a zero on the diagonal (position 1)" in got
    batch = np.stack([_well(2, 2), s]).astype(np.complex64)
    want, got, _ = _same_error(lambda a: np.linalg.solve(a, np.ones((2, 2, 1), np.complex64)), batch)
    assert want == got and "batch index (1,)" in got


def test_not_positive_definite_raises_the_evaluators_error():
    h = _hpd(4, 4)

    def f(a):
        return np.linalg.cholesky(a)  # @cholesky

    want, got, err = _same_error(f, -h)
    assert "not positive definite" in want and "not positive definite" in got and "?potrf info = 1" in got
    assert err.location is not None and err.location.lineno == f.__code__.co_firstlineno + 1
    batch = np.stack([h, h, -h]).astype(np.complex64)
    want, got, _ = _same_error(np.linalg.cholesky, batch)
    assert "(the matrix at batch index (2,))" in want and "(the matrix at batch index (2,))" in got
    nan = h.copy()
    nan[2, 1] = np.nan
    want, got, _ = _same_error(np.linalg.cholesky, nan)
    assert "not positive definite" in got and "NaN" in got


@pytest.mark.parametrize("f", [lambda x: np.linalg.eigh(x)[0], lambda x: np.linalg.svd(x)[1],
                               lambda x: np.linalg.qr(x)[0], lambda x: np.linalg.eigvals(x)],
                         ids=["eigh", "svd", "qr", "eigvals"])
def test_nonfinite_matrix_raises_the_evaluators_error(f):
    x = _c(3, 3)
    x[1, 0] = complex(1.0, np.inf)
    want, got, _ = _same_error(f, x)
    assert want == got and "contains NaN or infinity" in got


def test_complex_lapack_inside_a_loop_body_compiles_natively():
    """Complex LAPACK (zgetrf, ztrsm) in a loop body: native, as real LAPACK (tests/test_linalg_loops.py), with
    the evaluator's values and its error on a singular matrix at the body's line."""
    a = _well(3, 3)
    f = lambda a: sg.fori_loop(0, 2, lambda i, c: np.linalg.inv(c), a)  # noqa: E731
    cf = sg.compile(f)
    _close(cf(a), a, 1e-12, "inv inv")
    assert cf.stats["loop_regions"] >= 1
    with pytest.raises(sg.LinAlgError, match=r"^np\.linalg\.inv: singular matrix") as e:
        cf(np.array([[1.0, 2j, 0.0], [1.0, 2j, 0.0], [0.0, 0.0, 1.0]]))
    assert e.value.location.filename == __file__
    _close(cf(2 * a), a * 2, 1e-12, "after the error")


def test_scipy_linalg_complex_functions_compile_natively():
    """symgraph.scipy.linalg's complex forms (trans='C', the Hermitian Cholesky and cho_solve, lu_solve trans=2)
    are the same primitives on conjugates: they compile natively, gradients included."""
    import symgraph.scipy.linalg as sla

    a, b, h = _well(4, 4), _c(4, 2), _hpd(4, 4)
    t = np.triu(a)
    cases = {"solve_triangular C": (lambda t, b: sla.solve_triangular(t, b, trans="C"), (t, b)),
             "cholesky": (sla.cholesky, (h,)),
             "cho_solve": (lambda h, b: sla.cho_solve(sla.cho_factor(h), b), (h, b)),
             "lu_solve 2": (lambda a, b: sla.lu_solve(sla.lu_factor(a), b, trans=2), (a, b))}
    for name, (f, args) in cases.items():
        want = sg.trace(f, *args).evaluate(*args)
        _close(_native(f, *args), want, 1e-12, name)
    quad = lambda h, b: np.real(np.vdot(b, sla.cho_solve(sla.cho_factor(h), b)))  # noqa: E731
    g = sg.grad(quad, argnums=(0, 1))
    for got, want in zip(sg.compile(g)(h, b), g(h, b)):
        _close(got, want, 1e-10, "cho_solve grad")


def test_lapack_errors_raise_through_the_fast_path():
    """After a first call (the checked path, which compiles), calls take the generated fast path: a singular
    matrix raises the same LinAlgError there, and the next good matrix gives NumPy's values."""
    f = sg.compile(np.linalg.inv)
    a = _well(3, 3)
    _close(f(a), np.linalg.inv(a), 1e-12, "first")
    assert f._last.fast is not None
    with pytest.raises(sg.LinAlgError, match=r"np.linalg.inv: singular matrix: a zero on the diagonal \(position 1\) \(found by its internal step triangular_solve\)"):
        f(np.array([[1.0, 2j, 0.0], [1.0, 2j, 0.0], [0.0, 0.0, 1.0]]))
    _close(f(2 * a), np.linalg.inv(2 * a), 1e-12, "after the error")


def test_compiled_jacobian_hvp_and_vmap_of_complex_linalg():
    """The other transformations compile natively too: a holomorphic Jacobian of solve, an hvp of log|det|
    (second derivatives of lu and triangular_solve), vmap of inv; against the evaluator / NumPy."""
    a, b = _well(3, 3), _c(3)
    jac = sg.jacobian(lambda a: np.linalg.solve(a, b), holomorphic=True)
    _close(sg.compile(jac)(a), jac(a), 1e-12, "jacobian")
    t = _c(3, 3)
    hvp = lambda a: sg.hvp(lambda a: np.linalg.slogdet(a)[1], (a,), (t,))  # noqa: E731
    _close(sg.compile(hvp)(a), hvp(a), 1e-12, "hvp")
    stack = np.stack([a, 2 * a, a + 1j])
    _close(sg.compile(sg.vmap(np.linalg.inv))(stack), np.linalg.inv(stack), 1e-12, "vmap inv")
