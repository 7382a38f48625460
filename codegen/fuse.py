"""Compatibility module: partitioning moved to `codegen.kernels`; import from there.

Re-exports the names this module used to define (bench/scale.py, docs and older code import
them from here). The state they read lives in the defining modules: to change a constant
(`MAX_KERNEL_COST`, ...), set it on `codegen.kernels.partition`, not here.
"""

from __future__ import annotations

from .kernels.affine import (Aff, aff_divmod, c_strides, domain_vars, flat_offset, fold_divmod, merge_groups,
                             merge_index, reshape_index)
from .kernels.body import BodyBuilder, uniform_const, uniform_scalar
from .kernels.expr import Expr, expr_weight, release_session, walk_exprs
from .kernels.pairing import PAIR_LOOKAHEAD, PAIR_MAX_RATIO, PAIR_MIN_DIM, PAIR_MIN_FLOPS
from .kernels.partition import (LARGE_SCALAR_KERNEL_COST, LARGE_SCALAR_PROGRAM_COST, MAX_KERNEL_COST,
                                MAX_SCALAR_KERNEL_COST, kernel_cost_cap, partition)
from .kernels.tasks import Kernel, KernelKind, Program, Task, TaskKind, kernel_exprs, task_affs, task_roots

__all__ = ["Aff", "Expr", "Task", "Kernel", "Program", "TaskKind", "KernelKind", "partition", "aff_divmod",
           "c_strides", "domain_vars", "flat_offset", "fold_divmod", "merge_groups", "merge_index", "reshape_index",
           "BodyBuilder", "uniform_const", "uniform_scalar", "expr_weight", "release_session", "walk_exprs",
           "PAIR_LOOKAHEAD", "PAIR_MAX_RATIO", "PAIR_MIN_DIM", "PAIR_MIN_FLOPS", "LARGE_SCALAR_KERNEL_COST",
           "LARGE_SCALAR_PROGRAM_COST", "MAX_KERNEL_COST", "MAX_SCALAR_KERNEL_COST", "kernel_cost_cap",
           "kernel_exprs", "task_affs", "task_roots"]
