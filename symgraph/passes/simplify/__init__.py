"""Simplification: rule tables run to a fixed point, plus polynomial canonicalization.

The whole pass is in `rules` (moved from symgraph/passes/simplify.py) until it
is split by concern; this package re-exports its public names.
"""

from .rules import (
    FOLD_LIMIT,
    GENERIC_RULES,
    PIPELINE,
    RULES,
    SimplifyOptions,
    polynomial_pass,
    rewrite_pass,
    rule,
    simplify,
)

__all__ = [
    "FOLD_LIMIT",
    "GENERIC_RULES",
    "PIPELINE",
    "RULES",
    "SimplifyOptions",
    "polynomial_pass",
    "rewrite_pass",
    "rule",
    "simplify",
]
