"""The op record, the single op registry, and the shape/dtype rule helpers.

Every primitive is declared once, as an `Op` record that carries all of its
rules and facts: shape and dtype inference, the NumPy reference
implementation, the VJP and JVP rules (written with graph ops, so derivatives
are graphs), the lowering kind, and every fact a pass or a backend asks about
an op (its cost weight, whether it is an identity, a view, commutative,
bounded, -0.0-safe, a selection, random, and how a backend computes it when
it is a transcendental function). Passes and backends query the record; no
module outside `symgraph.ops` keeps a list of op names (docs/internals.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedOpError

__all__ = [
    "Op",
    "MathFn",
    "FREE",
    "CHEAP",
    "DIVISION",
    "TRANSCENDENTAL",
    "VIEWS",
    "MAGNITUDES",
    "OPS",
    "register",
    "KINDS",
    "same_shape",
    "broadcast_shapes",
    "promote",
    "same_dtype",
    "bool_dtype",
    "float_only",
    "inexact",
    "real_only",
    "complex_only",
    "real_dtype",
    "complex_dtype",
    "normalize_axes",
]

KINDS = ("source", "elementwise", "reduction", "layout", "contraction", "opaque")

# Per-element cost weights of the one cost model (`symgraph.passes.cost` reads `Op.cost`). They
# estimate code size and time per element: a transcendental is a polynomial of ~20 operations or
# a vector-math call, a division takes ~3 multiplies' latency.
FREE = 0  #: sources, layout (index arithmetic only) and identities
CHEAP = 1  #: one arithmetic or logic instruction
DIVISION = 3  #: a division or remainder
TRANSCENDENTAL = 8  #: a polynomial or a math-library call per element

#: Kinds of index-only layout op (`Op.view`): the output element i is the input element v(i)
#: for an affine index map v, so codegen composes them into the reader's loads.
#: "reshape": same elements in the same (row-major) order (reshape, expand_dims, squeeze);
#: "transpose": a permutation of axes; "broadcast": repeated elements; "slice": a strided window.
VIEWS = ("reshape", "transpose", "broadcast", "slice")
#: Magnitude laws (`Op.magnitude`): "unit": |f(x)| <= 1 (or NaN) for every x; "input": every
#: output element is (up to sign) an input element, so max |f(x)| <= max |x| over its inputs.
MAGNITUDES = ("unit", "input")


@dataclass(frozen=True)
class MathFn:
    """How a backend computes a transcendental elementwise op (PyTensor's `nfunc_spec` idea).

    Attributes:
        libm: the C99 math-library name of the float64 function ("asinh"; the
            float32 one appends "f"), or None for a composite (`via`).
        intrinsic: the LLVM intrinsic's base name when LLVM has one
            ("exp" -> llvm.exp.f64), used outside vectorizable loops.
        vector_auto: dtype kinds ("f64", "f32") for which the vector-math
            "auto" choice takes glibc's libmvec variant of `libm` over an
            inline polynomial (measured per function, docs/vmath.md). Any
            function without a polynomial takes libmvec when it exists.
        via: for a composite, the libm function it is built on ("exp" for
            sigmoid); the backend's vector-math module builds the rest.
        vector_inexact: dtype kinds for which glibc's libmvec variant is
            never used because it differs from NumPy where NumPy is exact
            (float64 log10 at powers of ten: libmvec gives
            log10(1e7) = 7.000000000000001); without a polynomial these
            take the scalar libm call (correct, not vectorized).
    """

    libm: str | None
    intrinsic: str | None = None
    vector_auto: tuple[str, ...] = ()
    via: str | None = None
    vector_inexact: tuple[str, ...] = ()


@dataclass(eq=False)
class Op:
    """A primitive and all its rules.

    Attributes:
        name: unique op name (the key of `OPS` and of codegen's emitter table).
        nin: number of inputs, or None for variadic (concatenate, einsum).
        kind: lowering kind, one of KINDS.
        shape_rule: (*input_shapes, **attrs) -> output shape; raises ShapeError.
        dtype_rule: (*input_dtypes, **attrs) -> output dtype; raises DTypeError.
        impl: (*arrays, **attrs) -> array, the NumPy reference semantics.
        vjp: (ct, node) -> tuple with one cotangent node (or None for zero) per
            input, written in graph ops. None when the op has no VJP rule:
            differentiating through it raises UnsupportedOpError, lazily.
        jvp: (tangents, node) -> tangent node or None (zero); tangents holds
            one tangent node or None per input.
        differentiable: False for ops whose outputs carry no derivative
            (comparisons, integer ops, random bits): their cotangents and
            tangents are zero by definition, not undefined.
        linear: the op is linear in all its inputs (JVP = op on tangents).
        doc: one line on the semantics.
        cost: per-element weight for the cost model (FREE, CHEAP, DIVISION,
            TRANSCENDENTAL); default TRANSCENDENTAL with `math`, FREE for
            sources, layout ops and identities, else CHEAP.
        flops: (node) -> estimated floating-point operations, for ops whose
            work is not a weight per element (contractions).
        math: a `MathFn` when the op is a transcendental function a backend
            computes with a math library or a polynomial.
        identity_of: index of the input whose value the output is
            (copy, stop_gradient, checkpoint markers), else None.
        marker: a checkpointing marker (an identity that only names or
            brackets values for the checkpoint pass).
        view: one of VIEWS for an index-only layout op, else None.
        cheap: regenerating the value costs no arithmetic (views, identities,
            dtype conversions): schedule recomputes such values from inputs and
            constants where they are needed instead of keeping them.
        copies_input: every output element is a copy of an element of input 0
            (views, identities, gather, max/min reductions): a constant splat
            stays that splat. Default: a view or the identity of input 0.
        commutative: the first two inputs commute bitwise: op(a, b, ...) ==
            op(b, a, ...) (add, mul, eq, ne, logical and/or; a*b of muladd), for real
            operands (NumPy's complex product is not bitwise commutative: simplify
            keeps complex operands in order).
        associative: op(op(a, b), c) == op(a, op(b, c)) in exact arithmetic.
        ring: a polynomial operation (add, sub, neg, mul, muladd): polynomials
            in its inputs are closed under it (simplify's polynomial stage).
        magnitude: one of MAGNITUDES (a bound simplification may use, on real values only:
            |sin z| is unbounded for complex z), or None.
        neg_zero: when the op can give -0.0: "never", or a tuple of input
            indices (-0.0 only where all of those inputs may be -0.0), or None
            (it may: the safe default).
        selects: the output picks, per element, one of its inputs (where,
            maximum, minimum); its VJP builds its own masks.
        random: the output is random bits regenerated from a key (never
            constant-folded; regenerated, not saved, by checkpointing).
        foldable: simplification may constant-fold it (default: not a source,
            not random).
        batch: the batching rule `(node, bargs, size) -> node` (symgraph.ops.batch
            says the contract), "loop" for a deliberate O(B) loop, or None: the
            generic rule for elementwise ops (same op on broadcast operands).
    """

    name: str
    nin: int | None
    kind: str
    shape_rule: Callable[..., Any]
    dtype_rule: Callable[..., Any]
    impl: Callable[..., Any]
    vjp: Callable[..., Any] | None = None
    jvp: Callable[..., Any] | None = None
    differentiable: bool = True
    linear: bool = False
    doc: str = ""
    extra: dict = field(default_factory=dict)
    cost: int | None = None
    flops: Callable[..., int] | None = None
    math: MathFn | None = None
    identity_of: int | None = None
    marker: bool = False
    view: str | None = None
    cheap: bool | None = None
    copies_input: bool | None = None
    commutative: bool = False
    associative: bool = False
    ring: bool = False
    magnitude: str | None = None
    neg_zero: str | tuple[int, ...] | None = None
    selects: bool = False
    random: bool = False
    foldable: bool | None = None
    batch: Callable[..., Any] | str | None = None

    def __post_init__(self) -> None:
        if self.view is not None and self.view not in VIEWS:
            raise ValueError(f"op {self.name}: view must be one of {VIEWS}, got {self.view!r}")
        if self.magnitude is not None and self.magnitude not in MAGNITUDES:
            raise ValueError(f"op {self.name}: magnitude must be one of {MAGNITUDES}, got {self.magnitude!r}")
        if self.neg_zero is not None and self.neg_zero != "never" and not isinstance(self.neg_zero, tuple):
            raise ValueError(f"op {self.name}: neg_zero must be 'never', a tuple of input indices or None")
        if self.cost is None:
            if self.math is not None:
                self.cost = TRANSCENDENTAL
            elif self.kind in ("source", "layout") or self.identity_of is not None:
                self.cost = FREE
            else:
                self.cost = CHEAP
        if self.cheap is None:
            self.cheap = self.view is not None or self.identity_of is not None
        if self.copies_input is None:
            self.copies_input = self.view is not None or self.identity_of == 0
        if self.foldable is None:
            self.foldable = self.kind != "source" and not self.random

    def __repr__(self) -> str:
        return f"Op({self.name})"


OPS: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Add an op to the registry (names are unique)."""
    if op.kind not in KINDS:
        raise ValueError(f"op {op.name}: unknown kind {op.kind}")
    if op.name in OPS:
        raise ValueError(f"op {op.name} registered twice")
    OPS[op.name] = op
    return op


def get(name: str) -> Op:
    """The registered op called `name`."""
    try:
        return OPS[name]
    except KeyError:
        raise UnsupportedOpError(f"no primitive named {name!r}") from None


# ----- shape rules -----


def same_shape(*shapes: tuple, **_: Any) -> tuple:
    """All operands have the same shape (broadcasting is explicit at trace time)."""
    s0 = shapes[0]
    for s in shapes:
        if s != s0:
            i = next(i for i, e in enumerate(shapes) if e != s0)
            raise ShapeError(f"operand {i} has shape {shapes[i]}, operand 0 has {s0}; "
                             f"elementwise ops need equal shapes")
    return s0


def broadcast_shapes(*shapes: tuple, op: str = "op") -> tuple:
    """NumPy broadcasting of shapes.

    Raises:
        ShapeError: naming the op and the shapes when they do not broadcast.
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d == 1:
                continue
            if out[i] == 1:
                out[i] = d
            elif out[i] != d:
                shp = " and ".join(str(tuple(x)) for x in shapes)
                raise ShapeError(f"{op}: shapes {shp} do not broadcast (dimension {i - ndim}: {out[i]} vs {d})")
    return tuple(out)


def normalize_axes(axes: Any, ndim: int, op: str = "op") -> tuple[int, ...]:
    """Turn an axis argument (None, int, tuple) into a sorted tuple of non-negative axes.

    Raises:
        ShapeError: an axis out of range or repeated.
    """
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ShapeError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


# ----- dtype rules -----


def promote(*dtypes: Any, **_: Any) -> np.dtype:
    """NumPy type promotion of the operand dtypes."""
    return np.result_type(*dtypes)


def same_dtype(*dtypes: Any, **_: Any) -> np.dtype:
    """All operands share one dtype (promotion is explicit at trace time)."""
    d0 = np.dtype(dtypes[0])
    for d in dtypes:
        if d is not d0 and np.dtype(d) != d0:  # NumPy's built-in dtypes are singletons: `is` is the fast test
            i = next(i for i, e in enumerate(dtypes) if np.dtype(e) != d0)
            raise DTypeError(f"operand {i} has dtype {dtypes[i]}, operand 0 has {d0}")
    return d0


def bool_dtype(*dtypes: Any, **_: Any) -> np.dtype:
    """Comparisons: operands share a dtype; the result is bool."""
    same_dtype(*dtypes)
    return np.dtype(bool)


def float_only(*dtypes: Any, **kw: Any) -> np.dtype:
    """Operands share one floating dtype (float32 or float64)."""
    d = same_dtype(*dtypes)
    if d.kind != "f":
        raise DTypeError(f"needs float32 or float64 operands, got {d}")
    return d


def inexact(*dtypes: Any, **kw: Any) -> np.dtype:
    """Operands share one floating or complex dtype (float32, float64, complex64, complex128)."""
    d = same_dtype(*dtypes)
    if d.kind not in "fc":
        raise DTypeError(f"needs float or complex operands, got {d}")
    return d


def complex_only(*dtypes: Any, **kw: Any) -> np.dtype:
    """Operands share one complex dtype (complex64 or complex128)."""
    d = same_dtype(*dtypes)
    if d.kind != "c":
        raise DTypeError(f"needs complex64 or complex128 operands, got {d}")
    return d


def real_dtype(d: Any) -> np.dtype:
    """The real dtype of a complex one (complex64 -> float32, complex128 -> float64); real dtypes unchanged."""
    d = np.dtype(d)
    return np.dtype(np.finfo(d).dtype) if d.kind == "c" else d


def complex_dtype(d: Any) -> np.dtype:
    """The complex dtype of a float one (float32 -> complex64, float64 -> complex128); complex unchanged."""
    d = np.dtype(d)
    if d.kind == "c":
        return d
    return np.dtype(np.complex64) if d == np.float32 else np.dtype(np.complex128)


def real_only(*dtypes: Any, **kw: Any) -> np.dtype:
    """Operands share one real dtype (bool, integer or float): the op has no complex semantics in symgraph."""
    d = same_dtype(*dtypes)
    if d.kind == "c":
        raise DTypeError(f"needs real operands, got {d}")
    return d
