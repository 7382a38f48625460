"""Facts about the machine and the software that a benchmark report must carry."""

from __future__ import annotations

import importlib
import os
import platform
import sys
from typing import Any

__all__ = ["machine_info", "format_machine", "load_average", "PACKAGES"]

PACKAGES = ("numpy", "llvmlite", "jax", "jaxlib", "torch", "pytensor", "numba", "autograd",
            "scipy", "threadpoolctl", "sklearn", "matplotlib", "symgraph")

SIMD_PREFIXES = ("avx2", "avx512", "fma", "sse4_2", "avx")


def _cpuinfo() -> tuple[str, list[str]]:
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine(), platform.processor()):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    simd = sorted(f for f in flags if f.startswith(SIMD_PREFIXES))
    return model, simd


def _version(name: str) -> str:
    try:
        from importlib import metadata
        dist = {"sklearn": "scikit-learn"}.get(name, name)
        return metadata.version(dist)
    except Exception:                                            # noqa: BLE001
        pass
    try:
        mod = importlib.import_module(name)
        return str(getattr(mod, "__version__", "installed (no __version__)"))
    except Exception as e:                                       # noqa: BLE001
        return f"missing ({type(e).__name__}: {e})"


def _blas() -> list[dict]:
    import numpy  # noqa: F401  (load numpy's BLAS so that threadpoolctl sees it)
    try:
        from threadpoolctl import threadpool_info
    except ImportError as e:
        return [{"error": f"threadpoolctl missing: {e}"}]
    keep = ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer", "architecture")
    return [{k: d.get(k) for k in keep if k in d} for d in threadpool_info()]


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (other processes compete for the cores), or None."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    """Collect CPU, core count, package versions, BLAS and thread settings.

    Returns:
        A JSON-ready dictionary: ``cpu`` (model string), ``simd`` (CPU flags
        starting with avx/avx2/avx512/fma/sse4_2), ``cores`` (os.cpu_count),
        ``affinity`` (usable cores), ``python``, ``platform``, ``versions``
        (package -> version or "missing (...)"), ``blas`` (threadpoolctl
        pools: library, version, architecture (the OpenBLAS kernel), threads),
        ``env`` (thread-related environment variables), ``loadavg`` and
        ``openblas_env_removed`` (what ``python -m bench`` unset).
    """
    model, simd = _cpuinfo()
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    env_keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
                "SYMGRAPH_NUM_THREADS", "SYMGRAPH_BLAS_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "XLA_FLAGS",
                "JAX_PLATFORMS")
    return {
        "cpu": model,
        "simd": simd,
        "cores": os.cpu_count(),
        "affinity": affinity,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": {p: _version(p) for p in PACKAGES},
        "blas": _blas(),
        "env": {k: os.environ[k] for k in env_keys if k in os.environ},
        "loadavg": load_average(),
        "openblas_env_removed": os.environ.get("BENCH_OPENBLAS_REMOVED", ""),
    }


def format_machine(info: dict[str, Any]) -> str:
    """Render `machine_info()` as a few text lines."""
    v = info["versions"]
    short = lambda s: s if not s.startswith("missing") else "missing"  # noqa: E731
    lines = [
        f"CPU: {info['cpu']}; cores: {info['cores']} (usable {info['affinity']}); "
        f"Python {info['python']}; {info['platform']}",
        "SIMD: " + (" ".join(f for f in info["simd"] if f.startswith(("avx2", "avx512", "fma"))) or "-"),
        "versions: " + ", ".join(f"{k} {short(v[k])}" for k in v),
    ]
    for b in info["blas"]:
        if "error" in b:
            lines.append(f"BLAS: {b['error']}")
        else:
            lines.append(f"threads: {b.get('internal_api')} {b.get('version') or ''} "
                         f"({b.get('prefix')}) num_threads={b.get('num_threads')}"
                         + (f" architecture={b['architecture']}" if b.get("architecture") else "")
                         + (f" layer={b['threading_layer']}" if b.get("threading_layer") else ""))
    if info.get("loadavg"):
        lines.append(f"load average at start (1/5/15 min): {info['loadavg']} on {info['cores']} cores")
    env = info.get("env") or {}
    lines.append("env: " + (" ".join(f"{k}={val}" for k, val in env.items()) or "(no thread variables set)")
                 + ("; removed for this run: " + info["openblas_env_removed"] if info.get("openblas_env_removed")
                    else "; OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE not set"))
    return "\n".join(lines)
