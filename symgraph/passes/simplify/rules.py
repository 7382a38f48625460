"""The rewrite rules of `simplify`, each commented with its identity, and their registry.

`rule(*ops)` registers a function `fn(node, new_inputs) -> Node | None` in
`RULES` (per op name) or `GENERIC_RULES` ("*"); `_rules_for` picks the ones
to try at a node. Rules build their results with the helpers of `context`
in the current `simplify` call's builder. The semantics (exact, `reassociate`,
`assume_finite`) are stated in the package docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...ir import Node
from .analysis import (
    _BCAST,
    _CONST,
    _const_array,
    _is,
    _is_neg_zero,
    _is_pos_zero,
    _is_zero,
    _maybe_neg_zero,
    _splat,
    _splat_number,
    _strip1,
)
from .context import _broadcast, _constant, _mk, _reshape, _run, _single, _splat_like
from .options import SUM_UNROLL_MAX, SUM_UNROLL_MIN_SIZE

# --------------------------------------------------------------------------- the registry

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
    if op.kind == "contraction":
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
def sum_of_few(node: Node, ins: tuple) -> Node | None:
    # sum(x, last axis of k <= SUM_UNROLL_MAX) -> x[..., 0] + ... + x[..., k - 1]   (the loop's order;
    # the adds fuse with the sum's readers, where a reduction is a kernel and a buffer of its own:
    # squared distances of points in 3-d, 93 ms as sum + exp, 27 ms as adds, n = 2000)
    x = ins[0]
    axes = node.attr("axes")
    k = x.shape[-1] if x.ndim else 0
    if axes != (x.ndim - 1,) or not 2 <= k <= SUM_UNROLL_MAX or node.size < SUM_UNROLL_MIN_SIZE \
            or node.dtype.kind != "f" or not _run().options.reassociate:
        return None
    if not (_run().options.assume_finite or not _maybe_neg_zero(x)):
        return None  # NumPy's sum of -0.0s is +0.0, their adds -0.0
    lead = x.shape[:-1]
    acc = None
    for i in range(k):
        part = _reshape(_mk("slice", x, starts=(0,) * len(lead) + (i,), stops=lead + (i + 1,),
                            steps=(1,) * x.ndim), node.shape)
        acc = part if acc is None else _mk("add", acc, part)
    return acc


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


def _pieces_along(x: Node, shape: tuple) -> tuple[int, list] | None:
    """(axis, [(start, stop, node or None for zeros), ...]) when x is an unslice with unit steps that is full along
    every axis but one, or a concatenate (read only by this add) of such pieces; its values piece by piece."""
    if _is(x, "unslice"):
        st, sp, stp = x.attr("starts"), x.attr("stops"), x.attr("steps")
        axes = [i for i in range(len(shape)) if not (st[i] == 0 and sp[i] == shape[i])]
        if any(v != 1 for v in stp) or len(axes) != 1 or not _single(x):
            return None
        ax = axes[0]
        out = [(st[ax], sp[ax], x.inputs[0])]
        return ax, ([(0, st[ax], None)] if st[ax] else []) + out + ([(sp[ax], shape[ax], None)] if sp[ax] < shape[ax] else [])
    if _is(x, "concatenate") and _single(x):
        ax, off, out = x.attr("axis"), 0, []
        for y in x.inputs:
            n = y.shape[ax]
            out.append((off, off + n, None if _is_zero(y) and not _maybe_neg_zero(y) else y))
            off += n
        return ax, out
    return None


def _plus_zero(y: Node) -> Node:
    """y + 0.0 (y plus the padding's zero), once."""
    if _is(y, "add") and _is_pos_zero(y.inputs[1]):
        return y
    return _mk("add", y, _broadcast(_constant(0.0, y.dtype), y.shape))


@rule("add")
def add_unslices(node: Node, ins: tuple) -> Node | None:
    """unslice(a, R1) + unslice(b, R2), boxes full along every axis but one: one concatenate of the pieces
    (a + 0, zeros, b + 0, ...; a + b where the boxes are the same), also when either operand is already such a
    concatenate; unslice(a, R) + unslice(b, R) for any box -> unslice(a + b, R).

    The fan-out sum of the cotangents of slices of one array (x[..., 0:3], x[..., 3:6], ... of a parameter vector)
    then writes each element once, piece by piece (codegen stores a concatenate's operands in place), instead of
    adding zero-padded arrays of the full shape. Exact: at every element it adds the same two values as before
    (a piece, or the padding's +0.0). Only where no piece of one operand cuts a piece of the other, for equal
    shapes and float dtypes, and for operands read by this add alone.
    """
    a, b = ins
    if a is b or a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind not in "fc":
        return None
    if _is(a, "unslice") and _is(b, "unslice") and _single(a) and _single(b) and \
            (a.attr("starts"), a.attr("stops"), a.attr("steps")) == (b.attr("starts"), b.attr("stops"), b.attr("steps")):
        return _mk("unslice", _mk("add", a.inputs[0], b.inputs[0]), shape=a.shape, starts=a.attr("starts"),
                   stops=a.attr("stops"), steps=a.attr("steps"))
    if not ((_is(a, "unslice") or _is(b, "unslice")) and all(_is(x, "unslice") or _is(x, "concatenate") for x in ins)):
        return None
    pa, pb = _pieces_along(a, a.shape), _pieces_along(b, b.shape)
    if pa is None or pb is None or pa[0] != pb[0]:
        return None
    ax = pa[0]
    cuts = sorted({e for p in (pa[1], pb[1]) for s0, s1, y in p if y is not None for e in (s0, s1)} | {0, a.shape[ax]})

    def inside(pieces: list, s0: int, s1: int) -> Node | None | bool:
        """The operand's node on [s0, s1) (None: zeros), or False when a piece of it is cut there."""
        for p0, p1, y in pieces:
            if p0 <= s0 and s1 <= p1:
                return y if y is None or (p0, p1) == (s0, s1) else False
            if p0 < s1 and s0 < p1 and y is not None:
                return False
        return None

    out: list = []
    for s0, s1 in zip(cuts[:-1], cuts[1:]):
        if s1 == s0:
            continue
        ya, yb = inside(pa[1], s0, s1), inside(pb[1], s0, s1)
        if ya is False or yb is False:
            return None
        if ya is None and yb is None:
            piece = None
        elif ya is None or yb is None:
            piece = _plus_zero(ya if yb is None else yb)
        else:
            piece = _mk("add", ya, yb)
        if piece is None and out and out[-1][2] is None:
            out[-1] = (out[-1][0], s1, None)
        else:
            out.append((s0, s1, piece))
    nodes = [p if p is not None else _constant(0.0, a.dtype, a.shape[:ax] + (s1 - s0,) + a.shape[ax + 1:])
             for s0, s1, p in out]
    return nodes[0] if len(nodes) == 1 else _mk("concatenate", *nodes, axis=ax)


@rule("concatenate")
def concat_single(node: Node, ins: tuple) -> Node | None:
    # concatenate([x]) -> x
    return ins[0] if len(ins) == 1 else None


@rule("concatenate")
def concat_flatten(node: Node, ins: tuple) -> Node | None:
    # concatenate([concatenate([a, b]), c]) -> concatenate([a, b, c]) along one axis (the inner one read only here;
    # also through the + 0.0 of `add_unslices`, which moves onto the pieces): one copy instead of one per level
    ax = node.attr("axis")
    out, changed = [], False
    for x in ins:
        inner = x
        zero = None
        if _is(x, "add") and _is_pos_zero(x.inputs[1]) and _single(x):
            inner, zero = x.inputs[0], x.inputs[1]
        if _is(inner, "concatenate") and inner.attr("axis") == ax and _single(inner):
            for p in inner.inputs:
                out.append(p if zero is None else _mk("add", p, _broadcast(_constant(0.0, p.dtype), p.shape)))
            changed = True
        else:
            out.append(x)
    return _mk("concatenate", *out, axis=ax) if changed else None


# ----- which rules to try at a node -----


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
        contraction = op.kind == "contraction"
        for x in ins:
            if x.op is _BCAST or (contraction and x.op is _CONST):
                return r[0]
        return r[1]
    # rules registered later need a constant or broadcast operand
    for x in ins:
        if x.op is _CONST or x.op is _BCAST:
            return r[0]
    return r[1]
