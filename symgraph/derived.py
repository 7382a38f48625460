"""Derived transformations, as autograd and JAX users know them, built from grad, jvp and vjp.

`elementwise_grad` (autograd's `deriv`), `grad_named`, `make_vjp`,
`make_jvp`, `linearize` (JAX), `vector_jacobian_product` /
`tensor_jacobian_product`, `hessian_tensor_product` (autograd's
`hessian_vector_product`), `make_hvp` and `make_ggnvp` (the generalized
Gauss-Newton product of Schraudolph 2002, "Fast curvature matrix-vector
products for second-order gradient descent"). Each is a few lines over the
transformations of `symgraph.transforms`, so each composes with them, traces
inside a trace, and compiles.

`argnum` is one positional argument index, as in autograd.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from . import numpy as snp
from .errors import SymgraphError
from .transforms import grad, jvp, vjp
from .tree import tree_map

__all__ = ["elementwise_grad", "deriv", "grad_named", "make_vjp", "make_jvp", "linearize",
           "vector_jacobian_product", "tensor_jacobian_product", "hessian_tensor_product",
           "hessian_vector_product", "make_hvp", "make_ggnvp"]


def _name(f: Callable) -> str:
    return getattr(f, "__name__", "f")


def _check_argnum(argnum: Any, args: tuple, fname: str) -> int:
    if isinstance(argnum, bool) or not isinstance(argnum, int):
        raise SymgraphError(f"{fname}: argnum must be one integer position, got {argnum!r}")
    if not -len(args) <= argnum < len(args):
        raise SymgraphError(f"{fname}: argnum={argnum} but the function was called with {len(args)} positional "
                            f"argument(s)")
    return argnum % len(args)


def _of_one(f: Callable, args: tuple, argnum: int) -> Callable:
    """f as a function of its argument `argnum` alone (the others fixed)."""

    def g(x: Any) -> Any:
        full = list(args)
        full[argnum] = x
        return f(*full)

    g.__name__ = _name(f)
    return g


def elementwise_grad(f: Callable, argnum: int = 0) -> Callable:
    """The gradient of sum(f(x)): for an elementwise f, the derivative of each output by its own input.

    Args:
        f: a function of arrays; its output may have any shape.
        argnum: the positional argument to differentiate.

    Returns:
        A function of f's arguments returning an array shaped like argument `argnum`
        (the vector-Jacobian product with a cotangent of ones, as autograd's `elementwise_grad`).

    Raises:
        SymgraphError: a bad `argnum`; the errors of `vjp`.
    """

    def eg(*args: Any) -> Any:
        i = _check_argnum(argnum, args, f"elementwise_grad({_name(f)})")
        out, pullback = vjp(_of_one(f, args, i), args[i])
        return pullback(tree_map(snp.ones_like, out))[0]

    eg.__name__ = f"elementwise_grad({_name(f)})"
    return eg


deriv = elementwise_grad


def grad_named(f: Callable, argname: str) -> Callable:
    """The gradient of scalar f with respect to the argument called `argname` (positional or keyword).

    Raises:
        SymgraphError: f has no parameter `argname`, or the call does not pass it.
    """
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        raise SymgraphError(f"grad_named({_name(f)}): the function's signature cannot be read") from None
    if argname not in sig.parameters:
        raise SymgraphError(f"grad_named({_name(f)}): no parameter named {argname!r} (parameters: "
                            f"{', '.join(sig.parameters)})")

    def gn(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        if argname not in bound.arguments:
            raise SymgraphError(f"grad_named({_name(f)}): the call does not pass {argname!r}")
        rest = {k: v for k, v in bound.arguments.items() if k != argname}

        def of_named(x: Any) -> Any:
            b = sig.bind_partial(**rest, **{argname: x})
            return f(*b.args, **b.kwargs)

        of_named.__name__ = _name(f)
        return grad(of_named)(bound.arguments[argname])

    gn.__name__ = f"grad_named({_name(f)}, {argname!r})"
    return gn


def make_vjp(f: Callable, argnum: int = 0) -> Callable:
    """autograd's `make_vjp`: make_vjp(f)(*args) -> (pullback, f(*args)).

    pullback(cotangent) returns the cotangent of argument `argnum` alone (not a tuple), shaped like it.
    """

    def mv(*args: Any) -> tuple[Callable, Any]:
        i = _check_argnum(argnum, args, f"make_vjp({_name(f)})")
        out, pullback = vjp(_of_one(f, args, i), args[i])
        return (lambda ct: pullback(ct)[0]), out

    return mv


def make_jvp(f: Callable, argnum: int = 0) -> Callable:
    """autograd's `make_jvp`: make_jvp(f)(*args)(tangent) -> (f(*args), J @ tangent)."""

    def mj(*args: Any) -> Callable:
        i = _check_argnum(argnum, args, f"make_jvp({_name(f)})")
        g = _of_one(f, args, i)
        return lambda tangent: jvp(g, (args[i],), (tangent,))

    return mj


def linearize(f: Callable, *primals: Any) -> tuple[Any, Callable]:
    """JAX's `linearize`: (f(*primals), f_jvp) with f_jvp(*tangents) = J @ tangents.

    Each call of f_jvp runs forward mode at the primals (JAX stores the
    linearized graph instead; the values are the same).
    """
    out = f(*primals)

    def f_jvp(*tangents: Any) -> Any:
        return jvp(f, primals, tangents)[1]

    return out, f_jvp


def vector_jacobian_product(f: Callable, argnum: int = 0) -> Callable:
    """vjp(f)(*args, v) = v^T J: the cotangent of argument `argnum` for output cotangent v (shaped like f's output)."""

    def vjp_fn(*args_and_v: Any) -> Any:
        *args, v = args_and_v
        return make_vjp(f, argnum)(*args)[0](v)

    return vjp_fn


tensor_jacobian_product = vector_jacobian_product


def hessian_tensor_product(f: Callable, argnum: int = 0) -> Callable:
    """htp(f)(*args, v) = H @ v for scalar f, v shaped like argument `argnum` (forward over reverse)."""

    def htp(*args_and_v: Any) -> Any:
        *args, v = args_and_v
        i = _check_argnum(argnum, tuple(args), f"hessian_tensor_product({_name(f)})")
        return jvp(grad(_of_one(f, tuple(args), i)), (args[i],), (v,))[1]

    return htp


hessian_vector_product = hessian_tensor_product


def make_hvp(f: Callable, argnum: int = 0) -> Callable:
    """autograd's `make_hvp`: make_hvp(f)(*args) -> (hvp_fn, grad f(*args)) with hvp_fn(v) = H @ v."""

    def mh(*args: Any) -> tuple[Callable, Any]:
        i = _check_argnum(argnum, args, f"make_hvp({_name(f)})")
        return make_vjp(grad(_of_one(f, args, i)))(args[i])

    return mh


def _half_squared_norm(y: Any) -> Any:
    return 0.5 * snp.sum(y * y, axis=-1)


def make_ggnvp(f: Callable, g: Callable = _half_squared_norm, f_argnum: int = 0) -> Callable:
    """The generalized Gauss-Newton product J^T H_g J v of g(f(x)) (Schraudolph 2002).

    make_ggnvp(f, g)(*args) returns ggnvp(v) for v shaped like f's argument `f_argnum`; J is f's Jacobian
    there and H_g the Hessian of the scalar g at f(*args) (by default 0.5 * sum(y**2, axis=-1), whose
    Hessian is the identity).
    """

    def mg(*args: Any) -> Callable:
        i = _check_argnum(f_argnum, args, f"make_ggnvp({_name(f)})")
        fx = _of_one(f, args, i)

        def ggnvp(v: Any) -> Any:
            y, jv = jvp(fx, (args[i],), (v,))
            hjv = jvp(grad(lambda z: snp.sum(g(z))), (y,), (jv,))[1]
            return vjp(fx, args[i])[1](hjv)[0]

        return ggnvp

    return mg
