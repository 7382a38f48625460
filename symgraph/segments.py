"""Run a graph with host ops (communication) on a backend that compiles native code: cut it into segments.

A host op (`Op.extra["host"]`, e.g. `allreduce_start` / `allreduce_wait` of
`symgraph.ops.comm`) runs in Python: its impl talks to MPI. A backend such as
"llvm" compiles a whole graph into one native entry, so `compile_segmented`
cuts the schedule at the host ops: each maximal run of other nodes becomes a
graph of its own (inputs: the values it reads from before it; outputs: the
values read after it), compiled by the backend, and `SegmentedExecutable.run`
calls the segments and the host ops in schedule order. Between segments it
lets the communicators progress (`progress()`) while a reduction is in flight,
so that a reduction posted before a segment moves while the next host op is
reached.

A cut costs what the uncut graph would have fused: a value computed before it
and read after it is written to memory and read back. So cheap nodes go where
they are read (`_place`): a view (a scalar broadcast to a parameter's shape) is
computed in every segment that reads it, an elementwise node whose readers all
come later (AdamW's `beta1 * m`, which needs no gradient) in the first of them;
`stats["cut_bytes"]` gives the bytes that still cross.

Arguments are checked once per call; the segments are then called through the
backend's unchecked entry (`make_raw` of the LLVM executable) with the arrays
earlier steps returned, and a host op's result is checked for its node's shape,
dtype and layout before a segment reads it.

The NumPy evaluator runs host ops itself (it calls every impl), so the
"numpy" backend gets the whole graph.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from .backend import Backend, Executable
from .ir import Builder, Graph, Node, current_builder, meta
from .ops.core import DIVISION
from .errors import DTypeError, ShapeError
from .signature import COMPILED_CASTING, Signature, canonical_dtype, donatable, fast_match_source
from .tracing import make_input
from .tree import tree_unflatten

__all__ = ["has_host_ops", "compile_segmented", "SegmentedExecutable"]


def has_host_ops(order: Sequence[Node]) -> bool:
    """Whether any node of the schedule is a host op."""
    return any(n.op.extra.get("host") for n in order)


class _Segment:
    """One compiled run of non-host nodes: reads `inputs` (original nodes), writes `outputs`."""

    __slots__ = ("inputs", "outputs", "exe", "graph", "size", "donates")

    def __init__(self, inputs: list[Node], outputs: list[Node], exe: Executable, graph: Graph, size: int,
                 donates: bool = False):
        self.inputs = inputs
        self.outputs = outputs
        self.exe = exe
        self.graph = graph
        self.size = size  # the original graph's nodes it computes
        self.donates = donates  # it writes outputs into donated arguments


def _subgraph(nodes: list[Node], inputs: list[Node], outputs: list[Node], name: str) -> tuple[Graph, list[Node]]:
    """A graph of `nodes` (in order) whose reads of `inputs` become fresh input nodes; and its order."""
    new: dict[Node, Node] = {}
    with Builder():
        ins = []
        for j, x in enumerate(inputs):
            ins.append(make_input(x.shape, x.dtype, j, f"s{j}"))
            new[x] = ins[-1]
        order = list(ins)
        for n in nodes:
            if n.op.kind == "source" and n.op.name != "input":
                m = n  # constants are shared as they are
            else:
                for x in n.inputs:
                    if x not in new:  # a constant: shared as it is, placed before its first reader
                        new[x] = x
                        order.append(x)
                m = _remake(n, tuple(new[x] for x in n.inputs))
            new[n] = m
            order.append(m)
    outs = [new[o] for o in outputs]
    seen = set()
    uniq = []
    for n in order:
        if n not in seen:
            seen.add(n)
            uniq.append(n)
    return Graph(ins, outs, name=name), uniq


def _remake(n: Node, inputs: tuple) -> Node:
    return current_builder().remake(n, inputs, meta(n))


#: kinds of node `_place` may move into later segments (no contraction or reduction: their work stays put)
_MOVABLE = ("elementwise", "layout")


def _place(steps: list[tuple[str, Any]]) -> dict[Node, set[int]]:
    """The steps (segments) that compute each node: cheap nodes go where they are read.

    A value computed in one segment and read in later ones crosses the cut: the segment writes
    it to memory and the later one reads it back, where the uncut graph would have fused it into
    its reader's loop (a scalar broadcast to a parameter's shape, AdamW's `beta1 * m` computed
    before the gradient's wait). An elementwise or layout node that no host op reads and whose
    non-source inputs are no larger than itself (so no more bytes cross) is placed instead in
    the segments that read it: a view or identity (`Op.cheap`: no arithmetic) in every segment
    that reads it, any other such node in the first segment that reads it, unless its own
    segment reads it too (a graph output is returned from the last segment that computes it).
    Nodes are visited from the last one back, so a chain of such nodes moves together.

    Returns:
        node -> the indices of the steps that compute it (every non-source node of a segment).
    """
    homes: dict[Node, set[int]] = {}
    host_read: set[Node] = set()
    readers: dict[Node, list[Node]] = {}
    for k, (kind, v) in enumerate(steps):
        for n in (v if kind == "seg" else [v]):
            homes[n] = {k}
            for x in n.inputs:
                readers.setdefault(x, []).append(n)
                if kind == "host":
                    host_read.add(x)
    for k in reversed(range(len(steps))):
        kind, v = steps[k]
        if kind != "seg":
            continue
        for n in reversed(v):
            rs = readers.get(n)
            if not rs or n.op.kind not in _MOVABLE or n in host_read or n.op.extra.get("host"):
                continue
            at = set().union(*(homes[r] for r in rs))
            if n.op.cheap:
                to = at
            elif k not in at:
                to = {min(at)}
            elif _recomputed(n):
                # read on both sides of the cut: recomputed after it too when what it needs crosses anyway
                # (a chain of such nodes: the inner ones follow when they are visited)
                if all(_available(x, n, at - {k}, homes, readers, 3) for x in n.inputs):
                    homes[n] = at
                continue
            else:
                continue
            if to != {k} and _new_bytes(n, to, homes, readers) <= n.nbytes:
                homes[n] = to
    return homes


def _recomputed(n: Node) -> bool:
    """Whether `n` is cheap enough to compute again after a cut rather than write it out and read it back."""
    return n.op.kind == "elementwise" and n.op.cost <= DIVISION and not n.op.random and not n.op.extra.get("host")


def _available(x: Node, reader: Node, to: set[int], homes: dict[Node, set[int]], readers: dict[Node, list[Node]],
               depth: int) -> bool:
    """Whether `reader` could read `x` in the steps `to` at no extra crossing: a source, a value computed
    there or read there by another node (it crosses anyway), or a cheap elementwise node or a view (up
    to `depth` deep) whose own inputs are available."""
    if x.op.kind == "source":
        return True
    hx = homes[x]
    if all(t in hx or any(r is not reader and t in homes[r] for r in readers[x]) for t in to):
        return True
    return depth > 0 and (_recomputed(x) or (x.op.cheap and x.op.kind in _MOVABLE)) and \
        all(_available(y, x, to, homes, readers, depth - 1) for y in x.inputs)


def _new_bytes(n: Node, to: set[int], homes: dict[Node, set[int]], readers: dict[Node, list[Node]]) -> int:
    """Bytes of the values `n` reads that would newly cross into the steps `to` if `n` moved there.

    Sources are available everywhere; a value that another reader in one of those steps reads
    from outside already crosses (a layer norm's input, read by the mean and by x - mean).
    """
    total = 0
    for x in n.inputs:
        if x.op.kind == "source":
            continue
        hx = homes[x]
        if all(t in hx or any(r is not n and t in homes[r] for r in readers[x]) for t in to):
            continue
        total += x.nbytes
    return total


def compile_segmented(backend: Backend, graph: Graph, order: Sequence[Node], donate: frozenset[int],
                      name: str) -> "SegmentedExecutable":
    """Compile `graph` as native segments between its host ops (see the module docstring).

    Donated input leaves are donated to the last segment when no host op after it reads them.

    Raises:
        UnsupportedOpError, DTypeError: from the backend, for a segment it cannot compile.
    """
    order = list(order)
    # steps: ("seg", [nodes]) or ("host", node), in schedule order; sources are not steps
    steps: list[tuple[str, Any]] = []
    run: list[Node] = []
    for n in order:
        if n.op.kind == "source":
            continue
        if n.op.extra.get("host"):
            if run:
                steps.append(("seg", run))
                run = []
            steps.append(("host", n))
        else:
            run.append(n)
    if run:
        steps.append(("seg", run))
    homes = _place(steps)
    segs = {k: [] for k, (kind, _) in enumerate(steps) if kind == "seg"}
    for n, ks in sorted(homes.items(), key=lambda e: e[0].id):  # creation order: inputs before readers
        if not n.op.extra.get("host"):
            for k in ks:
                segs[k].append(n)
    steps = [(kind, v) if kind == "host" else ("seg", segs[k]) for k, (kind, v) in enumerate(steps)]
    keep = [k for k, (kind, v) in enumerate(steps) if kind == "host" or v]
    renum = {k: i for i, k in enumerate(keep)}
    steps = [steps[k] for k in keep]
    homes = {n: {renum[k] for k in ks} for n, ks in homes.items()}
    # values read outside the steps that compute them: the latest home before the reader writes them out
    written: set[tuple[Node, int]] = set()
    cut: set[Node] = set()  # values one segment writes for a later one (what the cuts cost in memory traffic)
    for j, (kind, v) in enumerate(steps):
        for n in (v if kind == "seg" else [v]):
            for x in n.inputs:
                if x in homes and j not in homes[x]:
                    written.add((x, max(h for h in homes[x] if h < j)))
                    if kind == "seg" and not x.op.extra.get("host"):
                        cut.add(x)
    for o in graph.outputs:
        if o in homes:
            written.add((o, max(homes[o])))
    in_index = {x: i for i, x in enumerate(graph.inputs)}
    last_seg = max((k for k, (kind, _) in enumerate(steps) if kind == "seg"), default=-1)
    host_after_last = {x for k, (kind, v) in enumerate(steps) if kind == "host" and k > last_seg for x in v.inputs}
    compiled: list[tuple[str, Any]] = []
    outer_donated: frozenset[int] = frozenset()
    for k, (kind, v) in enumerate(steps):
        if kind == "host":
            compiled.append(("host", v))
            continue
        members = set(v)
        ins: list[Node] = []
        seen: set[Node] = set()
        for n in v:
            for x in n.inputs:
                if x not in members and x not in seen and not (x.op.kind == "source" and x.op.name != "input"):
                    seen.add(x)
                    ins.append(x)
        outs = [n for n in v if (n, k) in written]
        g, sub_order = _subgraph(v, ins, outs, f"{name}_seg{k}")
        don: set[int] = set()
        if k == last_seg:
            for j, x in enumerate(ins):
                if x in in_index and in_index[x] in donate and x not in host_after_last:
                    don.add(j)
        exe = backend.compile(g, sub_order, donate=frozenset(don), name=f"{name}_seg{k}")
        compiled.append(("seg", _Segment(ins, outs, exe, g, len(v), bool(don))))
        if don:
            outer_donated = frozenset(in_index[ins[j]] for j in don)
    exe = SegmentedExecutable(graph, compiled, backend.name, outer_donated)
    exe.stats["cut_bytes"] = sum(x.nbytes for x in cut)
    return exe


class SegmentedExecutable(Executable):
    """Native segments and host ops run in schedule order (`compile_segmented`).

    Attributes:
        stats: the backend's figures summed over segments (kernels, arena_bytes, ...), plus
            segments, host_ops, cut_bytes (bytes of the values a segment writes for a later one), communication (buckets, bytes per call, and per bucket the
            number of nodes scheduled between its start and its wait: work that overlaps it).
    """

    def __init__(self, graph: Graph, steps: list[tuple[str, Any]], backend: str, donated: frozenset[int] = frozenset()):
        self.graph = graph
        self.backend = backend
        self.steps = steps
        self.signature = Signature(graph, casting=COMPILED_CASTING, contiguous=True)
        segs = [s for kind, s in steps if kind == "seg"]
        stats: dict[str, Any] = {"backend": backend, "segments": len(segs),
                                 "host_ops": sum(1 for kind, _ in steps if kind == "host")}
        for s in segs:
            for key, val in s.exe.stats.items():
                if isinstance(val, (int, float)) and not isinstance(val, bool) and key != "threads":
                    stats[key] = stats.get(key, 0) + val
                else:
                    stats.setdefault(key, val)
        comm_nodes = [v for kind, v in steps if kind == "host" and v.op.extra.get("communication")]
        starts = [n for n in comm_nodes if n.op.name == "allreduce_start"]
        at = {v: k for k, (kind, v) in enumerate(steps) if kind == "host"}
        waits = {n.inputs[0]: n for n in comm_nodes if n.op.name == "allreduce_wait"}
        overlap = []
        for s in starts:
            w = waits.get(s)
            if w is not None:  # the nodes of the segments run between the start and its wait
                overlap.append(sum(v.size for kind, v in steps[at[s] + 1:at[w]] if kind == "seg"))
        stats["communication"] = {"buckets": len(starts), "bytes": sum(s.nbytes for s in starts),
                                  "overlapped_nodes": overlap}
        self.stats = stats
        self._comms = list({id(n.attr("comm")): n.attr("comm") for n in comm_nodes
                            if hasattr(n.attr("comm"), "progress")}.values())
        self._inputs = frozenset(graph.inputs)  # outputs that are arguments are returned as copies
        self.donated = frozenset(donated)
        self._execute = self._make_execute()
        self.fast = self._make_fast()

    def _make_fast(self) -> Any:
        """A generated `fast(args)`: the argument checks of `symgraph.signature` unrolled, then `_execute`."""
        ns: dict[str, Any] = {"_execute": self._execute, "_unflatten": tree_unflatten, "_otree": self.graph.out_tree}
        if self.graph.out_tree is None:
            return None
        match = fast_match_source(self.graph.in_tree, self.signature.specs, self.donated, ns)
        if match is None:
            return None
        lines, _ = match
        src = "\n".join(["def fast(args):", *lines, "    return _unflatten(_otree, _execute(args))"])
        exec(compile(src, f"<symgraph segmented fast call {self.graph.name}>", "exec"), ns)  # noqa: S102
        return ns["fast"]

    def run(self, leaves: list[Any]) -> list[np.ndarray]:
        """Run on flat argument leaves; see `symgraph.backend.Executable.run`.

        A donated leaf that is not `symgraph.signature.donatable` is copied (its output gets a fresh buffer).
        """
        arrs = self.signature.check(leaves)
        for li in self.donated:
            if not donatable(arrs, leaves, li):
                arrs[li] = arrs[li].copy()
        return self._execute(arrs)

    def _make_execute(self) -> Any:
        """Generate `execute(vals)`: the steps on checked argument arrays, unrolled; the flat outputs.

        Arguments are checked once per call (`run`, or the fast path's checks), so a segment is called
        through its executable's `make_raw` function, which checks nothing: every other value a
        segment reads is an array a segment returned (of exactly its node's shape and dtype) or a host
        op's result, whose shape, dtype and layout are checked here. A last segment that donates
        arguments and reads a host op's result (which may be an argument itself: an all-reduce start
        returns its input) is called through its checked `run`, which copies an aliased donated array.
        """
        ns: dict[str, Any] = {"_errstate": np.errstate, "_nd": np.ndarray, "_fix": _fix_host, "_copy": np.array}
        names: dict[Node, str] = {}
        lines = ["def execute(vals):"]
        ins = [f"i{j}" for j in range(len(self.graph.inputs))]
        names.update(zip(self.graph.inputs, ins))
        if ins:
            lines.append(f"    {', '.join(ins)}, = vals")
        lines.append("    with _errstate(all='ignore'):")
        for j, c in enumerate(self._comms):
            ns[f"_progress{j}"] = c.progress
        hosts: set[Node] = set()
        pending: set[Node] = set()  # starts posted, not yet waited for

        def arg(x: Node, k: int) -> str:
            if x not in names:  # a constant read by a host op (segments keep theirs)
                ns[f"_const{k}_{len(ns)}"] = functools.partial(_const, x)
                return f"_const{k}_{len(ns) - 1}()"
            return names[x]

        last = max((k for k, (kind, _) in enumerate(self.steps) if kind == "seg"), default=-1)
        for k, (kind, s) in enumerate(self.steps):
            if kind == "seg":
                raw = getattr(s.exe, "make_raw", None)
                raw = raw() if raw is not None else None
                if raw is None or (k == last and s.donates and any(x in hosts for x in s.inputs)):
                    ns[f"_seg{k}"] = s.exe.run
                    call = f"_seg{k}([{', '.join(arg(x, k) for x in s.inputs)}])"
                else:
                    ns[f"_seg{k}"] = raw
                    call = f"_seg{k}(({', '.join(arg(x, k) for x in s.inputs)}{',' if len(s.inputs) == 1 else ''}))"
                outs = []
                for o in s.outputs:
                    names[o] = f"v{len(names)}"
                    outs.append(names[o])
                lines.append(f"        {', '.join(outs)}, = {call}" if outs else f"        {call}")
                if pending:  # reductions in flight move on
                    lines += [f"        _progress{j}()" for j in range(len(self._comms))]
            else:
                n = s
                ns[f"_host{k}"] = functools.partial(n.op.impl, **n.params)
                ns[f"_node{k}"] = n
                ns[f"HS{k}"], ns[f"HD{k}"] = tuple(n.shape), canonical_dtype(n.dtype)
                v = names[n] = f"v{len(names)}"
                hosts.add(n)
                if n.op.extra.get("schedule") == "early":  # a start posts a reduction, its wait ends it
                    pending.add(n)
                elif n.op.extra.get("schedule") == "late":
                    pending.discard(n.inputs[0])
                lines.append(f"        {v} = _host{k}({', '.join(arg(x, k) for x in n.inputs)})")
                lines.append(f"        if type({v}) is not _nd or {v}.dtype is not HD{k} or {v}.shape != HS{k} "
                             f"or not {v}.flags.carray: {v} = _fix({v}, _node{k})")
        res = []
        for j, o in enumerate(self.graph.outputs):
            if o in self._inputs:
                res.append(f"_copy({names[o]}, copy=True)")
            elif o in names:
                res.append(names[o])
            else:
                ns[f"_out{j}"] = functools.partial(_const_out, o)
                res.append(f"_out{j}()")
        lines.append(f"    return [{', '.join(res)}]")
        src = "\n".join(lines)
        exec(compile(src, f"<symgraph segmented call {self.graph.name}>", "exec"), ns)  # noqa: S102
        fn = ns["execute"]
        fn.__source__ = src
        return fn

    def release(self) -> int:
        return sum(s.exe.release() for kind, s in self.steps if kind == "seg")

    def profile(self, reset: bool = False) -> list[dict] | None:
        rows = []
        for kind, s in self.steps:
            if kind == "seg":
                p = s.exe.profile(reset)
                if p:
                    rows.extend(p)
        return rows or None


def _fix_host(v: Any, n: Node) -> np.ndarray:
    """A host op's result as a C-contiguous, aligned array of its node's dtype.

    Raises:
        ShapeError, DTypeError: the op returned another shape or dtype than its node's.
    """
    a = np.asarray(v)
    if a.shape != tuple(n.shape):
        raise ShapeError(f"host op {n.op.name} returned shape {a.shape}, its node has shape {tuple(n.shape)}")
    if a.dtype != n.dtype:
        raise DTypeError(f"host op {n.op.name} returned dtype {a.dtype}, its node has dtype {n.dtype}")
    return np.require(a, dtype=canonical_dtype(n.dtype), requirements="CA")


def _const_out(n: Node) -> np.ndarray:
    """A graph output that is a constant (a fresh array per call)."""
    return np.asarray(_const(n), dtype=n.dtype)


def _const(n: Node) -> Any:
    if n.op.name == "constant":
        return n.op.impl(**n.params)
    raise KeyError(f"value of {n.op.name} node is not available")  # pragma: no cover - a malformed schedule

