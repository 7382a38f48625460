"""The SymgraphError hierarchy and the capture of the user's source line.

Every error symgraph raises on bad user input is a `SymgraphError` subclass.
Messages name the op, the argument position and the shapes or dtypes involved,
and end with the user's source line recorded at trace time.
"""

from __future__ import annotations

import builtins
import os
import sys
import functools
import threading
from typing import Any, Callable, NamedTuple, TypeVar

import numpy as np

__all__ = [
    "SymgraphError",
    "ShapeError",
    "DTypeError",
    "NonScalarOutputError",
    "TracerConversionError",
    "UnsupportedOpError",
    "FloatingPointError",
    "LinAlgError",
    "LoopLimitError",
    "SourceLocation",
    "user_location",
    "api_call",
]

F = TypeVar("F", bound=Callable[..., Any])

_PKG_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (__file__, os.path.join(os.path.dirname(__file__), "..", "codegen", "x"))
)


def _internal_dirs() -> tuple[str, ...]:
    import numpy

    # the standard library is where `os` is (sysconfig's paths cost ~2 ms to compute on first use)
    extra = (os.path.dirname(os.path.abspath(numpy.__file__)) + os.sep,
             os.path.dirname(os.path.abspath(os.__file__)) + os.sep)
    return _PKG_DIRS + extra


_INTERNAL: tuple[str, ...] | None = None
_FILE_INTERNAL: dict[str, bool] = {}  # code file name -> inside symgraph, codegen, numpy or the stdlib


def _is_internal(filename: str) -> bool:
    global _INTERNAL
    if _INTERNAL is None:
        _INTERNAL = _internal_dirs()
    r = _FILE_INTERNAL[filename] = filename.startswith(_INTERNAL) or filename.startswith(("<frozen", "<symgraph"))
    return r


class SourceLocation(NamedTuple):
    """A line of user code: file name, line number and function name.

    `call` names the public function (``np.linalg.inv``) the user called on that line when the
    node was built inside it (`api_call`), else None: an error found by one of the internal ops
    that function is made of names the function, not the op (`LinAlgError.at`).
    """

    filename: str
    lineno: int
    function: str
    call: str | None = None

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} (in {self.function})"


_override = threading.local()
_LOCATIONS: dict[tuple, SourceLocation] = {}  # (file, line, function) -> its SourceLocation, shared


def user_location(skip_internal: bool = True) -> SourceLocation | None:
    """Return the innermost stack frame outside symgraph, codegen and numpy.

    A pass that builds nodes on behalf of an earlier node (the VJP of a
    forward node, a recomputed copy) sets an override with
    `symgraph.ir.source_location`, so that the new nodes point at the same
    user line as the node they derive from.

    Returns:
        The location; when the whole stack is internal, the default that
        `symgraph.ir.default_location` set (the `symgraph` command: the traced
        function's line), else None.
    """
    loc = getattr(_override, "loc", None)
    if loc is not None:
        return loc
    call = getattr(_override, "call", None)
    known = _FILE_INTERNAL
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        internal = known.get(fn)
        if internal is None:
            internal = _is_internal(fn)
        if not (skip_internal and internal):
            key = (fn, f.f_lineno, code.co_name, call)
            loc = _LOCATIONS.get(key)
            if loc is None:
                loc = _LOCATIONS[key] = SourceLocation(*key)
            return loc
        f = f.f_back
    return getattr(_override, "default", None)


def api_call(name: str) -> Callable[[F], F]:
    """Decorate a public function so that the nodes it builds record `name` as their call.

    While the function runs, `user_location` returns the user's line with ``call=name``; the
    outermost decorated function wins (``np.linalg.inv`` built on ``solve`` stays ``inv``). The
    evaluator and compiled code then report a failure on values inside it (a singular matrix
    found by an internal triangular solve) as `name`'s (`LinAlgError.at`).
    """
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            if getattr(_override, "call", None) is not None:
                return fn(*args, **kwargs)
            _override.call = name
            try:
                return fn(*args, **kwargs)
            finally:
                _override.call = None
        return inner  # type: ignore[return-value]
    return wrap


class SymgraphError(Exception):
    """Base class of every error symgraph raises for bad user input.

    Args:
        message: what went wrong, naming the op, argument and shapes/dtypes.
        location: the user's source line; captured from the stack when omitted.
    """

    def __init__(self, message: str, location: SourceLocation | None = None):
        if location is None:
            location = user_location()
        self.location = location
        self.message = message
        if location is not None:
            message = f"{message}\n  at {location}"
        super().__init__(message)


class ShapeError(SymgraphError, ValueError):
    """Operand shapes that do not broadcast or contract, or a wrong argument shape."""


class DTypeError(SymgraphError, TypeError):
    """An integer/bool input where a derivative is requested, or disallowed dtypes."""


class NonScalarOutputError(SymgraphError, TypeError):
    """`grad` of a function whose output is not a scalar."""


class TracerConversionError(SymgraphError, TypeError):
    """A traced value used where Python needs a concrete value (if, float(), ...)."""


class UnsupportedOpError(SymgraphError, TypeError):
    """A NumPy function, argument or derivative that symgraph has no rule for."""


class FloatingPointError(SymgraphError, builtins.FloatingPointError):
    """A NaN or inf that a node produced, found with `config.debug_nans` (see `symgraph.debugging`).

    Also a builtin `FloatingPointError` (what `np.errstate(all="raise")` raises).

    Attributes:
        node: the first node that produced it (None when the backend's arithmetic did and NumPy's does not).
        op: its op name; role: forward, backward, tangent or recomputed; location: the user's line;
        origin: for a node built by a derivative rule, the forward op whose derivative it is;
        kind: "NaN" or "inf".
    """

    def __init__(self, message: str, location: SourceLocation | None = None, *, node: object = None,
                 op: str | None = None, role: str | None = None, origin: str | None = None, kind: str = "NaN"):
        super().__init__(message, location)
        self.node = node
        self.op = op
        self.role = role
        self.origin = origin
        self.kind = kind


class LoopLimitError(SymgraphError, RuntimeError):
    """A bounded loop that needed more steps than its bound: `sg.while_loop(..., max_steps=N)` whose
    condition is still true after N steps, or `symgraph.scipy.integrate.odeint` reaching `mxstep` steps
    in one output interval. Raised at run time by the evaluator and by compiled code (a flag the loop
    computes, read after the call); the message names the bound and ends with the user's line."""


class LinAlgError(SymgraphError, np.linalg.LinAlgError):
    """A linear-algebra routine that cannot give a result: a non-finite matrix, or LAPACK's info != 0
    (an SVD or eigensolver that did not converge), a singular matrix in a solve, a matrix that is not
    positive definite in a Cholesky factorization. Also a `numpy.linalg.LinAlgError`, so code written
    for NumPy catches it. Raised by the evaluator, by eager calls and by compiled code (from LAPACK's
    `info`, after the call); the message names the op and ends with the user's line."""

    def at(self, location: SourceLocation | None, role: str | None = None) -> "LinAlgError":
        """The same error pointing at `location` (the line of the node that failed).

        An error already pointed at a node (inside a loop body that a region node evaluates) is returned
        as it is: the innermost node's line is the precise one. When the node was built inside a public function (`location.call`, see `api_call`) whose
        message names an internal op ("triangular_solve: singular matrix ..."), the message names
        the function instead and says which internal op found the failure, and whether it was in
        the function's derivative (`role` "backward" or "tangent").
        """
        if location is None or getattr(self, "pinned", False):  # pinned: at a loop body's node already
            return self
        message = self.message
        call = location.call
        if call is not None and not message.startswith(call):
            op, sep, rest = message.partition(": ")
            deriv = " (in its derivative)" if role in ("backward", "tangent") else ""
            if sep and op != call.rpartition(".")[2]:
                message = f"{call}{deriv}: {rest} (found by its internal step {op})"
            elif sep:
                message = f"{call}{deriv}: {rest}"
        err = type(self)(message, location)
        err.pinned = True  # the innermost node's line wins (a region's evaluation re-raises through its node)
        return err
