"""Op-table rows for the structural primitives of issue 17 (symgraph/ops/scan.py: cumsum, cumprod; argsort)."""

from __future__ import annotations

import numpy as np

from symgraph import lax as L

from opcase import OpCase, real, with_nans


def _ties_nans(rng, shape, dtype):
    """Few distinct values (ties), NaN, -0.0 and infinities: where a sort's order is decided."""
    x = rng.choice(np.array([-np.inf, -1.5, -0.0, 0.0, 0.5, 2.0, np.inf, np.nan]), shape).astype(dtype)
    return np.where(rng.random(shape) < 0.3, with_nans(rng, shape, dtype), x)

CASES = [
    OpCase("cumsum", lambda x, axis: L.bind("cumsum", x, axis=axis),
           lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype),
           [(((2, 3, 5),), {"axis": 1}), (((2, 3, 5),), {"axis": 0}), (((2, 3, 5),), {"axis": 2}),
            (((1,),), {"axis": 0}), (((4, 1),), {"axis": 1}), (((0, 3),), {"axis": 0})], (real,)),
    OpCase("cumprod", lambda x, axis: L.bind("cumprod", x, axis=axis),
           lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype),
           [(((2, 3, 5),), {"axis": 1}), (((2, 3, 5),), {"axis": 0}), (((2, 3, 5),), {"axis": 2}),
            (((1,),), {"axis": 0}), (((4, 1),), {"axis": 1}), (((0, 3),), {"axis": 0})], (real,)),
    OpCase("argsort", lambda x: L.bind("argsort", x), lambda x: np.argsort(x, axis=-1, kind="stable"),
           [(((2, 3, 5),), {}), (((40,),), {}), (((1,),), {}), (((4, 1),), {}), (((3, 0),), {}), (((0, 3),), {})],
           (_ties_nans,), order=0),
    OpCase("sort", lambda x: L.bind("sort", x), lambda x: np.sort(x, axis=-1, kind="stable"),
           [(((2, 3, 5),), {}), (((40,),), {}), (((1,),), {}), (((4, 1),), {}), (((3, 0),), {})], (real,)),
]
