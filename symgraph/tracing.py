"""Tracing: running a Python function on tracers records one run as a Graph.

Graph nodes act as tracers. This module implements their array interface
(declared by `symgraph.ir.Node`, installed when this module is imported):
NumPy's operators, `__array_ufunc__` and `__array_function__` (so unmodified
NumPy code traces), indexing, the array methods users expect, and guards that
turn Python control flow on traced values into a clear `TracerConversionError`.

In-place updates (`a[idx] = v`, `a[idx] += v`, `a += v`; docs/tracing.md, "In-place updates"). Nodes
are immutable and interned, so a write rebinds the Python object instead, within the running trace:
the functional update `new` is built from `a` (so indices, shapes and dtypes are checked first), a
fresh node takes over a's old value, both in the intern table and in every node that already read
`a`, and the object `a` becomes a uniquely tagged `copy` of `new` (simplify removes it). Earlier
reads keep the old value, later reads and every alias of the object see the new one, and the graph
is an ordinary graph for every transformation. Only nodes of the running trace's builder that are not
arguments are rebound (never nodes of passes or of finished traces). NumPy views (`a[1:]`, `.T`,
reshape) are copies in the graph; a view or base that NumPy would show changed by a write is marked
stale and refuses the user's later reads (`_STALE`), rather than giving a different number.
"""

from __future__ import annotations

import inspect
import dis
import itertools
import numbers
import re
import sys
import threading
from typing import Any, Callable

import numpy as np

from . import lax as L
from . import numpy as snp
from .errors import (DTypeError, ShapeError, SourceLocation, SymgraphError, TracerConversionError,
                     UnsupportedOpError, _is_internal, user_location)
from .ir import (Builder, Graph, Node, NodeMeta, collector_paused, current_builder, current_role, install_array_api,
                 is_numpy_view, meta, tracing_active)
from .ir import _ids as _ir_ids, _new_node
from .lax import as_output
from .ops import OPS
from .tree import tree_flatten, tree_paths, tree_unflatten

_osetattr = object.__setattr__

__all__ = ["trace", "make_input", "getitem", "flatten_args", "check_args", "arg_leaf_names", "leaf_problem", "leaf_spec"]

_input_tags = iter(range(1 << 62))


def make_input(shape: tuple, dtype: Any, index: int, name: str) -> Node:
    """A fresh input node of the current builder (unique by tag)."""
    return current_builder().make(
        OPS["input"], (), {"shape": tuple(int(d) for d in shape), "dtype": np.dtype(dtype), "index": index, "name": name},
        tag=("input", next(_input_tags)),
    )


def leaf_problem(x: Any) -> tuple[type, str] | None:
    """Why `x` cannot be an argument leaf: (error class, message after "argument NAME"), or None."""
    if isinstance(x, Node) or isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, numbers.Real) and not isinstance(x, np.generic):
        return None
    ma = sys.modules.get("numpy.ma")  # a masked array exists only once numpy.ma is imported (importing it costs ~8 ms)
    if ma is not None and isinstance(x, ma.MaskedArray):
        n = int(ma.count_masked(x))
        return UnsupportedOpError, (f"is a numpy.ma.MaskedArray (shape {x.shape}, {n} masked entries); symgraph has no "
                                    f"masked-array semantics and would silently drop the mask. Pass the data "
                                    f"explicitly (np.ma.filled(x, fill_value) or x.data) and apply the mask with "
                                    f"np.where")
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype == object or x.dtype.kind not in "biuf":
            return DTypeError, f"has dtype {x.dtype}; symgraph traces bool, integer and float arrays"
        return None
    if isinstance(x, (list, tuple)):
        return DTypeError, f"is a {type(x).__name__}; pass np.asarray(...) for arrays"
    return DTypeError, (f"has type {type(x).__name__}; symgraph traces arrays and numbers "
                        f"(mark other arguments static, or close over them)")


def leaf_spec(x: Any, pos: str) -> tuple[tuple, np.dtype]:
    """Shape and dtype of an argument leaf (Python floats are float64 scalars).

    Args:
        x: the leaf.
        pos: its name in error messages ("0 (x)").

    Raises:
        DTypeError: for object arrays, strings and other non-numeric leaves.
        UnsupportedOpError: for masked arrays (the mask would be lost).
    """
    problem = leaf_problem(x)
    if problem is not None:
        cls, msg = problem
        raise cls(f"argument {pos} {msg}")
    if isinstance(x, Node):
        return x.shape, x.dtype
    if isinstance(x, (bool, np.bool_)):
        return (), np.dtype(bool)
    if isinstance(x, numbers.Integral) and not isinstance(x, np.generic):
        return (), np.dtype(np.int64)
    if isinstance(x, numbers.Real) and not isinstance(x, np.generic):
        return (), np.dtype(np.float64)
    return tuple(x.shape), x.dtype.newbyteorder("=")  # byte-swapped arrays trace as native dtypes


def _is_number_list(x: Any) -> bool:
    """A non-empty (nested) list of Python or NumPy scalars: an array spelled as a list."""
    if not isinstance(x, list) or not x:
        return False
    return all(_is_number_list(c) if isinstance(c, list) else
               isinstance(c, (numbers.Number, np.bool_)) and not isinstance(c, Node) for c in x)


def _list_hint(e: Exception, listed: tuple[int, str], names: list[str]) -> DTypeError:
    """f failed on a list-of-numbers argument as if it were an array: say the list is a pytree, not an array.

    The result is a DTypeError (so also a TypeError) at the call that passed the list (where the fix goes),
    quoting the original error and the line where it happened.
    """
    top, path = listed
    nm = names[top] if top < len(names) else ""
    arg = f"{top} ({nm}{path})" if nm and not re.fullmatch(r"a\d+", nm) else f"{top}{path}"
    if isinstance(e, SymgraphError):
        what, failed = f"{type(e).__name__}: {e.message}", e.location
    else:
        what, failed, tb = f"{type(e).__name__}: {e}", None, e.__traceback__
        while tb is not None:  # the innermost user frame of the failure (the line that treated the list as an array)
            code = tb.tb_frame.f_code
            if not _is_internal(code.co_filename):
                failed = SourceLocation(code.co_filename, tb.tb_lineno, code.co_name)
            tb = tb.tb_next
    at = f" at {failed}" if failed is not None else ""
    return DTypeError(f"argument {arg} is a Python list of numbers, which traces as a pytree of scalars (as in JAX "
                      f"and autograd), not as an array; pass np.asarray(...) for an array.\n  The failure{at} was "
                      f"{what}", user_location())


def _find_number_list(tops: list[Any]) -> tuple[int, str] | None:
    """(index into tops, path) of the first list of numbers in the arguments, or None."""
    for top, obj in enumerate(tops):
        stack: list[tuple[Any, str]] = [(obj, "")]
        while stack:
            o, path = stack.pop()
            if isinstance(o, list):
                if _is_number_list(o):
                    return top, path
                stack.extend((c, f"{path}[{i}]") for i, c in enumerate(o))
            elif isinstance(o, tuple):
                fields = getattr(o, "_fields", None)
                stack.extend((c, f"{path}.{fields[i]}" if fields else f"{path}[{i}]") for i, c in enumerate(o))
            elif isinstance(o, dict):
                stack.extend((v, f"{path}[{k!r}]") for k, v in o.items())
    return None


def arg_leaf_names(f: Callable | None, args: tuple, kwargs: dict | None = None,
                   positions: list[int] | None = None) -> list[str]:
    """Names of the argument leaves, in flattening order, for error messages.

    Args:
        f: the user's function (its parameter names are used when available).
        args: positional arguments.
        kwargs: keyword arguments (their leaves come after the positional ones).
        positions: the original position of each of `args` (when static ones were removed).

    Returns:
        One name per leaf: "0 (x)", "1 (params['w'][0])", "scale (keyword)".
    """
    positions = list(range(len(args))) if positions is None else positions
    nparams = max(positions, default=-1) + 1
    pnames = _arg_names(f, nparams) if f is not None else [f"arg{i}" for i in range(nparams)]
    names = []
    for k, a in zip(positions, args):
        for p in tree_paths(tree_flatten(a)[1]):
            names.append(f"{k} ({pnames[k]}{p})")
    for key in sorted(kwargs or {}):
        for p in tree_paths(tree_flatten(kwargs[key])[1]):
            names.append(f"{key}{p} (keyword)")
    return names


def check_args(args: tuple, f: Callable | None = None, fname: str | None = None, kwargs: dict | None = None,
               positions: list[int] | None = None) -> tuple[list[Any], Any, list[tuple[tuple, np.dtype]]]:
    """The argument check shared by every entry point (trace, transformations on arrays, compile).

    Every leaf must be a bool/integer/float array or a Python number; lists of
    numbers are rejected (symgraph, like `jax.jit`, treats lists as pytrees,
    not arrays), and so are masked arrays (the mask would be lost). Errors name
    the argument by position, parameter name and pytree path.

    Args:
        args: positional arguments (pytrees).
        f: the user's function, for parameter names.
        fname: prefix of error messages ("compile(f)", "grad(f)").
        kwargs: keyword arguments; when given, the tree is `(args, kwargs)`.
        positions: the original position of each of `args` (when static ones were removed).

    Returns:
        (leaves, treedef, [(shape, dtype) per leaf]); byte-swapped dtypes are given in native order.

    Raises:
        DTypeError: a string, object or complex array, ... (a list of numbers is a pytree of scalars, as in JAX).
        UnsupportedOpError: a masked array.
    """
    args = tuple(args)
    prefix = f"{fname}: " if fname else ""
    positions = list(range(len(args))) if positions is None else positions
    leaves, treedef = tree_flatten(args if kwargs is None else (args, kwargs))
    specs = []
    for i, x in enumerate(leaves):
        if type(x) is np.ndarray and x.dtype.kind in "biuf":
            d = x.dtype
            specs.append((x.shape, d if d.isnative else d.newbyteorder("=")))
            continue
        problem = leaf_problem(x)
        if problem is not None:
            cls, msg = problem
            raise cls(f"{prefix}argument {arg_leaf_names(f, args, kwargs, positions)[i]} {msg}")
        specs.append(leaf_spec(x, str(i)))
    return leaves, treedef, specs


def flatten_args(args: tuple) -> tuple[list[Any], Any]:
    """Flatten positional arguments into leaves and a TreeDef."""
    return tree_flatten(tuple(args))


def _arg_names(f: Callable, n: int) -> list[str]:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        p = params[i] if i < len(params) else None
        if p is not None and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p is not None and p.kind == p.VAR_POSITIONAL:
            names.extend(f"{p.name}{j}" for j in range(n - i))
            break
        else:
            names.append(f"arg{i}")
    return names


def trace(f: Callable, *example_args: Any, name: str | None = None) -> Graph:
    """Record one run of `f` on tracers as a Graph.

    Args:
        f: a Python function of arrays (or pytrees of arrays) that uses NumPy or
            `symgraph.numpy` operations.
        *example_args: arrays, Python numbers or pytrees of them; only their
            shapes and dtypes matter (Python floats are float64 scalars).
        name: graph label (default: f's name).

    Returns:
        A Graph with one input node per argument leaf and one output node per
        result leaf; `graph.evaluate(*args)` reruns it with the NumPy evaluator.

    Raises:
        DTypeError: for arguments that are not numeric arrays or numbers. A
            Python list of numbers is a pytree of scalars (as in JAX and
            autograd); when f then fails on it as if it were an array, the
            error says to pass np.asarray(...).
        UnsupportedOpError: for masked arrays (the mask would be lost).
        TracerConversionError: when f needs a concrete value of a tracer
            (Python `if` on a traced value, float(), ...).
        UnsupportedOpError: for NumPy functions without a rule.
    """
    if not callable(f):
        raise SymgraphError(f"trace: expected a callable, got {type(f).__name__}")
    leaves, in_tree, specs = check_args(example_args, f, name or getattr(f, "__name__", "f"))
    names = _arg_names(f, len(example_args))
    counts = [len(tree_flatten(a)[0]) for a in example_args]
    leaf_names = []
    for nm, c in zip(names, counts):
        leaf_names.extend([nm] if c == 1 else [f"{nm}[{j}]" for j in range(c)])
    with collector_paused(), Builder() as b:  # a trace builds many small objects (`collector_paused`)
        inputs = []
        for i, ((shape, dtype), nm) in enumerate(zip(specs, leaf_names)):
            inputs.append(make_input(shape, dtype, i, nm))
        _numpy_store.pending = None
        try:
            out = f(*tree_unflatten(in_tree, inputs))
            out_leaves, out_tree = tree_flatten(out)
            _check_stale(out_leaves, always=True)
        except ValueError as e:  # NumPy replaces the error of a traced value stored into an ndarray
            pending, _numpy_store.pending = _numpy_store.pending, None
            if pending is not None and "sequence" in str(e):
                raise TracerConversionError(*pending) from None
            raise
        except (TypeError, TracerConversionError) as e:
            listed = _find_number_list(list(example_args))
            if listed is None:
                raise
            raise _list_hint(e, listed, names) from None
        finally:
            _end_trace(b)
        outputs = [as_output(o, i) for i, o in enumerate(out_leaves)]
    del b
    g = Graph(inputs, outputs, in_tree, out_tree, name=name or getattr(f, "__name__", "f"))
    own = {id(x) for x in inputs}
    for n in g.toposort():  # (cached on the graph: the passes that follow reuse the order)
        if n.op.name == "input" and id(n) not in own:
            raise TracerConversionError(
                f"{g.name}: the result depends on a traced value of another trace (input {n.attr('name')!r}, "
                f"shape {n.shape}, dtype {n.dtype}) that escaped it (through a list, a global, an attribute or a "
                f"closure). Return values from the function that computes them and pass them in as arguments.")
    return g


# ----- the array interface of traced values (installed on `ir.Node`, see the end of this module) -----


def _check_live(x: Node) -> None:
    """Raise when `x` is used after the trace that made it ended (JAX's escaped-tracer error).

    Also when `x` is a view or base that an in-place write left stale (`_STALE`).
    """
    if _STALE:
        _check_stale(x)
    if not tracing_active():
        loc = meta(x).location
        raise TracerConversionError(
            f"a traced value (shape {x.shape}, dtype {x.dtype}, op {x.op.name}"
            f"{f', made at {loc}' if loc is not None else ''}) was used after the trace that made it ended: it "
            f"escaped the traced function (through a list, a global, an attribute or a closure). Return it from "
            f"the function instead, and use the returned array.")


def _binop(name: str, reverse: bool = False) -> Callable:
    def op(self: Node, other: Any) -> Any:
        _check_live(self)
        if _STALE:
            _check_stale(other)
        fn = getattr(snp, name)
        return fn(other, self) if reverse else fn(self, other)

    op.__name__ = name
    return op


#: Python operator -> symgraph.numpy function
_BINOPS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
    "matmul": "matmul", "floordiv": "floor_divide", "mod": "remainder",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _unary(name: str) -> Callable:
    def op(self: Node) -> Any:
        _check_live(self)
        return getattr(snp, name)(self)

    op.__name__ = name
    return op


def _conversion_error(what: str, fix: str) -> Callable:
    def fn(self: Node, *a: Any, **k: Any) -> Any:
        raise TracerConversionError(
            f"{what} needs a concrete value, but this is a traced value of shape {self.shape} and dtype "
            f"{self.dtype} (op {self.op.name}). {fix}"
        )

    return fn


_IF_FIX = ("Python control flow cannot depend on traced values; use symgraph.numpy.where(cond, a, b) "
           "(or np.where) to select values, or pass the value as a static argument.")
_KEEP_FIX = "Keep the value in the graph, or return it from the function and convert the result."
_STATIC_FIX = ("Shapes, loop counts and Python indices must be concrete: pass the value as a static argument "
               "(sg.compile(f, static_argnums=...)), or compute it from shapes (x.shape[0]).")


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
# (`_STALE`) and refuses the user's later reads with a clear error.

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
_STALE: dict[Node, _Stale] = {}


def _fresh_copy(x: Node) -> Node:
    """A node equal to x but distinct from it (a uniquely tagged `copy`): an array of its own."""
    return L.bind("copy", x, tag=("fresh", ("inplace", next(_write_tags))))


def _check_stale(*xs: Any, always: bool = False) -> None:
    """Raise when the user's code reads one of xs (nodes, or lists/tuples of them) that a write left stale.

    Reads by symgraph's own code (derivative rules building on the graph) are not user reads: the graph
    holds the old values on purpose. `always` checks regardless of the caller (the trace's outputs).
    """
    for x in xs:
        if isinstance(x, (list, tuple)):
            _check_stale(*x, always=always)
        elif isinstance(x, Node):
            s = _STALE.get(x)
            if s is not None and (always or _user_read()):
                raise TracerConversionError(s.message)


_HERE = (__file__, sys.modules[Node.__module__].__file__)


def _user_read() -> bool:
    """Whether the array-interface call running now came from outside symgraph (the user's code)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in _HERE:
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


def _track_shared(fn: Callable) -> Callable:
    """Wrap an array-interface member: record results that existed before the call (`_shared`).

    Interning makes `np.sin(x)` computed twice one node, and some operations return their operand
    itself (`+x`, `x + 0`); NumPy would give distinct arrays. A write into such a value would show in
    both names, so `_setitem` refuses it (and `a += v` rebinds the name only).
    """
    def tracked(self: Node, *a: Any, **k: Any) -> Any:
        start = next(_ir_ids)
        r = fn(self, *a, **k)
        if type(r) is Node and r.id < start:
            b = current_builder()
            sh = b.__dict__.get("inplace_shared")
            if sh is None:
                sh = b.__dict__["inplace_shared"] = set()
            sh.add(r)
        return r

    tracked.__name__ = getattr(fn, "__name__", "member")
    return tracked


def _shared(b: Builder, a: Node) -> bool:
    """Whether the user's code was handed `a` by more than one computation (see `_track_shared`)."""
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
                        ("id", next(_ir_ids)), ("_meta", NodeMeta(user_location(), current_role()))):
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
            _STALE[n] = _Stale(msg.format(shape=n.shape), a, root, hit)
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
    s = _STALE.get(a)
    if s is None or s.token is not value or s.root is not a:
        return
    covered = np.zeros(a.size, bool)
    covered[positions.reshape(-1)] = True
    if (s.written & ~covered).any():
        return
    for n, m in list(_STALE.items()):  # (a copy: other threads' traces mark and clear their own nodes)
        if m.token is value:
            _STALE.pop(n, None)


def _end_trace(b: Builder) -> None:
    """Forget the stale marks and the reader index of a trace that ended."""
    _READERS.pop(id(b._table), None)
    b.__dict__.pop("inplace_shared", None)
    for n in b.__dict__.pop("inplace_marks", ()):
        _STALE.pop(n, None)


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


def _setitem(self: Node, idx: Any, value: Any) -> None:
    """`a[idx] = v` on a traced array: a functional update that rebinds the object `a` (see above)."""
    b = current_builder()
    if not tracing_active() or not _owned(b, self):
        _check_live(self)
        raise TracerConversionError(
            f"a[idx] = v on a traced value (shape {self.shape}) that belongs to an enclosing or finished trace "
            f"(a closed-over value): only arrays of the running trace can be written. Write b = a.copy() "
            f"inside the function and write into b, or use the functional form a.at[idx].set(v).")
    if _is_argument(self):
        raise TracerConversionError(
            f"a[idx] = v into an argument of the traced function (shape {self.shape}): NumPy would write into the "
            f"caller's array, which a traced function cannot do (its arguments are values). Write a = a.copy() "
            f"first and return a, or use the functional form a = a.at[idx].set(v).")
    if _STALE and _traced_mask(self, idx) is None:
        key = idx if isinstance(idx, tuple) else (idx,)
        if not any(isinstance(i, Node) for i in key):
            _clear_marks(self, value, _write_positions(self, idx))
    _check_stale(self, value, idx)
    if _shared(b, self):
        raise TracerConversionError(
            f"a[idx] = v into a traced array (shape {self.shape}, op {self.op.name}) that is also the result of "
            f"another computation: symgraph shares equal values (np.sin(x) computed twice is one array) and "
            f"some operations return their operand (+a, a + 0), where NumPy makes distinct arrays, so the write "
            f"would show under both names. Make the array its own before writing: a = a.copy() (or compute "
            f"it once).")
    new, written = _set_value(self, idx, value)
    _commit(self, new, written)


_INPLACE_METHODS = ("sort", "fill", "put", "resize", "itemset", "partition", "setfield")

_INPLACE = {"iadd": ("add", "+"), "isub": ("subtract", "-"), "imul": ("multiply", "*"),
            "itruediv": ("divide", "/"), "ifloordiv": ("floor_divide", "//"), "imod": ("remainder", "%"),
            "ipow": ("power", "**")}


def _inplace_binop(py: str) -> Callable:
    fn_name, sym = _INPLACE[py]

    def op(self: Node, other: Any) -> Any:
        _check_live(self)
        _check_stale(other)
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


def _check_writable(self: Node, what: str) -> None:
    """Raise unless the running trace may rebind `self` (see `_commit`), naming `what` was attempted."""
    _check_live(self)
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


def _inplace_method(name: str) -> Callable:
    """x.sort() / x.partition() / x.fill() / x.put(): in-place updates of traced arrays (as `_setitem`)."""
    fixes = {"sort": "x = np.sort(x, axis)", "partition": "x = np.partition(x, kth, axis)",
             "fill": "x = np.full_like(x, v)", "put": "x = x.at[np.unravel_index(ind, x.shape)].set(v)"}

    def fn(self: Node, *a: Any, **k: Any) -> None:
        if name not in fixes:
            raise TracerConversionError(
                f"x.{name}(...) modifies a traced value (shape {self.shape}) in place, which tracing does not "
                f"support for this method. Use a functional form (x = ..., x[idx] = v or x.at[idx].set(v)).")
        _check_writable(self, f"x.{name}(...)")
        if name == "fill":
            (value,) = a
            _setitem(self, Ellipsis, value)
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
    _setitem(self, np.unravel_index(p, self.shape), vv)


def _own_array(func: Any, args: tuple, kwargs: dict) -> Node:
    """np.zeros_like / ones_like / empty_like / full_like / copy of a traced array: an array of its own.

    NumPy returns a new array that the code may then write into (a[idx] = v), so the traced result is a
    uniquely tagged node (never shared with an equal value by interning); empty_like gives zeros.
    """
    params = inspect.signature(func).bind(*args, **kwargs).arguments
    x = params.pop("a", None)
    if x is None:
        x = params.pop("prototype")
    if func is np.copy:
        return _fresh_copy(x)
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
        return _fresh_copy(L.broadcast_to(L.cast(fill, dtype), shape))
    return _fresh_copy(L.asnode(np.full(shape, fill, dtype=dtype)))


_OWN_ARRAY = (np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.copy)

_numpy_store = threading.local()  # .pending: (message, location) of a traced value stored into an ndarray


def _numpy_store_message(x: Node) -> str:
    return (f"a traced value (shape {x.shape}, dtype {x.dtype}) cannot be written into a NumPy array (a[idx] = v "
            f"with a made by np.zeros / np.empty / np.array of numbers): NumPy arrays hold numbers, not traced "
            f"values. Make the array from a traced one, so that the write traces: a = np.zeros_like(x) (or "
            f"np.empty_like(x), x.copy()) and then a[idx] = v; or build the result functionally with "
            f"a = a.at[idx].set(v) on a traced a (or np.where, np.stack).")


def _storing_into_ndarray() -> bool:
    """Whether the user's line running now is `a[idx] = v` (NumPy converting v to store it in an ndarray)."""
    f = sys._getframe(1)
    while f is not None and _is_internal(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return False
    code = f.f_code.co_code
    return 0 <= f.f_lasti < len(code) and dis.opname[code[f.f_lasti]] == "STORE_SUBSCR"


def _scalar_conversion(what: str, fix: str) -> Callable:
    """float() / int() of a traced value; when NumPy calls it to store the value in an ndarray, say so."""
    plain = _conversion_error(what, fix)

    def fn(self: Node, *a: Any, **k: Any) -> Any:
        if _storing_into_ndarray():
            msg = _numpy_store_message(self)
            _numpy_store.pending = (msg, user_location())  # NumPy turns the error into a ValueError: see trace()
            raise TracerConversionError(msg)
        return plain(self, *a, **k)

    return fn


def _len(self: Node) -> int:
    if not self.shape:
        raise TypeError("len() of a 0-d traced value")
    return self.shape[0]


def _iter(self: Node) -> Any:
    if not self.shape:
        raise TypeError("iteration over a 0-d traced value")
    return (self[i] for i in range(self.shape[0]))


def _method(name: str) -> Callable:
    def m(self: Node, *a: Any, **k: Any) -> Any:
        _check_live(self)
        return getattr(snp, name)(self, *a, **k)

    m.__name__ = name
    return m


def _copy(self: Node, order: str = "K") -> Node:
    """x.copy(): an array of its own (a uniquely tagged copy), so that writes into it leave x alone."""
    _check_live(self)
    return _fresh_copy(self)


def _conj(self: Node) -> Node:
    """x.conj(): real dtypes only (complex is refused), so the same value."""
    _check_live(self)
    return self


def _no_rule_method(name: str) -> Callable:
    def m(self: Node, *a: Any, **k: Any) -> Any:
        raise UnsupportedOpError(f"x.{name}(...) on a traced value (shape {self.shape}, dtype {self.dtype}) has no "
                                 f"rule in symgraph yet; write it with supported operations (see symgraph.numpy)")

    m.__name__ = name
    return m


def _memory_attribute(name: str) -> Callable:
    def get(self: Node) -> Any:
        raise TracerConversionError(f"x.{name} needs the memory of a concrete array, but this is a traced value "
                                    f"(shape {self.shape}, dtype {self.dtype}); return the value from the function "
                                    f"and use {name} on the result")

    return get


def _scipy_caller() -> tuple[str, str, Any] | None:
    """(function, scipy subpackage, the user's line) when a SciPy function is converting a traced value, or None.

    The function is the outermost SciPy frame (the one user code called), so `scipy.stats.norm.logpdf(x)`
    names logpdf and the subpackage "stats".
    """
    f = sys._getframe(2)
    outer = None
    for _ in range(40):
        if f is None:
            break
        mod = f.f_globals.get("__name__", "")
        if mod == "scipy" or mod.startswith("scipy."):
            outer = f
        elif outer is not None:
            break
        f = f.f_back
    if outer is None:
        return None
    parts = outer.f_globals.get("__name__", "").split(".")
    sub = parts[1] if len(parts) > 1 else ""
    loc = SourceLocation(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) if f is not None else None
    return outer.f_code.co_name, sub, loc


def _to_ndarray_error(self: Node, *a: Any, **k: Any) -> Any:
    """`__array__`: NumPy wants an ndarray of a traced value; the message names the traced spelling.

    np.r_/np.c_ (index tricks) and np.array/np.asarray convert before any protocol sees the tracer.
    """
    f = sys._getframe(1)
    tricks = False
    for _ in range(4):
        if f is None:
            break
        if f.f_code.co_filename.endswith(("_index_tricks_impl.py", "index_tricks.py")):
            tricks = True
            break
        f = f.f_back
    if not tricks and _storing_into_ndarray():
        raise TracerConversionError(_numpy_store_message(self))
    scipy_call = _scipy_caller()
    if scipy_call is not None:
        name, sub, loc = scipy_call
        ours = f"symgraph.scipy.{sub}" if sub in ("special", "stats", "signal") else None
        fix = (f"use {ours} (the same names, written with traced operations)" if ours else
               "symgraph has no traced version of it yet")
        raise TracerConversionError(f"SciPy's {name} converts its arguments with np.asarray before any protocol sees "
                                    f"a traced value (shape {self.shape}, dtype {self.dtype}); {fix}", loc)
    if tricks:
        fix = ("np.r_[...] and np.c_[...] convert every item to a NumPy array before symgraph sees it; write "
               "np.concatenate([a, b]) (np.r_) or np.column_stack([a, b]) (np.c_), or use symgraph.numpy.r_ / c_, "
               "which trace.")
    else:
        fix = ("np.array([x, y]) / np.asarray of a traced value or of a list of them cannot return a traced value "
               "(NumPy converts first): write np.stack([x, y]) (or symgraph.numpy.array / asarray, which trace), "
               "drop np.asarray(x) on a value that is already an array, or return the value from the function. "
               "Functions that take a traced value as a size (np.arange(n), np.zeros(n)) need it concrete: "
               + _STATIC_FIX)
    raise TracerConversionError(f"conversion to a NumPy array (np.asarray / np.array) needs a concrete value, but "
                                f"this is a traced value of shape {self.shape} and dtype {self.dtype} (op "
                                f"{self.op.name}). {fix}")


def _reshape_method(self: Node, *shape: Any, **kw: Any) -> Any:
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    return L.reshape(self, shape)


def _transpose_method(self: Node, *axes: Any) -> Any:
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = tuple(axes[0]) if axes[0] is not None else None
    return L.transpose(self, axes or None)


def _astype(self: Node, dtype: Any, copy: bool = True) -> Any:
    out = L.cast(self, dtype)
    return _fresh_copy(out) if copy and out is self else out  # NumPy's astype copies by default


# ----- NumPy protocols -----


def _array_ufunc(self: Node, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    _check_live(self)
    if _STALE:
        _check_stale(inputs)
    out_arg = kwargs.get("out")
    if out_arg is not None and any(isinstance(o, np.ndarray) for o in (out_arg if isinstance(out_arg, tuple)
                                                                        else (out_arg,))):
        raise TracerConversionError(_numpy_store_message(self))
    if kwargs.get("out") is not None:
        raise UnsupportedOpError(f"np.{ufunc.__name__}(..., out=...) writes in place, which tracing does not support")
    kwargs.pop("out", None)
    if method == "reduce":
        red = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}.get(ufunc.__name__)
        if red is None:
            raise UnsupportedOpError(f"np.{ufunc.__name__}.reduce has no rule")
        return getattr(snp, red)(*inputs, **kwargs)
    if method == "accumulate" and ufunc.__name__ in ("add", "multiply"):  # running sums and products
        extra = set(kwargs) - {"axis", "dtype"}
        if extra or len(inputs) != 1:
            raise UnsupportedOpError(f"np.{ufunc.__name__}.accumulate: arguments {sorted(extra)} are not supported")
        a = inputs[0]
        if np.ndim(a) == 0:
            raise ShapeError(f"np.{ufunc.__name__}.accumulate of a 0-d value (NumPy: cannot accumulate on a scalar)")
        fn = snp.cumsum if ufunc.__name__ == "add" else snp.cumprod   # NumPy 2: the same dtypes as cumsum/cumprod
        return fn(a, axis=kwargs.get("axis", 0), dtype=kwargs.get("dtype"))
    if method == "at":  # np.add.at(a, i, b) writes into a and returns None: an in-place update of a traced a
        name = ufunc.__name__
        functional = getattr(snp, f"{name}_at", None)
        if functional is not None and inputs and isinstance(inputs[0], Node):
            _check_writable(inputs[0], f"np.{name}.at")
            inputs[0][...] = functional(*inputs)  # the functional scatter, written back (see _setitem)
            return None
        fix = (f"write into a traced array (a = np.zeros_like(x)), or use a = symgraph.numpy.{name}_at(a, indices, "
               f"b), which returns the new array" if functional is not None
               else "symgraph.numpy.add_at / maximum_at or x.at[idx], which return it")
        raise UnsupportedOpError(f"np.{name}.at writes into its first argument in place, which tracing supports "
                                 f"for traced arrays of np.add.at and np.maximum.at only; {fix}")
    if method != "__call__":
        raise UnsupportedOpError(f"np.{ufunc.__name__}.{method} has no rule")
    fn = snp.UFUNCS.get(ufunc.__name__)
    if ufunc is not getattr(np, ufunc.__name__, None):  # not NumPy's ufunc: scipy.special's, by identity
        from .scipy.special import ufunc_rule

        fn = ufunc_rule(ufunc) or fn  # a SciPy ufunc sharing a NumPy name (expm1, log1p, exp2) is NumPy's
        if fn is None:
            raise UnsupportedOpError(f"{type(ufunc).__name__} {ufunc.__name__} (not a NumPy ufunc) has no rule "
                                     f"in symgraph; see symgraph.scipy.special")
    if fn is None:
        raise UnsupportedOpError(f"np.{ufunc.__name__} has no rule in symgraph (no traced equivalent)")
    extra = set(kwargs) - {"dtype", "casting", "where"}
    if extra or kwargs.get("where", True) is not True:
        raise UnsupportedOpError(f"np.{ufunc.__name__}: keyword arguments {sorted(set(kwargs))} are not supported")
    out = fn(*inputs)
    if kwargs.get("dtype") is not None:
        out = L.cast(out, kwargs["dtype"])
    return out


def _array_function(self: Node, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    _check_live(self)
    if _STALE:
        _check_stale(args, tuple(kwargs.values()))
    if func in _OWN_ARRAY and isinstance(args[0] if args else kwargs.get("a", kwargs.get("prototype")), Node):
        return _own_array(func, args, kwargs)
    fn = snp.FUNCTIONS.get(func)
    if fn is None:
        mod = getattr(func, "__module__", "numpy") or "numpy"
        mod = "np" if mod.startswith("numpy") and "linalg" not in mod else mod.replace("numpy", "np")
        raise UnsupportedOpError(f"{mod}.{func.__name__} has no rule in symgraph; "
                                 f"write it with supported operations (see symgraph.numpy)")
    if kwargs:
        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError:
            raise UnsupportedOpError(f"np.{func.__name__}: keyword arguments {sorted(kwargs)} are not supported "
                                     f"on traced values") from None
        except ValueError:  # no signature available
            pass
    return fn(*args, **kwargs)


# ----- indexing -----


def _is_int(i: Any) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _is_array_index(i: Any) -> bool:
    if isinstance(i, Node):
        return True
    if isinstance(i, (np.ndarray, list)):
        return True
    return False


def _concrete_index(i: Any, n: int, axis: int) -> np.ndarray:
    a = np.asarray(i)
    if a.dtype.kind == "b":
        raise ShapeError("boolean mask indices must have been converted")  # pragma: no cover
    if a.size and a.dtype.kind not in "iu":
        raise DTypeError(f"index arrays must be integers, got dtype {a.dtype}")
    a = a.astype(np.int64)
    if a.size and (a.min() < -n or a.max() >= n):
        raise ShapeError(f"index out of bounds for axis {axis} with size {n}: {a.min()}..{a.max()}")
    return np.where(a < 0, a + n, a)


def getitem(x: Node, idx: Any) -> Any:
    """x[idx] with NumPy semantics: ints, slices, None, Ellipsis, integer arrays, concrete boolean masks.

    Raises:
        ShapeError: indices out of bounds (concrete) or too many indices.
        UnsupportedOpError: traced boolean masks (data-dependent shapes).
    """
    if not isinstance(idx, tuple):
        idx = (idx,)
    # concrete boolean masks become integer arrays
    expanded: list[Any] = []
    for i in idx:
        if isinstance(i, Node) and i.dtype.kind == "b":
            raise UnsupportedOpError("indexing with a traced boolean mask has a data-dependent shape; "
                                     "use np.where(mask, x, 0) instead")
        if isinstance(i, (np.ndarray, list)) and np.asarray(i).dtype.kind == "b":
            expanded.extend(np.nonzero(np.asarray(i)))
        elif isinstance(i, (bool, np.bool_)):
            raise UnsupportedOpError("indexing with a Python bool is not supported")
        else:
            expanded.append(i)
    idx = tuple(expanded)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if sum(1 for i in idx if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if n_real > x.ndim:
        raise ShapeError(f"too many indices for an array of shape {x.shape}: {n_real} indices")
    if Ellipsis in [i for i in idx if not _is_array_index(i) and not isinstance(i, Node)]:
        k = [j for j, i in enumerate(idx) if i is Ellipsis and not _is_array_index(i)][0]
        idx = idx[:k] + (slice(None),) * (x.ndim - n_real) + idx[k + 1:]
    else:
        idx = idx + (slice(None),) * (x.ndim - n_real)
    if any(_is_array_index(i) for i in idx):
        return _advanced_getitem(x, idx)
    return _basic_getitem(x, idx)


def _basic_getitem(x: Node, idx: tuple) -> Node:
    starts, stops, steps, out_shape = [], [], [], []
    d = 0
    for i in idx:
        if i is None:
            out_shape.append(1)
            continue
        n = x.shape[d]
        if _is_int(i):
            j = int(i)
            if not -n <= j < n:
                raise ShapeError(f"index {j} is out of bounds for axis {d} with size {n}")
            j %= n
            starts.append(j)
            stops.append(j + 1)
            steps.append(1)
        elif isinstance(i, slice):
            a, b, c = i.indices(n)
            starts.append(a)
            stops.append(b)
            steps.append(c)
            out_shape.append(len(range(a, b, c)))
        else:
            raise UnsupportedOpError(f"index of type {type(i).__name__} is not supported")
        d += 1
    y = x
    if any(s != 0 or e != n or st != 1 for s, e, st, n in zip(starts, stops, steps, x.shape)):
        y = L.bind("slice", x, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))
    return L.reshape(y, tuple(out_shape))


def _advanced_getitem(x: Node, idx: tuple) -> Node:
    if any(i is None for i in idx):
        raise UnsupportedOpError("mixing None (np.newaxis) with integer-array indices is not supported")
    # basic slicing first, keeping advanced positions whole
    pre = tuple(i if isinstance(i, slice) else slice(None) for i in idx)
    y = _basic_getitem(x, pre)
    adv_pos = [d for d, i in enumerate(idx) if not isinstance(i, slice)]
    arrays = []
    for d in adv_pos:
        i = idx[d]
        n = y.shape[d]
        if isinstance(i, Node):
            if i.dtype.kind not in "iu":
                raise DTypeError(f"index arrays must be integers, got dtype {i.dtype} for axis {d}")
            i = L.cast(i, np.int64)
            i = L.where(L.binary("lt", i, 0), i + n, i)
        else:
            i = _concrete_index(i, n, d)
        arrays.append(i)
    if len(adv_pos) == 1:
        i = arrays[0]
        return L.bind("gather", y, L.asnode(i), axis=adv_pos[0])
    bshape = np.broadcast_shapes(*[tuple(a.shape) for a in arrays])
    # flatten the advanced axes into one, moved to the front
    rest = [d for d in range(y.ndim) if d not in adv_pos]
    yt = L.transpose(y, tuple(adv_pos) + tuple(rest))
    sizes = [y.shape[d] for d in adv_pos]
    yf = L.reshape(yt, (int(np.prod(sizes, dtype=np.int64)),) + tuple(y.shape[d] for d in rest))
    flat: Any = 0
    stride = 1
    for a, n in reversed(list(zip(arrays, sizes))):
        term = L.broadcast_to(a, bshape) if isinstance(a, Node) else np.broadcast_to(a, bshape)
        flat = term * stride + flat if stride != 1 else term + flat
        stride *= n
    g = L.bind("gather", yf, L.asnode(np.asarray(flat, dtype=np.int64) if not isinstance(flat, Node) else flat), axis=0)
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    if contiguous and adv_pos[0] != 0:
        nb = len(bshape)
        k = adv_pos[0]
        perm = tuple(range(nb, nb + k)) + tuple(range(nb)) + tuple(range(nb + k, g.ndim))
        g = L.transpose(g, perm)
    return g


def _getitem_method(self: Node, idx: Any) -> Any:
    _check_live(self)
    return getitem(self, idx)


class _AtIndexer:
    """x.at[idx].set(v) / .add(v): functional updates (JAX-style), for concrete indices."""

    def __init__(self, x: Node, idx: Any = None):
        self.x = x
        self.idx = idx

    def __getitem__(self, idx: Any) -> "_AtIndexer":
        return _AtIndexer(self.x, idx)

    def _positions(self) -> np.ndarray:
        x = self.x
        idx = self.idx if isinstance(self.idx, tuple) else (self.idx,)
        if any(isinstance(i, Node) for i in idx):
            raise UnsupportedOpError("x.at[idx] with traced indices is not supported; use concrete indices")
        pos = np.arange(x.size, dtype=np.int64).reshape(x.shape)[self.idx]
        return np.asarray(pos, dtype=np.int64)

    def add(self, v: Any) -> Node:
        """x with v added at idx (repeated indices accumulate)."""
        x = self.x
        pos = self._positions()
        v = L.broadcast_to(L.cast(L.asnode(v), x.dtype), pos.shape)
        upd = L.bind("scatter_add", L.reshape(v, (pos.size,)), L.asnode(pos.reshape(-1)), shape=(x.size,), axis=0)
        return x + L.reshape(upd, x.shape)

    def set(self, v: Any) -> Node:
        """x with the entries at idx replaced by v.

        Raises:
            UnsupportedOpError: when idx repeats a position (the result would be order-dependent).
        """
        x = self.x
        pos = self._positions().reshape(-1)
        if len(np.unique(pos)) != pos.size:
            raise UnsupportedOpError("x.at[idx].set(v) with repeated indices is ambiguous; use .add")
        mask = np.zeros(x.size, bool)
        mask[pos] = True
        v = L.broadcast_to(L.cast(L.asnode(v), x.dtype), self._positions().shape)
        upd = L.bind("scatter_add", L.reshape(v, (pos.size,)), L.asnode(pos), shape=(x.size,), axis=0)
        return L.where(mask.reshape(x.shape), L.reshape(upd, x.shape), x)


def is_traced(x: Any) -> bool:
    """Whether x is a traced value (a graph node)."""
    return isinstance(x, Node)


def ensure_no_leak(x: Any) -> None:
    """Raise if x is a Node escaping its trace (used at API boundaries)."""
    if isinstance(x, Node):
        raise SymgraphError("a traced value escaped its trace")


# ----- installing the array interface on ir.Node -----


def _array_interface() -> dict[str, Callable]:
    """The implementation of each member of Node's array interface (`ir.ARRAY_METHODS`, `ir.ARRAY_PROPERTIES`)."""
    api: dict[str, Callable] = {}
    for py, fn in _BINOPS.items():
        api[f"__{py}__"] = _binop(fn)
        if py not in _COMPARISONS:
            api[f"__r{py}__"] = _binop(fn, reverse=True)
    api.update({
        "__neg__": _unary("negative"), "__pos__": lambda self: self, "__abs__": _unary("abs"),
        "__invert__": _unary("invert"),
        "__bool__": _conversion_error("bool() (Python `if`, `while`, `and`, `or` or `not` on a traced value)",
                                      _IF_FIX),
        "__float__": _scalar_conversion("float()", _KEEP_FIX),
        "__int__": _scalar_conversion("int()", _STATIC_FIX),
        "__complex__": _conversion_error("complex()", "Complex numbers are not supported."),
        "__index__": _conversion_error("Using a traced value as a Python integer (range(n), a list index, a shape)",
                                       "Use integer-array indexing (x[idx] with an integer array) for gathers. "
                                       + _STATIC_FIX),
        "__array__": _to_ndarray_error,
        "__array_ufunc__": _array_ufunc, "__array_function__": _array_function,
        "__getitem__": _getitem_method, "__setitem__": _setitem, "__len__": _len, "__iter__": _iter,
        "item": _conversion_error(".item()", _KEEP_FIX), "tolist": _conversion_error(".tolist()", _KEEP_FIX),
        "reshape": _reshape_method, "transpose": _transpose_method, "astype": _astype, "dot": _binop("dot"),
        "copy": _copy, "conj": _conj, "conjugate": _conj,  # real dtypes only: complex is refused
        # properties
        "T": lambda self: L.transpose(self), "mT": lambda self: L.swap_last(self), "real": _conj,
        "imag": lambda self: snp.zeros_like(self), "itemsize": lambda self: self.dtype.itemsize,
        "at": lambda self: _AtIndexer(self),
    })
    for m in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "take", "var", "std", "clip", "squeeze",
              "ravel", "flatten", "swapaxes", "argpartition", "argsort", "cumprod", "cumsum", "diagonal", "repeat",
              "trace", "all", "any", "round"):
        api[m] = _method(m)
    for m in _INPLACE_METHODS:
        api[m] = _inplace_method(m)
    for py in _INPLACE:
        api[f"__{py}__"] = _inplace_binop(py)
    # Every other public ndarray method and attribute raises, naming itself (test_tracer_methods checks the
    # list is whole).
    for m in ("byteswap", "choose", "compress", "getfield", "nonzero", "searchsorted", "view",
              "dump", "dumps", "tofile", "tobytes", "to_device", "setflags"):
        api[m] = _no_rule_method(m)
    for m in ("base", "ctypes", "data", "flags", "flat", "strides", "device"):
        api[m] = _memory_attribute(m)
    no_track = {"__setitem__", "__bool__", "__float__", "__int__", "__complex__", "__index__", "__array__", "__len__",
                "__iter__", "item", "tolist", "copy", "at", "itemsize"} | {f"__{py}__" for py in _INPLACE}
    for name, fn in list(api.items()):
        if name not in no_track and name not in _INPLACE_METHODS:
            api[name] = _track_shared(fn)
    return api


install_array_api(_array_interface())
