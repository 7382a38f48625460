"""Lowering to LLVM IR (llvmlite's typed IR builder): kernels of `codegen.kernels` to one module.

Modules, one job each: `context` (LLVM types of dtypes, casts, declarations, the switch to
vector math), `emitters` (one emitter per elementwise op, `EMITTERS`), `reduce` (reducers,
accumulation lanes, partial results), `loops` (the loop plan and the kernel function of a
loop kernel), `gemm` (BLAS calls and products cut into pieces), `pieces` (pieces of work on
the thread pool), `module` (the module and its entry function, built in named stages) and
`vmath/` (vectorizable transcendentals).

Conventions of the generated code: addressing by GEP only (no ptrtoint/inttoptr); every
kernel buffer parameter is `noalias`; no fast-math flags on elementwise arithmetic, so NaN,
inf and -0.0 behave as in NumPy; reductions carry `reassoc` (and only that) where their
association does not matter.
"""
