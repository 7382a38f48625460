"""`symgraph.numpy.linalg`: the names of `np.linalg` that trace, as a module (as `symgraph.numpy.fft` is).

``import symgraph.numpy.linalg as sla`` and ``symgraph.numpy.linalg.solve`` both work; plain
``np.linalg.solve`` on traced values reaches the same functions through NumPy's protocols. The
functions live in the modules of their concern: `factorizations` (solve, inv, det, slogdet, cholesky,
tensorinv, tensorsolve), `decompositions` (eig, eigh, svd, qr and what is built on them) and
`linear_algebra` (norms, NumPy 2's array-API spellings).
"""

from __future__ import annotations

from ..errors import LinAlgError
from .decompositions import (cond, eig, eigh, eigvals, eigvalsh, lstsq, matrix_power, matrix_rank, multi_dot, pinv, qr,
                             svd, svdvals)
from .factorizations import cholesky, det, inv, slogdet, solve, tensorinv, tensorsolve
from .linear_algebra import LINALG_API, matrix_norm, norm, vector_norm

outer = LINALG_API["outer"]
cross = LINALG_API["cross"]
trace = LINALG_API["trace"]
diagonal = LINALG_API["diagonal"]
tensordot = LINALG_API["tensordot"]
vecdot = LINALG_API["vecdot"]
matmul = LINALG_API["matmul"]
matrix_transpose = LINALG_API["matrix_transpose"]

__all__ = ["LinAlgError", "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
           "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm",
           "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
           "vecdot", "vector_norm"]
