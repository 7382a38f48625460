"""Control flow that stays in the graph: `scan` and `fori_loop` (JAX's signatures, pytree carries).

`scan(f, init, xs)` traces `f(carry, x) -> (carry, y)` once, on placeholders,
into a loop region (`symgraph.regions.Region`) held by `scan` nodes, so the
graph does not grow with the trip count; values of the enclosing trace that
`f` closes over become explicit inputs of the loop. Reverse mode, forward
mode and vmap are rules of the region (docs/control-flow.md).

Called on arrays outside a trace, these functions trace, simplify and
evaluate, as the transformations do.

References:
    JAX's `lax.scan` / `lax.fori_loop` (the API); Griewank & Walther,
    Evaluating Derivatives (2nd ed., SIAM 2008), ch. 12 (loop reversal).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from . import lax as L
from .autodiff import placeholder
from .eager import run
from .errors import DTypeError, ShapeError, SymgraphError, user_location
from .ir import Node, current_builder, tracing_active
from .ops import OPS
from .branches import Branches, cond_node
from .regions import Region, WhileRegion, capture, scan_node, while_node
from .tree import tree_flatten, tree_paths, tree_unflatten

__all__ = ["scan", "fori_loop", "cond", "switch", "while_loop"]


def _fname(f: Callable) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _leaf_node(x: Any, what: str) -> Node:
    if isinstance(x, Node):
        return x
    if isinstance(x, (np.ndarray, np.generic, numbers.Number)):
        a = np.asarray(x)
        if a.dtype.kind not in "biufc":
            raise DTypeError(f"{what} has dtype {a.dtype}; loop carries and xs are bool, integer, float or complex "
                             f"arrays")
        return L.constant(a)
    raise DTypeError(f"{what} has type {type(x).__name__}; loop carries and xs are arrays, numbers or pytrees "
                     f"of them")


def _has_nodes(tree: Any) -> bool:
    return any(isinstance(x, Node) for x in tree_flatten(tree)[0])


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`, as JAX's `lax.scan`.

    Semantics (a Python loop that stays one loop in the graph)::

        ys = []
        for x in (reversed(xs) if reverse else xs):
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys)            # ys in the order of xs, also when reverse

    Args:
        f: `f(carry, x) -> (carry, y)`; carry and y are pytrees of arrays. It is
            traced once; it may close over traced values (they become inputs
            of the loop) and over NumPy arrays (constants).
        init: the initial carry (pytree of arrays or numbers); the carry that
            `f` returns must have its structure, shapes and dtypes.
        xs: pytree of arrays with a common leading axis of length T, or None
            (then `length` gives T and `f` gets x = None).
        length: the trip count T (needed when xs is None; checked otherwise).
        reverse: run from the last x to the first.
        unroll: steps per loop iteration (JAX's meaning): an int k >= 1 makes
            the loop body k copies of f, run T // k times, and the T % k steps
            left over one more loop; True unrolls fully (k = T), False is 1.
            The values are the same bits (the same ops on the same operands);
            only the graph's and the native loop's shape change.

    Returns:
        (final carry, stacked ys): ys leaves have shape (T, *y.shape).

    Raises:
        ShapeError: xs leaves with different leading lengths, a length that
            disagrees with xs or is negative, no length and no xs, or a body
            whose carry output changes a leaf's shape (the message names the leaf).
        DTypeError: a body whose carry output changes a leaf's dtype, or a
            leaf that is not a numeric array.
        SymgraphError: f does not return a (carry, y) pair, or the carry's
            pytree structure changes.

    Shapes and dtypes: carries keep theirs; x leaves are xs leaves without the
    leading axis; any dtype (bool, integer, float) may be carried, only float
    leaves carry derivatives.
    """
    if not callable(f):
        raise SymgraphError(f"scan: f must be callable, got {type(f).__name__}")
    if isinstance(unroll, (bool, np.bool_)):
        unroll = 0 if unroll else 1  # True: unroll fully (0 stands for the trip count)
    elif not isinstance(unroll, (int, np.integer)) or unroll < 1:
        raise SymgraphError(f"scan: unroll must be an int >= 1 or a bool, got {unroll!r}")
    if tracing_active() or _has_nodes((init, xs)):
        return _scan(f, init, xs, length, reverse, int(unroll))
    return run(lambda c, x: _scan(f, c, x, length, reverse, int(unroll)), (init, xs), f"scan({_fname(f)})")


def _scan(f: Callable, init: Any, xs: Any, length: int | None, reverse: bool, unroll: int = 1) -> tuple[Any, Any]:
    name = f"scan({_fname(f)})"
    c_leaves, c_tree = tree_flatten(init)
    c_paths = tree_paths(c_tree)
    init_nodes = [_leaf_node(c, f"{name}: init{p}") for c, p in zip(c_leaves, c_paths)]
    x_leaves, x_tree = tree_flatten(xs)
    x_paths = tree_paths(x_tree)
    x_nodes = [_leaf_node(x, f"{name}: xs{p}") for x, p in zip(x_leaves, x_paths)]
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool):
            raise ShapeError(f"{name}: length must be a Python int, got {type(length).__name__}")
        if length < 0:
            raise ShapeError(f"{name}: length must be >= 0, got {length}")
    T = length
    for x, p in zip(x_nodes, x_paths):
        if x.ndim == 0:
            raise ShapeError(f"{name}: xs{p} is 0-d; xs leaves need a leading axis to scan over")
        if T is None:
            T = x.shape[0]
        elif x.shape[0] != T:
            what = f"length={length}" if length is not None else f"xs{x_paths[0]} has {T}"
            raise ShapeError(f"{name}: xs{p} has leading length {x.shape[0]}, but {what}")
    if T is None:
        raise ShapeError(f"{name}: give xs or length (the trip count)")
    T = int(T)
    cph = [placeholder(c.shape, c.dtype, f"carry{p}") for c, p in zip(init_nodes, c_paths)]
    xph = [placeholder(x.shape[1:], x.dtype, f"x{p}") for x, p in zip(x_nodes, x_paths)]
    out = f(tree_unflatten(c_tree, cph), tree_unflatten(x_tree, xph) if x_nodes or xs is not None else None)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise SymgraphError(f"{name}: f must return a pair (carry, y), got {type(out).__name__}"
                            f"{f' of length {len(out)}' if isinstance(out, (tuple, list)) else ''}")
    new_c, y = out
    nc_leaves, nc_tree = tree_flatten(new_c)
    if nc_tree != c_tree:
        raise SymgraphError(f"{name}: f returned a carry of structure {nc_tree}; the carry's structure is {c_tree} "
                            f"(the body must keep it)")
    c_outs = []
    for o, c, p in zip(nc_leaves, cph, c_paths):
        if isinstance(o, numbers.Number) and not isinstance(o, (np.generic, complex)):
            o = L.constant(np.asarray(o, dtype=c.dtype))  # a Python number is weakly typed (as in JAX)
        o = _leaf_node(o, f"{name}: the carry{p} that f returned")
        if o.shape != c.shape:
            raise ShapeError(f"{name}: f changed the shape of carry{p}: it goes in as {c.shape} and comes out as "
                             f"{o.shape}; a loop carry keeps its shape")
        if o.dtype != c.dtype:
            raise DTypeError(f"{name}: f changed the dtype of carry{p}: it goes in as {c.dtype} and comes out as "
                             f"{o.dtype}; a loop carry keeps its dtype (cast with .astype, or start from an init "
                             f"of dtype {o.dtype})")
        c_outs.append(o)
    y_leaves, y_tree = tree_flatten(y)
    y_outs = [_leaf_node(v, f"{name}: y{p}") for v, p in zip(y_leaves, tree_paths(y_tree))]
    captured, cap_ph, body_outs = capture(c_outs + y_outs, cph + xph)
    from .ir import Graph

    body = Graph(cap_ph + cph + xph, body_outs, name=_fname(f))
    region = Region(body, len(cap_ph), len(cph), len(xph), T, reverse, name=name)
    ins = captured + init_nodes + x_nodes
    nk = len(cph)
    k = T if unroll == 0 else min(unroll, T)
    if k > 1:
        carry, ys = _unrolled(region, captured, init_nodes, x_nodes, k)
    else:
        carry = [scan_node(ins, region, j) for j in range(nk)]
        ys = [scan_node(ins, region, nk + j) for j in range(len(y_outs))]
    return tree_unflatten(c_tree, carry), tree_unflatten(y_tree, ys)


def _rows(x: Node, a: int, b: int) -> Node:
    """x[a:b] along axis 0."""
    return L.bind("slice", x, starts=(a,) + (0,) * (x.ndim - 1), stops=(b,) + tuple(x.shape[1:]),
                  steps=(1,) * x.ndim)


def _unrolled(region: Region, consts: list, init: list, xs: list, k: int) -> tuple[list, list]:
    """The loop `region` with its body repeated k times per iteration (scan's `unroll=k`).

    T // k iterations of a body that runs the step k times (on the k rows of its x block, in
    execution order), then the T % k steps left over as a loop of the one-step body. Executed
    first are xs[:T // k * k] (reverse: xs[T % k:], from the end).
    """
    from .ir import Graph
    from .loop_checkpoint import inline

    b, nc, nk, ny, T, rev = region.body, region.nc, region.nk, region.ny, region.length, region.reverse
    n, r = T // k, T % k
    cst, cin, xin = b.inputs[:nc], b.inputs[nc:nc + nk], b.inputs[nc + nk:]
    xblk = [placeholder((k,) + x.shape, x.dtype, "x_block") for x in xin]
    c = list(cin)
    ys: list[list[Node]] = [[None] * k for _ in range(ny)]
    for j in (range(k - 1, -1, -1) if rev else range(k)):
        xj = [L.reshape(_rows(x, j, j + 1), x.shape[1:]) for x in xblk]
        out = inline(b, list(cst) + c + xj)
        c = out[:nk]
        for i in range(ny):
            ys[i][j] = out[nk + i]
    yk = [L.bind("concatenate", *[L.reshape(y, (1,) + y.shape) for y in row], axis=0) for row in ys]
    body = Graph(list(cst) + list(cin) + xblk, c + yk, name=b.name)
    big = Region(body, nc, nk, len(xin), n, rev, name=f"{region.name}, unroll={k}")
    main, rest = (0, n * k) if not rev else (r, T)
    blocks = [L.reshape(_rows(x, main, rest), (n, k) + x.shape[1:]) for x in xs]
    ins = consts + init + blocks
    carry = [scan_node(ins, big, j) for j in range(nk)]
    ys_main = [L.reshape(scan_node(ins, big, nk + i), (n * k,) + scan_node(ins, big, nk + i).shape[2:])
               for i in range(ny)]
    if r == 0:
        return carry, ys_main
    tail = Region(b, nc, nk, len(xin), r, rev, name=region.name, simplify_body=False)
    t_xs = [_rows(x, n * k, T) if not rev else _rows(x, 0, r) for x in xs]
    t_ins = consts + carry + t_xs
    carry = [scan_node(t_ins, tail, j) for j in range(nk)]
    ys_tail = [scan_node(t_ins, tail, nk + i) for i in range(ny)]
    ys = [L.bind("concatenate", *((m, t) if not rev else (t, m)), axis=0) for m, t in zip(ys_main, ys_tail)]
    return carry, ys


def fori_loop(lower: int, upper: int, body_fun: Callable, init_val: Any) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)`, as one loop in the graph (JAX's `lax.fori_loop`).

    The trip count is static here (Python ints), so this is a `scan` over
    `i = lower, ..., upper - 1` (int64), differentiable in both modes.

    Args:
        lower, upper: Python ints (or integer NumPy scalars); no iterations when upper <= lower.
        body_fun: `body_fun(i, val) -> val`, keeping val's structure, shapes and dtypes.
        init_val: the initial value (pytree of arrays or numbers).

    Returns:
        The final value.

    Raises:
        SymgraphError: a traced lower or upper (use sg.while_loop for a trip count known only at run time).
        ShapeError, DTypeError: as `scan`, when body_fun changes the carry.
    """
    for nm, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, Node):
            raise SymgraphError(f"fori_loop: {nm} is a traced value; the trip count must be static (Python ints) "
                                f"for fori_loop. Use sg.while_loop for a trip count known only at run time.")
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise SymgraphError(f"fori_loop: {nm} must be an int, got {type(v).__name__}")
    lower, upper = int(lower), int(upper)
    if upper <= lower:
        return init_val

    def step(c: Any, i: Any) -> tuple[Any, None]:
        return body_fun(i, c), None

    step.__name__ = _fname(body_fun)
    return scan(step, init_val, np.arange(lower, upper, dtype=np.int64))[0]


def cond(pred: Any, true_fn: Callable, false_fn: Callable, *operands: Any) -> Any:
    """`true_fn(*operands) if pred else false_fn(*operands)` with a traced predicate (JAX's `lax.cond`).

    Both functions are traced (once each); only the one `pred` selects runs, in
    the evaluator and in compiled code, and only its derivative: a NaN or inf in
    the untaken branch never reaches a gradient.

    Args:
        pred: a scalar bool (traced or not).
        true_fn, false_fn: functions of the operands returning pytrees of the
            same structure, shapes and dtypes.
        *operands: pytrees of arrays or numbers. The functions may also close
            over traced values.

    Returns:
        The selected function's result.

    Raises:
        DTypeError: pred is not a bool (compare explicitly: `x > 0`), or the
            branches' results differ in a dtype.
        ShapeError: pred is not a scalar, or the branches' results differ in a shape.
        SymgraphError: the branches' results have different structures.
    """
    p = pred if isinstance(pred, Node) else np.asarray(pred)
    if p.dtype != np.bool_:
        raise DTypeError(f"cond: pred has dtype {p.dtype}; it must be a bool scalar (compare explicitly, e.g. "
                         f"x > 0, or use sg.switch for an integer index)")
    if p.shape != ():
        raise ShapeError(f"cond: pred has shape {tuple(p.shape)}; it must be a scalar (for elementwise selection "
                         f"use np.where)")
    return _switch("cond", pred, [false_fn, true_fn], operands)


def switch(index: Any, branches: Any, *operands: Any) -> Any:
    """`branches[index](*operands)` with a traced integer index (JAX's `lax.switch`).

    The index is clamped to [0, len(branches) - 1], as in JAX. Only the selected
    branch runs (and is differentiated).

    Args:
        index: a scalar integer (traced or not).
        branches: a sequence of functions of the operands with results of one
            structure, shapes and dtypes.
        *operands: pytrees of arrays or numbers.

    Returns:
        The selected branch's result.

    Raises:
        DTypeError: a non-integer index, or branches whose results differ in a dtype.
        ShapeError: a non-scalar index, or branches whose results differ in a shape.
        SymgraphError: no branches, or results of different structures.
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise SymgraphError("switch: branches must be a non-empty sequence of functions")
    i = index if isinstance(index, Node) else np.asarray(index)
    if i.dtype.kind not in "iub":
        raise DTypeError(f"switch: index has dtype {i.dtype}; it must be an integer scalar")
    if i.shape != ():
        raise ShapeError(f"switch: index has shape {tuple(i.shape)}; it must be a scalar")
    return _switch("switch", index, branches, operands)


def _switch(what: str, index: Any, fns: list, operands: tuple) -> Any:
    if tracing_active() or _has_nodes((index, operands)):
        return _branch(what, index, fns, operands)
    return run(lambda i, ops: _branch(what, i, fns, ops), (index, operands), what)


def _branch(what: str, index: Any, fns: list, operands: tuple) -> Any:
    leaves, tree = tree_flatten(operands)
    nodes = [_leaf_node(x, f"{what}: operand{p}") for x, p in zip(leaves, tree_paths(tree))]
    phs = [placeholder(x.shape, x.dtype, f"operand{p}") for x, p in zip(nodes, tree_paths(tree))]
    results = []
    for k, fn in enumerate(fns):
        out = fn(*tree_unflatten(tree, phs))
        ol, otree = tree_flatten(out)
        results.append((ol, otree))
    names = ["false_fn", "true_fn"] if what == "cond" else [f"branches[{k}]" for k in range(len(fns))]
    ol0, t0 = results[0]
    outs: list[list[Node]] = []
    for k, (ol, ot) in enumerate(results):
        if ot != t0:
            raise SymgraphError(f"{what}: {names[k]} returned a result of structure {ot}, {names[0]} one of "
                                f"structure {t0}; the branches must agree")
        row = [_leaf_node(o, f"{what}: the result{p} of {names[k]}") if not isinstance(o, numbers.Number)
               else o for o, p in zip(ol, tree_paths(ot))]
        outs.append(row)
    # Python numbers are weakly typed: they take the dtype the other branches give that leaf
    for j in range(len(ol0)):
        typed = [r[j] for r in outs if isinstance(r[j], Node)]
        for r in outs:
            if not isinstance(r[j], Node):
                r[j] = L.constant(np.asarray(r[j], dtype=typed[0].dtype if typed else None))
    paths = tree_paths(t0)
    for k, row in enumerate(outs[1:], 1):
        for j, (a, b) in enumerate(zip(outs[0], row)):
            if a.shape != b.shape:
                raise ShapeError(f"{what}: the result{paths[j]} has shape {b.shape} in {names[k]} and {a.shape} in "
                                 f"{names[0]}; the branches must agree")
            if a.dtype != b.dtype:
                raise DTypeError(f"{what}: the result{paths[j]} has dtype {b.dtype} in {names[k]} and {a.dtype} "
                                 f"in {names[0]}; the branches must agree (cast one)")
    flat = [o for row in outs for o in row]
    captured, cap_ph, flat = capture(flat, phs)
    m = len(ol0)
    from .ir import Graph

    graphs = [Graph(phs + cap_ph, flat[k * m:(k + 1) * m], name=getattr(fn, "__name__", f"branch{k}"))
              for k, fn in enumerate(fns)]
    region = Branches(graphs, name=what)
    idx = L.asnode(index)
    ins = [idx] + nodes + captured
    res = [cond_node(ins, region, j) for j in range(m)]
    return tree_unflatten(t0, res)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any, max_steps: int | None = None,
               checkpoints: int | None = None) -> Any:
    """`while cond_fun(val): val = body_fun(val)` with a traced condition (JAX's `lax.while_loop`).

    Without `max_steps` or `checkpoints` the trip count is whatever the condition
    gives at run time: forward mode (jvp) and vmap work (a batched condition runs
    until every example is done; each example's carry stops changing when its own
    condition is false), reverse mode raises (it needs one of the two).

    - `checkpoints=s`: the trip count stays a run-time value and reverse mode keeps
      s carry snapshots, whatever the trip count n: the loop also counts its steps
      and places the snapshots online (a rule on the step index), and the backward
      sweep is a while loop running Griewank & Walther's binomial (Revolve) schedule
      on the intervals between them, its next action computed in the graph
      (symgraph.while_checkpoint). It evaluates the body n + R + n times in all (R
      recomputed steps: `while_schedule_counts`); memory is s + 1 carries and one
      step's values. Grad of grad, hvp and hessian work.
    - `max_steps=N`: the loop is a `scan` of N steps whose body is
      `sg.cond(cond_fun(val), body_fun, identity)`: reverse mode stores N steps'
      residuals, and the loop stops after N steps if the condition is still true
      then (running it raises `LoopLimitError`).
    - both: a checkpointed loop (it runs only the steps it takes, reverse mode keeps
      s snapshots) that raises `LoopLimitError` if it is still running after N steps.

    Args:
        cond_fun: `cond_fun(val) -> bool scalar`.
        body_fun: `body_fun(val) -> val`, keeping val's structure, shapes and dtypes.
        init_val: the initial value (pytree of arrays or numbers).
        max_steps: None, or an int >= 0 bounding the number of steps.
        checkpoints: None, or an int s >= 1: the number of carry snapshots reverse mode keeps
            (the initial carry's included).

    Returns:
        The final value.

    Raises:
        DTypeError, ShapeError: cond_fun does not return a bool scalar; body_fun changes a leaf's
            dtype or shape (named).
        SymgraphError: body_fun changes the structure; a bad max_steps or checkpoints (s < 1, not an
            int).

    References:
        Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000).
    """
    if checkpoints is not None:
        if not isinstance(checkpoints, (int, np.integer)) or isinstance(checkpoints, bool) or checkpoints < 1:
            raise SymgraphError(f"while_loop: checkpoints must be an int >= 1 (the number of carry snapshots "
                                f"reverse mode keeps), got {checkpoints!r}")
        checkpoints = int(checkpoints)
    if max_steps is not None:
        if not isinstance(max_steps, (int, np.integer)) or isinstance(max_steps, bool) or max_steps < 0:
            raise SymgraphError(f"while_loop: max_steps must be an int >= 0 or None, got {max_steps!r}")

        name = f"while_loop({_fname(body_fun)})"
        message = (f"{name}: the loop is still running after max_steps={int(max_steps)} steps (cond_fun is still "
                   f"true); raise max_steps, or check that the loop ends")
        return bounded_while(cond_fun, body_fun, init_val, int(max_steps), message, checkpoints=checkpoints)
    if tracing_active() or _has_nodes(init_val):
        return _while(cond_fun, body_fun, init_val, checkpoints)
    return run(lambda v: _while(cond_fun, body_fun, v, checkpoints), (init_val,), f"while_loop({_fname(body_fun)})")


def bounded_while(cond_fun: Callable, body_fun: Callable, init_val: Any, max_steps: int, message: str,
                  location: Any = None, checkpoints: int | None = None) -> Any:
    """`while_loop` with a bound: a `scan` of `max_steps` steps over `cond(cond_fun(val), body_fun, identity)`.

    With `checkpoints=s`, a checkpointed `while_loop` instead (`cond_fun(val) and steps < max_steps`,
    reverse mode with s snapshots, only the steps taken run). The final value goes through a `guard`
    on `not cond_fun(final)`: if the condition is still true after `max_steps` steps, running the graph
    (evaluator or compiled) raises `LoopLimitError(message)` at `location` (default: the caller's user
    line). Derivatives pass through the guard (their values are checked too), so a gradient is never
    taken silently through a loop that was cut off.
    """
    if location is None:
        location = user_location()
    if not (tracing_active() or _has_nodes(init_val)):
        return run(lambda v: bounded_while(cond_fun, body_fun, v, max_steps, message, location, checkpoints),
                   (init_val,), f"while_loop({_fname(body_fun)})")

    if checkpoints is not None:
        def going(c: Any) -> Any:
            return L.binary("logical_and", L.asnode(cond_fun(c[0])), L.binary("lt", c[1], np.int64(max_steps)))

        def counted(c: Any) -> Any:
            return body_fun(c[0]), L.binary("add", c[1], np.int64(1))

        going.__name__, counted.__name__ = _fname(cond_fun), _fname(body_fun)
        final = _while(going, counted, (init_val, np.int64(0)), checkpoints)[0]
    else:
        def step(c: Any, _: Any) -> tuple[Any, None]:
            return cond(cond_fun(c), body_fun, lambda v: v, c), None

        step.__name__ = _fname(body_fun)
        final = scan(step, init_val, length=max_steps)[0]
    leaves, tree = tree_flatten(final)
    ok = L.unary("logical_not", L.asnode(cond_fun(final)), float_op=False)
    b = current_builder()
    attrs = {"message": message, "location": location}
    return tree_unflatten(tree, [b.make(OPS["guard"], (L.asnode(x), ok), attrs) for x in leaves])


def _while(cond_fun: Callable, body_fun: Callable, init_val: Any, checkpoints: int | None = None) -> Any:
    name = f"while_loop({_fname(body_fun)})"
    leaves, tree = tree_flatten(init_val)
    paths = tree_paths(tree)
    init = [_leaf_node(c, f"{name}: init_val{p}") for c, p in zip(leaves, paths)]
    cph = [placeholder(c.shape, c.dtype, f"carry{p}") for c, p in zip(init, paths)]
    pred = cond_fun(tree_unflatten(tree, cph))
    pred = pred if isinstance(pred, Node) else np.asarray(pred)
    if pred.dtype != np.bool_ or pred.shape != ():
        err = DTypeError if pred.dtype != np.bool_ else ShapeError
        raise err(f"{name}: cond_fun returned {pred.dtype}{list(pred.shape)}; it must return a bool scalar")
    pred = L.asnode(pred)
    new = body_fun(tree_unflatten(tree, cph))
    nl, nt = tree_flatten(new)
    if nt != tree:
        raise SymgraphError(f"{name}: body_fun returned a value of structure {nt}; the loop value's structure is "
                            f"{tree} (the body must keep it)")
    outs = []
    for o, c, p in zip(nl, cph, paths):
        if isinstance(o, numbers.Number) and not isinstance(o, (np.generic, complex)):
            o = L.constant(np.asarray(o, dtype=c.dtype))
        o = _leaf_node(o, f"{name}: the value{p} that body_fun returned")
        if o.shape != c.shape:
            raise ShapeError(f"{name}: body_fun changed the shape of val{p}: it goes in as {c.shape} and comes out "
                             f"as {o.shape}; a loop carry keeps its shape")
        if o.dtype != c.dtype:
            raise DTypeError(f"{name}: body_fun changed the dtype of val{p}: it goes in as {c.dtype} and comes out "
                             f"as {o.dtype}; a loop carry keeps its dtype")
        outs.append(o)
    captured, cap_ph, flat = capture([pred] + outs, cph)
    from .ir import Graph

    carries, body_outs = list(cph), flat[1:]
    if checkpoints is not None:  # the step counter and the online snapshots (symgraph.while_checkpoint)
        from .while_checkpoint import checkpoint_carries

        e_ph, e_out, e_init = checkpoint_carries(cph, init, checkpoints)
        carries += e_ph
        body_outs = body_outs + e_out
        init = init + e_init
    ins = carries + cap_ph
    region = WhileRegion(Graph(ins, flat[:1], name=_fname(cond_fun)), Graph(ins, body_outs, name=_fname(body_fun)),
                         len(carries), name=name, checkpoints=checkpoints)
    nodes = init + captured
    return tree_unflatten(tree, [while_node(nodes, region, j) for j in range(len(cph))])
