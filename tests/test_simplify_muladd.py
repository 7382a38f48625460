"""muladd (a*b + c rounded twice) and the polynomial stage that emits it.

- the op: NumPy, the LLVM backend and mul-then-add agree bit for bit (NaN, inf,
  -0.0, and inputs where a fused multiply-add would round differently);
- its rules, against hand-built expected graphs (by identity);
- the polynomial stage: Horner steps are muladds, parity gives Horner in t*t
  for any bounded value (not only tanh), re-simplifying changes nothing, and
  derivatives of simplified graphs (which contain muladd) simplify again.
(The op-table checks, check_grads to order 2 and batching, are in test_ops.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph import lax as L
from symgraph.compile import compile
from symgraph.ir import Builder, Graph
from symgraph.ops import OPS
from symgraph.passes.simplify import simplify
from symgraph.tracing import make_input

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def special(n: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    sp = [np.nan, np.inf, -np.inf, 0.0, -0.0, fi.smallest_subnormal * 3, fi.tiny, -fi.tiny, 0.5, -1.0, 3.0,
          float(fi.max) / 2, -float(fi.max) / 2, 1e-3, -7.25]
    v = np.concatenate([np.array(sp), rng.uniform(-10, 10, max(0, n - len(sp)))])[:n]
    return rng.permutation(v).astype(dtype)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


def two_roundings(a, b, c):
    return np.add(np.multiply(a, b), c)


def fma_witness(dtype):
    """(a, b, c) with a*b + c == 0 when rounded twice, but != 0 when fused."""
    k = 30 if np.dtype(dtype) == F64 else 13
    a = np.asarray(1.0 + 2.0 ** -k, dtype)
    c = -np.multiply(a, a)
    assert two_roundings(a, a, c) == 0
    return a, a, c


def n_ops(g):
    return sum(1 for n in g.toposort() if n.op.kind != "source"
               and not (n.op.name == "broadcast_to" and n.inputs[0].op.name == "constant"))


def ops_of(g):
    return [n.op.name for n in g.toposort()]


def inp(shape=(), dtype=np.float64, name="x", index=0):
    return make_input(shape, dtype, index, name)


def splat(v, shape, dtype=np.float64):
    return L.broadcast_to(L.constant(np.asarray(v, dtype)), shape)


# ----------------------------------------------------------------------------- the op


def test_op_record():
    op = OPS["muladd"]
    assert op.nin == 3 and op.kind == "elementwise" and op.differentiable and not op.linear
    assert op.vjp is not None and op.jvp is not None


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_impl_is_mul_then_add_bit_for_bit(dtype):
    a, b, c = (special(15, dtype, s) for s in (1, 2, 3))
    A, B, C = np.meshgrid(a, b, c, indexing="ij")
    with np.errstate(all="ignore"):
        assert same_bits(OPS["muladd"].impl(A, B, C), two_roundings(A, B, C))
    assert OPS["muladd"].impl(*fma_witness(dtype)) == 0  # not fused


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("size", [0, 1, 7, 1023])
def test_compiled_equals_evaluator_bit_for_bit(dtype, size):
    a, b, c = (special(size, dtype, s) for s in (4, 5, 6))
    if size >= 7:
        w = fma_witness(dtype)
        for arr, v in zip((a, b, c), w):
            arr[-1] = v  # vector and scalar tails both see the witness
            arr[0] = v
    f = lambda a, b, c: (L.bind("muladd", a, b, c), L.bind("muladd", a, a, c) * 2.0)
    with np.errstate(all="ignore"):
        want = (two_roundings(a, b, c), two_roundings(a, a, c) * dtype.type(2))
        ev = sg.trace(f, a, b, c).evaluate(a, b, c)
    got = compile(f)(a, b, c)
    for g, e, w in zip(got, ev, want):
        assert same_bits(e, w)
        assert same_bits(g, w)
    if size >= 7:
        assert got[0][-1] == 0 and got[0][0] == 0  # fmul then fadd, no contraction


def test_compiled_broadcast_operands_and_gradients():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))

    def f(a, b):
        return snp.sum(L.bind("muladd", a, L.broadcast_to(b, a.shape), snp.tanh(a)) ** 2)

    gf = sg.grad(f, argnums=(0, 1))
    want = gf(a, b)
    got = compile(gf)(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
    y = a * b + np.tanh(a)
    np.testing.assert_allclose(want[0], 2 * y * (b + 1 - np.tanh(a) ** 2), rtol=1e-13)
    np.testing.assert_allclose(want[1], (2 * y * a).sum(0), rtol=1e-13)


# ----------------------------------------------------------------------------- rules, by identity


def test_muladd_rules():
    with Builder() as b:
        x, y, z = inp((3,)), inp((3,), name="y", index=1), inp((3,), name="z", index=2)

        def s(e, **kw):
            return simplify(Graph([x, y, z], [e]), builder=b, **kw).outputs[0]

        one, mone = splat(1.0, (3,)), splat(-1.0, (3,))
        nz, pz, zero = splat(-0.0, (3,)), splat(0.0, (3,)), splat(0.0, (3,))
        assert s(L.bind("muladd", x, one, z)) is x + z                      # x*1 + z
        assert s(L.bind("muladd", mone, x, z)) is z - x                     # (-1)*x + z
        assert s(L.bind("muladd", x, y, nz)) is x * y                       # + (-0.0)
        assert s(L.bind("muladd", x, y, pz)).op.name == "muladd"            # x*y may be -0.0
        assert s(L.bind("muladd", x, x, pz)) is x * x                       # x*x >= +0
        assert s(L.bind("muladd", x, zero, z), assume_finite=True) is z
        assert s(L.bind("muladd", x, zero, z)).op.name == "muladd"          # inf*0 = NaN
        # operands of the product in canonical order: one node for a*b + c and b*a + c
        assert s(L.bind("muladd", y, x, z)) is s(L.bind("muladd", x, y, z))
        assert s(L.bind("muladd", splat(3.0, (3,)), x, z)).inputs[0] is x  # constant second
        # constants fold with the op's impl
        r = s(L.bind("muladd", splat(2.0, (3,)), splat(3.0, (3,)), splat(-1.0, (3,))) + x)
        assert r is x + splat(5.0, (3,))


def test_negated_self_minus_self_is_scaled():
    with Builder() as b:
        x = inp((3,))
        (r,) = simplify(Graph([x], [(-x) - x]), builder=b).outputs
        assert r is x * splat(-2.0, (3,))
        v = np.array([0.0, -0.0, np.inf])
        assert same_bits(Graph([x], [r]).evaluate(v)[0], -v - v)


# ----------------------------------------------------------------------------- the polynomial stage


def _poly(coeffs, u):
    """sum c_k u**k as a naive sum of products (lowest degree first)."""
    acc = None
    for k, c in enumerate(coeffs):
        if c == 0:
            continue
        term = c * u if k else c + 0.0 * u
        for _ in range(k - 1):
            term = term * u
        acc = term if acc is None else acc + term
    return acc


@pytest.mark.parametrize("atom,coeffs,ops", [
    ("sin", [0, 1, 0, -3, 0, 3], 5),          # odd: u * muladd(s, muladd(s, 3, -3), 1), s = u*u
    ("cos", [1, 0, -3, 0, 4], 4),             # even: muladd(s, muladd(s, 4, -3), 1)
    ("sigmoid", [5, -1, 2, 1], 4),            # no parity: Horner in u, muladd(u, muladd(u, u + 2, -1), 5)
    ("erf", [0, 0, 2], 3),                    # a monomial: u * (u * 2), as written (no cheaper form)
])
def test_horner_with_parity_for_any_bounded_value(atom, coeffs, ops):
    xs = np.array([-2.0, -0.3, 0.0, 0.7, 1.9])

    def f(x):
        return _poly(coeffs, getattr(snp, atom)(x))

    g = simplify(sg.trace(f, xs))
    # the atom, then the Horner ops (the leading constant folded into the steps)
    assert n_ops(g) == ops, g.dump()
    assert ops_of(g).count(atom) == 1
    u = g.evaluate(xs)
    want = np.polyval(coeffs[::-1], sg.trace(lambda x: getattr(snp, atom)(x), xs).evaluate(xs))
    np.testing.assert_allclose(u, want, rtol=1e-14, atol=1e-14)


def _nth_tanh(n):
    f = np.tanh
    for _ in range(n):
        f = sg.grad(f)
    return f


def test_resimplify_is_identity_on_muladd_graphs():
    with Builder() as b:
        for n in range(1, 9):
            g = simplify(sg.trace(_nth_tanh(n), 0.3), builder=b)
            st = {}
            again = simplify(g, builder=b, stats=st)
            assert again.outputs[0] is g.outputs[0], n
            assert st.get("polynomial", 0) == 0 and st["rounds"] == 1


def replay(g: Graph):
    """A traceable function that rebuilds graph g node by node (so transformations see its ops)."""

    def f(*args):
        env = dict(zip(g.inputs, args))
        for n in g.toposort():
            if n not in env:
                env[n] = L.bind(n.op.name, *[env[x] for x in n.inputs], **n.params)
        return env[g.outputs[0]]

    return f


def test_derivatives_of_simplified_graphs_simplify_again():
    from bench.w3_higher_order import tanh_derivative

    xs = [-1.3, 0.0, 0.3, 2.0]
    for n in (2, 4, 5):
        g = simplify(sg.trace(_nth_tanh(n), 0.3))
        assert "muladd" in ops_of(g)
        d = sg.grad(replay(g))                     # differentiates muladd (VJP rule)
        raw = sg.trace(d, 0.3)
        assert "muladd" in ops_of(raw)
        s = simplify(raw)
        assert n_ops(s) <= 3 + (n + 1) // 2, s.dump()   # as small as simplifying d^(n+1) tanh directly
        for x in xs:
            want = tanh_derivative(n + 1, x)
            np.testing.assert_allclose(s.evaluate(x), want, rtol=1e-12, atol=1e-12 * 2 ** n)
            np.testing.assert_allclose(sg.jvp(replay(g), (x,), (1.0,))[1], want, rtol=1e-12, atol=1e-12 * 2 ** n)


def test_nan_inf_and_signed_zero_through_muladd_polynomials():
    for n in range(1, 7):
        f = _nth_tanh(n)
        raw, g = sg.trace(f, 0.3), simplify(sg.trace(f, 0.3))
        for x in (np.nan, np.inf, -np.inf, -0.0, 0.0, 40.0):
            a, c = raw.evaluate(x), g.evaluate(x)
            assert np.isnan(a) == np.isnan(c)
            if not np.isnan(a):
                assert a == c or abs(a - c) <= 1e-12 * max(1.0, abs(a)), (n, x, a, c)


def test_compiled_tanh_derivatives_use_muladd():
    from bench.w3_higher_order import tanh_derivative

    x = np.linspace(-2, 2, 9)
    for n in (2, 4, 8):
        cf = compile(_nth_tanh(n))
        for xi in x:
            np.testing.assert_allclose(cf(xi), tanh_derivative(n, xi), rtol=1e-12, atol=1e-12 * 4 ** n)
