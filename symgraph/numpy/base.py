"""What the whole namespace shares: NumPy's dtype and constant names, and the shape and ndim of any argument."""

from __future__ import annotations

from typing import Any

import numpy as _np

from ..ir import Node

__all__ = ["bool_", "e", "float32", "float64", "inf", "int32", "int64", "nan", "newaxis", "pi"]

float32 = _np.float32
float64 = _np.float64
int32 = _np.int32
int64 = _np.int64
bool_ = _np.bool_
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, (Node, _np.ndarray, _np.generic)) else _np.shape(x)


def _ndim(x: Any) -> int:
    return len(_shape(x))


def _size(x: Any, axis: int | None = None) -> int:
    shape = _shape(x)
    return int(_np.prod(shape, dtype=_np.int64)) if axis is None else shape[axis]


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.shape: _shape, _np.ndim: _ndim,
    _np.size: _size,
}
