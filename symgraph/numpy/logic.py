"""Elementwise comparisons, logical ops, `where`, NaN tests, and NumPy's bitwise ops restricted to bool masks."""

from __future__ import annotations

import numpy as _np

from typing import Any

from .. import lax as L
from ..errors import UnsupportedOpError
from ..ir import Node

__all__ = [
    "bitwise_and", "bitwise_or", "bitwise_xor", "equal", "greater", "greater_equal", "invert", "isfinite", "isinf",
    "isnan", "left_shift", "less", "less_equal", "logical_and", "logical_not", "logical_or", "not_equal",
    "right_shift", "signbit", "where",
]


def isnan(x: Any) -> Any:
    """NaN test (bool)."""
    return L.unary("isnan", x, float_op=False)


def _all_true_like(x: Any) -> Any:
    """True of x's shape (the finiteness of an integer or bool array)."""
    if isinstance(x, Node):
        return L.broadcast_to(L.constant(_np.asarray(True)), x.shape)
    return _np.ones(_np.shape(x), dtype=bool)


def _complex_parts(x: Any) -> Any:
    if L.result_dtype(x).kind == "c":
        z = x if isinstance(x, Node) else _np.asarray(x)
        return L.bind("real", z), L.bind("imag", z)
    return None


def isinf(x: Any) -> Any:
    """+-inf test (bool): |x| == inf, False for NaN and for integers; complex: either part infinite."""
    parts = _complex_parts(x)
    if parts is not None:
        return L.binary("logical_or", isinf(parts[0]), isinf(parts[1]))
    if L.result_dtype(x).kind != "f":
        return L.binary("ne", _all_true_like(x), True)
    return L.binary("eq", L.unary("abs", x, float_op=False), _np.inf)


def isfinite(x: Any) -> Any:
    """Finiteness test (bool): |x| < inf, False for NaN and +-inf, True for integers; complex: both parts."""
    parts = _complex_parts(x)
    if parts is not None:
        return L.binary("logical_and", isfinite(parts[0]), isfinite(parts[1]))
    if L.result_dtype(x).kind != "f":
        return _all_true_like(x)
    return L.binary("lt", L.unary("abs", x, float_op=False), _np.inf)


def signbit(x: Any) -> Any:
    """Whether the sign bit is set (bool): True for -0.0 and negative NaNs; x < 0 for integers."""
    return L.unary("signbit", x, float_op=False)


def _cmp(name: str, doc: str):
    def fn(x: Any, y: Any) -> Any:
        return L.binary(name, x, y)

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


less = _cmp("lt", "x < y (bool).")
less_equal = _cmp("le", "x <= y (bool).")
greater = _cmp("gt", "x > y (bool).")
greater_equal = _cmp("ge", "x >= y (bool).")
equal = _cmp("eq", "x == y (bool).")
not_equal = _cmp("ne", "x != y (bool).")


def logical_and(x: Any, y: Any) -> Any:
    """Boolean and."""
    return L.binary("logical_and", L.cast(x, bool), L.cast(y, bool))


def logical_or(x: Any, y: Any) -> Any:
    """Boolean or."""
    return L.binary("logical_or", L.cast(x, bool), L.cast(y, bool))


def logical_not(x: Any) -> Any:
    """Boolean not."""
    return L.unary("logical_not", L.cast(x, bool), float_op=False)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """Select x where condition, else y. The condition gets no derivative.

    Raises:
        UnsupportedOpError: for the one-argument form (data-dependent shape).
    """
    if x is None or y is None:
        raise UnsupportedOpError("np.where(condition) with one argument has a data-dependent shape")
    return L.where(condition, x, y)


def _bool_only(name: str, fn: Any, *xs: Any) -> Any:
    """`&`, `|`, `^`, `~` of bool operands (traced or not): the logical op; other dtypes raise."""
    if any(L.result_dtype(x).kind != "b" for x in xs):
        dts = ", ".join(str(L.result_dtype(x)) for x in xs)
        raise UnsupportedOpError(f"np.{name} of {dts} values is not supported: symgraph has no integer bit "
                                 f"operations (&, |, ^ and ~ work on bool masks)")
    return fn(*xs)


def bitwise_and(x: Any, y: Any) -> Any:
    """`x & y` of bool arrays (logical and). Integer bit operations are not supported (UnsupportedOpError)."""
    return _bool_only("bitwise_and", logical_and, x, y)


def bitwise_or(x: Any, y: Any) -> Any:
    """`x | y` of bool arrays (logical or). Integer bit operations are not supported (UnsupportedOpError)."""
    return _bool_only("bitwise_or", logical_or, x, y)


def bitwise_xor(x: Any, y: Any) -> Any:
    """`x ^ y` of bool arrays (x != y). Integer bit operations are not supported (UnsupportedOpError)."""
    return _bool_only("bitwise_xor", not_equal, x, y)


def invert(x: Any) -> Any:
    """`~x` of a bool array (logical not). Integer bit operations are not supported (UnsupportedOpError)."""
    return _bool_only("invert", logical_not, x)


def _no_shift(name: str):
    def fn(x: Any, y: Any) -> Any:
        raise UnsupportedOpError(f"np.{name} (<< and >>) of traced values is not supported: symgraph has no "
                                 f"integer bit operations")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"`np.{name}` of traced values: not supported (symgraph has no integer bit operations).\n\n"
                  f"Raises:\n    UnsupportedOpError: always.")
    return fn


left_shift = _no_shift("left_shift")
right_shift = _no_shift("right_shift")


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
    "less": less, "less_equal": less_equal, "greater": greater, "greater_equal": greater_equal, "equal": equal,
    "not_equal": not_equal, "logical_and": logical_and, "logical_or": logical_or, "logical_not": logical_not,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "signbit": signbit,
    "bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor,
    "invert": invert, "left_shift": left_shift, "right_shift": right_shift,
}

FUNCTIONS = {
    _np.where: where,
}
