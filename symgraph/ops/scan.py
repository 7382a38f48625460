"""Scans: the running sum and the running product along one axis (cumsum, cumprod).

`cumsum(x, axis)` adds left to right as NumPy's `np.add.accumulate` does, so
its values are NumPy's bit for bit; the LLVM backend lowers it as a scan
task (codegen/kernels: one element after another, each adding its
predecessor's result). It is linear: the VJP is the reversed running sum of
the cotangent, the JVP the running sum of the tangent. `cumprod` multiplies
left to right the same way; its derivatives are linear recurrences computed
by doubling (`linear_recurrence`): polynomials in x, exact with zeros and
negative values, and differentiable again.
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


def _shift(x, axis, k, fill):
    """x shifted forward by k along axis, the first k elements `fill`."""
    n = x.shape[axis]
    nd = x.ndim
    k = min(k, n)
    head = L.full_like(L.bind("slice", x, starts=(0,) * nd, stops=tuple(k if j == axis else x.shape[j] for j in range(nd)),
                              steps=(1,) * nd), fill)
    if k == n:
        return head
    body = L.bind("slice", x, starts=(0,) * nd, stops=tuple(n - k if j == axis else x.shape[j] for j in range(nd)),
                  steps=(1,) * nd)
    return L.bind("concatenate", head, body, axis=axis)


def linear_recurrence(a, b, axis):
    """h with h_i = a_i * h_{i-1} + b_i along axis (h_{-1} = 0), by doubling: ceil(log2 n) rounds of
    multiplies and adds (a polynomial in a and b: no division, so exact with zeros at every order)."""
    n = a.shape[axis]
    k = 1
    while k < n:
        b = b + a * _shift(b, axis, k, 0.0)
        a = a * _shift(a, axis, k, 1.0)
        k *= 2
    return b


def _exclusive(y, axis):
    """The exclusive running product: [1, y_0, ..., y_{n-2}] along axis."""
    return _shift(y, axis, 1, 1.0)


def _cumprod_vjp(ct, node):
    # d y_k / d x_i = E_i * prod_{i<j<=k} x_j (E_i = prod_{j<i} x_j), so the cotangent of x_i is E_i * S_i with
    # S_i = ct_i + x_{i+1} S_{i+1}: a reversed linear recurrence
    x = node.inputs[0]
    axis = node.attr("axis")
    a = _reverse(_shift(_reverse(x, axis), axis, 1, 0.0), axis)   # x_{i+1} (0 past the end)
    s = _reverse(linear_recurrence(_reverse(a, axis), _reverse(ct, axis), axis), axis)
    return (_exclusive(node, axis) * s,)


def _cumprod_jvp(t, node):
    # T_k = x_k T_{k-1} + E_k t_k
    if t[0] is None:
        return None
    axis = node.attr("axis")
    return linear_recurrence(node.inputs[0], _exclusive(node, axis) * t[0], axis)


register(Op("cumprod", 1, "opaque", _cumsum_shape, same_dtype,
            lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype), _cumprod_vjp, _cumprod_jvp,
            doc="running product along axis, left to right (np.cumprod in the operand's dtype); derivative exact "
                "with zeros, to every order",
            batch=lambda node, bargs, size: rebind(node, [bargs[0]], axis=node.attr("axis") + 1)))
