"""The LLVM backend's executable: checks a call's arguments, allocates outputs, calls the native entry.

Every argument is checked by `symgraph.signature` (the rules of docs/compile.md, "Arguments")
before native code runs, so a wrong call raises an error instead of crashing. A generated
per-signature Python function (`Executable.fast`) applies the same checks in a few attribute
reads and calls the entry directly (`codegen.cpu.abi`); anything it does not accept takes the
checked path (`Executable.run`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from symgraph.errors import SymgraphError
from symgraph.signature import (COMPILED_CASTING, Signature, canonical_dtype, donatable, fast_match_source,
                                fast_pack_source)

from .abi import fastcall_builtin
from .lapack import lapack_error

__all__ = ["Executable"]


def _aligned_empty(nbytes: int, align: int = 64) -> np.ndarray:
    """An uninitialized byte array of `nbytes` whose data starts at a multiple of `align` bytes."""
    raw = np.empty(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


class Executable:
    """One compiled signature: checks arguments, allocates outputs, calls native code.

    Implements the `symgraph.backend.Executable` protocol (structurally: the registry loads
    this package, so it does not import the registry).

    Args:
        graph: the compiled graph.
        jitted: the JIT-compiled module (`codegen.jit.compile_ir`); its entry is called.
        in_specs: [(shape, dtype)] per input leaf (the graph's inputs).
        out_buffers: [(shape, dtype)] of the fresh output arrays the entry writes.
        out_plan: per graph output, where it comes from (see `_assemble`).
        arena_bytes: the scratch memory one call needs, bytes.
        consts: constant arrays the entry reads.
        donated: output position -> the input leaf whose buffer it is written into.
        stats: figures of the compilation (`codegen.compile_graph`).
        abi: how the entry is called (`codegen.cpu.abi.call_abi`).
        lapack: the program's LAPACK calls (`codegen.cpu.lapack.LapackPlan`), or None: after each call
            their status slot in the arena is read, and a failure raises `symgraph.errors.LinAlgError`.

    Attributes:
        graph: the compiled graph.
        stats: figures (nodes, kernels, compile_seconds, peak_bytes, arena_bytes, ...).
        fast: a generated function of the positional arguments (returns MISS when they do not
            match the signature exactly; see `_make_fast`), or None.
    """

    backend = "llvm"

    def __init__(self, graph: Any, jitted: Any, in_specs: list, out_buffers: list, out_plan: list,
                 arena_bytes: int, consts: list[np.ndarray], donated: dict[int, int], stats: dict,
                 abi: str = "ctypes", lapack: Any = None):
        self.graph = graph
        self.lapack = lapack
        self.jitted = jitted
        # [(shape, dtype)]; dtypes canonical (the fast path compares them by identity)
        self.signature = Signature(graph, casting=COMPILED_CASTING, contiguous=True, specs=in_specs)
        self.in_specs = self.signature.specs
        # [(shape, dtype)] of fresh output arrays; canonical dtypes, so outputs passed back in (parameters
        # of a training loop) pass the fast path's identity check on dtypes
        self.out_buffers = [(tuple(sh), canonical_dtype(d)) for sh, d in out_buffers]
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
        """The optimized LLVM IR of the module."""
        return self.jitted.llvm_ir()

    def asm(self) -> str:
        """The host assembly of the module."""
        return self.jitted.asm()

    def inspectable(self) -> tuple[str, ...]:
        """The texts `inspect` gives: "llvm_ir" and "asm"."""
        return ("llvm_ir", "asm")

    def inspect(self, what: str) -> str:
        """The text named `what`: "llvm_ir" (the optimized module) or "asm" (the host assembly).

        Raises:
            SymgraphError: any other name.
        """
        if what == "llvm_ir":
            return self.llvm_ir()
        if what == "asm":
            return self.asm()
        raise SymgraphError(f"backend {self.backend!r} has no {what!r} to inspect (it has: "
                            f"{', '.join(self.inspectable())})")

    # -- arena --

    def _arena(self) -> np.ndarray:
        return _aligned_empty(self.arena_bytes)

    def release(self) -> int:
        """Drop the pooled arenas (`release_arena`); returns the bytes dropped."""
        return self.release_arena()

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

        The leaves are checked by `symgraph.signature.Signature.check` (casting: byte order only;
        non-contiguous or misaligned arrays are copied); a donated leaf that is not
        `symgraph.signature.donatable` is copied, so its output goes to a fresh buffer.

        Raises:
            ShapeError: another number of leaves, or a leaf of another shape than the compiled signature.
            DTypeError: a leaf of another dtype (or not numeric).
            UnsupportedOpError: a masked array.
        """
        arrs = self.signature.check(leaves)
        for li in self.donated_leaves:
            if not donatable(arrs, leaves, li):
                arrs[li] = arrs[li].copy()
        outs = tuple(np.empty(s, d) for s, d in self.out_buffers)
        self._call(tuple(arrs), outs)
        return self._assemble(arrs, outs)

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
            err = lapack_error(self.lapack, arena) if self.lapack is not None else None
            if self.arena_bytes:
                self._pool.append(arena)
        if err is not None:
            raise err

    def _assemble(self, arrs: list, outs: tuple) -> list[np.ndarray]:
        """The outputs per `out_plan`: a fresh buffer ("buf"), a donated input ("in"), a copy of an
        input ("copy_in"), a copy of a constant ("const") or a copy of an earlier output ("dup")."""
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

        `symgraph.signature.fast_match_source` writes the argument checks (the same rules as
        `run`'s); this adds the output allocation, the native call and the output assembly.
        Anything the checks refuse returns MISS (the caller then takes the checked path).
        """
        ns: dict[str, Any] = {}
        match = fast_match_source(self.graph.in_tree, self.in_specs, self.donated_leaves, ns)
        if match is None:
            return None
        lines, names = match
        body, res = self._call_source(ns, names)
        lines = ["def fast(args):", *lines, *body, f"    return {fast_pack_source(self.graph.out_tree, res, ns)}"]
        return self._define("fast", lines, ns, f"<symgraph fast call {self.graph.name}>")

    def make_raw(self) -> Any:
        """A generated call without argument checks: `raw(args) -> list of outputs`.

        For a caller that guarantees what the checks of `run` would establish: `args` is a tuple
        of one ndarray per input leaf, of exactly the signature's shape and canonical dtype,
        C-contiguous, aligned and writeable, and each donated leaf passes
        `symgraph.signature.donatable` (`symgraph.segments` feeds segments the arrays earlier
        segments returned and arguments checked once per call). Anything else is undefined
        behaviour (native code reads out of bounds), so nothing else may call it.

        Returns:
            The function, or None for an entry called through raw pointers (other Python builds).
        """
        if self.abi == "pointers":  # pragma: no cover - other Python builds
            return None
        ns: dict[str, Any] = {}
        body, res = self._call_source(ns, [f"args[{i}]" for i in range(len(self.in_specs))])
        lines = ["def raw(args):", *body, f"    return [{', '.join(res)}]"]
        return self._define("raw", lines, ns, f"<symgraph raw call {self.graph.name}>")

    @staticmethod
    def _define(name: str, lines: list[str], ns: dict[str, Any], filename: str) -> Any:
        src = "\n".join(lines)
        exec(compile(src, filename, "exec"), ns)  # noqa: S102
        fn = ns[name]
        fn.__source__ = src
        return fn

    def _call_source(self, ns: dict[str, Any], names: list[str]) -> tuple[list[str], list[str]]:
        """Body lines that allocate the outputs, call the entry on `args` and assemble the results
        (`out_plan`, as `_assemble`); and the result expressions. `names`: an expression per input leaf."""
        ns.update({"_empty": np.empty, "_array": np.array, "_native": self.native, "_pool": self._pool,
                   "_new": self._arena, "_dummy": self._dummy, "_consts": self.consts})
        lines: list[str] = []
        outs = []
        for j, (shape, dtype) in enumerate(self.out_buffers):
            ns[f"OS{j}"] = tuple(shape)
            ns[f"OD{j}"] = dtype
            lines.append(f"    o{j} = _empty(OS{j}, OD{j})")
            outs.append(f"o{j}")
        outs_t = f"({', '.join(outs)}{',' if len(outs) == 1 else ''})"
        if self.lapack is not None:  # read the LAPACK status slot before the arena goes back to the pool
            ns["_lapack_error"] = lapack_error
            ns["_lapack"] = self.lapack
            lines += ["    try:", "        ar = _pool.pop()", "    except IndexError:", "        ar = _new()",
                      f"    _native(args, {outs_t}, ar, _consts)", "    err = _lapack_error(_lapack, ar)",
                      "    _pool.append(ar)", "    if err is not None:", "        raise err"]
        elif self.arena_bytes:
            # pop first, create on IndexError: a check-then-pop races between threads
            lines += ["    try:", "        ar = _pool.pop()", "    except IndexError:", "        ar = _new()",
                      f"    _native(args, {outs_t}, ar, _consts)", "    _pool.append(ar)"]
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
        return lines, res
