"""User-facing transformations: grad, value_and_grad, vjp, jvp, jacobian, hessian, hvp.

Each is a thin layer over tracing and the two differentiation passes. Called
on traced values (inside `trace`, `compile` or another transformation) they
build the derivative nodes inline in the current graph, so transformations
nest: `grad(grad(f))` differentiates the graph `grad(f)` built. Called on
concrete arrays they trace, differentiate, simplify and run the NumPy
evaluator, returning NumPy arrays (float64 in, float64 out; float32 in,
float32 out).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import lax as L
from . import numpy as snp
from .autodiff import fresh, is_float, jvp_nodes, placeholder, vjp_nodes
from .batching import batch_nodes, identity_basis
from .eager import run as _run
from .errors import DTypeError, NonScalarOutputError, ShapeError, SymgraphError
from .ir import Node, tracing_active
from .lax import as_output
from .rolling import roll_traced
from .tracing import arg_leaf_names, check_args, leaf_problem, leaf_spec
from .tree import tree_flatten, tree_map, tree_paths, tree_unflatten

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "jacfwd", "jacrev", "hessian", "hvp", "stop_gradient",
           "reducing_gradients"]


def _build_inline(tree: Any) -> bool:
    """Whether a transformation builds into the graph being traced instead of tracing its own.

    True when an argument is traced, and also whenever a trace is active: the
    function may close over the outer trace's values
    (``x * sg.grad(lambda y: x * y)(2.0)``), which a separate graph could not
    read. Inside a trace the result is then a traced value, as in JAX.
    """
    return tracing_active() or any(isinstance(x, Node) for x in tree_flatten(tree)[0])


def _normalize_argnums(argnums: int | Sequence[int], nargs: int, fname: str) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, (int, np.integer)) and not isinstance(argnums, (bool, np.bool_))
    try:
        nums = (int(argnums),) if single else tuple(argnums)
    except TypeError:
        nums = (argnums,)
    if not nums or not all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in nums):
        raise SymgraphError(f"{fname}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    nums = tuple(int(a) for a in nums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise SymgraphError(f"{fname}: argnums {a} is out of range for {nargs} positional arguments")
    return tuple(a % nargs for a in nums), single



def _holds_array(x: Any) -> bool:
    """Whether a pytree argument has a NumPy array leaf (of at least one dimension)."""
    return any(isinstance(leaf, np.ndarray) and leaf.ndim > 0 for leaf in tree_flatten(x)[0])


def _close_static(f: Callable, args: tuple, kwargs: dict, nums: tuple[int, ...], fname: str,
                  positional: bool = True) -> tuple[Callable, tuple, tuple[int, ...], Callable | None]:
    """Close f over its keyword arguments and its non-differentiated positional arguments.

    As in JAX's and autograd's `grad`, the keyword arguments and the positional ones outside `argnums`
    reach f unchanged (a type, a string, a callable, a number or bool that f branches on or sizes with), as
    constants of the trace; positional NumPy arrays outside `argnums` are traced as before (not
    differentiated), so that f may index them with traced integers.

    Inside a trace (`positional=False`) the positional arguments stay as they are (they are traced values
    already, and gradient names keep their argument numbers); only keyword arguments are closed over.

    Returns:
        (f taking the remaining positional arguments, those arguments, argnums renumbered for them,
        the user's function for naming arguments in errors, or None when positions moved).
    """
    # NumPy arrays stay traced (as constants of the trace): user code indexes them with traced integers
    # (xs[k] in a loop body), which a plain ndarray cannot take
    static = [i for i in range(len(args)) if i not in nums and not _holds_array(args[i])] if positional else []
    if not static and not kwargs:
        return f, args, nums, f
    keep = [i for i in range(len(args)) if i not in static]
    if static:
        check_args(tuple(args[i] for i in keep), f, fname, positions=keep)

    @functools.wraps(f)
    def closed(*a: Any) -> Any:
        full = list(args)
        for i, x in zip(keep, a):
            full[i] = x
        return f(*full, **kwargs)

    return closed, tuple(args[i] for i in keep), tuple(keep.index(n) for n in nums), (f if not static else None)


def _wrt_leaves(args: tuple, nums: tuple[int, ...], fname: str,
                holomorphic: bool = False) -> tuple[list, list[list[Node]], list[Any]]:
    """Replace the differentiated arguments' leaves by fresh nodes.

    Returns:
        (new_args, fresh leaves per argnum, treedefs per argnum).
    """
    new_args = list(args)
    leaves_per, trees = [], []
    for a in nums:
        leaves, td = tree_flatten(args[a])
        fl = []
        for j, x in enumerate(leaves):
            node = L.asnode(x) if not isinstance(x, Node) else x
            if not is_float(node):
                where = f"argument {a}" + (f" leaf {j}" if len(leaves) > 1 else "")
                raise DTypeError(f"{fname}: {where} has dtype {node.dtype}; derivatives need float or complex "
                                 f"inputs (cast with .astype(np.float64), or leave it out of argnums)")
            if holomorphic and node.dtype.kind != "c":
                where = f"argument {a}" + (f" leaf {j}" if len(leaves) > 1 else "")
                raise DTypeError(f"{fname}: holomorphic=True needs complex inputs, but {where} has dtype "
                                 f"{node.dtype} (cast it with .astype(np.complex128))")
            fl.append(fresh(node))
        new_args[a] = tree_unflatten(td, fl)
        leaves_per.append(fl)
        trees.append(td)
    return new_args, leaves_per, trees


def _scalar_output(out: Any, fname: str, holomorphic: bool = False) -> Node:
    what = fname.partition("(")[0]  # grad, value_and_grad, hessian, hvp
    leaves, _ = tree_flatten(out)
    if len(leaves) != 1:
        raise NonScalarOutputError(f"{fname}: the function returned {len(leaves)} arrays; {what} needs a single "
                                   f"scalar output (use has_aux=True for auxiliary outputs, or jacobian/vjp)")
    o = as_output(leaves[0], 0)
    if o.size == 1 and o.shape != ():
        o = L.reshape(o, ())  # one element of shape (1,) or (1, 1): a scalar, as autograd takes it
    if o.shape != ():
        raise NonScalarOutputError(f"{fname}: the function output has shape {o.shape}; {what} needs a scalar output "
                                   f"(reduce it with sum/mean, or use sg.jacobian or sg.vjp)")
    if not is_float(o):
        raise DTypeError(f"{fname}: the function output has dtype {o.dtype}; {what} needs a float output")
    if o.dtype.kind == "c" and not holomorphic:
        raise DTypeError(f"{fname}: the function output has dtype {o.dtype}; {what} needs a real (float) output. "
                         f"For a holomorphic function pass holomorphic=True; for other functions with complex "
                         f"outputs use sg.vjp (or differentiate the real part, np.real(f(z))): docs/complex.md")
    if holomorphic and o.dtype.kind != "c":
        raise DTypeError(f"{fname}: holomorphic=True needs a complex output, but the output has dtype {o.dtype}")
    return o


class _GradReduction(threading.local):
    def __init__(self) -> None:
        self.reducer: Callable[[list, list], list] | None = None
        self.depth = 0  # grad/value_and_grad calls being built (nested ones are not reduced)


_GRAD_REDUCTION = _GradReduction()


@contextlib.contextmanager
def reducing_gradients(reducer: Callable[[list, list], list]) -> Iterator[None]:
    """While active in this thread, gradients built by `grad`/`value_and_grad` go through `reducer`.

    Only the outermost gradient call of the block is reduced (a `grad` inside
    the differentiated function, as in a Hessian, is not). `sg.compile(...,
    data_parallel=...)` uses this to average gradients across processes
    (`symgraph.distributed`).

    Args:
        reducer: (gradient leaf nodes, their names such as "argument 0['w']") -> nodes of the
            same shapes and dtypes.
    """
    prev, prev_depth = _GRAD_REDUCTION.reducer, _GRAD_REDUCTION.depth
    _GRAD_REDUCTION.reducer, _GRAD_REDUCTION.depth = reducer, 0
    try:
        yield
    finally:
        _GRAD_REDUCTION.reducer, _GRAD_REDUCTION.depth = prev, prev_depth


def _value_and_grad_inline(f: Callable, args: tuple, nums: tuple[int, ...], single: bool, has_aux: bool, fname: str,
                           holomorphic: bool = False):
    st = _GRAD_REDUCTION
    depth = st.depth
    st.depth = depth + 1
    try:
        out = _value_and_grad_body(f, args, nums, single, has_aux, fname, st.reducer if depth == 0 else None,
                                   holomorphic)
    finally:
        st.depth = depth
    return out


def _value_and_grad_body(f: Callable, args: tuple, nums: tuple[int, ...], single: bool, has_aux: bool, fname: str,
                         reducer: Callable[[list, list], list] | None, holomorphic: bool = False):
    new_args, fl, trees = _wrt_leaves(args, nums, fname, holomorphic)
    res = f(*new_args)
    aux = None
    if has_aux:
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise SymgraphError(f"{fname}: has_aux=True needs the function to return a pair (output, aux)")
        res, aux = res
    scalar = _scalar_output(res, fname, holomorphic)
    out = as_output(tree_flatten(res)[0][0], 0)  # the value as the function returned it ((1,) stays (1,))
    if has_aux:  # under sg.compile(roll=True): Python loops of the primal become scan loops before reverse mode
        aux_l, aux_t = tree_flatten(aux)
        rolled = roll_traced([scalar, out] + [x for x in aux_l if isinstance(x, Node)])
        scalar, out, it_aux = rolled[0], rolled[1], iter(rolled[2:])
        aux = tree_unflatten(aux_t, [next(it_aux) if isinstance(x, Node) else x for x in aux_l])
    else:
        scalar, out = roll_traced([scalar, out])
    flat_wrt = [x for leaves in fl for x in leaves]
    cts = vjp_nodes([scalar], [L.full_like(scalar, 1.0)], flat_wrt)
    flat_g = [L.zeros_like(w) if c is None else c for w, c in zip(flat_wrt, cts)]
    if reducer is not None:
        names = [f"argument {a}{p}" for a, td in zip(nums, trees) for p in tree_paths(td)]
        flat_g = reducer(flat_g, names)
    it = iter(flat_g)
    grads = tuple(tree_unflatten(td, [next(it) for _ in leaves]) for td, leaves in zip(trees, fl))
    g = grads[0] if single else grads
    return ((out, aux), g) if has_aux else (out, g)


def value_and_grad(f: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """Return a function computing f's value and its gradient.

    Args:
        f: a function whose output is a float scalar (0-d). Also usable as a decorator.
        argnums: which positional argument(s) to differentiate (int or tuple).
        has_aux: f returns (output, aux); aux is returned alongside, not differentiated.
        holomorphic: f is holomorphic (complex inputs and output): the gradient is f'(z), as in JAX.

    Returns:
        A function returning (value, grad); grad has the structure of the
        differentiated argument (a tuple of them when argnums is a tuple).

    Raises:
        NonScalarOutputError: f's output is not a scalar.
        DTypeError: a differentiated argument is an integer or bool array; a complex output without
            holomorphic=True; holomorphic=True with a real input or output.
    """
    if f is None:
        return functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)
    fname = f"value_and_grad({getattr(f, '__name__', 'f')})"

    @functools.wraps(f)
    def vg(*args: Any, **kwargs: Any) -> Any:
        nums, single = _normalize_argnums(argnums, len(args), fname)
        fc, args, nums, user = _close_static(f, args, kwargs, nums, fname, positional=not _build_inline(args))
        if _build_inline(args):
            return _value_and_grad_inline(fc, args, nums, single, has_aux, fname, holomorphic)
        return _run(lambda *a: _value_and_grad_inline(fc, a, nums, single, has_aux, fname, holomorphic), args, fname,
                    user_fn=user)

    return vg


def grad(f: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable:
    """Return a function computing the gradient of scalar-valued f.

    Usable as `sg.grad(f)`, `@sg.grad` or `@sg.grad(argnums=1)`.

    Args:
        f: function of arrays (or pytrees) returning a float scalar.
        argnums: int or tuple of ints: positional arguments to differentiate.
        has_aux: f returns (output, aux); the gradient function returns (grad, aux).
        holomorphic: f is holomorphic, C -> C (complex inputs and output): the gradient is the
            complex derivative f'(z), as `jax.grad(f, holomorphic=True)`. Without it, a complex
            input of a real-valued f gets JAX's gradient df/dx - i df/dy (z = x + iy;
            docs/complex.md), and a complex output is refused.

    Returns:
        A function with f's signature returning the gradient, with the
        structure, shape and dtype of the differentiated argument(s).

    Raises:
        NonScalarOutputError: f's output is not a scalar (names the shape).
        DTypeError: differentiating with respect to an integer or bool argument; a complex
            output without holomorphic=True; holomorphic=True with a real input or output.
    """
    if f is None:
        return functools.partial(grad, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)
    return _grad(f, argnums, has_aux, f"grad({getattr(f, '__name__', 'f')})", holomorphic)


def _grad(f: Callable, argnums: int | Sequence[int], has_aux: bool, fname: str, holomorphic: bool = False) -> Callable:
    """`grad(f)` whose error messages name `fname` (hessian and hvp are built on it)."""

    @functools.wraps(f)
    def g(*args: Any, **kwargs: Any) -> Any:
        nums, single = _normalize_argnums(argnums, len(args), fname)
        fc, args, nums, user = _close_static(f, args, kwargs, nums, fname, positional=not _build_inline(args))
        if _build_inline(args):
            (v, gr) = _value_and_grad_inline(fc, args, nums, single, has_aux, fname, holomorphic)
            return (gr, v[1]) if has_aux else gr

        def inner(*a: Any) -> Any:
            v, gr = _value_and_grad_inline(fc, a, nums, single, has_aux, fname, holomorphic)
            return (gr, v[1]) if has_aux else gr

        return _run(inner, args, fname, user_fn=user)

    return g


def _check_tangents(f: Callable, primals: tuple, tangents: tuple, fname: str) -> tuple[list, list, Any]:
    """Tangents must match their primals in structure, shape and dtype (as in JAX).

    A Python float tangent is accepted for a float32 or float64 primal (it takes the primal's dtype).
    """
    pl, ptree = tree_flatten(tuple(primals))
    tl, ttree = tree_flatten(tuple(tangents))
    if ptree != ttree:
        raise ShapeError(f"{fname}: tangents have structure {ttree}, primals have {ptree}")
    names = None
    for i, (p, t) in enumerate(zip(pl, tl)):
        if isinstance(p, Node):
            ps, pd = p.shape, p.dtype
        else:
            ps, pd = leaf_spec(p, f"{i}")
        if isinstance(t, Node):
            ts, td = t.shape, t.dtype
        else:
            problem = leaf_problem(t)
            if problem is not None:
                names = names or arg_leaf_names(f, tuple(primals))
                raise problem[0](f"{fname}: the tangent of argument {names[i]} {problem[1]}")
            ts, td = leaf_spec(t, f"{i}")
        if tuple(ps) != tuple(ts):
            names = names or arg_leaf_names(f, tuple(primals))
            raise ShapeError(f"{fname}: the tangent of argument {names[i]} has shape {tuple(ts)}, the primal has "
                             f"shape {tuple(ps)}")
        if (type(t) is float and pd.kind in "fc") or (type(t) is complex and pd.kind == "c"):
            tl[i] = np.asarray(t, dtype=pd)  # a Python float (or complex) takes the primal's dtype
        elif pd.kind in "fc" and td != pd:
            names = names or arg_leaf_names(f, tuple(primals))
            raise DTypeError(f"{fname}: the tangent of argument {names[i]} has dtype {td}, the primal has dtype "
                             f"{pd}; a tangent must have its primal's dtype (cast it with .astype(np.{pd}))")
    return pl, tl, ptree


def _jvp_inline(f: Callable, primals: tuple, tangents: tuple, fname: str):
    pl, tl, ptree = _check_tangents(f, primals, tangents, fname)
    fl = []
    for i, p in enumerate(pl):
        node = L.asnode(p)
        if not is_float(node):
            raise DTypeError(f"{fname}: primal {i} has dtype {node.dtype}; tangents need float primals")
        fl.append(fresh(node))
    out = f(*tree_unflatten(ptree, fl))
    ol, otree = tree_flatten(out)
    ol = roll_traced([as_output(o, i) for i, o in enumerate(ol)])
    tnodes = [L.cast(L.asnode(t), w.dtype) for t, w in zip(tl, fl)]
    touts = jvp_nodes(ol, fl, tnodes)
    touts = [L.zeros_like(o) if t is None else t for o, t in zip(ol, touts)]
    return tree_unflatten(otree, ol), tree_unflatten(otree, touts)


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """Forward mode: f's output and its directional derivative J @ tangents.

    Args:
        f: function of arrays (or pytrees).
        primals: tuple of f's positional arguments.
        tangents: tuple of the same structure, shapes and (float) dtypes.

    Returns:
        (f(*primals), tangent_out) with tangent_out shaped like the output.

    Raises:
        ShapeError: a tangent whose shape differs from its primal.
        DTypeError: a tangent whose dtype differs from its float primal (a
            Python float is accepted), or a tangent for an integer or bool primal.
    """
    return _jvp(f, primals, tangents, f"jvp({getattr(f, '__name__', 'f')})")


def _jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any], fname: str) -> tuple[Any, Any]:
    primals, tangents = tuple(primals), tuple(tangents)
    if _build_inline((primals, tangents)):
        return _jvp_inline(f, primals, tangents, fname)
    check_args(primals, f, fname)
    _, tl, ptree = _check_tangents(f, primals, tangents, fname)
    tangents = tree_unflatten(ptree, tl)
    return _run(lambda p, t: _jvp_inline(f, p, t, fname), (primals, tangents), fname)


def _vjp_inline(f: Callable, primals: tuple, cotangent: Any, fname: str):
    new_args, fl, trees = _wrt_leaves(primals, tuple(range(len(primals))), fname)
    out = f(*new_args)
    ol, otree = tree_flatten(out)
    ol = roll_traced([as_output(o, i) for i, o in enumerate(ol)])
    cl, ctree = tree_flatten(cotangent)
    if ctree != otree:
        raise ShapeError(f"{fname}: cotangent has structure {ctree}, the output has {otree}")
    cnodes = []
    for i, (c, o) in enumerate(zip(cl, ol)):
        shp = c.shape if isinstance(c, Node) else np.shape(c)
        if tuple(shp) != o.shape:
            raise ShapeError(f"{fname}: cotangent {i} has shape {tuple(shp)}, the output has shape {o.shape}")
        cd = c.dtype if isinstance(c, Node) else (None if type(c) in (float, int, complex) else np.asarray(c).dtype)
        if cd is not None and o.dtype.kind in "fc" and cd != o.dtype:
            raise DTypeError(f"{fname}: cotangent {i} has dtype {cd}, the output has dtype {o.dtype}; a cotangent "
                             f"must have its output's dtype (cast it with .astype(np.{o.dtype}))")
        cnodes.append(L.cast(L.asnode(c), o.dtype))
    flat = [x for leaves in fl for x in leaves]
    cts = vjp_nodes(ol, cnodes, flat)
    it = iter(L.zeros_like(w) if c is None else c for w, c in zip(flat, cts))
    return tuple(tree_unflatten(td, [next(it) for _ in leaves]) for td, leaves in zip(trees, fl))


def vjp(f: Callable, *primals: Any) -> tuple[Any, Callable]:
    """Reverse mode: f's output and its pullback.

    Args:
        f: function of arrays (or pytrees); every positional argument is a primal (float).
        *primals: the arguments.

    Returns:
        (out, pullback) where pullback(cotangent) returns a tuple with one
        cotangent per primal (Jᵀ @ cotangent), cotangent shaped like out.

    Raises:
        DTypeError: an integer or bool primal, or a cotangent array whose dtype is not the
            output's (a Python float takes the output's dtype), as `jvp` for tangents.
        ShapeError: a cotangent whose shape differs from the output.
    """
    fname = f"vjp({getattr(f, '__name__', 'f')})"
    if _build_inline(primals):
        out = f(*primals)

        def pullback_inline(ct: Any) -> tuple:
            return _vjp_inline(f, primals, ct, fname)

        return out, pullback_inline
    out = _run(f, primals, fname, user_fn=f)

    def pullback(ct: Any) -> tuple:
        if _build_inline(ct):
            return _vjp_inline(f, primals, ct, fname)
        cl, ctree = tree_flatten(ct)
        ol, otree = tree_flatten(out)
        if ctree == otree:  # a Python float cotangent takes its output's dtype (it would trace as float64)
            cl = [np.asarray(c, dtype=np.asarray(o).dtype) if (type(c) in (float, int) and np.asarray(o).dtype.kind
                  in "fc") or (type(c) is complex and np.asarray(o).dtype.kind == "c") else c for c, o in zip(cl, ol)]
            ct = tree_unflatten(ctree, cl)
        return _run(lambda p, c: _vjp_inline(f, p, c, fname), (tuple(primals), ct), fname)

    return out, pullback


def _zeros(shape: tuple, dtype: Any) -> Node:
    return L.broadcast_to(L.constant(np.zeros((), dtype)), shape)


def _basis(n: int, shape: tuple, dtype: Any) -> Node:
    """The identity basis (n, *shape) with n = prod(shape), as a node (size-independent node count)."""
    return L.reshape(identity_basis(n, dtype), (n,) + tuple(shape))


def _jacrev_nodes(o: Node, wrt: list[Node]) -> list[Node]:
    """Rows of d o / d w for each w: one pullback of a placeholder seed, batched over the identity basis."""
    if o.size == 0:
        return [_zeros(o.shape + w.shape, w.dtype) for w in wrt]
    seed = placeholder(o.shape, o.dtype, name="seed")
    cts = vjp_nodes([o], [seed], wrt)
    live = [c for c in cts if c is not None]
    batched = iter(batch_nodes(live, {seed: _basis(o.size, o.shape, o.dtype)}, o.size) if live else [])
    out = []
    for w, c in zip(wrt, cts):
        out.append(_zeros(o.shape + w.shape, w.dtype) if c is None else L.reshape(next(batched), o.shape + w.shape))
    return out


def _jacfwd_nodes(outs: list[Node], w: Node) -> list[Node]:
    """Columns of d o / d w for each o: one pushforward of a placeholder tangent, batched over the basis."""
    if w.size == 0:
        return [_zeros(o.shape + w.shape, o.dtype) for o in outs]
    tp = placeholder(w.shape, w.dtype, name="tangent")
    ts = jvp_nodes(outs, [w], [tp])
    live = [t for t in ts if t is not None]
    batched = iter(batch_nodes(live, {tp: _basis(w.size, w.shape, w.dtype)}, w.size) if live else [])
    res = []
    for o, t in zip(outs, ts):
        if t is None:
            res.append(_zeros(o.shape + w.shape, o.dtype))
            continue
        tb = L.reshape(next(batched), (w.size, o.size))           # row j: J[:, j]
        res.append(L.reshape(L.transpose(tb, (1, 0)), o.shape + w.shape))
    return res


def _jacobian(f: Callable, argnums: int | Sequence[int], mode: str | None, fname: str,
              holomorphic: bool = False) -> Callable:
    def inline(*args: Any) -> Any:
        nums, single = _normalize_argnums(argnums, len(args), fname)
        new_args, fl, trees = _wrt_leaves(args, nums, fname, holomorphic)
        out = f(*new_args)
        ol, otree = tree_flatten(out)
        ol = [as_output(o, i) for i, o in enumerate(ol)]
        for i, o in enumerate(ol):
            if not is_float(o):
                raise DTypeError(f"{fname}: output {i} has dtype {o.dtype}; a Jacobian needs float outputs")
        wrt = [x for leaves in fl for x in leaves]
        for what, v in [("output", o) for o in ol] + [("argument", w) for w in wrt]:
            if holomorphic and v.dtype.kind != "c":
                raise DTypeError(f"{fname}: holomorphic=True needs complex inputs and outputs, but an {what} has "
                                 f"dtype {v.dtype}")
            if v.dtype.kind == "c" and not holomorphic:
                raise DTypeError(f"{fname}: a complex {what} (dtype {v.dtype}); the Jacobian of a complex function "
                                 f"is a complex matrix only for a holomorphic one: pass holomorphic=True (as JAX), "
                                 f"or use sg.jvp / sg.vjp (docs/complex.md), or real and imaginary parts")
        n_out, n_in = sum(o.size for o in ol), sum(w.size for w in wrt)
        m = mode or ("rev" if n_out <= n_in else "fwd")
        # J[i][j]: d ol[i] / d wrt[j], shape ol[i].shape + wrt[j].shape
        if m == "rev":
            J = [_jacrev_nodes(o, wrt) for o in ol]
        else:
            cols = [_jacfwd_nodes(ol, w) for w in wrt]
            J = [[cols[j][i] for j in range(len(wrt))] for i in range(len(ol))]
        per_out = []
        for row in J:
            it = iter(row)
            per_arg = tuple(tree_unflatten(td, [next(it) for _ in leaves]) for td, leaves in zip(trees, fl))
            per_out.append(per_arg[0] if single else per_arg)
        return tree_unflatten(otree, per_out)

    @functools.wraps(f)
    def jac(*args: Any, **kwargs: Any) -> Any:
        nums, _ = _normalize_argnums(argnums, len(args), fname)
        fc, args, nums, user = _close_static(f, args, kwargs, nums, fname, positional=not _build_inline(args))
        if fc is f:
            run = inline
        else:  # f closed over its pass-through arguments: the same Jacobian with renumbered argnums
            run = _jacobian(fc, nums if not isinstance(argnums, (int, np.integer)) else nums[0], mode, fname,
                            holomorphic).__wrapped_inline__
        if _build_inline(args):
            return run(*args)
        return _run(run, args, fname, user_fn=user)

    jac.__wrapped_inline__ = inline

    return jac


def jacobian(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Callable:
    """Return a function computing the Jacobian of f, shape out.shape + in.shape.

    Reverse mode (one pullback) when the output is not larger than the input,
    forward mode (one pushforward) otherwise. Either way the whole identity
    basis goes through a single batched pass (`symgraph.batching`), so the
    graph size does not grow with the number of rows or columns.

    Args:
        f: function of arrays (or pytrees) returning an array (or a pytree).
        argnums: int or tuple of ints.

    Returns:
        A function returning the Jacobian: for each output leaf, the Jacobian
        with respect to the argument (a tuple over argnums when argnums is a
        tuple; a pytree like the argument when it is one), each block of shape
        out_leaf.shape + in_leaf.shape, in the output's structure.

        holomorphic: f is holomorphic (complex inputs and outputs): the complex Jacobian df/dz,
            as `jax.jacobian(f, holomorphic=True)`; without it complex inputs and outputs are
            refused (docs/complex.md).

    Raises:
        DTypeError: a differentiated argument or an output is not float or complex; complex
            without holomorphic=True, or holomorphic=True with a real input or output.
    """
    return _jacobian(f, argnums, None, f"jacobian({getattr(f, '__name__', 'f')})", holomorphic)


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Callable:
    """The Jacobian by reverse mode: one batched pullback of the identity basis.

    Same contract as `jacobian`; best when outputs are fewer than inputs.
    """
    return _jacobian(f, argnums, "rev", f"jacrev({getattr(f, '__name__', 'f')})", holomorphic)


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Callable:
    """The Jacobian by forward mode: one batched pushforward of the identity basis.

    Same contract as `jacobian`; best when inputs are fewer than outputs.
    """
    return _jacobian(f, argnums, "fwd", f"jacfwd({getattr(f, '__name__', 'f')})", holomorphic)


def hessian(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Callable:
    """Return a function computing the Hessian of scalar f, shape in.shape + in.shape.

    Forward over reverse: the batched pushforward of the identity basis
    through the gradient graph (`jacfwd(grad(f))`), one pass whatever the size.

    Args:
        f: function returning a float scalar.
        argnums: int or tuple of ints (a tuple gives nested tuples H[i][j]).
        holomorphic: f is holomorphic (complex input and output): the complex second derivative
            matrix, as `jax.hessian(f, holomorphic=True)`.

    Returns:
        A function returning the Hessian.

    Raises:
        NonScalarOutputError: f's output is not a scalar.
        DTypeError: an integer or bool argument.
    """
    fname = f"hessian({getattr(f, '__name__', 'f')})"
    return _jacobian(_grad(f, argnums, False, fname, holomorphic), argnums, "fwd", fname, holomorphic)


def hvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """Hessian-vector product H @ v of scalar f, without forming H.

    Forward over reverse: the JVP of the gradient graph (Pearlmutter 1994,
    "Fast exact multiplication by the Hessian").

    Args:
        f: scalar function of its positional arguments.
        primals: tuple of arguments x.
        tangents: tuple of vectors v shaped like the primals.

    Returns:
        H @ v, shaped like the (first) primal; a tuple when f takes several arguments.

    Raises:
        NonScalarOutputError: f's output is not a scalar.
        ShapeError, DTypeError: tangents that do not match the primals (shape, dtype), as in `jvp`.
    """
    primals, tangents = tuple(primals), tuple(tangents)
    argnums = tuple(range(len(primals)))
    fname = f"hvp({getattr(f, '__name__', 'f')})"
    g = _grad(f, argnums if len(primals) > 1 else 0, False, fname)
    _, t = _jvp(g, primals, tangents, fname)
    return t


def stop_gradient(x: Any) -> Any:
    """x, with zero derivative (applied leaf-wise to pytrees)."""
    return tree_map(snp.stop_gradient, x)
