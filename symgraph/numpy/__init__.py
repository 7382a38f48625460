"""The `symgraph.numpy` namespace: NumPy's names on traced values, plus composites.

Every function accepts graph nodes, NumPy arrays and Python numbers; with no
traced argument it computes eagerly with NumPy. Plain NumPy calls on traced
values land here too (through `__array_ufunc__` / `__array_function__`).

Composites for neural networks (softmax, log_softmax, logsumexp, gelu,
layer_norm, cross_entropy, dropout, ...) are built from primitives; each is
written to be numerically stable in value and gradient.

The package is split by concern, and this module re-exports every name:
`arithmetic`, `elementary` (exp, log, trigonometric, hyperbolic, ...) and
`logic` (comparisons, logical and bool-mask bitwise ops, where) are the
elementwise functions; `reductions`, `layout` (reshape, transpose, joining,
take), `creation` (asarray, zeros_like, random values), `linear_algebra`
(matmul, einsum, norm, `linalg`), `nn` (composites), `base` (dtype and
constant names); `tables` holds `UFUNCS` and `FUNCTIONS`, through which
tracing dispatches NumPy's protocols. A new NumPy function goes in the module
of its concern, here, and in a table.
"""

from __future__ import annotations

from .arithmetic import (  # noqa: F401
    abs, absolute, add, clip, divide, floor, floor_divide, fmax, fmin, fmod, maximum, minimum, mod, multiply,
    negative, positive, power, reciprocal, remainder, sign, square, stop_gradient, subtract, true_divide,
)
from .base import bool_, e, float32, float64, inf, int32, int64, nan, newaxis, pi  # noqa: F401
from .creation import (  # noqa: F401
    arange, array, asarray, astype, eye, full, full_like, linspace, ones, ones_like, random_uniform, zeros,
    zeros_like,
)
from .elementary import (  # noqa: F401
    arcsinh, cos, cosh, erf, exp, exp2, expm1, log, log10, log1p, log2, logaddexp, sigmoid, sin, sinh, sqrt,
    tan, tanh,
)
from .layout import (  # noqa: F401
    broadcast_to, concatenate, expand_dims, flatten, hstack, moveaxis, ravel, reshape, squeeze, stack, swapaxes,
    take, transpose, vstack,
)
from .linear_algebra import dot, einsum, inner, linalg, matmul, norm, outer, tensordot, vdot  # noqa: F401
from .logic import (  # noqa: F401
    bitwise_and, bitwise_or, bitwise_xor, equal, greater, greater_equal, invert, isnan, left_shift, less,
    less_equal, logical_and, logical_not, logical_or, not_equal, right_shift, where,
)
from .nn import (  # noqa: F401
    cross_entropy, dropout, embedding, gelu, layer_norm, log_softmax, logsumexp, one_hot, relu, softmax,
    softplus, take_along_last,
)
from .reductions import amax, amin, argmax, argmin, max, mean, min, prod, std, sum, var  # noqa: F401
from .tables import FUNCTIONS, UFUNCS  # noqa: F401
