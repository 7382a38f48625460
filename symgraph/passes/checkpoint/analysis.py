"""Checkpointing (rematerialization): choose which forward values the backward sweep keeps.

Reverse mode keeps every forward value its backward sweep reads (the
residuals). This pass trades memory for recomputation on a joint
forward+backward graph. Each strategy only *chooses the saved set* (plus, for
the nested Revolve schedule, which recomputed copy serves which backward
step); one shared rewrite (`rematerialize`) then duplicates the unsaved
forward values into the backward region as recomputed nodes, tagged
("remat", k) so CSE never merges them back, with role "recomputed". The
memory-aware `schedule` places each recomputed value right before its first
backward reader, which is what lowers the planned peak.

Strategies (`apply_checkpoint(graph, strategy)`): None/"none", "sqrt",
"revolve" (or `Revolve(snapshots=s)`, ("revolve", s)), "mincut", a byte
budget (int), or a policy predicate. User regions: `checkpoint(fn, policy)`
with JAX-style policies and `checkpoint_name`.

References:
    Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost",
    arXiv:1604.06174 (2016).
    Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000).
    PyTorch AOTAutograd min-cut rematerialization partitioner
    (torch/_functorch/partitioners.py), design post dev-discuss #467.
    JAX `jax.checkpoint` policies (docs.jax.dev, gradient-checkpointing).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import lax as L
from ...autodiff import fresh, is_float, vjp_nodes
from ...errors import SymgraphError
from ...ir import Builder, Graph, Node, current_builder, meta, role, source_location
from ...ops import OPS
from ...ops import remat as _remat_ops  # noqa: F401  (registers the marker ops)
from ...ops.linalg import parse_einsum
from ...tracing import trace  # saved_residuals traces the joint graph of a function
from ...tree import tree_flatten, tree_paths, tree_unflatten
from ..cost import node_flops as flops
from ..schedule import forward_order, free_values, peak_bytes, regions, schedule, static_values
from ..simplify import simplify

__all__ = [
    "Plan",
    "Revolve",
    "apply_checkpoint",
    "checkpoint",
    "checkpoint_name",
    "checkpoint_stats",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "everything_saveable",
    "flops",
    "names_of",
    "nothing_saveable",
    "print_saved_residuals",
    "rematerialize",
    "revolve_extra_steps",
    "revolve_schedule",
    "save_any_names_but_these",
    "save_from_both_policies",
    "save_only_these_names",
    "saved_residuals",
]

#: A byte budget considers Revolve schedules costing at most this many extra forward passes.
MAX_REVOLVE_PASSES = 8
_ctx_ids = itertools.count(1)
_region_ids = itertools.count(1)


# --------------------------------------------------------------------------- policies


class _Policy:
    """A saveability predicate: policy(node) -> True if the value may be saved."""

    def __init__(self, name: str, fn: Callable[[Node], bool], args: tuple = ()):
        self._name, self._fn, self._args = name, fn, args

    def __call__(self, node: Node) -> bool:
        return bool(self._fn(node))

    def __repr__(self) -> str:
        a = ", ".join(repr(x) for x in self._args)
        return f"{self._name}({a})" if self._args else self._name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Policy) and (self._name, self._args) == (other._name, other._args)

    def __hash__(self) -> int:
        return hash((self._name, self._args))


_NAMES: dict[int, tuple] = {}  # id(node) -> (weakref, frozenset of names); filled by apply_checkpoint


def names_of(node: Node) -> frozenset:
    """The `checkpoint_name` names attached to a value (inside policy predicates).

    Returns:
        frozenset of str (empty when the value was not named).
    """
    e = _NAMES.get(id(node))
    return e[1] if e is not None and e[0]() is node else frozenset()


def _set_names(node: Node, names: frozenset) -> None:
    k = id(node)
    _NAMES[k] = (weakref.ref(node, lambda _r, k=k: _NAMES.pop(k, None)), names)


def _is_dot(n: Node) -> bool:
    return n.op.kind == "contraction"


def _dot_no_batch(n: Node) -> bool:
    if n.op.name == "matmul":
        return n.ndim == 2
    if n.op.name == "einsum":
        ins, out = parse_einsum(n.attr("spec"), len(n.inputs))
        shared = set(out).intersection(*[set(s) for s in ins]) if ins else set()
        return not shared
    return False


#: Save every value (JAX's default outside checkpoint regions).
everything_saveable = _Policy("everything_saveable", lambda n: True)
#: Save nothing: recompute everything from the region's inputs (default inside `checkpoint`).
nothing_saveable = _Policy("nothing_saveable", lambda n: False)
#: Save contractions (matmul, einsum); recompute pointwise work.
dots_saveable = _Policy("dots_saveable", _is_dot)
#: Save contractions without batch dimensions (2-D matmul, einsum with no index shared by all).
dots_with_no_batch_dims_saveable = _Policy("dots_with_no_batch_dims_saveable", _dot_no_batch)


def save_only_these_names(*names: str) -> _Policy:
    """Policy: save only values tagged by `checkpoint_name` with one of `names`."""
    s = frozenset(names)
    return _Policy("save_only_these_names", lambda n: bool(names_of(n) & s), tuple(sorted(s)))


def save_any_names_but_these(*names: str) -> _Policy:
    """Policy: save named values except those named in `names`; unnamed values are recomputed."""
    s = frozenset(names)
    return _Policy("save_any_names_but_these", lambda n: bool(names_of(n)) and not (names_of(n) & s),
                   tuple(sorted(s)))


def save_from_both_policies(a: Callable[[Node], bool], b: Callable[[Node], bool]) -> _Policy:
    """Policy: save a value when either policy saves it."""
    return _Policy("save_from_both_policies", lambda n: a(n) or b(n), (a, b))


# --------------------------------------------------------------------------- user annotations


@dataclass
class _Region:
    policy: Callable[[Node], bool]
    name: str


_REGIONS: dict[int, _Region] = {}


def checkpoint(fn: Callable | None = None, policy: Callable[[Node], bool] | None = None,
               prevent_cse: bool = True) -> Callable:
    """Mark a function as a checkpoint region: its internal values are recomputed in the backward sweep.

    Like `jax.checkpoint`: inside a traced computation, the function's inputs
    and outputs are wrapped in identity markers; `apply_checkpoint` (run by
    `sg.compile`) saves only the internal values the policy allows and
    recomputes the others from the region's inputs. Values leaving the
    region are ordinary values of the enclosing computation. Called on
    concrete arrays it just calls `fn`.

    Args:
        fn: the function (also usable as `@checkpoint` or `@checkpoint(policy=...)`).
        policy: predicate node -> bool saying which internal values may be
            saved; default `nothing_saveable`. See `dots_saveable`,
            `save_only_these_names`, ...
        prevent_cse: accepted for JAX compatibility; the markers always keep
            the region's values apart from identical values outside it.

    Returns:
        A function with `fn`'s signature.
    """
    if fn is None:
        return functools.partial(checkpoint, policy=policy, prevent_cse=prevent_cse)
    if not callable(fn):
        raise SymgraphError(f"checkpoint: expected a function to wrap, got {type(fn).__name__}")
    pol = nothing_saveable if policy is None else policy
    if not callable(pol):
        raise SymgraphError(f"checkpoint: policy must be a predicate node -> bool, got {pol!r}")

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_flatten((args, kwargs))
        if not any(isinstance(x, Node) for x in leaves):
            return fn(*args, **kwargs)
        rid = next(_region_ids)
        _REGIONS[rid] = _Region(pol, getattr(fn, "__name__", "f"))
        ins = [L.bind("remat_begin", x, region=rid) if isinstance(x, Node) else x for x in leaves]
        a, kw = tree_unflatten(tree, ins)
        out = fn(*a, **kw)
        ol, otree = tree_flatten(out)
        ol = [L.bind("remat_end", x, region=rid) if isinstance(x, Node) else x for x in ol]
        return tree_unflatten(otree, ol)

    return wrapped


def checkpoint_name(x: Any, name: str) -> Any:
    """Tag a value with `name` for name-based policies (identity on values).

    Args:
        x: a traced value (or a pytree of them); concrete arrays pass through.
        name: the name `save_only_these_names(name)` refers to.

    Returns:
        x, wrapped in a `checkpoint_name` marker when traced.
    """
    leaves, tree = tree_flatten(x)
    op = OPS["checkpoint_name"]
    return tree_unflatten(tree, [current_builder().make(op, (v,), {"name": str(name)}) if isinstance(v, Node) else v
                                 for v in leaves])


@dataclass
class _Marks:
    """What the markers said, in terms of the stripped graph's nodes."""

    must_recompute: dict[Node, str] = field(default_factory=dict)  # node -> region description
    region_saveable: dict[Node, str] = field(default_factory=dict)  # node -> "policy saves it" reason
    names: dict[Node, frozenset] = field(default_factory=dict)


def _strip_markers(graph: Graph) -> tuple[Graph, _Marks]:
    """Remove marker ops, remembering names and which values user regions recompute."""
    order = graph.toposort()
    marks = _Marks()
    if not any(n.op.marker for n in order):
        return graph, marks
    # Region internals: downstream of a region's begin markers and upstream of its end markers.
    begins: dict[int, list[Node]] = {}
    ends: dict[int, list[Node]] = {}
    for n in order:
        if n.op.name == "remat_begin":
            begins.setdefault(n.attr("region"), []).append(n)
        elif n.op.name == "remat_end":
            ends.setdefault(n.attr("region"), []).append(n)
    rd = graph.readers()
    inside: dict[Node, list[int]] = {}
    for rid, es in ends.items():
        up: set[Node] = set()
        stack = [e.inputs[0] for e in es]
        while stack:
            n = stack.pop()
            if n in up or n.op.kind == "source" or (n.op.name == "remat_begin" and n.attr("region") == rid):
                continue
            up.add(n)
            stack.extend(n.inputs)
        down: set[Node] = set()
        stack = list(begins.get(rid, []))
        while stack:
            n = stack.pop()
            if n in down:
                continue
            down.add(n)
            stack.extend(r for r in rd.get(n, ()) if r in up)
        outs = {e.inputs[0] for e in es}
        for n in up & down:
            if not n.op.marker and n not in outs and meta(n).role not in ("backward", "recomputed"):
                inside.setdefault(n, []).append(rid)
    names: dict[Node, set] = {}
    new: dict[Node, Node] = {}
    with Builder() as b:
        for n in order:
            if n.op.marker:
                src = new[n.inputs[0]]
                new[n] = src
                if n.op.name == "checkpoint_name":
                    names.setdefault(src, set()).add(n.attr("name"))
                continue
            ins = [new[x] for x in n.inputs]
            if all(a is x for a, x in zip(ins, n.inputs)):
                new[n] = n
                continue
            m = meta(n)
            with source_location(m.location), role(m.role):
                new[n] = b.make(n.op, ins, n.attrs, n.tag)
    for n, s in names.items():
        marks.names[n] = frozenset(s)
        _set_names(n, frozenset(s))
    for n, rids in inside.items():
        v = new[n]
        for rid in rids:
            reg = _REGIONS.get(rid)
            if reg is None:
                continue
            if reg.policy(v):
                marks.region_saveable.setdefault(v, f"saveable under policy {reg.policy!r} of checkpoint({reg.name})")
            else:
                marks.must_recompute[v] = f"internal to checkpoint({reg.name}) with policy {reg.policy!r}"
    for v in marks.must_recompute:
        marks.region_saveable.pop(v, None)
    out = Graph(graph.inputs, [new[o] for o in graph.outputs], graph.in_tree, graph.out_tree, name=graph.name)
    return out, marks


# --------------------------------------------------------------------------- analysis of a joint graph


@dataclass
class _Analysis:
    """The forward/backward split of a joint graph and its chain structure."""

    graph: Graph
    order: list[Node]
    cls: dict[Node, str]
    fwd: list[Node]  # forward values (not sources), topological order
    needed: set[Node]  # forward values read by backward nodes
    free: set[Node]  # forward values regenerated from sources (random bits, broadcasts of inputs)
    free_random: set[Node]  # the part of `free` derived from random bits
    static: set[Node]  # forward values from constants and integer inputs alone (label indices, masks)
    marks: _Marks
    steps: list[list[Node]] | None = None  # chain steps (non-free forward values), in order
    bounds: list[Node] | None = None  # bounds[k]: the last node of step k (k < len(steps) - 1)
    step_of: dict[Node, int] = field(default_factory=dict)


def _analyze(graph: Graph, marks: _Marks) -> _Analysis:
    order = graph.toposort()
    cls = regions(order)
    fwd = [n for n in order if cls[n] == "F"]
    needed: set[Node] = set()
    for n in order:
        if cls[n] in ("B", "R"):
            for x in n.inputs:
                if cls[x] == "F":
                    needed.add(x)
    free = free_values(order, cls)
    free_random = free_values(order, cls, random_only=True)
    static = static_values(order, cls)
    a = _Analysis(graph, order, cls, fwd, needed, free, free_random, static, marks)
    _find_chain(a)
    return a


def _find_chain(a: _Analysis) -> None:
    """Split the forward values into chain steps at articulation values.

    A value v at position t of the forward order (free and static values left
    out: a label index read by the loss's gather would span the chain) is an
    articulation when it is the only live forward value after it runs: no
    forward edge spans t, and v is read later by the forward (or is last).
    Step bounds are the articulations a such that some value after a, up to
    and including the next articulation, is read by the backward. For
    x = tanh(x @ W + b) that is the pre-activation x @ W + b: every step
    then holds one layer, and only values inside a step are read by its
    backward; in a pre-LayerNorm residual network the bounds are the
    residual-stream sums. The values after the last bound form the last step.

    The chain is looked for in the main forward computation only: the
    connected component of the forward values (free values left out) with
    the most bytes. Other components are side computations that share no
    forward value with it, e.g. an optimizer's step counter t + 1 and its
    bias corrections 1 - b**t in a compiled training step; they are small,
    "not part of the chain" and saved, instead of spanning the chain and
    hiding every articulation. A graph output that no forward value reads is
    held to the end in every plan, like a parameter, so it spans nothing.
    """
    seq = _main_component(forward_order(a.order, a.cls, a.graph.outputs, a.free | a.static))
    N = len(seq)
    if N < 2:
        return
    pos = {n: i for i, n in enumerate(seq)}
    lastf = [i for i in range(N)]
    for i, n in enumerate(seq):
        for x in n.inputs:
            j = pos.get(x)
            if j is not None and i > lastf[j]:
                lastf[j] = i
    span = [0] * (N + 1)
    for j in range(N):
        if lastf[j] > j + 1:
            span[j + 1] += 1
            span[min(lastf[j], N)] -= 1
    art = []
    cur = 0
    for t in range(N):
        cur += span[t]
        # cur counts edges u -> w with pos(u) < t < pos(w)
        if cur == 0 and (lastf[t] > t or t == N - 1):
            art.append(t)
    if len(art) < 2:
        return
    cum = [0]
    for n in seq:
        cum.append(cum[-1] + (n in a.needed))
    # art[i] bounds a step when the values up to the next articulation include one the backward reads.
    bset = [art[i] for i in range(len(art) - 1) if cum[art[i + 1] + 1] > cum[art[i] + 1]]
    if not bset:
        return
    steps: list[list[Node]] = []
    prev = 0
    for bpos in bset:
        steps.append(seq[prev:bpos + 1])
        prev = bpos + 1
    steps.append(seq[prev:])
    if len(steps) < 2 or not steps[-1]:
        return
    a.steps = steps
    a.bounds = [seq[b] for b in bset]
    for k, st in enumerate(steps):
        for n in st:
            a.step_of[n] = k


def _main_component(seq: list[Node]) -> list[Node]:
    """The values of `seq` in its largest (by bytes) connected component, in `seq` order.

    Components are those of the undirected graph of data edges between values of `seq`.
    """
    parent = {n: n for n in seq}

    def find(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in seq:
        for x in n.inputs:
            if x in parent:
                rx, rn = find(x), find(n)
                if rx is not rn:
                    parent[rx] = rn
    size: dict[Node, int] = {}
    for n in seq:
        r = find(n)
        size[r] = size.get(r, 0) + n.nbytes
    if len(size) <= 1:
        return seq
    main = max(size, key=lambda r: size[r])
    return [n for n in seq if find(n) is main]


# --------------------------------------------------------------------------- plans and the shared rewrite


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


def rematerialize(a: _Analysis, plan: Plan) -> Graph:
    """The shared rewrite: backward reads of unsaved forward values get recomputed copies.

    Every backward node is rebuilt (when its inputs change) so that it reads,
    for each forward value v, the instance its route names: the original when
    v is saved, else a copy built in the recomputation context from saved
    values, sources and other copies. Copies carry tag ("remat", k) and role
    "recomputed"; free values (random bits, broadcasts of inputs) are always
    regenerated; `copy`/`stop_gradient` forward nodes are looked through.

    Args:
        a: the analysis of the joint graph.
        plan: the strategy's choice.

    Returns:
        A new Graph with the same inputs and outputs' values.
    """
    free = a.free if plan.regenerate is None else plan.regenerate
    saved = set(plan.saved) - free
    for v in a.marks.must_recompute:
        saved.discard(v)
    cls = a.cls
    ctxs = dict(plan.contexts)
    c0 = _Context(0)
    ctxs[0] = c0
    tags = {c: ("remat", next(_ctx_ids)) for c in ctxs}
    memo: dict[tuple[Node, int | None], Node] = {}

    def rule(v: Node, c: int | None) -> tuple[str, Any]:
        if cls.get(v) != "F":
            return ("node", v)
        if v.op.name in ("copy", "stop_gradient") and v.tag is None or (
                v.op.name == "copy" and isinstance(v.tag, tuple) and v.tag[:1] == ("fresh",)):
            return ("alias", (v.inputs[0], c))
        if c is None:
            if v in saved:
                return ("node", v)
            c = 0
        ctx = ctxs[c]
        if v in ctx.base:
            return ("alias", ctx.base[v])
        if v in free:
            return ("copy", c)
        if c == 0 or ctx.scope is None:
            return ("node", v) if v in saved else ("copy", 0)
        if ctx.scope is not None and v in ctx.scope:
            return ("copy", c)
        return ("alias", (v, None))

    def inst(v: Node, c: int | None) -> Node:
        k0 = (v, c)
        if k0 in memo:
            return memo[k0]
        stack = [k0]
        while stack:
            k = stack[-1]
            if k in memo:
                stack.pop()
                continue
            kind, arg = rule(*k)
            if kind == "node":
                memo[k] = arg
                stack.pop()
            elif kind == "alias":
                if arg in memo:
                    memo[k] = memo[arg]
                    stack.pop()
                else:
                    stack.append(arg)
            else:
                cc = arg
                v = k[0]
                pend = [(x, cc) for x in v.inputs if (x, cc) not in memo]
                if pend:
                    stack.extend(pend)
                    continue
                ins = [memo[(x, cc)] for x in v.inputs]
                m = meta(v)
                with source_location(m.location), role("recomputed"):
                    memo[k] = b.make(v.op, ins, v.attrs, tags[cc])
                stack.pop()
        return memo[k0]

    route = plan.route
    reader_ids = itertools.count(max(ctxs) + 1)
    new: dict[Node, Node] = {}
    with Builder() as b:
        for n in a.order:
            c = cls[n]
            if c in ("S", "F"):
                new[n] = n
                continue
            ins = []
            for x in n.inputs:
                cx = cls[x]
                if cx == "F" and x in free:
                    # A free value (broadcast constant, dropout mask) read by the
                    # backward is regenerated for this reader alone: one shared
                    # copy would stay live across the whole backward sweep.
                    c = next(reader_ids)
                    ctxs[c] = _Context(c)
                    tags[c] = ("remat", next(_ctx_ids))
                    ins.append(inst(x, c))
                elif cx == "F":
                    r = route(n, x) if route is not None else None
                    ins.append(inst(*r) if isinstance(r, tuple) else inst(x, r))
                else:
                    ins.append(new[x])
            if all(y is x for y, x in zip(ins, n.inputs)):
                new[n] = n
                continue
            m = meta(n)
            with source_location(m.location), role(m.role if m.role in ("backward", "recomputed") else "backward"):
                new[n] = b.make(n.op, ins, n.attrs, n.tag)
    g = a.graph
    return Graph(g.inputs, [new[o] for o in g.outputs], g.in_tree, g.out_tree, name=g.name)


# --------------------------------------------------------------------------- strategies


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


_INF_SCALE = 4
#: Min-cut never recomputes a value the backward reads through more than this
#: many recomputed values in a row (PyTorch likewise bans long recompute chains).
MINCUT_MAX_DEPTH = 16


def _plan_mincut(a: _Analysis, max_depth: int | None = None) -> Plan:
    """Save the minimum-bytes cut between the forward sweep and the backward's reads.

    Flow network (PyTorch's partitioner): each forward value v is an edge
    v_in -> v_out of capacity bytes(v) (saving it); data edges u_out -> v_in
    are infinite; values the backward reads connect to the sink;
    contractions (matmul, einsum) and opaque ops cannot be recomputed (an
    infinite edge from the source); free values (random bits, broadcasts of
    inputs) and values a user region must recompute cannot be saved
    (infinite v_in -> v_out). Among minimum cuts the one closest to the sink
    is taken: it recomputes the fewest values. A value the backward reads
    whose recomputation would chain more than `max_depth` recomputed values
    is then banned from recomputation too, and the cut solved again (one
    recomputed copy per value lives from its first to its last backward
    reader, so long chains would raise the peak they were meant to lower).
    """
    import networkx as nx

    if max_depth is None:
        max_depth = MINCUT_MAX_DEPTH
    fset = list(a.fwd)
    idx = {v: i for i, v in enumerate(fset)}
    total = sum(_bytes(v) for v in fset) + 1
    INF = total * _INF_SCALE
    must = a.marks.must_recompute
    G = nx.DiGraph()
    src, snk = ("source",), ("sink",)
    G.add_node(src)
    G.add_node(snk)
    for v in fset:
        i = idx[v]
        unsaveable = v in a.free or v in must
        G.add_edge(("in", i), ("out", i), capacity=INF if unsaveable else _bytes(v))
        for x in v.inputs:
            j = idx.get(x)
            if j is not None:
                G.add_edge(("out", j), ("in", i), capacity=INF)
        if v.op.kind in ("contraction", "opaque") and v not in must:
            G.add_edge(src, ("in", i), capacity=INF)
        if v in a.needed:
            G.add_edge(("out", i), snk, capacity=INF)
    banned_late: set[Node] = set()
    while True:
        saved, flow_value = _solve_cut(G, src, snk, fset, idx, a, INF)
        # Depth of each recomputed value: the longest run of recomputed values above it.
        depth: dict[Node, int] = {}
        late = []
        for v in fset:
            if v in saved or v in a.free:
                continue
            d = 1 + max((depth.get(x, 0) for x in v.inputs), default=0)
            depth[v] = d
            if d > max_depth and v in a.needed and v not in must and v not in banned_late:
                late.append(v)
        if not late:
            break
        for v in late:
            banned_late.add(v)
            G.add_edge(src, ("in", idx[v]), capacity=INF)
    reasons: dict[Node, str] = {}
    for v in saved:
        if v in banned_late:
            why = f"recomputing it would chain more than {max_depth} recomputed values"
        elif v.op.kind == "contraction":
            why = "contraction (never recomputed)"
        else:
            why = f"{_bytes(v)} bytes"
        fv = flow_value if flow_value < INF else "inf"
        reasons[v] = f"on the minimum cut ({why}; cut total {fv} bytes)"
    return Plan("mincut", saved, reasons)


def _solve_cut(G: Any, src: Any, snk: Any, fset: list[Node], idx: dict[Node, int], a: _Analysis,
               INF: int) -> tuple[set[Node], int]:
    """Max flow, then the minimum cut closest to the sink; returns (saved values, cut bytes)."""
    import networkx as nx

    if G.out_degree(src) == 0 or G.in_degree(snk) == 0:
        return set(), 0
    from networkx.algorithms.flow import boykov_kolmogorov

    flow_value, flow = nx.maximum_flow(G, src, snk, flow_func=boykov_kolmogorov)
    reach: set = {snk}
    stack = [snk]
    while stack:
        w = stack.pop()
        for u in G.predecessors(w):  # u -> w with residual capacity
            if u not in reach and flow[u][w] < G[u][w]["capacity"]:
                reach.add(u)
                stack.append(u)
        for u in G.successors(w):  # the reverse residual edge u -> w carries flow[w][u]
            if u not in reach and flow[w][u] > 0:
                reach.add(u)
                stack.append(u)
    saved: set[Node] = set()
    for v in fset:
        i = idx[v]
        if ("in", i) not in reach and ("out", i) in reach:
            saved.add(v)
    # A value the backward reads that stayed on the source side is saved too
    # (only when an infinite edge had to be cut: a must-recompute conflict).
    for v in a.needed:
        if ("out", idx[v]) not in reach and v not in a.free:
            saved.add(v)
    return saved, flow_value


# --------------------------------------------------------------------------- the pass


@dataclass
class _Info:
    strategy: str
    plan: Plan
    candidates: list[dict] | None = None


_INFO: weakref.WeakKeyDictionary[Graph, _Info] = weakref.WeakKeyDictionary()


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


# --------------------------------------------------------------------------- reports


def _residual_list(g: Graph) -> list[tuple[Node, str]]:
    order = g.toposort()
    cls = regions(order)
    res: list[Node] = []
    seen: set[Node] = set()
    for n in order:
        if cls[n] in ("B", "R"):
            for x in n.inputs:
                if x not in seen and (cls[x] == "F" or (cls[x] == "S" and x.op.name == "input")):
                    seen.add(x)
                    res.append(x)
    info = _INFO.get(g)
    reasons = info.plan.reasons if info is not None else {}
    pos = {n: i for i, n in enumerate(order)}
    labels = _input_labels(g)
    out = []
    for x in sorted(res, key=lambda n: pos[n]):
        if x.op.name == "input":
            why = f"argument {labels.get(x, x.attr('name'))!r} (held by the caller)"
        else:
            why = reasons.get(x, "read by the backward sweep")
            loc = meta(x).location
            if loc is not None:
                why = f"{why}; output of {x.op.name} at {loc}"
            else:
                why = f"{why}; output of {x.op.name}"
        out.append((x, why))
    return out


def _input_labels(g: Graph) -> dict[Node, str]:
    """Each input leaf's label with its pytree path: `params[0]['w']`, not the flat `params[1]`.

    The tracer names leaf j of a multi-leaf argument `name[j]` (flat index);
    the path comes from the argument's structure in `g.in_tree`. Graphs
    whose input structure is not a tuple of arguments keep the tracer's names.
    """
    td = g.in_tree
    if td is None or td.kind not in ("tuple", "list") or td.num_leaves != len(g.inputs):
        return {}
    labels: dict[Node, str] = {}
    k = 0
    for child in td.children:
        n = child.num_leaves
        leaves = g.inputs[k:k + n]
        k += n
        if n == 0 or child.kind == "leaf":
            continue
        paths = tree_paths(child)
        first = str(leaves[0].attr("name"))
        if first.endswith(paths[0]):  # already labelled with its path
            continue
        m = re.fullmatch(r"(.*)\[0\]", first) if n > 1 else None
        base = m.group(1) if m else first
        for x, p in zip(leaves, paths):
            labels[x] = f"{base}{p}"
    return labels


def saved_residuals(f: Callable, *args: Any, checkpoint: Any = None) -> list[tuple[Node, str]]:
    """The values the backward sweep of f reads from the forward sweep, and why each is kept.

    Traces f's reverse-mode derivative with respect to every float argument
    leaf (cotangent ones for every output), simplifies, applies
    `apply_checkpoint(graph, checkpoint)` and lists the forward values and
    arguments that backward or recomputed nodes read.

    Args:
        f: a function of arrays (pytrees allowed).
        *args: example arguments (only shapes and dtypes matter).
        checkpoint: a strategy for `apply_checkpoint` (None: save everything).

    Returns:
        list of (node, reason) in forward order; node.shape, node.dtype and
        node.nbytes give the cost.
    """
    g = _joint_graph(f, args)
    g = apply_checkpoint(simplify(g), checkpoint)
    return _residual_list(g)


def print_saved_residuals(f: Callable, *args: Any, checkpoint: Any = None) -> None:
    """Print `saved_residuals(f, *args, checkpoint=...)`, one line per value with its bytes."""
    for n, why in saved_residuals(f, *args, checkpoint=checkpoint):
        print(f"{n.dtype}[{','.join(map(str, n.shape))}] {n.nbytes} bytes  {why}")


def _joint_graph(f: Callable, args: tuple) -> Graph:
    @functools.wraps(f)  # argument names in the residual report follow f's signature
    def joint(*a: Any) -> Any:
        leaves, tree = tree_flatten(a)
        fl = [fresh(x) if isinstance(x, Node) and is_float(x) else x for x in leaves]
        out = f(*tree_unflatten(tree, fl))
        ol = [L.as_output(o, i) for i, o in enumerate(tree_flatten(out)[0])]
        wrt = [x for x in fl if isinstance(x, Node) and is_float(x)]
        fo = [o for o in ol if is_float(o)]
        cts = vjp_nodes(fo, [L.full_like(o, 1.0) for o in fo], wrt)
        return ol, [L.zeros_like(w) if c is None else c for w, c in zip(wrt, cts)]

    return trace(joint, *args, name=getattr(f, "__name__", "f"))


def checkpoint_stats(graph: Graph) -> dict:
    """Memory and recomputation figures of a (checkpointed) joint graph on its schedule.

    Returns:
        dict with
        "peak_bytes": planned peak of `schedule(graph)` (bytes, inputs excluded);
        "peak_activation_bytes": the same counting only forward and recomputed values;
        "residual_bytes" / "residuals": forward values read by backward or recomputed nodes;
        "recomputed_nodes" / "recomputed_flops": the recomputation bill;
        "forward_flops": FLOPs of the forward values; "checkpoint": the plan name
        (when the graph came from `apply_checkpoint`), and for a byte budget
        "checkpoint_candidates": every plan considered with its peak and FLOPs.
    """
    order = schedule(graph)
    cls = regions(order)
    pk = peak_bytes(order, graph.outputs)
    act = peak_bytes(order, graph.outputs, select=lambda n: cls.get(n) in ("F", "R"))
    res = set()
    for n in order:
        if cls[n] in ("B", "R"):
            res.update(x for x in n.inputs if cls[x] == "F")
    stats = {
        "peak_bytes": pk,
        "peak_activation_bytes": act,
        "residuals": len(res),
        "residual_bytes": sum(x.nbytes for x in res),
        "recomputed_nodes": sum(1 for n in order if cls[n] == "R"),
        "recomputed_flops": sum(flops(n) for n in order if cls[n] == "R"),
        "forward_flops": sum(flops(n) for n in order if cls[n] == "F"),
    }
    info = _INFO.get(graph)
    if info is not None:
        stats["checkpoint"] = info.plan.name
        if info.candidates is not None:
            stats["checkpoint_candidates"] = info.candidates
    return stats
