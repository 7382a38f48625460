"""Scale: nodes per second of every stage on 100,000-node graphs.

``python -m bench.scale [--nodes 100000] [--compile-budget 60] [--json PATH]``;
``python -m bench.scale --pipeline SHAPE --nodes N`` times `sg.compile`'s stages (LLVM included)
on the value and gradient of `mixed_chain` (N nodes, no two steps alike) and prints JSON.

Two graph families, each with `--nodes` forward nodes:

- ``chain``: ``y = sin(y)`` repeated (depth = nodes): the deepest possible
  graph; every walk must be iterative;
- ``wide``: a sum of independent ``tanh(x * c_k + d_k)`` terms reading one
  argument (fan-out = nodes / 4).

Stages, timed separately (seconds, and input nodes per second):
trace (`sg.trace`), differentiate (`symgraph.autodiff.vjp_pass` on the traced
graph: a value-and-gradient graph), simplify (`sg.simplify` of that graph),
checkpoint (`apply_checkpoint` with "sqrt", "revolve" and "mincut"), evaluate
(the NumPy evaluator), codegen-python (fusion, buffer planning and LLVM IR
emission in Python) and compile (`codegen.compile_graph`, LLVM included).
LLVM's own optimization time grows faster than linearly with the size of a
fused kernel, so the compile stage runs on graphs of doubling size (from 500
nodes) until one takes longer than `--compile-budget` seconds, and reports
the largest size compiled. Peak resident memory (MB) is reported after each
stage.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from typing import Any, Callable

import numpy as np

__all__ = ["chain", "wide", "mixed_chain", "run_stages", "pipeline_stages", "compile_sizes", "main"]


def chain(n: int) -> Callable:
    """A function whose traced graph is a chain of n sin nodes (plus the input)."""

    def f(x):
        y = x
        for _ in range(n):
            y = np.sin(y)
        return y

    f.__name__ = f"chain{n}"
    return f


def wide(n: int) -> Callable:
    """A function with about n nodes: a sum of n/4 independent tanh(x * c + d) terms."""
    k = max(1, n // 4)
    cs = np.linspace(0.5, 1.5, k)

    def f(x):
        total = 0.0
        for c in cs:
            total = total + np.tanh(x * float(c) + float(c) * 0.1)
        return total

    f.__name__ = f"wide{n}"
    return f


def mixed_chain(n: int) -> Callable:
    """A scalar-to-scalar function whose traced graph has about n nodes and no two steps alike.

    Step i of ``n * 12500 // 70836`` steps (5.67 nodes each, constants included) is one of
    ``sin(x)*c + x*(1-c)``, the same with cos and tanh, ``exp(x*0.01c)*0.1 + x*(0.9-0.1c)``, a
    product and a product plus a constant, by ``i % 6``, with ``c`` from the golden-ratio sequence:
    simplification and common-subexpression elimination cannot shrink it, nor could loop rolling.
    The result is summed, so ``value_and_grad`` applies to any argument shape.
    """
    steps = max(6, n * 12500 // 70836)

    def f(x):
        for i in range(steps):
            c = 0.3 + 0.4 * ((i * 0.6180339887498949) % 1.0)
            k = i % 6
            if k == 0:
                x = np.sin(x) * c + x * (1 - c)
            elif k == 1:
                x = np.cos(x) * c + x * (1 - c)
            elif k == 2:
                x = np.tanh(x) * c + x * (1 - c)
            elif k == 3:
                x = np.exp(x * (0.01 * c)) * 0.1 + x * (0.9 - 0.1 * c)
            elif k == 4:
                x = x * c + (1 - c) * 0.25 * x
            else:
                x = x * (0.9 + 0.1 * c) + 0.001 * c
        return np.sum(x)

    f.__name__ = f"mixed{n}"
    return f


def pipeline_stages(f: Callable, x: Any) -> dict:
    """Time `sg.compile`'s stages one by one on ``value_and_grad(f)`` at x (LLVM included).

    Returns:
        seconds per stage (trace: tracing ``value_and_grad(f)``, which differentiates; simplify;
        checkpoint: `apply_checkpoint(g, None)`, as `sg.compile` runs it; schedule; partition:
        `codegen.kernels.partition.partition`; ir: buffer planning, `codegen.llvm.module.build_module` and the module
        text; llvm: `codegen.jit.compile_ir`), "total", node counts, "kernels", "rss_mb" (peak
        of the process) and "value" (the compiled program's outputs at x).
    """
    import codegen
    import symgraph as sg
    from codegen import cpu as runtime
    from codegen import jit
    from codegen.kernels.buffers import plan_buffers
    from codegen.kernels.expr import release_session
    from codegen.kernels.partition import partition
    from codegen.llvm.context import vmath_module
    from codegen.llvm.module import build_module, module_text
    from symgraph.passes.checkpoint import apply_checkpoint
    from symgraph.passes.schedule import schedule

    out: dict = {}
    cpu: dict = {}  # process CPU seconds per stage
    g, out["trace"] = _timed(lambda: sg.trace(sg.value_and_grad(f), x))
    cpu["trace"] = round(_last_cpu[0], 3)
    out["nodes_traced"] = len(g)
    s, out["simplify"] = _timed(lambda: sg.simplify(g))
    cpu["simplify"] = round(_last_cpu[0], 3)
    del g
    out["nodes_simplified"] = len(s)
    c, out["checkpoint"] = _timed(lambda: apply_checkpoint(s, None))
    cpu["checkpoint"] = round(_last_cpu[0], 3)
    del s
    order, out["schedule"] = _timed(lambda: schedule(c))
    cpu["schedule"] = round(_last_cpu[0], 3)
    blas, vm = runtime.blas_library(), vmath_module()
    gc.collect()
    gc.disable()  # as `codegen.compile_graph` does for partition and IR
    prog, out["partition"] = _timed(lambda: partition(c, order, donate=frozenset(), blas=blas is not None))
    cpu["partition"] = round(_last_cpu[0], 3)
    out["kernels"] = len(prog.kernels)
    light = all(k.size <= codegen.LIGHT_PIPELINE_MAX_ELEMENTS for k in prog.kernels if k.kind == "loop")

    def ir() -> tuple:
        bp = plan_buffers(prog)
        mod, info = build_module(prog, bp, blas, name=f.__name__, abi=runtime.call_abi(), light=light)
        text = module_text(mod, info["prefer_512"])
        release_session()
        return bp, (jit.LIGHT_PIPELINE_MARK if light else "") + text

    (bp, text), out["ir"] = _timed(ir)
    cpu["ir"] = round(_last_cpu[0], 3)
    gc.enable()
    if vm is not None and hasattr(vm, "runtime_init"):
        vm.runtime_init()
    jitted, out["llvm"] = _timed(lambda: jit.compile_ir(text, key_extra="bench.scale"))
    cpu["llvm"] = round(_last_cpu[0], 3)
    out["total"] = round(sum(out[k] for k in ("trace", "simplify", "checkpoint", "schedule", "partition", "ir",
                                              "llvm")), 3)
    for k in ("trace", "simplify", "checkpoint", "schedule", "partition", "ir", "llvm"):
        out[k] = round(out[k], 3)
    exe = runtime.Executable(c, jitted, [(v.shape, v.dtype) for v in c.inputs], bp.out_buffers, bp.out_plan,
                             bp.arena_bytes, bp.consts, prog.donated, {}, abi=runtime.call_abi())
    out["value"] = [np.asarray(v) for v in exe.run([np.asarray(x, dtype=np.float64)])]
    out["rss_mb"] = round(_rss_mb())
    out["cpu"] = cpu
    return out


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


#: process CPU seconds of the last `_timed` call (on a shared machine wall-clock seconds include waiting)
_last_cpu = [0.0]


def _timed(fn: Callable) -> tuple[Any, float]:
    if gc.isenabled():
        gc.collect()
    t = time.perf_counter()
    c = time.process_time()
    out = fn()
    _last_cpu[0] = time.process_time() - c
    return out, time.perf_counter() - t


def run_stages(f: Callable, x: np.ndarray, checkpoints: tuple = ("sqrt", "revolve", "mincut"),
               codegen_python: bool = True, keep: dict | None = None) -> list[dict]:
    """Run every stage but LLVM on f at x.

    Args:
        keep: if given, filled with the graphs: "traced", "gradient", "simplified".

    Returns:
        one row per stage: stage, nodes_in, nodes_out, seconds, nodes_per_second, rss_mb.
    """
    import symgraph as sg
    from symgraph import lax as L
    from symgraph.autodiff import vjp_pass
    from symgraph.ir import Builder, Graph
    from symgraph.passes.checkpoint import apply_checkpoint

    rows = []

    def row(stage: str, nin: int, nout: int, sec: float) -> None:
        rows.append({"stage": stage, "nodes_in": nin, "nodes_out": nout, "seconds": round(sec, 3),
                     "nodes_per_second": round(nin / sec) if sec > 0 else None, "rss_mb": round(_rss_mb())})

    g, t = _timed(lambda: sg.trace(f, x))
    row("trace", len(g), len(g), t)

    def differentiate() -> Graph:
        with Builder():
            loss = L.reduce("sum", g.outputs[0])
        j = Graph(g.inputs, [loss], None, None, name=g.name)
        return vjp_pass(j)

    d, t = _timed(differentiate)
    row("differentiate", len(g), len(d), t)
    s, t = _timed(lambda: sg.simplify(d))
    row("simplify", len(d), len(s), t)
    for strat in checkpoints:
        c, t = _timed(lambda: apply_checkpoint(s, strat))
        row(f"checkpoint[{strat}]", len(s), len(c), t)
        del c
    _, t = _timed(lambda: s.evaluate(x))
    row("evaluate", len(s), len(s), t)
    if keep is not None:
        keep.update(traced=g, gradient=d, simplified=s)
    if codegen_python:
        from codegen.cpu import blas_library
        from codegen.kernels.buffers import plan_buffers
        from codegen.kernels.partition import partition
        from codegen.llvm.module import build_module, module_text
        from symgraph.passes.schedule import schedule

        def lower() -> int:
            order = schedule(s)
            prog = partition(s, order, donate=frozenset(), blas=blas_library() is not None)
            bp = plan_buffers(prog)
            mod, info = build_module(prog, bp, blas_library(), name="scale", nthreads=1)
            return len(module_text(mod, info["prefer_512"]))

        nbytes, t = _timed(lower)
        row("codegen-python", len(s), nbytes, t)
    return rows


def compile_sizes(make: Callable[[int], Callable], x: np.ndarray, budget: float, start: int = 500,
                  limit: int = 100_000) -> list[dict]:
    """Compile (LLVM) value-and-gradient graphs of doubling size until one exceeds `budget` seconds."""
    import codegen
    import symgraph as sg

    rows = []
    n = start
    while n <= limit:
        f = make(n)
        s = sg.simplify(sg.trace(sg.value_and_grad(lambda x: np.sum(f(x))), x))
        exe, t = _timed(lambda: codegen.compile_graph(s))
        rows.append({"stage": "compile", "forward_nodes": n, "nodes_in": len(s), "seconds": round(t, 2),
                     "nodes_per_second": round(len(s) / t), "kernels": exe.stats.get("kernels"),
                     "llvm_seconds": round(exe.stats.get("llvm_seconds", float("nan")), 2), "rss_mb": round(_rss_mb())})
        print(f"  compile {n:>7} forward nodes ({len(s)} nodes): {t:.2f} s", flush=True)
        del exe
        if t > budget:
            break
        n *= 2
    return rows


def _table(rows: list[dict]) -> str:
    out = [f"{'stage':<22}{'nodes in':>10}{'nodes out':>11}{'seconds':>10}{'nodes/s':>11}{'RSS MB':>8}"]
    for r in rows:
        out.append(f"{r['stage']:<22}{r['nodes_in']:>10}{r.get('nodes_out', ''):>11}{r['seconds']:>10}"
                   f"{r['nodes_per_second'] or '':>11}{r['rss_mb']:>8}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the scale benchmark and print one table per graph family."""
    ap = argparse.ArgumentParser(description="nodes/second per stage on large graphs")
    ap.add_argument("--nodes", type=int, default=100_000, help="forward nodes per graph (default 100000)")
    ap.add_argument("--compile-budget", type=float, default=60.0, help="seconds; stop doubling the compile size")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--pipeline", default=None, metavar="SHAPE",
                    help="only time sg.compile's stages on value_and_grad(mixed_chain(nodes)) at an argument "
                         "of this shape ('' or 'scalar': a float64 scalar; '4': float64[4]); prints JSON")
    ns = ap.parse_args(argv)
    sys.setrecursionlimit(1000)  # nothing may recurse on graph depth
    if ns.pipeline is not None:
        dims = tuple(int(d) for d in ns.pipeline.split(",") if d.strip() and d != "scalar")
        x = np.linspace(0.1, 0.9, int(np.prod(dims))).reshape(dims) if dims else np.float64(0.5)
        res = pipeline_stages(mixed_chain(ns.nodes), x)
        res["value"] = [v.tolist() for v in res["value"]]
        res["forward_nodes"] = ns.nodes
        print(json.dumps(res), flush=True)
        if ns.json:
            with open(ns.json, "w") as fh:
                json.dump(res, fh, indent=1)
        return 0
    x = np.linspace(-1.0, 1.0, 16)
    report: dict = {"nodes": ns.nodes}
    for name, make in (("chain", chain), ("wide", wide)):
        print(f"== {name}, {ns.nodes} forward nodes, argument float64[16]", flush=True)
        rows = run_stages(make(ns.nodes), x)
        print(_table(rows), flush=True)
        report[name] = rows
    if not ns.no_compile:
        print(f"== compile (LLVM), chain value_and_grad graphs of doubling size, budget {ns.compile_budget} s",
              flush=True)
        report["compile"] = compile_sizes(chain, x, ns.compile_budget, limit=ns.nodes)
        report["largest_compiled"] = max((r["nodes_in"] for r in report["compile"]
                                          if r["seconds"] <= ns.compile_budget), default=0)
        print(f"largest graph compiled within {ns.compile_budget} s: {report['largest_compiled']} nodes", flush=True)
    if ns.json:
        with open(ns.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
