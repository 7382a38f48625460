"""`sg.config.debug_nans`: a NaN/inf that a node produced is traced to its op, role and the user's line."""

from __future__ import annotations

import builtins
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import symgraph as sg
from symgraph import debugging
from symgraph.ir import Graph, meta


@pytest.fixture
def nans_on():
    prev = sg.config.debug_nans
    sg.config.debug_nans = True
    yield
    sg.config.debug_nans = prev


def _line_of(fn, text: str) -> int:
    """The file line number of the first line of `fn` containing `text`."""
    src, first = inspect.getsourcelines(fn)
    for k, line in enumerate(src):
        if text in line:
            return first + k
    raise AssertionError(text)


def forward_log(x):
    y = x - 1.0
    z = np.log(y)  # the producer
    return np.sum(np.tanh(z) * 2.0)


def sqrt_loss(x):
    r = np.sqrt(x)  # finite at 0; its derivative is not
    return np.sum(r * 3.0)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_log_of_negative_in_forward_pass(nans_on, backend):
    cf = sg.compile(forward_log, backend=backend)
    with pytest.raises(sg.FloatingPointError) as ei:
        cf(np.array([2.0, 0.5, 3.0]))
    e = ei.value
    assert isinstance(e, sg.SymgraphError) and isinstance(e, builtins.FloatingPointError)
    assert (e.op, e.role, e.kind, e.origin) == ("log", "forward", "NaN", None)
    assert e.location.lineno == _line_of(forward_log, "np.log(y)")
    assert e.location.filename == __file__
    assert "log produced NaN in the forward pass" in str(e)
    assert "1 of 3 elements NaN" in str(e)
    assert "-0.5" in str(e)  # the value the log read
    # the same function on good data runs, compiled and checked
    np.testing.assert_allclose(cf(np.array([2.0, 3.0, 4.0])), np.sum(np.tanh(np.log([1.0, 2.0, 3.0])) * 2))


def test_eager_transformation_forward_nan(nans_on):
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.value_and_grad(forward_log)(np.array([0.0, 4.0]))
    assert (ei.value.op, ei.value.role) == ("log", "forward")
    assert ei.value.location.lineno == _line_of(forward_log, "np.log(y)")


def mul_zero_inf(x, y):
    s = x + 1.0
    return s * y  # 0 * inf


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_zero_times_inf(nans_on, backend):
    cf = sg.compile(mul_zero_inf, backend=backend)
    with pytest.raises(sg.FloatingPointError) as ei:
        cf(np.array([-1.0, 2.0]), np.array([np.inf, 1.0]))
    e = ei.value
    assert (e.op, e.role, e.kind) == ("mul", "forward", "NaN")
    assert e.location.lineno == _line_of(mul_zero_inf, "s * y")
    # the inf came in with the arguments and was only propagated: nothing to report
    out = cf(np.array([1.0, 2.0]), np.array([np.inf, 1.0]))
    np.testing.assert_array_equal(out, [np.inf, 3.0])
    # a NaN passed in is not a NaN a node produced
    out = cf(np.array([np.nan, 2.0]), np.array([1.0, 1.0]))
    assert np.isnan(out[0]) and out[1] == 3.0


def overflow(x):
    return np.exp(x * 10.0)


def test_inf_from_finite_inputs_is_a_producer(nans_on):
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.compile(overflow, backend="numpy")(np.array([1.0, 100.0]))
    assert (ei.value.op, ei.value.kind) == ("exp", "inf")


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_backward_only_nan_names_the_forward_op(nans_on, backend):
    x = np.array([0.0, 4.0])
    # the forward value is finite (sqrt(0) = 0) ...
    assert sg.compile(sqrt_loss, backend=backend)(x) == 6.0
    # ... its derivative is not: the backward node is named with the forward op and line it comes from
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.compile(sg.grad(sqrt_loss), backend=backend)(x)
    e = ei.value
    assert e.role == "backward" and e.origin == "sqrt" and e.kind == "inf"
    assert e.op in ("div", "mul", "reciprocal", "rsqrt", "pow")
    assert e.location.lineno == _line_of(sqrt_loss, "np.sqrt(x)")
    msg = str(e)
    assert "in the backward sweep" in msg and "derivative (VJP) of the forward op sqrt" in msg


def test_backward_nan_eager_grad_and_jvp(nans_on):
    x = np.array([0.0, 4.0])
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.grad(sqrt_loss)(x)
    assert (ei.value.role, ei.value.origin) == ("backward", "sqrt")
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.jvp(sqrt_loss, (x,), (np.ones(2),))
    assert (ei.value.role, ei.value.origin) == ("tangent", "sqrt")
    assert "derivative (JVP) of the forward op sqrt" in str(ei.value)


def test_off_costs_nothing_and_raises_nothing(monkeypatch):
    assert sg.config.debug_nans is False
    calls = []
    monkeypatch.setattr(debugging, "check_outputs", lambda *a, **k: calls.append(a))
    cf = sg.compile(forward_log)
    x = np.array([2.0, 0.5])
    out = cf(x)
    assert np.isnan(out)
    assert np.isnan(cf(x))  # the second call takes the signature's fast path
    assert np.all(np.isnan(sg.grad(forward_log)(x)) == [False, True])
    assert calls == []  # the outputs were never scanned


def test_on_takes_the_checked_path(nans_on, monkeypatch):
    cf = sg.compile(forward_log)
    x = np.array([2.0, 3.0])
    cf(x)
    seen = []
    real = debugging.check_outputs
    monkeypatch.setattr(debugging, "check_outputs", lambda *a, **k: (seen.append(a[3]), real(*a, **k)))
    cf(x)
    assert seen == ["compile(forward_log)"]


def test_environment_variable_turns_it_on():
    code = ("import numpy as np, symgraph as sg\n"
            "assert sg.config.debug_nans is True\n"
            "try:\n    sg.compile(lambda x: np.log(x), backend='numpy')(np.array([-1.0]))\n"
            "except sg.FloatingPointError as e:\n    print('raised', e.op)\n")
    env = dict(os.environ, SYMGRAPH_DEBUG_NANS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "raised log"


def donated_log(x):
    return np.log(x) + 0.0


def test_donated_argument_is_rerun_with_its_old_value(nans_on):
    cf = sg.compile(donated_log, donate_argnums=0)
    x = np.array([1.0, -2.0])
    with pytest.raises(sg.FloatingPointError) as ei:
        cf(x)
    assert ei.value.op == "log"
    assert "-2." in str(ei.value)  # the re-run read the argument from before the call overwrote it


def block(x):
    return np.sin(np.log(x)) * 2.0  # the region's forward values


def checkpointed_loss(x):
    return np.sum(sg.checkpoint(block, policy=sg.nothing_saveable)(x) ** 2)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_checkpointed_graph(nans_on, backend):
    cf = sg.compile(sg.grad(checkpointed_loss), backend=backend)
    x = np.array([1.0, -1.0])
    with pytest.raises(sg.FloatingPointError) as ei:
        cf(x)
    # the original forward log runs first: it, not its recomputed copy, is the producer
    assert (ei.value.op, ei.value.role) == ("log", "forward")
    g = cf.graph
    recomputed = [n for n in g.toposort() if meta(n).role == "recomputed"]
    assert [n.op.name for n in recomputed] == ["log"]
    assert recomputed[0].inputs[0] is g.inputs[0]
    # the backward sweep alone (the recomputed log and what reads it): the recomputed node is reported
    readers = [n for n in g.toposort() if any(x is recomputed[0] for x in n.inputs)]
    sub = Graph(g.inputs, readers, name="backward part")
    p = debugging.find_producer(sub, [x])
    assert p is not None and p.node is recomputed[0] and meta(p.node).role == "recomputed"
    with pytest.raises(sg.FloatingPointError) as ei:
        debugging.check_outputs(sub, [x], sub.evaluate(x), "test")
    assert ei.value.role == "recomputed"
    assert "recomputed for the backward sweep" in str(ei.value)
    assert ei.value.location.lineno == _line_of(block, "np.log(x)")


def test_find_producer_none_for_finite_and_for_passed_in_nan():
    g = sg.trace(lambda x: x * 2.0, np.ones(3))
    assert debugging.find_producer(g, [np.ones(3)]) is None
    assert debugging.find_producer(g, [np.array([1.0, np.nan, np.inf])]) is None
    debugging.check_outputs(g, [np.array([np.nan, 1.0, 1.0])], [np.array([np.nan, 2.0, 2.0])], "test")


def test_communicating_graph_rerun_calls_no_collective(nans_on):
    from symgraph import distributed as sgd
    from test_distributed import _OneRank

    comm = _OneRank()

    def step(w, x):
        return sg.grad(lambda w: np.sum(np.sqrt(x @ w)))(w)  # sqrt'(0) = inf, times x = 0: NaN

    dp = sg.compile(step, backend="numpy", data_parallel=sgd.DataParallel(comm))
    w = np.ones(3)
    dp(w, np.ones((2, 3)))
    calls = len(comm.log)
    with pytest.raises(sg.FloatingPointError) as ei:
        dp(w, np.zeros((2, 3)))
    assert (ei.value.role, ei.value.origin) == ("backward", "sqrt")
    assert len(comm.log) == 2 * calls  # the step ran once; the re-run called no collective
    dp(w, np.array([[np.nan, 1.0, 1.0], [1.0, 1.0, 1.0]]))  # a NaN passed in: not reported


def scanned(x):
    def body(c, xi):
        c = c + np.log(xi)  # NaN at the step where xi < 0
        return c, c * 2.0
    c, ys = sg.scan(body, 0.0, x)
    return c + np.sum(ys)


def test_nan_inside_a_loop_body_names_the_op_and_the_step(nans_on):
    x = np.array([1.0, 2.0, -1.0, 3.0])
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.compile(scanned, backend="numpy")(x)
    e = ei.value
    assert (e.op, e.role, e.kind) == ("log", "forward", "NaN")
    assert e.location.lineno == _line_of(scanned, "np.log(xi)")
    assert "at step 2 (counting from 0) of the 4 steps of the loop (scan)" in str(e)
    assert f"at {__file__}:{_line_of(scanned, 'sg.scan(body')}" in str(e)  # the loop's own line
    # a loop of a while_loop kind (fori_loop) and the eager transformation path
    def fl(x):
        return sg.fori_loop(0, 3, lambda i, c: c * x - 1.0 + np.sqrt(c), x)
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.jvp(fl, (np.array(0.5),), (np.array(1.0),))
    assert ei.value.op == "sqrt" and "of the loop (scan)" in str(ei.value)


def test_backward_nan_inside_a_reverse_loop(nans_on):
    def f(x):
        def body(c, xi):
            return c + np.sqrt(xi), None  # sqrt'(0) = inf
        c, _ = sg.scan(body, 0.0, x)
        return c
    with pytest.raises(sg.FloatingPointError) as ei:
        sg.grad(f)(np.array([1.0, 4.0, 0.0, 9.0]))
    e = ei.value
    assert e.kind == "inf" and (e.role, e.origin) == ("backward", "sqrt")
    assert "at step 2 (counting from 0) of the 4 steps of the loop (scan)"  # forward order in str(e)
