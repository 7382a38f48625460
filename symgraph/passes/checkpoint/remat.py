"""Rematerialization: the one rewrite every checkpointing plan goes through (`rematerialize`).

Backward reads of unsaved forward values get copies recomputed from saved
values, tagged ("remat", k) so CSE never merges them back, with role
"recomputed". The module holds the counter of those tags (`_ctx_ids`).
"""

from __future__ import annotations

import itertools
from typing import Any

from ...ir import Builder, Graph, Node, meta, role, source_location
from .analysis import _Analysis
from .plan import Plan, _Context

_ctx_ids = itertools.count(1)  # k of the ("remat", k) tags, one per recomputation context


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
        # elementwise identities (copy, stop_gradient) alias their input; a fresh-tagged copy too
        if v.op.identity_of == 0 and v.op.kind == "elementwise" and not v.op.marker and v.tag is None or (
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
            with source_location(m.location), role(m.role if m.role in ("backward", "recomputed") else "backward",
                                                         m.origin):
                new[n] = b.make(n.op, ins, n.attrs, n.tag)
    g = a.graph
    return Graph(g.inputs, [new[o] for o in g.outputs], g.in_tree, g.out_tree, name=g.name)
