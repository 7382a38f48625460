"""Tracing: running a Python function on tracers records one run as a Graph.

Graph nodes act as tracers. This module implements their array interface
(declared by `symgraph.ir.Node`, installed when this module is imported):
NumPy's operators, `__array_ufunc__` and `__array_function__` (so unmodified
NumPy code traces), indexing, the array methods users expect, and guards that
turn Python control flow on traced values into a clear `TracerConversionError`.

In-place updates live in `symgraph.inplace`, indexing in `symgraph.indexing`; this module installs
them as members of the array interface.
"""

from __future__ import annotations

import inspect
import dis
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
from .conversions import trace_entry_points
from .indexing import AtIndexer, getitem
from .inplace import (ARRAY_INTERFACE_FILES, INPLACE_BINOPS, INPLACE_METHODS, OWN_ARRAY, STALE, check_live, check_stale,
                      check_writable, end_trace, fresh_copy, inplace_binop, inplace_method, note_shared, own_array,
                      setitem, track_shared)
from .ir import Builder, Graph, Node, _ctx, collector_paused, current_builder, install_array_api
from .ir import _ids as _ir_ids
from .numpy.complex_numbers import COMPLEX_FUNCTIONS, COMPLEX_METHODS, COMPLEX_UFUNCS, any_complex
from .lax import as_output
from .ops import OPS
from .tree import tree_flatten, tree_paths, tree_unflatten

__all__ = ["trace", "make_input", "getitem", "flatten_args", "check_args", "arg_leaf_names", "leaf_problem", "leaf_spec"]

_input_tags = iter(range(1 << 62))

ARRAY_INTERFACE_FILES.add(__file__)  # the members below are array-interface frames too (see inplace)


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
    if isinstance(x, numbers.Complex) and not isinstance(x, np.generic):
        return None
    ma = sys.modules.get("numpy.ma")  # a masked array exists only once numpy.ma is imported (importing it costs ~8 ms)
    if ma is not None and isinstance(x, ma.MaskedArray):
        n = int(ma.count_masked(x))
        return UnsupportedOpError, (f"is a numpy.ma.MaskedArray (shape {x.shape}, {n} masked entries); symgraph has no "
                                    f"masked-array semantics and would silently drop the mask. Pass the data "
                                    f"explicitly (np.ma.filled(x, fill_value) or x.data) and apply the mask with "
                                    f"np.where")
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype == object or x.dtype.kind not in "biufc" or x.dtype.itemsize > 16:
            return DTypeError, f"has dtype {x.dtype}; symgraph traces bool, integer, float and complex arrays"
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
    if isinstance(x, numbers.Complex) and not isinstance(x, np.generic):
        return (), np.dtype(np.complex128)
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
        if type(x) is np.ndarray and x.dtype.kind in "biufc" and x.dtype.itemsize <= 16:
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
            with trace_entry_points():  # np.array / np.asarray / np.r_ ... of traced values (symgraph.conversions)
                out = f(*tree_unflatten(in_tree, inputs))
            out_leaves, out_tree = tree_flatten(out)
            check_stale(out_leaves, always=True)
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
            end_trace(b)
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


def _binop(name: str, reverse: bool = False) -> Callable:
    """The operator member `x <op> other` (reflected: `other <op> x`): `check_live`, then the function of
    `symgraph.numpy`; a result that existed before the call is recorded as `track_shared` does (inlined:
    operators build most of a trace's nodes)."""
    def op(self: Node, other: Any) -> Any:
        if STALE:
            check_stale(self)
        if not _ctx.builders:
            check_live(self)  # raises: the trace that made self has ended
        if STALE:
            check_stale(other)
        start = next(_ir_ids)
        fn = snp.arithmetic.power_operator if name == "power" else getattr(snp, name)
        r = fn(other, self) if reverse else fn(self, other)
        if type(r) is Node and r.id < start:
            note_shared(r)
        return r

    op.__name__ = name
    return op


#: Python operator -> symgraph.numpy function
_BINOPS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
    "matmul": "matmul", "floordiv": "floor_divide", "mod": "remainder",
    "divmod": "divmod",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _unary(name: str) -> Callable:
    def op(self: Node) -> Any:
        check_live(self)
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


_IF_FIX = ("Python control flow cannot depend on traced values; use sg.cond(pred, true_fn, false_fn, *operands) "
           "(or sg.switch) for a branch, sg.while_loop(cond_fun, body_fun, init) for a loop, "
           "symgraph.numpy.where(cond, a, b) (or np.where) to select values, or pass the value as a static argument.")
_KEEP_FIX = "Keep the value in the graph, or return it from the function and convert the result."
_STATIC_FIX = ("Shapes, loop counts and Python indices must be concrete: pass the value as a static argument "
               "(sg.compile(f, static_argnums=...)), or compute it from shapes (x.shape[0]).")


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
        check_live(self)
        if self.dtype.kind == "c" and name not in COMPLEX_METHODS:
            raise _complex_refused(f"x.{name}()")
        return getattr(snp, name)(self, *a, **k)

    m.__name__ = name
    return m


def _copy(self: Node, order: str = "K") -> Node:
    """x.copy(): an array of its own (a uniquely tagged copy), so that writes into it leave x alone."""
    check_live(self)
    return fresh_copy(self)


def _conj(self: Node) -> Node:
    """x.conj(): the complex conjugate (the same value for a real dtype)."""
    check_live(self)
    return snp.conj(self)


def _real_attr(self: Node) -> Node:
    """x.real: the real part (x itself for a real dtype)."""
    check_live(self)
    return snp.real(self)


def _imag_attr(self: Node) -> Node:
    """x.imag: the imaginary part (zeros for a real dtype)."""
    check_live(self)
    return snp.imag(self)


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
        fix = ("np.r_[...] and np.c_[...] trace when looked up on the numpy module during the trace; this index "
               "trick was bound before it (from numpy import r_?) and converts every item to a NumPy array: write "
               "np.r_ / np.c_, np.concatenate([a, b]) (np.r_) or np.column_stack([a, b]) (np.c_), or use "
               "symgraph.numpy.r_ / c_.")
    else:
        fix = ("np.array / np.asarray of a traced value or of a list of them trace when looked up on the numpy "
               "module during the trace (symgraph.conversions); this conversion came another way: a NumPy array "
               "indexed by a traced value (c[i]: write symgraph.numpy.take(c, i, axis=0)), a ufunc given a list "
               "holding traced values (np.exp([x, y]): write np.exp(np.array([x, y]))), a name bound before the "
               "trace (from numpy import array), a NumPy scalar type (np.float64(x): write x.astype(np.float64)), "
               "or a function that converts its argument itself. Write np.asarray(...) / np.stack([x, y]) / "
               "symgraph.numpy.array, or return the value from the function. "
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
    return fresh_copy(out) if copy and out is self else out  # NumPy's astype copies by default


# ----- NumPy protocols -----


def _complex_refused(what: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{what} on complex values has no rule in symgraph yet (its real-valued rule would "
                              f"give wrong numbers); docs/complex.md lists what supports complex numbers. Write it "
                              f"with np.real / np.imag parts, or with the supported operations")


#: NumPy ufunc -> (its function in symgraph.numpy, whether it takes complex values), filled by `_array_ufunc`
#: as NumPy's own ufuncs are first called (np.sin(x) on a node skips the general checks after that).
_PLAIN_UFUNCS: dict[Any, tuple[Callable, bool]] = {}

#: Keywords of NumPy's generalized ufuncs that their rules take (np.vecdot(x1, x2, axis=0)).
_UFUNC_KEYWORDS = {"vecdot": frozenset({"axis"})}


def _array_ufunc(self: Node, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    check_live(self)
    if STALE:
        check_stale(inputs)
    if not kwargs and method == "__call__":  # the common case: np.sin(x), np.add(x, y)
        plain = _PLAIN_UFUNCS.get(ufunc)
        if plain is not None and (plain[1] or not any_complex(inputs)):
            return plain[0](*inputs)
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
            check_writable(inputs[0], f"np.{name}.at")
            inputs[0][...] = functional(*inputs)  # the functional scatter, written back (see setitem)
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
    if ufunc.__name__ not in COMPLEX_UFUNCS and any_complex(inputs):
        raise _complex_refused(f"np.{ufunc.__name__}")
    own = _UFUNC_KEYWORDS.get(ufunc.__name__, frozenset())  # a gufunc's own keywords, passed to its rule
    extra = set(kwargs) - {"dtype", "casting", "where"} - own
    if extra or kwargs.get("where", True) is not True:
        raise UnsupportedOpError(f"np.{ufunc.__name__}: keyword arguments {sorted(set(kwargs))} are not supported")
    if ufunc is getattr(np, ufunc.__name__, None) and fn is snp.UFUNCS.get(ufunc.__name__):
        _PLAIN_UFUNCS[ufunc] = (fn, ufunc.__name__ in COMPLEX_UFUNCS)
    out = fn(*inputs, **{k: kwargs[k] for k in own if k in kwargs})
    if kwargs.get("dtype") is not None:
        out = L.cast(out, kwargs["dtype"])
    return out


def _array_function(self: Node, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    check_live(self)
    if STALE:
        check_stale(args, tuple(kwargs.values()))
    if func in OWN_ARRAY and isinstance(args[0] if args else kwargs.get("a", kwargs.get("prototype")), Node):
        return own_array(func, args, kwargs)
    fn = snp.FUNCTIONS.get(func)
    if fn is None:
        mod = getattr(func, "__module__", "numpy") or "numpy"
        mod = "np" if mod.startswith("numpy") and "linalg" not in mod else mod.replace("numpy", "np")
        raise UnsupportedOpError(f"{mod}.{func.__name__} has no rule in symgraph; "
                                 f"write it with supported operations (see symgraph.numpy)")
    if func not in COMPLEX_FUNCTIONS and (any_complex(args) or any_complex(kwargs.values())):
        mod = getattr(func, "__module__", "numpy") or "numpy"
        raise _complex_refused(f"np.linalg.{func.__name__}" if "linalg" in mod else f"np.{func.__name__}")
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

def _getitem_method(self: Node, idx: Any) -> Any:
    check_live(self)
    return getitem(self, idx)


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
        "__complex__": _scalar_conversion("complex()", _KEEP_FIX),
        "__index__": _conversion_error("Using a traced value as a Python integer (range(n), a list index, a shape)",
                                       "Use integer-array indexing (x[idx] with an integer array) for gathers. "
                                       + _STATIC_FIX),
        "__array__": _to_ndarray_error,
        "__array_ufunc__": _array_ufunc, "__array_function__": _array_function,
        "__getitem__": _getitem_method, "__setitem__": setitem, "__len__": _len, "__iter__": _iter,
        "item": _conversion_error(".item()", _KEEP_FIX), "tolist": _conversion_error(".tolist()", _KEEP_FIX),
        "reshape": _reshape_method, "transpose": _transpose_method, "astype": _astype, "dot": _binop("dot"),
        "copy": _copy, "conj": _conj, "conjugate": _conj,
        # properties
        "T": lambda self: L.transpose(self), "mT": lambda self: L.swap_last(self), "real": _real_attr,
        "imag": _imag_attr, "itemsize": lambda self: self.dtype.itemsize,
        "at": lambda self: AtIndexer(self),
    })
    for m in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "take", "var", "std", "clip", "squeeze",
              "ravel", "flatten", "swapaxes", "argpartition", "argsort", "cumprod", "cumsum", "diagonal", "repeat",
              "trace", "all", "any", "round", "searchsorted"):
        api[m] = _method(m)
    for m in INPLACE_METHODS:
        api[m] = inplace_method(m)
    for py in INPLACE_BINOPS:
        api[f"__{py}__"] = inplace_binop(py)
    # Every other public ndarray method and attribute raises, naming itself (test_tracer_methods checks the
    # list is whole).
    api["compress"] = lambda self, condition, axis=None, out=None: snp.compress(condition, self, axis, out)
    for m in ("byteswap", "choose", "getfield", "nonzero", "view",
              "dump", "dumps", "tofile", "tobytes", "to_device", "setflags"):
        api[m] = _no_rule_method(m)
    for m in ("base", "ctypes", "data", "flags", "flat", "strides", "device"):
        api[m] = _memory_attribute(m)
    no_track = {"__setitem__", "__bool__", "__float__", "__int__", "__complex__", "__index__", "__array__", "__len__",
                "__iter__", "item", "tolist", "copy", "at", "itemsize"} | {f"__{py}__" for py in INPLACE_BINOPS}
    no_track |= {f"__{py}__" for py in _BINOPS} | {f"__r{py}__" for py in _BINOPS if py not in _COMPARISONS}
    no_track.add("dot")  # the operators track their results themselves (`_binop`)
    for name, fn in list(api.items()):
        if name not in no_track and name not in INPLACE_METHODS:
            api[name] = track_shared(fn)
    return api


install_array_api(_array_interface())
