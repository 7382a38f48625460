"""Cutting loop bodies to the kernel cost cap (`partition._Partitioner.split`).

LLVM's time grows faster than linearly with the size of a function, so a loop
task whose body costs more than its cap (`partition.kernel_cost_cap`) has fused
values materialized until every cone fits. A cone is kept as a bit set over
the positions of the task's Exprs, in blocks of `_CONE_BITS` bits: a chain's
cones are runs of nearby positions, so copying and merging one costs a few
word operations (sets of Exprs made this O(nodes x cap) in time and memory).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symgraph.ir import Node

from .affine import Aff
from .expr import Expr, expr_weight
from .tasks import Task

__all__ = ["cut_task"]

_CONE_BITS = 10  # cone bit sets: blocks of 1024 positions
_CONE_MASK = (1 << _CONE_BITS) - 1


def cut_task(b: Any, t: Task, M: set, cut: set, extra: set, cap: int) -> None:
    """Cut the fused values of loop task t (built by `body.BodyBuilder` b) so that every cone costs at most cap.

    The Exprs are visited inputs first with the set of ops each one needs (its cone, cut at loads
    and at values already in `cut`); when a cone would cost more than the cap (a quarter of it
    for a value with several readers), its most expensive operand that is a fused elementwise
    value is cut: added to `cut` (its Expr) and to `extra` (its node, to materialize). `M` is
    the materialized set.
    """
    size = int(np.prod(t.domain, dtype=np.int64))
    exprs = t.exprs
    uses: dict[Expr, int] = {}  # readers not visited yet (at e's own visit: all its readers)
    # A cone (the ops e needs given the cuts) is {block: int}, a bit set over the positions of `exprs`.
    masks: dict[int, dict[int, int]] = {}  # block -> weight -> its positions of that weight
    uget = uses.get
    for i, e in enumerate(exprs):
        w = e.w  # expr_weight(e)
        if w:
            m = masks.setdefault(i >> _CONE_BITS, {})
            m[w] = m.get(w, 0) | (1 << (i & _CONE_MASK))
        al = e.deps  # its Expr arguments and the atoms of its affine ones, in order
        if len(al) > 1:
            al = dict.fromkeys(al)
        for a in al:
            uses[a] = uget(a, 0) + 1
    wmasks = {blk: list(m.items()) for blk, m in masks.items()}
    cone: dict[Expr, dict[int, int]] = {}  # freed after its last reader
    ccost: dict[Expr, int] = {}    # their summed weight

    def cuttable(a: Expr) -> Node | None:
        n = b.expr_node.get(a)
        if n is None or n in M or n.op.kind != "elementwise" or not 0 < n.size <= size:
            return None
        return n

    for i, e in enumerate(exprs):
        al = e.deps
        w = e.w
        if not al:  # a leaf (load, constant, loop variable): its cone is itself, nothing to cut below
            cone[e] = {i >> _CONE_BITS: 1 << (i & _CONE_MASK)} if w else {}
            ccost[e] = w
            continue
        if len(al) > 1:
            al = tuple(dict.fromkeys(al))
        # A value with several readers is usually read again by another part of the body (the
        # forward value by the backward pass): after the cut its cone is recomputed there, so
        # shared cones are kept to a quarter of the cap, leaving room for their readers.
        lim = cap if uget(e, 0) <= 1 else cap // 4
        while True:
            live = [a for a in al if a not in cut and ccost.get(a, 0)]
            if len(live) == 2:  # by decreasing cost, ties in argument order (as the stable sort below)
                if ccost[live[1]] > ccost[live[0]]:
                    live.reverse()
            elif len(live) > 2:
                live.sort(key=lambda x: -ccost[x])  # stable, as sorted()
            c = w + (ccost[live[0]] if live else 0)
            more: dict[int, int] = {}  # ops of the other operands' cones not in the biggest one
            if len(live) > 1:
                big = cone[live[0]]
                for a in live[1:]:
                    for blk, v in cone[a].items():
                        v &= ~big.get(blk, 0)
                        if v:
                            more[blk] = more.get(blk, 0) | v
                for blk, v in more.items():
                    for wt, m in wmasks[blk]:
                        c += wt * (v & m).bit_count()
            if c <= lim:
                break
            cands = [a for a in live if cuttable(a) is not None]
            if not cands:
                break
            a = cands[0]  # the most expensive
            cut.add(a)
            cone.pop(a, None)  # a cut value is a load from now on: its cone is never read again
            extra.add(cuttable(a))
        if not live:
            s: dict[int, int] = {}
        elif uses[live[0]] == 1:
            s = cone.pop(live[0])  # its last reader: reuse the set
        else:
            s = dict(cone[live[0]])
        for blk, v in more.items():
            s[blk] = s.get(blk, 0) | v
        if w:
            s[i >> _CONE_BITS] = s.get(i >> _CONE_BITS, 0) | (1 << (i & _CONE_MASK))
        cone[e] = s
        ccost[e] = c
        for a in al:
            uses[a] -= 1
            if uses[a] == 0:
                cone.pop(a, None)
