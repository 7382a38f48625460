"""Call arguments against a graph's input signature: which are accepted, converted, cast or refused.

The one home of the argument rules (docs/compile.md, "Arguments"): pytree structure, leaf kind,
shape, dtype (casting), memory layout and buffer donation. The NumPy evaluator
(`interpreter.check_arguments`), every backend's executable (`Executable.run`) and the LLVM
backend's generated fast call path (which asks this module for the source of its checks,
`fast_match_source`) apply them.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from .errors import DTypeError, ShapeError
from .tracing import leaf_problem  # what may be an argument leaf at all (trace, compile, here)
from .tree import TreeDef, tree_flatten, tree_unflatten

__all__ = ["MISS", "EVALUATE_CASTING", "COMPILED_CASTING", "Signature", "canonical_dtype", "donatable",
           "fast_match_source", "fast_pack_source", "leaf_problem"]

#: Returned by a generated fast path when the arguments do not match its signature exactly
#: (the caller then takes the checked path).
MISS = object()

#: How `graph.evaluate` casts an argument of another dtype (`np.can_cast` level): a traced graph
#: runs on same-kind dtypes (float32 or int64 into float64, not float into int).
EVALUATE_CASTING = "same_kind"
#: How a compiled signature casts: byte order only. `sg.compile` keys signatures by dtype, so
#: another dtype compiles another signature; a compiled executable refuses it.
COMPILED_CASTING = "equiv"

# ndarray.flags.num bits: C_CONTIGUOUS, ALIGNED, WRITEABLE
_C_CONTIGUOUS, _ALIGNED, _WRITEABLE = 0x1, 0x100, 0x400
#: The layout native code reads: C order, each element at an address that is a multiple of its size.
NATIVE_LAYOUT = _C_CONTIGUOUS | _ALIGNED


def canonical_dtype(d: Any) -> np.dtype:
    """The canonical dtype object (`np.dtype(np.float64)` is a singleton; derived dtypes may not be).

    The generated fast path compares dtypes by identity, so signatures hold canonical ones.
    """
    d = np.dtype(d)
    if d.isnative and d.kind in "biufc":
        return np.dtype(d.type)
    return d


class Signature:
    """The input signature of a graph as one entry point checks calls against it.

    Args:
        graph: the graph (its `inputs`, `in_tree` and `name` are read).
        casting: how an argument of another dtype is cast, an `np.can_cast` level:
            `EVALUATE_CASTING` for the evaluator, `COMPILED_CASTING` for executables.
        contiguous: whether the arrays are handed to code that reads raw memory (then
            arguments that are not C-contiguous and aligned are copied).
        against: how messages name the signature ("the graph was traced with").
        specs: [(shape, dtype)] per input leaf, when not the graph inputs' own.

    Attributes:
        specs: [(shape, canonical dtype)] per input leaf.
        names: the name of each input leaf in messages.
    """

    __slots__ = ("where", "in_tree", "specs", "names", "casting", "contiguous", "against")

    def __init__(self, graph: Any, *, casting: str = COMPILED_CASTING, contiguous: bool = False,
                 against: str = "the compiled signature has", specs: Sequence[tuple[tuple, Any]] | None = None):
        self.where = graph.name
        self.in_tree = graph.in_tree
        specs = [(n.shape, n.dtype) for n in graph.inputs] if specs is None else specs
        self.specs = [(tuple(shape), canonical_dtype(dtype)) for shape, dtype in specs]
        self.names = [n.attr("name", f"arg{i}") for i, n in enumerate(graph.inputs)]
        self.casting = casting
        self.contiguous = contiguous
        self.against = against

    def flatten(self, args: tuple) -> list[Any]:
        """The leaves of positional arguments whose pytree structure is the traced one.

        Raises:
            ShapeError: another structure (tuples, lists, dict keys, number of leaves).
        """
        leaves, tree = tree_flatten(tuple(args))
        if self.in_tree is not None and tree != self.in_tree:
            raise ShapeError(f"{self.where}: arguments have structure {tree}, the graph was traced with "
                             f"{self.in_tree}")
        return leaves

    def check(self, leaves: Sequence[Any]) -> list[np.ndarray]:
        """Check flat argument leaves and return one array per input, of its shape and dtype.

        Rules, in order, per leaf: (1) it is a bool/integer/float array, NumPy scalar or Python
        number, else `leaf_problem`'s error; (2) its shape is the input's, else ShapeError;
        (3) its dtype is the input's (byte order aside: a byte-swapped array is converted), or
        `np.can_cast(dtype, input dtype, casting)` and it is cast, else DTypeError; (4) with
        `contiguous`, an array that is not C-contiguous and aligned is copied. The caller's
        arrays are never written.

        Args:
            leaves: one leaf per graph input (after `flatten`).

        Returns:
            Arrays: the leaf itself where it already fits, else a converted copy.

        Raises:
            ShapeError: a wrong number of leaves or a wrong shape.
            DTypeError: a non-numeric leaf, or a dtype the casting level refuses.
            UnsupportedOpError: a masked array (its mask would be lost).
        """
        if len(leaves) != len(self.specs):
            raise ShapeError(f"{self.where}: expected {len(self.specs)} array arguments, got {len(leaves)}")
        out = []
        native = self.contiguous
        for i, (x, (shape, dtype)) in enumerate(zip(leaves, self.specs)):
            if type(x) is np.ndarray and x.dtype is dtype and x.shape == shape and \
                    (not native or x.flags.num & NATIVE_LAYOUT == NATIVE_LAYOUT):
                out.append(x)  # the common case: the leaf fits as it is
            else:
                out.append(self._convert(i, x, shape, dtype))
        return out

    def _convert(self, i: int, x: Any, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """Rules (1)-(4) of `check` for one leaf that does not fit as it is."""
        name = self.names[i]
        if type(x) is not np.ndarray or x.dtype.kind not in "biufc":
            problem = leaf_problem(x)
            if problem is not None:  # masked arrays, strings, objects, complex, ...
                raise problem[0](f"{self.where}: argument {name} {problem[1]}")
        a = np.asarray(x)
        if a.shape != shape:
            raise ShapeError(f"{self.where}: argument {name} has shape {a.shape}, {self.against} {shape}")
        if a.dtype != dtype:
            if not np.can_cast(a.dtype, dtype, self.casting):
                raise DTypeError(f"{self.where}: argument {name} has dtype {a.dtype}, {self.against} {dtype}")
            a = a.astype(dtype)
        if self.contiguous and a.flags.num & NATIVE_LAYOUT != NATIVE_LAYOUT:
            a = np.ascontiguousarray(a)
            if not a.flags.aligned:
                a = a.copy()
        return a


def donatable(arrays: Sequence[np.ndarray], leaves: Sequence[Any], li: int) -> bool:
    """Whether the caller's array for donated leaf `li` may receive an output in place.

    It must be the caller's own array as `Signature.check` returned it (an ndarray of the
    input's dtype and shape that needed no conversion), own its memory (not a view), be
    writeable, C-contiguous and aligned, and no other argument may be it or a view of it
    (NumPy points a view's `base` at the array that owns the memory). Otherwise the output
    gets a fresh buffer and the caller's array is left alone.

    Args:
        arrays: the checked arrays (`Signature.check`).
        leaves: the leaves as the caller passed them.
        li: the donated leaf's index.
    """
    a = arrays[li]
    if a is not leaves[li] or a.base is not None or a.flags.num & (NATIVE_LAYOUT | _WRITEABLE) != \
            NATIVE_LAYOUT | _WRITEABLE:
        return False
    return not any(j != li and (b is a or b.base is a) for j, b in enumerate(arrays))


# ----- the generated fast path's checks -----


def fast_match_source(in_tree: TreeDef | None, specs: Sequence[tuple[tuple, np.dtype]], donated: frozenset[int],
                      ns: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """Source lines of a generated `fast(args)` that match the arguments to the signature, or return MISS.

    The pytree structure is matched by tuple lengths, dict key sets and list lengths; each array
    leaf by type, dtype (by identity: `specs` hold canonical dtypes), shape and layout (C-contiguous,
    aligned and writeable: `flags.carray`, within `NATIVE_LAYOUT`, so nothing `Signature.check`
    would copy passes; a read-only array takes the checked path); a scalar leaf may also
    be a NumPy scalar of its dtype or the Python type NumPy gives that dtype (float, int, bool),
    made a 0-d array as `Signature.check` would. Donated leaves must pass `donatable` (written as
    code). Anything else returns `MISS`: the caller then takes the checked path, which applies
    the same rules (so the fast path never accepts what the checked path would refuse or copy).

    Args:
        in_tree: the traced argument structure (a tuple of positional arguments).
        specs: [(shape, canonical dtype)] per leaf.
        donated: indices of donated leaves.
        ns: the namespace of the generated function; the names the lines use are added to it.

    Returns:
        (lines, leaf variables), lines indented for the function body; after them `args` is the
        flat tuple of leaf arrays. None when the structure has no fast path (namedtuples, ...).
    """
    ns.update({"_nd": np.ndarray, "_MISS": MISS, "_array": np.array, "_float": float, "_int": int, "_bool": bool,
               "_dict": dict, "_tuple": tuple, "_list": list})
    lines: list[str] = []
    names: list[str] = []
    counter = itertools.count()

    def leaf() -> str:
        names.append(f"a{len(names)}")
        return names[-1]

    def extract(td: TreeDef, expr: str) -> bool:
        """Emit checks for the structure `td` at `expr`; leaves become variables a0, a1, ..."""
        if td.kind == "leaf":
            v = leaf()
            lines.append(f"    {v} = {expr}")
            return True
        if td.kind == "none":
            lines.append(f"    if {expr} is not None: return _MISS")
            return True
        k = next(counter)
        var = f"t{k}"
        lines.append(f"    {var} = {expr}")
        if td.kind in ("tuple", "list"):
            ty = "_tuple" if td.kind == "tuple" else "_list"
            lines.append(f"    if type({var}) is not {ty} or len({var}) != {len(td.children)}: return _MISS")
            return all(extract(c, f"{var}[{i}]") for i, c in enumerate(td.children))
        if td.kind == "dict":
            ns[f"K{k}"] = frozenset(td.meta)
            lines.append(f"    if type({var}) is not _dict or {var}.keys() != K{k}: return _MISS")
            for j, (key, c) in enumerate(zip(td.meta, td.children)):
                ns[f"KEY{k}_{j}"] = key
                if not extract(c, f"{var}[KEY{k}_{j}]"):
                    return False
            return True
        return False  # namedtuples and other nodes: no fast path

    if in_tree is None or in_tree.kind != "tuple":
        return None
    # the positional arguments: their count, then unpacked in one step
    lines.append(f"    if len(args) != {len(in_tree.children)}: return _MISS")
    if in_tree.children:
        xs = [f"x{i}" for i in range(len(in_tree.children))]
        lines.append(f"    {', '.join(xs)}{',' if len(xs) == 1 else ''} = args")
        for x, c in zip(xs, in_tree.children):
            if not extract(c, x):
                return None
    if len(names) != len(specs):
        return None
    rebuild = not all(c.kind == "leaf" for c in in_tree.children)
    for i, (shape, dtype) in enumerate(specs):
        rebuild |= _leaf_check_source(lines, ns, names[i], i, shape, dtype, i in donated)
    for li in sorted(donated):
        a = names[li]
        for j in range(len(names)):
            if j != li:
                lines.append(f"    if {names[j]} is {a} or {names[j]}.base is {a}: return _MISS")
    if rebuild:
        lines.append(f"    args = ({', '.join(names)}{',' if len(names) == 1 else ''})")
    return lines, names


def _leaf_check_source(lines: list[str], ns: dict, a: str, i: int, shape: tuple, dtype: np.dtype,
                       donated: bool) -> bool:
    """Append the fast path's check of leaf variable `a` (input i); returns whether it may be converted."""
    ns[f"D{i}"] = dtype
    ns[f"S{i}"] = tuple(shape)
    # flags.carray: C-contiguous, aligned (NATIVE_LAYOUT) and writeable, in one attribute read (as cheap
    # as comparing strides; NATIVE_LAYOUT alone costs a second read). A read-only array therefore takes
    # the checked path, which accepts it as it is. A donated leaf must also own its memory (`donatable`).
    check = f"type({a}) is not _nd or {a}.dtype is not D{i} or {a}.shape != S{i} or not {a}.flags.carray"
    if donated:
        check += f" or {a}.base is not None"
    if shape == () and not donated:
        # a NumPy scalar of the dtype (np.float64(2.0)), or the Python type np.asarray gives that dtype
        ns[f"ST{i}"] = dtype.type
        py = {"f": "float", "i": "int", "b": "bool"}.get(dtype.kind) if dtype.itemsize == 8 or dtype.kind == "b" \
            else None
        conv = f"type({a}) is ST{i}" + (f" or type({a}) is _{py}" if py else "")
        lines.append(f"    if {conv}: {a} = _array({a}, D{i})")
        lines.append(f"    elif {check}: return _MISS")
        return True
    lines.append(f"    if {check}: return _MISS")
    return False


def fast_pack_source(out_tree: TreeDef | None, results: Sequence[str], ns: dict[str, Any]) -> str:
    """A Python expression that builds the output pytree from the variables holding the flat results.

    Args:
        out_tree: the traced output structure (None: a flat list).
        results: one variable name per output leaf, in flat order.
        ns: the generated function's namespace (dict keys and `_unflatten` are added).
    """
    it = iter(results)

    def build(td: TreeDef) -> str | None:
        if td.kind == "leaf":
            return next(it)
        if td.kind == "none":
            return "None"
        parts = [build(c) for c in td.children]
        if any(p is None for p in parts):
            return None
        if td.kind == "tuple":
            return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
        if td.kind == "list":
            return f"[{', '.join(parts)}]"
        if td.kind == "dict":
            items = []
            for key, p in zip(td.meta, parts):
                ns[f"OK{len(ns)}"] = key
                items.append(f"OK{len(ns) - 1}: {p}")
            return "{" + ", ".join(items) + "}"
        return None

    expr = build(out_tree) if out_tree is not None else None
    if expr is None:
        ns["_unflatten"], ns["_tree"] = tree_unflatten, out_tree
        expr = f"_unflatten(_tree, [{', '.join(results)}])"
    return expr
