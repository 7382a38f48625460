"""Op-table rows for the special-function primitives (symgraph/ops/special.py)."""

from __future__ import annotations

import math

import numpy as np

from opcase import real, unary_case

_erfc64 = np.vectorize(lambda v: math.fsum([1.0, -math.erf(v)]) if v < 0.5 else math.erfc(v), otypes=[np.float64])


def _erfc_ref(x):
    """erfc from math.erf below 0.5 (1 - erf is exact enough there) and math.erfc above."""
    return _erfc64(x.astype(np.float64)).astype(x.dtype) if x.size else x.copy()


CASES = [
    unary_case("erfc", real, _erfc_ref),
]
