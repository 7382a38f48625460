"""Reverse mode through a `while_loop` of run-time trip count with s carry snapshots (binomial checkpointing).

`sg.while_loop(cond_fun, body_fun, init_val, checkpoints=s)` builds a `while`
region whose last carry is an int64 step counter (the user does not see it).
Its VJP (`WhileRegion.checkpointed_vjp`, installed here) is a second `while`
loop whose next action is computed in the graph from a small integer state,
Griewank & Walther's binomial (Revolve) schedule run as a stack machine:

- the stack holds at most s + 1 intervals (a, b, ss): "reverse steps a..b-1
  from the state after step a, with ss snapshots", the bottom one (0, n, s)
  with n the primal loop's counter; the snapshot numbers strictly decrease
  upwards, so an interval with ss >= 1 sits at depth <= s - 1 and its start
  state lives in row `depth` of the snapshot arrays (one (s, *leaf.shape)
  array per carry leaf; row 0 is the initial carry);
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

The schedule is the *offline* one run after the primal loop: the primal loop
only counts its steps, so the reverse loop advances t(n, s) steps from the
initial carry (t = `revolve_extra_steps`, the first sweep's n - 1 steps
included), n taped steps, and n + t(n, s) + n steps in all with the primal
loop: n - 1 more than a scan of known length under ("revolve", s), whose
forward loop stores the first sweep's snapshots. Memory: s carries (the
snapshot arrays), the current carry, one step's values and O(s) integers,
whatever n is. Stumm & Walther's online placement (snapshots taken during the
primal loop) would save those n - 1 steps; it is not built.

The reverse loop is again a checkpointed `while` region (with its own step
counter), built from `while`, `cond` and elementwise integer ops, so it
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
from .ir import Graph, Node, meta, role
from .loop_checkpoint import _store, _zeros, inline
from .passes.checkpoint.revolve import revolve_extra_steps
from .regions import WhileRegion, while_node

__all__ = ["counted_while", "while_schedule_counts", "revolve_split"]

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
                  checkpoints: int | None = None) -> list[Node]:
    """A `while` loop on nodes: `while cond_fn(c, rest): c = body_fn(c, rest)`; returns the final carries.

    `cond_fn` and `body_fn` get lists of placeholders (carries, loop invariants) and must build on
    nothing else (no capture). With `checkpoints=s` the region gets an int64 step counter as its
    last carry (`WhileRegion.checkpoints`), and reverse mode through it keeps s snapshots; the
    counter's final value is the last returned node.
    """
    phs_c = [placeholder(x.shape, x.dtype, "carry") for x in carry]
    phs_r = [placeholder(x.shape, x.dtype, "invariant") for x in rest]
    pred = cond_fn(phs_c, phs_r)
    new = list(body_fn(phs_c, phs_r))
    carry = list(carry)
    if checkpoints is not None:
        k = placeholder((), np.int64, "steps")
        phs_c.append(k)
        new.append(_add(k, 1))
        carry.append(_i(0))
    ins = phs_c + phs_r
    region = WhileRegion(Graph(ins, [pred], name=f"cond({name})"), Graph(ins, new, name=name), len(phs_c),
                         name=name, checkpoints=checkpoints)
    return [while_node(carry + list(rest), region, j) for j in range(len(carry))]


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
    nu = nk - 1  # the user's carries; carry nu is the step counter
    ins = list(node.inputs)
    init, rest = ins[:nu], ins[nk:]
    bi = self.body.inputs
    m = meta(node)
    with role(m.role, m.origin):  # the trip count is an output of the primal loop
        n = while_node(ins, self, nu)
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
    S0 = [_store(_zeros((s,) + c.shape, c.dtype), c, _i(0)) for c in init]
    top0 = L.constant(np.zeros(s + 1, np.int64))
    B0 = _set(top0, _i(0), n, L.constant(np.bool_(True)))
    SS0 = L.constant(np.array([s] + [0] * s, np.int64))
    d0 = L.cast(_cmp("gt", n, 0), np.int64)
    carry = list(init) + S0 + ct0 + acc0 + [top0, B0, SS0, d0, _i(0), _i(0)]

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
            new = inline(self.body, c_ + [_i(0)] + r_)[:nu]
            return new + [_store(x, v, sl) for x, v in zip(S_, new)] + ct_ + acc_

        def restore_(p: list) -> list:
            c_, S_, ct_, acc_, r_, _, tt = parts(p)
            return [_at(x, tt) for x in S_] + S_ + ct_ + acc_

        def reverse(p: list) -> list:
            c_, S_, ct_, acc_, r_, _, _ = parts(p)
            gg = inline(step_vjp, c_ + [_i(0)] + r_ + ct_)
            return c_ + S_ + gg[:nf] + [L.add(x, y) for x, y in zip(acc_, gg[nf:])]

        sel = _select(kind, ops, [advance, restore_, reverse], f"revolve_action({self.name})")
        return sel + [A1, B1, SS1, d2, cur1, tgt2]

    out = counted_while(carry, rest, cond, body, f"revolve_vjp({self.name})", checkpoints=s)
    res: list[Node | None] = [None] * len(ins)
    for i, j in enumerate(fk):
        res[j] = out[2 * nu + i]
    for i, k in enumerate(fr):
        res[k] = out[2 * nu + nf + i]
    return tuple(res)


def while_schedule_counts(n: int, s: int) -> dict:
    """What the reverse loop of `while_loop(..., checkpoints=s)` runs for a trip count n.

    Returns:
        {"trip_count": n, "snapshots": s, "recomputed_steps": t(n, s) (the body advanced by the reverse
        loop, from the initial carry), "taped_steps": n, "body_evaluations": n + t(n, s) + n (the
        primal loop included), "extra_over_scan": n - 1 (what a scan of known length with the same
        schedule saves: its forward loop stores the first sweep's snapshots)}.

    Raises:
        SymgraphError: s < 1 or n < 0.
    """
    from .errors import SymgraphError

    if s < 1:
        raise SymgraphError(f"checkpoints must be >= 1, got {s}")
    if n < 0:
        raise SymgraphError(f"a trip count is >= 0, got {n}")
    t = revolve_extra_steps(n, s)
    return {"trip_count": n, "snapshots": s, "recomputed_steps": t, "taped_steps": n,
            "body_evaluations": 2 * n + t, "extra_over_scan": max(0, n - 1)}


WhileRegion.checkpointed_vjp = checkpointed_vjp  # installed here (a layer above the regions)
