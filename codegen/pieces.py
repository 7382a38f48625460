"""Pieces of work on the thread pool: contexts, the pool call, the pthread fallback, products cut into pieces.

Emitters for `program.build_module`: a loop kernel's thread routine (`thunk_fn`)
and its pieces on the pool (`run_on_pool`) or on a pthread each
(`run_on_threads`); a product as its pieces (`emit_gemm_pieces`, the cut of
`lower.gemm_pieces`, on the pool or one after the other) and two independent
products side by side (`emit_gemm_pair`). Which pieces there are never
depends on the thread count (docs/compile.md, "Determinism").
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from . import lower as L

__all__ = ["opaque_i64", "run_on_threads", "pool_fn", "run_on_pool", "emit_gemm_pieces", "gemm_piece_fn",
           "emit_gemm_pair", "thunk_fn"]


def opaque_i64(b: ir.IRBuilder, value: int) -> ir.Value:
    """The i64 constant `value` hidden from the optimizer (an empty inline asm), as a thread's context hides it."""
    fty = ir.FunctionType(L.I64, [L.I64])
    return b.asm(fty, "", "=r,0", [ir.Constant(L.I64, value)], side_effect=False, name="opaque")


def run_on_threads(cx: L.LoweringContext, b: ir.IRBuilder, ab: ir.IRBuilder, thunk: ir.Function,
                    kern: ir.Function, bufs: list, ranges: list, pslot: Any, ki: int) -> None:
    """Without the pool: a pthread per piece but the first (run here), joined; a piece whose thread
    could not be created runs here too."""
    pthread_create = cx.function("pthread_create", L.I32, [L.PTR, L.PTR, L.PTR, L.PTR])
    pthread_join = cx.function("pthread_join", L.I32, [L.I64, L.PTR])
    T = len(ranges)
    nf = len(bufs) + 3
    tids = L.opaque_alloca(ab, ir.ArrayType(L.I64, T), f"tids{ki}")
    ctxs = L.opaque_alloca(ab, ir.ArrayType(L.I64, T * nf), f"ctx{ki}")
    rcs = []
    for t in range(1, T):
        c = b.gep(ctxs, [ir.Constant(L.I64, t * nf)], source_etype=L.I64)
        fields = bufs + [ir.Constant(L.I64, ranges[t][0]), ir.Constant(L.I64, ranges[t][1]), pslot(t)]
        for fi, v in enumerate(fields):
            b.store(v, b.gep(ctxs, [ir.Constant(L.I64, t * nf + fi)], source_etype=v.type))
        tid = b.gep(tids, [ir.Constant(L.I64, t)], source_etype=L.I64)
        rcs.append((c, tid, b.call(pthread_create, [tid, ir.Constant(L.PTR, None), thunk, c])))
    b.call(kern, bufs + [opaque_i64(b, ranges[0][0]), opaque_i64(b, ranges[0][1]), pslot(0)])
    for c, tid, rc in rcs:
        ok = b.icmp_signed("==", rc, ir.Constant(L.I32, 0))
        with b.if_else(ok) as (then, otherwise):
            with then:
                b.call(pthread_join, [b.load(tid, typ=L.I64), ir.Constant(L.PTR, None)])
            with otherwise:  # no thread: run that range here
                b.call(thunk, [c])


def pool_fn(cx: L.LoweringContext, nthreads: int) -> ir.Function | None:
    """The declaration of the pool's `symgraph_pool_run` (see `runtime.thread_pool`), or None (no pool, 1 thread)."""
    if nthreads <= 1:
        return None
    from .cpu.pool import thread_pool

    sym = thread_pool()
    return None if sym is None else cx.function(sym, L.VOID, [L.PTR, L.PTR, L.I64, L.I64, L.I32])


def run_on_pool(b: ir.IRBuilder, ab: ir.IRBuilder, pool: ir.Function, thunk: ir.Function, rows: list,
                 nthreads: int, name: str) -> None:
    """Store one context per piece (8-byte fields, `rows[t]`) and run `thunk` on every piece through the pool.

    The call returns when every piece has finished (the calling thread runs pieces too).
    """
    nf = len(rows[0])
    ctxs = L.opaque_alloca(ab, ir.ArrayType(L.I64, len(rows) * nf), name)
    for t, fields in enumerate(rows):
        for fi, v in enumerate(fields):
            b.store(v, b.gep(ctxs, [ir.Constant(L.I64, t * nf + fi)], source_etype=v.type))
    b.call(pool, [thunk, ctxs, ir.Constant(L.I64, 8 * nf), ir.Constant(L.I64, len(rows)),
                  ir.Constant(L.I32, nthreads)])


def emit_gemm_pieces(cx: L.LoweringContext, ab: ir.IRBuilder, task: Any, label: str, ptr_of: Any, blas: dict,
                      nthreads: int) -> bool:
    """Emit a gemm task as its pieces (`lower.gemm_pieces`); True when they run on the thread pool.

    On the pool each piece is a single-threaded BLAS call on a block of rows
    (or columns) of C, or a few such calls when it spans batch elements
    (`lower.emit_gemm` emits a piece into an internal function
    `ptr gemm_piece_<label>(ptr ctx)` whose context holds the A, B and C base
    pointers and the piece's range). Without a pool, on one thread, or when
    SYMGRAPH_BLAS_THREADS asks the BLAS for threads of its own, the same
    pieces are called one after the other, so the calls (and the bits) are
    those of any thread count.
    """
    from .cpu.blas import blas_threads

    split = L.gemm_pieces(task, nthreads)
    if split is None:
        L.emit_gemm(cx, task, ptr_of, blas)
        return False
    axis, ranges = split
    # SYMGRAPH_BLAS_THREADS > 1 asks OpenBLAS to split products itself: pieces on threads would oversubscribe
    pool = pool_fn(cx, nthreads) if blas_threads() == 1 else None
    if pool is None:
        for lo, hi in ranges:
            L.emit_gemm(cx, task, ptr_of, blas, piece=(axis, ir.Constant(L.I64, lo), ir.Constant(L.I64, hi)))
        return False
    fn, bases = gemm_piece_fn(cx, task, label, blas, axis)
    rows = [[ptr_of(x) for x in bases] + [ir.Constant(L.I64, lo), ir.Constant(L.I64, hi)] for lo, hi in ranges]
    run_on_pool(cx.builder, ab, pool, fn, rows, nthreads, f"gctx{label}")
    return True


def gemm_piece_fn(cx: L.LoweringContext, task: Any, label: str, blas: dict, axis: str) -> tuple[ir.Function, list]:
    """`ptr gemm_piece_<label>(ptr ctx)`: the product of `task` on rows (axis "m") or columns ("n") [lo, hi) of C.

    The context holds 8-byte fields: the A, B and C base pointers (of the nodes
    returned, in that order), lo and hi (`lower.emit_gemm`'s piece numbering).
    """
    bases = [task.gemm["a"]["base"], task.gemm["b"]["base"], task.node]
    fn = ir.Function(cx.module, ir.FunctionType(L.PTR, [L.PTR]), f"gemm_piece_{label}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    types = [L.PTR] * 3 + [L.I64] * 2
    vals = [fb.load(fb.gep(fn.args[0], [ir.Constant(L.I64, i)], source_etype=ty), typ=ty) for i, ty in enumerate(types)]
    local: dict = {}
    for node, v in zip(bases, vals):
        local.setdefault(node, v)
    outer = cx.builder
    cx.builder = fb
    try:
        L.emit_gemm(cx, task, lambda node: local[node], blas, piece=(axis, vals[3], vals[4]))
    finally:
        cx.builder = outer
    fb.ret(ir.Constant(L.PTR, None))
    return fn, bases


def emit_gemm_pair(cx: L.LoweringContext, ab: ir.IRBuilder, tasks: list, label: str, ptr_of: Any, blas: dict,
                    nthreads: int) -> bool:
    """Emit two independent products (`fuse.Kernel.concurrent`) side by side: all their pieces in one pool job.

    Each product runs as the pieces it runs as alone (`lower.gemm_pieces`, or
    one piece over all of C), so pairing changes when products run, not
    their bits. A dispatcher `gemm_pair_<label>(ctx)` reads the product's
    index from the first context field and runs that product's piece
    function (`gemm_piece_fn`) on the rest. False (nothing emitted) without
    a pool, with SYMGRAPH_BLAS_THREADS > 1, or for a batched product.
    """
    from .cpu.blas import blas_threads

    pool = pool_fn(cx, nthreads) if blas_threads() == 1 and len(tasks) == 2 else None
    if pool is None or any(t.node.ndim != 2 for t in tasks):
        return False
    pieces = []
    for ti, t in enumerate(tasks):
        axis, ranges = L.gemm_pieces(t, nthreads) or ("m", [(0, t.node.shape[0])])
        fn, bases = gemm_piece_fn(cx, t, f"{label}_{ti}", blas, axis)
        pieces.append((fn, bases, ranges))
    disp = ir.Function(cx.module, ir.FunctionType(L.PTR, [L.PTR]), f"gemm_pair_{label}")
    disp.linkage = "internal"
    disp.attributes.add("nounwind")
    db = ir.IRBuilder(disp.append_basic_block("entry"))
    ctx = disp.args[0]
    which = db.load(ctx, typ=L.I64)
    rest = db.gep(ctx, [ir.Constant(L.I64, 1)], source_etype=L.I64)
    with db.if_else(db.icmp_signed("==", which, ir.Constant(L.I64, 0))) as (first, second):
        with first:
            db.call(pieces[0][0], [rest])
        with second:
            db.call(pieces[1][0], [rest])
    db.ret(ir.Constant(L.PTR, None))
    rows = [[ir.Constant(L.I64, ti)] + [ptr_of(x) for x in bases] + [ir.Constant(L.I64, lo), ir.Constant(L.I64, hi)]
            for ti, (_fn, bases, ranges) in enumerate(pieces) for lo, hi in ranges]
    run_on_pool(cx.builder, ab, pool, disp, rows, nthreads, f"pairctx{label}")
    return True


def thunk_fn(cx: L.LoweringContext, kern: ir.Function, nbufs: int, ki: int) -> ir.Function:
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
