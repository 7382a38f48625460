"""The LLVM backend for symgraph (llvmlite): fused, vectorized native kernels.

Imported lazily by `symgraph.compile(..., backend="llvm")`; `import symgraph`
never imports this package or llvmlite.
"""
