"""`symgraph.scipy.integrate.odeint`: an adaptive Dormand–Prince 5(4) solver built on the loop primitives.

The signature is `jax.experimental.ode.odeint`'s (`func(y, t, *args)`, the
order of `scipy.integrate.odeint`'s arguments), and SciPy's keywords `args=(...)` and
`tfirst=` are accepted too. Each output interval is one
`sg.while_loop(..., max_steps=mxstep)` of adaptive steps, and the intervals are
one `sg.scan`, so the graph does not grow with the number of steps or of output
times, it compiles natively, and it differentiates in both modes through the
solver itself (discretize-then-differentiate: the derivative of the computed
solution, with the accepted step sizes held fixed). This module is imported
explicitly (`import symgraph.scipy.integrate`): it sits above the loop
primitives, which the rest of `symgraph.scipy` does not need.

References:
    J. R. Dormand, P. J. Prince, "A family of embedded Runge-Kutta formulae",
    J. Comp. Appl. Math. 6 (1980) 19-26 (the tableau); E. Hairer, S. P. Norsett,
    G. Wanner, Solving Ordinary Differential Equations I (2nd ed., Springer 1993),
    II.4 (error norm, step-size control, the starting step size).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..control import bounded_while, scan
from ..errors import DTypeError, ShapeError, SymgraphError, user_location
from ..ir import Node
from ..transforms import stop_gradient

__all__ = ["odeint"]

# Dormand-Prince 5(4): nodes, stages, 5th-order weights (= the last stage row: FSAL), error weights (5th - 4th)
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_A = ((),
      (1 / 5,),
      (3 / 40, 9 / 40),
      (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
      (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_B = _A[6] + (0.0,)
_E = (35 / 384 - 5179 / 57600, 0.0, 500 / 1113 - 7571 / 16695, 125 / 192 - 393 / 640,
      -2187 / 6784 + 92097 / 339200, 11 / 84 - 187 / 2100, -1 / 40)
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0


def _rms(x: Any) -> Any:
    return np.sqrt(np.mean(x * x))


def _check_options(rtol: float, atol: float, mxstep: Any, checkpoints: Any) -> None:
    """Raise SymgraphError for a bad mxstep, tolerance or checkpoints (odeint's)."""
    if checkpoints is not None and (not isinstance(checkpoints, (int, np.integer)) or isinstance(checkpoints, bool)
                                    or checkpoints < 1):
        raise SymgraphError(f"odeint: checkpoints must be an int >= 1 or None, got {checkpoints!r}")
    if not isinstance(mxstep, (int, np.integer)) or isinstance(mxstep, bool) or mxstep < 1:
        raise SymgraphError(f"odeint: mxstep must be an int >= 1, got {mxstep!r}")
    if not (rtol >= 0 and atol >= 0 and rtol + atol > 0):
        raise SymgraphError(f"odeint: rtol and atol must be >= 0 and not both 0, got rtol={rtol}, atol={atol}")


def _extra_arguments(fargs: tuple, args: Any) -> tuple:
    """func's extra arguments: JAX's positional ones or SciPy's `args=` (a non-tuple is one argument)."""
    if not isinstance(args, tuple):
        args = (args,)
    if fargs and args:
        raise SymgraphError("odeint: give func's extra arguments positionally (JAX: odeint(func, y0, t, a, b)) or as "
                            "args=(a, b) (SciPy), not both")
    return fargs or args


def odeint(func: Callable, y0: Any, t: Any, *fargs: Any, args: Any = (), rtol: float = 1.4e-8,
           atol: float = 1.4e-8, mxstep: int = 500, checkpoints: int | None = None, tfirst: bool = False) -> Any:
    """Solve `dy/dt = func(y, t, *args)` from `y(t[0]) = y0`, returning y at every time in `t`.

    Dormand–Prince 5(4) with adaptive steps (Hairer et al.'s error norm and
    step-size control, and their starting step size); steps are shortened to
    land on each output time, so no interpolation is involved.

    Args:
        func: `func(y, t, *args) -> dy/dt`, an array of y's shape and dtype,
            written with NumPy operations.
        y0: the initial state, a float array (any shape) or number.
        t: the output times, a 1-d increasing array (t[0] is the initial time).
        *fargs: extra arguments of func (arrays or pytrees; differentiable), JAX's spelling
            (`jax.experimental.ode.odeint(func, y0, t, *args)`).
        args: the same as SciPy spells it, a keyword: `odeint(func, y0, t, args=(a, b))` calls
            `func(y, t, a, b)` (a non-tuple is one argument). Give fargs or args, not both.
        tfirst: SciPy's: when True, func is called as `func(t, y, *args)`.
        rtol, atol: relative and absolute tolerances of the local error
            (per component: atol + rtol * max(|y_n|, |y_n+1|), RMS norm).
        mxstep: the most steps (accepted or rejected) per output interval.
        checkpoints: None, or s >= 1: each interval is a `while_loop(..., max_steps=mxstep,
            checkpoints=s)`, which runs only the steps it takes and whose reverse mode keeps s
            snapshots of the solver's state (instead of `mxstep` steps of residuals).

    Returns:
        An array of shape `(len(t),) + y0.shape`, y0's dtype; row 0 is y0.

    Raises:
        ShapeError: t is not 1-d or is empty; func returns another shape.
        DTypeError: y0 is not a float array; func returns another dtype.
        SymgraphError: a bad mxstep, tolerance or checkpoints.
        LoopLimitError: at run time, an interval that needs more than `mxstep`
            steps (a stiff problem, or tolerances too tight for the dtype).

    Differentiable in both modes with respect to y0, args (and t), to any
    order, evaluated or compiled; without `checkpoints` reverse mode stores
    `mxstep` steps of residuals per interval (the loop runs `mxstep` masked steps).
    """
    _check_options(rtol, atol, mxstep, checkpoints)
    where = user_location()
    args = _extra_arguments(fargs, args)
    if not isinstance(y0, Node):
        y0 = np.asarray(y0)
        if y0.dtype.kind in "biu":
            y0 = y0.astype(np.float64)
    if y0.dtype.kind != "f":
        raise DTypeError(f"odeint: y0 has dtype {y0.dtype}; it must be a float array")
    dtype = np.dtype(y0.dtype)
    if not isinstance(t, Node):
        t = np.asarray(t, dtype=dtype)
    if t.ndim != 1 or t.shape[0] < 1:
        raise ShapeError(f"odeint: t has shape {tuple(t.shape)}; it must be a non-empty 1-d array of times")
    msg = (f"odeint: more than mxstep={int(mxstep)} steps in one output interval (a stiff problem, or "
           f"rtol={rtol:g}/atol={atol:g} too tight for {dtype}); raise mxstep or loosen the tolerances")

    def f(y: Any, s: Any) -> Any:
        d = func(s, y, *args) if tfirst else func(y, s, *args)
        if tuple(np.shape(d)) != tuple(np.shape(y)):
            raise ShapeError(f"odeint: func returned shape {tuple(np.shape(d))} for a state of shape "
                             f"{tuple(np.shape(y))}")
        if not isinstance(d, Node):
            d = np.asarray(d, dtype=dtype)
        elif d.dtype != dtype:
            d = d.astype(dtype)
        return d

    def scale(a: Any, b: Any) -> Any:
        return atol + rtol * np.maximum(np.abs(a), np.abs(b))

    t0 = t[0]
    f0 = f(y0, t0)
    # starting step size (Hairer et al. II.4, order 5)
    sc = stop_gradient(scale(y0, y0))
    d0, d1 = stop_gradient(_rms(y0 / sc)), stop_gradient(_rms(f0 / sc))
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.maximum(d1, 1e-300)).astype(dtype)
    f1 = f(y0 + h0 * f0, t0 + h0)
    d2 = stop_gradient(_rms((f1 - f0) / sc)) / h0
    h1 = np.where((d1 <= 1e-15) & (d2 <= 1e-15), np.maximum(1e-6, h0 * 1e-3),
                  (0.01 / np.maximum(np.maximum(d1, d2), 1e-300)) ** (1.0 / 5.0)).astype(dtype)
    h_init = stop_gradient(np.minimum(100.0 * h0, h1))

    def rk_step(y: Any, fy: Any, s: Any, h: Any) -> tuple[Any, Any, Any]:
        k = [fy]
        for i in range(1, 7):
            yi = y + h * sum(a * kj for a, kj in zip(_A[i], k) if a != 0.0)
            k.append(f(yi, s + _C[i] * h))
        y1 = y + h * sum(b * kj for b, kj in zip(_B, k) if b != 0.0)
        err = h * sum(e * kj for e, kj in zip(_E, k) if e != 0.0)
        return y1, k[6], err

    def interval(carry: tuple, t_end: Any) -> tuple[tuple, Any]:
        def running(c: tuple) -> Any:
            return c[2] < t_end

        def step(c: tuple) -> tuple:
            y, fy, s, h = c
            last = s + h >= t_end
            hs = np.where(last, t_end - s, h)
            y1, f1, err = rk_step(y, fy, s, hs)
            ratio = stop_gradient(_rms(err / scale(y, y1)))
            accept = ratio <= 1.0
            factor = np.clip(_SAFETY * np.maximum(ratio, 1e-10) ** -0.2, _MIN_FACTOR, _MAX_FACTOR)
            s1 = np.where(last, t_end, s + hs)
            h_next = stop_gradient((hs * np.where(accept, np.minimum(factor, _MAX_FACTOR), np.minimum(factor, 1.0)))
                                   .astype(dtype))
            return (np.where(accept, y1, y), np.where(accept, f1, fy), np.where(accept, s1, s), h_next)

        out = bounded_while(running, step, carry, int(mxstep), msg, where,
                            checkpoints=None if checkpoints is None else int(checkpoints))
        return out, out[0]

    _, ys = scan(interval, (y0, f0, t0, h_init), t[1:])
    return np.concatenate([np.reshape(y0, (1,) + tuple(np.shape(y0))), ys], axis=0)
