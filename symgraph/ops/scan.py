"""Scans: the running sum along one axis (cumsum).

`cumsum(x, axis)` adds left to right as NumPy's `np.add.accumulate` does, so
its values are NumPy's bit for bit; the LLVM backend lowers it as a scan
task (codegen/kernels: one element after another, each adding its
predecessor's result). It is linear: the VJP is the reversed running sum of
the cotangent, the JVP the running sum of the tangent.
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import ShapeError
from .batch import rebind
from .core import Op, register, same_dtype


def _cumsum_shape(s, *, axis):
    if not 0 <= axis < len(s):
        raise ShapeError(f"cumsum: axis {axis} out of range for shape {s}")
    return tuple(s)


def _reverse(x, axis):
    """x reversed along axis (a slice with step -1)."""
    nd = x.ndim
    n = x.shape[axis]
    starts = tuple(n - 1 if j == axis else 0 for j in range(nd))
    stops = tuple(-1 if j == axis else x.shape[j] for j in range(nd))
    steps = tuple(-1 if j == axis else 1 for j in range(nd))
    return L.bind("slice", x, starts=starts, stops=stops, steps=steps)


def _cumsum_vjp(ct, node):
    axis = node.attr("axis")
    return (_reverse(L.bind("cumsum", _reverse(ct, axis), axis=axis), axis),)


def _cumsum_jvp(t, node):
    return None if t[0] is None else L.bind("cumsum", t[0], axis=node.attr("axis"))


register(Op("cumsum", 1, "opaque", _cumsum_shape, same_dtype,
            lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype), _cumsum_vjp, _cumsum_jvp, linear=True,
            doc="running sum along axis, left to right (np.cumsum in the operand's dtype)", neg_zero=(0,),
            batch=lambda node, bargs, size: rebind(node, [bargs[0]], axis=node.attr("axis") + 1)))
