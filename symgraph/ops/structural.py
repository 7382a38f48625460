"""Reductions and layout primitives: sum/max/min/prod/argmax, reshape, transpose,
broadcast_to, expand_dims, squeeze, slice/unslice, gather/scatter_add, concatenate.

Reductions take `axes` (a sorted tuple) and drop the reduced axes; keepdims is
a reshape added by the tracing layer.
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import DTypeError, ShapeError
from .batch import arg, flat_index, move_to0, rebind
from .core import Op, broadcast_shapes, register, same_dtype

# ----- reductions -----


def _reduce_shape(s, *, axes):
    for a in axes:
        if not 0 <= a < len(s):
            raise ShapeError(f"reduction axis {a} out of range for shape {s}")
    return tuple(d for i, d in enumerate(s) if i not in axes)


def _keep_shape(x_shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(x_shape))


def _expand_back(ct, x, axes):
    """Broadcast a reduced cotangent back to the operand's shape."""
    return L.broadcast_to(L.reshape(ct, _keep_shape(x.shape, axes)), x.shape)


def _sum_vjp(ct, node):
    x = node.inputs[0]
    return (_expand_back(ct, x, node.attr("axes")),)


def _sum_jvp(t, node):
    return None if t[0] is None else L.reduce("sum", t[0], axis=node.attr("axes"))


def _sum_dtype(d, *, axes):
    d = np.dtype(d)
    return np.dtype(np.int64) if d.kind == "b" else d


def _reduce_batch(node, bargs, size):
    return rebind(node, [bargs[0]], axes=tuple(a + 1 for a in node.attr("axes")))


register(Op("sum", 1, "reduction", _reduce_shape, _sum_dtype, lambda x, axes: np.sum(x, axis=axes, dtype=x.dtype if x.dtype.kind != "b" else np.int64),
            _sum_vjp, _sum_jvp, linear=True, doc="sum over axes", batch=_reduce_batch))


def _extreme_mask(node):
    # Ties share the cotangent equally: mask / count.
    x = node.inputs[0]
    axes = node.attr("axes")
    eq = L.cast(L.binary("eq", x, _expand_back(node, x, axes)), x.dtype)
    count = L.reduce("sum", eq, axis=axes)
    return eq, count, axes


def _extreme_vjp(ct, node):
    x = node.inputs[0]
    eq, count, axes = _extreme_mask(node)
    return (eq * _expand_back(ct / count, x, axes),)


def _extreme_jvp(t, node):
    if t[0] is None:
        return None
    eq, count, axes = _extreme_mask(node)
    return L.reduce("sum", t[0] * eq, axis=axes) / count


for _name, _fn in [("max", np.max), ("min", np.min)]:
    register(Op(_name, 1, "reduction", _reduce_shape, same_dtype,
                (lambda fn: lambda x, axes: fn(x, axis=axes))(_fn), _extreme_vjp, _extreme_jvp,
                doc=f"{_name} over axes; at ties the derivative is shared equally", magnitude="input",
                batch=_reduce_batch,
                copies_input=True))


def _shift_in_ones(e, k):
    """e (..., N) shifted right by k along the last axis, filled with ones."""
    n = e.shape[-1]
    nd = e.ndim
    lead = e.shape[:-1]
    ones = L.full_like(L.bind("slice", e, starts=(0,) * nd, stops=lead + (min(k, n),), steps=(1,) * nd), 1.0)
    if k >= n:
        return ones
    body = L.bind("slice", e, starts=(0,) * nd, stops=lead + (n - k,), steps=(1,) * nd)
    return L.bind("concatenate", ones, body, axis=nd - 1)


def _exclusive_prefix_prod(x):
    """e_i = prod_{j < i} x_j along the last axis (Hillis-Steele doubling: log2(N) multiplies)."""
    e = _shift_in_ones(x, 1)
    k = 1
    while k < x.shape[-1] - 1:
        e = e * _shift_in_ones(e, k)
        k *= 2
    return e


def _reverse_last(x):
    nd = x.ndim
    n = x.shape[-1]
    return L.bind("slice", x, starts=(0,) * (nd - 1) + (n - 1,), stops=x.shape[:-1] + (-1,),
                  steps=(1,) * (nd - 1) + (-1,))


def _prod_grad(node):
    """d prod / d x_i = prod_{j != i} x_j, as (exclusive prefix product) * (exclusive suffix product).

    A polynomial in x (no division, no where), so it is exact with zeros and
    its own derivatives are exact to every order. O(N log N) work for a
    reduction over N elements, O(log N) nodes.
    """
    x = node.inputs[0]
    axes = node.attr("axes")
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    perm = kept + tuple(axes)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    kshape = tuple(x.shape[i] for i in kept)
    xt = L.reshape(L.transpose(x, perm), kshape + (n,))
    pre = _exclusive_prefix_prod(xt)
    suf = _reverse_last(_exclusive_prefix_prod(_reverse_last(xt)))
    g = L.reshape(pre * suf, tuple(x.shape[i] for i in perm))
    return L.transpose(g, tuple(int(i) for i in np.argsort(perm)))


def _prod_vjp(ct, node):
    x = node.inputs[0]
    return (_expand_back(ct, x, node.attr("axes")) * _prod_grad(node),)


def _prod_jvp(t, node):
    return None if t[0] is None else L.reduce("sum", t[0] * _prod_grad(node), axis=node.attr("axes"))


register(Op("prod", 1, "reduction", _reduce_shape, same_dtype, lambda x, axes: np.prod(x, axis=axes),
            _prod_vjp, _prod_jvp, doc="product over axes; derivative exact with zeros, to every order",
            batch=_reduce_batch))


def _argmax_shape(s, *, axis):
    if not 0 <= axis < len(s):
        raise ShapeError(f"argmax: axis {axis} out of range for shape {s}")
    return tuple(d for i, d in enumerate(s) if i != axis)


register(Op("argmax", 1, "reduction", _argmax_shape, lambda d, axis: np.dtype(np.int64),
            lambda x, axis: np.argmax(x, axis=axis).astype(np.int64), differentiable=False,
            doc="index of the first maximum along axis",
            batch=lambda node, bargs, size: rebind(node, [bargs[0]], axis=node.attr("axis") + 1)))

# ----- layout -----


def _reshape_shape(s, *, shape):
    if int(np.prod(s, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
        raise ShapeError(f"reshape: cannot reshape {s} into {shape}")
    return shape


def _reshape_back(ct, node):
    return (L.reshape(ct, node.inputs[0].shape),)


def _linear_jvp(rebuild):
    def jvp(t, node):
        return None if t[0] is None else rebuild(t[0], node)

    return jvp


def _reshape_batch(node, bargs, size):
    return rebind(node, [bargs[0]], shape=(size,) + tuple(node.attr("shape")))


def _shift_axes_batch(node, bargs, size):
    return rebind(node, [bargs[0]], axes=tuple(a + 1 for a in node.attr("axes")))


register(Op("reshape", 1, "layout", _reshape_shape, same_dtype, lambda x, shape: np.reshape(x, shape),
            _reshape_back, _linear_jvp(lambda t, n: L.reshape(t, n.shape)), linear=True, doc="new shape, same size",
            view="reshape", magnitude="input", neg_zero=(0,), batch=_reshape_batch))


def _expand_dims_shape(s, *, axes):
    out = list(s)
    for a in axes:  # sorted, in output coordinates
        if not 0 <= a <= len(out):
            raise ShapeError(f"expand_dims: axis {a} out of range")
        out.insert(a, 1)
    return tuple(out)


def _squeeze_shape(s, *, axes):
    for a in axes:
        if not 0 <= a < len(s) or s[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of shape {s} is not of size 1")
    return tuple(d for i, d in enumerate(s) if i not in axes)


register(Op("expand_dims", 1, "layout", _expand_dims_shape, same_dtype, lambda x, axes: np.expand_dims(x, axes),
            _reshape_back, _linear_jvp(lambda t, n: L.bind("expand_dims", t, axes=n.attr("axes"))), linear=True,
            doc="insert size-1 axes (a reshape)", view="reshape", magnitude="input", neg_zero=(0,),
            batch=_shift_axes_batch))
register(Op("squeeze", 1, "layout", _squeeze_shape, same_dtype, lambda x, axes: np.squeeze(x, axes),
            _reshape_back, _linear_jvp(lambda t, n: L.bind("squeeze", t, axes=n.attr("axes"))), linear=True,
            doc="drop size-1 axes (a reshape)", view="reshape", magnitude="input", neg_zero=(0,),
            batch=_shift_axes_batch))


def _transpose_shape(s, *, perm):
    if sorted(perm) != list(range(len(s))):
        raise ShapeError(f"transpose: {perm} is not a permutation of {len(s)} axes")
    return tuple(s[p] for p in perm)


def _transpose_vjp(ct, node):
    perm = node.attr("perm")
    return (L.transpose(ct, tuple(int(i) for i in np.argsort(perm))),)


register(Op("transpose", 1, "layout", _transpose_shape, same_dtype, lambda x, perm: np.transpose(x, perm),
            _transpose_vjp, _linear_jvp(lambda t, n: L.transpose(t, n.attr("perm"))), linear=True,
            doc="permute axes", view="transpose", magnitude="input", neg_zero=(0,),
            batch=lambda node, bargs, size: rebind(node, [bargs[0]], perm=(0,) + tuple(p + 1 for p in node.attr("perm")))))


def _broadcast_shape(s, *, shape):
    if len(s) > len(shape) or broadcast_shapes(s, shape, op="broadcast_to") != tuple(shape):
        raise ShapeError(f"broadcast_to: cannot broadcast {s} to {shape}")
    return shape


def _broadcast_vjp(ct, node):
    return (L.unbroadcast(ct, node.inputs[0].shape),)


def _broadcast_batch(node, bargs, size):
    x = bargs[0]
    shape = tuple(node.attr("shape"))
    k = len(shape) - (x.ndim - 1)
    if k:
        x = L.reshape(x, (size,) + (1,) * k + x.shape[1:])
    return L.broadcast_to(x, (size,) + shape)


register(Op("broadcast_to", 1, "layout", _broadcast_shape, same_dtype,
            lambda x, shape: np.broadcast_to(x, shape), _broadcast_vjp,
            _linear_jvp(lambda t, n: L.broadcast_to(t, n.shape)), linear=True,
            doc="numpy broadcasting made explicit; VJP sums over the broadcast axes",
            view="broadcast", magnitude="input", neg_zero=(0,), batch=_broadcast_batch))


def _slice_shape(s, *, starts, stops, steps):
    if not len(starts) == len(stops) == len(steps) == len(s):
        raise ShapeError(f"slice: index of rank {len(starts)} for shape {s}")
    return tuple(len(range(a, b, c)) for a, b, c in zip(starts, stops, steps))


def _python_slice(start: int, stop: int, step: int) -> slice:
    """The Python slice of the elements range(start, stop, step) of a normalized (`slice.indices`) triple.

    A normalized start or stop of -1 with a negative step means "before
    element 0", not "the last element" as it would in a Python slice, so the
    triple is rebuilt from its first element and its length: an empty range
    gives an empty slice.
    """
    k = len(range(start, stop, step))
    if k == 0:
        return slice(0, 0, 1)
    end = start + k * step
    return slice(start, end if end >= 0 else None, step)


def _slices(starts, stops, steps) -> tuple:
    return tuple(_python_slice(a, b, c) for a, b, c in zip(starts, stops, steps))


def _slice_impl(x, *, starts, stops, steps):
    return x[_slices(starts, stops, steps)]


def _slice_vjp(ct, node):
    x = node.inputs[0]
    return (L.bind("unslice", ct, shape=x.shape, **{k: node.attr(k) for k in ("starts", "stops", "steps")}),)


def _slice_jvp(t, node):
    if t[0] is None:
        return None
    return L.bind("slice", t[0], **{k: node.attr(k) for k in ("starts", "stops", "steps")})


def _slice_batch(node, bargs, size):
    p = node.params
    return rebind(node, [bargs[0]], starts=(0,) + tuple(p["starts"]), stops=(size,) + tuple(p["stops"]),
                  steps=(1,) + tuple(p["steps"]))


register(Op("slice", 1, "layout", _slice_shape, same_dtype, _slice_impl, _slice_vjp, _slice_jvp, linear=True,
            doc="basic slicing x[a:b:c, ...] with normalized starts/stops/steps (stops may be -1 - n for negative steps)",
            view="slice", magnitude="input", neg_zero=(0,), batch=_slice_batch))


def _unslice_shape(s, *, shape, starts, stops, steps):
    want = _slice_shape(shape, starts=starts, stops=stops, steps=steps)
    if tuple(s) != want:
        raise ShapeError(f"unslice: operand {s} does not fit slice of {shape} ({want})")
    return shape


def _unslice_impl(x, *, shape, starts, stops, steps):
    out = np.zeros(shape, x.dtype)
    out[_slices(starts, stops, steps)] = x
    return out


def _unslice_vjp(ct, node):
    return (L.bind("slice", ct, **{k: node.attr(k) for k in ("starts", "stops", "steps")}),)


def _unslice_jvp(t, node):
    if t[0] is None:
        return None
    return L.bind("unslice", t[0], **node.params)


def _unslice_batch(node, bargs, size):
    p = node.params
    return rebind(node, [bargs[0]], shape=(size,) + tuple(p["shape"]), starts=(0,) + tuple(p["starts"]),
                  stops=(size,) + tuple(p["stops"]), steps=(1,) + tuple(p["steps"]))


register(Op("unslice", 1, "layout", _unslice_shape, same_dtype, _unslice_impl, _unslice_vjp, _unslice_jvp, linear=True,
            doc="zeros of attr shape with the operand placed at a slice (the transpose of slice)", magnitude="input",
            batch=_unslice_batch))

# ----- gather / scatter_add (integer-array indexing along one axis) -----


def _gather_shape(s, i, *, axis):
    if not 0 <= axis < len(s):
        raise ShapeError(f"gather: axis {axis} out of range for shape {s}")
    return s[:axis] + tuple(i) + s[axis + 1:]


def _int_index_dtype(i):
    if np.dtype(i).kind not in "iu":
        raise DTypeError(f"index arrays must be integers, got {i}")


def _gather_dtype(d, i, *, axis):
    _int_index_dtype(i)
    return d


def _norm_index(i, n):
    # Negative indices count from the end; out-of-range indices are clamped
    # (the JAX convention; concrete out-of-range indices are rejected at trace time).
    i = np.where(i < 0, i + n, i)
    return np.clip(i, 0, max(n - 1, 0))


def _gather_impl(x, i, *, axis):
    return np.take(x, _norm_index(i, x.shape[axis]), axis=axis)


def _gather_vjp(ct, node):
    x, i = node.inputs
    return (L.bind("scatter_add", ct, i, shape=x.shape, axis=node.attr("axis")), None)


def _gather_jvp(t, node):
    x, i = node.inputs
    return None if t[0] is None else L.bind("gather", t[0], i, axis=node.attr("axis"))


def _gather_batch(node, bargs, size):
    x, i = node.inputs
    axis = node.attr("axis")
    if bargs[1] is None:
        return rebind(node, [bargs[0], i], axis=axis + 1)
    # batched indices: move (batch, axis) to the front, flatten them, offset the indices per batch element
    xb = arg(node, bargs, 0, size)                       # (B, pre..., n, rest...)
    n = x.shape[axis]
    xt = move_to0(move_to0(xb, axis + 1), 1)             # (B, n, pre..., rest...)
    rest = xt.shape[2:]
    xf = L.reshape(xt, (size * n,) + rest)
    g = L.bind("gather", xf, flat_index(bargs[1], n, size), axis=0)   # (B, ishape..., pre..., rest...)
    ni, npre = i.ndim, axis
    # to (B, pre..., ishape..., rest...)
    perm = (0,) + tuple(range(1 + ni, 1 + ni + npre)) + tuple(range(1, 1 + ni)) + tuple(range(1 + ni + npre, g.ndim))
    return L.transpose(g, perm)


register(Op("gather", 2, "layout", _gather_shape, _gather_dtype, _gather_impl, _gather_vjp, _gather_jvp,
            doc="take(x, idx, axis): integer-array indexing along one axis; negative indices wrap once, "
                "out-of-range indices clamp", magnitude="input", neg_zero=(0,), copies_input=True,
            batch=_gather_batch))


def _scatter_shape(u, i, *, shape, axis):
    want = _gather_shape(tuple(shape), i, axis=axis)
    if tuple(u) != want:
        raise ShapeError(f"scatter_add: updates of shape {u} do not fit {shape} indexed along axis {axis} by {i}")
    return shape


def _scatter_dtype(d, i, *, shape, axis):
    _int_index_dtype(i)
    return d


def _scatter_impl(u, i, *, shape, axis):
    out = np.zeros(shape, u.dtype)
    idx = _norm_index(i, shape[axis])
    # move the indexed axis first so np.add.at accumulates repeated indices
    o = np.moveaxis(out, axis, 0)
    uu = np.moveaxis(u.reshape(shape[:axis] + (idx.size,) + shape[axis + 1:]), axis, 0)
    np.add.at(o, idx.reshape(-1), uu)
    return out


def _scatter_vjp(ct, node):
    u, i = node.inputs
    return (L.bind("gather", ct, i, axis=node.attr("axis")), None)


def _scatter_jvp(t, node):
    u, i = node.inputs
    return None if t[0] is None else L.bind("scatter_add", t[0], i, **node.params)


def _scatter_batch(node, bargs, size):
    u, i = node.inputs
    axis = node.attr("axis")
    shape = tuple(node.attr("shape"))
    if bargs[1] is None:
        return rebind(node, [bargs[0], i], shape=(size,) + shape, axis=axis + 1)
    ub = arg(node, bargs, 0, size)                       # (B, pre..., ishape..., rest...)
    n, ni, npre = shape[axis], i.ndim, axis
    # to (B, ishape..., pre..., rest...), the layout of a gather along axis 0
    perm = (0,) + tuple(range(1 + npre, 1 + npre + ni)) + tuple(range(1, 1 + npre)) + tuple(range(1 + npre + ni, ub.ndim))
    ut = L.transpose(ub, perm)
    rest = shape[:axis] + shape[axis + 1:]
    out = L.bind("scatter_add", ut, flat_index(bargs[1], n, size), shape=(size * n,) + rest, axis=0)
    out = L.reshape(out, (size, n) + rest)               # (B, n, pre..., rest...)
    return L.transpose(out, (0,) + tuple(range(2, 2 + npre)) + (1,) + tuple(range(2 + npre, out.ndim)))


register(Op("scatter_add", 2, "layout", _scatter_shape, _scatter_dtype, _scatter_impl, _scatter_vjp, _scatter_jvp,
            doc="zeros of attr shape, with updates added at integer indices along axis (repeats accumulate)",
            batch=_scatter_batch))

# ----- concatenate -----


def _concat_shape(*shapes, axis):
    s0 = shapes[0]
    if not 0 <= axis < len(s0):
        raise ShapeError(f"concatenate: axis {axis} out of range for shape {s0}")
    for i, s in enumerate(shapes):
        if len(s) != len(s0) or any(a != b for j, (a, b) in enumerate(zip(s, s0)) if j != axis):
            raise ShapeError(f"concatenate: operand {i} has shape {s}, incompatible with {s0} along axis {axis}")
    return s0[:axis] + (sum(s[axis] for s in shapes),) + s0[axis + 1:]


def _concat_vjp(ct, node):
    axis = node.attr("axis")
    outs = []
    off = 0
    nd = ct.ndim
    for x in node.inputs:
        n = x.shape[axis]
        starts = tuple(off if j == axis else 0 for j in range(nd))
        stops = tuple(off + n if j == axis else ct.shape[j] for j in range(nd))
        outs.append(L.bind("slice", ct, starts=starts, stops=stops, steps=(1,) * nd))
        off += n
    return tuple(outs)


def _concat_jvp(t, node):
    if all(x is None for x in t):
        return None
    ts = [L.zeros_like(x) if tx is None else tx for x, tx in zip(node.inputs, t)]
    return L.bind("concatenate", *ts, axis=node.attr("axis"))


register(Op("concatenate", None, "layout", _concat_shape, same_dtype,
            lambda *xs, axis: np.concatenate(xs, axis=axis), _concat_vjp, _concat_jvp, linear=True,
            doc="join operands along axis",
            batch=lambda node, bargs, size: rebind(node, [arg(node, bargs, i, size) for i in range(len(node.inputs))],
                                                   axis=node.attr("axis") + 1)))


# ----- sort and argsort: the sorting primitives (np.sort, argsort, partition, median, ... build on them) -----
# Both sort every row of the last axis in NumPy's kind="stable" order: NaN last (in input order), -0.0 equal
# to 0.0 (in input order). Compiled, one native routine does both (codegen/llvm/sort.py: an LSD radix sort
# of keys, with the index as payload for argsort). sort's derivative goes through argsort's permutation.


def _sort_shape(s):
    if len(s) < 1:
        raise ShapeError(f"sort: needs an array of at least one dimension (it sorts the last axis), got shape {s}")
    return tuple(s)


def _sort_keys(d, op: str):
    d = np.dtype(d)
    if d.kind not in "fiu":
        raise DTypeError(f"{op}: sorts real numbers (floats, signed or unsigned integers), got {d}")
    return d


def _sort_flops(node):
    n = node.shape[-1]
    return node.size * max(1, n.bit_length())


def _flat_last(perm):
    """perm (..., n) as indices into the flattened rows: perm[..., k] + n * (row number), shape (rows * n,)."""
    n = perm.shape[-1]
    rows = int(np.prod(perm.shape[:-1], dtype=np.int64))
    off = (np.arange(rows, dtype=np.int64) * n).reshape(perm.shape[:-1] + (1,))
    return L.reshape(L.add(perm, off) if rows > 1 else perm, (rows * n,))


def take_last(x, perm):
    """x[..., perm[..., k]] for every k (x and perm of one shape (..., n)): one gather."""
    return L.reshape(L.bind("gather", L.reshape(x, (x.size,)), _flat_last(perm), axis=0), x.shape)


def untake_last(z, perm):
    """The inverse: out[..., perm[..., k]] = z[..., k] (one scatter, the transpose of take_last)."""
    return L.reshape(L.bind("scatter_add", L.reshape(z, (z.size,)), _flat_last(perm), shape=(z.size,), axis=0),
                     z.shape)


def _sort_vjp(ct, node):
    # y = x[perm]: x̄[perm] = ȳ (a scatter through argsort's permutation; at ties the stable order decides)
    x = node.inputs[0]
    return (untake_last(ct, L.bind("argsort", x)),)


def _sort_jvp(t, node):
    (tx,) = t
    if tx is None:
        return None
    return take_last(tx, L.bind("argsort", node.inputs[0]))


def _last_batch(node, bargs, size):
    return rebind(node, [bargs[0]])


register(Op("sort", 1, "opaque", _sort_shape, lambda d: _sort_keys(d, "sort"),
            lambda x: np.sort(x, axis=-1, kind="stable"), _sort_vjp, _sort_jvp,
            doc="every row of the last axis sorted (NaN last, -0.0 equal to 0.0, NumPy's kind='stable' order); "
                "derivative through argsort's permutation; compiled: an LSD radix sort of keys per row "
                "(codegen/llvm/sort.py)",
            magnitude="input", neg_zero=(0,), copies_input=True, flops=_sort_flops, batch=_last_batch, extra={"lowering": "lapack"}))


def _argsort_dtype(d):
    _sort_keys(d, "argsort")
    return np.dtype(np.int64)


register(Op("argsort", 1, "opaque", lambda s: _sort_shape(s), _argsort_dtype,
            lambda x: np.argsort(x, axis=-1, kind="stable").astype(np.int64, copy=False), differentiable=False,
            doc="the stable sorting permutation of every row of the last axis (int64; NaN last, -0.0 equal to 0.0: "
                "NumPy's kind='stable' order); compiled: an LSD radix sort per row with the index as payload "
                "(codegen/llvm/sort.py)",
            flops=_sort_flops, batch=_last_batch, extra={"lowering": "lapack"}))


# ----- argpartition: a selection, not a sort -----


def _argpartition_shape(s, *, kth):
    _sort_shape(s)
    n = s[-1] if s else 0
    if any(not 0 <= k < n for k in kth) or list(kth) != sorted(set(kth)):
        raise ShapeError(f"argpartition: kth={kth} must be sorted distinct positions in [0, {n})")
    return tuple(s)


def _argpartition_dtype(d, **_):
    _sort_keys(d, "argpartition")
    return np.dtype(np.int64)


def _argpartition_flops(node):
    return node.size * (1 + len(node.attr("kth")))


register(Op("argpartition", 1, "opaque", _argpartition_shape, _argpartition_dtype,
            lambda x, *, kth: np.argpartition(x, list(kth), axis=-1).astype(np.int64, copy=False),
            differentiable=False,
            doc="a permutation of every row of the last axis that puts each position in kth (sorted, distinct) in "
                "its sorted place, no larger element before it and no smaller one after (NaN last; the order within "
                "the parts is unspecified, as NumPy's); int64; compiled: an MSD radix selection per row and kth, "
                "O(n) (codegen/llvm/sort.py)",
            flops=_argpartition_flops, batch=_last_batch, extra={"lowering": "lapack"}))
