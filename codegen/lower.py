"""Compatibility module: lowering moved to `codegen.llvm` (context, emitters, reduce, loops, gemm); import from there.

Re-exports the names this module used to define. The state they read lives in the defining
modules: the vector-math switch is `codegen.llvm.context._vmath`, the lane count
`codegen.llvm.reduce.REDUCTION_LANES`, the product cut `codegen.llvm.gemm.GEMM_ATOMS`.
"""

from __future__ import annotations

from .llvm.context import (F32, F64, I1, I8, I32, I64, PTR, VOID, LoweringContext, for_range, ll_type, mem_type,
                           opaque_alloca, vmath_module)
from .llvm.emitters import EMITTERS, emitter, has_emitter, math_call
from .llvm.gemm import (GEMM_ATOM_MIN, GEMM_ATOMS, GEMM_PAR_MIN_FLOPS, GEMM_PIECE_ALIGN, emit_gemm,
                        gemm_pieces)
from .llvm.loops import KernelEmitter, LoopPlan, lower_loop_kernel
from .llvm.reduce import REDUCERS, REDUCTION_LANES, Reducer

__all__ = ["EMITTERS", "REDUCERS", "LoweringContext", "ll_type", "mem_type", "math_call", "has_emitter",
           "lower_loop_kernel", "emit_gemm", "gemm_pieces", "emitter", "for_range", "opaque_alloca", "vmath_module",
           "KernelEmitter", "LoopPlan", "Reducer", "REDUCTION_LANES", "GEMM_ATOM_MIN", "GEMM_ATOMS",
           "GEMM_PAR_MIN_FLOPS", "GEMM_PIECE_ALIGN", "F32", "F64", "I1", "I8", "I32", "I64", "PTR", "VOID"]
