"""Helpers shared by the workload modules: importing peers, blocking, node counts."""

from __future__ import annotations

import os
from typing import Any

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
               "SYMGRAPH_NUM_THREADS", "SYMGRAPH_BLAS_THREADS")


def set_thread_env(threads: int | None) -> None:
    """Pin BLAS/OpenMP/Numba/XLA/symgraph thread counts through the environment.

    Must run before any of those libraries is imported (they read the variables
    once). With threads == 1, XLA's CPU client is also made single-threaded and the
    process (with the child processes it starts) is pinned to one CPU.
    Always selects JAX's CPU platform.
    """
    if threads:
        n = str(threads)
        for var in THREAD_VARS:
            os.environ[var] = n
        if threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
            # XLA's CPU client (jax 0.10) keeps a thread pool of its own that these flags do not size:
            # measured here, a jitted matmul chain used 1.9 CPU-seconds per second. Pinning the process
            # (and the fresh child processes, which inherit it) to one CPU makes "one thread" true for
            # every system.
            if hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

__all__ = ["import_jax", "import_torch", "import_symgraph", "jax_block", "jaxpr_eqn_count",
           "pytensor_node_counts", "tree_sub"]


def import_jax():
    """Import JAX with float64 enabled (our float64 workloads need it).

    Returns:
        (jax, jax.numpy).

    Raises:
        ImportError: JAX is not installed.
    """
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def import_torch():
    """Import torch (CPU) or raise ImportError."""
    import torch
    return torch


def import_symgraph():
    """Import symgraph and its NumPy-like namespace.

    Returns:
        (symgraph, symgraph.numpy).
    """
    import symgraph as sg
    import symgraph.numpy as snp
    return sg, snp


def jax_block(x: Any) -> Any:
    """Block until every JAX array in pytree `x` is computed; returns `x`."""
    import jax
    return jax.block_until_ready(x)


def jaxpr_eqn_count(closed_jaxpr: Any) -> int:
    """Number of equations of a jaxpr, counting those of sub-jaxprs (pjit, custom_jvp, ...) too.

    A call-like equation with sub-jaxprs counts as its sub-jaxprs' equations,
    not as one more.
    """
    def count(jaxpr) -> int:
        n = 0
        for eqn in jaxpr.eqns:
            subs = []
            for v in eqn.params.values():
                for item in (v if isinstance(v, (tuple, list)) else (v,)):
                    j = getattr(item, "jaxpr", None)
                    if j is not None and hasattr(j, "eqns"):
                        subs.append(j)
                    elif hasattr(item, "eqns"):
                        subs.append(item)
            n += sum(count(s) for s in subs) if subs else 1
        return n
    return count(getattr(closed_jaxpr, "jaxpr", closed_jaxpr))


def pytensor_node_counts(fn: Any) -> tuple[int, int]:
    """Apply nodes of a compiled PyTensor function after rewrites.

    Returns:
        (apply_nodes, scalar_nodes): the number of apply nodes of the
        function's graph, and the same count with every fused ``Composite``
        elementwise node replaced by the number of scalar ops inside it.
    """
    fg = fn.maker.fgraph
    apply_nodes = len(fg.apply_nodes)
    scalar = 0
    for node in fg.apply_nodes:
        sop = getattr(node.op, "scalar_op", None)
        inner = getattr(sop, "fgraph", None)
        scalar += len(inner.apply_nodes) if inner is not None else 1
    return apply_nodes, scalar


def tree_sub(params: dict, grads: dict, lr: float) -> dict:
    """``{k: params[k] - lr * grads[k]}`` (SGD update on a flat dict of arrays)."""
    return {k: params[k] - lr * grads[k] for k in params}
