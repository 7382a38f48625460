"""Loop kernels: the loop plan (order, merged axes, lanes) and the emitter of one kernel function.

A loop kernel is emitted as `void kern(ptr noalias bufs..., i64 lo, i64 hi, ptr partial)`:
its buffers as pointer arguments (every one `noalias`: distinct buffers never overlap; a
donated input and the output written into it are one parameter), the range [lo, hi) of its
outer loop, and the slots of its partial results when it is split into chunks. Addressing
is by GEP only (no ptrtoint/inttoptr). Each task kind lowers by one per-element step of the
loop body, in `ELEMENT_STEPS` (the reductions' steps are in `reduce.ReductionSteps`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from symgraph.errors import UnsupportedOpError

from ..kernels.affine import Aff
from ..kernels.expr import Expr
from ..kernels.tasks import Kernel, Task, TaskKind, kernel_exprs, task_affs
from .context import I8, I64, PTR, VOID, LoweringContext, for_range, is_float, mem_type
from .emitters import EMITTERS
from .reduce import REDUCERS, ReductionSteps, accumulation_lanes, sum_combine

__all__ = ["LoopPlan", "KernelEmitter", "ELEMENT_STEPS", "lower_loop_kernel", "kernel_signature", "UNROLL_LANE_ELEMENTS",
           "UNROLL_LANE_COST", "INNER_KEPT_UNROLL"]

#: The last round of a reduced inner loop (its elements past the full rounds of `REDUCTION_LANES`: a whole
#: short row) is emitted element by element (`_lane_loops`) when it has at most this many: a loop of 3
#: over 8 lanes in memory cost W9's sums over (P, 2, 3) arrays 20-60 ns per row. The full rounds stay a
#: loop, which LLVM vectorizes: row sums ``sum(x * x, axis=1)`` of n elements, one thread, CPU time per
#: element, tail loop -> tail unrolled: n = 5: 2.6 -> 0.26 ns, 7: 1.8 -> 0.26 ns; unrolling whole rows of
#: n >= 8 instead was slower (8: 0.30 -> 2.1 ns, 10: 0.22 -> 2.2 ns; W8 at d = 10, K = 200 33% slower).
UNROLL_LANE_ELEMENTS = 7
#: ... when its elements times the kernel's body cost (`expr_weight` sum) are at most this.
UNROLL_LANE_COST = 4096
#: Largest innermost kept axis emitted index by index around reduced middle axes (`LoopPlan.inner_kept`).
#: ``sum(x * y, axis=1)`` of (200, 1000, d), one thread, CPU time per element, in memory -> in registers:
#: d = 2: 0.41 -> 0.19 ns, 3: 2.3 -> 0.19, 5: 1.8 -> 0.23, 6: 1.4 -> 0.37, 7: 1.3 -> 0.47; from 8 on the
#: memory form is faster (8: 0.30 -> 2.1 ns, 10: 0.87 -> 2.3 ns: the stride-d loads do not vectorize).
INNER_KEPT_UNROLL = 7


class LoopPlan:
    """Loop order and axis merging of a loop kernel.

    Attributes:
        groups: loops from outer to inner; each a list of domain axes merged
            into one loop (row-major within the group).
        register: reductions accumulate in registers (reduced loops inner).
        parallel: the outer loop is split across threads.
        partials: full reduction split across threads (per-thread partial results).
        row_partials: a memory-mode reduction over the outer axes that keeps
            the innermost one (column sums such as a bias gradient,
            ``sum(x, 0)``) split across threads over its outer (reduced)
            loop: each thread accumulates its rows into its own vectors of
            partial results (the `partial` argument: per reduction, the
            inner trip count of 8-byte slots), which the caller combines.
        lanes: 1, or `reduce.REDUCTION_LANES` when float sums or products accumulate
            in registers along the innermost (reduced) loop: element j of
            that loop is added to lane j mod lanes, each lane in order, and
            the lanes are combined by a fixed pairwise tree (no `reassoc`:
            the association is written in the IR, whatever LLVM vectorizes).
        chunks: None, or the fixed ranges of the outer loop that a reduction
            kernel always runs as, one call each, whatever the thread count
            (`module._decide_chunks`); with `partials` or `row_partials`
            each range has its own partial results, combined in range order.
    """

    def __init__(self, kernel: Kernel):
        dom = kernel.domain
        red = kernel.red_axes
        dims = [i for i, d in enumerate(dom) if d > 1]
        self.has_red = any(t.kind.reduces for t in kernel.tasks)
        has_argmax = any(t.kind is TaskKind.ARGMAX for t in kernel.tasks)
        self.register = self.has_red and (has_argmax or (bool(dims) and dims[-1] in red) or not dims)
        # a reduction over middle axes that keeps a short innermost one (a sum over points of (K, n, d)
        # values with d = 2 or 10): the innermost loop is emitted index by index, its accumulators
        # registers, instead of accumulating in memory (`inner_kept`: its extent)
        self.inner_kept = _inner_kept(kernel, dims, red) if self.has_red and not self.register else 0
        if self.inner_kept:
            self.register = True
        if self.inner_kept:
            order = dims
        elif self.register:
            order = [d for d in dims if d not in red] + [d for d in dims if d in red]
        else:
            order = dims
        # float sums and products in registers accumulate in REDUCTION_LANES lanes (`KernelEmitter`)
        self.lanes = accumulation_lanes(kernel, self.register, dims, red)
        # every affine form of the body (only axes next to each other may merge: none for one axis or none)
        affs = [a for t in kernel.tasks for a in task_affs(t)] if len(order) > 1 else []
        var_of = {i: Expr.var(i, dom[i]) for i in dims}
        groups: list[list[int]] = []
        for ax in order:
            if groups:
                p = groups[-1][-1]
                # Reduced axes merge only when the inner one fills whole lane rounds, so that an element's
                # lane (its innermost index mod `lanes`) and each lane's order are those of the unmerged
                # nest: the association of a sum does not depend on which other tasks share the kernel.
                lanes_ok = ax not in red or dom[ax] % self.lanes == 0
                if (p in red) == (ax in red) and lanes_ok and all(a.coeff(var_of[p]) == a.coeff(var_of[ax]) * dom[ax]
                                                                 for a in affs):
                    groups[-1].append(ax)
                    continue
            groups.append([ax])
        self.groups = groups
        self.extents = [int(np.prod([dom[a] for a in g], dtype=np.int64)) for g in groups]
        self.n_kept = sum(1 for g in groups if g[0] not in red)
        if self.inner_kept:  # the kept loops around the reduced ones (the innermost kept loop is inside them)
            self.n_kept -= 1
        self.parallel = False
        self.partials = False
        self.row_partials = False
        self.chunks: list[tuple[int, int]] | None = None



def _inner_kept(kernel: Kernel, dims: list, red: frozenset) -> int:
    """The extent of the innermost axis when a kernel's reductions may accumulate in registers per index of it.

    True of loops ordered kept axes (at least one), reduced axes, then one kept innermost axis of at
    most `INNER_KEPT_UNROLL` elements, with only stores and reductions (no argmax: its index is the
    reduced loop's). Each output element is then reduced in loop order, as in memory, so the bits do not
    change; the kept outer loop stays outside, so the kernel splits across threads like a row sum.
    """
    if len(dims) < 3 or dims[-1] in red or kernel.domain[dims[-1]] > INNER_KEPT_UNROLL:
        return 0
    if any(t.kind not in (TaskKind.STORE, TaskKind.REDUCE) for t in kernel.tasks):
        return 0
    mid = dims[:-1]
    n_out = sum(1 for d in mid if d not in red)
    if n_out == 0 or any(d in red for d in mid[:n_out]) or not all(d in red for d in mid[n_out:]):
        return 0
    return int(kernel.domain[dims[-1]])


class KernelEmitter(ReductionSteps):
    """Emits one loop kernel as `void kern(ptr noalias bufs..., i64 lo, i64 hi, ptr partial)`."""

    def __init__(self, cx: LoweringContext, kernel: Kernel, index: int, buffer_of: Callable[[Any], Any],
                 plan: LoopPlan):
        self.cx = cx
        self.kernel = kernel
        self.plan = plan
        self.buffer_of = buffer_of
        bufs = self.buffers = kernel_buffers(kernel, buffer_of)
        fnty = ir.FunctionType(VOID, [PTR] * len(bufs) + [I64, I64, PTR])
        self.fn = ir.Function(cx.module, fnty, f"kern_{index}")
        self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        if cx.use_vmath and hasattr(cx.vmath, "apply_function_attributes"):
            cx.vmath.apply_function_attributes(self.fn)  # prefer-vector-width=512 on AVX-512 hosts
        for a in self.fn.args[:len(bufs)]:
            a.add_attribute("noalias")
        self.fn.args[-1].add_attribute("noalias")
        self.ptr = {k: a for k, a in zip(bufs, self.fn.args)}
        self.lo, self.hi, self.partial = self.fn.args[-3:]
        self.body_cost = sum(e.w for e in kernel_exprs(kernel))
        self.lanes_used: int | None = None  # lanes a short unrolled row reaches, when fewer than all (`_lane_loops`)
        self.inner_j: int | None = None  # the index of the innermost kept loop being emitted (`LoopPlan.inner_kept`)
        self.loopvals: dict[int, ir.Value] = {}  # group index -> loop value
        self.lane: ir.Value | None = None  # the lane of the element being emitted (`_lane_loops`)
        self.var_group: dict[int, tuple[int, int]] = {}  # axis -> (group, multiplier within group)
        dom = kernel.domain
        for gi, g in enumerate(plan.groups):
            mult = 1
            for ax in reversed(g):
                self.var_group[ax] = (gi, mult)
                mult *= dom[ax]

    # -- expressions --

    def aff(self, a: Aff, memo: dict) -> ir.Value:
        b = self.cx.builder
        total: ir.Value | None = None
        per_group: dict[int, int] = {}
        dyn = []
        for at, c in a.terms:
            if at.op == "var" and at.attrs[0] in self.var_group:
                gi, mult = self.var_group[at.attrs[0]]
                # within a merged group the coefficients are proportional (checked by LoopPlan)
                cg = c // mult
                if gi in per_group and per_group[gi] != cg:
                    raise AssertionError("inconsistent merged loop coefficients")
                per_group[gi] = cg
            else:
                dyn.append((at, c))

        def addterm(v: ir.Value) -> None:
            nonlocal total
            total = v if total is None else b.add(total, v, flags=("nsw",))

        for gi, cg in sorted(per_group.items()):
            v = self.loopvals[gi]
            addterm(v if cg == 1 else b.mul(v, ir.Constant(I64, cg), flags=("nsw",)))
        for at, c in dyn:
            v = self.expr(at, memo)
            addterm(v if c == 1 else b.mul(v, ir.Constant(I64, c), flags=("nsw",)))
        if a.const or total is None:
            addterm(ir.Constant(I64, a.const))
        return total

    def var_value(self, axis: int, memo: dict) -> ir.Value:
        gi, mult = self.var_group[axis]
        b = self.cx.builder
        v = self.loopvals[gi]
        if mult > 1:
            v = b.udiv(v, ir.Constant(I64, mult))
        if len(self.plan.groups[gi]) > 1 and self.plan.groups[gi][0] != axis:
            v = b.urem(v, ir.Constant(I64, self.kernel.domain[axis]))
        return v

    def expr(self, e: Expr, memo: dict) -> ir.Value:
        v = memo.get(e)
        if v is not None:
            return v
        # iterative post-order over the DAG (long fused chains must not recurse): a stack of Exprs,
        # each one whose inputs are pushed followed by None and itself (no tuple per entry)
        stack: list = [e]
        pop, push = stack.pop, stack.append
        var_group = self.var_group
        emitters = EMITTERS
        emit_one = self._emit_one
        while stack:
            x = pop()
            if x is None:
                x = pop()
                if x in memo:
                    continue
                fn = emitters.get(x.op)
                if fn is not None:  # an elementwise op on Exprs emitted already (most of a body)
                    memo[x] = fn(self.cx, x, [memo[a] for a in x.args])
                else:
                    memo[x] = emit_one(x, memo)
                continue
            if x in memo:
                continue
            push(x)
            push(None)
            deps = x.deps  # the arguments when all are Exprs
            if deps is not x.args:
                # Expr arguments, then the atoms of affine ones; loop variables inside affine
                # forms are read directly
                deps = [a for a in x.args if isinstance(a, Expr)]
                for a in x.args:
                    if isinstance(a, Aff):
                        deps.extend(a.atoms())
                deps = [d for d in deps if not (d.op == "var" and d.attrs[0] in var_group)
                        or any(d is a for a in x.args)]
            for d in deps:
                if d not in memo:
                    push(d)
        return memo[e]

    def _emit_one(self, e: Expr, memo: dict) -> ir.Value:
        cx = self.cx
        b = cx.builder
        op = e.op
        if op == "var":
            axis = e.attrs[0]
            if axis in self.var_group:
                return self.var_value(axis, memo)
            return ir.Constant(I64, 0)
        if op == "const":
            c = cx.expr_consts.get(e)
            if c is None:  # one ir.Constant per constant Expr, shared by every kernel that reads it
                c = cx.expr_consts[e] = cx.const(e.const_value(), e.dtype)
            return c
        if op == "index":
            return self.aff(e.args[0], memo)
        if op == "load":
            node = e.attrs[0]
            sub = self.substitutes.get((node, e.args[0])) if self.substitutes else None
            if sub is not None:
                return self.expr(sub, memo)
            ptr = self.ptr[self.buffer_of(node)]
            mt = mem_type(e.dtype)
            p = b.gep(ptr, [self.aff(e.args[0], memo)], inbounds=True, source_etype=mt)
            v = b.load(p, typ=mt, align=mt.width // 8 if isinstance(mt, ir.IntType) else e.dtype.itemsize)
            if e.dtype.kind == "b":
                v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
            return v
        fn = EMITTERS.get(op)
        if fn is None:
            raise UnsupportedOpError(f"codegen: no emitter for op {op!r}")
        args = [memo[a] for a in e.args]
        return fn(cx, e, args)

    def store(self, node: Any, off: Aff, value: ir.Value, dtype: np.dtype, memo: dict) -> None:
        b = self.cx.builder
        mt = mem_type(dtype)
        p = b.gep(self.ptr[self.buffer_of(node)], [self.aff(off, memo)], inbounds=True, source_etype=mt)
        if dtype.kind == "b":
            value = b.zext(value, I8)
        b.store(value, p, align=dtype.itemsize)

    # -- the kernel --

    def emit(self) -> ir.Function:
        cx = self.cx
        entry = self.fn.append_basic_block("entry")
        cx.alloca_builder = ir.IRBuilder(entry)
        body_start = self.fn.append_basic_block("start")
        b = ir.IRBuilder(body_start)
        cx.builder = b
        k = self.kernel
        plan = self.plan
        # values stored by this kernel, reused when another task reads them at the same index
        self.substitutes = {}
        for t in k.tasks:
            if t.kind is TaskKind.STORE and not t.pieced:
                self.substitutes[(t.node, t.offset)] = t.value
        red_tasks = [t for t in k.tasks if t.kind.reduces]
        self.acc: dict[int, tuple] = {}
        # row_partials: memory-mode reductions accumulate into this thread's partial vectors
        self.red_base: dict[int, ir.Value] = {}
        if plan.row_partials:
            inner = plan.extents[-1]
            for ri, t in enumerate(t for t in k.tasks if t.kind is TaskKind.REDUCE):
                self.red_base[id(t)] = b.gep(self.partial, [ir.Constant(I64, ri * inner * 8)], source_etype=I8)
        # memory-mode reductions and scatters: initialize their output buffers first
        for t in k.tasks:
            if t.kind is TaskKind.REDUCE and not plan.register:
                self._fill(t.node, REDUCERS[t.red_op].identity(t.node.dtype), self.red_base.get(id(t)))
            elif t.kind is TaskKind.SCATTER:
                self._fill(t.node, 0)
        groups = plan.groups
        n_kept = plan.n_kept if plan.register else len(groups)
        if k.size == 0:
            # empty domain: reductions give their identity, scatters zeros
            for t in k.tasks:
                if t.kind is TaskKind.REDUCE and plan.register:
                    self._fill(t.node, REDUCERS[t.red_op].identity(t.node.dtype))
        else:
            self._levels(0, n_kept, red_tasks)
        cx.builder.ret_void()
        cx.alloca_builder.branch(body_start)
        cx.in_loop = False
        return self.fn

    def _levels(self, li: int, n_kept: int, red_tasks: list) -> None:
        """Emit loop level li (and everything inside it)."""
        plan = self.plan
        cx = self.cx
        if plan.register and li == n_kept and red_tasks:
            self._init_accs(red_tasks)
        if li == len(plan.groups):
            cx.in_loop = bool(plan.groups)
            self._body()
        else:
            lo = self.lo if li == 0 else ir.Constant(I64, 0)
            hi = self.hi if li == 0 else ir.Constant(I64, plan.extents[li])

            def inner(i: ir.Value) -> None:
                self.loopvals[li] = i
                self._levels(li + 1, n_kept, red_tasks)

            if plan.inner_kept and li == len(plan.groups) - 1:
                for j in range(plan.inner_kept):  # each index with its own accumulators (`reduce`)
                    self.inner_j = j
                    inner(ir.Constant(I64, j))
                self.inner_j = None
            elif plan.lanes > 1 and li == len(plan.groups) - 1:
                self._lane_loops(lo, hi, inner, li)
            else:
                for_range(cx.builder, lo, hi, inner, name=f"l{li}")
        if plan.register and li == n_kept and red_tasks:
            cx.in_loop = False
            self._finish_accs(red_tasks)

    def _lane_loops(self, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None], li: int) -> None:
        """The innermost loop [lo, hi) as rounds of `plan.lanes` elements, element lo + r*W + l in lane l.

        Full rounds first (an inner loop over the lanes, which LLVM vectorizes
        as plain independent updates), then the last partial round; the body
        is emitted for both. Lane l's accumulators see their elements in
        loop order (`_body`, `self.lane`). The last round of an inner loop, when
        short (at most `UNROLL_LANE_ELEMENTS` elements, `UNROLL_LANE_COST` in
        all), is emitted element by element instead, the same lanes in the same
        order; in a row shorter than the lanes, lanes no element reaches
        (`lanes_used`) are left out of the combining tree, which changes no bit
        (`reduce.ReductionSteps._finish_accs`).
        """
        b = self.cx.builder
        W = self.plan.lanes
        n = self.plan.extents[li]
        # an inner loop has a constant trip count: a short last round (all of a short row, such as a sum
        # over 3 coordinates) is emitted element by element with constant lanes, so the lanes are
        # registers and the kept loop around is innermost (LLVM vectorizes it)
        tail = n % W if li > 0 else W
        unroll = 0 < tail <= UNROLL_LANE_ELEMENTS and tail * max(self.body_cost, 1) <= UNROLL_LANE_COST
        if unroll and n < W:
            for j in range(n):
                self.lane = ir.Constant(I64, j)
                body(ir.Constant(I64, j))
            self.lane = None
            self.lanes_used = n
            return
        w = ir.Constant(I64, W)
        rounds = b.udiv(b.sub(hi, lo), w)
        full_end = b.add(lo, b.mul(rounds, w))

        def one_round(r: ir.Value) -> None:
            base = self.cx.builder.add(lo, self.cx.builder.mul(r, w))

            def lane(ln: ir.Value) -> None:
                self.lane = ln
                body(self.cx.builder.add(base, ln))

            for_range(self.cx.builder, ir.Constant(I64, 0), w, lane, name=f"lane{li}")

        for_range(b, ir.Constant(I64, 0), rounds, one_round, name=f"round{li}")
        if unroll:
            for j in range(tail):
                self.lane = ir.Constant(I64, j)
                body(ir.Constant(I64, n - tail + j))
            self.lane = None
            return

        def last(ln: ir.Value) -> None:
            self.lane = ln
            body(self.cx.builder.add(full_end, ln))

        for_range(self.cx.builder, ir.Constant(I64, 0), self.cx.builder.sub(hi, full_end), last, name=f"tail{li}")
        self.lane = None

    def _fill(self, node: Any, value: Any, base: ir.Value | None = None) -> None:
        b = self.cx.builder
        mt = mem_type(node.dtype)
        c = self.cx.const(value, node.dtype)
        if node.dtype.kind == "b":
            c = ir.Constant(I8, int(bool(value)))
        ptr = self.ptr[self.buffer_of(node)] if base is None else base

        def body(i: ir.Value) -> None:
            b2 = self.cx.builder
            b2.store(c, b2.gep(ptr, [i], inbounds=True, source_etype=mt), align=node.dtype.itemsize)

        for_range(b, ir.Constant(I64, 0), ir.Constant(I64, node.size), body, name="fill")
    def _body(self) -> None:
        memo: dict = {}
        k = self.kernel
        vals = [self.expr(t.value, memo) for t in k.tasks]
        # all loads happen before any store (donated buffers are updated in place)
        steps = ELEMENT_STEPS
        for t, v in zip(k.tasks, vals):
            steps[t.kind](self, t, v, memo)

    def store_step(self, t: Task, v: ir.Value, memo: dict) -> None:
        """A store task: this element's value at its offset."""
        self.store(t.node, t.offset, v, t.node.dtype, memo)

    def scatter_step(self, t: Task, v: ir.Value, memo: dict) -> None:
        """A scatter task: add this element's value at its (data-dependent) offset."""
        cx = self.cx
        b = cx.builder
        mt = mem_type(t.node.dtype)
        p = b.gep(self.ptr[self.buffer_of(t.node)], [self.aff(t.offset, memo)], inbounds=True, source_etype=mt)
        old = b.load(p, typ=mt)
        if t.node.dtype.kind == "b":
            new = b.zext(b.or_(b.icmp_unsigned("!=", old, ir.Constant(I8, 0)), v), I8)
        else:
            new = sum_combine(cx, old, v, t.node.dtype) if not is_float(t.node.dtype) else b.fadd(old, v)
        b.store(new, p)


    def scan_step(self, t: Task, v: ir.Value, memo: dict) -> None:
        """A scan task: this element's value combined (`red_op` sum or prod) with the result one stride back
        (none at the axis's start)."""
        cx = self.cx
        b = cx.builder
        mt = mem_type(t.node.dtype)
        stride, length = t.scan
        base = self.ptr[self.buffer_of(t.node)]
        off = self.aff(t.offset, memo)
        pos = b.urem(b.udiv(off, ir.Constant(I64, max(stride, 1))), ir.Constant(I64, max(length, 1)))
        first = b.icmp_unsigned("==", pos, ir.Constant(I64, 0))
        prev_off = b.select(first, off, b.sub(off, ir.Constant(I64, stride)))
        prev = b.load(b.gep(base, [prev_off], inbounds=True, source_etype=mt), typ=mt)
        dt = t.node.dtype
        if t.red_op == "prod":
            new = b.fmul(prev, v) if is_float(dt) else b.mul(prev, v)
        else:
            new = sum_combine(cx, prev, v, dt) if not is_float(dt) else b.fadd(prev, v)
        b.store(b.select(first, v, new), b.gep(base, [off], inbounds=True, source_etype=mt))


#: How each task kind of a loop kernel lowers: its step in the loop body, `step(emitter, task, value, memo)`
#: (tests/test_codegen.py checks every loop kind of `TaskKind` has one; products lower at the entry,
#: `codegen.llvm.module.KERNEL_CALLS`).
ELEMENT_STEPS: dict[TaskKind, Callable[[KernelEmitter, Task, ir.Value, dict], None]] = {
    TaskKind.STORE: KernelEmitter.store_step,
    TaskKind.SCATTER: KernelEmitter.scatter_step,
    TaskKind.SCAN: KernelEmitter.scan_step,
    TaskKind.REDUCE: KernelEmitter.reduce_step,
    TaskKind.ARGMAX: KernelEmitter.argmax_step,
}


def kernel_buffers(kernel: Kernel, buffer_of: Callable[[Any], Any]) -> list:
    """The distinct buffers a loop kernel touches (its function's pointer arguments, in order): loads and stores."""
    bufs: list = []
    seen = set()
    for t in kernel.tasks:
        for e in t.loads:
            k = buffer_of(e.attrs[0])
            if k not in seen:
                seen.add(k)
                bufs.append(k)
        k = buffer_of(t.node)
        if k not in seen:
            seen.add(k)
            bufs.append(k)
    return bufs


def kernel_key(kernel: Kernel, plan: LoopPlan, buffer_of: Callable[[Any], Any]) -> tuple | None:
    """What a loop kernel's function depends on, with its nodes and buffers numbered in order of appearance.

    Two kernels with the same key lower to the same function text (name aside), so the second need
    not be emitted (`module._emit_loop_kernels`): the layers of a deep network lower once per
    distinct body. The key holds the kernel's kind, domain, reduced axes and size, its loop plan
    (groups, lanes, threading, chunks), every Expr of every task in the order the tasks list them
    (op, arguments as numbers of earlier Exprs and affine forms as (number, coefficient) terms in
    their stored order, attrs with nodes replaced by their numbers, dtype, range), and per node its
    dtype, shape and the number of its buffer (all the emitter reads of a node: not its op or attrs,
    whose work is in the Exprs); per task every field. None when some
    part is not hashable or an Expr refers to one not listed (then the kernel is emitted and
    compared by its text as before).
    """
    from symgraph.ir import Node

    nodes: dict = {}
    bufs: dict = {}
    exprs: dict = {}
    out: list = []

    def node(n: Node) -> int:
        i = nodes.get(n)
        if i is None:
            i = nodes[n] = len(nodes)
            r = buffer_of(n) if n in buffered else None
            b = bufs.setdefault(r, len(bufs)) if r is not None else -1
            out.append(("node", n.dtype.str, n.shape, b))  # lowering reads a node's dtype, shape and buffer
        return i

    def canon(x: Any) -> Any:
        if isinstance(x, Node):
            return ("node", node(x))
        if isinstance(x, Expr):
            return ("expr", exprs[x])
        if isinstance(x, Aff):
            return ("aff", tuple((exprs[a], c) for a, c in x.terms), x.const)
        if isinstance(x, tuple):
            return tuple(canon(v) for v in x)
        if isinstance(x, (list, dict, set)):
            raise TypeError("unhashable")
        return x

    buffered = _BufferedNodes(buffer_of)
    number = exprs.__getitem__
    try:
        for t in kernel.tasks:
            for e in t.exprs:
                if e not in exprs:
                    args = e.args
                    # arguments that are all Exprs (most of a large body): their numbers, a tuple of
                    # ints (other arguments canonicalize to tuples, so the two never meet)
                    ca = tuple(map(number, args)) if e.deps is args else canon(tuple(args))
                    item = (e.op, ca, canon(tuple(e.attrs)) if e.attrs else (), e.dtype.str, e.rng)
                    exprs[e] = len(exprs)
                    out.append(item)
            out.append(("task", t.kind.value, node(t.node), t.domain, tuple(sorted(t.red_axes)), canon(t.value),
                        canon(t.offset), t.red_op, canon(t.scan), t.piece, t.pieced, t.late, t.gemm is None))
        key = (kernel.kind.value, kernel.domain, tuple(sorted(kernel.red_axes)), kernel.size, tuple(out),
               plan.has_red, plan.register, plan.lanes, tuple(map(tuple, plan.groups)), tuple(plan.extents),
               plan.n_kept, plan.parallel, plan.partials, plan.row_partials,
               tuple(plan.chunks) if plan.chunks is not None else None)
        hash(key)
    except (KeyError, TypeError):
        return None
    return key


def kernel_signature(kernel: Kernel, plan: LoopPlan) -> tuple:
    """A cheap necessary condition for equal `kernel_key`s: kind, domain, reduced axes, per task its
    kind, number of Exprs and a hash of its constants (in order), and the loop plan. Kernels with equal keys have equal signatures, so
    `module._emit_loop_kernels` computes keys only for kernels whose signature another one shares
    (on a large scalar program every kernel differs, and its keys cost a walk of every body)."""
    return (kernel.kind.value, kernel.domain, tuple(sorted(kernel.red_axes)),
            tuple((t.kind.value, len(t.exprs), hash(tuple([e.attrs for e in t.exprs if e.op == "const"])))
                  for t in kernel.tasks), plan.lanes, tuple(map(tuple, plan.groups)),
            plan.parallel, plan.partials, plan.row_partials, tuple(plan.chunks) if plan.chunks is not None else None)


class _BufferedNodes:
    """`n in buffered`: whether node n has a buffer (`buffer_of` knows it)."""

    def __init__(self, buffer_of: Callable[[Any], Any]):
        self.buffer_of = buffer_of

    def __contains__(self, n: Any) -> bool:
        try:
            self.buffer_of(n)
        except KeyError:
            return False
        return True


def lower_loop_kernel(cx: LoweringContext, kernel: Kernel, index: int, buffer_of: Callable, plan: LoopPlan
                      ) -> KernelEmitter:
    """Emit kernel `index` as an internal function; returns its emitter (function and buffer list)."""
    ke = KernelEmitter(cx, kernel, index, buffer_of, plan)
    ke.emit()
    return ke
