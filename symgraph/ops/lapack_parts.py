"""The complex LAPACK primitives on (real, imaginary) parts: the form compiled code runs them in.

The LLVM backend splits complex values into pairs of real arrays (codegen/complex_split.py);
there, each complex linear-algebra primitive (cholesky, triangular_solve, lu of
`symgraph.ops.factor`; eigh, eigvalsh, svd, svdvals, qr of `symgraph.ops.spectral`; eig,
eigvals of `symgraph.ops.eig`) becomes one ``lapack_parts`` node on real arrays, which compiled
code runs as the complex LAPACK routine (?potrf, ?trsm, ?getrf, ?heevd, ?gesdd, ?geqrf + ?ungqr,
?geev of NumPy's bundled OpenBLAS; codegen/llvm/lapack_complex.py):

- ``lapack_parts(*parts; of, params, kinds, out)``: ``of`` names the primitive, ``params`` its
  attrs (a sorted tuple of (name, value) pairs), ``kinds`` one letter per operand of the
  primitive ("c": a complex operand given as two parts, its real then its imaginary part;
  "r": a real operand, one array), ``out`` the primitive's result dtype. The result is the
  primitive's, packed as (2, ...) (its real parts, then its imaginary parts: a node has one
  output) when ``out`` is complex, as it is when ``out`` is real (eigvalsh, svdvals).

Its dtype is the parts' (float32 or float64); its NumPy implementation assembles the complex
operands, runs the primitive's own implementation and splits the result, so the values are the
primitive's. It has no derivative (`differentiable=False`): graphs are split after
differentiation, and the derivatives of complex linear algebra are graphs of the primitives
themselves (their rules, in the modules above), split like any other graph.
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import DTypeError, ShapeError
from .core import OPS, Op, complex_dtype, real_dtype, register

__all__ = ["lapack_parts", "LAPACK_PRIMITIVES"]

#: The complex primitives that compiled code runs as complex LAPACK calls on split parts.
LAPACK_PRIMITIVES = frozenset({"cholesky", "triangular_solve", "lu", "eigh", "eigvalsh", "svd", "svdvals", "qr",
                               "eig", "eigvals"})

_LOWERING = {"lowering": "lapack"}  # a LAPACK routine per node in compiled code (codegen/cpu/lapack.py)


def _operands(shapes, kinds):
    """The primitive's operand shapes from the parts' shapes (the two parts of an operand agree)."""
    out, k = [], 0
    for kind in kinds:
        if kind == "c":
            if k + 1 >= len(shapes) or tuple(shapes[k]) != tuple(shapes[k + 1]):
                raise ShapeError(f"lapack_parts: the parts of a complex operand have shapes {shapes[k:k + 2]}")
            out.append(tuple(shapes[k]))
            k += 2
        elif kind == "r":
            out.append(tuple(shapes[k]))
            k += 1
        else:
            raise ShapeError(f"lapack_parts: operand kind {kind!r} (expected 'c' or 'r')")
    if k != len(shapes):
        raise ShapeError(f"lapack_parts: kinds {kinds!r} take {k} parts, got {len(shapes)}")
    return out


def _check(of, kinds):
    if of not in LAPACK_PRIMITIVES:
        raise ShapeError(f"lapack_parts: {of!r} is not one of {sorted(LAPACK_PRIMITIVES)}")
    if len(kinds) != OPS[of].nin:
        raise ShapeError(f"lapack_parts: {of} takes {OPS[of].nin} operands, kinds {kinds!r}")


def _shape(*shapes, of, params, kinds, out):
    _check(of, kinds)
    s = tuple(OPS[of].shape_rule(*_operands(shapes, kinds), **dict(params)))
    return (2,) + s if np.dtype(out).kind == "c" else s


def _dtype(*dtypes, of, params, kinds, out):
    d = np.dtype(dtypes[0])
    if d not in (np.float32, np.float64) or any(np.dtype(e) != d for e in dtypes):
        raise DTypeError(f"lapack_parts: needs float32 or float64 parts of one dtype, got {dtypes}")
    if real_dtype(out) != d:
        raise DTypeError(f"lapack_parts: parts of dtype {d} for a result of dtype {np.dtype(out)}")
    return real_dtype(out)


def _impl(*arrays, of, params, kinds, out):
    ops, k = [], 0
    for kind in kinds:
        if kind == "c":
            re, im = arrays[k], arrays[k + 1]
            z = np.empty(re.shape, complex_dtype(re.dtype))
            z.real, z.imag = re, im
            ops.append(z)
            k += 2
        else:
            ops.append(arrays[k])
            k += 1
    y = np.asarray(OPS[of].impl(*ops, **dict(params)))
    if np.dtype(out).kind != "c":
        return y.astype(out, copy=False)
    return np.stack([y.real, y.imag]).astype(real_dtype(out))


def lapack_parts(*parts, of: str, params: tuple = (), kinds: str, out) -> object:
    """Bind a lapack_parts node (see the module docstring).

    Args:
        parts: the operands' parts, in order (two real arrays for a complex operand, one for a real one).
        of: the primitive (one of `LAPACK_PRIMITIVES`); params: its attrs as sorted (name, value) pairs.
        kinds: "c" or "r" per operand of the primitive; out: the primitive's result dtype.

    Returns:
        (2, ...) float32/float64: the primitive's complex result's parts; or its real result.

    Raises:
        ShapeError, DTypeError: the parts do not fit the primitive (its own shape rule's errors included).
    """
    return L.bind("lapack_parts", *parts, of=of, params=tuple(sorted(params)), kinds=kinds, out=np.dtype(out).str)


register(Op("lapack_parts", None, "opaque", _shape, _dtype, _impl, differentiable=False,
            doc="a complex linear-algebra primitive (attr of: cholesky, triangular_solve, lu, eigh, eigvalsh, svd, "
                "svdvals, qr, eig, eigvals) on (real, imaginary) parts, its complex result packed (2, ...); compiled: "
                "the complex LAPACK routine (?potrf, ?trsm, ?getrf, ?heevd, ?gesdd, ?geqrf/?ungqr, ?geev)",
            batch="loop", extra=_LOWERING))
