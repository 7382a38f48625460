"""What the whole namespace shares: NumPy's dtype and constant names, and the shape and ndim of any argument."""

from __future__ import annotations

from typing import Any

import numpy as _np

from ..ir import Node

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
