"""Regions at the entry: loops and branches whose sub-graphs are compiled once and called from native code.

A region node (`scan`, `cond`, `while`; symgraph.regions, symgraph.branches)
holds sub-graphs (`region.subgraphs()`: a loop body; the branches; a while
loop's condition and body). `codegen.compile_graph` compiles each sub-graph
once into its own module with a raw-pointer entry `g(ins, outs, arena, consts)`
registered under a unique symbol (`RegionBody`); the program's module declares
those symbols and a region kernel lowers as (`region_call`):

- scan: `for t in 0..T-1` (the index reversed when `reverse`): the body on
  (consts, current carries, xs[j] + idx*step) writing the next carries and
  ys[j] + idx*step; the next carries copied over the current ones;
- cond: the index loaded and clamped, a `switch` to one call per branch;
- while: the condition called on the current carries (a one-byte bool), then
  the body, until the condition is false.

Scratch memory (next carries, outputs nobody reads, the sub-graphs' arena) is
one `aligned_alloc` per region call, freed at its end. Outputs that a sub-graph
does not write itself (copies of inputs, constants, duplicates: its out_plan)
are copied after the call. Compile time does not depend on the trip count,
and no Python runs per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from .context import I8, I64, PTR, VOID, opaque_alloca

__all__ = ["RegionBody", "region_call", "kernel_region", "chosen_regions", "ALIGN"]

ALIGN = 64  #: alignment of the scratch block's pieces (the sub-graphs' arenas expect 64-byte slots)


@dataclass
class RegionBody:
    """The compiled sub-graphs of a region (in `region.subgraphs()` order).

    Attributes:
        symbols: the registered symbol of each sub-graph's raw-pointer entry.
        exes: each sub-graph's `codegen.cpu.Executable` (kept alive: its code and constants).
        const_ptrs: per sub-graph, a uint64 array of its constants' data addresses (its `consts`).
        keep: arrays whose addresses the program's code embeds (kept alive).
    """

    symbols: list
    exes: list
    const_ptrs: list
    keep: list = field(default_factory=list)


def kernel_region(k: Any) -> Any:
    """The region a region kernel runs: of its outputs' regions (a loop and its saver, which extends
    it with residual ys), the one with the most outputs."""
    return max((t.node.attr("region") for t in k.tasks), key=lambda r: r.num_outputs)


def chosen_regions(order: list) -> list:
    """The regions the program's region kernels will run (`kernel_region`), in schedule order."""
    best: dict = {}
    for n in order:
        if n.op.extra.get("region"):
            r = n.attr("region")
            key = (n.inputs, r.root, n.tag)
            if key not in best or r.num_outputs > best[key].num_outputs:
                best[key] = r
    out: dict = {}
    for r in best.values():
        out.setdefault(r)
    return list(out)


def _addr(b: ir.IRBuilder, address: int) -> ir.Value:
    return b.inttoptr(ir.Constant(I64, address), PTR)


def _round(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class _Lower:
    """One region kernel being lowered: the entry's builders, the scratch block, sub-graph calls."""

    def __init__(self, entry: Any, ki: int, k: Any):
        self.entry, self.ki = entry, ki
        self.cx, self.b, self.ab = entry.cx, entry.b, entry.ab
        self.node0 = k.tasks[0].node
        self.region = kernel_region(k)
        self.rb: RegionBody = entry.regions[self.region]
        self.ins = list(self.node0.inputs)
        self.outs: dict = {}
        #: outputs asked for twice (a loop's leaf and its saver's, e.g. a hoisted guard flag of both):
        #: (index, pointer, bytes) copied from the first one's buffer after the loop
        self.dups: list = []
        for t in k.tasks:
            i, p = t.node.attr("index"), entry.ptr_of(t.node)
            if i not in self.outs:
                self.outs[i] = p
            elif p is not self.outs[i]:
                self.dups.append((i, p, t.node.nbytes))
        self.memcpy = self.cx.function("memcpy", PTR, [PTR, PTR, I64])
        self.offs: dict = {}
        self.size = 0
        self.blk = None
        self.calls = 0
        self.failed: ir.Value | None = None  # the last sub-graph call failed (`_propagate_failure`)

    def reserve(self, key: Any, nbytes: int) -> None:
        self.offs[key] = self.size
        self.size += _round(nbytes)

    def open(self) -> None:
        """Allocate the scratch block (after every `reserve`)."""
        self.reserve("arena", max(e.arena_bytes for e in self.rb.exes))
        alloc = self.cx.function("aligned_alloc", PTR, [I64, I64])
        self.blk = self.b.call(alloc, [ir.Constant(I64, ALIGN), ir.Constant(I64, _round(max(self.size, ALIGN)))])

    def close(self) -> None:
        self.b.call(self.cx.function("free", VOID, [PTR]), [self.blk])

    def at(self, key: Any) -> ir.Value:
        return self.b.gep(self.blk, [ir.Constant(I64, self.offs[key])], source_etype=I8)

    def copy(self, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
        if nbytes > 0:
            self.b.call(self.memcpy, [dst, src, ir.Constant(I64, nbytes)])

    def _propagate_failure(self, gi: int) -> ir.Value | None:
        """After a call of sub-graph `gi` whose LAPACK calls may fail: whether it failed (an i1), its status
        block copied into the program's (`cpu.lapack.LapackPlan.nested`; the first failure is kept), else None."""
        plan = self.entry.lapack
        j = plan.nested_index.get((self.region, gi)) if plan is not None else None
        if j is None:
            return None
        b, sub = self.b, plan.nested[j]
        st = b.gep(self.at("arena"), [ir.Constant(I64, sub.status_offset)], source_etype=I8)
        failed = b.icmp_signed("!=", b.load(st, typ=I64), ir.Constant(I64, 0))
        with b.if_then(failed, likely=False):
            mine = self.entry.status
            with b.if_then(b.icmp_signed("==", b.load(mine, typ=I64), ir.Constant(I64, 0))):
                self.copy(b.gep(mine, [ir.Constant(I64, plan.nested_offset(j))], source_etype=I8), st,
                          sub.status_bytes)
                b.store(ir.Constant(I64, len(plan.order) + j + 1), mine)
        return failed

    def leave_if_failed(self, exit_bb: ir.Block) -> None:
        """Branch to `exit_bb` when the last sub-graph call failed (a loop stops at its first failure)."""
        if self.failed is not None:
            b = self.b
            go_on = b.append_basic_block(f"region{self.ki}_ok{self.calls}")
            b.cbranch(self.failed, exit_bb, go_on)
            b.position_at_end(go_on)

    def ptr(self, node: Any) -> ir.Value:
        return self.entry.ptr_of(node)

    def call(self, gi: int, in_ptrs: list, targets: list) -> None:
        """Call sub-graph `gi` on input pointers, writing its outputs at `targets` (its out_plan followed)."""
        b, rb = self.b, self.rb
        exe = rb.exes[gi]
        graph = self.region.subgraphs()[gi]
        self.calls += 1
        tag = f"{self.ki}_{self.calls}"
        in_arr = opaque_alloca(self.ab, ir.ArrayType(PTR, max(len(in_ptrs), 1)), f"rin{tag}")
        out_arr = opaque_alloca(self.ab, ir.ArrayType(PTR, max(len(exe.out_buffers), 1)), f"rout{tag}")
        for i, p in enumerate(in_ptrs):
            b.store(p, b.gep(in_arr, [ir.Constant(I64, i)], source_etype=PTR))
        written = set()
        for o, plan in enumerate(exe.out_plan):
            if plan[0] == "buf" and plan[1] not in written:
                written.add(plan[1])
                b.store(targets[o], b.gep(out_arr, [ir.Constant(I64, plan[1])], source_etype=PTR))
        fn = self.cx.function(rb.symbols[gi], VOID, [PTR, PTR, PTR, PTR])
        b.call(fn, [in_arr, out_arr, self.at("arena"), _addr(b, int(rb.const_ptrs[gi].ctypes.data))])
        self.failed = self._propagate_failure(gi)
        for o, plan in enumerate(exe.out_plan):
            kind, nbytes = plan[0], graph.outputs[o].nbytes
            if kind in ("copy_in", "in"):
                self.copy(targets[o], in_ptrs[plan[1]], nbytes)
            elif kind == "dup":
                self.copy(targets[o], targets[plan[1]], nbytes)
            elif kind == "const":
                a = np.ascontiguousarray(plan[1])
                rb.keep.append(a)
                self.copy(targets[o], _addr(b, int(a.ctypes.data)), nbytes)


def _scan(lw: _Lower) -> None:
    b, r = lw.b, lw.region
    body = r.body
    nc, nk, nx, ny, T = r.nc, r.nk, r.nx, r.ny, r.length
    ins, outs = lw.ins, lw.outs
    cbytes = [body.inputs[nc + j].nbytes for j in range(nk)]
    xstep = [body.inputs[nc + nk + j].nbytes for j in range(nx)]
    ybytes = [body.outputs[nk + j].nbytes for j in range(ny)]
    for j in range(nk):
        lw.reserve(("next", j), cbytes[j])
        if j not in outs:
            lw.reserve(("cur", j), cbytes[j])
    for j in range(ny):
        if nk + j not in outs:
            lw.reserve(("y", j), ybytes[j])
    lw.open()
    cur = [outs[j] if j in outs else lw.at(("cur", j)) for j in range(nk)]
    nxt = [lw.at(("next", j)) for j in range(nk)]
    for j in range(nk):
        lw.copy(cur[j], lw.ptr(ins[nc + j]), cbytes[j])
    if T > 0:
        pre = b.block
        loop_bb = b.append_basic_block(f"region{lw.ki}_loop")
        after_bb = b.append_basic_block(f"region{lw.ki}_done")
        b.branch(loop_bb)
        b.position_at_end(loop_bb)
        t = b.phi(I64, name=f"t{lw.ki}")
        t.add_incoming(ir.Constant(I64, 0), pre)
        idx = b.sub(ir.Constant(I64, T - 1), t) if r.reverse else t
        xptr = [b.gep(lw.ptr(ins[nc + nk + j]), [b.mul(idx, ir.Constant(I64, xstep[j]))], source_etype=I8)
                for j in range(nx)]
        targets = list(nxt)
        for j in range(ny):
            if nk + j in outs:
                targets.append(b.gep(outs[nk + j], [b.mul(idx, ir.Constant(I64, ybytes[j]))], source_etype=I8))
            else:
                targets.append(lw.at(("y", j)))
        lw.call(0, [lw.ptr(ins[i]) for i in range(nc)] + cur + xptr, targets)
        lw.leave_if_failed(after_bb)
        for j in range(nk):
            lw.copy(cur[j], nxt[j], cbytes[j])
        t1 = b.add(t, ir.Constant(I64, 1))
        t.add_incoming(t1, b.block)
        b.cbranch(b.icmp_signed("<", t1, ir.Constant(I64, T)), loop_bb, after_bb)
        b.position_at_end(after_bb)
    lw.close()


def _cond(lw: _Lower) -> None:
    b, r = lw.b, lw.region
    ins, outs = lw.ins, lw.outs
    for j, (shape, dt) in enumerate(r.outputs):
        if j not in outs:
            lw.reserve(("y", j), int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize)
    lw.open()
    ix = ins[0]
    raw = b.load(lw.ptr(ix), typ=ir.IntType(8 * ix.dtype.itemsize))
    if ix.dtype.kind in "bu":
        v = b.zext(raw, I64) if ix.dtype.itemsize < 8 else raw
    else:
        v = b.sext(raw, I64) if ix.dtype.itemsize < 8 else raw
    n = len(r.graphs)
    v = b.select(b.icmp_signed("<", v, ir.Constant(I64, 0)), ir.Constant(I64, 0), v)
    v = b.select(b.icmp_signed(">", v, ir.Constant(I64, n - 1)), ir.Constant(I64, n - 1), v)
    targets = [outs[j] if j in outs else lw.at(("y", j)) for j in range(r.num_outputs)]
    done = b.append_basic_block(f"region{lw.ki}_done")
    blocks = [b.append_basic_block(f"region{lw.ki}_branch{k}") for k in range(n)]
    sw = b.switch(v, blocks[0])
    for k in range(1, n):
        sw.add_case(ir.Constant(I64, k), blocks[k])
    in_ptrs = [lw.ptr(x) for x in ins[1:]]
    for k in range(n):
        b.position_at_end(blocks[k])
        lw.call(k, in_ptrs, targets)
        b.branch(done)
    b.position_at_end(done)
    lw.close()


def _while(lw: _Lower) -> None:
    b, r = lw.b, lw.region
    nk = r.nk
    ins, outs = lw.ins, lw.outs
    cbytes = [x.nbytes for x in r.body.inputs[:nk]]
    for j in range(nk):
        lw.reserve(("next", j), cbytes[j])
        if j not in outs:
            lw.reserve(("cur", j), cbytes[j])
    lw.reserve("flag", 1)
    lw.open()
    cur = [outs[j] if j in outs else lw.at(("cur", j)) for j in range(nk)]
    nxt = [lw.at(("next", j)) for j in range(nk)]
    for j in range(nk):
        lw.copy(cur[j], lw.ptr(ins[j]), cbytes[j])
    rest = [lw.ptr(x) for x in ins[nk:]]
    test_bb = b.append_basic_block(f"region{lw.ki}_test")
    body_bb = b.append_basic_block(f"region{lw.ki}_body")
    done = b.append_basic_block(f"region{lw.ki}_done")
    b.branch(test_bb)
    b.position_at_end(test_bb)
    flag = lw.at("flag")
    lw.call(0, cur + rest, [flag])
    lw.leave_if_failed(done)
    go = b.icmp_unsigned("!=", b.load(flag, typ=I8), ir.Constant(I8, 0))
    b.cbranch(go, body_bb, done)
    b.position_at_end(body_bb)
    lw.call(1, cur + rest, nxt)
    lw.leave_if_failed(done)
    for j in range(nk):
        lw.copy(cur[j], nxt[j], cbytes[j])
    b.branch(test_bb)
    b.position_at_end(done)
    lw.close()


_LOWER = {"scan": _scan, "cond": _cond, "while": _while}


def region_call(entry: Any, ki: int, k: Any) -> None:
    """Lower a region kernel (the outputs of one region) at the entry (`KERNEL_CALLS[KernelKind.REGION]`)."""
    lw = _Lower(entry, ki, k)
    entry.info["kernels"].append("region")
    _LOWER[lw.node0.op.extra["region"]](lw)
    for i, p, nbytes in lw.dups:
        lw.copy(p, lw.outs[i], nbytes)
