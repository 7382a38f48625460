"""Whole-graph assembly: buffers, the arena plan, and the single native entry function.

Buffers: arguments and constants belong to the caller, outputs are fresh
arrays (or donated arguments), every other materialized value gets a slot in
one arena. Slots are placed by lifetime in kernel steps (from the producing
kernel to the last reader) with `symgraph.passes.schedule.assign_offsets`,
so the arena is the planned peak (plus alignment).

Loop kernels are functions of their buffer pointers and loop range, so
structurally equal kernels (the layers of a deep network) share one function
(`_dedup_kernel`): LLVM optimizes and emits each distinct loop once.

`entry(args, outs, arena, consts)` runs the kernels in order; large gemms
(blocks of C) and large loop kernels (fixed chunks, partial results combined in
a fixed order) are split into pieces run on the thread pool of
`runtime.thread_pool` (pthreads per piece for loops where there is none;
the emitters are in `codegen.pieces`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from symgraph.passes.cost import node_flops
from symgraph.passes.schedule import assign_offsets, interval_peak

from . import fuse, pieces
from . import lower as L
from .fuse import Kernel, Program, expr_weight, kernel_exprs
from .cpu.abi import ARRAY_DATA_OFFSET, OBJECT_ABI, TUPLE_ITEMS_OFFSET

__all__ = ["BufferPlan", "plan_buffers", "build_module", "num_threads"]

PAR_MIN_ELEMENTS = 1 << 15
# Estimated operations (loop body cost x trip count) above which a loop kernel is split across
# threads. Each split starts threads and waits for the slowest; on a machine whose cores are
# shared with other work a started thread may wait milliseconds for a core, so only kernels of
# several milliseconds gain. Measured on a busy 2-core machine: with 2**21 the W6 training step
# split 13 sub-millisecond kernels and took 2.5x longer than on one thread (135 vs 55 ms).
PAR_MIN_WORK = 1 << 24
# The same threshold when kernels run on the persistent thread pool (`runtime.thread_pool`): a job
# costs 1-3 us with awake workers, and a worker slow to wake delays nothing (the caller runs its
# piece), so kernels of ~10 us gain. Measured: see docs/compile.md, "Threads".
POOL_PAR_MIN_WORK = 1 << 18
# Stack bytes (all chunks) for the partial vectors of a kernel split with `LoopPlan.row_partials`.
ROW_PARTIALS_MAX_BYTES = 1 << 16
# Pieces a large reduction kernel always runs as, on any number of threads (`_decide_chunks`): the
# number of threads `num_threads` uses at most, so that every core has a piece.
REDUCTION_CHUNKS = 8
RELEASE_GIL_WORK = 1 << 14  # estimated operations above which the entry releases the GIL


#: The most threads SYMGRAPH_NUM_THREADS may ask for (the pool has at most 63 workers besides the caller).
MAX_THREADS = 64


def num_threads() -> int:
    """Threads for large kernels: SYMGRAPH_NUM_THREADS (1 to `MAX_THREADS`; other values warn), else the CPUs
    this process may use (at most 8)."""
    env = os.environ.get("SYMGRAPH_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1 or n > MAX_THREADS:
            import warnings

            warnings.warn(f"SYMGRAPH_NUM_THREADS={env!r} is not a whole number from 1 to {MAX_THREADS}; "
                          f"using {min(max(n, 1), MAX_THREADS) if n else 'the usable CPUs'}", UserWarning, stacklevel=2)
            if n:
                return min(max(n, 1), MAX_THREADS)
        else:
            return n
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


@dataclass
class BufferPlan:
    """Where each materialized value lives.

    Attributes:
        ref: node -> ("in", leaf) | ("out", j) | ("const", c) | ("arena", offset).
        out_buffers: [(shape, dtype)] of the fresh output arrays.
        out_plan: per graph output, how the runtime produces it.
        consts: constant arrays passed to native code (C-contiguous).
        arena_bytes: arena size (bytes).
        peak_bytes: planned peak of live intermediates and outputs, each output
            counted from the first kernel that writes it (bytes).
        call_bytes: memory one call holds (bytes): the arena plus the fresh
            output arrays, which the runtime allocates before the call (the
            honest peak of a call; at least `peak_bytes` up to alignment).
    """

    ref: dict
    out_buffers: list
    out_plan: list
    consts: list
    arena_bytes: int
    peak_bytes: int
    call_bytes: int = 0


def plan_buffers(prog: Program) -> BufferPlan:
    """Assign a buffer to every materialized node of a partitioned program."""
    g = prog.graph
    ref: dict = {}
    for i, x in enumerate(g.inputs):
        ref[x] = ("in", i)
    consts: list[np.ndarray] = []
    for n, a in prog.consts.items():
        ref[n] = ("const", len(consts))
        consts.append(np.ascontiguousarray(a))
    out_buffers: list = []
    out_plan: list = []
    first: dict = {}
    n_steps = len(prog.kernels)
    out_intervals = []
    for k, o in enumerate(g.outputs):
        if o in first:
            out_plan.append(("dup", first[o]))
            continue
        first[o] = k
        if o.op.name == "input":
            out_plan.append(("copy_in", next(i for i, x in enumerate(g.inputs) if x is o)))
            continue
        if o.op.name == "constant" and o not in prog.materialized:
            out_plan.append(("const", o.attr("value").array))
            continue
        if k in prog.donated:
            li = prog.donated[k]
            ref[o] = ("in", li)
            out_plan.append(("in", li))
            continue
        ref[o] = ("out", len(out_buffers))
        out_plan.append(("buf", len(out_buffers)))
        out_buffers.append((o.shape, o.dtype))
        out_intervals.append((prog.first_write.get(o, 0), n_steps, o.nbytes))
    # arena slots
    nodes = []
    intervals = []
    for n in prog.order:
        if n in ref or n not in prog.materialized or n.op.kind == "source":
            continue
        # live from the first kernel writing it (a concatenate is written piece by piece) to its last reader;
        # empty values (no task) still get a zero-size slot
        first_step = prog.first_write.get(n, 0)
        last_step = max(prog.readers.get(n, [first_step]) + [prog.producer.get(n, first_step)])
        nodes.append(n)
        intervals.append((first_step, last_step, n.nbytes))
    offsets, total = assign_offsets(intervals)
    for n, off in zip(nodes, offsets):
        ref[n] = ("arena", off)
    peak = interval_peak(intervals + out_intervals)
    out_bytes = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize for shape, dt in out_buffers)
    return BufferPlan(ref, out_buffers, out_plan, consts, total, peak, total + out_bytes)


def _kernel_cost(k: Kernel) -> int:
    # the cost model's weights, and 1 per load and index computation (memory and address work)
    return sum(max(expr_weight(e), 1) for e in kernel_exprs(k) if e.op not in ("var", "const"))


def _work(prog: Program) -> int:
    """A rough operation count of the whole program (loop body cost times trip count, gemm flops)."""
    total = 0
    for k in prog.kernels:
        if k.kind == "gemm":
            for t in k.tasks:
                total += node_flops(t.gemm.get("mm", t.node) if t.gemm else t.node)
        else:
            total += max(k.size, 1) * max(_kernel_cost(k), 1)
    return total


def _decide_chunks(k: Kernel, plan: L.LoopPlan) -> None:
    """Fix the pieces a reduction kernel runs as (`LoopPlan.chunks`), from its shape alone.

    A kernel with reductions that is large enough to be split across threads
    (`PAR_MIN_ELEMENTS`) always runs as the same `REDUCTION_CHUNKS` pieces of
    its outer loop, each accumulating its own partial results, combined in
    piece order: on one thread the pieces run one after the other, on several
    they run on the pool. The association of every sum is therefore the same
    whatever the thread count, the machine's load, the kernel's cost (which
    fusion and checkpointing change) or whether a pool exists, so a compiled
    function returns the same bits under all of them (docs/compile.md,
    "Determinism"). Full reductions combine per-piece scalars
    (`plan.partials`); column sums combine per-piece vectors
    (`plan.row_partials`, when they fit `ROW_PARTIALS_MAX_BYTES`). Reductions
    that keep the outer loop need no fixed chunks: each output is reduced
    whole by one piece, in the order its lanes fix (`LoopPlan.lanes`), so they
    split like elementwise kernels. Other memory-mode reductions, full argmax
    and scatters run in one piece.
    """
    if not plan.has_red or not plan.groups or k.size < PAR_MIN_ELEMENTS or plan.extents[0] < 2:
        return
    kinds = {t.kind for t in k.tasks}
    if "scatter" in kinds:
        return
    if not plan.register:
        if not _row_partials_fit(k, plan):
            return
        plan.row_partials = True
    elif plan.n_kept == 0:
        if "argmax" in kinds:
            return
        plan.partials = True
    else:
        return  # each output is reduced whole by one piece, in its lanes' order: any split of the kept loop
    # Chunks cut the outer loop's first axis (whole rows of the axes merged into it, which fusion may or may
    # not merge), on whole lane rounds when the outer loop is the lane loop: the pieces of a sum are fixed
    # by the reduction's shape alone.
    extent = plan.extents[0]
    unit = extent // k.domain[plan.groups[0][0]]
    step = -(-k.domain[plan.groups[0][0]] // REDUCTION_CHUNKS) * unit
    if plan.lanes > 1 and len(plan.groups) == 1:
        step = -(-step // plan.lanes) * plan.lanes
    plan.chunks = _ranges(extent, step)


def split_range(extent: int, n: int) -> list[tuple[int, int]]:
    """[0, extent) cut into at most `n` contiguous half-open ranges of ceil(extent / n) (none empty)."""
    return _ranges(extent, -(-extent // max(1, min(n, extent))))


def _ranges(extent: int, step: int) -> list[tuple[int, int]]:
    """[0, extent) as consecutive half-open ranges of `step` (the last one shorter)."""
    return [(lo, min(extent, lo + step)) for lo in range(0, extent, step)]


def _decide_parallel(k: Kernel, plan: L.LoopPlan, nthreads: int) -> None:
    """Fix the kernel's pieces (`_decide_chunks`), then whether they run on threads (`plan.parallel`).

    Threads change where pieces run, never what they compute: a full or
    column reduction is split only along its fixed chunks; an elementwise
    kernel, or one whose reductions keep the outer loop, computes each output
    within one piece, the same way for any split.
    """
    _decide_chunks(k, plan)
    if nthreads <= 1 or not plan.groups or k.size < PAR_MIN_ELEMENTS or plan.extents[0] < 2:
        return
    if _kernel_cost(k) * k.size < _par_min_work():
        return
    kept_outer = plan.register and plan.n_kept > 0  # each output reduced whole within one piece
    if any(t.kind == "scatter" for t in k.tasks) or plan.has_red and plan.chunks is None and not kept_outer:
        return
    plan.parallel = True


def _row_partials_fit(k: Kernel, plan: L.LoopPlan) -> bool:
    """Whether a memory-mode reduction can be split over its outer rows with partial vectors (`row_partials`).

    True when every loop but the innermost is reduced and the innermost is
    kept (a column sum over a batch axis, e.g. a bias gradient), every
    reduction's output element is the innermost loop's index (size = that
    loop's trip count, coefficient 1, offset 0; the combine loop writes
    ``out[j]``), the outer loop has at least two rows per chunk, and the
    chunks' partial vectors (8-byte slots) fit in `ROW_PARTIALS_MAX_BYTES`
    of stack.
    """
    groups, red = plan.groups, set(k.red_axes)
    if len(groups) < 2 or groups[-1][0] in red or any(g[0] not in red for g in groups[:-1]):
        return False
    inner = plan.extents[-1]
    reds = [t for t in k.tasks if t.kind == "reduce"]
    if plan.extents[0] < 2 * REDUCTION_CHUNKS or len(reds) * inner * 8 * REDUCTION_CHUNKS > ROW_PARTIALS_MAX_BYTES:
        return False
    if any(t.node.dtype.itemsize > 8 for t in reds):
        return False
    last = groups[-1][-1]
    var = fuse.Expr.var(last, k.domain[last])
    for t in k.tasks:
        if t.kind != "reduce":
            continue
        off = t.offset
        if t.node.size != inner or off.const != 0 or off.coeff(var) != 1 or len(off.terms) != len(groups[-1]):
            return False
    return True


def _combine_row_partials(cx: L.LoweringContext, b: ir.IRBuilder, k: Kernel, partial: ir.Value, T: int,
                          inner: int, ptr_of: Any) -> None:
    """After a `row_partials` split: out[j] = combine of the T threads' partial[t][r][j], per reduction r."""
    reds = [t for t in k.tasks if t.kind == "reduce"]
    R = len(reds)
    for ri, t in enumerate(reds):
        r = L.REDUCERS[t.red_op]
        dt = t.node.dtype
        ad = r.acc_dtype(dt)
        mt = L.mem_type(dt)
        dst = ptr_of(t.node)

        def body(j: ir.Value, ri: int = ri, t: Any = t, r: Any = r, dt: Any = dt, ad: Any = ad, mt: Any = mt,
                 dst: Any = dst) -> None:
            acc = None
            for th in range(T):
                base = b.gep(partial, [ir.Constant(L.I64, (th * R + ri) * inner * 8)], source_etype=L.I8)
                v = b.load(b.gep(base, [j], inbounds=True, source_etype=mt), typ=mt)
                if dt.kind == "b":
                    v = b.icmp_unsigned("!=", v, ir.Constant(L.I8, 0))
                v = cx.cast(v, dt, ad)
                acc = v if acc is None else r.combine(cx, acc, v, ad, ordered=True)
            val = cx.cast(acc, ad, dt)
            if dt.kind == "b":
                val = b.zext(val, L.I8)
            b.store(val, b.gep(dst, [j], inbounds=True, source_etype=mt))

        L.for_range(b, ir.Constant(L.I64, 0), ir.Constant(L.I64, inner), body, name=f"rp{ri}")


@dataclass
class _KernelCall:
    """What a loop kernel's call site needs: the function and its buffers (refs, in argument order)."""

    fn: ir.Function
    buffers: list


def _dedup_kernel(mod: ir.Module, fn: ir.Function, plan: L.LoopPlan, shared: dict) -> ir.Function:
    """The function to call for a just-emitted kernel: `fn`, or an equal one emitted before.

    Kernels take their buffers as pointer arguments and their loop range as
    arguments, so the layers of a deep network lower to the same few
    functions with different buffers. Two kernels share one function when
    their IR is the same text (name aside) and their calls pass the same loop
    range (the trip count LLVM sees stays what it was). A duplicate is
    removed from the module at once, so its Python IR objects are freed.

    Args:
        mod: the module `fn` was emitted into.
        fn: the kernel function just emitted.
        plan: its loop plan (the call's trip count and threading).
        shared: (IR text, call range) -> function, updated.

    Returns:
        The function the kernel's call sites call.
    """
    text = str(fn).replace(fn.get_reference(), "@kernel", 1)
    key = (text, plan.extents[0] if plan.groups else 0, plan.parallel, plan.partials, plan.row_partials)
    f = shared.get(key)
    if f is None:
        shared[key] = fn
        return fn
    del mod.globals[fn.name]
    return f


def build_module(prog: Program, bp: BufferPlan, blas: dict | None, name: str = "f",
                 nthreads: int | None = None, abi: str = "ctypes", profile: bool = False) -> tuple[ir.Module, dict]:
    """Emit the LLVM module of a partitioned program.

    Args:
        profile: time every kernel (clock_gettime around each call) into the
            global array `sg_profile` (nanoseconds per kernel, then the call count).

    Returns:
        (module, info): info has kernel kinds, parallel kernels, vector width
        preference, kernel_functions (distinct loop functions) and
        loop_kernel_calls.
    """
    import llvmlite.binding as llvm

    from .jit import has_avx512

    nthreads = num_threads() if nthreads is None else nthreads
    mod = ir.Module(name=f"symgraph_{name}")
    mod.triple = llvm.get_process_triple()
    cx = L.LoweringContext(mod)
    vm = L.vmath_module()
    if cx.use_vmath and hasattr(vm, "prepare_module"):
        vm.prepare_module(mod)
    ref = bp.ref

    def buffer_of(node: Any) -> Any:
        return ref[node]

    emitters: dict[int, _KernelCall] = {}  # kernel index -> the function it calls and its buffers
    plans: dict[int, L.LoopPlan] = {}
    shared: dict[tuple, ir.Function] = {}  # (IR text, call range) -> function; equal kernels share one
    uses: dict[str, int] = {}  # function name -> call sites
    chunked: set[str] = set()  # functions run as fixed chunks: compiled once, apart from their callers
    for ki, k in enumerate(prog.kernels):
        if k.kind != "loop" or k.size == 0 and not any(t.kind in ("reduce", "scatter") for t in k.tasks):
            continue
        plan = L.LoopPlan(k)
        _decide_parallel(k, plan, nthreads)
        plans[ki] = plan
        ke = L.lower_loop_kernel(cx, k, ki, buffer_of, plan)
        f = _dedup_kernel(mod, ke.fn, plan, shared)
        # keep only what the call needs: the emitter references its function's IR objects
        emitters[ki] = _KernelCall(f, ke.buffers)
        del ke
        uses[f.name] = uses.get(f.name, 0) + 1
        if plan.chunks is not None:
            chunked.add(f.name)
    looped = [k for ki, k in enumerate(prog.kernels) if ki in emitters]
    big = sum(sum(expr_weight(e) for e in kernel_exprs(k)) for k in looped) \
        > fuse.kernel_cost_cap(max((k.size for k in looped), default=0))
    for f in shared.values():
        # Keep big programs' kernels out of `entry`: inlined (internal functions called once),
        # they would make one function as big as the whole graph, the superlinear case for LLVM
        # that `fuse.MAX_KERNEL_COST` avoids (fuse.py, `_Partitioner.split`). A kernel shared
        # by several call sites stays one function, so LLVM optimizes its loop once.
        # A chunked kernel is one body whether its chunks run here or on threads (same bits).
        if big or uses[f.name] > 1 or f.name in chunked:
            f.attributes.add("noinline")

    # ----- entry -----
    entry_bb = None
    if abi == "fastcall":
        # PyObject* entry(PyObject* self, PyObject* const* argv, Py_ssize_t n): a METH_FASTCALL builtin
        fn = ir.Function(mod, ir.FunctionType(L.PTR, [L.PTR, L.PTR, L.I64]), "entry")
        fn.attributes.add("nounwind")
        selfobj, argv, _n = fn.args
        entry_bb = fn.append_basic_block("entry")
        ab = ir.IRBuilder(entry_bb)
        ins, outs, arena, consts = (ab.load(ab.gep(argv, [ir.Constant(L.I64, i)], source_etype=L.PTR), typ=L.PTR)
                                    for i in range(4))
    else:
        fn = ir.Function(mod, ir.FunctionType(L.VOID, [L.PTR] * 4), "entry")
        fn.attributes.add("nounwind")
        ins, outs, arena, consts = fn.args
        entry_bb = fn.append_basic_block("entry")
        ab = ir.IRBuilder(entry_bb)
    start_bb = fn.append_basic_block("start")
    b = ir.IRBuilder(start_bb)
    release_gil = abi == "fastcall" and _work(prog) >= RELEASE_GIL_WORK
    tstate = None
    if release_gil:
        tstate = b.call(cx.function("PyEval_SaveThread", L.PTR, []), [])
    cx.builder = b
    cx.alloca_builder = ab
    cx.in_loop = False
    blas_ctl = None
    n_blas = 1
    if blas and any(k.kind == "gemm" for k in prog.kernels):
        from .cpu.blas import blas_thread_control, blas_threads

        blas_ctl = blas_thread_control()
        n_blas = blas_threads()
        if blas_ctl is not None:
            b.call(cx.function(blas_ctl[0], L.VOID, [L.I32]), [ir.Constant(L.I32, n_blas)])

    def item(tup: ir.Value, k: int) -> ir.Value:
        if OBJECT_ABI:
            obj = b.load(b.gep(tup, [ir.Constant(L.I64, TUPLE_ITEMS_OFFSET + 8 * k)], source_etype=L.I8), typ=L.PTR)
            return b.load(b.gep(obj, [ir.Constant(L.I64, ARRAY_DATA_OFFSET)], source_etype=L.I8), typ=L.PTR)
        return b.load(b.gep(tup, [ir.Constant(L.I64, k)], source_etype=L.PTR), typ=L.PTR)

    arena_base = b.load(b.gep(arena, [ir.Constant(L.I64, ARRAY_DATA_OFFSET)], source_etype=L.I8), typ=L.PTR) \
        if OBJECT_ABI else arena
    ptrs: dict = {}

    def ptr_of_ref(r: Any) -> ir.Value:
        p = ptrs.get(r)
        if p is None:
            kind, v = r
            if kind == "in":
                p = item(ins, v)
            elif kind == "out":
                p = item(outs, v)
            elif kind == "const":
                p = item(consts, v)
            else:
                p = b.gep(arena_base, [ir.Constant(L.I64, v)], inbounds=True, source_etype=L.I8)
            ptrs[r] = p
        return p

    # all base pointers up front (dominate every use)
    for r in sorted(set(ref.values()), key=repr):
        ptr_of_ref(r)

    thunks: dict[str, ir.Function] = {}  # kernel function name -> its thread routine
    info = {"kernels": [], "parallel": 0, "concurrent_gemms": 0, "threads": nthreads, "profile": profile,
            "kernel_functions": len(shared), "loop_kernel_calls": len(emitters)}
    nk = len(prog.kernels)
    prof = None
    if profile:
        prof = ir.GlobalVariable(mod, ir.ArrayType(L.I64, nk + 1), "sg_profile")
        prof.initializer = ir.Constant(ir.ArrayType(L.I64, nk + 1), None)
        prof.type = L.PTR  # opaque pointer (as `opaque_alloca`): addressed with i64 GEPs
        clock = cx.function("clock_gettime", L.I32, [L.I32, L.PTR])
        ts = L.opaque_alloca(ab, ir.ArrayType(L.I64, 2), "ts")

        def now() -> ir.Value:
            b.call(clock, [ir.Constant(L.I32, 1), ts])  # CLOCK_MONOTONIC
            sec = b.load(ts, typ=L.I64)
            nsec = b.load(b.gep(ts, [ir.Constant(L.I64, 1)], source_etype=L.I64), typ=L.I64)
            return b.add(b.mul(sec, ir.Constant(L.I64, 1_000_000_000)), nsec)

        def account(ki: int, t0: ir.Value) -> None:
            slot = b.gep(prof, [ir.Constant(L.I64, ki)], source_etype=L.I64)
            b.store(b.add(b.load(slot, typ=L.I64), b.sub(now(), t0)), slot)

        calls = b.gep(prof, [ir.Constant(L.I64, nk)], source_etype=L.I64)
        b.store(b.add(b.load(calls, typ=L.I64), ir.Constant(L.I64, 1)), calls)

    def emit_kernel_call(ki: int, k: Kernel) -> None:
        if k.kind == "gemm":
            ptr_of = lambda node: ptr_of_ref(ref[node])  # noqa: E731
            if k.concurrent and pieces.emit_gemm_pair(cx, ab, k.tasks, str(ki), ptr_of, blas, nthreads):
                info["parallel"] += 1
                info["concurrent_gemms"] += 1
                info["kernels"].append("gemm")
                return
            for ti, t in enumerate(k.tasks):
                # large products: pieces of C on the thread pool (joined before the next kernel)
                if pieces.emit_gemm_pieces(cx, ab, t, f"{ki}_{ti}", ptr_of, blas, nthreads):
                    info["parallel"] += 1
            info["kernels"].append("gemm")
            return
        if ki not in emitters:
            info["kernels"].append("empty")
            return
        ke = emitters[ki]
        plan = plans[ki]
        bufs = [ptr_of_ref(r) for r in ke.buffers]
        red_tasks = [t for t in k.tasks if t.kind in ("reduce", "argmax")]
        info["kernels"].append("loop" + ("+par" if plan.parallel else ""))
        if k.size == 0 or not plan.groups:
            b.call(ke.fn, bufs + [ir.Constant(L.I64, 0), ir.Constant(L.I64, 1), ir.Constant(L.PTR, None)])
            return
        extent = plan.extents[0]
        if not plan.parallel and plan.chunks is None:
            b.call(ke.fn, bufs + [ir.Constant(L.I64, 0), ir.Constant(L.I64, extent), ir.Constant(L.PTR, None)])
            return
        if plan.chunks is not None:
            ranges = plan.chunks
        else:  # elementwise or kept-outer reductions: any split gives the same values
            ranges = split_range(extent, nthreads)
        T = len(ranges)
        R = len(red_tasks)
        partial = L.opaque_alloca(ab, ir.ArrayType(L.I64, max(1, T * R)), f"partial{ki}") if plan.partials else None
        if plan.row_partials:  # per chunk: R vectors of `inner` 8-byte slots
            inner = plan.extents[-1]
            R = sum(1 for t in k.tasks if t.kind == "reduce")
            partial = L.opaque_alloca(ab, ir.ArrayType(L.I64, T * R * inner), f"rpartial{ki}")
            partial.align = 64
            R = R * inner

        def pslot(t: int, partial: Any = partial, R: int = R) -> ir.Value:
            if partial is None:
                return ir.Constant(L.PTR, None)
            return b.gep(partial, [ir.Constant(L.I64, t * R)], source_etype=L.I64)

        if not plan.parallel:
            # the fixed chunks one after the other, through the function the pool would run: its loop
            # bounds are opaque (as from a thread's context), so LLVM compiles one body for both
            for t, (lo, hi) in enumerate(ranges):
                b.call(ke.fn, bufs + [pieces.opaque_i64(b, lo), pieces.opaque_i64(b, hi), pslot(t)])
        else:
            info["parallel"] += 1
            thunk = thunks.get(ke.fn.name)
            if thunk is None:
                thunk = thunks[ke.fn.name] = pieces.thunk_fn(cx, ke.fn, len(bufs), ki)
            pool = pieces.pool_fn(cx, nthreads)
            if pool is not None:
                rows = [bufs + [ir.Constant(L.I64, lo), ir.Constant(L.I64, hi), pslot(t)]
                        for t, (lo, hi) in enumerate(ranges)]
                pieces.run_on_pool(b, ab, pool, thunk, rows, nthreads, f"pctx{ki}")
            else:  # no pool (not Linux): a thread per piece
                pieces.run_on_threads(cx, b, ab, thunk, ke.fn, bufs, ranges, pslot, ki)
        if plan.row_partials:
            _combine_row_partials(cx, b, k, partial, T, plan.extents[-1], lambda node: ptr_of_ref(ref[node]))
        if plan.partials:
            for ri, t in enumerate(red_tasks):
                r = L.REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                ty = L.ll_type(ad)
                acc = None
                for th in range(T):
                    p = b.gep(partial, [ir.Constant(L.I64, (th * R + ri) * 8 // ad.itemsize)], source_etype=ty)
                    v = b.load(p, typ=ty)
                    acc = v if acc is None else r.combine(cx, acc, v, ad, ordered=True)
                val = cx.cast(acc, ad, t.node.dtype)
                mt = L.mem_type(t.node.dtype)
                dst = b.gep(ptr_of_ref(ref[t.node]), [ir.Constant(L.I64, t.offset.const)], inbounds=True,
                            source_etype=mt)
                if t.node.dtype.kind == "b":
                    val = b.zext(val, L.I8)
                b.store(val, dst)

    for ki, k in enumerate(prog.kernels):
        t0 = now() if prof is not None else None
        emit_kernel_call(ki, k)
        if prof is not None:
            account(ki, t0)
    if blas_ctl is not None:
        b.call(cx.function(blas_ctl[1], L.VOID, [L.I32]), [ir.Constant(L.I32, n_blas)])
    info["blas_threads"] = n_blas if blas_ctl is not None else None
    if abi == "fastcall":
        if release_gil:
            b.call(cx.function("PyEval_RestoreThread", L.VOID, [L.PTR]), [tstate])
        # return self with a new reference (the GIL is held again here)
        rc = b.load(selfobj, typ=L.I64)
        b.store(b.add(rc, ir.Constant(L.I64, 1)), selfobj)
        b.ret(selfobj)
    else:
        b.ret_void()
    ab.branch(start_bb)
    info["release_gil"] = release_gil
    info["prefer_512"] = has_avx512()
    return mod, info


def _par_min_work() -> int:
    """Estimated operations above which a loop kernel is split: lower when the thread pool is available."""
    from .cpu.pool import thread_pool

    return POOL_PAR_MIN_WORK if thread_pool() is not None else PAR_MIN_WORK


def module_text(mod: ir.Module, prefer_512: bool) -> str:
    """The module's IR text with function attributes llvmlite cannot express (vector width)."""
    text = str(mod)
    if prefer_512:
        import re

        def add(m: "re.Match") -> str:
            attrs = m.group(2) or ""
            if "prefer-vector-width" not in attrs:
                attrs += ' "prefer-vector-width"="512"'
            return m.group(1) + attrs + "\n{"

        text = re.sub(r'^(define [^\n]*\))( [^\n{]*)?\n\{', add, text, flags=re.M)
    return text
