"""W10 — LSTM: the ADBench / GradBench "lstm" objective and its gradient.

The function (GradBench's lstm eval, taken from ADBench's lstm.h; every weight
matrix is diagonal, so a layer is elementwise), float64. With l layers and b
bits per character:

- ``main_params`` (2l, 4b): row 2i holds layer i's weights, row 2i + 1 its
  biases, each as ``[forget | ingate | outgate | change]`` blocks of b.
- ``extra_params`` (3, b): the input weight, the output weight, the output bias.
- ``state`` (2l, b): row 2i is layer i's initial hidden state, row 2i + 1 its
  initial cell state (an input, not differentiated).
- ``sequence`` (c, b): character t as b bits (an input, not differentiated).

One step t = 0 … c − 2 (layer input x: ``sequence[t] * in_weight`` for layer
0, the layer below's new hidden state above it):

    forget = σ(x w_f + b_f)     ingate = σ(h w_i + b_i)
    outgate = σ(x w_o + b_o)    change = tanh(h w_c + b_c)
    cell ← cell · forget + ingate · change;   h ← outgate · tanh(cell)
    ŷ = h_{l−1} out_weight + out_bias
    total += Σ_j sequence[t + 1]_j (ŷ_j − log(2 + Σ_k exp ŷ_k))

and the objective is ``−total / ((c − 1) b)``. GradBench's "jacobian" is the
gradient with respect to main_params and extra_params (flattened row-major and
concatenated); here every system returns ``(f, (∂f/∂main, ∂f/∂extra))``.

Sizes: GradBench's l ∈ {2, 4} × c ∈ {1,024, 4,096} with b = 14 (the data
files' bit width: their text, Shakespeare's sonnets, has a U+2019, so
⌈log2 8217⌉ = 14). Inputs follow ADBench's generator (``np.random.random``
for state, main_params and extra_params, in that order, here seeded with
31337); the sonnets' text is not available here, so the characters are
drawn from a seeded generator (printable ASCII and U+2019), each written as
its b bits, most significant first, as the generator does.
``BENCH_W10_L=2``, ``BENCH_W10_C=1024`` limit a run; ``--quick``: l = 2, c = 16.

symgraph runs the objective written once as plain NumPy code
(`lstm_objective`, a Python loop over the characters), in two ways: as
``sg.scan`` over the characters (`lstm_objective_scan`, the same step
function) and as the plain loop with ``sg.compile(roll=True)``. The
reference is the hand-written objective and backpropagation through time
(`lstm_numpy`), checked against central differences in
tests/test_bench_field.py; the check is ρ < 1e-8 on every entry. The spec
gives no reference outputs (GradBench compares tools with each other).
"""

from __future__ import annotations

import os

import numpy as np

from .common import import_symgraph
from .field import autograd_system, jax_system, numpy_system, rho_compare, torch_system
from .harness import Settings, System, WorkloadResult, merge_tables, run_case

TITLE = "LSTM objective + gradient (float64, GradBench lstm; diagonal weights)"

SEED = 31337
B = 14
FULL_L = (2, 4)
FULL_C = (1024, 4096)
QUICK = ((2, 16),)


def make_input(l: int, c: int, b: int = B, seed: int = SEED):
    """``(main_params (2l, 4b), extra_params (3, b), state (2l, b), sequence (c, b))``.

    The parameters and the state are ``np.random.random`` draws as ADBench's
    generator makes them (state first), after ``np.random.seed(seed)``; the
    sequence is c characters (printable ASCII and U+2019, from
    ``default_rng(seed)``) as b bits each, most significant first.
    """
    st = np.random.get_state()
    try:
        np.random.seed(seed)
        state = np.random.random((2 * l, b))
        main_params = np.random.random((2 * l, 4 * b))
        extra_params = np.random.random((3, b))
    finally:
        np.random.set_state(st)
    rng = np.random.default_rng(seed)
    codes = rng.integers(32, 127, c)
    codes[rng.random(c) < 0.02] = 0x2019
    bits = (codes[:, None] >> np.arange(b - 1, -1, -1)) & 1
    return main_params, extra_params, state, bits.astype(np.float64)


def _sigmoid(x, xp):
    return 1.0 / (1.0 + xp.exp(-x))


def lstm_predict(main_params, extra_params, hidden, cell, x, xp=np):
    """One character through every layer: ``(ŷ (b,), new hidden list, new cell list)``.

    Args:
        main_params: (2l, 4b). extra_params: (3, b). hidden, cell: lists of
            l arrays (b,). x: the character's bits (b,).
        xp: numpy, jax.numpy or autograd.numpy.
    """
    b = x.shape[0]
    x = x * extra_params[0]
    hidden, cell = list(hidden), list(cell)
    for i in range(len(hidden)):
        w, bias = main_params[2 * i], main_params[2 * i + 1]
        forget = _sigmoid(x * w[:b] + bias[:b], xp)
        ingate = _sigmoid(hidden[i] * w[b:2 * b] + bias[b:2 * b], xp)
        outgate = _sigmoid(x * w[2 * b:3 * b] + bias[2 * b:3 * b], xp)
        change = xp.tanh(hidden[i] * w[3 * b:] + bias[3 * b:])
        cell[i] = cell[i] * forget + ingate * change
        hidden[i] = outgate * xp.tanh(cell[i])
        x = hidden[i]
    return x * extra_params[1] + extra_params[2], hidden, cell


def _step_loss(ypred, ygold, xp):
    """``Σ_j ygold_j (ŷ_j − log(2 + Σ_k exp ŷ_k))`` (ADBench's log-sum-exp with the + 2, no max shift)."""
    return xp.sum(ygold * (ypred - xp.log(xp.sum(xp.exp(ypred)) + 2.0)))


def lstm_objective(main_params, extra_params, state, sequence, xp=np):
    """The LSTM objective as plain array code: a Python loop over the characters.

    Args:
        main_params: (2l, 4b) float64. extra_params: (3, b). state: (2l, b).
        sequence: (c, b).
        xp: the array namespace (numpy, jax.numpy, autograd.numpy).

    Returns:
        float64 scalar ``−total / ((c − 1) b)`` (see the module docstring).
    """
    l = main_params.shape[0] // 2
    c, b = sequence.shape
    hidden = [state[2 * i] for i in range(l)]
    cell = [state[2 * i + 1] for i in range(l)]
    total = 0.0
    for t in range(c - 1):
        ypred, hidden, cell = lstm_predict(main_params, extra_params, hidden, cell, sequence[t], xp)
        total = total + _step_loss(ypred, sequence[t + 1], xp)
    return -total / ((c - 1) * b)


def lstm_objective_scan(scan, main_params, extra_params, state, sequence, xp=np):
    """`lstm_objective` with the character loop as ``scan`` (``sg.scan`` or ``jax.lax.scan``).

    The carry is (hidden list, cell list); each step's loss is a scanned output, summed after the loop.
    """
    l = main_params.shape[0] // 2
    c, b = sequence.shape

    def step(carry, xy):
        x, ygold = xy
        ypred, hidden, cell = lstm_predict(main_params, extra_params, carry[0], carry[1], x, xp)
        return (hidden, cell), _step_loss(ypred, ygold, xp)

    init = ([state[2 * i] for i in range(l)], [state[2 * i + 1] for i in range(l)])
    _, losses = scan(step, init, (sequence[:-1], sequence[1:]))
    return -xp.sum(losses) / ((c - 1) * b)


def lstm_numpy(main_params, extra_params, state, sequence):
    """Hand-written objective and gradient: the forward loop, then backpropagation through time.

    Per layer, with a_f = x w_f + b_f etc.: ∂c_new/∂c = forget,
    ∂h_new = outgate tanh'(c_new); the gate derivatives are σ' = σ(1 − σ) and
    tanh' = 1 − tanh². The loss of step t has ∂/∂ŷ_j = −(y_j − (Σ_k y_k)
    exp ŷ_j / (2 + Σ_k exp ŷ_k)) / ((c − 1) b). The weight and bias gradients
    are sums over the steps of the saved gate derivatives times their inputs,
    taken after the backward loop.

    Returns:
        ``(f, (∂f/∂main_params (2l, 4b), ∂f/∂extra_params (3, b)))``.
    """
    l = main_params.shape[0] // 2
    c, b = sequence.shape
    T = c - 1
    scale = 1.0 / (T * b)
    W = main_params[0::2].reshape(l, 4, b)                     # (l, gate, b)
    Bs = main_params[1::2].reshape(l, 4, b)
    w_in, w_out, b_out = extra_params
    xs = np.empty((T, l, b))          # each layer's input
    hp = np.empty((T, l, b))          # each layer's hidden state before the step
    cp = np.empty((T, l, b))          # cell state before the step
    gates = np.empty((T, l, 4, b))    # forget, ingate, outgate, change
    tc = np.empty((T, l, b))          # tanh(new cell)
    ytop = np.empty((T, b))
    h = state[0::2].copy()
    cl = state[1::2].copy()
    total = 0.0
    dy = np.empty((T, b))
    for t in range(T):
        x = sequence[t] * w_in
        for i in range(l):
            xs[t, i], hp[t, i], cp[t, i] = x, h[i], cl[i]
            g = gates[t, i]
            g[0] = 1.0 / (1.0 + np.exp(-(x * W[i, 0] + Bs[i, 0])))
            g[1] = 1.0 / (1.0 + np.exp(-(h[i] * W[i, 1] + Bs[i, 1])))
            g[2] = 1.0 / (1.0 + np.exp(-(x * W[i, 2] + Bs[i, 2])))
            g[3] = np.tanh(h[i] * W[i, 3] + Bs[i, 3])
            cl[i] = cl[i] * g[0] + g[1] * g[3]
            tc[t, i] = np.tanh(cl[i])
            h[i] = g[2] * tc[t, i]
            x = h[i]
        ytop[t] = x
        yp = x * w_out + b_out
        e = np.exp(yp)
        se = e.sum() + 2.0
        ygold = sequence[t + 1]
        total += np.sum(ygold * (yp - np.log(se)))
        dy[t] = -scale * (ygold - ygold.sum() * e / se)
    f = -total * scale
    # backward sweep
    da = np.empty((T, l, 4, b))       # derivative w.r.t. each gate's pre-activation
    dh = np.zeros((l, b))             # into each layer's hidden state from the next step
    dc = np.zeros((l, b))
    dxin = np.empty((T, b))           # into layer 0's input
    for t in range(T - 1, -1, -1):
        dx = dy[t] * w_out            # into the top layer's new hidden state
        for i in range(l - 1, -1, -1):
            g = gates[t, i]
            dhn = dh[i] + dx
            dO = dhn * tc[t, i]
            dcn = dc[i] + dhn * g[2] * (1.0 - tc[t, i] ** 2)
            a = da[t, i]
            a[0] = dcn * cp[t, i] * g[0] * (1.0 - g[0])
            a[1] = dcn * g[3] * g[1] * (1.0 - g[1])
            a[2] = dO * g[2] * (1.0 - g[2])
            a[3] = dcn * g[1] * (1.0 - g[3] ** 2)
            dc[i] = dcn * g[0]
            dh[i] = a[1] * W[i, 1] + a[3] * W[i, 3]
            dx = a[0] * W[i, 0] + a[2] * W[i, 2]
        dxin[t] = dx
    xin = np.stack([xs, hp, xs, hp], axis=2)                   # (T, l, 4, b): each gate's multiplier
    g_main = np.empty_like(main_params)
    g_main[0::2] = np.sum(da * xin, axis=0).reshape(l, 4 * b)
    g_main[1::2] = np.sum(da, axis=0).reshape(l, 4 * b)
    g_extra = np.stack([np.sum(dxin * sequence[:-1], axis=0), np.sum(dy * ytop, axis=0), np.sum(dy, axis=0)])
    return f, (g_main, g_extra)


# --------------------------------------------------------------------------- systems

def _symgraph(scan: bool, roll: bool = False, name: str = "symgraph", note: str = "") -> System:
    def prepare(*inputs):
        sg, _ = import_symgraph()
        if scan:
            fn = lambda m, e, s, q: lstm_objective_scan(sg.scan, m, e, s, q)  # noqa: E731
        else:
            fn = lstm_objective

        def build():
            cf = sg.compile(sg.value_and_grad(fn, argnums=(0, 1)), roll=roll)
            return lambda: cf(*inputs)
        return build
    return System(name, prepare, peer=False, note=note)


def _jax_scan(jax, jnp):
    return jax.value_and_grad(lambda m, e, s, q: lstm_objective_scan(jax.lax.scan, m, e, s, q, jnp),
                              argnums=(0, 1))


def _jax_loop(jax, jnp):
    return jax.value_and_grad(lambda m, e, s, q: lstm_objective(m, e, s, q, jnp), argnums=(0, 1))


def _autograd_vg(ag, anp):
    """autograd differentiates one argument: pack (main_params, extra_params) into a tuple."""
    vg = ag.value_and_grad(lambda p, s, q: lstm_objective(p[0], p[1], s, q, anp))

    def fn(m, e, s, q):
        v, g = vg((m, e), s, q)
        return v, tuple(g)
    return fn


def _torch_vg(torch):
    def vg(m, e, s, q):
        ps = [t.detach().requires_grad_(True) for t in (m, e)]
        f = lstm_objective(*ps, s, q, _TorchNS(torch))
        return f.detach(), tuple(torch.autograd.grad(f, ps))
    return vg


def _torch_compile_vg(torch):
    """torch.compile of one character's step (every layer and the step's loss), the Python loop around it,
    torch.autograd.grad through the compiled steps (AOTAutograd compiles each step's backward too).

    The whole objective is not compiled: Dynamo would unroll the loop of c − 1 characters into one graph
    (as XLA does for ``jax.jit`` of the plain loop, which took 41 s at c = 16)."""
    ns = _TorchNS(torch)

    def step(m, e, hidden, cell, x, ygold):
        ypred, hidden, cell = lstm_predict(m, e, hidden, cell, x, ns)
        return _step_loss(ypred, ygold, ns), hidden, cell
    cstep = torch.compile(step)

    def vg(m, e, s, q):
        ps = [t.detach().requires_grad_(True) for t in (m, e)]
        l = ps[0].shape[0] // 2
        c, b = q.shape
        hidden, cell = [s[2 * i] for i in range(l)], [s[2 * i + 1] for i in range(l)]
        total = 0.0
        for t in range(c - 1):
            loss, hidden, cell = cstep(ps[0], ps[1], hidden, cell, q[t], q[t + 1])
            total = total + loss
        f = -total / ((c - 1) * b)
        return f.detach(), tuple(torch.autograd.grad(f, ps))
    return vg


class _TorchNS:
    """The four functions `lstm_objective` takes from its namespace, in torch."""

    def __init__(self, torch):
        self.exp, self.log, self.tanh, self.sum = torch.exp, torch.log, torch.tanh, torch.sum


def systems(quick: bool = False) -> list:
    """W10's systems in table order (quick: without torch.compile, whose first call takes tens of seconds).

    ``BENCH_W10_JAX_LOOP=1`` adds ``jax.jit`` of the plain Python loop: XLA
    compiles the unrolled loop very slowly (41 s at c = 16 here), so it is
    off by default and its first call is reported in docs/benchmarks.md.
    """
    out = [
        _symgraph(True, note="sg.compile(sg.value_and_grad(...)) of lstm_objective_scan: sg.scan over the "
                             "characters, the layer loop unrolled in the body"),
        _symgraph(False, roll=True, name="symgraph-roll",
                  note="the plain Python loop lstm_objective with sg.compile(roll=True)"),
        numpy_system(lstm_numpy, note="hand-written forward loop + backpropagation through time (the reference)"),
        jax_system(_jax_scan, note="jax.jit(jax.value_and_grad) over jax.lax.scan; block_until_ready"),
    ]
    if os.environ.get("BENCH_W10_JAX_LOOP"):
        out.append(jax_system(_jax_loop, name="jax-loop",
                              note="jax.jit(jax.value_and_grad) of the plain Python loop (unrolled by tracing)"))
    out += [
        autograd_system(_autograd_vg, note="autograd.value_and_grad of the plain Python loop"),
        torch_system(_torch_vg, note="eager, the plain Python loop, torch.autograd.grad"),
        torch_system(_torch_compile_vg, name="torch.compile",
                     note="torch.compile of one character's step, the Python loop around it, "
                          "torch.autograd.grad; first call (Dynamo + Inductor) timed apart"),
    ]
    return out[:-1] if quick else out


def cases(quick: bool) -> list[tuple[int, int]]:
    """(l, c) of the run; ``BENCH_W10_L``, ``BENCH_W10_C`` (comma-separated) limit a full run."""
    if quick:
        return list(QUICK)

    def pick(var, full):
        return tuple(int(v) for v in os.environ[var].split(",")) if os.environ.get(var) else full
    return [(l, c) for l in pick("BENCH_W10_L", FULL_L) for c in pick("BENCH_W10_C", FULL_C)]


def run(settings: Settings) -> WorkloadResult:
    """Run every (l, c) case; one merged table."""
    tables = []
    for l, c in cases(settings.quick):
        inputs = make_input(l, c)
        tables.append(run_case(settings, f"l={l} c={c} b={B}", inputs, lambda inputs=inputs: lstm_numpy(*inputs),
                               systems(settings.quick), check=rho_compare,
                               extra=lambda row, step, l=l, c=c: {"l": l, "c": c}))
    t = merge_tables("objective + gradient w.r.t. (main_params, extra_params)", tables, key="l",
                     notes=["check: rho < 1e-8 against the hand-written gradient",
                            "jax.jit of the plain Python loop not run (XLA compiles the unrolled loop for "
                            "minutes; BENCH_W10_JAX_LOOP=1 runs it)"])
    t.extra_columns = ["l", "c"]
    return WorkloadResult("W10", TITLE, [t])
