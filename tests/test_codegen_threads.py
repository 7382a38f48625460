"""Threads in compiled code: gemms split into pieces on the persistent thread pool, loop splits, the pool itself.

- `codegen.llvm.gemm.gemm_pieces` covers C exactly, in aligned blocks, and only for products worth splitting;
- split products (float32/float64, odd sizes, transposed operands, batched,
  accumulated `W - lr * a.T @ d`) equal NumPy, and equal the unsplit call to
  rounding (OpenBLAS picks kernels by shape, so a piece is not always bitwise
  the same as the rows of the whole product: docs/compile.md, "Threads");
- results are bitwise reproducible for a given thread count, whichever
  thread runs which piece (pool or inline, concurrent callers);
- the pool runs pieces on workers, runs everything inline when no worker can
  be started, survives fork, and never hangs (checked in subprocesses with a timeout).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import symgraph as sg

codegen = pytest.importorskip("codegen")
from codegen.llvm import gemm as L
from codegen import cpu as rt

needs_blas = pytest.mark.skipif(rt.blas_library() is None, reason="no BLAS found")
needs_pool = pytest.mark.skipif(rt.thread_pool() is None, reason="no thread pool on this platform")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compiled(f, *args, nthreads: int):
    """An Executable of f's simplified graph compiled for `nthreads` threads."""
    g = sg.simplify(sg.trace(f, *args))
    return codegen.compile_graph(g, nthreads=nthreads)


def run_py(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


# ----- the split plan -----


class _Task:
    """The parts of a `codegen.kernels.tasks.Task` that `gemm_pieces` reads."""

    def __init__(self, a_shape, b_shape):
        self.gemm = {"mm": _Node((_Node(a_shape), _Node(b_shape)))}
        self.node = self.gemm["mm"]


class _Node:
    def __init__(self, shape_or_inputs):
        if isinstance(shape_or_inputs[0], _Node):
            self.inputs = shape_or_inputs
        else:
            self.shape = shape_or_inputs


@pytest.mark.parametrize("a_shape,b_shape,nthreads,axis", [
    ((256, 256), (256, 256), 2, "m"),
    ((64, 256), (256, 256), 2, "n"),      # the larger of m and n is cut
    ((257, 255), (255, 253), 3, "m"),
    ((3, 130, 70), (3, 70, 50), 2, "m"),  # batch 3 over 2 threads: rows across batch elements
    ((4, 2, 64, 40), (4, 2, 40, 300), 2, "n"),
    ((8, 64, 64), (8, 64, 64), 2, "m"),   # whole matrices per piece
])
def test_gemm_pieces_cover_c_exactly(a_shape, b_shape, nthreads, axis):
    *batch, m, _k = a_shape
    n = b_shape[-1]
    ax, ranges = L.gemm_pieces(_Task(a_shape, b_shape), nthreads)
    assert ax == axis
    total = int(np.prod(batch, dtype=np.int64)) * (m if axis == "m" else n)
    assert 2 <= len(ranges) <= max(nthreads, L.GEMM_ATOMS)
    assert ranges[0][0] == 0 and ranges[-1][1] == total
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert all(lo < hi for lo, hi in ranges)
    ext = m if axis == "m" else n
    for lo, _hi in ranges:  # starts fall on tile boundaries or on whole batch elements
        assert lo % L.GEMM_PIECE_ALIGN == 0 or lo % ext == 0


@pytest.mark.parametrize("a_shape,b_shape", [((256, 256), (256, 256)), ((257, 255), (255, 253)),
                                             ((4096, 256), (256, 256)), ((1, 390, 70), (1, 70, 50)),
                                             ((64, 256), (256, 4096))])
def test_gemm_pieces_inside_matrices_do_not_depend_on_threads(a_shape, b_shape):
    """OpenBLAS is not bitwise the same on a block of rows as on the whole: the calls must not depend on threads."""
    pieces = [L.gemm_pieces(_Task(a_shape, b_shape), t) for t in (1, 2, 3, 8, 64)]
    assert pieces[0] is not None and all(p == pieces[0] for p in pieces)
    _ax, ranges = pieces[0]
    assert all(hi - lo >= L.GEMM_ATOM_MIN for lo, hi in ranges[:-1])


def test_gemm_pieces_only_for_large_products():
    assert L.gemm_pieces(_Task((8, 256, 256), (8, 256, 256)), 1) is None  # a large batch on one thread: per matrix
    assert L.gemm_pieces(_Task((16, 16), (16, 16)), 2) is None      # 8 kflops: not worth a job
    assert L.gemm_pieces(_Task((10, 3000), (3000, 10)), 2) is None  # no room for two 16-row pieces
    assert L.gemm_pieces(_Task((256, 0), (0, 256)), 2) is None      # k = 0: zero-fill, not BLAS
    assert L.gemm_pieces(_Task((256, 256), (256, 256)), 2) is not None


# ----- split products equal the unsplit ones -----


def _products(dt):
    rng = np.random.default_rng(5)

    def r(*shape):
        return rng.standard_normal(shape).astype(dt)

    return [
        ("square", lambda a, b: a @ b, (r(256, 256), r(256, 256))),
        ("odd", lambda a, b: a @ b, (r(257, 131), r(131, 253))),
        ("wide", lambda a, b: a @ b, (r(40, 300), r(300, 515))),
        ("a.T", lambda a, b: a.T @ b, (r(131, 257), r(131, 253))),
        ("b.T", lambda a, b: a @ b.T, (r(257, 131), r(253, 131))),
        ("both.T", lambda a, b: a.T @ b.T, (r(131, 200), r(190, 131))),
        ("batched", lambda a, b: a @ b, (r(3, 130, 70), r(3, 70, 150))),
        ("batched-bT", lambda a, b: a @ np.swapaxes(b, -1, -2), (r(2, 5, 64, 40), r(2, 5, 300, 40))),
        ("accumulate", lambda w, a, d: w - 0.1 * (a.T @ d), (r(256, 256), r(200, 256), r(200, 256))),
        ("epilogue", lambda a, b: np.tanh(a @ b + 1.0), (r(200, 177), r(177, 190))),
    ]


@needs_blas
@needs_pool
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_split_gemm_matches_unsplit_and_numpy(dt):
    tol = 2e-5 if dt == np.float32 else 1e-12
    for name, f, args in _products(dt):
        e1 = compiled(f, *args, nthreads=1)
        e2 = compiled(f, *args, nthreads=2)
        e3 = compiled(f, *args, nthreads=3)
        assert e1.stats["parallel_kernels"] == 0, name
        assert e2.stats["parallel_kernels"] >= 1 and e3.stats["parallel_kernels"] >= 1, name
        want = f(*(a.astype(np.float64) for a in args))
        r1 = e1.run(list(args))[0]
        scale = np.abs(want).max()
        for e in (e2, e3):
            got = e.run(list(args))[0]
            assert got.dtype == dt, name
            assert np.abs(got.astype(np.float64) - want).max() <= tol * scale, name
            # against the unsplit call: the same sums, possibly other BLAS kernels (rounding only)
            assert np.abs(got.astype(np.float64) - r1).max() <= tol * scale, name
            np.testing.assert_array_equal(got, e.run(list(args))[0], err_msg=name)  # reproducible


@needs_blas
@needs_pool
def test_split_results_do_not_depend_on_which_thread_runs_a_piece():
    """Concurrent callers find the pool busy and run their pieces inline: bitwise the same results."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 260))

    def f(a, b):
        return np.tanh(a @ b) @ b.T

    e = compiled(f, a, b, nthreads=2)
    assert e.stats["parallel_kernels"] >= 2
    want = e.run([a, b])[0]
    before = rt.pool_stats()
    errors: list = []

    def work():
        try:
            for _ in range(30):
                np.testing.assert_array_equal(e.run([a, b])[0], want)
        except Exception as ex:  # noqa: BLE001
            errors.append(ex)

    ths = [threading.Thread(target=work) for _ in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ths), "a compiled call hung"
    assert not errors, errors[0]
    after = rt.pool_stats()
    assert after["jobs"] + after["inline_jobs"] >= before["jobs"] + before["inline_jobs"] + 4 * 30 * 2


@needs_blas
@needs_pool
def test_one_thread_never_splits(monkeypatch):
    """SYMGRAPH_NUM_THREADS=1 (bench --threads 1) pins every kernel to the calling thread."""
    from symgraph.compile import compile

    monkeypatch.setenv("SYMGRAPH_NUM_THREADS", "1")
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    cf = compile(lambda a, b: np.tanh(a @ b) @ b)
    np.testing.assert_allclose(cf(a, b), np.tanh(a @ b) @ b, rtol=1e-10, atol=1e-10)
    assert cf.stats["threads"] == 1 and cf.stats["parallel_kernels"] == 0


@needs_blas
@needs_pool
def test_blas_threads_setting_disables_gemm_pieces(monkeypatch):
    """SYMGRAPH_BLAS_THREADS=2 lets OpenBLAS split products itself; pieces on top would oversubscribe."""
    monkeypatch.setenv("SYMGRAPH_BLAS_THREADS", "2")
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    e = compiled(lambda a, b: a @ b, a, b, nthreads=2)
    assert e.stats["parallel_kernels"] == 0 and e.stats["blas_threads"] == 2
    np.testing.assert_allclose(e.run([a, b])[0], a @ b, rtol=1e-10, atol=1e-10)


@needs_blas
@needs_pool
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_independent_products_of_a_layer_run_side_by_side(dt):
    """A dense layer's input gradient g @ W.T and weight gradient x.T @ g (fused into the update) become one
    concurrent kernel with 2 threads; values equal NumPy and the 1-thread program to rounding, and are
    bitwise reproducible; with donated (in-place) parameters too. Thin products (k = 10) are not paired."""
    from codegen.kernels import partition as fuse
    from symgraph.passes.schedule import schedule

    rng = np.random.default_rng(12)
    x, w1, w2 = (rng.standard_normal(s).astype(dt) for s in ((128, 96), (96, 160), (160, 64)))

    def step(w1, w2, x):
        def loss(w1, w2):
            return np.sum(np.tanh(np.tanh(x @ w1) @ w2) ** 2)
        g1, g2 = sg.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    def ref(w1, w2, x):
        h1 = np.tanh(x @ w1)
        h2 = np.tanh(h1 @ w2)
        d2 = 2 * h2 * (1 - h2 * h2)
        d1 = (d2 @ w2.T) * (1 - h1 * h1)
        return w1 - 0.1 * (x.T @ d1), w2 - 0.1 * (h1.T @ d2)

    tol = 2e-4 if dt == np.float32 else 1e-11
    want = ref(*(a.astype(np.float64) for a in (w1, w2, x)))
    e1 = compiled(step, w1, w2, x, nthreads=1)
    e2 = compiled(step, w1, w2, x, nthreads=2)
    assert e2.stats["concurrent_gemms"] == 1 and e1.stats["concurrent_gemms"] == 0
    r1, r2 = e1.run([w1, w2, x]), e2.run([w1, w2, x])
    for got, one, w in zip(r2, r1, want):
        scale = np.abs(w).max()
        assert np.abs(got.astype(np.float64) - w).max() <= tol * scale
        assert np.abs(got.astype(np.float64) - one).max() <= tol * scale
    for a, b in zip(r2, e2.run([w1, w2, x])):
        np.testing.assert_array_equal(a, b)
    # the pair is one step of the buffer plan, and what the moved product reads is computed before it
    g = sg.simplify(sg.trace(step, w1, w2, x))
    prog = fuse.partition(g, schedule(g), blas=True)
    pairs = [ki for ki, k in enumerate(prog.kernels) if k.concurrent]
    assert len(pairs) == 1 and all(t.kind == "gemm" for t in prog.kernels[pairs[0]].tasks)
    for t in prog.kernels[pairs[0]].tasks:
        for m in (t.gemm["a"]["base"], t.gemm["b"]["base"]):
            assert prog.producer.get(m, -1) < pairs[0]
    # a thin product is not paired
    x10 = rng.standard_normal((128, 10)).astype(dt)
    thin = compiled(lambda w, x: sg.grad(lambda w: np.sum(np.tanh(x @ w)))(w), w1[:10, :], x10, nthreads=2)
    assert thin.stats["concurrent_gemms"] == 0
    # donated parameters: the in-place updates run after every product that reads them, the pair still forms
    donated = codegen.compile_graph(g, nthreads=2, donate=frozenset({0, 1}))
    assert donated.stats["concurrent_gemms"] == 1 and donated.stats["donated_outputs"] == 2
    w1c, w2c = w1.copy(), w2.copy()
    out = donated.run([w1c, w2c, x])
    assert out[0] is w1c and out[1] is w2c
    for got, w in zip(out, r2):
        np.testing.assert_allclose(got, w, rtol=tol, atol=tol * np.abs(w).max())


# ----- loop kernels on the pool -----


@needs_pool
def test_mid_size_loop_kernels_split_on_the_pool():
    x = np.random.default_rng(9).normal(size=(256, 256)).astype(np.float32)

    def f(x):
        return np.tanh(x) * 2.0, np.sum(np.exp(-x * x))

    e1, e2 = compiled(f, x, nthreads=1), compiled(f, x, nthreads=2)
    assert e2.stats["parallel_kernels"] >= 1 and e1.stats["parallel_kernels"] == 0
    (t1, s1), (t2, s2) = e1.run([x]), e2.run([x])
    np.testing.assert_array_equal(t1, t2)  # elementwise: same code per element
    np.testing.assert_allclose(s2, s1, rtol=1e-5)  # partial sums combined in a fixed order
    np.testing.assert_array_equal(e2.run([x])[1], s2)
    np.testing.assert_allclose(t2, np.tanh(x) * 2.0, rtol=1e-6, atol=1e-6)


@needs_pool
@pytest.mark.parametrize("shape,axes,dt", [((256, 256), (0,), np.float32), ((300, 200), (0,), np.float64),
                                           ((8, 64, 96), (0, 1), np.float32), ((521, 130), (0,), np.float32)])
def test_column_sums_split_over_rows_with_partial_vectors(shape, axes, dt):
    """Kept-axis reductions (bias gradients) split over the reduced rows; the threads' partial vectors are combined."""
    from codegen.llvm import module as P

    rng = np.random.default_rng(11)
    x, y = rng.normal(size=shape).astype(dt), rng.normal(size=shape).astype(dt)

    def f(x, y):
        d = x * (1.0 - y * y)
        return d, np.sum(d, axis=axes), np.max(d, axis=axes)

    e1, e2 = compiled(f, x, y, nthreads=1), compiled(f, x, y, nthreads=2)
    assert e1.stats["parallel_kernels"] == 0 and e2.stats["parallel_kernels"] == 1
    d_ref = x * (1.0 - y * y)
    (d1, s1, m1), (d2, s2, m2) = e1.run([x, y]), e2.run([x, y])
    np.testing.assert_array_equal(d2, d1)  # elementwise part: each thread its rows
    np.testing.assert_array_equal(m2, m1)  # max does not depend on the order
    np.testing.assert_array_equal(m2, d_ref.max(axis=axes))
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(s2, d_ref.astype(np.float64).sum(axis=axes), rtol=tol, atol=tol * shape[0])
    np.testing.assert_allclose(s2, s1, rtol=tol, atol=tol * shape[0])
    for _ in range(3):  # partials combined in a fixed order: bitwise reproducible
        np.testing.assert_array_equal(e2.run([x, y])[1], s2)
    # too many columns for the partial vectors' stack budget: not split, still right
    wide = rng.normal(size=(64, P.ROW_PARTIALS_MAX_BYTES // 8)).astype(np.float32)
    ew = compiled(lambda w: np.sum(w * w, axis=0), wide, nthreads=2)
    assert ew.stats["parallel_kernels"] == 0
    np.testing.assert_allclose(ew.run([wide])[0], (wide.astype(np.float64) ** 2).sum(0), rtol=1e-5)


# ----- the pool -----


@needs_pool
def test_pool_runs_pieces_on_workers():
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((512, 512)), rng.standard_normal((512, 512))
    e = compiled(lambda a, b: a @ b, a, b, nthreads=2)
    before = rt.pool_stats()
    # Each call takes milliseconds, so a woken worker claims pieces of some of them. On a loaded
    # machine the busy-machine safeguards may send runs of calls inline: end such a run and try
    # again, for at most 50 rounds of 20 calls.
    for _ in range(50):
        rt.set_pool_limits(reset_backoff=True)
        for _ in range(20):
            np.testing.assert_allclose(e.run([a, b])[0], a @ b, rtol=1e-10, atol=1e-10)
        after = rt.pool_stats()
        if after["worker_pieces"] > before["worker_pieces"]:
            break
    assert after["workers"] >= 1 and after["create_failed"] == 0
    assert after["jobs"] + after["inline_jobs"] >= before["jobs"] + before["inline_jobs"] + 20
    assert after["worker_pieces"] > before["worker_pieces"]


@needs_pool
def test_no_worker_threads_means_inline_and_correct():
    """pthread_create fails (address space too small for a thread stack): every call runs inline."""
    r = run_py("""
        import resource, numpy as np, symgraph as sg, codegen
        from codegen import cpu as rt
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
        e = codegen.compile_graph(sg.simplify(sg.trace(lambda a, b: np.tanh(a @ b) @ b, a, b)), nthreads=2)
        assert e.stats["parallel_kernels"] >= 2
        want = np.tanh(a @ b) @ b
        out = np.empty_like(want)
        vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (vm + (4 << 20), resource.RLIM_INFINITY))
        res = [e.run([a, b])[0] for _ in range(3)]
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        st = rt.pool_stats()
        assert st["create_failed"] == 1 and st["workers"] == 0, st
        assert st["inline_jobs"] >= 6 and st["jobs"] == 0, st
        for x in res:
            np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-10)
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


@needs_pool
def test_worker_cap_zero_runs_inline():
    r = run_py("""
        import numpy as np, symgraph as sg, codegen
        from codegen import cpu as rt
        rt.set_pool_limits(max_workers=0)
        x = np.random.default_rng(1).normal(size=(512, 512))
        e = codegen.compile_graph(sg.simplify(sg.trace(lambda x: np.tanh(x) @ x, x)), nthreads=4)
        np.testing.assert_allclose(e.run([x])[0], np.tanh(x) @ x, rtol=1e-10, atol=1e-10)
        st = rt.pool_stats()
        assert st["workers"] == 0 and st["jobs"] == 0 and st["inline_jobs"] >= 1, st
        rt.set_pool_limits(max_workers=3)
        np.testing.assert_allclose(e.run([x])[0], np.tanh(x) @ x, rtol=1e-10, atol=1e-10)
        st = rt.pool_stats()
        assert st["workers"] == 3 and st["jobs"] >= 1, st
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


@needs_pool
def test_pool_survives_fork_and_exits_cleanly():
    r = run_py("""
        import os, numpy as np, symgraph as sg, codegen
        from codegen import cpu as rt
        x = np.random.default_rng(2).normal(size=(384, 384))
        e = codegen.compile_graph(sg.simplify(sg.trace(lambda x: x @ x.T, x)), nthreads=2)
        want = x @ x.T
        np.testing.assert_allclose(e.run([x])[0], want, rtol=1e-10, atol=1e-10)
        assert rt.pool_stats()["workers"] == 1
        pid = os.fork()
        if pid == 0:
            ok = all(np.allclose(e.run([x])[0], want, rtol=1e-10, atol=1e-10) for _ in range(20))
            st = rt.pool_stats()
            os._exit(0 if ok and st["workers"] == 1 else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        np.testing.assert_allclose(e.run([x])[0], want, rtol=1e-10, atol=1e-10)
        print("ok")
    """, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


@needs_pool
def test_pool_directly_many_small_jobs_no_hang():
    """Thousands of jobs of 0..9 pieces from 3 threads at once, on 1..4 threads: all pieces run once."""
    r = run_py("""
        import ctypes, threading, numpy as np
        from codegen import cpu as rt
        from codegen.jit import compile_ir
        assert rt.thread_pool() == "symgraph_pool_run"
        text = '''
        declare void @symgraph_pool_run(ptr, ptr, i64, i64, i32)
        define ptr @piece(ptr %c) {
          %out = load ptr, ptr %c
          %p = getelementptr i64, ptr %c, i64 1
          %i = load i64, ptr %p
          %dst = getelementptr i64, ptr %out, i64 %i
          %v = load i64, ptr %dst
          %v1 = add i64 %v, 1
          store i64 %v1, ptr %dst
          ret ptr null
        }
        define void @drive(ptr %ctx, i64 %n, i32 %t) {
          call void @symgraph_pool_run(ptr @piece, ptr %ctx, i64 16, i64 %n, i32 %t)
          ret void
        }
        '''
        j = compile_ir(text, entry="drive")
        drive = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32)(j.address)
        errors = []
        def work(seed):
            rng = np.random.default_rng(seed)
            for _ in range(1500):
                n, t = int(rng.integers(0, 10)), int(rng.integers(1, 5))
                out = np.zeros(max(n, 1), np.int64)
                ctx = np.zeros((max(n, 1), 2), np.int64)
                ctx[:, 0] = out.ctypes.data
                ctx[:, 1] = np.arange(max(n, 1))
                drive(ctx.ctypes.data, n, t)
                if not np.array_equal(out[:n], np.ones(n, np.int64)):
                    errors.append((n, t, out))
        ths = [threading.Thread(target=work, args=(s,)) for s in range(3)]
        [x.start() for x in ths]
        [x.join() for x in ths]
        assert not errors, errors[:3]
        st = rt.pool_stats()
        assert st["jobs"] > 0 and st["workers"] >= 1, st
        print("ok", st)
    """, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
