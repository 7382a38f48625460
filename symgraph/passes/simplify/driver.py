"""The fixed-point driver of `simplify`: the stage pipeline, run until a round changes nothing.

`simplify(graph, ...)` runs `PIPELINE` (the rewrite stage, then the polynomial
stage) in a fresh `_Run`, skips a stage that already left exactly the current
graph unchanged, dumps every stage (`on_stage`, `symgraph.viz.dump_stage`)
and fills the caller's stats.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ... import viz
from ...errors import SymgraphError
from ...ir import Builder, Graph, collector_paused, current_role, role, source_location
from .context import _NOLOC, _local, _PassBuilder, _Run
from .options import FOLD_LIMIT, MAX_ITERATIONS, SimplifyOptions
from .polynomial import polynomial_pass
from .rewrite import rewrite_pass

PIPELINE: list[tuple[str, Callable[[Graph, _Run], Graph]]] = [
    ("rewrite", rewrite_pass),  # CSE, copy removal, folding, RULES; rebuild from outputs = DCE
    ("polynomial", polynomial_pass),  # canonical sums of monomials in Horner form
]


def _dump(stage: str, graph: Graph, on_stage: Callable | None) -> None:
    if on_stage is not None:
        on_stage(stage, graph)
    fn = getattr(viz, "dump_stage", None)
    if fn is not None:
        fn(stage, graph)


def simplify(graph: Graph, *, reassociate: bool = True, assume_finite: bool = False,
             fold_limit: int = FOLD_LIMIT, builder: Builder | None = None,
             max_iterations: int = MAX_ITERATIONS, on_stage: Callable[[str, Graph], None] | None = None,
             stats: dict | None = None) -> Graph:
    """Graph -> Graph: CSE, constant folding, algebraic rewrites, polynomial canonicalization, DCE.

    Runs `PIPELINE` (the rewrite pass, then the polynomial pass) until a round
    changes nothing. The result computes the same values as `graph`: bit for
    bit with `reassociate=False`; up to rounding otherwise (see the module
    docstring for what each switch allows). Nodes keep the role and source
    location of the node they replace. Inputs are kept (same nodes, same order).

    Args:
        graph: any graph.
        reassociate: allow rewrites that change rounding only (default True).
        assume_finite: assume no NaN/inf and ignore the sign of zero (default False).
        fold_limit: largest folded constant, in elements.
        builder: build the result in this builder (default: a fresh one), e.g.
            to compare it by identity with nodes built there.
        max_iterations: bound on pipeline rounds.
        on_stage: called as on_stage(stage_name, graph) after each stage of
            each round (stage names "simplify.<round>.<stage>"); stages are
            also passed to `symgraph.viz.dump_stage` (SYMGRAPH_DUMP).
        stats: if given, filled with rule firing counts, "rounds", "seconds",
            "nodes_in", "nodes_out".

    Returns:
        A new Graph with the same inputs, in_tree, out_tree and name.

    References:
        Rules after PyTensor's canonicalize/specialize (single-client rule),
        fixed-point rewriting after tinygrad's graph_rewrite; Horner's scheme.
    """
    if not isinstance(graph, Graph):
        raise SymgraphError(f"simplify: expected a Graph (from sg.trace), got {type(graph).__name__}")
    t0 = time.perf_counter()
    opts = SimplifyOptions(reassociate=reassociate, assume_finite=assume_finite, fold_limit=fold_limit)
    pb = _PassBuilder(builder)
    run = _Run(opts, pb)
    prev = getattr(_local, "run", None)
    _local.run = run
    rounds = 0
    with collector_paused():  # the pass allocates many small acyclic objects; collections would rescan the graph
        try:
            with pb, source_location(_NOLOC), role(current_role()):  # both restored on exit
                g = graph
                for it in range(max_iterations):
                    rounds += 1
                    run.changes = 0
                    for name, fn in PIPELINE:
                        key = tuple(g.outputs)
                        last = run.settled.get(name)
                        if last is not None and len(last) == len(key) and all(a is b for a, b in zip(last, key)):
                            continue  # this stage already left exactly this graph unchanged
                        before = run.changes
                        g = fn(g, run)
                        if run.changes == before:
                            run.settled[name] = tuple(g.outputs)
                        _dump(f"simplify.{it}.{name}", g, on_stage)
                    if run.changes == 0:
                        break
            if g is graph:  # nothing changed: still a new Graph (same inputs, outputs and trees)
                g = Graph(graph.inputs, graph.outputs, graph.in_tree, graph.out_tree, name=graph.name)
            if stats is not None:
                stats.update(run.stats)
                stats["rounds"] = rounds
                stats["seconds"] = time.perf_counter() - t0
                stats["nodes_in"] = len(graph)
                stats["nodes_out"] = len(g)
        finally:
            _local.run = prev
            # Drop the intermediate nodes (builder table, rounds' state) while the collector is still
            # off: only the result survives, so the collection that follows scans that alone.
            run = pb = None  # type: ignore[assignment]
    return g
