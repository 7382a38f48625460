"""Tasks, kernels and programs: what the partitioner produces and a backend lowers, and the table of task kinds.

A `Task` computes one materialized node (or a piece of it); a `Kernel` is tasks that share
one loop nest (or one library call); a `Program` is a partitioned graph, kernels in
execution order. What each kind of task does, and the facts the partitioner and the
backends ask about it, are declared once, in `TaskKind` and `KernelKind` (string enums: a
kind compares equal to its name). A backend keeps one table from kind to lowering (the LLVM
backend: `codegen.llvm.loops.ELEMENT_STEPS` for the tasks of loop kernels,
`codegen.llvm.module.KERNEL_CALLS` for kernels); tests/test_codegen.py fails when a kind has
none.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from symgraph.ir import Graph, Node

from .affine import Aff
from .expr import Expr, expr_weight, walk_exprs

__all__ = ["KernelKind", "TaskKind", "Task", "Kernel", "Program", "task_roots", "task_loads", "task_reads",
           "kernel_exprs", "task_affs"]


class KernelKind(str, enum.Enum):
    """What runs a kernel: a loop nest over its domain, a matrix-product library call per task, a loop
    region (a compiled loop body called once per step, `codegen.llvm.region`), or a LAPACK routine per
    matrix of a spectral or factorization node (eigh, svd, qr, cholesky, triangular_solve, lu: ops whose
    record says `extra["lowering"] == "lapack"`)."""

    LOOP = "loop"
    GEMM = "gemm"
    REGION = "region"
    LAPACK = "lapack"

    def __str__(self) -> str:
        return self.value


class TaskKind(str, enum.Enum):
    """The kinds of task, one row each: (name, kernel kind, reduces, joins, fills_empty, what it does).

    Attributes:
        kernel: the kind of kernel the task runs in (`KernelKind`).
        loop: it runs in a loop kernel (every kind but gemm).
        reduces: it accumulates over `red_axes` of its domain; a loop kernel holds
            reductions over one set of axes only.
        joins: it may share a loop nest with other tasks of the same domain (a
            scatter runs alone: its writes are sequential).
        fills_empty: its output is written even when the domain is empty (a
            reduction's identity, a scatter's zeros).
        doc: what it computes.
    """

    STORE = ("store", KernelKind.LOOP, False, True, False,
             "value(node) at every index of `domain`, stored at `offset`")
    REDUCE = ("reduce", KernelKind.LOOP, True, True, True,
              "reduction `red_op` over `red_axes` of `domain` (the operand's shape)")
    ARGMAX = ("argmax", KernelKind.LOOP, True, True, False,
              "index of the first maximum along one axis")
    SCATTER = ("scatter", KernelKind.LOOP, False, False, True,
               "out[..., idx, ...] += u, in order (the output zero-filled first)")
    SCAN = ("scan", KernelKind.LOOP, False, False, False,
            "out[..., i, ...] = out[..., i - 1, ...] + x[..., i, ...] (or *: `red_op` sum or prod) along one axis, "
            "element after element (a running sum or product; `scan`: the axis's stride and length)")
    GEMM = ("gemm", KernelKind.GEMM, False, False, False,
            "a matrix product through BLAS (`gemm`: views of the operands)")
    REGION = ("region", KernelKind.REGION, False, False, False,
              "an output of a loop region (a `scan` node): the region's compiled body called once per step; "
              "the loop's sibling outputs share one kernel")
    LAPACK = ("lapack", KernelKind.LAPACK, False, False, False,
              "a LAPACK routine (a decomposition or triangular solve), matrix after matrix (its operands "
              "contiguous buffers)")

    def __new__(cls, name: str, kernel: KernelKind, reduces: bool, joins: bool, fills_empty: bool,
                doc: str) -> "TaskKind":
        obj = str.__new__(cls, name)
        obj._value_ = name
        obj.kernel = kernel
        obj.loop = kernel is KernelKind.LOOP
        obj.reduces = reduces
        obj.joins = joins
        obj.fills_empty = fills_empty
        obj.doc = doc
        return obj

    def __str__(self) -> str:
        return self.value


@dataclass(eq=False)
class Task:
    """One unit of work on a materialized node; `kind` says which (`TaskKind`)."""

    kind: TaskKind
    node: Node
    domain: tuple[int, ...]
    red_axes: frozenset = frozenset()
    value: Expr | None = None        # the per-iteration value
    offset: Aff | None = None        # where it goes in the node's buffer
    red_op: str = ""                 # sum/max/min/prod/argmax
    scan: tuple | None = None        # (stride, length) of the scanned axis in the node's buffer (scan)
    piece: int = 0                   # concatenate piece number
    pieced: bool = False             # one of several tasks each writing a part of the node (concatenate, pads)
    late: bool = False               # join only the latest kernel (a buffer written just before its use)
    gemm: dict | None = None         # views of the operands (gemm)
    _exprs: list | None = None
    _cost: int | None = None
    _loads: list | None = None

    @property
    def exprs(self) -> list["Expr"]:
        """Every Expr this task evaluates, inputs first (cached)."""
        if self._exprs is None:
            self._exprs = walk_exprs(task_roots(self)) if self.kind.loop else []
        return self._exprs

    @property
    def cost(self) -> int:
        """Estimated code size of the task's loop body: the sum of `expr_weight` over its Exprs (cached)."""
        if self._cost is None:
            self._cost = sum([e.w for e in self.exprs])  # e.w is `expr_weight(e)`
        return self._cost

    @property
    def loads(self) -> list["Expr"]:
        """The load Exprs among `exprs`, in order (cached)."""
        if self._loads is None:
            self._loads = [e for e in self.exprs if e.op == "load"]
        return self._loads

    @property
    def is_loop(self) -> bool:
        return self.kind.loop


@dataclass(eq=False)
class Kernel:
    """Tasks sharing one loop nest (or one BLAS call), in execution order."""

    kind: KernelKind
    domain: tuple[int, ...]
    red_axes: frozenset
    tasks: list[Task] = field(default_factory=list)
    concurrent: bool = False        # gemm kernels: the tasks are independent and may run at the same time

    @property
    def nodes(self) -> list[Node]:
        return [t.node for t in self.tasks]

    @property
    def size(self) -> int:
        return int(np.prod(self.domain, dtype=np.int64))


@dataclass(eq=False)
class Program:
    """A partitioned graph: materialized nodes, kernels in execution order."""

    graph: Graph
    order: list[Node]
    materialized: set
    kernels: list[Kernel]
    producer: dict                  # materialized node -> index of the last kernel writing it
    readers: dict                   # materialized node -> list of kernel indices reading it
    donated: dict                   # output position -> input leaf index (buffer shared)
    consts: dict                    # constant node -> array (non-uniform constants)
    first_write: dict = field(default_factory=dict)  # node -> first kernel writing it (concatenate pieces)


def task_roots(task: Task) -> list[Expr]:
    """The Exprs a loop task evaluates: its value and the atoms of its store offset."""
    roots = [task.value] if task.value is not None else []
    if task.offset is not None:
        roots.extend(task.offset.atoms())
    return roots


def task_loads(t: Task) -> list[Expr]:
    """The loads of a loop task (none for a product: it reads its operands' views)."""
    if not t.kind.loop:
        return []
    return t.loads


def task_reads(t: Task) -> set[Node]:
    """The materialized nodes a task reads (a product that accumulates also reads its output)."""
    if t.kind is TaskKind.REGION:
        return set(t.node.inputs)
    if t.kind is TaskKind.LAPACK:
        return set(t.node.inputs)
    if not t.kind.loop:
        reads = {t.gemm["a"]["base"], t.gemm["b"]["base"]}
        if t.gemm.get("beta"):
            reads.add(t.node)  # accumulates into its output
        return reads
    return {e.attrs[0] for e in task_loads(t)}


def kernel_exprs(k: "Kernel") -> list[Expr]:
    """The union of a kernel's task Exprs, inputs first."""
    if len(k.tasks) == 1:
        return k.tasks[0].exprs
    seen: set = set()
    out = []
    for t in k.tasks:
        for e in t.exprs:
            if e not in seen:
                seen.add(e)
                out.append(e)
    return out


def task_affs(task: Task) -> list[Aff]:
    """Every affine form a loop task evaluates (loads, indices, its own offset)."""
    affs = [task.offset] if task.offset is not None else []
    for e in task.exprs:
        for a in e.args:
            if isinstance(a, Aff):
                affs.append(a)
    return affs
