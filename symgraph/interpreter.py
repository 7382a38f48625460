"""The NumPy reference evaluator: runs any graph, freeing each value at its last use."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import LinAlgError, ShapeError, SymgraphError
from .ir import Graph, Node, install_graph_methods, meta
from .passes.schedule import last_use, schedule
from .signature import EVALUATE_CASTING, Signature
from .tree import tree_unflatten

__all__ = ["evaluate", "evaluate_flat", "check_arguments"]


def check_arguments(graph: Graph, args: tuple) -> list[np.ndarray]:
    """Flatten and check call arguments against the graph's input signature.

    The rules are `symgraph.signature`'s (docs/compile.md, "Arguments"), with same-kind
    casting (`EVALUATE_CASTING`): a float32 or integer argument of a float64 input is cast.

    Args:
        graph: the traced graph.
        args: positional arguments (pytrees) in the traced structure.

    Returns:
        One array per input node, of the traced shape and dtype (any memory layout).

    Raises:
        ShapeError: an argument of the wrong shape, or the wrong number/structure of arguments.
        DTypeError: a non-numeric argument, or a dtype that does not cast to the traced one (same kind).
        UnsupportedOpError: a masked array (the mask would be lost).
    """
    sig = Signature(graph, casting=EVALUATE_CASTING, against="the graph was traced with")
    return sig.check(sig.flatten(args))


def evaluate_flat(outputs: Sequence[Node], order: Sequence[Node], env: dict[Node, Any]) -> list[np.ndarray]:
    """Evaluate `order` given bound values in `env` (inputs); return the outputs' values.

    Each intermediate is dropped after its last use (`passes.schedule.last_use`).
    """
    last = last_use(order, outputs)
    with np.errstate(all="ignore"):
        for i, n in enumerate(order):
            if n not in env:
                op = n.op
                if op.name == "input":
                    raise ShapeError(f"input {n.attr('name')} is not bound")
                vals = [env[x] for x in n.inputs]
                try:
                    v = op.impl(*vals, **n.params)
                except LinAlgError as e:  # a failure on values (LAPACK info): point at the node's line
                    m = meta(n)
                    raise e.at(m.location, m.role) from None
                env[n] = np.asarray(v, dtype=n.dtype) if not (isinstance(v, np.ndarray) and v.dtype == n.dtype) else v
            for x in n.inputs:
                if last.get(x) == i and x in env:
                    del env[x]
            if last.get(n) == i and n in env:
                del env[n]
    return [env[o] for o in outputs]


def evaluate(graph: Graph, *args: Any) -> Any:
    """Run `graph` on concrete arguments with the NumPy reference semantics.

    Args:
        graph: a traced (or transformed) Graph.
        *args: arrays, numbers or pytrees matching the graph's inputs.

    Returns:
        Fresh NumPy arrays (0-d arrays for scalars) in the graph's output structure.

    Raises:
        ShapeError, DTypeError: arguments that do not match the traced signature.
    """
    if not isinstance(graph, Graph):
        raise SymgraphError(f"evaluate: expected a Graph (from sg.trace), got {type(graph).__name__}")
    vals = check_arguments(graph, args)
    env: dict[Node, Any] = dict(zip(graph.inputs, vals))
    outs = evaluate_flat(graph.outputs, schedule(graph), env)
    ids = {id(v) for v in vals}
    results = []
    for o, node in zip(outs, graph.outputs):
        if not isinstance(o, np.ndarray) or id(o) in ids or not o.flags.writeable or not o.flags.owndata:
            o = np.array(o, dtype=node.dtype)
        results.append(o)
    if graph.out_tree is None:
        return results
    return tree_unflatten(graph.out_tree, results)


install_graph_methods(evaluate=evaluate)  # Graph.evaluate
