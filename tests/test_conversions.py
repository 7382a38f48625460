"""Plain NumPy's array-building spellings on traced values (symgraph.conversions): np.array, np.asarray,
np.r_/np.c_ and NumPy functions of lists holding traced values, with NumPy's values, copy semantics and
derivatives; NumPy itself unchanged outside traces and in other threads."""

import threading

import numpy as np
import pytest

import symgraph as sg
from symgraph import conversions

X = np.array([0.3, -1.2, 0.8])
S = 0.7


CASES = [  # (name, f, argument): each f written as NumPy users write it
    ("array of a traced value", lambda x: np.sum(np.array(x) ** 2), X),
    ("asarray of a traced value", lambda x: np.sum(np.sin(np.asarray(x)) * x), X),
    ("array of a list", lambda x: np.sum(np.array([x, 2.0 * x]) ** 3), X),
    ("asarray of a tuple with numbers", lambda s: np.sum(np.asarray((s, 1.0, s * s)) ** 2), S),
    ("nested lists", lambda s: np.sum(np.array([[s, 1.0], [2.0, s ** 2]]) @ np.array([s, 3.0])), S),
    ("array dtype and ndmin", lambda x: np.sum(np.array(x, dtype=np.float64, ndmin=3) ** 2), X),
    ("asanyarray", lambda x: np.sum(np.asanyarray([x, x]) * x), X),
    ("ascontiguousarray", lambda x: np.sum(np.ascontiguousarray(x) ** 3), X),
    ("r_", lambda x: np.sum(np.r_[x, 1.0, x ** 2] ** 2), X),
    ("c_", lambda x: np.sum(np.c_[x, x ** 2] @ np.array([1.0, -2.0])), X),
    ("mean of a list", lambda s: np.mean([s, 3.0 * s, s ** 2]), S),
    ("std of a list", lambda s: np.std([s, 3.0 * s, 1.0]), S),
    ("var of a list of arrays", lambda x: np.sum(np.var([x, x ** 2], axis=0)), X),
    ("norm of a list", lambda s: np.linalg.norm([s, 2.0 * s, 1.0]), S),
    ("append a list", lambda x: np.sum(np.append(x, [x[0], 2.0]) ** 2), X),
    ("sum of a list", lambda s: np.sum([s, s ** 2]), S),
    ("dot of lists", lambda s: np.dot([s, 1.0], [2.0, s]), S),
]


@pytest.mark.parametrize("name,f,arg", CASES, ids=[c[0] for c in CASES])
def test_values_and_derivatives_match_numpy(name, f, arg):
    with np.errstate(all="ignore"):
        want = f(np.asarray(arg))  # NumPy on concrete values
    got = sg.trace(f, arg).evaluate(arg)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    sg.check_grads(f, (arg,), order=2)
    np.testing.assert_allclose(sg.compile(sg.grad(f))(arg), sg.grad(f)(arg), rtol=1e-13)


def test_vmap_of_a_list_built_inside():
    f = lambda s: np.mean(np.array([s, s ** 2, 1.0]))
    xs = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(sg.vmap(f)(xs), [(s + s * s + 1.0) / 3 for s in xs], rtol=1e-15)


def test_grad_of_grad_builds_arrays_in_both_traces():
    f = lambda s: np.sum(np.array([s, 1.0]) ** 3)
    assert abs(sg.grad(sg.grad(f))(S) - 6.0 * S) < 1e-14


def test_np_array_copies_and_np_asarray_does_not():
    def copied(x):
        y = np.array(x)
        y[0] = 5.0  # a new array: x is unchanged
        return np.sum(x) + 10.0 * np.sum(y)

    np.testing.assert_allclose(sg.grad(copied)(X), [1.0, 11.0, 11.0])
    assert sg.trace(copied, X).evaluate(X) == pytest.approx(np.sum(X) + 10.0 * (5.0 + X[1] + X[2]))

    def from_list(s):
        a = np.asarray([s, s])  # a new array each time, even when the same list is built twice
        b = np.asarray([s, s])
        a[0] = 0.0
        return np.sum(a) + 10.0 * np.sum(b)

    assert sg.grad(from_list)(S) == pytest.approx(21.0)

    def aliased(x):
        y = np.asarray(x)  # x itself: writing into it writes into the caller's argument, refused as for x
        y[0] = 5.0
        return np.sum(y)

    with pytest.raises(sg.TracerConversionError, match="argument"):
        sg.grad(aliased)(X)


def test_numpy_is_restored_after_a_trace_and_after_an_error():
    before = (np.array, np.asarray, np.mean, np.r_, np.linalg.norm)
    sg.grad(lambda s: np.mean([s, s]))(S)
    with pytest.raises(ZeroDivisionError):
        sg.grad(lambda s: 1 / 0)(S)
    assert (np.array, np.asarray, np.mean, np.r_, np.linalg.norm) == before
    assert np.array is conversions.ORIGINALS[(np, "array")]


def test_other_threads_get_numpy_s_results_while_a_trace_runs():
    started, release, seen = threading.Event(), threading.Event(), []

    def f(s):
        started.set()
        release.wait(10)
        return np.sum(np.array([s, 1.0]))

    t = threading.Thread(target=lambda: seen.append(sg.grad(f)(S)))
    t.start()
    assert started.wait(10)
    assert np.array is not conversions.ORIGINALS[(np, "array")]  # wrapped while the trace runs
    a = np.array([[1, 2], [3, 4]], dtype=np.int8, order="F")
    assert type(a) is np.ndarray and a.dtype == np.int8 and a.flags.f_contiguous
    assert np.asarray(a) is a and np.array(a) is not a
    assert np.mean([1.0, 2.0]) == 1.5 and np.r_[1:3, 5].tolist() == [1, 2, 5]
    release.set()
    t.join(10)
    assert seen == [1.0] and np.array is conversions.ORIGINALS[(np, "array")]


def test_a_name_bound_before_the_trace_still_raises_naming_the_fix():
    from numpy import asarray as bound

    with pytest.raises(sg.TracerConversionError, match="bound before the trace"):
        sg.grad(lambda s: np.sum(bound([s, 1.0])))(S)


def test_a_list_that_numpy_cannot_build_is_still_an_error():
    with pytest.raises(sg.ShapeError, match="inhomogeneous"):
        sg.trace(lambda x: np.array([x, x[:2]]), X)


def test_a_view_left_stale_by_a_write_is_refused_not_read_with_its_old_values():
    """NumPy's view sees the write (np.array(v) = [5, 2]); symgraph refuses the read, as for every other read."""
    def built(x):
        a = x.copy()
        v = a[0:2]
        a[0] = 5.0
        return np.sum(np.array(v) * np.arange(1.0, 3.0))

    def listed(x):
        a = x.copy()
        v = a[0:2]
        a[0] = 5.0
        return np.sum(np.mean([v, v], axis=0))

    def joined(x):
        a = x.copy()
        v = a[0:2]
        a[1] = 5.0
        return np.sum(np.r_[v, 1.0])

    for f in (built, listed, joined):
        with pytest.raises(sg.TracerConversionError, match="view"):
            sg.trace(f, X)


def test_r_and_c_are_new_arrays_with_numpy_s_dtypes():
    def f(x):
        z = x * 1.0
        y = np.r_[z]  # one item: still a new array
        y[0] = 7.0
        w = np.c_[z]
        w[1, 0] = 3.0
        v = np.array(z, ndmin=2)
        v[0, 2] = -1.0
        return z

    np.testing.assert_array_equal(sg.trace(f, X).evaluate(X), X)
    np.testing.assert_array_equal(sg.grad(lambda x: np.sum(f(x)))(X), np.ones(3))
    x32, i32 = X.astype(np.float32), np.arange(3, dtype=np.int32)
    for g, a in [(lambda x: np.r_[x, 1.0], x32), (lambda x: np.r_[1, x], x32), (lambda x: np.r_[x, 2], i32),
                 (lambda x: np.c_[x, x], x32), (lambda x: np.r_[x, np.float64(1.0)], x32),
                 (lambda x: np.r_[[x[0], 1.0], x], x32)]:
        want, got = g(a), sg.trace(g, a).evaluate(a)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_numpy_functions_written_in_python_retry_on_lists():
    """np.median / quantile / nanmean of a list: NumPy's own code converts with np.asanyarray; that keeps NumPy's
    conversion, so the function the user called retries with the list as an array."""
    v = np.array([1.0, 3.0, 2.0])
    np.testing.assert_allclose(sg.grad(lambda x: np.median([x[0], x[1], x[2]]))(v), [0, 0, 1])
    np.testing.assert_allclose(sg.grad(lambda x: np.nanmean([x[0], x[1]]))(v), [0.5, 0.5, 0])
    np.testing.assert_allclose(sg.grad(lambda x: np.quantile([x[0], x[1], x[2]], 0.3))(v), [0.4, 0, 0.6])


def test_joining_lists_that_hold_traced_values():
    for f in (lambda x: np.concatenate([[x[0], 1.0], x]), lambda x: np.concatenate(([x[0]], x)),
              lambda x: np.hstack([[x[0], x[1]], x]), lambda x: np.vstack([[x[0], x[1], 1.0], x]),
              lambda x: np.stack([[x[0], 1.0, 2.0], x])):
        np.testing.assert_array_equal(sg.trace(f, X).evaluate(X), f(X))
        sg.check_grads(lambda x: np.sum(f(x) ** 2), (X,), order=2)
