"""The one cost model: estimated work of ops, nodes and products, read from the op records.

Checkpointing (what to recompute), fusion (what to materialize, where to cut
a kernel), threading (what is worth splitting) and product pairing all ask
this module, so they agree on what an op costs. The per-element weights are
facts of each op (`Op.cost`: FREE, CHEAP, DIVISION, TRANSCENDENTAL) and the
work of a contraction is its own rule (`Op.flops`).
"""

from __future__ import annotations

from ..ir import Node
from ..ops.core import CHEAP, FREE, OPS, TRANSCENDENTAL, Op
from ..ops.linalg import matmul_flops

__all__ = ["EXPENSIVE", "weight", "node_flops", "matmul_flops"]

#: Weight at or above which an elementwise value counts as expensive to recompute (fusion
#: materializes such a value when several kernels read it).
EXPENSIVE = TRANSCENDENTAL


def weight(op: Op | str) -> int:
    """The per-element cost weight of an op (FREE, CHEAP, DIVISION or TRANSCENDENTAL).

    Args:
        op: an `Op` or the name of one. A name no op has (a backend's internal
            loop-body operation, such as index arithmetic) weighs CHEAP.

    Returns:
        The weight (int >= 0).
    """
    if isinstance(op, str):
        rec = OPS.get(op)
        return CHEAP if rec is None else rec.cost
    return op.cost


def node_flops(node: Node) -> int:
    """Estimated operations of computing `node` once.

    Contractions count their own rule (`Op.flops`: matmul (..., m, k) @
    (..., k, n) is 2·batch·m·n·k; einsum 2 times the product of all index
    sizes); sources, layout ops and identities 0; every other op its weight
    times the elements it reads (a reduction) or writes, at least 1.

    Args:
        node: a graph node.

    Returns:
        The estimate (int).
    """
    op = node.op
    if op.flops is not None:
        return int(op.flops(node))
    if op.cost == FREE:
        return 0
    n = node.inputs[0].size if op.kind == "reduction" else node.size
    return max(int(n), 1) * op.cost
