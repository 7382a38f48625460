"""The loop-body IR: `Expr`, one scalar value computed per loop iteration, hash-consed per thread.

An Expr is a load at an affine offset (`codegen.kernels.affine.Aff`), a constant, a loop
variable, an index computation or an op application on other Exprs. Exprs are interned in
a per-thread table (a session) while a program is partitioned and lowered, so work shared
between fused values (tanh(x) read by the value and by the gradient) is one Expr, emitted
once per iteration; `release_session` drops the table when the module is built.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Iterable

import numpy as np

from symgraph.ops import OPS
from symgraph.passes.cost import weight as _cost_of_op

__all__ = ["Expr", "release_session", "expr_weight", "walk_exprs"]

_uids = itertools.count()


class Expr:
    """A scalar value computed once per loop iteration (hash-consed).

    Attributes:
        op: an op name of `symgraph.ops.OPS` (an elementwise op), or an
            internal name: "var" (loop variable; attrs (axis, extent)),
            "const" (attrs (ConstKey,)), "load" (args (Aff,), attrs (node,)),
            "index" (an Aff as an int64 value), "_idiv", "_imod",
            "_gather_index", "_unslice_cond", "_unslice_src", "_prod_cast".
        args: input Exprs (or one Aff for load/index).
        attrs: hashable extra data.
        dtype: numpy dtype of the value.
        rng: inclusive integer range (int64 index values only).
        w: the estimated code size (`expr_weight`), fixed at creation.
        deps: the Exprs this one reads, in argument order: its Expr arguments and the atoms
            of its affine ones (what `walk_exprs` follows), fixed at creation.
    """

    __slots__ = ("op", "args", "attrs", "dtype", "uid", "rng", "w", "deps", "__weakref__")
    _table: dict[tuple, "Expr"] = {}

    def __init__(self, op: str, args: tuple, attrs: tuple, dtype: np.dtype, rng: tuple[int, int] | None):
        self.op = op
        self.args = args
        self.attrs = attrs
        self.dtype = dtype
        self.uid = next(_uids)
        self.rng = rng
        w = _WEIGHTS.get(op)
        if w is None:
            w = 0 if op in _WEIGHTLESS else _cost_of_op(op)
            if op in _WEIGHTLESS or op in OPS:  # an op's record is fixed once registered
                _WEIGHTS[op] = w
        self.w = w
        deps = args
        for a in args:
            if not isinstance(a, Expr):
                deps = []
                for a in args:
                    if isinstance(a, Expr):
                        deps.append(a)
                    else:
                        deps.extend(a.atoms())
                deps = tuple(deps)
                break
        self.deps = deps

    @classmethod
    def make(cls, op: str, args: tuple, attrs: tuple, dtype: Any, rng: tuple[int, int] | None = None) -> "Expr":
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        code = _DTYPE_CODES.get(dtype)  # `dtype.str` builds a new string per call
        if code is None:
            code = _DTYPE_CODES[dtype] = dtype.str
        # Exprs compare by identity, affine forms by value: the same key as the arguments' uids
        key = (op, args, attrs, code)
        table = _session.table
        e = table.get(key)
        if e is None:
            e = table[key] = cls(op, args, attrs, dtype, rng)
        return e

    @classmethod
    def var(cls, axis: int, extent: int) -> "Expr":
        return cls.make("var", (), (axis, extent), np.int64, rng=(0, max(extent - 1, 0)))

    @classmethod
    def const(cls, value: Any, dtype: Any) -> "Expr":
        a = np.asarray(value, dtype=dtype).reshape(())
        return cls.make("const", (), (a.dtype.str, a.tobytes()), a.dtype)

    @classmethod
    def index(cls, a: Any) -> "Expr":
        """The int64 value of affine form `a` (a `codegen.kernels.affine.Aff`): its atom when a is one atom."""
        if len(a.terms) == 1 and a.const == 0 and a.terms[0][1] == 1:
            return a.terms[0][0]
        return cls.make("index", (a,), (), np.int64, rng=a.range())

    def const_value(self) -> Any:
        dt, raw = self.attrs
        return np.frombuffer(raw, dtype=np.dtype(dt))[0]

    def short(self) -> str:
        if self.op == "var":
            return f"v{self.attrs[0]}"
        return f"{self.op}#{self.uid}"

    def __repr__(self) -> str:
        return f"Expr({self.op}#{self.uid}, {self.dtype})"


class _Session(threading.local):
    def __init__(self) -> None:
        self.table: dict = {}


_session = _Session()


def release_session() -> None:
    """Drop this thread's table of interned Exprs (after a module is built)."""
    _session.table = {}


_WEIGHTLESS = frozenset(("load", "const", "var", "index"))
_WEIGHTS: dict[str, int] = {}  # op name -> `expr_weight` of its Exprs (the cost model's weights are fixed)
_DTYPE_CODES: dict[np.dtype, str] = {}  # dtype -> dtype.str


def expr_weight(e: "Expr") -> int:
    """Estimated code size of one Expr: 0 for loads, constants and loop variables, else the op's cost weight."""
    return e.w


def walk_exprs(roots: Iterable[Expr]) -> list[Expr]:
    """All Exprs reachable from roots (including the atoms of affine arguments), inputs first.

    An argument is an Expr or an affine form (`Aff`, the one argument of "load" and "index").
    """
    seen: set[Expr] = set()
    out: list[Expr] = []
    # A stack of Exprs to visit, each finished one followed by None and itself (no tuple per entry).
    stack: list = list(roots)  # the last root first, as before
    # Arguments already seen are pushed too (one `extend`, no loop in Python per Expr): they are
    # skipped when popped, so the order is that of pushing only the unseen ones.
    pop, push, extend, add, emit = stack.pop, stack.append, stack.extend, seen.add, out.append
    while stack:
        e = pop()
        if e is None:
            emit(pop())
            continue
        if e in seen:
            continue
        add(e)
        deps = e.deps
        if not deps:  # a leaf (constant, loop variable, load at a fixed offset): finished at once
            emit(e)
            continue
        push(e)
        push(None)
        extend(deps)
    return out
