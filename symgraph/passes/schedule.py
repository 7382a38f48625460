"""Schedules and liveness: an execution order, each value's last use, planned peak bytes.

One liveness function (`last_use`) is shared by the NumPy evaluator, the LLVM
arena planner and the checkpointing cost model, so they agree on the plan.
`schedule` is the one execution order all of them use: the topological order
for forward-only graphs, and a memory-aware order for graphs with a backward
region (reverse-mode sweeps): forward values in forward order, the backward
region in reverse forward order, and every recomputed value and cheap
input-derived value placed right before its first reader.
"""

from __future__ import annotations

import heapq
import operator
import weakref
from collections.abc import Callable, Sequence

from ..ir import Graph, Node, meta

__all__ = [
    "assign_offsets",
    "free_values",
    "interval_peak",
    "last_use",
    "live_bytes",
    "peak_bytes",
    "regions",
    "schedule",
    "static_values",
]

# Ops that only move, view or convert data (`Op.cheap`: views, identities, casts): values computed
# by them from graph inputs and constants alone are regenerated where needed, never kept.

_CACHE: weakref.WeakKeyDictionary[Graph, list[Node]] = weakref.WeakKeyDictionary()
_op_of = operator.attrgetter("op")


def regions(order: Sequence[Node]) -> dict[Node, str]:
    """Split nodes into regions: "S" source, "F" forward, "B" backward, "R" recomputed.

    A node is "S" when its op is a source (input, constant); "R" when its
    metadata role is "recomputed"; "B" when its role is "backward" or it
    reads a "B" or "R" node; otherwise "F" (role "forward" or another role).

    Args:
        order: nodes in topological order.

    Returns:
        dict node -> one of "S", "F", "B", "R".
    """
    cls: dict[Node, str] = {}
    get = cls.get
    for n in order:
        if n.op.kind == "source":
            cls[n] = "S"
            continue
        r = meta(n).role
        if r == "recomputed":
            c = "R"
        elif r == "backward":
            c = "B"
        else:
            c = "F"
            for x in n.inputs:
                cx = get(x)
                if cx == "B" or cx == "R":
                    c = "B"
                    break
        cls[n] = c
    return cls


def free_values(order: Sequence[Node], cls: dict[Node, str] | None = None, random_only: bool = False) -> set[Node]:
    """Forward values that are free to regenerate: computed from sources without activations.

    A value is free when it is a `random_uniform` (counter-based: it depends
    only on its key), or a cheap op (`Op.cheap`; or elementwise, when it reads
    random bits) all of whose non-source inputs are free. Dropout masks and
    broadcasts of parameters are free; anything reading an activation is not.

    Args:
        order: nodes in topological order.
        cls: `regions(order)` (computed when None).
        random_only: only values derived from random bits (what "none" regenerates).

    Returns:
        The set of free forward ("F") nodes.
    """
    if cls is None:
        cls = regions(order)
    free: set[Node] = set()
    rand: set[Node] = set()
    for n in order:
        if cls.get(n) != "F":
            continue
        if n.op.random:
            free.add(n)
            rand.add(n)
            continue
        ins = [x for x in n.inputs if cls.get(x) != "S"]
        if not free.issuperset(ins):
            continue
        is_rand = not rand.isdisjoint(ins)
        if is_rand and n.op.kind in ("elementwise", "layout"):
            free.add(n)
            rand.add(n)
        elif n.op.cheap:
            free.add(n)
    return rand if random_only else free


def static_values(order: Sequence[Node], cls: dict[Node, str] | None = None) -> set[Node]:
    """Forward values computed from constants and integer/bool inputs alone (no float input upstream).

    Such values carry no derivative and no activation: label indices and
    their flattened gather positions (``x[np.arange(B), y]``, cross-entropy),
    one-hot masks, position ids, masks built from integer inputs. Their place
    in the forward order says nothing about the reverse sweep, so the
    schedule computes them when first read instead of anchoring them in the
    forward, and the checkpoint chain leaves them out (otherwise a label
    index computed first and read by the loss's gather at the end would span,
    and hide, every articulation of the chain).

    Args:
        order: nodes in topological order.
        cls: `regions(order)` (computed when None).

    Returns:
        The set of static forward ("F") nodes.
    """
    if cls is None:
        cls = regions(order)
    static: set[Node] = set()
    get = cls.get
    for n in order:
        if get(n) != "F" or not n.inputs:
            continue
        for x in n.inputs:
            if not (x in static or (get(x) == "S" and (x.op.name != "input" or x.dtype.kind not in "fc"))):
                break
        else:
            static.add(n)
    return static


def _backward_only(order: Sequence[Node], cls: dict[Node, str], pulled: set[Node]) -> set[Node]:
    """Forward values that read only sources and pulled values, and that no forward value reads.

    E.g. an optimizer's b1 * m and p * (1 - lr * wd) in a compiled training
    step: they need no activation, and computed at the start of the forward
    (where a forward order puts a value without forward inputs) they would
    stay alive across both sweeps. The schedule pulls them right before their
    first backward reader instead, and their (meaningless) forward position
    does not order the backward sweep.

    Args:
        order: nodes in topological order.
        cls: `regions(order)`.
        pulled: values already pulled on demand (free and static values).

    Returns:
        The set of such forward values.
    """
    has_f_reader: set[Node] = set()
    get = cls.get
    fwd = [n for n in order if get(n) == "F"]
    for n in fwd:
        has_f_reader.update(n.inputs)
    out: set[Node] = set()
    for n in fwd:
        if n in pulled or n in has_f_reader:
            continue
        for x in n.inputs:
            if get(x) != "S" and x not in pulled:
                break
        else:
            out.add(n)
    return out


def forward_order(order0: Sequence[Node], cls: dict[Node, str], outputs: Sequence[Node] = (),
                  skip: set[Node] | frozenset = frozenset()) -> list[Node]:
    """The forward values ("F") in execution order, those read only by the backward placed early.

    A forward value that no forward value reads (and that is not an output)
    exists only for the backward sweep; a depth-first topological order puts
    it at the end of the forward, which keeps its inputs alive across the
    whole forward sweep. Here it runs right after its last forward input.

    Args:
        order0: nodes in topological order.
        cls: `regions(order0)`.
        outputs: graph outputs (read at the end).
        skip: forward values to leave out (e.g. free values, pulled on demand).

    Returns:
        list of the "F" nodes of order0 not in `skip`.
    """
    outs = set(outputs)
    has_f_reader: set[Node] = set()
    mark = has_f_reader.add
    get = cls.get
    for n in order0:
        if cls[n] == "F":
            for x in n.inputs:
                if get(x) == "F":
                    mark(x)
    early = {n for n in order0 if cls[n] == "F" and n not in skip and n not in has_f_reader and n not in outs}
    waiting: dict[Node, list[Node]] = {}
    pending: dict[Node, int] = {}
    for n in early:
        deps = {x for x in n.inputs if cls.get(x) == "F" and x not in skip}
        pending[n] = len(deps)
        for x in deps:
            waiting.setdefault(x, []).append(n)
    out: list[Node] = []
    ready = [n for n in order0 if n in early and pending[n] == 0]
    out.extend(ready)
    for n in order0:
        if cls[n] != "F" or n in skip or n in early:
            continue
        stack = [n]
        while stack:
            v = stack.pop()
            out.append(v)
            for w in waiting.get(v, ()):
                pending[w] -= 1
                if pending[w] == 0:
                    stack.append(w)
    return out


def _memory_aware(order0: list[Node], outputs: Sequence[Node], cls: dict[Node, str]) -> list[Node]:
    """Forward anchors in forward order, then backward anchors by decreasing forward position.

    Each backward node gets a key: the smallest forward position among the
    forward values it reads, directly or through backward inputs (for a
    recomputed value, the position of the forward value it duplicates;
    free, static and backward-only forward values have no position). In
    reverse mode the cotangent of a forward value is consumed in reverse
    forward order, so processing keys from high to low visits the backward
    sweep step by step; ties keep the topological order. Recomputed values,
    free values, static values (`static_values`), forward values that read
    only arguments and feed only the backward (`_backward_only`) and
    backward values that read no backward value are never
    anchors: they are pulled (depth-first, deepest input first) right before
    their first reader, so a recomputed segment lives only while its
    backward step runs.
    """
    free = free_values(order0, cls)
    # Free and static values (label indices, masks from integer inputs) are
    # not anchored: they are pulled by their first reader, and their forward
    # position does not order the backward sweep (a label index read by the
    # loss's gather would otherwise give the whole backward the key of the
    # index's early position, and every `1 - y*y` of a tanh chain would run
    # before the cotangent reaches it).
    pulled = free | static_values(order0, cls)
    fwd = forward_order(order0, cls, outputs, pulled | _backward_only(order0, cls, pulled))
    fpos: dict[Node, float] = {n: float(k) for k, n in enumerate(fwd)}
    # Recomputed values: the position of the forward value they duplicate
    # (same op, attrs and original inputs), else just after their inputs.
    struct: dict[tuple, Node] = {}
    orig: dict[Node, Node] = {}
    recomputed = "R" in cls.values()
    for n in order0 if recomputed else ():
        c = cls[n]
        if c == "F":
            orig[n] = n
            struct.setdefault((n.op.name, tuple(id(x) for x in n.inputs), n.attrs), n)
        elif c == "S":
            orig[n] = n
    for n in order0 if recomputed else ():
        if cls[n] != "R":
            continue
        ins = tuple(orig.get(x, x) for x in n.inputs)
        o = struct.get((n.op.name, tuple(id(x) for x in ins), n.attrs))
        if o is not None:
            orig[n] = o
            if o in fpos:
                fpos[n] = fpos[o]
            continue
        orig[n] = n
        ps = [fpos[x] for x in n.inputs if x in fpos]
        if ps:
            fpos[n] = max(ps) + 0.5
    key: dict[Node, float] = {}
    for n in order0:
        if cls[n] != "B":
            continue
        best = None
        for x in n.inputs:
            cx = cls[x]
            v = fpos.get(x) if cx in ("F", "R") else key.get(x) if cx == "B" else None
            if v is not None and (best is None or v < best):
                best = v
        if best is not None:
            key[n] = best
    # Backward values computed from forward values alone (x.T for a weight
    # gradient, 1 - y*y for tanh) are pulled by their readers, not anchored:
    # their inputs are live anyway, and computed early they would wait.
    anchored = []
    for n in key:
        for x in n.inputs:
            if cls[x] == "B":
                anchored.append(n)
                break
    anchors = list(fwd)
    # by decreasing key, ties in topological order: `anchored` is in that order, and a reversed
    # sort is stable too
    anchors += sorted(anchored, key=key.__getitem__, reverse=True)
    anchors += list(outputs)
    anchors += order0  # anything left (unused inputs, dead values of a malformed graph)

    return _pull_deepest_first(anchors, order0)


def _pull_deepest_first(anchors: list[Node], order0: list[Node]) -> list[Node]:
    """Each anchor in turn with the inputs it still needs, pulled depth-first, deepest input first.

    Sethi-Ullman order: a long recomputed chain is walked before the cheap leaves next to it, so
    each leaf is computed right before its reader instead of all leaves up front.
    """
    height: dict[Node, int] = {}
    for n in order0:
        h = 0
        for x in n.inputs:
            hx = height[x]
            if hx >= h:
                h = hx + 1
        height[n] = h
    by_height = height.__getitem__

    def deepest_first(ins: tuple) -> Sequence[Node]:
        if len(ins) == 2:
            a, b = ins
            return ins if by_height(a) >= by_height(b) else (b, a)
        # decreasing height; a reversed sort is stable too: ties keep input order
        return ins if len(ins) < 2 else sorted(ins, key=by_height, reverse=True)

    done: set[Node] = set()
    add = done.add
    out: list[Node] = []
    emit = out.append
    for a in anchors:
        if a in done:
            continue
        add(a)
        stack = [(a, iter(deepest_first(a.inputs)))]
        push = stack.append
        while stack:
            n, ins = stack[-1]
            for x in ins:  # resumes after the last input visited
                if x not in done:
                    add(x)
                    if x.inputs:
                        push((x, iter(deepest_first(x.inputs))))
                        break
                    emit(x)  # a leaf is done at once: what its push and pop would do
            else:
                stack.pop()
                emit(n)
    return out


def schedule(graph: Graph) -> list[Node]:
    """The execution order of a graph's nodes (inputs before readers).

    Forward-only graphs run in their topological order. Graphs with a
    backward region (built by reverse mode, possibly with recomputed values
    from checkpointing) get a memory-aware order: see `_memory_aware`. The
    evaluator, the LLVM arena and `peak_bytes` all use this order, and the
    result is cached per graph.

    Args:
        graph: any Graph.

    Returns:
        A list of every node of `graph.toposort()`, each after its inputs.
    """
    try:
        return _CACHE[graph]
    except (KeyError, TypeError):
        pass
    order0 = graph.toposort()
    cls = regions(order0)
    kinds = set(cls.values())
    if "B" in kinds or "R" in kinds:
        order = _memory_aware(order0, graph.outputs, cls)
    else:
        order = order0
    if any(op.extra.get("schedule") for op in set(map(_op_of, order))):
        order = _early_late(order)
    try:
        _CACHE[graph] = order
    except TypeError:  # pragma: no cover - graphs are weak-referenceable
        pass
    return order


def _early_late(order: list[Node]) -> list[Node]:
    """Reorder around nodes whose op asks for it (`Op.extra["schedule"]`, communication).

    Nodes that read a "late" node (a wait for a reduction), directly or
    not, run after everything else; each "late" node right before its first
    reader. An "early" node (a start) and the backward values it depends on
    run as soon as their inputs are ready. So a reduction is posted as soon as
    its bucket's gradients are final, and the rest of the backward sweep runs
    before its wait (`symgraph.ops.comm`). Apart from that the order is kept.
    """
    late = [n for n in order if n.op.extra.get("schedule") == "late"]
    readers: dict[Node, list[Node]] = {}
    for n in order:
        for x in n.inputs:
            readers.setdefault(x, []).append(n)
    after: set[Node] = set()  # the late nodes and what reads them
    stack = list(late)
    while stack:
        n = stack.pop()
        if n not in after:
            after.add(n)
            stack.extend(readers.get(n, ()))
    cls = regions(order)
    where = {n: i for i, n in enumerate(order)}
    out: list[Node] = []
    done: set[Node] = set()
    for part in ([n for n in order if n not in after], [n for n in order if n in after]):
        members = set(part)
        # early nodes and the backward (or recomputed) values they read in this part run when ready;
        # backward values computed from forward values alone (a weight's transpose, 1 - y*y) are not
        # pulled forward: the given order places them next to their readers
        cone: set[Node] = set()
        stack = [n for n in part if n.op.extra.get("schedule") == "early"]
        while stack:
            n = stack.pop()
            if n in cone:
                continue
            cone.add(n)
            stack.extend(x for x in n.inputs if x in members and cls.get(x) in ("B", "R")
                         and any(cls.get(y) in ("B", "R") for y in x.inputs))
        for n in part:
            if n in done or n in cone:
                if n in done:
                    continue
                if not all(x in done for x in n.inputs):
                    continue  # emitted by the worklist once its inputs are
            # ready cone nodes in the given order (a heap by position): a depth-first walk would run a
            # whole chain of the backward before the short reductions (bias gradients) next to it
            work = [(where[n], n.id, n)]
            while work:
                m = heapq.heappop(work)[2]
                if m in done:
                    continue
                done.add(m)
                out.append(m)
                for r in readers.get(m, ()):
                    if r in cone and r not in done and r in members and all(x in done for x in r.inputs):
                        heapq.heappush(work, (where[r], r.id, r))
        for n in part:  # a cone node whose inputs come only later in the part (not expected)
            if n not in done:
                done.add(n)
                out.append(n)
    # late nodes right before their first reader
    if late:
        lateset = set(late)
        seq = [n for n in out if n not in lateset]
        pos = {n: i for i, n in enumerate(seq)}
        before: dict[Node, list[Node]] = {}
        tail: list[Node] = []
        for n in late:
            rs = [pos[r] for r in readers.get(n, ()) if r in pos]
            if rs:
                before.setdefault(seq[min(rs)], []).append(n)
            else:
                tail.append(n)
        out = []
        for n in seq:
            out.extend(before.get(n, ()))
            out.append(n)
        out.extend(tail)
    return out


def last_use(order: Sequence[Node], outputs: Sequence[Node] = ()) -> dict[Node, int]:
    """For each node, the position in `order` of its last reader.

    Nodes that are graph outputs live to the end (position len(order)); nodes
    with no reader die right after they are computed (their own position).

    Returns:
        dict node -> index in order after which its buffer may be freed.
    """
    end = len(order)
    last: dict[Node, int] = {}
    for i, n in enumerate(order):
        last[n] = i
        for x in n.inputs:
            last[x] = i
    for o in outputs:
        last[o] = end
    return last


def live_bytes(order: Sequence[Node], outputs: Sequence[Node] = (), count_inputs: bool = False,
               select: Callable[[Node], bool] | None = None) -> list[int]:
    """Bytes of live values while each node of `order` runs (its output allocated, inputs not yet freed).

    Args:
        order: a schedule (topological order).
        outputs: nodes that stay alive to the end.
        count_inputs: include input and constant buffers (owned by the caller).
        select: count only nodes for which select(node) is true (e.g. forward
            activations); None counts every owned value.

    Returns:
        One entry per node of `order` (bytes).
    """
    last = last_use(order, outputs)
    frees: dict[int, int] = {}
    live = 0
    prof: list[int] = []
    for i, n in enumerate(order):
        owned = (count_inputs or n.op.kind != "source") and (select is None or select(n))
        if owned:
            live += n.nbytes
            frees[last[n]] = frees.get(last[n], 0) + n.nbytes
        prof.append(live)
        live -= frees.pop(i, 0)
    return prof


def peak_bytes(order: Sequence[Node], outputs: Sequence[Node] = (), count_inputs: bool = False,
               select: Callable[[Node], bool] | None = None) -> int:
    """Planned peak bytes of running `order` and freeing each value at its last use.

    Args:
        order: a schedule (topological order).
        outputs: nodes that stay alive to the end.
        count_inputs: include input and constant buffers (owned by the caller) in the peak.
        select: count only nodes for which select(node) is true (see `live_bytes`).

    Returns:
        The maximum over the schedule of the bytes of all live values (bytes).
    """
    return max(live_bytes(order, outputs, count_inputs, select), default=0)


def assign_offsets(intervals: Sequence[tuple[int, int, int]], alignment: int = 64) -> tuple[list[int], int]:
    """Place buffers with known lifetimes in one arena (greedy by size, first fit).

    Two buffers may share bytes only if their lifetimes do not overlap. Used
    by the LLVM backend with lifetimes measured in kernel steps (from the
    producing kernel to the last kernel reading the buffer).

    Args:
        intervals: (first step, last step, bytes) per buffer; steps inclusive.
        alignment: byte alignment of every offset.

    Returns:
        (offsets, total): the byte offset of each buffer and the arena size (bytes).

    References:
        Y. Pisarchyk, J. Lee, "Efficient memory management for deep neural
        net inference", 2020 (greedy by size for offset calculation).
    """
    if len(intervals) > ASSIGN_OFFSETS_ARRAYS_MIN:
        return _assign_offsets_arrays(intervals, alignment)
    order = sorted(range(len(intervals)), key=lambda i: (-intervals[i][2], intervals[i][0]))
    placed: list[tuple[int, int, int, int]] = []  # (offset, end offset, first, last)
    offsets = [0] * len(intervals)
    total = 0
    for i in order:
        first, last, size = intervals[i]
        size = -(-max(size, 1) // alignment) * alignment
        busy = sorted((o, e) for o, e, f, la in placed if not (la < first or f > last))
        off = 0
        for o, e in busy:
            if off + size <= o:
                break
            off = max(off, e)
        offsets[i] = off
        placed.append((off, off + size, first, last))
        total = max(total, off + size)
    return offsets, total


#: More buffers than this are placed by `_assign_offsets_arrays` (the same offsets, found with NumPy).
ASSIGN_OFFSETS_ARRAYS_MIN = 128


def _assign_offsets_arrays(intervals: Sequence[tuple[int, int, int]], alignment: int) -> tuple[list[int], int]:
    """`assign_offsets` with the placed buffers in arrays: the same greedy order and first fit, so the same offsets.

    The list version scans every placed buffer in Python for each new one: quadratic, 0.2 s of
    the first call of the 256-layer W5 depth chain's gradient (1,278 buffers). Here the scan,
    the sort of the overlapping buffers by (offset, end) and the first fit are array operations:
    the offset is the end of the overlapping buffers so far (their running maximum, from 0)
    before the first of them that leaves room below its start, or their largest end.
    """
    import numpy as np

    n = len(intervals)
    iv = np.asarray(intervals, dtype=np.int64).reshape(n, 3)
    order = sorted(range(n), key=lambda i: (-intervals[i][2], intervals[i][0]))
    p_off = np.zeros(n, np.int64)
    p_end = np.zeros(n, np.int64)
    p_first = np.zeros(n, np.int64)
    p_last = np.zeros(n, np.int64)
    offsets = [0] * n
    total = 0
    for k, i in enumerate(order):
        first, last, size = (int(v) for v in iv[i])
        size = -(-max(size, 1) // alignment) * alignment
        mask = (p_last[:k] >= first) & (p_first[:k] <= last)
        off = 0
        if mask.any():
            o, e = p_off[:k][mask], p_end[:k][mask]
            idx = np.lexsort((e, o))
            o, e = o[idx], e[idx]
            before = np.maximum.accumulate(np.concatenate(([0], e[:-1])))
            fits = before + size <= o
            off = int(before[int(np.argmax(fits))]) if fits.any() else max(int(before[-1]), int(e[-1]))
        offsets[i] = off
        p_off[k], p_end[k], p_first[k], p_last[k] = off, off + size, first, last
        total = max(total, off + size)
    return offsets, total


def interval_peak(intervals: Sequence[tuple[int, int, int]]) -> int:
    """The largest total bytes of buffers alive at one step (lifetimes inclusive), bytes."""
    events: dict[int, int] = {}
    for first, last, size in intervals:
        events[first] = events.get(first, 0) + size
        events[last + 1] = events.get(last + 1, 0) - size
    live = peak = 0
    for step in sorted(events):
        live += events[step]
        peak = max(peak, live)
    return peak
