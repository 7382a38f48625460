"""Schedules and liveness: an execution order, each value's last use, planned peak bytes.

One liveness function (`last_use`) is shared by the NumPy evaluator, the LLVM
arena planner and the checkpointing cost model, so they agree on the plan.
"""

from __future__ import annotations

from typing import Sequence

from ..ir import Graph, Node

__all__ = ["schedule", "last_use", "peak_bytes"]


def schedule(graph: Graph) -> list[Node]:
    """An execution order of the graph's nodes (inputs before readers).

    Returns:
        The graph's topological order (deterministic).
    """
    return graph.toposort()


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


def peak_bytes(order: Sequence[Node], outputs: Sequence[Node] = (), count_inputs: bool = False) -> int:
    """Planned peak bytes of running `order` and freeing each value at its last use.

    Args:
        order: a schedule (topological order).
        outputs: nodes that stay alive to the end.
        count_inputs: include input and constant buffers (owned by the caller) in the peak.

    Returns:
        The maximum over the schedule of the bytes of all live values (bytes).
    """
    last = last_use(order, outputs)
    frees: dict[int, int] = {}
    live = 0
    peak = 0
    for i, n in enumerate(order):
        owned = count_inputs or n.op.kind != "source"
        if owned:
            live += n.nbytes
            frees[last[n]] = frees.get(last[n], 0) + n.nbytes
        peak = max(peak, live)
        live -= frees.pop(i, 0)
    return peak
