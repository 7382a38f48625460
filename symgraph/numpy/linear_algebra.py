"""Linear algebra: products and contractions (matmul, dot, inner, outer, einsum, tensordot) and norms.

`LINALG_API` holds NumPy 2's np.linalg array-API spellings (the module `symgraph.numpy.linalg` gathers np.linalg's names).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import api_call, ShapeError, UnsupportedOpError
from ..ir import Node
from ..ops.core import normalize_axes
from .arithmetic import abs as _abs, multiply, power
from .decompositions import matrix_norm_sv
from .base import _ndim, _shape
from .elementary import sqrt
from .layout import matrix_transpose as _matrix_transpose, ravel, reshape
from .logic import equal, not_equal, where
from .reductions import max as _max, min as _min, sum
from .structural import cross as _cross, diagonal, trace as _trace

__all__ = ["LINALG_API", "dot", "einsum", "inner", "matmul", "matrix_norm", "norm", "outer", "tensordot", "vdot",
           "vector_norm", "vecdot", "matvec", "vecmat"]


def _safe_sqrt(s: Any) -> Any:
    """sqrt(s) with derivative 0 at s = 0 (a subgradient of the norm at 0): where(s == 0, 0, sqrt(guarded s)).

    The guard tests s == 0 (not s > 0), so that a NaN sum stays NaN, as NumPy's norm of a NaN is NaN.
    """
    zero = equal(s, 0.0)
    return where(zero, 0.0, sqrt(where(zero, 1.0, s)))


def _abs2(x: Any) -> Any:
    """|x|² elementwise: x·x for real x, re² + im² for complex x (NumPy's (x.conj() * x).real, real-valued)."""
    if x.dtype.kind != "c":
        return multiply(x, x)
    re, im = L.bind("real", x), L.bind("imag", x)
    return L.add(L.mul(re, re), L.mul(im, im))


def _keep(out: Any, shape: tuple, axes: tuple, keepdims: bool) -> Any:
    if not keepdims:
        return out
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _vector_norm(x: Any, ord: Any, ax: int) -> Any:
    if ord is None or ord == 2:
        return _safe_sqrt(sum(_abs2(x), ax))
    if isinstance(ord, str):
        raise ShapeError(f"norm: invalid norm order {ord!r} for vectors")
    if ord == _np.inf:
        return _max(_abs(x), ax)
    if ord == -_np.inf:
        return _min(_abs(x), ax)
    if ord == 0:
        return sum(L.cast(not_equal(x, 0.0), _np.real(_np.zeros((), x.dtype)).dtype), ax)
    if ord == 1:
        return sum(_abs(x), ax)
    p = float(ord)
    s = sum(power(_abs(x), p), ax)
    if p > 0:
        # s ** (1/p) with derivative 0 at s = 0, as the Euclidean norm's
        zero = equal(s, 0.0)  # (== 0, not > 0: a NaN sum stays NaN)
        return where(zero, 0.0, power(where(zero, 1.0, s), 1.0 / p))
    return power(s, 1.0 / p)


@api_call("np.linalg.norm")
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """np.linalg.norm: vector norms (every ord) over one axis, matrix norms (None/'fro', 1, -1, inf, -inf, and 2, -2, 'nuc' from the
    singular values, `decompositions.matrix_norm_sv`) over two; with axis None, a 1-d or 2-d x picks by its rank (any rank for ord None: the 2-norm of the
    flattened x).

    Conventions at kinks: |x| has derivative sign(x) (0 at 0); the 2-norm, 'fro' and p-norms (p > 0) have
    derivative 0 at x = 0; max/min of several equal entries (ord=inf, -inf and the matrix 1/inf norms)
    share the derivative equally. ord=0 counts nonzeros (zero derivative). Integers give float64.
    Complex x (every ord and axis, as NumPy): the norms of |x| (real results; the 2-norm and 'fro' from
    re² + im², NumPy's (x.conj() * x).real), the matrix 2, -2 and 'nuc' norms from the complex singular
    values; derivatives under JAX's convention (grad of the 2-norm is conj(x)/|x|).

    Raises:
        ShapeError: an invalid ord, or axes that do not fit x.
    """
    if not isinstance(x, Node):
        return _np.linalg.norm(x, ord, axis, keepdims)
    if x.dtype.kind == "c" and ord is None and axis is None:
        # NumPy's formula: sqrt(re . re + im . im) of the flattened parts
        re, im = ravel(L.bind("real", x)), ravel(L.bind("imag", x))
        out = _safe_sqrt(L.add(L.matmul(re, re), L.matmul(im, im)))
        return reshape(out, (1,) * x.ndim) if keepdims else out
    # complex x below: |x| (its 2-norms from re² + im²), and the singular values for ord 2, -2, 'nuc' on matrices
    if x.dtype.kind not in "fc":
        x = L.cast(x, _np.float64)
    nd = x.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            out = _safe_sqrt(sum(_abs2(x)))
            return reshape(out, (1,) * nd) if keepdims else out
        if nd not in (1, 2):
            raise ShapeError("norm: improper number of dimensions to norm")
        axis = tuple(range(nd))
    ax_list = [axis] if isinstance(axis, (int, _np.integer)) else list(axis)
    ax_list = [normalize_axes(int(a), nd, op="norm")[0] for a in ax_list]
    if len(ax_list) == 1:
        return _keep(_vector_norm(x, ord, ax_list[0]), x.shape, tuple(ax_list), keepdims)
    if len(ax_list) != 2:
        raise ShapeError("norm: improper number of dimensions to norm")
    r, c = ax_list
    if r == c:
        raise ShapeError("norm: duplicate axes given")
    if ord in (2, -2, "nuc"):
        return matrix_norm_sv(x, ord, (r, c), keepdims)
    if ord is None or ord in ("fro", "f"):
        out = _safe_sqrt(sum(_abs2(x), (r, c)))
    elif ord in (1, -1):
        red = _max if ord == 1 else _min
        out = red(sum(_abs(x), r), c - 1 if c > r else c)
    elif ord in (_np.inf, -_np.inf):
        red = _max if ord == _np.inf else _min
        out = red(sum(_abs(x), c), r - 1 if r > c else r)
    else:
        raise ShapeError(f"norm: invalid norm order {ord!r} for matrices")
    return _keep(out, x.shape, (r, c), keepdims)


@api_call("np.linalg.vector_norm")
def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:  # noqa: A002
    """np.linalg.vector_norm (NumPy 2): the vector norm over `axis` (None: all elements; a tuple: those axes
    flattened into one), any ord of `norm`'s vector norms.

    Raises:
        ShapeError: an invalid ord, or axes out of range.
    """
    if not isinstance(x, Node):
        return _np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    shape = x.shape
    axes = normalize_axes(axis, len(shape), op="np.linalg.vector_norm")  # the order of flattening is immaterial
    rest = tuple(i for i in range(len(shape)) if i not in axes)
    xt = L.transpose(x, axes + rest)
    flat = reshape(xt, (int(_np.prod([shape[i] for i in axes], dtype=_np.int64)),) + tuple(shape[i] for i in rest))
    out = norm(flat, ord=ord, axis=0)
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return out


@api_call("np.linalg.matrix_norm")
def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    """np.linalg.matrix_norm (NumPy 2): `norm` over the last two axes (every matrix ord, 2 / -2 / 'nuc' from
    the singular values).

    Raises:
        ShapeError: rank < 2 or an invalid ord.
    """
    if not isinstance(x, Node):
        return _np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    if x.ndim < 2:
        raise ShapeError(f"matrix_norm: needs at least two dimensions, got shape {x.shape}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def matmul(a: Any, b: Any) -> Any:
    """Matrix product with NumPy semantics (vectors, batches, broadcasting)."""
    return L.matmul(a, b)


def _conj(x: Any) -> Any:
    x = x if isinstance(x, Node) else _np.asarray(x)
    return L.bind("conj", x) if x.dtype.kind == "c" else x


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, **kwargs: Any) -> Any:
    """np.vecdot (a NumPy 2 ufunc): sum over `axis` of conj(x1) * x2, broadcasting the other axes.

    Shapes: x1 and x2 broadcast; the result drops `axis`. Complex x1 is conjugated (NumPy's rule).

    Raises:
        ShapeError: the axis lengths differ or the shapes do not broadcast.
        UnsupportedOpError: out= or another gufunc keyword.
    """
    _no_gufunc_kwargs("vecdot", kwargs)
    s1, s2 = _shape(x1), _shape(x2)
    if not s1 or not s2 or s1[axis] != s2[axis]:
        raise ShapeError(f"vecdot: core dimensions of shapes {s1} and {s2} along axis {axis} do not match")
    return sum(multiply(_conj(x1), x2), axis=axis)


def matvec(x1: Any, x2: Any, /, **kwargs: Any) -> Any:
    """np.matvec (a NumPy 2 ufunc): (..., m, n) matrices times (..., n) vectors -> (..., m), no conjugation.

    Raises:
        ShapeError: n differs or the batch shapes do not broadcast. UnsupportedOpError: out= or axes=.
    """
    _no_gufunc_kwargs("matvec", kwargs)
    if _ndim(x1) < 2 or _ndim(x2) < 1 or _shape(x1)[-1] != _shape(x2)[-1]:
        raise ShapeError(f"matvec: shapes {_shape(x1)} and {_shape(x2)} do not fit (..., m, n) and (..., n)")
    y = L.matmul(x1, L.reshape(x2, _shape(x2) + (1,)))
    return L.reshape(y, _shape(y)[:-1])


def vecmat(x1: Any, x2: Any, /, **kwargs: Any) -> Any:
    """np.vecmat (a NumPy 2 ufunc): conj of (..., n) vectors times (..., n, m) matrices -> (..., m).

    Raises:
        ShapeError: n differs or the batch shapes do not broadcast. UnsupportedOpError: out= or axes=.
    """
    _no_gufunc_kwargs("vecmat", kwargs)
    if _ndim(x2) < 2 or _ndim(x1) < 1 or _shape(x1)[-1] != _shape(x2)[-2]:
        raise ShapeError(f"vecmat: shapes {_shape(x1)} and {_shape(x2)} do not fit (..., n) and (..., n, m)")
    v = _conj(x1)
    y = L.matmul(L.reshape(v, _shape(v)[:-1] + (1, _shape(v)[-1])), x2)
    return L.reshape(y, _shape(y)[:-2] + _shape(y)[-1:])


def _no_gufunc_kwargs(op: str, kwargs: dict) -> None:
    extra = sorted(k for k, v in kwargs.items() if v is not None and not (k == "dtype" and v is None))
    if extra:
        raise UnsupportedOpError(f"{op}({', '.join(k + '=...' for k in extra)}) is not supported in traced code")


def dot(a: Any, b: Any, out: Any = None) -> Any:
    """np.dot: a product for 0-d operands, matmul up to 2-d b, and for N-d b the sum over a's last axis
    and b's second-to-last (shape a.shape[:-1] + b.shape[:-2] + b.shape[-1:]).

    Raises:
        ShapeError: the summed axes differ in length. UnsupportedOpError: out=.
    """
    if out is not None:
        raise UnsupportedOpError("dot(out=...) writes in place, which tracing does not support")
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    if _ndim(b) <= 2:
        return L.matmul(a, b)
    if _shape(a)[-1] != _shape(b)[-2]:
        raise ShapeError(f"dot: shapes {_shape(a)} and {_shape(b)} not aligned: {_shape(a)[-1]} (dim {_ndim(a) - 1}) "
                         f"!= {_shape(b)[-2]} (dim {_ndim(b) - 2})")
    return tensordot(a, b, axes=([-1], [-2]))


def vdot(a: Any, b: Any) -> Any:
    """Dot product of flattened arrays; for complex a, conj(a) . b (as np.vdot, NumPy's value)."""
    da, db = (x.dtype if isinstance(x, (Node, _np.ndarray, _np.generic)) else _np.asarray(x).dtype for x in (a, b))
    if da.kind == "c" or db.kind == "c":  # a product of vectors, as NumPy's (BLAS ?dotc) value
        ra = ravel(a)
        return L.matmul(L.bind("conj", ra) if da.kind == "c" else ra, ravel(b))
    return sum(multiply(ravel(a), ravel(b)))


def inner(a: Any, b: Any) -> Any:
    """Inner product over the last axis: shape a.shape[:-1] + b.shape[:-1] (as np.inner)."""
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    return tensordot(a, b, axes=([-1], [-1]))


def outer(a: Any, b: Any) -> Any:
    """Outer product of flattened a and b."""
    return multiply(reshape(ravel(a), (-1, 1)), reshape(ravel(b), (1, -1)))


_SUBLIST_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_spec(args: tuple) -> tuple[str, list]:
    """The string spec and the operands of einsum's interleaved form (op0, sub0, op1, sub1, ..., [subout])."""
    operands, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(operands) > len(subs):  # a trailing output sublist sits at an even position
        out = operands.pop()
        if not isinstance(out, (list, tuple)):
            raise ShapeError("einsum: an operand without a sublist (the interleaved form is op, sublist, ...)")

    def term(sub: Any) -> str:
        t = []
        for k in sub:
            if k is Ellipsis:
                t.append("...")
            elif isinstance(k, (int, _np.integer)) and 0 <= int(k) < len(_SUBLIST_LETTERS):
                t.append(_SUBLIST_LETTERS[int(k)])
            else:
                raise ShapeError(f"einsum: subscript {k!r} in a sublist must be an integer in [0, 52) or Ellipsis")
        return "".join(t)

    terms = [term(sb) for sb in subs]
    if out is None:
        # implicit output: the labels that appear once, in increasing order of their integers
        counts: dict[int, int] = {}
        for sb in subs:
            for k in sb:
                if k is not Ellipsis:
                    counts[int(k)] = counts.get(int(k), 0) + 1
        out_t = ("..." if any(Ellipsis in list(sb) for sb in subs) else "") + \
            "".join(_SUBLIST_LETTERS[k] for k in sorted(counts) if counts[k] == 1)
    else:
        out_t = term(out)
    return ",".join(terms) + "->" + out_t, operands


def _take_repeated_diagonals(terms: list[str], ops: list) -> tuple[list[str], list]:
    """Operands with an index repeated inside their own term replaced by their diagonal (np.diagonal)."""
    new_terms, new_ops = [], []
    for t, o in zip(terms, ops):
        while len(set(t)) < len(t):
            c = next(ch for ch in t if t.count(ch) > 1)
            p = t.index(c)
            q = t.index(c, p + 1)
            if _shape(o)[p] != _shape(o)[q]:
                raise ShapeError(f"einsum: repeated index {c!r} in {t!r} has sizes {_shape(o)[p]} and {_shape(o)[q]}")
            o = diagonal(o, 0, p, q)
            t = "".join(ch for k, ch in enumerate(t) if k not in (p, q)) + c
        new_terms.append(t)
        new_ops.append(o)
    return new_terms, new_ops


def einsum(*operands: Any, optimize: Any = None, out: Any = None, dtype: Any = None, order: str = "K",
           casting: str = "safe") -> Any:
    """Einstein summation: np.einsum's string form ('ij,jk->ik', implicit output, '...') and its
    interleaved form (op0, [0, 1], op1, [1, 2], [0, 2]). An index repeated inside one operand takes its
    diagonal first ('ii->i', 'ii' the trace, 'iij->j'), so every form differentiates.

    Raises:
        ShapeError: subscripts that do not fit the operands. UnsupportedOpError: out=.
    """
    if out is not None:
        raise UnsupportedOpError("einsum(out=...) writes in place, which tracing does not support")
    if not operands:
        raise ShapeError("einsum: no operands")
    if isinstance(operands[0], str):
        spec, operands = operands[0], list(operands[1:])
    else:
        spec, operands = _sublist_spec(operands)
    if not any(isinstance(o, Node) for o in operands):
        return _np.einsum(spec, *operands, optimize=False if optimize is None else optimize,
                          **({} if dtype is None else {"dtype": dtype}))
    spec = spec.replace(" ", "")
    if "->" not in spec:
        ins = spec
        letters = [c for c in ins.replace(",", "").replace(".", "")]
        out_t = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        if "..." in ins:
            out_t = "..." + out_t
        spec = ins + "->" + out_t
    ins, out_t = spec.split("->")
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: spec {spec!r} names {len(terms)} operands, got {len(operands)}")
    if "..." in spec:
        used = set(spec) - {".", ",", "-", ">"}
        free = [c for c in _SUBLIST_LETTERS[::-1] if c not in used]
        nell = builtins.max(_ndim(o) - (len(t) - 3) for t, o in zip(terms, operands) if "..." in t)
        ell = "".join(free[:nell])
        new_terms = []
        for t, o in zip(terms, operands):
            if "..." in t:
                k = _ndim(o) - (len(t) - 3)
                t = t.replace("...", ell[nell - k:])
            new_terms.append(t)
        terms = new_terms
        out_t = out_t.replace("...", ell)
    dtype = L.result_dtype(*operands) if dtype is None else _np.dtype(dtype)
    ops = [L.cast(o, dtype) if isinstance(o, Node) else _np.asarray(o, dtype) for o in operands]
    for t, o in zip(terms, ops):
        if len(t) != _ndim(o):
            raise ShapeError(f"einsum: operand with shape {_shape(o)} does not match subscripts {t!r}")
    terms, ops = _take_repeated_diagonals(terms, ops)
    if len(set(out_t)) < len(out_t):
        raise ShapeError(f"einsum: output subscript {out_t!r} repeats an index")
    # broadcast size-1 dims of shared indices explicitly
    dims: dict[str, int] = {}
    for t, o in zip(terms, ops):
        for c, d in zip(t, _shape(o)):
            if d != 1:
                if dims.get(c, d) != d:
                    raise ShapeError(f"einsum: index {c!r} has sizes {dims[c]} and {d}")
                dims[c] = d
    ops = [L.broadcast_to(o, tuple(dims.get(c, 1) for c in t)) for t, o in zip(terms, ops)]
    return L.bind("einsum", *ops, spec=",".join(terms) + "->" + out_t)


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


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
    "matmul": matmul, "vecdot": vecdot, "matvec": matvec, "vecmat": vecmat,
}

# ----- NumPy 2's np.linalg array-API names: the same functions over the last axes -----


def _linalg_outer(x1: Any, x2: Any, /) -> Any:
    """np.linalg.outer: the outer product of two 1-d arrays (ShapeError otherwise, as NumPy's ValueError)."""
    if _ndim(x1) != 1 or _ndim(x2) != 1:
        raise ShapeError(f"linalg.outer: needs 1-d arrays, got shapes {_shape(x1)} and {_shape(x2)}")
    return outer(x1, x2)


def _linalg_cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """np.linalg.cross: 3-element vectors along `axis` only (ShapeError otherwise)."""
    if _shape(x1)[axis] != 3 or _shape(x2)[axis] != 3:
        raise ShapeError(f"linalg.cross: both inputs need 3 elements along axis {axis}, got shapes {_shape(x1)} "
                         f"and {_shape(x2)}")
    return _cross(x1, x2, axis=axis)


def _linalg_trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """np.linalg.trace: the sums of the offset diagonals of the last two axes."""
    return _trace(x, offset, -2, -1, dtype)


def _linalg_diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """np.linalg.diagonal: the offset diagonals of the last two axes."""
    return diagonal(x, offset, -2, -1)


def _linalg_tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    return tensordot(x1, x2, axes)


def _linalg_vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return vecdot(x1, x2, axis=axis)


#: NumPy 2's np.linalg array-API names -> their functions here (also in `symgraph.numpy.linalg`)
LINALG_API = {"outer": _linalg_outer, "cross": _linalg_cross, "trace": _linalg_trace, "diagonal": _linalg_diagonal,
               "tensordot": _linalg_tensordot, "vecdot": _linalg_vecdot, "matmul": matmul,
               "matrix_transpose": _matrix_transpose}

FUNCTIONS = {
    **{getattr(_np.linalg, _n): _f for _n, _f in LINALG_API.items() if hasattr(_np.linalg, _n)},
    _np.matmul: matmul, _np.dot: dot, _np.vdot: vdot, _np.inner: inner, _np.outer: outer, _np.einsum: einsum,
    _np.tensordot: tensordot, _np.linalg.norm: norm,
    **({_np.linalg.vector_norm: vector_norm, _np.linalg.matrix_norm: matrix_norm}
       if hasattr(_np.linalg, "vector_norm") else {}),
}
