"""Shared pieces of the field's benchmark problems (W8–W12, GradBench / ADBench specifications).

- `rho` / `rho_compare`: ADBench's relative error measure
  ρ(x, y) = |x − y| / max(1, |x| + |y|) (Srajer, Kukelova & Fitzgibbon 2018,
  section 5), the check every W8–W12 result passes before it is timed.
- `central_difference`: a float64 central finite difference of a scalar
  function at chosen coordinates (to validate the hand-written gradients).
- System factories that turn "a function of the case's inputs" into a
  harness `System` for symgraph (``sg.compile``), JAX (``jax.jit``, every call
  ends with ``block_until_ready``), autograd, PyTorch eager and hand-written
  NumPy, and hand-written C++ (`cpp_system`: a ``bench/cpp`` source compiled on
  first use, called through ctypes). Each factory takes ``make(...)`` returning the function to run, so a
  workload says once what it computes and each peer builds it its own way.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from .common import import_jax, import_symgraph, import_torch, jax_block
from .harness import System, flatten, to_numpy

__all__ = ["RHO_TOL", "rho", "rho_compare", "central_difference", "symgraph_system", "jax_system",
           "autograd_system", "torch_system", "numpy_system", "cpp_system", "CPP_NAME"]

#: the row name of the hand-written C++ peers
CPP_NAME = "C++ (hand-written)"

#: the check's bound on ρ
RHO_TOL = 1e-8


def rho(x: Any, y: Any) -> np.ndarray:
    """ADBench's elementwise relative error ``|x − y| / max(1, |x| + |y|)`` (float64)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return np.abs(x - y) / np.maximum(1.0, np.abs(x) + np.abs(y))


def rho_compare(out: Any, ref: Any, tol: float = RHO_TOL) -> tuple[bool, str, float, float]:
    """Compare a result pytree with the reference leaf by leaf with ρ < `tol`.

    Returns:
        (ok, message, max_abs_err, max_rho) in the form `harness.run_case`'s
        ``check`` expects. A NaN anywhere fails.
    """
    a, b = flatten(to_numpy(out)), flatten(ref)
    if len(a) != len(b):
        return False, f"{len(a)} output leaves, expected {len(b)}", math.inf, math.inf
    max_abs = max_rho = 0.0
    bad = []
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.size == 1 and y.size == 1:
            x, y = x.reshape(()), y.reshape(())
        if x.shape != y.shape:
            bad.append(f"leaf {i}: shape {x.shape}, expected {y.shape}")
            max_abs = max_rho = math.inf
            continue
        if x.size == 0:
            continue
        r = rho(x, y)
        r = np.where(np.isnan(r), np.inf, r)
        ea, er = float(np.nanmax(np.abs(x - y))) if np.isfinite(r).all() else math.inf, float(r.max())
        max_abs, max_rho = max(max_abs, ea), max(max_rho, er)
        if not er < tol:
            bad.append(f"leaf {i} {y.shape}: max rho {er:.3g} (bound {tol:g})")
    if bad:
        return False, "; ".join(bad[:4]) + (" ..." if len(bad) > 4 else ""), max_abs, max_rho
    return True, "", max_abs, max_rho


def central_difference(f: Callable[[np.ndarray], float], x: np.ndarray, index: tuple, h: float = 1e-5) -> float:
    """``(f(x + h e_i) − f(x − h e_i)) / 2h`` for the coordinate `index` of `x` (float64)."""
    xp, xm = x.copy(), x.copy()
    xp[index] += h
    xm[index] -= h
    return (float(f(xp)) - float(f(xm))) / (2 * h)


# --------------------------------------------------------------------------- system factories
# make(...) returns a function of the case's positional inputs (all NumPy arrays).

def symgraph_system(make: Callable[[Any], Callable], name: str = "symgraph", backend: str = "llvm",
                    note: str = "") -> System:
    """``sg.compile(make(sg), backend=backend)`` called on the inputs."""
    def prepare(*inputs):
        sg, _ = import_symgraph()

        def build():
            cf = sg.compile(make(sg), backend=backend)
            return lambda: cf(*inputs)
        return build
    return System(name, prepare, peer=False, note=note)


def jax_system(make: Callable[[Any, Any], Callable], name: str = "jax", note: str = "") -> System:
    """``jax.jit(make(jax, jnp))`` on device arrays; every call blocks until the result is computed."""
    def prepare(*inputs):
        jax, jnp = import_jax()
        ins = [jax.device_put(v) for v in inputs]

        def build():
            fn = jax.jit(make(jax, jnp))
            return lambda: jax_block(fn(*ins))
        return build
    return System(name, prepare, note=note or "jax.jit; each call ends with block_until_ready")


def autograd_system(make: Callable[[Any, Any], Callable], name: str = "autograd", note: str = "") -> System:
    """``make(autograd, autograd.numpy)`` called on the NumPy inputs."""
    def prepare(*inputs):
        import autograd
        import autograd.numpy as anp

        def build():
            fn = make(autograd, anp)
            return lambda: fn(*inputs)
        return build
    return System(name, prepare, note=note)


def torch_system(make: Callable[[Any], Callable], name: str = "torch", note: str = "") -> System:
    """``make(torch)`` called on float64 CPU tensors (``torch.from_numpy``), eager."""
    def prepare(*inputs):
        torch = import_torch()
        ins = [torch.from_numpy(np.ascontiguousarray(v)) for v in inputs]

        def build():
            fn = make(torch)
            return lambda: fn(*ins)
        return build
    return System(name, prepare, note=note or "eager, torch.autograd.grad")


def numpy_system(fn: Callable, name: str = "numpy", note: str = "hand-written derivative") -> System:
    """The hand-written NumPy function itself."""
    def prepare(*inputs):
        return lambda: (lambda: fn(*inputs))
    return System(name, prepare, note=note)


def cpp_system(source: str, make: Callable[[Any], Callable], name: str = CPP_NAME, note: str = "") -> System:
    """Hand-written C++: ``make(lib)`` on the library that ``bench/cpp/<source>.cpp`` compiles to.

    ``prepare`` only looks for the compiler (none: ``CompilerMissing``, an
    ImportError, so the row is "missing" with the reason); the compile (or the
    cache hit) is part of the timed first call, as a JIT's compile is.
    """
    def prepare(*inputs):
        from .cpp.build import compiler
        compiler()

        def build():
            from .cpp.build import load
            fn = make(load(source))
            return lambda: fn(*inputs)
        return build
    return System(name, prepare, note=note)
