"""Loops that stay loops: sg.scan and sg.fori_loop against plain Python loops.

Values and gradients are compared with the same function written as a Python
loop (which traces unrolled), derivatives with check_grads (both modes, order
2), vmap with a Python loop over the batch, and bad bodies with clear errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg

RNG = np.random.default_rng(19)
W = RNG.normal(size=(4, 4)) * 0.5
U = RNG.normal(size=(3, 4))
XS = RNG.normal(size=(6, 3))


def _step(W, U):
    def step(c, x):
        h, k = c
        h = np.tanh(h @ W + x @ U)
        return (h, k + 1), np.sum(h * h)
    return step


def rnn(W, U, xs):
    (h, k), ys = sg.scan(_step(W, U), (np.zeros(4), 0), xs)
    return np.sum(h ** 2) + np.sum(ys * np.arange(1.0, 7.0)) * k


def rnn_loop(W, U, xs):
    h, k, ys = np.zeros(4), 0, []
    for x in xs:
        (h, k), y = _step(W, U)((h, k), x)
        ys.append(y)
    return np.sum(h ** 2) + np.sum(np.stack(ys) * np.arange(1.0, 7.0)) * k


def test_scan_values_match_python_loop():
    def f(h, x):
        h = np.tanh(0.9 * h + x)
        return h, {"y": 2 * h, "z": x}
    xs = np.linspace(0.0, 1.0, 5)
    c, ys = sg.scan(f, 0.1, xs)
    h, ref = 0.1, []
    for x in xs:
        h, y = f(h, x)
        ref.append(y["y"])
    np.testing.assert_allclose(c, h, rtol=1e-15)
    np.testing.assert_allclose(ys["y"], ref, rtol=1e-15)
    np.testing.assert_array_equal(ys["z"], xs)
    assert sg.trace(rnn, W, U, XS).evaluate(W, U, XS) == pytest.approx(rnn_loop(W, U, XS), rel=1e-14)


def test_scan_graph_does_not_grow_with_length():
    def f(h, xs):
        return sg.scan(lambda c, x: (np.sin(c) * x, c), h, xs)[0]
    n10 = len(sg.trace(f, 0.5, np.ones(10)))
    n1000 = len(sg.trace(f, 0.5, np.ones(1000)))
    assert n10 == n1000


def test_scan_reverse_and_length_only():
    xs = np.arange(4.0)
    c, ys = sg.scan(lambda c, x: (0.5 * c + x, c), 1.0, xs, reverse=True)
    cr, ysr = 1.0, [0.0] * 4
    for t in range(3, -1, -1):
        ysr[t] = cr
        cr = 0.5 * cr + xs[t]
    assert c == cr and list(ys) == ysr
    c, ys = sg.scan(lambda c, x: (c * 2.0, None), 1.0, length=5)
    assert c == 32.0 and ys is None
    c, ys = sg.scan(lambda c, x: (c, c), np.ones(2), length=0)
    assert ys.shape == (0, 2)


def test_scan_gradients_match_python_loop():
    g = sg.grad(rnn, argnums=(0, 1, 2))(W, U, XS)
    r = sg.grad(rnn_loop, argnums=(0, 1, 2))(W, U, XS)
    for a, b in zip(g, r):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_scan_check_grads_order_2():
    sg.check_grads(rnn, (W, U, XS), order=2)


def test_grad_of_grad_and_hessian_through_scan():
    def f(a, xs):
        return sg.scan(lambda c, x: (np.sin(c * a + x), c), 1.0, xs)[0]

    def f_loop(a, xs):
        c = 1.0
        for x in xs:
            c = np.sin(c * a + x)
        return c
    xs = np.linspace(-1, 1, 5)
    assert sg.grad(sg.grad(f))(0.3, xs) == pytest.approx(sg.grad(sg.grad(f_loop))(0.3, xs), rel=1e-12)
    assert sg.grad(sg.grad(sg.grad(f)))(0.3, xs) == pytest.approx(sg.grad(sg.grad(sg.grad(f_loop)))(0.3, xs),
                                                                  rel=1e-11)
    np.testing.assert_allclose(sg.hessian(rnn)(W, U, XS), sg.hessian(rnn_loop)(W, U, XS), rtol=1e-10, atol=1e-12)


def test_jvp_through_scan():
    t = tuple(RNG.normal(size=a.shape) for a in (W, U, XS))
    v, jv = sg.jvp(rnn, (W, U, XS), t)
    vr, jvr = sg.jvp(rnn_loop, (W, U, XS), t)
    assert v == pytest.approx(vr, rel=1e-14) and jv == pytest.approx(jvr, rel=1e-12)


def test_nested_scans_close_over_outer_carry():
    def nest(a, xs):
        def outer(c, x):
            d, _ = sg.scan(lambda d, z: (d * a + z * c, d), x, np.arange(3.0))
            return c + np.sin(d), d
        return sg.scan(outer, 0.3, xs)[0]

    def nest_loop(a, xs):
        c = 0.3
        for x in xs:
            d = x
            for z in np.arange(3.0):
                d = d * a + z * c
            c = c + np.sin(d)
        return c
    xs = XS[:, 0]
    assert nest(0.7, xs) == pytest.approx(nest_loop(0.7, xs), rel=1e-14)
    for a, b in zip(sg.grad(nest, argnums=(0, 1))(0.7, xs), sg.grad(nest_loop, argnums=(0, 1))(0.7, xs)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    sg.check_grads(nest, (0.7, xs), order=2)


def test_vmap_of_scan():
    hs = RNG.normal(size=(3, 4))

    def f(h0, xs):
        return sg.scan(lambda h, x: (np.tanh(h @ W + x @ U), np.sum(h)), h0, xs)

    c, ys = sg.vmap(f, in_axes=(0, None))(hs, XS)
    xb = RNG.normal(size=(2, 6, 3))
    c2, ys2 = sg.vmap(f, in_axes=(None, 0))(hs[0], xb)
    for i in range(3):
        ci, yi = f(hs[i], XS)
        np.testing.assert_allclose(c[i], ci, rtol=1e-14)
        np.testing.assert_allclose(ys[i], yi, rtol=1e-14)
    for i in range(2):
        ci, yi = f(hs[0], xb[i])
        np.testing.assert_allclose(c2[i], ci, rtol=1e-14)
        np.testing.assert_allclose(ys2[i], yi, rtol=1e-14)
    per_example = sg.vmap(sg.grad(rnn), in_axes=(None, None, 0))(W, U, np.stack([XS, 2 * XS]))
    np.testing.assert_allclose(per_example[1], sg.grad(rnn_loop)(W, U, 2 * XS), rtol=1e-12)


def test_fori_loop():
    assert sg.fori_loop(0, 5, lambda i, v: v * 2 + i, 1.0) == 58.0
    assert sg.fori_loop(3, 3, lambda i, v: v * 2, 1.5) == 1.5

    def f(a):
        return sg.fori_loop(0, 5, lambda i, v: np.sin(v * a + i), 1.0)

    def f_loop(a):
        v = 1.0
        for i in range(5):
            v = np.sin(v * a + i)
        return v
    assert sg.grad(f)(0.3) == pytest.approx(sg.grad(f_loop)(0.3), rel=1e-13)
    sg.check_grads(f, (0.3,), order=2)


def test_compiled_numpy_backend_matches_evaluator():
    f = sg.compile(sg.value_and_grad(rnn, argnums=(0, 1)), backend="numpy")
    v, (gw, gu) = f(W, U, XS)
    vr, (rw, ru) = sg.value_and_grad(rnn_loop, argnums=(0, 1))(W, U, XS)
    assert v == pytest.approx(vr, rel=1e-14)
    np.testing.assert_allclose(gw, rw, rtol=1e-12)


def test_carry_shape_and_dtype_changes_are_named():
    with pytest.raises(sg.ShapeError, match=r"shape of carry\[1\].*\(2,\).*\(3,\)"):
        sg.scan(lambda c, x: ((c[0], np.ones(3)), None), (1.0, np.ones(2)), length=3)
    with pytest.raises(sg.DTypeError, match=r"dtype of carry.*float32.*float64"):
        sg.scan(lambda c, x: (c * np.float64(2.0), None), np.float32(1.0), length=3)
    with pytest.raises(sg.SymgraphError, match="structure"):
        sg.scan(lambda c, x: ((c, c), None), 1.0, length=3)
    with pytest.raises(sg.SymgraphError, match="pair"):
        sg.scan(lambda c, x: c, 1.0, length=3)


def test_bad_lengths_and_bounds():
    with pytest.raises(sg.ShapeError, match=">= 0"):
        sg.scan(lambda c, x: (c, None), 1.0, length=-1)
    with pytest.raises(sg.ShapeError, match="leading length 4"):
        sg.scan(lambda c, x: (c, None), 1.0, (np.ones(3), np.ones(4)))
    with pytest.raises(sg.ShapeError, match="length=5"):
        sg.scan(lambda c, x: (c, None), 1.0, np.ones(3), length=5)
    with pytest.raises(sg.ShapeError, match="give xs or length"):
        sg.scan(lambda c, x: (c, None), 1.0)
    with pytest.raises(sg.SymgraphError, match="while_loop"):
        sg.trace(lambda n: sg.fori_loop(0, n, lambda i, v: v, 1.0), 3)
    with pytest.raises(sg.SymgraphError, match="unroll"):
        sg.scan(lambda c, x: (c, None), 1.0, length=2, unroll=0)


# ----- native loops (LLVM): the body compiled once, called once per step -----


def test_llvm_scan_matches_evaluator():
    pytest.importorskip("llvmlite")
    f = sg.compile(sg.value_and_grad(rnn, argnums=(0, 1, 2)))
    v, g = f(W, U, XS)
    vr, gr = sg.value_and_grad(rnn_loop, argnums=(0, 1, 2))(W, U, XS)
    assert v == pytest.approx(vr, rel=1e-13)
    for a, b in zip(g, gr):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    assert f.stats["loop_regions"] >= 2  # the forward loop and the backward loop

    def fr(h0, xs):
        return sg.scan(lambda h, x: (np.tanh(h @ W + x @ U), np.sum(h)), h0, xs, reverse=True)
    hs = RNG.normal(size=(3, 4))
    got = sg.compile(sg.vmap(fr, in_axes=(0, None)))(hs, XS)
    want = sg.vmap(fr, in_axes=(0, None))(hs, XS)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    W32, U32, X32 = (x.astype(np.float32) for x in (W, U, XS))
    np.testing.assert_allclose(sg.compile(sg.grad(rnn))(W32, U32, X32), sg.grad(rnn)(W32, U32, X32), rtol=2e-5,
                               atol=1e-5)


def test_llvm_nested_scans_and_second_order():
    pytest.importorskip("llvmlite")

    def nest(a, xs):
        def outer(c, x):
            d, _ = sg.scan(lambda d, z: (d * a + z * c, d), x, np.arange(3.0))
            return c + np.sin(d), d
        return sg.scan(outer, 0.3, xs)[0]
    gg = sg.grad(sg.grad(nest))
    assert sg.compile(gg)(0.7, XS[:, 0]) == pytest.approx(gg(0.7, XS[:, 0]), rel=1e-12)
    k = sg.compile(lambda a: sg.fori_loop(0, 3, lambda i, c: (c[0] * a, c[1] + i), (1.0, 0)))
    v, i = k(2.0)
    assert v == 8.0 and i == 3 and i.dtype == np.int64


def test_llvm_program_size_does_not_grow_with_length():
    pytest.importorskip("llvmlite")

    def f(h, xs):
        return np.sum(sg.scan(lambda c, x: (np.sin(c) * x, c), h, xs)[1])
    s = [sg.compile(sg.grad(f)) for _ in range(2)]
    s[0](0.5, np.ones(10))
    s[1](0.5, np.ones(2000))
    assert s[0].stats["kernels"] == s[1].stats["kernels"] and s[0].stats["nodes"] == s[1].stats["nodes"]
    assert s[1](0.5, np.full(2000, 0.999)) == pytest.approx(sg.grad(f)(0.5, np.full(2000, 0.999)), rel=1e-12)


# ----- cond, switch, while_loop -----


def _branchy(x, a):
    return sg.cond(np.sum(x) > 0, lambda x: np.sin(x) * a, lambda x: np.sqrt(-x) + a, x)


def test_cond_values_gradients_and_untaken_nan():
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(_branchy(x, 2.0), 2 * np.sin(x), rtol=1e-15)
    np.testing.assert_allclose(_branchy(-x, 2.0), np.sqrt(x) + 2, rtol=1e-15)
    gx, ga = sg.grad(lambda x, a: np.sum(_branchy(x, a)), argnums=(0, 1))(x, 2.0)
    np.testing.assert_allclose(gx, 2 * np.cos(x), rtol=1e-14)
    assert ga == pytest.approx(np.sum(np.sin(x)), rel=1e-14)
    gx, ga = sg.grad(lambda x, a: np.sum(_branchy(x, a)), argnums=(0, 1))(-x, 2.0)
    np.testing.assert_allclose(gx, -0.5 / np.sqrt(x), rtol=1e-14)
    assert ga == 2.0
    for xx in (x, -x):
        sg.check_grads(lambda x, a: np.sum(_branchy(x, a)), (xx, 2.0), order=2)
    # the untaken branch's derivative is infinite at x = -1 (sqrt of a negative): it never runs
    assert sg.grad(lambda x: sg.cond(x > 0, np.sqrt, lambda x: x * 0.0, x))(-1.0) == 0.0


def test_switch_and_vmap_of_branches():
    fs = [lambda x: x + 1, lambda x: x * 2, lambda x: -x]
    assert sg.switch(1, fs, 3.0) == 6.0 and sg.switch(7, fs, 3.0) == -3.0  # clamped, as lax.switch
    got = sg.vmap(lambda i, x: sg.switch(i, fs, x))(np.array([0, 1, 2, -4]), np.full(4, 3.0))
    np.testing.assert_array_equal(got, [4.0, 6.0, -3.0, 4.0])
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(sg.vmap(lambda x: _branchy(x, 2.0))(np.stack([x, -x])),
                               [_branchy(x, 2.0), _branchy(-x, 2.0)], rtol=1e-15)
    sg.check_grads(lambda x: np.sum(sg.vmap(lambda r: _branchy(r, 2.0))(x)), (np.stack([x, -x]),), order=1)


def test_cond_errors():
    with pytest.raises(sg.DTypeError, match="bool"):
        sg.cond(1.5, lambda x: x, lambda x: x, 1.0)
    with pytest.raises(sg.ShapeError, match="scalar"):
        sg.cond(np.array([True, False]), lambda x: x, lambda x: x, 1.0)
    with pytest.raises(sg.ShapeError, match=r"shape \(3,\) in true_fn"):
        sg.cond(True, lambda x: np.ones(3), lambda x: x, np.ones(2))
    with pytest.raises(sg.DTypeError, match="dtype"):
        sg.cond(True, lambda x: x.astype(np.float32), lambda x: x, np.ones(2))
    with pytest.raises(sg.DTypeError, match="integer"):
        sg.switch(1.0, [lambda x: x], 1.0)
    with pytest.raises(sg.TracerConversionError, match="sg.cond"):
        sg.grad(lambda x: x if x > 0 else -x)(1.0)


def _newton(a):
    return sg.while_loop(lambda c: np.abs(c[0] * c[0] - a) > 1e-12,
                         lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1), (a, 0))


def test_while_loop_forward_jvp_vmap():
    r, k = _newton(2.0)
    assert r == pytest.approx(np.sqrt(2.0), rel=1e-15) and k == 5
    _, t = sg.jvp(lambda a: _newton(a)[0], (2.0,), (1.0,))
    assert t == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)
    rs, ks = sg.vmap(_newton)(np.array([2.0, 9.0, 1.0]))
    np.testing.assert_allclose(rs, [np.sqrt(2.0), 3.0, 1.0], rtol=1e-15)
    np.testing.assert_array_equal(ks, [5, 6, 0])
    with pytest.raises(sg.UnsupportedOpError, match="max_steps"):
        sg.grad(lambda a: _newton(a)[0])(2.0)
    with pytest.raises(sg.DTypeError, match="bool scalar"):
        sg.while_loop(lambda c: c, lambda c: c, 1.0)
    with pytest.raises(sg.ShapeError, match="shape of val"):
        sg.while_loop(lambda c: np.sum(c) > 0, lambda c: np.ones(3), np.ones(2))


def test_while_loop_with_max_steps_reverse_mode():
    def f(a):
        return sg.while_loop(lambda c: np.abs(c * c - a) > 1e-12, lambda c: 0.5 * (c + a / c), a, max_steps=50)
    assert f(2.0) == pytest.approx(np.sqrt(2.0), rel=1e-15)
    assert sg.grad(f)(2.0) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)
    assert sg.grad(sg.grad(f))(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-10)
    sg.check_grads(f, (2.0,), order=2)
    assert sg.while_loop(lambda c: c < 10.0, lambda c: c + 1.0, 0.0, max_steps=10) == 10.0  # ends at the bound


def _sqrt_bounded(a, n):
    return sg.while_loop(lambda c: np.abs(c * c - a) > 1e-12, lambda c: 0.5 * (c + a / c), a, max_steps=n)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_while_loop_past_max_steps_raises(backend):
    """A bounded loop whose condition is still true after max_steps raises LoopLimitError at run time,
    naming max_steps and the user's line, in the value, in both derivatives, under vmap, and from inside
    another region (a scan body, a cond branch), evaluator and compiled."""
    if backend == "llvm":
        pytest.importorskip("llvmlite")
    ev = backend == "numpy"
    comp = (lambda f: f) if ev else (lambda f: sg.compile(f))
    cases = [  # (function, argument that ends within the bound, argument that does not, its value)
        (lambda a: _sqrt_bounded(a, 6), 2.0, 1e6, np.sqrt(2.0)),
        (sg.grad(lambda a: _sqrt_bounded(a, 6)), 2.0, 1e6, 0.5 / np.sqrt(2.0)),
        (lambda a: sg.jvp(lambda b: _sqrt_bounded(b, 6), (a,), (1.0,))[1], 2.0, 1e6, 0.5 / np.sqrt(2.0)),
        (lambda a: sg.vmap(lambda b: _sqrt_bounded(b, 6))(np.stack([a, 2 * a]))[0], 2.0, 1e6, np.sqrt(2.0)),
        (lambda a: sg.scan(lambda c, x: (_sqrt_bounded(c + x, 6), None), a, np.zeros(2))[0], 2.0, 1e6,
         np.sqrt(np.sqrt(2.0))),
        (sg.grad(lambda a: sg.scan(lambda c, x: (_sqrt_bounded(c + x, 6), None), a, np.zeros(2))[0]), 2.0, 1e6,
         0.25 * 2.0 ** -0.75),
        (lambda a: sg.cond(a > 0, lambda b: _sqrt_bounded(b, 6), lambda b: -b, a), 2.0, 1e6, np.sqrt(2.0)),
    ]
    for f, good, bad, want in cases:
        cf = comp(f)
        assert float(cf(good)) == pytest.approx(want, rel=1e-10)
        with pytest.raises(sg.LoopLimitError, match=r"max_steps=6") as e:
            cf(bad)
        assert e.value.location is not None and e.value.location.function == "_sqrt_bounded"
    assert comp(lambda a: sg.cond(a > 0, lambda b: _sqrt_bounded(b, 6), lambda b: -b, a))(-1e6) == 1e6  # untaken


def test_llvm_cond_switch_while():
    pytest.importorskip("llvmlite")
    x = np.array([0.5, 1.0])
    f = sg.compile(lambda x: _branchy(x, 2.0))
    g = sg.compile(sg.grad(lambda x: np.sum(_branchy(x, 2.0))))
    for xx in (x, -x):
        np.testing.assert_allclose(f(xx), _branchy(xx, 2.0), rtol=1e-15)
        np.testing.assert_allclose(g(xx), sg.grad(lambda x: np.sum(_branchy(x, 2.0)))(xx), rtol=1e-14)
    fs = [lambda x: x + 1, lambda x: x * 2, lambda x: -x]
    sw = sg.compile(lambda i, x: sg.switch(i, fs, x))
    assert [float(sw(np.int64(i), 3.0)) for i in (-1, 0, 1, 2, 9)] == [4.0, 4.0, 6.0, -3.0, -3.0]
    r, k = sg.compile(_newton)(2.0)
    assert r == pytest.approx(np.sqrt(2.0), rel=1e-15) and k == 5
    rs, ks = sg.compile(sg.vmap(_newton))(np.array([2.0, 9.0, 1.0]))
    np.testing.assert_array_equal(ks, [5, 6, 0])

    def nb(a):
        return sg.while_loop(lambda c: np.abs(c * c - a) > 1e-12, lambda c: 0.5 * (c + a / c), a, max_steps=50)
    v, d = sg.compile(sg.value_and_grad(nb))(2.0)
    assert v == pytest.approx(np.sqrt(2.0), rel=1e-15) and d == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_unroll_repeats_the_body_with_the_same_values(reverse):
    rng = np.random.default_rng(0)
    W, xs = 0.5 * rng.normal(size=(4, 4)), rng.normal(size=(11, 4))

    def make(unroll):
        def f(W, xs):
            def cell(c, x):
                h, n = c
                h = np.tanh(h @ W + x)
                return (h, n + 1), (np.sum(h), h * 2)
            (h, n), (ys, zs) = sg.scan(cell, (np.ones(4), 0), xs, unroll=unroll, reverse=reverse)
            return np.sum(h ** 2) + np.sum(ys * np.arange(xs.shape[0])) + np.sum(zs ** 3) + n
        return f

    ref, gref = make(1)(W, xs), sg.grad(make(1))(W, xs)
    cref = sg.compile(make(1))(W, xs)
    for u in (2, 4, 11, 20, True):
        f = make(u)
        assert f(W, xs) == ref                    # the same ops on the same operands: the same bits
        np.testing.assert_allclose(sg.grad(f)(W, xs), gref, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(sg.compile(f)(W, xs), cref, rtol=1e-14)
    g = sg.trace(make(4), W, xs)
    lengths = sorted({n.attr("region").length for n in g.toposort() if n.op.name == "scan"})
    assert lengths == [2, 3]                      # 11 = 2 iterations of 4 steps + a loop of 3
    with pytest.raises(sg.SymgraphError, match="unroll"):
        sg.scan(lambda c, x: (c, x), 0.0, xs, unroll=0)
