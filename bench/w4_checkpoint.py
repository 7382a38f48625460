"""W4 — checkpointing.

A chain of L = 64 layers ``x = tanh(x @ W_i + b_i)``, width 256, batch 4096,
float32, loss ``sum(x_L**2)``, gradient w.r.t. every ``W_i`` (quick: L = 8,
width 64, batch 256). Keeping every layer output costs L * batch * width * 4
bytes (256 MiB at full size); the parameters cost 16 MiB.

Every (system, variant) runs in a fresh subprocess (`bench.subproc`); a
baseline subprocess per system imports the system and holds only the
parameters and the input. Reported: planned peak bytes (symgraph's
``cf.stats["peak_bytes"]``), peak RSS minus the baseline's peak (lifetime
peak: includes compilation), the growth of RSS during the timed steps (peak
during steps minus RSS before them), time per step, and the recomputation
overhead (time / the same system's no-checkpointing time - 1).

Variants: symgraph: none, every layer (``sg.checkpoint`` around each layer),
``checkpoint="sqrt"``, ``"revolve"``, a byte budget (1/4 of the activations;
quick: all of them, since tiny sizes make 1/4 infeasible);
NumPy (hand-written backward): none, sqrt(L) segments recomputed in the
backward sweep; JAX: none, ``jax.checkpoint`` per layer, per 8-layer segment;
torch: none, ``checkpoint_sequential`` with 8 segments.
"""

from __future__ import annotations

import math

import numpy as np

from .harness import Row, Settings, Table, WorkloadResult, compare, fmt_bytes, format_seconds, log

TITLE = "checkpointing: 64-layer tanh chain, width 256, batch 4096, float32, grad w.r.t. every W_i"

FULL = {"L": 64, "width": 256, "batch": 4096, "reps": 5, "seg": 8, "budget_frac": 0.25}
QUICK = {"L": 8, "width": 64, "batch": 256, "reps": 3, "seg": 3, "budget_frac": 1.0}


def make_data(cfg: dict) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """(Ws, bs, x): L weight matrices (width, width), L biases (width,), input (batch, width), float32."""
    rng = np.random.default_rng(0)
    L, w, b = cfg["L"], cfg["width"], cfg["batch"]
    Ws = [(rng.standard_normal((w, w)) / math.sqrt(w)).astype(np.float32) for _ in range(L)]
    bs = [(0.1 * rng.standard_normal(w)).astype(np.float32) for _ in range(L)]
    x = rng.standard_normal((b, w)).astype(np.float32)
    return Ws, bs, x


def numpy_grads(Ws, bs, x, seg: int | None = None) -> list[np.ndarray]:
    """Hand-written gradient of sum(x_L**2) w.r.t. every W_i (dtype of the inputs).

    Args:
        seg: None keeps every layer output; an int keeps only every
            `seg`-th layer input and recomputes each segment in the backward sweep.
    """
    L = len(Ws)
    if seg is None:
        acts = [x]
        for W, b in zip(Ws, bs):
            acts.append(np.tanh(acts[-1] @ W + b))
        g = 2 * acts[-1]
        grads = [None] * L
        for i in range(L - 1, -1, -1):
            y = acts[i + 1]
            d = g * (1 - y * y)
            acts[i + 1] = None
            grads[i] = acts[i].T @ d
            g = d @ Ws[i].T
        return grads
    starts = list(range(0, L, seg))
    saved, h = {}, x
    for i, (W, b) in enumerate(zip(Ws, bs)):
        if i in starts:
            saved[i] = h
        h = np.tanh(h @ W + b)
    g = 2 * h
    del h
    grads = [None] * L
    for s in reversed(starts):
        e = min(s + seg, L)
        acts = [saved.pop(s)]
        for i in range(s, e):
            acts.append(np.tanh(acts[-1] @ Ws[i] + bs[i]))
        for i in range(e - 1, s - 1, -1):
            y = acts[i - s + 1]
            d = g * (1 - y * y)
            acts[i - s + 1] = None
            grads[i] = acts[i - s].T @ d
            g = d @ Ws[i].T
    return grads


# --------------------------------------------------------------------------- child side

def _check_dict(grads) -> dict:
    return {f"g{i:03d}": np.asarray(g) for i, g in enumerate(grads)}


def child_setup(system: str, variant: str, cfg: dict) -> dict:
    """Build one (system, variant) inside a fresh child process (see `bench.subproc`)."""
    Ws, bs, x = make_data(cfg)
    seg, reps = cfg["seg"], cfg["reps"]
    if system == "numpy":
        hold = (Ws, bs, x)
        if variant == "baseline":
            return {"step": None, "hold": hold}
        s = {"none": None, "segments": seg}[variant]
        return {"step": lambda: numpy_grads(Ws, bs, x, s), "check": _check_dict, "hold": hold, "reps": reps}
    if system == "symgraph":
        import symgraph as sg
        import symgraph.numpy as snp
        if variant == "baseline":
            return {"step": None, "hold": (Ws, bs, x)}

        def layer(h, W, b):
            return snp.tanh(h @ W + b)
        lay = sg.checkpoint(layer) if variant == "every-layer" else layer

        def loss(Ws, bs, x):
            for W, b in zip(Ws, bs):
                x = lay(x, W, b)
            return snp.sum(x * x)
        act_bytes = cfg["L"] * cfg["batch"] * cfg["width"] * 4
        ck = {"none": None, "every-layer": None, "sqrt": "sqrt", "revolve": "revolve",
              "budget": int(act_bytes * cfg["budget_frac"])}[variant]
        cf = sg.compile(sg.grad(loss), checkpoint=ck)
        return {"step": lambda: cf(Ws, bs, x), "check": _check_dict, "hold": (Ws, bs, x), "reps": reps,
                "planned_peak": lambda: cf.stats.get("peak_bytes")}
    if system == "jax":
        from .common import import_jax
        jax, jnp = import_jax()
        Wj, bj, xj = [jax.device_put(w) for w in Ws], [jax.device_put(b) for b in bs], jax.device_put(x)
        del Ws, bs, x
        if variant == "baseline":
            return {"step": None, "hold": (Wj, bj, xj)}

        def layer(h, W, b):
            return jnp.tanh(h @ W + b)

        def segment(h, Ws, bs):
            for W, b in zip(Ws, bs):
                h = layer(h, W, b)
            return h

        def loss(Ws, bs, x):
            if variant == "segments":
                sfn = jax.checkpoint(segment)
                for s in range(0, len(Ws), seg):
                    x = sfn(x, Ws[s:s + seg], bs[s:s + seg])
            else:
                lfn = jax.checkpoint(layer) if variant == "every-layer" else layer
                for W, b in zip(Ws, bs):
                    x = lfn(x, W, b)
            return jnp.sum(x * x)
        fn = jax.jit(jax.grad(loss))
        return {"step": lambda: jax.block_until_ready(fn(Wj, bj, xj)), "check": _check_dict,
                "hold": (Wj, bj, xj), "reps": reps}
    if system == "torch":
        import torch
        from torch.utils.checkpoint import checkpoint_sequential
        Wt = [torch.from_numpy(w).requires_grad_(True) for w in Ws]
        bt = [torch.from_numpy(b) for b in bs]
        xt = torch.from_numpy(x)
        if variant == "baseline":
            return {"step": None, "hold": (Wt, bt, xt)}

        class Layer(torch.nn.Module):
            def __init__(self, W, b):
                super().__init__()
                self.W, self.b = W, b

            def forward(self, h):
                return torch.tanh(h @ self.W + self.b)
        net = torch.nn.Sequential(*(Layer(W, b) for W, b in zip(Wt, bt)))

        def step():
            if variant == "segments":
                out = checkpoint_sequential(net, cfg["L"] // seg, xt, use_reentrant=False)
            else:
                out = net(xt)
            return torch.autograd.grad((out * out).sum(), Wt)
        return {"step": step, "check": lambda gs: _check_dict([g.numpy() for g in gs]),
                "hold": (Wt, bt, xt, net), "reps": reps}
    raise ValueError(f"unknown system {system!r}")


# --------------------------------------------------------------------------- parent side

def variants(cfg: dict) -> list[tuple[str, str, str]]:
    """(system, variant, description) in table order."""
    seg = cfg["seg"]
    L = cfg["L"]
    return [
        ("symgraph", "none", "no checkpointing"),
        ("symgraph", "every-layer", "sg.checkpoint around every layer"),
        ("symgraph", "sqrt", 'checkpoint="sqrt"'),
        ("symgraph", "revolve", 'checkpoint="revolve"'),
        ("symgraph", "budget", f"checkpoint=<{cfg['budget_frac']} x activations> bytes"),
        ("numpy", "none", "hand-written, all activations kept"),
        ("numpy", "segments", f"hand-written, {math.ceil(L / seg)} segments of {seg} recomputed"),
        ("jax", "none", "jax.jit(jax.grad)"),
        ("jax", "every-layer", "jax.checkpoint per layer"),
        ("jax", "segments", f"jax.checkpoint per {seg}-layer segment"),
        ("torch", "none", "eager"),
        ("torch", "segments", f"checkpoint_sequential, {L // seg} segments"),
    ]


def run(settings: Settings) -> WorkloadResult:
    """Run every variant in its own subprocess and tabulate time and memory."""
    from .subproc import run_variant
    cfg = dict(QUICK if settings.quick else FULL)
    Ws, bs, x = make_data(cfg)
    ref = numpy_grads([w.astype(np.float64) for w in Ws], [b.astype(np.float64) for b in bs],
                      x.astype(np.float64))
    scale = max(float(np.abs(g).max()) for g in ref)
    del Ws, bs, x

    def check(arrays: dict) -> tuple[bool, str]:
        got = [arrays[k] for k in sorted(arrays)]
        ok, msg, _, _ = compare(got, ref, rtol=2e-3, atol=2e-4 * scale)
        return ok, msg

    timeout = 120.0 if settings.quick else 900.0
    act_bytes = cfg["L"] * cfg["batch"] * cfg["width"] * 4
    baselines: dict[str, dict] = {}
    rows: list[Row] = []
    none_median: dict[str, float] = {}
    for system, variant, desc in variants(cfg):
        row = Row(system)
        row.extras["variant"] = variant
        rows.append(row)
        if settings.systems is not None and system not in settings.systems:
            row.status, row.message = "skipped", "not selected (--systems)"
            continue
        if system not in baselines:
            baselines[system] = run_variant(__name__, system, "baseline", cfg, None, timeout)
        base = baselines[system]
        if base["status"] != "ok":
            row.status = "missing" if base["status"] == "missing" and system != "symgraph" else "error"
            row.message = base.get("message", "")
            continue
        rep = run_variant(__name__, system, variant, cfg, check, timeout)
        log(f"  [W4] {system} {variant}: {rep['status']} {rep.get('message', '')}", settings)
        row.first_call = rep.get("first_call")
        row.extras["planned peak"] = fmt_bytes(rep["planned_peak"]) if rep.get("planned_peak") else "-"
        if rep["status"] != "ok":
            row.status = "error" if rep["status"] == "missing" and system == "symgraph" else rep["status"]
            row.message = rep.get("message", "")
            if row.status == "WRONG":
                print(f"  [W4] {system} {variant}: WRONG: {row.message}", flush=True)
            continue
        ts = rep["times"]
        row.median, row.min, row.max, row.reps, row.number = rep["median"], min(ts), max(ts), len(ts), 1
        row.extras["peak RSS - base"] = fmt_bytes(rep["peak_rss"] - base["peak_rss"])
        if rep.get("step_peak") is not None and rep.get("rss_before_steps") is not None:
            row.extras["step growth"] = fmt_bytes(rep["step_peak"] - rep["rss_before_steps"])
        row.extras["peak_rss_bytes"] = rep["peak_rss"] - base["peak_rss"]
        row.extras["planned_peak_bytes"] = rep.get("planned_peak")
        if variant == "none":
            none_median[system] = row.median
    sg_none = none_median.get("symgraph")
    for row in rows:
        if row.median is None:
            continue
        if sg_none:
            row.ratio = row.median / sg_none
        if row.system in none_median:
            row.extras["recompute"] = f"{100 * (row.median / none_median[row.system] - 1):+.0f}%"
    notes = [f"L={cfg['L']}, width={cfg['width']}, batch={cfg['batch']}: all activations = {fmt_bytes(act_bytes)}, "
             f"parameters = {fmt_bytes(cfg['L'] * (cfg['width'] + 1) * cfg['width'] * 4)}",
             "peak RSS - base: lifetime peak RSS of the variant's process (includes imports and compilation) "
             "minus that of a process holding only the system, parameters and input",
             "step growth: peak RSS during the timed steps minus RSS just before them",
             "recompute: time / same system without checkpointing - 1; ratio: time / symgraph 'none'",
             f"baselines: " + ", ".join(f"{k} {fmt_bytes(v.get('peak_rss'))}" if v["status"] == "ok"
                                        else f"{k} {v['status']}" for k, v in baselines.items())]
    table = Table("time per step and memory, one fresh process per variant", rows,
                  extra_columns=["variant", "planned peak", "peak RSS - base", "step growth", "recompute"],
                  notes=notes, key="variant")
    return WorkloadResult("W4", TITLE, [table])
