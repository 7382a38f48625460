"""Derivative checks against central finite differences (public, like jax.test_util).

`check_grads` compares forward mode (JVP) and reverse mode (VJP) with central
differences along random directions, checks their mutual consistency
<ȳ, J·v> = <Jᵀ·ȳ, v>, and recurses on the derivative functions for higher
orders. The inner-product form validates a whole Jacobian with one scalar per
direction (the approach of autograd's `check_vjp` and JAX's `check_grads`).
`check_vjp_jvp` checks only that identity, without finite differences, so its
tolerance can be tight.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .errors import DTypeError, SymgraphError
from .tracing import leaf_spec
from .transforms import jvp, vjp
from .tree import tree_flatten, tree_map

__all__ = ["check_grads", "check_vjp_jvp", "numerical_jvp", "GradientCheckError"]


class GradientCheckError(SymgraphError, AssertionError):
    """A derivative disagrees with finite differences or with the other mode."""


def _wide(x: Any) -> np.ndarray:
    """x in float64, or complex128 for a complex x."""
    a = np.asarray(x)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _leaves(t: Any) -> list[np.ndarray]:
    return [_wide(x) for x in tree_flatten(t)[0]]


def _vdot(a: Any, b: Any) -> float:
    """The real inner product Re(sum conj(a) b) over all leaves (the plain dot product for real leaves)."""
    return float(sum(np.real(np.vdot(x.ravel(), y.ravel())) for x, y in zip(_leaves(a), _leaves(b))))


def _conj(t: Any) -> Any:
    return tree_map(lambda x: np.conj(x) if np.iscomplexobj(x) else x, t)


def _axpy(alpha: float, x: Any, y: Any) -> Any:
    return tree_map(lambda xi, yi: np.asarray(yi + alpha * np.asarray(xi, dtype=np.asarray(yi).dtype), dtype=np.asarray(yi).dtype), x, y)


def numerical_jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any], eps: float) -> Any:
    """Central difference (f(x + eps v) - f(x - eps v)) / (2 eps), leaf-wise over f's output."""
    fp = f(*_axpy(eps, tuple(tangents), tuple(primals)))
    fm = f(*_axpy(-eps, tuple(tangents), tuple(primals)))
    return tree_map(lambda a, b: (_wide(a) - _wide(b)) / (2 * eps), fp, fm)


def _rand_like(t: Any, rng: np.random.Generator) -> Any:
    def one(x: Any) -> np.ndarray:
        d = np.asarray(x).dtype
        r = rng.standard_normal(np.shape(x))
        if d.kind == "c":
            r = r + 1j * rng.standard_normal(np.shape(x))  # directions in the real and the imaginary parts
        return np.asarray(r).astype(d)

    return tree_map(one, t)


def _close(a: float, b: float, atol: float, rtol: float) -> bool:
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def check_grads(f: Callable, args: Sequence[Any], order: int = 1, modes: Sequence[str] = ("fwd", "rev"),
                eps: float | None = None, atol: float | None = None, rtol: float | None = None, seed: int = 0) -> None:
    """Check f's derivatives to `order` against central finite differences.

    Args:
        f: function of float or complex arrays (or pytrees) returning arrays (or pytrees).
        args: tuple of arguments at which to check (float64 or complex128 recommended).
        order: 1 or more; order 2 checks the derivative functions too.
        modes: subset of ("fwd", "rev").
        eps: finite-difference step (default 1e-6 for float64, 1e-3 for float32: also when the arguments are
            float64 but an output is float32 or complex64, i.e. f computes in single precision).
        atol, rtol: tolerances on the directional derivatives (defaults by dtype).
        seed: random directions' seed.

    Raises:
        GradientCheckError: naming the mode, the order and both values.

    Complex arguments and outputs are checked under JAX's convention (docs/complex.md): directions
    have random real and imaginary parts, <u, t> = Re(sum conj(u) t), and the reverse-mode check
    pulls back conj(u), whose cotangent g pairs with the direction as Re(sum g v).

    References:
        Griewank & Walther, Evaluating Derivatives (2008), sec. 3.3 (the
        <ȳ, ẏ> = <x̄, ẋ> identity); autograd's check_vjp; JAX's check_grads.
    """
    args = tuple(args)
    for i, leaf in enumerate(tree_flatten(args)[0]):
        _, dt = leaf_spec(leaf, f"{i}")  # DTypeError for strings, objects, dates, ...
        if dt.kind not in "fc":
            raise DTypeError(f"check_grads: argument leaf {i} has dtype {dt}; derivatives are checked at float "
                             f"or complex arguments (float32, float64, complex64, complex128)")
    dtype = np.result_type(*[np.asarray(x).dtype for x in tree_flatten(args)[0]]) if tree_flatten(args)[0] else np.float64
    low = dtype in (np.float32, np.complex64)
    if not low and eps is None:  # a function that computes in single precision inside (x.astype(np.float32))
        outs = [np.asarray(o) for o in tree_flatten(f(*args))[0]]
        low = any(o.dtype in (np.float32, np.complex64) for o in outs)
    eps = eps if eps is not None else (1e-3 if low else 1e-6)
    atol = atol if atol is not None else (1e-2 if low else 1e-5)
    rtol = rtol if rtol is not None else (1e-2 if low else 1e-5)
    rng = np.random.default_rng(seed)
    v = _rand_like(args, rng)
    num = numerical_jvp(f, args, v, eps)
    u = _rand_like(num, rng)
    num_scalar = _vdot(u, num)
    fwd_scalar = rev_scalar = None
    if "fwd" in modes:
        _, t = jvp(f, args, v)
        fwd_scalar = _vdot(u, t)
        if not _close(fwd_scalar, num_scalar, atol, rtol):
            raise GradientCheckError(f"check_grads: forward mode (JVP) <u, J v> = {fwd_scalar!r} but central "
                                     f"differences give {num_scalar!r} (order {order} remaining)")
    if "rev" in modes:
        out, pullback = vjp(f, *args)
        ct = tree_map(lambda ui, oi: np.asarray(ui, dtype=np.asarray(oi).dtype), _conj(u), out)
        xbar = pullback(ct)
        rev_scalar = _vdot(_conj(xbar), v)
        if not _close(rev_scalar, num_scalar, atol, rtol):
            raise GradientCheckError(f"check_grads: reverse mode (VJP) <J^T u, v> = {rev_scalar!r} but central "
                                     f"differences give {num_scalar!r} (order {order} remaining)")
    if fwd_scalar is not None and rev_scalar is not None and not _close(fwd_scalar, rev_scalar, atol * 0.1, rtol * 0.1):
        raise GradientCheckError(f"check_grads: <u, J v> = {fwd_scalar!r} (JVP) differs from <J^T u, v> = "
                                 f"{rev_scalar!r} (VJP)")
    if order > 1:
        if "fwd" in modes:
            def f_jvp(*a: Any) -> Any:
                return jvp(f, a, v)[1]

            check_grads(f_jvp, args, order - 1, modes, eps, atol * 10, rtol * 10, seed + 1)
        if "rev" in modes:
            out0 = f(*args)
            ct0 = tree_map(lambda ui, oi: np.asarray(ui, dtype=np.asarray(oi).dtype), _conj(u), out0)

            def f_vjp(*a: Any) -> Any:
                return vjp(f, *a)[1](ct0)

            check_grads(f_vjp, args, order - 1, modes, eps, atol * 10, rtol * 10, seed + 2)



def check_vjp_jvp(f: Callable, args: Sequence[Any], rtol: float = 1e-10, seed: int = 0) -> tuple[float, float]:
    """Check that f's VJP and JVP agree: <u, J v> = <J^T u, v> for random u, v.

    No finite differences are involved, so the identity holds to rounding and
    the tolerance can be tight: it catches a VJP rule that is not the
    transpose of the JVP rule (or the reverse).

    Args:
        f: function of float arrays (or pytrees) returning arrays (or pytrees).
        args: tuple of arguments (float64 recommended).
        rtol: tolerance relative to max(1, |<u, J v>|, |<J^T u, v>|).
        seed: seed of the random directions.

    Returns:
        (<u, J v>, <J^T u, v>).

    Raises:
        GradientCheckError: the two inner products differ.

    References:
        Griewank & Walther, Evaluating Derivatives (2008), sec. 3.3; autograd's check_vjp.
    """
    args = tuple(args)
    rng = np.random.default_rng(seed)
    v = _rand_like(args, rng)
    out, t = jvp(f, args, v)
    u = _rand_like(out, rng)
    _, pullback = vjp(f, *args)
    xbar = pullback(_conj(u))  # complex values: JAX's convention, as in check_grads
    lhs, rhs = _vdot(u, t), _vdot(_conj(xbar), v)
    if abs(lhs - rhs) > rtol * max(1.0, abs(lhs), abs(rhs)):
        raise GradientCheckError(f"check_vjp_jvp: <u, J v> = {lhs!r} (JVP) but <J^T u, v> = {rhs!r} (VJP)")
    return lhs, rhs
