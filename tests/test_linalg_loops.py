"""LAPACK-backed ops (solve, inv, cholesky, eigvalsh, complex solve) inside loop bodies and branches compiled
natively: values and gradients against the evaluator, and a failure in any step (also in a nested loop, a
branch, a while loop, a backward loop) raising the evaluator's LinAlgError with the body's line; FFTs and
complex values inside loops of real carries (issue 18)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import symgraph as sg

pytest.importorskip("llvmlite")

RNG = np.random.default_rng(33)
SING = np.array([[1.0, 2.0], [2.0, 4.0]])
A3 = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
S3 = A3 @ A3.T


def scan_solve(a, b):
    def body(c, x):
        c = np.linalg.solve(a + x * np.eye(a.shape[0]), c)
        return c, np.sum(c)
    c, ys = sg.scan(body, b, np.arange(1.0, 5.0))
    return np.sum(c) + np.sum(ys ** 2)


def fori_cholesky(s):
    return sg.fori_loop(0, 3, lambda i, c: c + np.sum(np.log(np.diagonal(np.linalg.cholesky(s + i * np.eye(3))))),
                        0.0)


def while_inv(a):
    def body(c):
        return np.linalg.inv(c[0]) * 0.5 + np.eye(3), c[1] + 1
    return np.sum(sg.while_loop(lambda c: c[1] < 3, body, (a, 0))[0])


def scan_eigvalsh(s):
    def body(c, x):
        return c * 1.1, np.sum(np.linalg.eigvalsh(s + x * c) ** 2)
    return np.sum(sg.scan(body, np.eye(3), np.arange(3.0))[1])


def scan_complex_solve(a):
    def body(c, x):
        return np.linalg.solve(a.astype(complex) + 1j * x * np.eye(3), c), x
    c, _ = sg.scan(body, np.ones(3, complex), np.arange(3.0))
    return np.sum(np.abs(c) ** 2)


def cond_inv(a, p):
    return np.sum(sg.cond(p > 0, lambda a: np.linalg.inv(a), lambda a: a @ a, a) ** 2)


CASES = [("scan solve", scan_solve, (A3, np.ones(3))), ("fori cholesky", fori_cholesky, (S3,)),
         ("while inv", while_inv, (A3,)), ("scan eigvalsh", scan_eigvalsh, (S3,)),
         ("scan complex solve", scan_complex_solve, (A3,)), ("cond inv", cond_inv, (A3, 1.0))]


@pytest.mark.parametrize("name,f,args", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_against_the_evaluator(name, f, args):
    cf = sg.compile(f)
    np.testing.assert_allclose(cf(*args), f(*args), rtol=1e-12)
    assert cf.stats["loop_regions"] >= 1
    if name != "while inv":  # reverse mode through a while_loop needs max_steps or checkpoints
        g = sg.grad(f)
        np.testing.assert_allclose(sg.compile(g)(*args), g(*args), rtol=1e-10, atol=1e-12)
    if name in ("scan solve", "fori cholesky"):
        sg.check_grads(lambda a: f(a, *args[1:]), args[:1], order=2, modes=("rev",))


def _line(fn, text):
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(src) if text in s)


def test_a_singular_step_raises_with_the_bodys_line_and_the_next_call_works():
    def path(a, shifts):
        def step(x, s):
            x = np.linalg.solve(a + s * np.eye(2), x)  # the failing line
            return x, np.sum(x)
        x, sums = sg.scan(step, np.ones(2), shifts)
        return np.sum(x) + np.sum(sums)

    line = _line(path, "the failing line")
    good, bad = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])
    for f in (sg.compile(path), sg.compile(sg.value_and_grad(path)), sg.compile(path, backend="numpy")):
        with pytest.raises(sg.LinAlgError, match=r"^np\.linalg\.solve: singular matrix: a zero on the diagonal "
                                                 r"\(position 1\) \(found by its internal step triangular_solve\)"
                          ) as e:
            f(SING, bad)
        assert e.value.location.filename == __file__ and e.value.location.lineno == line, e.value.location
        assert e.value.location.function == "step"
        got = f(SING, good)  # the same program (its arena reused, its status zeroed) on good input
        want = sg.value_and_grad(path)(SING, good) if isinstance(got, tuple) else path(SING, good)
        for x, y in zip(np.atleast_1d(got) if not isinstance(got, tuple) else got, np.atleast_1d(want) if not isinstance(want, tuple) else want):
            np.testing.assert_allclose(x, y, rtol=1e-12)


def test_failures_in_nested_loops_branches_while_loops_and_backward_loops():
    def nested(a, xs):
        def outer(c, x):
            def inner(d, y):
                return np.linalg.inv(a + (x + y) * np.eye(2)) @ d, 0.0  # inner line
            return sg.scan(inner, c, xs)[0], 0.0
        return np.sum(sg.scan(outer, np.ones(2), xs)[0])

    def branch(a, p):
        return np.sum(sg.cond(p > 0, lambda a: np.linalg.inv(a), lambda a: a, a))  # branch line

    def whilef(a):
        def body(c):
            return np.linalg.cholesky(c[0] - 0.5 * np.eye(2)), c[1] + 1  # while line
        return np.sum(sg.while_loop(lambda c: c[1] < 5, body, (a, 0))[0])

    cases = [(nested, (SING, np.array([0.0, 1.0])), "inner line", r"^np\.linalg\.inv: singular matrix"),
             (branch, (SING, 1.0), "branch line", r"^np\.linalg\.inv: singular matrix"),
             (whilef, (3 * np.eye(2),), "while line", r"^np\.linalg\.cholesky: the matrix is not positive definite")]
    for f, args, mark, msg in cases:
        fns = [sg.compile(f), sg.compile(f, backend="numpy")]
        if f is not whilef:
            fns.append(sg.compile(sg.grad(f)))
        for cf in fns:
            with pytest.raises(sg.LinAlgError, match=msg) as e:
                cf(*args)
            assert e.value.location.lineno == _line(f, mark), (f.__name__, e.value.location)
    # the derivative's own failure, in the backward loop: d/da of a solve with a matrix that is fine forward
    # is fine too; a singular one fails in the forward loop of the compiled gradient, at the body's line
    np.testing.assert_allclose(sg.compile(sg.grad(nested))(SING, np.array([1.0, 1.0])),
                               sg.grad(nested)(SING, np.array([1.0, 1.0])), rtol=1e-12)


def test_ffts_and_complex_values_inside_a_real_loop_compile_natively():
    """An FFT in a loop body (real and complex carries), a complex solve of a real carry: the body's complex
    intermediates are split into real parts with the body's inputs and outputs in place; values and gradients
    equal the evaluator's."""
    x = RNG.standard_normal(8)

    def fft_real(v):
        return np.sum(sg.fori_loop(0, 20, lambda i, c: np.real(np.fft.ifft(np.fft.fft(c) * 0.9)), v) ** 2)

    def rfft_real(v):
        w = np.cos(np.arange(5.0))
        return np.sum(sg.fori_loop(0, 4, lambda i, c: np.fft.irfft(np.fft.rfft(c) * w, n=8) + c, v) ** 2)

    def fft_complex(v):
        z = v + 1j * v[::-1]
        c, _ = sg.scan(lambda c, t: (np.fft.fft(c) / np.sqrt(8.0) + t, 0.0), z, np.arange(3.0))
        return np.sum(np.abs(c) ** 2)

    def solve_real(a):
        def body(c, t):
            return np.real(np.linalg.solve(a + 1j * t * np.eye(3), c.astype(complex))), t
        return np.sum(sg.scan(body, np.ones(3), np.arange(20.0))[0] ** 2)

    for f, arg in ((fft_real, x), (rfft_real, x), (fft_complex, x), (solve_real, A3)):
        cf = sg.compile(f)
        np.testing.assert_allclose(cf(arg), f(arg), rtol=1e-12, err_msg=f.__name__)
        assert cf.stats["loop_regions"] >= 1
        np.testing.assert_allclose(sg.compile(sg.grad(f))(arg), sg.grad(f)(arg), rtol=1e-10, atol=1e-13,
                                   err_msg=f.__name__)
