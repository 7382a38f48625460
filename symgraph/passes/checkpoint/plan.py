"""What a checkpointing strategy chooses (`Plan`), and the planners "none", policy and "sqrt".

A planner reads an `analysis._Analysis` and returns a `Plan`: the saved
forward values with a reason each (and, for Revolve, recomputation
contexts); `remat.rematerialize` then applies it. "sqrt" is Chen et al.'s
segmentation of the chain, byte-aware (`_segment_starts`).

References:
    Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost",
    arXiv:1604.06174 (2016); github.com/dmlc/mxnet-memonger.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...ir import Node
from .analysis import _Analysis


@dataclass
class _Context:
    """A recomputation context: forward values it may copy, and values it starts from."""

    id: int
    base: dict[Node, tuple[Node, int | None]] = field(default_factory=dict)
    scope: set[Node] | None = None  # None: every forward value (the default context)


@dataclass
class Plan:
    """What a strategy chose: the saved forward values and, for nested schedules, the contexts.

    Attributes:
        name: strategy description (e.g. "sqrt(8 segments)").
        saved: forward values the backward sweep may read from the forward
            sweep (residuals are the ones it actually reads).
        reasons: why each saved value is saved.
        contexts: extra recomputation contexts (Revolve); the default
            context 0 recomputes any unsaved value from saved ones.
        route: (backward node, forward value) -> context id (None: the
            forward sweep if saved, else the default context) or an instance
            (node, context); None routes everything to the default.
        regenerate: the free values regenerated wherever they are read
            (None: all free values; "none" regenerates only random bits).
    """

    name: str
    saved: set[Node]
    reasons: dict[Node, str] = field(default_factory=dict)
    contexts: dict[int, _Context] = field(default_factory=dict)
    route: Callable[[Node, Node], Any] | None = None
    regenerate: set[Node] | None = None


# --------------------------------------------------------------------------- planners: none, policy, sqrt


def _bytes(n: Node) -> int:
    return n.nbytes


_KEPT = "no checkpointing: every forward value is kept"


def _plan_none(a: _Analysis) -> Plan:
    saved = {v for v in a.fwd if v not in a.marks.must_recompute}
    reasons = {v: a.marks.region_saveable.get(v, _KEPT) for v in saved}
    return Plan("none", saved, reasons, regenerate=a.free_random)


def _plan_policy(a: _Analysis, policy: Callable[[Node], bool]) -> Plan:
    saved, reasons = set(), {}
    for v in a.fwd:
        if v in a.marks.must_recompute:
            continue
        if policy(v):
            saved.add(v)
            reasons[v] = f"saveable under policy {policy!r}"
    return Plan(f"policy {policy!r}", saved, reasons)


def _plan_segments(a: _Analysis, k: int | None = None) -> Plan:
    """Chen et al.: segments of consecutive steps; keep segment inputs and the last segment.

    With k given: k segments of equal step counts (the paper's sqrt(l)
    scheme for equal steps). With k None: the byte-aware plan of
    `_segment_starts` (the paper's memory planning with a budget), which is the
    same plan on a chain of equal steps.
    """
    steps = a.steps
    assert steps is not None and a.bounds is not None
    n = len(steps)
    if k is None:
        starts, why = _segment_starts(a)
    else:
        k = max(1, min(int(k), n))
        size = math.ceil(n / k)
        starts, why = list(range(0, n, size)), ""
    k = len(starts)
    ends = starts[1:] + [n]
    saved: set[Node] = set()
    reasons: dict[Node, str] = {}
    for j, (s, e) in enumerate(zip(starts[1:], ends[1:]), 1):
        bnd = a.bounds[s - 1]
        saved.add(bnd)
        reasons[bnd] = f"input of segment {j + 1} of {k} (steps {s + 1}..{e} of {n}){why}"
    for st in steps[starts[-1]:]:
        for v in st:
            if v not in saved:
                saved.add(v)
                reasons[v] = f"in the last segment ({k} of {k}): kept from the forward sweep"
    outside = [v for v in a.fwd if v not in a.step_of and v not in a.free]
    for v in outside:
        saved.add(v)
        reasons[v] = "not part of the chain"
    return Plan(f"segments({k})", saved, reasons)


#: `_segment_starts` tries at most this many segment byte caps (evenly spread over the candidates;
#: fewer on chains longer than 1000 steps, so that the search stays O(4e6) steps).
MAX_SEGMENT_CAPS = 4096


def _segment_starts(a: _Analysis) -> tuple[list[int], str]:
    """Byte-aware segmentation of the chain for "sqrt" (Chen et al.'s memory planning with a budget).

    Model: while the backward sweep reverses a segment, it holds the saved
    segment inputs plus that segment's residuals (recomputed, or for the
    last segment kept from the forward). With r_k the bytes of step k's
    values that the backward reads and b_k the bytes of step k's last value
    (the next segment's input), a segmentation costs

        x + y = sum of b over the saved segment inputs + max over segments of sum of r

    Like the paper's memory planning with a budget B (its Algorithm 3) and
    the search over B in the authors' mxnet-memonger (`search_plan`), but
    exhaustively, every candidate cap y (a sum of r over consecutive steps)
    is tried: steps are packed greedily into segments of at most y bytes,
    and the segmentation with the smallest x + y wins. The paper's rule for
    l equal steps, round(sqrt(l)) segments of equal step counts, is a
    candidate too and wins ties (then fewer segments). On a chain of equal
    steps whose saved input is as large as its residuals that rule is
    optimal in this model, so such chains keep their sqrt(l) plan; on a
    transformer, whose residual-stream input (B·T·d) is far smaller than a
    sub-block's residuals, the search checkpoints every sub-block.

    Returns:
        (the first step of each segment, ascending and starting at 0; a note for the reasons).

    References:
        Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory
        Cost", arXiv:1604.06174 (2016); github.com/dmlc/mxnet-memonger.
    """
    steps, bounds = a.steps, a.bounds
    assert steps is not None and bounds is not None
    n = len(steps)
    r = [sum(v.nbytes for v in st if v in a.needed) for st in steps]
    b = [bounds[i].nbytes for i in range(n - 1)]
    pre = list(itertools.accumulate(r, initial=0))
    if n * (n + 1) // 2 <= 200_000:
        lengths: list[int] | range = range(1, n + 1)
    else:  # long chains: window lengths spread geometrically over 1..n
        lengths = sorted({max(1, round(n ** (j / 64))) for j in range(65)})
    caps = {pre[i + ln] - pre[i] for ln in lengths for i in range(n - ln + 1)}
    caps.add(max(r))
    cand = sorted(c for c in caps if c >= max(r))
    most = max(64, min(MAX_SEGMENT_CAPS, 4_000_000 // n))  # each cap costs O(n)
    if len(cand) > most:
        stride = len(cand) / most
        cand = sorted({cand[int(i * stride)] for i in range(most)} | {cand[-1]})

    def cost(starts: list[int]) -> tuple[int, int]:
        ends = starts[1:] + [n]
        return sum(b[s - 1] for s in starts[1:]), max(sum(r[s:e]) for s, e in zip(starts, ends))

    # The paper's split of l equal steps, round(sqrt(l)) segments of equal step counts, wins ties.
    size = math.ceil(n / max(1, round(math.sqrt(n))))
    equal = list(range(0, n, size))
    x, y = cost(equal)
    best: tuple = ((x + y, 0, len(equal)), equal, x, y)
    for cap in cand:
        starts = [0]
        t = 0
        for k in range(n):
            if t + r[k] > cap and k > starts[-1]:
                starts.append(k)
                t = 0
            t += r[k]
        x, y = cost(starts)
        key = (x + y, 1, len(starts))
        if key < best[0]:
            best = (key, starts, x, y)
    _, starts, x, y = best
    return starts, f"; byte-aware sqrt plan: {x} bytes of segment inputs + at most {y} bytes of residuals per segment"
