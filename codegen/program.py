"""Whole-graph assembly: buffers, the arena plan, and the single native entry function.

Buffers: arguments and constants belong to the caller, outputs are fresh
arrays (or donated arguments), every other materialized value gets a slot in
one arena. Slots are placed by lifetime in kernel steps (from the producing
kernel to the last reader) with `symgraph.passes.schedule.assign_offsets`,
so the arena is the planned peak (plus alignment).

`entry(args, outs, arena, consts)` runs the kernels in order; large
elementwise and full-reduction kernels are split across threads (pthreads,
per-thread partial results combined in a fixed order).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from symgraph.passes.schedule import assign_offsets, interval_peak

from . import fuse
from . import lower as L
from .fuse import TRANSCENDENTALS, Kernel, Program, expr_weight, kernel_exprs
from .runtime import ARRAY_DATA_OFFSET, OBJECT_ABI, TUPLE_ITEMS_OFFSET

__all__ = ["BufferPlan", "plan_buffers", "build_module", "num_threads"]

PAR_MIN_ELEMENTS = 1 << 15
# Estimated operations (loop body cost x trip count) above which a loop kernel is split across
# threads. Each split starts threads and waits for the slowest; on a machine whose cores are
# shared with other work a started thread may wait milliseconds for a core, so only kernels of
# several milliseconds gain. Measured on a busy 2-core machine: with 2**21 the W6 training step
# split 13 sub-millisecond kernels and took 2.5x longer than on one thread (135 vs 55 ms).
PAR_MIN_WORK = 1 << 24
RELEASE_GIL_WORK = 1 << 14  # estimated operations above which the entry releases the GIL


def num_threads() -> int:
    """Threads for large kernels: SYMGRAPH_NUM_THREADS, else the CPUs this process may use (at most 8)."""
    env = os.environ.get("SYMGRAPH_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
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
        peak_bytes: planned peak of live intermediates and outputs (bytes).
    """

    ref: dict
    out_buffers: list
    out_plan: list
    consts: list
    arena_bytes: int
    peak_bytes: int


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
    return BufferPlan(ref, out_buffers, out_plan, consts, total, peak)


def _kernel_cost(k: Kernel) -> int:
    return sum(8 if e.op in TRANSCENDENTALS else 1 for e in kernel_exprs(k) if e.op not in ("var", "const"))


def _work(prog: Program) -> int:
    """A rough operation count of the whole program (loop body cost times trip count, gemm flops)."""
    total = 0
    for k in prog.kernels:
        if k.kind == "gemm":
            for t in k.tasks:
                a, b = t.gemm.get("mm", t.node).inputs if t.gemm else t.node.inputs
                total += 2 * t.node.size * a.shape[-1]
        else:
            total += max(k.size, 1) * max(_kernel_cost(k), 1)
    return total


def _decide_parallel(k: Kernel, plan: L.LoopPlan, nthreads: int) -> None:
    if nthreads <= 1 or not plan.groups or k.size < PAR_MIN_ELEMENTS or plan.extents[0] < 2:
        return
    if _kernel_cost(k) * k.size < PAR_MIN_WORK:
        return
    kinds = {t.kind for t in k.tasks}
    if "scatter" in kinds:
        return
    if plan.has_red:
        if not plan.register:
            return
        if plan.n_kept == 0:
            if "argmax" in kinds:
                return
            plan.partials = True
    plan.parallel = True


def build_module(prog: Program, bp: BufferPlan, blas: dict | None, name: str = "f",
                 nthreads: int | None = None, abi: str = "ctypes", profile: bool = False) -> tuple[ir.Module, dict]:
    """Emit the LLVM module of a partitioned program.

    Args:
        profile: time every kernel (clock_gettime around each call) into the
            global array `sg_profile` (nanoseconds per kernel, then the call count).

    Returns:
        (module, info): info has kernel kinds, parallel kernels, vector width preference.
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

    emitters: dict[int, Any] = {}
    plans: dict[int, L.LoopPlan] = {}
    for ki, k in enumerate(prog.kernels):
        if k.kind != "loop" or k.size == 0 and not any(t.kind in ("reduce", "scatter") for t in k.tasks):
            continue
        plan = L.LoopPlan(k)
        _decide_parallel(k, plan, nthreads)
        plans[ki] = plan
        emitters[ki] = L.lower_loop_kernel(cx, k, ki, buffer_of, plan)
    if sum(sum(expr_weight(e) for e in kernel_exprs(k)) for ki, k in enumerate(prog.kernels) if ki in emitters) \
            > fuse.MAX_KERNEL_COST:
        # Keep big programs' kernels out of `entry`: inlined (internal functions called once),
        # they would make one function as big as the whole graph, the superlinear case for LLVM
        # that `fuse.MAX_KERNEL_COST` avoids (fuse.py, `_Partitioner.split`).
        for ke in emitters.values():
            ke.fn.attributes.add("noinline")

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
        from .runtime import blas_thread_control, blas_threads

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

    pthread_create = pthread_join = None
    info = {"kernels": [], "parallel": 0, "threads": nthreads, "profile": profile}
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
        nonlocal pthread_create, pthread_join
        if k.kind == "gemm":
            for t in k.tasks:
                L.emit_gemm(cx, t, lambda node: ptr_of_ref(ref[node]), blas)
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
        if not plan.parallel:
            b.call(ke.fn, bufs + [ir.Constant(L.I64, 0), ir.Constant(L.I64, extent), ir.Constant(L.PTR, None)])
            return
        info["parallel"] += 1
        if pthread_create is None:
            pthread_create = cx.function("pthread_create", L.I32, [L.PTR, L.PTR, L.PTR, L.PTR])
            pthread_join = cx.function("pthread_join", L.I32, [L.I64, L.PTR])
        T = min(nthreads, extent)
        chunk = -(-extent // T)
        ranges = [(t * chunk, min(extent, (t + 1) * chunk)) for t in range(T)]
        ranges = [r for r in ranges if r[0] < r[1]]
        T = len(ranges)
        R = len(red_tasks)
        nf = len(bufs) + 3  # context: buffer pointers, lo, hi, partial pointer (8 bytes each)
        thunk = _thunk(cx, ke.fn, len(bufs), ki)
        partial = L.opaque_alloca(ab, ir.ArrayType(L.I64, max(1, T * R)), f"partial{ki}") if plan.partials else None
        tids = L.opaque_alloca(ab, ir.ArrayType(L.I64, T), f"tids{ki}")
        ctxs = L.opaque_alloca(ab, ir.ArrayType(L.I64, T * nf), f"ctx{ki}")
        rcs = []

        def pslot(t: int, partial: Any = partial, R: int = R) -> ir.Value:
            if partial is None:
                return ir.Constant(L.PTR, None)
            return b.gep(partial, [ir.Constant(L.I64, t * R)], source_etype=L.I64)

        for t in range(1, T):
            c = b.gep(ctxs, [ir.Constant(L.I64, t * nf)], source_etype=L.I64)
            fields = bufs + [ir.Constant(L.I64, ranges[t][0]), ir.Constant(L.I64, ranges[t][1]), pslot(t)]
            for fi, v in enumerate(fields):
                b.store(v, b.gep(ctxs, [ir.Constant(L.I64, t * nf + fi)], source_etype=v.type))
            tid = b.gep(tids, [ir.Constant(L.I64, t)], source_etype=L.I64)
            rcs.append((t, c, tid, b.call(pthread_create, [tid, ir.Constant(L.PTR, None), thunk, c])))
        b.call(ke.fn, bufs + [ir.Constant(L.I64, ranges[0][0]), ir.Constant(L.I64, ranges[0][1]), pslot(0)])
        for _t, c, tid, rc in rcs:
            ok = b.icmp_signed("==", rc, ir.Constant(L.I32, 0))
            with b.if_else(ok) as (then, otherwise):
                with then:
                    b.call(pthread_join, [b.load(tid, typ=L.I64), ir.Constant(L.PTR, None)])
                with otherwise:  # no thread: run that range here
                    b.call(thunk, [c])
        if plan.partials:
            for ri, t in enumerate(red_tasks):
                r = L.REDUCERS[t.red_op]
                ad = r.acc_dtype(t.node.dtype)
                ty = L.ll_type(ad)
                acc = None
                for th in range(T):
                    p = b.gep(partial, [ir.Constant(L.I64, (th * R + ri) * 8 // ad.itemsize)], source_etype=ty)
                    v = b.load(p, typ=ty)
                    acc = v if acc is None else r.combine(cx, acc, v, ad)
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


def _thunk(cx: L.LoweringContext, kern: ir.Function, nbufs: int, ki: int) -> ir.Function:
    """`ptr thunk(ptr ctx)`: unpack a context (8-byte fields) and run the kernel on its range (a thread routine)."""
    fn = ir.Function(cx.module, ir.FunctionType(L.PTR, [L.PTR]), f"thunk_{ki}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c = fn.args[0]
    vals = []
    types = [L.PTR] * nbufs + [L.I64, L.I64, L.PTR]
    for fi, ty in enumerate(types):
        vals.append(b.load(b.gep(c, [ir.Constant(L.I64, fi)], source_etype=ty), typ=ty))
    b.call(kern, vals)
    b.ret(ir.Constant(L.PTR, None))
    return fn


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
