"""A row-tiled run of loop kernels (`codegen.kernels.rows.RowSegment`) as one function over tiles.

`void seg(ptr bufs..., i64 lo, i64 hi, ptr scratch)` runs rows [lo, hi) of the run tile by
tile: for t0 = lo, lo + B, ..., each kernel of the run is called on the rows [t0, min(t0 + B,
hi)) of its outer loop (in its own units: a kernel whose outer loop merges axis 0 with the
axes after it runs u = extent / P iterations per row). Its buffers are the run's arguments, and
for a run-local value a pointer into `scratch` shifted back by t0 rows, so that the kernel's
own addressing of row r lands at row r - t0 of the scratch. The entry calls the function on all
rows, or on pieces of the rows on the thread pool, each piece with its own scratch copy
(`emit_segment_call`).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from . import pieces
from .context import I8, I64, PTR, VOID, LoweringContext

__all__ = ["SegmentFunction", "emit_segment_function", "emit_segment_call"]


class SegmentFunction:
    """An emitted run: its function, its buffers (refs, in argument order) and its run."""

    def __init__(self, fn: ir.Function, buffers: list, seg: Any, work: int):
        self.fn = fn
        self.buffers = buffers
        self.seg = seg
        self.work = work


def emit_segment_function(cx: LoweringContext, si: int, seg: Any, calls: dict, plans: dict,
                          work: int) -> SegmentFunction:
    """Emit run `si` as an internal function over tiles of rows.

    Args:
        cx: the lowering context of the module.
        si: the run's index (its function is ``seg_{si}``).
        seg: the run (`RowSegment`).
        calls: kernel index -> its `_KernelCall` (function and buffer refs).
        plans: kernel index -> its `LoopPlan` (the outer loop's extent).
        work: the run's estimated operations (for the thread decision at the call).
    """
    bufs: list = []
    for ki in seg.kernels:
        if ki not in calls:
            continue
        for r in calls[ki].buffers:
            if r[0] != "tile" and r not in bufs:
                bufs.append(r)
    fn = ir.Function(cx.module, ir.FunctionType(VOID, [PTR] * len(bufs) + [I64, I64, PTR]), f"seg_{si}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    arg = dict(zip(bufs, fn.args))
    lo, hi, scratch = fn.args[-3:]
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("tile")
    body = fn.append_basic_block("tile.body")
    done = fn.append_basic_block("tile.end")
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    t0 = b.phi(I64, name="t0")
    t0.add_incoming(lo, entry)
    b.cbranch(b.icmp_signed("<", t0, hi), body, done)
    b.position_at_end(body)
    nxt = b.add(t0, ir.Constant(I64, seg.tile), flags=("nsw",))
    t1 = b.select(b.icmp_signed("<", nxt, hi), nxt, hi, name="t1")
    null = ir.Constant(PTR, None)
    for ki in seg.kernels:
        if ki not in calls:
            continue
        kc = calls[ki]
        unit = plans[ki].extents[0] // seg.rows
        args = []
        for r in kc.buffers:
            if r[0] == "tile":  # ("tile", run, offset, row bytes): row r of the value at scratch row r - t0
                _, _, off, row_bytes = r
                shift = b.sub(ir.Constant(I64, off), b.mul(t0, ir.Constant(I64, row_bytes), flags=("nsw",)))
                args.append(b.gep(scratch, [shift], source_etype=I8))
            else:
                args.append(arg[r])
        if unit == 1:
            args += [t0, t1, null]
        else:
            u = ir.Constant(I64, unit)
            args += [b.mul(t0, u, flags=("nsw",)), b.mul(t1, u, flags=("nsw",)), null]
        b.call(kc.fn, args)
    t0.add_incoming(t1, b.block)
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()
    return SegmentFunction(fn, bufs, seg, work)


def emit_segment_call(entry: Any, sf: SegmentFunction, si: int, ranges: list | None) -> None:
    """Call run `sf` from the entry: on all rows with scratch copy 0, or as pieces of rows on threads.

    `ranges`: None (one thread), or at most `seg.copies` pieces of the rows, each run with its own
    scratch copy; every row is computed by the same code whichever piece runs it, so threads
    change no value.
    """
    cx, b, ab = entry.cx, entry.b, entry.ab
    seg = sf.seg
    bufs = [entry.ptr_of_ref(r) for r in sf.buffers]
    base = entry.arena_base

    def scratch(t: int) -> ir.Value:
        return b.gep(base, [ir.Constant(I64, seg.arena_offset + t * seg.scratch_bytes)], inbounds=True,
                     source_etype=I8)

    if ranges is None:
        b.call(sf.fn, bufs + [ir.Constant(I64, 0), ir.Constant(I64, seg.rows), scratch(0)])
        return
    thunk = pieces.thunk_fn(cx, sf.fn, len(bufs), f"seg{si}")
    pool = pieces.pool_fn(cx, entry.nthreads)
    if pool is not None:
        rows = [bufs + [ir.Constant(I64, lo), ir.Constant(I64, hi), scratch(t)] for t, (lo, hi) in enumerate(ranges)]
        pieces.run_on_pool(b, ab, pool, thunk, rows, entry.nthreads, f"sctx{si}")
    else:
        pieces.run_on_threads(cx, b, ab, thunk, sf.fn, bufs, ranges, scratch, f"s{si}")
