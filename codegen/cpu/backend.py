"""The "llvm" entry of symgraph's backend registry (`symgraph.backend`): `codegen.compile_graph` as a Backend.

The class implements the `symgraph.backend.Backend` protocol structurally: the registry imports this
module, so importing the registry from here would be a cycle.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import compile_graph
from .executable import Executable

__all__ = ["LLVMBackend"]


class LLVMBackend:
    """Fused, vectorized native code for the host CPU (`sg.compile(f, backend="llvm")`, the default)."""

    name = "llvm"

    def compile(self, graph: Any, order: Sequence[Any], *, donate: frozenset[int] = frozenset(),
                name: str = "f") -> Executable:
        """Compile one signature with `codegen.compile_graph` (see `symgraph.backend.Backend.compile`).

        Raises:
            UnsupportedOpError: an op without a native lowering.
            DTypeError: a dtype the backend does not support (complex, strings).
        """
        return compile_graph(graph, list(order), donate=frozenset(donate), name=name)
