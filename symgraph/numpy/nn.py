"""Neural-network composites built from primitives: softmax, logsumexp, gelu, layer_norm, cross_entropy, dropout, ...

Each is written to be numerically stable in value and gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import ShapeError
from ..ops.core import normalize_axes
from .arithmetic import add, divide, maximum, multiply, negative, reciprocal, stop_gradient, subtract
from .base import _ndim, _shape
from .creation import random_uniform
from .elementary import erf, exp, log, logaddexp, sqrt, tanh
from .layout import expand_dims, reshape, take
from .logic import equal, greater_equal, isnan, where
from .reductions import max, mean, sum

__all__ = [
    "cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "log_softmax", "logsumexp", "one_hot", "relu",
    "softmax", "softplus", "take_along_last",
]


def relu(x: Any) -> Any:
    """maximum(x, 0); derivative 0 at 0."""
    return maximum(x, 0.0)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """log(sum(exp(x))) over axis, stable: max-shifted, the shift's gradient stopped.

    logsumexp([1000, 1000]) = 1000 + log 2, with gradient [0.5, 0.5].
    """
    x = L.to_float(x)
    m = stop_gradient(max(x, axis, keepdims=True))
    # guard infinite maxima (all -inf rows) so the shift does not create NaN
    m = where(isnan(subtract(m, m)), 0.0, m)
    out = add(log(sum(exp(subtract(x, m)), axis, keepdims=True)), m)
    if not keepdims:
        axes = normalize_axes(axis, _ndim(x))
        out = reshape(out, tuple(d for i, d in enumerate(_shape(x)) if i not in axes))
    return out


def softplus(x: Any) -> Any:
    """log(1 + exp(x)) = logaddexp(x, 0), stable; derivative sigmoid(x) (1/2 at 0)."""
    return logaddexp(x, 0.0)


def softmax(x: Any, axis: int = -1) -> Any:
    """exp(x - logsumexp(x)) along axis; stable for large inputs."""
    x = L.to_float(x)
    m = stop_gradient(max(x, axis, keepdims=True))
    ex = exp(subtract(x, m))
    return divide(ex, sum(ex, axis, keepdims=True))


def log_softmax(x: Any, axis: int = -1) -> Any:
    """x - logsumexp(x) along axis; stable for large inputs."""
    return subtract(x, logsumexp(x, axis, keepdims=True))


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit: tanh approximation (default) or exact 0.5 x (1 + erf(x / sqrt 2))."""
    x = L.to_float(x)
    if approximate:
        c = math.sqrt(2.0 / math.pi)
        inner = multiply(add(x, multiply(0.044715, multiply(x, multiply(x, x)))), c)
        return multiply(multiply(0.5, x), add(1.0, tanh(inner)))
    return multiply(multiply(0.5, x), add(1.0, erf(multiply(x, 1.0 / math.sqrt(2.0)))))


def layer_norm(x: Any, gamma: Any = None, beta: Any = None, axis: int = -1, eps: float = 1e-5) -> Any:
    """(x - mean) / sqrt(var + eps) * gamma + beta along axis."""
    mu = mean(x, axis, keepdims=True)
    d = subtract(x, mu)
    v = mean(multiply(d, d), axis, keepdims=True)
    y = multiply(d, reciprocal(sqrt(add(v, eps))))
    if gamma is not None:
        y = multiply(y, gamma)
    if beta is not None:
        y = add(y, beta)
    return y


def one_hot(labels: Any, num_classes: int, dtype: Any = _np.float64) -> Any:
    """(..., num_classes) indicator of integer labels."""
    return L.cast(equal(expand_dims(labels, -1), _np.arange(num_classes)), dtype)


def take_along_last(x: Any, labels: Any) -> Any:
    """x[..., labels] per row: out[i] = x[i, labels[i]] for x of shape (n, C) and labels (n,)."""
    n, c = _shape(x)
    flat = reshape(x, (n * c,))
    idx = add(multiply(_np.arange(n, dtype=_np.int64), c), L.cast(labels, _np.int64))
    return take(flat, idx, axis=0)


def cross_entropy(logits: Any, labels: Any, reduction: str = "mean") -> Any:
    """Softmax cross-entropy of logits (..., C) with integer labels (...), via gather.

    Returns the mean (default), the sum, or per-example losses ("none", shape
    of labels).

    Raises:
        ShapeError: if labels' shape is not logits' shape without the last axis.
    """
    shp = _shape(logits)
    if len(shp) < 1 or tuple(_shape(labels)) != tuple(shp[:-1]):
        raise ShapeError(f"cross_entropy: labels of shape {tuple(_shape(labels))} do not match logits of shape "
                         f"{tuple(shp)} (expected {tuple(shp[:-1])})")
    lp = log_softmax(logits, axis=-1)
    picked = take_along_last(reshape(lp, (-1, shp[-1])), reshape(labels, (-1,)))
    losses = reshape(negative(picked), tuple(shp[:-1]))
    if reduction == "mean":
        return mean(losses)
    if reduction == "sum":
        return sum(losses)
    return losses


def dropout(x: Any, rate: float, key: Any, salt: int = 0) -> Any:
    """Inverted dropout: zero each entry with probability `rate`, scale the rest by 1/(1-rate).

    The mask comes from a counter-based generator (`random_uniform`) keyed by an
    integer `key` (vary it per step) and `salt` (vary it per call site), so the
    backward sweep regenerates the mask instead of storing it.
    """
    if rate <= 0.0:
        return x
    u = random_uniform(key, _shape(x), salt=salt, dtype=x.dtype)
    keep = greater_equal(u, rate)
    return where(keep, divide(x, 1.0 - rate), 0.0)


def embedding(table: Any, ids: Any) -> Any:
    """Rows of table (V, D) at integer ids (...,): gather forward, scatter-add backward."""
    return take(table, ids, axis=0)
