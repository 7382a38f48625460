"""Reverse mode through a `while_loop` of run-time trip count with s carry snapshots (binomial checkpointing).

`sg.while_loop(cond_fun, body_fun, init_val, checkpoints=s)` builds a `while`
region that also carries `checkpoint_carries` (the caller does not see
them): a step counter and, placed *online* by a rule that depends only on
the step index, up to s carry snapshots (one (s, *leaf.shape) array per
carry leaf, row 0 the initial carry) with their positions, as a stack of
intervals. Its VJP (`WhileRegion.checkpointed_vjp`, installed here) is a
second `while` loop whose next action is computed in the graph from a small
integer state, Griewank & Walther's binomial (Revolve) schedule run as a
stack machine:

- the stack holds at most s + 1 intervals (a, b, ss): "reverse steps a..b-1
  from the state after step a, with ss snapshots"; it starts as the primal
  loop left it, entry j = (A[j], A[j + 1], s - j), the top one ending at n;
  the snapshot numbers strictly decrease upwards, so an interval with
  ss >= 1 sits at depth <= s - 1 and its start state lives in row `depth`;
- one iteration does one action on the carries (a `switch`): ADVANCE (the
  body on the current carry; the state reached at a split point is stored in
  the top interval's row), RESTORE (a row becomes the current carry) or
  REVERSE (the VJP graph of one step, its forward values recomputed from the
  current carry: a "taped" step, as in Revolve's model);
- splitting the top interval (b - a >= 2) pushes (m, b, ss - 1) above
  (a, m, ss) at m = a + split(b - a, ss), Revolve's optimal first snapshot:
  with r the smallest integer with C(ss + r, ss) >= l,
  split(l, ss) = clamp(C(ss + r - 2, ss), l - C(ss + r - 1, ss - 1), C(ss + r - 1, ss)),
  computed by a small integer `while` loop over r.

The online rule (`checkpoint_carries`): the state entering step p becomes a
new entry above entry j when it lies C(s - j + r, s - j) steps after entry
j's start, r counting entry j's earlier such events (the binomial
"capacities" of an interval with s - j snapshots), for the lowest such j.
The reverse loop then advances the sum of t(length, snapshots) over the
stack's entries (`while_schedule_counts`; t = `revolve_extra_steps`). That
was never more than the offline t(n, s) (Revolve from the initial carry
once n is known) for every n < 400 and s <= 6, and mostly close to the
known-length optimum t(n, s) - (n - 1) of a `scan` under ("revolve", s):
e.g. 283 against 374 offline and 275 known-length for n = 100, s = 4. It is
not Stumm & Walther's online algorithm, whose optimality results it does not
claim. Memory: s carries (the snapshot arrays, carried by both loops), the
current carry, one step's values and O(s) integers, whatever n is.

The reverse loop is again a checkpointed `while` region (with its own
snapshots), built from `while`, `cond` and elementwise integer ops, so it
lowers to native loops, and differentiates again in forward mode (hvp,
hessian: jvp of the gradient) and in reverse mode (grad of grad: the reverse
loop is reversed with s snapshots of its own carries).

References:
    Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000);
    Griewank & Walther, Evaluating Derivatives (2nd ed., SIAM 2008), ch. 12;
    Stumm & Walther, "New algorithms for optimal online checkpointing",
    SIAM J. Sci. Comput. 32(2) (2010) (the online variant, not built here).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import lax as L
from .autodiff import is_float, needed_inputs, placeholder, vjp_nodes
from .branches import Branches, cond_node
from .errors import UnsupportedOpError
from .ir import Graph, Node, meta, role
from .loop_checkpoint import _store, _zeros, inline
from .passes.checkpoint.revolve import revolve_extra_steps
from .regions import WhileRegion, while_node

__all__ = ["counted_while", "checkpoint_carries", "online_positions", "while_schedule_counts", "revolve_split"]

ADVANCE, RESTORE, REVERSE = 0, 1, 2


def _i(v: int) -> Node:
    return L.constant(np.int64(v))


def _add(x: Node, y: Node | int) -> Node:
    return L.binary("add", x, y if isinstance(y, Node) else _i(y))


def _sub(x: Node, y: Node | int) -> Node:
    return L.binary("sub", x, y if isinstance(y, Node) else _i(y))


def _cmp(name: str, x: Node, y: Node | int) -> Node:
    return L.binary(name, x, y if isinstance(y, Node) else _i(y))


def _and(x: Node, y: Node) -> Node:
    return L.binary("logical_and", x, y)


def _not(x: Node) -> Node:
    return L.unary("logical_not", x, float_op=False)


def _at(arr: Node, i: Node) -> Node:
    return L.bind("gather", arr, i, axis=0)


def _set(arr: Node, i: Node, v: Node, when: Node) -> Node:
    """arr with element i replaced by v where `when` (1-d int arrays)."""
    hit = _and(L.binary("eq", L.constant(np.arange(arr.shape[0], dtype=np.int64)), i),
               L.broadcast_to(when, arr.shape))
    return L.where(hit, L.broadcast_to(v, arr.shape), arr)


def counted_while(carry: Sequence[Node], rest: Sequence[Node], cond_fn: Callable, body_fn: Callable, name: str,
                  checkpoints: int | None = None, online: bool = True) -> list[Node]:
    """A `while` loop on nodes: `while cond_fn(c, rest): c = body_fn(c, rest)`; returns the final carries.

    `cond_fn` and `body_fn` get lists of placeholders (carries, loop invariants) and must build on
    nothing else (no capture). With `checkpoints=s` the region also carries `checkpoint_carries`
    (`WhileRegion.checkpoints`), and reverse mode through it keeps s snapshots; their final values
    follow the carries' in the returned list. `online=False` carries the step counter only (the
    reverse sweep then runs the offline schedule from the initial carry): the backward loops built
    here, whose own reversal (grad of grad) is rarely asked for, do not pay for snapshots.
    """
    phs_c = [placeholder(x.shape, x.dtype, "carry") for x in carry]
    phs_r = [placeholder(x.shape, x.dtype, "invariant") for x in rest]
    pred = cond_fn(phs_c, phs_r)
    new = list(body_fn(phs_c, phs_r))
    carry = list(carry)
    if checkpoints is not None:
        e_ph, e_out, e_init = checkpoint_carries(phs_c, carry, checkpoints, online)
        phs_c, new, carry = phs_c + e_ph, new + e_out, carry + e_init
    ins = phs_c + phs_r
    region = WhileRegion(Graph(ins, [pred], name=f"cond({name})"), Graph(ins, new, name=name), len(phs_c),
                         name=name, checkpoints=checkpoints)
    region.online = online
    return [while_node(carry + list(rest), region, j) for j in range(len(carry))]


def checkpoint_carries(cph: Sequence[Node], init: Sequence[Node], s: int,
                       online: bool = True) -> tuple[list[Node], list[Node], list[Node]]:
    """The carries a loop with `checkpoints=s` adds after the user's: (placeholders, next values, initial values).

    They are: p, the step counter (the index of the state entering the step, its final value the
    trip count n); per carry leaf a snapshot array (s, *leaf.shape), row 0 the initial carry; and
    the online placement's stack: A (s,) the positions of the snapshots (entry j in row j), R and
    NXT (s,) each entry's repetition number r and next trigger length C(s - j + r, s - j), and k
    the top entry. The rule, depending on the step index only: when the state entering step p
    (which runs, so p < n) is p - A[j] = NXT[j] steps after entry j, for the lowest such live j
    with s - j >= 2, it becomes entry j + 1 (the entries above are dropped), r[j] grows by one and
    the new entry starts with r = 0 (trigger length 1). At a trip count n = C(s + r, s) that
    leaves Revolve's optimal split points of n steps stored; in between, the reverse sweep's
    advances are the sum over the stack of t(length, snapshots) (`while_schedule_counts`).

    Args:
        cph: the body's carry placeholders (the state entering a step).
        init: the initial carry nodes.
        s: snapshots (>= 1).
        online: False: the step counter only.
    """
    i64 = np.int64
    p = placeholder((), i64, "steps")
    if not online:
        return [p], [_add(p, 1)], [_i(0)]
    S = [placeholder((s,) + c.shape, c.dtype, "snapshots") for c in cph]
    A, R, NXT = (placeholder((s,), i64, w) for w in ("positions", "repetitions", "triggers"))
    k = placeholder((), i64, "top")
    idx = L.constant(np.arange(s, dtype=i64))
    ssv = L.constant(np.arange(s, 0, -1, dtype=i64))  # s - j snapshots at depth j
    live = _and(_and(L.binary("le", idx, L.broadcast_to(k, (s,))), L.constant(np.arange(s) <= s - 2)),
                L.broadcast_to(_cmp("ge", p, 1), (s,)))
    hit = _and(live, L.binary("eq", L.binary("sub", L.broadcast_to(p, (s,)), A), NXT))
    jstar = L.reduce("min", L.where(hit, idx, L.constant(np.full(s, s, i64))))
    any_hit = _cmp("lt", jstar, s)
    new_top = _add(jstar, 1)
    at_j = _and(L.binary("eq", idx, L.broadcast_to(jstar, (s,))), L.broadcast_to(any_hit, (s,)))
    at_new = _and(L.binary("eq", idx, L.broadcast_to(new_top, (s,))), L.broadcast_to(any_hit, (s,)))
    one = L.constant(np.ones(s, i64))
    R1 = L.binary("add", R, one)
    bumped = L.binary("int_floordiv", L.binary("mul", NXT, L.binary("add", ssv, R1)), R1)
    A2 = L.where(at_new, L.broadcast_to(p, (s,)), A)
    R2 = L.where(at_new, L.constant(np.zeros(s, i64)), L.where(at_j, R1, R))
    N2 = L.where(at_new, one, L.where(at_j, bumped, NXT))
    slot = L.where(any_hit, new_top, _i(-1))
    outs = [_add(p, 1)] + [_store(x, c, slot) for x, c in zip(S, cph)] + [A2, R2, N2, L.where(any_hit, new_top, k)]
    inits = [_i(0)] + [_store(_zeros((s,) + c.shape, c.dtype), c, _i(0)) for c in init]
    inits += [L.constant(np.zeros(s, i64)), L.constant(np.zeros(s, i64)), L.constant(np.ones(s, i64)), _i(0)]
    return [p] + S + [A, R, NXT, k], outs, inits


def online_positions(n: int, s: int) -> list[int]:
    """The snapshot positions `checkpoint_carries` leaves after a loop of n steps (A[0..k]), in Python."""
    A, R, NXT = [0], [0], [1]
    for p in range(1, n):
        for j in range(len(A)):
            if s - j >= 2 and p - A[j] == NXT[j]:
                R[j] += 1
                NXT[j] = NXT[j] * (s - j + R[j]) // R[j]
                A, R, NXT = A[:j + 1] + [p], R[:j + 1] + [0], NXT[:j + 1] + [1]
                break
    return A


def revolve_split(l: Node, ss: Node) -> Node:
    """Revolve's optimal first snapshot offset for l >= 2 steps and ss >= 1 snapshots, as graph nodes (int64).

    split(l, ss) = clamp(C(ss + r - 2, ss), l - C(ss + r - 1, ss - 1), C(ss + r - 1, ss)) with r the
    smallest integer with C(ss + r, ss) >= l: the left part (ss snapshots) then takes r - 1
    repetitions and the right part (ss - 1 snapshots) r, so m + t(l - m, ss - 1) + t(m, ss) = t(l, ss)
    (checked against the brute force in tests/test_while_checkpoint.py). For l = 1 it gives 0.
    """
    def cond(c: list, x: list) -> Node:
        return _cmp("lt", c[1], x[0])

    def body(c: list, x: list) -> list:
        r = _add(c[0], 1)
        return [r, L.binary("int_floordiv", L.binary("mul", c[1], _add(x[1], r)), r), c[1], c[2]]

    z = _i(0)
    _, rng, prev, pp = counted_while([z, _i(1), z, z], [l, ss], cond, body, "revolve_split")
    lo = _sub(l, _sub(rng, prev))
    off = L.binary("maximum", L.binary("maximum", pp, lo), _i(1))
    return L.binary("minimum", L.binary("minimum", off, prev), _sub(l, 1))


def _select(kind: Node, operands: list[Node], fns: list[Callable], name: str) -> list[Node]:
    phs = [placeholder(x.shape, x.dtype, "operand") for x in operands]
    graphs = [Graph(phs, list(f(phs)), name=f.__name__) for f in fns]
    region = Branches(graphs, name=name)
    return [cond_node([kind] + list(operands), region, j) for j in range(region.num_outputs)]


def _primal_outputs(self: WhileRegion, node: Node, ins: list, init: list, nu: int, s: int, online: bool) -> tuple:
    """(trip count, snapshot arrays, their step indices, their count) as outputs of the primal loop; offline:
    one entry (0, n, s), the initial carry in row 0."""
    m = meta(node)
    with role(m.role, m.origin):
        n = while_node(ins, self, nu)
        if online:
            return (n, [while_node(ins, self, nu + 1 + j) for j in range(nu)], while_node(ins, self, 2 * nu + 1),
                    while_node(ins, self, 2 * nu + 4))
        return n, [_store(_zeros((s,) + c.shape, c.dtype), c, _i(0)) for c in init], \
            L.constant(np.zeros(s, np.int64)), _i(0)


def _refuse_reverse_of_reverse(self: WhileRegion, node: Node, s: int) -> None:
    raise UnsupportedOpError(
        f"reverse mode through the reverse sweep of while_loop(..., checkpoints={s}) ({self.name}), i.e. "
        f"grad of grad, is not supported (it gave wrong second derivatives): use sg.hessian, sg.hvp or "
        f"sg.jacfwd(sg.grad(f)) (forward over reverse, which is supported), or max_steps=N instead of "
        f"checkpoints", meta(node).location)


def checkpointed_vjp(self: WhileRegion, cts: dict[int, Node], node: Node) -> tuple[Node | None, ...]:
    """Cotangents of a counted while loop's inputs (init carries, counter, captured) by the module's schedule.

    Args:
        cts: output index -> cotangent (other outputs: zero); the counter (last carry) has none.
        node: one of the loop's `while` nodes.

    Returns:
        One cotangent (or None) per input of `node`.
    """
    s = int(self.checkpoints)
    nk = self.nk
    online = getattr(self, "online", True)
    if not online:  # the reverse sweep of a checkpointed loop, differentiated in reverse mode again
        _refuse_reverse_of_reverse(self, node, s)
    # the user's carries, then `checkpoint_carries`: p, and online nu snapshot arrays, A, R, NXT, k
    nu = (nk - 5) // 2 if online else nk - 1
    assert nk == (2 * nu + 5 if online else nu + 1), (nk, nu)
    ins = list(node.inputs)
    init, rest = ins[:nu], ins[nk:]
    bi = self.body.inputs
    n, Sf, Af, kf = _primal_outputs(self, node, ins, init, nu, s, online)
    dummies = [L.zeros_like(x) for x in bi[nu:nk]]  # the step graphs do not read the extra carries
    fk = [j for j in range(nu) if is_float(bi[j])]
    need = needed_inputs()  # closed-over values nobody differentiates get no accumulator
    fr = [i for i in range(nk, len(bi)) if is_float(bi[i]) and (need is None or need[i])]
    nf, nr = len(fk), len(fr)
    # one taped step: the body's VJP graph, its forward values recomputed from the carry entering the step
    ct_ph = [placeholder(bi[j].shape, bi[j].dtype, "ct_carry") for j in fk]
    seeds: list[Node | None] = [None] * nk
    for j, p in zip(fk, ct_ph):
        seeds[j] = p
    wrt = [bi[j] for j in fk] + [bi[i] for i in fr]
    g = vjp_nodes(self.body.outputs, seeds, wrt)
    step_vjp = Graph(list(bi) + ct_ph, [L.zeros_like(w) if c is None else c for w, c in zip(wrt, g)],
                     name=f"vjp({self.body.name})")

    ct0 = []
    for j in fk:
        c = cts.get(j)
        ct0.append(L.zeros_like(init[j]) if c is None else L.cast(c, init[j].dtype))
    acc0 = [L.zeros_like(ins[i]) for i in fr]
    # the stack the primal loop left: entry j = (A[j], A[j + 1] or n for the top, s - j snapshots), its start in row j
    jj = np.arange(s + 1)
    kb = L.broadcast_to(kf, (s + 1,))
    A0 = L.bind("gather", Af, L.constant(np.minimum(jj, s - 1).astype(np.int64)), axis=0)
    nxt = L.bind("gather", Af, L.constant(np.minimum(jj + 1, s - 1).astype(np.int64)), axis=0)
    idx = L.constant(jj.astype(np.int64))
    B0 = L.where(L.binary("lt", idx, kb), nxt,
                 L.where(L.binary("eq", idx, kb), L.broadcast_to(n, (s + 1,)), L.constant(np.zeros(s + 1, np.int64))))
    SS0 = L.where(L.binary("le", idx, kb), L.constant((s - jj).astype(np.int64)), L.constant(np.zeros(s + 1, np.int64)))
    d0 = L.where(_cmp("gt", n, 0), _add(kf, 1), _i(0))
    # cur = tgt = -1: the first action restores the top entry's start
    carry = list(init) + Sf + ct0 + acc0 + [A0, B0, SS0, d0, _i(-1), _i(-1)]

    def cond(c: list, x: list) -> Node:
        return _cmp("gt", c[2 * nu + nf + nr + 3], 0)

    def body(pc: list, pr: list) -> list:
        c, S = pc[:nu], pc[nu:2 * nu]
        ct, acc = pc[2 * nu:2 * nu + nf], pc[2 * nu + nf:2 * nu + nf + nr]
        A, B, SS, d, cur, tgt = pc[2 * nu + nf + nr:]
        t = L.binary("maximum", _sub(d, 1), _i(0))
        a, b, ss = _at(A, t), _at(B, t), _at(SS, t)
        advancing = _cmp("gt", tgt, cur)
        at_a = _cmp("eq", cur, a)
        split = _and(_not(advancing), _and(at_a, _cmp("gt", _sub(b, a), 1)))
        mm = _add(a, revolve_split(L.where(split, _sub(b, a), _i(1)), ss))
        t1 = L.binary("minimum", _add(t, 1), _i(s))
        A1 = _set(A, t1, mm, split)
        B1 = _set(_set(B, t, mm, split), t1, b, split)
        SS1 = _set(SS, t1, _sub(ss, 1), split)
        d1 = _add(d, L.cast(split, np.int64))
        tgt1 = L.where(split, mm, tgt)
        adv = L.binary("logical_or", advancing, split)
        restore = _and(_not(adv), _not(at_a))
        rev = _and(_not(adv), at_a)
        kind = L.where(adv, _i(ADVANCE), L.where(restore, _i(RESTORE), _i(REVERSE)))
        cur1 = L.where(adv, _add(cur, 1), L.where(restore, a, cur))
        tgt2 = L.where(restore, a, tgt1)
        top = L.binary("maximum", _sub(d1, 1), _i(0))
        keep = _and(adv, _and(_cmp("eq", cur1, tgt1), _cmp("ge", _at(SS1, top), 1)))
        slot = L.where(keep, top, _i(-1))
        d2 = L.where(rev, _sub(d1, 1), d1)
        ops = c + S + ct + acc + pr + [slot, t]

        def parts(p: list) -> tuple:
            return (p[:nu], p[nu:2 * nu], p[2 * nu:2 * nu + nf], p[2 * nu + nf:2 * nu + nf + nr],
                    p[2 * nu + nf + nr:-2], p[-2], p[-1])

        def advance(p: list) -> list:
            c_, S_, ct_, acc_, r_, sl, _ = parts(p)
            new = inline(self.body, c_ + dummies + r_)[:nu]
            return new + [_store(x, v, sl) for x, v in zip(S_, new)] + ct_ + acc_

        def restore_(p: list) -> list:
            c_, S_, ct_, acc_, r_, _, tt = parts(p)
            return [_at(x, tt) for x in S_] + S_ + ct_ + acc_

        def reverse(p: list) -> list:
            c_, S_, ct_, acc_, r_, _, _ = parts(p)
            gg = inline(step_vjp, c_ + dummies + r_ + ct_)
            return c_ + S_ + gg[:nf] + [L.add(x, y) for x, y in zip(acc_, gg[nf:])]

        sel = _select(kind, ops, [advance, restore_, reverse], f"revolve_action({self.name})")
        return sel + [A1, B1, SS1, d2, cur1, tgt2]

    out = counted_while(carry, rest, cond, body, f"revolve_vjp({self.name})", checkpoints=s, online=False)
    res: list[Node | None] = [None] * len(ins)  # the cotangents of the carry's float leaves, then of the rest
    for pos, j in [(2 * nu + i, j) for i, j in enumerate(fk)] + [(2 * nu + nf + i, k) for i, k in enumerate(fr)]:
        res[j] = out[pos]
    return tuple(res)


def while_schedule_counts(n: int, s: int) -> dict:
    """What `while_loop(..., checkpoints=s)` runs for a trip count n (the counts the tests check).

    Returns:
        {"trip_count": n, "snapshots": s, "positions": the snapshots the primal loop left (online),
        "recomputed_steps": the body advanced by the reverse loop, the sum over the stack's entries
        (A[j], A[j + 1] or n, s - j snapshots) of t(length, s - j); "taped_steps": n;
        "body_evaluations": n + recomputed + n (the primal loop included);
        "offline_recomputed_steps": t(n, s), Revolve from the initial carry once n is known;
        "known_length_recomputed_steps": t(n, s) - (n - 1), a `scan` of known length under
        ("revolve", s), whose forward loop stores the first sweep's snapshots}; t = `revolve_extra_steps`.

    Raises:
        SymgraphError: s < 1 or n < 0.
    """
    from .errors import SymgraphError

    if s < 1:
        raise SymgraphError(f"checkpoints must be >= 1, got {s}")
    if n < 0:
        raise SymgraphError(f"a trip count is >= 0, got {n}")
    pos = online_positions(n, s) if n > 0 else []
    ends = pos[1:] + [n]
    rec = sum(revolve_extra_steps(b - a, s - j) for j, (a, b) in enumerate(zip(pos, ends)))
    t = revolve_extra_steps(n, s)
    return {"trip_count": n, "snapshots": s, "positions": pos, "recomputed_steps": rec, "taped_steps": n,
            "body_evaluations": 2 * n + rec, "offline_recomputed_steps": t,
            "known_length_recomputed_steps": max(0, t - max(0, n - 1))}


WhileRegion.checkpointed_vjp = checkpointed_vjp  # installed here (a layer above the regions)
