"""Linear algebra: products and contractions (matmul, dot, inner, outer, einsum, tensordot) and norms.

`linalg` is the class that mirrors `np.linalg` (the subset that traces).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import ShapeError, UnsupportedOpError
from ..ir import Node
from .arithmetic import multiply
from .base import _ndim, _shape
from .elementary import sqrt
from .layout import ravel, reshape
from .logic import greater, where
from .reductions import sum

__all__ = ["dot", "einsum", "inner", "linalg", "matmul", "norm", "outer", "tensordot", "vdot"]


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """Euclidean norm sqrt(sum(x**2)); its derivative at 0 is taken as 0 (a subgradient).

    Raises:
        UnsupportedOpError: for ord other than None/2/'fro'.
    """
    if ord not in (None, 2, "fro"):
        raise UnsupportedOpError(f"norm(ord={ord!r}) is not supported; only the Euclidean/Frobenius norm")
    s = sum(multiply(x, x), axis, keepdims)
    # sqrt(s) with a safe derivative at s = 0: where(s > 0, sqrt(s), 0) on a guarded input.
    pos = greater(s, 0.0)
    return where(pos, sqrt(where(pos, s, 1.0)), 0.0)


def matmul(a: Any, b: Any) -> Any:
    """Matrix product with NumPy semantics (vectors, batches, broadcasting)."""
    return L.matmul(a, b)


def dot(a: Any, b: Any) -> Any:
    """np.dot for 0-d, 1-d and 2-d operands (and N-d @ 1-d)."""
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    if _ndim(b) <= 2 or _ndim(a) <= 2 and _ndim(b) <= 2:
        return L.matmul(a, b)
    raise UnsupportedOpError("np.dot with an operand of more than 2 dimensions is not supported; use matmul or einsum")


def vdot(a: Any, b: Any) -> Any:
    """Dot product of flattened arrays."""
    return sum(multiply(ravel(a), ravel(b)))


def inner(a: Any, b: Any) -> Any:
    """Inner product over the last axis: shape a.shape[:-1] + b.shape[:-1] (as np.inner)."""
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    return tensordot(a, b, axes=([-1], [-1]))


def outer(a: Any, b: Any) -> Any:
    """Outer product of flattened a and b."""
    return multiply(reshape(ravel(a), (-1, 1)), reshape(ravel(b), (1, -1)))


def einsum(spec: str, *operands: Any, optimize: Any = None) -> Any:
    """Einstein summation. Implicit outputs and '...' are normalized to an explicit spec."""
    if not isinstance(spec, str):
        raise UnsupportedOpError("einsum in the interleaved (operand, sublist) form is not supported")
    spec = spec.replace(" ", "")
    if "->" not in spec:
        ins = spec
        letters = [c for c in ins.replace(",", "").replace(".", "")]
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        if "..." in ins:
            out = "..." + out
        spec = ins + "->" + out
    ins, out = spec.split("->")
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: spec {spec!r} names {len(terms)} operands, got {len(operands)}")
    if "..." in spec:
        used = set(spec) - {".", ",", "-", ">"}
        free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
        nell = builtins.max(_ndim(o) - (len(t) - 3) for t, o in zip(terms, operands) if "..." in t)
        ell = "".join(free[:nell])
        new_terms = []
        for t, o in zip(terms, operands):
            if "..." in t:
                k = _ndim(o) - (len(t) - 3)
                t = t.replace("...", ell[nell - k:])
            new_terms.append(t)
        terms = new_terms
        out = out.replace("...", ell)
        spec = ",".join(terms) + "->" + out
    dtype = L.result_dtype(*operands)
    ops = [L.cast(o, dtype) if isinstance(o, Node) else _np.asarray(o, dtype) for o in operands]
    # broadcast size-1 dims of shared indices explicitly
    dims: dict[str, int] = {}
    for t, o in zip(terms, ops):
        if len(t) != _ndim(o):
            raise ShapeError(f"einsum: operand with shape {_shape(o)} does not match subscripts {t!r}")
        for c, d in zip(t, _shape(o)):
            if d != 1:
                if dims.get(c, d) != d:
                    raise ShapeError(f"einsum: index {c!r} has sizes {dims[c]} and {d}")
                dims[c] = d
    ops = [L.broadcast_to(o, tuple(dims.get(c, 1) for c in t)) for t, o in zip(terms, ops)]
    return L.bind("einsum", *ops, spec=spec)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """Tensor dot product via einsum: sums a's `axes[0]` against b's `axes[1]` (or a's last and b's first `axes`).

    Raises:
        ShapeError: axes out of range, unequal axis counts, or summed axes of different sizes (NumPy:
            "shape-mismatch for sum").
    """
    na, nb = _ndim(a), _ndim(b)
    sa, sb = _shape(a), _shape(b)
    if isinstance(axes, (int, _np.integer)):
        if not 0 <= axes <= min(na, nb):
            raise ShapeError(f"tensordot: axes={axes} for operands of {na} and {nb} dimensions")
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = [list(v) if isinstance(v, (list, tuple)) else [v] for v in axes]
    if len(ax_a) != len(ax_b):
        raise ShapeError(f"tensordot: {len(ax_a)} axes of a ({ax_a}) against {len(ax_b)} of b ({ax_b})")
    for i, j in zip(ax_a, ax_b):
        if not (-na <= i < na and -nb <= j < nb):
            raise ShapeError(f"tensordot: axis pair ({i}, {j}) is out of range for shapes {sa} and {sb}")
        if sa[i] != sb[j]:
            raise ShapeError(f"tensordot: shape mismatch for sum: a's axis {i} has size {sa[i]}, b's axis {j} has "
                             f"size {sb[j]} (shapes {sa} and {sb})")
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ta = [next(letters) for _ in range(na)]
    tb = [next(letters) for _ in range(nb)]
    for i, j in zip(ax_a, ax_b):
        tb[j % nb] = ta[i % na]
    out = [c for i, c in enumerate(ta) if i not in [x % na for x in ax_a]] + [c for j, c in enumerate(tb) if j not in [x % nb for x in ax_b]]
    return einsum("".join(ta) + "," + "".join(tb) + "->" + "".join(out), a, b)


class linalg:  # noqa: N801  (mirrors np.linalg)
    """The subset of np.linalg that traces."""

    norm = staticmethod(norm)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
    "matmul": matmul,
}

FUNCTIONS = {
    _np.matmul: matmul, _np.dot: dot, _np.vdot: vdot, _np.inner: inner, _np.outer: outer, _np.einsum: einsum,
    _np.tensordot: tensordot, _np.linalg.norm: norm,
}
