"""Arrays from values and shapes: asarray, astype, zeros_like and friends (constants), counter-based random values."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..errors import DTypeError
from ..ir import Node
from .base import _shape
from .layout import stack

__all__ = [
    "arange", "array", "asarray", "astype", "eye", "full", "full_like", "linspace", "ones", "ones_like",
    "random_uniform", "zeros", "zeros_like",
]


def asarray(x: Any, dtype: Any = None) -> Any:
    """x unchanged if traced (cast to dtype if given), else np.asarray."""
    if isinstance(x, Node):
        return L.cast(x, dtype) if dtype is not None else x
    if isinstance(x, (list, tuple)) and any(isinstance(v, Node) for v in x):
        return stack(x)
    return _np.asarray(x, dtype=dtype)


array = asarray


def astype(x: Any, dtype: Any) -> Any:
    """x converted to dtype."""
    return L.cast(x, dtype)


def zeros_like(x: Any, dtype: Any = None) -> Any:
    """Zeros of x's shape (a constant)."""
    return _np.zeros(_shape(x), dtype or (x.dtype if hasattr(x, "dtype") else float))


def ones_like(x: Any, dtype: Any = None) -> Any:
    """Ones of x's shape (a constant)."""
    return _np.ones(_shape(x), dtype or (x.dtype if hasattr(x, "dtype") else float))


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    """fill_value in x's shape (a constant)."""
    return _np.full(_shape(x), fill_value, dtype or (x.dtype if hasattr(x, "dtype") else float))


zeros = _np.zeros
ones = _np.ones
full = _np.full
arange = _np.arange
linspace = _np.linspace
eye = _np.eye


def random_uniform(key: Any, shape: Sequence[int], salt: int = 0, dtype: Any = _np.float64) -> Any:
    """Counter-based uniform [0, 1) values of `shape` from an integer scalar key."""
    if not isinstance(key, Node):
        key = _np.asarray(key, dtype=_np.uint64)
    elif key.dtype.kind not in "iu":
        raise DTypeError(f"random_uniform: key must be an integer, got {key.dtype}")
    return L.bind("random_uniform", key, shape=tuple(int(d) for d in shape), salt=int(salt), dtype=_np.dtype(dtype))


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
}

FUNCTIONS = {
    _np.zeros_like: zeros_like, _np.ones_like: ones_like, _np.full_like: full_like, _np.asarray: asarray,
    _np.array: asarray,
}
