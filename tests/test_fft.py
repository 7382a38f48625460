"""FFT: the primitives (symgraph/ops/fourier.py) and np.fft on traced values (docs/fft.md)."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph import lax as L


@pytest.mark.parametrize("op", ["fft_c2c", "fft_r2c", "fft_c2r"])
def test_llvm_backend_refuses_the_primitives_and_names_numpy(op):
    pytest.importorskip("llvmlite")
    x = np.linspace(0.0, 1.0, 8)
    fns = {"fft_c2c": lambda x: L.bind("real", L.bind("fft_c2c", L.cast(x, np.complex128), inverse=False)),
           "fft_r2c": lambda x: L.bind("imag", L.bind("fft_r2c", x)),
           "fft_c2r": lambda x: L.bind("fft_c2r", L.cast(x[:5], np.complex128), n=8)}
    with pytest.raises(sg.UnsupportedOpError, match="backend='numpy'"):
        sg.compile(fns[op])(x)
    assert np.asarray(sg.compile(fns[op], backend="numpy")(x)).shape == ((5,) if op == "fft_r2c" else (8,))
