"""`symgraph.scipy`: SciPy functions on traced values, as `jax.scipy` (special, stats, signal, linalg).

SciPy's ufuncs (`scipy.special.gammaln`, ...) trace when plain user code
calls them; the functions here are for SciPy's Python-level functions that
convert their arguments with `np.asarray` before any protocol sees a tracer
(scipy.special.logsumexp, scipy.stats.norm.logpdf, scipy.signal.convolve).
Nothing in this package imports SciPy. See docs/scipy.md.
"""

from . import linalg, quantiles, signal, special, stats  # noqa: F401

__all__ = ["special", "stats", "signal", "linalg", "quantiles"]
