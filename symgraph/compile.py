"""`sg.compile`: trace once per input signature, optimize the graph, run it fast.

A `CompiledFunction` wraps a Python function. On the first call with a new
input signature (pytree structure, shapes, dtypes, static arguments) it
traces the function, simplifies the graph, applies checkpointing when asked,
schedules it and hands it to a backend found by name in `symgraph.backend`'s
registry (built in: `"llvm"`, fused, vectorized native code; `"numpy"`, the
reference evaluator). The result is cached per signature. Called on tracers
(inside `sg.grad`, `sg.trace`, another `compile`) it calls the Python function
inline, so a compiled function stays a graph transform and can be
differentiated.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from . import debugging, progress, viz
from .backend import Executable, backend_names, check_backend_name, get_backend
from .closures import ClosedOverArrays
from .errors import SymgraphError
from .guards import check_flags, hoist_guards
from .ir import Graph, Node, tracing_active
from .passes.checkpoint import apply_checkpoint, checkpoint_stats
from .passes.checkpoint.apply import carry_checkpoint_info
from .passes.schedule import schedule
from .passes.simplify import simplify
from .random import NumpyRandomWatch
from .rolling import roll, rolling
from .segments import compile_segmented, has_host_ops
from .signature import MISS
from .tracing import check_args, trace
from .transforms import reducing_gradients
from .tree import tree_flatten, tree_unflatten

__all__ = ["compile", "CompiledFunction", "run_pipeline", "MISS"]

log = logging.getLogger("symgraph.compile")
#: After this many compiles caused by changed closed-over values, `CompiledFunction` warns once.
CLOSURE_RECOMPILE_WARN = 8

_MISS = MISS  # returned by a signature's fast path when the arguments do not match it exactly


def __getattr__(name: str) -> Any:
    if name == "BACKENDS":  # the registered backend names (formerly a constant)
        return backend_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dump_stage(stage: str, graph: Graph, **extra: Any) -> None:
    """Call `symgraph.viz.dump_stage` when the viz module provides it (SYMGRAPH_DUMP)."""
    fn = getattr(viz, "dump_stage", None)
    if fn is not None:
        fn(stage, graph, **extra)


def _normalize_nums(nums: int | Sequence[int] | None, what: str) -> tuple[int, ...]:
    if nums is None:
        return ()
    if isinstance(nums, (bool, np.bool_)) or isinstance(nums, (str, bytes)):
        raise SymgraphError(f"compile: {what} must be an int or a tuple of ints, got {nums!r}")
    if isinstance(nums, (int, np.integer)):
        return (int(nums),)
    try:
        items = list(nums)
    except TypeError:
        raise SymgraphError(f"compile: {what} must be an int or a tuple of ints, got {nums!r}") from None
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in items):
        raise SymgraphError(f"compile: {what} must be an int or a tuple of ints, got {nums!r}")
    return tuple(sorted({int(a) for a in items}))


def run_pipeline(graph: Graph, checkpoint: Any = None) -> tuple[Graph, list[Node]]:
    """The graph part of `compile`: simplify, checkpoint (optional), schedule.

    Each stage is passed to `symgraph.viz.dump_stage` (written to
    SYMGRAPH_DUMP when that is set).

    Args:
        graph: a traced Graph.
        checkpoint: None, a strategy name ("sqrt", "revolve", "mincut") or a
            budget in bytes; passed to `symgraph.passes.checkpoint.apply_checkpoint`.

    Returns:
        (optimized graph, schedule): the schedule is the execution order of its nodes.

    Raises:
        SymgraphError: (a subclass) for an invalid checkpoint strategy or budget.
    """
    progress.stage("simplify")
    g = simplify(graph)
    _dump_stage("simplified", g)
    # Always run: with checkpoint=None it saves everything, but it still removes
    # the markers of sg.checkpoint regions and applies their policies.
    progress.stage("checkpoint")
    g = apply_checkpoint(g, checkpoint)
    _dump_stage("checkpointed", g)
    progress.stage("schedule")
    order = schedule(g)
    _dump_stage("scheduled", g)
    return g, order


class _Signature:
    """One compiled signature: its graph, its executable and the output structure."""

    __slots__ = ("key", "graph", "exe", "out_tree", "stats", "fast", "closed_over", "guards")

    def __init__(self, key: tuple, graph: Graph, exe: Executable, stats: dict,
                 closed_over: ClosedOverArrays | None = None, guards: list | None = None):
        # arrays made during the trace are gone once it ends: only live closed-over ones are checked per call
        self.closed_over = closed_over if closed_over is not None and closed_over.prune() else None
        self.key = key
        self.graph = graph
        self.exe = exe
        self.out_tree = graph.out_tree
        self.stats = stats
        # the flags of bounded loops, extra outputs of the graph (symgraph.guards): read after each call
        self.guards = guards or None
        self.fast = exe.fast
        if self.guards and self.fast is not None:
            native, infos = self.fast, self.guards

            def fast(args: tuple) -> Any:
                r = native(args)
                return r if r is _MISS else check_flags(r, infos)

            self.fast = fast

    def finish(self, outs: list[Any]) -> Any:
        """The user's result from the executable's output leaves (bounded loops' flags checked)."""
        r = tree_unflatten(self.out_tree, outs)
        return check_flags(r, self.guards) if self.guards else r

    def run(self, leaves: list[Any]) -> Any:
        return self.finish(self.exe.run(leaves))


def _positional_arity(fn: Callable) -> int | None:
    """How many positional arguments `fn` takes, or None when unknowable (*args, no signature)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    n = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


class CompiledFunction:
    """A function compiled per input signature; see `compile`.

    Attributes:
        fn: the wrapped Python function.
        backend: a registered backend name ("llvm", "numpy"; see `symgraph.backend`).
        checkpoint: the checkpointing strategy or budget (None: none).
        static_argnums: positions of static (hashable Python value) arguments.
        donate_argnums: positions of arguments whose buffers may be reused for outputs.
    """

    def __init__(self, fn: Callable, backend: str = "llvm", checkpoint: Any = None,
                 static_argnums: Sequence[int] = (), donate_argnums: Sequence[int] = (), data_parallel: Any = None,
                 roll: bool = False):
        check_backend_name(backend)
        if not isinstance(roll, (bool, np.bool_)):
            raise SymgraphError(f"compile: roll must be True or False, got {roll!r}")
        self.roll = bool(roll)
        self.data_parallel = None
        if data_parallel is not None and data_parallel is not False:
            from .distributed import DataParallel  # mpi4py itself is imported on the first call

            self.data_parallel = DataParallel.coerce(data_parallel)
        if not callable(fn):
            raise SymgraphError(f"compile: expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.backend = backend
        self.checkpoint = checkpoint
        self.static_argnums = _normalize_nums(static_argnums, "static_argnums")
        self.donate_argnums = _normalize_nums(donate_argnums, "donate_argnums")
        for a in self.donate_argnums:
            if a in self.static_argnums:
                raise SymgraphError(f"compile: argument {a} cannot be both static and donated")
        arity = _positional_arity(fn)
        if arity is not None:
            self._check_argnums(arity, f"{self._name} takes {arity}")
        self._cache: dict[tuple, _Signature] = {}
        self._lock = threading.RLock()
        self._last: _Signature | None = None
        self._last_key: tuple | None = None
        self._warned_random = False  # np.random drawn while tracing: warned once (`NumpyRandomWatch`)
        self._closure_recompiles = 0  # compiles again because closed-over values changed (`ClosedOverArrays`)
        # name, doc and __wrapped__ only: the __dict__ of a wrapper of another CompiledFunction (sg.grad of
        # it, functools.wraps) holds that one's fn and caches, which would replace this one's
        functools.update_wrapper(self, fn, updated=())

    # ----- calling -----

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sig = self._last
        if sig is not None and sig.fast is not None and not kwargs and (sig.closed_over is None
                                                                     or not sig.closed_over.changed()):
            if not debugging.DEBUG_NANS:  # config.debug_nans takes the slow path, which checks the outputs
                r = sig.fast(args)
                if r is not _MISS:
                    return r
        return self._call_slow(args, kwargs)

    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, tuple, dict]:
        """(dynamic args, static values, kwargs); checks static and donated argnums."""
        n = len(args)
        self._check_argnums(n, f"the call passed {n}")
        if not self.static_argnums:
            return args, (), kwargs
        static = {i % n for i in self.static_argnums}
        statics = []
        dyn = []
        for i, a in enumerate(args):
            if i in static:
                try:
                    hash(a)
                except TypeError:
                    raise SymgraphError(f"compile({self._name}): static argument {i} has unhashable type "
                                        f"{type(a).__name__}; pass a hashable value (tuple, int, str)") from None
                statics.append((i, a))
            else:
                dyn.append(a)
        return tuple(dyn), tuple(statics), kwargs

    def _check_argnums(self, n: int, count: str) -> None:
        """Raise when a static or donated argument index is out of range for n positional arguments."""
        for what, nums in (("static_argnums", self.static_argnums), ("donate_argnums", self.donate_argnums)):
            for i in nums:
                if not -n <= i < n:
                    raise SymgraphError(f"compile({self._name}): {what} {i} is out of range: {count} positional "
                                        f"argument{'s' if n != 1 else ''} (valid indices {-n}..{n - 1})")

    @property
    def _name(self) -> str:
        return getattr(self.fn, "__name__", "f")

    def _call_slow(self, args: tuple, kwargs: dict) -> Any:
        leaves, _ = tree_flatten((args, kwargs))
        if tracing_active() or any(isinstance(x, Node) for x in leaves):
            # Inside a trace (grad, trace, an outer compile): a graph transform, inline (the function
            # may close over the outer trace's values, which a separately compiled graph could not read).
            return self.fn(*args, **kwargs)
        dyn, statics, kwargs = self._split(args, kwargs)
        static_pos = {i for i, _ in statics}
        dleaves, dtree, specs = check_args(dyn, self.fn, f"compile({self._name})", kwargs,
                                           [i for i in range(len(args)) if i not in static_pos])
        key = (dtree, tuple(specs), statics)
        sig = self._cache.get(key)
        if sig is not None and sig.closed_over is not None and sig.closed_over.changed():
            # a value the function closes over changed since it was traced: its old contents are
            # constants of the compiled code, so trace and compile again (docs/tracing.md, "Closed-over arrays")
            log.debug("compile(%s): recompiling, a closed-over array changed", self._name)
            self._closure_recompiles += 1
            if self._closure_recompiles == CLOSURE_RECOMPILE_WARN:
                code = getattr(inspect.unwrap(self.fn), "__code__", None)
                warnings.warn_explicit(
                    f"compile({self._name}): compiled {CLOSURE_RECOMPILE_WARN} more times because arrays or numbers "
                    f"it closes over changed; each change traces and compiles again. Pass values that change "
                    f"between calls as arguments.", UserWarning,
                    code.co_filename if code else "<unknown>", code.co_firstlineno if code else 0)
            with self._lock:
                if self._cache.get(key) is sig:
                    del self._cache[key]
            sig = None
        if sig is None:
            with self._lock:
                sig = self._cache.get(key)
                if sig is None:
                    sig = self._build(key, dyn, statics, kwargs)
                    self._cache[key] = sig
        self._last = sig
        if debugging.DEBUG_NANS:
            return self._run_checked(sig, dleaves)
        return sig.run(dleaves)

    def _run_checked(self, sig: _Signature, leaves: list[Any]) -> Any:
        """`sig.run(leaves)`, then raise `sg.FloatingPointError` on a NaN/inf a node produced (`debugging`)."""
        # donated arguments are overwritten by the run: the re-run needs their values from before
        kept = [np.array(x, copy=True) for x in leaves] if self.donate_argnums else list(leaves)
        outs = sig.exe.run(leaves)
        debugging.check_outputs(sig.graph, kept, outs, f"compile({self._name})")
        return sig.finish(outs)

    # ----- building -----

    def _log_recompile(self, key: tuple) -> None:
        if not self._cache or not log.isEnabledFor(logging.DEBUG):
            return
        prev = self._last.key if self._last is not None else next(iter(self._cache))
        parts = []
        if prev[0] != key[0]:
            parts.append(f"argument structure {prev[0]} -> {key[0]}")
        if prev[1] != key[1]:
            diff = [f"leaf {i}: {a[0]}/{a[1]} -> {b[0]}/{b[1]}" for i, (a, b) in enumerate(zip(prev[1], key[1]))
                    if a != b]
            parts.append("shapes/dtypes " + ("; ".join(diff) or f"{len(prev[1])} -> {len(key[1])} leaves"))
        if prev[2] != key[2]:
            parts.append(f"static arguments {prev[2]} -> {key[2]}")
        log.debug("compile(%s): recompiling, the signature changed: %s", self._name, ", ".join(parts))

    def _traceable(self, statics: tuple, kwargs_keys: tuple) -> Callable:
        fn = self.fn
        if not statics:
            return fn
        static_pos = dict(statics)
        n = len(static_pos)

        def wrapped(*dyn: Any, **kw: Any) -> Any:
            it = iter(dyn)
            full = []
            for i in range(len(dyn) + n):
                full.append(static_pos[i] if i in static_pos else next(it))
            return fn(*full, **kw)

        try:
            params = list(inspect.signature(fn).parameters.values())
            keep = [p for i, p in enumerate(params) if i not in static_pos]
            wrapped.__signature__ = inspect.Signature(keep)  # type: ignore[attr-defined]
        except (TypeError, ValueError):
            pass
        wrapped.__name__ = getattr(fn, "__name__", "f")
        return wrapped

    def _build(self, key: tuple, dyn: tuple, statics: tuple, kwargs: dict) -> _Signature:
        # the stage on a terminal when it takes a while, and the seconds of every stage (symgraph.progress)
        with progress.CompileProgress(self._name) as bar:
            sig = self._build_stages(key, dyn, statics, kwargs)
        if bar.seconds:
            sig.stats["stage_seconds"] = dict(bar.seconds)
        return sig

    def _build_stages(self, key: tuple, dyn: tuple, statics: tuple, kwargs: dict) -> _Signature:
        self._log_recompile(key)
        progress.stage("trace")
        t0 = time.perf_counter()
        fn = self._traceable(statics, tuple(kwargs))
        if kwargs:
            kw_names = tuple(sorted(kwargs))  # the order tree_flatten gives dict leaves
            base = fn

            def fn(*a: Any) -> Any:  # noqa: F811  (kwargs become trailing dynamic pytree leaves)
                return base(*a[:-1], **dict(zip(kw_names, a[-1])))

            fn.__name__ = getattr(base, "__name__", "f")
            dyn = tuple(dyn) + (tuple(kwargs[k] for k in kw_names),)
        rolled = 0
        with ClosedOverArrays(self.fn) as closed_over, NumpyRandomWatch(self.fn) as rng_watch, \
                (rolling() if self.roll else contextlib.nullcontext()) as roll_state:
            if self.data_parallel is not None:
                with reducing_gradients(self.data_parallel.reducer()):
                    g = trace(fn, *dyn, name=self._name)
            else:
                g = trace(fn, *dyn, name=self._name)
            if self.roll:
                # the primals of grad/vjp/jvp were rolled before differentiation (symgraph.rolling); what is left
                # (a loop outside any derivative) is rolled here
                g, n = roll(g)
                rolled = roll_state.count + n
        if rolled:
            _dump_stage("rolled", g)
        if rng_watch.drawn and not self._warned_random:
            self._warned_random = True
            rng_watch.warn(f"compile({self._name})")
        _dump_stage("traced", g)
        t_trace = time.perf_counter() - t0
        g, order = run_pipeline(g, self.checkpoint)
        # bounded loops' run-time checks become extra outputs, read after each call (symgraph.guards)
        g0 = g
        g, guards = hoist_guards(g)
        if guards:
            carry_checkpoint_info(g0, g)
            order = schedule(g)
        # Donated leaves (indices into the flat input list).
        donate: set[int] = set()
        if self.donate_argnums:
            nargs = len(dyn) + len(statics) - (1 if kwargs else 0)
            donated = {i % nargs for i in self.donate_argnums if -nargs <= i < nargs}
            dyn_pos = [i for i in range(nargs + (1 if kwargs else 0)) if i not in dict(statics)]
            offset = 0
            for pos, a in zip(dyn_pos, dyn):
                nl = len(tree_flatten(a)[0])
                if pos in donated:
                    donate.update(range(offset, offset + nl))
                offset += nl
        progress.stage("backend")
        backend = get_backend(self.backend)
        if has_host_ops(order) and not getattr(backend, "runs_host_ops", False):
            # communication runs in Python between natively compiled segments (symgraph.segments)
            exe = compile_segmented(backend, g, order, frozenset(donate), self._name)
        else:
            exe = backend.compile(g, order, donate=frozenset(donate), name=self._name)
        stats = exe.stats = dict(exe.stats)
        stats["compile_seconds"] = time.perf_counter() - t0
        stats["trace_seconds"] = t_trace
        stats.setdefault("nodes", len(order))
        stats["rolled_loops"] = rolled  # Python loops that became scan loops (roll=True; symgraph.rolling)
        if self.checkpoint is not None:
            # the recompute bill (FLOPs, nodes) and the activation peak; peak_bytes
            # stays the backend's own plan
            for k, v in checkpoint_stats(g).items():
                stats.setdefault(k, v)
            stats["checkpoint"] = self.checkpoint
        sig = _Signature(key, g, exe, stats, closed_over, guards)
        if sig.fast is not None and (statics or kwargs):
            sig.fast = None  # the fast path handles positional (pytree) arguments only
        return sig

    # ----- inspection -----

    def _current(self) -> _Signature:
        sig = self._last
        if sig is None:
            raise SymgraphError(f"compile({self._name}): not compiled yet; call it once with example arguments "
                                f"(graph, stats, llvm_ir and asm describe the last signature called)")
        return sig

    @property
    def graph(self) -> Graph:
        """The optimized graph compiled for the last signature called."""
        return self._current().graph

    @property
    def stats(self) -> dict:
        """Figures of the last signature called.

        Keys: backend, nodes (graph size), kernels (fused loop nests / calls),
        compile_seconds (trace + optimize + codegen, seconds), trace_seconds,
        peak_bytes (planned peak of intermediates and outputs, bytes), and for
        the LLVM backend arena_bytes, call_bytes (what one call holds: the
        arena plus the fresh output arrays, allocated before the call, bytes;
        the honest peak, `peak_bytes` counts each output from its first
        write), kernel kinds, concurrent_gemms (pairs of independent
        products run side by side), kernel_functions (distinct native loop
        functions; equal kernels share one) and cache information.
        """
        return self._current().stats

    @property
    def signatures(self) -> int:
        """Number of compiled signatures in the in-memory cache."""
        return len(self._cache)

    def profile(self, reset: bool = False) -> list[dict] | None:
        """Per-kernel time of the last signature called, when compiled with `SYMGRAPH_PROFILE=1`.

        Args:
            reset: zero the counters after reading them.

        Returns:
            None when the signature was compiled without profiling (or by the
            numpy backend); else one dict per kernel in execution order with
            index, kind ("gemm", "loop", "loop+par", "empty"), nodes (op and
            shape of the values it writes), seconds (total, all calls) and calls.

        Raises:
            SymgraphError: before the first call.
        """
        return self._current().exe.profile(reset)

    def llvm_ir(self) -> str:
        """The optimized LLVM IR of the last signature called (backend="llvm"): `Executable.inspect("llvm_ir")`.

        Raises:
            SymgraphError: for a backend without LLVM IR (numpy) or before the first call.
        """
        return self._inspect("llvm_ir")

    def asm(self) -> str:
        """The host assembly of the last signature called (backend="llvm"): `Executable.inspect("asm")`.

        Raises:
            SymgraphError: for a backend without assembly (numpy) or before the first call.
        """
        return self._inspect("asm")

    def _inspect(self, what: str) -> str:
        """A text the backend offers about the last signature's compiled code (`Executable.inspect`).

        Raises:
            SymgraphError: before the first call, or a text this backend does not have.
        """
        return self._current().exe.inspect(what)

    def release_arena(self) -> int:
        """Free the scratch memory that compiled signatures keep between calls.

        The LLVM backend keeps each signature's arena (all intermediates,
        `stats["arena_bytes"]` bytes) after a call so that the next call does
        not allocate it again. This drops the arenas of every compiled
        signature (`Executable.release`); the compiled code stays, and the
        next call allocates its arena again.
        Useful before measuring memory or when a rarely called function
        should not hold its scratch memory. Does nothing for the numpy
        backend (it keeps no arena).

        Returns:
            Bytes dropped (0 if none were held).

        Example:
            >>> cf = sg.compile(f)
            >>> cf(x)                  # allocates and keeps the arena
            >>> cf.release_arena()     # frees it; cf(x) allocates it again
        """
        with self._lock:
            sigs = list(self._cache.values())
        return sum(sig.exe.release() for sig in sigs)

    def clear_cache(self) -> None:
        """Drop every compiled signature."""
        with self._lock:
            self._cache.clear()
            self._last = None

    def __repr__(self) -> str:
        return f"CompiledFunction({self._name}, backend={self.backend!r}, signatures={len(self._cache)})"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # Support decorating methods: bind like a function.
        if obj is None:
            return self
        return functools.partial(self, obj)


def compile(f: Callable | None = None, *, backend: str = "llvm", checkpoint: Any = None,
            static_argnums: int | Sequence[int] = (), donate_argnums: int | Sequence[int] = (),
            data_parallel: Any = None, roll: bool = False) -> Any:
    """Compile `f` per input signature; usable as `compile(f)`, `@compile` or `@compile(backend=...)`.

    On the first call with a new signature (pytree structure, shapes and dtypes
    of the array leaves, values of the static arguments) `f` is traced, the
    graph simplified, checkpointed (if asked), scheduled, and compiled by the
    backend; later calls with the same signature run the cached code. Called
    on traced values (inside `sg.grad`, `sg.trace`) it runs `f` inline, so
    `sg.grad(sg.compile(f))` differentiates `f`.

    Args:
        f: a function of arrays (or pytrees of arrays) written with NumPy or
            `symgraph.numpy` operations.
        backend: "llvm" (fused native code, the `codegen` package), "numpy"
            (the reference evaluator on the optimized graph) or another name
            registered with `symgraph.backend.register_backend`.
        checkpoint: None, "sqrt", "revolve", "mincut" or a memory budget in bytes.
        static_argnums: positions of arguments that are hashable Python values
            shaping the trace (sizes, flags); a new value recompiles.
        donate_argnums: positions of arguments whose buffers may be reused for
            outputs of the same shape and dtype: the returned output is then
            the same array object as the argument, updated in place (the
            caller's array is consumed). Arrays that are views, read-only,
            non-contiguous or of another dtype are not reused.
        data_parallel: None; True, an mpi4py communicator or a
            `symgraph.distributed.DataParallel`: the gradients `sg.grad` /
            `sg.value_and_grad` build at the top level of `f` are averaged
            across the MPI ranks (bucketed non-blocking all-reduce ops in the
            graph; docs/distributed.md). Needs the `distributed` extra.
        roll: automatic rolling of Python loops (`symgraph.rolling`). Default False: a Python
            loop is compiled unrolled. True: a chain of >= 8 steps that trace to the same body
            (carries threaded through, per-step slices or constants, shared weights) becomes one
            `scan` loop; `grad`/`value_and_grad`/`vjp`/`jvp` built while tracing roll their primal
            before differentiating, so the gradient is the scan's reverse loop. Values equal the
            unrolled build's (gradients to rounding). `cf.stats["rolled_loops"]` counts the loops;
            docs/control-flow.md ("Python loops and roll=") lists when rolling applies.

    Returns:
        A `CompiledFunction` with `graph`, `stats`, `llvm_ir()` and `asm()`.

    Raises:
        SymgraphError: unknown backend, unhashable static argument, checkpoint
            pass unavailable.
        ShapeError, DTypeError: at call time, for arguments that do not fit
            (a new shape or dtype simply compiles a new signature).
    """
    if f is None:
        return functools.partial(compile, backend=backend, checkpoint=checkpoint, static_argnums=static_argnums,
                                 donate_argnums=donate_argnums, data_parallel=data_parallel, roll=roll)
    return CompiledFunction(f, backend=backend, checkpoint=checkpoint, static_argnums=static_argnums,
                            donate_argnums=donate_argnums, data_parallel=data_parallel, roll=roll)
