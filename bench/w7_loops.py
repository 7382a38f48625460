"""W7 — loops: an RNN and an RK4 integrator, as `sg.scan` and as a plain Python loop.

(i) A vanilla RNN `h = tanh(x_t @ Wx + h @ Wh + b)` (hidden 128, input 32,
batch 16, float32), loss `0.5 * sum(h_T ** 2)`, value and gradient w.r.t.
(Wx, Wh, b), over T = 100 and 1,000 steps (``--quick``: 20). (ii) RK4 of the
Lorenz system (float64, dt = 1e-4) over 10,000 steps (``--quick``: 200), loss
`sum(y_N ** 2)`, value and gradient w.r.t. the initial state and the
parameters (sigma, rho, beta).

Systems: symgraph with `sg.scan` (compiled, LLVM), symgraph on the plain
Python loop (unrolled: only at T = 100 and in --quick; it grows with T), the
plain loop with `sg.compile(roll=True)` (rolled into a scan loop), the RNN as
`sg.while_loop(..., checkpoints=8)` (a run-time trip count; bench/w7_while.py
compares it with the checkpointed scan's memory), a
hand-written NumPy reference (backpropagation through time; forward-mode
tangents for RK4), `jax.jit(jax.value_and_grad)` over `jax.lax.scan`, torch
eager on the plain loop (RNN only; torch.compile of a 100-step loop is the
case pytorch #111441 reports at 34 s, not run here). The first-call column is
trace + compile + first run, in this process.
"""

from __future__ import annotations

import numpy as np

from .common import import_jax, import_symgraph, import_torch, jax_block
from .harness import Settings, System, WorkloadResult, run_case

TITLE = "loops: RNN and RK4 as sg.scan and as Python loops (first call and per call)"

H, D, B = 128, 32, 16
DT = 1e-4
LORENZ = (10.0, 28.0, 8.0 / 3.0)


# --------------------------------------------------------------------------- (i) RNN

def rnn_inputs(T: int):
    rng = np.random.default_rng(7)
    Wx = (rng.normal(size=(D, H)) / np.sqrt(D)).astype(np.float32)
    Wh = (rng.normal(size=(H, H)) / np.sqrt(H)).astype(np.float32)
    b = (0.1 * rng.normal(size=H)).astype(np.float32)
    xs = rng.normal(size=(T, B, D)).astype(np.float32)
    return Wx, Wh, b, xs


def rnn_numpy(Wx, Wh, b, xs):
    """Hand-written: forward, then backpropagation through time."""
    h = np.zeros((B, H), np.float32)
    hs = [h]
    for x in xs:
        h = np.tanh(x @ Wx + h @ Wh + b)
        hs.append(h)
    v = np.float32(0.5) * np.sum(h * h)
    dh = h
    gWx, gWh, gb = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    for t in range(len(xs) - 1, -1, -1):
        da = dh * (1 - hs[t + 1] ** 2)
        gWx += xs[t].T @ da
        gWh += hs[t].T @ da
        gb += da.sum(0)
        dh = da @ Wh.T
    return v, (gWx, gWh, gb)


def _rnn_symgraph(scan: bool, roll: bool = False):
    def prepare(Wx, Wh, b, xs):
        sg, _ = import_symgraph()

        def loss(Wx, Wh, b, xs):
            h0 = np.zeros((B, H), np.float32)
            if scan:
                h, _ = sg.scan(lambda h, x: (np.tanh(x @ Wx + h @ Wh + b), None), h0, xs)
            else:
                h = h0
                for t in range(xs.shape[0]):
                    h = np.tanh(xs[t] @ Wx + h @ Wh + b)
            return np.float32(0.5) * np.sum(h * h)

        def build():
            cf = sg.compile(sg.value_and_grad(loss, argnums=(0, 1, 2)), roll=roll)
            return lambda: cf(Wx, Wh, b, xs)
        return build
    return prepare


def _rnn_while(snapshots: int):
    """The RNN as `sg.while_loop(..., checkpoints=snapshots)` reading xs[k] with its own counter (k < T)."""
    def prepare(Wx, Wh, b, xs):
        sg, _ = import_symgraph()

        def loss(Wx, Wh, b, xs):
            T = xs.shape[0]

            def body(c):
                h, k = c
                return np.tanh(xs[k] @ Wx + h @ Wh + b), k + 1

            h, _ = sg.while_loop(lambda c: c[1] < T, body, (np.zeros((B, H), np.float32), np.int64(0)),
                                 checkpoints=snapshots)
            return np.float32(0.5) * np.sum(h * h)

        def build():
            cf = sg.compile(sg.value_and_grad(loss, argnums=(0, 1, 2)))
            return lambda: cf(Wx, Wh, b, xs)
        return build
    return prepare


def rnn_numpy_system(Wx, Wh, b, xs):
    return lambda: (lambda: rnn_numpy(Wx, Wh, b, xs))


def rnn_jax(Wx, Wh, b, xs):
    jax, jnp = import_jax()
    args = [jnp.asarray(a) for a in (Wx, Wh, b, xs)]

    def loss(Wx, Wh, b, xs):
        h, _ = jax.lax.scan(lambda h, x: (jnp.tanh(x @ Wx + h @ Wh + b), None), jnp.zeros((B, H), jnp.float32), xs)
        return 0.5 * jnp.sum(h * h)

    def build():
        fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
        return lambda: jax_block(fn(*args))
    return build


def rnn_torch(Wx, Wh, b, xs):
    torch = import_torch()
    ps = [torch.tensor(a, requires_grad=True) for a in (Wx, Wh, b)]
    xt = torch.tensor(xs)

    def build():
        def step():
            Wx, Wh, b = ps
            h = torch.zeros((B, H), dtype=torch.float32)
            for t in range(xt.shape[0]):
                h = torch.tanh(xt[t] @ Wx + h @ Wh + b)
            v = 0.5 * torch.sum(h * h)
            g = torch.autograd.grad(v, ps)
            return v.detach(), tuple(g)
        return step
    return build


# --------------------------------------------------------------------------- (ii) RK4 Lorenz

def lorenz(y, p, stack):
    s, r, bt = p[0], p[1], p[2]
    return stack([s * (y[1] - y[0]), y[0] * (r - y[2]) - y[1], y[0] * y[1] - bt * y[2]])


def rk4_step(y, p, stack):
    k1 = lorenz(y, p, stack)
    k2 = lorenz(y + (DT / 2) * k1, p, stack)
    k3 = lorenz(y + (DT / 2) * k2, p, stack)
    k4 = lorenz(y + DT * k3, p, stack)
    return y + (DT / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


def rk4_inputs(n: int):
    return np.array([1.0, 1.0, 1.0]), np.array(LORENZ), n


def _jac(y, p):
    """(d f / d y, d f / d p) of the Lorenz right-hand side."""
    s, r, bt = p
    jy = np.array([[-s, s, 0.0], [r - y[2], -1.0, -y[0]], [y[1], y[0], -bt]])
    jp = np.array([[y[1] - y[0], 0.0, 0.0], [0.0, y[0], 0.0], [0.0, 0.0, -y[2]]])
    return jy, jp


def rk4_numpy(y0, p, n):
    """Hand-written: RK4 with forward-mode tangents for the 6 inputs (y0, p) carried alongside."""
    y = y0.copy()
    J = np.concatenate([np.eye(3), np.zeros((3, 3))], axis=1)  # d y / d (y0, p)
    E = np.concatenate([np.zeros((3, 3)), np.eye(3)], axis=1)  # d p / d (y0, p)
    for _ in range(n):
        def f(y, J):
            jy, jp = _jac(y, p)
            return lorenz(y, p, np.array), jy @ J + jp @ E
        k1, K1 = f(y, J)
        k2, K2 = f(y + DT / 2 * k1, J + DT / 2 * K1)
        k3, K3 = f(y + DT / 2 * k2, J + DT / 2 * K2)
        k4, K4 = f(y + DT * k3, J + DT * K3)
        y = y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        J = J + DT / 6 * (K1 + 2 * K2 + 2 * K3 + K4)
    g = 2 * y @ J
    return np.sum(y * y), (g[:3], g[3:])


def rk4_symgraph(y0, p, n):
    sg, _ = import_symgraph()

    def loss(y0, p):
        y, _ = sg.scan(lambda y, _: (rk4_step(y, p, np.stack), None), y0, length=n)
        return np.sum(y * y)

    def build():
        cf = sg.compile(sg.value_and_grad(loss, argnums=(0, 1)))
        return lambda: cf(y0, p)
    return build


def rk4_numpy_system(y0, p, n):
    return lambda: (lambda: rk4_numpy(y0, p, n))


def rk4_jax(y0, p, n):
    jax, jnp = import_jax()
    a, b = jnp.asarray(y0), jnp.asarray(p)

    def loss(y0, p):
        y, _ = jax.lax.scan(lambda y, _: (rk4_step(y, p, jnp.stack), None), y0, length=n)
        return jnp.sum(y * y)

    def build():
        fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        return lambda: jax_block(fn(a, b))
    return build




def run(settings: Settings) -> WorkloadResult:
    """Run W7 (i) and (ii)."""
    tables = []
    for T in ((20,) if settings.quick else (100, 1000)):
        inputs = rnn_inputs(T)
        systems = [System("symgraph", _rnn_symgraph(True), peer=False, note="sg.compile(sg.value_and_grad) of "
                          "sg.scan (LLVM: the body compiled once, a native loop)")]
        if T <= 100:
            systems.append(System("symgraph-loop", _rnn_symgraph(False), peer=False,
                                  note="the plain Python loop, unrolled by tracing"))
        systems.append(System("symgraph-roll", _rnn_symgraph(False, roll=True), peer=False,
                              note="the plain Python loop with sg.compile(roll=True): rolled into a scan loop "
                                   "before differentiation"))
        systems.append(System("symgraph-while", _rnn_while(8), peer=False,
                              note="sg.while_loop(..., checkpoints=8) reading xs[k] (a run-time trip count; "
                                   "8 carry snapshots placed online, Revolve between them)"))
        systems += [System("numpy", rnn_numpy_system, note="hand-written forward + backpropagation through time"),
                    System("jax", rnn_jax, note="jax.jit(jax.value_and_grad) over jax.lax.scan"),
                    System("torch", rnn_torch, note="eager, plain loop, torch.autograd.grad")]
        notes = [] if T <= 100 else ["symgraph-loop not run: the unrolled trace grows with T "
                                     "(see the T=100 table)"]
        tables.append(run_case(settings, f"(i) RNN h={H} d={D} batch={B} float32, T={T}", inputs,
                               lambda inputs=inputs: rnn_numpy(*inputs), systems, rtol=2e-3, atol=1e-3,
                               notes=notes))
    n = 200 if settings.quick else 10_000
    inputs = rk4_inputs(n)
    tables.append(run_case(
        settings, f"(ii) RK4 Lorenz, {n} steps, dt={DT}, float64, grad w.r.t. y0 and (sigma, rho, beta)", inputs,
        lambda: rk4_numpy(*inputs),
        [System("symgraph", rk4_symgraph, peer=False, note="sg.scan(length=n), compiled"),
         System("numpy", rk4_numpy_system, note="hand-written RK4 with forward-mode tangents (6 directions)"),
         System("jax", rk4_jax, note="jax.jit(jax.value_and_grad) over jax.lax.scan")],
        rtol=1e-8, atol=1e-8, notes=["torch eager not run on 10,000 RK4 steps (seconds per call)"]))
    return WorkloadResult("W7", TITLE, tables)
