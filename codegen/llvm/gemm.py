"""Matrix products: BLAS calls (`emit_gemm`), the pieces a product is cut into (`gemm_pieces`), and their lowering.

A float `matmul` task is a loop of CBLAS ``?gemm`` calls (ILP64 ints) on strided views of its
operands (`codegen.kernels.pairing.gemm_view`). A large product is cut into pieces of C that
never depend on the thread count (`gemm_pieces`), run on the thread pool or one after the
other (`emit_gemm_task`); two independent products run side by side (`emit_gemm_pair`).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from llvmlite import ir

from symgraph.passes.cost import matmul_flops

from ..cpu import blas as cpu_blas
from ..kernels.affine import c_strides
from ..kernels.tasks import Task
from .context import I32, I64, PTR, VOID, LoweringContext, for_range, ll_type
from .pieces import pool_fn, run_on_pool

__all__ = ["emit_gemm", "gemm_pieces", "emit_gemm_task", "gemm_piece_fn", "emit_gemm_pair", "GEMM_PAR_MIN_FLOPS",
           "GEMM_PIECE_ALIGN", "GEMM_ATOMS", "GEMM_ATOM_MIN"]

CBLAS_ROW_MAJOR = 101
CBLAS_NO_TRANS = 111
CBLAS_TRANS = 112


def emit_gemm(cx: LoweringContext, task: Task, ptr_of: Callable[[Any], ir.Value], blas_names: dict,
              piece: tuple[str, ir.Value, ir.Value] | None = None) -> None:
    """Emit a (batched) matrix product, or one piece of it, as a loop of cblas_?gemm calls (ILP64 ints).

    C[..., m, n] = alpha A[..., m, k] @ B[..., k, n] + beta C with A and B
    strided views (row-major, possibly transposed, with arbitrary batch
    strides); C is a contiguous buffer. alpha and beta come from
    `task.gemm` (default 1 and 0); beta = 1 accumulates a product into a sum
    whose other terms were stored first (see `codegen.kernels.pairing.plan_accumulation`).

    Args:
        piece: None for the whole product, or (axis, lo, hi): only the rows
            ("m") or columns ("n") numbered [lo, hi) in the batch-major
            flattening of all the batch's rows (columns), i.e. row r of batch
            element i is number i * m + r. lo and hi are i64 values; a piece
            spanning several batch elements makes one call per element.
            Pieces write disjoint parts of C, so they may run concurrently.
            (`gemm_pieces` chooses them; the k == 0 case is never split.)
    """
    b = cx.builder
    node = task.node
    mm = task.gemm.get("mm", node)
    alpha = float(task.gemm.get("alpha", 1.0))
    beta = float(task.gemm.get("beta", 0.0))
    a_in, b_in = mm.inputs
    *batch, m, k = a_in.shape
    n = b_in.shape[-1]
    ty = ll_type(node.dtype)
    mt = ty
    cptr = ptr_of(node)
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta:
            return  # C += 0
        def zero(i: ir.Value) -> None:
            cx.builder.store(ir.Constant(ty, 0.0), cx.builder.gep(cptr, [i], inbounds=True, source_etype=mt))

        for_range(b, ir.Constant(I64, 0), ir.Constant(I64, node.size), zero, name="gz")
        return
    name = blas_names[node.dtype.str]
    fn = cx.function(name, VOID, [I32, I32, I32, I64, I64, I64, ty, PTR, I64, PTR, I64, ty, PTR, I64])
    va, vb = task.gemm["a"], task.gemm["b"]
    aptr, bptr = ptr_of(va["base"]), ptr_of(vb["base"])
    cst = c_strides(node.shape)
    c64 = lambda v: ir.Constant(I64, v)

    def call(bidx: list[ir.Value], sub: tuple[ir.Value, ir.Value] | None = None) -> None:
        bb = cx.builder

        def off(base: int, strides: tuple) -> ir.Value:
            v = c64(base)
            for i, s in zip(bidx, strides):
                if s:
                    v = bb.add(v, bb.mul(i, c64(s)))
            return v

        oa, ob, oc = off(va["offset"], va["batch_strides"]), off(vb["offset"], vb["batch_strides"]), off(0, cst[:-2])
        mv, nv = c64(m), c64(n)
        if sub is not None:  # rows (columns) [s, e) of this batch element
            s, e = sub
            if piece[0] == "m":
                mv = bb.sub(e, s)
                oa = bb.add(oa, s if va["trans"] else bb.mul(s, c64(va["ld"])))
                oc = bb.add(oc, bb.mul(s, c64(n)))
            else:
                nv = bb.sub(e, s)
                ob = bb.add(ob, bb.mul(s, c64(vb["ld"])) if vb["trans"] else s)
                oc = bb.add(oc, s)
        pa = bb.gep(aptr, [oa], source_etype=mt)
        pb = bb.gep(bptr, [ob], source_etype=mt)
        pc = bb.gep(cptr, [oc], source_etype=mt)
        bb.call(fn, [ir.Constant(I32, CBLAS_ROW_MAJOR),
                     ir.Constant(I32, CBLAS_TRANS if va["trans"] else CBLAS_NO_TRANS),
                     ir.Constant(I32, CBLAS_TRANS if vb["trans"] else CBLAS_NO_TRANS),
                     mv, nv, c64(k), ir.Constant(ty, alpha),
                     pa, c64(va["ld"]), pb, c64(vb["ld"]), ir.Constant(ty, beta),
                     pc, c64(n)])

    if piece is not None:
        axis, lo, hi = piece
        ext = m if axis == "m" else n
        bstr = c_strides(tuple(batch))

        def one(bi: ir.Value) -> None:
            bb = cx.builder
            first = bb.mul(bi, c64(ext))
            s = bb.sub(bb.select(bb.icmp_signed(">", lo, first), lo, first), first)
            last = bb.add(first, c64(ext))
            e = bb.sub(bb.select(bb.icmp_signed("<", hi, last), hi, last), first)
            bidx = [bb.urem(bb.udiv(bi, c64(st)), c64(d)) for st, d in zip(bstr, batch)]
            call(bidx, (s, e))

        bi_lo = b.udiv(lo, c64(ext))
        bi_hi = b.udiv(b.add(hi, c64(ext - 1)), c64(ext))
        for_range(b, bi_lo, bi_hi, one, name="gp")
        return

    def nest(d: int, bidx: list[ir.Value]) -> None:
        if d == len(batch):
            call(bidx)
            return
        for_range(cx.builder, ir.Constant(I64, 0), ir.Constant(I64, batch[d]),
                  lambda i: nest(d + 1, bidx + [i]), name=f"gb{d}")

    nest(0, [])


#: Estimated flops above which a gemm is split across threads (measured in
#: tests/test_codegen_threads.py's notes and docs/compile.md: a pool job costs
#: about 1-3 us when the workers are awake, a 2*256*256*10 product takes ~15 us).
GEMM_PAR_MIN_FLOPS = 1 << 20
#: Rows (columns) per piece are rounded up to a multiple of this (OpenBLAS's
#: micro-kernel tiles).
GEMM_PIECE_ALIGN = 16


def _machine_gemm_atoms() -> int:
    """The machine's CPUs (all of them, whatever this process's affinity), rounded down to a power of two, 2 to 8.

    At least 2, so that a product is cut the same way on a 1-CPU machine as on a 2-core one (the pieces then
    run one after the other).
    """
    n = max(2, min(8, os.cpu_count() or 1))
    return 1 << (n.bit_length() - 1)


#: A product cut inside its matrices becomes at most this many pieces, of at least `GEMM_ATOM_MIN`
#: rows (columns) each, whatever SYMGRAPH_NUM_THREADS says: the machine's CPU count (all CPUs, not this
#: process's affinity) rounded down to a power of two, 2 to 8, so the bits are those of this
#: machine on every thread count. As many pieces as cores: on this 2-core machine W6's step took
#: 40.5 ms with 2 pieces of 128+ rows, 41.0 with 4 and 42.6 with 8 of 64+ (loaded, interleaved);
#: every piece packs the shared operand again.
GEMM_ATOMS = _machine_gemm_atoms()
GEMM_ATOM_MIN = 96


def gemm_pieces(task: Task, nthreads: int) -> tuple[str, list[tuple[int, int]]] | None:
    """The pieces a gemm task runs as: (axis, [(lo, hi)]) in `emit_gemm`'s numbering, or None (one call).

    OpenBLAS picks its kernels by shape (a small block of rows takes another
    path than the whole matrix), so a piece of C is not always bitwise the
    same as those rows of the whole product. The BLAS calls of a product
    therefore never depend on the thread count: a product cut inside its
    matrices is always cut into the same pieces on a machine, a power of two up
    to `GEMM_ATOMS` (the machine's CPUs) of at least `GEMM_ATOM_MIN` rows
    (columns), starting on multiples of
    `GEMM_PIECE_ALIGN`, along the larger of m and n (m on ties), over the
    batch-major flattening of the batch; `emit_gemm_task` runs them on the thread
    pool, or one after the other. A batch of at least `GEMM_ATOMS` matrices
    is one call per matrix however it is grouped, so it is grouped by whole
    matrices into `nthreads` pieces (none on one thread). A product of fewer
    than `GEMM_PAR_MIN_FLOPS` flops, or without room for two pieces, is one
    call.

    Args:
        task: a gemm task (`codegen.kernels.tasks.Task` of kind gemm).
        nthreads: threads available (groups whole matrices of a large batch only).

    Returns:
        None, or the axis ("m" or "n") and two or more half-open ranges
        covering [0, batch * extent).
    """
    mm = task.gemm.get("mm", task.node)
    a_in, b_in = mm.inputs
    *batch, m, k = a_in.shape
    n = b_in.shape[-1]
    nb = math.prod(batch)
    if m == 0 or n == 0 or k == 0 or matmul_flops(a_in.shape, b_in.shape) < GEMM_PAR_MIN_FLOPS:
        return None
    axis, ext = ("m", m) if m >= n else ("n", n)
    total = nb * ext
    if nb >= GEMM_ATOMS:
        if nthreads <= 1:
            return None
        per = -(-nb // nthreads) * ext  # whole matrices per piece
    else:
        pieces = min(GEMM_ATOMS, total // GEMM_ATOM_MIN)
        if pieces < 2:
            return None
        pieces = 1 << (pieces.bit_length() - 1)  # a power of two: balanced on 2, 4 or 8 threads
        per = -(-total // pieces)
        per = -(-per // GEMM_PIECE_ALIGN) * GEMM_PIECE_ALIGN
    ranges = [(lo, min(total, lo + per)) for lo in range(0, total, per)]
    if len(ranges) < 2:
        return None
    return axis, ranges


# ----- a product as pieces, on the thread pool -----


def emit_gemm_task(cx: LoweringContext, ab: ir.IRBuilder, task: Any, label: str, ptr_of: Any, blas: dict,
                      nthreads: int) -> bool:
    """Emit a gemm task as its pieces (`gemm_pieces`); True when they run on the thread pool.

    On the pool each piece is a single-threaded BLAS call on a block of rows
    (or columns) of C, or a few such calls when it spans batch elements
    (`emit_gemm` emits a piece into an internal function
    `ptr gemm_piece_<label>(ptr ctx)` whose context holds the A, B and C base
    pointers and the piece's range). Without a pool, on one thread, or when
    SYMGRAPH_BLAS_THREADS asks the BLAS for threads of its own, the same
    pieces are called one after the other, so the calls (and the bits) are
    those of any thread count.
    """
    split = gemm_pieces(task, nthreads)
    if split is None:
        emit_gemm(cx, task, ptr_of, blas)
        return False
    axis, ranges = split
    # SYMGRAPH_BLAS_THREADS > 1 asks OpenBLAS to split products itself: pieces on threads would oversubscribe
    pool = pool_fn(cx, nthreads) if cpu_blas.blas_threads() == 1 else None
    if pool is None:
        for lo, hi in ranges:
            emit_gemm(cx, task, ptr_of, blas, piece=(axis, ir.Constant(I64, lo), ir.Constant(I64, hi)))
        return False
    fn, bases = gemm_piece_fn(cx, task, label, blas, axis)
    field = cx.field_of or ptr_of
    rows = [[field(x) for x in bases] + [ir.Constant(I64, lo), ir.Constant(I64, hi)] for lo, hi in ranges]
    run_on_pool(cx.builder, ab, pool, fn, rows, nthreads, f"gctx{label}", cx.context_table)
    return True


def gemm_piece_fn(cx: LoweringContext, task: Any, label: str, blas: dict, axis: str) -> tuple[ir.Function, list]:
    """`ptr gemm_piece_<label>(ptr ctx)`: the product of `task` on rows (axis "m") or columns ("n") [lo, hi) of C.

    The context holds 8-byte fields: the A, B and C base pointers (of the nodes
    returned, in that order), lo and hi (`emit_gemm`'s piece numbering).
    """
    bases = [task.gemm["a"]["base"], task.gemm["b"]["base"], task.node]
    key = _piece_key(task, bases, axis, blas)
    fn = cx.emitted.get(key)
    if fn is not None:
        return fn, bases
    fn = ir.Function(cx.module, ir.FunctionType(PTR, [PTR]), f"gemm_piece_{label}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    types = [PTR] * 3 + [I64] * 2
    vals = [fb.load(fb.gep(fn.args[0], [ir.Constant(I64, i)], source_etype=ty), typ=ty) for i, ty in enumerate(types)]
    local: dict = {}
    for node, v in zip(bases, vals):
        local.setdefault(node, v)
    outer = cx.builder
    cx.builder = fb
    try:
        emit_gemm(cx, task, lambda node: local[node], blas, piece=(axis, vals[3], vals[4]))
    finally:
        cx.builder = outer
    fb.ret(ir.Constant(PTR, None))
    cx.emitted[key] = fn
    return fn, bases


def _piece_key(task: Any, bases: list, axis: str, blas: dict) -> tuple:
    """What `gemm_piece_fn`'s function depends on besides its context: shapes, dtype, the views' offsets,
    strides, transposition and leading dimensions, alpha and beta, the axis cut, and which of the three
    base pointers are the same buffer (the function loads each distinct one once)."""
    mm = task.gemm.get("mm", task.node)
    first: dict = {}
    same = tuple(first.setdefault(x, i) for i, x in enumerate(bases))

    def view(v: dict) -> tuple:
        return tuple(sorted((f, x) for f, x in v.items() if f != "base"))

    return ("gemm_piece", task.node.shape, task.node.dtype.str, mm.inputs[0].shape, mm.inputs[1].shape,
            float(task.gemm.get("alpha", 1.0)), float(task.gemm.get("beta", 0.0)), view(task.gemm["a"]),
            view(task.gemm["b"]), axis, same, blas[task.node.dtype.str])


def emit_gemm_pair(cx: LoweringContext, ab: ir.IRBuilder, tasks: list, label: str, ptr_of: Any, blas: dict,
                    nthreads: int) -> bool:
    """Emit two independent products (`codegen.kernels.tasks.Kernel.concurrent`) side by side, in one pool job.

    Each product runs as the pieces it runs as alone (`gemm_pieces`, or
    one piece over all of C), so pairing changes when products run, not
    their bits. A dispatcher `gemm_pair_<label>(ctx)` reads the product's
    index from the first context field and runs that product's piece
    function (`gemm_piece_fn`) on the rest. False (nothing emitted) without
    a pool, with SYMGRAPH_BLAS_THREADS > 1, or for a batched product.
    """
    pool = pool_fn(cx, nthreads) if cpu_blas.blas_threads() == 1 and len(tasks) == 2 else None
    if pool is None or any(t.node.ndim != 2 for t in tasks):
        return False
    pieces = []
    for ti, t in enumerate(tasks):
        axis, ranges = gemm_pieces(t, nthreads) or ("m", [(0, t.node.shape[0])])
        fn, bases = gemm_piece_fn(cx, t, f"{label}_{ti}", blas, axis)
        pieces.append((fn, bases, ranges))
    key = ("gemm_pair", pieces[0][0].name, pieces[1][0].name)
    disp = cx.emitted.get(key)
    field = cx.field_of or ptr_of
    rows = [[ir.Constant(I64, ti)] + [field(x) for x in bases] + [ir.Constant(I64, lo), ir.Constant(I64, hi)]
            for ti, (_fn, bases, ranges) in enumerate(pieces) for lo, hi in ranges]
    if disp is None:
        disp = cx.emitted[key] = _pair_fn(cx, label, pieces[0][0], pieces[1][0])
    run_on_pool(cx.builder, ab, pool, disp, rows, nthreads, f"pairctx{label}", cx.context_table)
    return True


def _pair_fn(cx: LoweringContext, label: str, first_fn: ir.Function, second_fn: ir.Function) -> ir.Function:
    """`ptr gemm_pair_<label>(ptr ctx)`: `first_fn` or `second_fn` on ctx + 8 bytes, as ctx's first field is 0 or not."""
    disp = ir.Function(cx.module, ir.FunctionType(PTR, [PTR]), f"gemm_pair_{label}")
    disp.linkage = "internal"
    disp.attributes.add("nounwind")
    db = ir.IRBuilder(disp.append_basic_block("entry"))
    ctx = disp.args[0]
    which = db.load(ctx, typ=I64)
    rest = db.gep(ctx, [ir.Constant(I64, 1)], source_etype=I64)
    with db.if_else(db.icmp_signed("==", which, ir.Constant(I64, 0))) as (first, second):
        with first:
            db.call(first_fn, [rest])
        with second:
            db.call(second_fn, [rest])
    db.ret(ir.Constant(PTR, None))
    return disp
