"""The LLVM backend's executable: checks a call's arguments, allocates outputs, calls the native entry.

Every argument is checked (shape, dtype; non-contiguous or misaligned arrays are copied) before
native code runs, so a wrong call raises an error instead of crashing. A generated per-signature
Python function does the checks for the common case of positional arrays in a few attribute reads
and calls the entry directly (`codegen.cpu.abi`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from symgraph.compile import MISS  # the fast-path sentinel shared with sg.compile
from symgraph.errors import DTypeError, ShapeError

from .abi import fastcall_builtin

__all__ = ["Executable"]


def _canonical(d: Any) -> np.dtype:
    """The canonical dtype object (`np.dtype(np.float64)` is a singleton; derived dtypes may not be)."""
    d = np.dtype(d)
    if d.isnative and d.kind in "biuf":
        return np.dtype(d.type)
    return d


def _aligned_empty(nbytes: int, align: int = 64) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


class Executable:
    """One compiled signature: checks arguments, allocates outputs, calls native code.

    Attributes:
        graph: the compiled graph.
        stats: figures (nodes, kernels, compile_seconds, peak_bytes, arena_bytes, ...).
        fast: a generated function for flat positional array arguments
            (returns MISS when the arguments do not match exactly).
    """

    def __init__(self, graph: Any, jitted: Any, in_specs: list, out_buffers: list, out_plan: list,
                 arena_bytes: int, consts: list[np.ndarray], donated: dict[int, int], stats: dict,
                 abi: str = "ctypes"):
        self.graph = graph
        self.jitted = jitted
        # [(shape, dtype)]; dtypes canonical (the fast path compares them by identity)
        self.in_specs = [(tuple(sh), _canonical(d)) for sh, d in in_specs]
        # [(shape, dtype)] of fresh output arrays; canonical dtypes, so outputs passed back in (parameters
        # of a training loop) pass the fast path's identity check on dtypes
        self.out_buffers = [(tuple(sh), _canonical(d)) for sh, d in out_buffers]
        # per output: ("buf", j) | ("in", li) | ("copy_in", li) | ("const", array) | ("dup", k)
        self.out_plan = out_plan
        self.arena_bytes = arena_bytes
        self.consts = tuple(consts)
        self.donated = donated              # output position -> input leaf
        self.donated_leaves = frozenset(donated.values())
        self.stats = stats
        self._pool: list = []
        self._dummy = np.empty(8, np.uint8)
        self.abi = abi
        self._keep: tuple = ()
        if abi == "fastcall":
            self.native, self._keep = fastcall_builtin(jitted.address, f"symgraph_{graph.name}")
        elif abi == "ctypes":
            proto = ctypes.CFUNCTYPE(None, ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object)
            self.native = proto(jitted.address)
        else:
            proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
            self.native = proto(jitted.address)
        self.fast = self._make_fast() if abi != "pointers" else None

    # -- inspection --

    def set_profile(self, kernels: list) -> None:
        """Attach the kernel descriptions of a module compiled with profiling (see `profile`)."""
        self._prof_kernels = kernels
        addr = self.jitted.engine.get_global_value_address("sg_profile")
        self._prof = (ctypes.c_int64 * (len(kernels) + 1)).from_address(addr)

    def profile(self, reset: bool = False) -> list[dict] | None:
        """Time spent per kernel since compilation (or the last reset), when compiled with profiling.

        Compile with `SYMGRAPH_PROFILE=1` in the environment (or
        `codegen.compile_graph(..., profile=True)`) to get figures; each kernel
        call is timed with clock_gettime (about 40 ns of overhead per kernel).

        Args:
            reset: zero the counters after reading them.

        Returns:
            None without profiling; else one dict per kernel, in execution
            order: index, kind ("gemm", "loop", "loop+par", "empty"), nodes
            (op name and shape of each node the kernel writes), seconds (total
            over all calls), calls (number of entry calls).
        """
        prof = getattr(self, "_prof", None)
        if prof is None:
            return None
        n = len(self._prof_kernels)
        calls = int(prof[n])
        rows = []
        for i, (kind, nodes) in enumerate(self._prof_kernels):
            rows.append({"index": i, "kind": kind, "seconds": prof[i] * 1e-9, "calls": calls,
                         "nodes": [f"{x.op.name}{tuple(x.shape)}" for x in nodes]})
        if reset:
            for i in range(n + 1):
                prof[i] = 0
        return rows

    def llvm_ir(self) -> str:
        return self.jitted.llvm_ir()

    def asm(self) -> str:
        return self.jitted.asm()

    # -- arena --

    def _arena(self) -> np.ndarray:
        return _aligned_empty(self.arena_bytes)

    def release_arena(self) -> int:
        """Drop the pooled arenas, so that their memory can return to the system.

        A call takes an arena (the scratch memory of all intermediates,
        `arena_bytes` bytes, 64-byte aligned) from this executable's pool, or
        allocates one when the pool is empty, and puts it back when it
        returns; the pool therefore keeps one arena per thread that called
        concurrently. This empties the pool: the arrays are freed as soon as
        nothing else refers to them, and the next call allocates a new arena.
        An arena in use by a call running in another thread at that moment
        is not dropped (it returns to the pool when that call ends).

        Returns:
            Bytes dropped: the number of pooled arenas times `arena_bytes`
            (0 when the program needs no arena or none was pooled).
        """
        dropped = 0
        while True:
            try:  # pop one at a time: the list is shared with the generated fast path and other threads
                self._pool.pop()
            except IndexError:
                return dropped
            dropped += self.arena_bytes

    # -- the checked path --

    def run(self, leaves: list[Any]) -> list[np.ndarray]:
        """Run on flat argument leaves; returns the flat outputs.

        Raises:
            ShapeError: an argument of another shape than the compiled signature.
            DTypeError: an argument of another dtype (or not numeric).
        """
        if len(leaves) != len(self.in_specs):
            raise ShapeError(f"{self.graph.name}: expected {len(self.in_specs)} array arguments, got {len(leaves)}")
        arrs = []
        for i, (x, (shape, dtype)) in enumerate(zip(leaves, self.in_specs)):
            name = self.graph.inputs[i].attr("name", f"arg{i}")
            a = x if type(x) is np.ndarray else np.asarray(x)
            if not a.dtype.isnative and a.dtype.newbyteorder("=") == dtype:
                a = a.astype(dtype)  # byte-swapped input: same values, native order
            if a.dtype != dtype:
                if a.dtype.kind not in "biuf":
                    raise DTypeError(f"{self.graph.name}: argument {name} has dtype {a.dtype}; expected {dtype}")
                raise DTypeError(f"{self.graph.name}: argument {name} has dtype {a.dtype}, the compiled "
                                 f"signature has {dtype}")
            if a.shape != shape:
                raise ShapeError(f"{self.graph.name}: argument {name} has shape {a.shape}, the compiled "
                                 f"signature has {shape}")
            if not (a.flags.c_contiguous and a.flags.aligned):
                a = np.ascontiguousarray(a)
                if not a.flags.aligned:
                    a = a.copy()
            arrs.append(a)
        for li in self.donated_leaves:
            a = arrs[li]
            if not self._donatable(a, leaves[li], arrs, li):
                arrs[li] = a.copy()
        outs = tuple(np.empty(s, d) for s, d in self.out_buffers)
        self._call(tuple(arrs), outs)
        return self._assemble(arrs, outs)

    @staticmethod
    def _donatable(a: np.ndarray, orig: Any, arrs: list, li: int) -> bool:
        if a is not orig or a.base is not None or not a.flags.writeable:
            return False
        for j, b in enumerate(arrs):
            if j == li:
                continue
            while b is not None:
                if b is a:
                    return False
                b = b.base if isinstance(b, np.ndarray) else None
        return True

    def _call(self, args: tuple, outs: tuple) -> None:
        try:  # pop first: a check-then-pop would race between threads
            arena = self._pool.pop()
        except IndexError:
            arena = self._arena() if self.arena_bytes else self._dummy
        try:
            if self.abi != "pointers":
                self.native(args, outs, arena, self.consts)
            else:  # pragma: no cover - other Python builds
                def ptrs(seq: tuple) -> Any:
                    arr = (ctypes.c_void_p * max(len(seq), 1))(*[x.ctypes.data for x in seq])
                    return arr

                pa, po, pc = ptrs(args), ptrs(outs), ptrs(self.consts)
                self.native(ctypes.addressof(pa), ctypes.addressof(po), arena.ctypes.data, ctypes.addressof(pc))
        finally:
            if self.arena_bytes:
                self._pool.append(arena)

    def _assemble(self, arrs: list, outs: tuple) -> list[np.ndarray]:
        res: list[np.ndarray] = []
        for kind, v in self.out_plan:
            if kind == "buf":
                res.append(outs[v])
            elif kind == "in":
                res.append(arrs[v])
            elif kind == "copy_in":
                res.append(np.array(arrs[v], copy=True))
            elif kind == "const":
                res.append(np.array(v, copy=True))
            else:  # dup
                res.append(res[v].copy())
        return res

    # -- the generated fast path --

    def _make_fast(self) -> Any:
        """Generate the per-signature call function (argument checks and output assembly unrolled).

        The arguments' pytree structure is matched by generated code (tuple
        lengths, dict key sets, list lengths) and each array leaf by type,
        dtype, shape and strides; anything else returns MISS (the caller then
        takes the checked path).
        """
        from symgraph.tree import tree_unflatten

        n = len(self.in_specs)
        ns: dict[str, Any] = {"_nd": np.ndarray, "_empty": np.empty, "_MISS": MISS, "_native": self.native,
                              "_pool": self._pool, "_new": self._arena, "_dummy": self._dummy,
                              "_consts": self.consts, "_array": np.array, "_unflatten": tree_unflatten,
                              "_tree": self.graph.out_tree, "_float": float, "_int": int, "_bool": bool,
                              "_dict": dict, "_tuple": tuple, "_list": list}
        lines = ["def fast(args):"]
        names: list[str] = []
        tmp = iter(range(1 << 30))

        def extract(td: Any, expr: str) -> bool:
            """Emit checks for the structure `td` at `expr`; leaves become variables a0, a1, ..."""
            if td.kind == "leaf":
                v = f"a{len(names)}"
                names.append(v)
                if expr != v:
                    lines.append(f"    {v} = {expr}")
                return True
            if td.kind == "none":
                lines.append(f"    if {expr} is not None: return _MISS")
                return True
            k = next(tmp)
            var = f"t{k}"
            if expr != "args":
                lines.append(f"    {var} = {expr}")
            else:
                var = "args"
            if td.kind in ("tuple", "list"):
                ty = "_tuple" if td.kind == "tuple" else "_list"
                if var != "args":
                    lines.append(f"    if type({var}) is not {ty} or len({var}) != {len(td.children)}: return _MISS")
                    for i, c in enumerate(td.children):
                        extract(c, f"{var}[{i}]")
                    return True
                lines.append(f"    if len(args) != {len(td.children)}: return _MISS")
                if td.children:  # unpack the positional arguments in one step
                    xs = [f"x{i}" for i in range(len(td.children))]
                    lines.append(f"    {', '.join(xs)}{',' if len(xs) == 1 else ''} = args")
                    for x, c in zip(xs, td.children):
                        if c.kind == "leaf":
                            v = f"a{len(names)}"
                            names.append(v)
                            lines.append(f"    {v} = {x}")
                        else:
                            extract(c, x)
                return True
            if td.kind == "dict":
                ns[f"K{k}"] = frozenset(td.meta)
                lines.append(f"    if type({var}) is not _dict or {var}.keys() != K{k}: return _MISS")
                for key, c in zip(td.meta, td.children):
                    ns[f"KEY{k}_{len(names)}"] = key
                    extract(c, f"{var}[KEY{k}_{len(names)}]")
                return True
            return False  # namedtuples and other nodes: no fast path

        in_tree = self.graph.in_tree
        if in_tree is None or in_tree.kind != "tuple" or not extract(in_tree, "args") or len(names) != n:
            return None
        flat_args = all(c.kind == "leaf" for c in in_tree.children)
        rebuild = not flat_args
        for i, (shape, dtype) in enumerate(self.in_specs):
            a = names[i]
            ns[f"D{i}"] = dtype
            ns[f"S{i}"] = tuple(shape)
            st = []
            acc = dtype.itemsize
            for d in reversed(shape):
                st.append(acc)
                acc *= d
            ns[f"T{i}"] = tuple(reversed(st))
            check = f"type({a}) is not _nd or {a}.dtype is not D{i} or {a}.shape != S{i} or {a}.strides != T{i}"
            if shape == () and i not in self.donated_leaves:
                # scalars: the NumPy scalar type (np.float64(2.0)) and the matching Python type become 0-d arrays
                ns[f"ST{i}"] = dtype.type
                py = {"f": "float", "i": "int", "b": "bool"}.get(dtype.kind) if dtype.itemsize == 8 or \
                    dtype.kind == "b" else None
                conv = f"type({a}) is ST{i}" + (f" or type({a}) is _{py}" if py else "")
                lines.append(f"    if {conv}: {a} = _array({a}, D{i})")
                lines.append(f"    elif {check}: return _MISS")
                rebuild = True
            else:
                lines.append(f"    if {check}: return _MISS")
        for li in sorted(self.donated_leaves):
            a = names[li]
            lines.append(f"    if {a}.base is not None or not {a}.flags.writeable: return _MISS")
            for j in range(n):
                if j != li:
                    lines.append(f"    if {names[j]} is {a} or {names[j]}.base is {a}: return _MISS")
        leaves_t = f"({', '.join(names)}{',' if n == 1 else ''})"
        if rebuild:
            lines.append(f"    args = {leaves_t}")
        outs = []
        for j, (shape, dtype) in enumerate(self.out_buffers):
            ns[f"OS{j}"] = tuple(shape)
            ns[f"OD{j}"] = dtype
            lines.append(f"    o{j} = _empty(OS{j}, OD{j})")
            outs.append(f"o{j}")
        outs_t = f"({', '.join(outs)}{',' if len(outs) == 1 else ''})"
        if self.arena_bytes:
            # pop first, create on IndexError: a check-then-pop races between threads
            lines.append("    try:")
            lines.append("        ar = _pool.pop()")
            lines.append("    except IndexError:")
            lines.append("        ar = _new()")
            lines.append(f"    _native(args, {outs_t}, ar, _consts)")
            lines.append("    _pool.append(ar)")
        else:
            lines.append(f"    _native(args, {outs_t}, _dummy, _consts)")
        res = []
        for k, (kind, v) in enumerate(self.out_plan):
            r = f"r{k}"
            if kind == "buf":
                r = f"o{v}"
            elif kind == "in":
                r = names[v]
            elif kind == "copy_in":
                lines.append(f"    {r} = _array({names[v]}, copy=True)")
            elif kind == "const":
                ns[f"C{k}"] = v
                lines.append(f"    {r} = _array(C{k}, copy=True)")
            else:
                lines.append(f"    {r} = {res[v]}.copy()")
            res.append(r)
        it = iter(res)

        def build(td: Any) -> str | None:
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

        tree = self.graph.out_tree
        expr = build(tree) if tree is not None else None
        if expr is None:
            expr = f"_unflatten(_tree, [{', '.join(res)}])"
        lines.append(f"    return {expr}")
        src = "\n".join(lines)
        exec(compile(src, f"<symgraph fast call {self.graph.name}>", "exec"), ns)  # noqa: S102
        fast = ns["fast"]
        fast.__source__ = src
        return fast
