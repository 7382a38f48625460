"""Compatibility module: buffer planning moved to `codegen.kernels.buffers`, module building to
`codegen.llvm.module`; import from there.

Re-exports the names this module used to define (bench/scale.py and older code import them
from here). The thresholds of the thread plan (`PAR_MIN_WORK`, ...) and `_dedup_kernel` live
in `codegen.llvm.module`: set them there.
"""

from __future__ import annotations

from .kernels.buffers import BufferPlan, plan_buffers
from .llvm.module import (MAX_THREADS, REDUCTION_CHUNKS, ROW_PARTIALS_MAX_BYTES, build_module, module_text,
                          num_threads, split_range)

__all__ = ["BufferPlan", "plan_buffers", "build_module", "module_text", "num_threads", "split_range", "MAX_THREADS",
           "REDUCTION_CHUNKS", "ROW_PARTIALS_MAX_BYTES"]
