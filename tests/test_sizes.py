"""Sizes of the code: no module of symgraph/ or codegen/ over 800 lines, no function over 120.

The bounds are the ones the op-record issue set for a codebase read by people:
a file with one job fits in a few hundred lines, a function on a screen or two.
A function may pass the bound only with an entry in `LONG_FUNCTIONS` saying why.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120

#: "path:function" -> why it is longer than MAX_FUNCTION_LINES.
LONG_FUNCTIONS: dict[str, str] = {}
_TREES: dict[pathlib.Path, ast.Module] = {}


def _modules() -> list[pathlib.Path]:
    return sorted(p for pkg in ("symgraph", "codegen") for p in (ROOT / pkg).rglob("*.py"))


def _functions() -> dict[str, int]:
    """"path:name" -> lines, of every function and method (nested ones too)."""
    out = {}
    for p in _modules():
        if p not in _TREES:
            _TREES[p] = ast.parse(p.read_text())
        rel = p.relative_to(ROOT)
        for node in ast.walk(_TREES[p]):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{rel}:{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def test_modules_are_at_most_800_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {long}"


def test_functions_are_at_most_120_lines():
    long = {k: n for k, n in _functions().items() if n > MAX_FUNCTION_LINES and k not in LONG_FUNCTIONS}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_exemptions_are_still_needed():
    lines = _functions()
    stale = [k for k in LONG_FUNCTIONS if lines.get(k, 0) <= MAX_FUNCTION_LINES]
    assert not stale, f"LONG_FUNCTIONS entries that are short now (or gone): {stale}"
