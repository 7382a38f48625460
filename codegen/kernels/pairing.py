"""Matrix products for BLAS: operand views, sums that accumulate into gemm calls, products run side by side.

Three decisions of the partitioner about `matmul` nodes, all driven by what a BLAS call can
do: whether an operand is a strided view of a buffer (`gemm_view`: then it needs no copy);
which linear combinations of products accumulate in the calls themselves (`plan_accumulation`:
W - lr * (A @ B) is one gemm with alpha = -lr and beta = 1 into W's copy); and which
independent products of similar size run at the same time, one per core (`pair_gemms`).
The flops come from the cost model (`symgraph.passes.cost`).
"""

from __future__ import annotations

import numpy as np

from symgraph.ir import Node
from symgraph.ops import Op
from symgraph.passes.cost import node_flops

from .affine import Aff
from .body import BodyBuilder, uniform_scalar
from .expr import Expr
from .tasks import Kernel, KernelKind, Task, task_reads

__all__ = ["PAIR_MIN_FLOPS", "PAIR_MIN_DIM", "PAIR_MAX_RATIO", "PAIR_LOOKAHEAD", "gemm_view", "plan_accumulation",
           "pair_gemms"]

#: Products run side by side (`pair_gemms`): each of at least this many flops (and no
#: dimension under PAIR_MIN_DIM), the larger
#: at most PAIR_MAX_RATIO times the smaller, the later one within PAIR_LOOKAHEAD kernels.
PAIR_MIN_FLOPS = 1 << 20
PAIR_MIN_DIM = 32  # and m, n, k all at least this
PAIR_MAX_RATIO = 2
PAIR_LOOKAHEAD = 8


# ----- operands: strided views of buffers -----


def gemm_view(b: BodyBuilder, x: Node) -> dict | None:
    """A BLAS view of matmul operand x: base node, offset, strides; None if not viewable.

    Returns:
        None, or {"base": the buffer's node, "offset": elements, "batch_strides": per batch axis,
        "trans": whether BLAS reads it transposed, "ld": its leading dimension}.
    """
    vars_ = tuple(Aff.of(Expr.var(100 + i, d)) for i, d in enumerate(x.shape))
    e = b.value(x, vars_)
    if e.op != "load":
        return None
    off = e.args[0]
    base = e.attrs[0]
    strides = []
    for a in vars_:
        at = a.atoms()[0]
        strides.append(off.coeff(at))
    if any(not (a.op == "var" and a.attrs[0] >= 100) for a in off.atoms()):
        return None
    m, k = x.shape[-2], x.shape[-1]
    sm, sk = strides[-2], strides[-1]
    if k <= 1 or sk == 1:
        trans, ld = False, sm if m > 1 else max(k, 1)
        if ld < max(k, 1):
            ld = None
    else:
        trans, ld = None, None
    if ld is None or trans is None:
        if m <= 1 or sm == 1:
            trans, ld = True, sk if k > 1 else max(m, 1)
            if ld < max(m, 1):
                return None
        else:
            return None
    return {"base": base, "offset": off.const, "batch_strides": tuple(strides[:-2]), "trans": trans, "ld": ld}

# ----- gemm epilogues: linear combinations of products accumulate in the BLAS call -----

# What an op contributes to a linear combination comes from its record. A linear ring op (`Op.ring`
# and `Op.linear`: add, sub, neg) is f(x) = sum_i c_i x_i, so its coefficients are its values at the
# unit vectors (`_coefficients`, from `Op.impl`); the ring's product is its one non-linear op of two
# inputs (mul; muladd has three), a scaling when one factor is a uniform constant (`_linear_scale`).
_COEFFICIENTS: dict[Op, tuple[float, ...] | None] = {}


def _coefficients(op: Op) -> tuple[float, ...] | None:
    """(c_0, ..., c_{n-1}) with op(x_0, ..., x_{n-1}) = sum c_i x_i for a linear ring op (add: (1, 1),
    sub: (1, -1), neg: (-1,)), else None (cached per op)."""
    try:
        return _COEFFICIENTS[op]
    except KeyError:
        pass
    c = None
    if op.ring and op.linear and op.kind == "elementwise" and op.nin:
        c = tuple(float(op.impl(*[np.float64(i == j) for j in range(op.nin)])) for i in range(op.nin))
    _COEFFICIENTS[op] = c
    return c


def _is_product(op: Op) -> bool:
    """Whether op is the ring's product x * y (`Op.ring`, not linear, two inputs)."""
    return op.ring and not op.linear and op.nin == 2


def _is_linear_step(op: Op) -> bool:
    """Whether a linear combination may pass through op: a linear ring op or a product (by a scalar)."""
    return _coefficients(op) is not None or _is_product(op)


def _linear_scale(n: Node) -> tuple[Node, float] | None:
    """(x, c) when n = c * x with c a uniform constant (a multiplication by a scalar), else None."""
    if not _is_product(n.op):
        return None
    for i in (0, 1):
        c = uniform_scalar(n.inputs[i])
        if c is not None and n.inputs[1 - i].shape == n.shape:
            return n.inputs[1 - i], float(c)
    return None


def _is_inner(n: Node, readers: dict, outputs: set) -> bool:
    """Whether n may be folded into the linear combination of its single reader."""
    return (n not in outputs and len(readers.get(n, ())) == 1
            and n.op.kind == "elementwise" and n.dtype.kind == "f")


def plan_accumulation(order: list[Node], readers: dict, outputs: set, donate: frozenset) -> tuple[dict, set]:
    """Find sums like W - lr * (A @ B) or A @ B + C @ D + x whose products can accumulate in place.

    For each such root r (a float add/sub/neg/scalar-mul tree over products of r's shape and
    dtype, each product read only by the tree), r's buffer is first written with the
    remaining terms (a loop) and every product then adds into it: gemm with alpha = its
    coefficient and beta = 1. The products need no buffers of their own and the sum no
    extra pass. Roots that are outputs are skipped when buffers are donated (a donated
    output is written by one in-place loop).

    Returns:
        (plans, absorbed): root -> (the other terms [(coefficient, node)], the products
        [(coefficient, matmul node)]), and the products absorbed into some root.
    """
    acc_plans: dict[Node, tuple[list, list]] = {}
    absorbed: set[Node] = set()
    for m in order:
        if m.op.name != "matmul" or m.dtype not in (np.float32, np.float64) or m in absorbed:
            continue
        if m in outputs or len(readers.get(m, ())) != 1:
            continue
        cur = m
        while True:
            rs = readers.get(cur, ())
            if len(rs) != 1 or cur in outputs and cur is not m:
                break
            r = rs[0]
            if not _is_linear_step(r.op) or r.shape != m.shape or r.dtype != m.dtype:
                break
            if _is_product(r.op) and _linear_scale(r) is None:
                break
            if cur is not m and not _is_inner(cur, readers, outputs):
                break
            cur = r
            if not _is_inner(cur, readers, outputs):
                break
        root = cur
        if root is m or root in acc_plans:
            continue
        if root in outputs and donate:
            continue
        terms = _linear_terms(root, readers, outputs)
        if terms is None:
            continue
        gemms = [(c, x) for c, x in terms if x.op.name == "matmul" and x.shape == root.shape
                 and x.dtype == root.dtype and x not in outputs and len(readers.get(x, ())) == 1]
        if not gemms:
            continue
        gset = {x for _, x in gemms}
        rest = [(c, x) for c, x in terms if x not in gset]
        if rest and root not in outputs and not any(r.op.name == "matmul" for r in readers[root]):
            # x @ W + b read by a loop: fused into that loop it costs no pass; stored first and
            # accumulated it would cost one. Only sums that get a buffer anyway (outputs, gemm
            # operands) or that are sums of products alone are worth accumulating.
            continue
        acc_plans[root] = (rest, gemms)
        absorbed |= gset
    return acc_plans, absorbed


def _linear_terms(root: Node, readers: dict, outputs: set) -> list | None:
    """root as [(coefficient, leaf)]: descends through folded add/sub/neg/scalar-mul nodes."""
    out: list = []
    stack = [(root, 1.0)]
    seen = 0
    while stack:
        n, c = stack.pop()
        seen += 1
        if seen > 64:
            return None
        if n is not root and not _is_inner(n, readers, outputs) or not _is_linear_step(n.op) \
                or n.shape != root.shape or n.dtype != root.dtype:
            out.append((c, n))
            continue
        coeffs = _coefficients(n.op)
        if coeffs is not None:
            for x, ci in zip(n.inputs, coeffs):
                stack.append((x, c * ci))
        else:
            sc = _linear_scale(n)
            if sc is None:
                out.append((c, n))
            else:
                stack.append((sc[0], c * sc[1]))
    # a leaf reached twice (x + x) keeps both entries; products must appear once
    mm = [x for _, x in out if x.op.name == "matmul"]
    if len(mm) != len(set(mm)):
        return None
    return out

# ----- concurrent products -----


def _kernel_rw(k: Kernel) -> tuple[set, set]:
    """(nodes kernel k reads, nodes it writes)."""
    reads: set = set()
    for t in k.tasks:
        reads |= task_reads(t)
    return reads, {t.node for t in k.tasks}


def _single_gemm(k: Kernel) -> Task | None:
    """The product of a kernel that is one product (not yet paired), else None."""
    if k.kind != KernelKind.GEMM or k.concurrent or len(k.tasks) != 1:
        return None
    return k.tasks[0]


def _pair_flops(t: Task) -> int:
    """The flops of product task t, or 0 for a thin product (memory-bound: never paired)."""
    mm = t.gemm.get("mm", t.node)
    a, b = mm.inputs
    if min(a.shape[-2], a.shape[-1], b.shape[-1]) < PAIR_MIN_DIM:
        return 0  # a thin product (k = 10: dz @ W.T of a classifier layer) is memory-bound
    return node_flops(mm)


def pair_gemms(kernels: list[Kernel], donated_nodes: set) -> list[Kernel]:
    """Run independent products of similar size at the same time, one per core.

    The backward sweep of a dense layer has two products of the same size that
    do not depend on each other: the input gradient ``g @ W.T`` and the weight
    gradient ``x.T @ g`` (often fused into the update, accumulating into a copy of
    ``W``). Split across cores one after the other, each pays the split's overhead
    (both threads pack the whole shared operand); run side by side, each is one
    single-threaded BLAS call. For every single-product kernel, a later one within
    `PAIR_LOOKAHEAD` kernels with at most `PAIR_MAX_RATIO` times its flops (or
    conversely) is moved up beside it when nothing in between writes what it reads
    or reads or writes what it writes; the loop kernel that fills its accumulator
    (``W`` copied into the output) moves in front of the pair on the same
    conditions. Donated outputs are never moved. The pair becomes one kernel with
    ``concurrent=True`` (one step of the buffer plan: nothing one product reads
    shares memory with what the other writes); `codegen.llvm.module.build_module` runs
    its products on the thread pool, or one after the other without a pool.
    `donated_nodes` are the outputs written into donated inputs.
    """
    out = list(kernels)
    i = 0
    while i < len(out):
        ti = _single_gemm(out[i])
        if ti is None or _pair_flops(ti) < PAIR_MIN_FLOPS:
            i += 1
            continue
        ri, wi = _kernel_rw(out[i])
        for j in range(i + 1, min(len(out), i + 1 + PAIR_LOOKAHEAD)):
            tj = _single_gemm(out[j])
            if tj is None or tj.node in donated_nodes:
                continue
            fi, fj = _pair_flops(ti), _pair_flops(tj)
            if max(fi, fj) > PAIR_MAX_RATIO * min(fi, fj):
                continue
            moved = [j]
            if tj.gemm.get("beta"):
                # the accumulator's last writer before j must be before i, or a loop kernel that moves too
                pk = next((x for x in range(j - 1, i - 1, -1) if tj.node in _kernel_rw(out[x])[1]), -1)
                if pk > i:
                    if out[pk].kind != KernelKind.LOOP or {t.node for t in out[pk].tasks} != {tj.node}:
                        continue
                    moved = [pk, j]
                elif pk == i:
                    continue
            mr: set = set()
            mw: set = set()
            for x in moved:
                r, w = _kernel_rw(out[x])
                mr |= r
                mw |= w
            if mw & donated_nodes:
                continue
            between_r: set = set()
            between_w: set = set()
            for x in range(i, j):
                if x in moved:
                    continue
                r, w = _kernel_rw(out[x])
                between_r |= r
                between_w |= w
            if mr & between_w or mw & (between_r | between_w):
                continue
            pair = Kernel(KernelKind.GEMM, out[i].domain, out[i].red_axes, [ti, tj], concurrent=True)
            rest = [out[x] for x in range(i + 1, j) if x not in moved]
            pre = [out[moved[0]]] if len(moved) == 2 else []
            out = out[:i] + pre + [pair] + rest + out[j + 1:]
            i += len(pre)
            break
        i += 1
    return out
