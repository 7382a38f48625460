"""The backend-neutral kernel IR: a scheduled graph partitioned into kernels over a scalar loop-body IR.

Modules, one job each: `expr` (the loop-body IR, `Expr`, interned per thread), `affine`
(affine index forms, `Aff`), `body` (graph nodes to loop-body Exprs), `tasks` (tasks,
kernels, programs and the table of task kinds), `node_tasks` (the tasks of each node),
`pairing` (matrix products for BLAS), `cut` (loop bodies cut to the cost cap), `partition`
(the partitioner) and `buffers` (the buffer and arena plan). Nothing here knows LLVM: a
backend lowers the `Program` that `partition` returns (`codegen.llvm` for the CPU).
"""
