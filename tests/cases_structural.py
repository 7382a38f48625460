"""Op-table rows for the structural primitives of issue 17 (symgraph/ops/scan.py: cumsum, cumprod; argsort,
argpartition)."""

from __future__ import annotations

import numpy as np

from symgraph import lax as L
from symgraph.numpy import stop_gradient
from symgraph.ops.structural import take_last

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
    # argpartition's arrangement inside the parts is unspecified (the evaluator's is NumPy's introselect's,
    # compiled code's the radix selection's): the row's values at the kth positions are determined, the
    # sorted values there (tests/test_structural.py checks whole partitions)
    OpCase("argpartition", lambda x, kth: take_last(stop_gradient(x), L.bind("argpartition", x, kth=kth))[..., list(kth)],
           lambda x, kth: np.sort(x, axis=-1)[..., list(kth)],
           [(((2, 3, 5),), {"kth": (0, 2)}), (((40,),), {"kth": (7,)}), (((1,),), {"kth": (0,)}),
            (((4, 3),), {"kth": (2,)}), (((300,),), {"kth": (0, 150, 299)})], (_ties_nans,), order=0),
    OpCase("sort", lambda x: L.bind("sort", x), lambda x: np.sort(x, axis=-1, kind="stable"),
           [(((2, 3, 5),), {}), (((40,),), {}), (((1,),), {}), (((4, 1),), {}), (((3, 0),), {})], (real,)),
]
