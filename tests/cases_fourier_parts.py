"""Op-table rows for fft_parts (symgraph/ops/fourier_parts.py), the FFT primitives on split parts that compiled code
runs natively; references are numpy.fft's (unnormalized, results packed (2, ...))."""

import numpy as np

from codegen.cpu.fft import node_table
from opcase import OpCase, real
from symgraph.ops.fourier_parts import fft_parts


def _table(kind, n, x):
    return node_table(kind, n, np.dtype(x.dtype))


def _pack(y, d):
    return np.stack([y.real, y.imag]).astype(d)


def _c2c(re, im, inverse):
    n = re.shape[-1]
    return fft_parts(re, im, table=_table("c2c", n, re), kind="c2c", n=n, inverse=inverse)


def _c2c_ref(re, im, inverse):
    z = re.astype(np.float64) + 1j * im
    return _pack(np.fft.ifft(z, norm="forward") if inverse else np.fft.fft(z), re.dtype)


def _r2c(x):
    n = x.shape[-1]
    return fft_parts(x, table=_table("r2c", n, x), kind="r2c", n=n)


def _c2r(re, im, n):
    return fft_parts(re, im, table=_table("c2r", n, re), kind="c2r", n=n)


def _c2r_ref(re, im, n):
    return np.fft.irfft(re.astype(np.float64) + 1j * im, n, norm="forward").astype(re.dtype)


CASES = [
    OpCase("fft_parts", _c2c, _c2c_ref, [(((2, 8), (2, 8)), {"inverse": False}), (((3,), (3,)), {"inverse": True})],
           (real, real), name="c2c", ip_rtol=1e-8),
    OpCase("fft_parts", _r2c, lambda x: _pack(np.fft.rfft(x.astype(np.float64)), x.dtype),
           [(((2, 6),), {}), (((5,),), {})], (real,), name="r2c", ip_rtol=1e-8),
    OpCase("fft_parts", _c2r, _c2r_ref, [(((2, 4), (2, 4)), {"n": 6}), (((3,), (3,)), {"n": 5})], (real, real),
           name="c2r", ip_rtol=1e-8),
]
