"""The CPU runtime of compiled code: calling convention, BLAS, thread pool and the executable.

Modules, one concern each: `abi` (how native entries are called from Python), `blas` (the BLAS
library and its thread count), `pool` (the futex thread pool, `pool.ll`), `executable` (argument
checks, outputs and the call), `backend` (the "llvm" registry entry), `ll` (the `.ll` files).
The names below are re-exported for convenience.
"""

from __future__ import annotations

from .abi import ARRAY_DATA_OFFSET, OBJECT_ABI, TUPLE_ITEMS_OFFSET, call_abi
from .blas import blas_library, blas_thread_control, blas_threads
from .executable import Executable
from .pool import POOL_MAX_WORKERS, pool_stats, set_pool_limits, thread_pool

__all__ = ["ARRAY_DATA_OFFSET", "OBJECT_ABI", "TUPLE_ITEMS_OFFSET", "call_abi", "blas_library",
           "blas_thread_control", "blas_threads", "Executable", "POOL_MAX_WORKERS", "pool_stats",
           "set_pool_limits", "thread_pool"]
