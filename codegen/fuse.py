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
from symgraph.ir import Graph, Node, meta
from symgraph.passes.cost import EXPENSIVE, node_flops
from symgraph.passes.cost import weight as _cost_of_op

__all__ = ["Aff", "Expr", "Task", "Kernel", "Program", "partition"]

# What an op is comes from its record (symgraph.ops.Op): `view` (index-only layout ops, composed
# into an affine view), `identity_of` (the value is an input: fused away entirely) and the cost
# model's weights (symgraph.passes.cost; values of weight >= EXPENSIVE read by several kernels are
# materialized).
_EXPENSIVE = EXPENSIVE
_COST_CLAMP = 1 << 30  # `_Builder.cost` saturates here (far above _EXPENSIVE)
#: Largest estimated cost (sum of `expr_weight` over a loop body: 1 per cheap op, 3 per division,
#: 8 per transcendental) of one fused loop kernel. Bigger bodies are cut by materializing
#: intermediate values (`_Partitioner.split`): LLVM's optimizer is superlinear in function size,
#: so one kernel of thousands of ops compiles in seconds, while the extra buffer traffic of a cut
#: is negligible next to hundreds of ops per element.
MAX_KERNEL_COST = 1024
#: The cap for loop kernels of one element (scalar programs): without a loop to vectorize,
#: LLVM's time grows about linearly with the straight-line body (a 1000-step scalar chain with
#: its gradient, cost ~20000, compiles in 0.16 s as one function or as 30), while one function
#: lets LLVM share work that a cut recomputes (sin(x) in the value and the gradient) and merge
#: sin/cos of one argument into one sincos call.
MAX_SCALAR_KERNEL_COST = 32768
#: Scalar programs whose loop tasks cost more than this in all (before any cut) are cut at
#: `LARGE_SCALAR_KERNEL_COST` instead: they become several kernels either way, and LLVM's code
#: generation of one function of cost 32768 is superlinear when its transcendentals are inlined
#: polynomials (tanh, exp). On the value and gradient of `bench.scale.mixed_chain`: 20,000 nodes
#: (3 kernels of cost 32768) LLVM 5.2 s -> 1.8 s; 100,000 nodes partitioning 21 s -> 12 s and LLVM
#: 6.2 s -> 2.3 s; 200,000 nodes LLVM 19 s -> 6.6 s. Smaller programs are partitioned as before.
LARGE_SCALAR_PROGRAM_COST = 2 * MAX_SCALAR_KERNEL_COST
LARGE_SCALAR_KERNEL_COST = 8192
#: Products run side by side (`_Partitioner.pair_gemms`): each of at least this many flops (and no
#: dimension under PAIR_MIN_DIM), the larger
#: at most PAIR_MAX_RATIO times the smaller, the later one within PAIR_LOOKAHEAD kernels.
PAIR_MIN_FLOPS = 1 << 20
PAIR_MIN_DIM = 32  # and m, n, k all at least this
PAIR_MAX_RATIO = 2
PAIR_LOOKAHEAD = 8


def kernel_cost_cap(size: int, program_cost: int = 0) -> int:
    """The largest estimated body cost (`expr_weight` sum) of a loop kernel over `size` elements.

    `program_cost` is the summed cost of the program's loop tasks before any cut: a scalar program
    above `LARGE_SCALAR_PROGRAM_COST` gets the smaller `LARGE_SCALAR_KERNEL_COST`.
    """
    if size > 1:
        return MAX_KERNEL_COST
    return LARGE_SCALAR_KERNEL_COST if program_cost > LARGE_SCALAR_PROGRAM_COST else MAX_SCALAR_KERNEL_COST

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


def fold_divmod(a: Aff) -> Aff:
    """Rewrite c·d·(x // d) + c·(x % d) as c·x (x >= 0), e.g. in the offset of a reshape that merges axes.

    The flat offset of a reshaped operand read through a transposed view
    ((b, t, d) -> (b·t, d), then .T) is 128·(j // 8) + 16·(j % 8) = 16·j:
    folded, the operand is an affine view (a BLAS operand without a copy)
    and the same value gives the same BLAS call however it was produced.
    (Added for checkpointing, issue 6: a recomputed reshape must be read
    like the forward one.)
    """
    pairs: dict[tuple, list] = {}  # (operand uid, d) -> [div atom, div coeff, mod atom, mod coeff]
    for x, c in a.terms:
        if x.op in ("_idiv", "_imod"):
            p = pairs.setdefault((x.args[0].uid, x.attrs[0]), [None, 0, None, 0])
            if x.op == "_idiv":
                p[0], p[1] = x, c
            else:
                p[2], p[3] = x, c
    for (_, d), (xd, cd, xm, cm) in pairs.items():
        if xd is None or xm is None or cd != cm * d:
            continue
        inner = xd.args[0]
        base = inner.args[0] if inner.op == "index" else Aff.of(inner)
        if base.range()[0] < 0:
            continue
        a = Aff([(x, c) for x, c in a.terms if x is not xd and x is not xm], a.const) + base.scale(cm)
    return a


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
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        key = (op, tuple([a.uid if isinstance(a, Expr) else a for a in args]), attrs, dtype.str)
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
    pieced: bool = False             # one of several tasks each writing a part of the node (concatenate, pads)
    late: bool = False               # join only the latest kernel (a buffer written just before its use)
    gemm: dict | None = None         # views of the operands (gemm)
    _exprs: list | None = None
    _cost: int | None = None

    @property
    def exprs(self) -> list["Expr"]:
        """Every Expr this task evaluates, inputs first (cached)."""
        if self._exprs is None:
            self._exprs = walk_exprs(task_roots(self)) if self.kind != "gemm" else []
        return self._exprs

    @property
    def cost(self) -> int:
        """Estimated code size of the task's loop body: the sum of `expr_weight` over its Exprs (cached)."""
        if self._cost is None:
            self._cost = sum(expr_weight(e) for e in self.exprs)
        return self._cost

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
    concurrent: bool = False        # gemm kernels: the tasks are independent and may run at the same time

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


def _uniform_scalar(node: Node) -> Any:
    """The value of a constant node (possibly broadcast) whose elements are all equal, else None."""
    while node.op.view in ("broadcast", "reshape"):
        node = node.inputs[0]
    if node.op.name != "constant":
        return None
    return uniform_const(node)


def expr_weight(e: "Expr") -> int:
    """Estimated code size of one Expr: 0 for loads, constants and loop variables, else the op's cost weight."""
    if e.op in ("load", "const", "var", "index"):
        return 0
    return _cost_of_op(e.op)


class _Builder:
    """Builds loop-body Exprs for graph nodes at symbolic indices (one per partition round)."""

    def __init__(self, materialized: set, consts: dict):
        self.M = materialized
        self.consts = consts
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
        name = n.op.name
        if n.op.identity_of is not None:
            return args[n.op.identity_of]
        e = Expr.make(name, args, n.attrs, n.dtype)
        self._note(e, n, _cost_of_op(name) + sum(self.cost.get(a, 0) for a in args))
        return e

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
            return (yield from self._layout(n, idx))
        raise UnsupportedOpError(f"codegen: op {name!r} ({kind}) cannot be fused into a loop; "
                                 f"use backend='numpy' for graphs with it")

    def _note(self, e: Expr, n: Node, cost: int) -> None:
        self.expr_node.setdefault(e, n)
        # The cost sums over every path below e, so it doubles with each step of a chain that reads
        # its value twice (sin(x) * c + x): unclamped, a 400,000-node chain's costs were ints of up to
        # hundreds of thousands of bits (gigabytes, and big-int additions). Only `cost >= _EXPENSIVE`
        # is ever asked, and a sum of clamped costs clamped is the clamped sum: same answers.
        self.cost.setdefault(e, cost if cost < _COST_CLAMP else _COST_CLAMP)

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


def merge_groups(fine: tuple, coarse: tuple) -> list[int] | None:
    """How many consecutive axes of `fine` make each axis of `coarse`, when a reshape only merges axes.

    Axes of extent 1 may be dropped or added anywhere. None when the reshape splits an axis, when
    it only adds or drops unit axes (nothing to gain), or when a size is zero.
    """
    if 0 in fine or 0 in coarse:
        return None
    if tuple(d for d in fine if d != 1) == tuple(d for d in coarse if d != 1):
        return None
    counts = []
    i = 0
    for d in coarse:
        acc = 1
        c = 0
        while i < len(fine) and acc < d:
            acc *= fine[i]
            i += 1
            c += 1
        if acc != d:
            return None
        counts.append(c)
    if any(x != 1 for x in fine[i:]):
        return None
    return counts


def merge_index(idx: tuple[Aff, ...], fine: tuple, coarse: tuple) -> tuple[Aff, ...]:
    """Index into `coarse` of the element at index idx of `fine` (same row-major position; merge-only)."""
    flat = Aff()
    for a, st in zip(idx, c_strides(fine)):
        flat = flat + a.scale(st)
    return reshape_index((flat,), (int(np.prod(fine, dtype=np.int64)),), coarse)


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
        self._pad_memo: dict = {}
        self.acc_plans: dict[Node, tuple[list, list]] = {}
        self.absorbed: set[Node] = set()
        if blas:
            self.plan_accumulation()
        # Values recomputed by checkpointing (issue 6): `group` never hoists them
        # into an earlier kernel (see there).
        self.recomputed = {n for n in order if meta(n).role == "recomputed"}
        # Values materialized only to cap the size of loop bodies (`split`).
        self.split_cut: set[Node] = set()
        # The summed cost of the first round's loop tasks (`kernel_cost_cap`), fixed once known.
        self.program_cost: int | None = None

    # -- which nodes get buffers --

    # -- gemm epilogues: linear combinations of products accumulate in the BLAS call --

    def _linear_scale(self, n: Node) -> tuple[Node, float] | None:
        """(x, c) when n = c * x with c a uniform constant (a multiplication by a scalar), else None."""
        if n.op.name != "mul":
            return None
        for i in (0, 1):
            c = _uniform_scalar(n.inputs[i])
            if c is not None and n.inputs[1 - i].shape == n.shape:
                return n.inputs[1 - i], float(c)
        return None

    def _is_inner(self, n: Node) -> bool:
        """Whether n may be folded into the linear combination of its single reader."""
        return (n not in self.outputs and len(self.readers.get(n, ())) == 1
                and n.op.kind == "elementwise" and n.dtype.kind == "f")

    def plan_accumulation(self) -> None:
        """Find sums like W - lr * (A @ B) or A @ B + C @ D + x whose products can accumulate in place.

        For each such root r (a float add/sub/neg/scalar-mul tree over products of r's shape and
        dtype, each product read only by the tree), r's buffer is first written with the
        remaining terms (a loop) and every product then adds into it: gemm with alpha = its
        coefficient and beta = 1. The products need no buffers of their own and the sum no
        extra pass. Roots that are outputs are skipped when buffers are donated (a donated
        output is written by one in-place loop).
        """
        lin = ("add", "sub", "neg", "mul")
        for m in self.order:
            if m.op.name != "matmul" or m.dtype not in (np.float32, np.float64) or m in self.absorbed:
                continue
            if m in self.outputs or len(self.readers.get(m, ())) != 1:
                continue
            cur = m
            while True:
                rs = self.readers.get(cur, ())
                if len(rs) != 1 or cur in self.outputs and cur is not m:
                    break
                r = rs[0]
                if r.op.name not in lin or r.shape != m.shape or r.dtype != m.dtype:
                    break
                if r.op.name == "mul" and self._linear_scale(r) is None:
                    break
                if cur is not m and not self._is_inner(cur):
                    break
                cur = r
                if not self._is_inner(cur):
                    break
            root = cur
            if root is m or root in self.acc_plans:
                continue
            if root in self.outputs and self.donate:
                continue
            terms = self._linear_terms(root)
            if terms is None:
                continue
            gemms = [(c, x) for c, x in terms if x.op.name == "matmul" and x.shape == root.shape
                     and x.dtype == root.dtype and x not in self.outputs and len(self.readers.get(x, ())) == 1]
            if not gemms:
                continue
            gset = {x for _, x in gemms}
            rest = [(c, x) for c, x in terms if x not in gset]
            if rest and root not in self.outputs and not any(r.op.name == "matmul" for r in self.readers[root]):
                # x @ W + b read by a loop: fused into that loop it costs no pass; stored first and
                # accumulated it would cost one. Only sums that get a buffer anyway (outputs, gemm
                # operands) or that are sums of products alone are worth accumulating.
                continue
            self.acc_plans[root] = (rest, gemms)
            self.absorbed |= gset

    def _linear_terms(self, root: Node) -> list | None:
        """root as [(coefficient, leaf)]: descends through folded add/sub/neg/scalar-mul nodes."""
        out: list = []
        stack = [(root, 1.0)]
        seen = 0
        while stack:
            n, c = stack.pop()
            seen += 1
            if seen > 64:
                return None
            if n is not root and not self._is_inner(n) or n.op.name not in ("add", "sub", "neg", "mul") \
                    or n.shape != root.shape or n.dtype != root.dtype:
                out.append((c, n))
                continue
            name = n.op.name
            if name == "add":
                stack.append((n.inputs[0], c))
                stack.append((n.inputs[1], c))
            elif name == "sub":
                stack.append((n.inputs[0], c))
                stack.append((n.inputs[1], -c))
            elif name == "neg":
                stack.append((n.inputs[0], -c))
            else:
                sc = self._linear_scale(n)
                if sc is None:
                    out.append((c, n))
                else:
                    stack.append((sc[0], c * sc[1]))
        # a leaf reached twice (x + x) keeps both entries; products must appear once
        mm = [x for _, x in out if x.op.name == "matmul"]
        if len(mm) != len(set(mm)):
            return None
        return out

    def forced(self) -> set:
        M = set(self.acc_plans)
        for o in self.graph.outputs:
            if o.op.kind != "source":
                M.add(o)
        for n in self.order:
            name = n.op.name
            kind = n.op.kind
            if kind in ("reduction", "contraction") or name in ("concatenate", "scatter_add"):
                if n not in self.absorbed:
                    M.add(n)
            elif kind == "opaque" and n.op.identity_of is None:
                raise UnsupportedOpError(f"codegen: op {name!r} has no native lowering; use backend='numpy'")
            elif kind == "layout" and n.op.view is None and name not in ("unslice", "gather"):
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
            self._pad_memo = {}
            b = _Builder(M, consts)
            changed = False
            # matmul operands must be BLAS views of buffers
            for n in self.order:
                if n.op.name == "matmul" and self.blas and n.dtype in (np.float32, np.float64):
                    for x in n.inputs:
                        base = x
                        while base.op.view is not None and base not in M:
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
            if self.program_cost is None:
                self.program_cost = sum(t.cost for t in tasks if t.is_loop and not any(d > 1 for d in t.domain))
            donated = self.donation_pairs(M)
            kernels, producer = self.group(tasks, donated)
            while True:
                bad = self.check_donation(kernels, producer, donated)
                if not bad:
                    break
                for k in set(bad):
                    del donated[k]
                kernels, producer = self.group(tasks, donated)
            # first cap the loop bodies (no-op when every task is under MAX_KERNEL_COST), then refine
            extra = self.split(b, kernels, M)
            self.split_cut |= extra
            if not extra:
                extra = self.refine(b, kernels, M)
            if extra:
                M |= extra
                continue
            kernels = self.pair_gemms(kernels, donated)
            producer = {}
            for ki, k in enumerate(kernels):
                for t in k.tasks:
                    producer[t.node] = ki  # the last kernel writing it (concatenate pieces: the last piece)
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
            if n in self.acc_plans:
                rest, gemms = self.acc_plans[n]
                beta = 0.0
                if rest:
                    idx = domain_vars(n.shape)
                    v = None
                    for c, x in rest:
                        e = b.value(x, idx)
                        if c == -1.0:
                            e = Expr.make("neg", (e,), (), n.dtype)
                        elif c != 1.0:
                            e = Expr.make("mul", (Expr.const(c, n.dtype), e), (), n.dtype)
                        v = e if v is None else Expr.make("add", (v, e), (), n.dtype)
                    tasks.append(Task("store", n, n.shape, frozenset(), v, _offset(n, idx), pieced=True, late=True))
                    beta = 1.0
                for c, m in gemms:
                    va, vb = self.gemm_view(b, m.inputs[0]), self.gemm_view(b, m.inputs[1])
                    assert va is not None and vb is not None
                    tasks.append(Task("gemm", n, n.shape, gemm={"a": va, "b": vb, "mm": m, "alpha": c,
                                                                "beta": beta}))
                    beta = 1.0
                continue
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
                        tasks.append(self.piece_task(b, n, x, axis, off, pi, M))
                    off += x.shape[axis]
            elif self.strided_pieces(n, M) is not None:
                # a sum of unslices with one step s along one axis, one per residue mod s (the transpose
                # of x[0::2], x[1::2]): one loop over the pieces' common shape stores every residue
                # (an interleaved store LLVM vectorizes), instead of index tests at every element
                axis, step, pieces = self.strided_pieces(n, M)
                have = dict(pieces)
                for r in range(step):
                    cnt = len(range(r, n.shape[axis], step))
                    x = have.get(r)
                    shape = tuple(cnt if j == axis else d for j, d in enumerate(n.shape))
                    idx = domain_vars(shape)
                    oidx = tuple(a.scale(step) + r if j == axis else a for j, a in enumerate(idx))
                    if x is None:
                        v = Expr.const(0, n.dtype)
                    else:  # + 0.0 as in the sum with the other pieces' zeros: -0.0 becomes +0.0
                        v = Expr.make("add", (b.value(x, idx), Expr.const(0, n.dtype)), (), n.dtype)
                    tasks.append(Task("store", n, shape, frozenset(), v, _offset(n, oidx), piece=r, pieced=True))
            elif self.pad_pieces(n, M) is not None:
                # a sum of zero-padded blocks along one axis (the transpose of slicing): one store per
                # block and zeros in the gaps, instead of index tests and gathers at every element
                axis, pieces = self.pad_pieces(n, M)
                pos = 0
                pi = 0
                for start, x in pieces + [(n.shape[axis], None)]:
                    if start > pos:
                        shape = tuple(start - pos if j == axis else d for j, d in enumerate(n.shape))
                        idx = domain_vars(shape)
                        oidx = tuple(a + pos if j == axis else a for j, a in enumerate(idx))
                        tasks.append(Task("store", n, shape, frozenset(), Expr.const(0, n.dtype), _offset(n, oidx),
                                          piece=pi, pieced=True))
                        pi += 1
                    if x is None:
                        break
                    tasks.append(self.piece_task(b, n, x, axis, start, pi, M))
                    pi += 1
                    pos = start + x.shape[axis]
            elif name == "reshape" and n.inputs[0] not in M and n.inputs[0].op.kind != "source" \
                    and merge_groups(n.inputs[0].shape, n.shape) is not None:
                # a reshape that merges axes: loop over the operand's finer shape (same row-major
                # offsets), so reading a transposed operand needs no div/mod of merged indices
                x = n.inputs[0]
                idx = domain_vars(x.shape)
                tasks.append(Task("store", n, x.shape, frozenset(), b.value(x, idx), _offset(x, idx)))
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

    def piece_task(self, b: _Builder, n: Node, x: Node, axis: int, start: int, pi: int, M: set) -> Task:
        """Store x into the block of n starting at `start` along `axis` (loops over x's finer shape
        when x is a fused reshape that merges axes)."""
        y = x
        while y.op.name == "reshape" and y.inputs[0] not in M and y.inputs[0].op.kind != "source" \
                and merge_groups(y.inputs[0].shape, y.shape) is not None:
            y = y.inputs[0]
        idx = domain_vars(y.shape)
        xidx = merge_index(idx, y.shape, x.shape) if y is not x else idx
        oidx = tuple(a + start if j == axis else a for j, a in enumerate(xidx))
        return Task("store", n, y.shape, frozenset(), b.value(y, idx), _offset(n, oidx), piece=pi, pieced=True)

    @staticmethod
    def _unslice_leaves(n: Node, M: set) -> list | None:
        """The unslices n is a sum of (at least two; fused adds and unslices of n's shape and dtype), or None."""
        if n.op.name != "add" or n.dtype.kind != "f":
            return None
        leaves: list = []
        stack = [n]
        while stack:
            x = stack.pop()
            if x.op.name == "add" and (x is n or (x not in M and x.op.kind == "elementwise")) \
                    and x.shape == n.shape and x.dtype == n.dtype:
                stack.extend(x.inputs)
            elif x.op.name == "unslice" and x is not n and x not in M and x.shape == n.shape:
                leaves.append(x)
            else:
                return None
        return leaves if len(leaves) >= 2 else None

    def strided_pieces(self, n: Node, M: set) -> tuple[int, int, list] | None:
        """(axis, step, [(residue, piece), ...]) when n is a sum of unslices along one axis, all with one
        step > 1, each from its residue (< step) to the end, distinct residues, every other axis whole.

        The inner adds and the unslices must be fused values (not materialized) of n's shape and dtype.
        """
        leaves = self._unslice_leaves(n, M) if n.size else None
        if leaves is None:
            return None
        axis = step = None
        pieces: dict[int, Node] = {}
        for u in leaves:
            p = u.params
            bad = [j for j, (s0, e0, st) in enumerate(zip(p["starts"], p["stops"], p["steps"]))
                   if not (st == 1 and s0 == 0 and e0 == n.shape[j])]
            if len(bad) != 1:
                return None
            j = bad[0]
            s0, st, length = p["starts"][j], p["steps"][j], n.shape[j]
            if st <= 1 or (axis is not None and (j != axis or st != step)) or not 0 <= s0 < st or s0 in pieces:
                return None
            if u.inputs[0].shape[j] != len(range(s0, length, st)):
                return None
            axis, step = j, st
            pieces[s0] = u.inputs[0]
        return axis, step, sorted(pieces.items(), key=lambda t: t[0])

    def pad_pieces(self, n: Node, M: set) -> tuple[int, list] | None:
        """(axis, [(start, block), ...]) when n is a sum of unit-step unslices of disjoint blocks along one axis.

        The inner adds and the unslices must be fused values (not materialized) of n's shape and dtype.
        """
        memo = self._pad_memo
        if n in memo:
            return memo[n]
        res = None
        leaves = self._unslice_leaves(n, M)
        if leaves is not None:
            ok = True
            axis = None
            pieces = []
            for u in leaves:
                p = u.params
                bad = [j for j, (s0, e0, st) in enumerate(zip(p["starts"], p["stops"], p["steps"]))
                       if not (st == 1 and s0 == 0 and e0 == n.shape[j])]
                if len(bad) != 1 or p["steps"][bad[0]] != 1 or (axis is not None and bad[0] != axis):
                    ok = False
                    break
                axis = bad[0]
                pieces.append((p["starts"][axis], u.inputs[0]))
            if ok:
                pieces.sort(key=lambda t: t[0])
                end = 0
                for s0, x in pieces:
                    if s0 < end or x.shape[axis] == 0:
                        ok = False
                    end = s0 + x.shape[axis]
                if ok and end <= n.shape[axis]:
                    res = (axis, pieces)
        memo[n] = res
        return res

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
                        unsafe |= x is t.gemm["a"]["base"] or x is t.gemm["b"]["base"]
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
            reads = {t.gemm["a"]["base"], t.gemm["b"]["base"]}
            if t.gemm.get("beta"):
                reads.add(t.node)  # accumulates into its output
            return reads
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
        # loop kernels: the Exprs of their bodies and the estimated cost (MAX_KERNEL_COST caps joins)
        kexprs: dict[int, set] = {}
        kcost: dict[int, int] = {}
        expr_kernels: dict[Expr, list[int]] = {}  # Expr of nonzero weight -> the loop kernels computing it
        first_late = None
        frontier = 0  # the latest kernel any task joined so far
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
                if t.late:
                    start = max(start, len(kernels) - 1)
                if t.node in self.recomputed:
                    # A recomputed value runs where the schedule put it (right before its
                    # backward reader), never in an earlier kernel of the same shape: hoisted
                    # into the forward sweep it would stay live across the backward sweep,
                    # which is what checkpointing removed.
                    start = max(start, frontier)
                chosen = None
                shared = None
                if t.kind in ("store", "reduce", "argmax"):
                    for ki in range(start, len(kernels)):
                        k = kernels[ki]
                        if k.kind != "loop" or k.domain != t.domain:
                            continue
                        if any(tt.kind == "scatter" for tt in k.tasks):
                            continue
                        if t.kind != "store" and k.red_axes and k.red_axes != t.red_axes:
                            continue
                        cap = kernel_cost_cap(k.size, self.program_cost)
                        if kcost.get(ki, 0) + t.cost > cap:
                            # joining may make the body too big for LLVM: count what is really new
                            # (the task's cost less what it shares with the kernel, found once per
                            # task through `expr_kernels`, not by a scan of the task per kernel)
                            if shared is None:
                                shared = {}
                                for e in t.exprs:
                                    for kj in expr_kernels.get(e, ()):
                                        shared[kj] = shared.get(kj, 0) + expr_weight(e)
                            if kcost[ki] + t.cost - shared.get(ki, 0) > cap:
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
                frontier = max(frontier, chosen)
                if t.is_loop:
                    have = kexprs.setdefault(chosen, set())
                    c = kcost.get(chosen, 0)
                    for e in t.exprs:
                        if e not in have:
                            have.add(e)
                            w = expr_weight(e)
                            if w:
                                c += w
                                expr_kernels.setdefault(e, []).append(chosen)
                    kcost[chosen] = c
                if t.kind in ("reduce", "argmax"):
                    k.red_axes = t.red_axes
                if t.node in producer and producer[t.node] != chosen:
                    # concatenate pieces may land in different kernels: the node is done at the last one
                    producer[t.node] = max(producer[t.node], chosen)
                    store_off.pop((chosen, t.node), None)
                else:
                    producer[t.node] = chosen
                    if t.kind == "store" and not t.pieced:
                        store_off[(chosen, t.node)] = t.offset
        # concatenate: all pieces must run before readers; producer = last piece's kernel (kept above)
        return kernels, producer

    # -- concurrent products --

    def _kernel_rw(self, k: Kernel) -> tuple[set, set]:
        reads: set = set()
        for t in k.tasks:
            reads |= self.task_reads(t)
        return reads, {t.node for t in k.tasks}

    def pair_gemms(self, kernels: list[Kernel], donated: dict[int, int]) -> list[Kernel]:
        """Run independent products of similar size at the same time, one per core.

        The backward sweep of a dense layer has two products of the same size that
        do not depend on each other: the input gradient ``g @ W.T`` and the weight
        gradient ``x.T @ g`` (often fused into the update, accumulating into a copy of
        ``W``). Split across cores one after the other, each pays the split's overhead
        (both threads pack the whole shared operand); run side by side, each is one
        single-threaded BLAS call. For every single-product kernel, a later one within
        `PAIR_LOOKAHEAD` kernels with at most `PAIR_MAX_RATIO` times its flops (or
        conversely) is moved up beside it when nothing in between writes what it reads
        or reads or writes what it writes; the loop kernel that fills its accumulator
        (``W`` copied into the output) moves in front of the pair on the same
        conditions. Donated outputs are never moved. The pair becomes one kernel with
        ``concurrent=True`` (one step of the buffer plan: nothing one product reads
        shares memory with what the other writes); `program.build_module` runs its
        products on the thread pool, or one after the other without a pool.
        """
        if not self.blas:
            return kernels
        donated_nodes = {self.graph.outputs[k] for k in donated}

        def single_gemm(k: Kernel) -> Task | None:
            if k.kind != "gemm" or k.concurrent or len(k.tasks) != 1:
                return None
            return k.tasks[0]

        def flops(t: Task) -> int:
            mm = t.gemm.get("mm", t.node)
            a, b = mm.inputs
            if min(a.shape[-2], a.shape[-1], b.shape[-1]) < PAIR_MIN_DIM:
                return 0  # a thin product (k = 10: dz @ W.T of a classifier layer) is memory-bound
            return node_flops(mm)

        out = list(kernels)
        i = 0
        while i < len(out):
            ti = single_gemm(out[i])
            if ti is None or flops(ti) < PAIR_MIN_FLOPS:
                i += 1
                continue
            ri, wi = self._kernel_rw(out[i])
            for j in range(i + 1, min(len(out), i + 1 + PAIR_LOOKAHEAD)):
                tj = single_gemm(out[j])
                if tj is None or tj.node in donated_nodes:
                    continue
                fi, fj = flops(ti), flops(tj)
                if max(fi, fj) > PAIR_MAX_RATIO * min(fi, fj):
                    continue
                moved = [j]
                if tj.gemm.get("beta"):
                    # the accumulator's last writer before j must be before i, or a loop kernel that moves too
                    pk = next((x for x in range(j - 1, i - 1, -1) if tj.node in self._kernel_rw(out[x])[1]), -1)
                    if pk > i:
                        if out[pk].kind != "loop" or {t.node for t in out[pk].tasks} != {tj.node}:
                            continue
                        moved = [pk, j]
                    elif pk == i:
                        continue
                mr: set = set()
                mw: set = set()
                for x in moved:
                    r, w = self._kernel_rw(out[x])
                    mr |= r
                    mw |= w
                if mw & donated_nodes:
                    continue
                between_r: set = set()
                between_w: set = set()
                for x in range(i, j):
                    if x in moved:
                        continue
                    r, w = self._kernel_rw(out[x])
                    between_r |= r
                    between_w |= w
                if mr & between_w or mw & (between_r | between_w):
                    continue
                pair = Kernel("gemm", out[i].domain, out[i].red_axes, [ti, tj], concurrent=True)
                rest = [out[x] for x in range(i + 1, j) if x not in moved]
                pre = [out[moved[0]]] if len(moved) == 2 else []
                out = out[:i] + pre + [pair] + rest + out[j + 1:]
                i += len(pre)
                break
            i += 1
        return out

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
            # A kernel made by cutting a too-big loop body (it reads or writes a value `split`
            # materialized) recomputes the fused values it shares with its neighbours: that is the
            # price of the cap, and materializing them all would undo the cut (a buffer per op).
            was_split = bool(self.split_cut) and any(
                t.node in self.split_cut or any(e.attrs[0] in self.split_cut for e in t.loads) for t in k.tasks)
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
                if not was_split:
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
        extra -= M
        if len(extra) > 1:
            # Materialize the transcendentals first: a cheap op is expensive here only because it
            # contains a transcendental that is itself a candidate (1 + tanh(u) contains tanh(u));
            # once that one has a buffer it is a cheap load, so the next round decides again. (Only
            # transcendentals count, so a long chain of cheap candidates is not deferred one by one.)
            below: dict[Expr, bool] = {}
            deferred: set[Node] = set()
            for k in kernels:
                if k.kind != "loop":
                    continue
                for e in kernel_exprs(k):
                    if e in below:
                        continue
                    n = b.expr_node.get(e)
                    hit = False
                    for a in e.args:
                        if isinstance(a, Expr):
                            an = b.expr_node.get(a)
                            if below.get(a, False) or (an is not None and an is not n and an in extra
                                                       and _cost_of_op(an.op.name) >= _EXPENSIVE):
                                hit = True
                                break
                    below[e] = hit
                    if hit and n in extra and _cost_of_op(n.op.name) < _EXPENSIVE:
                        # cheap itself (1 + tanh(u)); a transcendental of a transcendental stays
                        deferred.add(n)
            if deferred and deferred != extra:
                extra -= deferred
        return extra


    # -- splitting: cap the size of a loop body --

    def split(self, b: _Builder, kernels: list[Kernel], M: set) -> set:
        """Values to materialize so that no loop task costs more than its cap (`kernel_cost_cap`).

        LLVM's optimizer is superlinear in the size of a function: a value-and-gradient chain of
        thousands of elementwise ops fused into one loop body takes seconds to compile, growing
        about 4x per doubling. For each task whose body is too big, the Exprs are visited inputs
        first with the set of ops each one needs (its cone, cut at loads); when a cone would cost
        more than the cap, its most expensive operand that is a fused elementwise value is cut
        (materialized: readers load it). Every cut cone costs at most the cap, so the next round's
        tasks do, and `group` packs tasks into kernels without exceeding it. Graphs whose loop
        tasks are all under the cap are not changed.
        """
        from .cut import cut_task

        extra: set[Node] = set()
        cut: set[Expr] = set()
        for k in kernels:
            if k.kind != "loop":
                continue
            for t in k.tasks:
                cap = kernel_cost_cap(int(np.prod(t.domain, dtype=np.int64)), self.program_cost or 0)
                if t.cost > cap:
                    cut_task(b, t, M, cut, extra, cap)
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
