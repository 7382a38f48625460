"""Benchmark harness comparing symgraph with its peers (see BENCHMARKS.md).

Run as ``python -m bench W1 [W2 ...] [--all] [--quick] [--json PATH] [--plot DIR]``.

This package must not import NumPy at import time: ``bench.__main__`` removes
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` from the environment (re-executing
itself) before NumPy is loaded, because NumPy's OpenBLAS reads them at import.
"""

WORKLOADS = {
    "W1": "bench.w1_elementwise",
    "W2": "bench.w2_mlp",
    "W3": "bench.w3_higher_order",
    "W4": "bench.w4_checkpoint",
    "W5": "bench.w5_overhead",
    "W6": "bench.w6_transformer",
    "W7": "bench.w7_loops",
    "W8": "bench.w8_gmm",
    "W9": "bench.w9_ba",
    "W10": "bench.w10_lstm",
    "W11": "bench.w11_ht",
    "W12": "bench.w12_small",
    "W13": "bench.w13_gp",
}

#: Workloads run only when named (not by --all): W14 launches `mpiexec` (the `distributed` extra).
NAMED_ONLY = {
    "W14": "bench.w14_scaling",
}

__all__ = ["WORKLOADS", "NAMED_ONLY"]
