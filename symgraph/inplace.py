"""In-place updates of traced arrays: a[idx] = v, a[idx] += v, a += v, x.sort(), x.fill(), x.put().

Nodes are immutable and interned, so a write rebinds the Python object instead, within the running trace:
the functional update `new` is built from `a` (so indices, shapes and dtypes are checked first), a
fresh node takes over a's old value, both in the intern table and in every node that already read
`a`, and the object `a` becomes a uniquely tagged `copy` of `new` (simplify removes it). Earlier
reads keep the old value, later reads and every alias of the object see the new one, and the graph
is an ordinary graph for every transformation. Only nodes of the running trace's builder that are not
arguments are rebound (never nodes of passes or of finished traces). NumPy views (`a[1:]`, `.T`,
reshape) are copies in the graph; a view or base that NumPy would show changed by a write is marked
stale and refuses the user's later reads (`STALE`, checked by `check_live`), rather than giving a
different number. The design is in docs/tracing.md, "In-place updates"; `symgraph.tracing` installs
these functions as members of the nodes' array interface.
"""

from __future__ import annotations

import inspect
import itertools
import sys
from typing import Any, Callable

import numpy as np

from . import lax as L
from . import numpy as snp
from .errors import (DTypeError, ShapeError, SymgraphError, TracerConversionError, UnsupportedOpError, _is_internal,
                     user_location)
from .ir import (Builder, Node, current_builder, current_origin, current_role, is_numpy_view, meta, shared_meta,
                 tracing_active)
from .ir import _ids as _ir_ids, _new_node
from .ops import OPS
from .tree import tree_flatten

__all__ = ["ARRAY_INTERFACE_FILES", "INPLACE_BINOPS", "INPLACE_METHODS", "OWN_ARRAY", "STALE", "check_live",
           "check_stale", "check_writable", "end_trace", "fresh_copy", "inplace_binop", "inplace_method", "note_shared",
           "own_array", "setitem", "track_shared"]

_osetattr = object.__setattr__


def check_live(x: Node) -> None:
    """Raise when `x` is used after the trace that made it ended (JAX's escaped-tracer error).

    Also when `x` is a view or base that an in-place write left stale (`STALE`).
    """
    if STALE:
        check_stale(x)
    if not tracing_active():
        loc = meta(x).location
        raise TracerConversionError(
            f"a traced value (shape {x.shape}, dtype {x.dtype}, op {x.op.name}"
            f"{f', made at {loc}' if loc is not None else ''}) was used after the trace that made it ended: it "
            f"escaped the traced function (through a list, a global, an attribute or a closure). Return it from "
            f"the function instead, and use the returned array.")


# ----- in-place updates: a[idx] = v, a[idx] += v, a += v (see "In-place updates" in docs/tracing.md) -----
#
# Nodes are immutable values, interned by the builder, but the Python object the user holds must change
# meaning on a write. A write rebinds that object in place, inside the running trace only:
#   1. the new value `new` is built from the object `a` as usual (at-set, or `a + v`), which checks
#      shapes, dtypes and indices before anything changes;
#   2. `old`, a fresh node with a's former op, inputs, attrs and tag, takes a's place in the intern
#      table and every node that read `a` (including `new`) is re-pointed to read `old`: earlier reads
#      keep the old value;
#   3. `a` itself becomes `copy(new)` with a unique ("fresh", ...) tag (simplify removes such copies),
#      so later reads through the object (and every alias `b = a`) see the new value.
# Only nodes of the running trace's builder are rebound (`_owned`): never nodes of a finished trace or
# of another builder (passes build outside traces), and never arguments (`_is_argument`: inputs and
# the fresh variables of transformations, which those hold on to). Transformations inside a trace build
# inline in its builder, so a closed-over array written inside an inner `grad` is rebound as NumPy would
# write it. The readers to re-point come from an incremental index of the intern table (`_Readers`).
# Views are copies in the graph; a view or base that NumPy would show changed is marked stale
# (`STALE`) and refuses the user's later reads with a clear error.

_write_tags = iter(range(1 << 62))


class _Stale:
    """Why reading a node now would differ from NumPy (a view or base that a write left behind)."""

    __slots__ = ("message", "token", "root", "written")

    def __init__(self, message: str, token: Node, root: Node, written: np.ndarray):
        self.message = message
        self.token = token  # the written node: writing it back into `root` over `written` clears the mark
        self.root = root
        self.written = written  # bool mask over root's flat positions


#: node -> _Stale, for views and bases left behind by writes in running traces (emptied when a trace ends)
STALE: dict[Node, _Stale] = {}


def fresh_copy(x: Node) -> Node:
    """A node equal to x but distinct from it (a uniquely tagged `copy`): an array of its own."""
    return L.bind("copy", x, tag=("fresh", ("inplace", next(_write_tags))))


def check_stale(*xs: Any, always: bool = False) -> None:
    """Raise when the user's code reads one of xs (nodes, or lists/tuples of them) that a write left stale.

    Reads by symgraph's own code (derivative rules building on the graph) are not user reads: the graph
    holds the old values on purpose. `always` checks regardless of the caller (the trace's outputs).
    """
    for x in xs:
        if isinstance(x, (list, tuple)):
            check_stale(*x, always=always)
        elif isinstance(x, Node):
            s = STALE.get(x)
            if s is not None and (always or _user_read()):
                raise TracerConversionError(s.message)


#: Files whose frames belong to the array interface (this module, the IR's and those installing members, which
#: add their own): `_user_read` looks past them for the caller.
ARRAY_INTERFACE_FILES: set[str] = {__file__, sys.modules[Node.__module__].__file__}


def _user_read() -> bool:
    """Whether the array-interface call running now came from outside symgraph (the user's code)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in ARRAY_INTERFACE_FILES:
        f = f.f_back
    return f is None or not _is_internal(f.f_code.co_filename)


def _is_argument(a: Node) -> bool:
    """Whether a is an argument of the traced function: an input, or a transformation's fresh variable."""
    if a.op.name == "input":
        return True
    t = a.tag
    return a.op.name == "copy" and type(t) is tuple and len(t) == 2 and t[0] == "fresh" and type(t[1]) is not tuple


def _owned(b: Builder, a: Node) -> bool:
    """Whether `a` is a node of the running trace's builder (so the trace may rebind it)."""
    return b._table.get(Builder.key(a)) is a


def _own_copy(a: Node) -> bool:
    """Whether `a` is an array of its own: a copy made for the user, or an array written before."""
    t = a.tag
    return a.op.name == "copy" and type(t) is tuple and len(t) == 2 and type(t[1]) is tuple and t[1][:1] == (
        "inplace",)


def track_shared(fn: Callable) -> Callable:
    """Wrap an array-interface member: record results that existed before the call (`_shared`).

    Interning makes `np.sin(x)` computed twice one node, and some operations return their operand
    itself (`+x`, `x + 0`); NumPy would give distinct arrays. A write into such a value would show in
    both names, so `setitem` refuses it (and `a += v` rebinds the name only).
    """
    def tracked(self: Node, *a: Any, **k: Any) -> Any:
        start = next(_ir_ids)
        r = fn(self, *a, **k)
        if type(r) is Node and r.id < start:
            note_shared(r)
        return r

    tracked.__name__ = getattr(fn, "__name__", "member")
    return tracked


def note_shared(r: Node) -> None:
    """Record that an array-interface call returned `r`, a node that existed before the call (`track_shared`)."""
    b = current_builder()
    sh = b.__dict__.get("inplace_shared")
    if sh is None:
        sh = b.__dict__["inplace_shared"] = set()
    sh.add(r)


def _shared(b: Builder, a: Node) -> bool:
    """Whether the user's code was handed `a` by more than one computation (see `track_shared`)."""
    sh = b.__dict__.get("inplace_shared")
    return sh is not None and a in sh and not _own_copy(a)


def _view_parent(n: Node) -> Node | None:
    """The node that n is a NumPy view of (slice, reshape, transpose, broadcast), or None.

    x[i] of an array of one dimension is a scalar in NumPy (a copy), not a view.
    """
    if not n.inputs or (n.op.view is None and not is_numpy_view(n)):
        return None
    p = n.inputs[0]
    if n.ndim == 0 and p.ndim > 0:
        return None
    return p


def _view_of(n: Node, pos: np.ndarray) -> np.ndarray:
    """The positions (into a root array) that view node n holds, given those of its parent."""
    if n.op.name == "gather":  # a declared NumPy view (diagonal, sliding windows): constant indices
        return np.take(pos, n.inputs[1].attr("value").array, axis=n.attr("axis"))
    return np.asarray(n.op.impl(pos, **n.params))


class _Readers:
    """The readers of every node of one intern table, kept up to date incrementally across writes.

    The table only grows (insertions at the end, in dict order) except for the re-keying `_commit`
    does itself, so each write indexes only the entries added since the last one: a write costs time
    linear in the nodes built since the previous write, not in the whole trace.
    """

    __slots__ = ("table", "pos", "readers")

    def __init__(self, table: dict):
        self.table = table
        self.pos = 0  # entries of `table` (in order) already indexed
        self.readers: dict[Node, dict[Node, None]] = {}

    def update(self) -> None:
        table, readers = self.table, self.readers
        for n in itertools.islice(reversed(table.values()), len(table) - self.pos):  # the new entries only
            for i in n.inputs:
                r = readers.get(i)
                if r is None:
                    readers[i] = {n: None}
                else:
                    r[n] = None
        self.pos = len(table)

    def rekey(self, key: tuple, n: Node, ins: tuple) -> None:
        """Give reader n the inputs `ins` (re-keying it in the table: its entry moves to the end)."""
        table, readers = self.table, self.readers
        for i in n.inputs:
            r = readers.get(i)
            if r is not None:
                r.pop(n, None)
        del table[key]
        self.pos -= 1
        _osetattr(n, "inputs", ins)
        table[(key[0], ins, key[2], key[3])] = n  # indexed again (with its new inputs) by the next update


#: id(intern table) -> its _Readers, for the tables of running traces (dropped when the trace ends)
_READERS: dict[int, _Readers] = {}


def _readers_of(b: Builder) -> _Readers:
    table = b._table
    r = _READERS.get(id(table))
    if r is None or r.table is not table:
        r = _READERS[id(table)] = _Readers(table)
    r.update()
    return r


def _commit(a: Node, new: Node, written: np.ndarray) -> None:
    """Rebind the object `a` (a node of the running trace) to the value `new` (built from `a`).

    The readers of `a` (re-pointed to the node that keeps a's old value) and the view nodes that may
    share memory with `a` in NumPy (for `_mark_views`) come from the table's incremental reader index
    (`_Readers`): a write costs time linear in the nodes built since the previous write.

    Args:
        a: the written node.
        new: its new value, same shape and dtype.
        written: the flat positions of `a` that the write changed (for the view checks).
    """
    b = current_builder()
    table = b._table
    chain = [a]  # a and the arrays it is a NumPy view of, up to the root
    while True:
        p = _view_parent(chain[-1])
        if p is None:
            break
        chain.append(p)
    aid = a.id
    index = _readers_of(b)
    rd = index.readers
    old = _new_node(a.op, a.inputs, a.attrs, a.shape, a.dtype, a.tag, meta(a))
    _osetattr(old, "id", aid)  # the old value keeps a's place in creation order
    table[Builder.key(a)] = old  # (an existing key: the entry keeps its place)
    for i in a.inputs:  # old, not a, now reads a's former inputs
        r = rd.get(i)
        if r is not None:
            r.pop(a, None)
            r[old] = None
    for n in list(rd.pop(a, ())):
        index.rekey(Builder.key(n), n, tuple(old if i is a else i for i in n.inputs))
    if a.op.name in ("broadcast_to", "constant"):  # the builder's memo holds splats of constants (lax._splat)
        for k, v in list(b.memo.items()):
            if v is a:
                b.memo[k] = old
    if new is a:
        new = old
    tag = ("fresh", ("inplace", next(_write_tags)))
    for name, value in (("op", OPS["copy"]), ("inputs", (new,)), ("attrs", ()), ("tag", tag),
                        ("id", next(_ir_ids)),
                        ("_meta", shared_meta(user_location(), current_role(), current_origin()))):
        _osetattr(a, name, value)
    table[Builder.key(a)] = a
    chain[0] = old
    index.update()
    _mark_views(b, a, chain, rd, written)


def _mark_views(b: Builder, a: Node, chain: list[Node], children: dict[Node, dict[Node, None]],
                written: np.ndarray) -> None:
    """Mark stale the views and bases that NumPy would show changed by a write into `a`.

    Args:
        a: the written object (now a copy of its new value).
        chain: the node holding a's old value, then the arrays it is a view of, up to the root.
        children: node -> the nodes reading it (the views among them are followed).
        written: flat positions of `a` written.
    """
    old, root = chain[0], chain[-1]
    pos = np.arange(root.size, dtype=np.int64).reshape(root.shape)
    root_pos = pos
    for n in reversed(chain[:-1]):
        pos = _view_of(n, pos)
    hit = np.zeros(root.size, bool)
    hit[pos.reshape(-1)[written]] = True
    if not hit.any():
        return
    loc = user_location()
    at = f" (the write at {loc})" if loc is not None else ""
    view_msg = (f"this traced array (shape {{shape}}) is a view (slice, reshape, transpose, diagonal, sliding "
                f"window) of an array that was "
                f"written after the view was taken{at}: NumPy would show the write in the view, but symgraph's "
                f"views are copies, so reading it would give the old values. Take the view again after the "
                f"write (c = a[1:] after a[...] = v), or write into the array with c's index")
    base_msg = (f"this traced array (shape {{shape}}) was written through a view of it{at}: NumPy would show "
                f"the write here, but symgraph's views are copies. Write into the array itself (a[i, j] = v "
                f"rather than a[i][j] = v), or take c = a[...].copy() if the view was meant as a copy")
    marks = b.__dict__.setdefault("inplace_marks", [])

    def mark(n: Node, msg: str) -> None:
        if n is not a and n is not old:
            STALE[n] = _Stale(msg.format(shape=n.shape), a, root, hit)
            marks.append(n)

    for n in chain[1:]:
        mark(n, base_msg)
    stack = [(root, root_pos)]
    while stack:
        n, p = stack.pop()
        for c in children.get(n, ()):
            if c.inputs[0] is not n or _view_parent(c) is None:
                continue
            pc = _view_of(c, p)
            if pc.size and hit[pc.reshape(-1)].any():
                mark(c, view_msg)
                stack.append((c, pc))


def _clear_marks(a: Node, value: Any, positions: np.ndarray) -> None:
    """A write of `value` into `a` over `positions` that writes back a written view clears its marks.

    `a[idx] += v` runs as `t = a[idx]; t += v; a[idx] = t`: the write into the view t marks a stale, and
    the write of t back into a makes a right again.
    """
    s = STALE.get(a)
    if s is None or s.token is not value or s.root is not a:
        return
    covered = np.zeros(a.size, bool)
    covered[positions.reshape(-1)] = True
    if (s.written & ~covered).any():
        return
    for n, m in list(STALE.items()):  # (a copy: other threads' traces mark and clear their own nodes)
        if m.token is value:
            STALE.pop(n, None)


def end_trace(b: Builder) -> None:
    """Forget the stale marks and the reader index of a trace that ended."""
    _READERS.pop(id(b._table), None)
    b.__dict__.pop("inplace_shared", None)
    for n in b.__dict__.pop("inplace_marks", ()):
        STALE.pop(n, None)


def _write_positions(x: Node, idx: Any) -> np.ndarray:
    """The flat positions of x that x[idx] selects, in NumPy's order and shape (concrete indices)."""
    try:
        return np.asarray(np.arange(x.size, dtype=np.int64).reshape(x.shape)[idx], dtype=np.int64)
    except IndexError as e:
        raise ShapeError(f"a[idx] = v: {e} (a has shape {x.shape})") from None


def _traced_mask(x: Node, idx: Any) -> Node | None:
    """The boolean mask node of `a[mask] = v` with a traced mask (of a's leading dimensions), or None."""
    if isinstance(idx, Node) and idx.dtype.kind == "b":
        if idx.shape != x.shape[:idx.ndim]:
            raise ShapeError(f"a[mask] = v: mask of shape {idx.shape} does not match a of shape {x.shape}")
        return idx
    return None


def _set_value(x: Node, idx: Any, v: Any) -> tuple[Node, np.ndarray]:
    """x with x[idx] replaced by v (NumPy's assignment: broadcast, cast, last write wins), and the positions."""
    m = _traced_mask(x, idx)
    if m is not None:
        vv = L.cast(L.asnode(v), x.dtype)
        if vv.size != 1:
            raise UnsupportedOpError("a[mask] = v with a traced boolean mask needs a single value v (the number of "
                                     "selected entries depends on the data); use a = np.where(mask, values, a)")
        mm = L.reshape(m, m.shape + (1,) * (x.ndim - m.ndim))
        return L.where(mm, L.reshape(vv, ()), x), np.arange(x.size, dtype=np.int64)
    key = idx if isinstance(idx, tuple) else (idx,)
    if len(key) == 1 and isinstance(key[0], Node):
        return _traced_index_write(x, key[0], v), np.arange(x.size, dtype=np.int64)
    if any(isinstance(i, Node) for i in key):
        raise UnsupportedOpError("a[idx] = v with a traced integer index among several indices is not supported "
                                 "(only a[i] = v with one traced index along the first axis); use concrete "
                                 "indices, or np.where over a mask")
    pos = _write_positions(x, idx)
    if isinstance(v, (list, tuple)) and any(isinstance(t, Node) for t in tree_flatten(v)[0]):
        v = snp.asarray(v)  # a list of traced values, built into one array
    if isinstance(v, Node):
        vv = L.cast(v, x.dtype)
    else:
        va = np.asarray(v)
        if va.dtype.kind not in "biuf":
            raise DTypeError(f"a[idx] = v: cannot write a value of dtype {va.dtype} into a traced array")
        vv = va.astype(x.dtype)
    vshape = tuple(np.shape(vv))
    while len(vshape) > pos.ndim and vshape[0] == 1:  # NumPy drops leading unit dimensions of v
        vshape = vshape[1:]
    try:
        np.broadcast_shapes(vshape, pos.shape)
        if np.broadcast_shapes(vshape, pos.shape) != pos.shape:
            raise ValueError
    except ValueError:
        raise ShapeError(f"a[idx] = v: could not broadcast v of shape {tuple(np.shape(vv))} into the indexed "
                         f"shape {pos.shape}") from None
    flat_pos = pos.reshape(-1)
    if flat_pos.size == 0:
        return x, flat_pos
    vb = L.broadcast_to(L.reshape(L.asnode(vv), vshape), pos.shape)
    flat_v = L.reshape(vb, (flat_pos.size,))
    _, first_rev = np.unique(flat_pos[::-1], return_index=True)
    if first_rev.size != flat_pos.size:  # repeated positions: the last write wins, as in NumPy
        keep = np.sort(flat_pos.size - 1 - first_rev)
        flat_v = L.bind("gather", flat_v, L.asnode(keep), axis=0)
        flat_pos = flat_pos[keep]
    if flat_pos.size == x.size and (flat_pos == np.arange(x.size)).all():  # a[...] = v: no scatter needed
        return L.reshape(flat_v, x.shape), flat_pos
    upd = L.bind("scatter_add", flat_v, L.asnode(flat_pos), shape=(x.size,), axis=0)
    if flat_pos.size == x.size:
        return L.reshape(upd, x.shape), flat_pos
    mask = np.zeros(x.size, bool)
    mask[flat_pos] = True
    return L.where(mask.reshape(x.shape), L.reshape(upd, x.shape), x), flat_pos


def _traced_index_write(x: Node, i: Node, v: Any) -> Node:
    """x with rows i (a traced integer index along axis 0) replaced by v: a select over the rows.

    A 0-d i writes v (broadcast to a row) into row i; an i of several indices writes one value v (broadcast
    to a row) into each of them. Negative indices count from the end; out-of-range ones write nothing
    (traced indices cannot raise; reads clamp, see getitem).
    """
    if i.dtype.kind not in "iu":
        raise DTypeError(f"a[i] = v: index of dtype {i.dtype}; indices must be integers")
    if x.ndim == 0:
        raise ShapeError("a[i] = v: too many indices for a 0-d array")
    n = x.shape[0]
    row = x.shape[1:]
    ii = L.cast(i, np.int64)
    ii = L.where(L.binary("lt", ii, 0), ii + n, ii)
    vv = L.cast(L.asnode(snp.asarray(v) if isinstance(v, (list, tuple)) else v), x.dtype)
    vshape = tuple(vv.shape)
    while len(vshape) > len(row) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        ok = np.broadcast_shapes(vshape, row) == row
    except ValueError:
        ok = False
    if not ok:
        if i.ndim:
            raise UnsupportedOpError(f"a[idx] = v with a traced index array of shape {i.shape} takes one value "
                                     f"for every selected row (v broadcast to shape {row}); got v of shape "
                                     f"{tuple(vv.shape)}. Use concrete indices for one value per index")
        raise ShapeError(f"a[i] = v: could not broadcast v of shape {tuple(vv.shape)} into a row of shape {row}")
    rows = L.asnode(np.arange(n, dtype=np.int64))
    if i.ndim == 0:
        mask = L.binary("eq", rows, ii)
    else:
        flat = L.reshape(ii, (1, i.size))
        hits = L.cast(L.binary("eq", L.reshape(rows, (n, 1)), flat), np.int64)
        mask = L.binary("gt", snp.sum(hits, axis=1), 0)
    mask = L.reshape(mask, (n,) + (1,) * len(row))
    vb = L.reshape(L.broadcast_to(L.reshape(vv, vshape), row), (1,) + row)
    return L.where(mask, vb, x)


def setitem(self: Node, idx: Any, value: Any) -> None:
    """`a[idx] = v` on a traced array: a functional update that rebinds the object `a` (see above)."""
    b = current_builder()
    if not tracing_active() or not _owned(b, self):
        check_live(self)
        raise TracerConversionError(
            f"a[idx] = v on a traced value (shape {self.shape}) that belongs to an enclosing or finished trace "
            f"(a closed-over value): only arrays of the running trace can be written. Write b = a.copy() "
            f"inside the function and write into b, or use the functional form a.at[idx].set(v).")
    if _is_argument(self):
        raise TracerConversionError(
            f"a[idx] = v into an argument of the traced function (shape {self.shape}): NumPy would write into the "
            f"caller's array, which a traced function cannot do (its arguments are values). Write a = a.copy() "
            f"first and return a, or use the functional form a = a.at[idx].set(v).")
    if STALE and _traced_mask(self, idx) is None:
        key = idx if isinstance(idx, tuple) else (idx,)
        if not any(isinstance(i, Node) for i in key):
            _clear_marks(self, value, _write_positions(self, idx))
    check_stale(self, value, idx)
    if _shared(b, self):
        raise TracerConversionError(
            f"a[idx] = v into a traced array (shape {self.shape}, op {self.op.name}) that is also the result of "
            f"another computation: symgraph shares equal values (np.sin(x) computed twice is one array) and "
            f"some operations return their operand (+a, a + 0), where NumPy makes distinct arrays, so the write "
            f"would show under both names. Make the array its own before writing: a = a.copy() (or compute "
            f"it once).")
    new, written = _set_value(self, idx, value)
    _commit(self, new, written)


INPLACE_METHODS = ("sort", "fill", "put", "resize", "itemset", "partition", "setfield")

INPLACE_BINOPS = {"iadd": ("add", "+"), "isub": ("subtract", "-"), "imul": ("multiply", "*"),
            "itruediv": ("divide", "/"), "ifloordiv": ("floor_divide", "//"), "imod": ("remainder", "%"),
            "ipow": ("power", "**")}


def inplace_binop(py: str) -> Callable:
    fn_name, sym = INPLACE_BINOPS[py]

    def op(self: Node, other: Any) -> Any:
        check_live(self)
        check_stale(other)
        r = getattr(snp, fn_name)(self, other)
        if not isinstance(r, Node):
            r = L.asnode(r)
        if r.shape != self.shape:
            raise ShapeError(f"a {sym}= v: the result of shape {r.shape} does not fit into a of shape "
                             f"{self.shape} (NumPy: non-broadcastable output operand)")
        if r.dtype != self.dtype:
            if not np.can_cast(r.dtype, self.dtype, "same_kind"):
                raise DTypeError(f"a {sym}= v: cannot cast the {fn_name} result from {r.dtype} to a's dtype "
                                 f"{self.dtype} with casting rule 'same_kind' (as NumPy); write a = a {sym} v")
            r = L.cast(r, self.dtype)
        b = current_builder()
        if not _owned(b, self) or _is_argument(self) or _shared(b, self):
            return r  # rebind the name only (an argument, or an array other computations also returned)
        _commit(self, r, np.arange(self.size, dtype=np.int64))
        return self

    op.__name__ = f"__{py}__"
    return op


def check_writable(self: Node, what: str) -> None:
    """Raise unless the running trace may rebind `self` (see `_commit`), naming `what` was attempted."""
    check_live(self)
    if not _owned(current_builder(), self):
        raise TracerConversionError(
            f"{what} on a traced value (shape {self.shape}) that belongs to an enclosing or finished trace: only "
            f"arrays of the running trace can be written in place. Write b = a.copy() inside the function "
            f"and write into b.")
    if _is_argument(self):
        raise TracerConversionError(
            f"{what} on an argument of the traced function (shape {self.shape}) modifies it in place: NumPy "
            f"would write into the caller's array, which a traced function cannot do (its arguments are "
            f"values). Write x = x.copy() first and return x, or use the functional form.")
    if _shared(current_builder(), self):
        raise TracerConversionError(
            f"{what} on a traced array (shape {self.shape}) that is also the result of another computation "
            f"(symgraph shares equal values), so the write would show under both names; write x = x.copy() "
            f"first.")


def inplace_method(name: str) -> Callable:
    """x.sort() / x.partition() / x.fill() / x.put(): in-place updates of traced arrays (as `setitem`)."""
    fixes = {"sort": "x = np.sort(x, axis)", "partition": "x = np.partition(x, kth, axis)",
             "fill": "x = np.full_like(x, v)", "put": "x = x.at[np.unravel_index(ind, x.shape)].set(v)"}

    def fn(self: Node, *a: Any, **k: Any) -> None:
        if name not in fixes:
            raise TracerConversionError(
                f"x.{name}(...) modifies a traced value (shape {self.shape}) in place, which tracing does not "
                f"support for this method. Use a functional form (x = ..., x[idx] = v or x.at[idx].set(v)).")
        check_writable(self, f"x.{name}(...)")
        if name == "fill":
            (value,) = a
            setitem(self, Ellipsis, value)
            return None
        if name == "put":
            _put(self, *a, **k)
            return None
        new = getattr(snp, name)(self, *a, **k)
        _commit(self, new, np.arange(self.size, dtype=np.int64))
        return None

    fn.__name__ = name
    return fn


def _put(self: Node, ind: Any, v: Any, mode: str = "raise") -> None:
    """x.put(ind, v, mode): x.flat[ind] = v, v repeated to the length of ind (NumPy's ndarray.put)."""
    if isinstance(ind, Node):
        raise UnsupportedOpError("x.put(ind, v) with traced indices is not supported; use concrete indices")
    p = np.asarray(ind, dtype=np.int64).reshape(-1)
    n = self.size
    if mode == "wrap":
        p = p % n
    elif mode == "clip":
        p = np.clip(p, 0, n - 1)
    elif mode == "raise":
        if p.size and (p.min() < -n or p.max() >= n):
            raise ShapeError(f"x.put: index out of bounds for size {n}: {p.min()}..{p.max()}")
        p = np.where(p < 0, p + n, p)
    else:
        raise SymgraphError(f"x.put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    if p.size == 0:
        return
    vv = L.reshape(L.asnode(snp.asarray(v) if isinstance(v, (list, tuple)) else v), (-1,))
    if vv.shape[0] == 0:
        raise ShapeError("x.put: values must not be empty")
    if vv.shape[0] != p.size:
        vv = L.bind("gather", vv, L.asnode(np.arange(p.size, dtype=np.int64) % vv.shape[0]), axis=0)
    setitem(self, np.unravel_index(p, self.shape), vv)


def own_array(func: Any, args: tuple, kwargs: dict) -> Node:
    """np.zeros_like / ones_like / empty_like / full_like / copy of a traced array: an array of its own.

    NumPy returns a new array that the code may then write into (a[idx] = v), so the traced result is a
    uniquely tagged node (never shared with an equal value by interning); empty_like gives zeros.
    """
    params = inspect.signature(func).bind(*args, **kwargs).arguments
    x = params.pop("a", None)
    if x is None:
        x = params.pop("prototype")
    if func is np.copy:
        return fresh_copy(x)
    extra = {k for k, v in params.items() if v is not None and k not in ("dtype", "shape", "fill_value")
             and not (k == "order" and v in ("K", "C", "A")) and not (k == "subok" and v is True)}
    if extra:
        raise UnsupportedOpError(f"np.{func.__name__}: keyword arguments {sorted(extra)} are not supported on "
                                 f"traced values")
    dtype = np.dtype(params.get("dtype") or x.dtype)
    shape = params.get("shape")
    shape = x.shape if shape is None else ((int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape))
    fill = {np.zeros_like: 0, np.empty_like: 0, np.ones_like: 1}.get(func, params.get("fill_value"))
    if isinstance(fill, Node):
        return fresh_copy(L.broadcast_to(L.cast(fill, dtype), shape))
    return fresh_copy(L.asnode(np.full(shape, fill, dtype=dtype)))


OWN_ARRAY = (np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.copy)
