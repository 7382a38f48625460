"""The byte-budget planner: the candidate plan with the fewest recomputed FLOPs whose planned peak fits.

Candidates are the plans of the other planners (none, mincut, every segment
count, Revolve with 1..32 snapshots), each rematerialized and scheduled to
measure its planned peak.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from ...errors import SymgraphError
from ...ir import Graph
from ..cost import node_flops as flops
from ..schedule import peak_bytes, regions, schedule
from .analysis import _Analysis
from .mincut import _plan_mincut
from .plan import Plan, _plan_none, _plan_segments
from .remat import rematerialize
from .revolve import _plan_revolve, revolve_extra_steps

#: A byte budget considers Revolve schedules costing at most this many extra forward passes.
MAX_REVOLVE_PASSES = 8


def _recompute_flops(g: Graph) -> tuple[int, int]:
    order = g.toposort()
    cls = regions(order)
    rf = sum(flops(n) for n in order if cls[n] == "R")
    return rf, sum(1 for n in order if cls[n] == "R")


def _candidates(a: _Analysis) -> list[tuple[str, Callable[[], Plan]]]:
    cands: list[tuple[str, Callable[[], Plan]]] = [("none", lambda: _plan_none(a)),
                                                    ("mincut", lambda: _plan_mincut(a))]
    if a.steps is not None:
        n = len(a.steps)
        sizes = sorted({math.ceil(n / k) for k in range(1, n + 1)}, reverse=True)
        for size in sizes:
            k = math.ceil(n / size)
            cands.append((f"segments({k})", functools.partial(_plan_segments, a, k)))
        # Revolve down to the snapshot count whose recomputation stays within
        # MAX_REVOLVE_PASSES extra forward passes.
        svals = [s for s in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32)
                 if s < n and revolve_extra_steps(n, s) <= MAX_REVOLVE_PASSES * n]
        for s in svals:
            cands.append((f"revolve({s})", functools.partial(_plan_revolve, a, s)))
    return cands


def _budget(a: _Analysis, budget: int) -> tuple[Graph, Plan, list[dict]]:
    """The candidate plan with the fewest recomputed FLOPs whose planned peak fits `budget`.

    Candidates: no checkpointing, min-cut, every segment count (chains) and
    Revolve with 1..32 snapshots (chains, at most MAX_REVOLVE_PASSES extra
    forward passes). Plans are tried in increasing recomputed FLOPs (ties:
    fewer nodes), so the first that fits is the answer. Because the candidate
    set does not depend on the budget, the chosen plan's peak never grows
    when the budget shrinks.
    """
    # One pass over the candidates, keeping only the best graph that fits: holding
    # every candidate graph at once cost about twice the compile memory of the answer.
    rows = []
    best = None
    for k, (name, mk) in enumerate(_candidates(a)):
        plan = mk()
        g = rematerialize(a, plan)
        rf, nrec = _recompute_flops(g)
        if best is not None and (rf, nrec, k) > best[0]:
            pk = None  # cannot win; its peak is computed only if nothing fits (for the error message)
        else:
            pk = peak_bytes(schedule(g), g.outputs)
            if pk <= budget:
                best = ((rf, nrec, k), plan, g)
        rows.append(((rf, nrec, k), plan, pk))
        del g
    rows.sort(key=lambda t: t[0])
    results = []
    for key, plan, pk in rows:
        if pk is None:
            break  # sorted after the answer: never tried
        results.append({"plan": plan.name, "peak_bytes": pk, "recomputed_flops": key[0]})
        if best is not None and key == best[0]:
            plan.name = f"budget {budget} bytes: {plan.name}"
            return best[2], plan, results
    lo = min(results, key=lambda r: (r["peak_bytes"], r["recomputed_flops"]))
    raise SymgraphError(
        f"checkpoint budget of {budget} bytes is infeasible: the smallest planned peak of any "
        f"checkpointing plan is {lo['peak_bytes']} bytes ({lo['plan']}); the smallest feasible budget is "
        f"{lo['peak_bytes']} bytes")
