"""The tasks that compute each materialized node: one builder per op family, in a table keyed by op name (`NODE_TASKS`).

A materialized node is computed by one or more `Task`s over loop-body Exprs (`BodyBuilder`):
a reduction by a reduce (or argmax) task over its operand's shape, a product by a BLAS task
(or a loop that sums over k without BLAS), an einsum by a loop over all its letters, a
concatenate and the sums of zero-padded or strided blocks (the gradients of slicing) by one
store per block, a reshape that merges axes by a loop over its operand's finer shape, a
scatter_add by a scatter, and every other node by one store of its value. The root of a sum
whose products accumulate in their BLAS calls (`pairing.plan_accumulation`) is a store of the
other terms, then one accumulating product each. Each row of `NODE_TASKS` also says which task
kinds (`TaskKind`) its builder makes and whether the node always gets its own buffer (the
partitioner asks `node_tasks(op)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from symgraph.errors import ShapeError
from symgraph.ir import Node
from symgraph.ops import Op
from symgraph.ops.linalg import parse_einsum

from .affine import Aff, domain_vars, flat_offset, merge_groups, merge_index
from .body import BodyBuilder
from .expr import Expr
from .pairing import gemm_view
from .tasks import Task, TaskKind

__all__ = ["make_tasks", "NodeTasks", "NODE_TASKS", "node_tasks"]

STORE, REDUCE, ARGMAX, SCATTER, GEMM = TaskKind.STORE, TaskKind.REDUCE, TaskKind.ARGMAX, TaskKind.SCATTER, \
    TaskKind.GEMM
SCAN = TaskKind.SCAN
REGION = TaskKind.REGION


def make_tasks(b: BodyBuilder, M: set, order: list[Node], acc_plans: dict, blas: bool) -> list[Task]:
    """The tasks of every materialized node of `order` but the sources, in order.

    Args:
        b: this round's loop-body builder.
        M: the materialized nodes.
        order: the schedule.
        acc_plans: sums whose products accumulate in BLAS calls (`pairing.plan_accumulation`).
        blas: whether float products go to BLAS.

    Raises:
        ShapeError: a max/min/argmax over an empty axis.
    """
    maker = _TaskMaker(b, M, acc_plans, blas)
    for n in order:
        if n not in M or n.op.kind == "source":
            continue
        if n in acc_plans:
            maker.accumulation(n)
        else:
            node_tasks(n.op).build(maker, n)
    return maker.tasks


class _TaskMaker:
    """Appends the tasks of one node at a time to `tasks` (the builders of `NODE_TASKS`)."""

    def __init__(self, b: BodyBuilder, M: set, acc_plans: dict, blas: bool):
        self.b = b
        self.M = M
        self.acc_plans = acc_plans
        self.blas = blas
        self.tasks: list[Task] = []

    def value(self, n: Node) -> None:
        """Any other node: its value at every index."""
        idx = domain_vars(n.shape)
        self.tasks.append(Task(STORE, n, n.shape, frozenset(), self.b.compute(n, idx), flat_offset(n.shape, idx)))

    def region(self, n: Node) -> None:
        """An output of a loop region: the loop reads its inputs' buffers (constants passed as buffers)."""
        for x in n.inputs:
            if x.op.name == "constant":
                self.b.consts[x] = x.attr("value").array
        self.tasks.append(Task(REGION, n, n.shape))

    def accumulation(self, n: Node) -> None:
        """A sum of products that accumulate in place: the other terms stored first (if any), then each product."""
        b = self.b
        rest, gemms = self.acc_plans[n]
        beta = 0.0
        if rest:
            idx = domain_vars(n.shape)
            v = None
            for c, x in rest:
                e = b.value(x, idx)
                if c == -1.0:
                    e = Expr.make("neg", (e,), (), n.dtype)
                elif c != 1.0:
                    e = Expr.make("mul", (Expr.const(c, n.dtype), e), (), n.dtype)
                v = e if v is None else Expr.make("add", (v, e), (), n.dtype)
            self.tasks.append(Task(STORE, n, n.shape, frozenset(), v, flat_offset(n.shape, idx), pieced=True,
                                   late=True))
            beta = 1.0
        for c, m in gemms:
            va, vb = gemm_view(b, m.inputs[0]), gemm_view(b, m.inputs[1])
            assert va is not None and vb is not None
            self.tasks.append(Task(GEMM, n, n.shape, gemm={"a": va, "b": vb, "mm": m, "alpha": c, "beta": beta}))
            beta = 1.0

    def reduction(self, n: Node) -> None:
        """A reduction over `axes` of its operand's shape. One whose every output element is an input
        element (`Op.copies_input`: max, min) has no value over an empty axis."""
        self._reduce(n, REDUCE, frozenset(n.attr("axes")), n.op.copies_input)

    def argmax(self, n: Node) -> None:
        """The index of the first maximum along `axis` (none over an empty axis)."""
        self._reduce(n, ARGMAX, frozenset((n.attr("axis"),)), True)

    def _reduce(self, n: Node, kind: TaskKind, axes: frozenset, needs_elements: bool) -> None:
        name = n.op.name
        x = n.inputs[0]
        for a in axes:
            if x.shape[a] == 0 and needs_elements:
                raise ShapeError(f"{name}: zero-size reduction over axis {a} of shape {x.shape} "
                                 f"has no identity")
        idx = domain_vars(x.shape)
        kept = tuple(a for i, a in enumerate(idx) if i not in axes)
        self.tasks.append(Task(kind, n, x.shape, axes, self.b.value(x, idx), flat_offset(n.shape, kept),
                               red_op=name))

    def matmul(self, n: Node) -> None:
        """A product: a BLAS call on views of the operands, or a loop over (..., m, k, n) summing over k."""
        b = self.b
        a, bb = n.inputs
        if self.blas and n.dtype in (np.float32, np.float64):
            va, vb = gemm_view(b, a), gemm_view(b, bb)
            assert va is not None and vb is not None
            self.tasks.append(Task(GEMM, n, n.shape, gemm={"a": va, "b": vb}))
            return
        # loop fallback: domain (..., m, k, n), sum over k
        *batch, m, k = a.shape
        nn = bb.shape[-1]
        dom = tuple(batch) + (m, k, nn)
        idx = domain_vars(dom)
        nb = len(batch)
        ea = b.value(a, idx[:nb] + (idx[nb], idx[nb + 1]))
        eb = b.value(bb, idx[:nb] + (idx[nb + 1], idx[nb + 2]))
        v = Expr.make("mul", (ea, eb), (), n.dtype)
        self.tasks.append(Task(REDUCE, n, dom, frozenset({nb + 1}), v,
                               flat_offset(n.shape, idx[:nb] + (idx[nb], idx[nb + 2])), red_op="sum"))

    def einsum(self, n: Node) -> None:
        """A loop over every letter of the spec: the product of the operands, summed over contracted letters."""
        terms, out = parse_einsum(n.attr("spec"), len(n.inputs))
        letters: list[str] = []
        for t in terms + [out]:
            for c in t:
                if c not in letters:
                    letters.append(c)
        sizes: dict[str, int] = {}
        for t, x in zip(terms, n.inputs):
            for c, d in zip(t, x.shape):
                sizes[c] = d
        dom = tuple(sizes[c] for c in letters)
        idx = domain_vars(dom)
        pos = {c: i for i, c in enumerate(letters)}
        v = None
        for t, x in zip(terms, n.inputs):
            e = self.b.value(x, tuple(idx[pos[c]] for c in t))
            v = e if v is None else Expr.make("mul", (v, e), (), n.dtype)
        red = frozenset(pos[c] for c in letters if c not in out)
        off = flat_offset(n.shape, tuple(idx[pos[c]] for c in out))
        if not red:
            self.tasks.append(Task(STORE, n, dom, frozenset(), v, off))
        else:
            self.tasks.append(Task(REDUCE, n, dom, red, v, off, red_op="sum"))

    def concatenate(self, n: Node) -> None:
        """One store per non-empty operand, at its offset along the axis."""
        axis = n.attr("axis")
        off = 0
        for pi, x in enumerate(n.inputs):
            if x.size:
                self.tasks.append(self.piece(n, x, axis, off, pi))
            off += x.shape[axis]

    def add(self, n: Node) -> None:
        """A sum of strided or zero-padded blocks (the gradients of slicing) block by block, else its value."""
        strided = _strided_pieces(n, self.M)
        if strided is not None:
            self.strided(n, *strided)
            return
        padded = _pad_pieces(n, self.M)
        if padded is not None:
            self.padded(n, *padded)
            return
        self.value(n)

    def strided(self, n: Node, axis: int, step: int, pieces: list) -> None:
        """A sum of unslices with one step s along one axis, one per residue mod s (the transpose
        of x[0::2], x[1::2]): one loop over the pieces' common shape stores every residue
        (an interleaved store LLVM vectorizes), instead of index tests at every element."""
        have = dict(pieces)
        for r in range(step):
            cnt = len(range(r, n.shape[axis], step))
            x = have.get(r)
            shape = tuple(cnt if j == axis else d for j, d in enumerate(n.shape))
            idx = domain_vars(shape)
            oidx = tuple(a.scale(step) + r if j == axis else a for j, a in enumerate(idx))
            if x is None:
                v = Expr.const(0, n.dtype)
            else:  # + 0.0 as in the sum with the other pieces' zeros: -0.0 becomes +0.0
                v = Expr.make("add", (self.b.value(x, idx), Expr.const(0, n.dtype)), (), n.dtype)
            self.tasks.append(Task(STORE, n, shape, frozenset(), v, flat_offset(n.shape, oidx), piece=r, pieced=True))

    def padded(self, n: Node, axis: int, pieces: list) -> None:
        """A sum of zero-padded blocks along one axis (the transpose of slicing): one store per
        block and zeros in the gaps, instead of index tests and gathers at every element."""
        pos = 0
        pi = 0
        for start, x in pieces + [(n.shape[axis], None)]:
            if start > pos:
                shape = tuple(start - pos if j == axis else d for j, d in enumerate(n.shape))
                idx = domain_vars(shape)
                oidx = tuple(a + pos if j == axis else a for j, a in enumerate(idx))
                self.tasks.append(Task(STORE, n, shape, frozenset(), Expr.const(0, n.dtype),
                                       flat_offset(n.shape, oidx), piece=pi, pieced=True))
                pi += 1
            if x is None:
                break
            self.tasks.append(self.piece(n, x, axis, start, pi))
            pi += 1
            pos = start + x.shape[axis]

    def reshape(self, n: Node) -> None:
        """A reshape that merges axes: a loop over the operand's finer shape (same row-major
        offsets), so reading a transposed operand needs no div/mod of merged indices."""
        x = n.inputs[0]
        if x in self.M or x.op.kind == "source" or merge_groups(x.shape, n.shape) is None:
            self.value(n)
            return
        idx = domain_vars(x.shape)
        self.tasks.append(Task(STORE, n, x.shape, frozenset(), self.b.value(x, idx), flat_offset(x.shape, idx)))

    def scatter_add(self, n: Node) -> None:
        """out[..., ind, ...] += u over u's shape (a scatter task)."""
        b = self.b
        u, ind = n.inputs
        axis = n.attr("axis")
        idx = domain_vars(u.shape)
        k = ind.ndim
        iv = b.value(ind, idx[axis:axis + k])
        size = n.shape[axis]
        j = Expr.make("_gather_index", (iv,), (size,), np.int64, rng=(0, max(size - 1, 0)))
        oidx = idx[:axis] + (Aff.of(j),) + idx[axis + k:]
        self.tasks.append(Task(SCATTER, n, u.shape, frozenset(), b.value(u, idx), flat_offset(n.shape, oidx)))

    def scan(self, n: Node) -> None:
        """A running sum or product along one axis (cumsum, cumprod): each element combines with its
        predecessor's result (a scan task; `red_op` sum or prod)."""
        axis = n.attr("axis")
        idx = domain_vars(n.shape)
        stride = int(np.prod(n.shape[axis + 1:], dtype=np.int64))
        self.tasks.append(Task(SCAN, n, n.shape, frozenset(), self.b.value(n.inputs[0], idx),
                               flat_offset(n.shape, idx), scan=(stride, n.shape[axis]),
                               red_op={"cumsum": "sum", "cumprod": "prod"}[n.op.name]))

    def lapack(self, n: Node) -> None:
        """A LAPACK-lowered node (eigh, svd, qr, cholesky, triangular_solve, lu, ...): one LAPACK task over its
        contiguous operands (constants passed as buffers)."""
        for x in n.inputs:
            if x.op.name == "constant":
                self.b.consts[x] = x.attr("value").array
        self.tasks.append(Task(TaskKind.LAPACK, n, n.shape))

    def piece(self, n: Node, x: Node, axis: int, start: int, pi: int) -> Task:
        """Store x into the block of n starting at `start` along `axis` (loops over x's finer shape
        when x is a fused reshape that merges axes)."""
        M = self.M
        plus_zero = _plus_pos_zero(x, M)  # x = x' + 0.0 (simplify's add_unslices): store x' + 0 from x''s loop
        if plus_zero:
            x = x.inputs[0]
        y = x
        while y.op.name == "reshape" and y.inputs[0] not in M and y.inputs[0].op.kind != "source" \
                and merge_groups(y.inputs[0].shape, y.shape) is not None:
            y = y.inputs[0]
        idx = domain_vars(y.shape)
        xidx = merge_index(idx, y.shape, x.shape) if y is not x else idx
        oidx = tuple(a + start if j == axis else a for j, a in enumerate(xidx))
        v = self.b.value(y, idx)
        if plus_zero:  # -0.0 becomes +0.0, as the sum with the padding's zeros gives
            v = Expr.make("add", (v, Expr.const(0, n.dtype)), (), n.dtype)
        return Task(STORE, n, y.shape, frozenset(), v, flat_offset(n.shape, oidx), piece=pi, pieced=True)


@dataclass(frozen=True)
class NodeTasks:
    """How the nodes of one op become tasks (a row of `NODE_TASKS`).

    Attributes:
        build: appends the node's tasks (a `_TaskMaker` method).
        kinds: the task kinds (`TaskKind`) it may make (an accumulation root, `pairing`, aside).
        buffer: the node always gets its own buffer: its tasks write it piece by piece, scatter
            into it or reduce into it, so it is never computed inside a reader's loop.
    """

    build: Callable[[_TaskMaker, Node], None]
    kinds: tuple[TaskKind, ...]
    buffer: bool = False


#: The task builders by op name. Any other reduction is `REDUCTION_TASKS`, any other op `VALUE_TASKS`
#: (one store of its value; layout ops become index arithmetic, `body.LAYOUTS`).
NODE_TASKS: dict[str, NodeTasks] = {
    "matmul": NodeTasks(_TaskMaker.matmul, (GEMM, REDUCE), buffer=True),
    "einsum": NodeTasks(_TaskMaker.einsum, (STORE, REDUCE), buffer=True),
    "argmax": NodeTasks(_TaskMaker.argmax, (ARGMAX,), buffer=True),
    "concatenate": NodeTasks(_TaskMaker.concatenate, (STORE,), buffer=True),  # one store per operand
    "add": NodeTasks(_TaskMaker.add, (STORE,)),  # sums of strided or padded blocks: one store per block
    "reshape": NodeTasks(_TaskMaker.reshape, (STORE,)),
    "scatter_add": NodeTasks(_TaskMaker.scatter_add, (SCATTER,), buffer=True),
    "cumsum": NodeTasks(_TaskMaker.scan, (SCAN,), buffer=True),  # reads its own earlier elements
    "scan": NodeTasks(_TaskMaker.region, (REGION,), buffer=True),  # a loop region (codegen.llvm.region)
    "cond": NodeTasks(_TaskMaker.region, (REGION,), buffer=True),  # branches: one runs
    "while": NodeTasks(_TaskMaker.region, (REGION,), buffer=True),  # a loop with a run-time trip count
    "cumprod": NodeTasks(_TaskMaker.scan, (SCAN,), buffer=True),
}
REDUCTION_TASKS = NodeTasks(_TaskMaker.reduction, (REDUCE,), buffer=True)
LAPACK_TASKS = NodeTasks(_TaskMaker.lapack, (TaskKind.LAPACK,), buffer=True)
VALUE_TASKS = NodeTasks(_TaskMaker.value, (STORE,))


def node_tasks(op: Op) -> NodeTasks:
    """The row of `op`: its own in `NODE_TASKS`, else a LAPACK task's (`Op.extra["lowering"] == "lapack"`), a
    reduction's or one store of its value."""
    row = NODE_TASKS.get(op.name)
    if row is not None:
        return row
    if op.extra.get("lowering") == "lapack":
        return LAPACK_TASKS
    return REDUCTION_TASKS if op.kind == "reduction" else VALUE_TASKS


def _unslice_leaves(n: Node, M: set) -> list | None:
    """The unslices n is a sum of (at least two; fused adds and unslices of n's shape and dtype), or None.

    n is an add (the "add" row of `NODE_TASKS`); the unslices are named: their parameters are read."""
    if n.dtype.kind != "f":
        return None
    leaves: list = []
    stack = [n]
    while stack:
        x = stack.pop()
        if x.op is n.op and (x is n or (x not in M and x.op.kind == "elementwise")) \
                and x.shape == n.shape and x.dtype == n.dtype:
            stack.extend(x.inputs)
        elif x.op.name == "unslice" and x is not n and x not in M and x.shape == n.shape:
            leaves.append(x)
        else:
            return None
    return leaves if len(leaves) >= 2 else None


def _strided_pieces(n: Node, M: set) -> tuple[int, int, list] | None:
    """(axis, step, [(residue, piece), ...]) when n is a sum of unslices along one axis, all with one
    step > 1, each from its residue (< step) to the end, distinct residues, every other axis whole.

    The inner adds and the unslices must be fused values (not materialized) of n's shape and dtype.
    """
    leaves = _unslice_leaves(n, M) if n.size else None
    if leaves is None:
        return None
    axis = step = None
    pieces: dict[int, Node] = {}
    for u in leaves:
        p = u.params
        bad = [j for j, (s0, e0, st) in enumerate(zip(p["starts"], p["stops"], p["steps"]))
               if not (st == 1 and s0 == 0 and e0 == n.shape[j])]
        if len(bad) != 1:
            return None
        j = bad[0]
        s0, st, length = p["starts"][j], p["steps"][j], n.shape[j]
        if st <= 1 or (axis is not None and (j != axis or st != step)) or not 0 <= s0 < st or s0 in pieces:
            return None
        if u.inputs[0].shape[j] != len(range(s0, length, st)):
            return None
        axis, step = j, st
        pieces[s0] = u.inputs[0]
    return axis, step, sorted(pieces.items(), key=lambda t: t[0])


def _plus_pos_zero(x: Node, M: set) -> bool:
    """Whether x is a fused `a + (+0.0)` with a of x's shape and dtype (the + 0 splat a constant or its broadcast)."""
    if x.op.name != "add" or x in M or len(x.inputs) != 2:
        return False
    a, z = x.inputs
    if a.shape != x.shape or a.dtype != x.dtype:
        return False
    c = z.inputs[0] if z.op.name == "broadcast_to" and z.inputs[0].op.name == "constant" else z
    if c.op.name != "constant":
        return False
    arr = np.asarray(c.attr("value").array)
    return arr.size > 0 and bool(np.all(arr == 0)) and not bool(np.any(np.signbit(arr.real)))


def _pad_pieces(n: Node, M: set) -> tuple[int, list] | None:
    """(axis, [(start, block), ...]) when n is a sum of unit-step unslices of disjoint blocks along one axis.

    The inner adds and the unslices must be fused values (not materialized) of n's shape and dtype.
    """
    leaves = _unslice_leaves(n, M)
    if leaves is None:
        return None
    axis = None
    pieces = []
    for u in leaves:
        p = u.params
        bad = [j for j, (s0, e0, st) in enumerate(zip(p["starts"], p["stops"], p["steps"]))
               if not (st == 1 and s0 == 0 and e0 == n.shape[j])]
        if len(bad) != 1 or p["steps"][bad[0]] != 1 or (axis is not None and bad[0] != axis):
            return None
        axis = bad[0]
        pieces.append((p["starts"][axis], u.inputs[0]))
    pieces.sort(key=lambda t: t[0])
    end = 0
    ok = True
    for s0, x in pieces:
        if s0 < end or x.shape[axis] == 0:
            ok = False
        end = s0 + x.shape[axis]
    if ok and end <= n.shape[axis]:
        return axis, pieces
    return None
