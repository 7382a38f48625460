"""The op table (STYLE.md 2.5): every registered primitive through the same checks.

For each `OpCase` (an op, a function that builds it, a NumPy reference, input
variants and each input's domain):
1. trace + evaluate equals NumPy, in float32 and float64, on non-square,
   0-d, size-1 and broadcasting shapes;
2. every node's shape and dtype rules equal what its `impl` returns;
3. `check_grads` in forward and reverse mode to order 2 (float64);
4. the VJP and the JVP agree: <u, J v> = <J^T u, v> to rounding;
5. non-differentiable ops have a zero derivative (not an error);
6. the batching rule equals a loop over the batch (vmap), per argument;
plus a completeness test: a registered op without a case fails.
(Check 5 of STYLE.md, LLVM parity, lives in the codegen tests.)
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph import lax as L
from symgraph.batching import BATCH_RULES, LOOP_FALLBACK_OPS, vmap
from symgraph.custom import custom_jvp, custom_vjp
from symgraph.interpreter import check_arguments
from symgraph.ops import OPS
from symgraph.testing import check_vjp_jvp
from symgraph.tree import tree_flatten

from opcase import (  # noqa: F401  (tests/opcase.py)
    OpCase, above_m1, binary_case as _binary, boolean, extra_cases, indices, integers, key, nonzero, pos, real,
    reduction_case as _reduction, small_ints, unary_case as _unary, unit, with_nans,
)

# the input domains, `OpCase` and the row builders live in tests/opcase.py (shared with tests/cases_*.py)


def _erf_ref(x):
    """erf by composite Simpson quadrature of 2/sqrt(pi) exp(-t^2) on [0, x] (independent of math.erf)."""
    x64 = np.asarray(x, np.float64)
    t = np.linspace(0.0, 1.0, 2001)
    w = np.ones_like(t)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    vals = np.exp(-(x64[..., None] * t) ** 2) * w
    return (x64 * vals.sum(-1) * (t[1] - t[0]) / 3.0 * 2.0 / math.sqrt(math.pi)).astype(np.asarray(x).dtype)


_M64 = (1 << 64) - 1


def _splitmix(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _random_ref(k, shape, salt, dtype):
    """Counter-based uniforms, recomputed with Python integers."""
    g = 0x9E3779B97F4A7C15
    base = _splitmix(int(k) ^ ((salt * g) & _M64))
    n = int(np.prod(shape, dtype=np.int64))
    u = [(_splitmix((base + i * g) & _M64) >> 11) / 2.0**53 for i in range(n)]
    return np.asarray(u, np.float64).astype(dtype).reshape(shape)


def _scatter_ref(u, i, shape, axis):
    out = np.zeros(shape, u.dtype)
    i = np.where(i < 0, i + shape[axis], i)
    o = np.moveaxis(out, axis, 0)
    uu = np.moveaxis(u.reshape(shape[:axis] + (i.size,) + shape[axis + 1:]), axis, 0)
    for j, ix in enumerate(i.reshape(-1)):
        o[ix] += uu[j]
    return out


def _unslice_ref(x, shape, starts, stops, steps):
    out = np.zeros(shape, x.dtype)
    out[tuple(slice(a, None if b < 0 else b, c) for a, b, c in zip(starts, stops, steps))] = x
    return out


@custom_vjp
def cv_sin(x):
    return np.sin(x)


cv_sin.defvjp(lambda x: (np.sin(x), np.cos(x)), lambda c, g: (g * c,))


@custom_jvp
def cj_softplus(x):
    return np.log1p(np.exp(x))


@cj_softplus.defjvp
def _cj_softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return cj_softplus(x), t * snp.sigmoid(x)


def _other_float(x):
    return np.float32 if np.dtype(x.dtype) == np.float64 else np.float64


_CONST = np.arange(30.0).reshape(2, 3, 5) / 7.0

CASES = [
    # sources
    OpCase("input", lambda x: x, lambda x: x, [(((2, 3, 5),), {}), (((),), {})], (real,)),
    OpCase("constant", lambda x: L.binary("add", x, _CONST.astype(x.dtype)), lambda x: x + _CONST.astype(x.dtype),
           [(((2, 3, 5),), {}), (((5,),), {})], (real,)),
    # unary math
    _unary("exp", real, np.exp),
    _unary("log", pos, np.log),
    _unary("log1p", above_m1, np.log1p),
    _unary("expm1", real, np.expm1),
    _unary("sqrt", pos, np.sqrt),
    _unary("sin", real, np.sin),
    _unary("cos", real, np.cos),
    _unary("tan", unit, np.tan),
    _unary("tanh", real, np.tanh),
    _unary("sigmoid", real, lambda x: (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(x.dtype)),
    _unary("erf", real, _erf_ref),
    _unary("arcsinh", real, lambda x: (np.sign(x) * np.log(np.abs(x) + np.sqrt(x * x + 1.0))).astype(x.dtype)),
    _unary("abs", nonzero, np.abs),
    # piecewise constant and boolean unary ops
    _unary("sign", real, np.sign, order=0),
    _unary("floor", lambda r, s, d: (3 * real(r, s, d)).astype(d), np.floor, order=0),
    _unary("isnan", with_nans, np.isnan, order=0),
    OpCase("logical_not", lambda x: L.unary("logical_not", x, float_op=False), np.logical_not,
           [(((2, 3, 5),), {}), (((),), {})], (boolean,), order=0),
    OpCase("neg", lambda x: L.neg(x), np.negative, [(((2, 3, 5),), {}), (((),), {}), (((1,),), {})], (real,)),
    OpCase("copy", lambda x: L.bind("copy", x, tag=("test", 1)), lambda x: x.copy(),
           [(((2, 3, 5),), {}), (((),), {})], (real,)),
    OpCase("stop_gradient", snp.stop_gradient, lambda x: x, [(((2, 3, 5),), {}), (((),), {})], (real,), order=0),
    OpCase("cast", lambda x: L.cast(L.cast(x, _other_float(x)), x.dtype), lambda x: x.astype(_other_float(x)).astype(x.dtype),
           [(((2, 3, 5),), {}), (((),), {})], (real,), check_kw={"eps": 1e-2, "atol": 1e-4, "rtol": 1e-4},
           ip_rtol=1e-6, name="float"),  # tangents pass through float32: agreement to float32 rounding
    OpCase("cast", lambda i: L.cast(i, np.float64), lambda i: i.astype(np.float64), [(((2, 3, 5),), {}), (((),), {})],
           (integers,), order=0, dtypes=(np.float64,), name="int"),
    # binary
    _binary("add", (real, real), np.add),
    _binary("sub", (real, real), np.subtract),
    _binary("mul", (real, real), np.multiply),
    _binary("div", (real, nonzero), np.true_divide, float_op=True),
    _binary("pow", (pos, real), np.power),
    _binary("maximum", (real, real), np.maximum),
    _binary("minimum", (real, real), np.minimum),
    *[_binary(nm, (small_ints, small_ints), fn, order=0) for nm, fn in
      [("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal), ("eq", np.equal),
       ("ne", np.not_equal)]],
    *[OpCase(nm, lambda x, y, nm=nm: L.binary(nm, x, y), fn, [(((2, 3, 5), (2, 3, 5)), {}), (((), ()), {}),
                                                             (((2, 3, 5), (3, 1)), {})],
             (boolean, boolean), order=0) for nm, fn in [("logical_and", np.logical_and),
                                                         ("logical_or", np.logical_or)]],
    OpCase("where", L.where, np.where,
           [(((2, 3, 5),) * 3, {}), (((3, 1), (2, 3, 5), ()), {}), (((), (), ()), {}), (((1,), (4,), (1,)), {})],
           (boolean, real, real)),
    _binary("fmod", (real, nonzero), np.fmod),
    OpCase("muladd", lambda a, b, c: L.bind("muladd", a, b, c), lambda a, b, c: a * b + c,
           [(((2, 3, 5),) * 3, {}), (((),) * 3, {}), (((1,),) * 3, {})], (real, real, real)),
    OpCase("random_uniform",
           lambda k, dtype: tuple(L.bind("random_uniform", k, shape=s, salt=7, dtype=np.dtype(dtype))
                                  for s in [(2, 3, 5), (), (1,)]),
           lambda k, dtype: tuple(_random_ref(k, s, 7, dtype) for s in [(2, 3, 5), (), (1,)]),
           [(((),), {"dtype": np.float64}), (((),), {"dtype": np.float32})], (key,), order=0),
    # contractions
    OpCase("matmul", L.matmul, np.matmul,
           [(((2, 3), (3, 5)), {}), (((4, 2, 3), (4, 3, 5)), {}), (((3,), (3, 5)), {}), (((2, 3), (3,)), {}),
            (((4, 2, 3), (3, 5)), {}), (((1, 2, 3), (4, 3, 5)), {}), (((3,), (3,)), {})], (real, real),
           grad_variants=4),
    *[OpCase("einsum", functools.partial(snp.einsum, spec), functools.partial(np.einsum, spec), [(shapes, {})],
             (real,) * len(shapes), name=spec.replace(",", "_").replace("->", "_to_"))
      for spec, shapes in [("ij,jk->ik", ((2, 3), (3, 5))), ("bij,bjk->bik", ((4, 2, 3), (4, 3, 5))),
                           ("ij->", ((2, 3),)), ("i,j->ij", ((2,), (3,))), ("ij,jk,kl->il", ((2, 3), (3, 5), (5, 4))),
                           ("ijk->kj", ((2, 3, 5),))]],
    # reductions
    _reduction("sum", np.sum),
    _reduction("max", np.max),
    _reduction("min", np.min),
    _reduction("prod", np.prod, dom=nonzero),
    OpCase("argmax", lambda x, axis: snp.argmax(x, axis), lambda x, axis: np.argmax(x, axis),
           [(((2, 3, 5),), {"axis": 1}), (((2, 3, 5),), {"axis": None}), (((1,),), {"axis": 0})], (real,), order=0),
    # layout
    OpCase("reshape", L.reshape, np.reshape,
           [(((2, 3, 5),), {"shape": (6, 5)}), (((2, 3, 5),), {"shape": (5, 3, 2)}), (((),), {"shape": (1, 1)}),
            (((1,),), {"shape": ()})], (real,)),
    OpCase("expand_dims", lambda x, axes: L.bind("expand_dims", x, axes=axes), lambda x, axes: np.expand_dims(x, axes),
           [(((2, 3, 5),), {"axes": (0, 2)}), (((),), {"axes": (0,)}), (((4,),), {"axes": (1,)})], (real,)),
    OpCase("squeeze", lambda x, axes: L.bind("squeeze", x, axes=axes), lambda x, axes: np.squeeze(x, axes),
           [(((2, 1, 5),), {"axes": (1,)}), (((1,),), {"axes": (0,)}), (((1, 3, 1),), {"axes": (0, 2)})], (real,)),
    OpCase("transpose", L.transpose, lambda x, perm: np.transpose(x, perm),
           [(((2, 3, 5),), {"perm": (2, 0, 1)}), (((3, 1),), {"perm": (1, 0)}), (((2, 3, 5),), {"perm": (1, 0, 2)})],
           (real,)),
    OpCase("broadcast_to", L.broadcast_to, np.broadcast_to,
           [(((3, 1),), {"shape": (2, 3, 5)}), (((),), {"shape": (2, 3)}), (((1,),), {"shape": (4,)}),
            (((5,),), {"shape": (2, 3, 5)})], (real,)),
    OpCase("slice", lambda x, idx: x[idx], lambda x, idx: x[idx],
           [(((2, 3, 5),), {"idx": (slice(None), slice(1, None), slice(None, None, 2))}),
            (((7,),), {"idx": (slice(None, None, -1),)}), (((7,),), {"idx": (slice(5, 0, -2),)}),
            (((2, 3, 5),), {"idx": (1, slice(0, 2), -1)}), (((3,),), {"idx": (slice(1, 2),)})], (real,)),
    OpCase("unslice", lambda x, **p: L.bind("unslice", x, **p), _unslice_ref,
           [(((2, 2, 3),), {"shape": (2, 3, 5), "starts": (0, 1, 0), "stops": (2, 3, 5), "steps": (1, 1, 2)}),
            (((3,),), {"shape": (7,), "starts": (6,), "stops": (-1,), "steps": (-3,)}),
            (((1,),), {"shape": (1,), "starts": (0,), "stops": (1,), "steps": (1,)})], (real,)),
    OpCase("gather", lambda x, i, axis: L.bind("gather", x, i, axis=axis), lambda x, i, axis: np.take(x, i, axis),
           [(((5, 3), (7,)), {"axis": 0}), (((2, 3, 5), (2, 2)), {"axis": 1}), (((4,), ()), {"axis": 0}),
            (((2, 3, 5), (4,)), {"axis": 2})], (real, indices(3))),
    OpCase("scatter_add", lambda u, i, shape, axis: L.bind("scatter_add", u, i, shape=shape, axis=axis), _scatter_ref,
           [(((7, 3), (7,)), {"shape": (3, 3), "axis": 0}), (((2, 2, 2, 5), (2, 2)), {"shape": (2, 3, 5), "axis": 1}),
            (((), ()), {"shape": (3,), "axis": 0})], (real, indices(3))),
    OpCase("concatenate", lambda *xs, axis: snp.concatenate(xs, axis), lambda *xs, axis: np.concatenate(xs, axis),
           [(((2, 3, 5), (2, 1, 5)), {"axis": 1}), (((3,), (4,), (1,)), {"axis": 0})], (real, real, real)),
    # checkpointing markers (identities, removed by apply_checkpoint)
    *[OpCase(nm, lambda x, nm=nm, **p: L.bind(nm, x, **p), lambda x, **p: x,
             [(((2, 3, 5),), {k: v}), (((),), {k: v})], (real,))
      for nm, k, v in [("checkpoint_name", "name", "h1"), ("remat_begin", "region", 3), ("remat_end", "region", 3)]],
    # user-defined derivative rules
    OpCase("custom_vjp_call", cv_sin, np.sin, [(((2, 3, 5),), {}), (((),), {})], (real,)),
    OpCase("custom_jvp_call", cj_softplus, lambda x: np.log1p(np.exp(x)), [(((2, 3, 5),), {}), (((),), {})], (real,)),
]
CASES += extra_cases()  # the rows of tests/cases_*.py, one file per family of ops


def _args(case: OpCase, shapes: tuple, dtype: Any, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    return tuple(d(rng, s, dtype) for d, s in zip(case.domain, shapes))


def _float_pos(args: tuple) -> list[int]:
    return [i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc"]


def _closure(case: OpCase, params: dict, args: tuple) -> tuple[Callable, tuple]:
    """fn of the float arguments only (the others are closed over)."""
    fpos = _float_pos(args)

    def f(*fargs):
        full = list(args)
        for p, a in zip(fpos, fargs):
            full[p] = a
        return case.fn(*full, **params)

    return f, tuple(args[p] for p in fpos)


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


EVAL = [pytest.param(c, s, p, d, id=f"{c.id}-v{k}-{np.dtype(d).name}")
        for c in CASES for k, (s, p) in enumerate(c.variants) for d in c.dtypes]
GRAD = [pytest.param(c, s, p, id=f"{c.id}-v{k}") for c in CASES if c.order > 0
        for k, (s, p) in enumerate(c.variants[:c.grad_variants])]
# Non-differentiable ops with a float operand (ops over bool/int operands only have nothing to differentiate).
NONDIFF = [pytest.param(c, s, p, id=f"{c.id}-v{k}") for c in CASES if c.order == 0
           for k, (s, p) in enumerate(c.variants[:1]) if _float_pos(_args(c, s, np.float64))]
BATCH = [pytest.param(c, s, p, id=f"{c.id}-v{k}") for c in CASES for k, (s, p) in enumerate(c.variants[:2])]


# ----- 0. completeness -----


def test_every_registered_op_has_a_case():
    missing = sorted(set(OPS) - {c.op for c in CASES})
    assert not missing, f"ops without an OpCase in tests/test_ops.py or a tests/cases_*.py: {missing}"


def test_every_op_has_a_batching_rule_or_a_declared_loop_fallback():
    missing = sorted(n for n, op in OPS.items() if op.nin != 0 and n not in BATCH_RULES and n not in LOOP_FALLBACK_OPS
                     and op.kind != "elementwise" and "batch" not in op.extra)
    assert not missing, f"ops batched by the O(B) loop without being declared in LOOP_FALLBACK_OPS: {missing}"


def test_differentiable_ops_have_both_rules():
    bad = sorted(n for n, op in OPS.items() if op.differentiable and op.nin != 0 and (op.vjp is None or op.jvp is None))
    assert not bad, f"differentiable ops missing a VJP or JVP rule: {bad}"


# ----- 1. evaluation equals NumPy -----


@pytest.mark.parametrize("case,shapes,params,dtype", EVAL)
def test_evaluation_matches_numpy(case, shapes, params, dtype):
    args = _args(case, shapes, dtype)
    g = sg.trace(functools.partial(case.fn, **params), *args)
    assert case.op in {n.op.name for n in g}, f"the graph of case {case.id} does not contain {case.op}"
    got = tree_flatten(g.evaluate(*args))[0]
    want = tree_flatten(case.ref(*args, **params))[0]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b)
        assert a.shape == b.shape
        assert a.dtype == b.dtype, f"{case.id}: result dtype {a.dtype}, NumPy gives {b.dtype}"
        np.testing.assert_allclose(a, b, **_tol(dtype))
    # the eager path (no tracer: NumPy implementations) agrees too
    for a, b in zip(tree_flatten(case.fn(*args, **params))[0], want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **_tol(dtype))


# ----- 2. shape and dtype rules equal what impl returns -----


@pytest.mark.parametrize("case,shapes,params,dtype", EVAL)
def test_shape_and_dtype_rules_match_impl(case, shapes, params, dtype):
    args = _args(case, shapes, dtype)
    g = sg.trace(functools.partial(case.fn, **params), *args)
    vals = dict(zip(g.inputs, check_arguments(g, args)))
    for n in g.toposort():
        if n in vals:
            continue
        v = np.asarray(n.op.impl(*[vals[x] for x in n.inputs], **n.params))
        assert v.shape == n.shape, f"{n.op.name}: shape rule {n.shape}, impl returns {v.shape}"
        assert v.dtype == n.dtype, f"{n.op.name}: dtype rule {n.dtype}, impl returns {v.dtype}"
        vals[n] = v
    g.check()


# ----- 3. check_grads to order 2 in both modes -----


@pytest.mark.parametrize("case,shapes,params", GRAD)
def test_check_grads_order2_fwd_and_rev(case, shapes, params):
    args = _args(case, shapes, np.float64, seed=1)
    f, fargs = _closure(case, params, args)
    sg.check_grads(f, fargs, order=case.order, modes=("fwd", "rev"), **case.check_kw)


# ----- 4. VJP / JVP inner-product consistency -----


@pytest.mark.parametrize("case,shapes,params", GRAD)
def test_vjp_jvp_inner_product(case, shapes, params):
    args = _args(case, shapes, np.float64, seed=2)
    f, fargs = _closure(case, params, args)
    lhs, rhs = check_vjp_jvp(f, fargs, rtol=case.ip_rtol, seed=3)
    assert lhs != 0.0  # a vacuous identity (both zero) would not test anything


# ----- 5. non-differentiable ops: zero derivative, not an error -----


@pytest.mark.parametrize("case,shapes,params", NONDIFF)
def test_nondifferentiable_ops_have_zero_derivative(case, shapes, params):
    args = _args(case, shapes, np.float64)
    f, fargs = _closure(case, params, args)

    def loss(*a):
        return sum(snp.sum(L.cast(o, np.float64)) for o in tree_flatten(f(*a))[0])

    grads = sg.grad(loss, argnums=tuple(range(len(fargs))))(*fargs)
    for gr, a in zip(grads, fargs):
        assert gr.shape == np.shape(a)
        np.testing.assert_array_equal(gr, 0.0)


# ----- 6. batching rule == loop over the batch -----


@pytest.mark.parametrize("case,shapes,params", BATCH)
def test_batching_rule_matches_loop(case, shapes, params):
    nb = 3
    examples = [_args(case, shapes, np.float64, seed=10 + j) for j in range(nb)]
    fn = functools.partial(case.fn, **params)
    nargs = len(shapes)
    patterns = [(0,) * nargs] + ([tuple(0 if j == i else None for j in range(nargs)) for i in range(nargs)]
                                 if nargs > 1 else [])
    for axes in patterns:
        args = tuple(np.stack([np.asarray(e[i]) for e in examples]) if ax == 0 else examples[0][i]
                     for i, ax in enumerate(axes))
        got = tree_flatten(vmap(fn, in_axes=axes)(*args))[0]
        per = [tree_flatten(case.ref(*[e[i] if ax == 0 else examples[0][i] for i, ax in enumerate(axes)], **params))[0]
               for e in examples]
        for k, a in enumerate(got):
            want = np.stack([np.asarray(p[k]) for p in per])
            assert a.shape == want.shape, (axes, a.shape, want.shape)
            np.testing.assert_allclose(a, want, rtol=1e-12, atol=1e-13, err_msg=f"in_axes={axes}")


def test_batched_graph_size_does_not_grow_with_batch():
    """vmap builds one node per op (rules, not a loop): same node count for batch 2 and 200."""
    def f(x, w):
        return snp.sum(snp.tanh(x @ w) ** 2, axis=-1)

    w = np.ones((3, 4))
    n2 = len(sg.trace(vmap(f, in_axes=(0, None)), np.ones((2, 5, 3)), w))
    n200 = len(sg.trace(vmap(f, in_axes=(0, None)), np.ones((200, 5, 3)), w))
    assert n2 == n200


# ----- op-specific behaviour the table cannot express -----


def test_einsum_repeated_index_forward_mode_works_reverse_mode_names_the_limit():
    x = np.arange(9.0).reshape(3, 3)
    f = functools.partial(snp.einsum, "ii->i")
    np.testing.assert_allclose(sg.jvp(f, (x,), (np.eye(3),))[1], np.ones(3))
    # np.einsum takes the diagonal before the primitive (issue 17), so both modes work there;
    # the primitive itself, bound with a repeated index, still names its limit in reverse mode
    np.testing.assert_array_equal(sg.grad(lambda x: snp.sum(f(x)))(x), np.eye(3))
    with pytest.raises(sg.UnsupportedOpError, match="einsum"):
        sg.grad(lambda x: snp.sum(L.bind("einsum", x, spec="ii->i")))(x)


def test_gather_repeated_indices_accumulate_in_the_gradient():
    x = np.arange(4.0)
    idx = np.array([0, 2, 2, -1, 2])
    g = sg.grad(lambda x: snp.sum(snp.take(x, idx) * np.arange(1.0, 6.0)))(x)
    np.testing.assert_allclose(g, [1.0, 0.0, 2 + 3 + 5, 4.0])


def test_prod_gradient_is_exact_with_zeros():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]])
    g = sg.grad(lambda x: snp.sum(snp.prod(x, axis=1)))(x)
    np.testing.assert_allclose(g, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [8.0, 4.0, 2.0]])
    sg.check_grads(lambda x: snp.prod(x, axis=1), (np.array([[2.0, 0.0, 3.0], [1.0, 2.0, 4.0]]),), order=2)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_exp2_accuracy_over_the_whole_range(backend):
    """exp2 used to be exp(x ln 2): 609 ulp off near x = 965 in float64. Now <= 2 ulp (float64) and <= 6 ulp
    (float32) against NumPy from the subnormal range to overflow; inf, -inf, NaN, +-0 as NumPy; the
    derivative is exp2(x) ln 2."""
    rng = np.random.default_rng(21)
    for dt, lim, budget in ((np.float64, 1080.0, 2), (np.float32, 160.0, 6)):
        x = np.concatenate([rng.uniform(-lim, lim, 50000), [965.123456789, 1023.999, 1024.0, -1022.3, -1074.0,
                                                              127.99, 128.0, -126.2, -149.0, 0.0, -0.0]]).astype(dt)
        with np.errstate(all="ignore"):
            want = np.exp2(x)
        got = sg.compile(np.exp2, backend=backend)(x)
        assert got.dtype == dt
        fin = np.isfinite(want) & (want >= np.finfo(dt).tiny)
        ulp = np.abs(got[fin].astype(np.float64) - want[fin]) / np.spacing(want[fin]).astype(np.float64)
        assert ulp.max() <= budget, (dt, float(ulp.max()), x[fin][np.argmax(ulp)])
        np.testing.assert_array_equal(got[~np.isfinite(want)], want[~np.isfinite(want)])
        special = np.array([np.inf, -np.inf, np.nan, 0.0], dt)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(sg.compile(np.exp2, backend=backend)(special), np.exp2(special))
    x = np.array([0.3, -2.5, 10.2, -30.7])
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.exp2(x)))(x), np.exp2(x) * np.log(2.0), rtol=1e-14)


# ----- 7. the facts in each record hold (passes trust them without looking at names) -----

FACT_CASES = [pytest.param(c, s, p, id=f"{c.id}-v{k}") for c in CASES for k, (s, p) in enumerate(c.variants)]


def _with_zeros(a: np.ndarray, rng, signed: bool) -> np.ndarray:
    """a with some elements set to +0.0 and, if `signed`, some to -0.0 (float arrays only)."""
    a = np.array(a, copy=True)
    if a.dtype.kind != "f" or a.size == 0:
        return a
    flat = a.reshape(-1)
    pick = rng.random(flat.size)
    flat[pick < 0.25] = 0.0
    if signed:
        flat[pick > 0.75] = -0.0
    return a


def _node_values(case: OpCase, params: dict, args: tuple) -> tuple[list, dict]:
    """The nodes of `case.op` in the traced graph and every node's value (by the ops' impls)."""
    g = sg.trace(functools.partial(case.fn, **params), *args)
    vals = dict(zip(g.inputs, check_arguments(g, args)))
    with np.errstate(all="ignore"):
        for n in g.toposort():
            if n not in vals:
                vals[n] = np.asarray(n.op.impl(*[vals[x] for x in n.inputs], **n.params))
    return [n for n in g.toposort() if n.op.name == case.op], vals


def _neg_zero(v: np.ndarray) -> bool:
    return v.dtype.kind == "f" and bool(np.any((v == 0) & np.signbit(v)))


@pytest.mark.parametrize("case,shapes,params", FACT_CASES)
def test_declared_facts_hold_on_values(case, shapes, params):
    """magnitude, copies_input, identity_of, commutative and neg_zero, checked on the op's own values."""
    op = OPS[case.op]
    rng = np.random.default_rng(5)
    for dtype in case.dtypes:
        for variant in range(3):  # plain inputs, with +-0.0, with +0.0 only
            args = _args(case, shapes, dtype, seed=variant)
            if variant:
                args = tuple(_with_zeros(a, rng, signed=variant == 1) for a in args)
            try:
                nodes, vals = _node_values(case, params, args)
            except sg.LinAlgError:  # zeros made a factorization fail: no values to check the facts on
                assert variant, f"{case.id}: plain inputs must factor"
                continue
            assert nodes, f"the graph of case {case.id} does not contain {case.op}"
            for n in nodes:
                v, ins = vals[n], [vals[x] for x in n.inputs]
                if op.magnitude == "unit" and v.size and v.dtype.kind != "c":  # laws of real values
                    assert np.all(np.isnan(v) | (np.abs(v) <= 1)), f"{case.id}: |f(x)| > 1"
                if op.magnitude == "input" and v.size and ins[0].size and v.dtype.kind != "c":
                    assert np.nanmax(np.abs(v)) <= np.nanmax(np.abs(ins[0])), f"{case.id}: max |f(x)| > max |x|"
                if op.copies_input and v.size:
                    assert np.isin(v[~np.isnan(v)] if v.dtype.kind == "f" else v, ins[0]).all(), \
                        f"{case.id}: an output element is not an input element"
                if op.identity_of is not None:
                    np.testing.assert_array_equal(v, ins[op.identity_of])
                if op.commutative and len(ins) >= 2 and ins[0].shape == ins[1].shape and ins[0].dtype.kind != "c":
                    swapped = np.asarray(op.impl(ins[1], ins[0], *ins[2:], **n.params))
                    np.testing.assert_array_equal(swapped, v)
                    if v.dtype.kind == "f":
                        np.testing.assert_array_equal(np.signbit(swapped), np.signbit(v))
                if op.neg_zero == "never":
                    assert not _neg_zero(v), f"{case.id}: declared never -0.0, gave -0.0"
                elif isinstance(op.neg_zero, tuple) and not any(_neg_zero(ins[i]) for i in op.neg_zero):
                    assert not _neg_zero(v), f"{case.id}: -0.0 although inputs {op.neg_zero} hold none"


def test_facts_that_passes_need_are_declared():
    """The facts that no value test can see: each op has the cost, view and lowering facts its kind needs."""
    from symgraph.ops.core import CHEAP, FREE, TRANSCENDENTAL

    bad = []
    for name, op in OPS.items():
        if op.math is not None and op.cost != TRANSCENDENTAL:
            bad.append(f"{name}: a math-library function must weigh TRANSCENDENTAL")
        if op.math is not None and not (op.math.libm or op.math.via):
            bad.append(f"{name}: MathFn needs a libm name or the function it is built on")
        if op.kind in ("elementwise", "reduction") and op.identity_of is None and op.cost < CHEAP:
            bad.append(f"{name}: arithmetic cannot be free")
        if (op.kind == "source" or op.view is not None or op.identity_of is not None) and op.cost != FREE:
            bad.append(f"{name}: sources, views and identities are free")
        if op.kind == "contraction" and op.flops is None:
            bad.append(f"{name}: a contraction needs its flops rule")
        if op.marker and op.identity_of is None:
            bad.append(f"{name}: a checkpoint marker is an identity")
        if op.view is not None and op.kind != "layout":
            bad.append(f"{name}: a view is a layout op")
    assert not bad, bad


def test_every_transcendental_lowers_natively():
    """An op with `math` lowers through the LLVM backend with no per-op code: an emitter and a vector-math entry."""
    pytest.importorskip("llvmlite")
    from codegen.llvm import emitters as lower
    from codegen.llvm import vmath

    for name, op in OPS.items():
        if op.math is not None:
            assert lower.has_emitter(name, op.kind), name
            assert vmath.FUNCTIONS[name] == op.nin, name
