"""Compatibility module: the runtime moved to `codegen.cpu` (abi, blas, pool, executable); import from there.

Kept for code outside this package written against the old module (bench/scale.py).
"""

from __future__ import annotations

from .cpu import (ARRAY_DATA_OFFSET, OBJECT_ABI, POOL_MAX_WORKERS, TUPLE_ITEMS_OFFSET, Executable, blas_library,
                  blas_thread_control, blas_threads, call_abi, pool_stats, set_pool_limits, thread_pool)

__all__ = ["ARRAY_DATA_OFFSET", "OBJECT_ABI", "POOL_MAX_WORKERS", "TUPLE_ITEMS_OFFSET", "Executable", "blas_library",
           "blas_thread_control", "blas_threads", "call_abi", "pool_stats", "set_pool_limits", "thread_pool"]
