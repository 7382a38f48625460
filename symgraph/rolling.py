"""Rolling: a chain of repeated traced loop bodies becomes one `scan` loop region (`sg.compile(roll=True)`).

A Python `for` loop over traced values traces to K copies of its body. This
pass finds such a chain in a graph and rewrites it into one `scan` node group
(symgraph.regions.Region) whose body is one copy, so every later stage
(differentiation, simplify, fusion, LLVM) works on one body instead of K.

What is a chain (all checked exactly on the nodes, never guessed):
- K >= `min_steps` steps; step s has one node per body position, with the
  same op, attrs, shape, dtype and tag as that position in every other step;
- each input of a body position is, in every step, the same kind of value:
  a node of the same step (internal), the previous step's node of one
  position (a carry; in the first step its initial value, which must have
  the carry's shape and dtype), one node shared by all steps (a loop
  invariant: weights; constant-only subgraphs stay inside the body), or a
  per-step value from outside the chain (slices `xs[t]` of an input become
  one slice, constants one stacked constant, anything else a stack: the
  loop's xs);
- nothing the loop reads depends on the loop (no cycle through the outside).
Values of the chain read outside it become the loop's final carries (the
last step of a carry) or its stacked ys (read back by slicing).

How a chain is found: nodes are coloured by op, shape and dtype and two
rounds of their inputs' colours (Weisfeiler-Lehman refinement); for a colour
class with >= `min_steps` members, two late members are taken as the same
body position in consecutive steps and a shift map (node -> the node at its
position one step later) is grown from them by walking inputs pairwise (and
readers where they match uniquely). Its orbits are the body positions; steps
are assigned from the anchor's orbit (an input in the same step unless it is
the anchor's own position), and the steps every position covers form the
loop. Steps outside that range (a first step that traced differently, say
`0 * h` folded away) stay unrolled.

References:
    Weisfeiler & Lehman (1968) colour refinement, as used for graph
    isomorphism candidates; loop rerolling in compilers (LLVM's LoopReroll
    pass; Rocha et al., "Loop Rolling for Code Size Reduction", CGO 2022)
    for the idea of finding isomorphic unrolled iterations with a carried
    dependence.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections import deque
from typing import Any, Iterator, Sequence

import numpy as np

from . import lax as L
from .autodiff import placeholder
from .ir import Builder, Graph, Node, collector_paused, current_builder, meta, source_location, toposort, tracing_active
from .regions import Region, scan_node

__all__ = ["MIN_STEPS", "roll", "roll_nodes", "rolling", "rolling_active"]

#: The fewest repeated steps that are rolled (a shorter chain stays unrolled).
MIN_STEPS = 8
#: Anchor candidates (colour class, lag) tried per search before giving up.
MAX_TRIES = 12
#: Largest number of members of one colour class per step that is looked for (`_periodic_pair`).
MAX_LAG = 8
#: Members of a colour class after the loop (the same op on the final carry) that are skipped.
TRAILING = 3
#: Searches (each rolls one chain) per call.
MAX_LOOPS = 64


class _State(threading.local):
    def __init__(self) -> None:
        self.min_steps: int | None = None  # rolling inside transformations while a compile traces
        self.count = 0


_STATE = _State()



@contextlib.contextmanager
def rolling(min_steps: int = MIN_STEPS) -> Iterator[_State]:
    """While active in this thread, `grad`/`value_and_grad`/`vjp`/`jvp` roll the traced primal before differentiating.

    `sg.compile(roll=True)` traces under it, so the derivative of a rolled
    loop is the `scan` rule's (a reverse loop), not K unrolled VJPs.
    Yields the state; its `count` is the number of loops rolled.
    """
    prev_m, prev_c = _STATE.min_steps, _STATE.count
    _STATE.min_steps, _STATE.count = int(min_steps), 0
    try:
        yield _STATE
    finally:
        _STATE.min_steps, _STATE.count = prev_m, prev_c


def rolling_active() -> bool:
    """Whether a `rolling()` block is active in this thread."""
    return _STATE.min_steps is not None


def roll_traced(nodes: Sequence[Node]) -> list[Node]:
    """`roll_nodes(nodes)` when `rolling()` is active (counting the loops), else `nodes` unchanged."""
    if _STATE.min_steps is None:
        return list(nodes)
    out, n = roll_nodes(nodes, _STATE.min_steps)
    _STATE.count += n
    return out


# --------------------------------------------------------------------------- the pass


def roll(graph: Graph, min_steps: int = MIN_STEPS) -> tuple[Graph, int]:
    """Roll the chains of repeated bodies of `graph` into `scan` loops.

    Args:
        graph: a traced Graph.
        min_steps: the fewest steps a chain needs to be rolled (>= 2).

    Returns:
        (graph computing the same outputs, number of loops rolled). Values are
        those of the unrolled graph: every step runs the same ops on the same
        operands (the evaluator gives the same bits; compiled code may fuse
        differently, a difference of rounding).
    """
    with collector_paused():  # as trace and simplify: many small objects, no cycles to collect meanwhile
        if tracing_active():
            outs, n = roll_nodes(graph.outputs, min_steps)
        else:
            with Builder():  # a pass's own builder (as simplify's), not the thread's default one
                outs, n = roll_nodes(graph.outputs, min_steps)
    return (graph if n == 0 else graph.replace(outputs=outs)), n


def roll_nodes(outputs: Sequence[Node], min_steps: int = MIN_STEPS) -> tuple[list[Node], int]:
    """Roll the chains in the graph of `outputs`; returns (new outputs, number of loops rolled).

    Builds in the current builder (inside a trace: the trace's).
    """
    outs = list(outputs)
    count = 0
    for _ in range(MAX_LOOPS):
        new = _roll_one(outs, max(2, int(min_steps)))
        if new is None:
            break
        outs = new
        count += 1
    return outs, count


def _eligible(n: Node) -> bool:
    """Whether `n` may be a body node: not a source (input, constant) and not a host op (communication)."""
    return n.op.kind != "source" and n.inputs != () and not n.op.extra.get("host")


def _same(u: Node, v: Node) -> bool:
    return (u.op is v.op and u.attrs == v.attrs and u.shape == v.shape and u.dtype == v.dtype
            and u.tag == v.tag and len(u.inputs) == len(v.inputs))


def _colours(order: list[Node]) -> dict[Node, int]:
    """Two rounds of Weisfeiler-Lehman refinement of (op, shape, dtype)."""
    ids: dict[Any, int] = {}
    put = ids.setdefault
    c = {n: put((n.op.name, n.shape, n.dtype.str), len(ids)) for n in order}
    # a round's key is (own colour, *input colours): a flat int tuple (the same classes and numbers as
    # (own, (inputs...)), as flattening is one-to-one, and the first round's keys start with a str)
    for _ in range(2):
        new: dict[Node, int] = {}
        for n in order:
            ins = n.inputs
            k = len(ins)
            if k == 1:
                key: tuple = (c[n], c[ins[0]])
            elif k == 2:
                key = (c[n], c[ins[0]], c[ins[1]])
            elif k == 0:
                key = (c[n],)
            else:
                key = (c[n], *[c[x] for x in ins])
            new[n] = put(key, len(ids))
        c = new
    return c


def _grow(u0: Node, v0: Node, readers: dict[Node, list[Node]],
          colour: dict[Node, int] | None = None) -> dict[Node, Node]:
    """The shift map grown from the pair (u0, v0): node -> the node at its position one step later.

    Readers of a paired node are paired when they match uniquely by op,
    attrs and the positions they read it at; a group that is ambiguous so
    (an LSTM's top hidden state is read by three `mul`s: the next step's two
    gates and the output layer) is split further by the `colour` of the
    readers' other inputs (the weight each `mul` multiplies by).
    """
    phi: dict[Node, Node] = {}
    inv: dict[Node, Node] = {}

    def walk(u: Node, v: Node) -> list[Node]:
        added = []
        stack = [(u, v)]
        while stack:
            a, b = stack.pop()
            if a is b or a in phi or b in inv:
                continue
            op, ia, ib = a.op, a.inputs, b.inputs  # `_same(a, b)` and `_eligible(a)`, inlined (the hot loop)
            if (op is not b.op or a.attrs != b.attrs or a.shape != b.shape or a.dtype != b.dtype
                    or a.tag != b.tag or len(ia) != len(ib)):
                continue
            if op.kind == "source" or not ia or op.extra.get("host"):
                continue
            phi[a] = b
            inv[b] = a
            added.append(a)
            stack.extend(zip(ia, ib))
        return added

    work = deque(walk(u0, v0))
    while work:  # readers that match uniquely (by op, attrs and the positions they read the pair at)
        u = work.popleft()
        if all(r in phi for r in readers.get(u, ())):
            continue  # every reader already paired (the common case: the walk came through them)
        v = phi[u]
        ru = _by_key(readers.get(u, ()), u)
        rv = _by_key(readers.get(v, ()), v)
        for k, a in ru.items():
            b = rv.get(k)
            if b is None:
                continue
            if (len(a) > 1 or len(b) > 1) and colour is not None:
                ca, cb = _by_colour(a, u, colour), _by_colour(b, v, colour)
                pairs = [(x, cb[c]) for c, x in ca.items() if c in cb]
            elif len(a) == 1 and len(b) == 1:
                pairs = [(next(iter(a)), next(iter(b)))]
            else:
                pairs = []
            for ra, rb in pairs:
                if ra is not None and rb is not None and ra not in phi and rb not in inv:
                    work.extend(walk(ra, rb))
    return phi


def _by_colour(rs: set[Node], x: Node, colour: dict[Node, int]) -> dict[Any, Node | None]:
    """Readers `rs` of `x` by the colours of their other inputs; None where two readers share them."""
    out: dict[Any, Node | None] = {}
    for r in rs:
        k = tuple(-1 if y is x else colour.get(y, -2) for y in r.inputs)
        out[k] = None if k in out else r
    return out


def _by_key(rs: Sequence[Node], x: Node) -> dict[Any, set[Node]]:
    """Readers `rs` of `x` grouped by (op, attrs, shape, dtype, tag, the input positions where they read x)."""
    out: dict[Any, set[Node]] = {}
    for r in rs:
        k = (r.op.name, r.attrs, r.shape, r.dtype, r.tag, tuple(i for i, y in enumerate(r.inputs) if y is x))
        out.setdefault(k, set()).add(r)
    return out


class _Chain:
    """A validated chain: steps [s0, s1] of body positions (orbits), and how each input of a position is read."""

    def __init__(self, orbits: list[list[Node]], off: list[int], s0: int, s1: int):
        self.orbits, self.off, self.s0, self.s1 = orbits, off, s0, s1

    def node(self, o: int, s: int) -> Node:
        return self.orbits[o][s - self.off[o]]


def _find(order: list[Node], pos: dict[Node, int], readers: dict[Node, list[Node]], min_steps: int,
          outset: set[Node]) -> Any:
    colour = _colours(order)
    classes: dict[int, list[Node]] = {}
    for n in order:
        if _eligible(n):
            classes.setdefault(colour[n], []).append(n)
    cands = sorted((c for c in classes.values() if len(c) >= min_steps), key=lambda c: (-len(c), pos[c[-1]]))
    tries = 0
    for members in cands:
        pair = _periodic_pair(sorted(members, key=lambda n: n.id), min_steps)
        if pair is None:
            continue
        if tries >= MAX_TRIES:
            return None
        tries += 1
        plan = _plan(pair[0], pair[1], order, pos, readers, min_steps, outset, colour)
        if plan is not None:
            return plan
    return None


def _periodic_pair(members: list[Node], min_steps: int) -> tuple[Node, Node] | None:
    """Two members of a colour class at the same body position of consecutive steps, or None.

    A traced loop creates its steps one after the other, so the creation
    numbers (`Node.id`) of a body position's nodes are periodic: the lag L
    (members of the class per step) is the smallest with id[k + L] - id[k]
    constant over `min_steps - 1` members (a few trailing members after the
    loop are skipped). A smaller lag would pair different positions of one
    step (RK4's four stages look alike), which grows a wrong shift map.
    """
    ids = [n.id for n in members]
    c, w = len(ids), min_steps - 1
    for lag in range(1, MAX_LAG + 1):
        for end in range(c - 1, max(c - 1 - TRAILING, lag + w - 1) - 1, -1):
            d = ids[end] - ids[end - lag]
            if all(ids[k] - ids[k - lag] == d for k in range(end - w + 1, end)):
                return members[end - lag], members[end]
    return None


def _plan(u0: Node, v0: Node, order: list[Node], pos: dict[Node, int], readers: dict[Node, list[Node]],
          min_steps: int, outset: set[Node], colour: dict[Node, int] | None = None) -> Any:
    """The rewrite plan of the chain through the pair (u0, v0), or None when it is not a rollable chain."""
    phi = _grow(u0, v0, readers, colour)
    if len(phi) < min_steps - 1:
        return None
    inv = {v: u for u, v in phi.items()}
    # orbits: the body positions
    orb: dict[Node, int] = {}
    orbits: list[list[Node]] = []
    for n in phi:
        if n in inv:
            continue
        chain = [n]
        while chain[-1] in phi:
            chain.append(phi[chain[-1]])
        for m in chain:
            orb[m] = len(orbits)
        orbits.append(chain)
    if len(orb) != len(phi) + len(orbits):  # a cycle of the shift map: not a chain
        return None
    # steps: a traced loop creates step after step, so a node's step is the number of anchor-position
    # nodes created up to it (a cut in creation order: every edge goes forward, to the same or the next step)
    cut = [m.id for m in orbits[orb[v0]]]
    if any(a >= b for a, b in zip(cut, cut[1:])):
        return None
    kept: list[list[Node]] = []
    off: list[int] = []
    for o in orbits:
        st = [bisect.bisect_right(cut, m.id) for m in o]
        best, a = (0, 0), 0  # the longest run of consecutive steps
        for k in range(1, len(o) + 1):
            if k == len(o) or st[k] != st[k - 1] + 1:
                if k - a > best[1] - best[0]:
                    best = (a, k)
                a = k
        if best[1] - best[0] >= min_steps:
            kept.append(o[best[0]:best[1]])
            off.append(st[best[0]])
    if not kept:
        return None
    s0 = max(off)
    s1 = min(f + len(o) - 1 for f, o in zip(off, kept))
    if s1 - s0 + 1 < min_steps:
        return None
    for start in (s0, s0 + 1):  # a first step whose carry enters with another shape (a broadcast scalar) stays out
        if s1 - start + 1 >= min_steps:
            plan = _check(_Chain(kept, off, start, s1), order, readers, outset)
            if plan is not None:
                return plan
    return None


def _check(ch: _Chain, order: list[Node], readers: dict[Node, list[Node]], outset: set[Node]) -> Any:
    """Classify every input of every body position over the steps; None when one fits no kind."""
    s0, s1 = ch.s0, ch.s1
    steps = range(s0, s1 + 1)
    where: dict[Node, tuple[int, int]] = {}  # loop node -> (position, step)
    for o, orbit in enumerate(ch.orbits):
        base = ch.off[o]
        for s in steps:
            where[orbit[s - base]] = (o, s)
    kinds: list[list[tuple]] = []
    carries: dict[int, Node] = {}  # carried position -> initial value
    outside: set[Node] = set()  # values the loop reads from outside
    for o in range(len(ch.orbits)):
        row = []
        seg = ch.orbits[o][s0 - ch.off[o]:s1 - ch.off[o] + 1]  # the position's nodes of steps s0..s1
        for j in range(len(ch.orbits[o][0].inputs)):
            ins = [m.inputs[j] for m in seg]
            first = where.get(ins[0])
            if first is not None and first[1] == s0 and all(where.get(x) == (first[0], s) for x, s in zip(ins, steps)):
                row.append(("internal", first[0]))
                continue
            if first is None and len(ins) > 1:
                w = where.get(ins[1])
                if w is not None and w[1] == s0 and all(where.get(x) == (w[0], s - 1)
                                                        for x, s in zip(ins[1:], steps[1:])):
                    init = ins[0]
                    if init.shape != ins[1].shape or init.dtype != ins[1].dtype:
                        return None
                    if carries.setdefault(w[0], init) is not init:
                        return None
                    outside.add(init)
                    row.append(("carry", w[0]))
                    continue
            if any(x in where for x in ins):
                return None
            if all(x is ins[0] for x in ins):
                outside.add(ins[0])
                row.append(("const", ins[0]))
                continue
            if any(x.shape != ins[0].shape or x.dtype != ins[0].dtype for x in ins):
                return None
            outside.update(ins)
            row.append(("xs", tuple(ins)))
        kinds.append(row)
    # nothing the loop reads may depend on the loop
    tainted: set[Node] = set()
    for n in order:
        if n not in where and any(x in where or x in tainted for x in n.inputs):
            tainted.add(n)
    if outside & tainted:
        return None
    # values read outside the loop
    exposed: dict[int, set[int]] = {}
    for n, (o, s) in where.items():
        if n in outset or any(r not in where for r in readers.get(n, ())):
            exposed.setdefault(o, set()).add(s)
    return ch, kinds, carries, exposed, where


def _has_input(order: list[Node]) -> dict[Node, bool]:
    """Whether each node depends on an input node (else it is a constant subgraph, kept inside bodies)."""
    dep: dict[Node, bool] = {}
    get = dep.get
    for n in order:
        if n.op.name == "input":
            dep[n] = True
            continue
        d = False
        for x in n.inputs:
            if get(x, True):
                d = True
                break
        dep[n] = d
    return dep


def _stack(seq: tuple[Node, ...]) -> Node:
    """The per-step values `seq` stacked along a new axis 0 (a slice of their source when they are its rows)."""
    x0 = seq[0]
    if all(x.op.name == "constant" for x in seq):
        return L.constant(np.stack([np.asarray(x.op.impl(**x.params)) for x in seq]).astype(x0.dtype, copy=False))
    if x0.op.name == "slice" and x0.shape and x0.shape[0] == 1:
        src = x0.inputs[0]
        a = x0.attr("starts")
        ok = True
        for k, x in enumerate(seq):
            if x.op.name != "slice" or x.inputs[0] is not src:
                ok = False
                break
            st, sp, stp = x.attr("starts"), x.attr("stops"), x.attr("steps")
            if (stp[0] != 1 or st[0] != a[0] + k
                    or sp[0] != st[0] + 1 or st[1:] != a[1:] or sp[1:] != x0.attr("stops")[1:]
                    or stp[1:] != x0.attr("steps")[1:]):
                ok = False
                break
        if ok:
            rows = L.bind("slice", src, starts=a, stops=(a[0] + len(seq),) + x0.attr("stops")[1:],
                          steps=x0.attr("steps"))
            return L.reshape(rows, (len(seq),) + x0.shape)
    return L.bind("concatenate", *[L.reshape(x, (1,) + x.shape) for x in seq], axis=0)


def _roll_one(outs: list[Node], min_steps: int) -> list[Node] | None:
    order = toposort(outs)
    pos = {n: i for i, n in enumerate(order)}
    readers: dict[Node, list[Node]] = {n: [] for n in order}
    for n in order:
        for x in n.inputs:
            readers[x].append(n)
    outset = set(outs)
    plan = _find(order, pos, readers, min_steps, outset)
    if plan is None:
        return None
    ch, kinds, carries, exposed, where = plan
    with source_location(meta(ch.node(0, ch.s0)).location):  # new nodes point at the loop's line
        return _rewrite(order, outs, ch, kinds, carries, exposed, where)


def _rewrite(order: list[Node], outs: list[Node], ch: _Chain, kinds: list, carries: dict, exposed: dict,
             where: dict) -> list[Node]:
    """The graph of `outs` with the chain replaced by a `scan` loop over one step's body."""
    s0, s1 = ch.s0, ch.s1
    T = s1 - s0 + 1
    b = current_builder()
    dep = _has_input(order)
    # the body: one step (s0) rebuilt on placeholders
    carried = sorted(carries)
    cph = {o: placeholder(ch.node(o, s0).shape, ch.node(o, s0).dtype, "carry") for o in carried}
    consts: dict[Node, Node] = {}
    xs: dict[tuple, tuple[tuple[Node, ...], Node]] = {}
    sub: dict[Node, Node] = {}
    rep = sorted(range(len(ch.orbits)), key=lambda o: ch.node(o, s0).id)
    for o in rep:
        n = ch.node(o, s0)
        ins = []
        for (kind, what), x in zip(kinds[o], n.inputs):
            if kind == "internal":
                ins.append(sub[ch.node(what, s0)])
            elif kind == "carry":
                ins.append(cph[what])
            elif kind == "const":
                if not dep[what]:
                    ins.append(what)  # a constant subgraph: stays inside the body
                else:
                    if what not in consts:
                        consts[what] = placeholder(what.shape, what.dtype, "closure")
                    ins.append(consts[what])
            else:
                key = tuple(v.id for v in what)  # ids: a tuple of nodes would compare them with `==` on a collision
                if key not in xs:
                    xs[key] = (what, placeholder(x.shape, x.dtype, "x"))
                ins.append(xs[key][1])
        sub[n] = b.remake(n, tuple(ins), meta(n))
    ys = sorted(o for o, ss in exposed.items() if not (o in carries and ss == {s1}))
    body_outs = [sub[ch.node(o, s0)] for o in carried] + [sub[ch.node(o, s0)] for o in ys]
    body = Graph(list(consts.values()) + [cph[o] for o in carried] + [p for _, p in xs.values()], body_outs,
                 name="rolled")
    region = Region(body, len(consts), len(carried), len(xs), T, name=f"rolled loop ({T} steps)")
    loop_in = list(consts) + [carries[o] for o in carried] + [_stack(seq) for seq, _ in xs.values()]
    repl: dict[Node, Node] = {}
    nk = len(carried)
    for i, o in enumerate(carried):
        repl[ch.node(o, s1)] = scan_node(loop_in, region, i)
    for i, o in enumerate(ys):
        stacked = scan_node(loop_in, region, nk + i)
        shape = ch.node(o, s0).shape
        for s in exposed[o]:
            if o in carries and s == s1:
                continue
            k = s - s0
            row = L.bind("slice", stacked, starts=(k,) + (0,) * len(shape), stops=(k + 1,) + shape,
                         steps=(1,) * (len(shape) + 1))
            repl[ch.node(o, s)] = L.reshape(row, shape)
    # the rest of the graph on the loop's outputs
    new: dict[Node, Node] = {}
    for n in order:
        if n in where:
            continue
        ins = tuple(repl[x] if x in repl else new.get(x, x) for x in n.inputs)
        if any(a is not x for a, x in zip(ins, n.inputs)):
            new[n] = b.remake(n, ins, meta(n))
    return [repl[o] if o in repl else new.get(o, o) for o in outs]
