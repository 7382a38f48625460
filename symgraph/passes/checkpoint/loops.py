"""Checkpointed loop reversal: which carries a `scan`'s reverse sweep stores, and the schedule that recomputes the rest.

Reverse mode through a `scan` of T steps (symgraph.regions) stores, by
default, every step's residuals. Under `checkpoint="sqrt"` / `"revolve"` the
loop stores only some carries (*snapshots*) and recomputes the others from
them: the forward loop stores the snapshots of the schedule's first sweep,
and the backward loop runs an *action table* — one action per iteration:

    ADVANCE k    run step k on the current carry (no residuals kept)
    STORE j      copy the current carry into snapshot slot j
    RESTORE j    make snapshot j the current carry
    REVERSE k    the current carry is step k's input: re-run step k and its adjoint

`loop_schedule(T, strategy)` turns Griewank & Walther's binomial schedule
(`revolve_schedule`) or Chen et al.'s sqrt segments into that table
(`LoopSchedule`); the region builds the loops (`symgraph.loop_checkpoint`)
and `checkpoint_loops` rewrites a joint graph's loop reversals with it.

References:
    Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000).
    Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost", arXiv:1604.06174 (2016).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir import Graph, Node, meta, role
from .revolve import Revolve, revolve_extra_steps, revolve_schedule

ADVANCE, STORE, RESTORE, REVERSE = 0, 1, 2, 3

#: loops shorter than this keep every step's residuals (nothing to save)
MIN_CHECKPOINTED_LENGTH = 2


@dataclass
class LoopSchedule:
    """The checkpointed reversal of a loop of `length` steps.

    Attributes:
        name: "revolve(s snapshots)" or "sqrt(k segments)".
        length: T, the loop's steps.
        slots: snapshot slots (carries stored at once, the initial carry's slot included).
        forward_store: per executed forward step k (0-based), the slot that receives the carry after
            step k, or -1; the initial carry goes to slot 0.
        actions: (kind, step, slot) rows of the backward loop, in execution order.
        advances: ADVANCE actions of the backward loop (recomputed steps, the taped ones not included).
    """

    name: str
    length: int
    slots: int
    forward_store: list[int]
    actions: list[tuple[int, int, int]]
    advances: int = 0
    reverses: int = field(default=0)

    def stats(self) -> dict:
        """Counts for reports and tests: stored carries, steps run forward, recomputed and taped steps."""
        return {"schedule": self.name, "length": self.length, "stored_carries": self.slots,
                "actions": len(self.actions), "recomputed_steps": self.advances, "taped_steps": self.reverses}


def _sqrt_actions(T: int, k: int) -> list[tuple]:
    """Chen et al.'s segments in Revolve's action format: k segment starts stored, each segment taped backward."""
    k = max(1, min(k, T))
    b = [round(i * T / k) for i in range(k + 1)]
    acts: list[tuple] = []
    for i in range(1, k):
        acts += [("advance", b[i - 1], b[i]), ("snapshot", b[i])]
    for i in range(k - 1, -1, -1):
        a, e = b[i], b[i + 1]
        if i < k - 1:
            pass  # the segment start is a snapshot already
        for q in range(a + 1, e):
            acts.append(("advance", q - 1, q))
            if q < e - 1:
                acts.append(("snapshot", q))
        for q in range(e, a, -1):
            acts.append(("reverse", q))
    return acts


def _lower(T: int, acts: list[tuple], name: str) -> LoopSchedule:
    """Revolve-format actions (advance a->m, snapshot m, reverse b over states 0..T) to the loops' tables."""
    first = next(i for i, x in enumerate(acts) if x[0] == "reverse")
    slot_of: dict[int, int] = {0: 0}
    free: list[int] = []
    nslots = 1

    def alloc(state: int) -> int:
        nonlocal nslots
        if state in slot_of:
            return slot_of[state]
        if free:
            j = min(free)
            free.remove(j)
        else:
            j, nslots = nslots, nslots + 1
        slot_of[state] = j
        return j

    fwd = [-1] * T
    cur = 0
    for x in acts[:first]:
        if x[0] == "advance":
            assert x[1] == cur, acts[:first]
            cur = x[2]
        else:
            fwd[x[1] - 1] = alloc(x[1])
    assert cur == T - 1, (cur, T)
    if T - 1 > 0:
        fwd[T - 2] = alloc(T - 1)
    rows: list[tuple[int, int, int]] = [(RESTORE, 0, slot_of[T - 1])]
    cur = T - 1
    adv = rev = 0
    for x in acts[first:]:
        if x[0] == "advance":
            a, m = x[1], x[2]
            if cur != a:
                rows.append((RESTORE, 0, slot_of[a]))
            for q in range(a, m):
                rows.append((ADVANCE, q, 0))
            adv += m - a
            cur = m
        elif x[0] == "snapshot":
            rows.append((STORE, 0, alloc(x[1])))
        else:
            q = x[1] - 1
            if cur != q:
                rows.append((RESTORE, 0, slot_of[q]))
                cur = q
            rows.append((REVERSE, q, 0))
            rev += 1
            j = slot_of.pop(q, None)
            if j is not None and q > 0:
                free.append(j)
    return LoopSchedule(name, T, nslots, fwd, rows, adv, rev)


def loop_schedule(T: int, strategy: Any) -> LoopSchedule | None:
    """The checkpointed reversal a strategy gives a loop of T steps, or None (store every step's residuals).

    Args:
        T: the trip count.
        strategy: "sqrt" / ("sqrt", k): k = round(sqrt(T)) (or k) equal segments, their starts stored;
            "revolve" / ("revolve", s) / Revolve(snapshots=s): Griewank & Walther's binomial schedule with
            s snapshots (default ceil(sqrt(T))), the initial carry's slot included; anything else: None.

    Returns:
        A LoopSchedule, or None.
    """
    if T < MIN_CHECKPOINTED_LENGTH:
        return None
    s = strategy.lower() if isinstance(strategy, str) else strategy
    if s == "sqrt" or (isinstance(s, tuple) and s[:1] == ("sqrt",)):
        k = max(1, round(math.sqrt(T))) if isinstance(s, str) else int(s[1])
        k = max(1, min(k, T))
        return _lower(T, _sqrt_actions(T, k), f"sqrt({k} segments)")
    if s == "revolve" or isinstance(s, Revolve) or (isinstance(s, tuple) and s[:1] == ("revolve",)):
        snaps = s.snapshots if isinstance(s, Revolve) else (None if isinstance(s, str) else int(s[1]))
        snaps = max(1, math.ceil(math.sqrt(T))) if snaps is None else max(1, int(snaps))
        return _lower(T, revolve_schedule(T, snaps), f"revolve({snaps} snapshots)")
    return None


def expected_revolve_advances(T: int, s: int) -> int:
    """Recomputed steps of the backward loop under ("revolve", s): t(T, s) minus the first sweep's T - 1 steps."""
    return revolve_extra_steps(T, s) - (T - 1)


def checkpoint_loops(graph: Graph, strategy: Any) -> tuple[Graph, list[dict]]:
    """Rewrite every checkpointable loop reversal of a joint graph under `strategy`.

    A loop reversal is a group of backward `scan` nodes (same inputs and region) whose region
    offers `checkpointed_reverse` (built by reverse mode through `sg.scan` / `sg.fori_loop` /
    a bounded `sg.while_loop`) and whose residuals only that group reads. Each is replaced by a
    forward loop that stores the schedule's snapshots and a backward loop over its action table.

    Returns:
        (graph, one stats dict per rewritten loop); the graph itself when nothing changed.
    """
    if not isinstance(strategy, (str, tuple, Revolve)):
        return graph, []
    order = graph.toposort()
    readers: dict[Node, list[Node]] = {}
    for n in order:
        for x in n.inputs:
            readers.setdefault(x, []).append(n)
    groups: dict[tuple, list[Node]] = {}
    for n in order:
        r = n.attrs and n.op.extra.get("region") == "scan" and n.attr("region")
        if r and getattr(r, "reversal", None) is not None:
            groups.setdefault((n.inputs, r), []).append(n)
    subst: dict[Node, Node] = {}
    infos: list[dict] = []
    for (ins, r), nodes in groups.items():
        sch = loop_schedule(r.length, strategy)
        if sch is None:
            continue
        members = set(nodes)
        saved = [x for x in ins if x.op.name == "scan" and x.attr("region") is r.reversal[1]]
        if any(rd not in members for x in saved for rd in readers.get(x, ())):
            continue  # residuals read elsewhere (a derivative of the backward loop): keep them
        m = meta(nodes[0])
        with role(m.role, m.origin):
            new = r.checkpointed_reverse(nodes, sch)
        if new is None:
            continue
        subst.update(new)
        infos.append(sch.stats())
    if not subst:
        return graph, []
    return _substitute(graph, order, subst), infos


def _substitute(graph: Graph, order: list[Node], subst: dict[Node, Node]) -> Graph:
    from ...ir import current_builder

    b = current_builder()
    out: dict[Node, Node] = dict(subst)
    for n in order:
        if n in out:
            continue
        ins = tuple(out.get(x, x) for x in n.inputs)
        if any(a is not x for a, x in zip(ins, n.inputs)):
            out[n] = b.remake(n, ins, meta(n))
    return graph.replace(outputs=[out.get(o, o) for o in graph.outputs])


def as_index_array(values: list[int]) -> np.ndarray:
    """An int64 array of `values` (an action table column)."""
    return np.asarray(values, dtype=np.int64)
