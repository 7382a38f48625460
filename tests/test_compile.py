"""sg.compile: signature cache, static and donated arguments, inline use under
transformations, thread safety, inspection; both backends."""

from __future__ import annotations

import io
import logging
import sys
import threading

import numpy as np
import pytest

import symgraph as sg
from symgraph.compile import CompiledFunction, compile
from symgraph.errors import SymgraphError

BACKENDS = ["numpy", "llvm"]


def _counting(fn):
    calls = {"n": 0}

    def wrapped(*a, **k):
        calls["n"] += 1
        return fn(*a, **k)

    wrapped.__name__ = fn.__name__
    return wrapped, calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_cache_hits(backend):
    def f(x, y):
        return np.sin(x) * y + np.exp(-x)

    fc, calls = _counting(f)
    cf = compile(fc, backend=backend)
    x = np.linspace(-2, 2, 11)
    for _ in range(3):
        np.testing.assert_allclose(cf(x, 0.5), f(x, 0.5), rtol=1e-14, atol=1e-15)
    assert calls["n"] == 1 and cf.signatures == 1
    # new shape -> new signature; new dtype -> new signature
    cf(x[:5].copy(), 0.5)
    assert calls["n"] == 2
    out32 = cf(x.astype(np.float32), np.float32(0.5))
    assert out32.dtype == np.float32 and calls["n"] == 3
    # the old signature is still cached
    cf(x, 0.5)
    assert calls["n"] == 3 and cf.signatures == 3
    assert cf.stats["nodes"] >= 4 and cf.stats["compile_seconds"] > 0
    assert cf.stats["peak_bytes"] >= x.nbytes


@pytest.mark.parametrize("backend", BACKENDS)
def test_decorator_forms_and_pytrees(backend):
    @compile(backend=backend)
    def f(params, x):
        h = np.tanh(x @ params["w"] + params["b"])
        return {"out": h.sum(), "h": h}

    rng = np.random.default_rng(0)
    p = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4)}
    x = rng.normal(size=(5, 3))
    r = f(p, x)
    h = np.tanh(x @ p["w"] + p["b"])
    np.testing.assert_allclose(r["h"], h, rtol=1e-13)
    np.testing.assert_allclose(r["out"], h.sum(), rtol=1e-13)
    assert isinstance(f, CompiledFunction)

    deco = compile if backend == "llvm" else compile(backend=backend)  # bare @compile is the llvm default

    @deco
    def g(x):
        return x * 2.0

    np.testing.assert_array_equal(g(np.arange(3.0)), [0.0, 2.0, 4.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_argnums_retrace(backend):
    def f(x, n, mode):
        for _ in range(n):
            x = np.sin(x) if mode == "sin" else np.cos(x)
        return x

    fc, calls = _counting(f)
    cf = compile(fc, backend=backend, static_argnums=(1, 2))
    x = np.linspace(0, 1, 7)
    np.testing.assert_allclose(cf(x, 2, "sin"), np.sin(np.sin(x)), rtol=1e-14)
    np.testing.assert_allclose(cf(x, 2, "sin"), np.sin(np.sin(x)), rtol=1e-14)
    assert calls["n"] == 1
    np.testing.assert_allclose(cf(x, 3, "sin"), np.sin(np.sin(np.sin(x))), rtol=1e-14)
    np.testing.assert_allclose(cf(x, 3, "cos"), np.cos(np.cos(np.cos(x))), rtol=1e-14)
    assert calls["n"] == 3
    with pytest.raises(SymgraphError, match="unhashable"):
        cf(x, [1], "sin")


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_compiled_and_compiled_grad(backend):
    def f(x):
        return np.sum(np.tanh(x) * np.sin(x) + 0.5 * np.exp(-x * x))

    x = np.linspace(-3, 3, 13)
    want = (1 - np.tanh(x) ** 2) * np.sin(x) + np.tanh(x) * np.cos(x) - x * np.exp(-x * x)
    cf = compile(f, backend=backend)
    # grad of a compiled function: compile is a graph transform, traced inline
    np.testing.assert_allclose(sg.grad(cf)(x), want, rtol=1e-13, atol=1e-15)
    # a compiled gradient
    cg = compile(sg.value_and_grad(f), backend=backend)
    v, g = cg(x)
    np.testing.assert_allclose(v, f(x), rtol=1e-13)
    np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-15)
    # a compiled function inside a compiled gradient
    cg2 = compile(sg.grad(lambda x: cf(x) * 2.0), backend=backend)
    np.testing.assert_allclose(cg2(x), 2 * want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_donate_argnums_reuses_buffers(backend):
    def step(params, state, x):
        g = {k: 2.0 * v * x for k, v in params.items()}
        new_state = {k: 0.9 * state[k] + g[k] for k in state}
        new_params = {k: params[k] - 0.1 * new_state[k] for k in params}
        return new_params, new_state

    cstep = compile(step, backend=backend, donate_argnums=(0, 1))
    rng = np.random.default_rng(1)
    params = {"a": rng.normal(size=(4, 5)), "b": rng.normal(size=5)}
    state = {"a": np.zeros((4, 5)), "b": np.zeros(5)}
    ref_p, ref_s = {k: v.copy() for k, v in params.items()}, {k: v.copy() for k, v in state.items()}
    ids = {("p", k): id(v) for k, v in params.items()} | {("s", k): id(v) for k, v in state.items()}
    ptrs = {("p", k): v.ctypes.data for k, v in params.items()} | {("s", k): v.ctypes.data for k, v in state.items()}
    for _ in range(3):
        params, state = cstep(params, state, 0.5)
        ref_p, ref_s = step(ref_p, ref_s, 0.5)
        for k in params:
            np.testing.assert_allclose(params[k], ref_p[k], rtol=1e-14)
            np.testing.assert_allclose(state[k], ref_s[k], rtol=1e-14)
    for k in params:
        assert id(params[k]) == ids[("p", k)] and params[k].ctypes.data == ptrs[("p", k)]
        assert id(state[k]) == ids[("s", k)] and state[k].ctypes.data == ptrs[("s", k)]
    # a read-only array is not donated: a fresh output, the argument untouched
    ro = {"a": np.ones((4, 5)), "b": np.ones(5)}
    ro["a"].setflags(write=False)
    p2, _ = cstep(ro, {"a": np.zeros((4, 5)), "b": np.zeros(5)}, 0.5)
    assert p2["a"] is not ro["a"] and np.all(ro["a"] == 1.0)
    np.testing.assert_allclose(p2["a"], 1.0 - 0.1 * 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_donation_with_aliasing_arguments_is_safe(backend):
    def f(x, y):
        return x + y[::-1]

    cf = compile(f, backend=backend, donate_argnums=0)
    x = np.arange(6.0)
    out = cf(x, x)  # the same buffer passed twice: must not be updated in place
    np.testing.assert_array_equal(out, np.arange(6.0) + np.arange(6.0)[::-1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_thread_safe_cache(backend):
    def f(x):
        return np.sum(np.cos(x) ** 2 + np.sin(x) ** 2)

    fc, calls = _counting(f)
    cf = compile(fc, backend=backend)
    errors = []
    xs = [np.linspace(0, 1, n) for n in (10, 20, 30)]
    barrier = threading.Barrier(8)

    def worker(t):
        try:
            barrier.wait()
            for i in range(30):
                x = xs[(t + i) % 3]
                r = cf(x)
                if abs(float(r) - x.size) > 1e-9 * x.size:
                    errors.append((t, i, float(r)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert calls["n"] == 3 and cf.signatures == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_arguments_raise(backend):
    cf = compile(lambda x: x + 1, backend=backend)
    np.testing.assert_array_equal(cf(np.zeros(3)), [1.0, 1.0, 1.0])
    with pytest.raises(sg.DTypeError):
        cf(np.array(["a"]))
    with pytest.raises(sg.DTypeError):
        cf(object())


def test_checkpoint_argument_reaches_the_pass():
    # Either the checkpoint pass exists (and the result is right) or a clear error names it.
    def f(x):
        for _ in range(4):
            x = np.tanh(x) * 1.1
        return np.sum(x)

    cf = compile(sg.grad(f), backend="numpy", checkpoint="sqrt")
    x = np.linspace(-1, 1, 5)
    try:
        r = cf(x)
    except SymgraphError as e:
        assert "checkpoint" in str(e)
    else:
        np.testing.assert_allclose(r, sg.grad(f)(x), rtol=1e-13)


def test_recompile_logs_changed_key(caplog):
    cf = compile(lambda x: x * 2, backend="numpy")
    cf(np.zeros(3))
    with caplog.at_level(logging.DEBUG, logger="symgraph.compile"):
        cf(np.zeros(4))
    assert any("(3,)" in r.getMessage() and "(4,)" in r.getMessage() for r in caplog.records)


def test_bad_options():
    with pytest.raises(SymgraphError, match="backend"):
        compile(lambda x: x, backend="cuda")
    with pytest.raises(SymgraphError, match="static and donated"):
        compile(lambda x: x, static_argnums=0, donate_argnums=0)
    cf = compile(lambda x: x, backend="numpy")
    with pytest.raises(SymgraphError, match="not compiled yet"):
        _ = cf.stats
    cf(np.zeros(2))
    with pytest.raises(SymgraphError, match="llvm"):
        cf.llvm_ir()


def test_kwargs_are_dynamic():
    cf = compile(lambda x, *, scale: x * scale, backend="numpy")
    np.testing.assert_array_equal(cf(np.ones(2), scale=3.0), [3.0, 3.0])
    np.testing.assert_array_equal(cf(np.ones(2), scale=4.0), [4.0, 4.0])
    assert cf.signatures == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_signatures_are_told_apart(backend):
    def f(p, x):
        return {"y": sum(v * x for v in p.values()) if isinstance(p, dict) else p[0] * x, "n": x}

    fc, calls = _counting(f)
    cf = compile(fc, backend=backend)
    x = np.arange(3.0)
    r = cf({"a": np.ones(3), "b": np.full(3, 2.0)}, x)
    np.testing.assert_array_equal(r["y"], 3 * x)
    np.testing.assert_array_equal(cf({"a": np.ones(3), "b": np.ones(3)}, x)["y"], 2 * x)
    assert calls["n"] == 1
    # another key set, a list instead of a dict, an extra leaf: new signatures, right values
    np.testing.assert_array_equal(cf({"a": np.ones(3), "c": np.ones(3)}, x)["y"], 2 * x)
    np.testing.assert_array_equal(cf([np.full(3, 5.0)], x)["y"], 5 * x)
    np.testing.assert_array_equal(cf({"a": np.ones(3), "b": np.ones(3), "c": np.ones(3)}, x)["y"], 3 * x)
    assert calls["n"] == 4
    # the first signature still answers from the cache
    np.testing.assert_array_equal(cf({"a": np.ones(3), "b": np.full(3, 2.0)}, x)["y"], 3 * x)
    assert calls["n"] == 4


def test_dump_stages_are_written(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAPH_DUMP", str(tmp_path))
    cf = compile(sg.value_and_grad(lambda x: np.sum(np.tanh(x) ** 2)))
    cf(np.ones(16))
    names = " ".join(p.name for p in tmp_path.iterdir())
    for stage in ("traced", "simplified", "scheduled", "fused", "lowered"):
        assert stage in names, (stage, names)
    assert any(p.suffix == ".ll" for p in tmp_path.iterdir()) and any(p.suffix == ".s" for p in tmp_path.iterdir())


def test_llvm_fast_call_path_is_taken():
    # the generated per-signature caller must accept exactly matching arguments (not fall back every call)
    from symgraph.compile import MISS

    cf = compile(lambda p, x, s: (p["w"] * x + s, x.sum()))
    args = ({"w": np.ones((3, 4))}, np.arange(4.0), 2.0)
    cf(*args)
    fast = cf._last.fast
    assert fast is not None
    for a in (args, ({"w": np.zeros((3, 4))}, np.ones(4), np.float64(1.0)), ({"w": np.ones((3, 4))}, np.ones(4),
                                                                              np.array(3.0))):
        r = fast(a)
        assert r is not MISS
        np.testing.assert_array_equal(r[0], a[0]["w"] * a[1] + float(a[2]))
    # wrong shapes, dtypes, layouts and structures are refused by the fast path (the checked path handles them)
    for bad in (({"w": np.ones((3, 5))}, np.ones(4), 1.0), ({"w": np.ones((3, 4), np.float32)}, np.ones(4), 1.0),
                ({"w": np.ones((4, 3)).T}, np.ones(4), 1.0), ({"v": np.ones((3, 4))}, np.ones(4), 1.0),
                ([np.ones((3, 4))], np.ones(4), 1.0), ({"w": np.ones((3, 4))}, np.ones(4))):
        assert fast(bad) is MISS


# ----- found by the new-user trial (session 3) -----


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_compiling_a_transform_of_a_compiled_function_compiles_the_transform(backend):
    """sg.compile(sg.grad(sg.compile(f))) is the gradient (it returned f(x): functools.update_wrapper copied
    the inner CompiledFunction's fn and caches out of the grad wrapper's __dict__); so is a user's
    functools.wraps wrapper of a compiled function."""
    import functools

    f = lambda x: np.sum(np.tanh(x) ** 3)  # noqa: E731
    x = np.array([0.3, -1.0, 2.0])
    inner = sg.compile(f, backend=backend)
    g = sg.compile(sg.grad(inner), backend=backend)
    np.testing.assert_allclose(g(x), 3 * np.tanh(x) ** 2 * (1 - np.tanh(x) ** 2), rtol=1e-12)
    np.testing.assert_allclose(inner(x), f(x), rtol=1e-15)  # the inner one still computes f
    h = sg.compile(sg.hessian(inner), backend=backend)
    assert h(x).shape == (3, 3)

    @functools.wraps(inner)
    def twice(x):
        return 2 * inner(x)

    np.testing.assert_allclose(sg.compile(twice, backend=backend)(x), 2 * f(x), rtol=1e-15)


def test_donated_outputs_with_products_after_them():
    """A product read after a donated output's kernel (b @ b, tanh(a) @ b) compiled: the donation check compared
    nodes with `in` (Node.__eq__ builds a traced eq) and raised TracerConversionError."""
    A = np.arange(64.0).reshape(8, 8) / 64
    B = np.eye(8) + 0.5
    out = sg.compile(lambda a, b: (a * 2, b @ b), donate_argnums=(0, 1))(A.copy(), B.copy())
    np.testing.assert_allclose(out[0], A * 2)
    np.testing.assert_allclose(out[1], B @ B)
    a = A.copy()
    out = sg.compile(lambda a, b: (np.tanh(a), np.tanh(a) @ b), donate_argnums=(0,))(a, B)
    np.testing.assert_allclose(out[0], np.tanh(A))
    np.testing.assert_allclose(out[1], np.tanh(A) @ B)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_fmax_fmin_ignore_nan_as_numpy(backend):
    a = np.array([1.0, np.nan, np.nan, 3.0, -0.0, np.inf])
    b = np.array([np.nan, 2.0, np.nan, 1.0, 0.0, np.nan])
    for name in ("fmax", "fmin"):
        fn = getattr(np, name)
        got = sg.compile(fn, backend=backend)(a, b)
        np.testing.assert_array_equal(got, fn(a, b))
        got = sg.compile(lambda a, b: fn(a, b), backend=backend)(a.astype(np.float32), b.astype(np.float32))
        np.testing.assert_array_equal(got, fn(a, b).astype(np.float32))
    # the derivative goes to the operand taken
    g = sg.grad(lambda a: np.sum(np.fmax(a, b)))(np.array([1.0, 5.0, 0.0, 3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])


class _Terminal(io.StringIO):
    """A standard error that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _tanh_loss(x):
    return np.sum(np.tanh(x) ** 2)


def test_long_compile_shows_its_stage_on_a_terminal_only(monkeypatch):
    from symgraph import progress

    monkeypatch.delenv("SYMGRAPH_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "DELAY", 0.0)  # every compile counts as long
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    cf = sg.compile(sg.grad(_tanh_loss))
    cf(np.ones(3))
    shown = term.getvalue()
    assert "compile" in shown and "trace" in shown and "LLVM" in shown, shown
    # not a terminal, or switched off: nothing
    for stream, env in ((io.StringIO(), None), (_Terminal(), "0")):
        if env is not None:
            monkeypatch.setenv("SYMGRAPH_PROGRESS", env)
        monkeypatch.setattr(sys, "stderr", stream)
        sg.compile(sg.grad(_tanh_loss))(np.ones(3))
        assert stream.getvalue() == ""
    # a compile shorter than the delay shows nothing either
    monkeypatch.delenv("SYMGRAPH_PROGRESS")
    monkeypatch.setattr(progress, "DELAY", 60.0)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    cf = sg.compile(sg.grad(_tanh_loss), backend="numpy")
    cf(np.ones(3))
    assert term.getvalue() == ""
    # the seconds of every stage, in the order they ran, adding up to the compile's
    st = cf.stats["stage_seconds"]
    assert list(st) == ["trace", "simplify", "checkpoint", "schedule", "backend"]
    assert all(v >= 0 for v in st.values())
    assert abs(sum(st.values()) - cf.stats["compile_seconds"]) < 0.05 + 0.1 * cf.stats["compile_seconds"]
