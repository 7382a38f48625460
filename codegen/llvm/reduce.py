"""Reductions: how each accumulates (`REDUCERS`), in registers, in lanes or in memory, and partial results combined.

A `Reducer` gives a reduction's accumulator dtype, identity and combine step (a test fails
when a reduction op of `symgraph.ops.OPS` has none). Float sums and products, whose result
depends on the association, accumulate in `REDUCTION_LANES` lanes along the innermost
reduced loop, combined by a fixed pairwise tree, so their bits do not depend on how LLVM
vectorizes. `ReductionSteps` is the part of the loop-kernel emitter (`loops.KernelEmitter`)
that starts, updates and finishes accumulators; `combine_partials` and
`combine_row_partials` join the per-chunk partial results of a split kernel in chunk order.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ..kernels.tasks import Kernel, Task, TaskKind
from .context import I8, I64, LoweringContext, for_range, is_float, is_signed, ll_type, mem_type

__all__ = ["Reducer", "REDUCERS", "REDUCTION_LANES", "order_matters", "accumulation_lanes", "sum_combine",
           "extreme_identity", "ReductionSteps", "combine_partials", "combine_row_partials"]


class Reducer:
    """How a reduction accumulates: acc_dtype(out dtype), identity, combine(cx, acc, v, dtype, ordered=False).

    `combine` marks float sums and products `reassoc` so that loops of them
    vectorize; ``ordered=True`` leaves the association as written (the
    combination of per-chunk partial results, which must not depend on how
    LLVM rewrites it).
    """

    def __init__(self, acc_dtype: Callable, identity: Callable, combine: Callable, order_matters: bool = False):
        self.acc_dtype = acc_dtype
        self.identity = identity
        self.combine = combine
        # float results depend on the association (sum, prod): they accumulate in lanes (`LoopPlan.lanes`)
        self.order_matters = order_matters


_REASSOC = ("reassoc",)


def sum_combine(cx, acc, v, dtype, ordered=False):
    """acc + v (`reassoc` for floats unless `ordered`; or for bools)."""
    b = cx.builder
    if is_float(dtype):
        return b.fadd(acc, v, flags=() if ordered else _REASSOC)
    if dtype.kind == "b":
        return b.or_(acc, v)
    return b.add(acc, v)


def _prod_combine(cx, acc, v, dtype, ordered=False):
    b = cx.builder
    if is_float(dtype):
        return b.fmul(acc, v, flags=() if ordered else _REASSOC)
    if dtype.kind == "b":
        return b.and_(acc, v)
    return b.mul(acc, v)


def _extreme_combine(greater: bool):
    def combine(cx, acc, v, dtype, ordered=False):  # exact in any order: `ordered` changes nothing
        b = cx.builder
        if is_float(dtype):
            # NaN-propagating max/min (llvm.maximum), vectorizable as a reduction
            return b.call(cx.intrinsic("maximum" if greater else "minimum", acc.type, 2), [acc, v])
        if dtype.kind == "b":
            return b.or_(acc, v) if greater else b.and_(acc, v)
        name = ("s" if is_signed(dtype) else "u") + ("max" if greater else "min")
        return b.call(cx.intrinsic(name, acc.type, 2), [acc, v])

    return combine


def extreme_identity(greater: bool):
    """The identity of max (greater) or min as a function of the dtype: -inf/inf, False/True, the int limits."""

    def ident(dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            return -math.inf if greater else math.inf
        if dtype.kind == "b":
            return not greater
        info = np.iinfo(dtype)
        return info.min if greater else info.max

    return ident


def _sum_acc(dtype):
    # float32 sums accumulate in float64 (more accurate than NumPy's pairwise float32 sum)
    dtype = np.dtype(dtype)
    return np.dtype(np.float64) if dtype == np.float32 else dtype


REDUCERS: dict[str, Reducer] = {
    "sum": Reducer(_sum_acc, lambda d: 0, sum_combine, order_matters=True),
    "prod": Reducer(lambda d: np.dtype(d), lambda d: 1, _prod_combine, order_matters=True),
    "max": Reducer(lambda d: np.dtype(d), extreme_identity(True), _extreme_combine(True)),
    "min": Reducer(lambda d: np.dtype(d), extreme_identity(False), _extreme_combine(False)),
    # argmax is lowered by the loop emitter (a value and an index accumulator)
    "argmax": Reducer(lambda d: np.dtype(np.int64), lambda d: 0, None),
}



def _combine_known(cx, r, a, b, ad):
    """One node of the lanes' combining tree, where None is a lane no element reached (the identity)."""
    if a is None or b is None:
        return b if a is None else a
    return r.combine(cx, a, b, ad, ordered=True)


def order_matters(t: Task) -> bool:
    """Whether reduce task `t`'s result depends on the association (a float sum or product)."""
    r = REDUCERS.get(t.red_op) if t.kind is TaskKind.REDUCE else None
    return r is not None and r.order_matters and is_float(r.acc_dtype(t.node.dtype))


#: Lanes of a float sum or product accumulated in registers (`LoopPlan.lanes`): one AVX-512 vector of
#: float64 accumulators (float32 sums accumulate in float64). Row reductions pay per row for the lanes'
#: start and their pairwise tree: 8 lanes measured faster than 16 or 32 on rows of 64-128 elements
#: (a 1024x128 float32 row sum: 14.3, 17.3 and 19.7 us), and no slower on W1's long sum.
REDUCTION_LANES = 8


def accumulation_lanes(kernel: Kernel, register: bool, dims: list[int], red: frozenset) -> int:
    """`REDUCTION_LANES` when float sums or products of the kernel accumulate in registers along its
    innermost loop (`dims`: the axes of extent > 1, in loop order; `red`: the reduced axes), else 1."""
    return REDUCTION_LANES if register and bool(dims) and dims[-1] in red and any(
        order_matters(t) for t in kernel.tasks) else 1


class ReductionSteps:
    """The accumulators of a loop kernel's reductions: started, updated per element, finished.

    A mixin of `loops.KernelEmitter` (its `cx`, `plan`, `acc`, `red_base`, `partial`, `lane`,
    `store`, `aff`, `ptr`, `buffer_of`, `var_value`, `var_group`).
    """

    def _init_accs(self, tasks: list[Task]) -> None:
        """Store every accumulator's identity (at the start of the reduced loops)."""
        cx = self.cx
        for t in tasks:
            if t.kind is TaskKind.ARGMAX:
                vd = t.value.dtype
                best = self.acc.get(id(t), (None, None))[0] or cx.alloca(ll_type(vd), "best")
                idx = self.acc.get(id(t), (None, None))[1] or cx.alloca(I64, "bestidx")
                cx.builder.store(cx.const(extreme_identity(True)(vd), vd), best)
                cx.builder.store(ir.Constant(I64, 0), idx)
                self.acc[id(t)] = (best, idx)
            else:
                r = REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                if self._in_lanes(t):  # one accumulator per lane
                    W = self.plan.lanes
                    slot = self.acc.get(id(t), (None,))[0] or cx.alloca(ir.ArrayType(ll_type(ad), W), "lanes")
                    for ln in range(W):
                        cx.builder.store(cx.const(r.identity(ad), ad),
                                         cx.builder.gep(slot, [ir.Constant(I64, ln)], source_etype=ll_type(ad)))
                elif self.plan.inner_kept:  # one accumulator per index of the innermost kept loop
                    slot = self.acc.get(id(t), (None,))[0] or [cx.alloca(ll_type(ad), f"acc{j}")
                                                               for j in range(self.plan.inner_kept)]
                    for a in slot:
                        cx.builder.store(cx.const(r.identity(ad), ad), a)
                else:
                    slot = self.acc.get(id(t), (None,))[0] or cx.alloca(ll_type(ad), "acc")
                    cx.builder.store(cx.const(r.identity(ad), ad), slot)
                self.acc[id(t)] = (slot,)

    def _in_lanes(self, t: Task) -> bool:
        """Whether reduce task `t` accumulates in lanes (a float sum or product of a `lanes` kernel)."""
        return self.plan.lanes > 1 and order_matters(t)

    def _finish_accs(self, tasks: list[Task]) -> None:
        """Store every result (or this chunk's partial result), after the reduced loops."""
        cx = self.cx
        b = cx.builder
        if self.plan.inner_kept:
            self._finish_inner_kept(tasks)
            return
        memo: dict = {}
        for ri, t in enumerate(tasks):
            if t.kind is TaskKind.ARGMAX:
                val = b.load(self.acc[id(t)][1], typ=I64)
                od = t.node.dtype
            else:
                r = REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                if self._in_lanes(t):
                    # the lanes combined by a fixed pairwise tree: (l0+l1)+(l2+l3), ...
                    # (lanes no element reached hold the identity: leaving them out changes no bit, since a
                    # lane that took an element is never -0.0 (0.0 + -0.0 is 0.0) and x + 0.0, x * 1.0 are x)
                    slot = self.acc[id(t)][0]
                    used = self.plan.lanes if self.lanes_used is None else self.lanes_used
                    vals = [b.load(b.gep(slot, [ir.Constant(I64, ln)], source_etype=ll_type(ad)), typ=ll_type(ad))
                            if ln < used else None for ln in range(self.plan.lanes)]
                    while len(vals) > 1:
                        vals = [_combine_known(cx, r, vals[i], vals[i + 1], ad) for i in range(0, len(vals), 2)]
                    val = vals[0]
                else:
                    val = b.load(self.acc[id(t)][0], typ=ll_type(ad))
                od = t.node.dtype
                if self.plan.partials:
                    # 8-byte slot ri of this thread's partial results
                    p = b.gep(self.partial, [ir.Constant(I64, ri * 8 // ad.itemsize)], source_etype=ll_type(ad))
                    b.store(val, p)
                    continue
                val = cx.cast(val, ad, od)
            self.store(t.node, t.offset, val, od, memo)

    def _finish_inner_kept(self, tasks: list[Task]) -> None:
        """Store each result of a kernel whose innermost kept loop is unrolled (`LoopPlan.inner_kept`), index by index."""
        cx = self.cx
        b = cx.builder
        gi = len(self.plan.groups) - 1
        for j in range(self.plan.inner_kept):
            self.loopvals[gi] = ir.Constant(I64, j)
            memo: dict = {}
            for t in tasks:
                r = REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                val = cx.cast(b.load(self.acc[id(t)][0][j], typ=ll_type(ad)), ad, t.node.dtype)
                self.store(t.node, t.offset, val, t.node.dtype, memo)

    def reduce_step(self, t: Task, v: ir.Value, memo: dict) -> None:
        """Combine this element's value `v` into reduce task t's accumulator (a register, a lane, or memory)."""
        cx = self.cx
        b = cx.builder
        r = REDUCERS[t.red_op]
        ad = r.acc_dtype(t.node.dtype)
        vv = cx.cast(v, t.value.dtype, ad)
        if self.plan.register:
            slot = self.acc[id(t)][0]
            if self.plan.inner_kept:
                slot = slot[self.inner_j]
            if self._in_lanes(t):  # this element's lane, in order
                slot = b.gep(slot, [self.lane], source_etype=ll_type(ad))
                b.store(r.combine(cx, b.load(slot, typ=ll_type(ad)), vv, ad, ordered=True), slot)
            else:
                # an unrolled innermost kept loop adds each output's values in loop order, as in memory
                b.store(r.combine(cx, b.load(slot, typ=ll_type(ad)), vv, ad, ordered=bool(self.plan.inner_kept)), slot)
        else:
            mt = mem_type(t.node.dtype)
            base = self.red_base.get(id(t))
            p = b.gep(self.ptr[self.buffer_of(t.node)] if base is None else base, [self.aff(t.offset, memo)],
                      inbounds=True, source_etype=mt)
            old = b.load(p, typ=mt)
            if t.node.dtype.kind == "b":
                old = b.icmp_unsigned("!=", old, ir.Constant(I8, 0))
            new = r.combine(cx, cx.cast(old, t.node.dtype, ad), vv, ad)
            new = cx.cast(new, ad, t.node.dtype)
            if t.node.dtype.kind == "b":
                new = b.zext(new, I8)
            b.store(new, p)

    def argmax_step(self, t: Task, v: ir.Value, memo: dict) -> None:
        """Keep the first maximum of argmax task t and its index along the reduced axis."""
        b = self.cx.builder
        best, bidx = self.acc[id(t)]
        vd = t.value.dtype
        cur = b.load(best, typ=ll_type(vd))
        if is_float(vd):
            take = b.or_(b.fcmp_ordered(">", v, cur),
                         b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", cur, cur)))
        elif is_signed(vd):
            take = b.icmp_signed(">", v, cur)
        else:
            take = b.icmp_unsigned(">", v, cur)
        (ax,) = tuple(t.red_axes)
        pos = self.var_value(ax, memo) if ax in self.var_group else ir.Constant(I64, 0)
        # the first element always initializes (all -inf / INT_MIN inputs keep index 0)
        b.store(b.select(take, v, cur), best)
        b.store(b.select(take, pos, b.load(bidx, typ=I64)), bidx)


# ----- partial results of split kernels -----


def combine_row_partials(cx: LoweringContext, b: ir.IRBuilder, k: Kernel, partial: ir.Value, T: int,
                          inner: int, ptr_of: Any) -> None:
    """After a `row_partials` split: out[j] = combine of the T threads' partial[t][r][j], per reduction r."""
    reds = [t for t in k.tasks if t.kind is TaskKind.REDUCE]
    R = len(reds)
    for ri, t in enumerate(reds):
        r = REDUCERS[t.red_op]
        dt = t.node.dtype
        ad = r.acc_dtype(dt)
        mt = mem_type(dt)
        dst = ptr_of(t.node)

        def body(j: ir.Value, ri: int = ri, t: Any = t, r: Any = r, dt: Any = dt, ad: Any = ad, mt: Any = mt,
                 dst: Any = dst) -> None:
            acc = None
            for th in range(T):
                base = b.gep(partial, [ir.Constant(I64, (th * R + ri) * inner * 8)], source_etype=I8)
                v = b.load(b.gep(base, [j], inbounds=True, source_etype=mt), typ=mt)
                if dt.kind == "b":
                    v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
                v = cx.cast(v, dt, ad)
                acc = v if acc is None else r.combine(cx, acc, v, ad, ordered=True)
            val = cx.cast(acc, ad, dt)
            if dt.kind == "b":
                val = b.zext(val, I8)
            b.store(val, b.gep(dst, [j], inbounds=True, source_etype=mt))

        for_range(b, ir.Constant(I64, 0), ir.Constant(I64, inner), body, name=f"rp{ri}")


def combine_partials(cx: LoweringContext, b: ir.IRBuilder, red_tasks: list[Task], partial: ir.Value, T: int, R: int,
                     ptr_of: Callable[[Any], ir.Value]) -> None:
    """After a `partials` split: each full reduction = combine of the T chunks' 8-byte partial slots, in order."""
    for ri, t in enumerate(red_tasks):
        r = REDUCERS[t.red_op]
        ad = r.acc_dtype(t.node.dtype)
        ty = ll_type(ad)
        acc = None
        for th in range(T):
            p = b.gep(partial, [ir.Constant(I64, (th * R + ri) * 8 // ad.itemsize)], source_etype=ty)
            v = b.load(p, typ=ty)
            acc = v if acc is None else r.combine(cx, acc, v, ad, ordered=True)
        val = cx.cast(acc, ad, t.node.dtype)
        mt = mem_type(t.node.dtype)
        dst = b.gep(ptr_of(t.node), [ir.Constant(I64, t.offset.const)], inbounds=True, source_etype=mt)
        if t.node.dtype.kind == "b":
            val = b.zext(val, I8)
        b.store(val, dst)
