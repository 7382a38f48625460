"""`symgraph.numpy.fft`: numpy.fft on traced values (plain `np.fft.*` calls trace here too).

Every transform is composed from the three primitives of `symgraph.ops.fourier`
(unnormalized, along the last axis) and existing ops, in the order NumPy 2's
pocketfft module runs them, so values are NumPy's bit for bit in float64 and
float32 alike (NumPy 2: float32 and complex64 inputs transform in single
precision and give complex64; integers and bool give complex128):

- the transformed axis is moved last (a transpose) and back;
- `n=` / `s=` crop (a slice) or zero-pad (`unslice`) the input along the axis;
- `norm=` multiplies by NumPy's own factor (1, 1/sqrt(n) or 1/n, computed in
  the dtype NumPy computes it in) after the unnormalized transform, as
  pocketfft applies it;
- fftn / ifftn / fft2 / ifft2 are 1-D passes from the last listed axis to the
  first; rfftn / rfft2 take the real transform along the last listed axis first,
  irfftn / irfft2 the real inverse along it last (NumPy's order);
- hfft(a) is irfft(conj(a)) and ihfft(a) conj(rfft(a)), with the norm swapped;
- fftshift / ifftshift are rolls, fftfreq / rfftfreq constants (or graph
  arithmetic when the spacing `d` is traced).

Derivatives are the adjoint transforms (docs/fft.md has the convention and
the formulas); with no traced argument each function calls numpy.fft itself.

Differences from NumPy: repeated axes in `axes` (which NumPy transforms twice)
raise `ShapeError`, as JAX does; `out=` is not supported on traced values;
float128 is refused (symgraph has no extended precision).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import Node
from ..ops.core import normalize_axes
from .complex_numbers import conj as _conj
from .layout import moveaxis
from .structural import roll

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn",
    "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq",
]

_NORMS = ("backward", "ortho", "forward")
_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


# ----- argument checks (errors point at the user's line: SymgraphError captures it) -----


def _traced(*xs: Any) -> bool:
    return any(isinstance(x, Node) for x in xs)


def _check_norm(norm: Any, op: str) -> None:
    if not (norm is None or (isinstance(norm, str) and norm in _NORMS)):
        raise ShapeError(f"np.fft.{op}: invalid norm {norm!r}; it should be \"backward\" (the default), \"ortho\", "
                         f"\"forward\" or None")


def _check_n(n: Any, op: str, what: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, (numbers.Integral, _np.integer)):
        raise ShapeError(f"np.fft.{op}: {what} must be an integer number of points, got {n!r}")
    n = int(n)
    if n < 1:
        raise ShapeError(f"np.fft.{op}: invalid number of FFT data points ({what}={n}); it must be at least 1")
    return n


def _check_out(out: Any, op: str) -> None:
    if out is not None:
        raise UnsupportedOpError(f"np.fft.{op}: out= is not supported on traced values; use the returned array")


def _axis(x: Node, axis: Any, op: str) -> int:
    if x.ndim == 0:
        raise ShapeError(f"np.fft.{op}: needs an array of at least 1 dimension, got a 0-d array")
    if isinstance(axis, bool) or not isinstance(axis, (numbers.Integral, _np.integer)):
        raise ShapeError(f"np.fft.{op}: axis must be an integer, got {axis!r}")
    return normalize_axes(int(axis), x.ndim, op=f"np.fft.{op}")[0]


def _node(a: Any, op: str) -> Node:
    x = L.asnode(a)
    if x.dtype.kind not in "biufc" or x.dtype.itemsize > 16 or (x.dtype.kind == "f" and x.dtype.itemsize > 8):
        raise DTypeError(f"np.fft.{op}: dtype {x.dtype} is not supported (symgraph transforms float32/float64, "
                         f"complex64/complex128, integer and bool arrays)")
    return x


def _complex_of(d: _np.dtype) -> _np.dtype:
    """NumPy's output dtype of a complex transform of dtype d: result_type(d, 1j) (float32 -> complex64)."""
    return _np.result_type(d, 1j)


# ----- the 1-D building blocks (axis last, length fixed, scaled as pocketfft scales) -----


def _fix_length(x: Node, axis: int, n: int) -> Node:
    """x cropped (a slice) or zero-padded (unslice) to n points along axis, as pocketfft copies its input."""
    m = x.shape[axis]
    if m == n:
        return x
    nd = x.ndim
    starts, steps = (0,) * nd, (1,) * nd
    if m > n:
        stops = x.shape[:axis] + (n,) + x.shape[axis + 1:]
        return L.bind("slice", x, starts=starts, stops=stops, steps=steps)
    return L.bind("unslice", x, shape=x.shape[:axis] + (n,) + x.shape[axis + 1:], starts=starts, stops=x.shape,
                  steps=steps)


def _along(x: Node, axis: int, prim: str, **attrs: Any) -> Node:
    """The primitive along `axis` (moved last and back)."""
    last = x.ndim - 1
    if axis != last:
        x = moveaxis(x, axis, last)
    y = L.bind(prim, x, **attrs)
    return moveaxis(y, last, axis) if axis != last else y


def _scaled(y: Node, norm: Any, n: int, numpy_real: _np.dtype, forward: bool) -> Node:
    """y times NumPy's normalization factor (`_raw_fft`'s fct, computed in NumPy's dtype, then cast to y's)."""
    if not forward:
        norm = _SWAP[norm]
    if norm is None or norm == "backward":
        return y
    if norm == "ortho":
        fct = _np.reciprocal(_np.sqrt(n, dtype=numpy_real))
    else:
        fct = _np.reciprocal(n, dtype=numpy_real)
    comp_real = _np.dtype(_np.float32) if y.dtype in (_np.complex64, _np.float32) else _np.dtype(_np.float64)
    return L.mul(y, _np.asarray(fct, comp_real))


def _numpy_real(d: _np.dtype) -> _np.dtype:
    """The dtype NumPy computes the factor in: result_type(a.real.dtype, 1.0)."""
    d = _np.dtype(d)
    rd = _np.finfo(d).dtype if d.kind == "c" else d
    return _np.result_type(rd, 1.0)


def _c2c(x: Node, n: Any, axis: Any, norm: Any, forward: bool, op: str) -> Node:
    _check_norm(norm, op)
    ax = _axis(x, axis, op)
    n = x.shape[ax] if n is None else _check_n(n, op)
    nr = _numpy_real(x.dtype)
    x = L.cast(x, _complex_of(x.dtype))
    y = _along(_fix_length(x, ax, n), ax, "fft_c2c", inverse=not forward)
    return _scaled(y, norm, n, nr, forward)


def _r2c(x: Node, n: Any, axis: Any, norm: Any, op: str) -> Node:
    _check_norm(norm, op)
    if x.dtype.kind == "c":
        raise DTypeError(f"np.fft.{op}: needs a real input, got {x.dtype} (NumPy refuses complex input here too; "
                         f"use np.fft.fft for complex data)")
    ax = _axis(x, axis, op)
    n = x.shape[ax] if n is None else _check_n(n, op)
    nr = _numpy_real(x.dtype)
    x = L.cast(x, _np.finfo(_complex_of(x.dtype)).dtype)
    y = _along(_fix_length(x, ax, n), ax, "fft_r2c")
    return _scaled(y, norm, n, nr, True)


def _c2r(x: Node, n: Any, axis: Any, norm: Any, op: str) -> Node:
    _check_norm(norm, op)
    ax = _axis(x, axis, op)
    n = (x.shape[ax] - 1) * 2 if n is None else _check_n(n, op)
    if n < 1:
        raise ShapeError(f"np.fft.{op}: invalid number of FFT data points ({n}): an input of {x.shape[ax]} point(s) "
                         f"along axis {ax} gives n = 2 * ({x.shape[ax]} - 1); pass n explicitly")
    nr = _numpy_real(x.dtype)
    x = L.cast(x, _complex_of(x.dtype))
    y = _along(_fix_length(x, ax, n // 2 + 1), ax, "fft_c2r", n=n)
    y = _scaled(y, norm, n, nr, False)
    return L.cast(y, nr)  # float16 in: NumPy computes in float32 and returns float16


# ----- one-dimensional transforms -----


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """np.fft.fft: the discrete Fourier transform along one axis, y_k = sum_j a_j exp(-2 pi i j k / n).

    Args:
        a: array (..., m, ...) of any numeric dtype; real inputs are transformed as complex.
        n: points of the transform: the input is cropped or zero-padded to n along `axis` (default m).
        axis: the transformed axis.
        norm: "backward" (None, the default: no factor), "ortho" (1/sqrt(n)) or "forward" (1/n).
        out: not supported on traced values.

    Returns:
        complex64 for float32/complex64 input, else complex128, shape with n along `axis`.

    Raises:
        ShapeError: an invalid norm, n < 1, an axis out of range, a 0-d input.
        UnsupportedOpError: out= on a traced value.

    References:
        Cooley & Tukey (1965); the values are NumPy's pocketfft's (Reinecke).
    """
    if not _traced(a):
        return _np.fft.fft(a, n, axis, norm, out)
    _check_out(out, "fft")
    return _c2c(_node(a, "fft"), n, axis, norm, True, "fft")


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """np.fft.ifft: the inverse transform, a_j = (1/n) sum_k y_k exp(+2 pi i j k / n) with the default norm.

    Args, Returns and Raises as `fft`; the factor is 1/n ("backward"), 1/sqrt(n) ("ortho") or 1 ("forward").
    """
    if not _traced(a):
        return _np.fft.ifft(a, n, axis, norm, out)
    _check_out(out, "ifft")
    return _c2c(_node(a, "ifft"), n, axis, norm, False, "ifft")


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """np.fft.rfft: the transform of real data, the n//2 + 1 terms of non-negative frequency.

    Args:
        a: real array (float, integer or bool); complex input raises DTypeError, as NumPy refuses it.
        n, axis, norm, out: as `fft`.

    Returns:
        complex64 for float32 input, else complex128; n//2 + 1 points along `axis`.

    Raises:
        DTypeError: a complex input. ShapeError, UnsupportedOpError: as `fft`.
    """
    if not _traced(a):
        return _np.fft.rfft(a, n, axis, norm, out)
    _check_out(out, "rfft")
    return _r2c(_node(a, "rfft"), n, axis, norm, "rfft")


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """np.fft.irfft: the inverse of rfft, a real signal of n points from its half spectrum.

    The input is cropped or zero-padded to n//2 + 1 points; the imaginary parts of the zero-frequency term
    and, for even n, of the Nyquist term are ignored (NumPy's behaviour; their derivative is zero).

    Args:
        a: array (..., m, ...), the half spectrum (real input is taken as complex).
        n: output points (default 2 * (m - 1)).
        axis, norm, out: as `fft` (the factor of "backward" is 1/n).

    Returns:
        float32 for complex64/float32 input, else float64 (float16 input gives float16, as NumPy).

    Raises:
        ShapeError: an invalid norm, n < 1 (also m = 1 without n), a bad axis. UnsupportedOpError: out=.
    """
    if not _traced(a):
        return _np.fft.irfft(a, n, axis, norm, out)
    _check_out(out, "irfft")
    return _c2r(_node(a, "irfft"), n, axis, norm, "irfft")


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """np.fft.hfft: the transform of a Hermitian-symmetric signal given by its first half: irfft(conj(a), n)
    with the norm swapped (so the default scales by 1), a real result of n points (default 2 * (m - 1)).

    Args, Returns and Raises as `irfft`.
    """
    if not _traced(a):
        return _np.fft.hfft(a, n, axis, norm, out)
    _check_out(out, "hfft")
    _check_norm(norm, "hfft")
    x = _node(a, "hfft")
    return _c2r(_conj(x), n, axis, _SWAP[norm], "hfft")


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None, out: Any = None) -> Any:
    """np.fft.ihfft: the inverse of hfft, conj(rfft(a, n)) with the norm swapped (default factor 1/n).

    Args, Returns and Raises as `rfft`.
    """
    if not _traced(a):
        return _np.fft.ihfft(a, n, axis, norm, out)
    _check_out(out, "ihfft")
    _check_norm(norm, "ihfft")
    return _conj(_r2c(_node(a, "ihfft"), n, axis, _SWAP[norm], "ihfft"))


# ----- n-dimensional transforms (1-D passes in NumPy's order) -----


def _cook(x: Node, s: Any, axes: Any, op: str, invreal: bool = False) -> tuple[list, list]:
    """(lengths, axes) of an n-dimensional transform, as NumPy's `_cook_nd_args` (with its deprecations)."""
    shapeless = s is None
    if axes is not None:
        axes = [axes] if isinstance(axes, (numbers.Integral, _np.integer)) else list(axes)
        for a in axes:
            if isinstance(a, bool) or not isinstance(a, (numbers.Integral, _np.integer)):
                raise ShapeError(f"np.fft.{op}: axes must be integers, got {axes!r}")
        norm_axes = [normalize_axes(int(a), x.ndim, op=f"np.fft.{op}")[0] for a in axes]
        if len(set(norm_axes)) != len(norm_axes):
            raise ShapeError(f"np.fft.{op}: repeated axes {tuple(axes)}; symgraph transforms each axis once "
                             f"(NumPy would transform a repeated axis twice: call the transform again for that)")
        axes = norm_axes
    if s is None:
        s = list(x.shape) if axes is None else [x.shape[a] for a in axes]
    else:
        s = [s] if isinstance(s, (numbers.Integral, _np.integer)) else list(s)
    if axes is None:
        if not shapeless:
            warnings.warn("`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0): pass the axes "
                          "that `s` refers to", DeprecationWarning, stacklevel=3)
        if len(s) > x.ndim:
            raise ShapeError(f"np.fft.{op}: s has {len(s)} entries for an array of {x.ndim} dimensions")
        axes = list(range(x.ndim - len(s), x.ndim))
    if len(s) != len(axes):
        raise ShapeError(f"np.fft.{op}: s ({len(s)} entries) and axes ({len(axes)} entries) have different lengths")
    if invreal and shapeless and axes:
        s[-1] = (x.shape[axes[-1]] - 1) * 2
    s = [x.shape[a] if v == -1 else v for v, a in zip(s, axes)]
    s = [None if v is None else _check_n(v, op, "s") for v in s]
    return s, axes


def _nd(a: Any, s: Any, axes: Any, norm: Any, forward: bool, op: str) -> Node:
    _check_norm(norm, op)
    x = _node(a, op)
    s, axes = _cook(x, s, axes, op)
    for n, ax in reversed(list(zip(s, axes))):
        x = _c2c(x, n, ax, norm, forward, op)
    return x


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None,
         out: Any = None) -> Any:
    """np.fft.fftn: the n-dimensional transform over `axes` (default all), 1-D passes from the last axis listed.

    Args:
        a: array of any numeric dtype.
        s: points per transformed axis (crop or zero-pad; -1 keeps the axis' length).
        axes: the transformed axes (default: all, or the last len(s)); each at most once.
        norm, out: as `fft` (the factor is the product over the axes).

    Returns:
        complex64 for float32/complex64 input, else complex128.

    Raises:
        ShapeError: an invalid norm, an entry of s below 1, repeated axes, s and axes of different lengths.
    """
    if not _traced(a):
        return _np.fft.fftn(a, s, axes, norm, out)
    _check_out(out, "fftn")
    return _nd(a, s, axes, norm, True, "fftn")


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None,
          out: Any = None) -> Any:
    """np.fft.ifftn: the n-dimensional inverse transform (Args, Returns and Raises as `fftn`)."""
    if not _traced(a):
        return _np.fft.ifftn(a, s, axes, norm, out)
    _check_out(out, "ifftn")
    return _nd(a, s, axes, norm, False, "ifftn")


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None,
         out: Any = None) -> Any:
    """np.fft.fft2: `fftn` over the last two axes by default."""
    if not _traced(a):
        return _np.fft.fft2(a, s, axes, norm, out)
    _check_out(out, "fft2")
    return _nd(a, s, axes, norm, True, "fft2")


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None,
          out: Any = None) -> Any:
    """np.fft.ifft2: `ifftn` over the last two axes by default."""
    if not _traced(a):
        return _np.fft.ifft2(a, s, axes, norm, out)
    _check_out(out, "ifft2")
    return _nd(a, s, axes, norm, False, "ifft2")


def _rnd(a: Any, s: Any, axes: Any, norm: Any, op: str) -> Node:
    _check_norm(norm, op)
    x = _node(a, op)
    s, axes = _cook(x, s, axes, op)
    if not axes:
        raise ShapeError(f"np.fft.{op}: needs at least one axis to transform")
    x = _r2c(x, s[-1], axes[-1], norm, op)
    for n, ax in reversed(list(zip(s[:-1], axes[:-1]))):
        x = _c2c(x, n, ax, norm, True, op)
    return x


def _irnd(a: Any, s: Any, axes: Any, norm: Any, op: str) -> Node:
    _check_norm(norm, op)
    x = _node(a, op)
    s, axes = _cook(x, s, axes, op, invreal=True)
    if not axes:
        raise ShapeError(f"np.fft.{op}: needs at least one axis to transform")
    for n, ax in zip(s[:-1], axes[:-1]):
        x = _c2c(x, n, ax, norm, False, op)
    return _c2r(x, s[-1], axes[-1], norm, op)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None,
          out: Any = None) -> Any:
    """np.fft.rfftn: rfft along the last axis listed, then fft along the others (last to first).

    Args, Returns and Raises as `fftn`, with `rfft`'s real input (a complex input raises DTypeError); the
    last transformed axis has s[-1]//2 + 1 points.
    """
    if not _traced(a):
        return _np.fft.rfftn(a, s, axes, norm, out)
    _check_out(out, "rfftn")
    return _rnd(a, s, axes, norm, "rfftn")


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None,
           out: Any = None) -> Any:
    """np.fft.irfftn: ifft along all but the last axis listed (first to last), then irfft along it.

    Args, Returns and Raises as `fftn`; s[-1] defaults to 2 * (m - 1) for the last axis' length m; the
    result is real (float32 for complex64 input).
    """
    if not _traced(a):
        return _np.fft.irfftn(a, s, axes, norm, out)
    _check_out(out, "irfftn")
    return _irnd(a, s, axes, norm, "irfftn")


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None,
          out: Any = None) -> Any:
    """np.fft.rfft2: `rfftn` over the last two axes by default."""
    if not _traced(a):
        return _np.fft.rfft2(a, s, axes, norm, out)
    _check_out(out, "rfft2")
    return _rnd(a, s, axes, norm, "rfft2")


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None,
           out: Any = None) -> Any:
    """np.fft.irfft2: `irfftn` over the last two axes by default."""
    if not _traced(a):
        return _np.fft.irfft2(a, s, axes, norm, out)
    _check_out(out, "irfft2")
    return _irnd(a, s, axes, norm, "irfft2")


# ----- shifts and frequencies -----


def _shift(x: Any, axes: Any, sign: int, op: str) -> Any:
    x = L.asnode(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (numbers.Integral, _np.integer)):
        axes = (axes,)
    axes = tuple(normalize_axes(int(a), x.ndim, op=f"np.fft.{op}")[0] for a in axes)
    if not axes:
        return x
    return roll(x, [sign * (x.shape[a] // 2) for a in axes], axes)


def fftshift(x: Any, axes: Any = None) -> Any:
    """np.fft.fftshift: the zero-frequency term moved to the centre (a roll by n//2 along each of `axes`,
    default all); any dtype, shape kept. Raises ShapeError for an axis out of range."""
    if not _traced(x):
        return _np.fft.fftshift(x, axes)
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x: Any, axes: Any = None) -> Any:
    """np.fft.ifftshift: the inverse of fftshift (a roll by -(n//2)); any dtype, shape kept."""
    if not _traced(x):
        return _np.fft.ifftshift(x, axes)
    return _shift(x, axes, -1, "ifftshift")


def _freq_n(n: Any, op: str) -> int:
    if isinstance(n, Node) or isinstance(n, bool) or not isinstance(n, (numbers.Integral, _np.integer)):
        raise ShapeError(f"np.fft.{op}: n must be a static integer (the number of points), got {n!r}")
    return int(n)


def fftfreq(n: int, d: Any = 1.0, device: Any = None) -> Any:
    """np.fft.fftfreq: the sample frequencies [0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (n * d) (float64).

    `n` is static; a traced spacing `d` gives a traced result (NumPy's formula, in graph arithmetic).
    numpy.fft.fftfreq itself is not dispatched by NumPy's protocol, but computes the same with a traced d.
    """
    n = _freq_n(n, "fftfreq")
    if not _traced(d):
        return _np.fft.fftfreq(n, d, device=device)
    k = _np.empty(n, int)
    m = (n - 1) // 2 + 1
    k[:m] = _np.arange(0, m, dtype=int)
    k[m:] = _np.arange(-(n // 2), 0, dtype=int)
    return L.mul(k, L.div(1.0, L.mul(n, d)))


def rfftfreq(n: int, d: Any = 1.0, device: Any = None) -> Any:
    """np.fft.rfftfreq: the non-negative sample frequencies [0, 1, ..., n//2] / (n * d) of rfft (float64)."""
    n = _freq_n(n, "rfftfreq")
    if not _traced(d):
        return _np.fft.rfftfreq(n, d, device=device)
    return L.mul(_np.arange(0, n // 2 + 1, dtype=int), L.div(1.0, L.mul(n, d)))


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {getattr(_np.fft, _name): globals()[_name] for _name in __all__ if _name not in ("fftfreq", "rfftfreq")}
