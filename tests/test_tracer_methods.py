"""Every public ndarray method and attribute on a traced value traces or raises a SymgraphError naming itself;
a traced value used after its trace raises (an escaped tracer)."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.ir import Node

PUBLIC = sorted(n for n in dir(np.ndarray) if not n.startswith("_"))


def test_every_ndarray_name_exists_on_traced_values():
    assert [n for n in PUBLIC if not hasattr(Node, n)] == []


@pytest.mark.parametrize("name", PUBLIC)
def test_each_ndarray_name_traces_or_raises_a_symgraph_error(name):
    x0 = np.arange(1.0, 7.0).reshape(2, 3)
    seen = {}

    def f(x):
        try:
            attr = getattr(x, name)
            seen["value"] = attr() if callable(attr) else attr
        except sg.SymgraphError as e:
            seen["error"] = e
        except TypeError as e:  # a method that needs arguments: calling it with them is what matters
            seen["needs_args"] = e
        return np.sum(x)

    sg.trace(f, x0)
    if "error" in seen:
        assert name in str(seen["error"]), seen["error"]
    if "needs_args" in seen:
        assert "argument" in str(seen["needs_args"]), seen["needs_args"]


def test_copy_conj_real_imag_itemsize_argmin_take():
    x = np.array([3.0, -1.0, 2.0])

    def f(x):
        return np.sum(x.copy() * x.conj() + x.real + x.imag) + x.take(np.array([0, 2])).sum() + x.itemsize

    np.testing.assert_allclose(sg.grad(f)(x), 2 * x + 1 + np.array([1.0, 0.0, 1.0]))
    assert sg.trace(lambda x: x.argmin(), x).evaluate(x) == 1
    assert sg.compile(f)(x) == f(x)


def test_a_method_without_a_rule_names_itself_at_the_users_line():
    with pytest.raises(sg.UnsupportedOpError, match=r"x\.choose.*\n.*test_tracer_methods\.py"):
        sg.grad(lambda x: np.sum(x.choose([0, 1, 0])))(np.ones(3))


def test_compress_method_is_np_compress():
    x = np.arange(6.0).reshape(2, 3)
    f = lambda x: x.compress([True, False, True], axis=1)  # noqa: E731
    assert sg.compile(f)(x).tobytes() == f(x).tobytes()
    np.testing.assert_array_equal(sg.grad(lambda x: np.sum(f(x) ** 2))(x), 2 * x * np.array([1.0, 0.0, 1.0]))


def test_structural_methods_trace():
    x = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -2.0], [1.0, 1.5, 0.0]])
    for f in (lambda v: v.cumsum(1), lambda v: v.cumprod(), lambda v: v.argsort(axis=0), lambda v: v.diagonal(1),
              lambda v: v.trace(), lambda v: v.repeat(2, axis=0), lambda v: v.argpartition(1)[:, 1]):
        got, want = sg.trace(f, x).evaluate(x), f(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-15)


def test_range_of_a_traced_int_names_static_argnums():
    with pytest.raises(sg.TracerConversionError, match="static_argnums"):
        sg.compile(lambda x, n: x * sum(range(n)))(np.ones(3), 3)
    assert sg.compile(lambda x, n: x * sum(range(n)), static_argnums=1)(np.ones(3), 3)[0] == 3.0


def test_escaped_tracer_raises_at_first_use_naming_where_it_was_made():
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return np.sum(x)

    sg.grad(f)(np.ones(3))
    for use in (lambda t: t + 1.0, lambda t: 1.0 + t, lambda t: np.sin(t), lambda t: t[0], lambda t: np.sum(t),
                lambda t: t.sum(), lambda t: -t, lambda t: t @ t):
        with pytest.raises(sg.TracerConversionError, match=r"escaped.*|made at .*test_tracer_methods\.py"):
            use(leaked[0])


def test_an_escaped_tracer_used_in_a_later_trace_is_a_clear_error_everywhere():
    leaked = []
    sg.grad(lambda x: (leaked.append(np.tanh(x)), np.sum(leaked[-1]))[1])(np.ones(3))
    uses = [lambda: sg.compile(lambda x: np.sum(x * leaked[0]))(np.ones(3)),
            lambda: sg.compile(lambda x: np.sum(x * leaked[0]), backend="numpy")(np.ones(3)),
            lambda: sg.grad(lambda x: np.sum(x * leaked[0]))(np.ones(3)),
            lambda: sg.trace(lambda x: x * leaked[0], np.ones(3)),
            lambda: sg.vmap(lambda x: x * leaked[0])(np.ones((2, 3)))]
    for use in uses:
        with pytest.raises(sg.TracerConversionError, match="escaped"):
            use()


def test_np_arange_of_a_traced_int_names_static_argnums():
    with pytest.raises(sg.TracerConversionError, match="static_argnums"):
        sg.compile(lambda n: np.arange(n))(5)
