"""Padding, sliding windows and convolutions: pad (every mode but a callable), sliding_window_view,
convolve and correlate (modes full, same, valid).

Index arrays come from running NumPy on `arange` at trace time, so the
padding and window semantics are NumPy's by construction; composites of
gather, slice, concatenate and sums (numpy/structural.py's conventions).
"""


from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import Node
from .arithmetic import multiply
from .base import _shape
from .layout import concatenate, moveaxis, reshape
from .reductions import sum as _sum
from .structural import _arr, _axis, _full, _gather_const, _shape_errors, _take_slice, _traced, _with_axis, flip
from .sorting import sort

__all__ = ["convolve", "correlate", "pad", "sliding_window_view"]


# ----- padding -----

_PAD_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")
_PAD_STAT_MODES = ("maximum", "minimum", "mean", "median")
_PAD_KWARGS = {"constant": {"constant_values"}, "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
               "linear_ramp": {"end_values"}, **{m: {"stat_length"} for m in _PAD_STAT_MODES}}


def _pad_stat(x: Any, ax: int, mode: str) -> Any:
    """The statistic of x along ax, kept as a length-1 axis (np.pad's stat modes)."""
    if mode == "maximum":
        return L.reduce("max", x, axis=ax, keepdims=True)
    if mode == "minimum":
        return L.reduce("min", x, axis=ax, keepdims=True)
    if mode == "mean":
        return L.cast(_sum(x, axis=ax, keepdims=True, dtype=x.dtype), x.dtype) / float(x.shape[ax])
    m = x.shape[ax]                                  # median: the middle of the sorted values (NaN last)
    srt = sort(x, axis=ax)
    lo, hi = _take_slice(srt, ax, (m - 1) // 2, (m - 1) // 2 + 1), _take_slice(srt, ax, m // 2, m // 2 + 1)
    return lo if m % 2 else (lo + hi) / 2.0


def _pad_ramp(edge: Any, end: Any, w: int, ax: int) -> Any:
    """np.linspace(end, edge, w, endpoint=False) along ax, as np.pad's linear_ramp computes it."""
    k = _np.arange(w, dtype=_np.float64).reshape((w,) + (1,) * (edge.ndim - ax - 1))
    e = L.cast(edge, _np.float64) if edge.dtype.kind not in "fc" else edge  # complex edges stay complex
    start = _np.asarray(end, e.dtype)
    y = multiply(_np.asarray(k, e.dtype), (e - start) / float(w)) + start
    if edge.dtype.kind in "iu":
        y = L.cast(L.unary("floor", y), edge.dtype)  # NumPy 2's linspace floors to an integer dtype
    return L.cast(y, edge.dtype)


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    """np.pad for modes constant (constant_values), edge, reflect, symmetric, wrap, maximum, minimum, mean,
    median (stat_length), linear_ramp (end_values) and empty (zeros: NumPy leaves the values undefined).

    Axes are padded one after another, as NumPy does (the statistics of a
    later axis see the earlier axes' padding). The index modes gather with the
    indices np.pad itself gives on arange(n), so their semantics (including
    pads wider than the axis) are NumPy's.

    Raises:
        UnsupportedOpError: a callable mode, reflect_type='odd', mean/median of integers.
        ShapeError: a negative pad, a non-constant mode on an empty axis, a stat_length of 0.
    """
    if not _traced(array, kwargs.get("constant_values")):
        return _np.pad(array, pad_width, mode, **kwargs)
    a = _arr(array)
    if callable(mode) or mode not in ("constant", "empty", "linear_ramp") + _PAD_INDEX_MODES + _PAD_STAT_MODES:
        raise UnsupportedOpError(f"pad(mode={mode!r}) is not supported (a callable mode, or an unknown name)")
    allowed = _PAD_KWARGS.get(mode, set())
    if set(kwargs) - allowed:
        raise UnsupportedOpError(f"pad(mode={mode!r}): keyword arguments {sorted(set(kwargs) - allowed)} are not "
                                 f"supported")
    if kwargs.get("reflect_type", "even") != "even":
        raise UnsupportedOpError("pad(reflect_type='odd') is not supported")
    if mode == "median" and a.dtype.kind == "c":
        raise UnsupportedOpError("pad(mode='median') of complex values (NumPy orders them lexicographically) is "
                                 "not supported; pad the real and imaginary parts")
    if mode in ("mean", "median") and a.dtype.kind not in "fc":
        raise UnsupportedOpError(f"pad(mode={mode!r}) of integers (NumPy rounds the statistic) is not supported; "
                                 f"cast to float first")
    widths = _np.broadcast_to(_np.asarray(pad_width), (a.ndim, 2)) if a.ndim else _np.zeros((0, 2), _np.int64)
    if widths.dtype.kind not in "iu":
        raise DTypeError("pad: `pad_width` must be of integral type")
    if (widths < 0).any():
        raise ShapeError("pad: index can't contain negative values")
    if mode == "empty":
        mode, kwargs = "constant", {}
    cv = kwargs.get("constant_values", 0)
    if mode == "constant" and not isinstance(cv, Node):
        cvals = _np.broadcast_to(_np.asarray(cv), (a.ndim, 2))
    if mode == "linear_ramp":
        ends = _np.broadcast_to(_np.asarray(kwargs.get("end_values", 0)), (a.ndim, 2))
    if mode in _PAD_STAT_MODES:
        sl = kwargs.get("stat_length")
        stat_len = None if sl is None else _np.broadcast_to(_np.asarray(sl), (a.ndim, 2))
        if stat_len is not None and (stat_len < 0).any():
            raise ShapeError("pad: index can't contain negative values")
    for ax in range(a.ndim):
        before, after = int(widths[ax, 0]), int(widths[ax, 1])
        if before == 0 and after == 0:
            continue
        n = a.shape[ax]
        if mode != "constant" and n == 0:
            raise ShapeError(f"pad: can't extend empty axis {ax} using modes other than 'constant' or 'empty'")
        if mode in _PAD_INDEX_MODES:
            idx = _np.pad(_np.arange(n, dtype=_np.int64), (before, after), mode=mode)
            a = _gather_const(a, idx, ax)
            continue
        parts = []
        for j, w in ((0, before), (1, after)):
            if w == 0:
                parts.append(None)
                continue
            shape = _with_axis(a.shape, ax, w)
            if mode == "constant":
                if isinstance(cv, Node):
                    if cv.ndim != 0:
                        raise UnsupportedOpError("pad: a traced constant_values must be a scalar")
                    parts.append(L.broadcast_to(L.cast(cv, a.dtype), shape))
                else:
                    parts.append(_full(shape, cvals[ax, j], a.dtype))
            elif mode == "linear_ramp":
                edge = _take_slice(a, ax, 0, 1) if j == 0 else _take_slice(a, ax, n - 1, n)
                ramp = _pad_ramp(edge, ends[ax, j], w, ax)
                parts.append(ramp if j == 0 else flip(ramp, ax))
            else:
                m = n if stat_len is None else builtins.min(int(stat_len[ax, j]), n)
                if m == 0:
                    raise ShapeError("pad: stat_length of 0 yields no value for padding")
                region = _take_slice(a, ax, 0, m) if j == 0 else _take_slice(a, ax, n - m, n)
                parts.append(L.broadcast_to(_pad_stat(region, ax, mode), shape))
        a = concatenate([p for p in (parts[0], a, parts[1]) if p is not None], axis=ax)
    return a


# ----- windows and convolutions -----


def sliding_window_view(x: Any, window_shape: Any, axis: Any = None, *, subok: bool = False,
                        writeable: bool = False) -> Any:
    """All windows of window_shape over axis (np.lib.stride_tricks.sliding_window_view), as a gather.

    Shape: x.shape with each windowed axis shortened by w - 1, then the window
    axes appended. The value is a new array (no strides are shared), so
    writeable is irrelevant. Raises ShapeError for a window larger than its axis.
    """
    if not _traced(x):
        return _np.lib.stride_tricks.sliding_window_view(x, window_shape, axis, subok=subok, writeable=writeable)
    x = _arr(x)
    ws = tuple(int(w) for w in _np.atleast_1d(_np.asarray(window_shape)))
    if axis is None:
        if len(ws) != x.ndim:
            raise ShapeError(f"sliding_window_view: since axis is None, window_shape must have one entry per "
                             f"dimension of x ({x.ndim}), got {len(ws)}")
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(_axis(int(ax), x.ndim, "sliding_window_view") for ax in _np.atleast_1d(_np.asarray(axis)))
        if len(ws) != len(axes):
            raise ShapeError("sliding_window_view: must provide matching length window_shape and axis")
    if any(w < 0 for w in ws):
        raise ShapeError("sliding_window_view: window_shape cannot contain negative values")
    for ax, w in zip(axes, ws):
        n = x.shape[ax]
        if w > n:
            raise ShapeError("sliding_window_view: window shape cannot be larger than input array shape")
        idx = _np.arange(n - w + 1, dtype=_np.int64)[:, None] + _np.arange(w, dtype=_np.int64)[None, :]
        g = _gather_const(x, idx, ax, view=True)            # (..., n-w+1, w, ...): the window axis at ax + 1
        x = moveaxis(g, ax + 1, -1)
    return x


def _conv_full_rows(a: Any, v: Any, start: int, length: int) -> Any:
    """Rows start..start+length of the full convolution of 1-d a (n) and v (m): sum_j a_pad[k + j] v[m-1-j]."""
    m = _shape(v)[0]
    a_pad = concatenate([_np.zeros((m - 1,), a.dtype), a, _np.zeros((m - 1,), a.dtype)], axis=0) if m > 1 else a
    ks = _np.arange(start, start + length, dtype=_np.int64)
    idx = ks[:, None] + _np.arange(m, dtype=_np.int64)[None, :]
    windows = _gather_const(L.asnode(a_pad), idx, 0)        # (length, m)
    vr = flip(v, 0)
    return L.cast(_sum(multiply(windows, reshape(vr, (1, m))), axis=1), a.dtype)   # NumPy keeps the dtype


def _conv(a: Any, v: Any, mode: str, op: str) -> Any:
    a, v = _arr(a), _arr(v)
    if a.ndim != 1 or v.ndim != 1:
        a, v = reshape(a, (-1,)) if a.ndim == 0 else a, reshape(v, (-1,)) if v.ndim == 0 else v
        if a.ndim != 1 or v.ndim != 1:
            raise ShapeError(f"{op}: object too deep for desired array (operands must be 1-d)")
    dtype = L.result_dtype(a, v)
    a, v = L.cast(a, dtype), L.cast(v, dtype)
    if a.shape[0] == 0:
        raise ShapeError(f"{op}: a cannot be empty")
    if v.shape[0] == 0:
        raise ShapeError(f"{op}: v cannot be empty")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    n, m = a.shape[0], v.shape[0]
    if mode == "full":
        return _conv_full_rows(a, v, 0, n + m - 1)
    if mode == "same":
        return _conv_full_rows(a, v, (m - 1) // 2, n)
    if mode == "valid":
        return _conv_full_rows(a, v, m - 1, n - m + 1)
    raise ShapeError(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")


def convolve(a: Any, v: Any, mode: str = "full") -> Any:
    """Discrete linear convolution of two 1-d sequences (modes full, same, valid, as np.convolve).

    A gather of the windows of the zero-padded longer operand and a sum of
    products with the reversed shorter one: O(n m) work, differentiable in both.
    """
    if not _traced(a, v):
        return _np.convolve(a, v, mode)
    return _conv(a, v, mode, "convolve")


def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    """Cross-correlation of two 1-d sequences, as np.correlate: c[k] = sum_n a[n + k] conj(v[n]).

    convolve(a, conj(v)[::-1], mode); for complex v its conjugate, as NumPy's (real v: v itself).
    """
    if not _traced(a, v):
        return _np.correlate(a, v, mode)
    a, v = _arr(a), _arr(v)
    if v.dtype.kind == "c":
        v = L.bind("conj", v)
    return _correlate(a, v, mode)


def _correlate(a: Any, v: Any, mode: str) -> Any:
    """c[k] = sum_n a[n + k] v[n] (no conjugation)."""
    if a.ndim == 1 and v.ndim == 1 and 0 < a.shape[0] < v.shape[0]:
        return flip(_correlate(v, a, mode), 0)   # NumPy: the operands swapped, the result reversed
    if v.ndim == 1:
        v = flip(v, 0)
    return _conv(a, v, mode, "correlate")


for _name in __all__:  # NumPy's ValueErrors of bad lengths and shapes become ShapeErrors naming the function
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.pad: pad,
    _np.convolve: convolve,
    _np.correlate: correlate,
    _np.lib.stride_tricks.sliding_window_view: sliding_window_view,
}
