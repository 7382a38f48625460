"""Optimizers as pure functions over pytrees: SGD (momentum), Adam, AdamW; learning-rate schedules.

An optimizer is a pair of functions, `init(params) -> state` and
`update(grads, state, params) -> (params, state)`. Both are written with
`symgraph.numpy` operations, so they run eagerly on NumPy arrays and trace
into the same graph as the forward and backward sweeps when called inside a
compiled training step:

    opt = sg.optim.adamw(lr=1e-3, weight_decay=1e-2)
    state = opt.init(params)

    @functools.partial(sg.compile, donate_argnums=(0, 1))
    def step(params, state, batch):
        loss, grads = sg.value_and_grad(loss_fn)(params, batch)
        params, state = opt.update(grads, state, params)
        return params, state, loss

The state is a dict of arrays only (moment pytrees shaped like the
parameters, plus an int32 step counter `"step"`), so it can be donated and
updated in place by `sg.compile`. A learning rate is a float or a schedule:
a plain function of the step counter (0 for the first update) returning the
rate; schedules are built from `symgraph.numpy` operations and so work on
Python ints, NumPy scalars and traced values alike.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Union

import numpy as np

from . import numpy as snp
from .ir import Node
from .tree import tree_flatten, tree_map, tree_unflatten

__all__ = [
    "Optimizer", "sgd", "adam", "adamw", "apply_updates", "global_norm", "clip_by_global_norm",
    "constant_schedule", "linear_warmup", "cosine_decay", "exponential_decay", "warmup_cosine",
]

Schedule = Callable[[Any], Any]
LearningRate = Union[float, Schedule]


class Optimizer(NamedTuple):
    """An optimizer: a pair of pure functions.

    Attributes:
        init: `init(params) -> state`; params is a pytree of float arrays. The
            state is a dict of arrays (NumPy, of the parameters' dtypes, plus
            an int32 scalar "step").
        update: `update(grads, state, params) -> (new_params, new_state)`;
            grads has the structure, shapes and dtypes of params.
    """

    init: Callable[[Any], dict]
    update: Callable[[Any, dict, Any], tuple[Any, dict]]


# ----- helpers -----


def _zeros_like_tree(params: Any) -> Any:
    return tree_map(lambda p: np.zeros(np.shape(p), dtype=_dtype(p)), params)


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, Node) else tuple(np.shape(x))


def _dtype(x: Any) -> np.dtype:
    return x.dtype if isinstance(x, (Node, np.ndarray, np.generic)) else np.asarray(x).dtype


def _as(value: Any, like: Any) -> Any:
    """`value` (a Python number, NumPy scalar or 0-d node) in the dtype of `like`.

    Keeps float32 models in float32 when a schedule computes in float64.
    """
    if isinstance(value, Node):
        return snp.astype(value, _dtype(like)) if value.dtype != _dtype(like) else value
    if isinstance(value, (int, float)) and not isinstance(value, np.generic):
        return value  # a Python number is weakly typed: takes the array's dtype (NEP 50)
    return np.asarray(value, dtype=_dtype(like))


def _rate(lr: LearningRate, step: Any) -> Any:
    return lr(step) if callable(lr) else lr


def _check_same_structure(grads: Any, params: Any, who: str) -> None:
    gl, gt = tree_flatten(grads)
    pl, pt = tree_flatten(params)
    if gt != pt:
        raise ValueError(f"{who}: grads have structure {gt}, params have {pt}")
    for i, (g, p) in enumerate(zip(gl, pl)):
        gs, ps = _shape(g), _shape(p)
        if gs != ps:
            raise ValueError(f"{who}: gradient leaf {i} has shape {gs}, its parameter has shape {ps}")


def _next_step(step: Any) -> Any:
    return snp.add(step, np.int32(1)) if isinstance(step, Node) else np.asarray(np.asarray(step) + 1, dtype=np.int32)


def _mask_leaves(mask: Any, params: Any) -> list[bool]:
    """Per-leaf booleans from a mask: None (all True), a callable params -> pytree of bools, or a pytree."""
    n = len(tree_flatten(params)[0])
    if mask is None:
        return [True] * n
    m = mask(params) if callable(mask) else mask
    leaves, _ = tree_flatten(m)
    if len(leaves) != n:
        raise ValueError(f"weight-decay mask has {len(leaves)} leaves, params have {n}")
    return [bool(v) for v in leaves]


def apply_updates(params: Any, updates: Any) -> Any:
    """params + updates, leaf-wise (dtypes of params kept)."""
    return tree_map(lambda p, u: snp.add(p, _as_array(u, p)), params, updates)


def _as_array(u: Any, like: Any) -> Any:
    if isinstance(u, Node):
        return snp.astype(u, _dtype(like)) if u.dtype != _dtype(like) else u
    return np.asarray(u, dtype=_dtype(like))


def global_norm(tree: Any) -> Any:
    """sqrt of the sum of squares of all leaves (a scalar of the leaves' dtype).

    Args:
        tree: a pytree of float arrays or traced values.

    Returns:
        0-d array (or node): the Euclidean norm of the concatenated leaves.
    """
    leaves = tree_flatten(tree)[0]
    total = None
    for x in leaves:
        s = snp.sum(snp.multiply(x, x))
        total = s if total is None else snp.add(total, s)
    if total is None:
        return np.float64(0.0)
    return snp.sqrt(total)


def clip_by_global_norm(grads: Any, max_norm: float) -> Any:
    """Scale all leaves by min(1, max_norm / global_norm(grads)) (gradient clipping).

    Args:
        grads: a pytree of float arrays or traced values.
        max_norm: the largest allowed global norm (> 0).

    Returns:
        The scaled pytree (same structure, shapes, dtypes).

    References:
        Pascanu, Mikolov & Bengio, "On the difficulty of training recurrent
        neural networks", ICML 2013 (norm clipping).
    """
    if max_norm <= 0:
        raise ValueError(f"clip_by_global_norm: max_norm must be positive, got {max_norm}")
    norm = global_norm(grads)
    # max_norm / max(norm, max_norm): 1 when norm <= max_norm, and never divides by 0.
    scale = snp.divide(max_norm, snp.maximum(norm, max_norm))
    return tree_map(lambda g: snp.multiply(g, _as(scale, g)), grads)


# ----- optimizers -----


def sgd(lr: LearningRate, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0) -> Optimizer:
    """Stochastic gradient descent with optional (heavy-ball or Nesterov) momentum.

    With momentum mu: v <- mu v + g, then p <- p - lr v (or p - lr (g + mu v)
    with Nesterov). With weight_decay wd the gradient is g + wd p (coupled L2).

    Args:
        lr: learning rate (float) or schedule step -> rate.
        momentum: mu in [0, 1); 0 means plain SGD (no state besides the step).
        nesterov: use Nesterov momentum.
        weight_decay: coupled L2 coefficient added to the gradient.

    Returns:
        An Optimizer; its state is {"step": int32 scalar, "velocity": pytree} (no
        "velocity" when momentum is 0).

    References:
        Polyak, "Some methods of speeding up the convergence of iteration
        methods", 1964; Sutskever et al., "On the importance of initialization
        and momentum in deep learning", ICML 2013 (the form used by PyTorch).
    """
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"sgd: momentum must be in [0, 1), got {momentum}")
    if nesterov and momentum == 0.0:
        raise ValueError("sgd: nesterov=True needs momentum > 0")

    def init(params: Any) -> dict:
        state = {"step": np.zeros((), np.int32)}
        if momentum:
            state["velocity"] = _zeros_like_tree(params)
        return state

    def update(grads: Any, state: dict, params: Any) -> tuple[Any, dict]:
        _check_same_structure(grads, params, "sgd.update")
        step = state["step"]
        rate = _rate(lr, step)
        if weight_decay:
            grads = tree_map(lambda g, p: snp.add(g, snp.multiply(p, weight_decay)), grads, params)
        new_state = {"step": _next_step(step)}
        if momentum:
            vel = tree_map(lambda v, g: snp.add(snp.multiply(v, momentum), g), state["velocity"], grads)
            new_state["velocity"] = vel
            if nesterov:
                direction = tree_map(lambda g, v: snp.add(g, snp.multiply(v, momentum)), grads, vel)
            else:
                direction = vel
        else:
            direction = grads
        new_params = tree_map(lambda p, d: snp.subtract(p, snp.multiply(d, _as(rate, p))), params, direction)
        return new_params, new_state

    return Optimizer(init, update)


def _adam_like(name: str, lr: LearningRate, b1: float, b2: float, eps: float, weight_decay: float,
               decoupled: bool, mask: Any) -> Optimizer:
    if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
        raise ValueError(f"{name}: betas must be in [0, 1), got b1={b1}, b2={b2}")
    if eps <= 0.0:
        raise ValueError(f"{name}: eps must be positive, got {eps}")

    def init(params: Any) -> dict:
        return {"step": np.zeros((), np.int32), "mu": _zeros_like_tree(params), "nu": _zeros_like_tree(params)}

    def update(grads: Any, state: dict, params: Any) -> tuple[Any, dict]:
        _check_same_structure(grads, params, f"{name}.update")
        step = state["step"]
        rate = _rate(lr, step)
        t = _next_step(step)
        # Bias corrections 1 - b^t as scalars, in float64 (on the host when t is
        # concrete), cast to each leaf's dtype: step size a = lr / (1 - b1^t)
        # and s = sqrt(1 - b2^t).
        if isinstance(t, Node):
            # 1 - b^t = -expm1(t log b): no cancellation for b near 1.
            tf = snp.astype(t, np.float64)
            bc1 = snp.negative(snp.expm1(snp.multiply(tf, math.log(b1)))) if b1 > 0 else 1.0
            bc2 = snp.negative(snp.expm1(snp.multiply(tf, math.log(b2)))) if b2 > 0 else 1.0
        else:
            bc1, bc2 = 1.0 - b1 ** int(t), 1.0 - b2 ** int(t)
        a_all = snp.divide(rate, bc1)
        s_all = snp.sqrt(bc2)
        decay = _mask_leaves(mask, params)
        pl, ptree = tree_flatten(params)
        gl = tree_flatten(grads)[0]
        ml = tree_flatten(state["mu"])[0]
        vl = tree_flatten(state["nu"])[0]
        new_p, new_m, new_v = [], [], []
        for p, g, m, v, dec in zip(pl, gl, ml, vl, decay):
            if weight_decay and dec and not decoupled:
                g = snp.add(g, snp.multiply(p, weight_decay))
            m = snp.add(snp.multiply(m, b1), snp.multiply(g, 1.0 - b1))
            v = snp.add(snp.multiply(v, b2), snp.multiply(snp.multiply(g, g), 1.0 - b2))
            # lr * mhat / (sqrt(vhat) + eps) with mhat = m / bc1, vhat = v / bc2;
            # the step size folds the corrections into one scalar per leaf.
            a = _as(a_all, p)
            denom = snp.add(snp.divide(snp.sqrt(v), _as(s_all, p)), eps)
            upd = snp.multiply(snp.divide(m, denom), a)
            if weight_decay and dec and decoupled:
                upd = snp.add(upd, snp.multiply(p, snp.multiply(_as(rate, p), weight_decay)))
            new_p.append(snp.subtract(p, upd))
            new_m.append(m)
            new_v.append(v)
        return tree_unflatten(ptree, new_p), {"step": t, "mu": tree_unflatten(ptree, new_m),
                                              "nu": tree_unflatten(ptree, new_v)}

    return Optimizer(init, update)


def adam(lr: LearningRate = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         weight_decay: float = 0.0) -> Optimizer:
    """Adam: adaptive moment estimation with bias correction.

    m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g²;
    p <- p - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps), t = 1, 2, ...
    A nonzero weight_decay adds the coupled L2 term wd p to g (as torch.optim.Adam).

    Args:
        lr: learning rate (float) or schedule step -> rate (step 0 first).
        b1: exponential decay rate of the first moment, in [0, 1).
        b2: exponential decay rate of the second moment, in [0, 1).
        eps: added to the denominator (> 0).
        weight_decay: coupled L2 coefficient.

    Returns:
        An Optimizer; state {"step": int32, "mu": pytree, "nu": pytree}.

    References:
        Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015.
    """
    return _adam_like("adam", lr, b1, b2, eps, weight_decay, decoupled=False, mask=None)


def adamw(lr: LearningRate = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-2, mask: Any = None) -> Optimizer:
    """AdamW: Adam with decoupled weight decay p <- p - lr (adam_step + wd p).

    Args:
        lr: learning rate (float) or schedule step -> rate.
        b1: first-moment decay, as in `adam`.
        b2: second-moment decay, as in `adam`.
        eps: denominator term, as in `adam`.
        weight_decay: decoupled decay coefficient wd (multiplied by lr, as in
            torch.optim.AdamW and optax.adamw).
        mask: which leaves decay: None (all), a pytree of bools shaped like
            params, or a function params -> such a pytree (e.g. decay only
            matrices: `lambda p: sg.tree_map(lambda x: x.ndim >= 2, p)`).

    Returns:
        An Optimizer; state {"step": int32, "mu": pytree, "nu": pytree}.

    References:
        Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019.
    """
    return _adam_like("adamw", lr, b1, b2, eps, weight_decay, decoupled=True, mask=mask)


# ----- learning-rate schedules: plain functions of the step (0 for the first update) -----


def constant_schedule(value: float) -> Schedule:
    """step -> value."""
    def schedule(step: Any) -> Any:
        del step
        return value

    return schedule


def _float(step: Any) -> Any:
    """The step as a float64 scalar (schedules compute in float64; updates cast to each leaf's dtype)."""
    return snp.astype(step, np.float64) if isinstance(step, Node) else float(step)


def linear_warmup(peak: float, warmup_steps: int, start: float = 0.0) -> Schedule:
    """step -> start + (peak - start) min(1, step / warmup_steps)."""
    if warmup_steps <= 0:
        raise ValueError(f"linear_warmup: warmup_steps must be positive, got {warmup_steps}")

    def schedule(step: Any) -> Any:
        frac = snp.minimum(snp.divide(_float(step), float(warmup_steps)), 1.0)
        return snp.add(start, snp.multiply(frac, peak - start))

    return schedule


def cosine_decay(init: float, decay_steps: int, final: float = 0.0) -> Schedule:
    """step -> final + (init - final) (1 + cos(pi min(step, T) / T)) / 2, T = decay_steps.

    References:
        Loshchilov & Hutter, "SGDR: Stochastic Gradient Descent with Warm
        Restarts", ICLR 2017 (one cycle, no restart).
    """
    if decay_steps <= 0:
        raise ValueError(f"cosine_decay: decay_steps must be positive, got {decay_steps}")

    def schedule(step: Any) -> Any:
        frac = snp.minimum(snp.divide(_float(step), float(decay_steps)), 1.0)
        cos = snp.multiply(snp.add(1.0, snp.cos(snp.multiply(frac, math.pi))), 0.5)
        return snp.add(final, snp.multiply(cos, init - final))

    return schedule


def warmup_cosine(peak: float, warmup_steps: int, total_steps: int, final: float = 0.0) -> Schedule:
    """Linear warmup from 0 to `peak` over warmup_steps, then cosine decay to `final` at total_steps."""
    if not 0 < warmup_steps < total_steps:
        raise ValueError(f"warmup_cosine: need 0 < warmup_steps < total_steps, got {warmup_steps}, {total_steps}")
    warm = linear_warmup(peak, warmup_steps)
    decay = cosine_decay(peak, total_steps - warmup_steps, final)

    def schedule(step: Any) -> Any:
        s = _float(step)
        after = decay(snp.maximum(snp.subtract(s, float(warmup_steps)), 0.0))
        return snp.where(snp.less(s, float(warmup_steps)), warm(s), after)

    return schedule


def exponential_decay(init: float, decay_rate: float, decay_steps: int) -> Schedule:
    """step -> init decay_rate^(step / decay_steps) (smooth, no staircase)."""
    if decay_steps <= 0 or decay_rate <= 0:
        raise ValueError("exponential_decay: decay_steps and decay_rate must be positive")
    k = math.log(decay_rate) / decay_steps

    def schedule(step: Any) -> Any:
        return snp.multiply(snp.exp(snp.multiply(_float(step), k)), init)

    return schedule
