"""The BLAS of compiled code: finding the OpenBLAS that NumPy bundles, and its thread count around calls.

Products call CBLAS gemm from that library (`blas_library`), single-threaded unless
SYMGRAPH_BLAS_THREADS says otherwise (`blas_threads`); a small native support module
(`blas_threads.ll`) sets the BLAS's thread count on entry and restores it on exit.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from ..jit import LIGHT_PIPELINE_MARK, compile_ir
from .ll import ll_text

__all__ = ["blas_library", "loaded_library", "blas_threads", "blas_thread_control", "blas_threads_ir"]

_blas_lock = threading.Lock()
_blas: dict | None = None
_lib: Any = None


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
        npdir = os.path.dirname(np.__file__)
        cands = sorted(glob.glob(os.path.join(os.path.dirname(npdir), "numpy.libs", "libscipy_openblas64_*.so*")))
        cands += sorted(glob.glob(os.path.join(npdir, ".dylibs", "libscipy_openblas64_*.dylib")))
        global _blas_threads_fns, _lib
        for path in cands:
            try:
                lib = ctypes.CDLL(path)
                if hasattr(lib, "scipy_cblas_dgemm64_") and hasattr(lib, "scipy_cblas_sgemm64_"):
                    llvm.load_library_permanently(path)
                    _lib = lib
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


def loaded_library() -> Any:
    """The ctypes handle of the library `blas_library` loaded (None before, or when there is none)."""
    blas_library()
    return _lib


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


def blas_threads_ir(get_threads: str, set_threads: str) -> str:
    """The LLVM IR of the thread-control support module (`blas_threads.ll`) for the BLAS's two symbols.

    Args:
        get_threads: the symbol of `int get_num_threads(void)`.
        set_threads: the symbol of `void set_num_threads(int)`.
    """
    return ll_text("blas_threads.ll", GET_THREADS=get_threads, SET_THREADS=set_threads)


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
            text = blas_threads_ir(*_blas_threads_fns)
            # the light pipeline: hand-written SSA with nothing to vectorize (O3 took 24 ms of a first call)
            jitted = compile_ir(LIGHT_PIPELINE_MARK + text, entry="symgraph_blas_enter")
            exit_addr = jitted.engine.get_function_address("symgraph_blas_exit")
            llvm.add_symbol("symgraph_blas_enter", jitted.address)
            llvm.add_symbol("symgraph_blas_exit", exit_addr)
            _support = jitted
    return ("symgraph_blas_enter", "symgraph_blas_exit")
