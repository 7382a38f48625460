"""`sg.save_state` / `sg.load_state`: a pytree of arrays as one `.npz` file, written atomically.

The training state (parameters, optimizer state, step count, data position)
is a pytree; `save_state` writes its leaves and its structure (as JSON) to a
temporary file in the target's directory, flushes and fsyncs it, renames it
over the target (`os.replace`, atomic on POSIX file systems) and fsyncs the
directory. A run killed at any moment leaves either the previous file or
the new one, never a half-written one. Under MPI (when
`symgraph.distributed` is in use with more than one rank) rank 0 writes and
every rank learns whether it succeeded; `load_state` reads on rank 0 and
broadcasts, so all ranks restore the same bits.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import zipfile
from typing import Any

import numpy as np

from .errors import SymgraphError
from .files import write_atomically
from .tree import TreeDef, tree_flatten, tree_unflatten

__all__ = ["save_state", "load_state", "StateError"]

_FORMAT = "symgraph-state-1"


class StateError(SymgraphError):
    """A state file that is missing, incomplete or not written by `save_state`, or a tree that cannot be saved."""


def _encode(td: TreeDef, kinds: Any) -> Any:
    if td.kind == "leaf":
        return {"k": "leaf", "t": next(kinds)}
    if td.kind == "none":
        return {"k": "none"}
    children = [_encode(c, kinds) for c in td.children]
    if td.kind == "dict":
        keys = []
        for k in td.meta:
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise StateError(f"save_state: dict key {k!r} is a {type(k).__name__}; keys must be str or int")
            keys.append(["s" if isinstance(k, str) else "i", k])
        return {"k": "dict", "keys": keys, "c": children}
    if td.kind == "namedtuple":
        t = td.meta
        return {"k": "namedtuple", "type": f"{t.__module__}:{t.__qualname__}", "c": children}
    return {"k": td.kind, "c": children}


def _decode(d: Any, leaves: Any, path: str) -> Any:
    k = d["k"]
    if k == "leaf":
        a = next(leaves)
        t = d["t"]
        if t == "array":
            return a
        if t == "scalar":
            return a[()]
        return {"int": int, "float": float, "bool": bool, "complex": complex, "str": str}[t](a.item())
    if k == "none":
        return None
    children = [_decode(c, leaves, path) for c in d["c"]]
    if k == "tuple":
        return tuple(children)
    if k == "list":
        return children
    if k == "dict":
        return {(key if kind == "s" else int(key)): c for (kind, key), c in zip(d["keys"], children)}
    if k == "namedtuple":
        mod, _, qual = d["type"].partition(":")
        try:
            t: Any = importlib.import_module(mod)
            for part in qual.split("."):
                t = getattr(t, part)
        except (ImportError, AttributeError):
            raise StateError(f"load_state({path!r}): the namedtuple type {d['type']} cannot be imported") from None
        return t(*children)
    raise StateError(f"load_state({path!r}): unknown tree node kind {k!r}")


def _leaf_kind(x: Any) -> tuple[str, np.ndarray]:
    if isinstance(x, np.ndarray):
        kind, a = "array", x
    elif isinstance(x, np.generic):
        kind, a = "scalar", np.asarray(x)
    elif isinstance(x, (bool, int, float, complex, str)):
        kind, a = type(x).__name__, np.asarray(x)
    else:
        raise StateError(f"save_state: a leaf is a {type(x).__name__}; leaves must be arrays, NumPy scalars or "
                         f"Python numbers/strings")
    if a.dtype.hasobject:
        raise StateError("save_state: object arrays cannot be saved (they would need pickle)")
    return kind, a


def _mpi_comm(comm: Any) -> Any:
    """The mpi4py communicator to coordinate with: `comm`, or symgraph.distributed's when in use."""
    if comm is not None:
        return comm
    dist = sys.modules.get("symgraph.distributed")
    if dist is None:
        return None
    c = dist._state.get("comm")
    return c if c is not None and c.Get_size() > 1 else None


def _write(path: str, tree: Any) -> None:
    leaves, td = tree_flatten(tree)
    kinds, arrays = [], []
    for x in leaves:
        k, a = _leaf_kind(x)
        kinds.append(k)
        arrays.append(a)
    meta = json.dumps({"format": _FORMAT, "tree": _encode(td, iter(kinds)), "leaves": len(arrays)})
    entries = {f"leaf_{i:06d}": a for i, a in enumerate(arrays)}
    entries["__symgraph_state__"] = np.frombuffer(meta.encode(), dtype=np.uint8)
    write_atomically(path, lambda f: np.savez(f, **entries))


def save_state(path: str | os.PathLike, tree: Any, *, comm: Any = None) -> None:
    """Write a pytree (training state) to `path` as a `.npz` file, atomically.

    Args:
        path: the file to write (replaced if it exists; the name is used as given).
        tree: a pytree (dicts with str/int keys, lists, tuples, namedtuples,
            None) of NumPy arrays, NumPy scalars, Python numbers or strings.
        comm: an mpi4py communicator; default symgraph.distributed's when it
            is in use with several ranks. Then only rank 0 writes, and every
            rank raises if the write failed.

    Raises:
        StateError: a leaf or key that cannot be saved, or the write failed
            (the previous file, if any, is left as it was).
    """
    path = os.fspath(path)
    c = _mpi_comm(comm)
    err = None
    if c is None or c.Get_rank() == 0:
        try:
            _write(path, tree)
        except StateError as e:
            err = str(e)
        except OSError as e:
            err = f"save_state({path!r}): {e}"
    if c is not None:
        err = c.bcast(err, root=0)
    if err is not None:
        raise StateError(err)


def _read(path: str) -> Any:
    if not os.path.exists(path):
        raise StateError(f"load_state({path!r}): no such file")
    try:
        with np.load(path, allow_pickle=False) as z:
            if "__symgraph_state__" not in z.files:
                raise StateError(f"load_state({path!r}): not a symgraph state file (no structure record)")
            meta = json.loads(bytes(z["__symgraph_state__"]).decode())
            if meta.get("format") != _FORMAT:
                raise StateError(f"load_state({path!r}): unknown format {meta.get('format')!r}")
            n = int(meta["leaves"])
            leaves = [z[f"leaf_{i:06d}"] for i in range(n)]
    except StateError:
        raise
    except (zipfile.BadZipFile, ValueError, KeyError, EOFError, OSError, UnicodeDecodeError) as e:
        raise StateError(f"load_state({path!r}): the file is corrupt or incomplete ({type(e).__name__}: {e})") from None
    return _decode(meta["tree"], iter(leaves), path)


def load_state(path: str | os.PathLike, *, comm: Any = None) -> Any:
    """Read a pytree written by `save_state`: the same structure, dtypes, shapes and values.

    Args:
        path: the file.
        comm: as for `save_state`; under MPI rank 0 reads and broadcasts.

    Returns:
        The tree: arrays as NumPy arrays, NumPy scalars and Python numbers as they were saved.

    Raises:
        StateError: a missing, corrupt or truncated file, or one not written by `save_state`.
    """
    path = os.fspath(path)
    c = _mpi_comm(comm)
    if c is None:
        return _read(path)
    res: Any = None
    if c.Get_rank() == 0:
        try:
            res = ("ok", _read(path))
        except StateError as e:
            res = ("err", str(e))
    res = c.bcast(res, root=0)
    if res[0] == "err":
        raise StateError(res[1])
    return res[1]
