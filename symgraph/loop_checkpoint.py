"""Checkpointed reverse mode through a `scan`: snapshots of the carry and an action loop that recomputes the rest.

`Region.checkpointed_reverse(nodes, schedule)` (installed on
`symgraph.regions.Region` by this module) replaces a loop's reversal — the
saving forward loop that stacks every step's residuals, and the reverse loop
that reads them — by two loops built from the same body graphs:

- a *snapshot loop*: the forward loop, which also keeps the carries the
  schedule stores in a (slots, *carry.shape) array per carry leaf (a step
  writes its new carry into the slot its `slot` x names, or none); it gives
  the loop's value as the saving loop did;
- an *action loop* over the schedule's table (`symgraph.passes.checkpoint.loops`):
  each iteration is a `switch` over ADVANCE (the body on the current carry),
  STORE / RESTORE (a slot of the snapshot arrays) and REVERSE (the body's VJP
  graph with its forward values recomputed from the current carry: one taped
  step). The cotangents of the carry and the sums over the closed-over values
  are its carries; the cotangents of the xs are its ys, of which the rows of
  the REVERSE actions are kept.

Memory: `slots` carries and one step's values, against T steps of residuals.
Work: T forward steps, `advances` recomputed steps and T taped steps.

References:
    Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000).
    Chen, Xu, Zhang, Guestrin, arXiv:1604.06174 (2016).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import lax as L
from .autodiff import placeholder
from .branches import Branches, cond_node
from .ir import Graph, Node, current_builder, meta
from .passes.checkpoint.loops import ADVANCE, RESTORE, REVERSE, STORE, LoopSchedule, as_index_array
from .regions import Region, WhileRegion, scan_node, while_node

__all__ = ["inline"]


def inline(graph: Graph, inputs: Sequence[Node]) -> list[Node]:
    """The outputs of `graph` rebuilt on `inputs` (one node per graph input)."""
    b = current_builder()
    sub: dict[Node, Node] = dict(zip(graph.inputs, inputs))
    for n in graph.toposort():
        if n in sub:
            continue
        ins = tuple(sub.get(x, x) for x in n.inputs)
        if any(a is not x for a, x in zip(ins, n.inputs)):
            sub[n] = b.remake(n, ins, meta(n))
    return [sub.get(o, o) for o in graph.outputs]


def _store(S: Node, c: Node, slot: Node) -> Node:
    """S with row `slot` replaced by c (rows: snapshot slots); slot -1 stores nothing."""
    n = S.shape[0]
    mask = L.binary("eq", L.constant(np.arange(n, dtype=np.int64)), slot)
    mask = L.broadcast_to(L.reshape(mask, (n,) + (1,) * c.ndim), S.shape)
    return L.where(mask, L.broadcast_to(L.reshape(c, (1,) + c.shape), S.shape), S)


def _zeros(shape: tuple, dtype: np.dtype) -> Node:
    return L.broadcast_to(L.constant(np.zeros((), dtype)), shape)


def _snapshot_region(R: Region, sch: LoopSchedule) -> Region:
    """R's loop that also writes the schedule's forward snapshots into slot arrays (extra carries)."""
    def build() -> Region:
        b = R.body
        nc, nk = R.nc, R.nk
        cst, cin, xin = b.inputs[:nc], b.inputs[nc:nc + nk], b.inputs[nc + nk:]
        S = [placeholder((sch.slots,) + c.shape, c.dtype, "snapshots") for c in cin]
        slot = placeholder((), np.int64, "slot")
        new = b.outputs[:nk]
        outs = list(new) + [_store(s, c, slot) for s, c in zip(S, new)] + list(b.outputs[nk:])
        g = Graph(list(cst) + list(cin) + S + list(xin) + [slot], outs, name=f"snapshots({b.name})")
        return Region(g, nc, 2 * nk, R.nx + 1, R.length, R.reverse, name=f"snapshots({R.name})",
                      simplify_body=False)
    return R._memo(("snapshots", sch.slots, tuple(sch.forward_store)), build)


def _action_region(R: Region, sch: LoopSchedule) -> Region:
    """The backward loop: one iteration per REVERSE action, after a `while` over the actions before it.

    Consts: R's consts, the full xs, the action table (kinds, steps, slots). Carries: the current
    carry c, the snapshot arrays S, the carry cotangents, the const-cotangent sums, the table
    pointer. xs: the step's x and y cotangent (the outer loop runs in reverse step order, so its
    x index is the step's). ys: the step's x cotangents.
    """
    def build() -> Region:
        rv = R.reversal_parts
        fk, fc, fx, fy, full = rv["fk"], rv["fc"], rv["fx"], rv["fy"], rv["full"]
        b = R.body
        nc, nk = R.nc, R.nk
        cst, cin, xin = b.inputs[:nc], b.inputs[nc:nc + nk], b.inputs[nc + nk:]
        yo = b.outputs[nk:]
        T, na = R.length, len(sch.actions)

        def ph(x: Node, shape: tuple | None = None, what: str = "v") -> Node:
            return placeholder(x.shape if shape is None else shape, x.dtype, what)

        def iph(shape: tuple, what: str) -> Node:
            return placeholder(shape, np.int64, what)

        o_cst = [ph(x, what="closure") for x in cst]
        o_xs = [ph(x, (T,) + x.shape, "xs") for x in xin]
        table = [iph((na,), w) for w in ("kinds", "steps", "slots")]
        o_c = [ph(c, what="carry") for c in cin]
        o_S = [ph(c, (sch.slots,) + c.shape, "snapshots") for c in cin]
        o_ct = [ph(cin[j], what="ct_carry") for j in fk]
        o_acc = [ph(cst[k], what="ct_const") for k in fc]
        ptr = iph((), "pointer")
        o_x = [ph(x, what="x") for x in xin]
        o_cy = [ph(yo[j], what="ct_y") for j in fy]
        c, S, nptr = _pre_actions(b, R, sch, o_cst, o_xs, table, o_c, o_S, ptr)
        g = inline(full, o_cst + o_ct + o_acc + o_cy + c + o_x)
        one = L.constant(np.int64(1))
        outs = c + S + g[:len(fk) + len(fc)] + [L.add(nptr, one)] + g[len(fk) + len(fc):]
        consts = o_cst + o_xs + table
        carries = o_c + o_S + o_ct + o_acc + [ptr]
        graph = Graph(consts + carries + o_x + o_cy, outs, name=f"checkpointed_vjp({b.name})")
        return Region(graph, len(consts), len(carries), len(o_x) + len(o_cy), T, not R.reverse,
                      name=f"checkpointed_vjp({R.name})", simplify_body=False)
    return R._memo(("actions", sch.name, sch.slots, len(sch.actions)), build)


def _pre_actions(b: Graph, R: Region, sch: LoopSchedule, o_cst: list, o_xs: list, table: list, o_c: list,
                 o_S: list, ptr: Node) -> tuple[list[Node], list[Node], Node]:
    """`while kinds[ptr] != REVERSE: (c, S) = action(c, S); ptr += 1`, a while loop of a switch."""
    nk = R.nk
    kinds, steps, slots = table
    carry = o_c + o_S + [ptr]
    rest = o_cst + o_xs + table
    w_in = [placeholder(x.shape, x.dtype, "loop") for x in carry + rest]
    w_c, w_S, w_p = w_in[:nk], w_in[nk:2 * nk], w_in[2 * nk]
    w_cst = w_in[2 * nk + 1:2 * nk + 1 + len(o_cst)]
    w_xs = w_in[2 * nk + 1 + len(o_cst):2 * nk + 1 + len(o_cst) + len(o_xs)]
    w_k, w_st, w_sl = w_in[-3:]
    kind = L.bind("gather", w_k, w_p, axis=0)
    cond = Graph(w_in, [L.binary("ne", kind, L.constant(np.int64(REVERSE)))], name="pending")
    ops = w_c + w_S + w_cst + w_xs + [L.bind("gather", w_st, w_p, axis=0), L.bind("gather", w_sl, w_p, axis=0)]
    phs = [placeholder(x.shape, x.dtype, "operand") for x in ops]
    p_c, p_S = phs[:nk], phs[nk:2 * nk]
    p_cst = phs[2 * nk:2 * nk + len(o_cst)]
    p_xs = phs[2 * nk + len(o_cst):2 * nk + len(o_cst) + len(o_xs)]
    p_step, p_slot = phs[-2], phs[-1]

    def advance() -> list[Node]:
        x = [L.bind("gather", xs, p_step, axis=0) for xs in p_xs]
        return inline(b, p_cst + p_c + x)[:nk] + p_S

    def store() -> list[Node]:
        return p_c + [_store(s, c, p_slot) for s, c in zip(p_S, p_c)]

    def restore() -> list[Node]:
        return [L.bind("gather", s, p_slot, axis=0) for s in p_S] + p_S

    fns = [advance, store, restore]
    assert (ADVANCE, STORE, RESTORE) == (0, 1, 2)
    region = Branches([Graph(phs, f(), name=f.__name__) for f in fns], name="checkpoint_action",
                      simplify_body=False)
    sel = [cond_node([kind] + ops, region, j) for j in range(2 * nk)]
    body = Graph(w_in, sel + [L.add(w_p, L.constant(np.int64(1)))], name="checkpoint_actions")
    loop = WhileRegion(cond, body, 2 * nk + 1, name=f"checkpoint_actions({R.name})", simplify_body=False)
    res = [while_node(carry + rest, loop, j) for j in range(2 * nk + 1)]
    return res[:nk], res[nk:2 * nk], res[2 * nk]


def checkpointed_reverse(self: Region, nodes: list[Node], sch: LoopSchedule) -> dict[Node, Node] | None:
    """Replacements for a loop reversal's nodes under schedule `sch` (see the module docstring).

    `self` is the reverse loop's region (its `reversal` names the primal loop); `nodes` are its
    `scan` nodes (one group: same inputs). Returns old node -> new node, for the group and for the
    saving loop's carries and ys, or None when the loop saves no residuals.
    """
    R, saver = self.reversal
    rv = R.reversal_parts
    fk, fc, fx, fy = rv["fk"], rv["fc"], rv["fx"], rv["fy"]
    n_saved = rv["n_saved"]
    if n_saved == 0:
        return None
    nc, nk, nx, T = R.nc, R.nk, R.nx, R.length
    nf, ncf, nfy = len(fk), len(fc), len(fy)
    bins = list(nodes[0].inputs)
    consts = bins[:nc]
    p = nc
    ct_final = bins[p:p + nf]
    p += nf
    zc = bins[p:p + ncf]
    p += ncf
    ct_ys = bins[p:p + nfy]
    p += nfy
    saved = bins[p:p + n_saved]
    xs = bins[p + n_saved:]
    sins = list(saved[0].inputs)
    init = sins[nc:nc + nk]

    def xidx(q: int) -> int:
        return T - 1 - q if R.reverse else q

    slot_x = [-1] * T
    for q, j in enumerate(sch.forward_store):
        slot_x[xidx(q)] = j
    S0 = [_store(_zeros((sch.slots,) + c.shape, c.dtype), c, L.constant(np.int64(0))) for c in init]
    snap = _snapshot_region(R, sch)
    s_ins = consts + init + S0 + xs + [L.constant(as_index_array(slot_x))]
    mfwd = meta(saved[0])
    from .ir import role

    with role(mfwd.role, mfwd.origin):
        s_out = [scan_node(s_ins, snap, i) for i in range(snap.num_outputs)]
    subst: dict[Node, Node] = {}
    ny = R.ny
    for loop in (R, saver):  # the loop's value, whichever node gives it
        for i in range(nk):
            subst[scan_node(sins, loop, i)] = s_out[i]
        for j in range(ny):
            subst[scan_node(sins, loop, nk + j)] = s_out[2 * nk + j]
    acts = sch.actions
    table = [L.constant(as_index_array(col)) for col in
             ([a[0] for a in acts], [xidx(a[1]) for a in acts], [a[2] for a in acts])]
    act = _action_region(R, sch)
    a_ins = consts + xs + table + init + s_out[nk:2 * nk] + ct_final + zc + [L.constant(np.int64(0))] + xs + ct_ys
    a_out = [scan_node(a_ins, act, i) for i in range(act.num_outputs)]
    base = 2 * nk
    for n in nodes:
        i = n.attr("index")
        subst[n] = a_out[base + i] if i < nf + ncf else a_out[act.nk + (i - nf - ncf)]
    return subst


Region.checkpointed_reverse = checkpointed_reverse  # installed here (a layer above the pass that calls it)
