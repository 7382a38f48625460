"""Random NumPy programs for fuzzing symgraph, and the oracles that cross-check them.

A generated `Program` is the source text of an ordinary Python function over
NumPy arrays (``def prog(x0, x1, i0): v0 = np.tanh(x0) ...``) plus concrete
arguments. The same source runs in two namespaces:

- traced: ``np`` is NumPy (its protocols trace), ``snp`` is `symgraph.numpy`,
  ``sg`` is symgraph — this is what symgraph traces, differentiates,
  simplifies, checkpoints and compiles;
- reference: ``snp``/``sg``/``fz`` are thin pure-NumPy stand-ins — this is the
  independent oracle for values and finite differences.

The generator covers the op set: elementwise math (every unary primitive and
the composites), broadcasting binary ops with Python scalars, constants and
fresh inputs, comparisons, ``where`` (including guards whose untaken branch
is outside the domain), logical ops, casts, reductions over random axes with
keepdims, ``argmax``, layout ops (reshape, transpose, swap/move axes,
expand/squeeze, broadcast_to, basic slicing with negative steps, integer-array
indexing with constant and traced indices, ``at[].add/.set``, concatenate,
stack), contractions (``@`` with vectors and batches, dot, einsum, tensordot,
outer, inner), dropout (counter-based random bits) and stop_gradient, with
fan-out (values are reused), float32 and float64.

Inputs are kept in each op's domain by construction: the generator evaluates
every line on the concrete arguments while it writes it and shifts or scales
arguments of restricted ops (``np.log(v3 + 1.7)``, ``np.exp(v2 * 0.25)``,
``a / (b + 0.9)``). Ops with kinks or jumps (abs, maximum, clip, comparisons,
floor, sign, max/argmax reductions) are only emitted when no element is within
a relative distance `Config.delta` of the kink (exact structural ties such as
``maximum(a, a)`` are allowed): finite differences and float32 rounding then
cannot cross it.

Two drivers make the same programs: `programs(config)` is a hypothesis
strategy (shrinks to a small program on failure; the repr of a `Program` is
its runnable source), and `program_from_seed(seed, config)` is a plain seeded
generator for long runs that count every failure.
"""

from __future__ import annotations

import math
import random
import types
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import strategies as st

import symgraph as sg
import symgraph.numpy as snp

__all__ = [
    "Config", "Program", "programs", "program_from_seed", "FAMILIES",
    "check_evaluator", "check_simplify", "check_llvm", "check_llvm_grad", "check_derivatives",
    "check_checkpoint", "assert_close", "tolerances", "MismatchError", "compile_fn",
]


def compile_fn(*args: Any, **kw: Any) -> Any:
    """`sg.compile` (imported from symgraph.compile until the lead exports it)."""
    fn = getattr(sg, "compile", None)
    if not callable(fn):  # not exported yet: sg.compile is then the submodule
        from symgraph.compile import compile as fn
    return fn(*args, **kw)


# --------------------------------------------------------------------------- reference namespaces


def _ref_sigmoid(x):
    x = np.asarray(x)
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _ref_erf(x):
    x = np.asarray(x)
    return _erf(x).astype(x.dtype) if x.size else x.copy()


def _ref_logsumexp(x, axis=None, keepdims=False):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


def _ref_softmax(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _ref_dropout(x, rate, key, salt=0):
    # the counter-based bits are symgraph's definition (splitmix64); computed eagerly
    return snp.dropout(np.asarray(x), rate, key, salt=salt)


def _ref_at_add(x, idx, v):
    y = np.array(x, copy=True)
    np.add.at(y, idx, np.asarray(v, dtype=y.dtype))
    return y


def _ref_at_set(x, idx, v):
    y = np.array(x, copy=True)
    y[idx] = v
    return y


REF_SNP = types.SimpleNamespace(
    sigmoid=_ref_sigmoid, erf=_ref_erf, logsumexp=_ref_logsumexp, softmax=_ref_softmax,
    relu=lambda x: np.maximum(x, 0.0), dropout=_ref_dropout,
    **{n: getattr(np, n) for n in (
        "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "abs", "sign", "floor",
        "maximum", "minimum", "where", "sum", "mean", "max", "min", "prod", "var", "std", "matmul",
        "transpose", "reshape", "concatenate", "stack", "take", "clip", "square", "negative", "einsum",
        "broadcast_to", "expand_dims", "squeeze", "argmax", "power", "multiply", "add", "subtract", "divide")},
)
REF_SG = types.SimpleNamespace(stop_gradient=lambda x: np.asarray(x))
REF_FZ = types.SimpleNamespace(at_add=_ref_at_add, at_set=_ref_at_set)
TRACE_FZ = types.SimpleNamespace(at_add=lambda x, idx, v: x.at[idx].add(v) if isinstance(x, sg.Node)
                                 else _ref_at_add(x, idx, v),
                                 at_set=lambda x, idx, v: x.at[idx].set(v) if isinstance(x, sg.Node)
                                 else _ref_at_set(x, idx, v))


def _namespace(traced: bool, dtype: np.dtype) -> dict:
    if traced:
        return {"np": np, "snp": snp, "sg": sg, "fz": TRACE_FZ, "dt": dtype}
    return {"np": np, "snp": REF_SNP, "sg": REF_SG, "fz": REF_FZ, "dt": dtype}


# --------------------------------------------------------------------------- configuration

#: Op families the generator draws from (name -> weight).
FAMILIES: dict[str, int] = {
    "unary": 6, "domain": 5, "binary": 7, "select": 3, "nonsmooth": 3, "reduce": 5, "layout": 5,
    "index": 4, "join": 2, "contract": 4, "composite": 2, "random": 1, "misc": 1,
}


@dataclass(frozen=True)
class Config:
    """What kind of programs to generate.

    Attributes:
        min_ops, max_ops: number of generated lines.
        dtypes: float dtypes to draw the program's dtype from.
        max_rank, max_dim: shapes of inputs (each dim in 1..max_dim).
        max_inputs: arguments created up front (more appear as operands need them).
        max_size: largest number of elements of any value.
        differentiable: only programs whose derivatives finite differences can
            check: no stop_gradient, no casts between float widths, no einsum
            with repeated indices, only float outputs.
        delta: minimum relative distance of any element from a kink or jump.
        families: op family weights (default FAMILIES).
    """

    min_ops: int = 1
    max_ops: int = 10
    dtypes: tuple = (np.float64, np.float32)
    max_rank: int = 3
    max_dim: int = 5
    max_inputs: int = 3
    max_size: int = 240
    differentiable: bool = False
    delta: float = 1e-3
    families: tuple = tuple(FAMILIES.items())


# --------------------------------------------------------------------------- the program


@dataclass
class Program:
    """A generated program: source, concrete arguments and what it uses.

    Attributes:
        source: Python source of ``def prog(...)``, returning a tuple of arrays.
        args: the concrete arguments (arrays; int64 index arrays for ``i*`` arguments).
        dtype: the float dtype of the program.
        float_argnums: positions of the float arguments (the ones derivatives are taken for).
        features: names of the constructs used (for coverage reports).
        scale: the largest magnitude of any intermediate value (tolerances scale with it).
        seed: the seed the generator drew the argument values from.
    """

    source: str
    args: tuple
    dtype: np.dtype
    float_argnums: tuple
    features: frozenset
    scale: float
    seed: int
    differentiable: bool = False
    _cache: dict = field(default_factory=dict, repr=False)

    def _compile(self, traced: bool) -> Callable:
        ns = _namespace(traced, self.dtype)
        code = compile(self.source, "<fuzz-program>", "exec")
        exec(code, ns)  # noqa: S102  (our own generated source)
        return ns["prog"]

    @cached_property
    def fn(self) -> Callable:
        """The program with symgraph's namespace (what is traced and compiled)."""
        return self._compile(True)

    @cached_property
    def ref(self) -> Callable:
        """The program with pure-NumPy stand-ins (the oracle)."""
        return self._compile(False)

    def reference(self, *args: Any) -> tuple:
        """Run the oracle (default: on `self.args`); returns a tuple of arrays."""
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = self.ref(*(args or self.args))
        return tuple(np.asarray(o) for o in out)

    def __repr__(self) -> str:
        args = ",\n    ".join(f"np.array({np.asarray(a).tolist()!r}, dtype=np.{np.asarray(a).dtype.name})"
                              for a in self.args)
        return (f"# symgraph fuzz program (seed {self.seed}, dtype {np.dtype(self.dtype).name})\n"
                f"{self.source}\nargs = (\n    {args},\n)")


# --------------------------------------------------------------------------- choice sources


#: st.integers(lo, hi) per range, built once (the same strategy, so the same draws and shrinking)
_INTEGERS: dict[tuple[int, int], st.SearchStrategy] = {}


class _HypothesisChoices:
    """Choices backed by hypothesis draws (so failing programs shrink)."""

    def __init__(self, draw: Callable) -> None:
        self._draw = draw

    def integers(self, lo: int, hi: int) -> int:
        if lo > hi:
            raise _Reject("empty range")
        strategy = _INTEGERS.get((lo, hi))
        if strategy is None:  # a program draws ~40 integers: building st.integers each time cost ~1/3 of the run
            strategy = _INTEGERS[lo, hi] = st.integers(lo, hi)
        return self._draw(strategy)

    def choice(self, seq: Sequence) -> Any:
        return seq[self.integers(0, len(seq) - 1)]

    def boolean(self) -> bool:
        return self._draw(st.booleans())


class _RandomChoices:
    """Choices backed by a seeded `random.Random` (long runs, no shrinking)."""

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def integers(self, lo: int, hi: int) -> int:
        if lo > hi:
            raise _Reject("empty range")
        return self._r.randint(lo, hi)

    def choice(self, seq: Sequence) -> Any:
        if not seq:
            raise _Reject("empty choice")
        return seq[self._r.randrange(len(seq))]

    def boolean(self) -> bool:
        return self._r.random() < 0.5


# --------------------------------------------------------------------------- the generator


@dataclass
class _Val:
    name: str
    kind: str  # 'f' float, 'i' integer, 'b' bool
    value: np.ndarray

    @property
    def shape(self) -> tuple:
        return self.value.shape

    @property
    def ndim(self) -> int:
        return self.value.ndim


class _Reject(Exception):
    """The candidate line is not valid at these inputs (domain, kink, size, shape)."""


_SCALARS = (0.5, 1.5, -2.0, 3.0, 0.25, -0.75, 2.0, -1.0, 0.1)


def _nice(x: float) -> str:
    """A short literal >= x (for shifts)."""
    return repr(math.ceil(x * 10) / 10)


def _broadcastable(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


class _Gen:
    def __init__(self, ch: Any, cfg: Config, dtype: Any, seed: int) -> None:
        self.ch = ch
        self.cfg = cfg
        self.dt = np.dtype(dtype)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.vals: list[_Val] = []
        self.args: list[_Val] = []
        self.lines: list[str] = []
        self.env: dict[str, Any] = {}
        self.ns = _namespace(False, self.dt)
        self.features: set[str] = set()
        self.scale = 1.0
        self.n_const = 0
        self._pending: set[str] = set()  # features of the line being built (kept only if it is emitted)

    # ----- values -----

    def new_input(self, shape: tuple, kind: str = "f", index_range: int | None = None) -> _Val:
        k = sum(1 for a in self.args if a.kind == kind)
        name = {"f": "x", "i": "i", "b": "b"}[kind] + str(k)
        if kind == "f":
            a = self.rng.uniform(-2.0, 2.0, shape).astype(self.dt)
        elif kind == "i":
            n = index_range or 3
            a = self.rng.integers(-n, n, shape).astype(np.int64)
        else:
            a = self.rng.random(shape) < 0.5
        v = _Val(name, kind, np.asarray(a))
        self.args.append(v)
        self.vals.append(v)
        self.env[name] = v.value
        self.features.add(f"input_{kind}")
        return v

    def shape(self, min_rank: int = 0) -> tuple:
        r = self.ch.integers(min_rank, self.cfg.max_rank)
        return tuple(self.ch.integers(1, self.cfg.max_dim) for _ in range(r))

    def pick(self, kind: str = "f", pred: Callable[[_Val], bool] | None = None) -> _Val | None:
        """An existing value, biased to recent ones (shrinks toward the latest)."""
        cands = [v for v in self.vals if v.kind == kind and (pred is None or pred(v))]
        if not cands:
            return None
        return cands[len(cands) - 1 - self.ch.integers(0, len(cands) - 1)]

    def const(self, shape: tuple) -> str:
        a = np.round(self.rng.uniform(-2.0, 2.0, shape), 2)
        self._pending.add("constant_array")
        return f"np.array({a.tolist()!r}, dt)"

    def operand(self, shape: tuple, allow_scalar: bool = True, grow: bool = True) -> str:
        """An expression of a float value whose shape broadcasts with `shape` (existing, literal, constant or new input).

        With grow=False the value broadcasts *to* `shape` (the result keeps that shape).
        """
        mode = self.ch.choice(("existing", "existing", "scalar", "const", "input") if allow_scalar
                              else ("existing", "existing", "const", "input"))
        if mode == "existing":
            v = self.pick("f", lambda v: _broadcastable(v.shape, shape)
                          and int(np.prod(np.broadcast_shapes(v.shape, shape))) <= self.cfg.max_size
                          and (grow or np.broadcast_shapes(v.shape, shape) == tuple(shape)))
            if v is not None:
                return v.name
            mode = "input"
        if mode == "scalar":
            self._pending.add("python_scalar")
            return repr(self.ch.choice(_SCALARS))
        # a shape that broadcasts with `shape`: drop leading dims, set some to 1
        k = self.ch.integers(0, len(shape))
        s = [d if self.ch.boolean() else 1 for d in shape[k:]] if shape else []
        s = tuple(s)
        if mode == "const" and int(np.prod(s)) <= 12:
            return self.const(s)
        if len([a for a in self.args if a.kind == "f"]) >= self.cfg.max_inputs + 2:
            return self.const(s) if int(np.prod(s)) <= 12 else repr(self.ch.choice(_SCALARS))
        return self.new_input(s).name

    def value_of(self, expr: str) -> Any:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "Mean of empty slice" and the like
            return eval(expr, self.ns, self.env)  # noqa: S307  (our own generated source)

    def emit(self, expr: str, feature: str, kind: str = "f") -> _Val:
        """Evaluate `expr` on the concrete arguments, keep it in range, add a line."""
        try:
            val = np.asarray(self.value_of(expr))
        except Exception as e:  # noqa: BLE001  (shape errors etc.: not a valid candidate)
            raise _Reject(str(e)) from None
        if val.dtype.kind not in "biuf" or val.size > self.cfg.max_size:
            raise _Reject("size/dtype")
        if kind == "f":
            if val.dtype.kind != "f":
                raise _Reject("not float")
            if not np.all(np.isfinite(val)):
                raise _Reject("non-finite")
            m = float(np.max(np.abs(val))) if val.size else 0.0
            if m > 100.0:  # keep magnitudes moderate: scale by a power of ten
                expr = f"({expr}) * {10.0 ** -math.ceil(math.log10(m)):.0e}"
                val = np.asarray(self.value_of(expr))
                m = float(np.max(np.abs(val)))
            self.scale = max(self.scale, m)
        name = f"v{len(self.lines)}"
        self.lines.append(f"    {name} = {expr}")
        self.env[name] = val
        v = _Val(name, kind, val)
        self.vals.append(v)
        self.features |= self._pending | {feature}
        self._pending.clear()
        return v

    # ----- kinks -----

    def far(self, dist: Any, scale: Any = 1.0) -> None:
        """Reject unless every element is exactly at (a structural tie) or far from a kink."""
        d = np.abs(np.asarray(dist, dtype=np.float64))
        ref = self.cfg.delta * np.maximum(1.0, np.abs(np.asarray(scale, dtype=np.float64)))
        if np.any((d > 0) & (d < ref)):
            raise _Reject("near a kink")

    def shift_for(self, v: _Val, lower: float) -> str:
        """`v + s` with s such that v + s >= lower at the arguments ('v' if already)."""
        m = float(np.min(v.value)) if v.value.size else 0.0
        if m >= lower:
            return v.name
        return f"({v.name} + {_nice(lower - m)})"

    def scaled(self, v: _Val, bound: float) -> str:
        """`v * c` with |v * c| <= bound at the arguments ('v' if already)."""
        m = float(np.max(np.abs(v.value))) if v.value.size else 0.0
        if m <= bound:
            return v.name
        c = bound / m
        c = 10.0 ** math.floor(math.log10(c)) * math.floor(c / 10.0 ** math.floor(math.log10(c)))
        return f"({v.name} * {c:.1g})"

    # ----- families -----

    def fam_unary(self) -> _Val:
        a = self.pick("f")
        fn = self.ch.choice(["neg", "sin", "cos", "tanh", "sigmoid", "erf", "square", "cube", "exp", "expm1",
                             "tan", "sinh", "cosh", "exp2", "recip_sq"])
        sp = self.ch.boolean()  # spelling: NumPy or symgraph.numpy
        m = "np" if sp else "snp"
        if fn == "neg":
            return self.emit(self.ch.choice([f"-{a.name}", f"np.negative({a.name})"]), "neg")
        if fn in ("sin", "cos", "tanh"):
            return self.emit(f"{m}.{fn}({a.name})", fn)
        if fn in ("sigmoid", "erf"):
            return self.emit(f"snp.{fn}({a.name})", fn)
        if fn == "square":
            return self.emit(self.ch.choice([f"{a.name} ** 2", f"np.square({a.name})", f"{a.name} * {a.name}"]),
                             "square")
        if fn == "cube":
            return self.emit(f"{self.scaled(a, 4.0)} ** 3", "pow_int")
        if fn in ("exp", "expm1"):
            return self.emit(f"{m}.{fn}({self.scaled(a, 4.0)})", fn)
        if fn == "exp2":
            return self.emit(f"np.exp2({self.scaled(a, 4.0)})", "exp2")
        if fn == "tan":
            return self.emit(f"{m}.tan({self.scaled(a, 1.2)})", "tan")
        if fn in ("sinh", "cosh"):
            return self.emit(f"np.{fn}({self.scaled(a, 3.0)})", fn)
        return self.emit(f"1.0 / (1.0 + {a.name} * {a.name})", "div")

    def fam_domain(self) -> _Val:
        a = self.pick("f")
        fn = self.ch.choice(["log", "log1p", "sqrt", "recip", "pow_float", "log2", "log10", "rsqrt", "pow_traced"])
        m = self.ch.choice(["np", "snp"])
        if fn == "log":
            return self.emit(f"{m}.log({self.shift_for(a, 0.5)})", "log")
        if fn == "log1p":
            return self.emit(f"{m}.log1p({self.shift_for(a, -0.5)})", "log1p")
        if fn in ("log2", "log10"):
            return self.emit(f"np.{fn}({self.shift_for(a, 0.5)})", fn)
        if fn == "sqrt":
            return self.emit(f"{m}.sqrt({self.shift_for(a, 0.1)})", "sqrt")
        if fn == "recip":
            return self.emit(self.ch.choice([f"1.0 / {self.shift_for(a, 0.5)}", f"np.reciprocal({self.shift_for(a, 0.5)})",
                                             f"{self.shift_for(a, 0.5)} ** -1"]), "div")
        if fn == "rsqrt":
            return self.emit(f"{self.shift_for(a, 0.3)} ** -0.5", "pow")
        if fn == "pow_float":
            e = self.ch.choice([1.5, 0.5, 2.5, -1.5, 0.3])
            return self.emit(f"{self.shift_for(a, 0.5)} ** {e}", "pow")
        b = self.pick("f", lambda v: _broadcastable(v.shape, a.shape))
        if b is None:
            raise _Reject("no exponent")
        return self.emit(f"np.power({self.shift_for(a, 0.5)}, {self.scaled(b, 2.0)})", "pow_traced")

    def fam_binary(self) -> _Val:
        a = self.pick("f")
        op = self.ch.choice(["+", "-", "*", "add", "subtract", "multiply", "/", "rsub", "rdiv"])
        b = self.operand(a.shape)
        if op in ("+", "-", "*"):
            return self.emit(f"{a.name} {op} {b}", {"+": "add", "-": "sub", "*": "mul"}[op])
        if op in ("add", "subtract", "multiply"):
            m = self.ch.choice(["np", "snp"])
            return self.emit(f"{m}.{op}({a.name}, {b})", op)
        if op == "rsub":
            return self.emit(f"{b} - {a.name}", "sub")
        if op == "rdiv":
            return self.emit(f"{b} / {self.shift_for(a, 0.5)}", "div")
        den = self.pick("f", lambda v: _broadcastable(v.shape, a.shape))
        if den is None or self.ch.boolean():
            return self.emit(f"{a.name} / {self.ch.choice([2.0, -4.0, 0.5, 3.0])}", "div")
        return self.emit(f"{a.name} / {self.shift_for(den, 0.5)}", "div")

    def cond(self) -> tuple[str, Any]:
        """A boolean expression and its distance-to-flip array."""
        a = self.pick("f")
        kind = self.ch.choice(["cmp_val", "cmp_const", "and", "or", "not", "bool_input"])
        if kind == "bool_input" and not self.cfg.differentiable:
            b = self.pick("b") or self.new_input(a.shape, "b")
            return b.name, np.inf
        c = self.ch.choice([">", "<", ">=", "<="])
        if kind == "cmp_const" or kind == "bool_input":
            t = round(float(np.median(a.value)) if a.value.size else 0.0, 1)
            return f"({a.name} {c} {t})", a.value - t
        b = self.pick("f", lambda v: _broadcastable(v.shape, a.shape))
        if b is None:
            return f"({a.name} {c} 0.0)", a.value
        e1, d1 = f"({a.name} {c} {b.name})", np.subtract(a.value, b.value)
        if kind == "cmp_val":
            return e1, d1
        if kind == "not":
            self._pending.add("logical_not")
            return f"~{e1}", d1
        a2 = self.pick("f")
        t = round(float(np.median(a2.value)) if a2.value.size else 0.0, 1)
        e2, d2 = f"({a2.name} > {t})", a2.value - t
        try:
            np.broadcast_shapes(np.shape(d1), np.shape(d2))
        except ValueError:
            return e1, d1
        self._pending.add("logical_" + kind)
        op = self.ch.choice(["&", "np.logical_and"] if kind == "and" else ["|", "np.logical_or"])
        expr = f"({e1} {op} {e2})" if op in "&|" else f"{op}({e1}, {e2})"
        return expr, np.minimum(np.abs(d1), np.abs(d2))

    def fam_select(self) -> _Val:
        c, dist = self.cond()
        self.far(dist)
        form = self.ch.choice(["where", "where", "mask_mul", "guard", "astype"])
        shp = np.shape(self.value_of(c))
        if form == "where":
            x = self.operand(shp)
            y = self.operand(shp)
            m = self.ch.choice(["np", "snp"])
            return self.emit(f"{m}.where({c}, {x}, {y})", "where")
        if form == "mask_mul":
            x = self.operand(shp, allow_scalar=False)
            return self.emit(f"{c} * {x}", "bool_arith")
        if form == "astype":
            return self.emit(f"{c}.astype(dt)", "cast_bool")
        # a guard: the untaken branch is outside the op's domain (its derivative is inf/NaN there)
        a = self.pick("f")
        t = round(float(np.median(a.value)) if a.value.size else 0.0, 1)
        self.far(a.value - t)
        f = self.ch.choice(["np.sqrt", "np.log", "snp.sqrt"])
        return self.emit(f"np.where({a.name} > {t}, {f}({a.name} - {t}), 0.0)", "where_guard")

    def fam_nonsmooth(self) -> _Val:
        a = self.pick("f")
        fn = self.ch.choice(["abs", "relu", "maximum", "minimum", "clip", "sign", "floor", "where_relu",
                             "max0", "abs_builtin"])
        if fn in ("abs", "abs_builtin"):
            self.far(a.value)
            return self.emit(f"np.abs({a.name})" if fn == "abs" else f"abs({a.name})", "abs")
        if fn in ("relu", "where_relu", "max0"):
            self.far(a.value)
            expr = {"relu": f"snp.relu({a.name})", "where_relu": f"np.where({a.name} > 0, {a.name}, 0.0)",
                    "max0": f"np.maximum({a.name}, 0.0)"}[fn]
            return self.emit(expr, "relu")
        if fn in ("maximum", "minimum"):
            b = self.operand(a.shape)
            bv = np.asarray(self.value_of(b))
            self.far(np.subtract(a.value, bv), np.maximum(np.abs(a.value), np.abs(bv)) if bv.size else 1.0)
            m = self.ch.choice(["np", "snp"])
            return self.emit(f"{m}.{fn}({a.name}, {b})", fn)
        if fn == "clip":
            lo, hi = sorted(np.round(self.rng.uniform(-1.5, 1.5, 2), 1).tolist())
            if lo == hi:
                hi = lo + 0.5
            self.far(np.minimum(np.abs(a.value - lo), np.abs(a.value - hi)))
            return self.emit(f"np.clip({a.name}, {lo}, {hi})", "clip")
        if fn == "sign":
            self.far(a.value)
            return self.emit(f"np.sign({a.name}) * {a.name}", "sign")
        self.far(a.value - np.round(a.value))
        return self.emit(f"np.floor({a.name}) + {a.name}", "floor")

    def axes(self, v: _Val) -> tuple[str, tuple]:
        """An axis argument (source text) and the normalized axes."""
        nd = v.ndim
        form = self.ch.choice(["none", "int", "neg", "tuple"])
        if nd == 0 or form == "none":
            return "None", tuple(range(nd))
        if form in ("int", "neg"):
            ax = self.ch.integers(0, nd - 1)
            return (str(ax - nd) if form == "neg" else str(ax)), (ax,)
        k = self.ch.integers(1, nd)
        axs = sorted({self.ch.integers(0, nd - 1) for _ in range(k)})
        return repr(tuple(axs)), tuple(axs)

    def gap(self, v: _Val, axes: tuple) -> None:
        """Reject when the top two entries of a max/min/argmax reduction are close but not tied."""
        if not axes or v.value.size == 0:
            return
        nd = v.ndim
        rest = [i for i in range(nd) if i not in axes]
        x = np.transpose(v.value, rest + list(axes)).reshape(-1, int(np.prod([v.shape[a] for a in axes])))
        if x.shape[1] < 2:
            return
        s = np.sort(x, axis=1)
        for top in (s[:, -1] - s[:, -2], s[:, 1] - s[:, 0]):
            self.far(top, s[:, -1])

    def fam_reduce(self) -> _Val:
        a = self.pick("f", lambda v: v.ndim > 0) or self.pick("f")
        fn = self.ch.choice(["sum", "sum", "mean", "max", "min", "prod", "var", "std", "argmax", "method_sum",
                             "shape_mean"])
        ax, axes = self.axes(a)
        kd = self.ch.boolean()
        kds = ", keepdims=True" if kd else ""
        m = self.ch.choice(["np", "snp"])
        if fn in ("sum", "mean"):
            return self.emit(f"{m}.{fn}({a.name}, axis={ax}{kds})", fn)
        if fn == "method_sum":
            return self.emit(f"{a.name}.sum({'' if ax == 'None' else ax})", "sum")
        if fn == "shape_mean":
            if a.ndim == 0:
                raise _Reject("0-d")
            return self.emit(f"np.sum({a.name}, axis=-1) / {a.name}.shape[-1]", "mean")
        if fn in ("max", "min"):
            self.gap(a, axes)
            return self.emit(f"{m}.{fn}({a.name}, axis={ax}{kds})", fn + "_reduce")
        if fn == "prod":
            n = int(np.prod([a.shape[i] for i in axes])) if axes else 1
            if n > 8:
                raise _Reject("long product")
            return self.emit(f"np.prod({self.scaled(a, 2.0)}, axis={ax}{kds})", "prod")
        if fn in ("var", "std"):
            if fn == "std":
                var = np.var(a.value, axis=axes if axes else None)
                if np.any(np.asarray(var) < 1e-2 * self.cfg.delta ** 0.5 * max(1.0, self.scale)):
                    raise _Reject("std at a zero variance")
            return self.emit(f"np.{fn}({a.name}, axis={ax}{kds})", fn)
        # argmax: an integer index, used as a float or to index another value
        if a.ndim == 0:
            raise _Reject("0-d")
        axi = self.ch.integers(0, a.ndim - 1)
        self.gap(a, (axi,))
        idx = self.emit(f"np.argmax({a.name}, axis={axi})", "argmax", kind="i")
        return self.emit(f"{idx.name} * 0.5 + {self.pick('f').name}", "int_arith")

    def fam_layout(self) -> _Val:
        a = self.pick("f", lambda v: v.ndim > 0) or self.pick("f")
        fn = self.ch.choice(["reshape", "reshape_m1", "transpose", "T", "swapaxes", "moveaxis", "expand_dims",
                             "none_index", "squeeze", "broadcast_to", "ravel"])
        nd = a.ndim
        if fn in ("reshape", "reshape_m1"):
            n = a.value.size
            dims = []
            rest = n
            for _ in range(self.ch.integers(0, 3)):
                divs = [d for d in range(1, rest + 1) if rest % d == 0]
                d = self.ch.choice(divs)
                dims.append(d)
                rest //= d
            dims.append(rest)
            if fn == "reshape_m1" and len(dims) > 0:
                j = self.ch.integers(0, len(dims) - 1)
                dims[j] = -1
                return self.emit(f"np.reshape({a.name}, {tuple(dims)!r})", "reshape")
            return self.emit(f"{a.name}.reshape({tuple(dims)!r})", "reshape")
        if fn == "ravel":
            return self.emit(self.ch.choice([f"{a.name}.ravel()", f"np.ravel({a.name})", f"{a.name}.flatten()"]),
                             "reshape")
        if nd == 0:
            return self.emit(f"np.broadcast_to({a.name}, (2,))", "broadcast_to")
        if fn == "T":
            return self.emit(f"{a.name}.T", "transpose")
        if fn == "transpose":
            perm = list(range(nd))
            for i in range(nd - 1, 0, -1):
                j = self.ch.integers(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            return self.emit(f"np.transpose({a.name}, {tuple(perm)!r})", "transpose")
        if fn == "swapaxes":
            return self.emit(f"np.swapaxes({a.name}, {self.ch.integers(0, nd - 1)}, {self.ch.integers(-nd, -1)})",
                             "transpose")
        if fn == "moveaxis":
            return self.emit(f"np.moveaxis({a.name}, {self.ch.integers(0, nd - 1)}, {self.ch.integers(0, nd - 1)})",
                             "transpose")
        if fn == "expand_dims":
            return self.emit(f"np.expand_dims({a.name}, {self.ch.integers(-nd - 1, nd)})", "expand_dims")
        if fn == "none_index":
            return self.emit(self.ch.choice([f"{a.name}[None]", f"{a.name}[:, None]" if nd >= 1 else f"{a.name}[None]",
                                             f"{a.name}[..., None]"]), "expand_dims")
        if fn == "squeeze":
            a = self.pick("f", lambda v: 1 in v.shape) or a
            ones = [i for i, d in enumerate(a.shape) if d == 1]
            if not ones:
                return self.emit(f"np.squeeze({a.name})", "squeeze")
            return self.emit(f"np.squeeze({a.name}, axis={self.ch.choice(ones)})", "squeeze")
        lead = self.ch.integers(1, 3)
        shape = (lead,) + tuple(self.ch.integers(1, 3) if d == 1 else d for d in a.shape)
        return self.emit(f"np.broadcast_to({a.name}, {shape!r})", "broadcast_to")

    def basic_index(self, v: _Val) -> str:
        parts = []
        for d in v.shape:
            k = self.ch.choice(["full", "int", "slice", "slice", "neg_step"])
            if k == "full":
                parts.append(":")
            elif k == "int":
                parts.append(str(self.ch.integers(-d, d - 1)))
            elif k == "slice":
                a0 = self.ch.integers(-d, d - 1)
                b0 = self.ch.integers(-d, d)
                st_ = self.ch.choice([1, 1, 2, 3])
                parts.append(f"{a0}:{b0}" + (f":{st_}" if st_ != 1 else ""))
            else:
                parts.append(self.ch.choice(["::-1", "::-2", f"{d - 1}::-2", f"-1:{-d - 1 if d > 1 else ''}:-1"]))
        if parts and self.ch.boolean():
            j = self.ch.integers(0, len(parts) - 1)
            parts = parts[:j] + ["..."]  # trailing dims by ellipsis
        if self.ch.integers(0, 4) == 0:
            parts.insert(self.ch.integers(0, len(parts)), "None")
        return ", ".join(parts) if parts else "..."

    def fam_index(self) -> _Val:
        a = self.pick("f", lambda v: v.ndim > 0)
        if a is None:
            raise _Reject("no array")
        fn = self.ch.choice(["basic", "basic", "const_idx", "const_idx2", "take_traced", "traced_idx",
                             "at_add", "at_set"])
        if fn == "basic":
            v = self.emit(f"{a.name}[{self.basic_index(a)}]", "slice")
            if v.value.size == 0:
                self._pending.add("empty")
            return v
        ax = self.ch.integers(0, a.ndim - 1)
        n = a.shape[ax]
        if fn in ("const_idx", "const_idx2"):
            k = self.ch.integers(1, 4)
            idx = [self.ch.integers(-n, n - 1) for _ in range(k)]
            pre = ":, " * ax
            if fn == "const_idx2" and a.ndim >= 2 and ax + 1 < a.ndim:
                m = a.shape[ax + 1]
                idx2 = [self.ch.integers(-m, m - 1) for _ in range(k)]
                return self.emit(f"{a.name}[{pre}{idx!r}, {idx2!r}]", "gather2")
            return self.emit(f"{a.name}[{pre}{idx!r}]", "gather")
        if fn in ("take_traced", "traced_idx"):
            iv = self.pick("i", lambda v: v.value.size == 0 or (v.value.min() >= -n and v.value.max() < n)) \
                if self.ch.boolean() else None
            if iv is None:
                iv = self.new_input(self.shape()[:2], "i", index_range=n)
            if fn == "take_traced":
                return self.emit(f"np.take({a.name}, {iv.name}, axis={ax})", "gather_traced")
            return self.emit(f"{a.name}[{':, ' * ax}{iv.name}]", "gather_traced")
        # functional updates
        k = self.ch.integers(1, 3)
        idx = [self.ch.integers(-n, n - 1) for _ in range(k)]
        if fn == "at_set":
            idx = sorted({i % n for i in idx})
        index = f"np.s_[{':, ' * ax}{idx!r}]"
        target = np.asarray(a.value[eval(index, {"np": np})].shape)  # noqa: S307
        u = self.operand(tuple(target.tolist()), grow=False)
        return self.emit(f"fz.{fn}({a.name}, {index}, {u})", fn)

    def fam_join(self) -> _Val:
        a = self.pick("f", lambda v: v.ndim > 0)
        if a is None:
            raise _Reject("no array")
        fn = self.ch.choice(["concatenate", "stack", "hstack"])
        ax = self.ch.integers(0, a.ndim - 1)
        if fn == "stack":
            b = self.pick("f", lambda v: v.shape == a.shape)
            bn = b.name if b is not None and self.ch.boolean() else self.operand_exact(a.shape)
            return self.emit(f"np.stack([{a.name}, {bn}], axis={self.ch.integers(-a.ndim - 1, a.ndim)})", "stack")
        shape = list(a.shape)
        shape[ax] = self.ch.integers(1, 3)
        b = self.pick("f", lambda v: v.ndim == a.ndim and all(x == y for i, (x, y) in enumerate(zip(v.shape, a.shape))
                                                               if i != ax))
        bn = b.name if b is not None and self.ch.boolean() else self.operand_exact(tuple(shape))
        if fn == "hstack" and a.ndim >= 1:
            ax = 0 if a.ndim == 1 else 1
            b = self.pick("f", lambda v: v.ndim == a.ndim and all(x == y for i, (x, y) in enumerate(zip(v.shape, a.shape))
                                                                   if i != ax))
            if b is None:
                raise _Reject("no partner")
            return self.emit(f"np.hstack([{a.name}, {b.name}])", "concatenate")
        return self.emit(f"np.concatenate([{a.name}, {bn}, {a.name}], axis={ax})", "concatenate")

    def operand_exact(self, shape: tuple) -> str:
        if int(np.prod(shape)) <= 8 and self.ch.boolean():
            return self.const(shape)
        return self.new_input(shape).name

    def fam_contract(self) -> _Val:
        a = self.pick("f", lambda v: v.ndim > 0)
        if a is None:
            raise _Reject("no array")
        fn = self.ch.choice(["matmul", "matmul", "dot", "einsum1", "einsum2", "tensordot", "outer", "inner",
                             "rmatmul", "batched"])
        k = a.shape[-1]
        if fn == "outer":
            return self.emit(f"np.outer({a.name}, {self.operand_exact((self.ch.integers(1, 4),))})", "outer")
        if fn == "inner":
            b = self.pick("f", lambda v: v.ndim > 0 and v.shape[-1] == k
                          and v.value.size * a.value.size // max(k, 1) <= self.cfg.max_size)
            bn = b.name if b is not None else self.operand_exact((k,))
            return self.emit(f"np.inner({a.name}, {bn})", "inner")
        if fn == "einsum1":
            nd = a.ndim
            if nd > 3:
                raise _Reject("rank")
            letters = "ijk"[:nd]
            out = "".join(c for c in letters if self.ch.boolean())
            out = "".join(sorted(out, key=lambda c: self.ch.integers(0, 9)))
            spec = f"{letters}->{out}"
            if nd == 2 and a.shape[0] == a.shape[1] and not self.cfg.differentiable and self.ch.boolean():
                spec = self.ch.choice(["ii->i", "ii->"])
            return self.emit(f"np.einsum({spec!r}, {a.name})", "einsum")
        if fn == "einsum2":
            if a.ndim == 1:
                spec, bs = self.ch.choice([("i,i->", (k,)), ("i,j->ij", (self.ch.integers(1, 4),)),
                                           ("i,ij->j", (k, self.ch.integers(1, 4)))])
            elif a.ndim == 2:
                m = self.ch.integers(1, 4)
                spec, bs = self.ch.choice([("ij,jk->ik", (k, m)), ("ij,ij->i", a.shape), ("ij,kj->ik", (m, k)),
                                           ("ij,j->i", (k,)), ("...j,jk->...k", (k, m))])
            else:
                m = self.ch.integers(1, 4)
                spec, bs = ("...ij,jk->...ik", (k, m))
            b = self.pick("f", lambda v: v.shape == tuple(bs))
            bn = b.name if b is not None and self.ch.boolean() else self.operand_exact(tuple(bs))
            return self.emit(f"np.einsum({spec!r}, {a.name}, {bn})", "einsum")
        if fn == "tensordot":
            bs = (k, self.ch.integers(1, 4))
            return self.emit(f"np.tensordot({a.name}, {self.operand_exact(bs)}, axes=1)", "tensordot")
        if fn == "rmatmul":
            m = self.ch.integers(1, 4)
            lead = a.shape[-2] if a.ndim >= 2 else a.shape[0]
            bs = (m, lead) if self.ch.boolean() else (lead,)
            b = self.pick("f", lambda v: v.shape == bs)
            bn = b.name if b is not None else self.operand_exact(bs)
            return self.emit(f"{bn} @ {a.name}", "matmul")
        if fn == "batched":
            bshape = (self.ch.integers(1, 3),) + (a.shape[-2:] if a.ndim >= 2 else (1, k))
            b_batch = self.pick("f", lambda v: v.ndim == 3 and v.shape[-2] == k)
            bn = b_batch.name if b_batch is not None else self.operand_exact(
                (self.ch.choice([1, bshape[0]]), k, self.ch.integers(1, 3)))
            return self.emit(f"np.matmul({a.name}, {bn})", "matmul_batched")
        n = self.ch.integers(1, 4)
        bs = self.ch.choice([(k,), (k, n)])
        b = self.pick("f", lambda v: v.shape == bs)
        bn = b.name if b is not None and self.ch.boolean() else self.operand_exact(bs)
        if fn == "dot":
            if a.ndim > 2:
                raise _Reject("dot rank")
            return self.emit(f"np.dot({a.name}, {bn})", "dot")
        m = self.ch.choice(["np", "snp"])
        return self.emit(self.ch.choice([f"{a.name} @ {bn}", f"{m}.matmul({a.name}, {bn})"]), "matmul")

    def fam_composite(self) -> _Val:
        a = self.pick("f")
        fn = self.ch.choice(["logsumexp", "softmax", "norm", "norm_axis", "mean_keep"])
        if fn in ("logsumexp", "softmax") and a.ndim == 0:
            raise _Reject("0-d")
        if fn == "logsumexp":
            ax = self.ch.integers(-a.ndim, a.ndim - 1)
            return self.emit(f"snp.logsumexp({a.name}, axis={ax})", "logsumexp")
        if fn == "softmax":
            return self.emit(f"snp.softmax({a.name}, axis={self.ch.integers(-a.ndim, a.ndim - 1)})", "softmax")
        if fn in ("norm", "norm_axis"):
            if fn == "norm_axis" and a.ndim >= 1:
                ax = self.ch.integers(0, a.ndim - 1)
                s = np.sum(a.value.astype(np.float64) ** 2, axis=ax)
                if np.any(s < 1e-2):
                    raise _Reject("norm at 0")
                return self.emit(f"np.linalg.norm({a.name}, axis={ax})", "norm")
            if np.sum(a.value.astype(np.float64) ** 2) < 1e-2:
                raise _Reject("norm at 0")
            return self.emit(f"np.linalg.norm({a.name})", "norm")
        if a.ndim == 0:
            raise _Reject("0-d")
        return self.emit(f"{a.name} - np.mean({a.name}, axis=-1, keepdims=True)", "mean")

    def fam_random(self) -> _Val:
        a = self.pick("f")
        rate = self.ch.choice([0.25, 0.5])
        key: Any = self.ch.integers(0, 1000)
        if self.ch.boolean():  # a traced key: the mask is a random_uniform node, regenerated, never stored
            k = self.pick("i", lambda v: v.ndim == 0 and v.name.startswith("i")) or self.new_input((), "i", 1000)
            key = k.name
        return self.emit(f"snp.dropout({a.name}, {rate}, {key}, salt={self.ch.integers(0, 3)})", "dropout")

    def fam_misc(self) -> _Val:
        a = self.pick("f")
        opts = ["fanout", "isnan", "int_scale"]
        if not self.cfg.differentiable:
            opts += ["stop_gradient", "cast", "cast", "stop_gradient"]
        fn = self.ch.choice(opts)
        if fn == "fanout":  # one value read by several readers in one line
            return self.emit(f"{a.name} * np.sin({a.name}) + {a.name}", "fanout")
        if fn == "isnan":
            return self.emit(f"np.where(np.isnan({a.name}), 0.0, {a.name})", "isnan")
        if fn == "int_scale":
            iv = self.pick("i", lambda v: v.ndim == 0) or self.new_input((), "i")
            return self.emit(f"{a.name} * {iv.name}", "int_promote")
        if fn == "stop_gradient":
            return self.emit(f"sg.stop_gradient({a.name}) * {a.name}", "stop_gradient")
        other = np.float32 if self.dt == np.float64 else np.float64
        return self.emit(f"{a.name}.astype(np.{np.dtype(other).name}) + 1.0", "cast")

    # ----- driver -----

    def step(self) -> None:
        fams = [(n, w) for n, w in self.cfg.families if w > 0]
        names = [n for n, w in fams for _ in range(w)]
        for _ in range(6):
            self._pending.clear()
            fam = self.ch.choice(names)
            try:
                getattr(self, "fam_" + fam)()
                return
            except Exception:  # noqa: BLE001  (_Reject, or a candidate the generator cannot build here)
                continue
        a = self.pick("f")
        self.emit(f"np.tanh({a.name}) + 0.5", "tanh")

    def finish(self) -> Program:
        floats = [v for v in self.vals if v.kind == "f" and v.name.startswith("v")]
        if not floats:
            floats = [self.emit(f"np.sin({self.pick('f').name})", "sin")]
        outs = [floats[-1]]
        for _ in range(self.ch.integers(0, 2)):
            cand = self.pick("f", lambda v: v.name.startswith("v") and v not in outs)
            if cand is not None:
                outs.append(cand)
        if not self.cfg.differentiable and self.ch.integers(0, 9) == 0:
            iv = self.pick("i", lambda v: v.name.startswith("v"))
            if iv is not None:
                outs.append(iv)
        params = ", ".join(a.name for a in self.args)
        ret = ", ".join(o.name for o in outs)
        src = f"def prog({params}):\n" + "\n".join(self.lines) + f"\n    return ({ret},)\n"
        return Program(
            source=src,
            args=tuple(np.array(a.value, copy=True) for a in self.args),
            dtype=self.dt,
            float_argnums=tuple(i for i, a in enumerate(self.args) if a.kind == "f"),
            features=frozenset(self.features),
            scale=self.scale,
            seed=self.seed,
            differentiable=self.cfg.differentiable,
        )


def _generate(ch: Any, cfg: Config) -> Program:
    dtype = ch.choice(cfg.dtypes)
    seed = ch.integers(0, 2**31 - 1)
    g = _Gen(ch, cfg, dtype, seed)
    for _ in range(ch.integers(1, cfg.max_inputs)):
        g.new_input(g.shape())
    for _ in range(ch.integers(cfg.min_ops, cfg.max_ops)):
        g.step()
    return g.finish()


def programs(config: Config = Config()) -> st.SearchStrategy:
    """A hypothesis strategy of random programs (see the module docstring)."""

    @st.composite
    def strat(draw: Callable) -> Program:
        return _generate(_HypothesisChoices(draw), config)

    return strat()


def program_from_seed(seed: int, config: Config = Config()) -> Program:
    """The same generator driven by a seeded RNG (deterministic for a given seed and config)."""
    return _generate(_RandomChoices(seed), config)


# --------------------------------------------------------------------------- oracles


class MismatchError(AssertionError):
    """Two computations that must agree do not."""


def tolerances(dtype: Any, scale: float = 1.0) -> tuple[float, float]:
    """(rtol, atol) for comparing values of a program of this dtype and intermediate scale."""
    if np.dtype(dtype) == np.float32:
        return 2e-3, 2e-3 * (1.0 + scale)
    return 1e-7, 1e-7 * (1.0 + scale)


def assert_close(actual: Sequence[Any], expected: Sequence[Any], rtol: float, atol: float, what: str) -> None:
    """Compare two tuples of arrays (shapes, dtype kinds, values; integers exactly).

    Raises:
        MismatchError: naming `what`, the output, and the largest difference.
    """
    actual, expected = list(actual), list(expected)
    if len(actual) != len(expected):
        raise MismatchError(f"{what}: {len(actual)} outputs, expected {len(expected)}")
    for k, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            raise MismatchError(f"{what}: output {k} has shape {a.shape}, expected {e.shape}")
        if e.dtype.kind in "biu" or a.dtype.kind in "biu":
            if a.dtype.kind != e.dtype.kind and not (a.dtype.kind in "iu" and e.dtype.kind in "iu"):
                raise MismatchError(f"{what}: output {k} has dtype {a.dtype}, expected {e.dtype}")
            if not np.array_equal(a, e):
                raise MismatchError(f"{what}: output {k} differs:\n{a}\nexpected\n{e}")
            continue
        if a.dtype != e.dtype:
            raise MismatchError(f"{what}: output {k} has dtype {a.dtype}, expected {e.dtype}")
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        if not np.allclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True):
            d = np.abs(a64 - e64)
            d = np.where(np.isnan(d) & ~(np.isnan(a64) & np.isnan(e64)), np.inf, np.nan_to_num(d))
            i = np.unravel_index(int(np.argmax(d)), d.shape) if d.ndim else ()
            raise MismatchError(f"{what}: output {k} differs at {i}: {a64[i]!r} vs expected {e64[i]!r} "
                                f"(max |diff| {d.max():.3g}, rtol {rtol:g}, atol {atol:g})")


def check_evaluator(prog: Program) -> sg.Graph:
    """Trace the program, validate the graph, and compare the NumPy evaluator with plain NumPy.

    Returns:
        The traced graph.
    """
    g = sg.trace(prog.fn, *prog.args)
    g.check()
    rtol, atol = tolerances(prog.dtype, prog.scale)
    assert_close(g.evaluate(*prog.args), prog.reference(), rtol, atol, "evaluator vs NumPy")
    return g


def check_simplify(prog: Program, g: sg.Graph | None = None) -> sg.Graph:
    """Simplified vs unsimplified graph (values), and the simplified graph validates."""
    g = g if g is not None else sg.trace(prog.fn, *prog.args)
    s = sg.simplify(g)
    s.check()
    if len(s) > len(g) + 4:
        raise MismatchError(f"simplify grew the graph from {len(g)} to {len(s)} nodes")
    rtol, atol = tolerances(prog.dtype, prog.scale)
    assert_close(s.evaluate(*prog.args), g.evaluate(*prog.args), rtol, atol, "simplified vs unsimplified")
    return s


def check_llvm(prog: Program, g: sg.Graph | None = None) -> Any:
    """The LLVM backend (`sg.compile`, default backend) vs the NumPy evaluator, twice (cache hit)."""
    g = g if g is not None else sg.trace(prog.fn, *prog.args)
    want = g.evaluate(*prog.args)
    cf = compile_fn(prog.fn)
    rtol, atol = tolerances(prog.dtype, prog.scale)
    got = cf(*prog.args)
    assert_close(got, want, rtol, atol, "LLVM vs evaluator")
    assert_close(cf(*prog.args), want, rtol, atol, "LLVM vs evaluator (second call)")
    return cf


def _loss_fn(prog: Program, fn: Callable, seed: int) -> tuple[Callable, tuple]:
    """A scalar loss sum_k <u_k, out_k> of the float arguments (int arguments fixed), and its args."""
    outs = prog.reference()
    rng = np.random.default_rng(seed)
    us = [rng.standard_normal(o.shape).astype(o.dtype) if o.dtype.kind == "f" else None for o in outs]
    fa = prog.float_argnums

    def loss(*xs: Any) -> Any:
        full = list(prog.args)
        for k, x in zip(fa, xs):
            full[k] = x
        res = fn(*full)
        total = 0.0
        for u, o in zip(us, res):
            if u is not None:
                total = total + snp.sum(o * u)
        return total

    return loss, tuple(prog.args[k] for k in fa)


def check_llvm_grad(prog: Program, checkpoint: Any = None) -> None:
    """A compiled value_and_grad (the LLVM backend, optionally checkpointed) vs the evaluator on the same graph."""
    loss, xs = _loss_fn(prog, prog.fn, prog.seed + 7)
    if not xs:
        return
    vg = sg.value_and_grad(loss, argnums=tuple(range(len(xs))))
    g = sg.trace(vg, *xs)
    want = g.evaluate(*xs)
    cf = compile_fn(vg, checkpoint=checkpoint)
    got = cf(*xs)
    rtol, atol = tolerances(prog.dtype, prog.scale)
    wl, gl = sg.tree_leaves(want), sg.tree_leaves(got)
    assert_close(gl, wl, rtol * 10, atol * 10, "LLVM value_and_grad vs evaluator")


def _vdot(a: Any, b: Any) -> float:
    return float(sum(np.vdot(np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel())
                     for x, y in zip(sg.tree_leaves(a), sg.tree_leaves(b))))


def _axpy(c: float, v: tuple, x: tuple) -> tuple:
    return tuple(np.asarray(xi + c * vi, dtype=xi.dtype) for xi, vi in zip(x, v))


def check_derivatives(prog: Program, eps: float = 1e-6, rtol: float = 1e-5, second_order: bool = True) -> str:
    """Reverse vs forward mode vs central differences, first and second order (float64 programs).

    With xs the float arguments, random directions v, w and output weights u:
    first order  <u, J v>: forward (jvp), reverse (vjp), central differences of the NumPy reference;
    second order u^T D²f[v, w]: forward-over-forward, forward-over-reverse,
    reverse-over-forward, reverse-over-reverse, and central differences of the
    first-order graph along w. The second-order graph is also simplified and
    compared with itself unsimplified.

    Returns:
        "ok", or "non-smooth" when the finite differences at two step sizes
        disagree with each other (a kink within reach: not a derivative bug).

    Raises:
        MismatchError: a mode disagrees with another or with finite differences.
    """
    fa = prog.float_argnums
    if not fa:
        return "ok"
    xs = tuple(prog.args[k] for k in fa)
    rng = np.random.default_rng(prog.seed + 1)
    v = tuple(rng.standard_normal(x.shape) for x in xs)
    w = tuple(rng.standard_normal(x.shape) for x in xs)
    outs = prog.reference()
    u = tuple(rng.standard_normal(o.shape) for o in outs)

    def full(fn: Callable) -> Callable:
        def f(*ys: Any) -> tuple:
            a = list(prog.args)
            for k, y in zip(fa, ys):
                a[k] = y
            return fn(*a)

        return f

    f = full(prog.fn)
    fref = full(prog.reference)

    def dot(u_: Any, t: Any) -> Any:
        total = 0.0
        for ui, ti in zip(u_, t):
            total = total + snp.sum(ui * ti)
        return total

    def first(xs_: tuple, v_: tuple, u_: tuple) -> tuple:
        _, jv = sg.jvp(f, xs_, v_)
        _, pull = sg.vjp(f, *xs_)
        return dot(u_, jv), dot(pull(u_), v_)

    def second(xs_: tuple, v_: tuple, w_: tuple, u_: tuple) -> tuple:
        def jv(*ys: Any) -> Any:
            return dot(u_, sg.jvp(f, ys, v_)[1])

        def jtu(*ys: Any) -> Any:
            return sg.vjp(f, *ys)[1](u_)

        ff = sg.jvp(jv, xs_, w_)[1]
        fr = dot(sg.jvp(jtu, xs_, w_)[1], v_)
        rf = dot(sg.grad(jv, argnums=tuple(range(len(xs_))))(*xs_), w_)
        rr = dot(sg.vjp(jtu, *xs_)[1](v_), w_)
        return ff, fr, rf, rr

    g1 = sg.trace(first, xs, v, u)
    fwd1, rev1 = (float(t) for t in g1.evaluate(xs, v, u))
    scale1 = sum(float(np.sum(np.abs(ui) * np.abs(np.asarray(oi, np.float64)))) for ui, oi in zip(u, outs))

    def fd(h: float) -> float:
        with np.errstate(all="ignore"):
            p, m = fref(*_axpy(h, v, xs)), fref(*_axpy(-h, v, xs))
        return (_vdot(u, p) - _vdot(u, m)) / (2 * h)

    def close(a: float, b: float, r: float, extra: float = 0.0) -> bool:
        return abs(a - b) <= r * max(1.0, abs(a), abs(b)) + extra

    if not close(fwd1, rev1, 1e-9):
        raise MismatchError(f"first order: forward <u, J v> = {fwd1!r} but reverse <J^T u, v> = {rev1!r}")
    fd1 = fd(eps)
    noise = 1e-15 * scale1 / eps * 10
    if not close(fwd1, fd1, rtol, noise):
        if not close(fd1, fd(eps * 10), rtol * 10, noise):
            return "non-smooth"
        raise MismatchError(f"first order: AD <u, J v> = {fwd1!r} but central differences give {fd1!r}")
    if not second_order:
        return "ok"
    g2 = sg.trace(second, xs, v, w, u)
    vals = [float(t) for t in g2.evaluate(xs, v, w, u)]
    names = ("forward-over-forward", "forward-over-reverse", "reverse-over-forward", "reverse-over-reverse")
    for n, val in zip(names[1:], vals[1:]):
        if not close(vals[0], val, 1e-8):
            raise MismatchError(f"second order: {names[0]} = {vals[0]!r} but {n} = {val!r}")
    s2 = sg.simplify(g2)
    svals = [float(t) for t in s2.evaluate(xs, v, w, u)]
    for n, a, b in zip(names, svals, vals):
        if not close(a, b, 1e-7):
            raise MismatchError(f"second order {n}: simplified graph gives {a!r}, unsimplified {b!r}")

    def fd2(h: float) -> float:
        p = g1.evaluate(_axpy(h, w, xs), v, u)
        m = g1.evaluate(_axpy(-h, w, xs), v, u)
        return (float(p[0]) - float(m[0])) / (2 * h)

    d2 = fd2(eps)
    if not close(vals[0], d2, rtol * 10, noise * 10):
        if not close(d2, fd2(eps * 10), rtol * 100, noise * 10):
            return "non-smooth"
        raise MismatchError(f"second order: AD u^T D2f[v, w] = {vals[0]!r} but central differences of the "
                            f"first-order graph give {d2!r}")
    return "ok"


#: The checkpointing strategies cross-checked against no checkpointing ("budget": a byte budget
#: halfway between the min-cut plan's planned peak and no checkpointing's).
CHECKPOINT_STRATEGIES = ("sqrt", "revolve", "mincut", "budget")


def check_checkpoint(prog: Program, strategies: Sequence[str] = CHECKPOINT_STRATEGIES) -> None:
    """Every checkpoint strategy vs none, on the joint value+gradient graph (evaluator values)."""
    from symgraph.passes.checkpoint import apply_checkpoint, checkpoint_stats

    loss, xs = _loss_fn(prog, prog.fn, prog.seed + 3)
    if not xs:
        return
    vg = sg.value_and_grad(loss, argnums=tuple(range(len(xs))))
    g = sg.simplify(sg.trace(vg, *xs))
    want = sg.tree_leaves(g.evaluate(*xs))
    peaks = {None: checkpoint_stats(g)["peak_bytes"]}
    for s in sorted(strategies, key=lambda s: s == "budget"):
        strategy: Any = s
        if s == "budget":
            lo = peaks.get("mincut") or checkpoint_stats(apply_checkpoint(g, "mincut"))["peak_bytes"]
            strategy = max(lo, (lo + peaks[None]) // 2)
        c = apply_checkpoint(g, strategy)
        c.check()
        peaks[s] = checkpoint_stats(c)["peak_bytes"]
        if s == "budget" and peaks[s] > strategy:
            raise MismatchError(f"checkpoint budget {strategy} bytes: planned peak {peaks[s]} bytes exceeds it")
        got = sg.tree_leaves(c.evaluate(*xs))
        assert_close(got, want, 1e-12, 1e-12 * (1 + prog.scale), f"checkpoint={strategy!r} vs none")
