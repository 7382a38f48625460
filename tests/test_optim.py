"""Optimizers and schedules (symgraph.optim): against NumPy references, traced vs eager, donation."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph import optim


def _params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((3, 5)).astype(dtype), "b": rng.standard_normal(5).astype(dtype),
            "layers": [rng.standard_normal((2, 3)).astype(dtype)]}


def _grads(k, dtype=np.float64):
    return _params(dtype, seed=100 + k)


def _flat(tree):
    return sg.tree_leaves(tree)


# ----- NumPy references, written from the papers' update rules -----


def ref_sgd(ps, gs, lr, mu=0.0, nesterov=False, wd=0.0):
    p, v = [x.astype(np.float64) for x in ps], [np.zeros_like(x, np.float64) for x in ps]
    for g_step in gs:
        for i, g in enumerate(g_step):
            g = g + wd * p[i]
            if mu:
                v[i] = mu * v[i] + g
                d = g + mu * v[i] if nesterov else v[i]
            else:
                d = g
            p[i] = p[i] - lr * d
    return p


def ref_adam(ps, gs, lrs, b1, b2, eps, wd=0.0, decoupled=False, decay_mask=None):
    p = [x.astype(np.float64) for x in ps]
    m = [np.zeros_like(x) for x in p]
    v = [np.zeros_like(x) for x in p]
    for t, g_step in enumerate(gs, start=1):
        lr = lrs(t - 1) if callable(lrs) else lrs
        for i, g in enumerate(g_step):
            dec = wd if (decay_mask is None or decay_mask[i]) else 0.0
            if not decoupled:
                g = g + dec * p[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mhat = m[i] / (1 - b1**t)
            vhat = v[i] / (1 - b2**t)
            p[i] = p[i] - lr * (mhat / (np.sqrt(vhat) + eps) + (dec * p[i] if decoupled else 0.0))
    return p, m, v


def _run_eager(opt, params, grads_list):
    state = opt.init(params)
    for g in grads_list:
        params, state = opt.update(g, state, params)
    return params, state


@pytest.mark.parametrize("mu,nesterov,wd", [(0.0, False, 0.0), (0.9, False, 0.0), (0.9, True, 0.01)])
def test_sgd_matches_reference(mu, nesterov, wd):
    params = _params()
    gl = [_grads(k) for k in range(4)]
    out, state = _run_eager(optim.sgd(0.1, momentum=mu, nesterov=nesterov, weight_decay=wd), params, gl)
    ref = ref_sgd(_flat(params), [_flat(g) for g in gl], 0.1, mu, nesterov, wd)
    for a, b in zip(_flat(out), ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert int(state["step"]) == 4 and state["step"].dtype == np.int32
    assert ("velocity" in state) == bool(mu)


def test_adam_matches_reference():
    params = _params()
    gl = [_grads(k) for k in range(5)]
    out, state = _run_eager(optim.adam(1e-2, b1=0.8, b2=0.95, eps=1e-6), params, gl)
    ref, m, v = ref_adam(_flat(params), [_flat(g) for g in gl], 1e-2, 0.8, 0.95, 1e-6)
    for a, b in zip(_flat(out), ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    for a, b in zip(_flat(state["mu"]), m):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    for a, b in zip(_flat(state["nu"]), v):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_adam_coupled_weight_decay_differs_from_adamw():
    params = _params()
    gl = [_grads(k) for k in range(3)]
    a, _ = _run_eager(optim.adam(1e-2, weight_decay=0.1), params, gl)
    w, _ = _run_eager(optim.adamw(1e-2, weight_decay=0.1), params, gl)
    ra, _, _ = ref_adam(_flat(params), [_flat(g) for g in gl], 1e-2, 0.9, 0.999, 1e-8, wd=0.1, decoupled=False)
    rw, _, _ = ref_adam(_flat(params), [_flat(g) for g in gl], 1e-2, 0.9, 0.999, 1e-8, wd=0.1, decoupled=True)
    for x, y in zip(_flat(a), ra):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)
    for x, y in zip(_flat(w), rw):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)
    assert max(np.abs(x - y).max() for x, y in zip(_flat(a), _flat(w))) > 1e-6


def test_adamw_mask_and_schedule():
    params = _params()
    gl = [_grads(k) for k in range(6)]
    sched = optim.warmup_cosine(1e-2, 2, 6)
    mask = lambda p: sg.tree_map(lambda x: np.ndim(x) >= 2, p)  # noqa: E731
    out, _ = _run_eager(optim.adamw(sched, weight_decay=0.5, mask=mask), params, gl)
    dm = [np.ndim(x) >= 2 for x in _flat(params)]
    assert dm.count(False) == 1  # the bias
    ref, _, _ = ref_adam(_flat(params), [_flat(g) for g in gl], sched, 0.9, 0.999, 1e-8, wd=0.5, decoupled=True,
                         decay_mask=dm)
    for x, y in zip(_flat(out), ref):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("make", [
    lambda: optim.sgd(0.05, momentum=0.9),
    lambda: optim.sgd(optim.exponential_decay(0.1, 0.5, 3), momentum=0.5, nesterov=True),
    lambda: optim.adam(optim.linear_warmup(1e-2, 3)),
    lambda: optim.adamw(optim.warmup_cosine(2e-2, 2, 8), weight_decay=0.1),
], ids=["momentum", "nesterov-expdecay", "adam-warmup", "adamw-warmupcosine"])
def test_traced_update_matches_eager(make):
    """The update traced into a compiled graph (step counter and schedule traced) equals the eager update."""
    opt = make()
    params = _params()
    gl = [_grads(k) for k in range(5)]
    cf = sg.compile(lambda g, s, p: opt.update(g, s, p)[::-1], backend="numpy")
    s_c, p_c = opt.init(params), params
    for g in gl:
        s_c, p_c = cf(g, s_c, p_c)
    p_e, s_e = _run_eager(opt, params, gl)
    for a, b in zip(_flat(p_c), _flat(p_e)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert int(s_c["step"]) == 5


def test_float32_params_stay_float32_under_a_traced_schedule():
    opt = optim.adamw(optim.cosine_decay(1e-2, 10), weight_decay=0.01)
    params = _params(np.float32)
    state = opt.init(params)
    cf = sg.compile(lambda g, s, p: opt.update(g, s, p), backend="numpy")
    p, s = cf(_grads(0, np.float32), state, params)
    for x in _flat(p) + _flat(s["mu"]) + _flat(s["nu"]):
        assert x.dtype == np.float32
    ref, _, _ = ref_adam(_flat(params), [_flat(_grads(0))], optim.cosine_decay(1e-2, 10), 0.9, 0.999, 1e-8,
                         wd=0.01, decoupled=True)
    for a, b in zip(_flat(p), ref):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_schedules_closed_form():
    c = optim.cosine_decay(1.0, 10, final=0.1)
    assert c(0) == pytest.approx(1.0) and c(10) == pytest.approx(0.1) and c(20) == pytest.approx(0.1)
    assert c(5) == pytest.approx(0.55)
    w = optim.linear_warmup(2.0, 4)
    assert [float(w(s)) for s in (0, 1, 4, 9)] == pytest.approx([0.0, 0.5, 2.0, 2.0])
    wc = optim.warmup_cosine(1.0, 2, 12)
    assert [float(wc(s)) for s in (0, 1, 2, 7, 12)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0])
    e = optim.exponential_decay(3.0, 0.5, 2)
    assert float(e(4)) == pytest.approx(0.75)
    assert optim.constant_schedule(0.3)(17) == 0.3
    # the same schedules traced on an int32 step counter
    for sched in (c, w, wc, e):
        f = sg.compile(lambda s, sched=sched: sched(s) * 1.0, backend="numpy")
        for s in (0, 1, 3, 11):
            assert float(f(np.int32(s))) == pytest.approx(float(sched(s)), rel=1e-6, abs=1e-7)


def test_clip_by_global_norm():
    g = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    assert float(optim.global_norm(g)) == pytest.approx(5.0)
    c = optim.clip_by_global_norm(g, 1.0)
    np.testing.assert_allclose(c["a"], [0.6, 0.0])
    np.testing.assert_allclose(c["b"], [[0.8]])
    same = optim.clip_by_global_norm(g, 10.0)
    np.testing.assert_allclose(same["a"], g["a"])
    f = sg.compile(lambda g: optim.clip_by_global_norm(g, 2.5), backend="numpy")
    np.testing.assert_allclose(f(g)["b"], [[2.0]])


def test_optimizers_minimize_a_quadratic():
    """Each optimizer, compiled with its gradient, drives an ill-conditioned quadratic to its minimum."""
    a = np.diag([1.0, 10.0, 100.0])
    target = np.array([1.0, -2.0, 0.5])

    def loss(p):
        d = p["x"] - target
        return 0.5 * snp.sum(d * snp.matmul(a, d))

    cases = [(optim.sgd(0.015, momentum=0.9), 300), (optim.adam(0.05), 800), (optim.adamw(0.05, weight_decay=0.0), 800)]
    for opt, n in cases:
        def step(p, s, opt=opt):
            g = sg.grad(loss)(p)
            return opt.update(g, s, p)

        cf = sg.compile(step, backend="numpy", donate_argnums=(0, 1))
        p = {"x": np.zeros(3)}
        s = opt.init(p)
        for _ in range(n):
            p, s = cf(p, s)
        np.testing.assert_allclose(p["x"], target, atol=1e-3)


def test_donated_buffers_are_reused_across_steps():
    """donate_argnums=(0, 1): the new parameters and moments are the argument arrays, updated in place."""
    opt = optim.adam(1e-2)

    def loss(p, x):
        return snp.sum(snp.tanh(snp.matmul(x, p["w"]) + p["b"]) ** 2)

    def step(p, s, x):
        value, g = sg.value_and_grad(loss)(p, x)
        p, s = opt.update(g, s, p)
        return p, s, value

    x = np.random.default_rng(0).standard_normal((4, 3))
    p0 = {"w": np.random.default_rng(1).standard_normal((3, 2)), "b": np.zeros(2)}
    donated = sg.compile(step, backend="numpy", donate_argnums=(0, 1))
    plain = sg.compile(step, backend="numpy")
    p, s = sg.tree_map(np.copy, p0), opt.init(p0)
    q, r = sg.tree_map(np.copy, p0), opt.init(p0)
    bufs = {id(v) for v in _flat((p, s))}
    for _ in range(3):
        p_new, s_new, _ = donated(p, s, x)
        assert all(a is b for a, b in zip(_flat((p_new, s_new)), _flat((p, s))))
        p, s = p_new, s_new
        q, r, _ = plain(q, r, x)
    assert {id(v) for v in _flat((p, s))} == bufs
    for a, b in zip(_flat((p, s)), _flat((q, r))):
        np.testing.assert_array_equal(a, b)
    # without donation, fresh arrays each step
    q2, r2, _ = plain(q, r, x)
    assert not any(a is b for a, b in zip(_flat((q2, r2)), _flat((q, r))))


def test_update_checks_structure():
    opt = optim.adam()
    params = _params()
    with pytest.raises(ValueError, match="structure"):
        opt.update({"w": params["w"]}, opt.init(params), params)
    with pytest.raises(ValueError, match="momentum"):
        optim.sgd(0.1, momentum=1.0)
    with pytest.raises(ValueError, match="mask"):
        optim.adamw(mask=[True]).update(params, optim.adamw().init(params), params)


def test_bias_correction_traced_matches_eager_at_large_steps():
    """The traced bias correction -expm1(t log b) equals the host's 1 - b**t, also deep into training."""
    opt = optim.adamw(1e-3, weight_decay=0.01)
    params = _params()
    cf = sg.compile(lambda g, s, p: opt.update(g, s, p), backend="numpy")
    for t in (0, 1, 999, 99_999):
        state = opt.init(params)
        state["step"] = np.asarray(t, np.int32)
        state["mu"] = _grads(7)
        state["nu"] = sg.tree_map(np.abs, _grads(8))
        pc, sc = cf(_grads(1), state, params)
        pe, se = opt.update(_grads(1), state, params)
        for a, b in zip(_flat(pc), _flat(pe)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        assert int(sc["step"]) == int(se["step"]) == t + 1


@pytest.mark.parametrize("make", [
    lambda: optim.sgd(optim.cosine_decay(0.1, 10), momentum=0.5, weight_decay=0.1),
    lambda: optim.adam(optim.linear_warmup(1e-2, 3), weight_decay=0.1),
    lambda: optim.adamw(optim.exponential_decay(1e-2, 0.5, 4)),
], ids=["sgd", "adam", "adamw"])
def test_eager_update_keeps_float32(make):
    """Schedules return NumPy float64 scalars eagerly; the update still keeps every leaf float32."""
    opt = make()
    params = _params(np.float32)
    p, s = opt.update(_grads(0, np.float32), opt.init(params), params)
    p, s = opt.update(_grads(1, np.float32), s, p)
    assert all(x.dtype == np.float32 for x in _flat(p))
    assert all(x.dtype in (np.float32, np.int32) for x in _flat(s))
