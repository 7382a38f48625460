"""Concurrency: tracing is thread-local, the compile cache is thread-safe, compiled code is re-entrant.

- 8 threads trace, differentiate and simplify different functions at once:
  each graph is its own (no node of one thread's trace leaks into another's)
  and evaluates to the right values;
- 8 threads call one compiled function with a new signature at the same
  moment: it is traced and compiled once per signature, and every caller
  gets the right result;
- a compiled function (LLVM) called from 8 threads at once, many times, on
  different arguments, gives correct results (the arena pool and the
  argument/output handling are per call);
- 8 threads compile different functions at once (the LLVM JIT is shared).

`sys.setswitchinterval` is lowered while the threads run, so that Python
switches threads every few bytecodes and races show up quickly.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import symgraph as sg

compile_fn = getattr(sg, "compile", None)
if not callable(compile_fn):
    from symgraph.compile import compile as compile_fn

N_THREADS = 8


@contextlib.contextmanager
def frequent_switches(interval: float = 1e-6):
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(fn, n=N_THREADS):
    """Run fn(i) in n threads released together by a barrier; return the results (re-raising errors)."""
    barrier = threading.Barrier(n)

    def body(i):
        barrier.wait()
        return fn(i)

    with ThreadPoolExecutor(n) as ex:
        futs = [ex.submit(body, i) for i in range(n)]
        return [f.result() for f in futs]


def _fn(i):
    """A different function per thread (its constant and structure depend on i)."""
    c = float(i + 1)

    def f(x):
        y = np.tanh(x * c) + np.sin(x) ** (i % 3 + 1)
        for _ in range(i % 4):
            y = y * np.exp(-x) + c
        return np.sum(y * y)

    return f


def _ref(i, x):
    return _fn(i)(x)  # the function itself runs on NumPy arrays


def test_tracing_is_thread_local():
    x = np.linspace(-1, 1, 7)

    def work(i):
        out = []
        for k in range(20):
            f = _fn(i)
            g = sg.trace(f, x + k)
            nodes = set(g.toposort())
            # every input the graph reads is one of its own inputs
            assert all(n in set(g.inputs) for n in nodes if n.op.name == "input")
            np.testing.assert_allclose(g.evaluate(x + k), _ref(i, x + k), rtol=1e-12)
            out.append(len(g))
        return out

    with frequent_switches():
        sizes = run_threads(work)
    for i, s in enumerate(sizes):  # the graph of function i does not depend on what other threads traced
        assert len(set(s)) == 1, (i, s)


def test_transformations_in_threads():
    x = np.array([0.3, -1.2, 2.0, 0.7])

    def work(i):
        f = _fn(i)
        for _ in range(5):
            gr = sg.grad(f)(x)
            h = sg.hvp(f, (x,), (np.ones_like(x),))
            eps = 1e-6
            fd = np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])
            np.testing.assert_allclose(gr, fd, rtol=1e-5, atol=1e-6)
            gfd = (sg.grad(f)(x + eps) - sg.grad(f)(x - eps)) / (2 * eps)
            np.testing.assert_allclose(h, gfd, rtol=1e-4, atol=1e-5)
            s = sg.simplify(sg.trace(sg.grad(f), x))
            np.testing.assert_allclose(s.evaluate(x), gr, rtol=1e-12)
        return True

    with frequent_switches():
        assert all(run_threads(work))


def test_config_is_thread_local():
    seen = []

    def work(i):
        sg.config.simplify = bool(i % 2)
        threading.Event().wait(0.01)
        seen.append((i, sg.config.simplify))
        return sg.config.simplify

    vals = run_threads(work)
    assert vals == [bool(i % 2) for i in range(N_THREADS)]
    assert sg.config.simplify is True  # the main thread's switch is untouched


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_compile_cache_is_thread_safe(backend):
    traces = []
    lock = threading.Lock()

    def f(x):
        with lock:
            traces.append(x.shape)
        return np.tanh(x) * 2.0 + np.sum(x)

    cf = compile_fn(f, backend=backend)
    shapes = [(3,), (4,), (3,), (5, 2), (4,), (3,), (5, 2), (6,)]

    def work(i):
        x = np.linspace(-1, 1, int(np.prod(shapes[i]))).reshape(shapes[i]) + i
        r = cf(x)
        np.testing.assert_allclose(r, np.tanh(x) * 2.0 + np.sum(x), rtol=1e-12)
        return r.shape

    with frequent_switches():
        assert run_threads(work) == shapes
    distinct = set(shapes)
    assert cf.signatures == len(distinct)
    assert sorted(traces) == sorted(distinct), traces  # each signature traced exactly once


def test_same_signature_from_many_threads_compiles_once():
    count = []

    def f(x, y):
        count.append(1)
        return np.exp(-x) @ y

    cf = compile_fn(f)
    x, y = np.random.default_rng(0).standard_normal((2, 5, 5))

    def work(i):
        return cf(x, y + i)

    with frequent_switches():
        res = run_threads(work)
    assert len(count) == 1
    for i, r in enumerate(res):
        np.testing.assert_allclose(r, np.exp(-x) @ (y + i), rtol=1e-12)


def test_compiled_function_from_8_threads():
    """One compiled value_and_grad (LLVM) hammered by 8 threads with different arguments."""

    def loss(w, x):
        h = np.tanh(x @ w)
        return np.sum(h * h) + 0.1 * np.sum(w * w)

    step = compile_fn(sg.value_and_grad(loss))
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((6, 4))
    xs = [rng.standard_normal((16, 6)) for _ in range(N_THREADS)]
    step(w0, xs[0])  # compile once

    def ref(w, x):
        h = np.tanh(x @ w)
        g = x.T @ (2 * h * (1 - h * h)) + 0.2 * w
        return np.sum(h * h) + 0.1 * np.sum(w * w), g

    def work(i):
        r = np.random.default_rng(100 + i)
        for _ in range(300):
            w = w0 + 0.1 * r.standard_normal(w0.shape)
            v, g = step(w, xs[i])
            v0, g0 = ref(w, xs[i])
            assert abs(float(v) - v0) <= 1e-10 * max(1.0, abs(v0))
            np.testing.assert_allclose(g, g0, rtol=1e-10, atol=1e-12)
        return True

    with frequent_switches():
        assert all(run_threads(work))


def test_compiled_calls_with_arena_under_contention():
    """Many short calls of a function with a planned arena (intermediates) from 8 threads."""

    def f(x):
        a = np.exp(x) @ x.T
        b = np.tanh(a) @ x
        return np.sum(b * b, axis=0) + np.max(a)

    cf = compile_fn(f)
    x0 = np.random.default_rng(2).standard_normal((12, 7))
    cf(x0)

    def work(i):
        for k in range(1500):
            x = x0 + (i * 1500 + k) * 1e-6
            np.testing.assert_allclose(cf(x), f(x), rtol=1e-9)
        return True

    with frequent_switches(1e-7):
        assert all(run_threads(work))


def test_compiling_different_functions_concurrently():
    def work(i):
        c = float(i)
        cf = compile_fn(lambda x: np.sin(x * (c + 1.0)) + c)
        x = np.linspace(0, 1, 33)
        np.testing.assert_allclose(cf(x), np.sin(x * (c + 1.0)) + c, rtol=1e-12)
        g = compile_fn(sg.grad(lambda x: np.sum(np.cos(x) * c)))
        np.testing.assert_allclose(g(x), -np.sin(x) * c, rtol=1e-12, atol=1e-15)
        return True

    assert all(run_threads(work))


def test_regression_arena_pool_check_then_pop_race():
    """codegen.cpu.executable.Executable._call and the generated fast path took an arena with
    `pool.pop() if pool else new()`: two threads could both see one pooled arena and the
    second pop raised IndexError. They now pop first and allocate on IndexError (list.pop and
    list.append are atomic under the GIL and in free-threaded CPython). Widen the old window
    (a slow emptiness check, a late refill) and call both paths from 8 threads."""
    import time

    def f(x):
        a = np.exp(x) @ x.T
        return np.sum(np.tanh(a) @ x, axis=0)

    cf = compile_fn(f)
    x = np.random.default_rng(3).standard_normal((12, 7))
    cf(x)
    exe = cf._current().exe
    if not getattr(exe, "arena_bytes", 0):
        pytest.skip("no arena planned for this function")

    class SlowTruth(list):
        """A pool whose emptiness check is slow in odd threads and whose refill is late:
        the schedule of a long native call (GIL released) racing a short one."""

        def __bool__(self):
            n = len(self)
            if threading.get_ident() % 2 or threading.current_thread().name.endswith(("1", "3", "5", "7")):
                time.sleep(0.002)  # another thread pops between this check and our pop
            return n > 0

        def append(self, a):
            time.sleep(0.005)
            list.append(self, a)

    exe._pool = SlowTruth([exe._arena()])
    sig = cf._current()
    if exe.fast is not None:  # the fast path binds the pool when it is generated: regenerate it
        exe.fast = sig.fast = exe._make_fast()
    xs = np.asfortranarray(x)  # not C-contiguous: the checked path (Executable.run -> _call)

    def work(i):
        for _ in range(5):
            np.testing.assert_allclose(cf(xs), f(x), rtol=1e-10)
            np.testing.assert_allclose(cf(x), f(x), rtol=1e-10)  # C-contiguous: the generated fast path
        return True

    assert all(run_threads(work))
