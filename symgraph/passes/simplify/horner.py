"""Emitting a polynomial in Horner form (`_emit`), into nodes or into an operation count.

A polynomial is a dict {monomial: coefficient}; a monomial is a sorted tuple
of (atom index, exponent) pairs; () is the constant monomial. `_emit` writes
one with multivariate Horner and `muladd` steps through a factory:
`_NodeFactory` builds nodes in the pass builder, `_DryRun` only counts the
distinct operations (the cost the polynomial stage compares, `_dry_ops`).
"""

from __future__ import annotations

import math
from typing import Any

from ...ir import Node
from ...ops import OPS
from .context import _Run, _splat_like


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
        k = (name, frozenset((a, b)), None, c) if OPS[name].commutative else (name, a, b, c)
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
