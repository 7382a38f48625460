"""Editing arrays on traced values: np.delete, insert, compress, resize (NumPy on element numbers, then one
gather) and NumPy 2's cumulative_sum / cumulative_prod (cumsum / cumprod with the array API's rules)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from .base import _ndim, _shape
from .layout import concatenate, reshape
from .structural import _arr, _axis, _full, _gather_const, _scan, _shape_errors, _traced, _with_axis

__all__ = ["cumulative_sum", "cumulative_prod", "delete", "insert", "compress", "resize"]


def _cumulative(kind: str, x: Any, axis: Any, dtype: Any, out: Any, include_initial: bool) -> Any:
    """np.cumulative_sum / cumulative_prod (NumPy 2): cumsum / cumprod, axis required above 1-d,
    0-d x as 1-d, and with include_initial the identity (0 or 1) first along axis."""
    name = "cumulative_" + ("sum" if kind == "cumsum" else "prod")
    if out is not None:
        raise UnsupportedOpError(f"{name}(out=...) writes in place, which tracing does not support")
    x = _arr(x)
    if _ndim(x) == 0:
        x = reshape(x, (1,))
    if axis is None:
        if _ndim(x) > 1:
            raise ShapeError(f"{name}: for arrays which have more than one dimension the axis argument is required")
        axis = 0
    ax = _axis(axis, _ndim(x), name)
    y = _scan(kind, x, ax, dtype, None)
    if include_initial:
        first = _full(_with_axis(_shape(y), ax, 1), 0 if kind == "cumsum" else 1, y.dtype)
        y = concatenate([first, y], axis=ax)
    return y


def cumulative_sum(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                   include_initial: bool = False) -> Any:
    """np.cumulative_sum (NumPy 2, the array API's): `cumsum` along axis (required for more than 1-d);
    include_initial puts the zero first, so the result is one longer along axis.

    Raises:
        ShapeError: axis missing for a multi-dimensional x, or out of range. UnsupportedOpError: out=.
    """
    return _cumulative("cumsum", x, axis, dtype, out, include_initial)


def cumulative_prod(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
                    include_initial: bool = False) -> Any:
    """np.cumulative_prod (NumPy 2): `cumprod` along axis (required for more than 1-d); include_initial
    puts the one first.

    Raises:
        ShapeError: axis missing for a multi-dimensional x, or out of range. UnsupportedOpError: out=.
    """
    return _cumulative("cumprod", x, axis, dtype, out, include_initial)


# ----- data movement by index codes: delete, insert, compress, resize -----


def _by_codes(op: str, fn: Any, parts: Sequence[Any], dtype: Any) -> Any:
    """`fn` (a NumPy function that only moves, drops or repeats elements) on traced values.

    Each part gets int64 codes (its flat positions, numbered across the parts); `fn` runs on the
    codes with NumPy, so every rule of its arguments (obj forms, broadcasting of inserted values,
    axis None) is NumPy's own; the result is one gather from the parts' flattened concatenation
    (cast to `dtype`). Derivative: the gather's (a scatter-add), so repeated elements add up.
    """
    codes, flats, off = [], [], 0
    for p in parts:
        shape = _shape(p)
        size = int(_np.prod(shape, dtype=_np.int64))
        codes.append(_np.arange(off, off + size, dtype=_np.int64).reshape(shape))
        flats.append(reshape(L.cast(p, dtype), (size,)))
        off += size
    try:
        idx = _np.asarray(fn(*codes))
    except (ValueError, IndexError, TypeError) as e:
        raise ShapeError(f"{op}: {e}") from None
    if off == 0 or idx.size == 0:
        return _full(idx.shape, 0, dtype)
    src = flats[0] if len(flats) == 1 else concatenate(flats)
    return reshape(_gather_const(src, idx.astype(_np.int64).ravel(), 0), idx.shape)


def _static(op: str, what: str, v: Any) -> None:
    if _traced(v):
        raise UnsupportedOpError(f"{op}: {what} must be concrete (it decides the result's shape); pass it as a "
                                 f"static argument or compute it with NumPy")


def delete(arr: Any, obj: Any, axis: Any = None) -> Any:
    """np.delete: arr without the entries `obj` (int, slice, int array or bool mask) along axis (flattened
    when None). Shapes: arr's, shorter along axis.

    Raises:
        UnsupportedOpError: a traced obj. ShapeError: obj out of range (NumPy's IndexError).
    """
    _static("delete", "obj", obj)
    a = _arr(arr)
    return _by_codes("delete", lambda c: _np.delete(c, obj, axis), [a], a.dtype)


def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
    """np.insert: `values` inserted before the indices `obj` along axis (flattened when None), with
    NumPy's rules for a scalar obj (one block, values broadcast to it) and a sequence obj (one value
    per index); values are cast to arr's dtype, as NumPy's.

    Raises:
        UnsupportedOpError: a traced obj. ShapeError: obj out of range or values that do not broadcast.
    """
    _static("insert", "obj", obj)
    a, v = _arr(arr), _arr(values)
    if v.dtype.kind == "c" and a.dtype.kind != "c":
        raise DTypeError(f"insert: complex values into a {a.dtype} array would drop their imaginary parts (NumPy "
                         f"raises TypeError); cast the array to complex first")
    return _by_codes("insert", lambda c, cv: _np.insert(c, obj, cv, axis), [a, v], a.dtype)


def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Any:
    """np.compress: the slices of `a` along axis (flattened when None) where the concrete boolean
    `condition` is true (a shorter condition is padded with False, as NumPy's).

    Raises:
        UnsupportedOpError: a traced condition, or out=. ShapeError: condition longer than the axis.
    """
    _static("compress", "condition", condition)
    if out is not None:
        raise UnsupportedOpError("compress(out=...) writes in place, which tracing does not support")
    x = _arr(a)
    return _by_codes("compress", lambda c: _np.compress(condition, c, axis), [x], x.dtype)


def resize(a: Any, new_shape: Any) -> Any:
    """np.resize: a's flattened elements repeated cyclically to fill new_shape (zeros for an empty a).

    Raises:
        ShapeError: a negative dimension.
    """
    x = _arr(a)
    return _by_codes("resize", lambda c: _np.resize(c, new_shape), [x], x.dtype)


for _name in __all__:  # NumPy's ValueErrors of bad shapes become ShapeErrors naming the function
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.delete: delete, _np.insert: insert, _np.compress: compress, _np.resize: resize,
    **{getattr(_np, _n): _f for _n, _f in (("cumulative_sum", cumulative_sum), ("cumulative_prod", cumulative_prod))
       if hasattr(_np, _n)},
}
