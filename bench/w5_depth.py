"""W5 (iii): first-call time against depth, each system in a fresh process.

The chain of issue 19's depth table: L layers ``h = tanh(h @ W_i)``, width 64, batch 512,
float32, loss = mean(h_L²); the timed call is the gradient with respect to all L weight
matrices, built and called once in a fresh Python process per (system, L), as a user sees it:

- ``symgraph``: ``sg.compile(sg.grad(loss))`` of the plain NumPy loop (unrolled, the default);
- ``symgraph-roll``: the same with ``roll=True`` (the Python loop becomes one scan loop);
- ``jax``: ``jax.jit(jax.grad(loss))`` (``block_until_ready``);
- ``torch.compile``: ``torch.compile(loss)`` then ``torch.autograd.grad`` (AOTAutograd compiles
  the backward at that first call).

Columns: ``first call`` = build + trace + compile + the first call (imports excluded),
``import`` = the system's import (``import + first`` is what a user waits for; the
ratios are over symgraph's at the same L), ``median`` = steady state over 5 more calls. The gradient of
the first and last layers is checked against a float64 hand-written backward (relative error
below 1e-3 of the largest entry) before a row counts. Sizes: L = 8, 16, 32, 64, 128, 256
(``BENCH_W5_DEPTHS=8,64`` picks; ``--quick``: L = 2, symgraph only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .harness import Row, Settings, Table, log

__all__ = ["DEPTHS", "WIDTH", "BATCH", "make_data", "reference_grads", "table"]

DEPTHS = (8, 16, 32, 64, 128, 256)
WIDTH, BATCH = 64, 512
SYSTEMS = ("symgraph", "symgraph-roll", "jax", "torch.compile")
TAG = "@@DEPTH "


def make_data(layers: int):
    """(Ws, x): `layers` float32 (64, 64) matrices scaled by 1/sqrt(64) and a (512, 64) input, seed 5."""
    import numpy as np
    rng = np.random.default_rng(5)
    ws = [(rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for _ in range(layers)]
    return ws, rng.standard_normal((BATCH, WIDTH)).astype(np.float32)


def reference_grads(ws, x):
    """The float64 hand-written backward of mean(h_L²): [dW_0, dW_{L-1}]."""
    import numpy as np
    hs = [x.astype(np.float64)]
    for w in ws:
        hs.append(np.tanh(hs[-1] @ w.astype(np.float64)))
    g = 2.0 * hs[-1] / hs[-1].size
    out = [None] * len(ws)
    for i in range(len(ws) - 1, -1, -1):
        g = g * (1.0 - hs[i + 1] ** 2)
        out[i] = hs[i].T @ g
        g = g @ ws[i].astype(np.float64).T
    return [out[0], out[-1]]


def _child(system: str, layers: int) -> dict:
    """Build and call the gradient once (timed), then 5 more times; return times and two gradients."""
    t0 = time.perf_counter()
    import numpy as np
    if system.startswith("symgraph"):
        import symgraph as sg
    elif system == "jax":
        import jax
        import jax.numpy as jnp
    else:
        import torch
    t_import = time.perf_counter() - t0
    ws, x = make_data(layers)

    def loss(ws, x, xp=np):
        h = x
        for w in ws:
            h = xp.tanh(h @ w)
        return xp.mean(h * h)

    if system.startswith("symgraph"):
        f = sg.compile(sg.grad(loss), roll=system == "symgraph-roll")

        def call():
            return f(ws, x)
    elif system == "jax":
        jws, jx = [jnp.asarray(w) for w in ws], jnp.asarray(x)
        f = jax.jit(jax.grad(lambda ws, x: loss(ws, x, jnp)))

        def call():
            return jax.block_until_ready(f(jws, jx))
    else:
        torch.set_num_threads(1)
        tws = [torch.tensor(w, requires_grad=True) for w in ws]
        tx = torch.tensor(x)
        f = torch.compile(lambda ws, x: loss(ws, x, torch))

        def call():
            return torch.autograd.grad(f(tws, tx), tws)
    t1 = time.perf_counter()
    g = call()
    first = time.perf_counter() - t1
    times = []
    for _ in range(5):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    g0, gl = (np.asarray(g[0].detach() if hasattr(g[0], "detach") else g[0]),
              np.asarray(g[-1].detach() if hasattr(g[-1], "detach") else g[-1]))
    return {"import": t_import, "first": first, "steady": sorted(times)[2], "min": min(times),
            "max": max(times), "g0": g0.tolist(), "gl": gl.tolist()}


def _run_child(system: str, layers: int, limit: float) -> dict:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "bench.w5_depth", "--child", system, str(layers)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout: no first call within {limit:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith(TAG):
            return json.loads(line[len(TAG):])
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    missing = "ModuleNotFoundError" in p.stderr and not system.startswith("symgraph")
    return {"missing" if missing else "error": tail[:300]}


def table(settings: Settings) -> Table:
    """One row per (L, system); `ratio` is the system's first call over symgraph's at the same L."""
    import numpy as np
    picked = os.environ.get("BENCH_W5_DEPTHS")
    depths = (2,) if settings.quick else tuple(int(v) for v in picked.split(",")) if picked else DEPTHS
    systems = ("symgraph",) if settings.quick else SYSTEMS
    rows = []
    for layers in depths:
        ref = reference_grads(*make_data(layers))
        base = None
        for system in systems:
            row = Row(system=system, extras={"layers": layers})
            if settings.systems is not None and system not in settings.systems:
                row.status = "skipped"
                rows.append(row)
                continue
            log(f"  [L={layers}] {system}: fresh process", settings)
            out = _run_child(system, layers, settings.first_call_limit)
            if "missing" in out or "error" in out:
                row.status = "missing" if "missing" in out else "error"
                row.message = out.get("missing") or out.get("error")
                rows.append(row)
                continue
            err = max(float(np.max(np.abs(np.asarray(out[k]) - r))) / max(float(np.max(np.abs(r))), 1e-30)
                      for k, r in zip(("g0", "gl"), ref))
            row.first_call, row.median, row.min, row.max = out["first"], out["steady"], out["min"], out["max"]
            row.max_rel_err = err
            row.extras["import"] = round(out["import"], 3)
            row.extras["import + first"] = round(out["import"] + out["first"], 3)
            if err > 1e-3:
                row.status, row.message = "WRONG", f"gradient rel err {err:.2g}"
            if system == "symgraph":
                base = out
            if base is not None:
                row.ratio = out["first"] / base["first"]
                row.extras["ratio with imports"] = round((out["import"] + out["first"]) /
                                                         (base["import"] + base["first"]), 2)
            rows.append(row)
    return Table(name="(iii) first call (trace + compile + call, imports excluded) against depth, fresh process "
                      f"per system: grad of mean(tanh chain²), width {WIDTH}, batch {BATCH}, float32",
                 rows=rows, extra_columns=["layers", "import", "import + first", "ratio with imports"], key="layers",
                 notes=["median/min/max: 5 steady-state calls after the first; ratio: the system's first call over "
                        "symgraph's at the same depth (> 1: symgraph compiles faster)",
                        "symgraph: sg.compile(sg.grad(loss)) (unrolled); symgraph-roll: roll=True; "
                        "jax: jax.jit(jax.grad); torch.compile: torch.compile(loss) + torch.autograd.grad"])


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--child":
    print(TAG + json.dumps(_child(sys.argv[2], int(sys.argv[3]))), flush=True)
