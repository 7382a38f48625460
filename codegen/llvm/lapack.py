"""LAPACK calls of compiled code: one spectral node (eigh, eigvalsh, svd, svdvals, qr) as a loop over its matrices.

For each matrix of the batch, `emit_lapack` copies the row-major input into a column-major
workspace (as NumPy's `np.linalg` does before calling LAPACK), testing it for NaN and infinity on
the way (x - x is 0 for every finite x); calls the routine (ILP64 Fortran ABI: every argument by
address, the hidden lengths of character arguments appended) with the workspace sizes of
`codegen.cpu.lapack`; and writes the packed result of the op (`symgraph.ops.spectral`) in
row-major order. A non-finite matrix or info != 0 writes (call number + 1, info) into the
status slot that the executable reads after the call.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from symgraph.errors import UnsupportedOpError

from ..cpu.lapack import NONFINITE, LapackCall, symbol
from .context import F64, I8, I64, PTR, VOID, LoweringContext, for_range, ll_type

__all__ = ["emit_lapack"]


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def emit_lapack(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value,
                status: ir.Value, number: int) -> None:
    """Emit the LAPACK work of one spectral node (`call`), reading its input's buffer and writing its own.

    Args:
        scratch: the arena's shared LAPACK scratch (`codegen.cpu.lapack.LapackPlan.scratch_offset`).
        status: the 16-byte status slot; number: this call's index in the plan.

    Raises:
        UnsupportedOpError: empty matrices (compiled code leaves them to the evaluator).
    """
    node = call.node
    x = node.inputs[0]
    m, n = call.m, call.n
    if m == 0 or n == 0:
        raise UnsupportedOpError(f"codegen: {call.op} of empty {m} x {n} matrices is not compiled; use "
                                 f"backend='numpy'")
    if call.batch == 0:
        return
    b = cx.builder
    ty = F64      # the workspace: NumPy computes float32 input in float64 (np.linalg's `_commonType`)
    tio = ll_type(x.dtype)
    src_base, dst_base = ptr_of(x), ptr_of(node)
    in_size, out_size = m * n, node.size // call.batch

    def buf(name: str) -> ir.Value:
        return cx.builder.gep(scratch, [_c64(call.offsets[name])], source_etype=I8)

    def at(p: ir.Value, i: ir.Value) -> ir.Value:
        return cx.builder.gep(p, [i], source_etype=ty)

    def load(p: ir.Value, i: ir.Value) -> ir.Value:
        return cx.builder.load(at(p, i), typ=ty)

    def store(v: ir.Value, p: ir.Value, i: ir.Value) -> None:
        cx.builder.store(v, at(p, i))

    def put(v: ir.Value, i: ir.Value) -> None:
        """Element i of this matrix's output (converted to the node's dtype)."""
        bb = cx.builder
        if tio != ty:
            v = bb.fptrunc(v, tio)
        bb.store(v, bb.gep(dst_of[0], [i], source_etype=tio))

    def lin(*terms: tuple) -> ir.Value:
        """sum of v * c over (v, c) pairs (v an ir.Value or an int)."""
        bb = cx.builder
        out = _c64(0)
        for v, c in terms:
            v = _c64(v) if isinstance(v, int) else v
            out = bb.add(out, v if c == 1 else bb.mul(v, _c64(c)))
        return out

    def loop2(rows: int, cols: int, body: Callable[[ir.Value, ir.Value], None], name: str) -> None:
        for_range(cx.builder, _c64(0), _c64(rows),
                  lambda i: for_range(cx.builder, _c64(0), _c64(cols), lambda j: body(i, j), name=f"{name}j"),
                  name=f"{name}i")

    def int_arg(v: int) -> ir.Value:
        a = cx.alloca(I64)
        cx.builder.store(_c64(v), a)
        return a

    def char_arg(ch: str) -> ir.Value:
        a = cx.alloca(I8)
        cx.builder.store(ir.Constant(I8, ord(ch)), a)
        return a

    info = cx.alloca(I64, "lapack_info")
    acc = cx.alloca(ty, "lapack_finite")

    def fail(code: ir.Value) -> None:  # the first failure of the call is kept
        bb = cx.builder
        with bb.if_then(bb.icmp_signed("==", bb.load(status, typ=I64), _c64(0))):
            bb.store(_c64(number + 1), status)
            bb.store(code, bb.gep(status, [_c64(1)], source_etype=I64))

    def fortran(routine: str, args: list, nchars: int) -> None:
        fn = cx.function(symbol(routine, np.float64), VOID, [PTR] * len(args) + [I64] * nchars)
        cx.builder.call(fn, args + [_c64(1)] * nchars)
        bb = cx.builder
        code = bb.load(info, typ=I64)
        with bb.if_then(bb.icmp_signed("!=", code, _c64(0)), likely=False):
            fail(code)

    dst_of = [None]

    def one(bi: ir.Value) -> None:
        bb = cx.builder
        src = bb.gep(src_base, [bb.mul(bi, _c64(in_size))], source_etype=tio)
        dst_of[0] = bb.gep(dst_base, [bb.mul(bi, _c64(out_size))], source_etype=tio)
        a = buf("a")
        bb.store(ir.Constant(ty, 0.0), acc)

        def copy(i: ir.Value, j: ir.Value) -> None:  # a[j*m + i] = src[i*n + j]
            b2 = cx.builder
            v = b2.load(b2.gep(src, [lin((i, n), (j, 1))], source_etype=tio), typ=tio)
            if tio != ty:
                v = b2.fpext(v, ty)
            b2.store(b2.fadd(b2.load(acc, typ=ty), b2.fsub(v, v)), acc)
            store(v, a, lin((j, m), (i, 1)))

        loop2(m, n, copy, "lcp")
        bb = cx.builder
        s = bb.load(acc, typ=ty)
        with bb.if_else(bb.fcmp_unordered("uno", s, s), likely=False) as (bad, good):
            with bad:
                fail(_c64(NONFINITE))
            with good:
                _ROUTINES[call.routine](cx, call, a, put, buf, load, store, lin, loop2, int_arg, char_arg, fortran,
                                        info, ty)

    for_range(b, _c64(0), _c64(call.batch), one, name="lb")


def _syevd(cx, call, a, put, buf, load, store, lin, loop2, int_arg, char_arg, fortran, info, ty) -> None:
    n = call.n
    w, work, iwork = buf("w"), buf("work"), buf("iwork")
    fortran("syevd", [char_arg(call.jobz), char_arg(call.uplo), int_arg(n), a, int_arg(n), w, work,
                      int_arg(call.lwork), iwork, int_arg(call.liwork), info], 2)
    for_range(cx.builder, _c64(0), _c64(n), lambda j: put(load(w, j), j), name="lw")
    if call.jobz == "V":  # rows 1..n: V[i][j] = a[j*n + i]
        loop2(n, n, lambda i, j: put(load(a, lin((j, n), (i, 1))), lin((i, n), (j, 1), (n, 1))), "lv")


def _gesdd(cx, call, a, put, buf, load, store, lin, loop2, int_arg, char_arg, fortran, info, ty) -> None:
    m, n = call.m, call.n
    k = min(m, n)
    s, u, vt, work, iwork = buf("s"), buf("u"), buf("vt"), buf("work"), buf("iwork")
    ldu = m if call.jobz != "N" else 1
    ldvt = call.vtrows if call.jobz != "N" else 1
    fortran("gesdd", [char_arg(call.jobz), int_arg(m), int_arg(n), a, int_arg(m), s, u, int_arg(ldu), vt,
                      int_arg(ldvt), work, int_arg(call.lwork), iwork, info], 1)
    if call.jobz == "N":
        for_range(cx.builder, _c64(0), _c64(k), lambda j: put(load(s, j), j), name="ls")
        return
    p = call.node.shape[-1]
    if call.jobz == "A" and p * (m + 1 + n) > 0:  # padded columns: zero the whole output first
        zero = ir.Constant(ty, 0.0)
        for_range(cx.builder, _c64(0), _c64(p * (m + 1 + n)), lambda i: put(zero, i), name="lz")
    # rows 0..m-1: U[i][j] = u[j*m + i]; row m: s; rows m+1..: V[i][j] = Vt[j][i] = vt[i*ldvt + j]
    loop2(m, call.ucols, lambda i, j: put(load(u, lin((j, m), (i, 1))), lin((i, p), (j, 1))), "lu")
    for_range(cx.builder, _c64(0), _c64(k), lambda j: put(load(s, j), lin((m * p, 1), (j, 1))), name="ls")
    loop2(n, call.vtrows, lambda i, j: put(load(vt, lin((i, ldvt), (j, 1))),
                                             lin(((m + 1) * p, 1), (i, p), (j, 1))), "lv")


def _geqrf(cx, call, a, put, buf, load, store, lin, loop2, int_arg, char_arg, fortran, info, ty) -> None:
    m, n, q = call.m, call.n, call.q
    k = min(m, n)
    tau, qbuf, work = buf("tau"), buf("qbuf"), buf("work")
    lwork = max(call.lwork, call.lwork2)
    fortran("geqrf", [int_arg(m), int_arg(n), a, int_arg(m), tau, work, int_arg(lwork), info], 0)
    zero = ir.Constant(ty, 0.0)

    def r_t(j: ir.Value, i: ir.Value) -> None:  # rows m..m+n-1: R^T[j][i] = R[i][j] = a[j*m + i] for i <= j
        bb = cx.builder
        v = bb.select(bb.icmp_signed("<=", i, j), load(a, lin((j, m), (i, 1))), zero)
        put(v, lin((m * q, 1), (j, q), (i, 1)))

    loop2(n, q, r_t, "lr")  # i <= j < n and i < q <= m for every stored nonzero
    # Q: the first min(n, q) reflector columns, then ?orgqr in place (columns past k become identity columns)
    ncopy = min(n, q)
    for_range(cx.builder, _c64(0), _c64(m * ncopy), lambda i: store(load(a, i), qbuf, i), name="lq")
    fortran("orgqr", [int_arg(m), int_arg(q), int_arg(k), qbuf, int_arg(m), tau, work, int_arg(lwork), info], 0)
    loop2(m, q, lambda i, j: put(load(qbuf, lin((j, m), (i, 1))), lin((i, q), (j, 1))), "lQ")


_ROUTINES = {"syevd": _syevd, "gesdd": _gesdd, "geqrf": _geqrf}
