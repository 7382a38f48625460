"""Loop regions: a traced loop body with explicit inputs, and the rules of the `scan` op on it.

A `Region` is the attribute of `scan` nodes (symgraph.ops.loops): a body
Graph whose inputs are (consts, carry, x) and whose outputs are (carry, y),
traced once; closed-over values of the enclosing trace are explicit const
inputs (`capture`). Its methods are the op's rules:
- `run`: the NumPy evaluator's loop (the body evaluated once per step);
- `vjp_group`: reverse mode, a reverse scan over the per-step carries saved
  by the forward loop, whose body is the body's own VJP graph (so it is
  differentiated again like any graph: grad of grad works);
- `jvp`: forward mode, a scan over primal and tangent carries;
- `batch`: vmap, a scan over a batched body (every carry batched).
Derived regions are memoized per pattern, so the output leaves of one loop
(sibling `scan` nodes) share one derived loop.

References:
    JAX's `lax.scan` and its transposition rule (Frostig, Johnson, Leary,
    "Decomposing reverse-mode automatic differentiation", 2021); Griewank &
    Walther, Evaluating Derivatives (2nd ed., SIAM 2008), ch. 12 (reversal of
    loops: store the carries, sweep back).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from . import lax as L
from .autodiff import is_float, jvp_nodes, placeholder, vjp_nodes
from .batching import batch_nodes
from .errors import LinAlgError, ShapeError
from .ir import Graph, Node, current_builder, meta, role, toposort
from .ops import OPS
from .ops.batch import bcast, move0, move_to0
from .passes.cost import node_flops
from .passes.simplify import simplify

__all__ = ["Region", "WhileRegion", "capture", "scan_node", "while_node"]


def capture(outputs: Sequence[Node], inner: Sequence[Node]) -> tuple[list[Node], list[Node], list[Node]]:
    """Make a traced body self-contained: closed-over traced values become explicit inputs.

    Args:
        outputs: the body's output nodes.
        inner: the body's own placeholders (carry and x).

    Returns:
        (captured, placeholders, outputs): the values of the enclosing trace the
        body reads (inputs, or nodes computed from them; constants stay inside),
        one fresh placeholder per captured value, and the outputs rebuilt on
        the placeholders.
    """
    order = toposort(outputs)
    mine = set(inner)
    dep: set[Node] = set(mine)
    outer: set[Node] = set()
    for n in order:
        if n in mine:
            continue
        if n.op.name == "input":
            outer.add(n)
        elif any(x in dep for x in n.inputs):
            dep.add(n)
        elif any(x in outer for x in n.inputs):
            outer.add(n)
    cap: dict[Node, None] = {}
    for n in order:
        if n in dep and n not in mine:
            for x in n.inputs:
                if x in outer:
                    cap.setdefault(x)
    for o in outputs:
        if o in outer:
            cap.setdefault(o)
    captured = list(cap)
    phs = [placeholder(x.shape, x.dtype, name="closure") for x in captured]
    sub: dict[Node, Node] = dict(zip(captured, phs))
    b = current_builder()
    for n in order:
        if n in dep and n not in mine:
            ins = tuple(sub.get(x, x) for x in n.inputs)
            if any(a is not x for a, x in zip(ins, n.inputs)):
                sub[n] = b.remake(n, ins, meta(n))
    return captured, phs, [sub.get(o, o) for o in outputs]


def _residuals(body: Graph, outs: list[Node], nc: int, nk: int) -> tuple[list[tuple[Node, Node]], list[Node]]:
    """The per-step forward values a backward body reads, each replaced by a placeholder.

    Args:
        body: the loop body (inputs consts, carry, x).
        outs: the backward body's outputs (built on the body's nodes).
        nc, nk: the body's numbers of consts and carries.

    Returns:
        ([(forward node, placeholder)], outs rebuilt on the placeholders). A forward value is
        a residual when it changes per step (depends on the carry or x), is not an x itself
        (the reverse loop reads xs) and is not a cheap op (`Op.cheap`: views, casts), whose
        inputs are looked at instead; loop invariants are recomputed.
    """
    ins = body.inputs
    cin = set(ins[nc:nc + nk])
    xin = set(ins[nc + nk:])
    fwd = body.toposort()
    fset = set(fwd)
    varies = set(cin) | xin
    for n in fwd:
        if n not in varies and any(x in varies for x in n.inputs):
            varies.add(n)
    order = toposort(outs)
    frontier = [x for n in order if n not in fset for x in n.inputs if x in fset]
    frontier += [o for o in outs if o in fset]
    res: dict[Node, None] = {}
    seen: set[Node] = set()
    while frontier:
        x = frontier.pop()
        if x in seen:
            continue
        seen.add(x)
        if x in xin or x not in varies or (x.op.kind == "source" and x not in cin):
            continue
        if x not in cin and x.op.cheap:
            frontier.extend(x.inputs)
            continue
        res.setdefault(x)
    saved = [(r, placeholder(r.shape, r.dtype, "residual")) for r in res]
    sub = {r: p for r, p in saved}
    b = current_builder()
    for n in order:
        if n in sub:
            continue
        new = tuple(sub.get(x, x) for x in n.inputs)
        if any(a is not x for a, x in zip(new, n.inputs)):
            sub[n] = b.remake(n, new, meta(n))
    return saved, [sub.get(o, o) for o in outs]


def scan_node(inputs: Sequence[Node], region: "Region", index: int) -> Node:
    """Output leaf `index` of the loop `region` on `inputs` (consts, init, xs)."""
    return current_builder().make(OPS["scan"], tuple(inputs), {"region": region, "index": index})


class Region:
    """A loop body: `body(consts, carry, x) -> (carry, y)` run `length` times (a `scan` node's attribute).

    Attributes:
        body: Graph with inputs consts (nc) + carry (nk) + x (nx), outputs carry (nk) + y (ny).
        nc, nk, nx, ny: the counts.
        length: trip count T (>= 0).
        reverse: steps run from the last x to the first (ys stay in x order).
        name: label for dumps.
    """

    def __init__(self, body: Graph, nc: int, nk: int, nx: int, length: int, reverse: bool = False,
                 name: str = "scan", simplify_body: bool = True):
        if simplify_body:
            body = simplify(body, builder=current_builder())
        self.body = body
        self.nc, self.nk, self.nx = nc, nk, nx
        self.ny = len(body.outputs) - nk
        self.length = int(length)
        self.reverse = bool(reverse)
        self.name = name
        ins = body.inputs
        for j in range(nk):  # derived regions keep this; user bodies are checked with names by the caller
            o, c = body.outputs[j], ins[nc + j]
            if o.shape != c.shape or o.dtype != c.dtype:  # pragma: no cover - a rule bug
                raise ShapeError(f"{name}: carry {j} goes in as {c.dtype}{list(c.shape)}, out as "
                                 f"{o.dtype}{list(o.shape)}")
        order = [n for n in body.toposort() if n not in set(ins)]
        pos = {x: i for i, x in enumerate(ins)}
        slot = dict(pos)
        for n in order:
            slot[n] = len(slot)
        self._nslots = len(slot)
        self._steps = [(slot[n], n.op.impl, tuple(slot[x] for x in n.inputs), n.params, n.dtype, n) for n in order]
        self._outs = [slot[o] for o in body.outputs]
        #: the loop this one extends with residual ys (`_backward`'s saver), else None: both compute the
        #: same carries and ys, so backends run one loop for the outputs of both (`root`)
        self.parent: Region | None = None
        #: on a reverse loop built by `_backward`: (the primal loop, its saving loop), which
        #: `checkpointed_reverse` (symgraph.loop_checkpoint) rebuilds under a checkpoint schedule
        self.reversal: tuple | None = None
        self.reversal_parts: dict | None = None
        self._derived: dict[Any, Any] = {}
        self._last = threading.local()
        self._lock = threading.Lock()

    @property
    def root(self) -> "Region":
        """The loop whose outputs this one's are a superset of (itself unless it is a saver)."""
        return self if self.parent is None else self.parent

    @property
    def num_outputs(self) -> int:
        """Output leaves: final carries, then ys."""
        return len(self.body.outputs)

    def subgraphs(self) -> list[Graph]:
        """The graphs a backend compiles for this region: the body."""
        return [self.body]

    def __repr__(self) -> str:
        return (f"<{self.name}: T={self.length}{', reverse' if self.reverse else ''}, "
                f"{len(self.body)} body nodes>")

    # ----- shapes and dtypes -----

    def in_specs(self) -> list[tuple[tuple, np.dtype]]:
        """(shape, dtype) of each input of a `scan` node: consts, init, then xs with the leading T axis."""
        ins = self.body.inputs
        out = [(x.shape, x.dtype) for x in ins[:self.nc + self.nk]]
        out += [((self.length,) + x.shape, x.dtype) for x in ins[self.nc + self.nk:]]
        return out

    def out_shape(self, index: int, shapes: Sequence[tuple]) -> tuple:
        want = self.in_specs()
        if len(shapes) != len(want):
            raise ShapeError(f"{self.name}: {len(shapes)} inputs, the region takes {len(want)}")
        for i, (s, (w, _)) in enumerate(zip(shapes, want)):
            if tuple(s) != w:
                raise ShapeError(f"{self.name}: input {i} has shape {tuple(s)}, the region expects {w}")
        o = self.body.outputs[index]
        return o.shape if index < self.nk else (self.length,) + o.shape

    def out_dtype(self, index: int, dtypes: Sequence[Any]) -> np.dtype:
        for i, (d, (_, w)) in enumerate(zip(dtypes, self.in_specs())):
            if np.dtype(d) != w:
                raise ShapeError(f"{self.name}: input {i} has dtype {np.dtype(d)}, the region expects {w}")
        return self.body.outputs[index].dtype

    def flops(self) -> int:
        """Estimated operations of the whole loop (T times the body)."""
        return max(1, self.length * sum(node_flops(n) for n in self.body.toposort()))

    # ----- the evaluator -----

    def _step(self, vals: list) -> list:
        env = vals + [None] * (self._nslots - len(vals))
        for s, impl, ins, params, dt, n in self._steps:
            try:
                v = impl(*[env[i] for i in ins], **params)
            except LinAlgError as e:  # a failure on values: at the body's node (its line), as the evaluator does
                m = meta(n)
                raise e.at(m.location, m.role) from None
            env[s] = v if isinstance(v, np.ndarray) and v.dtype == dt else np.asarray(v, dtype=dt)
        return [env[i] for i in self._outs]

    def run(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """All outputs of the loop on concrete inputs (consts, init, xs): final carries, then stacked ys.

        The last run is kept (per thread) and reused when the sibling outputs of
        the same loop ask with equal inputs, so the evaluator runs a loop once.
        """
        d = self._derived.get("bwd")
        if d is not None:  # reverse mode built a saving loop: one run gives this loop's outputs too
            return d[1].run(xs)[:self.nk + self.ny]
        last = getattr(self._last, "v", None)
        if last is not None and len(last[0]) == len(xs) and all(
                a is b or (a.shape == b.shape and np.array_equal(a, b, equal_nan=True))
                for a, b in zip(last[0], xs)):
            return last[1]
        xs = [np.asarray(x) for x in xs]
        nc, nk = self.nc, self.nk
        consts, carry, seqs = list(xs[:nc]), list(xs[nc:nc + nk]), xs[nc + nk:]
        T = self.length
        ys = [np.empty((T,) + o.shape, o.dtype) for o in self.body.outputs[nk:]]
        with np.errstate(all="ignore"):
            for t in (range(T - 1, -1, -1) if self.reverse else range(T)):
                outs = self._step(consts + carry + [s[t] for s in seqs])
                carry = outs[:nk]
                for y, v in zip(ys, outs[nk:]):
                    y[t] = v
        res = [np.array(c, dtype=o.dtype) for c, o in zip(carry, self.body.outputs)] + ys
        self._last.v = (xs, res)
        return res

    # ----- derived regions -----

    def _memo(self, key: Any, build: Any) -> Any:
        with self._lock:
            r = self._derived.get(key)
        if r is None:
            r = build()
            with self._lock:
                r = self._derived.setdefault(key, r)
        return r

    def _parts(self) -> tuple[list[Node], list[Node], list[Node]]:
        ins = self.body.inputs
        nc, nk = self.nc, self.nk
        return ins[:nc], ins[nc:nc + nk], ins[nc + nk:]

    def _backward(self) -> tuple:
        """The reverse loop and the forward loop that saves its residuals (built once).

        The backward body is the VJP graph of the body. The forward values it reads that change
        per step (the carry entering a step, intermediates such as a tanh's output) are residuals:
        the saving loop (`saver`, this loop with them as extra ys) stacks them and the reverse loop
        reads them as xs, so the forward work is not redone backward. Values that only depend on
        the consts are recomputed (they are loop invariants), and cheap ops (views, casts) of
        residuals are recomputed from them.

        Returns:
            (bwd, saver, n_saved, fk, fc, fx): the reverse loop's region, the saving region,
            its number of residual ys, and the float carries, consts and xs (indices).
        """
        def build() -> tuple:
            b = self.body
            cst, cin, xin = self._parts()
            nk = self.nk
            fk = [j for j, c in enumerate(cin) if is_float(c)]
            fc = [k for k, c in enumerate(cst) if is_float(c)]
            fx = [j for j, x in enumerate(xin) if is_float(x)]
            fy = [j for j in range(self.ny) if is_float(b.outputs[nk + j])]
            ct_c = [placeholder(cin[j].shape, cin[j].dtype, "ct_carry") for j in fk]
            acc = [placeholder(cst[k].shape, cst[k].dtype, "ct_const") for k in fc]
            ct_y = [placeholder(b.outputs[nk + j].shape, b.outputs[nk + j].dtype, "ct_y") for j in fy]
            seeds: list[Node | None] = [None] * len(b.outputs)
            for j, p in zip(fk, ct_c):
                seeds[j] = p
            for j, p in zip(fy, ct_y):
                seeds[nk + j] = p
            wrt = [cin[j] for j in fk] + [cst[k] for k in fc] + [xin[j] for j in fx]
            g = vjp_nodes(b.outputs, seeds, wrt)
            g = [L.zeros_like(w) if c is None else c for w, c in zip(wrt, g)]
            nf, ncf = len(fk), len(fc)
            outs = g[:nf] + [L.add(a, c) for a, c in zip(acc, g[nf:nf + ncf])] + g[nf + ncf:]
            # the backward step with its forward values recomputed from the carry (checkpointed loops)
            full = Graph(list(cst) + ct_c + acc + ct_y + list(cin) + list(xin), outs, name=f"vjp({b.name})")
            saved, outs = _residuals(b, outs, self.nc, self.nk)
            saver = Region(Graph(b.inputs, b.outputs + [r for r, _ in saved], name=b.name), self.nc, self.nk,
                           self.nx, self.length, self.reverse, name=self.name, simplify_body=False)
            saver.parent = self
            graph = Graph(list(cst) + ct_c + acc + ct_y + [p for _, p in saved] + list(xin), outs,
                          name=f"vjp({b.name})")
            r = Region(graph, self.nc, nf + ncf, len(ct_y) + len(saved) + self.nx, self.length, not self.reverse,
                       name=f"vjp({self.name})")
            r.reversal = (self, saver)
            self.reversal_parts = {"fk": fk, "fc": fc, "fx": fx, "fy": fy, "full": full, "n_saved": len(saved)}
            return r, saver, len(saved), fk, fc, fx, fy
        return self._memo("bwd", build)

    def vjp_group(self, cts: dict[int, Node], node: Node) -> tuple[Node | None, ...]:
        """Cotangents of a loop's inputs from the cotangents of (some of) its output leaves.

        Args:
            cts: output index -> cotangent node (the other outputs' cotangents are zero).
            node: one of the loop's `scan` nodes (its inputs are the loop's).

        Returns:
            One cotangent (or None) per input of `node`.
        """
        nc, nk, T = self.nc, self.nk, self.length
        ins = list(node.inputs)
        consts, init, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
        bwd, saver, n_saved, fk, fc, fx, fy = self._backward()
        m = meta(node)
        with role(m.role, m.origin):  # the saving loop runs in the primal's sweep, not the backward one
            saved = [scan_node(ins, saver, nk + self.ny + j) for j in range(n_saved)]
        b = self.body
        ct_final = [cts.get(j) if cts.get(j) is not None else L.zeros_like(init[j]) for j in fk]
        ct_ys = []
        for j in fy:
            c = cts.get(nk + j)
            o = b.outputs[nk + j]
            ct_ys.append(c if c is not None else L.broadcast_to(L.constant(np.zeros((), o.dtype)), (T,) + o.shape))
        zc = [L.zeros_like(consts[k]) for k in fc]
        bins = consts + [L.cast(c, init[j].dtype) for c, j in zip(ct_final, fk)] + zc + ct_ys + saved + xs
        out: list[Node | None] = [None] * len(ins)
        for i, j in enumerate(fk):
            out[nc + j] = scan_node(bins, bwd, i)
        for i, k in enumerate(fc):
            out[k] = scan_node(bins, bwd, len(fk) + i)
        for i, j in enumerate(fx):
            out[nc + nk + j] = scan_node(bins, bwd, bwd.nk + i)
        return tuple(out)

    def _tangent_region(self, mc: tuple, mx: tuple) -> tuple["Region", list[int], list[int]]:
        def build() -> tuple:
            b = self.body
            cst, cin, xin = self._parts()
            nk = self.nk
            fk = [j for j, c in enumerate(cin) if is_float(c)]
            fy = [j for j in range(self.ny) if is_float(b.outputs[nk + j])]
            tc = [placeholder(cst[k].shape, cst[k].dtype, "t_const") for k in range(self.nc) if mc[k]]
            tk = [placeholder(cin[j].shape, cin[j].dtype, "t_carry") for j in fk]
            tx = [placeholder(xin[j].shape, xin[j].dtype, "t_x") for j in range(self.nx) if mx[j]]
            wrt = [cst[k] for k in range(self.nc) if mc[k]] + [cin[j] for j in fk] + \
                  [xin[j] for j in range(self.nx) if mx[j]]
            touts = jvp_nodes(b.outputs, wrt, tc + tk + tx)
            tz = [L.zeros_like(o) if t is None else t for o, t in zip(b.outputs, touts)]
            outs = b.outputs[:nk] + [tz[j] for j in fk] + b.outputs[nk:] + [tz[nk + j] for j in fy]
            graph = Graph(list(cst) + tc + list(cin) + tk + list(xin) + tx, outs, name=f"jvp({b.name})")
            r = Region(graph, self.nc + len(tc), nk + len(fk), self.nx + len(tx), self.length, self.reverse,
                       name=f"jvp({self.name})")
            return r, fk, fy
        return self._memo(("jvp", mc, mx), build)

    def jvp(self, tangents: Sequence[Node | None], node: Node) -> Node | None:
        """The tangent of output leaf `node` (a loop over primal and tangent carries, shared by the siblings)."""
        nc, nk = self.nc, self.nk
        ins = list(node.inputs)
        ts = list(tangents)
        mc = tuple(ts[k] is not None and is_float(ins[k]) for k in range(nc))
        mx = tuple(ts[nc + nk + j] is not None and is_float(ins[nc + nk + j]) for j in range(self.nx))
        r, fk, fy = self._tangent_region(mc, mx)
        consts, init, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
        tin = consts + [ts[k] for k in range(nc) if mc[k]]
        tin += init + [ts[nc + j] if ts[nc + j] is not None else L.zeros_like(init[j]) for j in fk]
        tin += xs + [ts[nc + nk + j] for j in range(self.nx) if mx[j]]
        i = node.attr("index")
        if i < nk:
            return scan_node(tin, r, nk + fk.index(i)) if i in fk else None
        j = i - nk
        return scan_node(tin, r, r.nk + self.ny + fy.index(j)) if j in fy else None

    def _batched_region(self, mc: tuple, mx: tuple, size: int) -> "Region":
        def build() -> Region:
            b = self.body
            cst, cin, xin = self._parts()
            subst: dict[Node, Node] = {}
            new_in: list[Node] = []
            for x, m in zip(list(cst) + list(cin) + list(xin), mc + (True,) * self.nk + mx):
                if m:
                    p = placeholder((size,) + x.shape, x.dtype, "batched")
                    subst[x] = p
                    new_in.append(p)
                else:
                    new_in.append(x)
            outs = batch_nodes(b.outputs, subst, size)
            return Region(Graph(new_in, outs, name=f"vmap({b.name})"), self.nc, self.nk, self.nx, self.length,
                          self.reverse, name=f"vmap({self.name})")
        return self._memo(("batch", mc, mx, size), build)

    def batch(self, node: Node, bargs: list, size: int) -> Node:
        """vmap of output leaf `node`: the loop over a batched body (all carries batched)."""
        nc, nk = self.nc, self.nk
        ins = list(node.inputs)
        mc = tuple(bargs[k] is not None for k in range(nc))
        mx = tuple(bargs[nc + nk + j] is not None for j in range(self.nx))
        r = self._batched_region(mc, mx, size)
        new = [bargs[k] if mc[k] else ins[k] for k in range(nc)]
        new += [bcast(ins[nc + j], size) if bargs[nc + j] is None else bargs[nc + j] for j in range(nk)]
        new += [move0(bargs[nc + nk + j], 1) if mx[j] else ins[nc + nk + j] for j in range(self.nx)]
        i = node.attr("index")
        out = scan_node(new, r, i)
        return out if i < nk else move_to0(out, 1)


def while_node(inputs: Sequence[Node], region: "WhileRegion", index: int) -> Node:
    """Final carry leaf `index` of the while loop `region` on `inputs` (init, *captured)."""
    return current_builder().make(OPS["while"], tuple(inputs), {"region": region, "index": index})


class WhileRegion:
    """`while cond(carry): carry = body(carry)` with a trip count known only at run time (a `while` node's attribute).

    Attributes:
        cond: Graph (carry, captured) -> a bool scalar.
        body: Graph (carry, captured) -> carry (the same input nodes as `cond`).
        nk: the number of carry leaves (the rest of the inputs are captured values).
        name: label for dumps.
        checkpoints: None, or s >= 1: the last carry is an int64 step counter and reverse mode
            keeps s carry snapshots (`checkpointed_vjp`, symgraph.while_checkpoint).
    """

    parent = None
    #: with `checkpoints`: whether the loop places its snapshots online (symgraph.while_checkpoint)
    online = True

    def __init__(self, cond: Graph, body: Graph, nk: int, name: str = "while_loop", simplify_body: bool = True,
                 checkpoints: int | None = None):
        b = current_builder()
        self.checkpoints = checkpoints
        self.cond = simplify(cond, builder=b) if simplify_body else cond
        self.body = simplify(body, builder=b) if simplify_body else body
        self.nk = nk
        self.name = name
        self.num_outputs = nk
        from .branches import _plan

        self._cplan, self._bplan = _plan(self.cond), _plan(self.body)
        self._last = threading.local()
        self._derived: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @property
    def root(self) -> "WhileRegion":
        return self

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self.cond)} cond nodes, {len(self.body)} body nodes>"

    def subgraphs(self) -> list[Graph]:
        """The graphs a backend compiles for this region: the condition, then the body."""
        return [self.cond, self.body]

    def out_shape(self, index: int, shapes: Sequence[tuple]) -> tuple:
        want = [x.shape for x in self.body.inputs]
        if len(shapes) != len(want) or any(tuple(s) != w for s, w in zip(shapes, want)):
            raise ShapeError(f"{self.name}: inputs of shapes {list(shapes)}, the loop takes {want}")
        return self.body.outputs[index].shape

    def out_dtype(self, index: int, dtypes: Sequence[Any]) -> np.dtype:
        return self.body.outputs[index].dtype

    def flops(self) -> int:
        return max(1, sum(node_flops(n) for n in self.body.toposort()))

    def run(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The final carries; the last run is kept (per thread) for the sibling outputs, as `Region.run`."""
        from .branches import _run_plan

        last = getattr(self._last, "v", None)
        if last is not None and len(last[0]) == len(xs) and all(
                a is b or (np.shape(a) == np.shape(b) and np.array_equal(a, b, equal_nan=True))
                for a, b in zip(last[0], xs)):
            return last[1]
        carry = [np.asarray(x) for x in xs[:self.nk]]
        rest = [np.asarray(x) for x in xs[self.nk:]]
        while bool(_run_plan(self._cplan, carry + rest)[0]):
            carry = _run_plan(self._bplan, carry + rest)
        self._last.v = (list(xs), carry)
        return carry

    def _memo(self, key: Any, build: Any) -> Any:
        with self._lock:
            r = self._derived.get(key)
        if r is None:
            r = build()
            with self._lock:
                r = self._derived.setdefault(key, r)
        return r

    def vjp_group(self, cts: dict, node: Node) -> tuple:
        """Reverse mode: by binomial checkpointing when the loop counts its steps (`checkpoints`), else an error."""
        if self.checkpoints is not None:
            return self.checkpointed_vjp(cts, node)  # symgraph.while_checkpoint
        from .errors import UnsupportedOpError

        if self.name.startswith(("vmap(", "jvp(")):  # the batched / tangent loop of a checkpointed while_loop
            raise UnsupportedOpError(f"{self.name}: reverse mode through a vmap or jvp of a while_loop is not "
                                     f"supported, with or without checkpoints=s (the batched loop runs every "
                                     f"example to the longest trip count without snapshots); differentiate "
                                     f"inside instead: sg.vmap(sg.grad(f)) works, and so does max_steps=N",
                                     meta(node).location)
        raise UnsupportedOpError(f"{self.name}: reverse mode through a while_loop needs a number of snapshots or "
                                 f"a bound on its trip count: pass checkpoints=s (sg.while_loop(cond_fun, "
                                 f"body_fun, init_val, checkpoints=s): s carry snapshots, the trip count known "
                                 f"at run time) or max_steps=N (N steps stored); forward mode (jvp) works without "
                                 f"either", meta(node).location)

    def _tangents(self, mask: tuple) -> tuple:
        def build() -> tuple:
            ins = self.body.inputs
            nk = self.nk
            fk = [j for j in range(nk) if is_float(ins[j])]
            fr = [i for i in range(nk, len(ins)) if mask[i] and is_float(ins[i])]
            tk = [placeholder(ins[j].shape, ins[j].dtype, "t_carry") for j in fk]
            tr = [placeholder(ins[i].shape, ins[i].dtype, "t_captured") for i in fr]
            ts = jvp_nodes(self.body.outputs, [ins[j] for j in fk] + [ins[i] for i in fr], tk + tr)
            touts = [L.zeros_like(self.body.outputs[j]) if ts[j] is None else ts[j] for j in fk]
            carries = list(ins[:nk]) + tk
            rest = list(ins[nk:]) + tr
            body = Graph(carries + rest, list(self.body.outputs) + touts, name=f"jvp({self.body.name})")
            cond = Graph(carries + rest, list(self.cond.outputs), name=self.cond.name)
            return WhileRegion(cond, body, nk + len(fk), name=f"jvp({self.name})"), fk, fr
        return self._memo(("jvp", mask), build)

    def jvp(self, tangents: Sequence[Node | None], node: Node) -> Node | None:
        ins = list(node.inputs)
        nk = self.nk
        mask = tuple(t is not None for t in tangents)
        r, fk, fr = self._tangents(mask)
        j = node.attr("index")
        if j not in fk:
            return None
        tin = ins[:nk] + [tangents[i] if tangents[i] is not None else L.zeros_like(ins[i]) for i in fk]
        tin += ins[nk:] + [tangents[i] for i in fr]
        return while_node(tin, r, nk + fk.index(j))

    def _batched(self, mask: tuple, size: int) -> "WhileRegion":
        def build() -> WhileRegion:
            ins = self.body.inputs
            nk = self.nk
            mask2 = (True,) * nk + mask[nk:]
            phs = [placeholder((size,) + x.shape, x.dtype, "batched") if m else x for x, m in zip(ins, mask2)]
            subst = {x: p for x, p, m in zip(ins, phs, mask2) if m}
            active = batch_nodes(self.cond.outputs, subst, size)[0]
            new = batch_nodes(self.body.outputs, subst, size)
            outs = []
            for o, p in zip(new, phs[:nk]):
                sel = L.broadcast_to(L.reshape(active, (size,) + (1,) * (o.ndim - 1)), o.shape)
                outs.append(L.where(sel, o, p))
            anyc = L.binary("gt", L.reduce("sum", L.cast(active, np.int64)), np.int64(0))
            return WhileRegion(Graph(phs, [anyc], name=self.cond.name), Graph(phs, outs, name=self.body.name), nk,
                               name=f"vmap({self.name})")
        return self._memo(("batch", mask, size), build)

    def batch(self, node: Node, bargs: list, size: int) -> Node:
        """vmap: every carry batched; an example's carry stops changing when its condition is false."""
        ins = list(node.inputs)
        nk = self.nk
        mask = tuple(b is not None for b in bargs)
        r = self._batched(mask, size)
        new = [bcast(ins[j], size) if bargs[j] is None else bargs[j] for j in range(nk)]
        new += [bargs[i] if bargs[i] is not None else ins[i] for i in range(nk, len(ins))]
        return while_node(new, r, node.attr("index"))
