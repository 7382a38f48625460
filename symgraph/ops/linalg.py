"""Contractions: batched matmul and einsum.

`matmul` takes operands (..., m, k) and (..., k, n) with equal batch
dimensions (vector promotion and batch broadcasting are explicit reshape and
broadcast_to nodes made at trace time). Its VJP is two matmuls with the other
operand transposed; it is bilinear, so its JVP is ta @ b + a @ tb.
"""

from __future__ import annotations

import math

import numpy as np

from .. import lax as L
from ..errors import ShapeError, UnsupportedOpError
from .batch import move_to0, rebind
from .core import Op, register, same_dtype


def _matmul_shape(a, b):
    if len(a) < 2 or len(b) < 2 or len(a) != len(b):
        raise ShapeError(f"matmul primitive needs operands of equal rank >= 2, got {a} and {b}")
    if a[:-2] != b[:-2]:
        raise ShapeError(f"matmul: batch dimensions differ: {a[:-2]} vs {b[:-2]}")
    if a[-1] != b[-2]:
        raise ShapeError(f"matmul: contracted dimensions differ: {a} @ {b}")
    return a[:-1] + b[-1:]


def _matmul_vjp(ct, node):
    a, b = node.inputs
    return (L.bind("matmul", ct, L.swap_last(b)), L.bind("matmul", L.swap_last(a), ct))


def _matmul_jvp(t, node):
    a, b = node.inputs
    ta, tb = t
    x = None if ta is None else L.bind("matmul", ta, b)
    y = None if tb is None else L.bind("matmul", a, tb)
    if x is None:
        return y
    return x if y is None else x + y


def matmul_flops(a_shape: tuple, b_shape: tuple) -> int:
    """Operations of the product (..., m, k) @ (..., k, n): 2·batch·m·n·k (batch broadcast as NumPy)."""
    *ba, m, k = a_shape
    *bb, _, n = b_shape
    # plain ints (np.prod took 20 us a call, called per product by fusion, the thread plan and the cost model)
    nb = math.prod(np.broadcast_shapes(tuple(ba), tuple(bb))) if ba or bb else 1
    return 2 * nb * int(m) * int(n) * int(k)


def _matmul_flops(node) -> int:
    return matmul_flops(node.inputs[0].shape, node.inputs[1].shape)


def _matmul_batch(node, bargs, size):
    a, b = node.inputs
    ba, bb = bargs
    if ba is not None and bb is not None:
        return L.bind("matmul", ba, bb)
    if ba is not None:
        # (B, ..., m, k) -> (..., B*m, k) @ (..., k, n): one product, no copies of b
        nb = a.ndim - 2
        m, k = a.shape[-2:]
        t = L.transpose(ba, tuple(range(1, nb + 1)) + (0, nb + 1, nb + 2))
        t = L.reshape(t, a.shape[:-2] + (size * m, k))
        out = L.bind("matmul", t, b)                     # (..., B*m, n)
        out = L.reshape(out, a.shape[:-2] + (size, m, b.shape[-1]))
        return move_to0(out, nb)
    # b batched: (B, ..., k, n) -> (..., k, B*n)
    nb = b.ndim - 2
    k, n = b.shape[-2:]
    t = L.transpose(bb, tuple(range(1, nb + 1)) + (nb + 1, 0, nb + 2))
    t = L.reshape(t, b.shape[:-2] + (k, size * n))
    out = L.bind("matmul", a, t)                         # (..., m, B*n)
    out = L.reshape(out, a.shape[:-2] + (a.shape[-2], size, n))
    return move_to0(out, nb + 1)


register(Op("matmul", 2, "contraction", _matmul_shape, same_dtype, np.matmul, _matmul_vjp, _matmul_jvp,
            doc="batched matrix product (..., m, k) @ (..., k, n)", flops=_matmul_flops, batch=_matmul_batch))


def parse_einsum(spec: str, nops: int) -> tuple[list[str], str]:
    """Split an explicit einsum spec 'ij,jk->ik' into operand and output subscripts.

    Raises:
        UnsupportedOpError: for implicit output or ellipsis specs (normalized before binding).
    """
    spec = spec.replace(" ", "")
    if "->" not in spec or "." in spec:
        raise UnsupportedOpError(f"einsum primitive needs an explicit spec without '...', got {spec!r}")
    ins, out = spec.split("->")
    terms = ins.split(",")
    if len(terms) != nops:
        raise ShapeError(f"einsum: spec {spec!r} names {len(terms)} operands, got {nops}")
    return terms, out


def _einsum_shape(*shapes, spec):
    terms, out = parse_einsum(spec, len(shapes))
    dims: dict[str, int] = {}
    for i, (t, s) in enumerate(zip(terms, shapes)):
        if len(t) != len(s):
            raise ShapeError(f"einsum: operand {i} has shape {s} but subscripts {t!r}")
        for c, d in zip(t, s):
            if dims.setdefault(c, d) != d:
                raise ShapeError(f"einsum: index {c!r} has sizes {dims[c]} and {d} (operand {i})")
    for c in out:
        if c not in dims:
            raise ShapeError(f"einsum: output index {c!r} appears in no operand")
    return tuple(dims[c] for c in out)


def _einsum_impl(*xs, spec):
    return np.einsum(spec, *xs, optimize=len(xs) > 2)


def _einsum_vjp(ct, node):
    spec = node.attr("spec")
    ops = node.inputs
    terms, out = parse_einsum(spec, len(ops))
    cts = []
    for i, (t, x) in enumerate(zip(terms, ops)):
        if len(set(t)) != len(t):
            raise UnsupportedOpError(f"einsum: no derivative for repeated index in operand {i} ({t!r}) of {spec!r}")
        others = [(terms[j], ops[j]) for j in range(len(ops)) if j != i]
        present = set(out).union(*[set(tt) for tt, _ in others]) if others else set(out)
        kept = "".join(c for c in t if c in present)
        sub = ",".join([out] + [tt for tt, _ in others]) + "->" + kept
        g = L.bind("einsum", ct, *[o for _, o in others], spec=sub)
        if kept != t:
            # indices summed only inside operand i: their cotangent is a broadcast
            shp = tuple(x.shape[t.index(c)] if c in kept else 1 for c in t)
            perm_src = [c for c in t if c in kept]
            g = L.transpose(g, tuple(kept.index(c) for c in perm_src))
            g = L.broadcast_to(L.reshape(g, shp), x.shape)
        cts.append(g)
    return tuple(cts)


def _einsum_jvp(t, node):
    spec = node.attr("spec")
    total = None
    for i, ti in enumerate(t):
        if ti is None:
            continue
        args = list(node.inputs)
        args[i] = ti
        term = L.bind("einsum", *args, spec=spec)
        total = term if total is None else total + term
    return total


def _einsum_flops(node) -> int:
    # a multiply and an add per point of the index space
    try:
        ins, _ = parse_einsum(node.attr("spec"), len(node.inputs))
    except Exception:  # noqa: BLE001  # pragma: no cover - a malformed spec was rejected at trace time
        return 2 * node.size
    dims: dict[str, int] = {}
    for sub, x in zip(ins, node.inputs):
        for c, d in zip(sub, x.shape):
            dims[c] = int(d)
    return 2 * int(np.prod(list(dims.values()), dtype=np.int64)) if dims else 2


def _einsum_batch(node, bargs, size):
    # the batch axis becomes a fresh index letter of every batched operand and of the output
    spec = node.attr("spec")
    terms, out = parse_einsum(spec, len(node.inputs))
    used = set(spec)
    z = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in used)
    ins, new_terms = [], []
    for x, bx, t in zip(node.inputs, bargs, terms):
        ins.append(x if bx is None else bx)
        new_terms.append(t if bx is None else z + t)
    return rebind(node, ins, spec=",".join(new_terms) + "->" + z + out)


register(Op("einsum", None, "contraction", _einsum_shape, same_dtype, _einsum_impl, _einsum_vjp, _einsum_jvp,
            doc="Einstein summation with an explicit spec (attr spec); multilinear", flops=_einsum_flops,
            batch=_einsum_batch))
