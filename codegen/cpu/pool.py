"""The thread pool of compiled code: a futex-based native pool (`pool.ll`) that runs the pieces of kernels.

`thread_pool` compiles the pool once per process and registers `symgraph_pool_run` with LLVM's
symbol table; `pool_stats` and `set_pool_limits` read and tune it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
from typing import Any

import llvmlite.binding as llvm

from ..jit import LIGHT_PIPELINE_MARK, compile_ir
from .ll import ll_text

__all__ = ["POOL_MAX_WORKERS", "POOL_SPIN_US", "thread_pool", "pool_stats", "set_pool_limits", "pool_ir"]

#: Most worker threads the pool starts (the caller runs pieces too).
POOL_MAX_WORKERS = 63
#: How long an idle worker (and a caller waiting for its pieces) spins before
#: sleeping on a futex, microseconds (SYMGRAPH_SPIN_US).
POOL_SPIN_US = 50
_POOL_COUNTERS = ("jobs", "inline_jobs", "worker_pieces", "workers", "create_failed", "late_jobs",
                  "contended_jobs", "wait_ns")
_pool_lock = threading.Lock()
_pool: Any = None


#: Per architecture: (futex system call number, spin-wait hint declaration, its call).
_ARCH = {
    "x86_64": (202, "declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"),
    "aarch64": (98, "declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"),
}


def _pool_arch() -> tuple[int, str, str] | None:
    """(futex syscall number, hint declaration, hint call) on the platforms the pool supports, else None."""
    if not sys.platform.startswith("linux"):
        return None
    m = platform.machine().lower()
    return _ARCH.get({"amd64": "x86_64", "arm64": "aarch64"}.get(m, m))


def _spin_ns() -> int:
    env = os.environ.get("SYMGRAPH_SPIN_US")
    us = POOL_SPIN_US
    if env:
        try:
            us = max(0, int(env))
        except ValueError:
            pass
    return us * 1000


def pool_ir(sys_futex: int, pause_decl: str, pause_call: str, spin_ns: int) -> str:
    """The pool's LLVM IR (`pool.ll`, see `thread_pool`) for one platform.

    Args:
        sys_futex: the futex system call number.
        pause_decl: the declaration of the spin-wait hint intrinsic.
        pause_call: the instruction that calls it.
        spin_ns: the initial spin time, ns.
    """
    return ll_text("pool.ll", SYS_FUTEX=sys_futex, PAUSE_DECL=pause_decl, PAUSE_CALL=pause_call, SPIN_NS=spin_ns,
                   MAX_WORKERS=POOL_MAX_WORKERS)


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
            try:
                # the light pipeline (`jit.optimize`): hand-written SSA of atomics, futex calls and spin loops,
                # nothing to vectorize; O3 took 75-130 ms of every process's first compiled call, this 12-23
                jitted = compile_ir(LIGHT_PIPELINE_MARK + pool_ir(*arch, _spin_ns()), entry="symgraph_pool_run")
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
