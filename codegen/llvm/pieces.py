"""Pieces of work on the thread pool: a kernel's thread routine, its pieces on the pool or on pthreads.

Emitters for `module.build_module`: a loop kernel's thread routine (`thunk_fn`) and its
pieces on the pool (`run_on_pool`, through `pool_fn`, the declaration of the pool's entry)
or on a pthread each (`run_on_threads`, where there is no pool); `opaque_i64` hides a
piece's bounds from the optimizer as a thread's context does. Which pieces there are never
depends on the thread count (docs/compile.md, "Determinism"); products cut into pieces are
in `gemm`.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ..cpu import pool as cpu_pool
from .context import I32, I64, PTR, VOID, LoweringContext, opaque_alloca

__all__ = ["opaque_i64", "run_on_threads", "pool_fn", "run_on_pool", "thunk_fn"]


def opaque_i64(b: ir.IRBuilder, value: int) -> ir.Value:
    """The i64 constant `value` hidden from the optimizer (an empty inline asm), as a thread's context hides it."""
    fty = ir.FunctionType(I64, [I64])
    return b.asm(fty, "", "=r,0", [ir.Constant(I64, value)], side_effect=False, name="opaque")


def run_on_threads(cx: LoweringContext, b: ir.IRBuilder, ab: ir.IRBuilder, thunk: ir.Function,
                    kern: ir.Function, bufs: list, ranges: list, pslot: Any, ki: int) -> None:
    """Without the pool: a pthread per piece but the first (run here), joined; a piece whose thread
    could not be created runs here too."""
    pthread_create = cx.function("pthread_create", I32, [PTR, PTR, PTR, PTR])
    pthread_join = cx.function("pthread_join", I32, [I64, PTR])
    T = len(ranges)
    nf = len(bufs) + 3
    tids = opaque_alloca(ab, ir.ArrayType(I64, T), f"tids{ki}")
    ctxs = opaque_alloca(ab, ir.ArrayType(I64, T * nf), f"ctx{ki}")
    rcs = []
    for t in range(1, T):
        c = b.gep(ctxs, [ir.Constant(I64, t * nf)], source_etype=I64)
        fields = bufs + [ir.Constant(I64, ranges[t][0]), ir.Constant(I64, ranges[t][1]), pslot(t)]
        for fi, v in enumerate(fields):
            b.store(v, b.gep(ctxs, [ir.Constant(I64, t * nf + fi)], source_etype=v.type))
        tid = b.gep(tids, [ir.Constant(I64, t)], source_etype=I64)
        rcs.append((c, tid, b.call(pthread_create, [tid, ir.Constant(PTR, None), thunk, c])))
    b.call(kern, bufs + [opaque_i64(b, ranges[0][0]), opaque_i64(b, ranges[0][1]), pslot(0)])
    for c, tid, rc in rcs:
        ok = b.icmp_signed("==", rc, ir.Constant(I32, 0))
        with b.if_else(ok) as (then, otherwise):
            with then:
                b.call(pthread_join, [b.load(tid, typ=I64), ir.Constant(PTR, None)])
            with otherwise:  # no thread: run that range here
                b.call(thunk, [c])


def pool_fn(cx: LoweringContext, nthreads: int) -> ir.Function | None:
    """The declaration of the pool's `symgraph_pool_run` (`cpu.pool.thread_pool`), or None (no pool, 1 thread)."""
    if nthreads <= 1:
        return None
    sym = cpu_pool.thread_pool()
    return None if sym is None else cx.function(sym, VOID, [PTR, PTR, I64, I64, I32])


def run_on_pool(b: ir.IRBuilder, ab: ir.IRBuilder, pool: ir.Function, thunk: ir.Function, rows: list,
                 nthreads: int, name: str) -> None:
    """Store one context per piece (8-byte fields, `rows[t]`) and run `thunk` on every piece through the pool.

    The call returns when every piece has finished (the calling thread runs pieces too).
    """
    nf = len(rows[0])
    ctxs = opaque_alloca(ab, ir.ArrayType(I64, len(rows) * nf), name)
    for t, fields in enumerate(rows):
        for fi, v in enumerate(fields):
            b.store(v, b.gep(ctxs, [ir.Constant(I64, t * nf + fi)], source_etype=v.type))
    b.call(pool, [thunk, ctxs, ir.Constant(I64, 8 * nf), ir.Constant(I64, len(rows)),
                  ir.Constant(I32, nthreads)])



def thunk_fn(cx: LoweringContext, kern: ir.Function, nbufs: int, ki: int) -> ir.Function:
    """`ptr thunk(ptr ctx)`: unpack a context (8-byte fields) and run the kernel on its range (a thread routine)."""
    fn = ir.Function(cx.module, ir.FunctionType(PTR, [PTR]), f"thunk_{ki}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c = fn.args[0]
    vals = []
    types = [PTR] * nbufs + [I64, I64, PTR]
    for fi, ty in enumerate(types):
        vals.append(b.load(b.gep(c, [ir.Constant(I64, fi)], source_etype=ty), typ=ty))
    b.call(kern, vals)
    b.ret(ir.Constant(PTR, None))
    return fn
