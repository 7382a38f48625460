"""The NumPy name tables that tracing dispatches NumPy's protocols through.

`UFUNCS` maps a ufunc's name to its function here (`__array_ufunc__`);
`FUNCTIONS` maps a NumPy function to its function here (`__array_function__`).
A NumPy name added to the namespace is added to one of these tables.
"""

from __future__ import annotations

import numpy as _np

from .arithmetic import (
    abs, add, clip, divide, floor, floor_divide, fmax, fmin, fmod, maximum, minimum, multiply, negative,
    positive, power, reciprocal, remainder, sign, square, subtract,
)
from .base import _ndim, _shape
from .creation import asarray, full_like, ones_like, zeros_like
from .elementary import (
    arcsinh, cos, cosh, exp, exp2, expm1, log, log10, log1p, log2, logaddexp, sin, sinh, sqrt, tan, tanh,
)
from .layout import (
    broadcast_to, concatenate, expand_dims, hstack, moveaxis, ravel, reshape, squeeze, stack, swapaxes, take,
    transpose, vstack,
)
from .linear_algebra import dot, einsum, inner, matmul, norm, outer, tensordot, vdot
from .logic import (
    bitwise_and, bitwise_or, bitwise_xor, equal, greater, greater_equal, invert, isnan, left_shift, less,
    less_equal, logical_and, logical_not, logical_or, not_equal, right_shift, where,
)
from .reductions import argmax, argmin, max, mean, min, prod, std, sum, var

UFUNCS = {
    "add": add, "subtract": subtract, "multiply": multiply, "divide": divide, "true_divide": divide,
    "floor_divide": floor_divide, "remainder": remainder, "fmod": fmod, "power": power, "negative": negative,
    "positive": positive, "absolute": abs, "sign": sign, "exp": exp, "log": log, "log1p": log1p,
    "expm1": expm1, "log2": log2, "log10": log10, "exp2": exp2, "sqrt": sqrt, "square": square,
    "reciprocal": reciprocal, "sin": sin, "cos": cos, "tan": tan, "tanh": tanh, "sinh": sinh, "cosh": cosh,
    "arcsinh": arcsinh,
    "maximum": maximum, "minimum": minimum, "fmax": fmax, "fmin": fmin, "less": less,
    "less_equal": less_equal, "greater": greater, "greater_equal": greater_equal, "equal": equal,
    "not_equal": not_equal, "logical_and": logical_and, "logical_or": logical_or, "logical_not": logical_not,
    "isnan": isnan, "floor": floor, "matmul": matmul, "logaddexp": logaddexp,
    "bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor, "invert": invert,
    "left_shift": left_shift, "right_shift": right_shift,
}


FUNCTIONS = {
    _np.sum: sum, _np.mean: mean, _np.max: max, _np.min: min, _np.amax: max, _np.amin: min, _np.prod: prod,
    _np.var: var, _np.std: std, _np.argmax: argmax, _np.argmin: argmin, _np.where: where, _np.clip: clip,
    _np.reshape: reshape, _np.ravel: ravel, _np.transpose: transpose, _np.swapaxes: swapaxes,
    _np.moveaxis: moveaxis, _np.broadcast_to: broadcast_to, _np.expand_dims: expand_dims, _np.squeeze: squeeze,
    _np.concatenate: concatenate, _np.stack: stack, _np.hstack: hstack, _np.vstack: vstack, _np.take: take,
    _np.matmul: matmul, _np.dot: dot, _np.vdot: vdot, _np.inner: inner, _np.outer: outer, _np.einsum: einsum,
    _np.tensordot: tensordot, _np.zeros_like: zeros_like, _np.ones_like: ones_like, _np.full_like: full_like,
    _np.linalg.norm: norm, _np.shape: _shape, _np.ndim: _ndim, _np.size: lambda x, axis=None: int(_np.prod(_shape(x))) if axis is None else _shape(x)[axis],
    _np.abs: abs, _np.square: square, _np.exp: exp, _np.log: log, _np.sqrt: sqrt, _np.tanh: tanh,
    _np.maximum: maximum, _np.minimum: minimum, _np.asarray: asarray, _np.array: asarray,
}
