"""The eager path of the transformations: called on arrays, they trace, simplify and evaluate.

`run` is what `grad`, `jacobian`, `vmap` and the others do when no argument is
traced: trace the function on the concrete arguments, simplify the graph (when
`config.simplify`, the default) and run it with the NumPy reference evaluator.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from . import debugging
from .interpreter import check_arguments, evaluate
from .passes.simplify import simplify as _simplify
from .tracing import check_args, trace
from .tree import tree_leaves

__all__ = ["run", "config"]


class _Config(threading.local):
    """Switches.

    `config.simplify` (default True, per thread) simplifies the graphs of
    transformations called on arrays. `config.debug_nans` (default False, or
    True when `SYMGRAPH_DEBUG_NANS=1` is set; process-wide): a NaN or inf that
    a compiled function or a transformation produced raises
    `sg.FloatingPointError` naming the first op that produced it
    (`symgraph.debugging`).
    """

    def __init__(self) -> None:
        self.simplify = True

    @property
    def debug_nans(self) -> bool:
        return debugging.DEBUG_NANS

    @debug_nans.setter
    def debug_nans(self, on: bool) -> None:
        debugging.set_debug_nans(on)


config = _Config()


def run(fn: Callable, args: tuple, name: str, simplify: bool | None = None, user_fn: Callable | None = None) -> Any:
    """Trace fn on concrete args, simplify, evaluate with the NumPy evaluator.

    `user_fn` (the function the user passed, when fn wraps it) names the arguments in error messages.
    """
    if user_fn is not None:
        check_args(args, user_fn, name)
    g = trace(fn, *args, name=name)
    if config.simplify if simplify is None else simplify:
        g = _simplify(g)
    out = evaluate(g, *args)
    if debugging.DEBUG_NANS:
        debugging.check_outputs(g, check_arguments(g, args), tree_leaves(out), name)
    return out
