"""Revolve: Griewank & Walther's binomial checkpointing schedule, and the planner built on it.

`revolve_extra_steps(l, s)` and `revolve_schedule(l, s)` are the algorithm
on a chain of l steps with s snapshots; `_plan_revolve` maps the schedule
onto the chain steps of a joint graph as recomputation contexts.

References:
    Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

from ...errors import SymgraphError
from ...ir import Builder, Node, current_builder, role
from ...ops import OPS
from .analysis import _Analysis
from .plan import Plan, _Context


@functools.cache
def revolve_extra_steps(l: int, s: int) -> int:
    """Griewank & Walther's minimal number of forward step evaluations to reverse l steps with s snapshots.

    t(l, s) = r·l − C(s + r, s + 1), r the smallest integer with l <= C(s + r, s).
    It counts every advance (the first forward sweep included) and no taped
    step evaluation. t(1, s) = 0; with s = 0 and l >= 2 it is infinite.

    Args:
        l: chain length (steps), >= 1.
        s: snapshots (the chain input's slot included), >= 0.

    Returns:
        t(l, s) (int), or a very large int when s = 0 and l >= 2.

    References:
        Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000.
    """
    if l <= 1:
        return 0
    if s <= 0:
        return 1 << 62
    r = 0
    while math.comb(s + r, s) < l:
        r += 1
    return r * l - math.comb(s + r, s + 1)


@functools.cache
def _revolve_split(l: int, s: int) -> int:
    """An optimal first snapshot position m (1 <= m < l) for reversing l steps with s snapshots."""
    best, bm = None, l - 1
    for m in range(l - 1, 0, -1):
        c = m + revolve_extra_steps(l - m, s - 1) + revolve_extra_steps(m, s)
        if best is None or c < best:
            best, bm = c, m
    return bm


def revolve_schedule(l: int, s: int) -> list[tuple]:
    """Griewank & Walther's binomial schedule for reversing a chain of l steps with s snapshots.

    Each action is ("advance", a, m) (evaluate steps a+1..m from state a),
    ("snapshot", m) or ("reverse", b) (taped evaluation and adjoint of step b
    from state b-1), in execution order. The number of advanced steps is
    `revolve_extra_steps(l, s)`.

    Args:
        l: chain length (steps).
        s: snapshots, the chain input's slot included (>= 1).

    Returns:
        list of action tuples.

    Raises:
        SymgraphError: s < 1.

    References:
        Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000.
    """
    if s < 1:
        raise SymgraphError(f"revolve needs at least 1 snapshot, got {s}")
    acts: list[tuple] = []
    stack: list[tuple[int, int, int]] = [(0, l, s)]
    while stack:
        a, b, ss = stack.pop()
        if b - a == 1:
            acts.append(("reverse", b))
            continue
        m = _revolve_split(b - a, ss) + a
        acts.append(("advance", a, m))
        if ss - 1 >= 1 and b - m > 1:
            acts.append(("snapshot", m))
        stack.append((a, m, ss))
        stack.append((m, b, ss - 1))
    return acts


class Revolve:
    """The Revolve strategy object: `apply_checkpoint(g, Revolve(snapshots=s))`.

    Args:
        snapshots: number of snapshots s, the chain input's slot included;
            None picks ceil(sqrt(l)) for a chain of l steps.
    """

    def __init__(self, snapshots: int | None = None):
        if snapshots is not None and int(snapshots) < 1:
            raise SymgraphError(f"Revolve: snapshots must be >= 1, got {snapshots}")
        self.snapshots = None if snapshots is None else int(snapshots)

    def __repr__(self) -> str:
        return f"Revolve(snapshots={self.snapshots})"


def _vjp_reads(n: Node) -> set[Node]:
    """Which of {n} ∪ n.inputs the VJP rule of n's op reads (probed on a placeholder cotangent)."""
    if n.op.vjp is None:
        return set()
    watch = {n, *n.inputs}
    try:
        with Builder(), role("probe"):
            ct = current_builder().make(OPS["input"], (), {"shape": n.shape, "dtype": n.dtype, "index": -1,
                                                            "name": "ct"}, tag=("probe", id(n)))
            mark = ct.id
            res = n.op.vjp(ct, n)
    except Exception:  # noqa: BLE001 - a rule that cannot run on a probe: assume it reads everything
        return set(watch)
    seen: set[int] = set()
    got: set[Node] = set()
    stack = [r for r in res if isinstance(r, Node)]
    while stack:
        x = stack.pop()
        if x in watch:
            got.add(x)
            continue
        if x.id <= mark or id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend(x.inputs)
    return got


def _plan_revolve(a: _Analysis, s: int | None) -> Plan:
    """Griewank & Walther's schedule on the chain steps, as recomputation contexts.

    Model (Revolve's): reversing step k needs its input state (the bound of
    step k-1) and re-evaluates the step ("taped" evaluation: a context
    copying the step's values from that state). The forward sweep is the
    first advance; the last step's tape is the forward's own values.
    """
    steps, bounds = a.steps, a.bounds
    assert steps is not None and bounds is not None
    l = len(steps)
    if s is None:
        s = max(1, math.ceil(math.sqrt(l)))
    s = max(1, int(s))
    ctxs: dict[int, _Context] = {}
    T: dict[int, int | None] = {}  # step index (1-based) -> taped context (None: forward values)
    st: dict[int, tuple[Node, int | None] | None] = {}  # step -> instance of its input state
    saved: set[Node] = set()
    reasons: dict[Node, str] = {}
    cid = itertools.count(1)

    def new_ctx(a_: int, m: int, inst_a: tuple | None) -> int:
        c = next(cid)
        scope = {v for k in range(a_ + 1, m + 1) for v in steps[k - 1]}
        base = {bounds[a_ - 1]: inst_a} if a_ >= 1 and inst_a is not None else {}
        ctxs[c] = _Context(c, base, scope)
        return c

    stack: list[tuple[int, int, tuple | None, int, bool]] = [(0, l, None, s, True)]
    while stack:
        a_, b_, inst_a, ss, orig = stack.pop()
        if b_ - a_ == 1:
            st[b_] = inst_a
            if orig:
                T[b_] = None
                for v in steps[b_ - 1]:
                    saved.add(v)
                    reasons.setdefault(v, "the last step's own values (taped in the forward sweep)")
                if inst_a is not None:
                    reasons[inst_a[0]] = "input state of the last step (revolve)"
            else:
                T[b_] = new_ctx(a_, b_, inst_a)
            continue
        m = _revolve_split(b_ - a_, ss) + a_
        if orig:
            xm = bounds[m - 1]
            inst_m: tuple = (xm, None)
            saved.add(xm)
            reasons[xm] = (f"snapshot of the state after step {m} of {l} (revolve, {s} snapshots)"
                           if ss - 1 >= 1 and b_ - m > 1 else "input state of the last step (revolve)")
        else:
            c = new_ctx(a_, m, inst_a)
            inst_m = (bounds[m - 1], c)
        stack.append((a_, m, inst_a, ss, False))
        stack.append((m, b_, inst_m, ss - 1, orig))
    for v in a.fwd:
        if v not in a.step_of and v not in a.free:
            saved.add(v)
            reasons[v] = "not part of the chain"

    # Reads of a bound by the next step's VJP use that step's input state.
    reads_next: set[Node] = set()
    rd: dict[Node, list[Node]] = {}
    for n in a.fwd:
        for x in n.inputs:
            rd.setdefault(x, []).append(n)
    for k, bnd in enumerate(bounds):
        if bnd not in a.needed:
            continue
        own = bnd in _vjp_reads(bnd)
        nxt = any(bnd in _vjp_reads(r) for r in rd.get(bnd, ()) if a.step_of.get(r) == k + 1)
        if nxt and not own:
            reads_next.add(bnd)
    step_of = a.step_of

    def route(bnode: Node, v: Node) -> Any:
        k = step_of.get(v)
        if k is None:
            return None
        if v in reads_next:
            inst = st.get(k + 2)
            return None if inst is None else inst
        return T.get(k + 1)

    return Plan(f"revolve({s} snapshots, {l} steps)", saved, reasons, ctxs, route)
