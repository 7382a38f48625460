"""Complex LAPACK calls of compiled code: one lapack_parts node as a loop over its matrices.

`emit_complex` is the complex branch of `codegen.llvm.lapack.emit_lapack`: for each matrix of
the batch it copies the operands' parts (two real arrays per complex operand, as
codegen/complex_split.py keeps them) into interleaved (re, im) buffers of the LAPACK scratch,
calls the complex routine that `codegen.cpu.lapack.plan_complex` chose, and writes the
result back as parts: the real parts of the primitive's result, then its imaginary parts (the
packed (2, ...) node of `symgraph.ops.lapack_parts`), or its real result (eigvalsh, svdvals).
Every step is the real path's (`codegen.llvm.lapack`) with complex elements:

- ?potrf, ?trsm: the row-major matrix is the column-major matrix of its transpose, so the copy is
  interleaving only (no transpose): the lower factor L of a = L Lᴴ is the upper factor U of
  conj(a) = aᵀ = Uᴴ U read column-major (L = Uᵀ, the same bytes, no conjugation), and
  op(a) x = b is xᵀ op(a)ᵀ = bᵀ (op a plain transpose, as triangular_solve's `trans`).
- ?getrf, ?heevd, ?gesdd, ?geqrf + ?ungqr, ?geev: a column-major interleaved copy (transposed),
  as NumPy copies into Fortran order before calling LAPACK; svd's V is the conjugate transpose
  of ?gesdd's Vᴴ.
- dgeev (eig of a real matrix): NumPy's complex eigenvectors from the real columns: a conjugate
  pair w_j, w_j+1 (wi_j > 0) has v_j = vr_j + i vr_j+1 and v_j+1 = vr_j - i vr_j+1.

The finiteness test of the matrix (x - x is 0 for every finite x, on both parts), the checks of
a triangular solve's diagonal (a zero, both parts 0, or a NaN in either part) and of the Cholesky
factor's diagonal, and the status slot are the real path's, so failures raise the same
`symgraph.errors.LinAlgError` at the user's line.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from symgraph.errors import UnsupportedOpError

from ..cpu.lapack import NONFINITE, LapackCall
from .context import F32, F64, I64, LoweringContext, for_range, ll_type
from .lapack_call import Call as _Call
from .lapack_call import c64 as _c64

__all__ = ["emit_complex"]

_SPECTRAL = ("heevd", "gesdd", "geqrf", "geev")


class _Parts:
    """This matrix's operands and result as parts, and interleaved (re, im) access to the scratch buffers."""

    def __init__(self, e: _Call, tio: ir.Type, out_complex: bool):
        self.e, self.tio, self.out_complex = e, tio, out_complex
        self.zero = ir.Constant(e.ty, 0.0)
        self.src: list = []    # per operand: (re pointer, im pointer or None) of this matrix
        self.dst: tuple = ()   # (re pointer, im pointer or None) of this matrix's result

    def load(self, k: int, i: ir.Value) -> tuple:
        """Element i of operand k, (re, im) in the working precision (im 0 for a real operand)."""
        e = self.e
        re, im = self.src[k]
        r = e.convert(e.load(re, i, self.tio), e.ty)
        return r, (self.zero if im is None else e.convert(e.load(im, i, self.tio), e.ty))

    def cstore(self, buf: ir.Value, i: ir.Value, v: tuple) -> None:
        """Complex element i of an interleaved buffer."""
        e = self.e
        j = e.b.mul(i, _c64(2))
        e.store(v[0], buf, j)
        e.store(v[1], buf, e.b.add(j, _c64(1)))

    def cload(self, buf: ir.Value, i: ir.Value) -> tuple:
        e = self.e
        j = e.b.mul(i, _c64(2))
        return e.load(buf, j), e.load(buf, e.b.add(j, _c64(1)))

    def put(self, i: ir.Value, v: tuple) -> None:
        """Element i of this matrix's result (its real part only for a real result), in the parts' dtype."""
        e = self.e
        e.store(e.convert(v[0], self.tio), self.dst[0], i, self.tio)
        if self.out_complex:
            e.store(e.convert(v[1], self.tio), self.dst[1], i, self.tio)

    def finite(self, v: tuple) -> None:
        self.e.finite(v[0])
        self.e.finite(v[1])

    def select(self, c: ir.Value, a: tuple, b: tuple) -> tuple:
        bb = self.e.b
        return bb.select(c, a[0], b[0]), bb.select(c, a[1], b[1])

    def alpha(self, re: float) -> ir.Value:
        """A complex scalar argument re + 0i (by address)."""
        e = self.e
        a = e.cx.alloca(ir.ArrayType(e.ty, 2))
        e.b.store(ir.Constant(e.ty, re), e.b.gep(a, [_c64(0), ir.Constant(ir.IntType(32), 0)],
                                                 source_etype=ir.ArrayType(e.ty, 2)))
        e.b.store(self.zero, e.b.gep(a, [_c64(0), ir.Constant(ir.IntType(32), 1)], source_etype=ir.ArrayType(e.ty, 2)))
        return a


def emit_complex(cx: LoweringContext, call: LapackCall, ptr_of: Callable[[Any], ir.Value], scratch: ir.Value,
                 status: ir.Value, number: int) -> None:
    """Emit the complex LAPACK work of one lapack_parts node (`call`), matrix after matrix.

    Raises:
        UnsupportedOpError: empty matrices of a decomposition (compiled code leaves them to the evaluator, as
            for real matrices).
    """
    node = call.node
    m, n = call.m, call.n
    if call.routine in _SPECTRAL and (m == 0 or n == 0):
        raise UnsupportedOpError(f"codegen: {call.op} of empty {m} x {n} matrices is not compiled; use "
                                 f"backend='numpy'")
    if call.batch == 0 or node.size == 0 or n == 0:
        return
    wdt = np.dtype(call.dtype)
    e = _Call(cx, call, scratch, status, number, F64 if wdt in (np.float64, np.complex128) else F32)
    e.routine_dtype = wdt
    tio = ll_type(node.dtype)
    out_complex = np.dtype(node.attr("out")).kind == "c"
    b = cx.builder
    ops, k = [], 0
    for kind in call.kinds:
        re = node.inputs[k]
        im = node.inputs[k + 1] if kind == "c" else None
        ops.append((ptr_of(re), None if im is None else ptr_of(im), re.size // call.batch))
        k += 2 if kind == "c" else 1
    out = ptr_of(node)
    total = node.size // 2 if out_complex else node.size
    out_im = b.gep(out, [_c64(total)], source_etype=tio) if out_complex else None
    out_size = total // call.batch
    z = _Parts(e, tio, out_complex)
    body = _ROUTINES[call.routine]

    def one(bi: ir.Value) -> None:
        e.bi = bi
        bb = cx.builder

        def at(p: Any, size: int) -> Any:
            return None if p is None else bb.gep(p, [bb.mul(bi, _c64(size))], source_etype=tio)

        z.src = [(at(re, sz), at(im, sz)) for re, im, sz in ops]
        z.dst = (at(out, out_size), at(out_im, out_size))
        if call.routine in _SPECTRAL:
            _spectral(e, z, body)
        else:
            body(e, z)

    for_range(b, _c64(0), _c64(call.batch), one, name="zb")


# ----- the factorizations -----


def _potrf(e: _Call, z: _Parts) -> None:
    """L of a = L Lᴴ from a's lower triangle: ?potrf 'U' on its interleaved copy read column-major."""
    n = e.call.n
    w = e.buf("a")
    e.b.store(ir.Constant(F64, 0.0), e.acc)

    def el(i: ir.Value, j: ir.Value) -> None:
        k = e.lin((i, n), (j, 1))
        v = z.load(0, k)
        z.finite(v)
        z.cstore(w, k, v)

    e.loop(0, n, lambda i: e.loop(0, e.b.add(i, _c64(1)), lambda j: el(i, j), "zcj"), "zci")
    e.if_finite(lambda: e.fortran("potrf", [e.char_arg("U"), e.int_arg(n), w, e.int_arg(n), e.info], 1))
    # the factor's diagonal (real) is finite whenever ?potrf succeeds on a finite matrix, unless it overflowed
    e.b.store(ir.Constant(F64, 0.0), e.acc)
    e.loop(0, n, lambda i: e.finite(z.cload(w, e.lin((i, n + 1)))[0]), "zd")
    with e.b.if_then(e.is_nonfinite(), likely=False):
        e.fail(_c64(NONFINITE))
    zero = (z.zero, z.zero)

    def out_row(i: ir.Value) -> None:  # the lower triangle, the strict upper one zeroed
        e.loop(0, e.b.add(i, _c64(1)), lambda j: z.put(e.lin((i, n), (j, 1)), z.cload(w, e.lin((i, n), (j, 1)))),
               "zoj")
        e.loop(e.b.add(i, _c64(1)), n, lambda j: z.put(e.lin((i, n), (j, 1)), zero), "zzj")

    e.loop(0, n, out_row, "zoi")


def _trsm(e: _Call, z: _Parts) -> None:
    """x with op(a) x = b: ?trsm side 'R' on xᵀ op(a)ᵀ = bᵀ, on interleaved copies of a and b."""
    call = e.call
    n, k = call.n, call.nrhs
    a, rhs = e.buf("a"), e.buf("b")
    e.loop(0, n * n, lambda i: z.cstore(a, i, z.load(0, i)), "zca")
    if not call.unit:  # trsm divides by the diagonal without a check: a zero or NaN fails first
        def diag(p: ir.Value) -> None:
            bb = e.b
            re, im = z.cload(a, e.lin((p, n + 1)))
            nan = bb.or_(bb.fcmp_unordered("uno", re, re), bb.fcmp_unordered("uno", im, im))
            zero = bb.and_(bb.fcmp_ordered("==", re, z.zero), bb.fcmp_ordered("==", im, z.zero))
            with bb.if_then(bb.or_(zero, nan), likely=False):
                e.fail(bb.add(p, _c64(1)), bb.zext(nan, I64))
        e.loop(0, n, diag, "zld")
    e.loop(0, n * k, lambda i: z.cstore(rhs, i, z.load(1, i)), "zcb")
    with e.b.if_then(e.ok()):
        e.fortran("trsm", [e.char_arg("R"), e.char_arg(call.uplo), e.char_arg("T" if call.trans else "N"),
                           e.char_arg("U" if call.unit else "N"), e.int_arg(k), e.int_arg(n), z.alpha(1.0), a,
                           e.int_arg(n), rhs, e.int_arg(max(k, 1))], 4, check=None)
    e.loop(0, n * k, lambda i: z.put(i, z.cload(rhs, i)), "zob")


def _getrf(e: _Call, z: _Parts) -> None:
    """P a = L U: ?getrf on a column-major interleaved copy; rows [:n] the packed factors, row n the 0-based
    pivots (complex numbers with a zero imaginary part, as the evaluator packs them)."""
    n = e.call.n
    w, ipiv = e.buf("a"), e.buf("ipiv")
    e.loop2(n, n, lambda i, j: z.cstore(w, e.lin((j, n), (i, 1)), z.load(0, e.lin((i, n), (j, 1)))), "zcp")
    # info > 0 is an exactly singular U (a zero on its diagonal): not an error of lu (det reads 0)
    e.fortran("getrf", [e.int_arg(n), e.int_arg(n), w, e.int_arg(n), ipiv, e.info], 0, check="negative")
    e.loop2(n, n, lambda i, j: z.put(e.lin((i, n), (j, 1)), z.cload(w, e.lin((j, n), (i, 1)))), "zo")
    e.loop(0, n, lambda j: z.put(e.lin((n * n, 1), (j, 1)),
                                 (e.b.sitofp(e.b.sub(e.load(ipiv, j, I64), _c64(1)), e.ty), z.zero)), "zp")


# ----- the decompositions: a is the column-major interleaved copy (real for dgeev) -----


def _spectral(e: _Call, z: _Parts, body: Callable) -> None:
    """Copy this matrix column-major (testing it for NaN and infinity), then run `body` unless it is not finite."""
    call = e.call
    m, n = call.m, call.n
    a = e.buf("a")
    e.b.store(ir.Constant(F64, 0.0), e.acc)
    real = call.kinds == "r"

    def copy(i: ir.Value, j: ir.Value) -> None:  # a[j*m + i] = src[i*n + j]
        v = z.load(0, e.lin((i, n), (j, 1)))
        z.finite(v)
        if real:
            e.store(v[0], a, e.lin((j, m), (i, 1)))
        else:
            z.cstore(a, e.lin((j, m), (i, 1)), v)

    e.loop2(m, n, copy, "zcp")
    e.if_finite(lambda: body(e, z, a))


def _heevd(e: _Call, z: _Parts, a: ir.Value) -> None:
    call = e.call
    n = call.n
    w, work, rwork, iwork = e.buf("w"), e.buf("work"), e.buf("rwork"), e.buf("iwork")
    e.fortran("heevd", [e.char_arg(call.jobz), e.char_arg(call.uplo), e.int_arg(n), a, e.int_arg(n), w, work,
                        e.int_arg(call.lwork), rwork, e.int_arg(call.lrwork), iwork, e.int_arg(call.liwork), e.info],
              2)
    e.loop(0, n, lambda j: z.put(j, (e.load(w, j), z.zero)), "zw")  # eigvalsh: the real values alone
    if call.jobz == "V":  # rows 1..n: V[i][j] = a[j*n + i]
        e.loop2(n, n, lambda i, j: z.put(e.lin((i, n), (j, 1), (n, 1)), z.cload(a, e.lin((j, n), (i, 1)))), "zv")


def _gesdd(e: _Call, z: _Parts, a: ir.Value) -> None:
    call = e.call
    m, n = call.m, call.n
    k = min(m, n)
    s, u, vt = e.buf("s"), e.buf("u"), e.buf("vt")
    work, rwork, iwork = e.buf("work"), e.buf("rwork"), e.buf("iwork")
    ldu = m if call.jobz != "N" else 1
    ldvt = call.vtrows if call.jobz != "N" else 1
    e.fortran("gesdd", [e.char_arg(call.jobz), e.int_arg(m), e.int_arg(n), a, e.int_arg(m), s, u, e.int_arg(ldu),
                        vt, e.int_arg(ldvt), work, e.int_arg(call.lwork), rwork, iwork, e.info], 1)
    if call.jobz == "N":
        e.loop(0, k, lambda j: z.put(j, (e.load(s, j), z.zero)), "zs")
        return
    p = call.node.shape[-1]
    zero = (z.zero, z.zero)
    if call.jobz == "A" and p * (m + 1 + n) > 0:  # padded columns: zero the whole result first
        e.loop(0, p * (m + 1 + n), lambda i: z.put(i, zero), "zz")
    # rows 0..m-1: U[i][j] = u[j*m + i]; row m: s; rows m+1..: V[i][j] = conj(Vᴴ[j][i]) = conj(vt[i*ldvt + j])
    e.loop2(m, call.ucols, lambda i, j: z.put(e.lin((i, p), (j, 1)), z.cload(u, e.lin((j, m), (i, 1)))), "zu")
    e.loop(0, k, lambda j: z.put(e.lin((m * p, 1), (j, 1)), (e.load(s, j), z.zero)), "zs")

    def v_el(i: ir.Value, j: ir.Value) -> None:
        re, im = z.cload(vt, e.lin((i, ldvt), (j, 1)))
        z.put(e.lin(((m + 1) * p, 1), (i, p), (j, 1)), (re, e.b.fneg(im)))

    e.loop2(n, call.vtrows, v_el, "zv")


def _geqrf(e: _Call, z: _Parts, a: ir.Value) -> None:
    call = e.call
    m, n, q = call.m, call.n, call.q
    k = min(m, n)
    tau, qbuf, work = e.buf("tau"), e.buf("qbuf"), e.buf("work")
    lwork = max(call.lwork, call.lwork2)
    e.fortran("geqrf", [e.int_arg(m), e.int_arg(n), a, e.int_arg(m), tau, work, e.int_arg(lwork), e.info], 0)
    zero = (z.zero, z.zero)

    def r_t(j: ir.Value, i: ir.Value) -> None:  # rows m..m+n-1: Rᵀ[j][i] = R[i][j] = a[j*m + i] for i <= j
        v = z.select(e.b.icmp_signed("<=", i, j), z.cload(a, e.lin((j, m), (i, 1))), zero)
        z.put(e.lin((m * q, 1), (j, q), (i, 1)), v)

    e.loop2(n, q, r_t, "zr")
    # Q: the first min(n, q) reflector columns, then ?ungqr in place (columns past k become identity columns)
    e.loop(0, m * min(n, q), lambda i: z.cstore(qbuf, i, z.cload(a, i)), "zq")
    e.fortran("ungqr", [e.int_arg(m), e.int_arg(q), e.int_arg(k), qbuf, e.int_arg(m), tau, work, e.int_arg(lwork),
                        e.info], 0)
    e.loop2(m, q, lambda i, j: z.put(e.lin((i, q), (j, 1)), z.cload(qbuf, e.lin((j, m), (i, 1)))), "zQ")


def _geev(e: _Call, z: _Parts, a: ir.Value) -> None:
    call = e.call
    n = call.n
    vec = call.jobz == "V"
    vr, vl, work = e.buf("vr"), e.buf("vl"), e.buf("work")
    ldvr = e.int_arg(n if vec else 1)
    if call.kinds == "r":
        _dgeev(e, z, a, vr, vl, work, ldvr)
        return
    w, rwork = e.buf("w"), e.buf("rwork")
    e.fortran("geev", [e.char_arg("N"), e.char_arg(call.jobz), e.int_arg(n), a, e.int_arg(n), w, vl, e.int_arg(1),
                       vr, ldvr, work, e.int_arg(call.lwork), rwork, e.info], 2)
    e.loop(0, n, lambda j: z.put(j, z.cload(w, j)), "zw")
    if vec:  # rows 1..n: V[i][j] = vr[j*n + i]
        e.loop2(n, n, lambda i, j: z.put(e.lin((i, n), (j, 1), (n, 1)), z.cload(vr, e.lin((j, n), (i, 1)))), "zv")


def _dgeev(e: _Call, z: _Parts, a: ir.Value, vr: ir.Value, vl: ir.Value, work: ir.Value, ldvr: ir.Value) -> None:
    """eig of a real matrix (dgeev), its eigenvectors made complex as NumPy makes them."""
    call = e.call
    n = call.n
    wr, wi = e.buf("wr"), e.buf("wi")
    e.fortran("geev", [e.char_arg("N"), e.char_arg(call.jobz), e.int_arg(n), a, e.int_arg(n), wr, wi, vl,
                       e.int_arg(1), vr, ldvr, work, e.int_arg(call.lwork), e.info], 2)
    e.loop(0, n, lambda j: z.put(j, (e.load(wr, j), e.load(wi, j))), "zw")
    if call.jobz != "V":
        return

    def el(i: ir.Value, j: ir.Value) -> None:
        # a pair (wi_j > 0: the first, wi_j < 0: the second) takes columns j, j+1 (j-1, j); indices clamped
        bb = e.b
        wij = e.load(wi, j)
        first = bb.and_(bb.fcmp_ordered(">", wij, z.zero), bb.icmp_signed("<", j, _c64(n - 1)))
        second = bb.and_(bb.fcmp_ordered("<", wij, z.zero), bb.icmp_signed(">", j, _c64(0)))
        jre = bb.select(second, bb.sub(j, _c64(1)), j)
        jim = bb.select(first, bb.add(j, _c64(1)), j)
        re = e.load(vr, e.lin((jre, n), (i, 1)))
        iv = e.load(vr, e.lin((jim, n), (i, 1)))
        im = bb.select(first, iv, bb.select(second, bb.fneg(iv), z.zero))
        z.put(e.lin((i, n), (j, 1), (n, 1)), (re, im))

    e.loop2(n, n, el, "zv")


_ROUTINES = {"potrf": _potrf, "trsm": _trsm, "getrf": _getrf, "heevd": _heevd, "gesdd": _gesdd, "geqrf": _geqrf,
             "geev": _geev}
