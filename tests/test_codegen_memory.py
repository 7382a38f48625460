"""Compile-time memory of the LLVM backend: kernel deduplication, the call's honest peak, heap release.

- structurally equal loop kernels (the layers of a deep chain) share one
  function; the shared code gives bitwise the results of one function per
  kernel, also threaded and through the disk cache;
- kernels whose IR is equal but whose calls pass another trip count stay apart;
- a program of many kernels gets an unoptimized entry and one piece function per
  product shape, with the bits of the optimized entry and a function per product;
- `call_bytes` is the arena plus the fresh output arrays (what a call holds);
- `jit.release_memory` trims the C heap where glibc has `malloc_trim`.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp

codegen = pytest.importorskip("codegen")
from codegen import jit  # noqa: E402
from codegen.llvm import gemm as G  # noqa: E402
from codegen.llvm import module as P  # noqa: E402


def _chain_grad(L: int = 12, width: int = 16, batch: int = 64, dtype=np.float32):
    rng = np.random.default_rng(0)
    Ws = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype) for _ in range(L)]
    bs = [(0.1 * rng.standard_normal(width)).astype(dtype) for _ in range(L)]
    x = rng.standard_normal((batch, width)).astype(dtype)

    def loss(Ws, bs, x):
        for W, b in zip(Ws, bs):
            x = snp.tanh(x @ W + b)
        return snp.sum(x * x)

    return sg.grad(loss), (Ws, bs, x)


def _no_dedup(mod, fn, plan, shared):
    shared[(len(shared),)] = fn
    return fn


def _kernel_defs(ir_text: str) -> list[str]:
    return re.findall(r'^define [^\n]*@"?(kern_\d+)"?\(', ir_text, flags=re.MULTILINE)


@pytest.mark.parametrize("checkpoint", [None, "sqrt"])
def test_layers_share_kernel_functions_with_bitwise_equal_results(monkeypatch, checkpoint):
    f, args = _chain_grad()
    cf = sg.compile(f, checkpoint=checkpoint)
    got = cf(*args)
    st = cf.stats
    # a 12-layer chain: tens of loop kernels, a handful of distinct bodies
    assert st["loop_kernels"] >= 20
    assert 1 <= st["kernel_functions"] <= 6 < st["loop_kernels"]
    jitted = cf._current().exe.jitted
    assert len(_kernel_defs(jitted.ir_text)) == st["kernel_functions"]
    # the same program with one function per kernel: the same bits
    monkeypatch.setattr(P, "_dedup_kernel", _no_dedup)
    monkeypatch.setattr(P, "kernel_key", lambda *a: None)
    ref_cf = sg.compile(f, checkpoint=checkpoint)
    want = ref_cf(*args)
    assert ref_cf.stats["kernel_functions"] == ref_cf.stats["loop_kernels"]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # and the values are right (float64 NumPy reference of the hand-written gradient)
    Ws, bs, x = (np.asarray(a, np.float64) if not isinstance(a, list) else [np.asarray(v, np.float64) for v in a]
                 for a in args)
    acts = [x]
    for W, b in zip(Ws, bs):
        acts.append(np.tanh(acts[-1] @ W + b))
    g = 2 * acts[-1]
    for i in range(len(Ws) - 1, -1, -1):
        d = g * (1 - acts[i + 1] ** 2)
        np.testing.assert_allclose(got[i], acts[i].T @ d, rtol=2e-4, atol=2e-5)
        g = d @ Ws[i].T


def test_equal_kernels_are_emitted_once_and_keys_match_the_text(monkeypatch):
    """Kernels of equal `kernel_key` are emitted once; emitted all (SYMGRAPH_CHECK_KERNEL_KEYS), equal keys
    had equal IR text (the check raises otherwise), and both programs give the same bits."""
    f, args = _chain_grad(L=16)
    emitted = []
    lower = P.lower_loop_kernel
    monkeypatch.setattr(P, "lower_loop_kernel", lambda *a, **k: emitted.append(1) or lower(*a, **k))
    cf = sg.compile(f, checkpoint="sqrt")
    got = cf(*args)
    st = cf.stats
    assert len(emitted) == st["kernel_functions"] < st["loop_kernels"] // 4
    emitted.clear()
    monkeypatch.setattr(P, "_CHECK_KEYS", True)
    ref_cf = sg.compile(f, checkpoint="sqrt")
    want = ref_cf(*args)
    assert len(emitted) == ref_cf.stats["loop_kernels"] and ref_cf.stats["kernel_functions"] == st["kernel_functions"]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_shared_kernels_are_called_not_inlined():
    """A function with several call sites keeps one body in the optimized module (LLVM optimizes it once)."""
    f, args = _chain_grad(L=4)
    cf = sg.compile(f)
    cf(*args)
    opt = cf.llvm_ir()
    defs = _kernel_defs(opt)
    assert defs, "the shared kernels were inlined into entry"
    calls = sum(len(re.findall(rf'call [^\n]*@"?{d}"?\(', opt)) for d in defs)
    assert calls > len(defs)


def test_deep_chain_plain_entry_and_shared_product_pieces_keep_the_bits(monkeypatch):
    """24 layers (width 64, batch 512): `entry` is left unoptimized and the products' piece functions are
    one per shape; the gradient has the bits of the optimized entry with one piece function per product."""
    import itertools

    f, args = _chain_grad(L=24, width=64, batch=512)
    cf = sg.compile(f)
    got = cf(*args)
    st = cf.stats
    assert st["kernels"] >= P.PLAIN_ENTRY_MIN_KERNELS and st["entry_optimized"] is False
    text = cf._current().exe.jitted.ir_text
    assert re.search(r'^define [^\n]*@"?entry"?\([^\n]*optnone', text, flags=re.MULTILINE)
    pieces = re.findall(r'^define [^\n]*@"?(gemm_piece_\w+)"?\(', text, flags=re.MULTILINE)
    if st["parallel_kernels"]:  # products cut into pieces on the pool: 3 shapes (forward, two gradients)
        assert 1 <= len(pieces) <= 4 < st["gemm_kernels"]
        # the pool jobs' contexts come from constant tables (`pieces.ContextTable`), not stores in `entry`
        assert re.search(r"@\"?symgraph_fill_ctx", text) and re.search(r"@\"?tbl_", text)
    counter = itertools.count()
    monkeypatch.setattr(P, "PLAIN_ENTRY_MIN_KERNELS", 10 ** 9)
    monkeypatch.setattr(G, "_piece_key", lambda *a: ("unshared", next(counter)))
    ref_cf = sg.compile(f)
    want = ref_cf(*args)
    assert ref_cf.stats["entry_optimized"] is True
    assert "symgraph_fill_ctx" not in ref_cf._current().exe.jitted.ir_text
    ref_pieces = re.findall(r'^define [^\n]*@"?(gemm_piece_\w+)"?\(', ref_cf._current().exe.jitted.ir_text,
                            flags=re.MULTILINE)
    assert len(ref_pieces) >= len(pieces)
    if st["parallel_kernels"]:
        assert len(ref_pieces) > len(pieces)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    Ws, bs, x = args
    h = [np.asarray(x, np.float64)]
    for W, b in zip(Ws, bs):
        h.append(np.tanh(h[-1] @ W + b))
    d = 2 * h[-1] * (1 - h[-1] ** 2)
    np.testing.assert_allclose(got[-1], h[-2].T @ d, rtol=2e-3, atol=2e-4)


def test_loop_bodies_with_a_plain_entry_keep_the_bits(monkeypatch):
    """A scan body of 24 kernels (raw pointer entry) gets a plain entry, contexts from tables: the gradient
    matches the NumPy evaluator and has the bits of the optimized body entries."""
    rng = np.random.default_rng(0)
    Ws = [(rng.standard_normal((64, 64)) / 8).astype(np.float32) for _ in range(12)]
    x0 = rng.standard_normal((512, 64)).astype(np.float32)

    def body(h, _):
        for W in Ws:
            h = snp.tanh(h @ W)
        return h, snp.sum(h)

    def f(x):
        h, ys = sg.scan(body, x, None, length=3)
        return snp.sum(h * h) + snp.sum(ys)

    plain = []
    decide = P._plain_entry
    monkeypatch.setattr(P, "_plain_entry", lambda prog, loops: plain.append(decide(prog, loops)) or plain[-1])
    got = sg.compile(sg.grad(f))(x0)
    assert plain.count(True) == 2  # the forward and the backward body
    ref = sg.compile(sg.grad(f), backend="numpy")(x0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * np.max(np.abs(ref)))
    monkeypatch.setattr(P, "PLAIN_ENTRY_MIN_KERNELS", 10 ** 9)
    plain.clear()
    want = sg.compile(sg.grad(f))(x0)
    assert True not in plain
    np.testing.assert_array_equal(got, want)


def test_equal_bodies_with_other_trip_counts_stay_apart():
    """tanh over 100 and over 300 elements: the same loop body, but each call keeps its constant trip count."""
    def f(a, b):
        return np.tanh(a) * 2.0, np.tanh(b) * 2.0

    a = np.linspace(-2, 2, 100)
    b = np.linspace(-3, 3, 300)
    cf = sg.compile(f)
    ra, rb = cf(a, b)
    np.testing.assert_allclose(ra, np.tanh(a) * 2.0, rtol=1e-13)
    np.testing.assert_allclose(rb, np.tanh(b) * 2.0, rtol=1e-13)
    assert cf.stats["loop_kernels"] == 2 and cf.stats["kernel_functions"] == 2


def test_shared_parallel_kernels_match_one_thread(monkeypatch):
    """Threaded calls of a shared function (one thread routine per function) give the single-thread bits."""
    monkeypatch.setattr(P, "PAR_MIN_WORK", 1)
    if hasattr(P, "POOL_PAR_MIN_WORK"):
        monkeypatch.setattr(P, "POOL_PAR_MIN_WORK", 1)
    monkeypatch.setattr(P, "PAR_MIN_ELEMENTS", 1)

    f, args = _chain_grad(L=4, batch=256)
    g = sg.simplify(sg.trace(f, *args))
    e1 = codegen.compile_graph(g, nthreads=1)
    e2 = codegen.compile_graph(g, nthreads=2)
    assert e1.stats["parallel_kernels"] == 0 and e2.stats["parallel_kernels"] >= 4
    assert e2.stats["kernel_functions"] < e2.stats["loop_kernels"]
    leaves = sg.tree_leaves(args)
    for u, v in zip(e1.run(leaves), e2.run(leaves)):
        np.testing.assert_array_equal(u, v)


def test_disk_cache_loads_the_deduplicated_object(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAPH_CACHE_DIR", str(tmp_path))
    f, args = _chain_grad(L=6)
    c1 = sg.compile(f, checkpoint="sqrt")
    r1 = c1(*args)
    c2 = sg.compile(f, checkpoint="sqrt")
    r2 = c2(*args)
    assert c1.stats["cache"] == "memory" and c2.stats["cache"] == "disk"
    assert c2.stats["kernel_functions"] == c1.stats["kernel_functions"] < c1.stats["loop_kernels"]
    for u, v in zip(r1, r2):
        np.testing.assert_array_equal(u, v)
    assert "define" in c2.llvm_ir()


def test_call_bytes_is_arena_plus_fresh_outputs():
    f, args = _chain_grad(L=6)
    cf = sg.compile(f, checkpoint="sqrt")
    out = cf(*args)
    st = cf.stats
    out_bytes = sum(g.nbytes for g in out)
    assert st["call_bytes"] == st["arena_bytes"] + out_bytes
    assert st["call_bytes"] >= st["peak_bytes"]


def test_call_bytes_leaves_out_donated_outputs():
    def step(w, x):
        return w - 0.1 * (x.T @ np.tanh(x @ w)), np.sum(x)

    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((8, 8)), rng.standard_normal((32, 8))
    cf = sg.compile(step, donate_argnums=0)
    want = step(w.copy(), x)
    got = cf(w, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    st = cf.stats
    assert st["donated_outputs"] == 1
    assert st["call_bytes"] == st["arena_bytes"] + 8  # only the scalar sum is a fresh array


def test_release_memory(monkeypatch):
    import ctypes

    try:
        have = hasattr(ctypes.CDLL(None), "malloc_trim")
    except OSError:
        have = False
    assert jit.release_memory() is have
    monkeypatch.setenv("SYMGRAPH_NO_MALLOC_TRIM", "1")
    assert jit.release_memory() is False
