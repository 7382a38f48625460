"""Compile a C++ source of this directory on first use and load it with ctypes.

``load("gmm")`` compiles ``bench/cpp/gmm.cpp`` with
``g++ -O3 -march=native -shared -fPIC`` (``$CXX`` overrides the compiler)
into a cache directory (``$SYMGRAPH_BENCH_CACHE``, else
``$XDG_CACHE_HOME/symgraph-bench/cpp``, else ``~/.cache/symgraph-bench/cpp``),
under a name keyed by a hash of the source, the command line and the
compiler's version, and returns the ``ctypes.CDLL``. Later calls, and later
processes, reuse the library. No compiler: `CompilerMissing`, an
``ImportError``, so the harness reports the peer as "missing" with the reason.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["FLAGS", "CompilerMissing", "CompileFailed", "compiler", "library_path", "load"]

SOURCE_DIR = Path(__file__).resolve().parent
#: the compile flags (single-threaded, double precision as written: no -ffast-math)
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-std=c++17")

_loaded: dict[str, ctypes.CDLL] = {}


class CompilerMissing(ImportError):
    """No C++ compiler was found (``$CXX`` or ``g++`` on ``PATH``)."""


class CompileFailed(RuntimeError):
    """The compiler rejected the source; the message holds its diagnostics."""


def compiler() -> str:
    """Path of the C++ compiler: ``$CXX`` or ``g++``.

    Raises:
        CompilerMissing: neither is on ``PATH``.
    """
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise CompilerMissing(f"no C++ compiler: {name!r} not found on PATH (set CXX)")
    return path


def _cache_dir() -> Path:
    if os.environ.get("SYMGRAPH_BENCH_CACHE"):
        return Path(os.environ["SYMGRAPH_BENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "symgraph-bench" / "cpp"


def library_path(name: str) -> tuple[Path, list[str]]:
    """Where ``<name>.cpp``'s library is cached, and the command that builds it.

    The file name carries a SHA-256 prefix of the source, the flags and the
    compiler's ``--version`` output, so an edited source or another compiler
    builds a new library.

    Raises:
        CompilerMissing: no compiler.
        FileNotFoundError: no ``bench/cpp/<name>.cpp``.
    """
    cxx = compiler()
    src = SOURCE_DIR / f"{name}.cpp"
    text = src.read_bytes()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(text + "\0".join((cxx, *FLAGS, version)).encode()).hexdigest()[:16]
    out = _cache_dir() / f"{name}-{key}.so"
    return out, [cxx, *FLAGS, str(src), "-o"]


def load(name: str) -> ctypes.CDLL:
    """Build ``bench/cpp/<name>.cpp`` if its cached library is absent, and load it.

    The library is written to a temporary file in the cache directory and
    renamed into place, so concurrent first uses never load a half-written file.

    Returns:
        The loaded ``ctypes.CDLL`` (the same object on later calls in a process).

    Raises:
        CompilerMissing: no compiler (an ImportError: the harness's "missing").
        CompileFailed: the compiler failed (its stderr in the message).
    """
    if name in _loaded:
        return _loaded[name]
    out, cmd = library_path(name)
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
        os.close(fd)
        try:
            proc = subprocess.run([*cmd, tmp], capture_output=True, text=True)
            if proc.returncode != 0:
                raise CompileFailed(f"{' '.join(cmd)} {tmp} failed ({proc.returncode}): {proc.stderr[-2000:]}")
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(out))
    _loaded[name] = lib
    return lib
