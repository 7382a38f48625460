"""W12 (continued) — GradBench's particle eval: a gradient of a function that takes a gradient (nested AD).

A charged particle starts at x(0) = (0, 8) with velocity (0.75, 0) in the
potential p(x; w) = 1/‖x − (10, 10 − w)‖ + 1/‖x − (10, 0)‖ and is moved by
naive Euler steps (Δt = 0.1, acceleration −∇ₓp) while the next position is
above the x axis; linear interpolation gives where it crosses the axis,
x₀(t_f), and the objective is x₀(t_f)². Gradient descent on w from w = 0
(GradBench's multivariate_argmin: step η = 1e-5 doubled after 10 accepted
steps, halved on a rejected one, stop when |g| ≤ 1e-5 or the step moves
≤ 1e-5) minimizes it; GradBench's expected answer is w = 0.2071918746486116.
The objective's derivative with respect to w differentiates through
−∇ₓp, so every system nests two derivatives (Pearlmutter & Siskind 2008).

symgraph has no data-dependent while loop, so the Euler loop is written with
a fixed bound of ``MAX_STEPS`` steps in which a finished trajectory stops
moving (``np.where`` on a ``done`` flag); the number of steps taken is the
same as the while loop's (the check compares the final w).
"""

from __future__ import annotations

import math

import numpy as np

DT = 0.1
W_EXPECTED = 0.2071918746486116


def accel(x, w):
    """−∇ₓp(x; w) = Σ_k (x − c_k)/‖x − c_k‖³ for the charges (10, 10 − w), (10, 0) (NumPy, hand-derived)."""
    a1 = x - np.array([10.0, 10.0 - w])
    a2 = x - np.array([10.0, 0.0])
    return a1 / np.linalg.norm(a1) ** 3 + a2 / np.linalg.norm(a2) ** 3


def trajectory_steps(w: float) -> int:
    """How many Euler steps the while loop takes for control w."""
    x, xdot, k = np.array([0.0, 8.0]), np.array([0.75, 0.0]), 0
    while (x + DT * xdot)[1] > 0:
        x, xdot, k = x + DT * xdot, xdot + DT * accel(x, w), k + 1
    return k
MAX_STEPS = 400
X0, XDOT0 = (0.0, 8.0), (0.75, 0.0)


def trajectory_numpy(w: float) -> tuple[float, float]:
    """Hand-derived ``(x₀(t_f)², d/dw x₀(t_f)²)``: the Euler loop with forward tangents d/dw carried along.

    With a_k = x − c_k, the acceleration Σ a_k/‖a_k‖³ has the derivative
    Σ (I/‖a‖³ − 3 a aᵀ/‖a‖⁵) ȧ_k, where ȧ₁ = ẋ + (0, 1) (c₁ = (10, 10 − w))
    and ȧ₂ = ẋ.
    """
    x, v = np.array(X0), np.array(XDOT0)
    dx, dv = np.zeros(2), np.zeros(2)
    steps = 0
    while (x + DT * v)[1] > 0:
        acc, dacc = np.zeros(2), np.zeros(2)
        for c, dc in ((np.array([10.0, 10.0 - w]), np.array([0.0, -1.0])), (np.array([10.0, 0.0]), np.zeros(2))):
            a, da = x - c, dx - dc
            r = math.sqrt(a @ a)
            acc += a / r ** 3
            dacc += da / r ** 3 - 3 * a * (a @ da) / r ** 5
        x, dx = x + DT * v, dx + DT * dv
        v, dv = v + DT * acc, dv + DT * dacc
        steps += 1
        if steps >= MAX_STEPS:
            raise RuntimeError(f"particle: trajectory for w={w} did not reach the x axis in {MAX_STEPS} steps")
    t = -x[1] / v[1]
    dt = -(dx[1] * v[1] - x[1] * dv[1]) / v[1] ** 2
    xt, dxt = x[0] + t * v[0], dx[0] + dt * v[0] + t * dv[0]
    return xt * xt, 2 * xt * dxt


def argmin(f, g, w0: float) -> float:
    """GradBench's multivariate_argmin (solver.fut) for one variable: f objective, g its derivative."""
    x, fx, gx, eta, i = w0, float(f(w0)), float(g(w0)), 1e-5, 0
    while True:
        if abs(gx) <= 1e-5:
            return x
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        xp = x - eta * gx
        if abs(x - xp) <= 1e-5:
            return x
        fxp = float(f(xp))
        if fxp < fx:
            x, fx, gx, i = xp, fxp, float(g(xp)), i + 1
        else:
            eta, i = eta / 2, 0


def particle_numpy(w0):
    """The eval with the hand-derived derivative: final w (as a 0-d array)."""
    return np.asarray(argmin(lambda w: trajectory_numpy(w)[0], lambda w: trajectory_numpy(w)[1], float(w0)))


def trajectory_masked(w, grad, xp=np, fori_loop=None):
    """x₀(t_f)² with the Euler loop as ``MAX_STEPS`` masked steps; ``grad(p)`` gives ∇ₓp (nested derivative).

    Args:
        w: scalar control. grad: the system's gradient transformation.
        xp: array namespace. fori_loop: the system's static-trip-count loop.
    """
    def p(x, w):
        a1 = x - xp.stack([10.0 + 0.0 * w, 10.0 - w])
        a2 = x - xp.array([10.0, 0.0])
        return 1.0 / xp.sqrt(xp.sum(a1 * a1)) + 1.0 / xp.sqrt(xp.sum(a2 * a2))
    gp = grad(p)

    def body(i, c):
        x, v, done = c
        acc = -gp(x, w)
        xn = x + DT * v
        go = (xn[1] > 0) & (done == 0)
        return xp.where(go, xn, x), xp.where(go, v + DT * acc, v), xp.where(go, done, 1.0)
    x, v, _ = fori_loop(0, MAX_STEPS, body, (xp.array(X0) + 0.0 * w, xp.array(XDOT0) + 0.0 * w, 0.0 * w))
    xt = x + (-x[1] / v[1]) * v
    return xt[0] ** 2


def trajectory_loop(w, grad, xp):
    """x₀(t_f)² with a Python while loop (for the eager systems: autograd, torch)."""
    def p(x):
        a1 = x - xp.stack([10.0 + 0.0 * w, 10.0 - w])
        a2 = x - xp.stack([10.0 + 0.0 * w, 0.0 * w])
        return 1.0 / xp.sqrt(xp.sum(a1 * a1)) + 1.0 / xp.sqrt(xp.sum(a2 * a2))
    x, v = xp.stack([0.0 + 0.0 * w, 8.0 + 0.0 * w]), xp.stack([0.75 + 0.0 * w, 0.0 * w])
    while _concrete((x + DT * v)[1]) > 0:
        x, v = x + DT * v, v - DT * grad(p, x)
    xt = x + (-x[1] / v[1]) * v
    return xt[0] ** 2


def _concrete(v) -> float:
    """The float inside a (possibly nested) autograd box or a torch tensor, for the loop's test."""
    if hasattr(v, "detach"):
        return float(v.detach())
    while hasattr(v, "_value"):
        v = v._value
    return float(v)


# --------------------------------------------------------------------------- systems

def _driver(f, g):
    return lambda w0: np.asarray(argmin(f, g, float(w0)))


def systems():
    from .common import import_jax, import_symgraph, import_torch
    from .harness import System

    def sg_prep(w0):
        sg, _ = import_symgraph()

        def build():
            obj = (lambda w: trajectory_masked(w, sg.grad, np, sg.fori_loop))
            f, g = sg.compile(obj), sg.compile(sg.grad(obj))
            run = _driver(f, g)
            return lambda: run(w0)
        return build

    def jax_prep(w0):
        jax, jnp = import_jax()

        def build():
            obj = (lambda w: trajectory_masked(w, jax.grad, jnp, jax.lax.fori_loop))
            f, g = jax.jit(obj), jax.jit(jax.grad(obj))
            run = _driver(lambda w: jax.block_until_ready(f(w)), lambda w: jax.block_until_ready(g(w)))
            return lambda: run(w0)
        return build

    def ag_prep(w0):
        import autograd
        import autograd.numpy as anp

        def build():
            obj = (lambda w: trajectory_loop(w, lambda p, x: autograd.grad(p)(x), anp))
            run = _driver(obj, autograd.grad(obj))
            return lambda: run(w0)
        return build

    def torch_prep(w0):
        torch = import_torch()

        def build():
            def tgrad(p, x):
                x = x if x.requires_grad else x.detach().requires_grad_(True)
                (gx,) = torch.autograd.grad(p(x), [x], create_graph=True)
                return gx

            def f(w):
                wt = torch.tensor(float(w), dtype=torch.float64, requires_grad=True)
                return trajectory_loop(wt, tgrad, torch), wt

            def g(w):
                y, wt = f(w)
                (gw,) = torch.autograd.grad(y, [wt])
                return float(gw)
            run = _driver(lambda w: float(f(w)[0]), g)
            return lambda: run(w0)
        return build

    return [
        System("symgraph", sg_prep, peer=False,
               note="reverse over reverse: sg.compile(sg.grad(obj)), sg.grad(p) inside an sg.fori_loop of "
                    f"{MAX_STEPS} masked Euler steps; the argmin driver is Python"),
        System("numpy", lambda w0: (lambda: (lambda: particle_numpy(w0))),
               note="hand-derived forward tangent through the while loop"),
        System("jax", jax_prep, note="reverse over reverse, jax.jit of grad through lax.fori_loop "
                                     f"({MAX_STEPS} masked steps); block_until_ready"),
        System("autograd", ag_prep, note="nested autograd.grad through the Python while loop"),
        System("torch", torch_prep, note="eager; inner torch.autograd.grad(create_graph=True), Python while loop"),
    ]


def tables(settings):
    """Two tables: timed (symgraph, numpy, jax), and first call only (autograd, torch: one optimization
    takes tens of seconds to minutes in their Python while loops). Final w from w0 = 0, rho < 1e-8
    against the hand-derived run."""
    import dataclasses

    from .field import rho_compare
    from .harness import run_case
    ref = particle_numpy(0.0)
    sys_ = systems()
    few = dataclasses.replace(settings, min_reps=3, max_reps=max(3, min(settings.max_reps, 20)))
    notes = [f"GradBench's expected final w: {W_EXPECTED}; the reference run gives {float(ref)!r}"]
    timed = run_case(few, "particle: argmin_w x0(t_f)^2 from w = 0 (one whole optimization per call)",
                     (np.asarray(0.0),), ref, [s for s in sys_ if s.name in ("symgraph", "numpy", "jax")],
                     check=rho_compare, notes=notes)
    slow = run_case(few, "particle, first call only (checked, not timed)", (np.asarray(0.0),), ref,
                    [s for s in sys_ if s.name in ("autograd", "torch")], check=rho_compare, timed=False)
    return [timed, slow]
