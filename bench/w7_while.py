"""W7's RNN written as a `while_loop` with `checkpoints=s`, against the checkpointed `scan` (one process).

    python -m bench.w7_while [--T 1000] [--calls 7]

The RNN of bench/w7_loops.py (hidden 128, input 32, batch 16, float32), value and
gradient w.r.t. (Wx, Wh, b), LLVM. The while loop reads xs[k] with its own step
counter k and stops at k == T (a trip count the loop only knows at run time).
Prints, per system: planned peak bytes (`cf.stats["peak_bytes"]`), the median time
per call, the first call (trace + compile + run) and the largest gradient difference
from the store-everything scan.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import symgraph as sg
from bench.w7_loops import B, H, rnn_inputs


def scan_loss(Wx, Wh, b, xs):
    h, _ = sg.scan(lambda h, x: (np.tanh(x @ Wx + h @ Wh + b), None), np.zeros((B, H), np.float32), xs)
    return np.float32(0.5) * np.sum(h * h)


def while_loss(s):
    def loss(Wx, Wh, b, xs):
        T = xs.shape[0]

        def body(c):
            h, k = c
            return np.tanh(xs[k] @ Wx + h @ Wh + b), k + 1

        h, _ = sg.while_loop(lambda c: c[1] < T, body, (np.zeros((B, H), np.float32), np.int64(0)), checkpoints=s)
        return np.float32(0.5) * np.sum(h * h)
    return loss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--snapshots", type=int, nargs="*", default=[8, 32])
    a = ap.parse_args()
    args = rnn_inputs(a.T)
    systems = [("scan", scan_loss, None)]
    for s in a.snapshots:
        systems.append((f"scan checkpoint=('revolve', {s})", scan_loss, ("revolve", s)))
        systems.append((f"while_loop checkpoints={s}", while_loss(s), None))
    ref = None
    for name, f, ck in systems:
        t0 = time.perf_counter()
        cf = sg.compile(sg.value_and_grad(f, argnums=(0, 1, 2)), checkpoint=ck)
        out = cf(*args)
        first = time.perf_counter() - t0
        ts = []
        for _ in range(a.calls):
            t0 = time.perf_counter()
            cf(*args)
            ts.append(time.perf_counter() - t0)
        if ref is None:
            ref = out
        diff = max(float(np.max(np.abs(x - y))) for x, y in zip(sg.tree_leaves(out), sg.tree_leaves(ref)))
        print(f"{name:36s} peak {cf.stats['peak_bytes'] / 2 ** 20:8.2f} MiB  per call "
              f"{1e3 * statistics.median(ts):8.1f} ms  first call {first:6.2f} s  max |dg| {diff:.2e}", flush=True)


if __name__ == "__main__":
    main()
