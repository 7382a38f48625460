"""The LAPACK of compiled code: the routines of the OpenBLAS that NumPy bundles, workspace sizes, the status slot.

The spectral primitives (`symgraph.ops.spectral`: eigh, eigvalsh, svd, svdvals, qr) and the
factorizations (`symgraph.ops.factor`: cholesky, triangular_solve, lu, pivots_to_permutation)
declare in their record (`Op.extra["lowering"] == "lapack"`) that compiled code runs them as
LAPACK calls, matrix after matrix. The routines are the ILP64 Fortran symbols of
`libscipy_openblas64_`, the ones NumPy and SciPy call for the same functions:

| op | routine | working precision | layout |
|---|---|---|---|
| eigh, eigvalsh | ?syevd | float64 (as np.linalg) | column-major copy |
| svd, svdvals | ?gesdd | float64 (as np.linalg) | column-major copy |
| qr | ?geqrf + ?orgqr | float64 (as np.linalg) | column-major copy |
| cholesky | ?potrf ('U' on the row-major lower triangle) | float64 (as np.linalg.cholesky) | in place, no transpose |
| cholesky_vjp | ?gemm, ?trsm, ?trmm (Murray's blocked reverse Cholesky) | the input's | in place in the output, no transpose |
| triangular_solve | ?trsm (side 'R' on the row-major right-hand side) | the input's (as scipy's ?trtrs) | in place, no transpose |
| lu | ?getrf | the input's (as scipy's lu_factor) | column-major copy |
| pivots_to_permutation | (native swaps, no LAPACK) | integers | - |
| fft_parts (the FFT primitives on split parts) | "fft": the native FFT of codegen/llvm/fft.py, no LAPACK | the input's | rows, contiguous |
| sort, argsort | (native LSD radix sort per row, no LAPACK: codegen/llvm/sort.py) | integer keys of the values | - |
| argpartition | "select" (native MSD radix selection per row, no LAPACK: codegen/llvm/sort.py) | integer keys of the values | - |
| lapack_parts (complex primitives on split parts) | the complex routines: ?potrf, ?trsm, ?getrf, ?heevd, ?gesdd, ?geqrf + ?ungqr, ?geev (?geev real for a real matrix) | as the real ones: complex128 for potrf, heevd, gesdd, qr, geev; the input's for trsm, getrf | interleaved (re, im) copies in the scratch: "Complex primitives on split parts" below |

A row-major matrix is the column-major matrix of its transpose, so a Cholesky factor and a
triangular solve need no transposed copy: the lower factor L of a row-major a is the upper
factor of the same bytes read column-major, and op(a) x = b is xᵀ op(a)ᵀ = bᵀ, a right-side
solve with the column-major aᵀ. Workspace sizes are LAPACK's own query (asked here once per
shape, with ctypes). `plan_lapack` lays out each call's workspace in the arena, after a status
slot of four int64 words: the entry zeroes it, the first failing call writes (call number + 1,
info, batch index of the matrix, detail) there, and `lapack_error` turns that into the
`symgraph.errors.LinAlgError` the evaluator raises, at the user's line.

Another op lowers through LAPACK by declaring `extra={"lowering": "lapack"}` (the partitioner then
gives it a LAPACK task reading every operand as a contiguous buffer), a branch of `plan_call` (its
routine, workspace query and scratch layout) and an emitter in `codegen.llvm.lapack._ROUTINES`.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from symgraph.errors import LinAlgError, UnsupportedOpError
from symgraph.ir import meta

from .blas import blas_library, loaded_library

__all__ = ["LapackCall", "LapackPlan", "plan_lapack", "plan_complex", "lapack_error", "NEVER_FAIL", "NONFINITE",
           "STATUS_WORDS", "COMPLEX_ROUTINES", "sort_digits", "symbol"]

#: int64 words of the status slot: call number + 1, info, batch index, detail.
STATUS_WORDS = 4

#: The routines that never fail (they write no status).
NEVER_FAIL = ("perm", "sort", "select", "fft")

#: The info value a call reports for a matrix with a NaN or an infinity (checked before LAPACK runs).
NONFINITE = -(1 << 40)

_I = ctypes.c_int64
_ALIGN = 64


def symbol(routine: str, dtype: Any) -> str:
    """The ILP64 symbol of a LAPACK routine for float64 ("d"), float32 ("s"), complex128 ("z") or complex64 ("c"):
    scipy_dsyevd_64_, scipy_zheevd_64_."""
    prefix = {"f8": "d", "f4": "s", "c16": "z", "c8": "c"}[np.dtype(dtype).str[1:]]
    return f"scipy_{prefix}{routine}_64_"


def _lib(*routines: str, dtypes: tuple = (np.float64, np.float32)) -> Any:
    """The loaded OpenBLAS, checked to hold `routines` (default: the spectral ones) in `dtypes`' precisions."""
    if blas_library() is None:
        raise UnsupportedOpError("codegen: no LAPACK library found (NumPy's bundled OpenBLAS); use backend='numpy'")
    lib = loaded_library()
    for r in routines or ("syevd", "gesdd", "geqrf", "orgqr"):
        for dt in dtypes:
            if not hasattr(lib, symbol(r, dt)):
                raise UnsupportedOpError(f"codegen: NumPy's OpenBLAS has no {symbol(r, dt)}; use backend='numpy'")
    return lib


def _c(ch: str) -> Any:
    return ctypes.byref(ctypes.c_char(ch.encode()))


def _r(v: int) -> Any:
    return ctypes.byref(_I(v))


@functools.lru_cache(maxsize=None)
def _query(routine: str, dtype: str, *dims: Any) -> tuple[int, int]:
    """(lwork, liwork) from LAPACK's workspace query (lwork = -1) for these dimensions."""
    lib = _lib()
    ct = ctypes.c_double if np.dtype(dtype) == np.float64 else ctypes.c_float
    work = (ct * 1)()
    iwork = (_I * 1)()
    info = _I(0)
    dummy = (ct * 1)()
    fn = getattr(lib, symbol(routine, dtype))
    if routine == "syevd":
        jobz, uplo, n = dims
        fn(_c(jobz), _c(uplo), _r(n), dummy, _r(max(n, 1)), dummy, work, _r(-1), iwork, _r(-1), ctypes.byref(info),
           _I(1), _I(1))
        return max(1, int(work[0])), max(1, int(iwork[0]))
    if routine == "gesdd":
        jobz, m, n, ldu, ldvt = dims
        fn(_c(jobz), _r(m), _r(n), dummy, _r(max(m, 1)), dummy, dummy, _r(ldu), dummy, _r(ldvt), work, _r(-1),
           iwork, ctypes.byref(info), _I(1))
        return max(1, int(work[0])), 8 * min(m, n)
    if routine == "geqrf":
        m, n = dims
        fn(_r(m), _r(n), dummy, _r(max(m, 1)), dummy, work, _r(-1), ctypes.byref(info))
        return max(1, int(work[0])), 0
    if routine == "orgqr":
        m, n, k = dims
        fn(_r(m), _r(n), _r(k), dummy, _r(max(m, 1)), dummy, work, _r(-1), ctypes.byref(info))
        return max(1, int(work[0])), 0
    raise AssertionError(routine)  # pragma: no cover


@dataclass(eq=False)
class LapackCall:
    """One node's LAPACK work: the routine, its arguments, and where its workspace lies.

    Attributes:
        node: the eigh / eigvalsh / svd / svdvals / qr / cholesky / triangular_solve / lu /
            pivots_to_permutation node.
        op: its op name; routine: "syevd", "gesdd", "geqrf" (+ "orgqr"), "potrf", "trsm", "getrf",
            "chol_rev" (cholesky_vjp: BLAS calls), "perm" (pivots_to_permutation: native swaps, no LAPACK),
            "fft" (fft_parts: the native FFT, no LAPACK; uplo holds its kind, trans its inverse flag) or
            "sort" (sort, argsort: a native radix sort, no LAPACK; m is the key width, nrhs the digit width).
        dtype: the routine's working precision ("<f8" or "<f4"; for "perm" the integers').
        batch, m, n: matrices and their shape; jobz, uplo: LAPACK's job letters.
        batch_shape: the leading (batch) dimensions, to name a failing matrix.
        trans, unit: trsm's transa = 'T' and diag = 'U'; nrhs: its right-hand sides (chol_rev: the block size).
        ucols, vtrows: columns of U and rows of Vt (gesdd); q: columns of Q (qr).
        lwork, liwork, lwork2, lrwork: workspace sizes (lwork2: orgqr's / ungqr's; lrwork: the real workspace
            of the complex routines).
        kinds: "" for a real call; for a complex primitive on split parts (lapack_parts), the kind of each
            operand ("c" two parts, "r" one real array), whose routine is the complex one (`dtype` "<c16" or
            "<c8"; "<f8" for ?geev of a real matrix: `plan_complex`).
        offsets: buffer name -> byte offset from the start of this call's scratch.
        scratch_bytes: bytes of scratch the call needs (one matrix at a time).
        number: its position in the plan (the status slot names call number + 1).
    """

    node: Any
    op: str
    routine: str
    batch: int
    m: int
    n: int
    jobz: str = "N"
    uplo: str = "L"
    ucols: int = 1
    vtrows: int = 1
    q: int = 0
    lwork: int = 1
    liwork: int = 0
    lwork2: int = 0
    lrwork: int = 0
    kinds: str = ""
    dtype: str = "<f8"
    batch_shape: tuple = ()
    trans: bool = False
    unit: bool = False
    nrhs: int = 0
    offsets: dict = field(default_factory=dict)
    scratch_bytes: int = 0
    number: int = 0


def _layout(call: LapackCall, floats: list[tuple[str, int]], ints: list[tuple[str, int]], itemsize: int) -> None:
    """Place the float buffers, then the int64 ones, each 64-byte aligned, in the call's scratch."""
    off = 0
    for name, count, size in [(nm, c, itemsize) for nm, c in floats] + [(nm, c, 8) for nm, c in ints]:
        call.offsets[name] = off
        off += -(-max(count * size, 8) // _ALIGN) * _ALIGN
    call.scratch_bytes = off


def plan_call(node: Any) -> LapackCall:
    """The LAPACK call of one node, its workspace sizes asked of LAPACK."""
    op = node.op.name
    x = node.inputs[0]
    if op == "pivots_to_permutation":
        n = x.shape[-1]
        return LapackCall(node, op, "perm", _batch(x.shape[:-1]), 1, n, dtype=x.dtype.str,
                          batch_shape=tuple(x.shape[:-1]))
    if op in ("sort", "argsort"):
        return _plan_sort(node, x)
    if op == "argpartition":
        return _plan_select(node, x)
    if op == "lapack_parts":  # a complex primitive on split parts: the complex routines (plan_complex below)
        return plan_complex(node)
    if op in _FACTOR:
        return _plan_factor(node, op, x)
    if op == "fft_parts":  # the native FFT (codegen/llvm/fft.py): no LAPACK, a workspace of one row's transform
        from .fft import node_work_floats

        kind, n = node.attr("kind"), node.attr("n")
        c = LapackCall(node, op, "fft", _batch(x.shape[:-1]), 1, n, dtype=x.dtype.str, uplo=kind,
                       trans=bool(node.attr("inverse")), batch_shape=tuple(x.shape[:-1]))
        _layout(c, [("work", node_work_floats(kind, n))], [], x.dtype.itemsize)
        return c
    m, n = x.shape[-2:]
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    dt = "<f8"  # float32 matrices are computed in float64, as np.linalg does (`_commonType`)
    k = min(m, n)
    isz = 8
    if op in ("eigh", "eigvalsh"):
        jobz = "V" if op == "eigh" else "N"
        uplo = node.attr("uplo")
        c = LapackCall(node, op, "syevd", batch, m, n, jobz=jobz, uplo=uplo)
        c.lwork, c.liwork = _query("syevd", dt, jobz, uplo, n)
        _layout(c, [("a", n * n), ("w", n), ("work", c.lwork)], [("iwork", c.liwork)], isz)
        return c
    if op in ("svd", "svdvals"):
        if op == "svdvals":
            jobz, ucols, vtrows, ldu, ldvt = "N", 1, 1, 1, 1
        elif node.attr("full"):
            jobz, ucols, vtrows, ldu, ldvt = "A", m, n, m, n
        else:
            jobz, ucols, vtrows, ldu, ldvt = "S", k, k, m, k
        c = LapackCall(node, op, "gesdd", batch, m, n, jobz=jobz, ucols=ucols, vtrows=vtrows)
        c.lwork, c.liwork = _query("gesdd", dt, jobz, m, n, max(ldu, 1), max(ldvt, 1))
        _layout(c, [("a", m * n), ("s", k), ("u", max(ldu, 1) * ucols), ("vt", max(ldvt, 1) * n),
                    ("work", c.lwork)], [("iwork", c.liwork)], isz)
        return c
    if op == "qr":
        q = node.shape[-1]
        c = LapackCall(node, op, "geqrf", batch, m, n, q=q)
        c.lwork, _ = _query("geqrf", dt, m, n)
        c.lwork2, _ = _query("orgqr", dt, m, q, k) if m and q else (1, 0)
        _layout(c, [("a", m * n), ("tau", k), ("qbuf", m * q), ("work", max(c.lwork, c.lwork2))], [], isz)
        return c
    raise UnsupportedOpError(f"codegen: op {op!r} has no LAPACK lowering")  # pragma: no cover


def _batch(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


#: The factorization ops and their routines (`symgraph.ops.factor`).
_FACTOR = {"cholesky": "potrf", "cholesky_vjp": "chol_rev", "triangular_solve": "trsm", "lu": "getrf"}

#: The BLAS routines of "chol_rev" (cholesky_vjp: Murray's blocked reverse Cholesky, no LAPACK routine of its own).
CHOL_REV_ROUTINES = ("gemm", "trsm", "trmm")

#: Columns per block of "chol_rev" (cholesky_vjp): the inner dimension of its two large products.
CHOL_REV_BLOCK = 128


def _plan_factor(node: Any, op: str, x: Any) -> LapackCall:
    """cholesky (?potrf), triangular_solve (?trsm) or lu (?getrf): no workspace query, at most one scratch matrix."""
    n = x.shape[-1]
    routine = _FACTOR[op]
    _lib(*(CHOL_REV_ROUTINES if routine == "chol_rev" else (routine,)))
    lead = tuple(x.shape[:-2])
    if op == "cholesky_vjp":
        # the output (row-major) is the work matrix; two nb x nb scratch blocks for the diagonal blocks
        nb = max(1, min(CHOL_REV_BLOCK, n))
        c = LapackCall(node, op, routine, _batch(lead), n, n, dtype=x.dtype.str, nrhs=nb, batch_shape=lead)
        _layout(c, [("w", nb * nb), ("e", nb * nb)], [], x.dtype.itemsize)
        return c
    if op == "cholesky":
        # np.linalg.cholesky computes float32 matrices in float64; a float64 matrix is factored in its output
        c = LapackCall(node, op, routine, _batch(lead), n, n, uplo="U", batch_shape=lead)
        _layout(c, [("a", n * n)] if x.dtype != np.float64 else [], [], 8)
        return c
    if op == "triangular_solve":
        lower, trans = node.attr("lower"), node.attr("trans")
        # op(a) x = b is xᵀ op(a)ᵀ = bᵀ: the row-major buffers read column-major are aᵀ and bᵀ
        return LapackCall(node, op, routine, _batch(lead), n, n, dtype=x.dtype.str, uplo="U" if lower else "L",
                          trans=trans, unit=node.attr("unit_diagonal"), nrhs=node.shape[-1], batch_shape=lead)
    c = LapackCall(node, op, routine, _batch(lead), n, n, dtype=x.dtype.str, batch_shape=lead)
    _layout(c, [("a", n * n)], [("ipiv", n)], x.dtype.itemsize)
    return c


#: Rows up to this length sort by straight insertion (Knuth, TAOCP vol. 3, 5.2.1, algorithm S), longer ones
#: by LSD radix sort (5.2.5): its histograms cost more than insertion's n²/4 moves below about this length.
SORT_INSERTION_MAX = 24

#: Rows of at least this length sort by 11-bit digits (2048 buckets; 6 passes over 64-bit keys, 3 over 32-bit
#: ones), shorter ones by bytes (256 buckets; 8 or 4 passes), whose histograms are cheaper to clear and sum.
SORT_WIDE_DIGITS_MIN = 1 << 16


def sort_digits(n: int) -> int:
    """The digit width in bits of the radix sort of rows of length n (0: straight insertion)."""
    if n <= SORT_INSERTION_MAX:
        return 0
    return 11 if n >= SORT_WIDE_DIGITS_MIN else 8


def _plan_sort(node: Any, x: Any) -> LapackCall:
    """sort or argsort (native, no LAPACK): per row, keys (two buffers, 32- or 64-bit), for argsort an int64
    index buffer, and the digit histograms; `m` holds the key width in bits, `nrhs` the digit width (0:
    insertion sort), `jobz` "V" (sort: the values) or "I" (argsort: the indices)."""
    n = x.shape[-1]
    op = node.op.name
    width = 64 if x.dtype.itemsize == 8 else 32
    bits = sort_digits(n)
    c = LapackCall(node, op, "sort", _batch(x.shape[:-1]), width, n, dtype=x.dtype.str, nrhs=bits,
                   jobz="I" if op == "argsort" else "V", batch_shape=tuple(x.shape[:-1]))
    passes = -(-width // bits) if bits else 0
    hist = ([("ib", n)] if op == "argsort" else []) + [("hist", passes << bits)] if bits else []
    _layout(c, [("ka", n), ("kb", n if bits else 0)], hist, width // 8)
    return c


#: Bits of the digits of the radix selection (`_plan_select`): 256 buckets per pass.
SELECT_DIGIT_BITS = 8


def _plan_select(node: Any, x: Any) -> LapackCall:
    """argpartition (native, no LAPACK: codegen/llvm/sort.py `emit_select`): per row, one key buffer (32- or
    64-bit keys, `m` their width) and one histogram of 2**SELECT_DIGIT_BITS counters (`nrhs` the digit width)."""
    n = x.shape[-1]
    width = 64 if x.dtype.itemsize == 8 else 32
    c = LapackCall(node, "argpartition", "select", _batch(x.shape[:-1]), width, n, dtype=x.dtype.str,
                   nrhs=SELECT_DIGIT_BITS, jobz="I", batch_shape=tuple(x.shape[:-1]))
    _layout(c, [("ka", n)], [("hist", 1 << SELECT_DIGIT_BITS)], width // 8)
    return c


@dataclass(eq=False)
class LapackPlan:
    """The LAPACK calls of a program and their arena space.

    Attributes:
        calls: node -> its `LapackCall`, numbered in `order` (the status names call i + 1).
        order: the calls in program order.
        status_offset: arena byte offset of the status block: a slot of `STATUS_WORDS` int64 words (call
            number + 1, info, batch index of the failing matrix, detail), then one copy of each nested
            plan's status block (`nested`).
        scratch_offset: arena byte offset of the scratch all calls share (they run one after the other).
        arena_bytes: the arena's new size.
        nested: the plans of the loop bodies and branches (region sub-graphs) this program calls whose
            LAPACK calls may fail. When sub-graph j's call fails, the region's native code copies the
            sub-graph's status block into copy j of this block and names `len(order) + j + 1` in the slot
            (`codegen.llvm.region`), so the error surfaces after the program's call with the body's line.
        nested_index: (region, sub-graph index) -> j in `nested`.
    """

    calls: dict
    order: list
    status_offset: int
    scratch_offset: int
    arena_bytes: int
    nested: list = field(default_factory=list)
    nested_index: dict = field(default_factory=dict)

    @property
    def status_bytes(self) -> int:
        """Bytes of the status block: the slot and each nested plan's block."""
        return STATUS_WORDS * 8 + sum(p.status_bytes for p in self.nested)

    def nested_offset(self, j: int) -> int:
        """Byte offset of nested plan j's copy within the status block."""
        return STATUS_WORDS * 8 + sum(p.status_bytes for p in self.nested[:j])

    @property
    def can_fail(self) -> bool:
        """Whether a call of the program (or of a nested one) may report a failure."""
        return bool(self.nested) or any(c.routine not in NEVER_FAIL for c in self.order)


def plan_lapack(nodes: list, arena_bytes: int, nested: dict | None = None) -> LapackPlan | None:
    """Plan the LAPACK calls of `nodes` (LAPACK-lowered nodes in program order) after an arena of `arena_bytes`.

    Args:
        nodes: the program's LAPACK-lowered nodes, in program order.
        arena_bytes: the arena's size before the status block and the scratch.
        nested: (region, sub-graph index) -> that sub-graph's plan, for the region sub-graphs whose calls
            may fail (`LapackPlan.nested`).

    Returns:
        None without such nodes or nested plans, else the plan (the arena grows by the status block and
        the largest call's scratch).

    Raises:
        UnsupportedOpError: no LAPACK library in NumPy's bundled OpenBLAS.
    """
    nested = nested or {}
    if not nodes and not nested:
        return None
    order = [plan_call(nd) for nd in nodes]
    for i, c in enumerate(order):
        c.number = i
    plan = LapackPlan({c.node: c for c in order}, order, 0, 0, 0, list(nested.values()),
                      {key: j for j, key in enumerate(nested)})
    plan.status_offset = -(-arena_bytes // _ALIGN) * _ALIGN
    plan.scratch_offset = plan.status_offset + -(-plan.status_bytes // _ALIGN) * _ALIGN
    plan.arena_bytes = plan.scratch_offset + max((c.scratch_bytes for c in order), default=0)
    return plan


def lapack_error(plan: LapackPlan, arena: np.ndarray) -> LinAlgError | None:
    """The error a call's status slot reports, or None when every LAPACK call succeeded."""
    return _status_error(plan, arena[plan.status_offset:plan.status_offset + plan.status_bytes].view(np.int64))


def _status_error(plan: LapackPlan, st: np.ndarray) -> LinAlgError | None:
    """The error of a status block (int64 words, `LapackPlan.status_offset`), a nested plan's in turn."""
    if not st[0]:
        return None
    k = int(st[0]) - 1
    if k >= len(plan.order):  # a loop body's or a branch's call: its status block, copied into ours
        j = k - len(plan.order)
        sub, off = plan.nested[j], plan.nested_offset(j) // 8
        return _status_error(sub, st[off:off + sub.status_bytes // 8])
    call = plan.order[k]
    info = int(st[1])
    m = meta(call.node)  # the user's line that made the node (at trace time), as the evaluator says
    loc, role = m.location, m.role
    if call.routine in ("potrf", "trsm", "getrf", "chol_rev"):
        return _factor_error(call, info, int(st[2]), int(st[3])).at(loc, role)
    if info == NONFINITE:
        return LinAlgError(f"{call.op}: the matrix contains NaN or infinity").at(loc, role)
    what = {"syevd": "the eigenvalue algorithm did not converge", "heevd": "the eigenvalue algorithm did not converge",
            "geev": "the eigenvalue algorithm did not converge", "gesdd": "SVD did not converge",
            "geqrf": "QR failed"}[call.routine]
    return LinAlgError(f"{call.op}: LAPACK failed: {what} (?{call.routine} info = {info})").at(loc, role)


def _factor_error(call: LapackCall, info: int, index: int, detail: int) -> LinAlgError:
    """The evaluator's message for a failing factorization (`symgraph.ops.factor`), naming the matrix."""
    which = ""
    if call.batch_shape:
        which = f"the matrix at batch index {tuple(int(i) for i in np.unravel_index(index, call.batch_shape))}"
    at = f" ({which})" if which else ""
    if call.routine == "potrf":
        if info == NONFINITE:
            return LinAlgError(f"cholesky: the matrix is not positive definite{at}: it holds NaN or infinity")
        return LinAlgError(f"cholesky: the matrix is not positive definite{at}, or holds NaN "
                           f"(?potrf info = {info}: its leading minor of order {info} is not)")
    if call.routine in ("trsm", "chol_rev"):
        what = "NaN" if detail else "zero"
        return LinAlgError(f"{call.op}: singular matrix: a {what} on the diagonal (position {info - 1})"
                           f"{' of ' + which if which else ''}")
    return LinAlgError(f"lu: LAPACK failed (?getrf info = {info}){at}")  # pragma: no cover - illegal arguments only


# ----- complex primitives on split parts (lapack_parts) -----
#
# A complex linear-algebra primitive reaches the backend as a `lapack_parts` node on split parts
# (`symgraph.ops.lapack_parts`; codegen/complex_split.py makes it). `plan_complex` plans its call:
#
# | primitive | routine | working precision (as NumPy / SciPy) |
# |---|---|---|
# | cholesky | ?potrf ('U' on the row-major lower triangle, as the real one) | complex128 (np.linalg.cholesky) |
# | triangular_solve | ?trsm (side 'R' on the row-major right-hand side, as the real one) | the input's (scipy's ?trtrs) |
# | lu | ?getrf | the input's (scipy's lu_factor) |
# | eigh, eigvalsh | ?heevd | complex128 (np.linalg.eigh) |
# | svd, svdvals | ?gesdd | complex128 (np.linalg.svd) |
# | qr | ?geqrf + ?ungqr | complex128 (np.linalg.qr) |
# | eig, eigvals | ?geev: zgeev for a complex matrix, dgeev for a real one (its conjugate pairs assembled) | complex128 / float64 (np.linalg.eig) |
#
# LAPACK reads complex matrices interleaved, (re, im) pairs in column-major order; the split
# keeps a complex array as two real arrays. So every call copies its operands into interleaved
# buffers of the arena's LAPACK scratch (one matrix at a time) and writes the result back as
# parts (codegen/llvm/lapack_complex.py). Workspace sizes are LAPACK's own query (once per shape,
# with ctypes), at least the documented minimum. The status slot and `lapack_error` are the real
# calls' (above): the same `LinAlgError` as the evaluator's, at the user's line.


#: The routine of each primitive (`of` of the lapack_parts node).
COMPLEX_ROUTINES = {"cholesky": "potrf", "triangular_solve": "trsm", "lu": "getrf", "eigh": "heevd",
                    "eigvalsh": "heevd", "svd": "gesdd", "svdvals": "gesdd", "qr": "geqrf", "eig": "geev",
                    "eigvals": "geev"}

_Z = np.dtype(np.complex128).str


@functools.lru_cache(maxsize=None)
def _zquery(routine: str, dtype: str, *dims: Any) -> tuple[int, int, int]:
    """(lwork, lrwork, liwork) from LAPACK's workspace query (lwork = -1) of a complex routine (or dgeev)."""
    fn = getattr(_lib(routine, dtypes=(dtype,)), symbol(routine, dtype))
    work, rwork, iwork = (ctypes.c_double * 2)(), (ctypes.c_double * 2)(), (_I * 2)()
    d1, d2, d3 = (ctypes.c_double * 2)(), (ctypes.c_double * 2)(), (ctypes.c_double * 2)()
    info = _I(0)
    if routine == "heevd":
        jobz, uplo, n = dims
        fn(_c(jobz), _c(uplo), _r(n), d1, _r(max(n, 1)), d2, work, _r(-1), rwork, _r(-1), iwork, _r(-1),
           ctypes.byref(info), _I(1), _I(1))
        return int(work[0]), int(rwork[0]), int(iwork[0])
    if routine == "gesdd":
        jobz, m, n, ldu, ldvt = dims
        fn(_c(jobz), _r(m), _r(n), d1, _r(max(m, 1)), d2, d3, _r(ldu), d1, _r(ldvt), work, _r(-1), rwork, iwork,
           ctypes.byref(info), _I(1))
        return int(work[0]), 0, 0
    if routine == "geqrf":
        m, n = dims
        fn(_r(m), _r(n), d1, _r(max(m, 1)), d2, work, _r(-1), ctypes.byref(info))
        return int(work[0]), 0, 0
    if routine == "ungqr":
        m, n, k = dims
        fn(_r(m), _r(n), _r(k), d1, _r(max(m, 1)), d2, work, _r(-1), ctypes.byref(info))
        return int(work[0]), 0, 0
    if routine == "geev":
        jobvr, n = dims
        ldvr = max(n, 1) if jobvr == "V" else 1
        if np.dtype(dtype).kind == "c":
            fn(_c("N"), _c(jobvr), _r(n), d1, _r(max(n, 1)), d2, d3, _r(1), d1, _r(ldvr), work, _r(-1), rwork,
               ctypes.byref(info), _I(1), _I(1))
        else:
            fn(_c("N"), _c(jobvr), _r(n), d1, _r(max(n, 1)), d2, d3, d1, _r(1), d2, _r(ldvr), work, _r(-1),
               ctypes.byref(info), _I(1), _I(1))
        return int(work[0]), 0, 0
    raise AssertionError(routine)  # pragma: no cover


def plan_complex(node: Any) -> LapackCall:
    """The LAPACK call of a lapack_parts node: its routine, working precision, workspace and scratch layout.

    The scratch holds one matrix's interleaved buffers at a time (counts below are reals: 2 per complex
    element); `LapackCall.kinds` marks the call as complex for the emitter and `dtype` is the routine's
    precision ("<c16", "<c8", or "<f8" for dgeev).

    Raises:
        UnsupportedOpError: the routine is missing from NumPy's OpenBLAS.
    """
    of, kinds = node.attr("of"), node.attr("kinds")
    params = dict(node.attr("params"))
    routine = COMPLEX_ROUTINES[of]
    x = node.inputs[0]
    part = x.dtype  # float32 or float64: the parts' (and the result's) dtype
    own = np.dtype(np.complex64 if part == np.float32 else np.complex128).str  # the input's complex precision
    m, n = x.shape[-2:]
    k = min(m, n)
    lead = tuple(x.shape[:-2])
    base = dict(batch=_batch(lead), m=m, n=n, batch_shape=lead, kinds=kinds)
    if routine in ("trsm", "getrf"):
        dt = own
    elif kinds == "r":  # eig of a real matrix: dgeev, as np.linalg.eig
        dt = np.dtype(np.float64).str
    else:
        dt = _Z
    _lib(routine, *(("ungqr",) if routine == "geqrf" else ()), dtypes=(dt,))
    c = LapackCall(node, of, routine, dtype=dt, **base)
    sz = np.dtype(dt).itemsize // (2 if np.dtype(dt).kind == "c" else 1)  # bytes of one real number
    if routine == "potrf":
        c.uplo = "U"
        _layout(c, [("a", 2 * n * n)], [], sz)
    elif routine == "trsm":
        c.uplo = "U" if params["lower"] else "L"
        c.trans, c.unit, c.nrhs = bool(params["trans"]), bool(params["unit_diagonal"]), node.shape[-1]
        _layout(c, [("a", 2 * n * n), ("b", 2 * n * c.nrhs)], [], sz)
    elif routine == "getrf":
        _layout(c, [("a", 2 * n * n)], [("ipiv", n)], sz)
    elif routine == "heevd":
        c.jobz, c.uplo = ("V" if of == "eigh" else "N"), params["uplo"]
        lw, lrw, liw = _zquery("heevd", dt, c.jobz, c.uplo, n)
        vec = c.jobz == "V"
        c.lwork = max(lw, 2 * n + n * n if vec else n + 1, 1)
        c.lrwork = max(lrw, 1 + 5 * n + 2 * n * n if vec else n, 1)
        c.liwork = max(liw, 3 + 5 * n if vec else 1, 1)
        _layout(c, [("a", 2 * n * n), ("w", n), ("work", 2 * c.lwork), ("rwork", c.lrwork)], [("iwork", c.liwork)],
                sz)
    elif routine == "gesdd":
        if of == "svdvals":
            c.jobz, c.ucols, c.vtrows, ldu, ldvt = "N", 1, 1, 1, 1
        elif params["full"]:
            c.jobz, c.ucols, c.vtrows, ldu, ldvt = "A", m, n, m, n
        else:
            c.jobz, c.ucols, c.vtrows, ldu, ldvt = "S", k, k, m, k
        lw, _, _ = _zquery("gesdd", dt, c.jobz, m, n, max(ldu, 1), max(ldvt, 1))
        mx = max(m, n)
        c.lwork = max(lw, 2 * k + mx if c.jobz == "N" else k * k + 2 * k + mx, 1)
        # NumPy's real workspace (umath_linalg), at least LAPACK's documented minimum
        c.lrwork = max(7 * k if c.jobz == "N" else k * max(5 * k + 7, 2 * mx + 2 * k + 1), 1)
        c.liwork = 8 * k
        _layout(c, [("a", 2 * m * n), ("s", k), ("u", 2 * max(ldu, 1) * c.ucols), ("vt", 2 * max(ldvt, 1) * n),
                    ("work", 2 * c.lwork), ("rwork", c.lrwork)], [("iwork", c.liwork)], sz)
    elif routine == "geqrf":
        c.q = q = node.shape[-1]
        c.lwork = max(_zquery("geqrf", dt, m, n)[0], n, 1)
        c.lwork2 = max(_zquery("ungqr", dt, m, q, k)[0], q, 1) if m and q else 1
        _layout(c, [("a", 2 * m * n), ("tau", 2 * k), ("qbuf", 2 * m * q), ("work", 2 * max(c.lwork, c.lwork2))],
                [], sz)
    elif routine == "geev":
        c.jobz = "V" if of == "eig" else "N"
        vec = c.jobz == "V"
        lw, _, _ = _zquery("geev", dt, c.jobz, n)
        if kinds == "r":  # dgeev: real and imaginary parts of w, real eigenvector columns
            c.lwork = max(lw, 4 * n if vec else 3 * n, 1)
            _layout(c, [("a", n * n), ("wr", n), ("wi", n), ("vr", n * n if vec else 1), ("vl", 1),
                        ("work", c.lwork)], [], sz)
        else:
            c.lwork = max(lw, 2 * n, 1)
            c.lrwork = max(2 * n, 1)
            _layout(c, [("a", 2 * n * n), ("w", 2 * n), ("vr", 2 * n * n if vec else 2), ("vl", 2),
                        ("work", 2 * c.lwork), ("rwork", c.lrwork)], [], sz)
    else:  # pragma: no cover - COMPLEX_ROUTINES names the routines above
        raise UnsupportedOpError(f"codegen: complex {of} has no LAPACK lowering")
    return c
