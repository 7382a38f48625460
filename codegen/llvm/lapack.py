"""LAPACK calls of compiled code: one node (eigh, svd, qr, cholesky, triangular_solve, lu, ...) as a loop over its matrices.

`emit_lapack` loops over the matrices of the batch and emits, for each, the work of the node's
routine (`codegen.cpu.lapack` plans the routine, workspace sizes and scratch). Every routine
goes through one `Call` helper (`codegen.llvm.lapack_call`): buffers of the scratch, loads and stores in the working
precision, LAPACK's ILP64 Fortran ABI (every argument by address, the hidden lengths of
character arguments appended), and `fail`, which writes (call number + 1, info, batch index,
detail) into the status slot that the executable reads after the call (the first failure is
kept). Nothing fails natively: a non-finite matrix or a bad `info` is recorded and the
executable raises `symgraph.errors.LinAlgError` at the user's line.

- The spectral routines (?syevd, ?gesdd, ?geqrf + ?orgqr) copy the row-major input into a
  column-major float64 workspace (as NumPy's `np.linalg` does before calling LAPACK), testing it
  for NaN and infinity on the way (x - x is 0 for every finite x), and write the packed result of
  the op (`symgraph.ops.spectral`) in row-major order.
- ?potrf (cholesky) factors the row-major lower triangle in place as column-major 'U' (the same
  bytes), in the node's output buffer (float64) or a float64 scratch (float32), after the same
  finiteness test of the triangle it reads; the strict upper triangle is zeroed.
- ?trsm (triangular_solve) solves in place in the output, a copy of b, as the right-side solve
  xᵀ op(a)ᵀ = bᵀ of the column-major views; a zero or NaN on the diagonal read fails first
  (trsm itself has no `info`).
- cholesky_vjp ("chol_rev") runs Murray's blocked reverse Cholesky in its output with ?trsm, ?gemm and
  ?trmm on the row-major blocks read column-major (`_chol_rev`).
- ?getrf (lu) factors a column-major copy and writes the packed factors and the 0-based pivots.
- "perm" (pivots_to_permutation) applies the pivot swaps to the identity permutation.
- "fft" (fft_parts) is no LAPACK routine: one call of the native FFT's row function
  (`codegen.llvm.fft.fft_node_function`) over the batch, its workspace in the same scratch.
- "sort" (argsort) is a native radix sort per row, `codegen.llvm.sort`.
- a complex primitive on split parts (lapack_parts; `call.kinds` set) is the complex routine of
  `codegen.llvm.lapack_complex`, on interleaved copies of its parts.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from symgraph.errors import UnsupportedOpError

from ..cpu.lapack import NONFINITE, LapackCall
from .context import F64, I8, I64, LoweringContext, for_range, ll_type
from .lapack_call import Call as _Call
from .lapack_call import c64 as _c64
from .lapack_complex import emit_complex
from .select import emit_select
from .sort import emit_sort

__all__ = ["emit_lapack"]


def emit_lapack(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value,
                status: ir.Value, number: int) -> None:
    """Emit the LAPACK work of one node (`call`), reading its inputs' buffers and writing its own.

    Args:
        scratch: the arena's shared LAPACK scratch (`codegen.cpu.lapack.LapackPlan.scratch_offset`).
        status: the status slot; number: this call's index in the plan.

    Raises:
        UnsupportedOpError: empty matrices of a spectral op (compiled code leaves them to the evaluator).
    """
    node = call.node
    if call.kinds:  # a complex primitive on split parts (lapack_parts): the complex routines
        emit_complex(cx, call, ptr_of, scratch, status, number)
        return
    if call.routine == "fft":
        _emit_fft(cx, call, ptr_of, scratch)
        return
    if call.routine == "sort":
        emit_sort(cx, call, ptr_of, scratch)
        return
    if call.routine == "select":
        emit_select(cx, call, ptr_of, scratch)
        return
    if call.routine in _FACTOR:
        if call.batch == 0 or node.size == 0 or call.n == 0:
            return  # nothing to compute (an empty output)
        ty = F64 if call.routine == "potrf" else ll_type(np.dtype(call.dtype))
        if call.routine == "perm":
            ty = ll_type(node.dtype)
        e = _Call(cx, call, scratch, status, number, ty)
        srcs = [ptr_of(x) for x in node.inputs]
        dst = ptr_of(node)
        sizes = [x.size // call.batch for x in node.inputs]
        out_size = node.size // call.batch
        tio = ll_type(node.dtype)

        def one(bi: ir.Value) -> None:
            e.bi = bi
            bb = cx.builder
            ptrs = [bb.gep(p, [bb.mul(bi, _c64(sz))], source_etype=tio) for p, sz in zip(srcs, sizes)]
            e.dst = bb.gep(dst, [bb.mul(bi, _c64(out_size))], source_etype=tio)
            _FACTOR[call.routine](e, tio, *ptrs)

        for_range(cx.builder, _c64(0), _c64(call.batch), one, name="lb")
        return
    _emit_spectral(cx, call, ptr_of, scratch, status, number)


def _emit_fft(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value) -> None:
    """fft_parts: the native FFT of every row (kind c2c/r2c/c2r in `call.uplo`), packed (2, ...) complex results."""
    from .fft import fft_node_function

    node = call.node
    if call.batch == 0:
        return
    kind, n = call.uplo, call.n
    ty = ll_type(node.dtype)
    b = cx.builder
    parts = [ptr_of(x) for x in node.inputs[:-1]]
    in_r, in_i = parts[0], parts[-1]
    out = ptr_of(node)
    if kind == "c2r":
        out_r = out_i = out
    else:  # the imaginary parts after the real ones: (2, batch..., m)
        out_r, out_i = out, b.gep(out, [_c64(node.size // 2)], source_etype=ty)
    work = b.gep(scratch, [_c64(call.offsets["work"])], source_etype=I8)
    fn = fft_node_function(cx, kind, n, ty, call.trans)
    b.call(fn, [in_r, in_i, out_r, out_i, ptr_of(node.inputs[-1]), work, _c64(call.batch)])


def _emit_spectral(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value,
                   status: ir.Value, number: int) -> None:
    node = call.node
    x = node.inputs[0]
    m, n = call.m, call.n
    if m == 0 or n == 0:
        raise UnsupportedOpError(f"codegen: {call.op} of empty {m} x {n} matrices is not compiled; use "
                                 f"backend='numpy'")
    if call.batch == 0:
        return
    e = _Call(cx, call, scratch, status, number, F64)  # NumPy computes float32 input in float64 (`_commonType`)
    tio = ll_type(x.dtype)
    src_base, dst_base = ptr_of(x), ptr_of(node)
    in_size, out_size = m * n, node.size // call.batch

    def put(v: ir.Value, i: ir.Value) -> None:
        """Element i of this matrix's output (converted to the node's dtype)."""
        e.store(e.convert(v, tio), e.dst, i, tio)

    def one(bi: ir.Value) -> None:
        e.bi = bi
        bb = cx.builder
        src = bb.gep(src_base, [bb.mul(bi, _c64(in_size))], source_etype=tio)
        e.dst = bb.gep(dst_base, [bb.mul(bi, _c64(out_size))], source_etype=tio)
        a = e.buf("a")
        bb.store(ir.Constant(F64, 0.0), e.acc)

        def copy(i: ir.Value, j: ir.Value) -> None:  # a[j*m + i] = src[i*n + j]
            v = e.convert(e.load(src, e.lin((i, n), (j, 1)), tio), F64)
            e.finite(v)
            e.store(v, a, e.lin((j, m), (i, 1)))

        e.loop2(m, n, copy, "lcp")
        e.if_finite(lambda: _SPECTRAL[call.routine](e, a, put))

    for_range(cx.builder, _c64(0), _c64(call.batch), one, name="lb")


# ----- the spectral routines: a is the column-major float64 copy, put(v, i) writes output element i -----


def _syevd(e: _Call, a: ir.Value, put: Callable) -> None:
    call = e.call
    n = call.n
    w, work, iwork = e.buf("w"), e.buf("work"), e.buf("iwork")
    e.fortran("syevd", [e.char_arg(call.jobz), e.char_arg(call.uplo), e.int_arg(n), a, e.int_arg(n), w, work,
                        e.int_arg(call.lwork), iwork, e.int_arg(call.liwork), e.info], 2)
    e.loop(0, n, lambda j: put(e.load(w, j), j), "lw")
    if call.jobz == "V":  # rows 1..n: V[i][j] = a[j*n + i]
        e.loop2(n, n, lambda i, j: put(e.load(a, e.lin((j, n), (i, 1))), e.lin((i, n), (j, 1), (n, 1))), "lv")


def _gesdd(e: _Call, a: ir.Value, put: Callable) -> None:
    call = e.call
    m, n = call.m, call.n
    k = min(m, n)
    s, u, vt, work, iwork = e.buf("s"), e.buf("u"), e.buf("vt"), e.buf("work"), e.buf("iwork")
    ldu = m if call.jobz != "N" else 1
    ldvt = call.vtrows if call.jobz != "N" else 1
    e.fortran("gesdd", [e.char_arg(call.jobz), e.int_arg(m), e.int_arg(n), a, e.int_arg(m), s, u, e.int_arg(ldu),
                        vt, e.int_arg(ldvt), work, e.int_arg(call.lwork), iwork, e.info], 1)
    if call.jobz == "N":
        e.loop(0, k, lambda j: put(e.load(s, j), j), "ls")
        return
    p = call.node.shape[-1]
    if call.jobz == "A" and p * (m + 1 + n) > 0:  # padded columns: zero the whole output first
        zero = ir.Constant(F64, 0.0)
        e.loop(0, p * (m + 1 + n), lambda i: put(zero, i), "lz")
    # rows 0..m-1: U[i][j] = u[j*m + i]; row m: s; rows m+1..: V[i][j] = Vt[j][i] = vt[i*ldvt + j]
    e.loop2(m, call.ucols, lambda i, j: put(e.load(u, e.lin((j, m), (i, 1))), e.lin((i, p), (j, 1))), "lu")
    e.loop(0, k, lambda j: put(e.load(s, j), e.lin((m * p, 1), (j, 1))), "ls")
    e.loop2(n, call.vtrows, lambda i, j: put(e.load(vt, e.lin((i, ldvt), (j, 1))),
                                               e.lin(((m + 1) * p, 1), (i, p), (j, 1))), "lv")


def _geqrf(e: _Call, a: ir.Value, put: Callable) -> None:
    call = e.call
    m, n, q = call.m, call.n, call.q
    k = min(m, n)
    tau, qbuf, work = e.buf("tau"), e.buf("qbuf"), e.buf("work")
    lwork = max(call.lwork, call.lwork2)
    e.fortran("geqrf", [e.int_arg(m), e.int_arg(n), a, e.int_arg(m), tau, work, e.int_arg(lwork), e.info], 0)
    zero = ir.Constant(F64, 0.0)

    def r_t(j: ir.Value, i: ir.Value) -> None:  # rows m..m+n-1: R^T[j][i] = R[i][j] = a[j*m + i] for i <= j
        bb = e.b
        v = bb.select(bb.icmp_signed("<=", i, j), e.load(a, e.lin((j, m), (i, 1))), zero)
        put(v, e.lin((m * q, 1), (j, q), (i, 1)))

    e.loop2(n, q, r_t, "lr")  # i <= j < n and i < q <= m for every stored nonzero
    # Q: the first min(n, q) reflector columns, then ?orgqr in place (columns past k become identity columns)
    ncopy = min(n, q)
    e.loop(0, m * ncopy, lambda i: e.store(e.load(a, i), qbuf, i), "lq")
    e.fortran("orgqr", [e.int_arg(m), e.int_arg(q), e.int_arg(k), qbuf, e.int_arg(m), tau, work, e.int_arg(lwork),
                        e.info], 0)
    e.loop2(m, q, lambda i, j: put(e.load(qbuf, e.lin((j, m), (i, 1))), e.lin((i, q), (j, 1))), "lQ")


_SPECTRAL = {"syevd": _syevd, "gesdd": _gesdd, "geqrf": _geqrf}


# ----- the factorizations: (e, the node's element type, pointers to this matrix of each input) -----


def _potrf(e: _Call, tio: ir.Type, src: ir.Value) -> None:
    """L of a = L Lᵀ from a's lower triangle: ?potrf 'U' on the same bytes read column-major."""
    n = e.call.n
    inplace = tio == F64
    w = e.dst if inplace else e.buf("a")
    bb = e.b
    bb.store(ir.Constant(F64, 0.0), e.acc)

    def copy(i: ir.Value) -> None:  # the lower triangle, row by row: w[i*n + j] = a[i*n + j], j <= i
        def el(j: ir.Value) -> None:
            k = e.lin((i, n), (j, 1))
            v = e.convert(e.load(src, k, tio), F64)
            e.finite(v)
            e.store(v, w, k, F64)
        e.loop(0, e.b.add(i, _c64(1)), el, "lcj")

    e.loop(0, n, copy, "lci")
    e.if_finite(lambda: e.fortran("potrf", [e.char_arg("U"), e.int_arg(n), w, e.int_arg(n), e.info], 1))
    # the factor's diagonal is finite whenever ?potrf succeeds on a finite matrix, unless it overflowed
    e.b.store(ir.Constant(F64, 0.0), e.acc)
    e.loop(0, n, lambda i: e.finite(e.load(w, e.lin((i, n + 1)), F64)), "ld")
    with e.b.if_then(e.is_nonfinite(), likely=False):
        e.fail(_c64(NONFINITE))
    zero = ir.Constant(tio, 0.0)

    def out_row(i: ir.Value) -> None:  # the strict upper triangle zeroed (and the factor rounded to float32)
        if not inplace:
            e.loop(0, e.b.add(i, _c64(1)),
                   lambda j: e.store(e.convert(e.load(w, e.lin((i, n), (j, 1)), F64), tio), e.dst,
                                     e.lin((i, n), (j, 1)), tio), "loj")
        e.loop(e.b.add(i, _c64(1)), n, lambda j: e.store(zero, e.dst, e.lin((i, n), (j, 1)), tio), "lzj")

    e.loop(0, n, out_row, "loi")


def _trsm(e: _Call, tio: ir.Type, a: ir.Value, b: ir.Value) -> None:
    """x with op(a) x = b: ?trsm side 'R' on xᵀ op(a)ᵀ = bᵀ, in place in the output (a copy of b)."""
    call = e.call
    n, k = call.n, call.nrhs
    if not call.unit:  # trsm divides by the diagonal without a check: a zero or NaN fails first
        def diag(p: ir.Value) -> None:
            b2 = e.b
            d = e.load(a, e.lin((p, n + 1)), tio)
            nan = b2.fcmp_unordered("uno", d, d)
            bad = b2.or_(b2.fcmp_ordered("==", d, ir.Constant(tio, 0.0)), nan)
            with b2.if_then(bad, likely=False):
                e.fail(e.b.add(p, _c64(1)), e.b.zext(nan, I64))
        e.loop(0, n, diag, "ld")
    e.loop(0, n * k, lambda i: e.store(e.load(b, i, tio), e.dst, i, tio), "lcp")
    with e.b.if_then(e.ok()):
        e.fortran("trsm", [e.char_arg("R"), e.char_arg(call.uplo), e.char_arg("T" if call.trans else "N"),
                           e.char_arg("U" if call.unit else "N"), e.int_arg(k), e.int_arg(n), e.float_arg(1.0), a,
                           e.int_arg(n), e.dst, e.int_arg(max(k, 1))], 4, check=None)


def _chol_rev(e: _Call, tio: ir.Type, lm: ir.Value, lbar: ir.Value) -> None:
    """Ā = Φ(S + Sᵀ) from L and L̄ (cholesky_vjp): Murray's blocked reverse Cholesky, in place in the output.

    With blocks of nb columns [j, k), processed last to first, D = L[j:k, j:k], R = L[j:k, :j],
    C = L[k:, j:k], B = L[k:, :j] and the work matrix F = tril(L̄) (the output), whose blocks
    D̄, R̄, C̄, B̄ sit where those of L do: C̄ ← C̄ D⁻¹; D̄ ← D̄ − tril(C̄ᵀ C); B̄ ← B̄ − C̄ R;
    R̄ ← R̄ − C̄ᵀ B; D̄ ← Φ(T + Tᵀ) with T = D⁻ᵀ Φ(Dᵀ D̄) D⁻¹ (the unblocked rule, in scratch);
    R̄ ← R̄ − (D̄ + D̄ᵀ) R. About 2n³/3 flops (twice ?potrf), where the formula costs 4n³.
    Every product is a BLAS call on the row-major blocks read column-major (X at (r, c) is Xᵀ
    at the same address with leading dimension n), so nothing is transposed or copied but the
    diagonal blocks. A zero or NaN on L's diagonal fails first, as in triangular_solve.
    """
    call = e.call
    n, nb = call.n, call.nrhs
    nblk = -(-n // nb)
    zero, half = ir.Constant(tio, 0.0), ir.Constant(tio, 0.5)
    f, w, ew = e.dst, e.buf("w"), e.buf("e")

    def diag(p: ir.Value) -> None:
        d = e.load(lm, e.lin((p, n + 1)), tio)
        nan = e.b.fcmp_unordered("uno", d, d)
        with e.b.if_then(e.b.or_(e.b.fcmp_ordered("==", d, zero), nan), likely=False):
            e.fail(e.b.add(p, _c64(1)), e.b.zext(nan, I64))

    e.loop(0, n, diag, "ld")

    def at(p: ir.Value, r: Any, c: Any) -> ir.Value:  # row-major element (r, c) of an n x n matrix
        return e.at(p, e.lin((r, n), (c, 1)), tio)

    def blas(routine: str, chars: str, ints: list, *rest: ir.Value) -> None:
        """?gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) or ?trsm/?trmm(side, uplo, ta, diag, m,
        n, alpha, a, lda, b, ldb): `rest` alternates (alpha, a, lda, b, ldb[, beta, c, ldc]) as given."""
        args = [e.char_arg(ch) for ch in chars] + [e.int_var(v) if isinstance(v, ir.Value) else e.int_arg(v)
                                                  for v in ints]
        e.fortran(routine, args + list(rest), len(chars), check=None)

    ld_n, ld_b = e.int_arg(n), e.int_arg(nb)
    plus, minus = e.float_arg(1.0), e.float_arg(-1.0)

    def lower_copy(i: ir.Value) -> None:  # F = tril(L̄)
        e.loop(0, e.b.add(i, _c64(1)), lambda j: e.store(e.load(lbar, e.lin((i, n), (j, 1)), tio), f,
                                                         e.lin((i, n), (j, 1)), tio), "lfj")
        e.loop(e.b.add(i, _c64(1)), n, lambda j: e.store(zero, f, e.lin((i, n), (j, 1)), tio), "lfz")

    def block(t: ir.Value) -> None:
        bb = e.b
        j = bb.mul(bb.sub(_c64(nblk - 1), t), _c64(nb))
        k0 = bb.add(j, _c64(nb))
        k = bb.select(bb.icmp_signed(">", k0, _c64(n)), _c64(n), k0)
        bs, m = bb.sub(k, j), bb.sub(_c64(n), k)
        ljj = at(lm, j, j)
        with bb.if_then(bb.icmp_signed(">", m, _c64(0))):
            fkj = at(f, k, j)
            blas("trsm", "LUNN", [bs, m], plus, ljj, ld_n, fkj, ld_n)                              # C̄ D⁻¹
            blas("gemm", "NT", [bs, bs, m], minus, at(lm, k, j), ld_n, fkj, ld_n, plus, at(f, j, j), ld_n)  # C̄ᵀ C
            with e.b.if_then(e.b.icmp_signed(">", j, _c64(0))):
                blas("gemm", "NN", [j, m, bs], minus, at(lm, j, 0), ld_n, fkj, ld_n, plus, at(f, k, 0), ld_n)  # C̄ R
                blas("gemm", "NT", [j, bs, m], minus, at(lm, k, 0), ld_n, fkj, ld_n, plus, at(f, j, 0), ld_n)  # C̄ᵀ B

        def wcopy(a: ir.Value, c: ir.Value) -> None:  # W = tril(D̄), row-major with leading dimension nb
            v = e.load(f, e.lin((j, n + 1), (a, n), (c, 1)), tio)
            e.store(e.b.select(e.b.icmp_signed("<=", c, a), v, zero), w, e.lin((a, nb), (c, 1)), tio)

        e.loop(0, bs, lambda a: e.loop(0, bs, lambda c: wcopy(a, c), "lwc"), "lwa")
        blas("trmm", "RUTN", [bs, bs], plus, ljj, ld_n, w, ld_b)                                    # Dᵀ W

        def phi_row(a: ir.Value) -> None:
            d = e.lin((a, nb + 1))
            e.store(e.b.fmul(e.load(w, d, tio), half), w, d, tio)
            e.loop(e.b.add(a, _c64(1)), bs, lambda c: e.store(zero, w, e.lin((a, nb), (c, 1)), tio), "lpc")

        e.loop(0, bs, phi_row, "lpa")
        blas("trsm", "RUTN", [bs, bs], plus, ljj, ld_n, w, ld_b)                                    # D⁻ᵀ P
        blas("trsm", "LUNN", [bs, bs], plus, ljj, ld_n, w, ld_b)                                    # (·) D⁻¹

        def sym(a: ir.Value, c: ir.Value) -> None:  # E = T + Tᵀ; F's block = Φ(E) (the lower triangle)
            v = e.b.fadd(e.load(w, e.lin((a, nb), (c, 1)), tio), e.load(w, e.lin((c, nb), (a, 1)), tio))
            e.store(v, ew, e.lin((a, nb), (c, 1)), tio)
            with e.b.if_then(e.b.icmp_signed("<=", c, a)):
                e.store(e.b.select(e.b.icmp_signed("==", c, a), e.b.fmul(v, half), v), f,
                        e.lin((j, n + 1), (a, n), (c, 1)), tio)

        e.loop(0, bs, lambda a: e.loop(0, bs, lambda c: sym(a, c), "lsc"), "lsa")
        with e.b.if_then(e.b.icmp_signed(">", j, _c64(0))):
            blas("gemm", "NN", [j, bs, bs], minus, at(lm, j, 0), ld_n, ew, ld_b, plus, at(f, j, 0), ld_n)  # E R

    with e.b.if_then(e.ok()):
        e.loop(0, n, lower_copy, "lfi")
        e.loop(0, nblk, block, "lcb")
        e.loop(0, n, lambda i: e.loop(e.b.add(i, _c64(1)), n, lambda j: e.store(zero, f, e.lin((i, n), (j, 1)), tio),
                                      "lzj"), "lzi")


def _getrf(e: _Call, tio: ir.Type, src: ir.Value) -> None:
    """P a = L U: ?getrf on a column-major copy; rows [:n] the packed factors, row n the 0-based pivots."""
    n = e.call.n
    w, ipiv = e.buf("a"), e.buf("ipiv")
    e.loop2(n, n, lambda i, j: e.store(e.load(src, e.lin((i, n), (j, 1))), w, e.lin((j, n), (i, 1))), "lcp")
    # info > 0 is an exactly singular U (a zero on its diagonal): not an error of lu (det reads 0)
    e.fortran("getrf", [e.int_arg(n), e.int_arg(n), w, e.int_arg(n), ipiv, e.info], 0, check="negative")
    e.loop2(n, n, lambda i, j: e.store(e.load(w, e.lin((j, n), (i, 1))), e.dst, e.lin((i, n), (j, 1))), "lo")
    e.loop(0, n, lambda j: e.store(e.b.sitofp(e.b.sub(e.load(ipiv, j, I64), _c64(1)), tio), e.dst,
                                   e.lin((n * n, 1), (j, 1))), "lp")


def _perm(e: _Call, tio: ir.Type, src: ir.Value) -> None:
    """The permutation of LAPACK's 0-based pivot swaps: perm = identity, then swap perm[i], perm[ipiv[i]]."""
    n = e.call.n
    signed = np.dtype(e.call.dtype).kind == "i"
    width = tio.width

    def to64(v: ir.Value) -> ir.Value:
        if width == 64:
            return v
        return e.b.sext(v, I64) if signed else e.b.zext(v, I64)

    def from64(v: ir.Value) -> ir.Value:
        return v if width == 64 else e.b.trunc(v, tio)

    e.loop(0, n, lambda i: e.store(from64(i), e.dst, i, tio), "li")

    def swap(i: ir.Value) -> None:
        bb = e.b
        j = to64(e.load(src, i, tio))
        if signed:
            j = bb.select(bb.icmp_signed("<", j, _c64(0)), _c64(0), j)
        j = bb.select(bb.icmp_unsigned(">", j, _c64(n - 1)), _c64(n - 1), j)  # out-of-range pivots clamp
        pi, pj = e.load(e.dst, i, tio), e.load(e.dst, j, tio)
        e.store(pj, e.dst, i, tio)
        e.store(pi, e.dst, j, tio)

    e.loop(0, n, swap, "ls")


_FACTOR = {"potrf": _potrf, "trsm": _trsm, "getrf": _getrf, "chol_rev": _chol_rev, "perm": _perm}
