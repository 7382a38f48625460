"""W12 (continued) — GradBench's particle and saddle evals: gradients of functions that take gradients (nested AD).

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


# =========================================================================== saddle
# GradBench's saddle eval (Pearlmutter & Siskind 2008): min over x of max over y of
# f(x, y) = (x₀² + x₁²) − (y₀² + y₁²), both by GradBench's gradient descent
# (solver.fut's multivariate_argmin, on vectors), from the same start s = (1, 1).
# The outer objective r(x) = f(x, argmax_y f(x, y)) runs the inner optimizer, so
# the outer gradient differentiates through a loop whose body takes a gradient.
# The four variants pick the mode of each derivative: ff, fr, rf, rr (outer, inner).
# GradBench's expected output: all four coordinates 8.246324826140356e-06.

SADDLE_START = (1.0, 1.0)
SADDLE_EXPECTED = 8.246324826140356e-06
#: bound of the inner optimizer's steps where a reverse-mode pass needs one (it takes 170 from s)
SADDLE_MAX_INNER = 200


def saddle_f(p1, p2):
    """(p1₀² + p1₁²) − (p2₀² + p2₁²)."""
    return (p1[0] ** 2 + p1[1] ** 2) - (p2[0] ** 2 + p2[1] ** 2)


def argmin_eager(f, g, x0, concrete=float):
    """solver.fut's multivariate_argmin with Python branches (for NumPy, autograd and torch values).

    `concrete(v)` gives the float inside a (possibly boxed) scalar, for the tests.
    """
    x, eta, i = x0, 1e-5, 0
    fx, gx = f(x), g(x)
    while True:
        if concrete((gx * gx).sum() ** 0.5) <= 1e-5:
            return x
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        xp = x - eta * gx
        if concrete(((x - xp) ** 2).sum() ** 0.5) <= 1e-5:
            return x
        fxp = f(xp)
        if concrete(fxp) < concrete(fx):
            x, fx, gx, i = xp, fxp, g(xp), i + 1
        else:
            eta, i = eta / 2, 0


def saddle_numpy(start):
    """The eval with hand-derived gradients: ∇_y(−f) = 2y, and ∇r(x) = 2x (the inner
    optimizer's path does not depend on x). Returns (x, y) concatenated, (4,)."""
    s = np.asarray(start, np.float64)

    def r(x):
        return saddle_f(x, argmin_eager(lambda y: -saddle_f(x, y), lambda y: 2 * y, s))
    x = argmin_eager(r, lambda x: 2 * x, s)
    y = argmin_eager(lambda y: -saddle_f(x, y), lambda y: 2 * y, s)
    return np.concatenate([x, y])


def _solver_step(F, G, xp):
    """One step of solver.fut's iterate_while as array code (branches as `where`); state
    (x, fx, gx, eta, i, go) with floats for i and go."""
    def step(state):
        x, fx, gx, eta, i, go = state
        done = xp.sqrt(xp.sum(gx * gx)) <= 1e-5
        dbl = (i == 10.0) & ~done
        xn = x - eta * gx
        near = xp.sqrt(xp.sum((x - xn) ** 2)) <= 1e-5
        fxn, gxn = F(xn), G(xn)
        rest = ~done & ~dbl & ~near
        move = rest & (fxn < fx)
        shrink = rest & ~(fxn < fx)
        return (xp.where(move, xn, x), xp.where(move, fxn, fx), xp.where(move, gxn, gx),
                xp.where(dbl, 2 * eta, xp.where(shrink, eta / 2, eta)),
                xp.where(dbl | shrink, 0.0 * i, xp.where(move, i + 1, i)),
                xp.where(done | (~dbl & near), 0.0 * go, go))
    return step


def _inner_argmax(x, start, grad, xp, loop):
    """argmax_y f(x, y) from `start` with the system's `grad` and `loop(cond, body, init)`."""
    F = lambda y: -saddle_f(x, y)  # noqa: E731
    G = grad(F)
    y0 = xp.stack([start[0] + 0.0 * x[0], start[1] + 0.0 * x[0]])
    f0 = F(y0)
    init = (y0, f0, G(y0), 0.0 * f0 + 1e-5, 0.0 * f0, 0.0 * f0 + 1.0)
    return loop(lambda s: s[5] > 0, _solver_step(F, G, xp), init)[0]


def _fwd_grad(jvp, xp):
    """grad_f: the gradient of a function of a 2-vector by two forward-mode JVPs (solver.fut's grad_f)."""
    def grad(F):
        return lambda x: xp.stack([jvp(F, (x,), (xp.stack([1.0 + 0.0 * x[0], 0.0 * x[0]]),))[1],
                                   jvp(F, (x,), (xp.stack([0.0 * x[0], 1.0 + 0.0 * x[0]]),))[1]])
    return grad


def _saddle_driver(r, gr, F2, G2, start):
    """The two optimizations with compiled pieces: r, gr (outer cost and gradient), F2, G2 (step 2)."""
    s = np.asarray(start, np.float64)
    x = argmin_eager(lambda v: np.asarray(r(v)), lambda v: np.asarray(gr(v)), s)
    y = argmin_eager(lambda v: np.asarray(F2(v, x)), lambda v: np.asarray(G2(v, x)), s)
    return np.concatenate([x, y])


def _saddle_sg(variant):
    def prep(start):
        import symgraph as sg
        fwd = _fwd_grad(sg.jvp, np)
        g_out, g_in = (fwd if variant[0] == "f" else sg.grad), (fwd if variant[1] == "f" else sg.grad)
        bound = SADDLE_MAX_INNER if variant[0] == "r" else None        # reverse over the loop needs a bound
        loop = lambda c, b, v: sg.while_loop(c, b, v, max_steps=bound)  # noqa: E731
        st = tuple(float(v) for v in start)

        def build():
            r = lambda x: saddle_f(x, _inner_argmax(x, st, g_in, np, loop))  # noqa: E731
            F2 = lambda y, x: -saddle_f(x, y)  # noqa: E731
            parts = (sg.compile(r), sg.compile(g_out(r)), sg.compile(F2),
                     sg.compile(lambda y, x: g_out(lambda v: F2(v, x))(y)))
            return lambda: _saddle_driver(*parts, start)
        return build
    return prep


def _saddle_jax(variant):
    def prep(start):
        from .common import import_jax
        jax, jnp = import_jax()
        fwd = _fwd_grad(jax.jvp, jnp)
        g_out, g_in = (fwd if variant[0] == "f" else jax.grad), (fwd if variant[1] == "f" else jax.grad)

        def masked(c, b, v):           # jax.grad does not go through lax.while_loop: a bounded masked loop
            def body(_, s):
                n = b(s)
                return jax.tree_util.tree_map(lambda a, o: jnp.where(c(s), a, o), n, s)
            return jax.lax.fori_loop(0, SADDLE_MAX_INNER, body, v)
        loop = masked if variant[0] == "r" else jax.lax.while_loop
        st = tuple(float(v) for v in start)

        def build():
            r = lambda x: saddle_f(x, _inner_argmax(x, st, g_in, jnp, loop))  # noqa: E731
            F2 = lambda y, x: -saddle_f(x, y)  # noqa: E731
            jits = [jax.jit(f) for f in (r, g_out(r), F2, lambda y, x: g_out(lambda v: F2(v, x))(y))]
            parts = [lambda *a, f=f: jax.block_until_ready(f(*a)) for f in jits]
            return lambda: _saddle_driver(*parts, start)
        return build
    return prep


def _saddle_autograd(start):
    import autograd
    import autograd.numpy as anp

    def build():
        s = np.asarray(start, np.float64)

        def r(x):
            return saddle_f(x, argmin_eager(lambda y: -saddle_f(x, y), autograd.grad(lambda y: -saddle_f(x, y)),
                                            s, _concrete))
        gr = autograd.grad(r)
        G2 = lambda x: autograd.grad(lambda y: -saddle_f(x, y))  # noqa: E731

        def run():
            x = argmin_eager(r, gr, s)
            y = argmin_eager(lambda y: -saddle_f(x, y), G2(x), s)
            return anp.concatenate([x, y])
        return run
    return build


def _saddle_torch(start):
    from .common import import_torch
    torch = import_torch()

    def tgrad(F):
        def g(v):
            v = v if v.requires_grad else v.detach().requires_grad_(True)
            (gv,) = torch.autograd.grad(F(v), [v], create_graph=True)
            return gv
        return g

    def build():
        s = torch.tensor(np.asarray(start, np.float64))

        def r(x):
            F = lambda y: -saddle_f(x, y)  # noqa: E731
            return saddle_f(x, argmin_eager(F, tgrad(F), s, _concrete))

        def run():
            x = argmin_eager(r, lambda v: tgrad(r)(v).detach(), s, _concrete).detach()
            F2 = lambda y: -saddle_f(x, y)  # noqa: E731
            y = argmin_eager(F2, lambda v: tgrad(F2)(v).detach(), s, _concrete).detach()
            return torch.cat([x, y])
        return run
    return build


def saddle_systems():
    """saddle's systems: symgraph in the four variants, the hand-derived NumPy, JAX rr and ff, autograd, torch."""
    from .harness import System
    sys_ = [System("symgraph" if v == "rr" else f"symgraph-{v}", _saddle_sg(v), peer=False)
            for v in ("rr", "ff", "fr", "rf")]
    for s, v in zip(sys_, ("rr", "ff", "fr", "rf")):
        s.note = (f"{v}: outer {'forward (two sg.jvp)' if v[0] == 'f' else 'reverse (sg.grad)'}, inner "
                  f"{'forward' if v[1] == 'f' else 'reverse'}; the inner optimizer is an sg.while_loop"
                  + (f" (max_steps={SADDLE_MAX_INNER}, as reverse mode needs)" if v[0] == "r" else ""))
    return sys_ + [
        System("numpy", lambda start: (lambda: (lambda: saddle_numpy(start))),
               note="hand-derived gradients (2y inside, 2x outside), Python loops"),
        System("jax-rr", _saddle_jax("rr"), note=f"jax.grad over jax.grad; lax.fori_loop of {SADDLE_MAX_INNER} "
                                                 "masked steps (jax.grad refuses lax.while_loop); block_until_ready"),
        System("jax-ff", _saddle_jax("ff"), note="two jax.jvp outside and inside, lax.while_loop; block_until_ready"),
        System("autograd", _saddle_autograd, note="rr: nested autograd.grad, Python loops"),
        System("torch", _saddle_torch, note="rr: eager, torch.autograd.grad(create_graph=True), Python loops"),
    ]


def saddle_tables(settings):
    """saddle: one whole evaluation (both optimizations) per call, from s = (1, 1); rho < 1e-8 against
    the hand-derived run, which matches GradBench's expected output. Two tables, as particle's: timed,
    and first call only for autograd and torch (about 22 s per evaluation here in their Python loops)."""
    import dataclasses

    from .field import rho_compare
    from .harness import run_case
    start = np.array(SADDLE_START)
    ref = saddle_numpy(start)
    few = dataclasses.replace(settings, min_reps=3, max_reps=max(3, min(settings.max_reps, 20)))
    sys_ = saddle_systems()
    notes = [f"GradBench's expected output: 4 x {SADDLE_EXPECTED}; the reference gives {ref.tolist()!r}"]
    timed = run_case(few, "saddle: (argmin_x max_y f, argmax_y f(x*, y)) from s = (1, 1), one evaluation per call",
                     (start,), ref, [s for s in sys_ if s.name not in ("autograd", "torch")], check=rho_compare,
                     notes=notes)
    slow = run_case(few, "saddle, first call only (checked, not timed)", (start,), ref,
                    [s for s in sys_ if s.name in ("autograd", "torch")], check=rho_compare, timed=False)
    return [timed, slow]
