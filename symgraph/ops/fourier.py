"""Discrete Fourier transforms as primitives: fft_c2c, fft_r2c, fft_c2r (last axis, batched, unnormalized).

Every op transforms along the LAST axis only and is batched over the leading
axes; none scales its result (the frontend, `symgraph.numpy.fft`, composes
axis moves, `n=` padding or truncation, `norm=` scaling, multi-axis passes,
hfft/ihfft, shifts and frequencies out of these three and existing ops):

- ``fft_c2c(x, inverse=False)``: complex (..., n) -> the same shape and dtype,
  y_k = sum_j x_j exp(-+2 pi i j k / n) (the sign + for ``inverse=True``;
  no 1/n factor).
- ``fft_r2c(x)``: real (..., n) -> complex (..., n//2 + 1), the first
  n//2 + 1 terms of the forward transform (numpy.fft.rfft, norm="backward").
- ``fft_c2r(h, n)``: complex (..., n//2 + 1) -> real (..., n), the unnormalized
  inverse of the Hermitian extension H (H_k = h_k for k <= n/2,
  H_{n-k} = conj(h_k)): numpy.fft.irfft(h, n, norm="forward"). The imaginary
  parts of h_0 and, for even n, of h_{n/2} are ignored (as NumPy does).

float32/complex64 stay single precision (NumPy 2's pocketfft computes in
single precision too); float64/complex128 double.

Derivatives, under JAX's convention for complex values (docs/complex.md: a
cotangent g of w is the functional dw -> Re(sum g dw), no conjugation), are
the transposes of these linear maps, written in graph ops so they
differentiate again:

- c2c is complex-linear with a symmetric matrix F (F_jk = exp(-2 pi i j k/n)),
  so its VJP is the same transform: ct_x = c2c(g, inverse) (holomorphic too).
- r2c is the first m = n//2 + 1 rows of F on a real x, so
  ct_x = Re(F^T [g; 0]) = c2r(conj(g) * w, n) with w_0 = 1, w_k = 1/2 for
  0 < k < n/2, and w_{n/2} = 1 for even n (c2r counts each inner term twice).
- c2r is R-linear (the extension conjugates), and
  sum_j g_j dx_j = Re(sum_k w'_k conj(r2c(g))_k dh_k) with w'_0 = 1,
  w'_k = 2 for 0 < k < n/2, w'_{n/2} = 1 for even n: ct_h = w' * conj(r2c(g)).
  The cotangents of h_0 and of the Nyquist term are real, so the ignored
  imaginary parts get none.

The JVPs are the ops on the tangents (linear maps). References: Cooley &
Tukey, "An algorithm for the machine calculation of complex Fourier series"
(1965), for the transform; the transposes are the adjoint-DFT identities
(F symmetric; the half spectrum's Hermitian weights), as JAX's and PyTorch's
FFT derivative rules state them.
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import DTypeError, ShapeError
from .batch import rebind
from .core import Op, complex_dtype, real_dtype, register

__all__ = ["fft_flops", "hermitian_weights"]


def fft_flops(n: int, batch: int = 1, real: bool = False) -> int:
    """Estimated flops of `batch` transforms of length n: 5 n log2 n (complex), half for real data
    (the radix-2 count of Cooley & Tukey; mixed-radix and Bluestein lengths cost a small factor more)."""
    if n <= 1:
        return batch
    f = 5.0 * n * np.log2(n) * batch
    return int(f / 2 if real else f)


def hermitian_weights(n: int, inner: float, dtype) -> np.ndarray:
    """Weights of the n//2 + 1 half-spectrum terms of a real signal of length n: 1 for the DC term and,
    for even n, the Nyquist term; `inner` for the terms 0 < k < n/2 (those that stand for k and n - k)."""
    w = np.full(n // 2 + 1, inner, dtype=real_dtype(dtype))
    w[0] = 1
    if n % 2 == 0:
        w[-1] = 1
    return w


# ----- shape and dtype rules -----


def _last(s, op):
    if len(s) < 1:
        raise ShapeError(f"{op}: needs an array of at least 1 dimension, got shape {s}")
    if s[-1] < 1:
        raise ShapeError(f"{op}: the transformed (last) axis has length {s[-1]}; it needs at least 1 point")
    return s[-1]


def _c2c_shape(s, *, inverse):
    _last(s, "fft_c2c")
    return tuple(s)


def _r2c_shape(s):
    n = _last(s, "fft_r2c")
    return tuple(s[:-1]) + (n // 2 + 1,)


def _c2r_shape(s, *, n):
    m = _last(s, "fft_c2r")
    if n < 1 or m != n // 2 + 1:
        raise ShapeError(f"fft_c2r: a real signal of length {n} has {n // 2 + 1} half-spectrum terms, "
                         f"the operand has {m} (shape {s})")
    return tuple(s[:-1]) + (n,)


def _complex_in(d, **_):
    d = np.dtype(d)
    if d.kind != "c":
        raise DTypeError(f"fft_c2c/fft_c2r: needs complex64 or complex128 operands, got {d}")
    return d


def _r2c_dtype(d):
    d = np.dtype(d)
    if d.kind != "f":
        raise DTypeError(f"fft_r2c: needs float32 or float64 operands, got {d}")
    return complex_dtype(d)


def _c2r_dtype(d, *, n):
    return real_dtype(_complex_in(d))


# ----- NumPy reference implementations (pocketfft; single precision stays single) -----


def _c2c_impl(x, *, inverse):
    if inverse:
        return np.fft.ifft(x, axis=-1, norm="forward").astype(x.dtype, copy=False)
    return np.fft.fft(x, axis=-1).astype(x.dtype, copy=False)


def _r2c_impl(x):
    return np.fft.rfft(x, axis=-1).astype(complex_dtype(x.dtype), copy=False)


def _c2r_impl(x, *, n):
    return np.fft.irfft(x, n, axis=-1, norm="forward").astype(real_dtype(x.dtype), copy=False)


# ----- derivative rules (transposes; see the module docstring) -----


def _c2c_vjp(ct, node):
    return (L.bind("fft_c2c", ct, inverse=node.attr("inverse")),)


def _c2c_jvp(t, node):
    return None if t[0] is None else L.bind("fft_c2c", t[0], inverse=node.attr("inverse"))


def _r2c_vjp(ct, node):
    n = node.inputs[0].shape[-1]
    w = hermitian_weights(n, 0.5, ct.dtype)
    return (L.bind("fft_c2r", L.mul(L.bind("conj", ct), w), n=n),)


def _r2c_jvp(t, node):
    return None if t[0] is None else L.bind("fft_r2c", t[0])


def _c2r_vjp(ct, node):
    n = node.attr("n")
    w = hermitian_weights(n, 2.0, ct.dtype)
    return (L.mul(L.bind("conj", L.bind("fft_r2c", ct)), w),)


def _c2r_jvp(t, node):
    return None if t[0] is None else L.bind("fft_c2r", t[0], n=node.attr("n"))


def _batch_count(shape) -> int:
    return int(np.prod(shape[:-1], dtype=np.int64))


def _same_batch(node, bargs, size):
    # the transform is along the last axis: a leading batch axis is one more batch dimension
    return rebind(node, [bargs[0]])


register(Op("fft_c2c", 1, "opaque", _c2c_shape, _complex_in, _c2c_impl, _c2c_vjp, _c2c_jvp, linear=True,
            doc="unnormalized complex DFT along the last axis: sum_j x_j exp(-2 pi i j k / n) (+ for inverse=True)",
            flops=lambda node: fft_flops(node.shape[-1], _batch_count(node.shape)), batch=_same_batch))
register(Op("fft_r2c", 1, "opaque", _r2c_shape, _r2c_dtype, _r2c_impl, _r2c_vjp, _r2c_jvp, linear=True,
            doc="unnormalized DFT of real data along the last axis, the n//2 + 1 terms k <= n/2 (numpy.fft.rfft)",
            flops=lambda node: fft_flops(node.inputs[0].shape[-1], _batch_count(node.shape), real=True),
            batch=_same_batch))
register(Op("fft_c2r", 1, "opaque", _c2r_shape, _c2r_dtype, _c2r_impl, _c2r_vjp, _c2r_jvp, linear=True,
            doc="unnormalized inverse DFT of a half spectrum (..., n//2 + 1) to a real signal (..., n) "
                "(numpy.fft.irfft with norm='forward'; imaginary parts of the DC and Nyquist terms ignored)",
            flops=lambda node: fft_flops(node.attr("n"), _batch_count(node.shape), real=True), batch=_same_batch))
