"""The rewrite stage of `simplify`: one bottom-up sweep applying the rule tables at every node.

Rebuilding re-interns every node (CSE), keeps only what the outputs reach
(DCE), removes the `copy` nodes of finished transformations, turns uniform
constants into splats and applies `rules` at each node until none fires.
"""

from __future__ import annotations

from ...ir import Graph, Node, meta
from .analysis import _CONST, _removable_copy_tag, _uniform
from .context import _constant, _Run, _swapped
from .options import MAX_LOCAL_STEPS
from .rules import _rules_for


def _rewrite_node(node: Node, ins: tuple, run: _Run) -> Node:
    """Apply generic and per-op rules at one node until none fires (bounded).

    `node` may be a node of the input graph and `ins` its rewritten inputs: rules
    read only op, attrs, shape, dtype and tag from `node`, so nothing is built
    unless no rule fires (then `node` is adopted or rebuilt on `ins`).
    """
    if node.tag is None and ins:
        if _swapped(node.op, ins):
            ins = (ins[1], ins[0]) + ins[2:]
        if not _rules_for(node, ins):  # no rule to try (the common case): what the loop below would do
            node = run.builder.adopt_canonical(node, ins)
            run.stable.add(node)
            return node
    stats = run.stats
    built = False
    for _ in range(MAX_LOCAL_STEPS):
        if node.tag is not None or not ins:
            break
        if _swapped(node.op, ins):
            ins = (ins[1], ins[0]) + ins[2:]
        for fn in _rules_for(node, ins):
            r = fn(node, ins)
            if r is not None and r is not node:
                stats[fn.__name__] += 1
                run.changes += 1
                node, ins, built = r, r.inputs, True
                break
        else:
            if not built:
                node = run.builder.adopt_canonical(node, ins)
            run.stable.add(node)
            return node
    return node if built else run.builder.adopt(node, ins)


def rewrite_pass(graph: Graph, run: _Run) -> Graph:
    """Graph -> Graph: CSE, copy removal, constant folding and the rule tables, bottom-up.

    Walks the nodes reachable from the outputs (so dead code disappears) in
    topological order, re-interns each with its rewritten inputs and applies
    `GENERIC_RULES` and `RULES[op]` until none fires. Reader counts of the
    input graph tell rules which nodes have several readers.
    """
    b = run.builder
    order = graph.toposort()
    count: dict[Node, int] = {}
    for n in order:
        for x in n.inputs:
            count[x] = count.get(x, 0) + 1
    for o in graph.outputs:
        count[o] = count.get(o, 0) + 1
    readers: dict[Node, int] = {}
    prev_readers = run.readers
    run.readers = readers
    stable = run.stable
    new: dict[Node, Node] = {}
    get_readers, get_prev, get_count = readers.get, prev_readers.get, count.get
    for n in order:
        op = n.op
        nins = n.inputs
        if not nins and (n.tag is not None or op.name == "input"):
            new[n] = n
            readers[n] = get_readers(n, 0) + get_count(n, 0)
            continue
        if n in stable:
            for x in nins:
                if new[x] is not x or get_readers(x) != get_prev(x):
                    break
            else:  # no rule fired here last round and nothing it reads has changed
                new[n] = n
                readers[n] = get_readers(n, 0) + get_count(n, 0)
                continue
        if len(nins) == 2:
            ins = (new[nins[0]], new[nins[1]])
        elif len(nins) == 1:
            ins = (new[nins[0]],)
        else:
            ins = tuple([new[x] for x in nins])
        b.cur_meta = meta(n)
        if op.name == "copy" and _removable_copy_tag(n.tag):
            r = ins[0]  # copy(x) -> x  (fresh variables of finished transformations)
            run.stats["remove_copy"] += 1
            run.changes += 1
        elif n.tag is not None:
            r = b.adopt(n, ins)  # protected: rebuilt as is
        elif op is _CONST:
            a = n.attrs[0][1].array
            if a.ndim > 0 and a.size > 1 and _uniform(a):
                r = _constant(a, a.dtype)  # uniform constant -> broadcast_to(0-d constant)
                run.stats["splat_constant"] += 1
                run.changes += 1
            else:
                r = b.adopt(n, ins)
        else:
            r = _rewrite_node(n, ins, run)
        new[n] = r
        readers[r] = get_readers(r, 0) + get_count(n, 0)
    outs = [new[o] for o in graph.outputs]
    if all(a is o for a, o in zip(outs, graph.outputs)):
        return graph  # the same nodes: keep the graph (and its topological order)
    return Graph(graph.inputs, outs, graph.in_tree, graph.out_tree, name=graph.name)
