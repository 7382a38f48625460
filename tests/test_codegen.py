"""The LLVM backend: every op compiled equals the NumPy evaluator; fusion,
vectorization, BLAS, threads, caches, argument checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph.compile import compile
from symgraph.ops import OPS

hyp = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
SIZES = (0, 1, 7, 1023)
TRANSCENDENTAL = {"exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "pow"}
ULPS = 8


# ----- helpers -----


def special_values(n: int, dtype: np.dtype, seed: int = 0, lo: float = -20.0, hi: float = 20.0) -> np.ndarray:
    """n values: NaN, +-inf, +-0, denormals, tiny and moderate magnitudes, random normals."""
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    sp = [np.nan, np.inf, -np.inf, 0.0, -0.0, fi.smallest_subnormal * 3, -fi.smallest_subnormal * 5,
          fi.tiny, 1e-8, -1e-8, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 30.0, -30.0, 1e3, -1e3]
    vals = np.concatenate([np.array(sp, dtype=np.float64), rng.uniform(lo, hi, size=max(n, 0))])
    idx = rng.permutation(len(vals))[:n] if n <= len(sp) else np.arange(n)
    return vals[idx].astype(dtype)


def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Bitwise-meaningful equality: same values, NaN positions and signs of zeros."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
        np.testing.assert_array_equal(got[~nan], want[~nan], err_msg=what)
        np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]), err_msg=f"{what}: signs")
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_ulp(got: np.ndarray, want: np.ndarray, ulps: int = ULPS, what: str = "") -> None:
    """Equal NaN/inf positions; finite values within `ulps` units in the last place (denormals absolute)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.dtype, want.dtype)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: infinities")
    fin = ~(nan | inf)
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    fi = np.finfo(want.dtype)
    tol = ulps * np.maximum(np.spacing(np.abs(want[fin])).astype(np.float64), fi.smallest_subnormal)
    tol = np.maximum(tol, ulps * float(fi.tiny) * fi.eps)
    bad = np.abs(g - w) > tol
    assert not bad.any(), f"{what}: {bad.sum()} values differ, e.g. got {g[bad][:3]} want {w[bad][:3]}"


def evaluator(f, *args):
    """The reference: trace, simplify, NumPy evaluator."""
    return sg.simplify(sg.trace(f, *args)).evaluate(*args)


def check(f, *args, exact=(), ulps=ULPS, rtol=None):
    """Compile f, run it on args and compare every output leaf with the evaluator."""
    want = evaluator(f, *args)
    cf = compile(f)
    got = cf(*args)
    gl, wl = sg.tree_leaves(got), sg.tree_leaves(want)
    assert len(gl) == len(wl)

    def magnitude(a) -> float:
        af = np.asarray(a, dtype=np.float64)
        return float(np.max(np.abs(af[np.isfinite(af)]), initial=0.0)) if af.size else 0.0

    # a sum of O(|input|) terms that cancels to ~0 differs by rounding of the terms, not of the result
    in_scale = max((magnitude(a) for a in sg.tree_leaves(args) if np.asarray(a).dtype.kind == "f"), default=0.0)
    for i, (g, w) in enumerate(zip(gl, wl)):
        if rtol is not None:
            scale = max(magnitude(w), in_scale)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=f"output {i}")
            assert np.asarray(g).dtype == np.asarray(w).dtype
        elif i in exact or np.asarray(w).dtype.kind != "f":
            assert_same(g, w, f"output {i}")
        else:
            assert_ulp(g, w, ulps, f"output {i}")
    return cf


# ----- registry completeness -----


def test_every_elementwise_and_reduction_op_has_an_emitter():
    from codegen.llvm.emitters import EMITTERS
    from codegen.llvm.reduce import REDUCERS

    missing = [(n, op.kind) for n, op in OPS.items()
               if (op.kind == "elementwise" and n not in EMITTERS) or (op.kind == "reduction" and n not in REDUCERS)]
    assert not missing, f"ops without an LLVM emitter: {missing}"


def test_every_task_kind_has_a_lowering():
    """Each task kind lowers: a loop kind by its per-element step, every kernel kind by its call at the entry."""
    from codegen.kernels.tasks import KernelKind, TaskKind
    from codegen.llvm.loops import ELEMENT_STEPS
    from codegen.llvm.module import KERNEL_CALLS

    assert set(KERNEL_CALLS) == set(KernelKind), f"kernel kinds without a call: {set(KernelKind) - set(KERNEL_CALLS)}"
    missing = [k for k in TaskKind if k.loop and k not in ELEMENT_STEPS]
    assert not missing, f"loop task kinds without an element step (codegen.llvm.loops.ELEMENT_STEPS): {missing}"
    assert all(k.kernel in KERNEL_CALLS for k in TaskKind)
    assert set(ELEMENT_STEPS) <= {k for k in TaskKind if k.loop}


def test_every_layout_op_is_an_index_map_or_writes_its_buffer():
    """A layout op lowers either as index arithmetic in its readers (`body.LAYOUTS`) or by tasks that
    write its own buffer (a `buffer` row of `node_tasks.NODE_TASKS`); the partitioner refuses any other."""
    from codegen.kernels.body import LAYOUTS
    from codegen.kernels.node_tasks import NODE_TASKS, node_tasks

    missing = [n for n, op in OPS.items() if op.kind == "layout" and op.identity_of is None
               and n not in LAYOUTS and not node_tasks(op).buffer]
    assert not missing, f"layout ops with no native lowering (codegen.kernels.body.LAYOUTS or NODE_TASKS): {missing}"
    assert set(LAYOUTS) | set(NODE_TASKS) <= set(OPS)
    assert not set(LAYOUTS) & {n for n, r in NODE_TASKS.items() if r.buffer}


def test_shared_value_expensive_only_through_a_broadcast_materializes_the_broadcast_part():
    """(x_i - x_j) * w_ij read by two reductions: w (n x n, a division chain) is materialized, the
    cheap (n, n, d) product is recomputed by each reduction (not written and read d times over)."""
    from codegen.kernels.partition import partition
    from symgraph.passes.schedule import schedule

    def f(x, u, v):
        w = u / v * u + u
        t = (x[:, None, :] - x[None, :, :]) * w[:, :, None] * 2.0
        return np.sum(t, axis=0) - np.sum(t, axis=1)

    rng = np.random.default_rng(0)
    args = (rng.standard_normal((7, 3)), rng.standard_normal((7, 7)), rng.uniform(1.0, 2.0, (7, 7)))
    g = sg.simplify(sg.trace(f, *args))
    prog = partition(g, schedule(g))
    big = [n for n in prog.materialized if n.shape == (7, 7, 3)]
    assert not big, [n.op.name for n in big]
    assert any(n.shape == (7, 7) and n.op.kind == "elementwise" for n in prog.materialized)
    np.testing.assert_allclose(compile(f)(*args), f(*args), rtol=1e-13)


def test_node_tasks_make_the_task_kinds_their_row_declares():
    """Each node's tasks are of the kinds its `NODE_TASKS` row (or the reduction/value row) declares,
    and the rows' buffered nodes are materialized."""
    from codegen.kernels.node_tasks import node_tasks
    from codegen.kernels.partition import partition
    from symgraph.passes.schedule import schedule

    def f(x, w, i):
        y = np.concatenate([np.sin(x), x * 2.0], axis=0)             # concatenate: one store per operand
        z = snp.add_at(np.zeros((8, 3)), i, y[:5])                  # scatter_add: a scatter
        p = x @ w                                                   # matmul: a loop over k without BLAS
        e = np.einsum("ij,jk->ik", x, w)
        a = np.argmax(y, axis=1)
        return np.sum(z) + np.sum(p) + np.sum(e) + np.max(y) + np.sum(a) + np.sum(np.reshape(p, (-1,)))

    rng = np.random.default_rng(0)
    args = (rng.standard_normal((4, 3)), rng.standard_normal((3, 3)), np.array([0, 2, 2, 7, 1]))
    g = sg.simplify(sg.trace(f, *args))
    for blas in (False, True):
        prog = partition(g, schedule(g), blas=blas)
        seen = set()
        for k in prog.kernels:
            for t in k.tasks:
                row = node_tasks(t.node.op)
                assert t.kind in row.kinds, (t.node.op.name, t.kind, row.kinds)
                seen.add(t.kind)
        buffered = [n for n in g.nodes if node_tasks(n.op).buffer]
        assert {n.op.name for n in buffered} >= {"concatenate", "scatter_add", "matmul", "einsum", "argmax", "sum"}
        assert all(n in prog.materialized for n in buffered)
        kinds = {str(s) for s in seen}
        assert {"store", "reduce", "argmax", "scatter"} <= kinds and ("gemm" in kinds) == blas, kinds


def test_linear_combinations_read_the_ring_facts():
    """The BLAS epilogues (`pairing`) pass through the ring's linear ops with coefficients read from
    their records (add (1, 1), sub (1, -1), neg (-1)) and through its product by a scalar (mul only);
    the coefficients are the op's law on random inputs."""
    from codegen.kernels import pairing

    coeffs = {n: pairing._coefficients(op) for n, op in OPS.items() if pairing._coefficients(op) is not None}
    assert coeffs == {"add": (1.0, 1.0), "sub": (1.0, -1.0), "neg": (-1.0,)}
    assert [n for n, op in OPS.items() if pairing._is_product(op)] == ["mul"]
    rng = np.random.default_rng(1)
    for n, c in coeffs.items():
        xs = [rng.standard_normal(16) for _ in c]
        np.testing.assert_array_equal(OPS[n].impl(*xs), sum(ci * x for ci, x in zip(c, xs)))


# ----- elementwise -----

UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid", "erf",
         "abs", "sign", "floor", "neg", "isnan", "logical_not"]


def _unary_all(x):
    from symgraph import lax as L

    out = []
    for name in UNARY:
        if name == "neg":
            out.append(-x)
        elif name in ("isnan", "logical_not", "abs", "sign", "floor"):
            out.append(L.unary(name, x, float_op=False))
        else:
            out.append(L.unary(name, x))
    return tuple(out)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", SIZES)
def test_unary_ops_match_evaluator(dtype, n):
    x = special_values(n, dtype)
    want = evaluator(_unary_all, x)
    got = compile(_unary_all)(x)
    for name, g, w in zip(UNARY, got, want):
        if name in TRANSCENDENTAL:
            assert_ulp(g, w, what=f"{name} {dtype} n={n}")
        else:
            assert_same(g, w, f"{name} {dtype} n={n}")


def _binary_all(x, y):
    return (x + y, x - y, x * y, x / y, np.maximum(x, y), np.minimum(x, y), x < y, x <= y, x > y, x >= y,
            x == y, x != y, np.logical_and(x, y), np.logical_or(x, y), np.where(x > y, x, y))


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((1023,), ()), ((7, 1), (1, 5)), ((3, 1, 4), (5, 1)), ((0,), (0,)),
                                    ((1,), (1,))])
def test_binary_ops_and_broadcasting_match_evaluator(dtype, shapes):
    sa, sb = shapes
    x = special_values(int(np.prod(sa)), dtype, seed=1).reshape(sa)
    y = special_values(int(np.prod(sb)), dtype, seed=2).reshape(sb)
    check(_binary_all, x, y, exact=range(15))


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_pow_matches_evaluator(dtype):
    rng = np.random.default_rng(3)
    x = np.concatenate([special_values(40, dtype), rng.uniform(0, 5, 60).astype(dtype)])
    y = np.concatenate([special_values(40, dtype, seed=9), rng.uniform(-3, 3, 60).astype(dtype)])
    x, y = np.meshgrid(x[:25], y[:25])
    check(lambda a, b: a ** b, x.astype(dtype), y.astype(dtype))


def test_minus_zero_and_special_value_semantics():
    z = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0])
    w = np.array([-0.0, 0.0, 1.0, np.inf, np.inf, np.nan])
    check(lambda a, b: (-a, a * -1.0, a + b, a - b, b - a, np.maximum(a, b), np.minimum(b, a), np.sign(a),
                        np.abs(a), a * 0.0), z, w, exact=range(10))


def test_integer_and_bool_ops_match_evaluator():
    rng = np.random.default_rng(4)
    i = rng.integers(-50, 50, size=(6, 7)).astype(np.int64)
    j = rng.integers(-50, 50, size=(7,)).astype(np.int32)
    b = rng.random((6, 7)) > 0.5

    def f(i, j, b):
        return (i + j, i * j, i - j, np.maximum(i, j), -i, np.abs(i), np.sign(i), i < j, np.logical_and(b, i > 0),
                np.logical_not(b), np.where(b, i, j), np.sum(b), np.sum(i, axis=0), np.max(i, axis=1),
                np.min(j), np.prod(j[:5]), i.astype(np.float32), b.astype(np.float64), (i * 0.5).astype(np.int16),
                np.abs(j).astype(np.float64) ** 2)

    check(f, i, j, b, exact=range(20))


def test_casts_match_evaluator():
    x = np.array([-3.7, -0.5, -0.0, 0.0, 0.4, 2.5, 3.7, 100.2, 1e10], dtype=np.float64)

    def f(x):
        return (x.astype(np.float32), x.astype(np.int64), x.astype(np.int32), x.astype(bool),
                x.astype(np.float32).astype(np.float64), (x > 0).astype(np.int8), x.astype(np.uint8))

    check(f, x[:8], exact=range(7))


# ----- non-contiguous, transposed and Fortran-ordered inputs -----


@pytest.mark.parametrize("layout", ["strided", "transposed", "fortran", "negative"])
def test_non_contiguous_inputs(layout):
    rng = np.random.default_rng(5)
    base = rng.normal(size=(12, 10))
    if layout == "strided":
        x = base[::2, 1::3]
    elif layout == "transposed":
        x = base.T
    elif layout == "fortran":
        x = np.asfortranarray(base)
    else:
        x = base[::-1, ::-2]

    def f(x):
        return np.tanh(x) * 2.0 + x.sum(axis=0), np.exp(-x * x).sum()

    cf = check(f, x, rtol=1e-13)
    # the same signature accepts a C-contiguous array too
    np.testing.assert_allclose(cf(np.ascontiguousarray(x))[0], f(x)[0], rtol=1e-13)
    assert not np.shares_memory(cf(x)[0], x)


# ----- reductions -----


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2), (1, 2), (0, 1)])
def test_reductions_match_evaluator(dtype, axis):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 4, 5)).astype(dtype)
    tol = 1e-5 if dtype == F32 else 1e-13

    def f(x):
        return (np.sum(x, axis=axis), np.max(x, axis=axis), np.min(x, axis=axis), np.prod(x * 0.5 + 1, axis=axis),
                np.mean(np.exp(x), axis=axis))

    check(f, x, rtol=tol)
    if axis is None or isinstance(axis, int):
        check(lambda x: np.argmax(x, axis=axis), x, exact=(0,))


def test_reductions_with_nan_inf_and_empty_axes():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, 0.5], [np.inf, 1.0, np.nan]])
    check(lambda x: (np.max(x, axis=1), np.min(x, axis=0), np.sum(x, axis=1), np.argmax(x, axis=1), np.max(x)), x,
          exact=range(5))
    e = np.zeros((3, 0))
    check(lambda e: (np.sum(e, axis=1), np.prod(e, axis=1), np.sum(e)), e, exact=range(3))
    with pytest.raises(sg.ShapeError):
        compile(lambda e: np.max(e, axis=1))(e)


@pytest.mark.parametrize("n", [1, 7, 1023, 100_003])
def test_large_and_odd_reductions(n):
    x = special_values(n, F64, lo=-2, hi=2)
    x = np.where(np.isfinite(x), x, 0.25)
    check(lambda x: (np.sum(x * x), np.max(np.sin(x)), np.sum(x[::-1] * x)), x, rtol=1e-12)


# ----- layout ops -----


def test_layout_ops_match_evaluator():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 6))
    v = rng.normal(size=(6,))

    def f(x, v):
        return (x.T * 2, x.reshape(3, 8) + 1, x.reshape(24)[::-3], x[1:3, ::-2], x[None, :, None, :] * 1.5,
                np.broadcast_to(v, (4, 6)) - x, np.squeeze(x[:, 2:3]), np.concatenate([x, x * 2], axis=0),
                np.concatenate([v, v[::2]]), np.expand_dims(v, 0) @ x.T, np.stack([v, -v], axis=1),
                x.reshape(2, 2, 6).transpose(2, 0, 1).reshape(6, 4), np.exp(x)[:, 1:4].sum(axis=1))

    check(f, x, v, rtol=1e-14)


def test_gather_scatter_unslice_and_their_gradients():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(5, 4))
    idx = np.array([4, 0, -1, 2, 2])

    def f(x):
        return np.sum(np.tanh(x[idx]) * np.arange(4.0)) + np.sum(x[1:4:2, ::-1] ** 2) + np.sum(x[:, 3])

    check(lambda x: (x[idx], x[:, [3, 1]], x[idx] * 2.0), x, exact=(0, 1, 2))
    cf = check(sg.value_and_grad(f), x, rtol=1e-13)
    assert any(n.op.name == "scatter_add" for n in cf.graph.toposort())


# ----- contractions -----


@pytest.mark.parametrize("dtype", [F32, F64, np.dtype(np.int64)], ids=["f32", "f64", "i64"])
def test_matmul_shapes_and_transposes(dtype):
    rng = np.random.default_rng(9)
    a = (rng.normal(size=(5, 3)) * 4).astype(dtype)
    b = (rng.normal(size=(3, 4)) * 4).astype(dtype)
    c = (rng.normal(size=(2, 5, 3)) * 4).astype(dtype)
    v = (rng.normal(size=(3,)) * 4).astype(dtype)
    tol = 1e-5 if dtype == F32 else 1e-13

    def f(a, b, c, v):
        return (a @ b, b.T @ a.T, c @ b, a @ v, v @ b, c @ c.transpose(0, 2, 1), a[::2] @ b[:, 1:],
                (a * 2) @ (b + 1), np.einsum("ij,jk->ik", a, b), np.einsum("bij->bji", c), np.einsum("ij->", a),
                np.einsum("i,j->ij", v, v), np.einsum("bij,jk->bik", c, b))

    check(f, a, b, c, v, rtol=tol)


def test_matmul_without_blas_uses_loops(monkeypatch):
    import codegen.cpu.blas as rt

    rng = np.random.default_rng(10)
    a, b = rng.normal(size=(6, 5)), rng.normal(size=(5, 7))
    monkeypatch.setattr(rt, "_blas", {})
    cf = check(lambda a, b: np.tanh(a @ b), a, b, rtol=1e-13)
    assert cf.stats["gemm_kernels"] == 0


def test_matmul_with_empty_contraction():
    check(lambda a, b: a @ b, np.zeros((3, 0)), np.zeros((0, 4)), exact=(0,))


# ----- random bits -----


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_random_uniform_bitwise_equal(dtype):
    def f(key, x):
        u = snp.random_uniform(key, (7, 33), salt=5, dtype=dtype)
        return u, snp.dropout(x, 0.3, key) if hasattr(snp, "dropout") else x

    x = np.ones((7, 33), dtype)
    for key in (np.int64(0), np.int64(12345), np.int64(-7)):
        check(f, key, x, exact=(0, 1))


# ----- gradients -----


def _mlp_loss(params, x, y):
    h = np.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    return snp.mean(snp.cross_entropy(logits, y)) if hasattr(snp, "cross_entropy") else np.sum(logits ** 2)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_compiled_gradients_match_evaluator(dtype):
    rng = np.random.default_rng(11)
    tol = 2e-5 if dtype == F32 else 1e-12
    x = rng.normal(size=(1023,)).astype(dtype)

    def w1(x):
        return np.sum(np.tanh(x) * np.sin(x) + 0.5 * np.exp(-x * x))

    check(sg.value_and_grad(w1), x, rtol=tol)
    params = {"w1": rng.normal(size=(8, 16)).astype(dtype) * 0.3, "b1": np.zeros(16, dtype),
              "w2": rng.normal(size=(16, 4)).astype(dtype) * 0.3, "b2": np.zeros(4, dtype)}
    xb = rng.normal(size=(10, 8)).astype(dtype)
    yb = rng.integers(0, 4, size=10)
    check(sg.value_and_grad(_mlp_loss), params, xb, yb, rtol=tol * 10)

    def g(x):
        m = x.reshape(31, 33)
        return np.sum(np.max(m, axis=1) ** 2) + np.sum(np.prod(np.tanh(m[:3, :4]) + 2, axis=0)) \
            + np.sum(snp.softmax(m, axis=-1)[:, ::3] * np.cos(m[:, ::3])) + np.sum(np.maximum(m, 0.1) * m)

    check(sg.grad(g), x, rtol=tol * 10)
    # second derivative, compiled
    check(sg.grad(lambda x: sg.grad(lambda z: np.sum(np.sin(z) * z ** 3))(x).sum()), x[:7].copy(), rtol=tol * 10)


_OPS1 = ["tanh", "sin", "cos", "sigmoid", "neg", "sq", "expm", "sum0", "T", "rev"]
_OPS2 = ["add", "sub", "mul", "max", "where"]


@st.composite
def programs(draw):
    n_steps = draw(st.integers(1, 7))
    steps = []
    for _ in range(n_steps):
        if draw(st.booleans()):
            steps.append(("1", draw(st.sampled_from(_OPS1)), draw(st.integers(0, 9))))
        else:
            steps.append(("2", draw(st.sampled_from(_OPS2)), draw(st.integers(0, 9)), draw(st.integers(0, 9))))
    shape = draw(st.sampled_from([(3, 4), (1, 5), (4, 1), (7,), ()]))
    return steps, shape


def _run_program(steps, x, y):
    vals = [x, y]
    for s in steps:
        if s[0] == "1":
            a = vals[s[2] % len(vals)]
            op = s[1]
            if op == "sq":
                r = a * a
            elif op == "expm":
                r = np.exp(-a * a)
            elif op == "neg":
                r = -a
            elif op == "sum0":
                r = np.sum(a, axis=0, keepdims=True) if np.ndim(a) else a * 1.0
            elif op == "T":
                r = np.tanh(a.T * 1.5).T  # transposes fused both ways, shape kept
            elif op == "rev":
                r = a[::-1] if np.ndim(a) else a
            elif op == "sigmoid":
                r = snp.sigmoid(a) if hasattr(snp, "sigmoid") else np.tanh(a)
            else:
                r = getattr(np, op)(a)
        else:
            a, b = vals[s[2] % len(vals)], vals[s[3] % len(vals)]
            op = s[1]
            if op == "add":
                r = a + b
            elif op == "sub":
                r = a - b
            elif op == "mul":
                r = a * b
            elif op == "max":
                r = np.maximum(a, b)
            else:
                r = np.where(a > b, a, b * 0.5)
        vals.append(r)
    return sum(np.sum(v * (i + 1)) for i, v in enumerate(vals[2:])) + np.sum(x * 0.0)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.integers(0, 10_000))
def test_random_programs_and_gradients(prog, seed):
    steps, shape = prog
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    y = rng.normal(size=shape)

    def f(x, y):
        return _run_program(steps, x, y)

    check(sg.value_and_grad(f, argnums=(0, 1)), x, y, rtol=1e-11)


# ----- vectorization of the W1 kernel -----


def test_w1_kernel_is_vectorized_without_scalar_calls_in_vector_loops():
    def w1(x):
        return np.sum(np.tanh(x) * np.sin(x) + 0.5 * np.exp(-x * x))

    cf = compile(sg.value_and_grad(w1))
    x = np.linspace(-3, 3, 4096)
    v, g = cf(x)
    np.testing.assert_allclose(v, w1(x), rtol=1e-13)
    asm = cf.asm()
    assert re.search(r"v(mul|add|fmadd\d*|sub)pd\s+%(zmm|ymm)", asm), "no packed double arithmetic"
    ir_text = cf.llvm_ir()
    blocks = re.split(r"\n(?=[\w.]+:)", ir_text)
    # the vectorizer's loop, or the reduction's round loop whose lane loop is exactly one vector (lower.LoopPlan.lanes)
    vec = [b for b in blocks if re.match(r"(vec\.epilog\.)?vector\.body\d*:", b)
           or re.match(r"round\d+\.loop[\w.]*:", b) and re.search(r"call <\d+ x double> @", b)]
    assert vec, "the loop was not vectorized"
    for b in vec:
        for fn in ("exp", "sin", "cos", "tanh"):
            assert not re.search(rf"call double @\"?{fn}\"?\(", b), f"scalar {fn} call in a vector loop"
    assert re.search(r"call <\d+ x double> @", "\n".join(vec)), "no vector math calls in the vector loop"
    assert cf.stats["kernels"] == 1  # value and gradient fused into one loop


# ----- threads, arena, donation, caches -----


def test_parallel_kernels_match_single_thread():
    import codegen

    def w1(x):
        return np.sum(np.tanh(x) * np.sin(x) + 0.5 * np.exp(-x * x))

    x = np.random.default_rng(12).normal(size=400_001)  # enough work to split (PAR_MIN_WORK)
    g = sg.simplify(sg.trace(sg.value_and_grad(w1), x))
    e1 = codegen.compile_graph(g, nthreads=1)
    e2 = codegen.compile_graph(g, nthreads=2)
    assert e2.stats["parallel_kernels"] == 1 and e1.stats["parallel_kernels"] == 0
    (v1, g1), (v2, g2) = e1.run([x]), e2.run([x])
    assert_ulp(g1, g2, ulps=4)  # remainder elements use scalar libm, vector loops libmvec
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    np.testing.assert_allclose(v2, w1(x), rtol=1e-12)


def test_arena_reuse_and_peak_bytes():
    def f(x):
        s = snp.softmax(x, axis=1)
        t = np.exp(x) @ s.T
        return np.sum(t * 2.0), s

    x = np.random.default_rng(13).normal(size=(64, 32))
    cf = check(f, x, rtol=1e-12)
    st_ = cf.stats
    assert st_["arena_bytes"] > 0 and st_["peak_bytes"] >= x.nbytes
    assert st_["gemm_kernels"] == 1
    for _ in range(3):  # the pooled arena gives the same results
        np.testing.assert_allclose(cf(x)[0], f(x)[0], rtol=1e-12)


def test_donated_training_step_allocates_no_new_parameters():
    rng = np.random.default_rng(14)
    params = {"w1": rng.normal(size=(8, 16)) * 0.3, "b1": np.zeros(16), "w2": rng.normal(size=(16, 4)) * 0.3,
              "b2": np.zeros(4)}
    x = rng.normal(size=(10, 8))
    y = rng.integers(0, 4, size=10)

    def step(p, x, y):
        loss, g = sg.value_and_grad(_mlp_loss)(p, x, y)
        return {k: p[k] - 0.1 * g[k] for k in p}, loss

    ref = {k: v.copy() for k, v in params.items()}
    cstep = compile(step, donate_argnums=0)
    ids = {k: (id(v), v.ctypes.data) for k, v in params.items()}
    for _ in range(3):
        params, loss = cstep(params, x, y)
        ref, rloss = step(ref, x, y)
        np.testing.assert_allclose(loss, rloss, rtol=1e-12)
        for k in params:
            np.testing.assert_allclose(params[k], ref[k], rtol=1e-12)
    assert {k: (id(v), v.ctypes.data) for k, v in params.items()} == ids
    assert cstep.stats["donated_outputs"] == 4


def test_disk_object_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAPH_CACHE_DIR", str(tmp_path))

    def f(x):
        return np.cos(x) * np.sum(x)

    x = np.linspace(0, 1, 33)
    c1 = compile(f)
    r1 = c1(x)
    assert c1.stats["cache"] == "memory"
    files = list(tmp_path.glob("*.o"))
    data = files[0].read_bytes()
    assert data[:8] == b"SGOBJ\x01\x00\x00" and data[40:44] == b"\x7fELF"  # header, then plain object code
    c2 = compile(f)
    r2 = c2(x)
    assert c2.stats["cache"] == "disk"
    np.testing.assert_array_equal(r1, r2)
    assert "define" in c2.llvm_ir() and "entry" in c2.asm()


def test_damaged_disk_cache_is_recompiled_never_crashes(tmp_path):
    """An empty, truncated, overwritten or headerless cache file is compiled again, never loaded.

    The guard is checked in-process for every kind of damage, recompiling and rewriting in fresh processes
    for a truncated and a byte-flipped file (5 fresh processes cost ~1 CPU-second each).
    """
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import symgraph as sg
        cf = sg.compile(lambda x: np.sin(x) * 2)
        r = cf(np.linspace(0, 1, 9))
        np.testing.assert_allclose(r, np.sin(np.linspace(0, 1, 9)) * 2, rtol=1e-15)
        print(cf.stats["cache"])
    """)
    env = dict(os.environ, SYMGRAPH_CACHE_DIR=str(tmp_path))
    run = lambda: subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    first = run()
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["memory"]
    paths = sorted(tmp_path.glob("*.o"))  # the function's object and the runtime's support modules
    assert paths
    goods = {p: p.read_bytes() for p in paths}

    def damaged(good: bytes) -> dict:
        return {
            "empty": b"",
            "truncated": good[: len(good) // 2],
            "random": bytes(np.random.default_rng(0).integers(0, 256, len(good), dtype=np.uint8)),
            "flipped byte": good[:-9] + bytes([good[-9] ^ 0xFF]) + good[-8:],
            "headerless object": good[40:],
        }

    # every kind of damage fails the guard in front of LLVM's loader (in-process); two of them (one the header
    # check catches, one only the checksum) go through the whole recompile-and-rewrite path in fresh processes
    from codegen.jit import _unwrap_cached_object
    for p, good in goods.items():
        assert _unwrap_cached_object(good) is not None, p
        for what, bad in damaged(good).items():
            assert _unwrap_cached_object(bad) is None, (what, p)
    for what in ("truncated", "flipped byte"):
        for p, good in goods.items():
            p.write_bytes(damaged(good)[what])
        r = run()
        assert r.returncode == 0, (what, r.returncode, r.stderr[-2000:])
        assert r.stdout.split() == ["memory"], what
        for p, good in goods.items():
            assert p.read_bytes() == good, what  # rewritten with a valid file
    r = run()
    assert r.returncode == 0 and r.stdout.split() == ["disk"]


def test_inspection():
    cf = compile(lambda x: np.exp(x) + 1)
    cf(np.ones(8))
    assert re.search(r'define \w+ @"?entry"?\(', cf.llvm_ir())
    assert "entry" in cf.asm()
    assert cf.stats["kernels"] == 1 and cf.stats["nodes"] >= 3


# ----- wrong calls never crash (checked in a fresh process) -----


def test_wrong_calls_never_crash():
    script = textwrap.dedent("""
        import numpy as np
        import symgraph as sg
        from symgraph.compile import compile
        import codegen

        f = compile(lambda x, y: np.tanh(x) @ y)
        x, y = np.ones((3, 4)), np.ones((4, 2))
        f(x, y)
        bad = [
            (np.ones((3, 5)), y), (np.ones((4, 3)), y), (x.astype(np.float32), y), (x, None), ("a", y),
            (np.array(["a", "b"]), y), (x, [[1, 2]]), (np.ones((3, 4), dtype=object), y), (x.T, y),
            (np.ones((6, 8))[::2, ::2], y), (x.astype(">f8"), y), (np.ones(12).reshape(3, 4, order="F"), y),
            (np.frombuffer(bytearray(97), dtype=np.uint8)[1:].view(np.float64).reshape(3, 4), y),
        ]
        for args in bad:
            try:
                r = f(*args)
            except (sg.SymgraphError, TypeError, ValueError) as e:
                continue
            a = args[0] if isinstance(args[0], np.ndarray) and args[0].dtype.kind in "fi" else None
            a = None if a is None else np.asarray(a, dtype=np.float64)
            if a is not None and a.shape == (3, 4):
                assert np.allclose(r, np.tanh(a) @ np.asarray(args[1], dtype=np.float64)), args
        g = sg.simplify(sg.trace(lambda x: np.exp(x), np.ones(4)))
        exe = codegen.compile_graph(g)
        for bad_leaf in ([np.ones(5)], [np.ones(4, np.float32)], [np.ones((2, 2))], []):
            try:
                exe.run(bad_leaf)
            except sg.SymgraphError:
                pass
            else:
                raise SystemExit("pinned signature accepted a wrong argument")
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "SYMGRAPH_CACHE_DIR": ""})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("OK")


def test_more_layout_reduction_and_integer_paths():
    rng = np.random.default_rng(15)
    x = rng.normal(size=(4, 5, 6))
    idx = np.array([[0, 5, -2], [3, 3, 1]])

    def f(x):
        a = np.take(x, idx, axis=2)
        b = x[:, ::-2, 1:5:3]
        c = np.concatenate([x[:, :2], np.tanh(x[:, 3:])], axis=1)
        return a.sum() + (b ** 2).sum() + (c * 1.5).sum(), np.argmax(x, axis=1), a, c, \
            np.einsum("ijj->ij", x[:, :5, :5])

    check(f, x, rtol=1e-13)
    check(sg.grad(lambda x: f(x)[0]), x, rtol=1e-13)
    check(lambda x: (np.max(x, axis=(0, 2)), np.sum(x, axis=(0, 1)), np.prod(x, axis=(1,)), np.min(x, axis=0)), x,
          rtol=1e-13)
    check(sg.grad(lambda x: np.sum(np.concatenate([x, x[::-1], np.exp(x)], axis=0) ** 2)), x, rtol=1e-13)
    check(sg.grad(lambda x: np.sum(snp.take(x, np.array([1, 1, 0, 3]), axis=1) ** 2)), x, rtol=1e-13)
    i, j = rng.integers(-3, 4, 10), rng.integers(0, 5, 10)
    check(lambda i, j: (i ** j, np.int64(2) ** j), i, j, exact=(0, 1))


def test_fallback_without_vmath(monkeypatch):
    import codegen.llvm.context as lw

    monkeypatch.setattr(lw, "_vmath", None)
    x = special_values(257, F64, lo=-5, hi=5)
    y = special_values(257, F32, lo=-5, hi=5)
    check(_unary_all, x, ulps=4)
    check(_unary_all, y, ulps=4)
    check(lambda a, b: a ** b, np.abs(x[20:40]), x[40:60], ulps=4)


def test_concatenate_written_by_several_kernels_keeps_its_arena_slot():
    # prod's gradient builds concatenates whose pieces land in different kernels; the buffer must live
    # from the first piece written, not only from the last (found by tests/test_fuzz.py)
    x = np.array([0.54784675, -0.92085314, -1.8361059])
    u = np.array([0.00123015])
    check(sg.value_and_grad(lambda x: snp.sum(np.prod(x, axis=None, keepdims=True) * u) + 0.0), x, rtol=1e-13)


def test_a_stack_of_many_inputs_is_split_into_kernels_of_bounded_width():
    """np.stack of 100 arrays (the xs of a rolled loop over 100 weight matrices) is copied by several
    loop kernels of at most MAX_KERNEL_BUFFERS buffers each, not one loop with 100 loads per element
    (LLVM's optimizer is superlinear in that), and gives NumPy's values."""
    from codegen.kernels.partition import MAX_KERNEL_BUFFERS
    xs = [np.full((8, 8), float(i), np.float32) for i in range(100)]
    cf = sg.compile(lambda xs: np.stack(xs) * 2.0)
    np.testing.assert_array_equal(cf(xs), np.stack(xs) * 2.0)
    assert cf.stats["kernels"] >= -(-101 // MAX_KERNEL_BUFFERS)
