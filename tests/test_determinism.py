"""Same bits every time: compiled results do not depend on threads, the pool, checkpointing or the run.

A compiled function must return the same bits for SYMGRAPH_NUM_THREADS = 1,
2, 3 and 8, whether the pool's workers or the calling thread run the pieces,
under every checkpoint strategy, and call after call (docs/compile.md,
"Determinism"). The workloads are the ones where that once failed: large full
reductions (per-thread partial sums), column sums (per-thread partial
vectors), products cut into row blocks (OpenBLAS is not bitwise the same on a
block of rows as on the whole product for every shape), and the checkpointed
chains and training steps of test_checkpoint.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp

codegen = pytest.importorskip("codegen")
from codegen import cpu as rt  # noqa: E402

THREADS = (1, 2, 3, 8)


def leaves_equal(a, b) -> bool:
    la, lb = sg.tree_leaves(a), sg.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))


def per_thread_count(f, args, threads=THREADS):
    """f's simplified graph compiled for each thread count: {threads: (outputs, stats)}."""
    g = sg.simplify(sg.trace(f, *args))
    leaves = sg.tree_leaves(args)
    out = {}
    for t in threads:
        exe = codegen.compile_graph(g, nthreads=t)
        out[t] = (exe.run(leaves), exe.stats)
    return out


def _rng(seed=0):
    return np.random.default_rng(seed)


def _w1(x):
    return np.sum(np.tanh(x) * np.sin(x) + 0.5 * np.exp(-x * x))


def _bias_grad(W, b, x):
    return np.sum(np.tanh(x @ W + b) ** 2)


def _row_sums(x):
    return np.sum(np.sum(np.cos(x), axis=1) ** 2)


def _mean_var(x):
    return np.mean(x) + np.var(x) + np.std(x * 3.0)


def _prod(x):
    return np.prod(1.0 + 1e-6 * np.sin(x))


CASES = [
    ("w1 value and grad f32", sg.value_and_grad(_w1), lambda: (_rng(1).standard_normal(1 << 20).astype(np.float32),)),
    ("w1 value and grad f64", sg.value_and_grad(_w1), lambda: (_rng(2).standard_normal(300_001),)),
    ("bias gradient (column sums) f32", sg.grad(_bias_grad, argnums=(0, 1)),
     lambda: ((_rng(3).standard_normal((64, 48)) / 8).astype(np.float32),
              _rng(4).standard_normal(48).astype(np.float32),
              _rng(5).standard_normal((4096, 64)).astype(np.float32))),
    ("row sums f64", sg.grad(_row_sums), lambda: (_rng(6).standard_normal((1000, 300)),)),
    ("mean, var, std f32", sg.value_and_grad(_mean_var), lambda: (_rng(7).standard_normal((512, 300)).astype(np.float32),)),
    ("prod f64", sg.value_and_grad(_prod), lambda: (_rng(8).standard_normal(200_000),)),
    ("odd gemm f32", lambda a, b: a @ b, lambda: (_rng(9).standard_normal((300, 77)).astype(np.float32),
                                                  _rng(10).standard_normal((77, 129)).astype(np.float32))),
    ("odd gemm f64", lambda a, b: np.tanh(a @ b).sum(axis=0), lambda: (_rng(11).standard_normal((1000, 333)),
                                                                       _rng(12).standard_normal((333, 45)))),
    ("batched gemm f32", lambda a, b: a @ b, lambda: (_rng(13).standard_normal((3, 130, 77)).astype(np.float32),
                                                      _rng(14).standard_normal((3, 77, 50)).astype(np.float32))),
]


@pytest.mark.parametrize("name,f,make", CASES, ids=[c[0] for c in CASES])
def test_compiled_results_do_not_depend_on_thread_count(name, f, make):
    args = make()
    res = per_thread_count(f, args)
    ref = res[1][0]
    for t in THREADS[1:]:
        assert leaves_equal(res[t][0], ref), (name, t)
    assert res[1][1]["parallel_kernels"] == 0
    # the split does happen with threads (else the test would prove nothing)
    if rt.thread_pool() is not None:
        assert res[2][1]["parallel_kernels"] >= 1, name
    # and the values are right
    want = f(*args)
    for got, w in zip(sg.tree_leaves(ref), sg.tree_leaves(want)):
        np.testing.assert_allclose(got, w, rtol=2e-4 if got.dtype == np.float32 else 1e-9,
                                   atol=1e-4 if got.dtype == np.float32 else 1e-9)


@pytest.mark.skipif(rt.thread_pool() is None, reason="no thread pool on this platform")
def test_pool_workers_or_inline_give_the_same_bits():
    """A loaded machine makes the pool run pieces on the calling thread: same pieces, same bits."""
    x = _rng(20).standard_normal(1 << 20).astype(np.float32)
    g = sg.simplify(sg.trace(sg.value_and_grad(_w1), x))
    exe = codegen.compile_graph(g, nthreads=2)
    ref = exe.run([x])
    try:
        rt.set_pool_limits(max_workers=0)
        inline = exe.run([x])
    finally:
        rt.set_pool_limits(max_workers=rt.POOL_MAX_WORKERS, reset_backoff=True)
    assert leaves_equal(inline, ref)
    for _ in range(5):
        assert leaves_equal(exe.run([x]), ref)


def _mlp_loss(Ws, bs, x):
    for W, b in zip(Ws, bs):
        x = np.tanh(x @ W + b)
    return np.sum(x * x)


def _mlp_data(L, w, batch, seed):
    rng = _rng(seed)
    Ws = [(rng.standard_normal((w, w)) / np.sqrt(w)).astype(np.float32) for _ in range(L)]
    bs = [(0.1 * rng.standard_normal(w)).astype(np.float32) for _ in range(L)]
    return Ws, bs, rng.standard_normal((batch, w)).astype(np.float32)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_checkpointed_chain_same_bits_under_every_thread_count(monkeypatch, threads):
    """The wide chain of test_checkpoint (elementwise kernels and the loss reduction on threads): one
    reference built on one thread, equal to every strategy built for 1, 2 and 3 threads."""
    Ws, bs, x = _mlp_data(6, 128, 512, seed=3)
    monkeypatch.setenv("SYMGRAPH_NUM_THREADS", "1")
    ref = sg.compile(sg.grad(_mlp_loss))(Ws, bs, x)
    monkeypatch.setenv("SYMGRAPH_NUM_THREADS", threads)
    for strategy in (None, "sqrt", "revolve", ("revolve", 2)):
        cf = sg.compile(sg.grad(_mlp_loss), checkpoint=strategy)
        assert leaves_equal(cf(Ws, bs, x), ref), (threads, strategy)
        assert cf.stats["threads"] == int(threads)


def test_training_step_same_bits_under_every_thread_count(monkeypatch):
    """A compiled, donated AdamW step of an 8-layer cross-entropy MLP (test_checkpoint's has 16: half the
    compile time, the same kernels per layer), built for 1, 2, 3 and 8 threads with and without checkpointing:
    every build gives the same parameters, state and loss, and the threaded builds do split kernels."""
    import copy

    from symgraph import nn, optim

    rng = _rng(0)
    params = nn.init_mlp(rng, [32] + [64] * 8 + [10])
    opt = optim.adamw(1e-3, weight_decay=1e-4)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = rng.integers(0, 10, 256)

    def step(p, s, x, y):
        loss, g = sg.value_and_grad(lambda p: snp.cross_entropy(nn.mlp(p, x, activation=snp.tanh), y))(p)
        p, s = opt.update(g, s, p)
        return p, s, loss

    ref = None
    for threads, strategy in [("1", None), ("2", None), ("2", "sqrt"), ("3", "revolve"), ("8", "sqrt")]:
        monkeypatch.setenv("SYMGRAPH_NUM_THREADS", threads)
        cf = sg.compile(step, checkpoint=strategy, donate_argnums=(0, 1))
        out = cf(copy.deepcopy(params), opt.init(params), x, y)
        out = cf(*out[:2], x, y)  # a second step from the first one's state
        assert (cf.stats["parallel_kernels"] >= 1) == (threads != "1" and rt.thread_pool() is not None), threads
        if ref is None:
            ref = out
        assert leaves_equal(out, ref), (threads, strategy)


# ----- the association of a compiled sum is the documented one -----


def _lane_sum(x: np.ndarray, lanes: int | None = None) -> np.float64:
    """Element j to lane j mod lanes, each lane in order, lanes combined by a pairwise tree (float64)."""
    from codegen.llvm import reduce as lower

    lanes = lanes or lower.REDUCTION_LANES
    acc = [np.float64(0.0)] * lanes
    for j, v in enumerate(x.astype(np.float64)):
        acc[j % lanes] = acc[j % lanes] + v
    while len(acc) > 1:
        acc = [acc[i] + acc[i + 1] for i in range(0, len(acc), 2)]
    return acc[0]


def _chunked_lane_sum(x: np.ndarray, lanes: int, chunks: int) -> np.float64:
    step = -(-(-(-x.size // chunks)) // lanes) * lanes
    total = None
    for lo in range(0, x.size, step):
        part = _lane_sum(x[lo:lo + step], lanes)
        total = part if total is None else total + part
    return total


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 4099])
def test_a_small_sum_is_lanes_then_a_pairwise_tree(n):
    x = _rng(n).standard_normal(n) * 10.0 ** _rng(n + 1).integers(-8, 8, n)  # rounding-sensitive magnitudes
    got = sg.compile(lambda x: np.sum(x))(x)
    assert got == _lane_sum(x), (got, _lane_sum(x), np.sum(x))


@pytest.mark.parametrize("n", [40_000, 100_003])
def test_a_large_sum_is_chunks_of_lanes_added_in_chunk_order(n):
    from codegen.llvm import module as program
    from codegen.llvm import reduce as lower

    x = _rng(n).standard_normal(n) * 10.0 ** _rng(n + 1).integers(-8, 8, n)
    want = _chunked_lane_sum(x, lower.REDUCTION_LANES, program.REDUCTION_CHUNKS)
    for t in THREADS:
        g = sg.simplify(sg.trace(lambda x: np.sum(x), x))
        assert codegen.compile_graph(g, nthreads=t).run([x])[0] == want, t


def test_row_sums_do_not_depend_on_what_is_fused_with_them():
    """sum(x*x, axis=1) alone, next to a column sum of x.T, and inside a larger expression: the same bits."""
    x = _rng(30).standard_normal((300, 100)).astype(np.float32) * 1e3
    alone = sg.compile(lambda x: np.sum(x * x, axis=1))(x)
    with_other, _ = sg.compile(lambda x: (np.sum(x * x, axis=1), np.sum(x.T * 2.0, axis=0)))(x)
    summed, _ = sg.compile(lambda x: (np.sum(x * x, axis=1), np.tanh(x)))(x)
    np.testing.assert_array_equal(alone, with_other)
    np.testing.assert_array_equal(alone, summed)
    want = np.array([np.float32(_lane_sum((r * r))) for r in x])
    np.testing.assert_array_equal(alone, want)


@pytest.mark.parametrize("n", [2, 3, 5, 7, 8, 13, 16, 21])
def test_short_row_sums_unrolled_are_lanes_then_a_pairwise_tree(n):
    """The last round of a row (a whole row of fewer than 8) is emitted element by element: the same bits as
    the lanes and the tree, signed zeros included (a row of -0.0 sums to +0.0, as 0.0 + -0.0 in the first lane)."""
    from codegen.llvm import loops

    assert loops.UNROLL_LANE_ELEMENTS == 7  # a whole row unrolled below 8, the last round (13, 21) above
    x = _rng(n).standard_normal((257, n)) * 10.0 ** _rng(n + 1).integers(-8, 8, (257, n))
    x[::5] = -0.0
    got = sg.compile(lambda x: np.sum(x, axis=1))(x)
    want = np.array([_lane_sum(r) for r in x])
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    got = sg.compile(lambda x: np.sum(x * 3.0, axis=1) + 1.0)(x)
    want = np.array([_lane_sum(r * 3.0) for r in x]) + 1.0
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("d", [2, 3, 5, 7, 8, 10])
def test_sums_over_a_middle_axis_add_rows_in_order(d):
    """sum over axis 1 of (K, n, d): each output adds its n values in order, whether the short innermost
    axis is emitted index by index with register accumulators (d <= INNER_KEPT_UNROLL) or in memory."""
    from codegen.llvm import loops

    assert loops.INNER_KEPT_UNROLL == 7
    rng = _rng(d)
    x = rng.standard_normal((6, 301, d)) * 10.0 ** rng.integers(-8, 8, (6, 301, d))
    y = rng.standard_normal((6, 301, d))
    prod, got = sg.compile(lambda x, y: (x * y, np.sum(x * y, axis=1)))(x, y)
    want = np.zeros((6, d))
    for i in range(x.shape[1]):
        want = want + (x * y)[:, i, :]
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    np.testing.assert_array_equal(prod, x * y)
