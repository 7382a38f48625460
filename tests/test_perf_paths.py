"""Lowering paths added for training-step speed: gemm accumulation, padded blocks, merged reshapes,
innermost-first materialization, BLAS thread control and the per-kernel profile.

Every test compares compiled values with the NumPy evaluator (float32 and float64) and checks that
the path in question was taken (so a silent fallback fails the test).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph.compile import compile

pytest.importorskip("llvmlite")

import codegen.kernels.affine as A  # noqa: E402
import codegen.kernels.partition as F  # noqa: E402
import codegen.cpu.blas as rt  # noqa: E402
from symgraph.passes.schedule import schedule  # noqa: E402

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
DTYPES = pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])


def _tol(dtype):
    return 2e-5 if dtype == F32 else 1e-12


def check(f, *args, rtol):
    """Compile f and compare every output leaf with the evaluator; returns the CompiledFunction."""
    want = sg.simplify(sg.trace(f, *args)).evaluate(*args)
    cf = compile(f)
    got = cf(*args)
    gl, wl = sg.tree_leaves(got), sg.tree_leaves(want)
    assert len(gl) == len(wl)
    for i, (g, w) in enumerate(zip(gl, wl)):
        w = np.asarray(w)
        scale = float(np.max(np.abs(w), initial=0.0))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * max(scale, 1.0), err_msg=f"output {i}")
        assert np.asarray(g).dtype == w.dtype
    return cf


def program(cf):
    """The partition of the last compiled signature (as the backend built it)."""
    g = cf.graph
    return F.partition(g, schedule(g), blas=rt.blas_library() is not None)


def gemm_tasks(prog):
    return [t for k in prog.kernels if k.kind == "gemm" for t in k.tasks]


def _rand(rng, shape, dtype):
    return rng.normal(size=shape).astype(dtype)


needs_blas = pytest.mark.skipif(rt.blas_library() is None, reason="no BLAS library found")


# ----- gemm accumulation (alpha, beta = 1) -----


@needs_blas
@DTYPES
def test_sgd_update_accumulates_into_the_gemm(dtype):
    rng = np.random.default_rng(0)
    w, a, b = _rand(rng, (6, 4), dtype), _rand(rng, (9, 6), dtype), _rand(rng, (9, 4), dtype)
    lr = dtype.type(0.1)

    def f(w, a, b):
        return w - lr * (a.T @ b)

    cf = check(f, w, a, b, rtol=_tol(dtype))
    (t,) = gemm_tasks(program(cf))
    assert t.node.op.name == "sub" and t.gemm["beta"] == 1.0
    assert t.gemm["alpha"] == pytest.approx(-0.1, rel=1e-6)
    assert t.gemm["a"]["trans"] is True  # a.T through the BLAS flag, not a copy


@needs_blas
@DTYPES
def test_sums_of_products_accumulate(dtype):
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (5, 3), dtype), _rand(rng, (3, 7), dtype)
    c, d = _rand(rng, (5, 8), dtype), _rand(rng, (7, 8), dtype)
    x = _rand(rng, (7,), dtype)
    e = _rand(rng, (5, 3), dtype)
    two, three = dtype.type(2), dtype.type(3)

    def f(a, b, c, d, x, e):
        s1 = a @ b + c @ d.T + x                     # bias broadcast stored first, both products added
        s2 = -(e @ b) * two - three * (e @ (b * x))  # no other term: the first product overwrites (beta 0)
        return s1, s2

    cf = check(f, a, b, c, d, x, e, rtol=_tol(dtype))
    ts = gemm_tasks(program(cf))
    assert len(ts) == 4 and {t.node.op.name for t in ts} <= {"add", "sub", "mul", "neg"}
    by_root: dict = {}
    for t in ts:
        by_root.setdefault(t.node, []).append(t)
    alphas = sorted(round(t.gemm["alpha"], 6) for t in ts)
    assert alphas == [-3.0, -2.0, 1.0, 1.0]
    betas = sorted(tuple(t.gemm["beta"] for t in group) for group in by_root.values())
    assert betas == [(0.0, 1.0), (1.0, 1.0)]
    assert cf.stats["materialized"] <= 3  # the two sums and the operand b * x; the products have no buffers


@needs_blas
@DTYPES
def test_batched_and_transposed_products_accumulate(dtype):
    rng = np.random.default_rng(2)
    p, q = _rand(rng, (2, 3, 5, 4), dtype), _rand(rng, (2, 3, 4, 6), dtype)
    r = _rand(rng, (2, 3, 6, 5), dtype)
    s = _rand(rng, (2, 3, 6, 6), dtype)

    def f(p, q, r, s):
        # r.transpose: a transposed operand with batch strides; s[..., :4, :] a strided slice
        return p @ q + np.swapaxes(r, -1, -2) @ s[..., :, :6] - p @ s[..., :4, :]

    cf = check(f, p, q, r, s, rtol=_tol(dtype))
    ts = gemm_tasks(program(cf))
    assert len(ts) == 3 and all(t.gemm.get("mm") is not None for t in ts)
    assert sorted(t.gemm["alpha"] for t in ts) == [-1.0, 1.0, 1.0]


@needs_blas
def test_products_read_elsewhere_or_returned_are_not_absorbed():
    rng = np.random.default_rng(3)
    a, b, x = rng.normal(size=(4, 5)), rng.normal(size=(5, 3)), rng.normal(size=(4, 3))

    def f(a, b, x):
        p = a @ b
        return p + x, np.tanh(p), (a @ b.T.T) * 2.0 + x

    cf = check(f, a, b, x, rtol=1e-12)
    ts = gemm_tasks(program(cf))
    # p has two readers: its own buffer; the second product (the same matmul after interning) too
    assert all(t.gemm.get("beta", 0.0) == 0.0 for t in ts if t.node.op.name == "matmul")


@needs_blas
def test_empty_contraction_accumulates_nothing():
    x = np.arange(12.0).reshape(3, 4)
    cf = check(lambda a, b, x: a @ b + x, np.zeros((3, 0)), np.zeros((0, 4)), x, rtol=0)
    assert np.array_equal(cf(np.zeros((3, 0)), np.zeros((0, 4)), x), x)


@needs_blas
@DTYPES
def test_compiled_sgd_step_matches_numpy_backend(dtype):
    rng = np.random.default_rng(4)
    p = {"w1": _rand(rng, (8, 16), dtype) * dtype.type(0.3), "b1": np.zeros(16, dtype),
         "w2": _rand(rng, (16, 3), dtype) * dtype.type(0.3), "b2": np.zeros(3, dtype)}
    x, y = _rand(rng, (32, 8), dtype), np.eye(3, dtype=dtype)[rng.integers(0, 3, 32)]
    lr = dtype.type(0.5)

    def loss(p, x, y):
        h = np.tanh(x @ p["w1"] + p["b1"])
        z = h @ p["w2"] + p["b2"]
        return snp.mean(snp.sum(-y * snp.log_softmax(z, axis=-1), axis=-1))

    def step(p, x, y):
        value, g = sg.value_and_grad(loss)(p, x, y)
        return value, {k: p[k] - lr * g[k] for k in p}

    want = compile(step, backend="numpy")(p, x, y)
    cf = compile(step)
    got = cf(p, x, y)
    for gv, wv in zip(sg.tree_leaves(got), sg.tree_leaves(want)):
        np.testing.assert_allclose(gv, wv, rtol=_tol(dtype) * 10, atol=_tol(dtype))
    roots = {t.node for t in gemm_tasks(program(cf)) if t.gemm.get("beta")}
    assert len(roots) >= 2  # the weight updates (and the hidden pre-activation) accumulate


# ----- sums of zero-padded blocks (the transpose of slicing) -----


@DTYPES
def test_sliced_blocks_gradient_is_stored_piecewise(dtype):
    rng = np.random.default_rng(5)
    x = _rand(rng, (3, 4, 12), dtype)
    a, b, c = _rand(rng, (3, 4, 3), dtype), _rand(rng, (3, 4, 4), dtype), _rand(rng, (3, 4, 2), dtype)

    def loss(x, a, b, c):
        # blocks [0:3], [3:7] and [9:11]: a gap at 7..9 and a tail at 11
        return np.sum(x[:, :, 0:3] * a) + np.sum(np.sin(x[:, :, 3:7]) * b) + np.sum(x[:, :, 9:11] ** 2 * c)

    cf = check(sg.grad(loss), x, a, b, c, rtol=_tol(dtype) * 4)
    prog = program(cf)
    out = cf.graph.outputs[0]
    pieces = [t for k in prog.kernels for t in k.tasks if t.node is out]
    assert len(pieces) == 5 and all(t.pieced for t in pieces)  # 3 blocks + 2 zero gaps
    assert sorted(t.domain[-1] for t in pieces) == [1, 2, 2, 3, 4]


@DTYPES
@pytest.mark.parametrize("case", ["rosenbrock", "step3_gap", "axis0_odd"])
def test_strided_slices_gradient_is_one_interleaved_loop(dtype, case):
    """The gradient of x[0::2], x[1::2] (Rosenbrock's HVP at n = 1e6: 3.8 ms -> 0.4 ms) is stored residue by
    residue from one loop (bitwise as the evaluator for arithmetic, -0.0 included); a residue no slice reads is
    zero."""
    rng = np.random.default_rng(15)
    if case == "rosenbrock":
        x = _rand(rng, (1000,), dtype)
        x[2] = -0.0

        def f(x):
            a, b = x[0::2], x[1::2]
            return np.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2)

        fn, args, step, axis = sg.grad(f), (x,), 2, 0
    elif case == "step3_gap":  # residues 0 and 2 of step 3 along the last axis, length 10 (4, 3 and 3 elements)
        x = _rand(rng, (5, 10), dtype)
        fn, args, step, axis = sg.grad(lambda x: np.sum(np.sin(x[:, 0::3])) + np.sum(x[:, 2::3] ** 2)), (x,), 3, 1
    else:  # along axis 0, odd length: 4 and 3 rows
        x = _rand(rng, (7, 6), dtype)
        fn, args, step, axis = sg.grad(lambda x: np.sum(np.tanh(x[0::2]) * x[0::2]) + np.sum(np.exp(x[1::2]))), \
            (x,), 2, 0
    cf = check(fn, *args, rtol=_tol(dtype) * 4)
    if case == "rosenbrock":  # arithmetic only: bitwise the evaluator's values
        want = sg.compile(fn, backend="numpy")(*args)
        np.testing.assert_array_equal(cf(*args), want)
        np.testing.assert_array_equal(np.signbit(cf(*args)), np.signbit(want))
    prog = program(cf)
    out = cf.graph.outputs[0]
    pieces = [(ki, t) for ki, k in enumerate(prog.kernels) for t in k.tasks if t.node is out]
    assert len(pieces) == step and all(t.pieced for _, t in pieces)
    n = x.shape[axis]
    assert sorted(t.domain[axis] for _, t in pieces) == sorted(len(range(r, n, step)) for r in range(step))
    same = [t for _, t in pieces if t.domain == pieces[0][1].domain]
    assert len({ki for ki, t in pieces if t in same}) == 1  # equal-length residues share one loop


@DTYPES
def test_attention_style_heads_gradient(dtype):
    """q, k, v sliced from one activation, split into heads and transposed (the W6 block)."""
    rng = np.random.default_rng(6)
    B, T, H, dh = 2, 5, 2, 3
    d = H * dh
    qkv = _rand(rng, (B, T, 3 * d), dtype)

    def loss(qkv):
        q = np.transpose(qkv[:, :, 0:d].reshape(B, T, H, dh), (0, 2, 1, 3))
        k = np.transpose(qkv[:, :, d:2 * d].reshape(B, T, H, dh), (0, 2, 3, 1))
        v = np.transpose(qkv[:, :, 2 * d:3 * d].reshape(B, T, H, dh), (0, 2, 1, 3))
        s = q @ k
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        a = e / np.sum(e, axis=-1, keepdims=True)
        o = np.transpose(a @ v, (0, 2, 1, 3)).reshape(B, T, d)
        return np.sum(o * o)

    cf = check(sg.grad(loss), qkv, rtol=_tol(dtype) * 20)
    prog = program(cf)
    out = cf.graph.outputs[0]
    pieces = [t for k in prog.kernels for t in k.tasks if t.node is out]
    assert len(pieces) == 3 and all(t.pieced for t in pieces)
    # each block loops over the finer (B, T, H, dh) layout: no div/mod of merged indices
    assert all(len(t.domain) == 4 for t in pieces)
    assert not any(e.op in ("_idiv", "_imod", "_unslice_cond") for t in pieces for e in t.exprs)


# ----- reshapes that merge axes are stored over the finer shape -----


@DTYPES
def test_transposed_reshape_feeding_a_product(dtype):
    rng = np.random.default_rng(7)
    x = _rand(rng, (2, 3, 4, 5), dtype)
    w = _rand(rng, (20, 6), dtype)

    def f(x, w):
        y = np.transpose(np.tanh(x), (0, 2, 1, 3)).reshape(8, 15)  # (2, 4, 3, 5) -> (8, 15)
        return y.reshape(2, 60)[:, :20] @ w, y

    cf = check(f, x, w, rtol=_tol(dtype) * 4)
    prog = program(cf)
    stores = [t for k in prog.kernels for t in k.tasks if t.kind == "store" and t.node.op.name == "reshape"
              and t.node.shape == (8, 15)]
    assert stores and all(t.domain == (2, 4, 3, 5) for t in stores)
    assert not any(e.op in ("_idiv", "_imod") for t in stores for e in t.exprs)


def test_merge_groups():
    assert A.merge_groups((2, 3, 4), (6, 4)) == [2, 1]
    assert A.merge_groups((2, 3, 4), (2, 12)) == [1, 2]
    assert A.merge_groups((2, 1, 3), (6,)) == [3]
    assert A.merge_groups((6, 4), (2, 3, 4)) is None      # a split
    assert A.merge_groups((2, 3), (3, 2)) is None          # neither
    assert A.merge_groups((2, 1, 3), (2, 3)) is None       # only a unit axis dropped: nothing to gain


# ----- innermost expensive values are materialized first -----


@DTYPES
def test_gelu_backward_keeps_only_the_transcendental(dtype):
    rng = np.random.default_rng(8)
    x = _rand(rng, (16, 24), dtype)
    w = _rand(rng, (24, 32), dtype) * dtype.type(0.2)
    w2 = _rand(rng, (32, 5), dtype) * dtype.type(0.2)

    def loss(w, x, w2):
        u = x @ w
        g = 0.5 * u * (1.0 + np.tanh(0.79788456 * (u + 0.044715 * u ** 3)))
        return np.sum((g @ w2) ** 2)

    cf = check(sg.value_and_grad(loss), w, x, w2, rtol=_tol(dtype) * 20)
    prog = program(cf)
    big = [n for n in prog.materialized if n.shape == (16, 32) and n.op.kind == "elementwise"]
    names = sorted(n.op.name for n in big)
    # tanh (read by the forward and the backward) is stored; 1 + tanh and its products are recomputed
    assert names.count("tanh") == 1
    assert len(big) <= 3, names


# ----- BLAS threads around compiled calls -----


@needs_blas
def test_blas_runs_single_threaded_and_the_setting_is_restored(monkeypatch):
    if rt.blas_thread_control() is None:
        pytest.skip("the BLAS has no thread control")
    get = getattr(_blas_lib(), rt._blas_threads_fns[0])
    setf = getattr(_blas_lib(), rt._blas_threads_fns[1])
    before = get()
    setf(2)
    try:
        rng = np.random.default_rng(9)
        a, b = rng.normal(size=(40, 30)), rng.normal(size=(30, 20))
        cf = compile(lambda a, b: np.tanh(a @ b))
        np.testing.assert_allclose(cf(a, b), np.tanh(a @ b), rtol=1e-12)
        assert cf.stats["blas_threads"] == 1
        assert get() == 2
        # concurrent compiled calls: the process setting comes back when the last one returns
        errors = []

        def work():
            try:
                for _ in range(200):
                    cf(a, b)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ths = [threading.Thread(target=work) for _ in range(3)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        assert not errors and get() == 2
        monkeypatch.setenv("SYMGRAPH_BLAS_THREADS", "2")
        cf2 = compile(lambda a, b: a @ b + 1.0)
        np.testing.assert_allclose(cf2(a, b), a @ b + 1.0, rtol=1e-12)
        assert cf2.stats["blas_threads"] == 2
    finally:
        setf(before)


def _blas_lib():
    import glob
    import os

    npdir = os.path.dirname(np.__file__)
    paths = sorted(glob.glob(os.path.join(os.path.dirname(npdir), "numpy.libs", "libscipy_openblas64_*.so*")))
    paths += sorted(glob.glob(os.path.join(npdir, ".dylibs", "libscipy_openblas64_*.dylib")))
    return ctypes.CDLL(paths[0])


# ----- per-kernel profile -----


def test_profile_counts_calls_and_time(monkeypatch):
    rng = np.random.default_rng(10)
    x = rng.normal(size=(64, 32))

    def f(x):
        return np.sum(np.exp(x), axis=1), np.tanh(x) @ x.T

    plain = compile(f)
    plain(x)
    assert plain.profile() is None
    monkeypatch.setenv("SYMGRAPH_PROFILE", "1")
    cf = compile(f)
    for _ in range(3):
        got = cf(x)
    np.testing.assert_allclose(got[0], np.sum(np.exp(x), axis=1), rtol=1e-13)
    rows = cf.profile()
    assert len(rows) == len(program(cf).kernels)
    assert all(r["calls"] == 3 for r in rows)
    assert sum(r["seconds"] for r in rows) > 0
    assert {r["kind"] for r in rows} >= {"loop"}
    assert any("exp" in " ".join(r["nodes"]) or "sum" in " ".join(r["nodes"]) for r in rows)
    cf.profile(reset=True)
    assert all(r["seconds"] == 0 and r["calls"] == 0 for r in cf.profile())
    cf(x)
    assert cf.profile()[0]["calls"] == 1


# ----- training loops: outputs fed back take the fast path and are freed at once -----


def test_outputs_passed_back_take_the_fast_path_and_are_freed_promptly():
    import gc
    import weakref

    from symgraph.compile import MISS

    def step(p, t, x):
        g = {k: np.tanh(p[k] * x) for k in p}
        # outputs pair with donated leaves in order: the new parameters first take p's buffers
        return {k: p[k] - 0.1 * g[k] for k in p}, g, t + np.float32(1)

    cf = compile(step, donate_argnums=(0,))
    p = {f"w{i}": np.ones(64, np.float32) for i in range(3)}
    t, x = np.zeros((), np.float32), np.linspace(-1, 1, 64).astype(np.float32)
    gc.disable()
    try:
        w0 = p["w0"]
        p, g, t = cf(p, t, x)  # first call: traced, compiled, run by the checked path
        assert p["w0"] is w0  # updated in place
        ref = weakref.ref(g["w0"])
        del g
        assert ref() is None  # no reference cycle holds the outputs until a collection
        sig = cf._last
        for _ in range(3):
            r = sig.fast((p, t, x))
            assert r is not MISS  # the previous outputs are valid fast-path arguments
            assert r[0]["w1"] is p["w1"]
            t = r[2]
        p, g, t = cf(p, t, x)
        ref = weakref.ref(g["w1"])
        del g
        assert ref() is None
    finally:
        gc.enable()
    want = np.ones(64, np.float32)
    for _ in range(5):
        want = want - 0.1 * np.tanh(want * x)
    np.testing.assert_allclose(p["w2"], want, rtol=1e-6)
    assert float(t) == 5.0
