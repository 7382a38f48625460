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
(matmul, einsum, norm), `linalg` (numpy.linalg's names, as the module `symgraph.numpy.linalg`), `decompositions` (eigh, svd, qr and what is built on them), `fft` (numpy.fft, as the module `symgraph.numpy.fft`), `nn` (composites), `base` (dtype and
constant names); `tables` holds `UFUNCS` and `FUNCTIONS`, through which
tracing dispatches NumPy's protocols, merging the `UFUNCS` and `FUNCTIONS`
each module declares at its end. A new NumPy function goes in the module of
its concern: its definition, its name in that module's `__all__` and its
entry in that module's tables.
"""

from __future__ import annotations

from .arithmetic import *  # noqa: F401,F403  (each module's __all__ is its public names)
from .base import *  # noqa: F401,F403
from .complex_numbers import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .decompositions import *  # noqa: F401,F403
from .editing import *  # noqa: F401,F403
from .elementary import *  # noqa: F401,F403
from .layout import *  # noqa: F401,F403
from .linear_algebra import *  # noqa: F401,F403
from .logic import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .structural import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .statistics import *  # noqa: F401,F403
from .sampled import *  # noqa: F401,F403
from .along_axis import *  # noqa: F401,F403
from .windows import *  # noqa: F401,F403
from . import fft  # noqa: F401  (symgraph.numpy.fft mirrors numpy.fft: a module, not star-imported)
from . import linalg  # noqa: F401  (symgraph.numpy.linalg mirrors numpy.linalg, the same way)
from .tables import FUNCTIONS, UFUNCS  # noqa: F401
