"""Simplification: rule tables run to a fixed point, plus polynomial canonicalization.

`simplify(graph)` rebuilds a graph bottom-up in a builder. Rebuilding
re-interns every node (common subexpressions merge: CSE), drops what the
outputs do not reach (dead code elimination), removes the `copy` nodes that
transformations insert, folds constants with each op's own NumPy
implementation, and rewrites nodes through `RULES`, small functions keyed by op
name, each commented with its identity. A second stage (`polynomial_pass`)
brings elementwise add/sub/neg/mul/muladd regions into a canonical sum of
monomials, collects like terms and re-emits the polynomial in Horner form, one
`muladd` (a*b + c rounded twice, bit for bit equal to mul then add) per step
and Horner in v*v for even and odd polynomials; this is what keeps nested
derivatives small (the n-th derivative of tanh is a polynomial of degree n + 1
in tanh x). The stages form a flat pipeline, `PIPELINE`, run until nothing
changes. `broadcast_to` of a constant is never folded, so the identity basis
of jacobian/hessian stays structural and their graph sizes do not depend on n.

Semantics. Rules are exact (bit for bit, NaN, inf and the sign of zero
included) unless they belong to one of two opt-in classes:
- `reassociate=True` (the default) also allows rewrites that change rounding
  only: combining constant factors, sum of a broadcast as a product, the
  polynomial stage, pow with small integer exponents as products. No
  rewrite of this class turns a finite value into inf or NaN or back: the
  polynomial stage only runs on regions whose atoms are provably bounded
  (tanh, sin, sigmoid, ... and constants; checked with a magnitude bound), and
  keeps every atom the region read, so a NaN still propagates. The sign of an
  exactly zero result is not preserved by this class.
- `assume_finite=True` (off by default) assumes no NaN or inf and ignores the
  sign of zero: x*0 -> 0, x-x -> 0, x+0 -> x everywhere, zeros through
  matmul, polynomial regions over any atoms.

Nodes with a tag (other than the ("fresh", k) tags of the `copy` nodes made by
transformations) are never rewritten, folded, merged with untagged nodes or
looked through by a rule: recomputed copies made by checkpointing survive.

References:
    PyTensor's canonicalize/specialize rewrites and the single-client rule;
    tinygrad's `graph_rewrite` tables; Horner's scheme for polynomial
    evaluation (Knuth, TAOCP vol. 2, 4.6.4).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import viz
from ...errors import SourceLocation, SymgraphError
from ...ir import (
    Builder,
    ConstValue,
    Graph,
    Node,
    NodeMeta,
    collector_paused,
    current_role,
    meta,
    role,
    set_build_context,
    set_meta,
    source_location,
)
from ...ops import OPS, Op

__all__ = [
    "FOLD_LIMIT",
    "GENERIC_RULES",
    "PIPELINE",
    "RULES",
    "SimplifyOptions",
    "polynomial_pass",
    "rewrite_pass",
    "rule",
    "simplify",
]

FOLD_LIMIT = 1 << 16  # elements: larger constant results stay computed at run time
MAX_ITERATIONS = 24  # pipeline rounds before giving up on a fixed point
MAX_LOCAL_STEPS = 32  # rule applications at one node per round
MAX_POLY_TERMS = 64  # a region whose polynomial has more monomials is left alone
MAX_POLY_DEGREE = 48  # ... or a higher total degree
MAX_POW = 8  # pow(x, k) for integer 2 <= k <= MAX_POW joins a polynomial region

_CONST = OPS["constant"]
_BCAST = OPS["broadcast_to"]
_NOLOC = SourceLocation("<simplify>", 0, "simplify")


@dataclass(frozen=True)
class SimplifyOptions:
    """Which classes of rewrites `simplify` may apply.

    Attributes:
        reassociate: allow rewrites that change rounding only (see the module
            docstring); required for the polynomial stage.
        assume_finite: assume no NaN/inf and ignore the sign of zero
            (enables x*0 -> 0, x-x -> 0, ...).
        fold_limit: largest constant result (elements) that folding stores.
    """

    reassociate: bool = True
    assume_finite: bool = False
    fold_limit: int = FOLD_LIMIT


# --------------------------------------------------------------------------- driver state


class _PassBuilder(Builder):
    """A builder that canonicalizes commutative operands and stamps metadata.

    New nodes get the role and source location of the node being rewritten
    (`cur_meta`), never the location of the simplifier's caller. When wrapping
    an existing builder it shares that builder's intern table, so results can
    be compared by identity with nodes built there.
    """

    def __init__(self, share: Builder | None = None):
        super().__init__(share)
        self._meta: NodeMeta = NodeMeta(None, "forward")
        self._synced: NodeMeta | None = None  # the metadata the thread's build context was last set from

    @property
    def cur_meta(self) -> NodeMeta:
        """Metadata given to the nodes built from now on (that of the node being rewritten)."""
        return self._meta

    @cur_meta.setter
    def cur_meta(self, m: NodeMeta) -> None:
        # Builder.make stamps new nodes with the thread's location override and role (see
        # symgraph.ir.source_location and role): `make` sets both from `m` when it is called
        # (most nodes being rewritten build nothing); `adopt` and `remake` pass the metadata.
        self._meta = m

    def adopt(self, node: Node, inputs: tuple) -> Node:
        """`node` rebuilt on `inputs`: the node itself when nothing changed and no equal node exists here.

        Adopting an unchanged node registers it in the intern table instead of
        creating a copy (cheap, and it keeps its metadata); an equal node
        already in the table is returned instead (CSE).
        """
        ins = node.inputs
        if len(inputs) != len(ins):
            return self.make(node.op, inputs, node.attrs, node.tag)
        for a, b in zip(inputs, ins):
            if a is not b:
                return self.remake(node, inputs)
        if _swapped(node.op, ins):
            return self.remake(node, inputs)
        return Builder.adopt(self, node)

    def make(self, op: Any, inputs: Iterable[Node] = (), attrs: Any = None, tag: Any = None) -> Node:
        m = self._meta
        if m is not self._synced:
            self._synced = m
            set_build_context(m.location if m.location is not None else _NOLOC, m.role)
        inputs = tuple(inputs)
        if _swapped(op, inputs):
            inputs = (inputs[1], inputs[0]) + inputs[2:]
        if self._meta.location is None:
            n = self.interned()
            node = Builder.make(self, op, inputs, attrs, tag)
            if self.interned() != n:
                set_meta(node, self._meta)  # no location: do not keep the placeholder
            return node
        return Builder.make(self, op, inputs, attrs, tag)

    def remake(self, node: Node, inputs: tuple, meta: NodeMeta | None = None) -> Node:
        """`make(node.op, inputs, node.attrs, node.tag)` (see `Builder.remake`).

        A new node gets `meta` (default `cur_meta`): the metadata `make` would give it.
        """
        if type(inputs) is not tuple:
            inputs = tuple(inputs)
        if _swapped(node.op, inputs):
            inputs = (inputs[1], inputs[0]) + inputs[2:]
        return Builder.remake(self, node, inputs, self._meta if meta is None else meta)


def _swapped(op: Op, ins: tuple) -> bool:
    """Whether the commutative operands of a node (both of add, mul, ...; a and b of muladd(a, b, c)) are out of order.

    The order is that of `_order_key` (splat constants last, otherwise creation order).
    """
    if not op.commutative:
        return False
    a = ins[0]
    b = ins[1]
    sa = (a.op is _CONST or a.op is _BCAST) and _splat(a) is not None
    sb = (b.op is _CONST or b.op is _BCAST) and _splat(b) is not None
    return sa > sb or (sa == sb and b.id < a.id)


def _order_key(x: Node) -> tuple[int, int]:
    # constants (splats) last, otherwise creation order
    if x.op is not _CONST and x.op is not _BCAST:
        return (0, x.id)
    return (1 if _splat(x) is not None else 0, x.id)


class _Run:
    """The state of one `simplify` call: options, builder, reader counts, statistics."""

    def __init__(self, options: SimplifyOptions, builder: _PassBuilder):
        self.options = options
        self.builder = builder
        self.readers: dict[Node, int] = {}  # node -> readers in the graph being rewritten
        self.stats: Counter = Counter()
        self.changes = 0
        self.stable: set[Node] = set()  # nodes on which no rule fired (rewrite pass)
        self.settled: dict[str, tuple] = {}  # stage -> outputs it last left unchanged
        self.splats: dict[tuple, Node] = {}  # (type, value, sign, dtype, shape) -> splat built by polynomial_pass
        self.dry_ops: dict[frozenset, int] = {}  # polynomial, atoms by rank -> operations of its Horner form


_local = threading.local()


def _run() -> _Run:
    r = getattr(_local, "run", None)
    if r is None:
        raise RuntimeError("simplify rules run only inside simplify()")
    return r


# --------------------------------------------------------------------------- node helpers


def _mk(name: str, *inputs: Node, **attrs: Any) -> Node:
    return _run().builder.make(OPS[name], inputs, attrs or None)


def _splat(x: Node) -> np.ndarray | None:
    """The 0-d value of x if x is a constant with all elements equal, else None.

    Splat constants are kept canonical as a 0-d `constant`, or `broadcast_to`
    of one (the rewrite pass turns other uniform constants into that form).
    """
    if x.tag is not None:
        return None
    if x.op is _BCAST:
        x = x.inputs[0]
        if x.tag is not None:
            return None
    if x.op is _CONST:
        a = x.attrs[0][1].array
        if a.ndim == 0:
            return a
    return None


def _const_array(x: Node) -> np.ndarray | None:
    if x.op is _CONST and x.tag is None:
        return x.attrs[0][1].array
    return None


def _uniform(a: np.ndarray) -> bool:
    """All elements bitwise equal (so -0.0 and 0.0 differ and NaNs compare)."""
    if a.size == 0:
        return False
    b = np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(a.size, a.dtype.itemsize)
    return bool((b == b[0]).all())


def _constant(value: Any, dtype: Any, shape: tuple = ()) -> Node:
    """A splat (0-d constant, broadcast when shape is not ()) or a constant array."""
    a = np.asarray(value, dtype=dtype)
    if a.ndim == 0 or _uniform(a):
        c = _run().builder.make(_CONST, (), {"value": ConstValue(a.reshape(-1)[0] if a.ndim else a)})
        shape = tuple(shape) if a.ndim == 0 else a.shape
        return c if shape == () else _run().builder.make(_BCAST, (c,), {"shape": shape})
    return _run().builder.make(_CONST, (), {"value": ConstValue(a)})


def _splat_like(value: Any, like: Node) -> Node:
    return _constant(np.asarray(value, dtype=like.dtype), like.dtype, like.shape)


def _is(x: Node, name: str) -> bool:
    """x is an untagged node of op `name` (rules never look through tagged nodes)."""
    return x.tag is None and x.op.name == name


def _single(x: Node) -> bool:
    """x has at most one reader: a rule may absorb it without duplicating work."""
    return _run().readers.get(x, 1) <= 1


def _splat_number(x: Node) -> Any:
    """The value of a numeric (bool, int, float) splat x as a Python number, else None.

    `s.item()` compares like the 0-d array s itself (exactly, for the small
    integers the rules test) but cheaply.
    """
    if x.op is not _CONST and x.op is not _BCAST:
        return None
    s = _splat(x)
    return s.item() if s is not None and s.dtype.kind in "fiub" else None


def _is_zero(x: Node) -> bool:
    if x.op is not _CONST and x.op is not _BCAST:
        return False
    s = _splat(x)
    return s is not None and s.dtype.kind in "fiub" and s.item() == 0


def _is_pos_zero(x: Node) -> bool:
    if x.op is not _CONST and x.op is not _BCAST:
        return False
    s = _splat(x)
    return s is not None and s.dtype.kind in "fiub" and s.item() == 0 and not np.signbit(s)


def _is_neg_zero(x: Node) -> bool:
    if x.op is not _CONST and x.op is not _BCAST:
        return False
    s = _splat(x)
    return s is not None and s.dtype.kind == "f" and s.item() == 0 and bool(np.signbit(s))


def _maybe_neg_zero(x: Node, depth: int = 0) -> bool:
    """Whether x may hold -0.0 somewhere (conservative; bounded look-down)."""
    if x.dtype.kind != "f":
        return False
    s = _splat(x)
    if s is not None:
        return bool(s == 0 and np.signbit(s))
    a = _const_array(x)
    if a is not None:
        return bool(np.any((a == 0) & np.signbit(a)))
    if depth > 6 or x.tag is not None:
        return True
    op = x.op
    if op.neg_zero == "never":
        return False  # results are >= +0 or never exactly zero with a sign
    if op.name == "mul" and x.inputs[0] is x.inputs[1]:
        return False  # x*x >= +0
    if isinstance(op.neg_zero, tuple):  # -0 only where all of these inputs are -0
        return all(_maybe_neg_zero(x.inputs[i], depth + 1) for i in op.neg_zero)
    return True


def _reshape(x: Node, shape: tuple) -> Node:
    return x if x.shape == tuple(shape) else _mk("reshape", x, shape=tuple(shape))


def _broadcast(x: Node, shape: tuple) -> Node:
    return x if x.shape == tuple(shape) else _mk("broadcast_to", x, shape=tuple(shape))


def _strip1(shape: tuple) -> tuple:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def _removable_copy_tag(tag: Any) -> bool:
    """Tags of the `copy` nodes that transformations insert (fresh variables)."""
    return tag is None or (isinstance(tag, tuple) and len(tag) > 0 and tag[0] == "fresh")


# --------------------------------------------------------------------------- rule tables

RULES: dict[str, list[Callable[[Node, tuple], Node | None]]] = {}
GENERIC_RULES: list[Callable[[Node, tuple], Node | None]] = []
_RULE_CACHE: dict[str, tuple] = {}  # op name -> (GENERIC_RULES + RULES[op], RULES[op])


def rule(*ops: str) -> Callable:
    """Register a rule `fn(node, new_inputs) -> Node | None` for the named ops ("*": every op).

    `node` supplies op, attrs, shape, dtype (it may still be the input graph's
    node); `new_inputs` are its rewritten inputs. A rule returns the
    replacement, built in the current builder (`symgraph.lax` helpers work),
    or None. Generic ("*") rules are tried only at nodes with a constant or
    `broadcast_to` operand, or whose op has `Op.extra` markers (while only the
    built-in ones are registered, only where one of them can fire: see `_rules_for`).
    """

    def deco(fn: Callable) -> Callable:
        _RULE_CACHE.clear()
        for name in ops:
            if name == "*":
                GENERIC_RULES.append(fn)
            else:
                RULES.setdefault(name, []).append(fn)
        return fn

    return deco


# ----- generic: wrappers, folding, splats -----


@rule("*")
def identity_wrapper(node: Node, ins: tuple) -> Node | None:
    # wrapper(..., x_i, ...) -> x_i  (custom_vjp_call & co.: opaque ops with Op.identity_of = i; the
    # elementwise identities -- copy, stop_gradient, checkpoint markers -- have rules of their own)
    i = node.op.identity_of
    if i is None or node.op.kind != "opaque":
        return None
    x = ins[i]
    return x if x.shape == node.shape and x.dtype == node.dtype else None


@rule("*")
def fold_constants(node: Node, ins: tuple) -> Node | None:
    # op(c1, c2, ...) -> constant  (the op's own NumPy implementation; results up to fold_limit elements)
    # broadcast_to(constant) is never folded: a 0-d constant broadcast is the canonical splat, and
    # a broadcast array is a view that folding would materialize (n -> n*n elements for the identity
    # basis eq(iota[:, None], iota[None, :]) of jacobian/hessian, which so stays structural, its
    # node count independent of n)
    if not ins or not node.op.foldable or node.op.kind == "opaque" or node.op is _BCAST:
        return None
    limit = _run().options.fold_limit
    vals = []
    splats = False
    for x in ins:
        a = _const_array(x)
        if a is None:
            s = _splat(x)  # a splat operand next to a constant array: c + 1.0 folds too
            if s is None:
                return None
            a = np.broadcast_to(s, x.shape)  # a view; copied below when small enough to fold
            splats = True
        vals.append(a)
    if splats and all(x.op is not _CONST for x in ins):
        return None  # all splats: fold_splats
    if node.size > limit or (splats and any(a.size > limit for a in vals)):
        return None
    if splats:
        vals = [np.array(a) for a in vals]  # writable arrays for every impl
    with np.errstate(all="ignore"):
        v = np.asarray(node.op.impl(*vals, **node.params), dtype=node.dtype)
    if v.shape != node.shape:  # pragma: no cover - an impl/shape-rule mismatch
        return None
    return _constant(v, node.dtype)



@rule("*")
def fold_splats(node: Node, ins: tuple) -> Node | None:
    # f(splat a, splat b) -> splat f(a, b); layout(splat v) -> splat v; sum/unslice/scatter(+0) -> +0
    if not ins:
        return None
    op = node.op
    name = op.name
    if op.kind == "elementwise" and not op.random:
        vals = [_splat(x) for x in ins]
        if any(v is None for v in vals) or all(x.op is _CONST for x in ins):
            return None  # not all splats, or plain 0-d constants (fold_constants handles those)
        with np.errstate(all="ignore"):
            v = np.asarray(op.impl(*vals, **node.params), dtype=node.dtype)
        return _constant(v, node.dtype, node.shape)
    if name in ("matmul", "einsum"):
        if _run().options.assume_finite and any(_is_zero(x) for x in ins):
            # matmul(0, y) -> 0  (only without inf/NaN: 0 * inf = NaN)
            return _constant(np.zeros((), node.dtype), node.dtype, node.shape)
        return None
    s = _splat(ins[0])
    if s is None:
        return None
    if node.op.copies_input and not node.op.marker:
        if name == "broadcast_to" and ins[0].op is _CONST:
            return None  # already canonical
        if node.size == 0:
            return None
        return _constant(s.astype(node.dtype), node.dtype, node.shape)
    zero = bool(s == 0) and s.dtype.kind in "fiub"
    if zero and (name == "sum" or (name in ("unslice", "scatter_add") and not np.signbit(s))):
        return _constant(np.zeros((), node.dtype), node.dtype, node.shape)  # NumPy sums (-)0.0 to +0.0
    if name == "concatenate":
        ss = [_splat(x) for x in ins]
        if all(v is not None and v.tobytes() == s.tobytes() for v in ss):
            return _constant(s, node.dtype, node.shape)
    return None


@rule("*")
def elementwise_of_broadcasts(node: Node, ins: tuple) -> Node | None:
    # f(broadcast(a, S), broadcast(b, S), splat c) -> broadcast(f(a, b, splat c), S)  (a.shape == b.shape)
    op = node.op
    if op.kind != "elementwise" or op.random or not ins:
        return None
    src = None
    for x in ins:
        if _splat(x) is not None:
            continue
        if not _is(x, "broadcast_to") or not _single(x):
            return None
        if src is None:
            src = x.inputs[0].shape
        elif x.inputs[0].shape != src:
            return None
    if src is None or src == node.shape:
        return None
    new_ins = []
    for x in ins:
        s = _splat(x)
        new_ins.append(_constant(s, x.dtype, src) if s is not None else x.inputs[0])
    return _broadcast(_run().builder.make(op, new_ins, node.attrs), node.shape)


_BUILTIN_GENERIC = (identity_wrapper, fold_constants, fold_splats, elementwise_of_broadcasts)


# ----- copies and casts -----


@rule("copy")
def copy_untagged(node: Node, ins: tuple) -> Node | None:
    # copy(x) -> x  (untagged copies; tagged ones are handled by the driver)
    return ins[0] if node.tag is None else None


@rule("cast")
def cast_same_dtype(node: Node, ins: tuple) -> Node | None:
    # cast(x, x.dtype) -> x
    return ins[0] if ins[0].dtype == node.dtype else None


@rule("cast")
def cast_round_trip(node: Node, ins: tuple) -> Node | None:
    # cast(cast(x, wider float), x.dtype) -> x  (float widening is exact)
    y = ins[0]
    if not _is(y, "cast"):
        return None
    x = y.inputs[0]
    if x.dtype == node.dtype and x.dtype.kind == "f" and y.dtype.kind == "f" and y.dtype.itemsize >= x.dtype.itemsize:
        return x
    return None


# ----- neg -----


@rule("neg")
def neg_neg(node: Node, ins: tuple) -> Node | None:
    # -(-x) -> x
    x = ins[0]
    return x.inputs[0] if _is(x, "neg") else None


@rule("neg")
def neg_of_scaled(node: Node, ins: tuple) -> Node | None:
    # -(x * c) -> x * (-c)   (exact: rounding is symmetric)
    m = ins[0]
    if _is(m, "mul") and _single(m):
        c = _splat(m.inputs[1])
        if c is not None and m.dtype.kind == "f":
            return _mk("mul", m.inputs[0], _constant(-c, m.dtype, m.shape))
    return None


# ----- add / sub -----


@rule("add")
def add_zero(node: Node, ins: tuple) -> Node | None:
    # x + (-0.0) -> x ;  x + 0.0 -> x  when x cannot be -0.0 (or assume_finite)
    a, b = ins
    for x, z in ((a, b), (b, a)):
        if _is_neg_zero(z):
            return x
        if _is_pos_zero(z) and (_run().options.assume_finite or not _maybe_neg_zero(x)):
            return x
    return None


@rule("add")
def add_neg(node: Node, ins: tuple) -> Node | None:
    # x + (-y) -> x - y ;  (-x) + y -> y - x
    a, b = ins
    if _is(b, "neg"):
        return _mk("sub", a, b.inputs[0])
    if _is(a, "neg"):
        return _mk("sub", b, a.inputs[0])
    return None


@rule("add")
def add_same(node: Node, ins: tuple) -> Node | None:
    # x + x -> x * 2   (exact, overflow included)
    a, b = ins
    if a is b and a.dtype.kind == "f":
        return _mk("mul", a, _splat_like(2, a))
    return None


@rule("sub")
def sub_zero(node: Node, ins: tuple) -> Node | None:
    # x - 0.0 -> x ;  x - (-0.0) -> x when x cannot be -0.0 ;  -0.0 - y -> -y  (0 - y -> -y if assume_finite)
    a, b = ins
    fin = _run().options.assume_finite
    if _is_pos_zero(b) or (_is_neg_zero(b) and (fin or not _maybe_neg_zero(a))):
        return a
    if _is_neg_zero(a) or (fin and _is_zero(a)):
        return _mk("neg", b)
    return None


@rule("sub")
def sub_neg(node: Node, ins: tuple) -> Node | None:
    # x - (-y) -> x + y
    a, b = ins
    return _mk("add", a, b.inputs[0]) if _is(b, "neg") else None


@rule("sub")
def sub_neg_self(node: Node, ins: tuple) -> Node | None:
    # (-x) - x -> x * (-2)   (exact: -x - x = -(x + x), with inf, NaN and -0.0 included)
    a, b = ins
    if _is(a, "neg") and a.inputs[0] is b and _single(a) and node.dtype.kind == "f":
        return _mk("mul", b, _splat_like(-2, b))
    return None


@rule("sub")
def sub_self(node: Node, ins: tuple) -> Node | None:
    # x - x -> 0   (assume_finite only: inf - inf = NaN)
    a, b = ins
    if a is b and _run().options.assume_finite:
        return _splat_like(0, node)
    return None


# ----- mul / div / pow -----


@rule("mul")
def mul_one(node: Node, ins: tuple) -> Node | None:
    # x * 1 -> x ;  x * (-1) -> -x
    a, b = ins
    for x, c in ((a, b), (b, a)):
        v = _splat_number(c)
        if v == 1:
            return x
        if v == -1 and x.dtype.kind in "fi":
            return _mk("neg", x)
    return None


@rule("mul")
def mul_zero(node: Node, ins: tuple) -> Node | None:
    # x * 0 -> 0   (assume_finite only: inf * 0 = NaN, and (-x) * 0 = -0)
    a, b = ins
    if _run().options.assume_finite and (_is_zero(a) or _is_zero(b)):
        return _splat_like(0, node)
    return None


@rule("mul")
def mul_neg(node: Node, ins: tuple) -> Node | None:
    # (-x) * (-y) -> x * y ;  (-x) * c -> x * (-c) ;  (-x) * y -> -(x * y)   (exact)
    a, b = ins
    if node.dtype.kind != "f":
        return None
    if _is(a, "neg") and _is(b, "neg"):
        return _mk("mul", a.inputs[0], b.inputs[0])
    for x, y in ((a, b), (b, a)):
        if _is(x, "neg") and _single(x):
            c = _splat(y)
            if c is not None:
                return _mk("mul", x.inputs[0], _constant(-c, y.dtype, y.shape))
            return _mk("neg", _mk("mul", x.inputs[0], y))
    return None


def _combinable(c1: float, c2: float) -> bool:
    """(x*c1)*c2 == x*(c1*c2) up to rounding, with the same overflow/underflow behaviour.

    Both factors must scale the same way (both |c| >= 1 or both <= 1): (x*2)*0.5 overflows at
    x = 1e308 where x does not, even though both are powers of two.
    """
    a1, a2 = abs(c1), abs(c2)
    if not (math.isfinite(a1) and math.isfinite(a2)) or a1 == 0 or a2 == 0:
        return False
    return (a1 >= 1 and a2 >= 1) or (a1 <= 1 and a2 <= 1)


@rule("mul")
def mul_constants(node: Node, ins: tuple) -> Node | None:
    # (x * c1) * c2 -> x * (c1 c2)   (reassociate; never across an overflow)
    a, b = ins
    c2 = _splat(b)
    if c2 is None or not _run().options.reassociate or not _is(a, "mul") or not _single(a) or node.dtype.kind != "f":
        return None
    c1 = _splat(a.inputs[1])
    if c1 is None or not _combinable(float(c1), float(c2)):
        return None
    with np.errstate(all="ignore"):
        c = np.multiply(c1, c2, dtype=node.dtype)
    if not (np.isfinite(c) and abs(c) >= np.finfo(node.dtype).tiny):
        return None  # the combined constant would overflow or underflow
    return _mk("mul", a.inputs[0], _constant(c, node.dtype, node.shape))


@rule("muladd")
def muladd_simple(node: Node, ins: tuple) -> Node | None:
    # muladd(a, 1, c) -> a + c ;  muladd(a, -1, c) -> c - a ;  muladd(a, b, -0.0) -> a * b ;
    # muladd(a, b, +0.0) -> a * b when a*b cannot be -0.0 (a is b) ;  muladd(a, 0, c) -> c (assume_finite)
    a, b, c = ins
    for x, y in ((a, b), (b, a)):
        v = _splat_number(y)
        if v == 1:
            return _mk("add", x, c)
        if v == -1:
            return _mk("sub", c, x)
    fin = _run().options.assume_finite
    if _is_neg_zero(c) or (_is_pos_zero(c) and (fin or a is b)):
        return _mk("mul", a, b)
    if fin and (_is_zero(a) or _is_zero(b)):
        return c
    return None


@rule("div")
def div_simple(node: Node, ins: tuple) -> Node | None:
    # x / 1 -> x ;  x / (-1) -> -x ;  x / 2**k -> x * 2**-k  (exact)
    a, b = ins
    c = _splat(b)
    if c is None or node.dtype.kind != "f":
        return None
    if c == 1:
        return a
    if c == -1:
        return _mk("neg", a)
    m, e = math.frexp(float(c)) if math.isfinite(float(c)) and c != 0 else (0.0, 0)
    fi = np.finfo(node.dtype)
    if abs(m) == 0.5 and fi.minexp + 2 < 1 - e < fi.maxexp - 2:
        return _mk("mul", a, _constant(np.asarray(1.0, node.dtype) / c, node.dtype, node.shape))
    return None


@rule("div")
def div_neg(node: Node, ins: tuple) -> Node | None:
    # (-x) / y -> -(x / y) ;  x / (-y) -> -(x / y) ;  (-x) / (-y) -> x / y   (exact)
    a, b = ins
    na, nb = _is(a, "neg"), _is(b, "neg")
    if na and nb:
        return _mk("div", a.inputs[0], b.inputs[0])
    if na and _single(a):
        return _mk("neg", _mk("div", a.inputs[0], b))
    if nb and _single(b):
        return _mk("neg", _mk("div", a, b.inputs[0]))
    return None


@rule("pow")
def pow_small_int(node: Node, ins: tuple) -> Node | None:
    # x ** 0 -> 1 (exact, even for NaN) ;  x ** 1 -> x ;  x ** -1 -> 1/x ;  x ** k -> x*x*... (k <= 4; reassociate)
    x, e = ins
    c = _splat(e)
    if c is None or node.dtype.kind != "f":
        return None
    if c == 0:
        return _splat_like(1, node)
    if not _run().options.reassociate:
        return None  # NumPy's general pow differs from x*x in the last bit
    if c == 1:
        return x
    if c == -1:
        return _mk("div", _splat_like(1, node), x)
    if c in (2, 3, 4):
        x2 = _mk("mul", x, x)
        return x2 if c == 2 else _mk("mul", x2, x) if c == 3 else _mk("mul", x2, x2)
    return None


# ----- select and logic -----


@rule("where")
def where_const(node: Node, ins: tuple) -> Node | None:
    # where(True, a, b) -> a ;  where(False, a, b) -> b ;  where(c, a, a) -> a ;  where(!c, a, b) -> where(c, b, a)
    c, a, b = ins
    if a is b:
        return a
    s = _splat(c)
    if s is not None:
        return a if bool(s) else b
    arr = _const_array(c)
    if arr is not None:
        if arr.all():
            return a
        if not arr.any():
            return b
    if _is(c, "logical_not"):
        return _mk("where", c.inputs[0], b, a)
    return None


@rule("logical_not")
def not_not(node: Node, ins: tuple) -> Node | None:
    # !!x -> x
    x = ins[0]
    return x.inputs[0] if _is(x, "logical_not") and x.inputs[0].dtype == node.dtype else None


@rule("abs")
def abs_abs(node: Node, ins: tuple) -> Node | None:
    # |(|x|)| -> |x| ;  |-x| -> |x|
    x = ins[0]
    if _is(x, "abs"):
        return x
    if _is(x, "neg"):
        return _mk("abs", x.inputs[0])
    return None


# ----- layout -----


@rule("reshape", "expand_dims", "squeeze")
def reshape_chain(node: Node, ins: tuple) -> Node | None:
    # reshape(x, x.shape) -> x ;  reshape(reshape(x, s1), s2) -> reshape(x, s2)
    x = ins[0]
    if x.shape == node.shape:
        return x
    if x.tag is None and x.op.view == "reshape":
        return _reshape(x.inputs[0], node.shape)
    return None


@rule("transpose")
def transpose_chain(node: Node, ins: tuple) -> Node | None:
    # transpose(x, id) -> x ;  transpose(transpose(x, p), q) -> transpose(x, p[q])
    x = ins[0]
    q = node.attr("perm")
    if tuple(q) == tuple(range(len(q))):
        return x
    if _is(x, "transpose"):
        p = x.attr("perm")
        perm = tuple(p[j] for j in q)
        y = x.inputs[0]
        return y if perm == tuple(range(len(perm))) else _mk("transpose", y, perm=perm)
    # a permutation that moves only size-1 axes is a reshape
    kept = [a for a in q if x.shape[a] != 1]
    if kept == sorted(kept):
        return _mk("reshape", x, shape=node.shape)
    return None


@rule("broadcast_to")
def broadcast_chain(node: Node, ins: tuple) -> Node | None:
    # broadcast(x, x.shape) -> x ;  broadcast(broadcast(x)) -> broadcast(x) ;  broadcast(reshape(x) adding leading 1s) -> broadcast(x)
    x = ins[0]
    if x.shape == node.shape:
        return x
    if _is(x, "broadcast_to"):
        return _broadcast(x.inputs[0], node.shape)
    if x.tag is None and x.op.view == "reshape" and _strip1(x.shape) == _strip1(x.inputs[0].shape):
        y = x.inputs[0]
        if len(y.shape) <= len(node.shape):
            return _broadcast(y, node.shape)
    return None


@rule("sum", "max", "min", "prod")
def reduce_unit_axes(node: Node, ins: tuple) -> Node | None:
    # reduce(x, axes of size 1) -> reshape(x)   (one element per output; NumPy's sum turns -0.0 into +0.0)
    x = ins[0]
    axes = node.attr("axes")
    if not all(x.shape[a] == 1 for a in axes):
        return None
    if node.op.name == "sum" and not (_run().options.assume_finite or not _maybe_neg_zero(x)):
        return None
    return _reshape(x, node.shape)


@rule("sum")
def sum_of_broadcast(node: Node, ins: tuple) -> Node | None:
    # sum(broadcast(x, S), broadcast axes) -> broadcast(reshape(x)) * count   (reassociate)
    b = ins[0]
    if not _is(b, "broadcast_to") or not _run().options.reassociate or node.dtype.kind != "f":
        return None
    x = b.inputs[0]
    S = b.shape
    axes = node.attr("axes")
    aligned = (1,) * (len(S) - x.ndim) + x.shape
    if any(aligned[a] != 1 for a in axes):
        return None
    count = int(np.prod([S[a] for a in axes], dtype=np.int64))
    if count <= 1:
        return None
    y = _broadcast(_reshape(x, tuple(d for i, d in enumerate(aligned) if i not in axes)), node.shape)
    return _mk("mul", y, _splat_like(count, node))


@rule("sum")
def sum_of_sum(node: Node, ins: tuple) -> Node | None:
    # sum(sum(x, a1), a2) -> sum(x, a1 + a2)   (reassociate)
    s = ins[0]
    if not _is(s, "sum") or not _single(s) or not _run().options.reassociate:
        return None
    a1 = s.attr("axes")
    rest = [i for i in range(s.inputs[0].ndim) if i not in a1]
    axes = tuple(sorted(set(a1) | {rest[j] for j in node.attr("axes")}))
    return _mk("sum", s.inputs[0], axes=axes)


@rule("slice")
def slice_rules(node: Node, ins: tuple) -> Node | None:
    # x[:] -> x ;  slice(unslice(x, p), p) -> x
    x = ins[0]
    st, sp, stp = node.attr("starts"), node.attr("stops"), node.attr("steps")
    if node.shape == x.shape and all(a == 0 and c == 1 for a, c in zip(st, stp)):
        return x
    if _is(x, "unslice") and (x.attr("starts"), x.attr("stops"), x.attr("steps")) == (st, sp, stp):
        return x.inputs[0]
    return None


@rule("concatenate")
def concat_single(node: Node, ins: tuple) -> Node | None:
    # concatenate([x]) -> x
    return ins[0] if len(ins) == 1 else None


# --------------------------------------------------------------------------- the rewrite pass


def _rules_for(node: Node, ins: tuple) -> tuple:
    """The rules to try at node: RULES[op], after GENERIC_RULES when one of them can apply."""
    op = node.op
    r = _RULE_CACHE.get(op.name)
    if r is None:
        r = _RULE_CACHE[op.name] = (tuple(GENERIC_RULES) + tuple(RULES.get(op.name, ())),
                                    tuple(RULES.get(op.name, ())), tuple(GENERIC_RULES) == _BUILTIN_GENERIC)
    if op.extra:
        return r[0]  # identity_wrapper (and rules registered later)
    if r[2]:
        # only the built-in generic rules: fold_constants and fold_splats need a splat or constant first
        # operand (matmul and einsum: any operand); elementwise_of_broadcasts needs a broadcast_to operand
        x = ins[0].op
        if x is _CONST or x is _BCAST:
            return r[0]
        contraction = op.name in ("matmul", "einsum")
        for x in ins:
            if x.op is _BCAST or (contraction and x.op is _CONST):
                return r[0]
        return r[1]
    # rules registered later need a constant or broadcast operand
    for x in ins:
        if x.op is _CONST or x.op is _BCAST:
            return r[0]
    return r[1]


def _rewrite_node(node: Node, ins: tuple, run: _Run) -> Node:
    """Apply generic and per-op rules at one node until none fires (bounded).

    `node` may be a node of the input graph and `ins` its rewritten inputs: rules
    read only op, attrs, shape, dtype and tag from `node`, so nothing is built
    unless no rule fires (then `node` is adopted or rebuilt on `ins`).
    """
    if node.tag is None and ins:
        if _swapped(node.op, ins):
            ins = (ins[1], ins[0]) + ins[2:]
        if not _rules_for(node, ins):  # no rule to try (the common case): what the loop below would do
            node = run.builder.adopt(node, ins)
            run.stable.add(node)
            return node
    stats = run.stats
    built = False
    for _ in range(MAX_LOCAL_STEPS):
        if node.tag is not None or not ins:
            break
        if _swapped(node.op, ins):
            ins = (ins[1], ins[0]) + ins[2:]
        for fn in _rules_for(node, ins):
            r = fn(node, ins)
            if r is not None and r is not node:
                stats[fn.__name__] += 1
                run.changes += 1
                node, ins, built = r, r.inputs, True
                break
        else:
            if not built:
                node = run.builder.adopt(node, ins)
            run.stable.add(node)
            return node
    return node if built else run.builder.adopt(node, ins)


def rewrite_pass(graph: Graph, run: _Run) -> Graph:
    """Graph -> Graph: CSE, copy removal, constant folding and the rule tables, bottom-up.

    Walks the nodes reachable from the outputs (so dead code disappears) in
    topological order, re-interns each with its rewritten inputs and applies
    `GENERIC_RULES` and `RULES[op]` until none fires. Reader counts of the
    input graph tell rules which nodes have several readers.
    """
    b = run.builder
    order = graph.toposort()
    count: dict[Node, int] = {}
    for n in order:
        for x in n.inputs:
            count[x] = count.get(x, 0) + 1
    for o in graph.outputs:
        count[o] = count.get(o, 0) + 1
    readers: dict[Node, int] = {}
    prev_readers = run.readers
    run.readers = readers
    stable = run.stable
    new: dict[Node, Node] = {}
    for n in order:
        op = n.op
        if op.name == "input" or (not n.inputs and n.tag is not None):
            r = n
        elif n in stable and all(new[x] is x and readers.get(x) == prev_readers.get(x) for x in n.inputs):
            r = n  # no rule fired here last round and nothing it reads has changed
        else:
            ins = tuple([new[x] for x in n.inputs])
            b.cur_meta = meta(n)
            if op.name == "copy" and _removable_copy_tag(n.tag):
                r = ins[0]  # copy(x) -> x  (fresh variables of finished transformations)
                run.stats["remove_copy"] += 1
                run.changes += 1
            elif n.tag is not None:
                r = b.adopt(n, ins)  # protected: rebuilt as is
            elif op is _CONST:
                a = n.attrs[0][1].array
                if a.ndim > 0 and a.size > 1 and _uniform(a):
                    r = _constant(a, a.dtype)  # uniform constant -> broadcast_to(0-d constant)
                    run.stats["splat_constant"] += 1
                    run.changes += 1
                else:
                    r = b.adopt(n, ins)
            else:
                r = _rewrite_node(n, ins, run)
        new[n] = r
        readers[r] = readers.get(r, 0) + count.get(n, 0)
    outs = [new[o] for o in graph.outputs]
    if all(a is o for a, o in zip(outs, graph.outputs)):
        return graph  # the same nodes: keep the graph (and its topological order)
    return Graph(graph.inputs, outs, graph.in_tree, graph.out_tree, name=graph.name)


# --------------------------------------------------------------------------- polynomial canonicalization
#
# A polynomial is a dict {monomial: coefficient}; a monomial is a sorted tuple of
# (atom index, exponent) pairs; () is the constant monomial. Coefficients are
# Python floats.


def _poly_const(c: float) -> dict:
    return {(): c} if c != 0 else {}


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    if not m1:
        return m2
    if not m2:
        return m1
    if len(m1) == 1 and len(m2) > 1:
        m1, m2 = m2, m1
    if len(m2) == 1:  # insert one factor into the sorted monomial
        v, e = m2[0]
        k = bisect.bisect_left(m1, (v,))
        if k < len(m1) and m1[k][0] == v:
            return m1[:k] + ((v, m1[k][1] + e),) + m1[k + 1:]
        return m1[:k] + m2 + m1[k:]
    d = dict(m1)
    for v, e in m2:
        d[v] = d.get(v, 0) + e
    return tuple(sorted(d.items()))


def _padd(p: dict, q: dict, sign: float = 1.0) -> dict:
    r = dict(p)
    for m, c in q.items():
        v = r.get(m, 0.0) + sign * c
        if v == 0:
            r.pop(m, None)
        else:
            r[m] = v
    return r


def _pmul(p: dict, q: dict) -> dict:
    r: dict = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = _mono_mul(m1, m2)
            v = r.get(m, 0.0) + c1 * c2
            r[m] = v
    return {m: c for m, c in r.items() if c != 0}


def _pscale(p: dict, c: float) -> dict:
    return {m: v * c for m, v in p.items() if v * c != 0}


def _degree(p: dict) -> int:
    return max((sum(e for _, e in m) for m in p), default=0)



def _bounded_atom(x: Node, bound: dict[Node, float]) -> float:
    """A magnitude bound of x from the bounds of its inputs (inf when unknown)."""
    name = x.op.name
    if x.dtype.kind != "f":
        return math.inf
    if x.op is _CONST:
        a = x.attrs[0][1].array
        if a.size == 0:
            return 0.0
        m = float(np.max(np.abs(a)))
        return m if math.isfinite(m) else math.inf
    if not x.inputs:
        return math.inf
    if x.op.magnitude == "unit":  # |f(x)| <= 1 (or NaN)
        return 1.0
    b = [bound.get(i, math.inf) for i in x.inputs]
    if name == "mul":
        return b[0] * b[1] if b[0] and b[1] else 0.0
    if name == "add" or name == "sub":
        return b[0] + b[1]
    if name == "muladd":
        return (b[0] * b[1] if b[0] and b[1] else 0.0) + b[2]
    if x.op.magnitude == "input":  # |f(x)| <= max |x|
        return b[0]
    if name == "cast":
        src = x.inputs[0].dtype
        if src.kind == "b":
            return 1.0
        if src.kind in "iu":
            return float(np.iinfo(src).max)
        return b[0]
    if name == "div":
        s = _splat(x.inputs[1])
        return b[0] / abs(float(s)) if s is not None and s != 0 else math.inf
    if name == "pow":
        s = _splat(x.inputs[1])
        if s is not None and float(s).is_integer() and 0 <= s <= MAX_POW:
            return b[0] ** int(s) if b[0] < 1e100 else math.inf
        return math.inf
    if name in ("maximum", "minimum"):
        return max(b)
    if name == "where":
        return max(b[1], b[2])
    if name == "sum":
        k = int(np.prod([x.inputs[0].shape[a] for a in x.attr("axes")], dtype=np.int64))
        return b[0] * k
    if name == "exp":
        return math.exp(b[0]) if b[0] < 700 else math.inf
    if name == "sqrt":
        return math.sqrt(b[0]) if math.isfinite(b[0]) else math.inf
    return math.inf


def _poly_role(x: Node) -> int:
    """0: not a polynomial op; 1: add/sub/neg/mul/muladd; 2: div by constant; 3: pow by small integer."""
    if x.tag is not None or x.dtype.kind != "f":
        return 0
    name = x.op.name
    if name in ("add", "sub", "mul", "neg", "muladd"):
        return 1
    if name == "div":
        s = _splat(x.inputs[1])
        return 2 if s is not None and s != 0 and np.isfinite(s) else 0
    if name == "pow":
        s = _splat(x.inputs[1])
        return 3 if s is not None and np.isfinite(s) and float(s).is_integer() and 1 <= s <= MAX_POW else 0
    return 0


class _DryRun:
    """Emission factory that only counts distinct operations (for the cost test)."""

    def __init__(self) -> None:
        self.keys: dict[tuple, int] = {}
        self.ops = 0

    def atom(self, i: int) -> Any:
        return ("atom", i)

    def const(self, c: float) -> Any:
        return ("const", c)

    def op(self, name: str, a: Any, b: Any = None, c: Any = None) -> Any:
        # a and b commute: one key for both orders
        k = (name, frozenset((a, b)), None, c) if name in ("add", "mul", "muladd") else (name, a, b, c)
        if k not in self.keys:
            self.keys[k] = len(self.keys)
            if not all(x is None or x[0] == "const" for x in (a, b, c)):
                self.ops += 1
        return ("op", self.keys[k])


class _NodeFactory:
    """Emission factory that builds nodes of one shape and dtype in the pass builder."""

    def __init__(self, atoms: list[Node], new: dict[Node, Node], like: Node, run: _Run):
        self.atoms = atoms  # all atoms of the pass, numbered; `new` maps old node -> rewritten node
        self.new = new
        self.like = like
        self.builder = run.builder
        self.splats = run.splats

    def atom(self, i: int) -> Node:
        a = self.atoms[i]
        return self.new.get(a, a)

    def const(self, c: float) -> Node:
        like = self.like
        if not math.isfinite(c):
            return _splat_like(c, like)
        # the same value, dtype and shape always interns to the same splat: skip building its key
        key = (type(c), c, math.copysign(1.0, c), like.dtype, like.shape)
        memo = self.splats
        h = memo.get(key)
        if h is None:
            h = memo[key] = _splat_like(c, like)
        return h

    def op(self, name: str, a: Node, b: Node | None = None, c: Node | None = None) -> Node:
        ins = (a,) if b is None else (a, b) if c is None else (a, b, c)
        return self.builder.make(OPS[name], ins)  # as _mk(name, *ins)


class _Horner:
    """The steps of `_emit` for one polynomial: powers of a variable (built once), sums, Horner steps.

    Values are (None, c), the constant c, or (h, s), s * h for a handle h of
    the factory F and a sign s = +1 or -1.
    """

    def __init__(self, F: Any):
        self.F = F
        self.powers: dict[tuple, Any] = {}

    def power(self, v: int, k: int) -> Any:
        F = self.F
        key = (v, k)
        h = self.powers.get(key)
        if h is None:
            if k == 1:
                h = F.atom(v)
            else:
                half = self.power(v, k // 2)
                h = F.op("mul", half, half)
                if k % 2:
                    h = F.op("mul", h, F.atom(v))
            self.powers[key] = h
        return h

    def add(self, x: tuple, y: tuple) -> tuple:
        """x + y."""
        F = self.F
        if x[0] is None:
            x, y = y, x
        (a, sa), (b, sb) = x, y
        if a is None:
            return (None, sa + sb)
        if b is None:  # sa*a + c
            if sb == 0:
                return x
            if sa > 0:
                return (F.op("add", a, F.const(sb)), 1) if sb > 0 else (F.op("sub", a, F.const(-sb)), 1)
            return (F.op("sub", F.const(sb), a), 1)
        if sa == sb:
            return (F.op("add", a, b), sa)
        return (F.op("sub", a, b), 1) if sa > 0 else (F.op("sub", b, a), 1)

    def scale(self, x: tuple, q: Any) -> tuple:
        """x * q for a power handle q."""
        F = self.F
        a, sa = x
        if a is not None:
            return (F.op("mul", a, q), sa)
        if abs(sa) == 1:
            return (q, sa)
        return (F.op("mul", q, F.const(sa)), 1)

    def muladd(self, x: tuple, q: Any, y: tuple) -> tuple:
        """x * q + y for a power handle q: one muladd unless it is a plain add/mul."""
        F = self.F
        (a, sa), (b, sb) = x, y
        if a is None:  # constant sa
            if abs(sa) == 1:
                return self.add((q, sa), y)
            if b is None:
                return self.scale(x, q) if sb == 0 else (F.op("muladd", q, F.const(sa), F.const(sb)), 1)
            return (F.op("muladd", q, F.const(sa * sb), b), sb)  # sb*(q*(sa*sb) + b)
        if b is None:
            return self.scale(x, q) if sb == 0 else (F.op("muladd", a, q, F.const(sa * sb)), sa)  # sa*(a*q + sa*c)
        if sa == sb:
            return (F.op("muladd", a, q, b), sa)
        return self.add(self.scale(x, q), y)

    def rec(self, q: dict) -> tuple:
        if not q:
            return (None, 0.0)
        if len(q) == 1 and () in q:
            return (None, q[()])
        freq: dict[int, int] = {}
        for m in q:
            for v, _ in m:
                freq[v] = freq.get(v, 0) + 1
        v = -1
        best = 0
        for w, f in freq.items():  # the most frequent variable; the lowest index on ties
            if f > best or (f == best and w < v):
                v, best = w, f
        groups: dict[int, dict] = {}
        for m, c in q.items():
            e = 0
            rest = []
            for w, k in m:
                if w == v:
                    e = k
                else:
                    rest.append((w, k))
            groups.setdefault(e, {})[tuple(rest)] = c
        ks = sorted(groups, reverse=True)
        acc = self.rec(groups[ks[0]])
        for i in range(1, len(ks)):
            acc = self.muladd(acc, self.power(v, ks[i - 1] - ks[i]), self.rec(groups[ks[i]]))
        if ks[-1] > 0:
            acc = self.scale(acc, self.power(v, ks[-1]))
        return acc


def _dry_ops(p: dict, memo: dict[frozenset, int]) -> int:
    """The number of operations `_emit(p, _DryRun())` counts, memoized.

    The count depends on the polynomial and on the order of its atom indices
    only (Horner picks variables by frequency, then by index), so polynomials
    equal up to an order-preserving renumbering of atoms share one entry.
    """
    rank = {v: i for i, v in enumerate(sorted({v for m in p for v, _ in m}))}
    key = frozenset((tuple([(rank[v], e) for v, e in m]), c) for m, c in p.items())
    ops = memo.get(key)
    if ops is None:
        dry = _DryRun()
        _emit(p, dry)
        ops = memo[key] = dry.ops
    return ops


def _emit(p: dict, F: Any) -> Any:
    """Build polynomial p with multivariate Horner (greedy variable order) and muladd steps.

    Each Horner step acc * v**k + rest is one `muladd` (a*b + c, rounded twice,
    so equal bit for bit to mul then add). Gaps between the exponents of v are
    powers of v built once and shared, so an even or odd polynomial in t comes
    out in s = t*t: 2t^3 - 2t = t * muladd(s, 2, -2). Constant coefficients
    stay inside the steps (the leading one is the multiplier of the innermost
    step, never a separate scaling) and signs of non-constant parts are folded
    into add/sub where possible.

    Returns a handle of the factory F. Each recursion level either lowers the
    degree of every monomial it keeps (the groups with v) or drops at least one
    monomial (the group without v), so the depth is at most
    MAX_POLY_TERMS + MAX_POLY_DEGREE (112), independent of the graph's depth.
    """
    h, s = _Horner(F).rec(p)
    if h is None:
        return F.const(s)
    return F.op("neg", h) if s < 0 else h


def polynomial_pass(graph: Graph, run: _Run) -> Graph:
    """Graph -> Graph: canonicalize elementwise polynomial regions (needs `reassociate`).

    A region is a maximal set of float add/sub/neg/mul nodes (plus division by
    a constant and pow by a small integer) whose values flow only to one root:
    a region node read by a non-polynomial node, by two regions, or by an
    output is a root. Everything else a region reads is an atom (or a splat
    constant, a coefficient). Each root's polynomial in its atoms is expanded
    with like terms collected; when its Horner form needs fewer operations
    than the region has, the root is rebuilt from it and the region dies.

    Unless `assume_finite`, a root is rewritten only when every atom and every
    region value has a magnitude bound below the dtype's overflow threshold
    (no inf can appear on either side) and the polynomial still reads every
    atom (a NaN atom still makes the result NaN).
    """
    if not run.options.reassociate:
        return graph
    order = graph.toposort()
    role: dict[Node, int] = {}  # the region candidates (nodes keyed by identity, as everywhere here)
    for n in order:
        r = _poly_role(n)
        if r:
            role[n] = r
    if not role:
        return graph
    outs = set(graph.outputs)
    rd: dict[Node, list[Node]] = {}  # readers of the region candidates
    for n in order:
        for x in n.inputs:
            if x in role:
                lst = rd.get(x)
                if lst is None:
                    rd[x] = [n]
                else:
                    lst.append(n)
    # ownership: the root each region node's value flows to (reverse topological order)
    owner: dict[Node, Node] = {}
    size: dict[Node, int] = {}
    for n in reversed(order):
        if n not in role:
            continue
        readers = rd.get(n)
        o: Node | None = None
        if n in outs or not readers:
            o = n
        else:
            for r in readers:
                if r not in role:
                    o = n  # read outside the region
                    break
                ro = owner[r]
                if o is None:
                    o = ro
                elif o is not ro:
                    o = n  # read by two regions
                    break
        owner[n] = o  # type: ignore[assignment]
        size[o] = size.get(o, 0) + 1  # type: ignore[index]
    if all(k == 1 for k in size.values()):
        return graph  # only regions of one node: nothing to rewrite
    fin = run.options.assume_finite
    bound: dict[Node, float] = {}
    if not fin:  # with assume_finite no bound is read
        for n in order:
            bound[n] = _bounded_atom(n, bound)
    # polynomials of region nodes (forward order); atoms numbered per pass
    atom_ix: dict[Node, int] = {}
    atoms: list[Node] = []
    poly: dict[Node, dict | None] = {}
    deg: dict[Node, int] = {}  # an upper bound of each polynomial's total degree
    limits: dict[np.dtype, float] = {}

    def leaf(x: Node, lim: float) -> tuple[dict | None, int]:
        s = _splat(x) if x.op is _CONST or x.op is _BCAST else None
        if s is not None and s.dtype.kind == "f" and (math.isfinite(s) if s.dtype.itemsize <= 8 else np.isfinite(s)):
            return _poly_const(float(s)), 0
        if x in role and owner[x] is not x:
            return poly[x], deg.get(x, 0)
        if not fin and not bound[x] < lim:
            return None, 0
        i = atom_ix.get(x)
        if i is None:
            i = atom_ix[x] = len(atoms)
            atoms.append(x)
        return {((i, 1),): 1.0}, 1

    for n in order:
        if n not in role:
            continue
        lim = limits.get(n.dtype)
        if lim is None:
            lim = limits[n.dtype] = _limit(n.dtype)
        ls = [leaf(x, lim) for x in n.inputs]  # every input: atoms are numbered in this order
        if size[owner[n]] == 1:
            poly[n] = None  # a region of one node is never rewritten (its atoms are numbered all the same)
            continue
        ps, ds = zip(*ls)
        if None in ps:
            poly[n] = None
            continue
        name = n.op.name
        if name == "add":
            p = _padd(ps[0], ps[1])
            d = max(ds)
        elif name == "sub":
            p = _padd(ps[0], ps[1], -1.0)
            d = max(ds)
        elif name == "neg":
            p = _pscale(ps[0], -1.0)
            d = ds[0]
        elif name == "mul":
            p = _pmul(ps[0], ps[1])
            d = ds[0] + ds[1]
        elif name == "muladd":
            p = _padd(_pmul(ps[0], ps[1]), ps[2])
            d = max(ds[0] + ds[1], ds[2])
        elif name == "div":
            p = _pscale(ps[0], 1.0 / float(_splat(n.inputs[1])))
            d = ds[0]
        else:  # pow
            k = int(_splat(n.inputs[1]))
            p = ps[0]
            for _ in range(k - 1):
                p = _pmul(p, ps[0])
                if len(p) > MAX_POLY_TERMS:
                    break
            d = ds[0] * k
        if d > MAX_POLY_DEGREE:
            d = _degree(p)  # the bound is too high: the exact degree decides
        if len(p) > MAX_POLY_TERMS or d > MAX_POLY_DEGREE:
            p = None
        poly[n] = p
        deg[n] = d
    # accept roots whose Horner form is cheaper
    b = run.builder
    new: dict[Node, Node] = {}
    for n in order:
        ins = n.inputs
        if n in role and owner[n] is n and poly[n] is not None and size[n] > 1:
            p = poly[n]
            if _dry_ops(p, run.dry_ops) < size[n] and _safe_region(n, p, owner, role, bound, atom_ix, atoms, fin):
                b.cur_meta = meta(n)
                h = _emit(p, _NodeFactory(atoms, new, n, run))
                new[n] = h
                run.stats["polynomial"] += 1
                run.changes += 1
                continue
        if not new:
            continue
        for x in ins:
            if new.get(x, x) is not x:
                break
        else:
            continue  # reads nothing rewritten
        new[n] = b.remake(n, tuple([new.get(x, x) for x in ins]), meta(n))
    if not new:
        return graph  # no root rewritten
    return Graph(graph.inputs, [new.get(o, o) for o in graph.outputs], graph.in_tree, graph.out_tree,
                 name=graph.name)


def _limit(dt: np.dtype) -> float:
    return float(np.finfo(dt).max) * 2.0 ** -16


def _safe_region(root: Node, p: dict, owner: dict, role: dict, bound: dict, atom_ix: dict, atoms: list,
                 fin: bool) -> bool:
    """No inf on either side and every atom kept (see `polynomial_pass`)."""
    if fin:
        return True
    lim = _limit(root.dtype)
    used: set[int] = set()
    stack = [root]
    seen = {root}
    while stack:
        n = stack.pop()
        if not bound[n] < lim:
            return False
        for x in n.inputs:
            if x in seen:
                continue
            seen.add(x)
            if x in role and owner[x] is root:
                stack.append(x)
            elif x in atom_ix:
                used.add(atom_ix[x])
    kept = {v for m in p for v, _ in m}
    if not used <= kept:
        return False
    total = 0.0
    for m, c in p.items():
        t = abs(c)
        for v, e in m:
            t *= max(1.0, bound[atoms[v]]) ** e
        total += t
    return total < lim


# --------------------------------------------------------------------------- pipeline

PIPELINE: list[tuple[str, Callable[[Graph, _Run], Graph]]] = [
    ("rewrite", rewrite_pass),  # CSE, copy removal, folding, RULES; rebuild from outputs = DCE
    ("polynomial", polynomial_pass),  # canonical sums of monomials in Horner form
]


def _dump(stage: str, graph: Graph, on_stage: Callable | None) -> None:
    if on_stage is not None:
        on_stage(stage, graph)
    fn = getattr(viz, "dump_stage", None)
    if fn is not None:
        fn(stage, graph)


def simplify(graph: Graph, *, reassociate: bool = True, assume_finite: bool = False,
             fold_limit: int = FOLD_LIMIT, builder: Builder | None = None,
             max_iterations: int = MAX_ITERATIONS, on_stage: Callable[[str, Graph], None] | None = None,
             stats: dict | None = None) -> Graph:
    """Graph -> Graph: CSE, constant folding, algebraic rewrites, polynomial canonicalization, DCE.

    Runs `PIPELINE` (the rewrite pass, then the polynomial pass) until a round
    changes nothing. The result computes the same values as `graph`: bit for
    bit with `reassociate=False`; up to rounding otherwise (see the module
    docstring for what each switch allows). Nodes keep the role and source
    location of the node they replace. Inputs are kept (same nodes, same order).

    Args:
        graph: any graph.
        reassociate: allow rewrites that change rounding only (default True).
        assume_finite: assume no NaN/inf and ignore the sign of zero (default False).
        fold_limit: largest folded constant, in elements.
        builder: build the result in this builder (default: a fresh one), e.g.
            to compare it by identity with nodes built there.
        max_iterations: bound on pipeline rounds.
        on_stage: called as on_stage(stage_name, graph) after each stage of
            each round (stage names "simplify.<round>.<stage>"); stages are
            also passed to `symgraph.viz.dump_stage` (SYMGRAPH_DUMP).
        stats: if given, filled with rule firing counts, "rounds", "seconds",
            "nodes_in", "nodes_out".

    Returns:
        A new Graph with the same inputs, in_tree, out_tree and name.

    References:
        Rules after PyTensor's canonicalize/specialize (single-client rule),
        fixed-point rewriting after tinygrad's graph_rewrite; Horner's scheme.
    """
    if not isinstance(graph, Graph):
        raise SymgraphError(f"simplify: expected a Graph (from sg.trace), got {type(graph).__name__}")
    t0 = time.perf_counter()
    opts = SimplifyOptions(reassociate=reassociate, assume_finite=assume_finite, fold_limit=fold_limit)
    pb = _PassBuilder(builder)
    run = _Run(opts, pb)
    prev = getattr(_local, "run", None)
    _local.run = run
    rounds = 0
    with collector_paused():  # the pass allocates many small acyclic objects; collections would rescan the graph
        try:
            with pb, source_location(_NOLOC), role(current_role()):  # both restored on exit
                g = graph
                for it in range(max_iterations):
                    rounds += 1
                    run.changes = 0
                    for name, fn in PIPELINE:
                        key = tuple(g.outputs)
                        last = run.settled.get(name)
                        if last is not None and len(last) == len(key) and all(a is b for a, b in zip(last, key)):
                            continue  # this stage already left exactly this graph unchanged
                        before = run.changes
                        g = fn(g, run)
                        if run.changes == before:
                            run.settled[name] = tuple(g.outputs)
                        _dump(f"simplify.{it}.{name}", g, on_stage)
                    if run.changes == 0:
                        break
            if g is graph:  # nothing changed: still a new Graph (same inputs, outputs and trees)
                g = Graph(graph.inputs, graph.outputs, graph.in_tree, graph.out_tree, name=graph.name)
            if stats is not None:
                stats.update(run.stats)
                stats["rounds"] = rounds
                stats["seconds"] = time.perf_counter() - t0
                stats["nodes_in"] = len(graph)
                stats["nodes_out"] = len(g)
        finally:
            _local.run = prev
            # Drop the intermediate nodes (builder table, rounds' state) while the collector is still
            # off: only the result survives, so the collection that follows scans that alone.
            run = pb = None  # type: ignore[assignment]
    return g
