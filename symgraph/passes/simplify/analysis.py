"""Node queries of the simplifier, building nothing: splat values, zero tests, -0.0 and magnitude bounds.

Rules and stages read these; none of them needs the state of a `simplify`
call. `_splat`, `_const_array` and `_is` see a tagged node as opaque (rules
never look through one). `_maybe_neg_zero` serves the exact rules on +-0.0,
`_bounded_atom` the polynomial stage's no-overflow test.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir import Node
from ...ops import OPS
from .options import MAX_POW

_CONST = OPS["constant"]
_BCAST = OPS["broadcast_to"]


def _splat(x: Node) -> np.ndarray | None:
    """The 0-d value of x if x is a constant with all elements equal, else None.

    Splat constants are kept canonical as a 0-d `constant`, or `broadcast_to`
    of one (the rewrite pass turns other uniform constants into that form).
    """
    if x.tag is not None:
        return None
    if x.op is _BCAST:
        x = x.inputs[0]
        if x.tag is not None:
            return None
    if x.op is _CONST:
        a = x.attrs[0][1].array
        if a.ndim == 0:
            return a
    return None


def _const_array(x: Node) -> np.ndarray | None:
    if x.op is _CONST and x.tag is None:
        return x.attrs[0][1].array
    return None


def _uniform(a: np.ndarray) -> bool:
    """All elements bitwise equal (so -0.0 and 0.0 differ and NaNs compare)."""
    if a.size == 0:
        return False
    b = np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(a.size, a.dtype.itemsize)
    return bool((b == b[0]).all())


def _is(x: Node, name: str) -> bool:
    """x is an untagged node of op `name` (rules never look through tagged nodes)."""
    return x.tag is None and x.op.name == name


def _splat_number(x: Node) -> Any:
    """The value of a numeric (bool, int, float) splat x as a Python number, else None.

    `s.item()` compares like the 0-d array s itself (exactly, for the small
    integers the rules test) but cheaply.
    """
    if x.op is not _CONST and x.op is not _BCAST:
        return None
    s = _splat(x)
    return s.item() if s is not None and s.dtype.kind in "fiub" else None


def _is_zero(x: Node) -> bool:
    if x.op is not _CONST and x.op is not _BCAST:
        return False
    s = _splat(x)
    return s is not None and s.dtype.kind in "fiub" and s.item() == 0


def _is_pos_zero(x: Node) -> bool:
    if x.op is not _CONST and x.op is not _BCAST:
        return False
    s = _splat(x)
    return s is not None and s.dtype.kind in "fiub" and s.item() == 0 and not np.signbit(s)


def _is_neg_zero(x: Node) -> bool:
    if x.op is not _CONST and x.op is not _BCAST:
        return False
    s = _splat(x)
    return s is not None and s.dtype.kind == "f" and s.item() == 0 and bool(np.signbit(s))


def _maybe_neg_zero(x: Node, depth: int = 0) -> bool:
    """Whether x may hold -0.0 somewhere (conservative; bounded look-down).

    A complex x may hold -0.0 in either part unless it is a constant without one.
    """
    if x.dtype.kind == "c":
        a = _const_array(x)
        return a is None or bool(np.any(((a.real == 0) & np.signbit(a.real)) | ((a.imag == 0) & np.signbit(a.imag))))
    if x.dtype.kind != "f":
        return False
    s = _splat(x)
    if s is not None:
        return bool(s == 0 and np.signbit(s))
    a = _const_array(x)
    if a is not None:
        return bool(np.any((a == 0) & np.signbit(a)))
    if depth > 6 or x.tag is not None:
        return True
    op = x.op
    if op.neg_zero == "never":
        return False  # results are >= +0 or never exactly zero with a sign
    if op.name == "mul" and x.inputs[0] is x.inputs[1]:
        return False  # x*x >= +0
    if isinstance(op.neg_zero, tuple):  # -0 only where all of these inputs are -0
        return all(_maybe_neg_zero(x.inputs[i], depth + 1) for i in op.neg_zero)
    return True


def _bounded_atom(x: Node, bound: dict[Node, float]) -> float:
    """A magnitude bound of x from the bounds of its inputs (inf when unknown)."""
    name = x.op.name
    if x.dtype.kind != "f":
        return math.inf
    if x.op is _CONST:
        a = x.attrs[0][1].array
        if a.ndim == 0 and a.dtype.itemsize <= 8:
            m = abs(float(a))  # exact: float16/32/64 convert to a Python float without rounding
        elif a.size == 0:
            return 0.0
        else:
            m = float(np.max(np.abs(a)))
        return m if math.isfinite(m) else math.inf
    ins = x.inputs
    if not ins:
        return math.inf
    if x.op.magnitude == "unit":  # |f(x)| <= 1 (or NaN)
        return 1.0
    inf = math.inf
    if len(ins) == 2:
        b = (bound.get(ins[0], inf), bound.get(ins[1], inf))
    elif len(ins) == 1:
        b = (bound.get(ins[0], inf),)
    else:
        b = [bound.get(i, inf) for i in ins]
    if name == "mul":
        return b[0] * b[1] if b[0] and b[1] else 0.0
    if name == "add" or name == "sub":
        return b[0] + b[1]
    if name == "muladd":
        return (b[0] * b[1] if b[0] and b[1] else 0.0) + b[2]
    if x.op.magnitude == "input":  # |f(x)| <= max |x|
        return b[0]
    if name == "cast":
        src = x.inputs[0].dtype
        if src.kind == "b":
            return 1.0
        if src.kind in "iu":
            return float(np.iinfo(src).max)
        return b[0]
    if name == "div":
        s = _splat(x.inputs[1])
        return b[0] / abs(float(s)) if s is not None and s != 0 else math.inf
    if name == "pow":
        s = _splat(x.inputs[1])
        if s is not None and float(s).is_integer() and 0 <= s <= MAX_POW:
            return b[0] ** int(s) if b[0] < 1e100 else math.inf
        return math.inf
    if name in ("maximum", "minimum"):
        return max(b)
    if name == "where":
        return max(b[1], b[2])
    if name == "sum":
        k = int(np.prod([x.inputs[0].shape[a] for a in x.attr("axes")], dtype=np.int64))
        return b[0] * k
    if name == "exp":
        return math.exp(b[0]) if b[0] < 700 else math.inf
    if name == "sqrt":
        return math.sqrt(b[0]) if math.isfinite(b[0]) else math.inf
    return math.inf


def _strip1(shape: tuple) -> tuple:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def _removable_copy_tag(tag: Any) -> bool:
    """Tags of the `copy` nodes that transformations insert (fresh variables)."""
    return tag is None or (isinstance(tag, tuple) and len(tag) > 0 and tag[0] == "fresh")
