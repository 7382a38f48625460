"""A failure on values inside a np.linalg / symgraph.scipy.linalg function names that function, not the
internal op that found it (triangular_solve, svd), with the user's line: in the evaluator, in a derivative
and in compiled code (issue 18)."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.scipy.linalg as gl

SING = np.array([[1.0, 2.0], [2.0, 4.0]])
NAN = np.array([[1.0, np.nan], [2.0, 4.0]])
B = np.array([1.0, 2.0])

# name in the message, the function, the bad matrix, whether its derivative is the failing part
CASES = [
    ("np.linalg.inv", lambda a: np.sum(np.linalg.inv(a)), SING, False),
    ("np.linalg.solve", lambda a: np.sum(np.linalg.solve(a, B)), SING, False),
    ("np.linalg.matrix_power", lambda a: np.sum(np.linalg.matrix_power(a, -2)), SING, False),
    ("np.linalg.tensorinv", lambda a: np.sum(np.linalg.tensorinv(a, ind=1)), SING, False),
    ("np.linalg.tensorsolve", lambda a: np.sum(np.linalg.tensorsolve(a, B)), SING, False),
    ("np.linalg.det", lambda a: np.linalg.det(a), SING, True),
    ("np.linalg.slogdet", lambda a: np.linalg.slogdet(a)[1], SING, True),
    ("np.linalg.pinv", lambda a: np.sum(np.linalg.pinv(a)), NAN, False),
    ("np.linalg.lstsq", lambda a: np.sum(np.linalg.lstsq(a, B)[0]), NAN, False),
    ("np.linalg.cond", lambda a: np.linalg.cond(a), NAN, False),
    ("np.linalg.norm", lambda a: np.linalg.norm(a, 2), NAN, False),
    ("scipy.linalg.lu_solve", lambda a: np.sum(gl.lu_solve(gl.lu_factor(a), B)), SING, False),
    ("scipy.linalg.inv", lambda a: np.sum(gl.inv(a)), SING, False),
]
MODES = {
    "eval": lambda f, a: sg.trace(f, a).evaluate(a),
    "grad": lambda f, a: sg.grad(f)(a),
    "llvm": lambda f, a: sg.compile(f)(a),
    "llvm-grad": lambda f, a: sg.compile(sg.grad(f))(a),
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name,f,bad,in_derivative", CASES, ids=[c[0] for c in CASES])
def test_the_error_names_the_function_and_the_line(name, f, bad, in_derivative, mode):
    if mode.startswith("llvm"):
        pytest.importorskip("llvmlite")
    if in_derivative and "grad" not in mode:  # the value is NumPy's (0, -inf) there: no error
        got = MODES[mode](f, bad)
        np.testing.assert_array_equal(got, f(bad))
        return
    with pytest.raises(sg.LinAlgError) as e:
        MODES[mode](f, bad)
    msg = e.value.message
    head = f"{name} (in its derivative): " if in_derivative else f"{name}: "
    assert msg.startswith(head), msg
    what = "the matrix contains NaN or infinity" if bad is NAN else "singular matrix: a zero on the diagonal"
    assert what in msg, msg
    assert "found by its internal step " in msg, msg
    assert e.value.location is not None and e.value.location.filename == __file__, e.value.location
    assert "test_linalg_errors.py" in str(e.value)  # the line is in the printed message too
    assert isinstance(e.value, np.linalg.LinAlgError)  # NumPy code's except clauses catch it


def test_batched_and_complex_matrices_name_the_function():
    """A batched stack (the batch index is kept) and a complex matrix (LAPACK on split parts), compiled."""
    pytest.importorskip("llvmlite")
    f = sg.compile(lambda a: np.linalg.inv(a))
    with pytest.raises(sg.LinAlgError, match=r"^np\.linalg\.inv: singular matrix: a zero on the diagonal "
                                             r"\(position 1\) of the matrix at batch index \(1,\) \(found by"):
        f(np.stack([np.eye(2), SING]))
    z = np.array([[1.0, 2j], [1.0, 2j]])
    with pytest.raises(sg.LinAlgError, match=r"^np\.linalg\.solve: singular matrix") as e:
        sg.compile(lambda a: np.linalg.solve(a, np.ones(2, complex)))(z)
    assert e.value.location.filename == __file__
    np.testing.assert_allclose(f(np.stack([np.eye(2), 2 * np.eye(2)])), [np.eye(2), 0.5 * np.eye(2)])


def test_the_function_that_the_user_called_is_named_not_an_inner_one():
    """inv is built on the internals of solve, scipy's lu_solve on triangular solves, norm on svdvals: the
    outermost function the user called is the one named; an op the user bound directly keeps its own name."""
    with pytest.raises(sg.LinAlgError, match=r"^scipy\.linalg\.solve: singular"):
        sg.trace(lambda a: gl.solve(a, B), SING).evaluate(SING)
    with pytest.raises(sg.LinAlgError, match=r"^cholesky_vjp: singular"):  # no public function around it
        import symgraph.lax as L
        sg.trace(lambda l, c: L.bind("cholesky_vjp", l, c), np.diag([1.0, 0.0]), np.ones((2, 2))).evaluate(
            np.diag([1.0, 0.0]), np.ones((2, 2)))
    with pytest.raises(sg.LinAlgError, match=r"^np\.linalg\.cholesky: the matrix is not positive definite"):
        sg.compile(np.linalg.cholesky)(-np.eye(2))
