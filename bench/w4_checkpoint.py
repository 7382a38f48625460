"""W4 — checkpointing.

A chain of L = 64 layers ``x = tanh(x @ W_i + b_i)``, width 256, batch 4096,
float32, loss ``sum(x_L**2)``, gradient w.r.t. every ``W_i`` (quick: L = 8,
width 64, batch 256). Keeping every layer output costs L * batch * width * 4
bytes (256 MiB at full size); the parameters cost 16 MiB.

Every (system, variant) runs in a fresh subprocess (`bench.subproc`); a
baseline subprocess per system imports and initializes the system and holds
only the parameters and the input (symgraph: the LLVM backend imported and
its target machine created; JAX: the arrays on the device; torch: tensors).
Reported: planned peak bytes (symgraph's ``cf.stats["peak_bytes"]``: live
intermediates and outputs of the LLVM plan), peak RSS minus the baseline's
peak (lifetime peak: includes compilation), the peak RSS during the timed
steps minus the baseline's peak, the growth of RSS during the timed steps,
time per step, and the recomputation overhead (time / the same system's
no-checkpointing time - 1).

Variants: symgraph: none, every layer (``sg.checkpoint`` around each layer),
``checkpoint="sqrt"``, ``"revolve"`` (s = ceil(sqrt(steps)) snapshots),
``("revolve", 4)``, byte budgets (1/2, 1/4 and 3/16 of the activations;
quick: all of them, since tiny sizes make less infeasible);
NumPy (hand-written backward): none, sqrt(L) segments recomputed in the
backward sweep; JAX: none, ``jax.checkpoint`` per layer, per 8-layer segment;
torch: none, ``torch.utils.checkpoint`` per layer, ``checkpoint_sequential``
with 8 segments.

``plot_memory_vs_time`` draws peak memory against step time for every
variant (``python -m bench W4 --plot DIR`` writes ``DIR/w4_memory_vs_time.png``;
``python -m bench.w4_checkpoint --plot DIR RESULTS.json`` redraws it from the
JSON that ``python -m bench W4 --json RESULTS.json`` wrote).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .common import set_thread_env
from .harness import Row, Settings, Table, WorkloadResult, compare, fmt_bytes, format_seconds, log

_MODULE = "bench.w4_checkpoint"  # the children import this module by name (also when run as a script)
TITLE = "checkpointing: 64-layer tanh chain, width 256, batch 4096, float32, grad w.r.t. every W_i"

FULL = {"L": 64, "width": 256, "batch": 4096, "reps": 5, "seg": 8, "budgets": [0.5, 0.25, 0.1875], "snapshots": 4}
QUICK = {"L": 8, "width": 64, "batch": 256, "reps": 3, "seg": 3, "budgets": [1.0], "snapshots": 2, "quick": True}


def _budget_bytes(cfg: dict, frac: float) -> int:
    """A byte budget: `frac` of the activations of all layers (L * batch * width * 4 bytes)."""
    return int(cfg["L"] * cfg["batch"] * cfg["width"] * 4 * frac)


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
            # the system initialized: the LLVM backend imported and its target machine created
            # (compiling is part of each variant, as XLA's compilation is for JAX)
            import codegen.jit
            codegen.jit.target_machine()
            return {"step": None, "hold": (Ws, bs, x)}

        def layer(h, W, b):
            return snp.tanh(h @ W + b)
        lay = sg.checkpoint(layer) if variant == "every-layer" else layer

        def loss(Ws, bs, x):
            for W, b in zip(Ws, bs):
                x = lay(x, W, b)
            return snp.sum(x * x)
        if variant.startswith("budget-"):
            ck = _budget_bytes(cfg, float(variant.split("-", 1)[1]))
        else:
            if variant == "sqrt-process":  # LLVM runs in codegen.compile_worker, not in this process
                os.environ["SYMGRAPH_COMPILE_PROCESS"] = "1"
            ck = {"none": None, "every-layer": None, "sqrt": "sqrt", "sqrt-warm": "sqrt", "sqrt-process": "sqrt",
                  "revolve": "revolve",
                  "revolve-s": ("revolve", cfg["snapshots"])}[variant]
        cf = sg.compile(sg.grad(loss), checkpoint=ck)
        # resident memory before compiling, in the state of the baseline process (backend imported,
        # target machine created): the first call's growth splits into anonymous memory (arena,
        # outputs, compiler residue) and file-backed pages (LLVM's code, mapped by compiling)
        import codegen.jit

        from .subproc import read_status_bytes
        codegen.jit.target_machine()
        rss0 = {k: read_status_bytes(k) for k in ("RssAnon", "RssFile")}

        def planned() -> dict:
            st = cf.stats
            rss1 = {k: read_status_bytes(k) for k in rss0}
            return {"peak": st.get("peak_bytes"), "arena": st.get("arena_bytes"),
                    "outputs": sum(w.nbytes for w in Ws), "call_bytes": st.get("call_bytes"),
                    "activations": st.get("peak_activation_bytes"),
                    "recomputed_flops": st.get("recomputed_flops"), "forward_flops": st.get("forward_flops"),
                    "plan": str(st.get("checkpoint")), "cache": st.get("cache"),
                    "kernel_functions": st.get("kernel_functions"), "loop_kernels": st.get("loop_kernels"),
                    "compile_seconds": st.get("compile_seconds"),
                    **{f"{k.lower()}_growth": (rss1[k] - rss0[k]) if rss1[k] is not None and rss0[k] is not None
                       else None for k in rss0}}
        return {"step": lambda: cf(Ws, bs, x), "check": _check_dict, "hold": (Ws, bs, x), "reps": reps,
                "planned_peak": planned}
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
        from torch.utils.checkpoint import checkpoint, checkpoint_sequential
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
            elif variant == "every-layer":
                out = xt
                for m in net:
                    out = checkpoint(m, out, use_reentrant=False)
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
    rows = [
        ("symgraph", "none", "no checkpointing"),
        ("symgraph", "every-layer", "sg.checkpoint around every layer"),
        ("symgraph", "sqrt", 'checkpoint="sqrt"'),
        ("symgraph", "sqrt-warm", 'checkpoint="sqrt", object code loaded from the disk cache the "sqrt" run wrote'),
        ("symgraph", "sqrt-process", 'checkpoint="sqrt", compiled cold in a worker process (SYMGRAPH_COMPILE_PROCESS=1)'),
        ("symgraph", "revolve", 'checkpoint="revolve" (s = ceil(sqrt(steps)))'),
        ("symgraph", "revolve-s", f'checkpoint=("revolve", {cfg["snapshots"]})'),
    ]
    for frac in cfg["budgets"]:
        rows.append(("symgraph", f"budget-{frac:g}",
                     f"checkpoint={_budget_bytes(cfg, frac)} bytes ({frac:g} x activations)"))
    rows += [
        ("numpy", "none", "hand-written, all activations kept"),
        ("numpy", "segments", f"hand-written, {math.ceil(L / seg)} segments of {seg} recomputed"),
        ("jax", "none", "jax.jit(jax.grad)"),
        ("jax", "every-layer", "jax.checkpoint per layer"),
        ("jax", "segments", f"jax.checkpoint per {seg}-layer segment"),
        ("torch", "none", "eager"),
        ("torch", "every-layer", "torch.utils.checkpoint per layer"),
        ("torch", "segments", f"checkpoint_sequential, {L // seg} segments"),
    ]
    return rows


def run(settings: Settings) -> WorkloadResult:
    """Run every variant in its own subprocess and tabulate time and memory."""
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
    with _cache_dirs() as cache_for:
        for system, variant, desc in variants(cfg):
            _run_one(system, variant, desc, cfg, settings, check, timeout, baselines, rows, none_median, cache_for)
    _finish_rows(rows, none_median)
    notes = _notes(cfg, act_bytes, baselines)
    table = Table("time per step and memory, one fresh process per variant", rows,
                  extra_columns=["variant", "planned peak", "arena+outputs", "peak RSS - base", "steps peak - base",
                                 "step growth", "recompute"],
                  notes=notes, key="variant")
    return WorkloadResult("W4", TITLE, [table])


class _cache_dirs:
    """SYMGRAPH_CACHE_DIR per symgraph variant: a fresh (cold) directory each, "sqrt-warm" reusing "sqrt"'s."""

    def __enter__(self):
        import tempfile
        self.root = tempfile.mkdtemp(prefix="w4-cache-")
        self.saved = os.environ.get("SYMGRAPH_CACHE_DIR")
        return self

    def __call__(self, system: str, variant: str) -> None:
        if system == "symgraph":
            os.environ["SYMGRAPH_CACHE_DIR"] = os.path.join(self.root, variant.replace("-warm", ""))
        else:
            os.environ.pop("SYMGRAPH_CACHE_DIR", None)

    def __exit__(self, *exc):
        import shutil
        shutil.rmtree(self.root, ignore_errors=True)
        if self.saved is None:
            os.environ.pop("SYMGRAPH_CACHE_DIR", None)
        else:
            os.environ["SYMGRAPH_CACHE_DIR"] = self.saved
        return False


def _run_one(system: str, variant: str, desc: str, cfg: dict, settings: Settings, check, timeout: float,
             baselines: dict, rows: list[Row], none_median: dict, cache_for) -> None:
    """Run one (system, variant) (and the system's baseline the first time) and append its row."""
    from .subproc import baseline_ok, run_variant
    row = Row(system)
    row.extras["variant"] = variant
    row.extras["description"] = desc
    rows.append(row)
    if settings.systems is not None and system not in settings.systems:
        row.status, row.message = "skipped", "not selected (--systems)"
        return
    cache_for(system, variant)
    if not baseline_ok(_MODULE, system, cfg, timeout, baselines, row):
        return
    base = baselines[system]
    rep = run_variant(_MODULE, system, variant, cfg, check, timeout)
    log(f"  [W4] {system} {variant}: {rep['status']} {rep.get('message', '')}", settings)
    row.first_call = rep.get("first_call")
    plan = rep.get("planned_peak") or {}
    row.extras["planned peak"] = fmt_bytes(plan["peak"]) if plan.get("peak") else "-"
    if plan.get("arena") is not None:
        row.extras["arena+outputs"] = fmt_bytes(_call_bytes(plan))
    row.extras["plan"] = plan
    row.extras["planned_peak_bytes"] = plan.get("peak")
    if rep["status"] != "ok":
        row.status = "error" if rep["status"] == "missing" and system == "symgraph" else rep["status"]
        row.message = rep.get("message", "")
        if row.status == "WRONG":
            print(f"  [W4] {system} {variant}: WRONG: {row.message}", flush=True)
        return
    ts = rep["times"]
    row.median, row.min, row.max, row.reps, row.number = rep["median"], min(ts), max(ts), len(ts), 1
    row.extras["peak RSS - base"] = fmt_bytes(rep["peak_rss"] - base["peak_rss"])
    row.extras["peak_rss_bytes"] = rep["peak_rss"] - base["peak_rss"]
    if rep.get("step_peak") is not None:
        row.extras["steps peak - base"] = fmt_bytes(rep["step_peak"] - base["peak_rss"])
        row.extras["steps_peak_bytes"] = rep["step_peak"] - base["peak_rss"]
        if rep.get("rss_before_steps") is not None:
            row.extras["step growth"] = fmt_bytes(rep["step_peak"] - rep["rss_before_steps"])
    if variant == "none":
        none_median[system] = row.median


def _finish_rows(rows: list[Row], none_median: dict[str, float]) -> None:
    """Ratios to symgraph 'none' and recomputation overheads (to the same system's 'none')."""
    sg_none = none_median.get("symgraph")
    for row in rows:
        if row.median is None:
            continue
        if sg_none:
            row.ratio = row.median / sg_none
        if row.system in none_median:
            row.extras["recompute"] = f"{100 * (row.median / none_median[row.system] - 1):+.0f}%"


def _notes(cfg: dict, act_bytes: int, baselines: dict) -> list[str]:
    return [f"L={cfg['L']}, width={cfg['width']}, batch={cfg['batch']}: all activations = {fmt_bytes(act_bytes)}, "
            f"parameters = {fmt_bytes(cfg['L'] * (cfg['width'] + 1) * cfg['width'] * 4)}",
            "planned peak: symgraph's cf.stats['peak_bytes'] (LLVM plan: live intermediates, outputs from their "
            "first write); arena+outputs: cf.stats['call_bytes'], the arena plus the gradient arrays, which the "
            "runtime allocates before the call (what a call holds)",
            "peak RSS - base: lifetime peak RSS of the variant's process (includes imports and compilation) "
            "minus that of a process holding only the initialized system, parameters and input",
            "steps peak - base: peak RSS during the timed steps (after the first call) minus the baseline's "
            "peak; step growth: that peak minus RSS just before the timed steps (symgraph keeps its arena "
            "between calls, so its growth is ~0)",
            "symgraph variants compile cold (a fresh SYMGRAPH_CACHE_DIR each) except sqrt-warm, which loads "
            "the object code the sqrt run wrote (no LLVM optimization in its process)",
            "recompute: time / same system without checkpointing - 1; ratio: time / symgraph 'none'",
            "baselines: " + ", ".join(f"{k} {fmt_bytes(v.get('peak_rss'))}" if v["status"] == "ok"
                                      else f"{k} {v['status']}" for k, v in baselines.items())]


# --------------------------------------------------------------------------- plot

_STYLE = {"symgraph": ("tab:red", "o"), "numpy": ("tab:gray", "s"), "jax": ("tab:blue", "^"),
          "torch": ("tab:orange", "D")}


def plot_memory_vs_time(result, outdir: str, name: str = "w4_memory_vs_time.png") -> str:
    """Scatter peak memory against time per step for every variant that ran.

    Filled markers: measured peak RSS minus the baseline (fresh process per
    variant, MiB); hollow red markers: symgraph's planned peak (cf.stats).
    The x axis is the median time per step (seconds).

    Args:
        result: the W4 `WorkloadResult`, or its JSON form (``as_dict()``, as
            written by ``python -m bench W4 --json PATH``).
        outdir: directory for the PNG (created if missing).
        name: file name.

    Returns:
        The path written.
    """
    import os

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = result if isinstance(result, dict) else result.as_dict()
    rows = [r for t in d["tables"] for r in t["rows"]]
    fig, ax = plt.subplots(figsize=(9, 6))
    seen = set()
    seen_pts: list = []
    mib = float(1 << 20)
    for r in rows:
        ex = r.get("extras", {})
        if r.get("median") is None or ex.get("peak_rss_bytes") is None:
            continue
        color, marker = _STYLE.get(r["system"], ("black", "x"))
        label = r["system"] if r["system"] not in seen else None
        seen.add(r["system"])
        t, m = r["median"], ex["peak_rss_bytes"] / mib
        ax.errorbar([t], [m], xerr=[[t - r["min"]], [r["max"] - t]], fmt=marker, color=color, label=label,
                    markersize=7, capsize=2, elinewidth=0.8)
        k = len(seen_pts)
        seen_pts.append((t, m))
        # alternate the label side so that neighbouring points stay readable
        ax.annotate(f"{r['system']} {ex.get('variant', '')}", (t, m), textcoords="offset points",
                    xytext=(5, 4) if k % 2 == 0 else (5, -11), fontsize=7, color=color)
        if r["system"] == "symgraph" and ex.get("planned_peak_bytes"):
            p = ex["planned_peak_bytes"] / mib
            lab = "symgraph planned peak (cf.stats)" if "planned" not in seen else None
            seen.add("planned")
            ax.plot([t], [p], marker, mfc="none", color=color, markersize=7, label=lab)
            ax.plot([t, t], [p, m], ":", color=color, linewidth=0.7)
    for t in d["tables"]:
        for n in t.get("notes", []):
            if n.startswith("L="):
                ax.set_title(f"W4 checkpointing: peak memory vs time per step\n{n}", fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("time per step (s, median; bars: min-max)")
    ax.set_ylabel("peak RSS over a process holding the system, parameters and input (MiB)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def extra_plots(result, outdir: str) -> list[str]:
    """Plots beyond the harness's bar chart (called by `bench.plot.plot_workloads`)."""
    return [plot_memory_vs_time(result, outdir)]


# --------------------------------------------------------------------------- repeated key variants

DEFAULT_REPEAT = ("symgraph:none,symgraph:sqrt,symgraph:sqrt-warm,symgraph:revolve,symgraph:budget-0.25,"
                  "torch:none,jax:none,jax:segments,torch:segments")


def repeat(pairs: list[tuple[str, str]], rounds: int, quick: bool = False, timeout: float = 900.0,
           echo: bool = True) -> list[dict]:
    """Run (system, variant) pairs round-robin, `rounds` times, each in a fresh process; no correctness check.

    Each round runs fresh baselines first, then every pair once, so slow
    periods of a shared machine hit all pairs alike. symgraph variants
    compile cold each round (fresh cache directories), as in `run`.

    Args:
        pairs: (system, variant) as in `variants`.
        rounds: repetitions of the whole list.
        quick: the small configuration.
        timeout: seconds per child process.
        echo: print one line per child.

    Returns:
        One dict per pair: system, variant, medians (per round, seconds),
        peaks and steps_peaks (bytes over that round's baseline), plan (the last
        symgraph plan figures, if any), file_growth and compile_seconds (per
        round, symgraph only: file-backed resident pages added by compiling and
        running, bytes; `cf.stats["compile_seconds"]`), errors (messages).
    """
    from .subproc import run_variant
    cfg = dict(QUICK if quick else FULL)
    out = [{"system": s, "variant": v, "medians": [], "peaks": [], "steps_peaks": [], "plan": None, "errors": [],
            "file_growth": [], "compile_seconds": []} for s, v in pairs]
    for r in range(rounds):
        with _cache_dirs() as cache_for:
            bases = {}
            for s in dict.fromkeys(sy for sy, _ in pairs):
                cache_for(s, "baseline")
                bases[s] = run_variant(_MODULE, s, "baseline", cfg, None, timeout)
            for res in out:
                s, v = res["system"], res["variant"]
                cache_for(s, v)
                rep = run_variant(_MODULE, s, v, cfg, None, timeout)
                base = bases[s]
                if rep["status"] != "ok" or base["status"] != "ok":
                    res["errors"].append(rep.get("message") or base.get("message") or rep["status"])
                    continue
                res["medians"].append(rep["median"])
                res["peaks"].append(rep["peak_rss"] - base["peak_rss"])
                if rep.get("step_peak") is not None:
                    res["steps_peaks"].append(rep["step_peak"] - base["peak_rss"])
                res["plan"] = rep.get("planned_peak") or res["plan"]
                plan = rep.get("planned_peak") or {}
                if plan.get("rssfile_growth") is not None:
                    res["file_growth"].append(plan["rssfile_growth"])
                if plan.get("compile_seconds") is not None:
                    res["compile_seconds"].append(plan["compile_seconds"])
                if echo:
                    print(f"  round {r + 1}/{rounds} {s} {v}: {rep['median']:.3f} s, "
                          f"peak RSS - base {fmt_bytes(rep['peak_rss'] - base['peak_rss'])}", flush=True)
    return out


def _call_bytes(plan: dict) -> int:
    """Bytes one symgraph call holds: `cf.stats["call_bytes"]` (arena + fresh outputs), else arena + gradients."""
    return plan["call_bytes"] if plan.get("call_bytes") is not None else plan["arena"] + plan["outputs"]


def format_repeat(results: list[dict]) -> str:
    """A table of `repeat` results: medians over rounds, ratios to symgraph none.

    Columns: planned peak (`cf.stats["peak_bytes"]`), arena+out
    (`cf.stats["call_bytes"]`), peak RSS - base, its file-backed part (LLVM's
    code pages mapped by compiling; the rest is anonymous memory), the peak
    during the timed steps, time, kernel functions / loop kernels and compile
    seconds (median of rounds).
    """
    import statistics as st
    ref = next((st.median(r["medians"]) for r in results
                if r["system"] == "symgraph" and r["variant"] == "none" and r["medians"]), None)
    own = {r["system"]: st.median(r["medians"]) for r in results if r["variant"] == "none" and r["medians"]}
    head = (f"{'system':9s} {'variant':11s} {'planned peak':>12s} {'arena+out':>10s} {'peak RSS-base':>14s} "
            f"{'file-backed':>11s} {'steps peak-base':>15s} {'time (median of rounds)':>24s} {'rounds min-max':>17s} "
            f"{'/sg none':>8s} {'recompute':>9s} {'kernel fns':>10s} {'compile':>8s}")
    lines = [head, "-" * len(head)]
    for r in results:
        if not r["medians"]:
            lines.append(f"{r['system']:9s} {r['variant']:11s} error: {'; '.join(r['errors'])[:80]}")
            continue
        m = st.median(r["medians"])
        plan = r["plan"] or {}
        ao = fmt_bytes(_call_bytes(plan)) if plan.get("arena") is not None else "-"
        rec = f"{100 * (m / own[r['system']] - 1):+.0f}%" if r["system"] in own else "-"
        fb = fmt_bytes(st.median(r["file_growth"])) if r.get("file_growth") else "-"
        kf = f"{plan['kernel_functions']}/{plan['loop_kernels']}" if plan.get("kernel_functions") is not None else "-"
        cs = f"{st.median(r['compile_seconds']):.2f} s" if r.get("compile_seconds") else "-"
        lines.append(f"{r['system']:9s} {r['variant']:11s} {fmt_bytes(plan.get('peak')):>12s} {ao:>10s} "
                     f"{fmt_bytes(st.median(r['peaks'])):>14s} {fb:>11s} "
                     f"{fmt_bytes(st.median(r['steps_peaks'])) if r['steps_peaks'] else '-':>15s} "
                     f"{format_seconds(m):>24s} "
                     f"{format_seconds(min(r['medians'])) + '-' + format_seconds(max(r['medians'])):>17s} "
                     f"{m / ref if ref else float('nan'):8.2f} {rec:>9s} {kf:>10s} {cs:>8s}")
    return "\n".join(lines)


def _main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m bench.w4_checkpoint",
                                 description="W4 extras: repeat key variants round-robin; redraw the plot.")
    ap.add_argument("--plot", metavar="DIR", help="redraw w4_memory_vs_time.png from RESULTS (bench --json)")
    ap.add_argument("results", nargs="?", help="JSON written by python -m bench W4 --json PATH")
    ap.add_argument("--repeat", type=int, metavar="N", help="run the --pairs round-robin N times")
    ap.add_argument("--pairs", default=DEFAULT_REPEAT, help="system:variant,... (default: %(default)s)")
    ap.add_argument("--threads", type=int, metavar="N", help="BLAS/OpenMP/XLA/symgraph threads (as python -m bench)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", metavar="PATH", help="write the --repeat results as JSON")
    args = ap.parse_args(argv)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):   # as python -m bench, for the children
        os.environ.pop(var, None)
    set_thread_env(args.threads)
    if args.repeat:
        pairs = [tuple(p.split(":", 1)) for p in args.pairs.split(",") if p]
        res = repeat(pairs, args.repeat, quick=args.quick)
        print(format_repeat(res))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"pairs": res, "rounds": args.repeat, "threads": args.threads, "quick": args.quick}, f,
                          indent=1, default=str)
    if args.plot:
        if not args.results:
            ap.error("--plot needs RESULTS (the JSON of python -m bench W4 --json)")
        with open(args.results) as f:
            report = json.load(f)
        print(plot_memory_vs_time(report["workloads"]["W4"], args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
