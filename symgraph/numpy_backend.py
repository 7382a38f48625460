"""The "numpy" backend: runs one compiled signature's optimized graph with the NumPy reference evaluator."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .backend import Backend, Executable
from .interpreter import evaluate_flat
from .ir import Graph, Node
from .passes.schedule import peak_bytes
from .signature import COMPILED_CASTING, Signature, donatable

__all__ = ["NumpyBackend", "NumpyExecutable"]


class NumpyExecutable(Executable):
    """One signature's graph run by the evaluator (`symgraph.interpreter.evaluate_flat`).

    Args:
        graph: the optimized graph.
        order: its schedule.
        donate_leaves: input leaves whose arrays may receive an output of the same shape and
            dtype (the output is computed, then copied into the array, which is returned).
    """

    backend = "numpy"

    def __init__(self, graph: Graph, order: Sequence[Node], donate_leaves: frozenset[int]):
        self.graph = graph
        self.order = list(order)
        self.donate_leaves = donate_leaves
        self.signature = Signature(graph, casting=COMPILED_CASTING)
        self.stats = {
            "backend": "numpy",
            "nodes": len(self.order),
            "kernels": sum(1 for n in self.order if n.op.kind != "source"),
            "peak_bytes": peak_bytes(self.order, graph.outputs),
        }
        # output position -> the donated input leaf it may be written into (same shape and dtype)
        self.donation: dict[int, int] = {}
        used: set[int] = set()
        for li in sorted(donate_leaves):
            x = graph.inputs[li]
            for k, o in enumerate(graph.outputs):
                if k not in used and o.shape == x.shape and o.dtype == x.dtype:
                    self.donation[k] = li
                    used.add(k)
                    break

    def run(self, leaves: list[Any]) -> list[np.ndarray]:
        """Run on flat argument leaves; see `Executable.run`."""
        vals = self.signature.check(leaves)
        env = dict(zip(self.graph.inputs, vals))
        outs = evaluate_flat(self.graph.outputs, self.order, env)
        ids = {id(v) for v in vals}
        res = []
        # Copy every result that may view an argument first, then write donated buffers.
        for o, node in zip(outs, self.graph.outputs):
            if not isinstance(o, np.ndarray) or id(o) in ids or not o.flags.writeable or not o.flags.owndata:
                o = np.array(o, dtype=node.dtype)
            res.append(o)
        for k, li in self.donation.items():
            if donatable(vals, leaves, li):
                np.copyto(leaves[li], res[k])
                res[k] = leaves[li]
        return res


class NumpyBackend(Backend):
    """The reference evaluator as a backend (`sg.compile(f, backend="numpy")`)."""

    name = "numpy"
    runs_host_ops = True  # the evaluator calls every op's impl, communication included

    def compile(self, graph: Graph, order: Sequence[Node], *, donate: frozenset[int] = frozenset(),
                name: str = "f") -> NumpyExecutable:
        """Wrap the scheduled graph; nothing is generated (see `Backend.compile`)."""
        return NumpyExecutable(graph, order, frozenset(donate))
