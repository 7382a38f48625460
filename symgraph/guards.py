"""Guards as outputs: the run-time checks of bounded loops, for backends that do not raise from native code.

A `guard(x, ok; message, location)` node (symgraph/ops/loops.py) is x after a
check that the flag `ok` is true; `sg.while_loop(..., max_steps=N)` puts one
on its result (`ok` = the condition is false after the N steps) and
`symgraph.scipy.integrate.odeint` on each interval's loop. The evaluator
raises `LoopLimitError` in the guard's `impl`. For compiled code, `hoist_guards`
rewrites a graph before the backend sees it: every guard becomes its value
input, and its flag an extra output of the graph, which `sg.compile` reads
after the call (`check_flags`). A guard inside a loop body becomes an extra
bool carry of that loop, and-ed every step (scan and while), or an extra output of
every branch (cond: true in the branches without it), so flags climb out of
any nesting of regions; derived regions (a reverse loop reads guards on its
cotangents) are rewritten the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import lax as L
from .autodiff import placeholder
from .branches import Branches, cond_node
from .errors import LoopLimitError, UnsupportedOpError
from .ir import Graph, Node, current_builder, meta, toposort
from .regions import Region, WhileRegion, scan_node, while_node
from .tree import tree_flatten, tree_unflatten

__all__ = ["hoist_guards", "check_flags", "has_guards"]

#: (message, location) of one hoisted guard
Info = tuple


def has_guards(graph: Graph) -> bool:
    """Whether the graph or one of its regions (at any depth) holds a guard."""
    return _Hoist().graph_has(graph.outputs)


class _Hoist:
    def __init__(self) -> None:
        self.regions: dict[int, Any] = {}  # id(region) -> (region, rewritten region or None, [Info])
        self.has: dict[int, bool] = {}

    def graph_has(self, outputs: list[Node]) -> bool:
        for n in toposort(outputs):
            if n.op.name == "guard":
                return True
            if n.op.extra.get("region") and self.region_has(n.attr("region")):
                return True
        return False

    def region_has(self, r: Any) -> bool:
        k = id(r)
        if k not in self.has:
            self.has[k] = any(self.graph_has(g.outputs) for g in r.subgraphs())
        return self.has[k]

    def outputs(self, outputs: list[Node]) -> tuple[list[Node], list[Node], list[Info]]:
        """(outputs without guards, flag nodes, their infos): flags in topological order, one per distinct guard."""
        b = current_builder()
        sub: dict[Node, Node] = {}
        flags: dict[tuple, None] = {}
        for n in toposort(outputs):
            ins = tuple(sub.get(x, x) for x in n.inputs)
            if n.op.name == "guard":
                sub[n] = ins[0]
                flags.setdefault((ins[1], n.attr("message"), n.attr("location")))
                continue
            if n.op.extra.get("region") and self.region_has(n.attr("region")):
                new, fl = self.region_node(n, ins)
                sub[n] = new
                for f in fl:
                    flags.setdefault(f)
                continue
            if any(a is not x for a, x in zip(ins, n.inputs)):
                sub[n] = b.remake(n, ins, meta(n))
        fl = list(flags)
        return [sub.get(o, o) for o in outputs], [f[0] for f in fl], [(f[1], f[2]) for f in fl]

    def region(self, r: Any) -> tuple[Any, list[Info]]:
        k = id(r)
        if k not in self.regions:
            if isinstance(r, Region):
                self.regions[k] = (r,) + self._scan(r)
            elif isinstance(r, WhileRegion):
                self.regions[k] = (r,) + self._while(r)
            elif isinstance(r, Branches):
                self.regions[k] = (r,) + self._branches(r)
            else:  # pragma: no cover - a new region kind
                raise UnsupportedOpError(f"guards: cannot hoist out of a {type(r).__name__}")
        return self.regions[k][1:]

    def _scan(self, r: Region) -> tuple[Region, list[Info]]:
        body = r.body
        outs, flags, infos = self.outputs(body.outputs)
        ins = body.inputs
        nc, nk = r.nc, r.nk
        acc = [placeholder((), np.dtype(bool), "guard_ok") for _ in flags]
        new_outs = outs[:nk] + [L.binary("logical_and", a, f) for a, f in zip(acc, flags)] + outs[nk:]
        g = Graph(ins[:nc + nk] + acc + ins[nc + nk:], new_outs, name=body.name)
        new = Region(g, nc, nk + len(flags), r.nx, r.length, r.reverse, name=r.name, simplify_body=False)
        if r.parent is not None and self.region_has(r.parent):
            p, pinfos = self.region(r.parent)
            if pinfos == infos:
                new.parent = p
        elif r.parent is not None and not infos:  # pragma: no cover - a saver holds a guard its loop does not
            new.parent = r.parent
        return new, infos

    def _while(self, r: WhileRegion) -> tuple[WhileRegion, list[Info]]:
        if self.graph_has(r.cond.outputs):
            raise UnsupportedOpError(f"{r.name}: a bounded loop (while_loop with max_steps, odeint) inside another "
                                     f"while_loop's cond_fun is not compiled; move it into body_fun")
        outs, flags, infos = self.outputs(r.body.outputs)
        ins = r.body.inputs
        nk = r.nk
        acc = [placeholder((), np.dtype(bool), "guard_ok") for _ in flags]
        new_ins = ins[:nk] + acc + ins[nk:]
        body = Graph(new_ins, outs + [L.binary("logical_and", a, f) for a, f in zip(acc, flags)], name=r.body.name)
        cond = Graph(new_ins, list(r.cond.outputs), name=r.cond.name)
        return WhileRegion(cond, body, nk + len(flags), name=r.name, simplify_body=False), infos

    def _branches(self, r: Branches) -> tuple[Branches, list[Info]]:
        per = [self.outputs(g.outputs) for g in r.graphs]
        true = L.constant(np.True_)
        graphs, infos = [], []
        nf = sum(len(f) for _, f, _ in per)
        at = 0
        for (outs, flags, inf), g in zip(per, r.graphs):
            row = [true] * nf
            row[at:at + len(flags)] = flags
            at += len(flags)
            infos += inf
            graphs.append(Graph(g.inputs, outs + row, name=g.name))
        return Branches(graphs, name=r.name, simplify_body=False), infos

    def region_node(self, n: Node, ins: tuple) -> tuple[Node, list[tuple]]:
        """The rewritten node of region node `n` on (rewritten) `ins`, and its flags (node, message, location)."""
        r = n.attr("region")
        new, infos = self.region(r)
        i = n.attr("index")
        nf = len(infos)
        true = L.constant(np.True_)
        op = n.op.name
        if op == "scan":
            nc, nk = r.nc, r.nk
            new_ins = list(ins[:nc + nk]) + [true] * nf + list(ins[nc + nk:])
            node = scan_node(new_ins, new, i if i < nk else i + nf)
            flags = [scan_node(new_ins, new, nk + f) for f in range(nf)]
        elif op == "while":
            nk = r.nk
            new_ins = list(ins[:nk]) + [true] * nf + list(ins[nk:])
            node = while_node(new_ins, new, i)
            flags = [while_node(new_ins, new, nk + f) for f in range(nf)]
        else:  # cond
            m = r.num_outputs
            node = cond_node(list(ins), new, i)
            flags = [cond_node(list(ins), new, m + f) for f in range(nf)]
        return node, [(f, msg, loc) for f, (msg, loc) in zip(flags, infos)]


def hoist_guards(graph: Graph) -> tuple[Graph, list[Info]]:
    """The graph without guards, their flags as extra outputs, and one (message, location) per flag.

    Returns:
        (graph, infos): `graph` unchanged and [] when it holds no guard; else a graph whose
        outputs are the original ones followed by one bool scalar per flag, and whose
        `out_tree` is the pair (the original structure, a tuple of the flags).
    """
    h = _Hoist()
    if not h.graph_has(graph.outputs):
        return graph, []
    outs, flags, infos = h.outputs(graph.outputs)
    n = len(graph.outputs)
    user = tree_unflatten(graph.out_tree, list(range(n))) if graph.out_tree is not None else list(range(n))
    tree = tree_flatten((user, tuple(range(n, n + len(flags)))))[1]
    return Graph(graph.inputs, outs + flags, graph.in_tree, tree, name=graph.name), infos


def check_flags(result: Any, infos: list[Info]) -> Any:
    """The user's result from a hoisted graph's result (user result, flags); raises the first failed guard's error.

    Raises:
        LoopLimitError: a flag is false (the message and user line of its guard).
    """
    value, flags = result
    for f, (message, location) in zip(flags, infos):
        if not bool(f):
            raise LoopLimitError(message, location)
    return value
