"""Runtime: calling compiled code safely and fast.

Every argument is checked (shape, dtype; non-contiguous or misaligned arrays
are copied) before native code runs, so a wrong call raises an error instead
of crashing. The native entry point takes four Python objects: the tuple of
argument arrays, the tuple of fresh output arrays, the arena array and the
tuple of constant arrays; it reads their data pointers itself (the CPython
tuple and NumPy array layouts are probed once at import; if they differ, a
slower pointer-array calling convention is used). ctypes releases the GIL for
the call. A generated per-signature Python function does the checks for the
common case of flat positional arrays in a few attribute reads.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from symgraph.errors import DTypeError, ShapeError

__all__ = ["Executable", "blas_library", "blas_threads", "blas_thread_control", "call_abi", "OBJECT_ABI",
           "ARRAY_DATA_OFFSET", "TUPLE_ITEMS_OFFSET", "thread_pool", "pool_stats", "set_pool_limits"]

from symgraph.compile import MISS  # the fast-path sentinel shared with sg.compile


def _probe_layout() -> tuple[bool, int, int]:
    """Check the CPython tuple and NumPy array layouts the native entry reads."""
    try:
        a = np.zeros(3)
        t = (a, a)
        data_off = 16  # PyArrayObject_fields.data follows PyObject_HEAD
        items_off = tuple.__basicsize__  # PyTupleObject.ob_item follows the variable-size header
        ok = ctypes.c_void_p.from_address(id(a) + data_off).value == a.ctypes.data
        ok = ok and ctypes.c_void_p.from_address(id(t) + items_off).value == id(a)
        ok = ok and ctypes.c_void_p.from_address(id(t) + items_off + 8).value == id(a)
        return ok, data_off, items_off
    except Exception:  # noqa: BLE001
        return False, 16, 24


#: Whether the entry reads Python objects directly (else it takes pointer arrays).
OBJECT_ABI, ARRAY_DATA_OFFSET, TUPLE_ITEMS_OFFSET = _probe_layout()

METH_FASTCALL = 0x0080


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_abi: str | None = None
_abi_lock = threading.Lock()


def _fastcall_builtin(address: int, name: str = "symgraph_entry") -> tuple[Any, tuple]:
    """Wrap a native `PyObject* f(PyObject* self, PyObject* const* args, Py_ssize_t n)` as a builtin.

    Returns:
        (callable, keep-alive objects): the method definition and `self` must outlive the callable.
    """
    md = _PyMethodDef(name.encode(), address, METH_FASTCALL, None)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.POINTER(_PyMethodDef), ctypes.py_object, ctypes.py_object]
    selfobj: list = []  # an ordinary (never immortal) object the entry returns with a new reference
    fn = new(ctypes.byref(md), selfobj, None)
    return fn, (md, selfobj)


def call_abi() -> str:
    """How compiled entries are called: "fastcall" (a builtin function, the fastest), "ctypes" or "pointers".

    "fastcall" wraps the native entry in a METH_FASTCALL builtin (no ctypes
    conversion per call; the entry releases the GIL itself for long work). It
    is used on standard CPython builds after a probe call; otherwise ctypes
    calls the entry (and releases the GIL).
    """
    global _abi
    if _abi is not None:
        return _abi
    with _abi_lock:
        if _abi is not None:
            return _abi
        import sys

        abi = "ctypes" if OBJECT_ABI else "pointers"
        ok_build = (sys.implementation.name == "cpython" and (3, 8) <= sys.version_info[:2] <= (3, 13)
                    and not _free_threaded() and not hasattr(sys, "gettotalrefcount")
                    and not os.environ.get("SYMGRAPH_NO_FASTCALL"))
        if OBJECT_ABI and ok_build:
            try:
                if _fastcall_probe():
                    abi = "fastcall"
            except Exception:  # noqa: BLE001  (any doubt: stay with ctypes)
                pass
        _abi = abi
        return abi


def _free_threaded() -> bool:
    """Whether this is a free-threaded CPython build (3.13+; computing sysconfig's variables costs ~1 ms)."""
    import sys

    if sys.version_info < (3, 13):
        return False
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _fastcall_probe() -> bool:
    """Whether a native `PyObject* f(self, args, n)` returning a new reference to `self` works as a builtin.

    The entry's own reference counting is a 64-bit add at offset 0 of the
    object, so that layout is checked against `sys.getrefcount` first. The
    call is then made through C-API's `Py_NewRef` (same C calling convention
    as the generated entry, which ignores the extra arguments here); where the
    C-API has no such symbol (CPython < 3.10) a compiled probe is called.
    """
    import sys

    obj: list = []
    if ctypes.c_ssize_t.from_address(id(obj)).value != sys.getrefcount(obj) - 1:
        return False
    try:
        address = ctypes.cast(ctypes.pythonapi.Py_NewRef, ctypes.c_void_p).value
        keep_code: Any = None
    except AttributeError:
        from .jit import LIGHT_PIPELINE_MARK, compile_ir

        text = (LIGHT_PIPELINE_MARK + 'define ptr @"entry"(ptr %self, ptr %argv, i64 %n) {\n'
                '  %rc = load i64, ptr %self\n  %rc2 = add i64 %rc, 1\n  store i64 %rc2, ptr %self\n'
                '  ret ptr %self\n}\n')
        keep_code = compile_ir(text)
        address = keep_code.address
    fn, keep = _fastcall_builtin(address)
    before = sys.getrefcount(keep[1])
    r = fn((), (), None, ())
    ok = r is keep[1]
    del r
    return ok and sys.getrefcount(keep[1]) == before

_blas_lock = threading.Lock()
_blas: dict | None = None


def blas_library() -> dict | None:
    """The CBLAS gemm symbols of the OpenBLAS that NumPy bundles (ILP64), loaded into the process.

    Returns:
        {dtype.str: symbol name} for float64 and float32, or None when no
        library is found (matmul then uses loop kernels).
    """
    global _blas
    with _blas_lock:
        if _blas is not None:
            return _blas or None
        found: dict = {}
        if os.environ.get("SYMGRAPH_NO_BLAS"):
            _blas = found
            return None
        import glob

        import llvmlite.binding as llvm

        npdir = os.path.dirname(np.__file__)
        cands = sorted(glob.glob(os.path.join(os.path.dirname(npdir), "numpy.libs", "libscipy_openblas64_*.so*")))
        cands += sorted(glob.glob(os.path.join(npdir, ".dylibs", "libscipy_openblas64_*.dylib")))
        global _blas_threads_fns
        for path in cands:
            try:
                lib = ctypes.CDLL(path)
                if hasattr(lib, "scipy_cblas_dgemm64_") and hasattr(lib, "scipy_cblas_sgemm64_"):
                    llvm.load_library_permanently(path)
                    found = {np.dtype(np.float64).str: "scipy_cblas_dgemm64_",
                             np.dtype(np.float32).str: "scipy_cblas_sgemm64_"}
                    if hasattr(lib, "scipy_openblas_get_num_threads64_") and \
                            hasattr(lib, "scipy_openblas_set_num_threads64_"):
                        _blas_threads_fns = ("scipy_openblas_get_num_threads64_",
                                             "scipy_openblas_set_num_threads64_")
                    break
            except OSError:
                continue
        _blas = found
        return found or None


_blas_threads_fns: tuple[str, str] | None = None
_support_lock = threading.Lock()
_support: Any = None


def blas_threads() -> int:
    """Threads the BLAS gets for the gemm calls of compiled code: SYMGRAPH_BLAS_THREADS, else 1.

    OpenBLAS splits each gemm statically across its threads and its idle
    threads spin for a while after every call; on a machine whose cores are
    shared with other work, a call then waits for a descheduled thread (we
    measured a W6 training step go from 36 ms to 550-780 ms with two OpenBLAS
    threads on a busy 2-core machine). Compiled code therefore calls the BLAS
    single-threaded unless asked otherwise. NumPy's own setting is restored
    when the last running compiled call returns.
    """
    env = os.environ.get("SYMGRAPH_BLAS_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return 1


def blas_thread_control() -> tuple[str, str] | None:
    """(enter, exit) symbol names that set the BLAS thread count around a compiled call, or None.

    The functions live in a small support module compiled once per process
    and registered with LLVM's symbol table: `enter(i32 n)` makes the BLAS
    use n threads (saving the process setting when no other compiled call is
    running), `exit(i32 n)` restores it when the last running call leaves.
    A spin lock guards the count of running calls.
    """
    global _support
    if blas_library() is None or _blas_threads_fns is None:
        return None
    with _support_lock:
        if _support is None:
            import llvmlite.binding as llvm

            from .jit import compile_ir

            get_fn, set_fn = _blas_threads_fns
            text = f"""
@lock = internal global i32 0
@active = internal global i64 0
@saved = internal global i32 0
declare i32 @{get_fn}() nounwind
declare void @{set_fn}(i32) nounwind
define internal void @acquire() nounwind {{
entry:
  br label %spin
spin:
  %r = cmpxchg ptr @lock, i32 0, i32 1 acquire monotonic
  %ok = extractvalue {{ i32, i1 }} %r, 1
  br i1 %ok, label %done, label %spin
done:
  ret void
}}
define void @symgraph_blas_enter(i32 %n) nounwind {{
entry:
  call void @acquire()
  %a = load i64, ptr @active
  %a1 = add i64 %a, 1
  store i64 %a1, ptr @active
  %first = icmp eq i64 %a, 0
  br i1 %first, label %save, label %out
save:
  %cur = call i32 @{get_fn}()
  store i32 %cur, ptr @saved
  %same = icmp eq i32 %cur, %n
  br i1 %same, label %out, label %set
set:
  call void @{set_fn}(i32 %n)
  br label %out
out:
  store atomic i32 0, ptr @lock release, align 4
  ret void
}}
define void @symgraph_blas_exit(i32 %n) nounwind {{
entry:
  call void @acquire()
  %a = load i64, ptr @active
  %a1 = sub i64 %a, 1
  store i64 %a1, ptr @active
  %last = icmp eq i64 %a1, 0
  br i1 %last, label %restore, label %out
restore:
  %s = load i32, ptr @saved
  %same = icmp eq i32 %s, %n
  br i1 %same, label %out, label %set
set:
  call void @{set_fn}(i32 %s)
  br label %out
out:
  store atomic i32 0, ptr @lock release, align 4
  ret void
}}
"""
            jitted = compile_ir(text, entry="symgraph_blas_enter")
            exit_addr = jitted.engine.get_function_address("symgraph_blas_exit")
            llvm.add_symbol("symgraph_blas_enter", jitted.address)
            llvm.add_symbol("symgraph_blas_exit", exit_addr)
            _support = jitted
    return ("symgraph_blas_enter", "symgraph_blas_exit")


# ----- the thread pool of compiled code -----

#: Most worker threads the pool starts (the caller runs pieces too).
POOL_MAX_WORKERS = 63
#: How long an idle worker (and a caller waiting for its pieces) spins before
#: sleeping on a futex, microseconds (SYMGRAPH_SPIN_US).
POOL_SPIN_US = 50
_POOL_COUNTERS = ("jobs", "inline_jobs", "worker_pieces", "workers", "create_failed", "late_jobs",
                  "contended_jobs", "wait_ns")
_pool_lock = threading.Lock()
_pool: Any = None


def _pool_arch() -> tuple[int, str] | None:
    """(futex syscall number, spin-wait hint call) on the platforms the pool supports, else None."""
    import platform
    import sys

    if not sys.platform.startswith("linux"):
        return None
    m = platform.machine().lower()
    if m in ("x86_64", "amd64"):
        return 202, "call void @llvm.x86.sse2.pause()"
    if m in ("aarch64", "arm64"):
        return 98, "call void @llvm.aarch64.hint(i32 1)"
    return None


def _spin_ns() -> int:
    env = os.environ.get("SYMGRAPH_SPIN_US")
    us = POOL_SPIN_US
    if env:
        try:
            us = max(0, int(env))
        except ValueError:
            pass
    return us * 1000


def _pool_ir(sys_futex: int, pause: str, spin_ns: int) -> str:
    """The pool's LLVM IR (see `thread_pool`)."""
    decl_pause = ("declare void @llvm.x86.sse2.pause()" if "x86" in pause else "declare void @llvm.aarch64.hint(i32)")
    return f"""
@busy = internal global i32 0, align 64
@gen = internal global i32 0, align 64
@sleepers = internal global i32 0, align 64
@next = internal global i64 0, align 64
@done = internal global i32 0, align 64
@waiting = internal global i32 0, align 4
@job_fn = internal global ptr null, align 64
@job_ctx = internal global ptr null, align 8
@job_stride = internal global i64 0, align 8
@job_n = internal global i64 0, align 8
@nworkers = internal global i32 0, align 64
@symgraph_pool_max_workers = global i32 {POOL_MAX_WORKERS}, align 4
@symgraph_pool_spin_ns = global i64 {spin_ns}, align 8
@symgraph_pool_yield = global i32 0, align 4
@symgraph_pool_jobs = global i64 0, align 64
@symgraph_pool_inline_jobs = global i64 0, align 8
@symgraph_pool_worker_pieces = global i64 0, align 64
@symgraph_pool_workers = global i64 0, align 8
@symgraph_pool_create_failed = global i64 0, align 8
@symgraph_pool_late_jobs = global i64 0, align 8
@symgraph_pool_wait_ns = global i64 0, align 8
@symgraph_pool_contended_jobs = global i64 0, align 8
@measure = internal global i32 0, align 4
@worker_cpu = internal global i64 0, align 8
@worker_ns = internal global i64 0, align 64
@symgraph_pool_backoff_left = global i64 0, align 8
@symgraph_pool_backoff_len = global i64 0, align 8

declare i64 @syscall(i64, ...) nounwind
declare i32 @pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @pthread_detach(i64) nounwind
declare i32 @pthread_sigmask(i32, ptr, ptr) nounwind
declare i32 @clock_gettime(i32, ptr) nounwind
declare i32 @sched_yield() nounwind
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
{decl_pause}

; nanoseconds of clock %clk (1: CLOCK_MONOTONIC, 3: CLOCK_THREAD_CPUTIME_ID)
define internal i64 @clock_ns(i32 %clk) nounwind {{
entry:
  %ts = alloca [2 x i64], align 8
  call i32 @clock_gettime(i32 %clk, ptr %ts)
  %s = load i64, ptr %ts
  %p = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %p
  %x = mul i64 %s, 1000000000
  %r = add i64 %x, %ns
  ret i64 %r
}}

define internal i64 @now() nounwind {{
entry:
  %r = call i64 @clock_ns(i32 1)
  ret i64 %r
}}

; CPU time of the calling thread (ns) when %m, else 0 (CLOCK_THREAD_CPUTIME_ID: a system call)
define internal i64 @cpu_if(i1 %m) nounwind {{
entry:
  br i1 %m, label %yes, label %no
yes:
  %r = call i64 @clock_ns(i32 3)
  ret i64 %r
no:
  ret i64 0
}}

; FUTEX_WAIT_PRIVATE with a relative timeout (a lost wake-up costs at most the timeout, never a hang)
define internal void @futex_wait(ptr %addr, i32 %val, i64 %timeout_ns) nounwind {{
entry:
  %ts = alloca [2 x i64], align 8
  %s = udiv i64 %timeout_ns, 1000000000
  %ns = urem i64 %timeout_ns, 1000000000
  store i64 %s, ptr %ts
  %p = getelementptr i64, ptr %ts, i64 1
  store i64 %ns, ptr %p
  %v = zext i32 %val to i64
  call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i64 128, i64 %v, ptr %ts, ptr null, i64 0)
  ret void
}}

define internal void @futex_wake(ptr %addr, i32 %n) nounwind {{
entry:
  %v = zext i32 %n to i64
  call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %addr, i64 129, i64 %v, ptr null, ptr null, i64 0)
  ret void
}}

; spin (with a pause hint) while *addr == old, for at most @symgraph_pool_spin_ns; returns whether it
; changed. Every 32 pauses the thread yields its core to any other runnable thread (on a busy machine
; a spinning thread must not hold up the work it waits for, or anyone else's)
define internal i1 @spin_while_eq(ptr %addr, i32 %old) nounwind {{
entry:
  %limit = load i64, ptr @symgraph_pool_spin_ns
  %t0 = call i64 @now()
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %cont], [0, %checked]
  %v = load atomic i32, ptr %addr acquire, align 4
  %eq = icmp eq i32 %v, %old
  br i1 %eq, label %pause, label %changed
pause:
  {pause}
  %i1 = add i64 %i, 1
  %chk = icmp uge i64 %i1, 32
  br i1 %chk, label %clock, label %cont
cont:
  br label %loop
clock:
  %y = load atomic i32, ptr @symgraph_pool_yield monotonic, align 4
  %doy = icmp ne i32 %y, 0
  br i1 %doy, label %yield, label %time
yield:
  call i32 @sched_yield()
  br label %time
time:
  %t = call i64 @now()
  %el = sub i64 %t, %t0
  %over = icmp uge i64 %el, %limit
  br i1 %over, label %timeout, label %checked
checked:
  br label %loop
changed:
  ret i1 1
timeout:
  ret i1 0
}}

; claim and run pieces of job generation %g until none is left (workers and the caller);
; returns how many it ran; workers add the time their pieces took to @worker_ns
define internal i64 @run_pieces(i32 %g, i1 %is_worker) nounwind {{
entry:
  %gz = zext i32 %g to i64
  %tag = shl i64 %gz, 32
  br label %claim
claim:
  %ran = phi i64 [0, %entry], [%ran, %cas], [%ran1, %finish], [%ran1, %lastpiece], [%ran1, %wake]
  %v = load atomic i64, ptr @next acquire, align 8
  %vt = and i64 %v, -4294967296
  %same = icmp eq i64 %vt, %tag
  br i1 %same, label %check, label %out
check:
  %idx = and i64 %v, 4294967295
  %n = load atomic i64, ptr @job_n monotonic, align 8
  %more = icmp ult i64 %idx, %n
  br i1 %more, label %cas, label %out
cas:
  %v1 = add i64 %v, 1
  %r = cmpxchg ptr @next, i64 %v, i64 %v1 acq_rel acquire
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %run, label %claim
run:
  %fn = load atomic ptr, ptr @job_fn monotonic, align 8
  %ctx = load atomic ptr, ptr @job_ctx monotonic, align 8
  %st = load atomic i64, ptr @job_stride monotonic, align 8
  %off = mul i64 %idx, %st
  %c = getelementptr i8, ptr %ctx, i64 %off
  br i1 %is_worker, label %timed, label %plain
plain:
  call ptr %fn(ptr %c)
  br label %finish
timed:
  %mflag = load atomic i32, ptr @measure monotonic, align 4
  %mb = icmp ne i32 %mflag, 0
  %wc0 = call i64 @cpu_if(i1 %mb)
  %t0 = call i64 @now()
  call ptr %fn(ptr %c)
  %t1 = call i64 @now()
  %wc1 = call i64 @cpu_if(i1 %mb)
  %dt = sub i64 %t1, %t0
  %dc = sub i64 %wc1, %wc0
  atomicrmw add ptr @worker_ns, i64 %dt monotonic
  atomicrmw add ptr @worker_cpu, i64 %dc monotonic
  atomicrmw add ptr @symgraph_pool_worker_pieces, i64 1 monotonic
  br label %finish
finish:
  %ran1 = add i64 %ran, 1
  %d = atomicrmw add ptr @done, i32 1 seq_cst
  %d1 = add i32 %d, 1
  %n32 = trunc i64 %n to i32
  %last = icmp eq i32 %d1, %n32
  br i1 %last, label %lastpiece, label %claim
lastpiece:
  %w = load atomic i32, ptr @waiting seq_cst, align 4
  %isw = icmp ne i32 %w, 0
  br i1 %isw, label %wake, label %claim
wake:
  call void @futex_wake(ptr @done, i32 1)
  br label %claim
out:
  ret i64 %ran
}}

define internal ptr @worker(ptr %arg) nounwind {{
entry:
  %set = alloca [16 x i64], align 8
  call void @llvm.memset.p0.i64(ptr %set, i8 -1, i64 128, i1 false)
  call i32 @pthread_sigmask(i32 0, ptr %set, ptr null)
  %g0 = load atomic i32, ptr @gen acquire, align 4
  br label %wait
wait:
  %my = phi i32 [%g0, %entry], [%g, %work]
  %ch = call i1 @spin_while_eq(ptr @gen, i32 %my)
  br i1 %ch, label %work, label %sleep
sleep:
  atomicrmw add ptr @sleepers, i32 1 seq_cst
  call void @futex_wait(ptr @gen, i32 %my, i64 1000000000)
  atomicrmw sub ptr @sleepers, i32 1 seq_cst
  %g2 = load atomic i32, ptr @gen acquire, align 4
  %same = icmp eq i32 %g2, %my
  br i1 %same, label %sleep, label %work
work:
  %g = load atomic i32, ptr @gen acquire, align 4
  call i64 @run_pieces(i32 %g, i1 1)
  br label %wait
}}

; in a forked child (no workers there): forget the parent's workers and any call it was running
define void @symgraph_pool_after_fork() nounwind {{
entry:
  store i32 0, ptr @nworkers
  store i32 0, ptr @sleepers
  store i64 0, ptr @symgraph_pool_workers
  store i64 0, ptr @symgraph_pool_create_failed
  store i32 0, ptr @busy
  ret void
}}

; start workers until there are %want (the caller holds @busy); a failed pthread_create stops trying
define internal void @ensure_workers(i32 %want0) nounwind {{
entry:
  %tid = alloca i64, align 8
  %mx = load i32, ptr @symgraph_pool_max_workers
  %big = icmp sgt i32 %want0, %mx
  %want = select i1 %big, i32 %mx, i32 %want0
  br label %check
check:
  %nw = load i32, ptr @nworkers
  %enough = icmp sge i32 %nw, %want
  br i1 %enough, label %out, label %failed_before
failed_before:
  %cf = load i64, ptr @symgraph_pool_create_failed
  %f = icmp ne i64 %cf, 0
  br i1 %f, label %out, label %create
create:
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @worker, ptr null)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %started, label %fail
started:
  %t = load i64, ptr %tid
  call i32 @pthread_detach(i64 %t)
  %nw1 = add i32 %nw, 1
  store i32 %nw1, ptr @nworkers
  %nw64 = sext i32 %nw1 to i64
  store atomic i64 %nw64, ptr @symgraph_pool_workers monotonic, align 8
  br label %check
fail:
  store i64 1, ptr @symgraph_pool_create_failed
  br label %out
out:
  ret void
}}

define internal void @run_inline(ptr %fn, ptr %ctx, i64 %stride, i64 %n) nounwind {{
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %out
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %off = mul i64 %i, %stride
  %c = getelementptr i8, ptr %ctx, i64 %off
  call ptr %fn(ptr %c)
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %out
out:
  ret void
}}

; run fn(ctx + i * stride) for i in [0, n) on the pool and the calling thread; returns when all are done
define void @symgraph_pool_run(ptr %fn, ptr %ctx, i64 %stride, i64 %n, i32 %nthreads) nounwind {{
entry:
  %few = icmp sle i64 %n, 1
  %one = icmp sle i32 %nthreads, 1
  %serial = or i1 %few, %one
  br i1 %serial, label %inline, label %lock
lock:
  %r = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %r, 1
  br i1 %got, label %check_backoff, label %inline_busy
check_backoff:
  %bl = load atomic i64, ptr @symgraph_pool_backoff_left monotonic, align 8
  %inb = icmp sgt i64 %bl, 0
  br i1 %inb, label %in_backoff, label %start
in_backoff:
  %bl1 = sub i64 %bl, 1
  store atomic i64 %bl1, ptr @symgraph_pool_backoff_left monotonic, align 8
  br label %unlock_inline
start:
  %want = sub i32 %nthreads, 1
  call void @ensure_workers(i32 %want)
  %nw = load i32, ptr @nworkers
  %none = icmp eq i32 %nw, 0
  br i1 %none, label %unlock_inline, label %post
post:
  %jn = atomicrmw add ptr @symgraph_pool_jobs, i64 1 monotonic
  %jm = and i64 %jn, 3
  %every4 = icmp eq i64 %jm, 0
  %blen = load atomic i64, ptr @symgraph_pool_backoff_len monotonic, align 8
  %probing = icmp sgt i64 %blen, 0
  %measure = or i1 %every4, %probing
  %m32 = zext i1 %measure to i32
  %g = load atomic i32, ptr @gen monotonic, align 4
  %g1 = add i32 %g, 1
  %gz = zext i32 %g1 to i64
  %tag = shl i64 %gz, 32
  %closed = or i64 %tag, 2147483647
  store atomic i64 %closed, ptr @next seq_cst, align 8
  store atomic ptr %fn, ptr @job_fn monotonic, align 8
  store atomic ptr %ctx, ptr @job_ctx monotonic, align 8
  store atomic i64 %stride, ptr @job_stride monotonic, align 8
  store atomic i64 %n, ptr @job_n monotonic, align 8
  store atomic i32 0, ptr @done monotonic, align 4
  store atomic i32 0, ptr @waiting monotonic, align 4
  store atomic i64 0, ptr @worker_ns monotonic, align 8
  store atomic i64 0, ptr @worker_cpu monotonic, align 8
  store atomic i32 %m32, ptr @measure monotonic, align 4
  %t_post = call i64 @now()
  store atomic i64 %tag, ptr @next release, align 8
  atomicrmw xchg ptr @gen, i32 %g1 seq_cst
  %sl = load atomic i32, ptr @sleepers seq_cst, align 4
  %anysl = icmp sgt i32 %sl, 0
  br i1 %anysl, label %wake, label %work
wake:
  %n32 = trunc i64 %n to i32
  %others = sub i32 %n32, 1
  %lt = icmp slt i32 %others, %nw
  %cnt = select i1 %lt, i32 %others, i32 %nw
  call void @futex_wake(ptr @gen, i32 %cnt)
  br label %work
work:
  %cc0 = call i64 @cpu_if(i1 %measure)
  %mine = call i64 @run_pieces(i32 %g1, i1 0)
  %t_mine = call i64 @now()
  %cc1 = call i64 @cpu_if(i1 %measure)
  %nn = trunc i64 %n to i32
  %d0 = load atomic i32, ptr @done acquire, align 4
  %fin0 = icmp eq i32 %d0, %nn
  br i1 %fin0, label %contention, label %spin
spin:
  %d = load atomic i32, ptr @done acquire, align 4
  %fin = icmp eq i32 %d, %nn
  br i1 %fin, label %waited, label %spinwait
spinwait:
  %changed = call i1 @spin_while_eq(ptr @done, i32 %d)
  br i1 %changed, label %spin, label %sleep
sleep:
  atomicrmw xchg ptr @waiting, i32 1 seq_cst
  br label %sleeploop
sleeploop:
  %d2 = load atomic i32, ptr @done seq_cst, align 4
  %fin2 = icmp eq i32 %d2, %nn
  br i1 %fin2, label %waited, label %dowait
dowait:
  call void @futex_wait(ptr @done, i32 %d2, i64 2000000)
  br label %sleeploop
waited:
  ; The caller waited for workers' pieces. If they ran much slower than the caller's own (a worker
  ; sharing its core with other work, or preempted: a busy machine), threads do not pay: run the
  ; next calls inline, for 8, 16, ... up to 4096 calls while this repeats. Late if
  ; worker time per piece > 1.5 x caller time per piece + 40 us.
  %t_end = call i64 @now()
  %waited_ns = sub i64 %t_end, %t_mine
  atomicrmw add ptr @symgraph_pool_wait_ns, i64 %waited_ns monotonic
  %someone = icmp sgt i64 %mine, 0
  br i1 %someone, label %judge, label %contention
judge:
  %workns = sub i64 %t_mine, %t_post
  %wns = load atomic i64, ptr @worker_ns monotonic, align 8
  %wp = sub i64 %n, %mine
  %wavg = udiv i64 %wns, %wp
  %cavg = udiv i64 %workns, %mine
  %c3 = mul i64 %cavg, 3
  %c32 = lshr i64 %c3, 1
  %lim = add i64 %c32, 40000
  %late = icmp ugt i64 %wavg, %lim
  br i1 %late, label %penalize_late, label %contention
contention:
  ; Every 4th job (and the first after inline runs) the caller and the workers also compare the CPU time their pieces got with the
  ; time the pieces took: a thread that lost more than a quarter of it (+20 us) to other threads
  ; (more runnable threads than cores: other processes, or other libraries' spinning thread pools
  ; in this process) means threads do not pay now: the same inline runs as above.
  br i1 %measure, label %cmeasure, label %unlock
cmeasure:
  %cwall = sub i64 %t_mine, %t_post
  %ccpu = sub i64 %cc1, %cc0
  %clost = sub i64 %cwall, %ccpu
  %cq = lshr i64 %cwall, 2
  %climit = add i64 %cq, 20000
  %cbad = icmp sgt i64 %clost, %climit
  %wwall = load atomic i64, ptr @worker_ns monotonic, align 8
  %wcpu = load atomic i64, ptr @worker_cpu monotonic, align 8
  %wlost = sub i64 %wwall, %wcpu
  %wq = lshr i64 %wwall, 2
  %wlimit = add i64 %wq, 20000
  %wbad = icmp sgt i64 %wlost, %wlimit
  %bad = or i1 %cbad, %wbad
  br i1 %bad, label %penalize_contended, label %good
penalize_late:
  atomicrmw add ptr @symgraph_pool_late_jobs, i64 1 monotonic
  br label %penalize
penalize_contended:
  atomicrmw add ptr @symgraph_pool_contended_jobs, i64 1 monotonic
  br label %penalize
penalize:
  %len = load atomic i64, ptr @symgraph_pool_backoff_len monotonic, align 8
  %len2 = shl i64 %len, 1
  %small = icmp slt i64 %len2, 8
  %len3 = select i1 %small, i64 8, i64 %len2
  %huge = icmp sgt i64 %len3, 4096
  %len4 = select i1 %huge, i64 4096, i64 %len3
  store atomic i64 %len4, ptr @symgraph_pool_backoff_len monotonic, align 8
  store atomic i64 %len4, ptr @symgraph_pool_backoff_left monotonic, align 8
  br label %unlock
good:
  store atomic i64 0, ptr @symgraph_pool_backoff_len monotonic, align 8
  br label %unlock
unlock:
  store atomic i32 0, ptr @busy release, align 4
  ret void
unlock_inline:
  store atomic i32 0, ptr @busy release, align 4
  br label %inline_busy
inline_busy:
  atomicrmw add ptr @symgraph_pool_inline_jobs, i64 1 monotonic
  br label %inline
inline:
  call void @run_inline(ptr %fn, ptr %ctx, i64 %stride, i64 %n)
  ret void
}}
"""


def thread_pool() -> str | None:
    """The symbol of the pool that runs pieces of compiled kernels on worker threads, or None.

    `void symgraph_pool_run(ptr fn, ptr ctx, i64 stride, i64 n, i32 nthreads)`
    runs `fn(ctx + i * stride)` for every i in [0, n) and returns when all
    have finished. The pool is a small native module compiled once per
    process; its workers (at most `nthreads - 1`, started on first use,
    detached, all signals blocked) claim pieces through an atomic counter
    and the calling thread claims pieces too, so a worker that is slow to
    wake (a busy machine) never delays a call: its pieces are simply run by
    the caller. Only a piece a worker has already claimed is waited for.

    Idle workers spin for `SYMGRAPH_SPIN_US` microseconds (default 50) after
    each job, then sleep on a futex; a caller waiting for a claimed piece
    spins as long, then sleeps. (Spinning keeps workers awake between the
    kernels of one call: a futex wake-up costs 30-50 us on this VM, and
    with no spinning the W2 step took 1.12-1.22 ms instead of 0.80-0.87.
    `set_pool_limits(spin_yield=True)` makes spinning threads call
    sched_yield; measured, that let other threads of the same process, such
    as OpenBLAS's own spinning workers, keep the core, so it is off.)
    Every futex wait has a timeout, so a lost wake-up costs time, never a
    hang.

    On a busy machine a worker that shares its core may take much longer
    for its pieces than the caller for its own; when the caller has waited
    for pieces that ran more than 1.5x slower (+40 us) than its own, the
    next 8 calls run inline, then 16, ... up to 4096 while it repeats (a
    call that goes well resets this). So under load compiled code falls
    back to about its single-threaded speed rather than below it.

    The pool serves one call at a time: a call that finds it busy (another
    thread's compiled call, or a forked child whose parent was mid-call)
    runs its pieces inline, as does a call when no worker thread could be
    started (a failed pthread_create stops further attempts). After
    `os.fork()` the child starts fresh workers (a fork from C code leaves
    the child running pieces inline). `SYMGRAPH_NO_POOL=1` disables the
    pool (gemms are then not split; loop kernels use a thread per piece).

    Returns:
        "symgraph_pool_run", registered with LLVM's symbol table; None on
        platforms other than Linux on x86-64 or AArch64, with
        SYMGRAPH_NO_POOL set, or if the module does not compile.

    References:
        U. Drepper, "Futexes Are Tricky" (2011): the wait/wake protocol.
    """
    global _pool
    arch = _pool_arch()
    if arch is None or os.environ.get("SYMGRAPH_NO_POOL"):
        return None
    with _pool_lock:
        if _pool is None:
            import llvmlite.binding as llvm

            from .jit import compile_ir

            try:
                jitted = compile_ir(_pool_ir(arch[0], arch[1], _spin_ns()), entry="symgraph_pool_run")
            except Exception:  # noqa: BLE001  (no pool: kernels split the old way)
                _pool = False
                return None
            llvm.add_symbol("symgraph_pool_run", jitted.address)
            after_fork = ctypes.CFUNCTYPE(None)(jitted.engine.get_function_address("symgraph_pool_after_fork"))
            os.register_at_fork(after_in_child=after_fork)
            # Worker threads run this code until the process exits: never free it
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(jitted))
            _pool = jitted
    return "symgraph_pool_run" if _pool else None


def pool_stats() -> dict[str, int] | None:
    """Counters of the thread pool since the process started, or None without a pool.

    Returns:
        jobs (calls run on the pool), inline_jobs (calls run on the calling
        thread alone: pool busy or no worker), worker_pieces (pieces run by
        worker threads), workers (started), create_failed (1 after a failed
        pthread_create), late_jobs (calls where a worker's claimed piece
        kept the caller waiting: each starts a run of inline calls),
        contended_jobs (sampled calls whose threads lost CPU time to other
        threads: each starts a run of inline calls),
        wait_ns (total time callers waited for workers' pieces, ns).
    """
    if not _pool:
        return None
    return {name: _pool_global(name, ctypes.c_int64).value for name in _POOL_COUNTERS}


def _pool_global(name: str, ctype: Any) -> Any:
    return ctype.from_address(_pool.engine.get_global_value_address(f"symgraph_pool_{name}"))


def set_pool_limits(max_workers: int | None = None, spin_us: int | None = None, spin_yield: bool | None = None,
                    reset_backoff: bool = False) -> None:
    """Change the pool's worker cap (takes effect for workers not yet started) or spin time (testing, tuning).

    Args:
        max_workers: most worker threads started from now on (0: every
            call runs inline until the cap is raised).
        spin_us: spin time of idle workers and waiting callers, microseconds.
        spin_yield: whether spinning threads call sched_yield every few microseconds.
        reset_backoff: end a run of inline calls that a late or contended
            call started (the busy-machine safeguards), so the next call
            uses the workers again.
    """
    if thread_pool() is None:
        return
    if reset_backoff:
        _pool_global("backoff_left", ctypes.c_int64).value = 0
        _pool_global("backoff_len", ctypes.c_int64).value = 0
    if max_workers is not None:
        _pool_global("max_workers", ctypes.c_int32).value = max(0, min(int(max_workers), POOL_MAX_WORKERS))
    if spin_us is not None:
        _pool_global("spin_ns", ctypes.c_int64).value = max(0, int(spin_us)) * 1000
    if spin_yield is not None:
        _pool_global("yield", ctypes.c_int32).value = int(bool(spin_yield))


def _canonical(d: Any) -> np.dtype:
    """The canonical dtype object (`np.dtype(np.float64)` is a singleton; derived dtypes may not be)."""
    d = np.dtype(d)
    if d.isnative and d.kind in "biuf":
        return np.dtype(d.type)
    return d


def _aligned_empty(nbytes: int, align: int = 64) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


class Executable:
    """One compiled signature: checks arguments, allocates outputs, calls native code.

    Attributes:
        graph: the compiled graph.
        stats: figures (nodes, kernels, compile_seconds, peak_bytes, arena_bytes, ...).
        fast: a generated function for flat positional array arguments
            (returns MISS when the arguments do not match exactly).
    """

    def __init__(self, graph: Any, jitted: Any, in_specs: list, out_buffers: list, out_plan: list,
                 arena_bytes: int, consts: list[np.ndarray], donated: dict[int, int], stats: dict,
                 abi: str = "ctypes"):
        self.graph = graph
        self.jitted = jitted
        # [(shape, dtype)]; dtypes canonical (the fast path compares them by identity)
        self.in_specs = [(tuple(sh), _canonical(d)) for sh, d in in_specs]
        # [(shape, dtype)] of fresh output arrays; canonical dtypes, so outputs passed back in (parameters
        # of a training loop) pass the fast path's identity check on dtypes
        self.out_buffers = [(tuple(sh), _canonical(d)) for sh, d in out_buffers]
        # per output: ("buf", j) | ("in", li) | ("copy_in", li) | ("const", array) | ("dup", k)
        self.out_plan = out_plan
        self.arena_bytes = arena_bytes
        self.consts = tuple(consts)
        self.donated = donated              # output position -> input leaf
        self.donated_leaves = frozenset(donated.values())
        self.stats = stats
        self._pool: list = []
        self._dummy = np.empty(8, np.uint8)
        self.abi = abi
        self._keep: tuple = ()
        if abi == "fastcall":
            self.native, self._keep = _fastcall_builtin(jitted.address, f"symgraph_{graph.name}")
        elif abi == "ctypes":
            proto = ctypes.CFUNCTYPE(None, ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object)
            self.native = proto(jitted.address)
        else:
            proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
            self.native = proto(jitted.address)
        self.fast = self._make_fast() if abi != "pointers" else None

    # -- inspection --

    def set_profile(self, kernels: list) -> None:
        """Attach the kernel descriptions of a module compiled with profiling (see `profile`)."""
        self._prof_kernels = kernels
        addr = self.jitted.engine.get_global_value_address("sg_profile")
        self._prof = (ctypes.c_int64 * (len(kernels) + 1)).from_address(addr)

    def profile(self, reset: bool = False) -> list[dict] | None:
        """Time spent per kernel since compilation (or the last reset), when compiled with profiling.

        Compile with `SYMGRAPH_PROFILE=1` in the environment (or
        `codegen.compile_graph(..., profile=True)`) to get figures; each kernel
        call is timed with clock_gettime (about 40 ns of overhead per kernel).

        Args:
            reset: zero the counters after reading them.

        Returns:
            None without profiling; else one dict per kernel, in execution
            order: index, kind ("gemm", "loop", "loop+par", "empty"), nodes
            (op name and shape of each node the kernel writes), seconds (total
            over all calls), calls (number of entry calls).
        """
        prof = getattr(self, "_prof", None)
        if prof is None:
            return None
        n = len(self._prof_kernels)
        calls = int(prof[n])
        rows = []
        for i, (kind, nodes) in enumerate(self._prof_kernels):
            rows.append({"index": i, "kind": kind, "seconds": prof[i] * 1e-9, "calls": calls,
                         "nodes": [f"{x.op.name}{tuple(x.shape)}" for x in nodes]})
        if reset:
            for i in range(n + 1):
                prof[i] = 0
        return rows

    def llvm_ir(self) -> str:
        return self.jitted.llvm_ir()

    def asm(self) -> str:
        return self.jitted.asm()

    # -- arena --

    def _arena(self) -> np.ndarray:
        return _aligned_empty(self.arena_bytes)

    def release_arena(self) -> int:
        """Drop the pooled arenas, so that their memory can return to the system.

        A call takes an arena (the scratch memory of all intermediates,
        `arena_bytes` bytes, 64-byte aligned) from this executable's pool, or
        allocates one when the pool is empty, and puts it back when it
        returns; the pool therefore keeps one arena per thread that called
        concurrently. This empties the pool: the arrays are freed as soon as
        nothing else refers to them, and the next call allocates a new arena.
        An arena in use by a call running in another thread at that moment
        is not dropped (it returns to the pool when that call ends).

        Returns:
            Bytes dropped: the number of pooled arenas times `arena_bytes`
            (0 when the program needs no arena or none was pooled).
        """
        dropped = 0
        while True:
            try:  # pop one at a time: the list is shared with the generated fast path and other threads
                self._pool.pop()
            except IndexError:
                return dropped
            dropped += self.arena_bytes

    # -- the checked path --

    def run(self, leaves: list[Any]) -> list[np.ndarray]:
        """Run on flat argument leaves; returns the flat outputs.

        Raises:
            ShapeError: an argument of another shape than the compiled signature.
            DTypeError: an argument of another dtype (or not numeric).
        """
        if len(leaves) != len(self.in_specs):
            raise ShapeError(f"{self.graph.name}: expected {len(self.in_specs)} array arguments, got {len(leaves)}")
        arrs = []
        for i, (x, (shape, dtype)) in enumerate(zip(leaves, self.in_specs)):
            name = self.graph.inputs[i].attr("name", f"arg{i}")
            a = x if type(x) is np.ndarray else np.asarray(x)
            if not a.dtype.isnative and a.dtype.newbyteorder("=") == dtype:
                a = a.astype(dtype)  # byte-swapped input: same values, native order
            if a.dtype != dtype:
                if a.dtype.kind not in "biuf":
                    raise DTypeError(f"{self.graph.name}: argument {name} has dtype {a.dtype}; expected {dtype}")
                raise DTypeError(f"{self.graph.name}: argument {name} has dtype {a.dtype}, the compiled "
                                 f"signature has {dtype}")
            if a.shape != shape:
                raise ShapeError(f"{self.graph.name}: argument {name} has shape {a.shape}, the compiled "
                                 f"signature has {shape}")
            if not (a.flags.c_contiguous and a.flags.aligned):
                a = np.ascontiguousarray(a)
                if not a.flags.aligned:
                    a = a.copy()
            arrs.append(a)
        for li in self.donated_leaves:
            a = arrs[li]
            if not self._donatable(a, leaves[li], arrs, li):
                arrs[li] = a.copy()
        outs = tuple(np.empty(s, d) for s, d in self.out_buffers)
        self._call(tuple(arrs), outs)
        return self._assemble(arrs, outs)

    @staticmethod
    def _donatable(a: np.ndarray, orig: Any, arrs: list, li: int) -> bool:
        if a is not orig or a.base is not None or not a.flags.writeable:
            return False
        for j, b in enumerate(arrs):
            if j == li:
                continue
            while b is not None:
                if b is a:
                    return False
                b = b.base if isinstance(b, np.ndarray) else None
        return True

    def _call(self, args: tuple, outs: tuple) -> None:
        try:  # pop first: a check-then-pop would race between threads
            arena = self._pool.pop()
        except IndexError:
            arena = self._arena() if self.arena_bytes else self._dummy
        try:
            if self.abi != "pointers":
                self.native(args, outs, arena, self.consts)
            else:  # pragma: no cover - other Python builds
                def ptrs(seq: tuple) -> Any:
                    arr = (ctypes.c_void_p * max(len(seq), 1))(*[x.ctypes.data for x in seq])
                    return arr

                pa, po, pc = ptrs(args), ptrs(outs), ptrs(self.consts)
                self.native(ctypes.addressof(pa), ctypes.addressof(po), arena.ctypes.data, ctypes.addressof(pc))
        finally:
            if self.arena_bytes:
                self._pool.append(arena)

    def _assemble(self, arrs: list, outs: tuple) -> list[np.ndarray]:
        res: list[np.ndarray] = []
        for kind, v in self.out_plan:
            if kind == "buf":
                res.append(outs[v])
            elif kind == "in":
                res.append(arrs[v])
            elif kind == "copy_in":
                res.append(np.array(arrs[v], copy=True))
            elif kind == "const":
                res.append(np.array(v, copy=True))
            else:  # dup
                res.append(res[v].copy())
        return res

    # -- the generated fast path --

    def _make_fast(self) -> Any:
        """Generate the per-signature call function (argument checks and output assembly unrolled).

        The arguments' pytree structure is matched by generated code (tuple
        lengths, dict key sets, list lengths) and each array leaf by type,
        dtype, shape and strides; anything else returns MISS (the caller then
        takes the checked path).
        """
        from symgraph.tree import tree_unflatten

        n = len(self.in_specs)
        ns: dict[str, Any] = {"_nd": np.ndarray, "_empty": np.empty, "_MISS": MISS, "_native": self.native,
                              "_pool": self._pool, "_new": self._arena, "_dummy": self._dummy,
                              "_consts": self.consts, "_array": np.array, "_unflatten": tree_unflatten,
                              "_tree": self.graph.out_tree, "_float": float, "_int": int, "_bool": bool,
                              "_dict": dict, "_tuple": tuple, "_list": list}
        lines = ["def fast(args):"]
        names: list[str] = []
        tmp = iter(range(1 << 30))

        def extract(td: Any, expr: str) -> bool:
            """Emit checks for the structure `td` at `expr`; leaves become variables a0, a1, ..."""
            if td.kind == "leaf":
                v = f"a{len(names)}"
                names.append(v)
                if expr != v:
                    lines.append(f"    {v} = {expr}")
                return True
            if td.kind == "none":
                lines.append(f"    if {expr} is not None: return _MISS")
                return True
            k = next(tmp)
            var = f"t{k}"
            if expr != "args":
                lines.append(f"    {var} = {expr}")
            else:
                var = "args"
            if td.kind in ("tuple", "list"):
                ty = "_tuple" if td.kind == "tuple" else "_list"
                if var != "args":
                    lines.append(f"    if type({var}) is not {ty} or len({var}) != {len(td.children)}: return _MISS")
                    for i, c in enumerate(td.children):
                        extract(c, f"{var}[{i}]")
                    return True
                lines.append(f"    if len(args) != {len(td.children)}: return _MISS")
                if td.children:  # unpack the positional arguments in one step
                    xs = [f"x{i}" for i in range(len(td.children))]
                    lines.append(f"    {', '.join(xs)}{',' if len(xs) == 1 else ''} = args")
                    for x, c in zip(xs, td.children):
                        if c.kind == "leaf":
                            v = f"a{len(names)}"
                            names.append(v)
                            lines.append(f"    {v} = {x}")
                        else:
                            extract(c, x)
                return True
            if td.kind == "dict":
                ns[f"K{k}"] = frozenset(td.meta)
                lines.append(f"    if type({var}) is not _dict or {var}.keys() != K{k}: return _MISS")
                for key, c in zip(td.meta, td.children):
                    ns[f"KEY{k}_{len(names)}"] = key
                    extract(c, f"{var}[KEY{k}_{len(names)}]")
                return True
            return False  # namedtuples and other nodes: no fast path

        in_tree = self.graph.in_tree
        if in_tree is None or in_tree.kind != "tuple" or not extract(in_tree, "args") or len(names) != n:
            return None
        flat_args = all(c.kind == "leaf" for c in in_tree.children)
        rebuild = not flat_args
        for i, (shape, dtype) in enumerate(self.in_specs):
            a = names[i]
            ns[f"D{i}"] = dtype
            ns[f"S{i}"] = tuple(shape)
            st = []
            acc = dtype.itemsize
            for d in reversed(shape):
                st.append(acc)
                acc *= d
            ns[f"T{i}"] = tuple(reversed(st))
            check = f"type({a}) is not _nd or {a}.dtype is not D{i} or {a}.shape != S{i} or {a}.strides != T{i}"
            if shape == () and i not in self.donated_leaves:
                # scalars: the NumPy scalar type (np.float64(2.0)) and the matching Python type become 0-d arrays
                ns[f"ST{i}"] = dtype.type
                py = {"f": "float", "i": "int", "b": "bool"}.get(dtype.kind) if dtype.itemsize == 8 or \
                    dtype.kind == "b" else None
                conv = f"type({a}) is ST{i}" + (f" or type({a}) is _{py}" if py else "")
                lines.append(f"    if {conv}: {a} = _array({a}, D{i})")
                lines.append(f"    elif {check}: return _MISS")
                rebuild = True
            else:
                lines.append(f"    if {check}: return _MISS")
        for li in sorted(self.donated_leaves):
            a = names[li]
            lines.append(f"    if {a}.base is not None or not {a}.flags.writeable: return _MISS")
            for j in range(n):
                if j != li:
                    lines.append(f"    if {names[j]} is {a} or {names[j]}.base is {a}: return _MISS")
        leaves_t = f"({', '.join(names)}{',' if n == 1 else ''})"
        if rebuild:
            lines.append(f"    args = {leaves_t}")
        outs = []
        for j, (shape, dtype) in enumerate(self.out_buffers):
            ns[f"OS{j}"] = tuple(shape)
            ns[f"OD{j}"] = dtype
            lines.append(f"    o{j} = _empty(OS{j}, OD{j})")
            outs.append(f"o{j}")
        outs_t = f"({', '.join(outs)}{',' if len(outs) == 1 else ''})"
        if self.arena_bytes:
            # pop first, create on IndexError: a check-then-pop races between threads
            lines.append("    try:")
            lines.append("        ar = _pool.pop()")
            lines.append("    except IndexError:")
            lines.append("        ar = _new()")
            lines.append(f"    _native(args, {outs_t}, ar, _consts)")
            lines.append("    _pool.append(ar)")
        else:
            lines.append(f"    _native(args, {outs_t}, _dummy, _consts)")
        res = []
        for k, (kind, v) in enumerate(self.out_plan):
            r = f"r{k}"
            if kind == "buf":
                r = f"o{v}"
            elif kind == "in":
                r = names[v]
            elif kind == "copy_in":
                lines.append(f"    {r} = _array({names[v]}, copy=True)")
            elif kind == "const":
                ns[f"C{k}"] = v
                lines.append(f"    {r} = _array(C{k}, copy=True)")
            else:
                lines.append(f"    {r} = {res[v]}.copy()")
            res.append(r)
        it = iter(res)

        def build(td: Any) -> str | None:
            if td.kind == "leaf":
                return next(it)
            if td.kind == "none":
                return "None"
            parts = [build(c) for c in td.children]
            if any(p is None for p in parts):
                return None
            if td.kind == "tuple":
                return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
            if td.kind == "list":
                return f"[{', '.join(parts)}]"
            if td.kind == "dict":
                items = []
                for key, p in zip(td.meta, parts):
                    ns[f"OK{len(ns)}"] = key
                    items.append(f"OK{len(ns) - 1}: {p}")
                return "{" + ", ".join(items) + "}"
            return None

        tree = self.graph.out_tree
        expr = build(tree) if tree is not None else None
        if expr is None:
            expr = f"_unflatten(_tree, [{', '.join(res)}])"
        lines.append(f"    return {expr}")
        src = "\n".join(lines)
        exec(compile(src, f"<symgraph fast call {self.graph.name}>", "exec"), ns)  # noqa: S102
        fast = ns["fast"]
        fast.__source__ = src
        return fast
