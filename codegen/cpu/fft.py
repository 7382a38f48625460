"""The native FFT's plans: which algorithm each length takes, its constant tables and its workspace.

Compiled code runs the FFT primitives (`symgraph.ops.fourier`: fft_c2c, fft_r2c, fft_c2r) with
its own transforms (`codegen.llvm.fft` emits them), on split (real, imaginary) arrays. This
module decides, for a transform length, the algorithm and lays out its constants, all in
NumPy, so the tables are computed in float64 at compile time and rounded once to the working
precision:

- L = 2^a 3^b 5^c: an iterative Stockham autosort FFT (mixed radix: radix-4 passes, one radix-2 pass
  when a is odd, then radix-3 and radix-5 passes), twiddles W_L^k = exp(-2 pi i k / L) for k < L and, for the first pass, W_L^(r p) (r = 1, 2, 3) laid
  out contiguously in p (Van Loan, "Computational Frameworks for
  the Fast Fourier Transform", SIAM 1992, section 1.7 (Stockham) and 2.3 (radix 4));
- any other L (a prime factor above 5): Bluestein's chirp-z (Bluestein 1970, "A linear filtering approach to the computation
  of the discrete Fourier transform"): y_k = c_k sum_j (x_j c_j) conj(c_(k-j)) with c_j = exp(-pi i
  j^2 / L) (j^2 taken modulo 2L, exactly), the convolution by power-of-two FFTs of length
  M >= 2L - 1 with the chirp's transform B (divided by M) a table;
- real input of even length n (r2c) and its inverse (c2r): the complex transform of length n/2 of
  z_j = x_2j + i x_2j+1 plus a pass with the twiddles W_n^k, k <= n/2, so rfft costs about half a
  complex FFT; odd n: the complex transform of length n (imaginary part zero / the Hermitian
  spectrum completed).

A table is one float array: the real parts of a segment, then its imaginary parts, segment after
segment (`node_table`). The workspace is in floats of the working precision (`work_floats`).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["plan", "radices", "plan_floats", "work_floats", "node_table", "node_work_floats", "KINDS"]

#: The transforms of compiled code: complex to complex (forward; inverse by exchanging the parts),
#: real to half-spectrum, half-spectrum to real.
KINDS = ("c2c", "r2c", "c2r")


@functools.lru_cache(maxsize=None)
def radices(length: int) -> tuple[int, ...] | None:
    """The radices of the Stockham passes of `length` (4s, then a 2, then 3s and 5s), or None when `length` has a
    prime factor above 5 (Bluestein's then)."""
    out, n = [], length
    for r in (4, 2, 3, 5):
        while n % r == 0 and n > 1:
            out.append(r)
            n //= r
            if r == 2:
                break
    return tuple(out) if n == 1 else None


@functools.lru_cache(maxsize=None)
def plan(length: int) -> tuple[str, int]:
    """(algorithm, M) of the complex transform of `length`: ("copy", 1), ("stockham", L) for lengths 2^a 3^b 5^c,
    or ("bluestein", M) with M the power of two >= 2L - 1."""
    if length == 1:
        return ("copy", 1)
    if radices(length) is not None:
        return ("stockham", length)
    m = 1
    while m < 2 * length - 1:
        m *= 2
    return ("bluestein", m)


def _twiddles(n: int, count: int) -> np.ndarray:
    """W_n^k = exp(-2 pi i k / n), k < count, in float64 (k reduced to the first octant's accuracy by NumPy)."""
    k = np.arange(count, dtype=np.float64)
    return np.exp(-2j * np.pi * k / n)


def _chirp(length: int) -> np.ndarray:
    """c_j = exp(-pi i j^2 / L), j < L, with j^2 reduced modulo 2L in integers (exact arguments)."""
    j = np.arange(length, dtype=np.int64)
    r = (j * j) % (2 * length)
    return np.exp(-1j * np.pi * r.astype(np.float64) / length)


def _first_pass(m: int) -> list[np.ndarray]:
    """The first pass's twiddles W_m^(r p), 0 < r < radix, p < m/radix, contiguous in p (so that pass's loop over
    p reads them as vectors); none when that pass needs no twiddles (it is the only one)."""
    r = radices(m)[0]
    if m <= r:
        return []
    p = np.arange(m // r)
    w = _twiddles(m, m)
    return [w[j * p] for j in range(1, r)]


def _plan_segments(length: int) -> list[np.ndarray]:
    """The complex segments of a length's plan: stockham: [W_L, first-pass twiddles]; bluestein: M's segments, then
    chirp c (L) and B / M (M)."""
    algo, m = plan(length)
    if algo == "copy":
        return []
    if algo == "stockham":
        return [_twiddles(m, m)] + _first_pass(m)
    c = _chirp(length)
    b = np.zeros(m, np.complex128)
    b[:length] = np.conj(c)
    b[m - length + 1:] = np.conj(c[1:])[::-1]
    return _plan_segments(m) + [c, np.fft.fft(b) / m]


def plan_floats(length: int) -> int:
    """Floats of a length's plan tables."""
    return sum(2 * s.size for s in _plan_segments(length))


def work_floats(length: int) -> int:
    """Floats of workspace of one complex transform of `length` (two Stockham buffers; Bluestein: 4 more of M)."""
    algo, m = plan(length)
    if algo == "copy":
        return 0
    if algo == "stockham":
        return 4 * m
    return 8 * m


def _inner(kind: str, n: int) -> int:
    """The complex transform length a node's transform runs on."""
    if kind != "c2c" and n % 2 == 0:
        return n // 2
    return n


def _flat(segments: list[np.ndarray]) -> np.ndarray:
    if not segments:
        return np.zeros(2, np.float64)  # a buffer of its own even when nothing is read
    return np.concatenate([np.concatenate([s.real, s.imag]) for s in segments])


@functools.lru_cache(maxsize=64)
def _node_table64(kind: str, n: int) -> np.ndarray:
    inner = _inner(kind, n)
    segs = _plan_segments(inner)
    if kind != "c2c" and n % 2 == 0:
        segs = [_twiddles(n, n // 2 + 1)] + segs
    t = _flat(segs)
    t.flags.writeable = False
    return t


def node_table(kind: str, n: int, dtype) -> np.ndarray:
    """The constant table of a transform node (kind in `KINDS`, length n), in the working precision `dtype`.

    Layout: r2c/c2r of even n first W_n^k for k <= n/2; then the inner complex transform's plan
    segments (`_plan_segments`); each segment its real parts then its imaginary parts.
    """
    return _node_table64(kind, n).astype(np.dtype(dtype))


def node_work_floats(kind: str, n: int) -> int:
    """Floats of workspace for one transform of a node (the batch runs one transform at a time)."""
    inner = _inner(kind, n)
    return 4 * inner + work_floats(inner)
