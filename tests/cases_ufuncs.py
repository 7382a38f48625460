"""Op-table rows for the ufunc primitives of issue 17 (symgraph/ops/elementwise.py, after "issue 17").

The inverse trigonometric and hyperbolic functions, cbrt, log2/log10, the
binary hypot/arctan2/copysign, and the zero-derivative rounding ops and signbit.
Domains keep finite differences away from the kinks and domain edges (the
conventions there are tested in tests/test_ufuncs.py).
"""

from __future__ import annotations

import numpy as np

from opcase import binary_case, nonzero, pos, real, unary_case, unit


def above_one(rng, shape, dtype):
    return rng.uniform(1.2, 4.0, shape).astype(dtype)


def halves(rng, shape, dtype):
    """Half-integers and near-integers of both signs (ties for rint, signed zeros for ceil/trunc)."""
    return (rng.integers(-6, 7, shape) * 0.5 + rng.choice([0.0, 0.0, 1e-3, -1e-3], shape)).astype(dtype)


CASES = [
    unary_case("arcsin", unit, np.arcsin),
    unary_case("arccos", unit, np.arccos),
    unary_case("arctan", real, np.arctan),
    unary_case("arccosh", above_one, np.arccosh),
    unary_case("arctanh", unit, np.arctanh),
    unary_case("cbrt", nonzero, np.cbrt),
    unary_case("log2", pos, np.log2),
    unary_case("log10", pos, np.log10),
    unary_case("ceil", halves, np.ceil, order=0),
    unary_case("trunc", halves, np.trunc, order=0),
    unary_case("rint", halves, np.rint, order=0),
    unary_case("signbit", real, np.signbit, order=0),
    binary_case("hypot", (real, real), np.hypot),
    binary_case("arctan2", (nonzero, real), np.arctan2),
    binary_case("copysign", (nonzero, nonzero), np.copysign),
]
