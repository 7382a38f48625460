"""Compiled complex solve and cholesky against NumPy's in the same process (docs/linalg.md, "Complex matrices in
compiled code").

    python -m bench.complex_linalg [--n 64] [--reps 51]

Per case: the median of `reps` calls of the compiled function (sg.compile, LLVM backend: the complex split, the
complex LAPACK routines on interleaved copies of the parts) and of the NumPy call, their ratio, and the compiled
result's normwise difference from NumPy's. The real float64 case is printed beside it for scale, and `a * 2`
(one fused loop) for the per-call cost of a compiled call (for complex arguments: splitting them into parts
and assembling the complex result, in Python).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import symgraph as sg


def _median(fn, args, reps: int) -> float:
    fn(*args)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--reps", type=int, default=51)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    print(f"{'case':34s} {'symgraph us':>12s} {'numpy us':>10s} {'ratio':>6s} {'rel diff':>9s}")
    for dtype in (np.complex128, np.complex64, np.float64):
        a = rng.standard_normal((n, n)) + n ** 0.5 * np.eye(n)
        b = rng.standard_normal((n, 1))
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal((n, n))
            b = b + 1j * rng.standard_normal((n, 1))
        h = a @ np.conj(a.T) + n * np.eye(n)
        a, b, h = a.astype(dtype), b.astype(dtype), h.astype(dtype)
        for name, f, fargs in [(f"solve ({n}, {n}), ({n}, 1)", np.linalg.solve, (a, b)),
                               (f"cholesky ({n}, {n})", np.linalg.cholesky, (h,)),
                               (f"a * 2 ({n}, {n}) (call overhead)", lambda a: a * 2.0, (a,))]:
            cf = sg.compile(f)
            got, want = cf(*fargs), f(*fargs)
            diff = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            t_sg = _median(cf, fargs, args.reps)
            t_np = _median(f, fargs, args.reps)
            label = f"{name} {np.dtype(dtype).name}"
            print(f"{label:34s} {t_sg * 1e6:12.1f} {t_np * 1e6:10.1f} {t_sg / t_np:6.2f} {diff:9.1e}")


if __name__ == "__main__":
    main()
