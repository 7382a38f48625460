"""The NumPy name tables that tracing dispatches NumPy's protocols through.

`UFUNCS` maps a ufunc's name to its function in this package
(`__array_ufunc__`); `FUNCTIONS` maps a NumPy function to its function here
(`__array_function__`). Each module of the package declares the names it
implements in its own `UFUNCS` and `FUNCTIONS` at its end; this module merges
them and refuses a name claimed twice. A new module is added to `MODULES`.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    along_axis, arithmetic, base, complex_numbers, creation, decompositions, editing, elementary, factorizations, fft, layout,
    linear_algebra, logic,
    nn, reductions, sampled, sorting, statistics, structural, windows,
)

MODULES: tuple[ModuleType, ...] = (
    arithmetic, elementary, logic, reductions, layout, creation, linear_algebra, nn, base, structural, sorting,
    along_axis, windows, decompositions, factorizations, statistics, sampled, complex_numbers, fft, editing,
)


def _merge(table: str) -> dict:
    merged: dict = {}
    for module in MODULES:
        for name, fn in getattr(module, table, {}).items():
            if name in merged and merged[name] is not fn:
                raise RuntimeError(f"{table}[{name!r}] is claimed by two modules (the second: {module.__name__})")
            merged[name] = fn
    return merged


UFUNCS: dict = _merge("UFUNCS")
FUNCTIONS: dict = _merge("FUNCTIONS")
