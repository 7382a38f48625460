"""Tests of symgraph.passes.simplify: each rule against a hand-built expected graph
(compared by identity in the same builder), tags and metadata, the polynomial
stage on nested derivatives of tanh, scale, and hypothesis property tests
(random programs evaluate the same before and after simplification)."""

from __future__ import annotations

import sys
import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symgraph as sg
import symgraph.numpy as snp
from symgraph import lax as L
from symgraph.errors import SourceLocation
from symgraph.ir import Builder, Graph, meta, role, source_location
from symgraph.ops import OPS
from symgraph.passes.simplify import GENERIC_RULES, PIPELINE, RULES, simplify
from symgraph.tracing import make_input

# ----------------------------------------------------------------------------- helpers


def inp(shape=(), dtype=np.float64, name="x"):
    return make_input(shape, dtype, 0, name)


def simp(b, inputs, outputs, **kw):
    """Simplify Graph(inputs, outputs) into builder b; return the new outputs."""
    return simplify(Graph(list(inputs), list(outputs)), builder=b, **kw).outputs


def const(v, dtype=np.float64):
    return L.constant(np.asarray(v, dtype))


def splat(v, shape, dtype=np.float64):
    return L.broadcast_to(const(v, dtype), shape)


def ops_of(g):
    return [n.op.name for n in g.toposort()]


def n_ops(g):
    """Operations, not counting inputs, constants and broadcast constants (PyTensor's count)."""
    return sum(1 for n in g.toposort() if n.op.kind != "source"
               and not (n.op.name == "broadcast_to" and n.inputs[0].op.name == "constant"))


# ----------------------------------------------------------------------------- rules, by identity


def test_rule_tables_are_keyed_by_registered_ops_and_commented():
    import inspect

    for name, fns in RULES.items():
        assert name in OPS, name
        for fn in fns:
            assert "->" in inspect.getsource(fn), f"rule {fn.__name__} has no identity comment"
    assert [name for name, _ in PIPELINE] == ["rewrite", "polynomial"]
    assert GENERIC_RULES


def test_mul_one_and_minus_one():
    with Builder() as b:
        x = inp()
        y, z, w = simp(b, [x], [x * 1.0, 1.0 * x, x * -1.0])
        assert y is x and z is x
        assert w is b.make(OPS["neg"], (x,))


def test_add_zero_respects_negative_zero():
    with Builder() as b:
        x = inp((3,))
        e = snp.exp(x)
        r1, r2, r3 = simp(b, [x], [x + (-0.0), x + 0.0, e + 0.0])
        assert r1 is x  # x + (-0.0) is x for every x
        assert r2.op.name == "add"  # x may be -0.0, and -0.0 + 0.0 = +0.0
        assert r3 is e  # exp never returns -0.0
        (r4,) = simp(b, [x], [x + 0.0], assume_finite=True)
        assert r4 is x


def test_fan_out_of_slices_becomes_one_concatenate():
    # the gradient of a function of x[:, 0:3], x[:, 3:5], x[:, 6:] (a batched parameter vector) sums zero-padded
    # cotangents; simplified, it is one concatenate (zeros for the unread x[:, 5]) with the same bits
    def f(x):
        a, b, c = x[:, 0:3], x[:, 3:5], x[:, 6:]
        return np.sum(np.sin(a) * 2.0) + np.sum(b * b) + np.sum(np.cos(c))

    x = np.random.default_rng(0).standard_normal((4, 9))
    x[0, 3] = -0.0  # its cotangent 2 * -0.0 is -0.0; the original adds the padding's +0.0 to it: +0.0 in both
    g = sg.trace(sg.grad(f), x)
    s = simplify(g)
    names = ops_of(s)
    assert "unslice" not in names and names.count("concatenate") == 1, names
    want, got = g.evaluate(x), s.evaluate(x)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    assert not np.signbit(got[:, 5]).any() and not np.signbit(got[0, 3])


def _unslice(x, starts, stops):
    return L.bind("unslice", x, shape=(2, 5), starts=starts, stops=stops, steps=(1, 1))


def test_same_box_unslices_add_inside_the_box():
    with Builder() as b:
        x, y = inp((2, 3), name="x"), inp((2, 3), name="y")
        (r,) = simp(b, [x, y], [_unslice(x, (0, 1), (2, 4)) + _unslice(y, (0, 1), (2, 4))])
        assert r.op.name == "unslice" and r.inputs[0].op.name == "add"
    with Builder() as b:
        x, y = inp((2, 3), name="x"), inp((2, 3), name="y")
        (r,) = simp(b, [x, y], [_unslice(x, (0, 1), (2, 4)) + _unslice(y, (0, 2), (2, 5))])
        assert r.op.name == "add"  # overlapping boxes stay as they are
    with Builder() as b:
        x, y = inp((2, 3), name="x"), inp((2, 2), name="y")
        ux = _unslice(x, (0, 0), (2, 3))
        (r, keep) = simp(b, [x, y], [ux + _unslice(y, (0, 3), (2, 5)), ux * 2.0])
        assert r.op.name == "add"  # ux is read twice: combining would compute it again


def test_add_same_neg_and_sub_neg():
    with Builder() as b:
        x, y = inp(name="x"), inp(name="y")
        r1, r2, r3, r4 = simp(b, [x, y], [x + x, x + (-y), (-x) + y, x - (-y)])
        assert r1 is b.make(OPS["mul"], (x, const(2.0)))
        assert r2 is b.make(OPS["sub"], (x, y))
        assert r3 is b.make(OPS["sub"], (y, x))
        assert r4 is b.make(OPS["add"], (x, y))


def test_double_negation_and_neg_of_scaled():
    with Builder() as b:
        x = inp()
        r1, r2 = simp(b, [x], [-(-x), -(x * 3.0)])  # noqa: B002  (double negation on purpose)
        assert r1 is x
        assert r2 is b.make(OPS["mul"], (x, const(-3.0)))


def test_mul_zero_only_when_allowed():
    with Builder() as b:
        x = inp((2,))
        (r,) = simp(b, [x], [x * 0.0])
        assert r.op.name == "mul"  # inf * 0 = NaN: not a zero
        (r,) = simp(b, [x], [x * 0.0], assume_finite=True)
        assert r is splat(0.0, (2,))
        (r,) = simp(b, [x], [x - x])
        assert r.op.name == "sub"
        (r,) = simp(b, [x], [x - x], assume_finite=True)
        assert r is splat(0.0, (2,))


def test_constant_zero_times_constant_folds():
    with Builder() as b:
        x = inp()
        c = L.bind("mul", const(0.0), const(np.inf))
        (r,) = simp(b, [x], [x + c])
        assert r.op.name == "add" and r.inputs[0] is x
        assert np.isnan(r.inputs[1].attr("value").array)  # folded with NumPy: 0 * inf = nan


def test_mul_constants_combined_without_crossing_overflow():
    with Builder() as b:
        x = inp()
        r1, r2 = simp(b, [x], [(x * 3.0) * 5.0, (x * 1e300) * 1e-300])
        assert r1 is b.make(OPS["mul"], (x, const(15.0)))
        assert r2.op.name == "mul" and r2.inputs[0].op.name == "mul"  # x*1e300 may overflow: kept
        (r3,) = simp(b, [x], [(x * 3.0) * 5.0], reassociate=False)
        assert r3.inputs[0].op.name == "mul"


def test_mul_neg_moves_negation_out_and_cancels():
    with Builder() as b:
        x, y = inp(name="x"), inp(name="y")
        r1, r2 = simp(b, [x, y], [(-x) * (-y), (-x) * 4.0])
        assert r1 is b.make(OPS["mul"], (x, y))
        assert r2 is b.make(OPS["mul"], (x, const(-4.0)))


def test_rules_refuse_to_duplicate_a_node_with_several_readers():
    with Builder() as b:
        x = inp()
        nx = -x
        # nx is read twice: rewriting nx * 4 as x * -4 would keep nx and add a node
        r1, r2 = simp(b, [x], [nx * 4.0, nx])
        assert r2 is b.make(OPS["neg"], (x,))
        assert r1 is b.make(OPS["mul"], (r2, const(4.0)))
        # single reader: absorbed
        (r3,) = simp(b, [x], [nx * 4.0])
        assert r3 is b.make(OPS["mul"], (x, const(-4.0)))


def test_div_rules():
    with Builder() as b:
        x, y = inp(name="x"), inp(name="y")
        r1, r2, r3, r4 = simp(b, [x, y], [x / 1.0, x / -1.0, x / 4.0, (-x) / (-y)])
        assert r1 is x
        assert r2 is b.make(OPS["neg"], (x,))
        assert r3 is b.make(OPS["mul"], (x, const(0.25)))
        assert r4 is b.make(OPS["div"], (x, y))
        (r5,) = simp(b, [x], [x / 3.0])
        assert r5.op.name == "div"  # 1/3 is inexact: x/3 != x*(1/3)


def test_pow_small_integer_exponents():
    with Builder() as b:
        x = inp()
        def pw(k):
            return L.bind("pow", x, const(k))

        r0, r1, r2, r3, r4, rm1 = simp(b, [x], [pw(0.0), pw(1.0), pw(2.0), pw(3.0), pw(4.0), pw(-1.0)])
        x2 = b.make(OPS["mul"], (x, x))
        assert r0 is const(1.0)
        assert r1 is x
        assert r2 is x2
        assert r3 is b.make(OPS["mul"], (x, x2))  # commutative operands in creation order
        assert r4 is b.make(OPS["mul"], (x2, x2))
        assert rm1 is b.make(OPS["div"], (const(1.0), x))
        (s2,) = simp(b, [x], [pw(2.0)], reassociate=False)
        assert s2.op.name == "pow"  # NumPy's pow and x*x differ in the last bit


def test_where_rules():
    with Builder() as b:
        x, y = inp((3,), name="x"), inp((3,), name="y")
        c = x > y
        r1, r2, r3, r4 = simp(b, [x, y], [snp.where(True, x, y), snp.where(False, x, y), snp.where(c, x, x),
                                          snp.where(snp.logical_not(c), x, y)])
        assert r1 is x and r2 is y and r3 is x
        assert r4 is b.make(OPS["where"], (c, y, x))


def test_cast_rules():
    with Builder() as b:
        x = inp((2,), np.float32)
        same = b.make(OPS["cast"], (x,), {"dtype": np.dtype(np.float32)})
        up = L.cast(x, np.float64)
        r1, r2 = simp(b, [x], [same, L.cast(up, np.float32)])
        assert r1 is x and r2 is x
        y = inp((2,), np.float64, name="y")
        (r3,) = simp(b, [y], [L.cast(L.cast(y, np.float32), np.float64)])
        assert r3.op.name == "cast"  # narrowing is not an identity


def test_layout_chains_collapse():
    with Builder() as b:
        x = inp((2, 3, 4))
        r1 = L.reshape(L.reshape(x, (6, 4)), (24,))
        r2 = L.transpose(L.transpose(x, (1, 0, 2)), (1, 0, 2))
        r3 = L.transpose(L.transpose(x, (1, 2, 0)), (1, 0, 2))
        r4 = L.broadcast_to(L.broadcast_to(x, (5, 2, 3, 4)), (6, 5, 2, 3, 4))
        y = inp((3,), name="y")
        r5 = L.broadcast_to(L.reshape(y, (1, 3)), (4, 3))
        o1, o2, o3, o4, o5 = simp(b, [x, y], [r1, r2, r3, r4, r5])
        assert o1 is b.make(OPS["reshape"], (x,), {"shape": (24,)})
        assert o2 is x
        assert o3 is b.make(OPS["transpose"], (x,), {"perm": (2, 1, 0)})
        assert o4 is b.make(OPS["broadcast_to"], (x,), {"shape": (6, 5, 2, 3, 4)})
        assert o5 is b.make(OPS["broadcast_to"], (y,), {"shape": (4, 3)})


def test_sum_of_broadcast_is_scaled_input():
    with Builder() as b:
        y = inp((3,), name="y")
        s = L.reduce("sum", L.broadcast_to(y, (4, 3)), axis=0)
        (r,) = simp(b, [y], [s])
        assert r is b.make(OPS["mul"], (y, splat(4.0, (3,))))
        z = inp((), name="z")
        (r2,) = simp(b, [z], [L.reduce("sum", L.broadcast_to(z, (5, 2)))])
        assert r2 is b.make(OPS["mul"], (z, const(10.0)))


def test_sum_over_a_few_last_elements_is_adds_of_slices():
    # squared distances in 3-d: the sum becomes x[..., 0] + x[..., 1] + x[..., 2] and fuses with exp
    x = np.random.default_rng(0).uniform(size=(130, 3))
    f = lambda x: np.exp(-np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1))  # noqa: E731
    g = sg.simplify(sg.trace(f, x))
    assert "sum" not in {n.op.name for n in g.nodes}
    np.testing.assert_allclose(g.evaluate(x), f(x), rtol=1e-15)
    small = sg.simplify(sg.trace(f, x[:10]))                       # below SUM_UNROLL_MIN_SIZE: kept
    assert "sum" in {n.op.name for n in small.nodes}
    y = np.random.default_rng(1).standard_normal((130, 130, 3))     # may hold -0.0: NumPy's sum is kept
    assert "sum" in {n.op.name for n in sg.simplify(sg.trace(lambda y: np.sum(y, axis=-1), y)).nodes}


def test_reduce_over_unit_axes_is_a_reshape():
    with Builder() as b:
        x = inp((3, 1))
        (r,) = simp(b, [x], [L.reduce("max", x, axis=1)])
        assert r is b.make(OPS["reshape"], (x,), {"shape": (3,)})
        (r,) = simp(b, [x], [L.reduce("sum", x, axis=1)])
        assert r.op.name == "sum"  # NumPy sums -0.0 to +0.0
        e = snp.exp(x)
        (r,) = simp(b, [x], [L.reduce("sum", e, axis=1)])
        assert r is b.make(OPS["reshape"], (e,), {"shape": (3,)})


def test_zeros_propagate_through_linear_ops():
    with Builder() as b:
        x = inp((2, 3))
        z = L.zeros_like(x)
        outs = [L.transpose(z, (1, 0)), L.reduce("sum", z, axis=0), L.reshape(z, (6,)), -z,
                L.bind("slice", z, starts=(0, 0), stops=(2, 2), steps=(1, 1)),
                L.bind("unslice", L.zeros_like(L.reshape(x, (6,))), shape=(8,), starts=(1,), stops=(7,), steps=(1,))]
        o = simp(b, [x], outs)
        assert o[0] is splat(0.0, (3, 2))
        assert o[1] is splat(0.0, (3,))
        assert o[2] is splat(0.0, (6,))
        assert o[3] is splat(-0.0, (2, 3))
        assert o[4] is splat(0.0, (2, 2))
        assert o[5] is splat(0.0, (8,))
        m = L.matmul(x, L.zeros_like(L.transpose(x)))
        (r,) = simp(b, [x], [m])
        assert r.op.name == "matmul"  # x may hold inf: inf * 0 = NaN
        (r,) = simp(b, [x], [m], assume_finite=True)
        assert r is splat(0.0, (2, 2))


def test_unary_of_broadcast_moves_inside():
    with Builder() as b:
        y = inp((3,))
        (r,) = simp(b, [y], [snp.exp(L.broadcast_to(y, (4, 3)))])
        assert r is b.make(OPS["broadcast_to"], (b.make(OPS["exp"], (y,)),), {"shape": (4, 3)})
        z = inp((3,), name="z")
        (r,) = simp(b, [y, z], [L.broadcast_to(y, (2, 3)) * L.broadcast_to(z, (2, 3))])
        assert r is b.make(OPS["broadcast_to"], (b.make(OPS["mul"], (y, z)),), {"shape": (2, 3)})


def test_constant_folding_uses_op_impl_and_size_limit():
    with Builder() as b:
        x = inp((3,))
        k = L.bind("exp", const([0.0, 1.0, 2.0]))
        assert isinstance(k, sg.Node)
        (r,) = simp(b, [x], [x + k])
        np.testing.assert_array_equal(r.inputs[1].attr("value").array, np.exp([0.0, 1.0, 2.0]))
        big = L.bind("exp", L.constant(np.arange(100.0)))
        (r,) = simp(b, [x], [big], fold_limit=10)
        assert r.op.name == "exp"
        (r,) = simp(b, [x], [L.bind("tanh", splat(0.5, (3,)))])
        assert r is splat(np.tanh(0.5), (3,))
        (r,) = simp(b, [x], [L.constant(np.full((2, 2), 7.0))])
        assert r is splat(7.0, (2, 2))


def test_slice_of_unslice_and_full_slice():
    with Builder() as b:
        x = inp((4,))
        p = {"starts": (1,), "stops": (5,), "steps": (1,)}
        u = L.bind("unslice", x, shape=(6,), **p)
        r1, r2 = simp(b, [x], [L.bind("slice", u, **p), L.bind("slice", x, starts=(0,), stops=(4,), steps=(1,))])
        assert r1 is x and r2 is x


def test_fresh_copies_removed_other_tags_kept():
    with Builder() as b:
        x = inp()
        fresh = L.bind("copy", x, tag=("fresh", 123))
        plain = L.bind("copy", x)
        remat = L.bind("copy", x, tag=("remat", 1))
        r1, r2, r3 = simp(b, [x], [fresh * 2.0, plain, remat])
        assert r1 is b.make(OPS["mul"], (x, const(2.0)))
        assert r2 is x
        assert r3 is remat


def test_tagged_nodes_are_not_merged_rewritten_or_folded():
    with Builder() as b:
        x = inp()
        t = snp.tanh(x)
        t_re = b.make(OPS["tanh"], (x,), tag=("remat", 0))
        m_re = b.make(OPS["mul"], (t, const(1.0)), tag=("remat", 1))  # a rule would remove it if untagged
        k_re = b.make(OPS["exp"], (const(1.0),), tag=("remat", 2))  # folding would remove it if untagged
        outs = simp(b, [x], [t + t_re, m_re, k_re * 1.0])
        assert outs[0] is b.make(OPS["add"], (t, t_re))
        assert outs[1] is m_re
        assert outs[2] is k_re  # the untagged reader was rewritten, the tagged node kept
        g = simplify(Graph([x], [t * t_re]))
        assert sum(n.op.name == "tanh" for n in g.toposort()) == 2


def test_identity_of_input_wrappers_replaced():
    class Rule:
        pass

    with Builder() as b:
        x, y = inp(name="x"), inp(name="y")
        w = b.make(OPS["custom_vjp_call"], (x, y), {"rule": Rule(), "index": 0})
        (r,) = simp(b, [x, y], [w * 1.0])
        assert r is y


def test_role_and_location_are_preserved():
    loc = SourceLocation("model.py", 42, "f")
    with Builder() as b:
        x = inp()
        with source_location(loc), role("backward"):
            y = (x * 3.0) * 5.0
            z = snp.sin(x)
        outs = simp(b, [x], [y, z * 1.0])
        assert outs[0].op.name == "mul" and outs[0].inputs[1] is const(15.0)
        assert meta(outs[0]).location == loc and meta(outs[0]).role == "backward"
        assert outs[1] is z and meta(z).role == "backward"


def test_fixed_point_is_idempotent():
    f = np.tanh
    for _ in range(4):
        f = sg.grad(f)
    g1 = simplify(sg.trace(f, 0.3))
    st = {}
    g2 = simplify(g1, stats=st)
    assert ops_of(g1) == ops_of(g2)
    assert st["rounds"] == 1


def test_stages_are_dumped(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMGRAPH_DUMP", str(tmp_path))
    simplify(sg.trace(sg.grad(np.tanh), 0.3))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any("simplify.0.rewrite" in n and n.endswith(".txt") for n in names), names
    assert any("simplify.0.polynomial" in n for n in names), names


def test_on_stage_and_stats():
    seen = []
    st = {}
    simplify(sg.trace(sg.grad(np.tanh), 0.3), on_stage=lambda name, g: seen.append((name, len(g))), stats=st)
    assert seen[0][0] == "simplify.0.rewrite" and seen[1][0] == "simplify.0.polynomial"
    assert st["remove_copy"] >= 1 and st["nodes_out"] <= st["nodes_in"]


# ----------------------------------------------------------------------------- polynomial stage


def tanh_poly(n):
    """Coefficients (lowest first) of P_n with d^n tanh/dx^n = P_n(tanh x)."""
    p = [0, 1]
    for _ in range(n):
        dp = [k * p[k] for k in range(1, len(p))] or [0]
        q = [0] * (len(dp) + 2)
        for k, c in enumerate(dp):
            q[k] += c
            q[k + 2] -= c
        while len(q) > 1 and q[-1] == 0:
            q.pop()
        p = q
    return p


PYTENSOR = [3, 4, 6, 6, 17, 57, 197, 646]


def nth_tanh_graphs(nmax=8):
    f = np.tanh
    out = []
    for n in range(1, nmax + 1):
        f = sg.grad(f)
        raw = sg.trace(f, 0.3)
        out.append((n, raw, simplify(raw)))
    return out


def test_nth_derivative_of_tanh_small_and_correct():
    xs = np.array([-3.0, -0.7, 0.0, 0.3, 1.1, 2.5])
    prev = 0
    for n, raw, g in nth_tanh_graphs():
        t = np.tanh(xs)
        exact = np.polyval(tanh_poly(n)[::-1], t)
        got = np.array([g.evaluate(x) for x in xs])
        np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-12 * np.abs(tanh_poly(n)).sum())
        np.testing.assert_allclose([raw.evaluate(x) for x in xs], exact, rtol=1e-10, atol=1e-9)
        # Horner in s = t*t: tanh, s, one muladd per coefficient after the leading one, *t if odd
        assert n_ops(g) <= 3 + n // 2, (n, n_ops(g))
        assert n_ops(g) <= PYTENSOR[n - 1], (n, n_ops(g))  # the W3 (i) target, for every n
        if n >= 2:
            assert "muladd" in ops_of(g)
        if n >= 5:
            assert len(g) <= PYTENSOR[n - 1]
        if prev:
            assert len(g) - prev <= 3  # linear growth
        prev = len(g)
        assert ops_of(g).count("tanh") == 1


def test_nan_and_inf_through_tanh_derivatives():
    for n, raw, g in nth_tanh_graphs(4):
        for x in (np.nan, np.inf, -np.inf, -0.0):
            a, c = raw.evaluate(x), g.evaluate(x)
            assert np.isnan(a) == np.isnan(c)
            if not np.isnan(a):
                assert a == c


def test_polynomial_needs_bounded_atoms_unless_assume_finite():
    with Builder():
        x = inp((3,))
        e = (x + 1.0) * (x + 1.0) - x * x  # = 2x + 1, but x may be inf (inf - inf = NaN)
        g = Graph([x], [e])
        assert n_ops(simplify(g)) == 4
        gf = simplify(g, assume_finite=True)
        assert ops_of(gf)[-1] == "muladd" and n_ops(gf) == 1  # muladd(x, 2, 1)
        v = np.array([0.5, -2.0, 3.0])
        np.testing.assert_allclose(gf.evaluate(v)[0], 2 * v + 1, rtol=1e-15)
        assert np.isnan(g.evaluate(np.array([np.inf, 0, 0]))[0][0])


def test_polynomial_keeps_every_atom_so_nan_propagates():
    with Builder():
        x = inp((2,))
        t, s = snp.tanh(x), snp.sin(x)
        e = (t + s) * (t + s) - (t * t + s * s) - 2.0 * t * s + t  # = t, but reads s
        g = simplify(Graph([x], [e]))
        r = g.evaluate(np.array([0.3, np.nan]))[0]
        assert np.isnan(r[1])
        np.testing.assert_allclose(r[0], np.tanh(0.3), rtol=1e-14)
        assert "sin" in ops_of(g)


def test_polynomial_collects_like_terms_across_atoms():
    with Builder():
        x = inp((4,))
        t, c = snp.tanh(x), snp.cos(x)
        e = (t + c) * (t - c) + 3.0 * t * t - t * (2.0 * t) + c * t  # = 2 t^2 - c^2 + c t
        g0 = Graph([x], [e])
        g = simplify(g0)
        assert n_ops(g0) == 13
        assert n_ops(g) == 6  # tanh, cos, t*muladd(t, 2, c) - c*c
        v = np.array([-1.0, 0.0, 0.5, np.inf])
        with np.errstate(invalid="ignore"):
            tv, cv = np.tanh(v), np.cos(v)
        np.testing.assert_allclose(g.evaluate(v)[0], 2 * tv ** 2 - cv ** 2 + cv * tv, rtol=1e-14, atol=1e-15)
        assert np.isnan(g.evaluate(v)[0][3]) and np.isnan(g0.evaluate(v)[0][3])  # cos(inf) = NaN


def test_polynomial_that_drops_an_atom_needs_assume_finite():
    with Builder():
        x = inp((2,))
        t, c = snp.tanh(x), snp.cos(x)
        e = (t + c) * (t - c) + c * c  # = t^2, but cos(inf) = NaN while tanh(inf) = 1
        g0 = Graph([x], [e])
        assert "cos" in ops_of(simplify(g0))
        gf = simplify(g0, assume_finite=True)
        assert n_ops(gf) == 2  # tanh, t*t
        assert np.isnan(g0.evaluate(np.array([np.inf, 0.0]))[0][0])


def test_order8_pipeline_time():
    t0 = time.perf_counter()
    f = np.tanh
    for _ in range(8):
        f = sg.grad(f)
    g = simplify(sg.trace(f, 0.3))
    dt = time.perf_counter() - t0
    assert len(g) <= 17
    assert dt < 2.0  # ~0.1 s on an idle machine; the bound leaves room for a shared CI box


# ----------------------------------------------------------------------------- scale


def test_deep_chain_is_iterative_and_fast():
    n = 6000
    with Builder():
        x = inp((4,))
        y = x
        for i in range(n):
            y = (snp.tanh(y) * 1.0 + y * 0.5 * 2.0) if i % 2 else (y + y) / 2.0
        g = Graph([x], [y])
    assert len(g) > 3 * n > sys.getrecursionlimit()
    st = {}
    s = simplify(g, stats=st)
    assert st["nodes_in"] / st["seconds"] > 1000  # nodes per second, loose for a loaded machine
    v = np.linspace(-1, 1, 4)
    np.testing.assert_allclose(s.evaluate(v)[0], g.evaluate(v)[0], rtol=1e-12)
    assert len(s) < len(g)


# ----------------------------------------------------------------------------- property tests

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, -3.0]
CONSTS = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, 0.25, 4.0, 0.1, -2.0, 10.0]

EXACT_UNARY = ["neg", "exp", "tanh", "sin", "abs", "sqrt", "log", "sum_bcast", "square", "recip", "copy", "sign",
               "relayout", "bsum", "rev2"]
EXACT_BINARY = ["add", "sub", "mul", "div", "maximum", "where_gt", "pow2", "addc", "mulc", "subc", "cdiv", "divc",
                "add_self", "fma", "fmac", "negsub"]
REASSOC_UNARY = ["neg", "exp", "tanh", "sin", "cos", "abs", "sum_bcast", "square", "cube", "copy", "relayout", "bsum",
                 "rev2"]
REASSOC_BINARY = ["add", "sub", "mul", "addc", "mulc", "subc", "divc", "add_self", "csub", "fma", "fmac", "negsub"]


def _pw(a, k):
    return L.bind("pow", a, splat(k, a.shape, a.dtype))


UNARY_OPS = {
    "neg": lambda a: -a, "exp": snp.exp, "tanh": snp.tanh, "sin": snp.sin, "cos": snp.cos, "abs": snp.abs,
    "sqrt": snp.sqrt, "log": snp.log, "sign": snp.sign,
    "sum_bcast": lambda a: snp.broadcast_to(snp.sum(a, axis=0, keepdims=True), a.shape) * 1.0,
    "square": lambda a: _pw(a, 2.0), "cube": lambda a: _pw(a, 3.0), "recip": lambda a: _pw(a, -1.0),
    "copy": lambda a: L.bind("copy", a, tag=("fresh", -1)),
    "relayout": lambda a: L.reshape(L.transpose(L.transpose(L.reshape(a, (1, 3, 1)), (2, 0, 1)), (1, 2, 0)), (3,)),
    "bsum": lambda a: snp.max(L.broadcast_to(L.reshape(a, (1, 3)), (2, 3)), axis=0)
    + snp.sum(L.reshape(a, (3, 1)), axis=1),
    "rev2": lambda a: a[::-1][::-1],
}
BINARY_OPS = {
    "add": lambda a, b, k: a + b, "sub": lambda a, b, k: a - b, "mul": lambda a, b, k: a * b,
    "div": lambda a, b, k: a / b, "maximum": lambda a, b, k: snp.maximum(a, b),
    "where_gt": lambda a, b, k: snp.where(a > b, a, -b), "pow2": lambda a, b, k: _pw(a * k, 2.0),
    "addc": lambda a, b, k: a + k, "mulc": lambda a, b, k: a * k, "subc": lambda a, b, k: a - k,
    "csub": lambda a, b, k: k - a, "cdiv": lambda a, b, k: k / a, "divc": lambda a, b, k: a / k,
    "divc_nz": lambda a, b, k: a / (k or 3.0), "add_self": lambda a, b, k: a + a,
    "fma": lambda a, b, k: L.bind("muladd", a, b, splat(k, a.shape, a.dtype)),   # a*b + k
    "fmac": lambda a, b, k: L.bind("muladd", a, splat(k, a.shape, a.dtype), b),  # a*k + b
    "negsub": lambda a, b, k: (-a) - a,
}


def run_program(pool, instrs, unary, binary, nout):
    """Extend a value pool by a list of (kind, i, j, c, k) instructions; return the last nout values.

    kind 0: unary op number i on value j; kind 1: binary op number c on values i, j
    (constant number k for the ops with a constant operand).
    """
    for kind, i, j, c, kc in instrs:
        k = CONSTS[kc % len(CONSTS)]
        if kind == 0:
            v = UNARY_OPS[unary[i % len(unary)]](pool[j % len(pool)])
        else:
            v = BINARY_OPS[binary[c % len(binary)]](pool[i % len(pool)], pool[j % len(pool)], k)
        pool.append(v)
    return tuple(pool[-nout:])


def build_program(instrs, unary, binary):
    """A traceable f(x, y) running `instrs` on the pool [x, y, tanh(x)]."""

    def f(x, y):
        return run_program([x, y, snp.tanh(x)], instrs, unary, binary, 3)

    return f


instr = st.tuples(st.integers(0, 1), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
vec = st.lists(st.one_of(st.sampled_from(SPECIAL), st.floats(-5, 5, allow_nan=False, width=64)),
               min_size=3, max_size=3).map(lambda v: np.array(v, dtype=np.float64))
vec_finite = st.lists(st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0]),
                                st.floats(-3, 3, allow_nan=False, width=64)),
                      min_size=3, max_size=3).map(lambda v: np.array(v, dtype=np.float64))


def same_bits(a, b):
    """Equal bit for bit (so -0.0 != 0.0), with any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(instr, min_size=1, max_size=12), vec, vec, st.sampled_from([np.float64, np.float32]))
def test_property_exact_without_reassociation(instrs, x, y, dtype):
    x, y = x.astype(dtype), y.astype(dtype)
    f = build_program(instrs, EXACT_UNARY, EXACT_BINARY)
    g = sg.trace(f, x, y)
    s = simplify(g, reassociate=False)
    s.check()  # every node's stored shape and dtype still follow its op's rules
    for a, c in zip(g.evaluate(x, y), s.evaluate(x, y)):
        assert same_bits(a, c), (a, c, s.dump())


def close(a, c, scale):
    a, c = np.asarray(a), np.asarray(c)
    both_nan = np.isnan(a) & np.isnan(c)
    inf = np.isinf(a) | np.isinf(c)
    same_inf = inf & (a == c)
    fin = ~(np.isnan(a) | np.isnan(c) | inf)
    with np.errstate(invalid="ignore"):
        ok = np.abs(a - c) <= 1e-12 * np.maximum(np.abs(a), np.abs(c)) + 1e-12 * scale
    return bool(np.all(both_nan | same_inf | (fin & ok)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(instr, min_size=1, max_size=12), st.one_of(vec, vec_finite), vec_finite)
def test_property_close_with_reassociation(instrs, x, y):
    f = build_program(instrs, REASSOC_UNARY, REASSOC_BINARY)
    g = sg.trace(f, x, y)
    s = simplify(g)
    s.check()
    # reassociation errors are relative to the magnitudes of the summed terms: bound by the
    # largest finite intermediate value of the original program
    order = g.toposort()
    env = dict(zip(g.inputs, [x, y]))
    with np.errstate(all="ignore"):
        vals = {}
        for n in order:
            if n not in env:
                env[n] = np.asarray(n.op.impl(*[env[i] for i in n.inputs], **n.params), dtype=n.dtype)
            vals[n] = env[n]
    fin = [np.abs(v[np.isfinite(v)]).max(initial=0.0) for v in vals.values() if v.dtype.kind == "f"]
    scale = max([1.0] + fin)
    for a, c in zip(g.evaluate(x, y), s.evaluate(x, y)):
        assert close(a, c, scale), (a, c, scale, s.dump())


POLY_BINARY = ["add", "sub", "mul", "addc", "mulc", "subc", "csub", "add_self", "divc_nz", "pow2", "fma", "fmac"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(instr.map(lambda t: (1,) + t[1:]), min_size=2, max_size=16), vec, vec_finite)
def test_property_polynomial_regions(instrs, x, y):
    """Programs that are polynomials in bounded atoms: canonicalized, close, and never larger."""

    def f(x, y):
        return _run_pool([snp.tanh(x), snp.sin(y), snp.cos(x)], instrs)

    g = sg.trace(f, x, y)
    s = simplify(g)
    assert n_ops(s) <= n_ops(g)
    sum_abs = max(1.0, *[np.nanmax(np.abs(v), initial=0.0) for v in g.evaluate(x, y)])
    for a, c in zip(g.evaluate(x, y), s.evaluate(x, y)):
        # terms are bounded by the coefficients' sums: compare relative to the value scale seen
        assert close(a, c, 16 * sum_abs), (a, c, s.dump())


def _run_pool(pool, instrs):
    return run_program(pool, instrs, REASSOC_UNARY, POLY_BINARY, 2)


def test_rosenbrock_hessian_graph_size_independent_of_n():
    def rosen(x):
        a, b = x[0::2], x[1::2]
        return np.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2)

    sizes = []
    for n in (6, 20, 60, 1000, 10000):
        x = np.linspace(-1.0, 1.5, n)
        g = sg.trace(sg.hessian(rosen), x)
        s = simplify(g)
        sizes.append(len(s))
        # the identity basis stays structural, eq(iota[:, None], iota[None, :]): no n x n constant
        assert max(n.size for n in s.toposort() if n.op.name == "constant") <= n
        if n > 60:
            continue  # dense n x n results: values checked on the small sizes
        np.testing.assert_array_equal(s.evaluate(x), g.evaluate(x))
        a, b = x[0::2], x[1::2]
        h = np.zeros((n, n))
        i = np.arange(0, n, 2)
        h[i, i] = 1200.0 * a * a - 400.0 * b + 2.0
        h[i, i + 1] = h[i + 1, i] = -400.0 * a
        h[i + 1, i + 1] = 200.0
        np.testing.assert_allclose(s.evaluate(x), h, rtol=1e-12, atol=1e-12)
    assert len(set(sizes)) == 1 and sizes[0] < 40, sizes


def test_broadcast_of_a_constant_array_is_not_materialized():
    with Builder() as b:
        x = inp((3, 4))
        c = L.broadcast_to(const([[1.0], [2.0], [3.0]]), (3, 4))
        (r,) = simp(b, [x], [x * c])
        assert r.inputs[1] is c  # kept as a view, not folded into a 3 x 4 constant
        (r,) = simp(b, [x], [x * L.bind("exp", c)])  # exp moves inside the broadcast and folds there
        assert r.inputs[1].op.name == "broadcast_to" and r.inputs[1].inputs[0].size == 3
        np.testing.assert_array_equal(r.inputs[1].inputs[0].attr("value").array, np.exp([[1.0], [2.0], [3.0]]))


def test_constant_array_with_splat_operand_folds():
    with Builder() as b:
        x = inp((3,))
        c = const([1.0, 2.0, 4.0])
        (r,) = simp(b, [x], [x * (c + 1.0)])  # c + broadcast(1.0) is a constant
        np.testing.assert_array_equal(r.inputs[1].attr("value").array, [2.0, 3.0, 5.0])
        (r,) = simp(b, [x], [x + snp.sum(L.constant(np.arange(100.0)))], fold_limit=10)
        assert r.inputs[1] is splat(4950.0, (3,))  # a small result of a large constant folds
