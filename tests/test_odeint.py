"""symgraph.scipy.integrate.odeint: Dormand-Prince 5(4) inside sg.while_loop, against analytic solutions and
SciPy, derivatives in both modes against analytic values and finite differences, evaluator and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.scipy.integrate import odeint


def _decay(y, t, k):
    return -k * y


def _lv(y, t, a, b, c, d):
    return np.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])


def test_exponential_decay_values_and_derivatives():
    t = np.array([0.0, 0.5, 2.0])
    y0 = np.array([1.0, -2.0])
    y = odeint(_decay, y0, t, 0.7, mxstep=60)
    assert y.shape == (3, 2)
    np.testing.assert_allclose(y, np.exp(-0.7 * t)[:, None] * y0, rtol=1e-7, atol=1e-9)

    def f(y0, k):
        return np.sum(odeint(_decay, y0, t, k, mxstep=60)[-1] ** 2)

    gy, gk = sg.grad(f, argnums=(0, 1))(y0, 0.7)
    e = np.exp(-1.4 * 2.0)
    np.testing.assert_allclose(gy, 2 * y0 * e, rtol=1e-6)
    assert gk == pytest.approx(-2 * 2.0 * np.sum(y0 ** 2) * e, rel=1e-6)
    _, tk = sg.jvp(lambda k: f(y0, k), (0.7,), (1.0,))  # forward mode through the same solver
    assert tk == pytest.approx(gk, rel=1e-6)
    y32 = odeint(_decay, y0.astype(np.float32), t, np.float32(0.7), rtol=1e-5, atol=1e-6, mxstep=60)
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, np.exp(-0.7 * t)[:, None] * y0, rtol=1e-4)


def test_lotka_volterra_against_scipy_compiled_with_gradients():
    pytest.importorskip("llvmlite")
    si = pytest.importorskip("scipy.integrate")
    t = np.linspace(0.0, 5.0, 6)
    p = (1.5, 1.0, 3.0, 1.0)
    y0 = np.array([1.0, 1.0])
    ref = si.solve_ivp(lambda s, y: _lv(y, s, *p), (0.0, 5.0), y0, t_eval=t, method="DOP853", rtol=1e-13,
                       atol=1e-13).y.T
    run = sg.compile(lambda y0, a: odeint(_lv, y0, t, a, *p[1:], rtol=1e-10, atol=1e-10, mxstep=400))
    y = run(y0, p[0])
    np.testing.assert_allclose(y, ref, rtol=1e-7, atol=1e-8)
    assert sg.compile(lambda y0: odeint(_lv, y0, t, *p, mxstep=400), backend="numpy")(y0)[-1] == \
        pytest.approx(run(y0, p[0])[-1], rel=1e-6)

    def loss(y0, a):
        return np.sum(odeint(_lv, y0, t, a, *p[1:], rtol=1e-10, atol=1e-10, mxstep=400)[-1])

    v, (gy, ga) = sg.compile(sg.value_and_grad(loss, argnums=(0, 1)))(y0, p[0])
    assert v == pytest.approx(np.sum(ref[-1]), rel=1e-7)
    lossc = sg.compile(loss)
    h = 1e-6
    fd_y = [(lossc(y0 + h * e, p[0]) - lossc(y0 - h * e, p[0])) / (2 * h) for e in np.eye(2)]
    fd_a = (lossc(y0, p[0] + h) - lossc(y0, p[0] - h)) / (2 * h)
    np.testing.assert_allclose(gy, fd_y, rtol=1e-5)
    assert ga == pytest.approx(fd_a, rel=1e-5)
    _, ta = sg.compile(lambda a: sg.jvp(lambda b: loss(y0, b), (a,), (1.0,)))(p[0])
    assert ta == pytest.approx(ga, rel=1e-8)


def test_odeint_errors():
    with pytest.raises(sg.LoopLimitError, match="mxstep=5"):
        odeint(_decay, np.ones(2), np.array([0.0, 10.0]), 0.7, mxstep=5)
    with pytest.raises(sg.ShapeError, match="1-d"):
        odeint(_decay, np.ones(2), np.ones((2, 2)), 0.7)
    with pytest.raises(sg.ShapeError, match="func returned shape"):
        odeint(lambda y, t: np.sum(y), np.ones(2), np.array([0.0, 1.0]))
    with pytest.raises(sg.SymgraphError, match="mxstep"):
        odeint(_decay, np.ones(2), np.array([0.0, 1.0]), 0.7, mxstep=0)


def test_scipy_s_args_and_tfirst_keywords_match_scipy():
    scipy_integrate = pytest.importorskip("scipy.integrate")
    from symgraph.scipy.integrate import odeint

    def decay(y, t, k, c):
        return -k * y + c * np.sin(t)

    y0, ts = np.array([1.0, 0.5]), np.linspace(0.0, 2.0, 5)
    want = scipy_integrate.odeint(decay, y0, ts, args=(0.7, 0.3), rtol=1e-11, atol=1e-11)
    for got in (odeint(decay, y0, ts, args=(0.7, 0.3), rtol=1e-10, atol=1e-10),
                odeint(decay, y0, ts, 0.7, 0.3, rtol=1e-10, atol=1e-10),
                odeint(lambda t, y, k, c: decay(y, t, k, c), y0, ts, args=(0.7, 0.3), tfirst=True,
                       rtol=1e-10, atol=1e-10)):
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9)
    g = sg.grad(lambda k: np.sum(odeint(decay, y0, ts, args=(k, 0.3), rtol=1e-10, atol=1e-10)))(0.7)
    eps = 1e-5
    fd = (np.sum(scipy_integrate.odeint(decay, y0, ts, args=(0.7 + eps, 0.3), rtol=1e-12, atol=1e-12))
          - np.sum(scipy_integrate.odeint(decay, y0, ts, args=(0.7 - eps, 0.3), rtol=1e-12, atol=1e-12))) / (2 * eps)
    assert abs(g - fd) < 1e-5
    with pytest.raises(sg.SymgraphError, match="not both"):
        odeint(decay, y0, ts, 0.7, args=(0.3,))
