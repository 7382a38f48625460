"""NumPy's own array-building spellings on traced values, while a trace runs.

`np.array(x)`, `np.asarray([x, 1.0])`, `np.r_[x, y]` or `np.mean([x, y])` convert
their argument to an ndarray before any of NumPy's protocols (`__array_function__`,
`__array_ufunc__`) can hand a traced value to symgraph, so plain NumPy code that
starts with ``x = np.asarray(x)`` could not be traced. While at least one trace is
running (`trace_entry_points()`, entered by `symgraph.tracing.trace`), the module
attributes `numpy.array`, `asarray`, `asanyarray`, `ascontiguousarray`,
`asfortranarray`, `r_`, `c_` and the NumPy functions that symgraph implements are
wrapped:

- the constructors give a traced value when their argument is one or holds one
  (a nested list or tuple), with NumPy's copy semantics: `np.array(x)` and
  `np.asarray([x, y])` are new arrays (writing into them leaves `x` alone),
  `np.asarray(x)` is `x` itself;
- every other wrapped function first runs NumPy's own; only when that fails
  with `TracerConversionError` and an argument is a list or tuple holding a
  traced value is the call repeated with those arguments built into arrays
  (`np.mean([x, y])`, `np.linalg.norm([x, y])`, `np.append(a, [x, 1.0])`).

Every wrapper calls NumPy's function unchanged when the calling thread is not
tracing or no traced value is involved, so other threads see NumPy's results
(and pay one Python call). The attributes are restored when the last trace ends.
Names bound before (``from numpy import array``) are not wrapped; those calls
raise `TracerConversionError` naming `symgraph.numpy`.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Callable, Iterator

import contextlib

import numpy as np

from . import numpy as snp
from .errors import TracerConversionError
from .inplace import ARRAY_INTERFACE_FILES, OWN_ARRAY, STALE, check_stale, fresh_copy
from .ir import Node, _ctx
from .numpy.layout import holds_node

__all__ = ["trace_entry_points", "ORIGINALS", "CONSTRUCTORS"]

_lock = threading.Lock()
_active = 0  # traces running, in all threads
#: (namespace, attribute) -> NumPy's object, filled when the wrappers are first built
ORIGINALS: dict[tuple[Any, str], Any] = {}
_BY_NAMESPACE: dict[Any, list[tuple[str, Any, Any]]] = {}  # namespace -> (name, NumPy's, wrapper)
ARRAY_INTERFACE_FILES.add(__file__)  # a read through a wrapper is the caller's read (symgraph.inplace)


def _tracing() -> bool:
    """Whether this thread is tracing and the wrapper's caller is neither NumPy, SciPy nor symgraph itself.

    NumPy's own Python code (np.median's `np.asanyarray(a)`) must keep NumPy's conversion: its error makes
    the wrapper of the function the user called retry with the list as an array.

    SciPy converts its arguments itself and, handed a traced value, would fail further in with a less clear
    error than NumPy's conversion, which names `symgraph.scipy` (`symgraph.tracing`). symgraph's own code
    keeps NumPy's behaviour (it calls `symgraph.numpy.asarray` where it means a traced value).
    """
    if not _ctx.builders:
        return False
    mod = sys._getframe(2).f_globals.get("__name__", "") or ""
    return not mod.startswith(_NOT_LIFTED)


_NOT_LIFTED = ("scipy.", "symgraph.", "codegen.", "numpy.")  # NumPy's own modules: np.median's np.asanyarray


def _constructor(orig: Callable, copies: bool) -> Callable:
    """np.array (copies=True) / np.asarray-like (copies=False) accepting traced values."""

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        a = args[0] if args else kwargs.get("object" if copies else "a", kwargs.get("a"))
        if not _tracing() or not holds_node(a) or len(args) > (2 if copies else 3):
            return orig(*args, **kwargs)
        if STALE:
            check_stale(a)  # a value a write left stale (a view of a written array): refused, as every read is
        kw = dict(kwargs)
        kw.pop("object", None), kw.pop("a", None)
        dtype = args[1] if len(args) > 1 else kw.pop("dtype", None)
        kw.pop("order", None)
        copy = kw.pop("copy", True if copies else None)
        ndmin = kw.pop("ndmin", 0)
        kw.pop("subok", None), kw.pop("like", None), kw.pop("device", None)
        if kw:
            raise TypeError(f"{orig.__name__}() got unexpected keyword arguments {sorted(kw)}")
        out = snp.asarray(a, dtype, ndmin=ndmin)  # any order: traced arrays have no memory layout
        if isinstance(a, Node) and not copy:
            return out  # asarray(x): x itself, its cast (a new array) or, with ndmin, its reshape (a view, as NumPy's)
        return fresh_copy(out)  # a new array: writes into it leave the traced values it was made of alone

    return wrapper


def _retrying(orig: Callable) -> Callable:
    """NumPy's function; on a traced value inside a list argument, repeated with that list as an array."""

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return orig(*args, **kwargs)
        except TracerConversionError:
            if not _tracing():
                raise
            if STALE:
                check_stale(args, tuple(kwargs.values()))  # a stale value in a list: refused, as every read is
            lifted = [snp.asarray(a) if isinstance(a, (list, tuple)) and holds_node(a) else a for a in args]
            kw = {k: snp.asarray(v) if isinstance(v, (list, tuple)) and holds_node(v) else v
                  for k, v in kwargs.items()}
            if all(x is y for x, y in zip(lifted, args)) and all(kw[k] is kwargs[k] for k in kw):
                raise
        return orig(*lifted, **kw)

    return wrapper


class _Tricks:
    """np.r_ / np.c_: symgraph.numpy's index tricks for traced items, NumPy's for the rest."""

    def __init__(self, orig: Any, ours: Any):
        self._orig, self._ours = orig, ours

    def __getitem__(self, key: Any) -> Any:
        if _tracing() and holds_node(key):
            if STALE:
                check_stale(key)
            out = self._ours[key]
            return fresh_copy(out) if isinstance(out, Node) else out  # always a new array, as NumPy's (np.r_[z])
        return self._orig[key]

    def __len__(self) -> int:
        return len(self._orig)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig, name)


#: np.<name> -> whether it copies a traced value (np.array) or returns it (np.asarray)
CONSTRUCTORS = {"array": True, "asarray": False, "asanyarray": False, "ascontiguousarray": False,
                 "asfortranarray": False}
#: not wrapped: compared by identity at call time (symgraph.inplace.own_array), or built by the constructors
_SKIP = {"copy", "zeros_like", "ones_like", "empty_like", "full_like", *CONSTRUCTORS}


def _build() -> None:
    """Fill ORIGINALS and _BY_NAMESPACE (once)."""
    if _BY_NAMESPACE:
        return

    def add(ns: Any, name: str, orig: Any, wrapper: Any) -> None:
        ORIGINALS[(ns, name)] = orig
        _BY_NAMESPACE.setdefault(ns, []).append((name, orig, wrapper))

    for name, copies in CONSTRUCTORS.items():
        add(np, name, getattr(np, name), _constructor(getattr(np, name), copies))
    for name, ours in (("r_", snp.r_), ("c_", snp.c_)):
        add(np, name, getattr(np, name), _Tricks(getattr(np, name), ours))
    traced = set(map(id, snp.FUNCTIONS))
    own = set(map(id, OWN_ARRAY))
    for ns in (np, np.linalg, np.fft):
        for name in dir(ns):
            if name.startswith("_") or name in _SKIP or (ns, name) in ORIGINALS:
                continue
            obj = getattr(ns, name, None)
            if id(obj) in traced and id(obj) not in own and not isinstance(obj, (np.ufunc, type)):
                add(ns, name, obj, _retrying(obj))


def _swap(install: bool) -> None:
    """Wrappers in (install) or NumPy's objects back, where the other one is there (one update per namespace)."""
    for ns, entries in _BY_NAMESPACE.items():
        d = vars(ns)
        if install:
            d.update({name: w for name, o, w in entries if d.get(name) is o})
        else:
            d.update({name: o for name, o, w in entries if d.get(name) is w})


@contextlib.contextmanager
def trace_entry_points() -> Iterator[None]:
    """Wrap NumPy's array-building entry points while the block runs (nested and concurrent blocks count)."""
    global _active
    with _lock:
        if _active == 0:
            _build()
            _swap(True)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                _swap(False)  # not where the user replaced a wrapper meanwhile
