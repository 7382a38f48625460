"""Compiled np.sort / argsort / partition against NumPy's in the same process (docs/tracing.md, "Sorting").

    python -m bench.sorting [--reps 15]

Per case: the median of `reps` calls of the compiled function (sg.compile, LLVM backend) and of the NumPy
call, and their ratio. NumPy runs its default kind (quicksort: introsort, or AVX-512 / highway sorts where
the build has them) and kind="stable" (radix sort for 16-bit and smaller, timsort otherwise).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import symgraph as sg


def _median(fn, x, reps: int) -> float:
    fn(x)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(x)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = [("(256, 4096) float64", rng.standard_normal((256, 4096))),
             ("(2^20,) float32", rng.standard_normal(1 << 20).astype(np.float32))]
    ops = [("sort", lambda v: np.sort(v), lambda v: np.sort(v), lambda v: np.sort(v, kind="stable")),
           ("argsort", lambda v: np.argsort(v), lambda v: np.argsort(v), lambda v: np.argsort(v, kind="stable")),
           ("partition k=n/2", lambda v: np.partition(v, v.shape[-1] // 2), lambda v: np.partition(v, v.shape[-1] // 2),
            None)]
    print(f"{'case':24s} {'op':16s} {'symgraph ms':>12s} {'numpy ms':>10s} {'stable ms':>10s} {'ratio':>6s}")
    for cname, x in cases:
        for oname, f, ref, stable in ops:
            cf = sg.compile(f)
            got = cf(x)
            if oname != "partition k=n/2":
                assert np.array_equal(got, (stable or ref)(x)), oname
            t_sg = _median(cf, x, args.reps)
            t_np = _median(ref, x, args.reps)
            t_st = _median(stable, x, args.reps) if stable else float("nan")
            print(f"{cname:24s} {oname:16s} {t_sg * 1e3:12.2f} {t_np * 1e3:10.2f} {t_st * 1e3:10.2f} "
                  f"{t_sg / t_np:6.2f}")


if __name__ == "__main__":
    main()
