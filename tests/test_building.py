"""Building arrays from traced values (issue 17): array/asarray of sequences, the joining helpers,
linspace with traced endpoints, and pytrees (lists, tuples, dicts) as differentiated arguments."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp

X, Y = 1.5, -2.25
A = np.array([0.5, -1.25, 2.0])
B = np.array([[1.0, -0.5, 0.25], [2.0, 3.5, -1.0]])


def assert_same(got, want):
    """Same shape, dtype and values, bit for bit."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def traced(f, *args):
    """f's value through the evaluator of its trace."""
    return sg.trace(f, *args).evaluate(*args)


# (name, f written with `m` (np or snp), arguments): the snp spelling traced must equal the np one eagerly
SEQUENCES = [
    ("array of scalars", lambda m, x, y: m.array([x, y]), (X, Y)),
    ("array with a Python int", lambda m, x, y: m.array([x, 1]), (X, Y)),
    ("nested lists and tuples", lambda m, x, y: m.array([[x, y], (y, 1.0)]), (X, Y)),
    ("asarray of a tuple", lambda m, x, y: m.asarray((x, 2.0 * y)), (X, Y)),
    ("array of a value", lambda m, x, y: m.array(x), (X, Y)),
    ("copy=True", lambda m, x, y: m.array(x, copy=True), (X, Y)),
    ("copy=None", lambda m, x, y: m.asarray(x, copy=None), (X, Y)),
    ("dtype=float32", lambda m, x, y: m.array(x, dtype=np.float32), (X, Y)),
    ("asarray dtype", lambda m, x, y: m.asarray([x, y], dtype=np.float32), (X, Y)),
    ("ndmin", lambda m, x, y: m.array([x, y], ndmin=3), (X, Y)),
    ("arrays and a list", lambda m, a, b: m.array([a, [1.0, 2.0, 3.0], 2 * a]), (A, B)),
    ("rows of a matrix", lambda m, a, b: m.array([b[0], b[1], a]), (A, B)),
    ("float32 and a Python float", lambda m, x, y: m.array([x, 1.0]), (np.float32(X), Y)),  # float64, as NumPy
    ("float32 only", lambda m, x, y: m.array([x, x]), (np.float32(X), Y)),
    ("r_", lambda m, a, b: m.r_[a, 1.0, b[0]], (A, B)),
    ("r_ with a slice", lambda m, a, b: m.r_[a, 0:3], (A, B)),
    ("c_", lambda m, a, b: m.c_[a, b[1], b.T], (A, B)),
]


@pytest.mark.parametrize("name,f,args", SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_array_from_sequences_matches_numpy(name, f, args):
    assert_same(traced(lambda *a: f(snp, *a), *args), f(np, *args))
    assert_same(sg.compile(lambda *a: f(snp, *a))(*args), f(np, *args))


def test_ragged_sequences_are_refused():
    with pytest.raises(sg.ShapeError, match="inhomogeneous"):
        sg.trace(lambda a: snp.array([a, a[:2]]), A)


def test_array_of_traced_values_differentiates():
    def f(x, y):
        v = snp.array([[x, y * x], (np.sin(y), 1.0)])
        return np.sum(v @ v)

    sg.check_grads(f, (X, Y), order=2)
    np.testing.assert_allclose(sg.compile(sg.grad(f, argnums=(0, 1)))(X, Y), sg.grad(f, argnums=(0, 1))(X, Y),
                               rtol=1e-14)
    g = sg.grad(lambda a: np.sum(snp.array([a, 2 * a]) ** 2))(A)
    np.testing.assert_allclose(g, 10 * A, rtol=1e-15)


def test_plain_numpy_array_of_tracers_traces_and_a_name_bound_before_the_trace_still_names_the_fix():
    """np.array / np.r_ / np.c_ looked up on the numpy module during a trace trace (symgraph.conversions); the
    same function bound before the trace converts first and raises, naming the traced spellings."""
    np.testing.assert_array_equal(sg.trace(lambda x, y: np.array([x, y]), X, Y).evaluate(X, Y), np.array([X, Y]))
    np.testing.assert_array_equal(sg.trace(lambda a: np.r_[a, a], A).evaluate(A), np.r_[A, A])
    np.testing.assert_array_equal(sg.trace(lambda a: np.c_[a, a], A).evaluate(A), np.c_[A, A])
    bound_array, bound_r = np.array, np.r_
    with pytest.raises(sg.TracerConversionError, match=r"np\.stack"):
        sg.trace(lambda x, y: bound_array([x, y]), X, Y)
    with pytest.raises(sg.TracerConversionError, match=r"np\.concatenate.*symgraph\.numpy\.r_"):
        sg.trace(lambda a: bound_r[a, a], A)


# plain NumPy functions that reach __array_function__: (name, f, arguments)
JOINING = [
    ("column_stack", lambda a, b: np.column_stack([a, b[0], a * 2]), (A, B)),
    ("column_stack 2-d", lambda a, b: np.column_stack([a[:2], b.T[:2], 1.0 * a[:2]]), (A, B)),
    ("column_stack 0-d", lambda a, b: np.column_stack([a[0], b[0, 1]]), (A, B)),
    ("append flat", lambda a, b: np.append(b, a), (A, B)),
    ("append a number", lambda a, b: np.append(a, 1.0), (A, B)),
    ("append axis 0", lambda a, b: np.append(b, a[None], axis=0), (A, B)),
    ("append axis 1", lambda a, b: np.append(b, b, axis=1), (A, B)),
    ("atleast_1d", lambda a, b: np.atleast_1d(a[0]), (A, B)),
    ("atleast_1d of several", lambda a, b: np.atleast_1d(a[0], a, b), (A, B)),
    ("atleast_2d", lambda a, b: np.atleast_2d(a[0], a, b), (A, B)),
    ("atleast_3d", lambda a, b: np.atleast_3d(a[0], a, b), (A, B)),
    ("stack numbers and values", lambda a, b: np.stack([a[0], 1.0, b[1, 1]]), (A, B)),
    ("concatenate a list", lambda a, b: np.concatenate([a, [1.0, 2.0]]), (A, B)),
    ("hstack a number", lambda a, b: np.hstack([a, 3.0]), (A, B)),
    ("vstack a list", lambda a, b: np.vstack([b, [1.0, 2.0, 3.0]]), (A, B)),
    ("stack float32 and a number", lambda a, b: np.stack([a, 1.0]), (A.astype(np.float32)[0], B)),
    ("concatenate float32 and float64", lambda a, b: np.concatenate([a, b[0]]), (A.astype(np.float32), B)),
    ("append to an empty array", lambda a, b: np.append(a[:0], b), (A, B)),
    ("column_stack of empty columns", lambda a, b: np.column_stack([a[:0], b[0, :0]]), (A, B)),
    ("atleast_2d of an empty array", lambda a, b: np.atleast_2d(a[:0]), (A, B)),
    ("float32 column_stack", lambda a, b: np.column_stack([a, a]), (A.astype(np.float32), B)),
]


@pytest.mark.parametrize("name,f,args", JOINING, ids=[s[0] for s in JOINING])
def test_joining_functions_match_numpy_and_compile(name, f, args):
    got = traced(f, *args)
    want = f(*args)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    assert_same(got, want)
    assert_same(sg.compile(f)(*args), want)


@pytest.mark.parametrize("name,f,args", JOINING[:11], ids=[s[0] for s in JOINING[:11]])
def test_joining_functions_differentiate(name, f, args):
    def loss(a, b):
        out = f(a, b)
        outs = out if isinstance(out, tuple) else (out,)
        return sum(np.sum(np.sin(o) * o) for o in outs)

    sg.check_grads(loss, args, order=2)


def test_joining_functions_batch():
    bs = np.stack([B, 2 * B, -B])
    for f in (lambda b: np.column_stack([b[0], b[1]]), lambda b: np.append(b, b[0]),
              lambda b: np.atleast_3d(b), lambda b: np.stack([b[0, 0], 1.0])):
        np.testing.assert_array_equal(sg.vmap(f)(bs), np.stack([f(b) for b in bs]))


# ----- linspace with traced endpoints -----

LINSPACE = [
    ("scalars", dict(num=7), (X, Y)),
    ("no endpoint", dict(num=5, endpoint=False), (X, Y)),
    ("one sample", dict(num=1), (X, Y)),
    ("one sample, no endpoint", dict(num=1, endpoint=False), (X, Y)),
    ("no samples", dict(num=0), (X, Y)),
    ("two samples", dict(num=2), (X, Y)),
    ("integer dtype", dict(num=6, dtype=np.int64), (X, 9.75)),
    ("float32", dict(num=9), (np.float32(0.1), np.float32(0.7))),
    ("arrays", dict(num=4), (A, B)),
    ("arrays, axis -1", dict(num=4, axis=-1), (A, B)),
    ("arrays, axis 1", dict(num=3, axis=1), (A, B)),
]


@pytest.mark.parametrize("name,kw,args", LINSPACE, ids=[s[0] for s in LINSPACE])
def test_linspace_with_traced_endpoints_matches_numpy(name, kw, args):
    f = lambda a, b: np.linspace(a, b, **kw)  # noqa: E731
    assert_same(traced(f, *args), f(*args))
    got_y, got_step = traced(lambda a, b: np.linspace(a, b, retstep=True, **kw), *args)
    want_y, want_step = np.linspace(*args, retstep=True, **kw)
    assert_same(got_y, want_y)
    np.testing.assert_array_equal(got_step, want_step)
    np.testing.assert_allclose(sg.compile(f)(*args), f(*args), rtol=1e-6 if got_y.dtype == np.float32 else 1e-15)
    # one endpoint traced, the other a number
    g = lambda b: np.linspace(0.25, b, **kw)  # noqa: E731
    assert_same(traced(g, args[1]), g(args[1]))


def test_linspace_differentiates_to_both_endpoints():
    def f(a, b):
        return np.sum(np.linspace(a, b, 5) ** 2)

    sg.check_grads(f, (X, Y), order=2)
    sg.check_grads(lambda a, b: np.sum(np.sin(np.linspace(a, b, 4, endpoint=False, axis=-1))), (A, B), order=2)
    # d/da sum(linspace(a, b, n)) = sum(1 - t) for t = 0, 1/(n-1), ..., 1
    ga, gb = sg.grad(lambda a, b: np.sum(np.linspace(a, b, 5)), argnums=(0, 1))(X, Y)
    assert float(ga) == 2.5 and float(gb) == 2.5
    ys = np.stack([np.linspace(X, y, 5) for y in (1.0, 2.0, 3.0)])
    np.testing.assert_array_equal(sg.vmap(lambda y: np.linspace(X, y, 5))(np.array([1.0, 2.0, 3.0])), ys)
    # B[0, 2] = 0.25 = start: a step of 0, so NumPy takes its other branch (other roundings) for that example only
    bs = np.stack([B + 1.0, B, 2 * B])
    np.testing.assert_array_equal(sg.vmap(lambda b: np.linspace(0.25, b, 4))(bs),
                                  np.stack([np.linspace(0.25, b, 4) for b in bs]))
    grads = sg.compile(sg.grad(lambda a, b: np.sum(np.linspace(a, b, 5) ** 2), argnums=(0, 1)))(X, Y)
    np.testing.assert_allclose(grads, sg.grad(lambda a, b: np.sum(np.linspace(a, b, 5) ** 2), argnums=(0, 1))(X, Y),
                               rtol=1e-14)


def test_linspace_refuses_a_traced_num():
    with pytest.raises(sg.SymgraphError):
        sg.trace(lambda a, n: np.linspace(a, 1.0, n), X, 3)


# ----- pytrees as differentiated arguments -----


def _loss(p):
    return p["w"][0] * np.sum(p["w"][1] ** 2) + np.sin(p["b"])


P = {"w": [2.0, np.array([1.0, -3.0])], "b": (0.5)}


def test_grad_of_a_dict_of_a_list_keeps_the_structure():
    g = sg.grad(_loss)(P)
    assert isinstance(g, dict) and isinstance(g["w"], list) and len(g["w"]) == 2
    assert float(g["w"][0]) == 10.0
    np.testing.assert_array_equal(g["w"][1], [4.0, -12.0])
    assert float(g["b"]) == np.cos(0.5)
    v, g2 = sg.value_and_grad(_loss)(P)
    assert float(v) == 20.0 + np.sin(0.5) and float(g2["w"][0]) == 10.0
    gc = sg.compile(sg.grad(_loss))(P)
    assert isinstance(gc["w"], list) and float(gc["w"][0]) == 10.0
    np.testing.assert_array_equal(gc["w"][1], [4.0, -12.0])


def test_tuples_of_numbers_lists_of_arrays_in_every_transformation():
    f = lambda p: p[0] * p[1] ** 2  # noqa: E731
    g = sg.grad(f)((3.0, 2.0))
    assert isinstance(g, tuple) and (float(g[0]), float(g[1])) == (4.0, 12.0)
    out, t = sg.jvp(f, ((3.0, 2.0),), ((1.0, 0.0),))
    assert float(out) == 12.0 and float(t) == 4.0
    _, pullback = sg.vjp(f, (3.0, 2.0))
    (ct,) = pullback(1.0)
    assert isinstance(ct, tuple) and (float(ct[0]), float(ct[1])) == (4.0, 12.0)
    ws = [np.array([1.0, 2.0]), np.array([[3.0]])]
    gl = sg.grad(lambda ws: np.sum(ws[0] ** 2) * np.sum(ws[1]))(ws)
    assert isinstance(gl, list)
    np.testing.assert_array_equal(gl[0], [6.0, 12.0])
    np.testing.assert_array_equal(gl[1], [[5.0]])
    h = sg.hessian(f)((3.0, 2.0))
    assert float(h[0][1]) == 4.0 and float(h[1][1]) == 6.0
    sg.check_grads(lambda p: np.sum(p[0] * np.tanh(p[1])), ([A, 2 * A],), order=2)
    assert float(sg.compile(f)((3.0, 2.0))) == 12.0


def test_a_list_of_numbers_is_a_pytree_of_scalars():
    """As in JAX and autograd: the gradient has the list's structure (see docs/compile.md, argument rules)."""
    g = sg.grad(lambda p: p[0] * p[1] + p[2][0] ** 2)([1.0, 2.0, [3.0]])
    assert isinstance(g, list) and isinstance(g[2], list)
    assert [float(g[0]), float(g[1]), float(g[2][0])] == [2.0, 1.0, 6.0]
    v, gc = sg.compile(sg.value_and_grad(lambda p: p[0] * p[1]))([3.0, 4.0])
    assert float(v) == 12.0 and [float(t) for t in gc] == [4.0, 3.0]


def test_namedtuples_dict_outputs_and_nested_jacobians_of_pytrees():
    import collections

    Params = collections.namedtuple("Params", "w b")
    p = Params(np.array([1.0, -2.0]), 0.5)
    g = sg.grad(lambda p: np.sum(p.w ** 2) * p.b)(p)
    assert type(g) is Params
    np.testing.assert_array_equal(g.w, [1.0, -2.0])
    assert float(g.b) == 5.0
    v, gc = sg.compile(sg.value_and_grad(lambda p: np.sum(p.w ** 2) * p.b))(p)
    assert type(gc) is Params and float(v) == 2.5 and float(gc.b) == 5.0
    (ct,) = sg.vjp(lambda d: {"o": d["a"] * d["b"]}, {"a": 2.0, "b": 3.0})[1]({"o": 1.0})
    assert (float(ct["a"]), float(ct["b"])) == (3.0, 2.0)
    h = sg.hessian(lambda d: d["a"] ** 2 * d["b"])({"a": 2.0, "b": 3.0})
    assert float(h["a"]["a"]) == 6.0 and float(h["a"]["b"]) == 4.0 and float(h["b"]["b"]) == 0.0
    jac = sg.jacobian(lambda d: np.stack([d["a"] * d["b"], d["b"]]))({"a": 2.0, "b": 3.0})
    np.testing.assert_array_equal(jac["a"], [3.0, 0.0])
    np.testing.assert_array_equal(jac["b"], [2.0, 1.0])
    assert sg.grad(lambda d: d["a"] * 2.0)({"a": 1.0, "unused": None})["unused"] is None
