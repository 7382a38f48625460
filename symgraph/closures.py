"""What a traced function read besides its arguments: closed-over arrays and the names bound to them.

A compiled function's graph holds, as constants, whatever NumPy arrays the
function read from its closure, its globals, its defaults or the object it is
bound to, and whatever it computed from them. `ClosedOverArrays` records, while
`compile` traces: the arrays that became constants (and the arrays they are
views of), and every array the function can reach by name (closure cells,
globals it names, defaults, attributes of a bound method's object, one level
into lists, tuples and dicts), with the bindings that lead to them. Before each
later call `changed()` says whether any of those arrays holds other bytes or
any of those names is bound to another object; `compile` then traces and
compiles again, so a compiled function never returns a result computed from
stale data (``X[:] = 2.0``, ``X = new_array``, ``Z[1:] @ w`` after ``Z[:] = 2``).

`reachable` is the walk itself, shared with `symgraph.random.NumpyRandomWatch`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import types
import weakref
from functools import partial as functools_partial
from typing import Any, Callable, Iterator

import numpy as np

__all__ = ["ClosedOverArrays", "reachable"]

_MISSING = object()


def _unwrap_all(fn: Any) -> list[Any]:
    """fn, the functions it wraps (``__wrapped__``, a CompiledFunction's ``fn``) and a bound method's function."""
    out, seen = [], set()
    stack = [fn]
    while stack and len(out) < 16:
        f = stack.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        out.append(f)
        stack.extend([getattr(f, "__wrapped__", None), getattr(f, "__func__", None)])
        inner = getattr(f, "fn", None)
        if callable(inner):
            stack.append(inner)
        if isinstance(f, types.MethodType):
            stack.append(f.__func__)
    return out


def _code_names(code: types.CodeType, depth: int = 0) -> set[str]:
    names = set(code.co_names)
    if depth < 4:
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                names |= _code_names(c, depth + 1)
    return names


class _Binding:
    """Where a value was found: re-reads the current value (cell contents, dict entry, list item, attribute)."""

    __slots__ = ("holder", "key", "kind", "label", "direct")

    def __init__(self, holder: Any, key: Any, kind: str, label: str, direct: bool = False):
        self.holder, self.key, self.kind, self.label = holder, key, kind, label
        self.direct = direct  # a closure cell, a named global or a default (not an attribute or an item)

    def read(self) -> Any:
        try:
            if self.kind == "cell":
                return self.holder.cell_contents
            if self.kind == "attr":
                return getattr(self.holder, self.key, _MISSING)
            return self.holder[self.key]
        except (ValueError, KeyError, IndexError, TypeError):
            return _MISSING


def reachable(fn: Any, depth: int = 3) -> Iterator[tuple[_Binding, Any]]:
    """(binding, value) for every value `fn` can reach by name: closure cells, named globals, defaults,
    attributes of a bound method's object, one level into lists/tuples/dicts, and functions it reaches
    (to `depth` levels)."""
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(f, 0) for f in _unwrap_all(fn)]
    while stack:
        f, d = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        found: list[tuple[_Binding, Any]] = []
        if isinstance(f, types.MethodType):
            obj = f.__self__
            for k, v in getattr(obj, "__dict__", {}).items():
                found.append((_Binding(obj, k, "attr", f"self.{k}"), v))
            f = f.__func__
        if isinstance(f, types.FunctionType):
            code = f.__code__
            for name, cell in zip(code.co_freevars, f.__closure__ or ()):
                b = _Binding(cell, None, "cell", name, direct=True)
                found.append((b, b.read()))
            for i, v in enumerate(f.__defaults__ or ()):
                found.append((_Binding(f.__defaults__, i, "item", f"default {i}", direct=True), v))
            g = f.__globals__
            for name in _code_names(code):
                if name in g:
                    found.append((_Binding(g, name, "item", name, direct=True), g[name]))
        for b, v in found:
            if v is _MISSING:
                continue
            yield b, v
            if isinstance(v, (list, tuple)) and len(v) <= 256:
                for i, x in enumerate(v):
                    yield _Binding(v, i, "item", f"{b.label}[{i}]"), x
            elif isinstance(v, dict) and len(v) <= 256:
                for k, x in list(v.items()):
                    yield _Binding(v, k, "item", f"{b.label}[{k!r}]"), x
            if d < depth and (isinstance(v, (types.FunctionType, types.MethodType, functools_partial))
                              or hasattr(v, "__wrapped__")):
                for u in _unwrap_all(v):
                    stack.append((u, d + 1))
                if isinstance(v, functools_partial):
                    for i, x in enumerate(v.args):
                        yield _Binding(v.args, i, "item", f"{b.label}.args[{i}]"), x
                    for k, x in v.keywords.items():
                        yield _Binding(v.keywords, k, "item", f"{b.label}.keywords[{k!r}]"), x



def _root(a: np.ndarray) -> np.ndarray:
    """The array that owns a view's memory (itself if it owns it)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


_memcmp: Callable | None = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    _memcmp = _libc.memcmp
    _memcmp.restype = ctypes.c_int
    _memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
except (OSError, AttributeError):  # pragma: no cover - no C library to call
    _memcmp = None


def _same_bytes(a: np.ndarray, snap: np.ndarray) -> bool:
    """Whether `a` holds the bytes of `snap` (a C-contiguous copy): memcmp when contiguous."""
    if a.shape != snap.shape or a.dtype != snap.dtype:
        return False
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if _memcmp is not None:
        return a.nbytes == 0 or _memcmp(a.ctypes.data, snap.ctypes.data, a.nbytes) == 0
    return a.tobytes() == snap.tobytes()


class ClosedOverArrays:
    """The arrays and name bindings a trace read besides its arguments; see the module docstring.

    Use ``with ClosedOverArrays(fn) as c:`` around the trace (the innermost
    active one receives `note` calls from `lax.constant`), then `c.prune()`
    and, before each call, `c.changed()`. Arrays are held by weak reference
    (one that is gone can no longer change) with a copy of their contents;
    bindings hold a weak reference to the array they led to, or the number
    (closure cells, globals and defaults only: a counter attribute would
    otherwise recompile every call). 0-d arrays are values, not recorded.
    """

    _active: list["ClosedOverArrays"] = []

    def __init__(self, fn: Any = None) -> None:
        self.fn = fn
        self.arrays: dict[int, tuple[Any, np.ndarray]] = {}  # id(root) -> (weakref to it, a copy of it)
        self.bindings: list[tuple[_Binding, Any]] = []       # (binding, reference to the object it held)

    def __enter__(self) -> "ClosedOverArrays":
        self._active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active.remove(self)
        if self.fn is not None and exc[0] is None:
            self._scan(self.fn)

    def note(self, a: np.ndarray) -> None:
        """Record array `a` (a constant of the graph being traced) by the array that owns its memory."""
        if a.ndim == 0:
            return
        r = _root(a)
        if id(r) not in self.arrays and r.ndim:
            self.arrays[id(r)] = (weakref.ref(r), np.array(r, copy=True, order="C"))

    def _scan(self, fn: Any) -> None:
        for binding, v in reachable(fn):
            if isinstance(v, np.ndarray):
                self.note(v)
                self.bindings.append((binding, _Ref(v)))
            elif binding.direct and isinstance(v, (np.generic, int, float, complex, bool)):
                # a number read by name (a global learning rate) is a constant of the graph too; numbers
                # in attributes and containers are not checked (a counter there would recompile every call)
                self.bindings.append((binding, _Value(v)))

    def prune(self) -> int:
        """Forget the arrays that no longer exist (made during the trace); how many arrays and bindings are left."""
        self.arrays = {k: v for k, v in self.arrays.items() if v[0]() is not None}
        return len(self.arrays) + len(self.bindings)

    def changed(self) -> bool:
        """Whether a recorded array holds other bytes, or a recorded name is bound to another object."""
        for binding, ref in self.bindings:
            if not ref.holds(binding.read()):
                return True
        for ref, snap in self.arrays.values():
            a = ref()
            if a is not None and not _same_bytes(a, snap):
                return True
        return False


class _Value:
    """A number a name was bound to: the binding changed when it holds another value."""

    __slots__ = ("v",)

    def __init__(self, v: Any):
        self.v = v

    def holds(self, x: Any) -> bool:
        return type(x) is type(self.v) and (x == self.v or (x != x and self.v != self.v))


class _Ref:
    """The object a name was bound to (weakly): the binding changed when it holds another object."""

    __slots__ = ("r",)

    def __init__(self, v: Any):
        self.r = weakref.ref(v)

    def holds(self, x: Any) -> bool:
        return x is self.r()
