"""argsort in compiled code: a stable sort of every row of the last axis, NaN last, as NumPy's kind="stable".

Each value becomes an unsigned integer key whose order is NumPy's sort order (Knuth, TAOCP
vol. 3, 5.2.5, on sorting numbers by their digits; the float trick is the usual one): a float's
bits with the sign bit flipped when it is positive and all bits flipped when it is negative, -0.0
taken as +0.0 (NumPy's sort holds them equal) and every NaN as the largest key (NaN last); a signed
integer's bits with the sign bit flipped; an unsigned one's bits. Keys are 64-bit for 8-byte
values and 32-bit for narrower ones.

Rows of up to `SORT_INSERTION_MAX` elements sort by straight insertion on (key, index) pairs
(TAOCP 5.2.1, algorithm S: an element moves left past strictly larger keys only, so equal keys keep
their order). Longer rows sort by least-significant-digit radix sort (TAOCP 5.2.5; Sedgewick &
Wayne, Algorithms, 4th ed., 5.1 "LSD string sort"): one pass over the keys counts every digit's
histogram, then each digit, least significant first, is a stable counting-sort pass that moves the
(key, index) pairs between two buffers; a pass whose digit is the same in every key is skipped. The
passes are stable, so the result is the stable order; the work is O(n) per pass, (key bits /
digit bits) passes. Digits are bytes below `SORT_WIDE_DIGITS_MIN` elements, 11 bits from there
(`codegen.cpu.lapack.sort_digits`). The index buffer of the first pass is the node's output.

Rows run one after the other, like the other LAPACK-lowered ops; the key, index and histogram
buffers are the call's scratch in the arena (`codegen.cpu.lapack._plan_sort`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ..cpu.lapack import LapackCall
from .context import I8, I64, PTR, LoweringContext, for_range, mem_type

__all__ = ["emit_sort"]


def _c(v: int, ty: ir.Type = I64) -> ir.Constant:
    return ir.Constant(ty, v)


def _key(b: ir.IRBuilder, v: ir.Value, dtype: np.dtype, kty: ir.IntType) -> ir.Value:
    """The unsigned key of value v whose integer order is NumPy's sort order (NaN last, -0.0 == 0.0)."""
    w = kty.width
    sign = _c(1 << (w - 1), kty)
    if dtype.kind == "f":
        bits = b.bitcast(v, kty)
        flip = b.or_(b.ashr(bits, _c(w - 1, kty)), sign)     # negative: all bits; positive: the sign bit
        key = b.xor(bits, flip)
        zero = b.fcmp_ordered("==", v, ir.Constant(v.type, 0.0))
        key = b.select(zero, sign, key)                       # -0.0 sorts as +0.0
        nan = b.fcmp_unordered("uno", v, v)
        return b.select(nan, _c((1 << w) - 1, kty), key)      # every NaN last
    if v.type.width < w:
        v = b.sext(v, kty) if dtype.kind == "i" else b.zext(v, kty)
    return b.xor(v, sign) if dtype.kind == "i" else v


class _Row:
    """The emission state of one row: its buffers and the builder."""

    def __init__(self, cx: LoweringContext, call: LapackCall, scratch: ir.Value):
        self.cx, self.call = cx, call
        self.kty = ir.IntType(call.m)
        self.n = call.n
        self.bits = call.nrhs
        self.passes = -(-call.m // self.bits) if self.bits else 0
        self.buf = {k: cx.builder.gep(scratch, [_c(off)], source_etype=I8) for k, off in call.offsets.items()}

    @property
    def b(self) -> ir.IRBuilder:
        return self.cx.builder

    def load(self, p: ir.Value, i: ir.Value, ty: ir.Type) -> ir.Value:
        return self.b.load(self.b.gep(p, [i], source_etype=ty), typ=ty)

    def store(self, v: ir.Value, p: ir.Value, i: ir.Value) -> None:
        self.b.store(v, self.b.gep(p, [i], source_etype=v.type))

    def loop(self, lo: Any, hi: Any, body: Callable[[ir.Value], None], name: str) -> None:
        for_range(self.b, _c(lo) if isinstance(lo, int) else lo, _c(hi) if isinstance(hi, int) else hi, body,
                  name=name)

    def digit(self, key: ir.Value, p: int) -> ir.Value:
        """Digit p (least significant first) of a key, as an i64 bucket number of histogram p."""
        b = self.b
        d = b.and_(b.lshr(key, _c(p * self.bits, self.kty)), _c((1 << self.bits) - 1, self.kty))
        d = b.zext(d, I64) if self.kty.width < 64 else d
        return b.add(d, _c(p << self.bits))


def _insertion(r: _Row, keys: ir.Value, idx: ir.Value | None) -> None:
    """Straight insertion of (keys[i], idx[i]) (idx None: keys alone), i = 1..n-1, into the sorted prefix
    (TAOCP 5.2.1 S)."""
    b = r.b
    fn = b.function
    kty = r.kty

    def one(i: ir.Value) -> None:
        b = r.b
        k = r.load(keys, i, kty)
        v = r.load(idx, i, I64) if idx is not None else None
        pre = b.block
        head = fn.append_basic_block("ins.head")
        test = fn.append_basic_block("ins.test")
        move = fn.append_basic_block("ins.move")
        done = fn.append_basic_block("ins.done")
        b.branch(head)
        b.position_at_end(head)
        j = b.phi(I64, name="j")
        j.add_incoming(i, pre)
        b.cbranch(b.icmp_signed(">", j, _c(0)), test, done)
        b.position_at_end(test)
        jm = b.sub(j, _c(1))
        kp = r.load(keys, jm, kty)
        b.cbranch(b.icmp_unsigned(">", kp, k), move, done)   # strictly larger keys move: stable
        b.position_at_end(move)
        r.store(kp, keys, j)
        if idx is not None:
            r.store(r.load(idx, jm, I64), idx, j)
        j.add_incoming(jm, move)
        b.branch(head)
        b.position_at_end(done)
        at = b.phi(I64, name="at")
        at.add_incoming(j, head)
        at.add_incoming(j, test)
        r.store(k, keys, at)
        if idx is not None:
            r.store(v, idx, at)

    r.loop(1, r.n, one, "ins")


def _radix(r: _Row, out: ir.Value | None) -> ir.Value:
    """LSD radix sort of (ka, out) (out None: the keys alone) (module docstring): histograms, then one
    counting pass per digit. Returns a pointer to the sorted keys (ka or kb)."""
    cx, kty, n = r.cx, r.kty, r.n
    ka, kb, hist = r.buf["ka"], r.buf["kb"], r.buf["hist"]
    ib = r.buf.get("ib")
    buckets = 1 << r.bits
    r.loop(0, r.passes * buckets, lambda j: r.store(_c(0), hist, j), "hz")

    def count(i: ir.Value) -> None:
        k = r.load(ka, i, kty)
        for p in range(r.passes):
            d = r.digit(k, p)
            r.store(r.b.add(r.load(hist, d, I64), _c(1)), hist, d)

    r.loop(0, n, count, "hc")
    pairs = out is not None
    cur = [cx.alloca(PTR, f"sort_{name}") for name in (("sk", "si", "dk", "di") if pairs else ("sk", "dk"))]
    for slot, p in zip(cur, (ka, out, kb, ib) if pairs else (ka, kb)):
        r.b.store(p, slot)
    acc = cx.alloca(I64, "sort_sum")
    for p in range(r.passes):
        b = r.b
        ptrs = [b.load(slot, typ=PTR) for slot in cur]
        sk, si, dk, di = ptrs if pairs else (ptrs[0], None, ptrs[1], None)
        first = r.digit(r.load(sk, _c(0), kty), p)
        with b.if_then(b.icmp_signed("!=", r.load(hist, first, I64), _c(n))):   # else every key has this digit
            b.store(_c(0), acc)

            def offsets(j: ir.Value) -> None:   # exclusive prefix sums: the first position of each bucket
                h = r.b.add(j, _c(p << r.bits))
                c, s = r.load(hist, h, I64), r.b.load(acc, typ=I64)
                r.store(s, hist, h)
                r.b.store(r.b.add(s, c), acc)

            r.loop(0, buckets, offsets, f"ho{p}")

            def move(i: ir.Value) -> None:
                k = r.load(sk, i, kty)
                d = r.digit(k, p)
                at = r.load(hist, d, I64)
                r.store(r.b.add(at, _c(1)), hist, d)
                r.store(k, dk, at)
                if pairs:
                    r.store(r.load(si, i, I64), di, at)

            r.loop(0, n, move, f"hm{p}")
            for slot, v in zip(cur, (dk, di, sk, si) if pairs else (dk, sk)):
                r.b.store(v, slot)
    b = r.b
    if pairs:
        last = b.load(cur[1], typ=PTR)
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(last, I64), b.ptrtoint(out, I64))):
            r.loop(0, n, lambda i: r.store(r.load(last, i, I64), out, i), "hcp")
    return b.load(cur[0], typ=PTR)


def _value(b: ir.IRBuilder, key: ir.Value, dtype: np.dtype, tmem: ir.Type) -> ir.Value:
    """The value of a key (`_key`'s inverse; a NaN or zero key gives one NaN or +0.0, which `_runs` corrects)."""
    kty = key.type
    w = kty.width
    sign = _c(1 << (w - 1), kty)
    if dtype.kind == "f":
        pos = b.icmp_unsigned(">=", key, sign)                   # the key of a positive value has the top bit
        bits = b.select(pos, b.xor(key, sign), b.not_(key))
        return b.bitcast(bits, tmem)
    v = b.xor(key, sign) if dtype.kind == "i" else key
    return b.trunc(v, tmem) if tmem.width < w else v


def _runs(r: _Row, src: ir.Value, out: ir.Value, tmem: ir.Type, below: ir.Value, nans: ir.Value) -> None:
    """Sorted values of a float row: the zeros and the NaNs, which share one key each, copied from the input in
    input order (the stable order) into their runs: zeros from `below` (the count of negative values), NaNs
    from n - `nans`. Bit for bit NumPy's: -0.0 stays -0.0, a NaN keeps its sign and payload."""
    b = r.b
    zslot, nslot = r.cx.alloca(I64, "sort_z"), r.cx.alloca(I64, "sort_n")
    b.store(below, zslot)
    b.store(b.sub(_c(r.n), nans), nslot)
    zero = ir.Constant(tmem, 0.0)

    def fix(i: ir.Value) -> None:
        b = r.b
        v = r.load(src, i, tmem)
        isz, isn = b.fcmp_ordered("==", v, zero), b.fcmp_unordered("uno", v, v)
        with b.if_then(b.or_(isz, isn), likely=False):
            slot = b.select(isz, zslot, nslot)
            at = b.load(slot, typ=I64)
            r.store(v, out, at)
            b.store(b.add(at, _c(1)), slot)

    r.loop(0, r.n, fix, "sfix")


def emit_sort(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value) -> None:
    """Emit sort or argsort of one node (`call`): every row of its input sorted into the node's output (the
    values, or the int64 permutation)."""
    node = call.node
    if call.batch == 0 or call.n == 0:
        return
    x = node.inputs[0]
    dt = np.dtype(x.dtype)
    tmem = mem_type(dt)
    n = call.n
    pairs = call.jobz == "I"
    src_base, dst_base = ptr_of(x), ptr_of(node)
    r = _Row(cx, call, scratch)
    flt = dt.kind == "f"
    below, zeros, nans = (cx.alloca(I64, f"sort_{c}") for c in ("below", "zeros", "nans"))

    def one(bi: ir.Value) -> None:
        b = cx.builder
        src = b.gep(src_base, [b.mul(bi, _c(n))], source_etype=tmem)
        out = b.gep(dst_base, [b.mul(bi, _c(n))], source_etype=I64 if pairs else tmem)
        if flt and not pairs:
            for c in (below, zeros, nans):
                b.store(_c(0), c)

        def key(i: ir.Value) -> None:
            b = r.b
            v = r.load(src, i, tmem)
            r.store(_key(b, v, dt, r.kty), r.buf["ka"], i)
            if pairs:
                r.store(i, out, i)
            elif flt:
                zero = ir.Constant(tmem, 0.0)
                for c, test in ((below, b.fcmp_ordered("<", v, zero)), (zeros, b.fcmp_ordered("==", v, zero)),
                                (nans, b.fcmp_unordered("uno", v, v))):
                    b.store(b.add(b.load(c, typ=I64), b.zext(test, I64)), c)

        r.loop(0, n, key, "sk")
        idx = out if pairs else None
        keys = _radix(r, idx) if r.bits else (_insertion(r, r.buf["ka"], idx) or r.buf["ka"])
        if pairs:
            return
        r.loop(0, n, lambda i: r.store(_value(r.b, r.load(keys, i, r.kty), dt, tmem), out, i), "sv")
        if flt:
            bb = r.b
            nb, nz, nn = (bb.load(c, typ=I64) for c in (below, zeros, nans))
            with bb.if_then(bb.icmp_signed(">", bb.add(nz, nn), _c(0))):   # zeros or NaNs: their runs from the input
                _runs(r, src, out, tmem, nb, nn)

    for_range(cx.builder, _c(0), _c(call.batch), one, name="sb")
