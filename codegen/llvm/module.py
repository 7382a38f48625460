"""The LLVM module of a partitioned program, built in named stages; the thread plan of each loop kernel.

`build_module` runs the stages in order: a module and its lowering context (`_new_module`);
every loop kernel as a function of its buffer pointers and loop range, structurally equal
kernels sharing one function (`_emit_loop_kernels`, `_dedup_kernel`: the layers of a deep
network lower to a few functions, which LLVM optimizes once); the entry function
`entry(args, outs, arena, consts)`, opened with the base pointers of every buffer (`_Entry`);
one call per kernel, through `KERNEL_CALLS` (each kernel kind's lowering); optionally a timer
around each (`_Profile`); and the entry closed (`_Entry.close`).

Before a loop kernel is emitted its thread plan is fixed (`_decide_parallel`): large kernels
run as fixed pieces (a reduction's chunks, partial results combined in a fixed order) on the
thread pool of `codegen.cpu.pool.thread_pool` (pthreads per piece where there is none); large
products as pieces of C (`gemm`). Which pieces there are never depends on the thread count.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from symgraph.passes.cost import node_flops

from ..cpu import blas as cpu_blas
from ..cpu import pool as cpu_pool
from ..cpu.abi import ARRAY_DATA_OFFSET, OBJECT_ABI, TUPLE_ITEMS_OFFSET
from ..jit import has_avx512
from ..kernels.buffers import BufferPlan
from ..kernels.expr import Expr, expr_weight
from ..kernels.partition import kernel_cost_cap
from ..kernels.tasks import Kernel, KernelKind, Program, TaskKind, kernel_exprs
from . import gemm, pieces
from .lapack import emit_lapack
from .context import I8, I32, I64, PTR, VOID, LoweringContext, opaque_alloca
from .loops import LoopPlan, kernel_buffers, kernel_key, kernel_signature, lower_loop_kernel
from .reduce import combine_partials, combine_row_partials
from .region import region_call
from .rows import emit_segment_call, emit_segment_function

__all__ = ["build_module", "module_text", "num_threads", "split_range", "KERNEL_CALLS"]

PAR_MIN_ELEMENTS = 1 << 15
# Estimated operations (loop body cost x trip count) above which a loop kernel is split across
# threads. Each split starts threads and waits for the slowest; on a machine whose cores are
# shared with other work a started thread may wait milliseconds for a core, so only kernels of
# several milliseconds gain. Measured on a busy 2-core machine: with 2**21 the W6 training step
# split 13 sub-millisecond kernels and took 2.5x longer than on one thread (135 vs 55 ms).
PAR_MIN_WORK = 1 << 24
# The same threshold when kernels run on the persistent thread pool (`cpu.pool.thread_pool`): a job
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


# ----- the thread plan of a loop kernel -----




def _kernel_cost(k: Kernel) -> int:
    # the cost model's weights, and 1 per load and index computation (memory and address work)
    return sum(max(expr_weight(e), 1) for e in kernel_exprs(k) if e.op not in ("var", "const"))


def _work(prog: Program) -> int:
    """A rough operation count of the whole program (loop body cost times trip count, gemm flops)."""
    total = 0
    for k in prog.kernels:
        if k.kind is KernelKind.GEMM:
            for t in k.tasks:
                total += node_flops(t.gemm.get("mm", t.node) if t.gemm else t.node)
        elif k.kind is KernelKind.LAPACK:
            total += sum(node_flops(t.node) for t in k.tasks)
        else:
            total += max(k.size, 1) * max(_kernel_cost(k), 1)
    return total


def _decide_chunks(k: Kernel, plan: LoopPlan) -> None:
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
    if TaskKind.SCATTER in kinds:
        return
    if not plan.register:
        if not _row_partials_fit(k, plan):
            return
        plan.row_partials = True
    elif plan.n_kept == 0:
        if TaskKind.ARGMAX in kinds:
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


def _decide_parallel(k: Kernel, plan: LoopPlan, nthreads: int) -> None:
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
    if any(t.kind in (TaskKind.SCATTER, TaskKind.SCAN) for t in k.tasks) or plan.has_red and plan.chunks is None \
            and not kept_outer:
        return
    plan.parallel = True


def _row_partials_fit(k: Kernel, plan: LoopPlan) -> bool:
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
    reds = [t for t in k.tasks if t.kind is TaskKind.REDUCE]
    if plan.extents[0] < 2 * REDUCTION_CHUNKS or len(reds) * inner * 8 * REDUCTION_CHUNKS > ROW_PARTIALS_MAX_BYTES:
        return False
    if any(t.node.dtype.itemsize > 8 for t in reds):
        return False
    last = groups[-1][-1]
    var = Expr.var(last, k.domain[last])
    for t in k.tasks:
        if t.kind is not TaskKind.REDUCE:
            continue
        off = t.offset
        if t.node.size != inner or off.const != 0 or off.coeff(var) != 1 or len(off.terms) != len(groups[-1]):
            return False
    return True

def _par_min_work() -> int:
    """Estimated operations above which a loop kernel is split: lower when the thread pool is available."""
    return POOL_PAR_MIN_WORK if cpu_pool.thread_pool() is not None else PAR_MIN_WORK


# ----- kernel functions -----


@dataclass
class _KernelCall:
    """What a loop kernel's call site needs: the function and its buffers (refs, in argument order)."""

    fn: ir.Function
    buffers: list


def _dedup_kernel(mod: ir.Module, fn: ir.Function, plan: LoopPlan, shared: dict) -> ir.Function:
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

def _new_module(name: str) -> LoweringContext:
    """Stage 1: an empty module for the host and its lowering context (vector math prepared)."""
    mod = ir.Module(name=f"symgraph_{name}")
    mod.triple = llvm.get_process_triple()
    cx = LoweringContext(mod)
    if cx.use_vmath and hasattr(cx.vmath, "prepare_module"):
        cx.vmath.prepare_module(mod)
    return cx


@dataclass
class _LoopKernels:
    """What stage 2 emitted: per loop kernel index, the function its call site calls and its loop plan."""

    calls: dict[int, _KernelCall]
    plans: dict[int, LoopPlan]
    functions: int  # distinct kernel functions


def _emit_loop_kernels(cx: LoweringContext, prog: Program, ref: dict, nthreads: int,
                       tiled: frozenset = frozenset()) -> _LoopKernels:
    """Stage 2: every loop kernel with work as an internal function, equal ones shared (`_dedup_kernel`).

    Each kernel's thread plan is fixed first (`_decide_parallel`; the kernels of row-tiled runs,
    `tiled`, run on one thread each: their runs are split instead). Functions called from several
    sites, run as fixed chunks, or belonging to a big program are `noinline` (`_mark_noinline`).
    """
    calls: dict[int, _KernelCall] = {}  # kernel index -> the function it calls and its buffers
    plans: dict[int, LoopPlan] = {}
    shared: dict[tuple, ir.Function] = {}  # (IR text, call range) -> function; equal kernels share one
    keyed: dict[tuple, ir.Function] = {}  # `kernel_key` -> function: equal kernels are emitted once
    # `kernel_signature` -> the kernels of that signature emitted without a key yet (kernel, plan, function):
    # a key is computed only once a second kernel has the signature
    unkeyed: dict[tuple, list] = {}
    uses: dict[str, int] = {}  # function name -> call sites
    chunked: set[str] = set()  # functions run as fixed chunks: compiled once, apart from their callers
    buffer_of = ref.__getitem__
    for ki, k in enumerate(prog.kernels):
        if k.kind is not KernelKind.LOOP or k.size == 0 and not any(t.kind.fills_empty for t in k.tasks):
            continue
        plan = LoopPlan(k)
        _decide_parallel(k, plan, nthreads)
        if ki in tiled:  # a row-tiled run's kernel: its run is what may go on threads (`rows`)
            plan.parallel = False
        plans[ki] = plan
        sig = None if _CHECK_KEYS else kernel_signature(k, plan)
        if sig is None or sig in unkeyed:
            for kk, pp, ff in unkeyed.pop(sig, ()) if sig is not None else ():
                kkey = kernel_key(kk, pp, buffer_of)
                if kkey is not None:
                    keyed.setdefault(kkey, ff)
            unkeyed[sig] = []
            key = kernel_key(k, plan, buffer_of)
        else:
            key = None
        f = keyed.get(key) if key is not None else None
        if f is not None and not _CHECK_KEYS:  # an equal kernel was emitted: call its function
            calls[ki] = _KernelCall(f, kernel_buffers(k, buffer_of))
        else:
            ke = lower_loop_kernel(cx, k, ki, buffer_of, plan)
            g = _dedup_kernel(cx.module, ke.fn, plan, shared)
            if f is not None and g is not f:
                raise AssertionError(f"codegen: kernel {ki} has the key of {f.name} but other IR")
            f = g
            if key is not None:
                keyed[key] = f
            elif sig is not None and sig not in unkeyed:
                unkeyed[sig] = [(k, plan, f)]
            # keep only what the call needs: the emitter references its function's IR objects
            calls[ki] = _KernelCall(f, ke.buffers)
            del ke
        uses[f.name] = uses.get(f.name, 0) + 1
        if plan.chunks is not None:
            chunked.add(f.name)
    _mark_noinline(prog, calls, shared, uses, chunked)
    return _LoopKernels(calls, plans, len(shared))


#: SYMGRAPH_CHECK_KERNEL_KEYS=1: emit every loop kernel and check that kernels of equal `kernel_key` got one
#: function (testing the key; tests/test_codegen_memory.py)
_CHECK_KEYS = os.environ.get("SYMGRAPH_CHECK_KERNEL_KEYS", "") not in ("", "0")


#: A kernel function with more arguments than this (its buffers) stays out of `entry`: inlined,
#: the copies of a wide stack (the xs of a rolled loop over 256 weight matrices) became 256
#: `memcpy` calls in one block of `entry` with the inputs' pointer loads, and X86 instruction
#: selection on that block took most of the compile (bench/w5_depth.py, L = 256).
WIDE_KERNEL_ARGS = 24


def _mark_noinline(prog: Program, calls: dict, shared: dict, uses: dict, chunked: set) -> None:
    """Keep big programs' kernels, shared, chunked and wide kernels out of `entry` (`noinline`).

    Inlined (internal functions called once), a big program's kernels would make one function
    as big as the whole graph, the superlinear case for LLVM that the kernel cost cap avoids
    (`codegen.kernels.partition.MAX_KERNEL_COST`, `_Partitioner.split`). A kernel shared by
    several call sites stays one function, so LLVM optimizes its loop once. A chunked kernel is
    one body whether its chunks run here or on threads (same bits).
    """
    looped = [k for ki, k in enumerate(prog.kernels) if ki in calls]
    cap = kernel_cost_cap(max((k.size for k in looped), default=0))
    big = False
    total = 0
    for k in looped:  # the summed body cost exceeds the cap (stop counting once it does)
        total += sum([e.w for e in kernel_exprs(k)])  # e.w is `expr_weight(e)`
        if total > cap:
            big = True
            break
    for f in shared.values():
        if big or uses[f.name] > 1 or f.name in chunked or len(f.args) > WIDE_KERNEL_ARGS:
            f.attributes.add("noinline")


#: A program of at least this many kernels gets an entry function LLVM does not optimize (`_plain_entry`).
PLAIN_ENTRY_MIN_KERNELS = 24


def _plain_entry(prog: Program, loops: _LoopKernels) -> bool:
    """Whether `entry` is left unoptimized (`optnone`, code generation at level 0), its kernels out of line.

    The entry of a program of many kernels is one long block of calls and of the stores that fill
    the thread pool's job contexts (pointers and ranges), and O3 on it is superlinear in its length:
    on the W5 depth chain's gradient (bench/w5_depth.py) at 64 layers, the SLP vectorizer and dead
    store elimination on `entry` took 0.47 of the 0.57 s LLVM spent optimizing the module, at 16
    layers 0.11 of 0.16 s; nothing in it gains from optimization (a call per kernel). The kernels then
    stay functions of their own (nothing is inlined into an `optnone` function), optimized as before:
    their optimized IR was the same text (attribute numbering aside) on that chain at 64 layers, and
    the gradient the same bits. (Kernels of row-tiled runs are called from their run's function,
    optimized as ever.)
    Programs of fewer than `PLAIN_ENTRY_MIN_KERNELS` kernels, and those whose entry holds loops of
    its own (loop regions, LAPACK's finiteness checks, the combination of column-sum partial
    vectors), keep the optimized entry.
    """
    if len(prog.kernels) < PLAIN_ENTRY_MIN_KERNELS:
        return False
    if any(k.kind in (KernelKind.REGION, KernelKind.LAPACK) for k in prog.kernels):
        return False
    return not any(plan.row_partials for plan in loops.plans.values())


class _Entry:
    """Stage 3 and after: the entry function being built, its builders and the base pointer of every buffer.

    Attributes:
        b: the builder of the entry's body (kernel calls go here); `ab` builds its allocas.
        info: the module's facts as `build_module` returns them (kernel kinds, parallel kernels, ...).
        release_gil: the entry releases the GIL around the kernels (fastcall, enough work).
    """

    def __init__(self, cx: LoweringContext, prog: Program, ref: dict, loops: _LoopKernels, blas: dict | None,
                 nthreads: int, abi: str, info: dict, raw: bool = False, regions: dict | None = None,
                 lapack: Any = None, plain: bool = False):
        self.cx = cx
        self.plain = plain
        self.raw = raw or not OBJECT_ABI  # the entry takes raw pointer arrays (a loop body's entry: `region`)
        self.regions = regions or {}  # loop region -> its compiled body (`codegen.llvm.region.RegionBody`)
        self.lapack = lapack
        self.ref = ref
        self.loops = loops
        self.blas = blas
        self.nthreads = nthreads
        self.abi = abi
        self.info = info
        self.thunks: dict[str, ir.Function] = {}  # kernel function name -> its thread routine
        self.ptrs: dict = {}
        mod = cx.module
        if abi == "fastcall":
            # PyObject* entry(PyObject* self, PyObject* const* argv, Py_ssize_t n): a METH_FASTCALL builtin
            fn = ir.Function(mod, ir.FunctionType(PTR, [PTR, PTR, I64]), "entry")
            fn.attributes.add("nounwind")
            self.selfobj, argv, _n = fn.args
            ab = ir.IRBuilder(fn.append_basic_block("entry"))
            ins, outs, arena, consts = (ab.load(ab.gep(argv, [ir.Constant(I64, i)], source_etype=PTR), typ=PTR)
                                        for i in range(4))
        else:
            fn = ir.Function(mod, ir.FunctionType(VOID, [PTR] * 4), "entry")
            fn.attributes.add("nounwind")
            ins, outs, arena, consts = fn.args
            ab = ir.IRBuilder(fn.append_basic_block("entry"))
        self.fn = fn
        self.args = {"in": ins, "out": outs, "const": consts}
        if plain:  # `_plain_entry`; `optnone` requires `noinline` (nothing calls `entry` but Python)
            fn.attributes.add("noinline")
            fn.attributes.add("optnone")
        self.start_bb = fn.append_basic_block("start")
        self.ab = ab
        self.b = b = ir.IRBuilder(self.start_bb)
        self.release_gil = abi == "fastcall" and _work(prog) >= RELEASE_GIL_WORK
        self.tstate = None
        if self.release_gil:
            self.tstate = b.call(cx.function("PyEval_SaveThread", PTR, []), [])
        cx.builder = b
        cx.alloca_builder = ab
        cx.in_loop = False
        self.blas_ctl = None
        self.n_blas = 1
        if blas and any(k.kind in (KernelKind.GEMM, KernelKind.LAPACK) for k in prog.kernels):
            self.blas_ctl = cpu_blas.blas_thread_control()
            self.n_blas = cpu_blas.blas_threads()
            if self.blas_ctl is not None:
                b.call(cx.function(self.blas_ctl[0], VOID, [I32]), [ir.Constant(I32, self.n_blas)])
        self.arena_base = b.load(b.gep(arena, [ir.Constant(I64, ARRAY_DATA_OFFSET)], source_etype=I8), typ=PTR) \
            if not self.raw else arena
        # all base pointers up front (dominate every use); a plain entry computes each where it is used,
        # as code generation at level 0 would keep a thousand of them live across the whole entry
        if not plain:
            for r in sorted(set(ref.values()), key=repr):
                if r[0] == "tile":  # run-local values live in their run's scratch (`rows`)
                    continue
                self.ptr_of_ref(r)
        else:  # pool job contexts from constant tables (`pieces.ContextTable`)
            cx.context_table = pieces.ContextTable(cx, (self.arena_base, ins, outs, consts), self._item_at)
            cx.field_of = self.field_of
        if lapack is not None:  # the LAPACK status slot, zeroed (the executable reads it after the call)
            self.status = b.gep(self.arena_base, [ir.Constant(I64, lapack.status_offset)], source_etype=I8)
            self.scratch = b.gep(self.arena_base, [ir.Constant(I64, lapack.scratch_offset)], source_etype=I8)
            for i in range(lapack.status_bytes // 8):  # the slot and the nested sub-graphs' copies
                b.store(ir.Constant(I64, 0), b.gep(self.status, [ir.Constant(I64, i)], source_etype=I64))

    def _item(self, tup: ir.Value, k: int) -> ir.Value:
        """The data pointer of item k of an argument tuple (of arrays, or of raw pointers)."""
        return self._item_at(self.b, tup, ir.Constant(I64, k))

    def _item_at(self, b: ir.IRBuilder, tup: ir.Value, k: ir.Value) -> ir.Value:
        """`_item` with builder `b` and an i64 value for k (also `pieces.ContextTable`'s fill routine)."""
        if not self.raw:
            at = b.add(b.mul(k, ir.Constant(I64, 8)), ir.Constant(I64, TUPLE_ITEMS_OFFSET)) \
                if not isinstance(k, ir.Constant) else ir.Constant(I64, TUPLE_ITEMS_OFFSET + 8 * k.constant)
            obj = b.load(b.gep(tup, [at], source_etype=I8), typ=PTR)
            return b.load(b.gep(obj, [ir.Constant(I64, ARRAY_DATA_OFFSET)], source_etype=I8), typ=PTR)
        return b.load(b.gep(tup, [k], source_etype=PTR), typ=PTR)

    def field_of_ref(self, r: Any) -> Any:
        """Buffer `r`'s base pointer as a pool job's context field: a `pieces.Field` in a plain entry."""
        if self.cx.context_table is None:
            return self.ptr_of_ref(r)
        kind, v = r
        return pieces.Field({"arena": pieces.FIELD_ARENA, "in": pieces.FIELD_IN, "out": pieces.FIELD_OUT,
                             "const": pieces.FIELD_CONST}[kind], v)

    def field_of(self, node: Any) -> Any:
        """`field_of_ref` of a materialized node's buffer."""
        return self.field_of_ref(self.ref[node])

    def next_block(self, ki: int) -> None:
        """Continue the entry in a new basic block (a plain entry's kernel calls, one block each: instruction
        selection and register coalescing at level 0 were superlinear in the length of one block)."""
        bb = self.b.function.append_basic_block(f"k{ki}")
        self.b.branch(bb)
        self.b.position_at_end(bb)

    def ptr_of_ref(self, r: Any) -> ir.Value:
        """The base pointer of buffer `r` (a `BufferPlan.ref` value), loaded once."""
        p = self.ptrs.get(r)
        if p is None:
            kind, v = r
            if kind == "arena":
                p = self.b.gep(self.arena_base, [ir.Constant(I64, v)], inbounds=True, source_etype=I8)
            else:
                p = self._item(self.args[kind], v)
            if not self.plain:
                self.ptrs[r] = p
        return p

    def ptr_of(self, node: Any) -> ir.Value:
        """The base pointer of a materialized node's buffer."""
        return self.ptr_of_ref(self.ref[node])

    def gemm_call(self, ki: int, k: Kernel) -> None:
        """A product kernel: its products (a concurrent pair in one pool job, or each as its pieces)."""
        cx, info = self.cx, self.info
        if k.concurrent and gemm.emit_gemm_pair(cx, self.ab, k.tasks, str(ki), self.ptr_of, self.blas,
                                                self.nthreads):
            info["parallel"] += 1
            info["concurrent_gemms"] += 1
            info["kernels"].append("gemm")
            return
        for ti, t in enumerate(k.tasks):
            # large products: pieces of C on the thread pool (joined before the next kernel)
            if gemm.emit_gemm_task(cx, self.ab, t, f"{ki}_{ti}", self.ptr_of, self.blas, self.nthreads):
                info["parallel"] += 1
        info["kernels"].append("gemm")

    def lapack_call(self, ki: int, k: Kernel) -> None:
        """A LAPACK kernel: each node's routine (spectral, factorization), matrix after matrix (`codegen.llvm.lapack`)."""
        for t in k.tasks:
            call = self.lapack.calls[t.node]
            emit_lapack(self.cx, call, self.ptr_of, self.scratch, self.status, call.number)
        self.info["kernels"].append("lapack")

    def loop_call(self, ki: int, k: Kernel) -> None:
        """A loop kernel: one call over its whole range, or its pieces (`_pieces_call`)."""
        info = self.info
        if ki not in self.loops.calls:
            info["kernels"].append("empty")
            return
        kc = self.loops.calls[ki]
        plan = self.loops.plans[ki]
        info["kernels"].append("loop" + ("+par" if plan.parallel else ""))
        null = ir.Constant(PTR, None)
        if k.size == 0 or not plan.groups:
            self.b.call(kc.fn, [self.ptr_of_ref(r) for r in kc.buffers] + [ir.Constant(I64, 0), ir.Constant(I64, 1),
                                                                         null])
            return
        if not plan.parallel and plan.chunks is None:
            self.b.call(kc.fn, [self.ptr_of_ref(r) for r in kc.buffers] + [ir.Constant(I64, 0),
                                                                         ir.Constant(I64, plan.extents[0]), null])
            return
        self._pieces_call(ki, k, kc, plan)

    def _pieces_call(self, ki: int, k: Kernel, kc: _KernelCall, plan: LoopPlan) -> None:
        """A loop kernel as pieces of its outer loop: its fixed chunks, or a split across threads.

        The pieces run one after the other or on the pool (on pthreads without one); then the
        partial results of full and column reductions are combined in piece order.
        """
        cx, b, ab = self.cx, self.b, self.ab
        red_tasks = [t for t in k.tasks if t.kind.reduces]
        extent = plan.extents[0]
        if plan.chunks is not None:
            ranges = plan.chunks
        else:  # elementwise or kept-outer reductions: any split gives the same values
            ranges = split_range(extent, self.nthreads)
        T = len(ranges)
        R = len(red_tasks)
        partial = opaque_alloca(ab, ir.ArrayType(I64, max(1, T * R)), f"partial{ki}") if plan.partials else None
        if plan.row_partials:  # per chunk: R vectors of `inner` 8-byte slots
            inner = plan.extents[-1]
            R = sum(1 for t in k.tasks if t.kind is TaskKind.REDUCE)
            partial = opaque_alloca(ab, ir.ArrayType(I64, T * R * inner), f"rpartial{ki}")
            partial.align = 64
            R = R * inner

        def pslot(t: int, partial: Any = partial, R: int = R) -> ir.Value:
            if partial is None:
                return ir.Constant(PTR, None)
            return b.gep(partial, [ir.Constant(I64, t * R)], source_etype=I64)

        pool = pieces.pool_fn(cx, self.nthreads) if plan.parallel else None
        if pool is not None:  # the pool's contexts take fields (`field_of_ref`), the other calls values
            bufs = [self.field_of_ref(r) for r in kc.buffers]
        else:
            bufs = [self.ptr_of_ref(r) for r in kc.buffers]
        if not plan.parallel:
            # the fixed chunks one after the other, through the function the pool would run: its loop
            # bounds are opaque (as from a thread's context), so LLVM compiles one body for both
            for t, (lo, hi) in enumerate(ranges):
                b.call(kc.fn, bufs + [pieces.opaque_i64(b, lo), pieces.opaque_i64(b, hi), pslot(t)])
        else:
            self.info["parallel"] += 1
            thunk = self.thunks.get(kc.fn.name)
            if thunk is None:
                thunk = self.thunks[kc.fn.name] = pieces.thunk_fn(cx, kc.fn, len(bufs), ki)
            if pool is not None:
                rows = [bufs + [ir.Constant(I64, lo), ir.Constant(I64, hi), pslot(t)]
                        for t, (lo, hi) in enumerate(ranges)]
                pieces.run_on_pool(b, ab, pool, thunk, rows, self.nthreads, f"pctx{ki}", cx.context_table)
            else:  # no pool (not Linux): a thread per piece
                pieces.run_on_threads(cx, b, ab, thunk, kc.fn, bufs, ranges, pslot, ki)
        if plan.row_partials:
            combine_row_partials(cx, b, k, partial, T, plan.extents[-1], self.ptr_of)
        if plan.partials:
            combine_partials(cx, b, red_tasks, partial, T, R, self.ptr_of)

    def close(self) -> None:
        """The BLAS thread count restored, the GIL taken back, the return; the allocas branch to the body."""
        cx, b = self.cx, self.b
        if self.blas_ctl is not None:
            b.call(cx.function(self.blas_ctl[1], VOID, [I32]), [ir.Constant(I32, self.n_blas)])
        self.info["blas_threads"] = self.n_blas if self.blas_ctl is not None else None
        if self.abi == "fastcall":
            if self.release_gil:
                b.call(cx.function("PyEval_RestoreThread", VOID, [PTR]), [self.tstate])
            # return self with a new reference (the GIL is held again here)
            selfobj = self.selfobj
            rc = b.load(selfobj, typ=I64)
            b.store(b.add(rc, ir.Constant(I64, 1)), selfobj)
            b.ret(selfobj)
        else:
            b.ret_void()
        self.ab.branch(self.start_bb)


#: How each kernel kind lowers at the entry: a loop kernel as calls of its function (its tasks lower
#: inside it, `codegen.llvm.loops.ELEMENT_STEPS`), a product kernel as BLAS calls (`gemm`), a spectral
#: kernel as LAPACK calls (`lapack`).
#: tests/test_codegen.py checks every `KernelKind` has one.
KERNEL_CALLS = {
    KernelKind.LOOP: _Entry.loop_call,
    KernelKind.GEMM: _Entry.gemm_call,
    KernelKind.REGION: region_call,
    KernelKind.LAPACK: _Entry.lapack_call,
}


class _Profile:
    """Timing of every kernel call: clock_gettime around it, nanoseconds summed into the global `sg_profile`.

    `sg_profile` holds one i64 per kernel, then the number of calls of the entry.
    """

    def __init__(self, entry: _Entry, nk: int):
        cx, b = entry.cx, entry.b
        self.b = b
        prof = ir.GlobalVariable(cx.module, ir.ArrayType(I64, nk + 1), "sg_profile")
        prof.initializer = ir.Constant(ir.ArrayType(I64, nk + 1), None)
        prof.type = PTR  # opaque pointer (as `opaque_alloca`): addressed with i64 GEPs
        self.prof = prof
        self.clock = cx.function("clock_gettime", I32, [I32, PTR])
        self.ts = opaque_alloca(entry.ab, ir.ArrayType(I64, 2), "ts")
        calls = b.gep(prof, [ir.Constant(I64, nk)], source_etype=I64)
        b.store(b.add(b.load(calls, typ=I64), ir.Constant(I64, 1)), calls)

    def now(self) -> ir.Value:
        """The monotonic clock in nanoseconds."""
        b, ts = self.b, self.ts
        b.call(self.clock, [ir.Constant(I32, 1), ts])  # CLOCK_MONOTONIC
        sec = b.load(ts, typ=I64)
        nsec = b.load(b.gep(ts, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

    def account(self, ki: int, t0: ir.Value) -> None:
        """Add the time since t0 to kernel ki's slot."""
        b = self.b
        slot = b.gep(self.prof, [ir.Constant(I64, ki)], source_etype=I64)
        b.store(b.add(b.load(slot, typ=I64), b.sub(self.now(), t0)), slot)


def build_module(prog: Program, bp: BufferPlan, blas: dict | None, name: str = "f",
                 nthreads: int | None = None, abi: str = "ctypes", profile: bool = False, raw: bool = False,
                 regions: dict | None = None, lapack: Any = None, segments: list | tuple = (),
                 light: bool = False) -> tuple[ir.Module, dict]:
    """Emit the LLVM module of a partitioned program.

    Args:
        prog: the partitioned program (`codegen.kernels.partition.partition`).
        bp: its buffer plan (`codegen.kernels.buffers.plan_buffers`).
        blas: the BLAS symbols by dtype (`codegen.cpu.blas_library`), or None.
        name: label of the module.
        nthreads: threads for large kernels (default `num_threads()`).
        abi: how the entry is called: "fastcall" (a METH_FASTCALL builtin) or "ctypes".
        profile: time every kernel (clock_gettime around each call) into the
            global array `sg_profile` (nanoseconds per kernel, then the call count).
        raw: the entry takes raw pointer arrays whatever the ABI (a loop body called from native code).
        regions: loop region -> its compiled body (`codegen.llvm.region.compile_regions`).
        lapack: the program's LAPACK calls and their arena space (`codegen.cpu.lapack.plan_lapack`), or None.
        segments: the row-tiled runs of kernels (`codegen.kernels.rows.plan_row_segments`, placed by
            `plan_buffers`): each is called as one function over tiles (`codegen.llvm.rows`).
        light: the module is for the light pipeline (`codegen.jit.optimize(light=True)`): libm functions
            outside loops are called through pointers (`LoweringContext.indirect_math`).

    Returns:
        (module, info): info has kernel kinds, parallel kernels, vector width
        preference, kernel_functions (distinct loop functions) and
        loop_kernel_calls.
    """
    nthreads = num_threads() if nthreads is None else nthreads
    cx = _new_module(name)
    cx.indirect_math = light
    tiled = frozenset(ki for seg in segments for ki in seg.kernels)
    loops = _emit_loop_kernels(cx, prog, bp.ref, nthreads, tiled)
    runs = {seg.first: (si, emit_segment_function(cx, si, seg, loops.calls, loops.plans,
                                                  sum(max(prog.kernels[ki].size, 1) * max(_kernel_cost(prog.kernels[ki]), 1)
                                                      for ki in seg.kernels)))
            for si, seg in enumerate(segments)}
    info = {"kernels": [], "parallel": 0, "concurrent_gemms": 0, "threads": nthreads, "profile": profile,
            "kernel_functions": loops.functions, "loop_kernel_calls": len(loops.calls),
            "row_segments": len(segments), "row_tiled_kernels": len(tiled)}
    plain = _plain_entry(prog, loops)
    info["entry_optimized"] = not plain
    entry = _Entry(cx, prog, bp.ref, loops, blas, nthreads, abi, info, raw=raw, regions=regions, lapack=lapack,
                   plain=plain)
    prof = _Profile(entry, len(prog.kernels)) if profile else None
    for ki, k in enumerate(prog.kernels):
        if plain:
            entry.next_block(ki)
        t0 = prof.now() if prof is not None else None
        if ki in runs:  # a row-tiled run: one call over its tiles (its time counts as its first kernel's)
            si, sf = runs[ki]
            par = nthreads > 1 and sf.seg.copies > 1 and sf.work >= _par_min_work()
            emit_segment_call(entry, sf, si, split_range(sf.seg.rows, sf.seg.copies) if par else None)
            info["parallel"] += int(par)
        if ki in tiled:
            info["kernels"].append("loop+rows" if ki in loops.calls else "empty")
        else:
            KERNEL_CALLS[k.kind](entry, ki, k)
        if prof is not None:
            prof.account(ki, t0)
    entry.close()
    info["release_gil"] = entry.release_gil
    info["prefer_512"] = has_avx512()
    return cx.module, info


def module_text(mod: ir.Module, prefer_512: bool) -> str:
    """The module's IR text with function attributes llvmlite cannot express (vector width)."""
    text = str(mod)
    if prefer_512:
        def add(m: "re.Match") -> str:
            attrs = m.group(2) or ""
            if "prefer-vector-width" not in attrs:
                attrs += ' "prefer-vector-width"="512"'
            return m.group(1) + attrs + "\n{"

        text = re.sub(r'^(define [^\n]*\))( [^\n{]*)?\n\{', add, text, flags=re.M)
    return text
