"""W2 — compiled training step of an MLP.

float32 MLP 64-256-256-10, tanh hidden layers, softmax cross-entropy (mean
over the batch), batch 256, SGD with learning rate 0.1. One step = forward,
backward and update; each system's step maps ``(params, x, y_onehot)`` to
``(loss, new_params)``. Data: scikit-learn ``load_digits`` (pixels / 16); if
scikit-learn is missing, a synthetic 10-class data set of the same shape is
used and the table says so.

Timed: one step on a fixed batch from fixed parameters. Then every system
that passed the check trains 200 steps from the same initial parameters on
the same shuffled minibatches (quick: 50), and the final training accuracy (on all
samples) is reported (expected > 0.9 on the digits).

Two tables: all systems in one process, timed round-robin (as the other
workloads); then each system alone in a fresh process (``bench.subproc``, as
W4 and W6), round-robin over several rounds, median of the process medians.
In one process, the idle threads of OpenBLAS (after each NumPy product) and
the XLA/OpenMP pools spin for about 0.1 s on the second core, so symgraph's
worker pool (which splits large products and loops across cores) does not
get it; the fresh-process table measures each system with the machine to
itself. Threads: each library's default in both, unless ``--threads N``.
"""

from __future__ import annotations

import statistics

import numpy as np

from .common import import_jax, import_symgraph, import_torch, jax_block
from .harness import (Row, Settings, System, Table, WorkloadResult, compare, format_seconds, log, run_case,
                      to_numpy)

TITLE = "MLP training step (float32, 64-256-256-10, tanh, softmax CE, batch 256, SGD 0.1)"

SIZES = (64, 256, 256, 10)
BATCH = 256
LR = 0.1
KEYS = ("W1", "b1", "W2", "b2", "W3", "b3")


def load_data() -> tuple[np.ndarray, np.ndarray, str]:
    """Inputs (N, 64) float32 in [0, 1], one-hot labels (N, 10) float32, and a description."""
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        x, labels, desc = d.data / 16.0, d.target, "scikit-learn load_digits (1797 x 64, pixels / 16)"
    except ImportError as e:
        rng = np.random.default_rng(0)
        centers = rng.uniform(0, 1, (10, 64))
        labels = rng.integers(0, 10, 1797)
        x = np.clip(centers[labels] + 0.25 * rng.standard_normal((1797, 64)), 0, 1)
        desc = f"synthetic 10-class data (1797 x 64), scikit-learn missing: {e}"
    y = np.eye(10, dtype=np.float32)[labels]
    return x.astype(np.float32), y, desc


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    """Glorot-uniform weights and zero biases, float32."""
    rng = np.random.default_rng(seed)
    p = {}
    for i, (m, n) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
        lim = np.sqrt(6.0 / (m + n))
        p[f"W{i}"] = rng.uniform(-lim, lim, (m, n)).astype(np.float32)
        p[f"b{i}"] = np.zeros(n, np.float32)
    return p


def loss_fn(p, x, y, xp=np):
    """Mean softmax cross-entropy of the MLP, on a NumPy-like namespace `xp`.

    Args:
        p: parameters, dict of float32 arrays (see `init_params`).
        x: inputs, float32 (BATCH, 64).
        y: one-hot labels, float32 (BATCH, 10).
        xp: numpy, jax.numpy, autograd.numpy, pytensor.tensor or symgraph.numpy.

    Returns:
        float32 scalar. The batch size is the constant BATCH (every batch has
        that size), so no symbolic shape enters the graph.
    """
    h = xp.tanh(x @ p["W1"] + p["b1"])
    h = xp.tanh(h @ p["W2"] + p["b2"])
    z = h @ p["W3"] + p["b3"]
    zs = z - xp.max(z, axis=1, keepdims=True)
    lse = xp.log(xp.sum(xp.exp(zs), axis=1, keepdims=True))
    return -xp.sum(y * (zs - lse)) * np.float32(1.0 / BATCH)


def numpy_step(p, x, y):
    """Hand-written forward, backward and SGD update (dtype of the inputs)."""
    a1 = np.tanh(x @ p["W1"] + p["b1"])
    a2 = np.tanh(a1 @ p["W2"] + p["b2"])
    z = a2 @ p["W3"] + p["b3"]
    zs = z - z.max(axis=1, keepdims=True)
    e = np.exp(zs)
    s = e.sum(axis=1, keepdims=True)
    inv_b = x.dtype.type(1.0 / x.shape[0])
    loss = -np.sum(y * (zs - np.log(s))) * inv_b
    dz = (e / s - y) * inv_b
    g = {"W3": a2.T @ dz, "b3": dz.sum(0)}
    d2 = (dz @ p["W3"].T) * (1 - a2 * a2)
    g["W2"], g["b2"] = a1.T @ d2, d2.sum(0)
    d1 = (d2 @ p["W2"].T) * (1 - a1 * a1)
    g["W1"], g["b1"] = x.T @ d1, d1.sum(0)
    lr = x.dtype.type(LR)
    return loss, {k: p[k] - lr * g[k] for k in KEYS}


def reference_step(p, x, y):
    """The check's reference: `numpy_step` in float64 on the float32 inputs."""
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    loss, new = numpy_step({k: f64(v) for k, v in p.items()}, f64(x), f64(y))
    return loss, new


def accuracy(p: dict, x: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose arg-max logit is the label."""
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    h = np.tanh(x @ p["W1"] + p["b1"])
    h = np.tanh(h @ p["W2"] + p["b2"])
    return float(np.mean(np.argmax(h @ p["W3"] + p["b3"], axis=1) == labels))


# --------------------------------------------------------------------------- systems
# Each prepare(p0, x, y, batches) returns build(); build() returns step() with an
# attribute ``train`` (-> final params as NumPy) for the 200-step accuracy run.

def _finish(stepper, p0, x, y, batches, to_np=lambda p: p):
    def step():
        return stepper(p0, x, y)

    def train():
        p = p0
        for xb, yb in batches:
            _, p = stepper(p, xb, yb)
        return {k: np.asarray(to_np(v)) for k, v in p.items()}
    step.train = train
    return step


def sys_symgraph(backend):
    """The whole training step (forward, backward, SGD update) compiled as one graph by ``sg.compile``."""
    def prepare(p0, x, y, batches):
        sg, snp = import_symgraph()
        lr = np.float32(LR)

        def build():
            def step(p, x, y):
                loss, g = sg.value_and_grad(lambda p: loss_fn(p, x, y, snp))(p)
                return loss, {k: p[k] - lr * g[k] for k in KEYS}
            return _finish(sg.compile(step, backend=backend), p0, x, y, batches)
        return build
    return prepare


def prep_numpy(p0, x, y, batches):
    return lambda: _finish(numpy_step, p0, x, y, batches)


def prep_numba(p0, x, y, batches):
    import numba

    def build():
        @numba.njit(fastmath=True)
        def kernel(W1, b1, W2, b2, W3, b3, x, y):
            a1 = np.tanh(x @ W1 + b1)
            a2 = np.tanh(a1 @ W2 + b2)
            z = a2 @ W3 + b3
            n, c = z.shape
            inv_b = np.float32(1.0 / n)
            dz = np.empty_like(z)
            loss = 0.0
            for i in range(n):
                m = z[i, 0]
                for j in range(1, c):
                    m = max(m, z[i, j])
                s = 0.0
                for j in range(c):
                    dz[i, j] = np.exp(z[i, j] - m)
                    s += dz[i, j]
                ls = np.log(s)
                for j in range(c):
                    loss -= y[i, j] * (z[i, j] - m - ls)
                    dz[i, j] = (dz[i, j] / s - y[i, j]) * inv_b
            lr = np.float32(0.1)
            d2 = (dz @ np.ascontiguousarray(W3.T)) * (1 - a2 * a2)
            d1 = (d2 @ np.ascontiguousarray(W2.T)) * (1 - a1 * a1)
            nW3 = W3 - lr * (np.ascontiguousarray(a2.T) @ dz)
            nb3 = b3 - lr * dz.sum(axis=0)
            nW2 = W2 - lr * (np.ascontiguousarray(a1.T) @ d2)
            nb2 = b2 - lr * d2.sum(axis=0)
            nW1 = W1 - lr * (np.ascontiguousarray(x.T) @ d1)
            nb1 = b1 - lr * d1.sum(axis=0)
            return np.float32(loss * inv_b), nW1, nb1, nW2, nb2, nW3, nb3

        def stepper(p, xb, yb):
            out = kernel(*(p[k] for k in KEYS), xb, yb)
            return out[0], dict(zip(KEYS, out[1:]))
        return _finish(stepper, p0, x, y, batches)
    return build


def prep_jax(p0, x, y, batches):
    jax, jnp = import_jax()
    pj = {k: jax.device_put(v) for k, v in p0.items()}
    xj, yj = jax.device_put(x), jax.device_put(y)
    bj = [(jax.device_put(a), jax.device_put(b)) for a, b in batches]

    def build():
        vg = jax.value_and_grad(lambda p, x, y: loss_fn(p, x, y, jnp))

        @jax.jit
        def stepper(p, x, y):
            loss, g = vg(p, x, y)
            return loss, jax.tree_util.tree_map(lambda a, b: a - np.float32(LR) * b, p, g)
        step = _finish(lambda p, a, b: jax_block(stepper(p, a, b)), pj, xj, yj, bj)
        return step
    return build


def prep_autograd(p0, x, y, batches):
    import autograd
    import autograd.numpy as anp

    def build():
        vg = autograd.value_and_grad(lambda p, x, y: loss_fn(p, x, y, anp))

        def stepper(p, xb, yb):
            loss, g = vg(p, xb, yb)
            return loss, {k: p[k] - np.float32(LR) * g[k] for k in KEYS}
        return _finish(stepper, p0, x, y, batches)
    return build


def prep_pytensor(p0, x, y, batches):
    import pytensor
    import pytensor.tensor as pt

    def build():
        ps = {k: (pt.matrix(k, dtype="float32") if k.startswith("W") else pt.vector(k, dtype="float32"))
              for k in KEYS}
        xv, yv = pt.matrix("x", dtype="float32"), pt.matrix("y", dtype="float32")
        loss = loss_fn(ps, xv, yv, pt)
        grads = pytensor.grad(loss, [ps[k] for k in KEYS])
        fn = pytensor.function([*(ps[k] for k in KEYS), xv, yv],
                               [loss, *(ps[k] - np.float32(LR) * g for k, g in zip(KEYS, grads))])

        def stepper(p, xb, yb):
            out = fn(*(p[k] for k in KEYS), xb, yb)
            return out[0], dict(zip(KEYS, out[1:]))
        return _finish(stepper, p0, x, y, batches)
    return build


def _torch_loss(torch, p, x, y):
    h = torch.tanh(x @ p["W1"] + p["b1"])
    h = torch.tanh(h @ p["W2"] + p["b2"])
    z = h @ p["W3"] + p["b3"]
    zs = z - torch.amax(z, dim=1, keepdim=True)
    lse = torch.log(torch.sum(torch.exp(zs), dim=1, keepdim=True))
    return -torch.sum(y * (zs - lse)) * (1.0 / x.shape[0])


def _torch_prep(compiled: bool):
    def prepare(p0, x, y, batches):
        torch = import_torch()
        pt_ = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in p0.items()}
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        bt = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in batches]

        def build():
            lf = (lambda p, x, y: _torch_loss(torch, p, x, y))
            if compiled:
                lf = torch.compile(lf)

            def stepper(p, xb, yb):
                loss = lf(p, xb, yb)
                gs = torch.autograd.grad(loss, [p[k] for k in KEYS])
                with torch.no_grad():
                    new = {k: (p[k] - LR * g).requires_grad_(True) for k, g in zip(KEYS, gs)}
                return loss.detach(), new
            return _finish(stepper, pt_, xt, yt, bt, to_np=lambda t: t.detach().numpy())
        return build
    return prepare


def _systems(quick: bool) -> list[System]:
    """The systems of W2, in table order (torch.compile only in full runs)."""
    systems = [
        System("symgraph", sys_symgraph("llvm"), peer=False),
        System("symgraph-numpy", sys_symgraph("numpy"), peer=False),
        System("numpy", prep_numpy, note="hand-written backward"),
        System("numba", prep_numba, note="hand-written backward, njit(fastmath=True)"),
        System("jax", prep_jax, note="jax.jit of value_and_grad + tree_map update"),
        System("autograd", prep_autograd),
        System("pytensor", prep_pytensor, note="one pytensor.function returning loss and updated params"),
        System("torch", _torch_prep(False), note="eager, torch.autograd.grad"),
    ]
    if not quick:
        systems.append(System("torch.compile", _torch_prep(True), note="torch.compile(loss); backward by AOTAutograd"))
    return systems


def _batches(x_all: np.ndarray, y_all: np.ndarray, n_steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`n_steps` minibatches of BATCH samples, reshuffling when an epoch is used up (seed 1)."""
    rng = np.random.default_rng(1)
    batches, order = [], np.array([], dtype=np.int64)
    while len(batches) < n_steps:
        if len(order) < BATCH:
            order = rng.permutation(len(x_all))
        idx, order = order[:BATCH], order[BATCH:]
        batches.append((np.ascontiguousarray(x_all[idx]), np.ascontiguousarray(y_all[idx])))
    return batches


def _as_check(out) -> dict[str, np.ndarray]:
    """A step's output ``(loss, new_params)`` as one flat dict of NumPy arrays."""
    loss, new = to_numpy(out)
    return {"loss": np.asarray(loss), **{k: np.asarray(v) for k, v in new.items()}}


#: fresh-process timing (full, quick): rounds over all systems, untimed warm-up calls after the checked
#: first call, timed samples per process, calls per sample
FRESH = {False: {"rounds": 3, "warmup": 20, "reps": 100, "number": 3},
         True: {"rounds": 1, "warmup": 2, "reps": 10, "number": 1}}


def child_setup(system: str, variant: str, cfg: dict) -> dict:
    """Subprocess entry (see `bench.subproc`): one system's step on the first batch; variant "step"."""
    if variant != "step":
        raise ValueError(f"W2 has one variant, 'step', not {variant!r}")
    x_all, y_all, _ = load_data()
    xb, yb = _batches(x_all, y_all, 1)[0]
    p0 = init_params()
    by_name = {s.name: s for s in _systems(cfg["quick"])}
    if system not in by_name:
        raise ValueError(f"unknown W2 system {system!r}")
    step = by_name[system].prepare(p0, xb, yb, [])()  # ImportError -> "missing"
    return {"step": step, "check": _as_check, "hold": (p0, xb, yb), "reps": cfg["reps"],
            "warmup": cfg["warmup"], "number": cfg["number"]}


def _fresh_table(settings: Settings, systems: list[System], ref: tuple) -> Table:
    """Time every system in fresh processes, round-robin over `FRESH` rounds; median of the process medians."""
    from .subproc import run_variant

    cfg = dict(FRESH[settings.quick], quick=settings.quick)
    ref_flat = {"loss": np.asarray(ref[0]), **ref[1]}

    def check(arrays):
        ok, msg, _, _ = compare(arrays, ref_flat, rtol=2e-4, atol=2e-6)
        return ok, msg

    timeout = 120.0 if settings.quick else 600.0
    rows = {s.name: Row(s.name) for s in systems}
    live = []
    for s in systems:
        if settings.systems is not None and s.name not in settings.systems:
            rows[s.name].status, rows[s.name].message = "skipped", "not selected (--systems)"
        else:
            live.append(s)
    medians: dict[str, list[float]] = {s.name: [] for s in live}
    firsts: dict[str, list[float]] = {s.name: [] for s in live}
    for r in range(cfg["rounds"]):
        k = r % len(live) if live else 0
        for s in live[k:] + live[:k]:              # each round starts one system later
            row = rows[s.name]
            if row.status != "ok":
                continue                           # failed in an earlier round
            rep = run_variant(__name__, s.name, "step", cfg, check, timeout)
            log(f"  [W2 fresh {r + 1}/{cfg['rounds']}] {s.name}: {rep['status']} "
                f"{format_seconds(rep.get('median'))} {rep.get('message', '')}", settings)
            if rep["status"] != "ok":
                row.status = "error" if rep["status"] == "missing" and not s.peer else rep["status"]
                row.message = rep.get("message", "")
                continue
            medians[s.name].append(rep["median"])
            firsts[s.name].append(rep["first_call"])
    for name, ms in medians.items():
        row = rows[name]
        if row.status != "ok" or not ms:
            continue
        row.median, row.min, row.max = statistics.median(ms), min(ms), max(ms)
        row.first_call = statistics.median(firsts[name])
        row.reps, row.number = len(ms) * cfg["reps"], cfg["number"]
        row.extras["process medians"] = " ".join(format_seconds(m) for m in ms)
    base = rows.get("symgraph")
    for row in rows.values():
        if base is not None and base.median and row.median is not None:
            row.ratio = row.median / base.median
    notes = [(f"each system runs alone in its own fresh process (python -m bench.subproc), {cfg['rounds']} "
              f"round(s) over all systems, each round starting one system later; in a process: build + first "
              f"call (first call column, median over processes), the check, {cfg['warmup']} untimed calls, "
              f"then {cfg['reps']} samples of {cfg['number']} call(s); median = median of the processes' "
              "median sample, min/max = the lowest/highest process median"),
             ("measures each system with the machine's cores to itself: no other library's idle threads "
              "(OpenBLAS, XLA, OpenMP spin after each call) compete with symgraph's worker pool, as they do in "
              "the in-process table above"),
             "check: loss and updated params of the first call vs the float64 NumPy reference, in each process"]
    return Table("time per step, one fresh process per system", list(rows.values()),
                 extra_columns=["process medians"], notes=notes)


def run(settings: Settings) -> WorkloadResult:
    """Run W2: step time per system in one process (then 200 training steps and the accuracy),
    then step time per system in fresh processes."""
    x_all, y_all, desc = load_data()
    labels = np.argmax(y_all, axis=1)
    p0 = init_params()
    n_steps = 50 if settings.quick else 200
    batches = _batches(x_all, y_all, n_steps)
    xb, yb = batches[0]

    def extra(row: Row, step):
        if step is None or not hasattr(step, "train"):
            return {}
        final = step.train()
        acc = accuracy(final, x_all, labels)
        return {f"acc@{n_steps}": acc, "acc>0.9": "yes" if acc > 0.9 else "NO"}

    systems = _systems(settings.quick)
    ref = reference_step(p0, xb, yb)
    table = run_case(settings, f"one step, batch {BATCH}, all systems in one process (interleaved)",
                     (p0, xb, yb, batches), ref, systems, rtol=2e-4, atol=2e-6,
                     extra=extra, extra_columns=[f"acc@{n_steps}", "acc>0.9"],
                     notes=[f"data: {desc}", "check: loss and updated params vs float64 NumPy reference",
                            ("measures the step with all systems loaded in one process and timed round-robin: "
                             "after each call, OpenBLAS's threads and XLA/OpenMP pools spin for about 0.1 s on the "
                             "second core, which symgraph's worker pool then does not get")])
    fresh = _fresh_table(settings, systems, ref)
    return WorkloadResult("W2", TITLE, [table, fresh])
