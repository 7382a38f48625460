"""Complex parts and queries: conj/conjugate, real, imag, angle, iscomplexobj, isrealobj, iscomplex, isreal.

complex64 and complex128 values trace through the arithmetic and elementary functions
(docs/complex.md lists which); this module holds the functions that exist only for complex
numbers. For a real argument they are NumPy's: conj and real return the value, imag zeros,
angle arctan2(0, x). Derivatives follow JAX's convention (docs/complex.md).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..ir import Node

__all__ = ["angle", "conj", "conjugate", "imag", "iscomplex", "iscomplexobj", "isreal", "isrealobj", "real"]


def _dtype(x: Any) -> _np.dtype:
    if isinstance(x, (Node, _np.ndarray, _np.generic)):
        return x.dtype
    return _np.asarray(x).dtype


def _node(x: Any) -> Any:
    return x if isinstance(x, Node) else _np.asarray(x)


def conj(x: Any) -> Any:
    """Complex conjugate x - iy, elementwise (the value itself for real x).

    Shapes and dtype are x's. Derivative: conj of the cotangent (and of the tangent): conj is R-linear.
    """
    if _dtype(x).kind != "c":
        return x
    return L.bind("conj", _node(x))


conjugate = conj


def real(val: Any) -> Any:
    """The real part: float32 for complex64, float64 for complex128; a real array itself."""
    if _dtype(val).kind != "c":
        return val
    return L.bind("real", _node(val))


def imag(val: Any) -> Any:
    """The imaginary part: float32 for complex64, float64 for complex128; zeros for a real array.

    Derivative under JAX's convention: a real cotangent g becomes -1j * g (docs/complex.md).
    """
    if _dtype(val).kind != "c":
        if isinstance(val, Node):
            return L.zeros_like(val)
        return _np.zeros_like(_np.asarray(val))
    return L.bind("imag", _node(val))


def angle(z: Any, deg: bool = False) -> Any:
    """The argument of z in (-pi, pi], as NumPy: arctan2(imag(z), real(z)) (bit for bit), in degrees with deg=True.

    A real result (float32 for complex64); integer input gives float64. Derivative: arctan2's, through
    real and imag; 0 at z = 0 (arctan2's convention).
    """
    d = _dtype(z)
    if d.kind == "c":
        zr, zi = real(z), imag(z)
    else:
        zr = L.to_float(_node(z))
        zi = L.zeros_like(zr) if isinstance(zr, Node) else _np.zeros_like(zr)
    a = L.binary("arctan2", zi, zr, float_op=True)
    if deg:
        a = L.binary("mul", a, 180.0 / _np.pi)
    return a


def iscomplexobj(x: Any) -> bool:
    """Whether x has a complex dtype (a Python bool: dtypes are known when tracing)."""
    return _dtype(x).kind == "c"


def isrealobj(x: Any) -> bool:
    """Whether x has no complex dtype (a Python bool)."""
    return not iscomplexobj(x)


def iscomplex(x: Any) -> Any:
    """Elementwise: a nonzero imaginary part (bool); all False for real x."""
    if _dtype(x).kind != "c":
        if isinstance(x, Node):
            return L.cast(L.zeros_like(x), bool)
        return _np.zeros(_np.shape(x), bool)
    return L.binary("ne", imag(x), 0.0)


def isreal(x: Any) -> Any:
    """Elementwise: a zero imaginary part (bool); all True for real x."""
    if _dtype(x).kind != "c":
        if isinstance(x, Node):
            return L.cast(L.full_like(x, 1), bool)
        return _np.ones(_np.shape(x), bool)
    return L.binary("eq", imag(x), 0.0)


# ----- what is audited for complex values -----
# NumPy's entry points (ufuncs by name, functions by identity, tracer methods by name) whose symgraph rules are
# checked on complex operands (values against NumPy, derivatives under JAX's convention: tests/test_complex.py).
# Tracing refuses every other NumPy function on a complex operand with an UnsupportedOpError, instead of
# running a rule written for real numbers (np.var, np.sinh, np.linalg.norm would otherwise be silently wrong).

COMPLEX_UFUNCS = frozenset({
    "add", "subtract", "multiply", "divide", "true_divide", "negative", "positive", "power", "square", "conjugate",
    "absolute", "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "equal", "not_equal", "isnan", "matmul",
    "vecdot", "matvec", "vecmat", "log10", "log2", "exp2", "expm1", "log1p", "sinh", "cosh", "reciprocal",
    "isfinite", "isinf", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "sign",
})

COMPLEX_FUNCTIONS = frozenset({
    _np.real, _np.imag, _np.angle, _np.iscomplexobj, _np.isrealobj, _np.iscomplex, _np.isreal,
    _np.sum, _np.mean, _np.prod, _np.dot, _np.vdot, _np.inner, _np.outer, _np.tensordot, _np.kron, _np.einsum,
    _np.trace, _np.zeros_like, _np.ones_like, _np.full_like, _np.stack, _np.concatenate, _np.reshape,
    _np.transpose, _np.swapaxes, _np.moveaxis, _np.squeeze, _np.expand_dims, _np.ravel, _np.where, _np.cumsum,
    _np.diag, _np.diagonal, _np.broadcast_to, _np.take, _np.copy, _np.shape, _np.ndim, _np.size, _np.abs,
    _np.square, _np.var, _np.std, _np.linalg.norm, _np.sinc,
    _np.max, _np.min, _np.amax, _np.amin, _np.argmax, _np.argmin,  # NumPy's lexicographic order (complex_order)
    # structural and windowed functions (linear maps without conjugation: their rules hold as they are;
    # tests/test_complex_structural.py): correlate conjugates v and nan_to_num works on each part, as NumPy's
    _np.triu, _np.tril, _np.flip, _np.fliplr, _np.flipud, _np.roll, _np.rollaxis, _np.rot90, _np.tile, _np.repeat,
    _np.pad, _np.hstack, _np.vstack, _np.column_stack, _np.split, _np.array_split, _np.hsplit, _np.vsplit,
    _np.atleast_1d, _np.atleast_2d, _np.atleast_3d, _np.append, _np.diagflat, _np.take_along_axis, _np.cross,
    _np.cumprod, _np.diff, _np.ediff1d, _np.trapezoid, _np.convolve, _np.correlate, _np.linspace, _np.select,
    _np.nan_to_num, _np.delete, _np.insert, _np.compress, _np.resize,
    *(getattr(_np, _n) for _n in ("permute_dims", "concat", "matrix_transpose", "unstack", "cumulative_sum",
                                    "cumulative_prod")
      if hasattr(_np, _n)),
    # np.linalg (docs/linalg.md, "Complex matrices")
    _np.linalg.solve, _np.linalg.inv, _np.linalg.det, _np.linalg.slogdet, _np.linalg.cholesky, _np.linalg.tensorinv,
    _np.linalg.tensorsolve, _np.linalg.eigh, _np.linalg.eigvalsh, _np.linalg.svd, _np.linalg.eig,
    _np.linalg.eigvals, _np.linalg.matrix_rank, _np.linalg.cond, _np.linalg.pinv, _np.linalg.lstsq,
    _np.linalg.matrix_power, _np.linalg.multi_dot, _np.linalg.qr,
    *(getattr(_np.linalg, _n) for _n in ("outer", "cross", "trace", "diagonal", "tensordot", "vecdot", "matmul",
                                          "matrix_transpose") if hasattr(_np.linalg, _n)), *((_np.linalg.vector_norm, _np.linalg.matrix_norm) if hasattr(_np.linalg, "vector_norm") else ()),
    *((_np.linalg.svdvals,) if hasattr(_np.linalg, "svdvals") else ()),
    # np.fft (symgraph.numpy.fft): every transform and shift takes complex values
    *(getattr(_np.fft, _n) for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "fftn",
                                      "ifftn", "rfft2", "irfft2", "rfftn", "irfftn", "fftshift", "ifftshift")),
})

COMPLEX_METHODS = frozenset({
    "sum", "mean", "prod", "take", "squeeze", "ravel", "flatten", "swapaxes", "diagonal", "repeat", "trace",
    "cumsum", "var", "std", "cumprod", "compress", "max", "min", "argmax", "argmin",
})


def any_complex(args: Any) -> bool:
    """Whether an argument (or an element of a list/tuple argument) has a complex dtype."""
    for a in args:
        if isinstance(a, (Node, _np.ndarray, _np.generic)):
            if a.dtype.kind == "c":
                return True
        elif isinstance(a, complex):
            return True
        elif isinstance(a, (list, tuple)) and any_complex(a):
            return True
    return False


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {"conjugate": conj}

FUNCTIONS = {
    _np.real: real, _np.imag: imag, _np.angle: angle, _np.iscomplexobj: iscomplexobj, _np.isrealobj: isrealobj,
    _np.iscomplex: iscomplex, _np.isreal: isreal,
}
