"""The "llvm" entry of symgraph's backend registry (`symgraph.backend`): `codegen.compile_graph` as a Backend.

The class implements the `symgraph.backend.Backend` protocol structurally: the registry imports this
module, so importing the registry from here would be a cycle.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import compile_graph
from ..complex_split import ComplexExecutable, has_complex, split_complex
from .executable import Executable

__all__ = ["LLVMBackend"]


class LLVMBackend:
    """Fused, vectorized native code for the host CPU (`sg.compile(f, backend="llvm")`, the default)."""

    name = "llvm"

    def compile(self, graph: Any, order: Sequence[Any], *, donate: frozenset[int] = frozenset(),
                name: str = "f") -> Executable:
        """Compile one signature with `codegen.compile_graph` (see `symgraph.backend.Backend.compile`).

        Raises:
            UnsupportedOpError: an op without a native lowering (a complex op without a pair rule:
                `codegen.complex_split`).
            DTypeError: a dtype the backend does not support (strings).
        """
        order = list(order)
        if has_complex(order):
            # complex values as pairs of real arrays (codegen.complex_split); unsupported complex ops are
            # refused there, naming the op
            from symgraph.passes.schedule import schedule

            real, in_plan, out_plan = split_complex(graph, order)
            inner = compile_graph(real, schedule(real), name=name)
            return ComplexExecutable(inner, in_plan, out_plan, [(n.shape, n.dtype) for n in graph.inputs],
                                     graph.in_tree, graph.out_tree)
        return compile_graph(graph, order, donate=frozenset(donate), name=name)
