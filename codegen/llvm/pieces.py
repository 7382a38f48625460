"""Pieces of work on the thread pool: a kernel's thread routine, its pieces on the pool or on pthreads.

Emitters for `module.build_module`: a loop kernel's thread routine (`thunk_fn`) and its
pieces on the pool (`run_on_pool`, through `pool_fn`, the declaration of the pool's entry)
or on a pthread each (`run_on_threads`, where there is no pool); `opaque_i64` hides a
piece's bounds from the optimizer as a thread's context does. Which pieces there are never
depends on the thread count (docs/compile.md, "Determinism"); products cut into pieces are
in `gemm`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..cpu import pool as cpu_pool
from .context import I8, I32, I64, PTR, VOID, LoweringContext, for_range, opaque_alloca

__all__ = ["opaque_i64", "run_on_threads", "pool_fn", "run_on_pool", "thunk_fn", "Field", "ContextTable",
           "FIELD_VALUE", "FIELD_ARENA", "FIELD_IN", "FIELD_OUT", "FIELD_CONST"]


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
                 nthreads: int, name: str, table: "ContextTable | None" = None) -> None:
    """Store one context per piece (8-byte fields, `rows[t]`) and run `thunk` on every piece through the pool.

    A field is an ir.Value, or a `Field` (a buffer's base pointer) when `table` is given: the
    contexts are then written by `table.fill` from a constant table (fields that are neither a
    `Field` nor an integer or null constant are stored after it). The call returns when every
    piece has finished (the calling thread runs pieces too).
    """
    nf = len(rows[0])
    ctxs = opaque_alloca(ab, ir.ArrayType(I64, len(rows) * nf), name)
    if table is not None:
        table.fill(b, ctxs, rows, name)
    else:
        for t, fields in enumerate(rows):
            for fi, v in enumerate(fields):
                b.store(v, b.gep(ctxs, [ir.Constant(I64, t * nf + fi)], source_etype=v.type))
    b.call(pool, [thunk, ctxs, ir.Constant(I64, 8 * nf), ir.Constant(I64, len(rows)),
                  ir.Constant(I32, nthreads)])


@dataclass(frozen=True)
class Field:
    """A context field `ContextTable.fill` computes at run time: the base pointer of a buffer.

    Attributes:
        kind: `FIELD_ARENA` (the arena's data plus `value` bytes), or `FIELD_IN`, `FIELD_OUT`,
            `FIELD_CONST` (the data pointer of item `value` of the entry's inputs, outputs, constants).
    """

    kind: int
    value: int


FIELD_VALUE, FIELD_ARENA, FIELD_IN, FIELD_OUT, FIELD_CONST = range(5)
_TAG_BITS = 3


class ContextTable:
    """The pool jobs' contexts of a plain entry (`codegen.llvm.module._plain_entry`), written from constant tables.

    Filled store by store, the contexts of a 256-layer chain's gradient were 26,000 of the entry's
    31,000 instructions (a pointer computation and a store per field, 767 jobs), built by
    llvmlite and compiled by LLVM at every compile. Here each job's fields are one constant array
    of i64 (a field's kind in the low `_TAG_BITS` bits, its value above), and the entry calls
    `symgraph_fill_ctx(ctx, table, n, arena, ins, outs, consts)`, a loop emitted once per module,
    which stores the same values (integers, arena offsets, the data pointers of argument arrays)
    the stores did.

    Args:
        cx: the module's lowering context.
        bases: (arena data pointer, inputs, outputs, constants) of the entry.
        item: (builder, tuple, index) -> the data pointer of that item (the entry's ABI).
    """

    def __init__(self, cx: LoweringContext, bases: tuple, item: Any):
        self.cx = cx
        self.bases = bases
        self.item = item
        self.fn: ir.Function | None = None
        self.count = 0

    def fill(self, b: ir.IRBuilder, ctx: ir.Value, rows: list, name: str) -> None:
        """Write `rows` (fields: `Field`, integer or null constants, other values) into `ctx`."""
        codes, rest = [], []
        nf = len(rows[0])
        for t, fields in enumerate(rows):
            for fi, v in enumerate(fields):
                if isinstance(v, Field):
                    codes.append(v.value << _TAG_BITS | v.kind)
                elif isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType) and v.constant >= 0:
                    codes.append(int(v.constant) << _TAG_BITS | FIELD_VALUE)
                elif isinstance(v, ir.Constant) and v.type == PTR and v.constant is None:
                    codes.append(FIELD_VALUE)
                else:
                    codes.append(FIELD_VALUE)
                    rest.append((t * nf + fi, v))
        ty = ir.ArrayType(I64, len(codes))
        g = ir.GlobalVariable(self.cx.module, ty, f"tbl_{name}")
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = ir.Constant(ty, codes)
        g.type = PTR
        self.count += 1
        b.call(self._fill_fn(), [ctx, g, ir.Constant(I64, len(codes)), *self.bases])
        for i, v in rest:
            b.store(v, b.gep(ctx, [ir.Constant(I64, i)], source_etype=v.type))

    def _fill_fn(self) -> ir.Function:
        """`void symgraph_fill_ctx(ptr ctx, ptr table, i64 n, ptr arena, ptr ins, ptr outs, ptr consts)`."""
        if self.fn is not None:
            return self.fn
        fn = self.fn = ir.Function(self.cx.module, ir.FunctionType(VOID, [PTR, PTR, I64] + [PTR] * 4),
                                   "symgraph_fill_ctx")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")
        ctx, tbl, n, arena, *tuples = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        c = lambda v: ir.Constant(I64, v)

        def field(i: ir.Value) -> None:
            code = b.load(b.gep(tbl, [i], source_etype=I64), typ=I64)
            kind, value = b.and_(code, c((1 << _TAG_BITS) - 1)), b.lshr(code, c(_TAG_BITS))
            slot = b.gep(ctx, [i], source_etype=I64)
            done = fn.append_basic_block("field.done")
            on = [fn.append_basic_block(f"field.{k}") for k in range(5)]
            sw = b.switch(kind, on[FIELD_VALUE])
            for k in range(1, 5):
                sw.add_case(c(k), on[k])
            b.position_at_end(on[FIELD_VALUE])
            b.store(value, slot)
            b.branch(done)
            b.position_at_end(on[FIELD_ARENA])
            b.store(b.gep(arena, [value], source_etype=I8), slot)
            b.branch(done)
            for k, tup in zip((FIELD_IN, FIELD_OUT, FIELD_CONST), tuples):
                b.position_at_end(on[k])
                b.store(self.item(b, tup, value), slot)
                b.branch(done)
            b.position_at_end(done)

        for_range(b, c(0), n, field, name="f")
        b.ret_void()
        return fn



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
