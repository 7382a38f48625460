"""`symgraph.scipy.signal`: N-dimensional convolution and correlation on traced values (as `jax.scipy.signal`).

`convolve(in1, in2, mode)`, `correlate(in1, in2, mode)` and
`convolve2d`/`correlate2d` (boundary "fill" with fillvalue 0) follow
scipy.signal's definitions and modes ("full", "same", "valid"); `method` is
accepted and ignored (the result is the direct sum). The full convolution
is a sum over the positions of the smaller operand: each term is the larger
operand, zero-padded to the output shape at that offset, times one element
of the smaller one, so the graph has O(smaller.size) nodes and the work is
the direct method's. Both operands may be traced and differentiated.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .. import lax as L
from .. import numpy as snp
from ..errors import ShapeError, UnsupportedOpError
from . import special as sp

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d"]

_MODES = ("full", "same", "valid")


def _shape(x) -> tuple:
    return tuple(x.shape) if L.is_node(x) else np.shape(x)


def _pad_to(x, offset: tuple, shape: tuple):
    """x placed at `offset` inside zeros of `shape` (concatenation with zero blocks, axis by axis)."""
    for ax, (o, n) in enumerate(zip(offset, shape)):
        xs = _shape(x)
        after = n - o - xs[ax]
        parts = []
        if o:
            parts.append(np.zeros(xs[:ax] + (o,) + xs[ax + 1:], dtype=x.dtype))
        parts.append(x)
        if after:
            parts.append(np.zeros(xs[:ax] + (after,) + xs[ax + 1:], dtype=x.dtype))
        if len(parts) > 1:
            x = snp.concatenate(parts, axis=ax)
    return x


def _full(a, b):
    """The full N-d convolution of a and b (same ndim)."""
    sa, sb = _shape(a), _shape(b)
    if int(np.prod(sb)) > int(np.prod(sa)):
        a, b, sa, sb = b, a, sb, sa
    out_shape = tuple(m + n - 1 for m, n in zip(sa, sb))
    acc = None
    for idx in itertools.product(*(range(n) for n in sb)):
        term = _pad_to(a, idx, out_shape) * b[idx]
        acc = term if acc is None else acc + term
    return acc


def _crop(full, start: tuple, shape: tuple):
    return full[tuple(slice(s, s + n) for s, n in zip(start, shape))]


def _check(in1, in2, mode: str, name: str):
    if mode not in _MODES:
        raise UnsupportedOpError(f"{name}: mode must be one of {_MODES}, got {mode!r}")
    in1, in2 = sp._f(in1), sp._f(in2)
    dt = np.result_type(in1.dtype, in2.dtype)
    in1, in2 = L.cast(in1, dt), L.cast(in2, dt)
    s1, s2 = _shape(in1), _shape(in2)
    if len(s1) != len(s2):
        raise ShapeError(f"{name}: in1 and in2 should have the same dimensionality, got shapes {s1} and {s2}")
    if 0 in s1 or 0 in s2:
        raise ShapeError(f"{name}: empty inputs are not supported (shapes {s1}, {s2})")
    return in1, in2, s1, s2


def _moded(full, s1: tuple, s2: tuple, mode: str, name: str):
    if mode == "full":
        return full
    if mode == "same":
        fs = _shape(full)
        return _crop(full, tuple((f - n) // 2 for f, n in zip(fs, s1)), s1)
    # valid: one operand must be at least as large as the other in every dimension
    if not (all(m >= n for m, n in zip(s1, s2)) or all(n >= m for m, n in zip(s1, s2))):
        raise ShapeError(f"{name}: for 'valid' mode, one must be at least as large as the other in every "
                         f"dimension (shapes {s1}, {s2})")
    out = tuple(max(m, n) - min(m, n) + 1 for m, n in zip(s1, s2))
    return _crop(full, tuple(min(m, n) - 1 for m, n in zip(s1, s2)), out)


def convolve(in1, in2, mode: str = "full", method: str = "auto"):
    """The N-d convolution of in1 and in2 (scipy.signal.convolve): out[n] = sum_k in1[k] in2[n - k].

    Args:
        in1, in2: arrays or traced values of the same ndim (integers become float64).
        mode: "full" (shape s1 + s2 - 1), "same" (shape of in1, centred as SciPy), "valid"
            (where the operands overlap completely).
        method: ignored (SciPy's choice between direct and FFT).

    Raises:
        ShapeError: different ndims, empty inputs, or "valid" without one operand dominating.
        UnsupportedOpError: an unknown mode.
    """
    in1, in2, s1, s2 = _check(in1, in2, mode, "convolve")
    return _moded(_full(in1, in2), s1, s2, mode, "convolve")


def _flip(x):
    return x[tuple(slice(None, None, -1) for _ in _shape(x))]


def correlate(in1, in2, mode: str = "full", method: str = "auto"):
    """The N-d cross-correlation (scipy.signal.correlate, real inputs): out[n] = sum_k in1[n + k] in2[k],
    i.e. convolve(in1, in2 reversed along every axis) with the same modes."""
    in1, in2, s1, s2 = _check(in1, in2, mode, "correlate")
    return _moded(_full(in1, _flip(in2)), s1, s2, mode, "correlate")


def _check2d(in1, in2, boundary, fillvalue, name):
    if boundary != "fill" or fillvalue != 0:
        raise UnsupportedOpError(f"{name}: only boundary='fill' with fillvalue=0 is supported, got "
                                 f"boundary={boundary!r}, fillvalue={fillvalue!r}")
    if len(_shape(in1)) != 2 or len(_shape(in2)) != 2:
        raise ShapeError(f"{name}: inputs must be 2-D, got shapes {_shape(in1)} and {_shape(in2)}")


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0):
    """2-D convolution (scipy.signal.convolve2d) with zero fill; see `convolve`."""
    _check2d(in1, in2, boundary, fillvalue, "convolve2d")
    return convolve(in1, in2, mode)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0):
    """2-D cross-correlation (scipy.signal.correlate2d) with zero fill; see `correlate`."""
    _check2d(in1, in2, boundary, fillvalue, "correlate2d")
    return correlate(in1, in2, mode)
