"""The checkpointing pass: `apply_checkpoint(graph, strategy)` strips markers, plans and rematerializes.

It picks the planner a strategy names, runs `remat.rematerialize` on its
plan and records the plan of each result graph in `_INFO` (read by the
reports in `report`).

References:
    Chen et al. 2016 (arXiv:1604.06174); Griewank & Walther 2000 (ACM TOMS
    alg. 799); PyTorch's min-cut rematerialization partitioner.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import SymgraphError
from ...ir import Graph
from ..schedule import regions
from .analysis import _Analysis, _analyze, _strip_markers
from .budget import _budget
from .loops import checkpoint_loops
from .mincut import _plan_mincut
from .plan import _KEPT, Plan, _plan_none, _plan_policy, _plan_segments
from .remat import rematerialize
from .revolve import Revolve, _plan_revolve


@dataclass
class _Info:
    strategy: str
    plan: Plan
    candidates: list[dict] | None = None


_INFO: weakref.WeakKeyDictionary[Graph, _Info] = weakref.WeakKeyDictionary()  # result graph -> its plan (see report)
#: result graph -> the schedules of its checkpointed loops (`loops.checkpoint_loops`; see report)
LOOPS: weakref.WeakKeyDictionary[Graph, list] = weakref.WeakKeyDictionary()


def apply_checkpoint(graph: Graph, strategy: Any = None) -> Graph:
    """Graph -> Graph: rematerialize forward values in the backward region of a joint graph.

    The graph is a joint forward+backward graph, e.g.
    `sg.trace(sg.value_and_grad(loss), params, x)` (backward nodes have role
    "backward"). Markers from `checkpoint` / `checkpoint_name` are read and
    removed first (so this pass should run even when `strategy` is None).

    Args:
        graph: a joint graph (a graph without a backward region is returned
            without markers, otherwise unchanged).
        strategy: None or "none" (save everything; random bits are still
            regenerated); "sqrt" (Chen et al.: about sqrt(l) segments of the
            l chain steps, segment inputs saved), ("sqrt", k) for k segments;
            "revolve", ("revolve", s) or `Revolve(snapshots=s)` (Griewank &
            Walther's binomial schedule); "mincut" (minimum-bytes cut, no
            recomputed contractions); an int byte budget (the plan with the
            fewest recomputed FLOPs whose planned peak fits); or a policy
            predicate node -> bool (save exactly the values it accepts).
            "sqrt" and "revolve" need a chain (values where the forward
            narrows to one live value); on other graphs they fall back to "mincut".
            Under "sqrt" and "revolve" the reverse sweep through a `scan` loop
            (scan, fori_loop, a bounded while_loop) of T >= 2 steps stores
            snapshots of the carry instead of every step's residuals
            (`symgraph.passes.checkpoint.loops`; docs/checkpointing.md, "Loops: checkpointed scans").

    Returns:
        A graph computing the same outputs (bitwise, on the NumPy evaluator):
        `graph` itself when there is nothing to strip or rematerialize.

    Raises:
        SymgraphError: unknown strategy; a byte budget below the smallest
            planned peak of any plan (the message states that smallest budget).

    References:
        Chen et al. 2016 (arXiv:1604.06174); Griewank & Walther 2000 (ACM TOMS
        alg. 799); PyTorch's min-cut rematerialization partitioner.
    """
    if not isinstance(graph, Graph):
        raise SymgraphError(f"apply_checkpoint: expected a Graph (from sg.trace), got {type(graph).__name__}")
    _check_strategy(strategy)
    graph, loops = checkpoint_loops(graph, strategy)
    out = _apply(graph, strategy)
    if loops:
        LOOPS[out] = loops
    return out


def _apply(graph: Graph, strategy: Any) -> Graph:
    if strategy is None or (isinstance(strategy, str) and strategy.lower() == "none"):
        kept = _keep_everything(graph, strategy)
        if kept is not None:
            return kept
    g, marks = _strip_markers(graph)
    a = _analyze(g, marks)
    if not any(c in ("B", "R") for c in a.cls.values()):
        return g
    results = None
    s = strategy
    if isinstance(s, str):
        s = s.lower()
    if s is None or s == "none":
        plan = _plan_none(a)
    elif isinstance(s, (bool, np.bool_)):
        raise SymgraphError(f"checkpoint: unknown strategy {strategy!r}")
    elif isinstance(s, (int, np.integer)):
        if s <= 0:
            raise SymgraphError(f"checkpoint: a byte budget must be positive, got {s}")
        out, plan, results = _budget(a, int(s))
        _INFO[out] = _Info(str(strategy), plan, results)
        return out
    elif s == "sqrt" or (isinstance(s, tuple) and len(s) == 2 and s[0] == "sqrt"):
        k = None if isinstance(s, str) else int(s[1])
        plan = _plan_segments(a, k) if a.steps is not None else _fallback(a, "sqrt")
    elif s == "revolve" or isinstance(s, Revolve) or (isinstance(s, tuple) and len(s) == 2 and s[0] == "revolve"):
        snaps = s.snapshots if isinstance(s, Revolve) else (None if isinstance(s, str) else int(s[1]))
        plan = _plan_revolve(a, snaps) if a.steps is not None else _fallback(a, "revolve")
    elif s == "mincut":
        plan = _plan_mincut(a)
    elif callable(s):
        plan = _plan_policy(a, s)
    else:
        raise SymgraphError(f"checkpoint: unknown strategy {strategy!r}; use None, 'none', 'sqrt', 'revolve', "
                            f"Revolve(snapshots=s), 'mincut', a byte budget (int) or a policy predicate")
    out = rematerialize(a, plan)
    _INFO[out] = _Info(str(strategy), plan, results)
    return out


def carry_checkpoint_info(old: Graph, new: Graph) -> None:
    """Let `checkpoint_stats(new)` report the plan and checkpointed loops of `old` (a later rewrite of it)."""
    if old in _INFO:
        _INFO[new] = _INFO[old]
    if old in LOOPS:
        LOOPS[new] = LOOPS[old]


def _rewritten_by_none(op) -> bool:
    """Whether `apply_checkpoint(graph, None)` may rewrite nodes of `op`: markers are stripped, random
    bits regenerated, copy / stop_gradient looked through by the backward readers."""
    return op.random or (op.identity_of is not None and op.kind == "elementwise")


def _keep_everything(graph: Graph, strategy: Any) -> Graph | None:
    """`apply_checkpoint(graph, None)` for a graph it leaves unchanged, else None.

    Without markers, random bits and copy / stop_gradient nodes the "none" plan
    saves every forward value and `rematerialize` rebuilds nothing, so the
    graph itself is the result (its residual report is recorded as usual);
    this skips the chain analysis.
    """
    order = graph.toposort()
    for n in order:
        if _rewritten_by_none(n.op):
            return None
    cls = regions(order)
    if not any(c in ("B", "R") for c in cls.values()):
        return graph
    fwd = [n for n in order if cls[n] == "F"]
    _INFO[graph] = _Info(str(strategy), Plan("none", set(fwd), dict.fromkeys(fwd, _KEPT), regenerate=set()))
    return graph


def _check_strategy(s: Any) -> None:
    """Reject unknown strategies up front (also on graphs with nothing to checkpoint).

    Raises:
        SymgraphError: naming the strategy and the accepted forms.
    """
    ok = (s is None or callable(s) or isinstance(s, Revolve)
          or (isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)))
          or (isinstance(s, str) and s.lower() in ("none", "sqrt", "revolve", "mincut"))
          or (isinstance(s, tuple) and len(s) == 2 and s[0] in ("sqrt", "revolve")
              and isinstance(s[1], (int, np.integer))))
    if not ok:
        raise SymgraphError(f"checkpoint: unknown strategy {s!r}; use None, 'none', 'sqrt', ('sqrt', k), 'revolve', "
                            f"Revolve(snapshots=s), 'mincut', a byte budget (int) or a policy predicate")


def _fallback(a: _Analysis, what: str) -> Plan:
    p = _plan_mincut(a)
    p.name = f"mincut (no chain structure found for {what!r})"
    return p
