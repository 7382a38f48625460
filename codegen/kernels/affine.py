"""Affine index forms: `Aff`, an integer linear form over loop variables and data-dependent atoms.

A loop kernel addresses every buffer through an Aff of its loop variables, so layout ops
(broadcast, transpose, slice, reshape, ...) are index arithmetic, never copies. Here are the
form itself, exact division by a constant where the ranges allow it (`aff_divmod`, and its
inverse `fold_divmod`), and the row-major index maps of reshapes (`reshape_index`,
`merge_groups`, `merge_index`) and of a loop domain (`domain_vars`, `flat_offset`).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from .expr import Expr

__all__ = ["Aff", "aff_divmod", "fold_divmod", "c_strides", "reshape_index", "merge_groups", "merge_index",
           "domain_vars", "flat_offset"]


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



def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order element strides of a shape."""
    st = []
    acc = 1
    for d in reversed(shape):
        st.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(st))



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


def flat_offset(shape: tuple[int, ...], idx: tuple[Aff, ...]) -> Aff:
    """The row-major element offset of index idx into an array of `shape`."""
    off = Aff()
    for a, s in zip(idx, c_strides(shape)):
        off = off + a.scale(s)
    return off

