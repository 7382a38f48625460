"""The op record, the single op registry, and the shape/dtype rule helpers.

Every primitive is declared once, as an `Op` record that carries all of its
rules: shape and dtype inference, the NumPy reference implementation, the VJP
and JVP rules (written with graph ops, so derivatives are graphs) and the
lowering kind that tells codegen how to fuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedOpError

__all__ = [
    "Op",
    "OPS",
    "register",
    "KINDS",
    "same_shape",
    "broadcast_shapes",
    "promote",
    "same_dtype",
    "bool_dtype",
    "float_only",
    "normalize_axes",
]

KINDS = ("source", "elementwise", "reduction", "layout", "contraction", "opaque")


@dataclass(eq=False)
class Op:
    """A primitive and all its rules.

    Attributes:
        name: unique op name (the key of `OPS` and of codegen's emitter table).
        nin: number of inputs, or None for variadic (concatenate, einsum).
        kind: lowering kind, one of KINDS.
        shape_rule: (*input_shapes, **attrs) -> output shape; raises ShapeError.
        dtype_rule: (*input_dtypes, **attrs) -> output dtype; raises DTypeError.
        impl: (*arrays, **attrs) -> array, the NumPy reference semantics.
        vjp: (ct, node) -> tuple with one cotangent node (or None for zero) per
            input, written in graph ops. None when the op has no VJP rule:
            differentiating through it raises UnsupportedOpError, lazily.
        jvp: (tangents, node) -> tangent node or None (zero); tangents holds
            one tangent node or None per input.
        differentiable: False for ops whose outputs carry no derivative
            (comparisons, integer ops, random bits): their cotangents and
            tangents are zero by definition, not undefined.
        linear: the op is linear in all its inputs (JVP = op on tangents).
        doc: one line on the semantics.
    """

    name: str
    nin: int | None
    kind: str
    shape_rule: Callable[..., Any]
    dtype_rule: Callable[..., Any]
    impl: Callable[..., Any]
    vjp: Callable[..., Any] | None = None
    jvp: Callable[..., Any] | None = None
    differentiable: bool = True
    linear: bool = False
    doc: str = ""
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Op({self.name})"


OPS: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Add an op to the registry (names are unique)."""
    if op.kind not in KINDS:
        raise ValueError(f"op {op.name}: unknown kind {op.kind}")
    if op.name in OPS:
        raise ValueError(f"op {op.name} registered twice")
    OPS[op.name] = op
    return op


def get(name: str) -> Op:
    """The registered op called `name`."""
    try:
        return OPS[name]
    except KeyError:
        raise UnsupportedOpError(f"no primitive named {name!r}") from None


# ----- shape rules -----


def same_shape(*shapes: tuple, **_: Any) -> tuple:
    """All operands have the same shape (broadcasting is explicit at trace time)."""
    s0 = shapes[0]
    for s in shapes:
        if s != s0:
            i = next(i for i, e in enumerate(shapes) if e != s0)
            raise ShapeError(f"operand {i} has shape {shapes[i]}, operand 0 has {s0}; "
                             f"elementwise ops need equal shapes")
    return s0


def broadcast_shapes(*shapes: tuple, op: str = "op") -> tuple:
    """NumPy broadcasting of shapes.

    Raises:
        ShapeError: naming the op and the shapes when they do not broadcast.
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d == 1:
                continue
            if out[i] == 1:
                out[i] = d
            elif out[i] != d:
                shp = " and ".join(str(tuple(x)) for x in shapes)
                raise ShapeError(f"{op}: shapes {shp} do not broadcast (dimension {i - ndim}: {out[i]} vs {d})")
    return tuple(out)


def normalize_axes(axes: Any, ndim: int, op: str = "op") -> tuple[int, ...]:
    """Turn an axis argument (None, int, tuple) into a sorted tuple of non-negative axes.

    Raises:
        ShapeError: an axis out of range or repeated.
    """
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ShapeError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


# ----- dtype rules -----


def promote(*dtypes: Any, **_: Any) -> np.dtype:
    """NumPy type promotion of the operand dtypes."""
    return np.result_type(*dtypes)


def same_dtype(*dtypes: Any, **_: Any) -> np.dtype:
    """All operands share one dtype (promotion is explicit at trace time)."""
    d0 = np.dtype(dtypes[0])
    for d in dtypes:
        if d is not d0 and np.dtype(d) != d0:  # NumPy's built-in dtypes are singletons: `is` is the fast test
            i = next(i for i, e in enumerate(dtypes) if np.dtype(e) != d0)
            raise DTypeError(f"operand {i} has dtype {dtypes[i]}, operand 0 has {d0}")
    return d0


def bool_dtype(*dtypes: Any, **_: Any) -> np.dtype:
    """Comparisons: operands share a dtype; the result is bool."""
    same_dtype(*dtypes)
    return np.dtype(bool)


def float_only(*dtypes: Any, **kw: Any) -> np.dtype:
    """Operands share one floating dtype (float32 or float64)."""
    d = same_dtype(*dtypes)
    if d.kind != "f":
        raise DTypeError(f"needs float32 or float64 operands, got {d}")
    return d
