"""Op-table rows for the Fourier primitives (symgraph/ops/fourier.py): fft_c2c, fft_r2c, fft_c2r.

Odd and even lengths (the Hermitian bookkeeping of r2c/c2r differs at the Nyquist term), batched and
unbatched; the complex domains map the row's float dtype to the complex one of its width, so the table
checks complex64/complex128 values against numpy.fft and the derivatives under JAX's convention.
"""

from __future__ import annotations

import numpy as np

from opcase import OpCase, cplx, real

from symgraph import lax as L

_SHAPES = [(((2, 5),), {}), (((6,),), {}), (((3, 1, 4),), {})]

CASES = [
    OpCase("fft_c2c", lambda x: L.bind("fft_c2c", x, inverse=False), np.fft.fft, _SHAPES, (cplx,), grad_variants=2,
           name="forward"),
    OpCase("fft_c2c", lambda x: L.bind("fft_c2c", x, inverse=True), lambda x: np.fft.ifft(x, norm="forward"),
           _SHAPES, (cplx,), grad_variants=2, name="inverse"),
    OpCase("fft_r2c", lambda x: L.bind("fft_r2c", x), np.fft.rfft, _SHAPES, (real,), grad_variants=3),
    OpCase("fft_c2r", lambda x, n: L.bind("fft_c2r", x, n=n), lambda x, n: np.fft.irfft(x, n, norm="forward"),
           [(((2, 3),), {"n": 5}), (((4,),), {"n": 6}), (((3, 1, 2),), {"n": 2}), (((1,),), {"n": 1})], (cplx,),
           grad_variants=4),
]
