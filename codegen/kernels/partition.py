"""The partitioner: a scheduled graph split into kernels over the loop-body IR.

Every graph value is either *materialized* (it gets a buffer: an argument, a
constant, an output or an arena slot) or *fused* (recomputed inside the loop
of each kernel that reads it). Elementwise chains and the reductions that
consume them become one loop nest; layout ops (broadcast_to, transpose,
reshape, slice, expand_dims, squeeze, unslice, gather) become index
arithmetic, never materialized copies; matmul is its own kernel (a BLAS call);
concatenate and scatter_add write their buffer from one loop per operand.

The plan, for a node read by several kernels, is to recompute it when it is
cheap and to materialize it when it is expensive (a transcendental, a
division), and likewise for expensive values broadcast along a loop. Rounds
repeat until nothing new is materialized: build the tasks (`node_tasks`), group
them into kernels (`_Partitioner.group`), cap the size of loop bodies
(`_Partitioner.split`, `cut`) and materialize expensive shared values
(`_Partitioner.refine`); then independent products are paired (`pairing`).
"""

from __future__ import annotations

import numpy as np

from symgraph.errors import UnsupportedOpError
from symgraph.ir import Graph, Node, meta
from symgraph.passes.cost import EXPENSIVE
from symgraph.passes.cost import weight as _cost_of_op

from .affine import Aff
from .body import LAYOUTS, BodyBuilder, uniform_const
from .cut import cut_task
from .expr import Expr, expr_weight, release_session
from .node_tasks import make_tasks, node_tasks
from .pairing import gemm_view, pair_gemms, plan_accumulation
from .tasks import Kernel, KernelKind, Program, Task, TaskKind, kernel_exprs, task_loads, task_reads

__all__ = ["MAX_KERNEL_BUFFERS", "MAX_KERNEL_COST", "MAX_SCALAR_KERNEL_COST", "LARGE_SCALAR_PROGRAM_COST", "LARGE_SCALAR_KERNEL_COST",
           "kernel_cost_cap", "partition"]

# What an op is comes from its record (symgraph.ops.Op): `view` (index-only layout ops, composed
# into an affine view), `identity_of` (the value is an input: fused away entirely) and the cost
# model's weights (symgraph.passes.cost; values of weight >= EXPENSIVE read by several kernels are
# materialized).
_EXPENSIVE = EXPENSIVE

#: Largest estimated cost (sum of `expr_weight` over a loop body: 1 per cheap op, 3 per division,
#: 8 per transcendental) of one fused loop kernel. Bigger bodies are cut by materializing
#: intermediate values (`_Partitioner.split`): LLVM's optimizer is superlinear in function size,
#: so one kernel of thousands of ops compiles in seconds, while the extra buffer traffic of a cut
#: is negligible next to hundreds of ops per element.
MAX_KERNEL_COST = 1024
#: The cap for loop kernels of one element (scalar programs): without a loop to vectorize,
#: LLVM's time grows about linearly with the straight-line body (a 1000-step scalar chain with
#: its gradient, cost ~20000, compiles in 0.16 s as one function or as 30), while one function
#: lets LLVM share work that a cut recomputes (sin(x) in the value and the gradient) and merge
#: sin/cos of one argument into one sincos call.
MAX_SCALAR_KERNEL_COST = 32768
#: Scalar programs whose loop tasks cost more than this in all (before any cut) are cut at
#: `LARGE_SCALAR_KERNEL_COST` instead: they become several kernels either way, and LLVM's code
#: generation of one function of cost 32768 is superlinear when its transcendentals are inlined
#: polynomials (tanh, exp). On the value and gradient of `bench.scale.mixed_chain`: 20,000 nodes
#: (3 kernels of cost 32768) LLVM 5.2 s -> 1.8 s; 100,000 nodes partitioning 21 s -> 12 s and LLVM
#: 6.2 s -> 2.3 s; 200,000 nodes LLVM 19 s -> 6.6 s. Smaller programs are partitioned as before.
LARGE_SCALAR_PROGRAM_COST = 2 * MAX_SCALAR_KERNEL_COST
LARGE_SCALAR_KERNEL_COST = 8192
#: Most distinct buffers (read or written) of one loop kernel. Copies cost nothing in the cost
#: model, so without this cap the stack of L weight matrices into a scan's xs (and the unstack of
#: their gradients) was one loop with L loads and L stores per element and L pointer arguments,
#: which LLVM's optimizer handles in superlinear time: at L = 256 (bench/w5_depth.py, roll=True)
#: LLVM took 4.0 s of a 4.7 s compile, 0.33 s at L = 64.
MAX_KERNEL_BUFFERS = 48


def kernel_cost_cap(size: int, program_cost: int = 0) -> int:
    """The largest estimated body cost (`expr_weight` sum) of a loop kernel over `size` elements.

    `program_cost` is the summed cost of the program's loop tasks before any cut: a scalar program
    above `LARGE_SCALAR_PROGRAM_COST` gets the smaller `LARGE_SCALAR_KERNEL_COST`.
    """
    if size > 1:
        return MAX_KERNEL_COST
    return LARGE_SCALAR_KERNEL_COST if program_cost > LARGE_SCALAR_PROGRAM_COST else MAX_SCALAR_KERNEL_COST


def _loads_match_stores(loads: list, ki: int, producer: dict, store_off: dict) -> bool:
    """Whether a task may join kernel `ki`, which produces some value it reads: every load of a
    value stored by `ki` is at the index it was stored at (else the load would race the store)."""
    for e in loads:
        m = e.attrs[0]
        if producer.get(m) == ki:
            so = store_off.get((ki, m))
            if so is None or so != e.args[0]:
                return False
    return True


class _Partitioner:
    """One partitioning of a scheduled graph (`partition`): the materialized set grows round by round."""

    def __init__(self, graph: Graph, order: list[Node], donate: frozenset, blas: bool):
        self.graph = graph
        self.order = order
        self.donate = donate
        self.blas = blas
        self.outputs = set(graph.outputs)
        # the products and the LAPACK calls, in order (`plan` visits them every round)
        self.matmuls = [n for n in order if n.op.name == "matmul"]
        self.lapack = [n for n in order if n.op.extra.get("lowering") == "lapack"]
        # gemm epilogues: sums of products accumulated in their BLAS calls (`pairing.plan_accumulation`;
        # none without a product, and then no reader lists are built)
        self.acc_plans: dict[Node, tuple[list, list]] = {}
        self.absorbed: set[Node] = set()
        if blas and self.matmuls:
            readers: dict[Node, list[Node]] = {n: [] for n in order}
            for n in order:
                for x in n.inputs:
                    readers[x].append(n)
            self.acc_plans, self.absorbed = plan_accumulation(order, readers, self.outputs, donate)
        # Values recomputed by checkpointing (issue 6): `group` never hoists them
        # into an earlier kernel (see there).
        self.recomputed = {n for n in order if meta(n).role == "recomputed"}
        # Values materialized only to cap the size of loop bodies (`split`).
        self.split_cut: set[Node] = set()
        # The summed cost of the first round's loop tasks (`kernel_cost_cap`), fixed once known.
        self.program_cost: int | None = None

    def forced(self) -> set:
        """The nodes that always get a buffer: outputs, reductions, products, and the nodes whose tasks
        write their buffer piece by piece (`node_tasks.NODE_TASKS`: concatenates, scatters).

        Raises:
            UnsupportedOpError: an op with no native lowering (opaque ops, layout ops that are not views).
        """
        M = set(self.acc_plans)
        for o in self.graph.outputs:
            if o.op.kind != "source":
                M.add(o)
        for n in self.order:
            op = n.op
            kind = op.kind
            if kind in ("reduction", "contraction") or node_tasks(op).buffer:
                if n not in self.absorbed:
                    M.add(n)
                if TaskKind.REGION in node_tasks(op).kinds:  # a loop reads its inputs' buffers
                    M.update(x for x in n.inputs if x.op.name != "input")
            elif kind == "opaque" and op.identity_of is None:
                raise UnsupportedOpError(f"codegen: op {op.name!r} has no native lowering; use backend='numpy'")
            elif kind == "layout" and op.identity_of is None and op.name not in LAYOUTS:
                raise UnsupportedOpError(f"codegen: layout op {op.name!r} has no native lowering; use backend='numpy'")
        return M

    def plan(self) -> Program:
        """Partition in rounds until nothing more is materialized; the kernels in execution order."""
        M = self.forced()
        consts: dict = {}
        const_keys: dict = {}  # `BodyBuilder.const_keys`, shared by the rounds
        while True:  # M only grows (bounded by the graph), so this terminates
            release_session()  # a fresh table of interned Exprs per round
            b = BodyBuilder(M, consts, const_keys)
            changed = False
            # a LAPACK task reads each operand as one contiguous buffer
            for n in self.lapack:
                for x in n.inputs:
                    if x not in M and x.op.name != "input":  # constants too: a buffer of their own
                        M.add(x)
                        changed = True
            if changed:
                continue
            # matmul operands must be BLAS views of buffers
            for n in self.matmuls:
                if self.blas and n.dtype in (np.float32, np.float64):
                    for x in n.inputs:
                        base = x
                        while base.op.view is not None and base not in M:
                            base = base.inputs[0]
                        if base.op.kind != "source" and base not in M:
                            M.add(base)
                            changed = True
            if changed:
                continue
            for n in self.matmuls:
                if self.blas and n.dtype in (np.float32, np.float64):
                    for x in n.inputs:
                        if x not in M and x.op.kind != "source" and gemm_view(b, x) is None:
                            M.add(x)
                            changed = True
                        elif x.op.name == "constant" and x not in M and uniform_const(x) is not None:
                            M.add(x)  # a BLAS operand needs the constant as a buffer
                            changed = True
            if changed:
                continue
            tasks = make_tasks(b, M, self.order, self.acc_plans, self.blas)
            if self.program_cost is None:
                self.program_cost = sum(t.cost for t in tasks if t.is_loop and not any(d > 1 for d in t.domain))
            donated = self.donation_pairs(M)
            kernels, producer = self.group(tasks, donated)
            while True:
                bad = self.check_donation(kernels, producer, donated)
                if not bad:
                    break
                for k in set(bad):
                    del donated[k]
                kernels, producer = self.group(tasks, donated)
            # first cap the loop bodies (no-op when every task is under MAX_KERNEL_COST), then refine
            extra = self.split(b, kernels, M)
            self.split_cut |= extra
            if not extra:
                extra = self.refine(b, kernels, M)
            if extra:
                M |= extra
                continue
            if self.blas:
                kernels = pair_gemms(kernels, {self.graph.outputs[k] for k in donated})
            producer = {}
            for ki, k in enumerate(kernels):
                for t in k.tasks:
                    producer[t.node] = ki  # the last kernel writing it (concatenate pieces: the last piece)
            readers: dict[Node, list[int]] = {}
            first_write: dict[Node, int] = {}
            for ki, k in enumerate(kernels):
                for t in k.tasks:
                    first_write.setdefault(t.node, ki)
                    for m in task_reads(t):
                        readers.setdefault(m, []).append(ki)
            return Program(self.graph, self.order, M, kernels, producer, readers, donated, consts, first_write)

    # -- donation --

    def donation_pairs(self, M: set) -> dict[int, int]:
        """Output position -> donated input leaf whose buffer it takes."""
        pairs: dict[int, int] = {}
        used: set[int] = set()
        seen_out: set[Node] = set()
        for k, o in enumerate(self.graph.outputs):
            if o in seen_out or o.op.kind == "source":
                seen_out.add(o)
                continue
            seen_out.add(o)
            for li in sorted(self.donate):
                if li in used:
                    continue
                x = self.graph.inputs[li]
                if x.shape == o.shape and x.dtype == o.dtype and o.size > 0:
                    pairs[k] = li
                    used.add(li)
                    break
        return pairs

    def check_donation(self, kernels: list[Kernel], producer: dict, donated: dict[int, int]) -> list[int]:
        """Output positions whose donation is unsafe (the input is read later, or not in place)."""
        bad = []
        for k, li in donated.items():
            o = self.graph.outputs[k]
            x = self.graph.inputs[li]
            ko = producer[o]
            kern = kernels[ko]
            otask = [t for t in kern.tasks if t.node is o]
            if kern.kind != KernelKind.LOOP or len(otask) != 1 or otask[0].kind != TaskKind.STORE:
                bad.append(k)
                continue
            off = otask[0].offset
            unsafe = False
            for ki, kk in enumerate(kernels):
                if ki < ko:
                    continue
                for t in kk.tasks:
                    if t.kind is TaskKind.REGION:
                        unsafe |= x in t.node.inputs
                        continue
                    if not t.kind.loop:
                        unsafe |= x in task_reads(t)
                        continue
                    for e in task_loads(t):
                        if e.attrs[0] is x and (ki > ko or e.args[0] != off):
                            unsafe = True
            if unsafe:
                bad.append(k)
        return bad

    # -- grouping --

    def group(self, tasks: list[Task], donated: dict[int, int]) -> tuple[list[Kernel], dict]:
        """Tasks into kernels, in order: each joins the first kernel it may share a loop nest with, or opens one.

        Returns:
            (kernels, producer): producer maps each node to the last kernel writing it.
        """
        # donated outputs, and everything that reads them, run after all other kernels
        deferred_nodes = {self.graph.outputs[k] for k in donated}
        normal, late = [], []
        for t in tasks:
            if t.node in deferred_nodes or task_reads(t) & deferred_nodes:
                deferred_nodes.add(t.node)
                late.append(t)
            else:
                normal.append(t)
        kernels: list[Kernel] = []
        producer: dict[Node, int] = {}
        store_off: dict[tuple[int, Node], Aff] = {}
        # loop kernels: the Exprs of their bodies and the estimated cost (MAX_KERNEL_COST caps joins)
        kexprs: dict[int, set] = {}
        kcost: dict[int, int] = {}
        kbufs: dict[int, set] = {}  # loop kernel -> the nodes it reads or writes (MAX_KERNEL_BUFFERS caps joins)
        expr_kernels: dict[Expr, list[int]] = {}  # Expr of nonzero weight -> the loop kernels computing it
        first_late = None
        frontier = 0  # the latest kernel any task joined so far
        region_kernel: dict[tuple, int] = {}  # (inputs, region, tag) of a loop -> its kernel
        for phase, group in ((0, normal), (1, late)):
            if phase == 1:
                first_late = len(kernels)
            for t in group:
                loads = task_loads(t)
                reads = task_reads(t)
                base = -1
                for m in reads:
                    base = max(base, producer.get(m, -1))
                start = max(base, 0) if phase == 0 else max(base, first_late)
                if t.late:
                    start = max(start, len(kernels) - 1)
                if t.node in self.recomputed:
                    # A recomputed value runs where the schedule put it (right before its
                    # backward reader), never in an earlier kernel of the same shape: hoisted
                    # into the forward sweep it would stay live across the backward sweep,
                    # which is what checkpointing removed.
                    start = max(start, frontier)
                chosen = None
                shared = None
                if t.kind is TaskKind.REGION:  # the outputs of one loop (and of its saver): one kernel
                    key = (t.node.inputs, t.node.attr("region").root, t.node.tag)
                    chosen = region_kernel.get(key)
                    if chosen is None:
                        region_kernel[key] = len(kernels)
                if t.kind.joins:
                    for ki in range(start, len(kernels)):
                        k = kernels[ki]
                        if k.kind != KernelKind.LOOP or k.domain != t.domain:
                            continue
                        if any(not tt.kind.joins for tt in k.tasks):  # a scatter runs alone
                            continue
                        if t.kind.reduces and k.red_axes and k.red_axes != t.red_axes:
                            continue
                        cap = kernel_cost_cap(k.size, self.program_cost)
                        if kcost.get(ki, 0) + t.cost > cap:
                            # joining may make the body too big for LLVM: count what is really new
                            # (the task's cost less what it shares with the kernel, found once per
                            # task through `expr_kernels`, not by a scan of the task per kernel)
                            if shared is None:
                                shared = {}
                                ekg = expr_kernels.get
                                for e in t.exprs:
                                    kjs = ekg(e)
                                    if kjs is not None:
                                        for kj in kjs:
                                            shared[kj] = shared.get(kj, 0) + e.w
                            if kcost[ki] + t.cost - shared.get(ki, 0) > cap:
                                continue
                        kb = kbufs.get(ki)
                        if kb is not None and len(kb) >= MAX_KERNEL_BUFFERS and t.is_loop and (
                                t.node not in kb or not reads <= kb):
                            continue
                        if ki == base and not _loads_match_stores(loads, ki, producer, store_off):
                            continue
                        chosen = ki
                        break
                if chosen is None:
                    kernels.append(Kernel(t.kind.kernel, t.domain, frozenset()))
                    chosen = len(kernels) - 1
                k = kernels[chosen]
                k.tasks.append(t)
                frontier = max(frontier, chosen)
                if t.is_loop:
                    kb = kbufs.setdefault(chosen, set())
                    kb.add(t.node)
                    kb |= reads
                    have = kexprs.setdefault(chosen, set())
                    c = kcost.get(chosen, 0)
                    add = have.add
                    for e in t.exprs:
                        if e not in have:
                            add(e)
                            w = e.w  # expr_weight(e)
                            if w:
                                c += w
                                ks = expr_kernels.get(e)
                                if ks is None:
                                    expr_kernels[e] = [chosen]
                                else:
                                    ks.append(chosen)
                    kcost[chosen] = c
                if t.kind.reduces:
                    k.red_axes = t.red_axes
                if t.node in producer and producer[t.node] != chosen:
                    # concatenate pieces may land in different kernels: the node is done at the last one
                    producer[t.node] = max(producer[t.node], chosen)
                    store_off.pop((chosen, t.node), None)
                else:
                    producer[t.node] = chosen
                    if t.kind is TaskKind.STORE and not t.pieced:
                        store_off[(chosen, t.node)] = t.offset
        # concatenate: all pieces must run before readers; producer = last piece's kernel (kept above)
        return kernels, producer

    # -- refinement: materialize expensive values shared by kernels or broadcast along loops --

    def refine(self, b: BodyBuilder, kernels: list[Kernel], M: set) -> set:
        """Values to materialize: expensive fused values read by several kernels or recomputed along a broadcast."""
        users: dict[Node, set[int]] = {}
        cost_of: dict[Node, int] = {}
        shared_parts: dict[Node, set[Node]] = {}
        extra: set[Node] = set()
        for ki, k in enumerate(kernels):
            if k.kind != KernelKind.LOOP:
                continue
            allvars = {Expr.var(i, d) for i, d in enumerate(k.domain) if d > 1}
            exprs = kernel_exprs(k)
            # A kernel made by cutting a too-big loop body (it reads or writes a value `split`
            # materialized) recomputes the fused values it shares with its neighbours: that is the
            # price of the cap, and materializing them all would undo the cut (a buffer per op).
            was_split = bool(self.split_cut) and any(
                t.node in self.split_cut or any(e.attrs[0] in self.split_cut for e in t.loads) for t in k.tasks)
            # The loop variables each Expr depends on; none at all in a body without loop variables
            # (a scalar program's kernels): then every set is empty and none is built.
            varsets: dict[Expr, frozenset] = {}
            loops = any(e.op == "var" for e in exprs)
            for e in exprs:
                if loops:
                    vs: set = set()
                    if e.op == "var":
                        vs.add(e)
                    for a in e.args:
                        if isinstance(a, Aff):
                            for at in a.atoms():
                                vs |= varsets.get(at, _NO_VARS)
                        else:
                            vs |= varsets.get(a, _NO_VARS)
                    varsets[e] = frozenset(vs)
                n = b.expr_node.get(e)
                if n is None or n in M:
                    continue
                if not was_split:
                    users.setdefault(n, set()).add(ki)
                cost = b.cost.get(e, 0)
                if cost >= _EXPENSIVE and n.op.kind == "elementwise" and not was_split:
                    own, parts = _broadcast_parts(b, e, varsets, M)
                    if own < _EXPENSIVE and parts:
                        # expensive only through values broadcast along one of its loops: those
                        # (fewer elements) are the ones to share; n itself is cheap to recompute
                        cost = own
                        shared_parts.setdefault(n, set()).update(parts)
                cost_of[n] = max(cost_of.get(n, 0), cost)
                if cost >= _EXPENSIVE and n.op.kind == "elementwise":
                    missing = allvars - varsets.get(e, _NO_VARS)
                    if missing and 2 * n.size <= k.size:
                        # recomputed along loops it does not depend on
                        extra.add(n)
        for n, ks in users.items():
            if len(ks) > 1 and n.op.kind == "elementwise":
                if cost_of[n] >= _EXPENSIVE:
                    extra.add(n)
                elif n in shared_parts:
                    extra |= shared_parts[n]
        extra -= M
        if len(extra) > 1:
            # Materialize the transcendentals first: a cheap op is expensive here only because it
            # contains a transcendental that is itself a candidate (1 + tanh(u) contains tanh(u));
            # once that one has a buffer it is a cheap load, so the next round decides again. (Only
            # transcendentals count, so a long chain of cheap candidates is not deferred one by one.)
            below: dict[Expr, bool] = {}
            deferred: set[Node] = set()
            for k in kernels:
                if k.kind != KernelKind.LOOP:
                    continue
                for e in kernel_exprs(k):
                    if e in below:
                        continue
                    n = b.expr_node.get(e)
                    hit = False
                    for a in e.args:
                        if isinstance(a, Expr):
                            an = b.expr_node.get(a)
                            if below.get(a, False) or (an is not None and an is not n and an in extra
                                                       and _cost_of_op(an.op.name) >= _EXPENSIVE):
                                hit = True
                                break
                    below[e] = hit
                    if hit and n in extra and _cost_of_op(n.op.name) < _EXPENSIVE:
                        # cheap itself (1 + tanh(u)); a transcendental of a transcendental stays
                        deferred.add(n)
            if deferred and deferred != extra:
                extra -= deferred
        return extra

    # -- splitting: cap the size of a loop body --

    def split(self, b: BodyBuilder, kernels: list[Kernel], M: set) -> set:
        """Values to materialize so that no loop task costs more than its cap (`kernel_cost_cap`).

        LLVM's optimizer is superlinear in the size of a function: a value-and-gradient chain of
        thousands of elementwise ops fused into one loop body takes seconds to compile, growing
        about 4x per doubling. For each task whose body is too big, the Exprs are visited inputs
        first with the set of ops each one needs (its cone, cut at loads); when a cone would cost
        more than the cap, its most expensive operand that is a fused elementwise value is cut
        (materialized: readers load it). Every cut cone costs at most the cap, so the next round's
        tasks do, and `group` packs tasks into kernels without exceeding it. Graphs whose loop
        tasks are all under the cap are not changed.
        """
        extra: set[Node] = set()
        cut: set[Expr] = set()
        for k in kernels:
            if k.kind != KernelKind.LOOP:
                continue
            for t in k.tasks:
                cap = kernel_cost_cap(int(np.prod(t.domain, dtype=np.int64)), self.program_cost or 0)
                if t.cost > cap:
                    cut_task(b, t, M, cut, extra, cap)
        return extra - M


_NO_VARS: frozenset = frozenset()

#: Steps of the walk of `_broadcast_parts` (a bigger tree keeps the cumulative cost's answer).
_PARTS_WALK = 64


def _broadcast_parts(b: BodyBuilder, e: Expr, varsets: dict, M: set) -> tuple[int, list[Node]]:
    """The cost of e over its own loops, and the values below it broadcast along one of them.

    Walks e's operands while they depend on every loop e depends on, summing their ops' weights;
    an operand that depends on fewer loops (a broadcast value, at most half e's elements) ends the
    walk there and is returned as a part when it is an elementwise value not materialized. The
    cost of e(x, y) = (x - y) * w with w = u / v broadcast along the last loop is 2, its part w:
    materializing w (n x n) and recomputing e lets every reader of e read n x n values, where
    materializing e (n x n x d) writes and reads d times as much. Past `_PARTS_WALK` steps the
    answer is e's whole cost and no parts (the caller's rule unchanged).
    """
    mine = varsets.get(e, frozenset())
    en = b.expr_node.get(e)
    own, parts, stack, seen, steps = 0, [], [e], set(), 0
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        steps += 1
        if steps > _PARTS_WALK:
            return b.cost.get(e, 0), []
        if x.op in ("load", "const", "var", "index"):
            continue
        xn = b.expr_node.get(x)
        if x is not e and xn is not None and varsets.get(x, frozenset()) < mine:
            if b.cost.get(x, 0) > 0 and xn.op.kind == "elementwise" and xn not in M and en is not None \
                    and 2 * xn.size <= en.size:
                parts.append(xn)
                continue
        own += x.w
        stack.extend(a for a in x.args if isinstance(a, Expr))
    return own, parts


def partition(graph: Graph, order: list[Node], donate: frozenset = frozenset(), blas: bool = True) -> Program:
    """Split a scheduled graph into kernels.

    Args:
        graph: the optimized graph.
        order: its schedule (execution order of nodes).
        donate: indices of input leaves whose buffers may receive outputs.
        blas: whether float matmuls go to BLAS (else loop kernels).

    Returns:
        A Program: kernels in execution order, the materialized set,
        producer/reader kernel indices per buffer and the donation pairs.

    Raises:
        UnsupportedOpError: an op with no native lowering (opaque ops).
        ShapeError: a max/min/argmax over an empty axis.
    """
    return _Partitioner(graph, order, donate, blas).plan()

