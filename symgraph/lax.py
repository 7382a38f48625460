"""Binding primitives: explicit promotion and broadcasting, constants, eager fallback.

This is the layer between user-facing functions (operators on tracers,
`symgraph.numpy`) and the op registry. It makes NumPy's implicit behaviour
explicit in the graph: operand dtypes are promoted with `cast` nodes and
shapes broadcast with `broadcast_to` nodes, so every primitive sees operands
of one shape and one dtype. When no operand is a graph node the primitive's
NumPy implementation runs directly (eager mode, also constant folding).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from .closures import ClosedOverArrays
from .errors import DTypeError, ShapeError
from .ir import ConstValue, Node, current_builder
from .ops.core import OPS, broadcast_shapes, normalize_axes

__all__ = ["bind", "asnode", "constant", "is_node", "as_output"]


def is_node(x: Any) -> bool:
    """Whether x is a graph node (a tracer)."""
    return isinstance(x, Node)


def bind(name: str, /, *inputs: Any, tag: Any = None, **attrs: Any) -> Any:
    """Apply primitive `name` to `inputs` (nodes) with `attrs`.

    When no input is a node, runs the NumPy implementation instead and returns
    an array.
    """
    op = OPS[name]
    ins: Any = inputs
    for x in inputs:
        if type(x) is not Node:  # (the common case, all nodes, passes `inputs` to make as the tuple it is)
            if not any(isinstance(y, Node) for y in inputs):
                return op.impl(*[np.asarray(y) for y in inputs], **attrs)
            ins = [y if isinstance(y, Node) else constant(y) for y in inputs]
            break
    return current_builder().make(op, ins, attrs, tag)


def constant(value: Any, dtype: Any = None) -> Node:
    """A constant node holding `value` (a copy, read-only)."""
    if isinstance(value, Node):
        return value if dtype is None or value.dtype == np.dtype(dtype) else cast(value, dtype)
    if ClosedOverArrays._active and isinstance(value, np.ndarray):
        ClosedOverArrays._active[0].note(value)  # a closed-over array (or a view of one): checked per call
    return current_builder().make(OPS["constant"], (), (("value", ConstValue(value, dtype)),))  # attrs as make sorts them


def as_output(o: Any, i: int) -> Node:
    """Result leaf `i` of a traced function as a node (numbers and arrays become constants).

    Raises:
        DTypeError: a leaf that is not an array or a number.
    """
    if isinstance(o, Node):
        return o
    if isinstance(o, (np.ndarray, np.generic, numbers.Number)):
        return constant(o)
    raise DTypeError(f"result {i} has type {type(o).__name__}; traced functions return arrays or pytrees of arrays")


def _check_array_like(x: Any, op: str, pos: int) -> None:
    if isinstance(x, (Node, np.ndarray, np.generic, numbers.Number)):
        if isinstance(x, np.ndarray) and x.dtype == object:
            raise DTypeError(f"{op}: argument {pos} is an object array; symgraph needs numeric arrays")
        return
    if isinstance(x, (list, tuple)):
        return
    raise DTypeError(f"{op}: argument {pos} has type {type(x).__name__}, expected an array or a number")


def asnode(x: Any, dtype: Any = None) -> Node:
    """x as a node: nodes pass through, arrays and numbers become constants."""
    if isinstance(x, Node):
        return x if dtype is None or x.dtype == np.dtype(dtype) else cast(x, dtype)
    return constant(x, dtype)


def _dtype_of(x: Any) -> Any:
    if isinstance(x, (Node, np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, (bool, np.bool_)):
        return bool
    if isinstance(x, numbers.Number):
        return x  # python scalars are weakly typed (NEP 50)
    return np.asarray(x).dtype


def result_dtype(*xs: Any) -> np.dtype:
    """NumPy's promotion of the operands (Python scalars are weak, as in NumPy 2)."""
    if all(isinstance(x, numbers.Number) and not isinstance(x, np.generic) for x in xs):
        return np.result_type(*[np.asarray(x).dtype for x in xs])
    return np.result_type(*[_dtype_of(x) for x in xs])


def _shape_of(x: Any) -> tuple:
    if isinstance(x, (Node, np.ndarray, np.generic)):
        return tuple(x.shape)
    return np.shape(x)


def to_float(x: Any) -> Any:
    """Cast integer or bool operands to float64 (as NumPy's float ufuncs do)."""
    d = np.dtype(_dtype_of(x)) if not isinstance(_dtype_of(x), numbers.Number) else np.asarray(x).dtype
    if d.kind in "biu":
        return cast(x, np.float64)
    return x


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    """x broadcast to `shape` (a `broadcast_to` node when the shape changes).

    Raises:
        ShapeError: if x's shape does not broadcast to `shape`.
    """
    shape = tuple(int(d) for d in shape)
    xs = _shape_of(x)
    if xs == shape:
        return x
    if broadcast_shapes(xs, shape, op="broadcast_to") != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {xs} to {shape}")
    return bind("broadcast_to", x if isinstance(x, Node) else np.asarray(x), shape=shape)


def promote_and_broadcast(op: str, *xs: Any, dtype: Any = None) -> list[Any]:
    """Promote operands to one dtype and broadcast them to one shape (explicit nodes)."""
    for i, x in enumerate(xs):
        _check_array_like(x, op, i)
    if dtype is None:
        dtype = result_dtype(*xs)
    shape = broadcast_shapes(*[_shape_of(x) for x in xs], op=op)
    traced = any(isinstance(x, Node) for x in xs)
    out = []
    for x in xs:
        if isinstance(x, Node):
            x = cast(x, dtype)
        elif traced:
            # a constant node of its own (small) shape, broadcast in the graph:
            # `x + 1.0` never materialises a full-size constant
            x = constant(np.asarray(x, dtype=dtype))
        else:
            x = np.asarray(x, dtype=dtype)
        out.append(broadcast_to(x, shape))
    return out


def cast(x: Any, dtype: Any) -> Any:
    """x converted to dtype (a `cast` node when the dtype changes)."""
    dtype = np.dtype(dtype)
    if isinstance(x, Node):
        return x if x.dtype == dtype else bind("cast", x, dtype=dtype)
    return np.asarray(x, dtype=dtype)


# ----- elementwise -----


def unary(name: str, x: Any, float_op: bool = True) -> Any:
    """Apply a unary elementwise primitive (integers cast to float64 for float ops)."""
    if type(x) is Node and (not float_op or x.dtype.kind == "f"):
        return current_builder().make(OPS[name], (x,))  # fast path: what `bind(name, x)` makes
    _check_array_like(x, name, 0)
    if float_op and not (type(x) is Node and x.dtype.kind == "f"):
        x = to_float(x)
    if not isinstance(x, Node):
        x = np.asarray(x)
    return bind(name, x)


def _splat(b: Any, v: float, dtype: np.dtype, shape: tuple) -> Node:
    """The node `broadcast_to(constant(v, dtype), shape)`, memoized per builder.

    The key keeps the sign of zero (so 0.0 and -0.0 stay distinct); NaN never
    hits the memo (NaN != NaN) and takes the general path, which interns it.
    """
    key = ("splat", dtype, shape, v, math.copysign(1.0, v))
    node = b.memo.get(key)
    if node is None:
        node = b.make(OPS["constant"], (), (("value", ConstValue(np.asarray(v, dtype=dtype))),))
        if shape:
            node = broadcast_to(node, shape)
        b.memo[key] = node
    return node


def binary(name: str, x: Any, y: Any, float_op: bool = False) -> Any:
    """Apply a binary elementwise primitive with NumPy promotion and broadcasting."""
    tx, ty = type(x), type(y)
    if tx is Node and ty is Node and x.shape == y.shape and x.dtype == y.dtype \
            and (not float_op or x.dtype.kind in "fc"):
        return current_builder().make(OPS[name], (x, y))  # fast path: nothing to make explicit
    # fast path: a float node with a Python number (weakly typed: the node's dtype wins)
    if tx is Node and (ty is float or ty is int) and x.dtype.kind in "fc" and y == y:
        b = current_builder()
        return b.make(OPS[name], (x, _splat(b, y, x.dtype, x.shape)))
    if ty is Node and (tx is float or tx is int) and y.dtype.kind in "fc" and x == x:
        b = current_builder()
        return b.make(OPS[name], (_splat(b, x, y.dtype, y.shape), y))
    if tx is Node and ty is Node and x.dtype == y.dtype and x.dtype.isnative \
            and (not float_op or x.dtype.kind in "fc"):
        # fast path: two nodes of one dtype (`h + b`): only the broadcasts the general path makes, in its order
        shape = broadcast_shapes(x.shape, y.shape, op=name)
        a = broadcast_to(x, shape)
        return current_builder().make(OPS[name], (a, broadcast_to(y, shape)))
    dtype = result_dtype(x, y)
    if float_op and dtype.kind in "biu":
        dtype = np.dtype(np.float64)
    a, b = promote_and_broadcast(name, x, y, dtype=dtype)
    return bind(name, a, b)


def where(c: Any, x: Any, y: Any) -> Any:
    """Elementwise select: x where c is true, else y (broadcast, promoted)."""
    dtype = result_dtype(x, y)
    shape = broadcast_shapes(_shape_of(c), _shape_of(x), _shape_of(y), op="where")
    c = cast(c, bool) if isinstance(c, Node) else np.asarray(c, dtype=bool)
    a, b = promote_and_broadcast("where", x, y, dtype=dtype)
    return bind("where", broadcast_to(c, shape), broadcast_to(a, shape), broadcast_to(b, shape))


def zeros_like(x: Node) -> Node:
    """A zero node of x's shape and dtype (a broadcast scalar constant)."""
    return broadcast_to(constant(np.zeros((), x.dtype)), x.shape)


def full_like(x: Node, value: float) -> Node:
    """A node of x's shape and dtype filled with value."""
    return broadcast_to(constant(np.asarray(value, x.dtype)), x.shape)


def add(x: Any, y: Any) -> Any:
    return binary("add", x, y)


def sub(x: Any, y: Any) -> Any:
    return binary("sub", x, y)


def mul(x: Any, y: Any) -> Any:
    return binary("mul", x, y)


def div(x: Any, y: Any) -> Any:
    return binary("div", x, y, float_op=True)


def neg(x: Any) -> Any:
    return unary("neg", x, float_op=False)


# ----- reductions and layout -----


def reduce(name: str, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Reduce over `axis` (None: all); keepdims is a reshape after the primitive."""
    if not isinstance(x, Node):
        x = np.asarray(x)
    axes = normalize_axes(axis, len(x.shape), op=name)
    if name in ("max", "min") and any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"{name}: zero-size reduction over axis {axes} of shape {x.shape} has no identity")
    if name == "sum" and x.dtype.kind == "b":
        x = cast(x, np.int64)
    out = bind(name, x, axes=axes) if axes else x
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def reshape(x: Any, shape: Sequence[int]) -> Any:
    """x with a new shape of the same size (one -1 allowed).

    Raises:
        ShapeError: if the sizes differ.
    """
    if type(x) is Node and type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
        # fast path (no -1, exact int dims): the node the general path makes
        if shape == x.shape:
            return x
        if math.prod(shape) != math.prod(x.shape):
            raise ShapeError(f"reshape: cannot reshape array of shape {x.shape} (size {math.prod(x.shape)}) "
                             f"into shape {shape}")
        return current_builder().make(OPS["reshape"], (x,), (("shape", shape),))
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = [int(d) for d in shape]
    xs = _shape_of(x)
    size = int(np.prod(xs, dtype=np.int64))
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 in {tuple(shape)}")
    if -1 in shape:
        rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if rest == 0 or size % rest:
            raise ShapeError(f"reshape: cannot reshape {xs} to {tuple(shape)}")
        shape[shape.index(-1)] = size // rest
    shape_t = tuple(shape)
    if int(np.prod(shape_t, dtype=np.int64)) != size or any(d < 0 for d in shape_t):
        raise ShapeError(f"reshape: cannot reshape array of shape {xs} (size {size}) into shape {shape_t}")
    if shape_t == xs:
        return x
    return bind("reshape", x, shape=shape_t)


def transpose(x: Any, perm: Sequence[int] | None = None) -> Any:
    """Permute the axes of x (reverse them when perm is None)."""
    nd = len(_shape_of(x))
    if perm is None:
        perm = tuple(reversed(range(nd)))
    perm = tuple(int(p) % nd if nd else int(p) for p in perm)
    if sorted(perm) != list(range(nd)):
        raise ShapeError(f"transpose: axes {perm} are not a permutation of {nd} axes")
    if perm == tuple(range(nd)):
        return x
    return bind("transpose", x, perm=perm)


def matmul(a: Any, b: Any) -> Any:
    """NumPy matmul semantics: vectors promoted and squeezed, batch dims broadcast.

    Raises:
        ShapeError: if the contracted dimensions differ or batch dims do not broadcast.
    """
    if type(a) is Node and type(b) is Node and len(a.shape) == 2 and len(b.shape) == 2 \
            and a.shape[1] == b.shape[0] and a.dtype == b.dtype and a.dtype.kind != "b" and a.dtype.isnative:
        return current_builder().make(OPS["matmul"], (a, b))  # fast path: the node the general path makes
    for i, v in enumerate((a, b)):
        _check_array_like(v, "matmul", i)
        if len(_shape_of(v)) == 0:
            raise ShapeError(f"matmul: operand {i} is 0-d; use * for scalars")
    dtype = result_dtype(a, b)
    if dtype.kind in "b":
        dtype = np.dtype(np.int64)
    a = cast(a, dtype)
    b = cast(b, dtype)
    sa, sb = _shape_of(a), _shape_of(b)
    user_sa, user_sb = sa, sb  # for error messages: the shapes as given, before vectors are promoted
    va, vb = len(sa) == 1, len(sb) == 1
    if va:
        a = reshape(a, (1, sa[0]))
    if vb:
        b = reshape(b, (sb[0], 1))
    sa, sb = _shape_of(a), _shape_of(b)
    if len(sa) > 2 and len(sb) == 2 and sa[-1] == sb[-2]:
        # (..., m, k) @ (k, n): fold the leading dims into rows, so the weight is
        # not broadcast over the batch (its gradient is then one matmul, not a
        # batch of weight-sized products summed afterwards)
        out = bind("matmul", reshape(a, (int(np.prod(sa[:-1], dtype=np.int64)), sa[-1])), b)  # no -1: k may be 0
        out = reshape(out, sa[:-1] + (sb[-1],))
        return reshape(out, sa[:-1]) if vb else out
    if sa[-1] != sb[-2]:
        raise ShapeError(f"matmul: contracted dimensions differ: {sa[-1]} (operand 0 shape {user_sa}) vs {sb[-2]} "
                         f"(operand 1 shape {user_sb})")
    batch = broadcast_shapes(sa[:-2], sb[:-2], op="matmul")
    a = broadcast_to(a, batch + sa[-2:])
    b = broadcast_to(b, batch + sb[-2:])
    out = bind("matmul", a, b)
    if va or vb:
        shp = _shape_of(out)
        keep = list(shp[:-2]) + ([] if va else [shp[-2]]) + ([] if vb else [shp[-1]])
        out = reshape(out, tuple(keep))
    return out


def swap_last(x: Node) -> Node:
    """Swap the last two axes."""
    nd = x.ndim
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    return transpose(x, perm)


def unbroadcast(ct: Node, shape: tuple) -> Node:
    """Sum `ct` down to `shape` (the VJP of broadcasting `shape` to ct.shape)."""
    if ct.shape == tuple(shape):
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and ct.shape[i + lead] != 1
    )
    out = reduce("sum", ct, axis=axes) if axes else ct
    return reshape(out, shape)
