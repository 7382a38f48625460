"""The loop-body builder: graph nodes at symbolic indices to loop-body Exprs (one builder per partition round).

`BodyBuilder.value(n, idx)` is node n's value at index idx (a tuple of `Aff`): a load when n is
materialized, else its computation, with layout ops (broadcast_to, transpose, reshape, slice,
expand_dims, squeeze, unslice, gather) turned into index arithmetic. Long fused chains are
built with an explicit stack, never by recursion. The builder also records which node each
Expr computes (`expr_node`) and the summed cost below it (`cost`), which the partitioner asks
when it decides what to materialize.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from symgraph.errors import UnsupportedOpError
from symgraph.ir import Node
from symgraph.ops import OPS
from symgraph.passes.cost import weight as _cost_of_op

from .affine import Aff, c_strides, fold_divmod, reshape_index
from .expr import _DTYPE_CODES, Expr, _session

__all__ = ["BodyBuilder", "LAYOUTS", "uniform_const", "uniform_scalar"]

_OP_COST: dict[str, int] = {}  # op name -> its cost weight (`symgraph.passes.cost.weight`, fixed per op)
_UNSEEN = object()  # `BodyBuilder.const_keys`: not looked at yet
_COST_CLAMP = 1 << 30  # `BodyBuilder.cost` saturates here (far above symgraph.passes.cost.EXPENSIVE)


def uniform_const(node: Node) -> Any:
    """The single value of a constant node whose elements are all equal (bitwise), else None."""
    a = node.attr("value").array
    if a.size == 0:
        return None
    flat = a.reshape(-1)
    if a.size == 1:
        return flat[0]
    raw = flat.view(np.uint8).reshape(a.size, a.dtype.itemsize)
    if np.all(raw == raw[0]):
        return flat[0]
    return None


def uniform_scalar(node: Node) -> Any:
    """The value of a constant node (possibly broadcast) whose elements are all equal, else None."""
    while node.op.view in ("broadcast", "reshape"):
        node = node.inputs[0]
    if node.op.name != "constant":
        return None
    return uniform_const(node)


class BodyBuilder:
    """Builds loop-body Exprs for graph nodes at symbolic indices (one per partition round)."""

    def __init__(self, materialized: set, consts: dict, const_keys: dict | None = None):
        self.M = materialized
        self.consts = consts
        # constant node -> the attrs and dtype of its "const" Expr, or None when its elements differ:
        # kept across the partitioner's rounds (one `uniform_const` and byte string per node)
        self.const_keys = {} if const_keys is None else const_keys
        self.memo: dict[tuple, Expr] = {}
        self.expr_node: dict[Expr, Node] = {}
        self.cost: dict[Expr, int] = {}
        self._plain: dict[str, bool] = {}  # op name -> plain elementwise (`_run` needs no generator)

    # The builders below are generators: `v = yield (node, idx)` asks for the value of another
    # node; `_run` drives them with an explicit stack, so long fused chains never recurse.

    def value(self, n: Node, idx: tuple[Aff, ...]) -> Expr:
        """The value of node n at index idx (a load if n is materialized)."""
        e = self.memo.get((n, idx))
        if e is not None:
            return e
        return self._run(self._value_gen(n, idx), (n, idx))

    def compute(self, n: Node, idx: tuple[Aff, ...]) -> Expr:
        """The expression of n itself at idx (ignoring whether n is materialized)."""
        return self._run(self._compute_gen(n, idx), None)

    def _run(self, gen: Any, key: Any) -> Expr:
        # Frames are [key, generator, node, idx, args]; a plain elementwise node (most of a
        # large graph) gets a frame without a generator (node, idx, the inputs' Exprs so far).
        memo = self.memo
        plain = self._plain
        stack = [[key, gen, None, None, None]]
        send: Any = None
        while stack:
            fr = stack[-1]
            g = fr[1]
            if g is None:
                n, idx, args = fr[2], fr[3], fr[4]
                if send is not None:
                    args.append(send)
                ins = n.inputs
                req = None
                while len(args) < len(ins):
                    r = (ins[len(args)], idx)
                    e = memo.get(r)
                    if e is None:
                        e = self._leaf(*r)
                        if e is not None:
                            memo[r] = e
                    if e is None:
                        req = r
                        break
                    args.append(e)
                if req is None:
                    stack.pop()
                    send = memo[fr[0]] = self._elementwise(n, tuple(args))
                    continue
            else:
                try:
                    req = g.send(send)
                except StopIteration as stop:
                    stack.pop()
                    send = stop.value
                    if fr[0] is not None:
                        memo[fr[0]] = send
                    continue
                e = memo.get(req)
                if e is None:
                    e = self._leaf(*req)  # `_value_gen` without a generator for loads and constants
                    if e is not None:
                        memo[req] = e
                if e is not None:
                    send = e
                    continue
            op = req[0].op
            p = plain.get(op.name)
            if p is None:
                p = plain[op.name] = op.kind == "elementwise" and not op.random and op.identity_of is None
            if p:
                stack.append([req, None, req[0], req[1], []])
            else:
                stack.append([req, self._compute_gen(*req), None, None, None])
            send = None
        return send

    def _elementwise(self, n: Node, args: tuple) -> Expr:
        """The Expr of elementwise node n (not a random op) on its inputs' Exprs."""
        op = n.op
        if op.identity_of is not None:
            return args[op.identity_of]
        name = op.name
        dt = n.dtype
        code = _DTYPE_CODES.get(dt)
        if code is None:
            e = Expr.make(name, args, n.attrs, dt)
        else:  # `Expr.make` without the call
            key = (name, args, n.attrs, code)
            table = _session.table
            e = table.get(key)
            if e is None:
                e = table[key] = Expr(name, args, n.attrs, dt, None)
        cost = self.cost
        if e not in cost:  # else `_note` keeps what it has
            get = cost.get
            c = _OP_COST.get(name)
            if c is None:
                c = _cost_of_op(name)
                if name in OPS:  # a registered op's record is fixed
                    _OP_COST[name] = c
            for a in args:
                c += get(a, 0)
            # `_note`, for an Expr without a cost yet
            self.expr_node.setdefault(e, n)
            cost[e] = c if c < _COST_CLAMP else _COST_CLAMP
        return e

    def _leaf(self, n: Node, idx: tuple[Aff, ...]) -> Expr | None:
        if n.op.name == "constant":
            if n not in self.M:
                k = self.const_keys.get(n, _UNSEEN)
                if k is _UNSEEN:
                    u = uniform_const(n)
                    if u is not None:  # what `Expr.const(u, n.dtype)` makes
                        a = np.asarray(u, dtype=n.dtype).reshape(())
                        k = ((a.dtype.str, a.tobytes()), a.dtype)
                    else:
                        k = None
                    self.const_keys[n] = k
                if k is not None:
                    return Expr.make("const", (), k[0], k[1])
            self.consts[n] = n.attr("value").array
            return self.load(n, idx)
        if n in self.M or n.op.kind == "source":
            return self.load(n, idx)
        return None

    def _value_gen(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        e = self._leaf(n, idx)
        if e is not None:
            return e
        return (yield from self._compute_gen(n, idx))

    def load(self, n: Node, idx: tuple[Aff, ...]) -> Expr:
        off = Aff()
        for a, s in zip(idx, c_strides(n.shape)):
            off = off + a.scale(s)
        return Expr.make("load", (fold_divmod(off),), (n,), n.dtype)

    def _compute_gen(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        name = n.op.name
        kind = n.op.kind
        ident = n.op.identity_of
        if ident is not None:
            return (yield (n.inputs[ident], idx))
        if kind == "elementwise":
            if n.op.random:
                key = yield (n.inputs[0], ())
                flat = Aff()
                for a, s in zip(idx, c_strides(n.shape)):
                    flat = flat + a.scale(s)
                e = Expr.make(name, (key, Expr.index(flat)), n.attrs, n.dtype)
                self._note(e, n, 3)
                return e
            args = []
            for x in n.inputs:
                args.append((yield (x, idx)))
            return self._elementwise(n, tuple(args))
        if kind == "layout":
            fn = LAYOUTS.get(name)
            if fn is None:
                raise UnsupportedOpError(f"codegen: layout op {name!r} must be materialized")
            return (yield from fn(self, n, idx))
        raise UnsupportedOpError(f"codegen: op {name!r} ({kind}) cannot be fused into a loop; "
                                 f"use backend='numpy' for graphs with it")

    def _note(self, e: Expr, n: Node, cost: int) -> None:
        self.expr_node.setdefault(e, n)
        # The cost sums over every path below e, so it doubles with each step of a chain that reads
        # its value twice (sin(x) * c + x): unclamped, a 400,000-node chain's costs were ints of up to
        # hundreds of thousands of bits (gigabytes, and big-int additions). Only `cost >= EXPENSIVE`
        # is ever asked, and a sum of clamped costs clamped is the clamped sum: same answers.
        self.cost.setdefault(e, cost if cost < _COST_CLAMP else _COST_CLAMP)

    # Layout ops as index maps (`LAYOUTS`): the value of n at idx is its input's at the mapped index.

    def _broadcast_to(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        x = n.inputs[0]
        lead = n.ndim - x.ndim
        ix = tuple(idx[j + lead] if x.shape[j] == n.shape[j + lead] else Aff() for j in range(x.ndim))
        return (yield (x, ix))

    def _transpose(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        x = n.inputs[0]
        ixl = [Aff()] * x.ndim
        for i, pi in enumerate(n.params["perm"]):
            ixl[pi] = idx[i]
        return (yield (x, tuple(ixl)))

    def _expand_dims(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        axes = set(n.params["axes"])
        return (yield (n.inputs[0], tuple(a for i, a in enumerate(idx) if i not in axes)))

    def _squeeze(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        x = n.inputs[0]
        axes = set(n.params["axes"])
        it = iter(idx)
        return (yield (x, tuple(Aff() if i in axes else next(it) for i in range(x.ndim))))

    def _slice(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        p = n.params
        return (yield (n.inputs[0], tuple(a.scale(st) + s for a, s, st in zip(idx, p["starts"], p["steps"]))))

    def _reshape(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        x = n.inputs[0]
        return (yield (x, reshape_index(idx, n.shape, x.shape)))

    def _unslice(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        x = n.inputs[0]
        p = n.params
        conds = []
        ix = []
        for j, (a, s, e, st) in enumerate(zip(idx, p["starts"], p["stops"], p["steps"])):
            full = st == 1 and s == 0 and e == n.shape[j]
            if full:
                ix.append(a)
                continue
            i = Expr.index(a)
            conds.append(Expr.make("_unslice_cond", (i,), (s, e, st), np.bool_))
            if st == 1:
                lo, hi = a.range()
                if lo - s >= 0 and hi - s <= x.shape[j] - 1:
                    ix.append(a + (-s))
                    continue
            ix.append(Aff.of(Expr.make("_unslice_src", (i,), (s, st, x.shape[j]), np.int64,
                                       rng=(0, max(x.shape[j] - 1, 0)))))
        v = yield (x, tuple(ix))
        if not conds:
            return v
        c = conds[0]
        for c2 in conds[1:]:
            c = Expr.make("logical_and", (c, c2), (), np.bool_)
        zero = Expr.const(0, n.dtype)
        e = Expr.make("where", (c, v, zero), (), n.dtype)
        self._note(e, n, 2 + self.cost.get(v, 0))
        return e

    def _gather(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        x, ind = n.inputs
        axis = n.attr("axis")
        k = ind.ndim
        iv = yield (ind, idx[axis:axis + k])
        size = x.shape[axis]
        j = Expr.make("_gather_index", (iv,), (size,), np.int64, rng=(0, max(size - 1, 0)))
        return (yield (x, idx[:axis] + (Aff.of(j),) + idx[axis + k:]))



#: The layout ops fused into their readers as index arithmetic, by op name (a generator per op:
#: `v = yield (input, index)` asks for an input's value). The partitioner refuses any other layout
#: op that does not write its own buffer (`node_tasks.NODE_TASKS`: concatenate, scatter_add).
LAYOUTS: dict[str, Callable[[BodyBuilder, Node, tuple], Any]] = {
    "broadcast_to": BodyBuilder._broadcast_to,
    "transpose": BodyBuilder._transpose,
    "expand_dims": BodyBuilder._expand_dims,
    "squeeze": BodyBuilder._squeeze,
    "slice": BodyBuilder._slice,
    "reshape": BodyBuilder._reshape,
    "unslice": BodyBuilder._unslice,
    "gather": BodyBuilder._gather,
}
