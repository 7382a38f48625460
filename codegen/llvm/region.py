"""A loop region at the entry: the region's body, compiled once, called once per step in a native loop.

A `scan` node's region (symgraph.regions.Region) has a body graph with inputs
(consts, carry, x) and outputs (carry, y). `codegen.compile_graph` compiles each
body once into its own module with a raw-pointer entry `body(ins, outs, arena,
consts)` and registers it under a unique symbol (`RegionBody`); the outer entry
declares that symbol and, for a region kernel, emits:

    scratch = aligned_alloc(...)          # next carries, unused ys, the body's arena
    cur[j] = the final carry's buffer (or scratch); memcpy(cur[j], init[j])
    for t in 0..T-1 (reversed index when reverse):
        body(ins = consts, cur, xs[j] + idx*step; outs = next carries, ys[j] + idx*step, arena, consts)
        the outputs the body does not write (copies of inputs, constants, duplicates) copied
        memcpy(cur[j], next[j])
    free(scratch)

So compile time does not depend on the trip count, and no Python runs per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from .context import I64, PTR, VOID, opaque_alloca

__all__ = ["RegionBody", "region_call", "kernel_region", "chosen_regions", "ALIGN"]

ALIGN = 64  #: alignment of the scratch block's pieces (the body's arena expects 64-byte slots)


@dataclass
class RegionBody:
    """A compiled loop body.

    Attributes:
        symbol: the registered symbol of its raw-pointer entry.
        exe: the body's `codegen.cpu.Executable` (kept alive: its code, constants).
        const_ptrs: uint64 array of the data addresses of the body's constants (its entry's `consts`).
        keep: arrays whose addresses the outer code embeds (kept alive).
    """

    symbol: str
    exe: Any
    const_ptrs: np.ndarray
    keep: list = field(default_factory=list)


def kernel_region(k: Any) -> Any:
    """The region a region kernel runs: of its outputs' regions (a loop and its saver, which extends
    it with residual ys), the one with the most outputs."""
    return max((t.node.attr("region") for t in k.tasks), key=lambda r: len(r.body.outputs))


def chosen_regions(order: list) -> list:
    """The regions the program's region kernels will run (`kernel_region`), in schedule order."""
    best: dict = {}
    for n in order:
        if n.op.extra.get("region") == "scan":
            r = n.attr("region")
            key = (n.inputs, r.root, n.tag)
            if key not in best or len(r.body.outputs) > len(best[key].body.outputs):
                best[key] = r
    out: dict = {}
    for r in best.values():
        out.setdefault(r)
    return list(out)


def _addr(b: ir.IRBuilder, address: int) -> ir.Value:
    return b.inttoptr(ir.Constant(I64, address), PTR)


def _round(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def region_call(entry: Any, ki: int, k: Any) -> None:
    """Lower a region kernel (the outputs of one loop) at the entry (`KERNEL_CALLS[KernelKind.REGION]`)."""
    cx, b, ab = entry.cx, entry.b, entry.ab
    node0 = k.tasks[0].node
    region = kernel_region(k)
    rb: RegionBody = entry.regions[region]
    body = region.body
    nc, nk, nx, ny, T = region.nc, region.nk, region.nx, region.ny, region.length
    ins = list(node0.inputs)
    outs = {t.node.attr("index"): entry.ptr_of(t.node) for t in k.tasks}
    memcpy = cx.function("memcpy", PTR, [PTR, PTR, I64])
    entry.info["kernels"].append("region")

    def copy(dst: ir.Value, src: ir.Value, nbytes: int) -> None:
        if nbytes > 0:
            b.call(memcpy, [dst, src, ir.Constant(I64, nbytes)])

    cbytes = [body.inputs[nc + j].nbytes for j in range(nk)]
    xstep = [body.inputs[nc + nk + j].nbytes for j in range(nx)]
    ybytes = [body.outputs[nk + j].nbytes for j in range(ny)]
    # the scratch block: the next carries, a current carry without an output buffer, unused ys, the arena
    offs: dict[tuple, int] = {}
    size = 0
    for j in range(nk):
        offs[("next", j)] = size
        size += _round(cbytes[j])
        if j not in outs:
            offs[("cur", j)] = size
            size += _round(cbytes[j])
    for j in range(ny):
        if nk + j not in outs:
            offs[("y", j)] = size
            size += _round(ybytes[j])
    offs[("arena",)] = size
    size += _round(rb.exe.arena_bytes)
    alloc = cx.function("aligned_alloc", PTR, [I64, I64])
    free = cx.function("free", VOID, [PTR])
    blk = b.call(alloc, [ir.Constant(I64, ALIGN), ir.Constant(I64, max(size, ALIGN))])

    def at(key: tuple) -> ir.Value:
        return b.gep(blk, [ir.Constant(I64, offs[key])], source_etype=ir.IntType(8))

    cur = [outs[j] if j in outs else at(("cur", j)) for j in range(nk)]
    nxt = [at(("next", j)) for j in range(nk)]
    arena = at(("arena",))
    for j in range(nk):
        copy(cur[j], entry.ptr_of(ins[nc + j]), cbytes[j])
    n_in = len(body.inputs)
    out_plan = rb.exe.out_plan
    n_buf = len(rb.exe.out_buffers)
    in_arr = opaque_alloca(ab, ir.ArrayType(PTR, max(n_in, 1)), f"region_in{ki}")
    out_arr = opaque_alloca(ab, ir.ArrayType(PTR, max(n_buf, 1)), f"region_out{ki}")

    def slot(arr: ir.Value, i: int) -> ir.Value:
        return b.gep(arr, [ir.Constant(I64, i)], source_etype=PTR)

    for i in range(nc):
        b.store(entry.ptr_of(ins[i]), slot(in_arr, i))
    for j in range(nk):
        b.store(cur[j], slot(in_arr, nc + j))
    fn = cx.function(rb.symbol, VOID, [PTR, PTR, PTR, PTR])
    consts = _addr(b, int(rb.const_ptrs.ctypes.data))
    if T > 0:
        pre = b.block
        loop_bb = b.append_basic_block(f"region{ki}_loop")
        after_bb = b.append_basic_block(f"region{ki}_done")
        b.branch(loop_bb)
        b.position_at_end(loop_bb)
        t = b.phi(I64, name=f"t{ki}")
        t.add_incoming(ir.Constant(I64, 0), pre)
        idx = b.sub(ir.Constant(I64, T - 1), t) if region.reverse else t
        xptr = []
        for j in range(nx):
            p = b.gep(entry.ptr_of(ins[nc + nk + j]), [b.mul(idx, ir.Constant(I64, xstep[j]))],
                      source_etype=ir.IntType(8))
            xptr.append(p)
            b.store(p, slot(in_arr, nc + nk + j))
        in_ptrs = [entry.ptr_of(ins[i]) for i in range(nc)] + cur + xptr
        targets = list(nxt)
        for j in range(ny):
            if nk + j in outs:
                targets.append(b.gep(outs[nk + j], [b.mul(idx, ir.Constant(I64, ybytes[j]))],
                                     source_etype=ir.IntType(8)))
            else:
                targets.append(at(("y", j)))
        written = set()
        for o, plan in enumerate(out_plan):
            if plan[0] == "buf" and plan[1] not in written:
                written.add(plan[1])
                b.store(targets[o], slot(out_arr, plan[1]))
        b.call(fn, [in_arr, out_arr, arena, consts])
        nbytes = cbytes + ybytes
        for o, plan in enumerate(out_plan):
            kind = plan[0]
            if kind == "buf":
                continue
            if kind in ("copy_in", "in"):
                copy(targets[o], in_ptrs[plan[1]], nbytes[o])
            elif kind == "dup":
                copy(targets[o], targets[plan[1]], nbytes[o])
            elif kind == "const":
                a = np.ascontiguousarray(plan[1])
                rb.keep.append(a)
                copy(targets[o], _addr(b, int(a.ctypes.data)), nbytes[o])
        for j in range(nk):
            copy(cur[j], nxt[j], cbytes[j])
        t1 = b.add(t, ir.Constant(I64, 1))
        t.add_incoming(t1, b.block)
        b.cbranch(b.icmp_signed("<", t1, ir.Constant(I64, T)), loop_bb, after_bb)
        b.position_at_end(after_bb)
    b.call(free, [blk])
