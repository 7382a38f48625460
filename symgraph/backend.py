"""The backend protocol and its registry: how `sg.compile` turns a scheduled graph into something to call.

A backend compiles one signature's optimized, scheduled graph into an `Executable`
(`Backend.compile`); `sg.compile(f, backend=NAME)` finds it by name here. Built in: "numpy"
(the reference evaluator, `symgraph.numpy_backend`) and "llvm" (the `codegen` package,
imported on first use: `import symgraph` never imports it). Both classes are protocols
(structural: codegen implements them without importing this module, which loads it);
subclassing them gives the defaults below. docs/compile.md, "Backends", shows how to
register another.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from .errors import SymgraphError

__all__ = ["Backend", "Executable", "register_backend", "unregister_backend", "get_backend", "backend_names",
           "check_backend_name"]


@runtime_checkable
class Executable(Protocol):
    """One compiled signature, as a backend returns it.

    Every member below is part of the protocol; a subclass inherits defaults for `fast`
    (None), `release` (nothing kept: 0), `inspect` (no texts), `inspectable` and `profile` (None).

    Attributes:
        stats: figures of the compiled signature (dict: backend, nodes, kernels, peak_bytes, ...;
            `sg.compile` adds compile_seconds and trace_seconds).
        fast: None, or a function of the positional arguments (a tuple of pytrees) that returns
            the outputs' pytree, or `symgraph.signature.MISS` when they do not match the signature
            exactly (`sg.compile` then calls `run`). Its checks must come from `symgraph.signature`.
    """

    backend = "?"
    stats: dict
    fast: Callable[[tuple], Any] | None = None

    def run(self, leaves: list[Any]) -> list[Any]:
        """Run on flat argument leaves (in the order of the graph's inputs); return the flat outputs.

        Args:
            leaves: arrays or numbers, one per graph input (`tree_flatten` of the arguments).

        Returns:
            NumPy arrays, one per graph output, of the traced shapes and dtypes.

        Raises:
            ShapeError, DTypeError, UnsupportedOpError: leaves that break the rules of
                `symgraph.signature.Signature.check` (casting `COMPILED_CASTING`).
        """
        raise NotImplementedError

    def release(self) -> int:
        """Drop the scratch memory the executable keeps between calls; return the bytes dropped (0: none)."""
        return 0

    def inspect(self, what: str) -> str:
        """Text describing the compiled code, e.g. "llvm_ir" or "asm" for the LLVM backend.

        Raises:
            SymgraphError: this backend has no such text.
        """
        raise SymgraphError(f"backend {self.backend!r} has no {what!r} to inspect "
                            f"(it has: {', '.join(self.inspectable()) or 'nothing'})")

    def inspectable(self) -> tuple[str, ...]:
        """The names `inspect` accepts."""
        return ()

    def profile(self, reset: bool = False) -> list[dict] | None:
        """Per-kernel times when the backend measured them, else None (see `CompiledFunction.profile`)."""
        return None


@runtime_checkable
class Backend(Protocol):
    """Compiles scheduled graphs into executables; subclass it and register an instance or factory.

    Attributes:
        name: the registry name (`sg.compile(f, backend=name)`).
    """

    name = "?"

    def compile(self, graph: Any, order: Sequence[Any], *, donate: frozenset[int] = frozenset(),
                name: str = "f") -> Executable:
        """Compile one signature.

        Args:
            graph: the optimized Graph (simplified, checkpointed), inputs in flat leaf order.
            order: its schedule (`symgraph.passes.schedule.schedule`), every node once.
            donate: indices of input leaves whose buffers outputs of the same shape and dtype
                may reuse (`symgraph.signature.donatable` says when a call's array qualifies).
            name: the function's name, for messages and dumps.

        Returns:
            An `Executable`.

        Raises:
            UnsupportedOpError, DTypeError: ops or dtypes the backend cannot compile.
        """
        raise NotImplementedError


#: name -> a Backend, a factory returning one, or "module:attribute" of a factory (imported on first use)
_REGISTRY: dict[str, Any] = {
    "llvm": ("codegen.cpu.backend:LLVMBackend", "the codegen package and llvmlite"),
    "numpy": ("symgraph.numpy_backend:NumpyBackend", "symgraph.numpy_backend"),
}
_LOADED: dict[str, Backend] = {}
_lock = threading.Lock()


def register_backend(name: str, backend: Backend | Callable[[], Backend] | str, *, replace: bool = False) -> None:
    """Make `backend` available as `sg.compile(f, backend=name)`.

    Args:
        name: the registry name.
        backend: a `Backend`, a callable returning one (called on first use), or the string
            "module:attribute" of such a callable (imported on first use).
        replace: allow replacing a registered backend.

    Raises:
        SymgraphError: `name` is taken and `replace` is false, or `name` is not a string.
    """
    if not isinstance(name, str) or not name:
        raise SymgraphError(f"register_backend: the name must be a non-empty string, got {name!r}")
    with _lock:
        if name in _REGISTRY and not replace:
            raise SymgraphError(f"register_backend: a backend named {name!r} is registered; pass replace=True")
        _REGISTRY[name] = (backend, None) if isinstance(backend, str) else backend
        _LOADED.pop(name, None)


def unregister_backend(name: str) -> None:
    """Remove a registered backend (compiled functions already built keep their executables)."""
    with _lock:
        _REGISTRY.pop(name, None)
        _LOADED.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """The registered backend names, sorted."""
    return tuple(sorted(_REGISTRY))


def check_backend_name(name: Any, where: str = "compile") -> None:
    """Raise unless `name` is registered (nothing is imported).

    Raises:
        SymgraphError: an unknown backend, naming the registered ones.
    """
    if not isinstance(name, str) or name not in _REGISTRY:
        raise SymgraphError(f"{where}: unknown backend {name!r}; choose one of {backend_names()}")


def get_backend(name: str, where: str = "compile") -> Backend:
    """The backend registered as `name`, imported and built on first use.

    Raises:
        SymgraphError: an unknown name, or a backend whose module cannot be imported.
    """
    b = _LOADED.get(name)
    if b is not None:
        return b
    check_backend_name(name, where)
    with _lock:
        b = _LOADED.get(name)
        if b is not None:
            return b
        entry = _REGISTRY[name]
        if isinstance(entry, tuple):  # "module:attribute", what it needs
            path, needs = entry
            mod, _, attr = path.partition(":")
            try:
                entry = getattr(importlib.import_module(mod), attr)
            except ImportError as e:
                raise SymgraphError(f"{where}: backend={name!r} needs {needs or mod} ({e})") from None
        b = entry if isinstance(entry, Backend) and not isinstance(entry, type) else entry()
        if not isinstance(b, Backend):
            raise SymgraphError(f"{where}: backend {name!r} is a {type(b).__name__}, not a symgraph.backend.Backend "
                                f"(it needs name and compile)")
        _LOADED[name] = b
        return b
