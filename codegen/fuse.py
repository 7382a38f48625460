"""Fusion: split a scheduled graph into kernels over a scalar loop-body IR.

Every graph value is either *materialized* (it gets a buffer: an argument, a
constant, an output or an arena slot) or *fused* (recomputed inside the loop
of each kernel that reads it). Elementwise chains and the reductions that
consume them become one loop nest; layout ops (broadcast_to, transpose,
reshape, slice, expand_dims, squeeze, unslice, gather) become index
arithmetic, never materialized copies; matmul is its own kernel (a BLAS call);
concatenate and scatter_add write their buffer from one loop per operand.

The loop body is a small DAG of `Expr` nodes: loads at affine offsets
(`Aff`, a linear form over the loop variables plus data-dependent atoms),
constants and op applications. Exprs are hash-consed within a partition, so
work shared between fused values (tanh(x) read by the value and by the
gradient) is emitted once per iteration.

The plan, for a node read by several kernels, is to recompute it when it is
cheap and to materialize it when it is expensive (a transcendental, a
division), and likewise for expensive values broadcast along a loop.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from symgraph.errors import ShapeError, UnsupportedOpError
from symgraph.ir import Graph, Node

__all__ = ["IDENTITY_OPS", "Aff", "Expr", "Task", "Kernel", "Program", "partition", "VIEW_OPS", "TRANSCENDENTALS"]

#: Layout ops that only transform the index (composable into an affine view).
VIEW_OPS = frozenset({"broadcast_to", "transpose", "reshape", "expand_dims", "squeeze", "slice"})
#: Elementwise ops costed as expensive (a polynomial or a libm call per element).
TRANSCENDENTALS = frozenset({"exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid",
                             "erf", "pow"})
#: Elementwise ops whose value is their (first) input: fused away entirely.
IDENTITY_OPS = frozenset({"copy", "stop_gradient", "checkpoint_name", "remat_begin", "remat_end"})
_EXPENSIVE = 8  # cost at or above which a value read by several kernels is materialized

_uids = itertools.count()


# ----- affine index forms -----


class Aff:
    """An integer linear form: const + sum(coeff * atom).

    Atoms are `Expr`s of dtype int64: loop variables (`Expr.var`) or
    data-dependent values (a gathered index, a non-affine div/mod).
    Immutable and hashable; terms are kept sorted by atom uid.
    """

    __slots__ = ("terms", "const", "_hash")

    def __init__(self, terms: Iterable[tuple["Expr", int]] = (), const: int = 0):
        acc: dict[Expr, int] = {}
        for a, c in terms:
            if c:
                acc[a] = acc.get(a, 0) + c
        self.terms = tuple(sorted(((a, c) for a, c in acc.items() if c), key=lambda t: t[0].uid))
        self.const = int(const)
        self._hash = hash((tuple((a.uid, c) for a, c in self.terms), self.const))

    @staticmethod
    def of(x: "Aff | Expr | int") -> "Aff":
        if isinstance(x, Aff):
            return x
        if isinstance(x, Expr):
            return Aff(((x, 1),))
        return Aff((), int(x))

    def __add__(self, other: "Aff | int") -> "Aff":
        o = Aff.of(other)
        return Aff(self.terms + o.terms, self.const + o.const)

    def scale(self, k: int) -> "Aff":
        return Aff(((a, c * k) for a, c in self.terms), self.const * k)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Aff) and self._hash == other._hash and self.const == other.const
                and len(self.terms) == len(other.terms)
                and all(a is b and c == d for (a, c), (b, d) in zip(self.terms, other.terms)))

    def __hash__(self) -> int:
        return self._hash

    def is_const(self) -> bool:
        return not self.terms

    def coeff(self, atom: "Expr") -> int:
        for a, c in self.terms:
            if a is atom:
                return c
        return 0

    def range(self) -> tuple[int, int]:
        """Inclusive bounds of the form given its atoms' ranges."""
        lo = hi = self.const
        for a, c in self.terms:
            alo, ahi = a.rng
            if c > 0:
                lo += c * alo
                hi += c * ahi
            else:
                lo += c * ahi
                hi += c * alo
        return lo, hi

    def atoms(self) -> list["Expr"]:
        return [a for a, _ in self.terms]

    def __repr__(self) -> str:
        parts = [f"{c}*{a.short()}" for a, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return "+".join(parts)


def aff_divmod(a: Aff, d: int) -> tuple[Aff, Aff]:
    """(a // d, a % d) for a >= 0, exact affine forms when the ranges allow it.

    Splits a into a part whose coefficients are multiples of d and a
    remainder part; when the remainder's range lies in [0, d) the quotient and
    remainder are affine. Otherwise they become opaque div/mod atoms.
    """
    if d == 1:
        return a, Aff()
    hi = [(x, c) for x, c in a.terms if c % d == 0]
    lo = [(x, c) for x, c in a.terms if c % d != 0]
    lo_c = a.const % d
    low = Aff(lo, lo_c)
    lmin, lmax = low.range()
    if lmin >= 0 and lmax < d:
        return Aff(((x, c // d) for x, c in hi), (a.const - lo_c) // d), low
    amin, amax = a.range()
    if amax < d and amin >= 0:
        return Aff(), a
    idx = Expr.index(a)
    return (Aff.of(Expr.make("_idiv", (idx,), (d,), np.dtype(np.int64), rng=(amin // d, amax // d))),
            Aff.of(Expr.make("_imod", (idx,), (d,), np.dtype(np.int64), rng=(0, min(d - 1, amax)))))


# ----- the loop-body IR -----


class Expr:
    """A scalar value computed once per loop iteration (hash-consed).

    Attributes:
        op: an op name of `symgraph.ops.OPS` (an elementwise op), or an
            internal name: "var" (loop variable; attrs (axis, extent)),
            "const" (attrs (ConstKey,)), "load" (args (Aff,), attrs (node,)),
            "index" (an Aff as an int64 value), "_idiv", "_imod",
            "_gather_index", "_unslice_cond", "_unslice_src", "_prod_cast".
        args: input Exprs (or one Aff for load/index).
        attrs: hashable extra data.
        dtype: numpy dtype of the value.
        rng: inclusive integer range (int64 index values only).
    """

    __slots__ = ("op", "args", "attrs", "dtype", "uid", "rng", "__weakref__")
    _table: dict[tuple, "Expr"] = {}

    def __init__(self, op: str, args: tuple, attrs: tuple, dtype: np.dtype, rng: tuple[int, int] | None):
        self.op = op
        self.args = args
        self.attrs = attrs
        self.dtype = dtype
        self.uid = next(_uids)
        self.rng = rng

    @classmethod
    def make(cls, op: str, args: tuple, attrs: tuple, dtype: Any, rng: tuple[int, int] | None = None) -> "Expr":
        dtype = np.dtype(dtype)
        key = (op, tuple(a.uid if isinstance(a, Expr) else a for a in args), attrs, dtype.str)
        table = _session.table
        e = table.get(key)
        if e is None:
            e = table[key] = cls(op, args, attrs, dtype, rng)
        return e

    @classmethod
    def var(cls, axis: int, extent: int) -> "Expr":
        return cls.make("var", (), (axis, extent), np.int64, rng=(0, max(extent - 1, 0)))

    @classmethod
    def const(cls, value: Any, dtype: Any) -> "Expr":
        a = np.asarray(value, dtype=dtype).reshape(())
        return cls.make("const", (), (a.dtype.str, a.tobytes()), a.dtype)

    @classmethod
    def index(cls, a: Aff) -> "Expr":
        if len(a.terms) == 1 and a.const == 0 and a.terms[0][1] == 1:
            return a.terms[0][0]
        return cls.make("index", (a,), (), np.int64, rng=a.range())

    def const_value(self) -> Any:
        dt, raw = self.attrs
        return np.frombuffer(raw, dtype=np.dtype(dt))[0]

    def short(self) -> str:
        if self.op == "var":
            return f"v{self.attrs[0]}"
        return f"{self.op}#{self.uid}"

    def __repr__(self) -> str:
        return f"Expr({self.op}#{self.uid}, {self.dtype})"


class _Session(threading.local):
    def __init__(self) -> None:
        self.table: dict = {}


_session = _Session()


def release_session() -> None:
    """Drop this thread's table of interned Exprs (after a module is built)."""
    _session.table = {}


# ----- tasks and kernels -----


@dataclass(eq=False)
class Task:
    """One unit of work on a materialized node.

    kind:
        "store": value(node) at every index of `domain`, stored at `offset`.
        "reduce": reduction op over `red_axes` of `domain` (the operand's shape).
        "argmax": index of the first maximum along one axis.
        "scatter": out[..., idx, ...] += u (sequential; output zero-filled first).
        "gemm": a matrix product through BLAS.
    """

    kind: str
    node: Node
    domain: tuple[int, ...]
    red_axes: frozenset = frozenset()
    value: Expr | None = None        # the per-iteration value
    offset: Aff | None = None        # where it goes in the node's buffer
    red_op: str = ""                 # sum/max/min/prod/argmax
    piece: int = 0                   # concatenate piece number
    gemm: dict | None = None         # views of the operands (gemm)
    _exprs: list | None = None

    @property
    def exprs(self) -> list["Expr"]:
        """Every Expr this task evaluates, inputs first (cached)."""
        if self._exprs is None:
            self._exprs = walk_exprs(task_roots(self)) if self.kind != "gemm" else []
        return self._exprs

    @property
    def loads(self) -> list["Expr"]:
        return [e for e in self.exprs if e.op == "load"]

    @property
    def is_loop(self) -> bool:
        return self.kind != "gemm"


@dataclass(eq=False)
class Kernel:
    """Tasks sharing one loop nest (or one BLAS call), in execution order."""

    kind: str                       # "loop" or "gemm"
    domain: tuple[int, ...]
    red_axes: frozenset
    tasks: list[Task] = field(default_factory=list)

    @property
    def nodes(self) -> list[Node]:
        return [t.node for t in self.tasks]

    @property
    def size(self) -> int:
        return int(np.prod(self.domain, dtype=np.int64))


@dataclass(eq=False)
class Program:
    """A partitioned graph: materialized nodes, kernels in execution order."""

    graph: Graph
    order: list[Node]
    materialized: set
    kernels: list[Kernel]
    producer: dict                  # materialized node -> index of the last kernel writing it
    readers: dict                   # materialized node -> list of kernel indices reading it
    donated: dict                   # output position -> input leaf index (buffer shared)
    consts: dict                    # constant node -> array (non-uniform constants)
    first_write: dict = field(default_factory=dict)  # node -> first kernel writing it (concatenate pieces)


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order element strides of a shape."""
    st = []
    acc = 1
    for d in reversed(shape):
        st.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(st))


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


def _cost_of_op(name: str) -> int:
    if name in TRANSCENDENTALS:
        return _EXPENSIVE
    if name == "div":
        return 3
    return 1


class _Builder:
    """Builds loop-body Exprs for graph nodes at symbolic indices (one per partition round)."""

    def __init__(self, materialized: set, consts: dict):
        self.M = materialized
        self.consts = consts
        self.memo: dict[tuple, Expr] = {}
        self.expr_node: dict[Expr, Node] = {}
        self.cost: dict[Expr, int] = {}

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
        stack = [(key, gen)]
        send: Any = None
        while stack:
            k, g = stack[-1]
            try:
                req = g.send(send)
            except StopIteration as stop:
                stack.pop()
                send = stop.value
                if k is not None:
                    self.memo[k] = send
                continue
            e = self.memo.get(req)
            if e is not None:
                send = e
                continue
            stack.append((req, self._value_gen(*req)))
            send = None
        return send

    def _leaf(self, n: Node, idx: tuple[Aff, ...]) -> Expr | None:
        if n.op.name == "constant":
            u = uniform_const(n) if n not in self.M else None
            if u is not None:
                return Expr.const(u, n.dtype)
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
        return Expr.make("load", (off,), (n,), n.dtype)

    def _compute_gen(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        name = n.op.name
        kind = n.op.kind
        ident = n.op.extra.get("identity_of_input") if n.op.extra else None
        if ident is not None:
            return (yield (n.inputs[ident], idx))
        if kind == "elementwise":
            if name == "random_uniform":
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
            args = tuple(args)
            if name in IDENTITY_OPS:
                return args[0]
            e = Expr.make(name, args, n.attrs, n.dtype)
            self._note(e, n, _cost_of_op(name) + sum(self.cost.get(a, 0) for a in args))
            return e
        if kind == "layout" or name in VIEW_OPS:
            return (yield from self._layout(n, idx))
        raise UnsupportedOpError(f"codegen: op {name!r} ({kind}) cannot be fused into a loop; "
                                 f"use backend='numpy' for graphs with it")

    def _note(self, e: Expr, n: Node, cost: int) -> None:
        self.expr_node.setdefault(e, n)
        self.cost.setdefault(e, cost)

    def _layout(self, n: Node, idx: tuple[Aff, ...]) -> Any:
        name = n.op.name
        x = n.inputs[0]
        p = n.params
        if name == "broadcast_to":
            lead = n.ndim - x.ndim
            ix = tuple(idx[j + lead] if x.shape[j] == n.shape[j + lead] else Aff() for j in range(x.ndim))
            return (yield (x, ix))
        if name == "transpose":
            perm = p["perm"]
            ixl = [Aff()] * x.ndim
            for i, pi in enumerate(perm):
                ixl[pi] = idx[i]
            return (yield (x, tuple(ixl)))
        if name == "expand_dims":
            axes = set(p["axes"])
            return (yield (x, tuple(a for i, a in enumerate(idx) if i not in axes)))
        if name == "squeeze":
            axes = set(p["axes"])
            it = iter(idx)
            return (yield (x, tuple(Aff() if i in axes else next(it) for i in range(x.ndim))))
        if name == "slice":
            return (yield (x, tuple(a.scale(st) + s for a, s, st in zip(idx, p["starts"], p["steps"]))))
        if name == "reshape":
            return (yield (x, reshape_index(idx, n.shape, x.shape)))
        if name == "unslice":
            return (yield from self._unslice(n, idx))
        if name == "gather":
            return (yield from self._gather(n, idx))
        raise UnsupportedOpError(f"codegen: layout op {name!r} must be materialized")

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


def reshape_index(idx: tuple[Aff, ...], out_shape: tuple, in_shape: tuple) -> tuple[Aff, ...]:
    """Index of the reshape operand (shape in_shape) for output index idx (row-major)."""
    if 0 in in_shape or 0 in out_shape:
        return tuple(Aff() for _ in in_shape)  # empty: the loop never runs
    flat = Aff()
    for a, s in zip(idx, c_strides(out_shape)):
        flat = flat + a.scale(s)
    res: list[Aff] = []
    q = flat
    for d in reversed(in_shape):
        if d == 1:
            res.append(Aff())
            continue
        q, r = aff_divmod(q, int(d))
        res.append(r)
    return tuple(reversed(res))


def domain_vars(domain: tuple[int, ...]) -> tuple[Aff, ...]:
    """Symbolic index of a loop domain: one loop variable per axis of extent > 1."""
    return tuple(Aff.of(Expr.var(i, d)) if d > 1 else Aff() for i, d in enumerate(domain))


def _offset(node: Node, idx: tuple[Aff, ...]) -> Aff:
    off = Aff()
    for a, s in zip(idx, c_strides(node.shape)):
        off = off + a.scale(s)
    return off


def walk_exprs(roots: Iterable[Expr]) -> list[Expr]:
    """All Exprs reachable from roots (including Aff atoms), inputs first."""
    seen: set[Expr] = set()
    out: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(r, False) for r in roots]
    while stack:
        e, done = stack.pop()
        if done:
            out.append(e)
            continue
        if e in seen:
            continue
        seen.add(e)
        stack.append((e, True))
        for a in e.args:
            if isinstance(a, Aff):
                for at in a.atoms():
                    if at not in seen:
                        stack.append((at, False))
            elif a not in seen:
                stack.append((a, False))
    return out


def task_roots(task: Task) -> list[Expr]:
    """The Exprs a loop task evaluates: its value and the atoms of its store offset."""
    roots = [task.value] if task.value is not None else []
    if task.offset is not None:
        roots.extend(task.offset.atoms())
    return roots


def kernel_exprs(k: "Kernel") -> list[Expr]:
    """The union of a kernel's task Exprs, inputs first."""
    if len(k.tasks) == 1:
        return k.tasks[0].exprs
    seen: set = set()
    out = []
    for t in k.tasks:
        for e in t.exprs:
            if e not in seen:
                seen.add(e)
                out.append(e)
    return out


def task_affs(task: Task) -> list[Aff]:
    """Every affine form a loop task evaluates (loads, indices, its own offset)."""
    affs = [task.offset] if task.offset is not None else []
    for e in task.exprs:
        for a in e.args:
            if isinstance(a, Aff):
                affs.append(a)
    return affs


class _Partitioner:
    def __init__(self, graph: Graph, order: list[Node], donate: frozenset, blas: bool):
        self.graph = graph
        self.order = order
        self.donate = donate
        self.blas = blas
        self.pos = {n: i for i, n in enumerate(order)}
        self.readers: dict[Node, list[Node]] = {n: [] for n in order}
        for n in order:
            for x in n.inputs:
                self.readers[x].append(n)
        self.outputs = set(graph.outputs)

    # -- which nodes get buffers --

    def forced(self) -> set:
        M = set()
        for o in self.graph.outputs:
            if o.op.kind != "source":
                M.add(o)
        for n in self.order:
            name = n.op.name
            kind = n.op.kind
            if kind in ("reduction", "contraction") or name in ("concatenate", "scatter_add"):
                M.add(n)
            elif kind == "opaque" and n.op.extra.get("identity_of_input") is None:
                raise UnsupportedOpError(f"codegen: op {name!r} has no native lowering; use backend='numpy'")
            elif kind == "layout" and name not in VIEW_OPS and name not in ("unslice", "gather"):
                raise UnsupportedOpError(f"codegen: layout op {name!r} has no native lowering; use backend='numpy'")
        return M

    def gemm_view(self, b: _Builder, x: Node) -> dict | None:
        """A BLAS view of matmul operand x: base node, offset, strides; None if not viewable."""
        vars_ = tuple(Aff.of(Expr.var(100 + i, d)) for i, d in enumerate(x.shape))
        e = b.value(x, vars_)
        if e.op != "load":
            return None
        off = e.args[0]
        base = e.attrs[0]
        strides = []
        for a in vars_:
            at = a.atoms()[0]
            strides.append(off.coeff(at))
        if any(not (a.op == "var" and a.attrs[0] >= 100) for a in off.atoms()):
            return None
        m, k = x.shape[-2], x.shape[-1]
        sm, sk = strides[-2], strides[-1]
        if k <= 1 or sk == 1:
            trans, ld = False, sm if m > 1 else max(k, 1)
            if ld < max(k, 1):
                ld = None
        else:
            trans, ld = None, None
        if ld is None or trans is None:
            if m <= 1 or sm == 1:
                trans, ld = True, sk if k > 1 else max(m, 1)
                if ld < max(m, 1):
                    return None
            else:
                return None
        return {"base": base, "offset": off.const, "batch_strides": tuple(strides[:-2]), "trans": trans, "ld": ld}

    def plan(self) -> Program:
        M = self.forced()
        consts: dict = {}
        while True:  # M only grows (bounded by the graph), so this terminates
            _session.table = {}
            b = _Builder(M, consts)
            changed = False
            # matmul operands must be BLAS views of buffers
            for n in self.order:
                if n.op.name == "matmul" and self.blas and n.dtype in (np.float32, np.float64):
                    for x in n.inputs:
                        base = x
                        while base.op.name in VIEW_OPS and base not in M:
                            base = base.inputs[0]
                        if base.op.kind != "source" and base not in M:
                            M.add(base)
                            changed = True
            if changed:
                continue
            for n in self.order:
                if n.op.name == "matmul" and self.blas and n.dtype in (np.float32, np.float64):
                    for x in n.inputs:
                        if x not in M and x.op.kind != "source" and self.gemm_view(b, x) is None:
                            M.add(x)
                            changed = True
                        elif x.op.name == "constant" and x not in M and uniform_const(x) is not None:
                            M.add(x)  # a BLAS operand needs the constant as a buffer
                            changed = True
            if changed:
                continue
            tasks = self.make_tasks(b, M)
            donated = self.donation_pairs(M)
            kernels, producer = self.group(tasks, donated)
            while True:
                bad = self.check_donation(kernels, producer, donated)
                if not bad:
                    break
                for k in set(bad):
                    del donated[k]
                kernels, producer = self.group(tasks, donated)
            extra = self.refine(b, kernels, M)
            if extra:
                M |= extra
                continue
            readers: dict[Node, list[int]] = {}
            first_write: dict[Node, int] = {}
            for ki, k in enumerate(kernels):
                for t in k.tasks:
                    first_write.setdefault(t.node, ki)
                    for m in self.task_reads(t):
                        readers.setdefault(m, []).append(ki)
            return Program(self.graph, self.order, M, kernels, producer, readers, donated, consts, first_write)

    # -- tasks --

    def make_tasks(self, b: _Builder, M: set) -> list[Task]:
        tasks: list[Task] = []
        for n in self.order:
            if n not in M or n.op.kind == "source":
                continue
            name = n.op.name
            if n.op.kind == "reduction":
                x = n.inputs[0]
                axes = frozenset(n.attr("axes") if name != "argmax" else (n.attr("axis"),))
                for a in axes:
                    if x.shape[a] == 0 and name in ("max", "min", "argmax"):
                        raise ShapeError(f"{name}: zero-size reduction over axis {a} of shape {x.shape} "
                                         f"has no identity")
                idx = domain_vars(x.shape)
                kept = tuple(a for i, a in enumerate(idx) if i not in axes)
                t = Task("argmax" if name == "argmax" else "reduce", n, x.shape, axes, b.value(x, idx),
                         _offset(n, kept), red_op=name)
                tasks.append(t)
            elif name == "matmul":
                a, bb = n.inputs
                if self.blas and n.dtype in (np.float32, np.float64):
                    va, vb = self.gemm_view(b, a), self.gemm_view(b, bb)
                    assert va is not None and vb is not None
                    tasks.append(Task("gemm", n, n.shape, gemm={"a": va, "b": vb}))
                else:
                    # loop fallback: domain (..., m, k, n), sum over k
                    *batch, m, k = a.shape
                    nn = bb.shape[-1]
                    dom = tuple(batch) + (m, k, nn)
                    idx = domain_vars(dom)
                    nb = len(batch)
                    ea = b.value(a, idx[:nb] + (idx[nb], idx[nb + 1]))
                    eb = b.value(bb, idx[:nb] + (idx[nb + 1], idx[nb + 2]))
                    v = Expr.make("mul", (ea, eb), (), n.dtype)
                    tasks.append(Task("reduce", n, dom, frozenset({nb + 1}), v,
                                      _offset(n, idx[:nb] + (idx[nb], idx[nb + 2])), red_op="sum"))
            elif name == "einsum":
                tasks.append(self.einsum_task(b, n))
            elif name == "concatenate":
                axis = n.attr("axis")
                off = 0
                for pi, x in enumerate(n.inputs):
                    if x.size:
                        idx = domain_vars(x.shape)
                        oidx = tuple(a + off if j == axis else a for j, a in enumerate(idx))
                        tasks.append(Task("store", n, x.shape, frozenset(), b.value(x, idx), _offset(n, oidx),
                                          piece=pi))
                    off += x.shape[axis]
            elif name == "scatter_add":
                u, ind = n.inputs
                axis = n.attr("axis")
                idx = domain_vars(u.shape)
                k = ind.ndim
                iv = b.value(ind, idx[axis:axis + k])
                size = n.shape[axis]
                j = Expr.make("_gather_index", (iv,), (size,), np.int64, rng=(0, max(size - 1, 0)))
                oidx = idx[:axis] + (Aff.of(j),) + idx[axis + k:]
                tasks.append(Task("scatter", n, u.shape, frozenset(), b.value(u, idx), _offset(n, oidx)))
            else:
                idx = domain_vars(n.shape)
                tasks.append(Task("store", n, n.shape, frozenset(), b.compute(n, idx), _offset(n, idx)))
        return tasks

    def einsum_task(self, b: _Builder, n: Node) -> Task:
        from symgraph.ops.linalg import parse_einsum

        terms, out = parse_einsum(n.attr("spec"), len(n.inputs))
        letters: list[str] = []
        for t in terms + [out]:
            for c in t:
                if c not in letters:
                    letters.append(c)
        sizes: dict[str, int] = {}
        for t, x in zip(terms, n.inputs):
            for c, d in zip(t, x.shape):
                sizes[c] = d
        dom = tuple(sizes[c] for c in letters)
        idx = domain_vars(dom)
        pos = {c: i for i, c in enumerate(letters)}
        v = None
        for t, x in zip(terms, n.inputs):
            e = b.value(x, tuple(idx[pos[c]] for c in t))
            v = e if v is None else Expr.make("mul", (v, e), (), n.dtype)
        red = frozenset(pos[c] for c in letters if c not in out)
        off = _offset(n, tuple(idx[pos[c]] for c in out))
        if not red:
            return Task("store", n, dom, frozenset(), v, off)
        return Task("reduce", n, dom, red, v, off, red_op="sum")

    # -- donation --

    def donation_pairs(self, M: set) -> dict[int, int]:
        """Output position -> donated input leaf whose buffer it takes."""
        pairs: dict[int, int] = {}
        used: set[int] = set()
        seen_out: set[Node] = set()
        for k, o in enumerate(self.graph.outputs):
            if o in seen_out or o.op.kind == "source":
                seen_out.add(o)
                continue
            seen_out.add(o)
            for li in sorted(self.donate):
                if li in used:
                    continue
                x = self.graph.inputs[li]
                if x.shape == o.shape and x.dtype == o.dtype and o.size > 0:
                    pairs[k] = li
                    used.add(li)
                    break
        return pairs

    def check_donation(self, kernels: list[Kernel], producer: dict, donated: dict[int, int]) -> list[int]:
        """Output positions whose donation is unsafe (the input is read later, or not in place)."""
        bad = []
        for k, li in donated.items():
            o = self.graph.outputs[k]
            x = self.graph.inputs[li]
            ko = producer[o]
            kern = kernels[ko]
            otask = [t for t in kern.tasks if t.node is o]
            if kern.kind != "loop" or len(otask) != 1 or otask[0].kind != "store":
                bad.append(k)
                continue
            off = otask[0].offset
            unsafe = False
            for ki, kk in enumerate(kernels):
                if ki < ko:
                    continue
                for t in kk.tasks:
                    if t.kind == "gemm":
                        unsafe |= x in (t.gemm["a"]["base"], t.gemm["b"]["base"])
                        continue
                    for e in self.task_loads(t):
                        if e.attrs[0] is x and (ki > ko or e.args[0] != off):
                            unsafe = True
            if unsafe:
                bad.append(k)
        return bad

    # -- grouping --

    def task_loads(self, t: Task) -> list[Expr]:
        if t.kind == "gemm":
            return []
        return t.loads

    def task_reads(self, t: Task) -> set[Node]:
        if t.kind == "gemm":
            return {t.gemm["a"]["base"], t.gemm["b"]["base"]}
        return {e.attrs[0] for e in self.task_loads(t)}

    def group(self, tasks: list[Task], donated: dict[int, int]) -> tuple[list[Kernel], dict]:
        # donated outputs, and everything that reads them, run after all other kernels
        deferred_nodes = {self.graph.outputs[k] for k in donated}
        normal, late = [], []
        for t in tasks:
            if t.node in deferred_nodes or self.task_reads(t) & deferred_nodes:
                deferred_nodes.add(t.node)
                late.append(t)
            else:
                normal.append(t)
        kernels: list[Kernel] = []
        producer: dict[Node, int] = {}
        store_off: dict[tuple[int, Node], Aff] = {}
        first_late = None
        for phase, group in ((0, normal), (1, late)):
            if phase == 1:
                first_late = len(kernels)
            for t in group:
                loads = self.task_loads(t)
                reads = self.task_reads(t)
                base = -1
                for m in reads:
                    base = max(base, producer.get(m, -1))
                start = max(base, 0) if phase == 0 else max(base, first_late)
                chosen = None
                if t.kind in ("store", "reduce", "argmax"):
                    for ki in range(start, len(kernels)):
                        k = kernels[ki]
                        if k.kind != "loop" or k.domain != t.domain:
                            continue
                        if any(tt.kind == "scatter" for tt in k.tasks):
                            continue
                        if t.kind != "store" and k.red_axes and k.red_axes != t.red_axes:
                            continue
                        if ki == base:
                            # reading a value this kernel produces: only stores, at the same index
                            ok = True
                            for e in loads:
                                m = e.attrs[0]
                                if producer.get(m) == ki:
                                    so = store_off.get((ki, m))
                                    if so is None or so != e.args[0]:
                                        ok = False
                                        break
                            if not ok:
                                continue
                        chosen = ki
                        break
                if chosen is None:
                    kind = "gemm" if t.kind == "gemm" else "loop"
                    kernels.append(Kernel(kind, t.domain, frozenset()))
                    chosen = len(kernels) - 1
                k = kernels[chosen]
                k.tasks.append(t)
                if t.kind in ("reduce", "argmax"):
                    k.red_axes = t.red_axes
                if t.node in producer and producer[t.node] != chosen:
                    # concatenate pieces may land in different kernels: the node is done at the last one
                    producer[t.node] = max(producer[t.node], chosen)
                    store_off.pop((chosen, t.node), None)
                else:
                    producer[t.node] = chosen
                    if t.kind == "store" and t.node.op.name != "concatenate":
                        store_off[(chosen, t.node)] = t.offset
        # concatenate: all pieces must run before readers; producer = last piece's kernel (kept above)
        return kernels, producer

    # -- refinement: materialize expensive values shared by kernels or broadcast along loops --

    def refine(self, b: _Builder, kernels: list[Kernel], M: set) -> set:
        users: dict[Node, set[int]] = {}
        cost_of: dict[Node, int] = {}
        extra: set[Node] = set()
        for ki, k in enumerate(kernels):
            if k.kind != "loop":
                continue
            allvars = {Expr.var(i, d) for i, d in enumerate(k.domain) if d > 1}
            exprs = kernel_exprs(k)
            varsets: dict[Expr, frozenset] = {}
            for e in exprs:
                vs: set = set()
                if e.op == "var":
                    vs.add(e)
                for a in e.args:
                    if isinstance(a, Aff):
                        for at in a.atoms():
                            vs |= varsets.get(at, frozenset())
                    else:
                        vs |= varsets.get(a, frozenset())
                varsets[e] = frozenset(vs)
                n = b.expr_node.get(e)
                if n is None or n in M:
                    continue
                users.setdefault(n, set()).add(ki)
                cost = b.cost.get(e, 0)
                cost_of[n] = max(cost_of.get(n, 0), cost)
                if cost >= _EXPENSIVE and n.op.kind == "elementwise":
                    missing = allvars - varsets[e]
                    if missing and 2 * n.size <= k.size:
                        # recomputed along loops it does not depend on
                        extra.add(n)
        for n, ks in users.items():
            if len(ks) > 1 and cost_of[n] >= _EXPENSIVE and n.op.kind == "elementwise":
                extra.add(n)
        return extra - M


def partition(graph: Graph, order: list[Node], donate: frozenset = frozenset(), blas: bool = True) -> Program:
    """Split a scheduled graph into kernels.

    Args:
        graph: the optimized graph.
        order: its schedule (execution order of nodes).
        donate: indices of input leaves whose buffers may receive outputs.
        blas: whether float matmuls go to BLAS (else loop kernels).

    Returns:
        A Program: kernels in execution order, the materialized set,
        producer/reader kernel indices per buffer and the donation pairs.

    Raises:
        UnsupportedOpError: an op with no native lowering (opaque ops).
        ShapeError: a max/min/argmax over an empty axis.
    """
    return _Partitioner(graph, order, donate, blas).plan()
