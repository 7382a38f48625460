"""Op-table rows for the ufunc primitives of issue 17 (symgraph/ops/elementwise.py, after "issue 17").

The inverse trigonometric and hyperbolic functions, cbrt, log2/log10, the
binary hypot/arctan2/copysign, the zero-derivative rounding ops and signbit,
and the integer floor division and remainder (int_floordiv, int_mod).
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


def _int_dtype(dtype):
    """The row's integer dtype (the batching check asks for float64: int64 then)."""
    return np.dtype(np.int64) if np.dtype(dtype).kind == "f" else np.dtype(dtype)


def dividends(rng, shape, dtype):
    """Integers of both signs (unsigned: small ones), with the dtype's extremes (MIN // -1 wraps)."""
    d = _int_dtype(dtype)
    info = np.iinfo(d)
    x = rng.integers(max(info.min, -20), 21, shape).astype(d)
    ext = rng.choice(np.array([info.min, info.max], d), shape)
    return np.where(rng.random(shape) < 0.15, ext, x).astype(d)


def divisors(rng, shape, dtype):
    """Small integers of both signs, with zeros (NumPy's 0 result) and -1 (the MIN // -1 case)."""
    d = _int_dtype(dtype)
    return rng.integers(-4 if d.kind == "i" else 0, 5, shape).astype(d)


def _np_quiet(fn):
    def ref(a, b):
        with np.errstate(all="ignore"):  # NumPy warns for b = 0 (and MIN // -1) and gives 0 (MIN)
            return fn(a, b)

    return ref


INT_DTYPES = (np.int8, np.int32, np.int64, np.uint8, np.uint64)

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
    binary_case("int_floordiv", (dividends, divisors), _np_quiet(np.floor_divide), order=0, dtypes=INT_DTYPES),
    binary_case("int_mod", (dividends, divisors), _np_quiet(np.remainder), order=0, dtypes=INT_DTYPES),
]
