"""The eager path of the transformations: called on arrays, they trace, simplify and evaluate.

`run` is what `grad`, `jacobian`, `vmap` and the others do when no argument is
traced: trace the function on the concrete arguments, simplify the graph (when
`config.simplify`, the default) and run it with the NumPy reference evaluator.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from .interpreter import evaluate
from .passes.simplify import simplify as _simplify
from .tracing import check_args, trace

__all__ = ["run", "config"]


class _Config(threading.local):
    """Switches: `config.simplify` (default True) simplifies results of transformations."""

    def __init__(self) -> None:
        self.simplify = True


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
    return evaluate(g, *args)
