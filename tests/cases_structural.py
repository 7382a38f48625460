"""Op-table rows for the structural primitives of issue 17 (symgraph/ops/scan.py: cumsum, cumprod)."""

from __future__ import annotations

import numpy as np

from symgraph import lax as L

from opcase import OpCase, real

CASES = [
    OpCase("cumsum", lambda x, axis: L.bind("cumsum", x, axis=axis),
           lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype),
           [(((2, 3, 5),), {"axis": 1}), (((2, 3, 5),), {"axis": 0}), (((2, 3, 5),), {"axis": 2}),
            (((1,),), {"axis": 0}), (((4, 1),), {"axis": 1}), (((0, 3),), {"axis": 0})], (real,)),
    OpCase("cumprod", lambda x, axis: L.bind("cumprod", x, axis=axis),
           lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype),
           [(((2, 3, 5),), {"axis": 1}), (((2, 3, 5),), {"axis": 0}), (((2, 3, 5),), {"axis": 2}),
            (((1,),), {"axis": 0}), (((4, 1),), {"axis": 1}), (((0, 3),), {"axis": 0})], (real,)),
]
