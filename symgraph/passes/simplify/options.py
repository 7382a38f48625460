"""What a `simplify` call may do: the option switches and the size limits of its stages."""

from __future__ import annotations

from dataclasses import dataclass

FOLD_LIMIT = 1 << 16  # elements: larger constant results stay computed at run time
MAX_ITERATIONS = 24  # pipeline rounds before giving up on a fixed point
MAX_LOCAL_STEPS = 32  # rule applications at one node per round
MAX_POLY_TERMS = 64  # a region whose polynomial has more monomials is left alone
MAX_POLY_DEGREE = 48  # ... or a higher total degree
#: sum over a last axis of at most this many elements becomes adds of its slices (`sum_of_few`) ...
SUM_UNROLL_MAX = 4
#: ... when the sum has at least this many elements (small graphs keep their reductions)
SUM_UNROLL_MIN_SIZE = 1 << 14
MAX_POW = 8  # pow(x, k) for integer 2 <= k <= MAX_POW joins a polynomial region


@dataclass(frozen=True)
class SimplifyOptions:
    """Which classes of rewrites `simplify` may apply.

    Attributes:
        reassociate: allow rewrites that change rounding only (see the
            `symgraph.passes.simplify` docstring); required for the polynomial stage.
        assume_finite: assume no NaN/inf and ignore the sign of zero
            (enables x*0 -> 0, x-x -> 0, ...).
        fold_limit: largest constant result (elements) that folding stores.
    """

    reassociate: bool = True
    assume_finite: bool = False
    fold_limit: int = FOLD_LIMIT
