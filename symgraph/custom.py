"""User-defined derivative rules: `custom_vjp` and `custom_jvp` decorators (JAX-shaped).

A decorated function called on traced values runs its primal code inline and
wraps each output leaf in a `custom_vjp_call` / `custom_jvp_call` node (see
`symgraph.ops.custom`). When a derivative is needed, the wrapper's rule calls
the user's rule on graph nodes, so the rule is traced into the graph like any
other code and can itself be differentiated again (`grad(grad(f))`, `hessian`).
Called on NumPy arrays outside any trace, the function just runs.

Example:
    >>> @custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (np.clip(g, -1.0, 1.0),))

References:
    JAX, "Custom derivative rules for JAX-transformable Python functions"
    (jax.custom_jvp / jax.custom_vjp); the tangent-to-cotangent step of
    custom_jvp is reverse mode on the (linear) tangent expression, i.e. the
    linearize-then-transpose view of Radul et al., "You only linearize once" (2023).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from . import lax as L
from .autodiff import depends_on, placeholder, vjp_nodes
from .errors import ShapeError, SymgraphError, UnsupportedOpError
from .ir import Node
from .tree import TreeDef, tree_flatten, tree_unflatten

__all__ = ["custom_vjp", "custom_jvp"]


def _traced(tree: Any) -> bool:
    return any(isinstance(x, Node) for x in tree_flatten(tree)[0])


class _Call:
    """What one call of a custom function needs later: argument structure, statics, output avals."""

    def __init__(self, owner: Any, args: tuple):
        self.owner = owner
        nd = owner.nondiff_argnums
        for i in nd:
            if not -len(args) <= i < len(args):
                raise SymgraphError(f"{owner.name}: nondiff_argnums {i} is out of range for {len(args)} arguments")
        self.nondiff = tuple(sorted(i % len(args) for i in nd))
        self.static = tuple(args[i] for i in self.nondiff)
        for i, s in zip(self.nondiff, self.static):
            if _traced(s):
                raise SymgraphError(f"{owner.name}: argument {i} is in nondiff_argnums but is a traced value; "
                                    f"nondiff arguments are static (Python values). Pass arrays as ordinary "
                                    f"arguments: the rule may return None as their cotangent")
        self.dyn_pos = tuple(i for i in range(len(args)) if i not in self.nondiff)
        self.nargs = len(args)
        self.arg_trees: list[TreeDef] = []
        self.arg_nodes: list[Node] = []
        for i in self.dyn_pos:
            leaves, td = tree_flatten(args[i])
            self.arg_trees.append(td)
            self.arg_nodes.extend(L.asnode(x) for x in leaves)
        self.out_tree: TreeDef | None = None
        self.out_avals: list[tuple] = []

    def full_args(self, dyn_leaves: Sequence[Any]) -> tuple:
        """The positional arguments with the dynamic leaves replaced."""
        out: list[Any] = [None] * self.nargs
        for i, s in zip(self.nondiff, self.static):
            out[i] = s
        for i, d in zip(self.dyn_pos, self.dyn_args(dyn_leaves)):
            out[i] = d
        return tuple(out)

    def dyn_args(self, dyn_leaves: Sequence[Any]) -> tuple:
        """The differentiable arguments (pytrees) rebuilt from leaves."""
        it = iter(dyn_leaves)
        return tuple(tree_unflatten(td, [next(it) for _ in range(td.num_leaves)]) for td in self.arg_trees)

    def set_outputs(self, outs: list[Node], tree: TreeDef) -> None:
        self.out_tree = tree
        self.out_avals = [(o.shape, o.dtype) for o in outs]

    def output_cotangent(self, ct: Node, index: int) -> Any:
        """The output pytree's cotangent: ct at leaf `index`, zeros elsewhere."""
        leaves = [ct if j == index else L.broadcast_to(L.constant(np.zeros((), d)), s)
                  for j, (s, d) in enumerate(self.out_avals)]
        return tree_unflatten(self.out_tree, leaves)

    def arg_cotangents(self, result: Any, what: str) -> list[Node | None]:
        """Flatten a rule's per-argument cotangents (None = zero), checking structure and shapes."""
        n = len(self.dyn_pos)
        if not isinstance(result, (tuple, list)) or len(result) != n:
            got = f"a {type(result).__name__} of length {len(result)}" if isinstance(result, (tuple, list)) \
                else type(result).__name__
            raise SymgraphError(f"{self.owner.name}: {what} must return a tuple with one cotangent per "
                                f"differentiable argument ({n}), got {got}")
        out: list[Node | None] = []
        k = 0
        for pos, td, r in zip(self.dyn_pos, self.arg_trees, result):
            prims = self.arg_nodes[k:k + td.num_leaves]
            k += td.num_leaves
            if r is None:
                out.extend([None] * td.num_leaves)
                continue
            rl, rtd = tree_flatten(r)
            if rtd != td:
                raise ShapeError(f"{self.owner.name}: {what} returned a cotangent of structure {rtd} for argument "
                                 f"{pos}, which has structure {td}")
            for p, c in zip(prims, rl):
                if c is None or p.dtype.kind != "f":
                    out.append(None)
                    continue
                shp = c.shape if isinstance(c, Node) else np.shape(c)
                if tuple(shp) != p.shape:
                    raise ShapeError(f"{self.owner.name}: {what} returned a cotangent of shape {tuple(shp)} for "
                                     f"argument {pos} of shape {p.shape}")
                out.append(L.cast(L.asnode(c), p.dtype))
        return out


# ----- custom_vjp -----


class _VJPRecord(_Call):
    """The `rule` attribute of custom_vjp_call nodes (hashed by identity)."""

    def __init__(self, owner: "custom_vjp", args: tuple):
        super().__init__(owner, args)
        self.res_tree: TreeDef | None = None
        self.res_static: list[Any] = []
        self.n_res = 0

    def __repr__(self) -> str:
        return f"<custom_vjp {self.owner.name}>"

    def vjp(self, ct: Node, node: Node) -> tuple:
        n_args = len(self.arg_nodes)
        res_nodes = iter(node.inputs[n_args:n_args + self.n_res])
        res = tree_unflatten(self.res_tree, [next(res_nodes) if s is _NODE else s for s in self.res_static])
        g = self.output_cotangent(ct, node.attr("index"))
        result = self.owner.bwd(*self.static, res, g)
        cts = self.arg_cotangents(result, "the bwd rule")
        return tuple(cts) + (None,) * (self.n_res + 1)

    def jvp(self, tangents: Sequence[Node | None], node: Node) -> Node | None:
        # forward mode differentiates the primal code (the wrapper's last input)
        return tangents[-1]


_NODE = object()  # marks a residual leaf that is a node input of the wrapper


class custom_vjp:  # noqa: N801  (JAX's name)
    """Give a function a user-defined VJP: `f.defvjp(fwd, bwd)`.

    `fwd(*args) -> (out, residuals)` computes the output and whatever the
    backward rule needs; `bwd(*nondiff_args, residuals, g) -> tuple` returns
    one cotangent per differentiable argument (a pytree like the argument, or
    None for zero), given the output cotangent `g` (a pytree like `out`).
    Both are traced into the graph: the cotangents are graph nodes, which
    can be differentiated again (grad of grad, hessian).

    Args:
        fun: the primal function (run as is on NumPy arrays outside a trace).
        nondiff_argnums: positions of static (non-array) arguments; they are
            passed to `fwd` in place and to `bwd` first.

    Notes:
        Forward mode (jvp, jacfwd, hessian's outer pass) differentiates the
        primal code of `fwd`, not the rule. For a function with k output
        leaves, the reverse pass calls `bwd` once per leaf with zeros for the
        other leaves' cotangents.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.name = getattr(fun, "__name__", "f")
        self.nondiff_argnums = tuple(int(i) for i in nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Set the forward (`fwd(*args) -> (out, res)`) and backward (`bwd(*nondiff, res, g)`) rules."""
        self.fwd = fwd
        self.bwd = bwd

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args: Any) -> Any:
        if self.fwd is None or self.bwd is None:
            raise SymgraphError(f"custom_vjp function {self.name} has no rule: call {self.name}.defvjp(fwd, bwd)")
        if not _traced(args):
            return self.fun(*args)
        running = _running_fwd()
        if id(self) in running:  # fwd calling the function itself (JAX's documented pattern): its plain code
            return self.fun(*args)
        rec = _VJPRecord(self, args)
        running.add(id(self))
        try:
            res_pair = self.fwd(*rec.full_args(rec.arg_nodes))
        finally:
            running.discard(id(self))
        if not (isinstance(res_pair, (tuple, list)) and len(res_pair) == 2):
            raise SymgraphError(f"{self.name}: the fwd rule must return a pair (output, residuals)")
        out, res = res_pair
        ol, otree = tree_flatten(out)
        ol = [L.as_output(o, i) for i, o in enumerate(ol)]
        rec.set_outputs(ol, otree)
        rl, rtree = tree_flatten(res)
        rec.res_tree = rtree
        res_nodes = [x for x in rl if isinstance(x, Node)]
        rec.res_static = [_NODE if isinstance(x, Node) else x for x in rl]
        rec.n_res = len(res_nodes)
        wrapped = [L.bind("custom_vjp_call", *rec.arg_nodes, *res_nodes, o, rule=rec, index=i)
                   for i, o in enumerate(ol)]
        return tree_unflatten(otree, wrapped)


_fwd_state = threading.local()


def _running_fwd() -> set:
    """ids of the custom_vjp functions whose fwd rule runs in this thread."""
    r = getattr(_fwd_state, "ids", None)
    if r is None:
        r = _fwd_state.ids = set()
    return r


# ----- custom_jvp -----


class _JVPRecord(_Call):
    """The `rule` attribute of custom_jvp_call nodes (hashed by identity)."""

    def __repr__(self) -> str:
        return f"<custom_jvp {self.owner.name}>"

    def tangent_out(self, args: Sequence[Node], tangents: Sequence[Node | None], index: int, shape: tuple,
                    dtype: Any) -> Node:
        """Leaf `index` of the user rule's tangent output."""
        ts = [L.zeros_like(a) if t is None else t for a, t in zip(args, tangents)]
        res = self.owner.jvp_rule(*self.static, self.dyn_args(args), self.dyn_args(ts))
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise SymgraphError(f"{self.owner.name}: the jvp rule must return a pair (primal_out, tangent_out)")
        tl, ttree = tree_flatten(res[1])
        if ttree != self.out_tree:
            raise ShapeError(f"{self.owner.name}: the jvp rule's tangent output has structure {ttree}, the "
                             f"function's output has {self.out_tree}")
        t = tl[index]
        shp = tuple(t.shape if isinstance(t, Node) else np.shape(t))
        if shp != tuple(shape):
            if shp == ():
                t = L.broadcast_to(L.asnode(t), shape)
            else:
                raise ShapeError(f"{self.owner.name}: the jvp rule gave a tangent of shape {shp} for output "
                                 f"{index} of shape {tuple(shape)}")
        return L.cast(L.asnode(t), dtype)

    def jvp(self, tangents: Sequence[Node | None], node: Node) -> Node | None:
        args = node.inputs[:-1]
        return self.tangent_out(args, tangents[:-1], node.attr("index"), node.shape, node.dtype)

    def vjp(self, ct: Node, node: Node) -> tuple:
        args = node.inputs[:-1]
        tps = [placeholder(a.shape, a.dtype, name="custom_jvp_tangent") if a.dtype.kind in "fc" else None
               for a in args]
        t = self.tangent_out(args, tps, node.attr("index"), node.shape, node.dtype)
        live = [p for p in tps if p is not None]
        cts = iter(vjp_nodes([t], [ct], live))
        out = [None if p is None else next(cts) for p in tps]
        if depends_on(out, live):
            raise UnsupportedOpError(f"{self.owner.name}: the custom_jvp rule is not linear in the tangents, so "
                                     f"reverse mode cannot transpose it (write the tangent output as a linear "
                                     f"function of the input tangents)")
        return tuple(out) + (None,)


class custom_jvp:  # noqa: N801  (JAX's name)
    """Give a function a user-defined JVP: `@f.defjvp` or `f.defjvps(...)`.

    The rule `jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)`
    gets the differentiable arguments and their tangents as tuples (zeros for
    arguments without a tangent) and returns the output and its tangent; the
    tangent output must be linear in the tangents. Reverse mode is derived by
    differentiating that linear expression in reverse. The rule is traced into
    the graph, so derivatives of any order work.

    Args:
        fun: the primal function (run as is on NumPy arrays outside a trace).
        nondiff_argnums: positions of static (non-array) arguments, passed to
            the rule first.

    Notes:
        `primal_out` returned by the rule is ignored: the value is always
        `fun(*args)` (they must agree). Tangents of integer arguments are
        integer zeros.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.name = getattr(fun, "__name__", "f")
        self.nondiff_argnums = tuple(int(i) for i in nondiff_argnums)
        self.jvp_rule: Callable | None = None

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule `jvp(*nondiff, primals, tangents) -> (out, tangent_out)`; usable as a decorator."""
        self.jvp_rule = jvp
        return jvp

    def defjvps(self, *per_arg: Callable | None) -> None:
        """Set the rule from one function per differentiable argument (JAX's defjvps).

        Each `fn(t_i, primal_out, *primals)` gives argument i's contribution to
        the tangent output (None: no dependence); contributions are summed.
        """
        def rule(*a: Any) -> Any:
            static, (primals, tangents) = a[:-2], a[-2:]
            # primal_out is this custom function's own output (as in JAX's defjvps), not fun's raw graph: a
            # derivative of the tangent output then goes through this rule again, never through fun's value
            # graph, which may be non-differentiable where the rule is exact (logaddexp2's x == y branch)
            out = self(*_merge(static, primals, self._nondiff_for(len(static) + len(primals))))
            tot = None
            for fn, t in zip(per_arg, tangents):
                if fn is None:
                    continue
                c = fn(t, out, *primals)
                tot = c if tot is None else tot + c
            if tot is None:
                tot = np.zeros(np.shape(out)) if not isinstance(out, Node) else L.zeros_like(out)
            return out, tot

        self.jvp_rule = rule

    def _nondiff_for(self, n: int) -> tuple:
        return tuple(sorted(i % n for i in self.nondiff_argnums))

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args: Any) -> Any:
        if self.jvp_rule is None:
            raise SymgraphError(f"custom_jvp function {self.name} has no rule: decorate one with @{self.name}.defjvp")
        if not _traced(args):
            return self.fun(*args)
        rec = _JVPRecord(self, args)
        out = self.fun(*rec.full_args(rec.arg_nodes))
        ol, otree = tree_flatten(out)
        ol = [L.as_output(o, i) for i, o in enumerate(ol)]
        rec.set_outputs(ol, otree)
        wrapped = [L.bind("custom_jvp_call", *rec.arg_nodes, o, rule=rec, index=i) for i, o in enumerate(ol)]
        return tree_unflatten(otree, wrapped)


def _merge(static: Sequence[Any], dyn: Sequence[Any], nondiff: tuple) -> tuple:
    out: list[Any] = []
    s, d = iter(static), iter(dyn)
    for i in range(len(static) + len(dyn)):
        out.append(next(s) if i in nondiff else next(d))
    return tuple(out)

