"""argpartition in compiled code: an MSD radix selection of every row, O(n) per kth position whatever the input.

The values become the unsigned integer keys of the radix sort (`codegen.llvm.sort._key`: their integer
order is NumPy's sort order, NaN last, -0.0 equal to 0.0), the row's indices 0..n-1 their payload in the
node's output. To put position k in place within the range [lo, hi) (first the whole row), each digit of
the keys is taken in turn, most significant first (8-bit digits: 8 passes for 64-bit keys, 4 for 32-bit):
one pass counts the digit's histogram over the range, the running sum finds the bucket B that holds
the element of rank k - lo, and a three-way partition (Dijkstra's "Dutch national flag", A Discipline
of Programming, 1976, ch. 14) moves the (key, index) pairs with a smaller digit before, a larger one after
(skipped when every key of the range has digit B); the range becomes bucket B's. The elements left of the
range are then no larger than every element in it, those right of it no smaller, and after the last digit
(or once the range holds one element) every key in it is equal, so position k holds its sorted value
(McIlroy, Bostic & McIlroy, "Engineering radix sort", Computing Systems 6, 1993, for MSD radix
partitioning; the selection is the MSD recursion followed into one bucket only). Each pass is linear in
its range, which never grows: at most (key bits / 8) · n steps per position, no worst case beyond that
(where a quickselect's is quadratic). Several kth positions, sorted, select in turn within [previous + 1,
n). A range of at most `SELECT_INSERTION_MAX` elements (and what is left after the last digit, a run of
equal keys) is finished by straight insertion (TAOCP 5.2.1 S) instead: a pass costs its 256 buckets. The
order inside the parts is whatever the moves leave, which NumPy leaves unspecified too.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ..cpu.lapack import LapackCall
from .context import I8, I64, LoweringContext, for_range, mem_type
from .sort import _key

__all__ = ["emit_select", "SELECT_INSERTION_MAX"]

#: A range of at most this many elements is finished by straight insertion instead of radix passes (each pass
#: clears and scans 256 histogram buckets, more than insertion's ~n²/4 moves below about this length).
SELECT_INSERTION_MAX = 32


def _c(v: int, ty: ir.Type = I64) -> ir.Constant:
    return ir.Constant(ty, v)


class _Select:
    """The emission state of the selection: the key and histogram buffers, the builder, the range slots."""

    def __init__(self, cx: LoweringContext, call: LapackCall, scratch: ir.Value):
        self.cx, self.b = cx, cx.builder
        self.kty = ir.IntType(call.m)
        self.bits = call.nrhs
        self.passes = call.m // call.nrhs
        self.ka = self.b.gep(scratch, [_c(call.offsets["ka"])], source_etype=I8)
        self.hist = self.b.gep(scratch, [_c(call.offsets["hist"])], source_etype=I8)
        self.slot = {name: cx.alloca(I64, f"sel_{name}") for name in
                     ("lo", "hi", "lt", "i", "gt", "acc", "bucket", "less", "eq")}
        self.out: ir.Value | None = None

    def get(self, name: str) -> ir.Value:
        return self.b.load(self.slot[name], typ=I64)

    def put(self, name: str, v: ir.Value) -> None:
        self.b.store(v, self.slot[name])

    def load(self, p: ir.Value, i: ir.Value, ty: ir.Type) -> ir.Value:
        return self.b.load(self.b.gep(p, [i], source_etype=ty), typ=ty)

    def store(self, v: ir.Value, p: ir.Value, i: ir.Value) -> None:
        self.b.store(v, self.b.gep(p, [i], source_etype=v.type))

    def digit(self, key: ir.Value, p: int) -> ir.Value:
        """Digit p (least significant first) of a key, as an i64 bucket number."""
        b = self.b
        d = b.and_(b.lshr(key, _c(p * self.bits, self.kty)), _c((1 << self.bits) - 1, self.kty))
        return b.zext(d, I64) if self.kty.width < 64 else d

    def swap(self, i: ir.Value, j: ir.Value) -> None:
        """Exchange the (key, index) pairs at i and j."""
        ki, kj = self.load(self.ka, i, self.kty), self.load(self.ka, j, self.kty)
        self.store(kj, self.ka, i)
        self.store(ki, self.ka, j)
        vi, vj = self.load(self.out, i, I64), self.load(self.out, j, I64)
        self.store(vj, self.out, i)
        self.store(vi, self.out, j)

    def loop(self, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None], name: str) -> None:
        for_range(self.b, lo, hi, body, name=name)

    def one_pass(self, k: int, p: int) -> None:
        """Narrow [lo, hi) to the keys whose digit p is that of the element of rank k - lo."""
        b = self.b
        lo, hi = self.get("lo"), self.get("hi")
        self.loop(_c(0), _c(1 << self.bits), lambda j: self.store(_c(0), self.hist, j), f"selz{p}")

        def count(i: ir.Value) -> None:
            d = self.digit(self.load(self.ka, i, self.kty), p)
            self.store(self.b.add(self.load(self.hist, d, I64), _c(1)), self.hist, d)

        self.loop(lo, hi, count, f"selc{p}")
        t = b.sub(_c(k), lo)
        self.put("acc", _c(0))

        def find(j: ir.Value) -> None:  # the bucket whose running-sum interval [acc, acc + count) holds t
            bb = self.b
            c, a = self.load(self.hist, j, I64), self.get("acc")
            a2 = bb.add(a, c)
            hit = bb.and_(bb.icmp_signed("<=", a, t), bb.icmp_signed("<", t, a2))
            self.put("bucket", bb.select(hit, j, self.get("bucket")))
            self.put("less", bb.select(hit, a, self.get("less")))
            self.put("eq", bb.select(hit, c, self.get("eq")))
            self.put("acc", a2)

        self.put("bucket", _c(0))
        self.put("less", _c(0))
        self.put("eq", _c(0))
        self.loop(_c(0), _c(1 << self.bits), find, f"self{p}")
        less, eq = self.get("less"), self.get("eq")
        with b.if_then(b.icmp_signed("!=", eq, b.sub(hi, lo))):  # else every key of the range has this digit
            self.dutch_flag(self.get("bucket"), p, lo, hi)
        self.put("lo", b.add(lo, less))
        self.put("hi", b.add(b.add(lo, less), eq))

    def insertion(self) -> None:
        """Straight insertion of the (key, index) pairs of [lo, hi) (TAOCP 5.2.1 S): what is left of a range
        once it is short (`SELECT_INSERTION_MAX`; a pass costs its 2**bits histogram buckets), or all equal."""
        lo, hi = self.get("lo"), self.get("hi")
        kty = self.kty

        def one(i: ir.Value) -> None:
            b = self.b
            fn = b.function
            k, v = self.load(self.ka, i, kty), self.load(self.out, i, I64)
            self.put("i", i)
            head, move, done = (fn.append_basic_block(f"selins.{t}") for t in ("head", "move", "done"))
            b.branch(head)
            b.position_at_end(head)
            j = self.get("i")
            jm = b.sub(j, _c(1))
            more = b.icmp_signed(">", j, lo)
            prev = self.load(self.ka, b.select(more, jm, j), kty)
            b.cbranch(b.and_(more, b.icmp_unsigned(">", prev, k)), move, done)
            b.position_at_end(move)
            self.store(prev, self.ka, j)
            self.store(self.load(self.out, jm, I64), self.out, j)
            self.put("i", jm)
            b.branch(head)
            b.position_at_end(done)
            self.store(k, self.ka, j)
            self.store(v, self.out, j)

        self.loop(self.b.add(lo, _c(1)), hi, one, "selins")

    def dutch_flag(self, bucket: ir.Value, p: int, lo: ir.Value, hi: ir.Value) -> None:
        """Three-way partition of [lo, hi) by digit p against `bucket`: smaller, equal, larger."""
        b = self.b
        fn = b.function
        self.put("lt", lo)
        self.put("i", lo)
        self.put("gt", hi)
        head, body = fn.append_basic_block(f"selh{p}"), fn.append_basic_block(f"selb{p}")
        smaller, rest = fn.append_basic_block(f"sels{p}"), fn.append_basic_block(f"selr{p}")
        larger, equal = fn.append_basic_block(f"selg{p}"), fn.append_basic_block(f"sele{p}")
        done = fn.append_basic_block(f"seld{p}")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(b.icmp_signed("<", self.get("i"), self.get("gt")), body, done)
        b.position_at_end(body)
        i = self.get("i")
        d = self.digit(self.load(self.ka, i, self.kty), p)
        b.cbranch(b.icmp_signed("<", d, bucket), smaller, rest)
        b.position_at_end(smaller)
        lt = self.get("lt")
        self.swap(lt, i)
        self.put("lt", b.add(lt, _c(1)))
        self.put("i", b.add(i, _c(1)))
        b.branch(head)
        b.position_at_end(rest)
        b.cbranch(b.icmp_signed(">", d, bucket), larger, equal)
        b.position_at_end(larger)
        gt = b.sub(self.get("gt"), _c(1))
        self.put("gt", gt)
        self.swap(i, gt)
        b.branch(head)
        b.position_at_end(equal)
        self.put("i", b.add(i, _c(1)))
        b.branch(head)
        b.position_at_end(done)


def emit_select(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value) -> None:
    """Emit argpartition of one node (`call`): every row's permutation, each kth position in place (module
    docstring), into the node's int64 output."""
    node = call.node
    if call.batch == 0 or call.n == 0:
        return
    x = node.inputs[0]
    dt = np.dtype(x.dtype)
    tmem = mem_type(dt)
    n = call.n
    kth = node.attr("kth")
    src_base, dst_base = ptr_of(x), ptr_of(node)
    s = _Select(cx, call, scratch)

    def row(bi: ir.Value) -> None:
        b = s.b
        src = b.gep(src_base, [b.mul(bi, _c(n))], source_etype=tmem)
        s.out = b.gep(dst_base, [b.mul(bi, _c(n))], source_etype=I64)

        def key(i: ir.Value) -> None:
            s.store(_key(s.b, s.load(src, i, tmem), dt, s.kty), s.ka, i)
            s.store(i, s.out, i)

        s.loop(_c(0), _c(n), key, "selk")
        prev = 0
        for k in kth:
            s.put("lo", _c(prev))
            s.put("hi", _c(n))
            for p in reversed(range(s.passes)):
                bb = s.b
                with bb.if_then(bb.icmp_signed(">", bb.sub(s.get("hi"), s.get("lo")), _c(SELECT_INSERTION_MAX))):
                    s.one_pass(k, p)
            s.insertion()  # the short rest (or a run of equal keys: one comparison each)
            prev = k + 1

    for_range(cx.builder, _c(0), _c(call.batch), row, name="selrow")
