"""The LLVM backend for symgraph (llvmlite): fused, vectorized native kernels.

Imported lazily by `symgraph.compile(..., backend="llvm")`; `import symgraph`
never imports this package or llvmlite.

Pipeline of `compile_graph`: partition the scheduled graph into kernels
(`kernels.partition`), assign buffers and plan the arena (`kernels.buffers`),
emit LLVM IR (`llvm.module`), optimize and JIT-compile for the host CPU (`jit`),
and wrap the entry point in a checked, low-overhead caller (`cpu.executable`).
The "llvm" entry of symgraph's backend registry is `cpu.backend.LLVMBackend`.

Packages, one concern each: `kernels` (the backend-neutral kernel IR: loop-body
Exprs, affine indices, the partitioner, the task kinds), `llvm` (lowering to LLVM
IR: emitters, reductions, loops, products, the module, vector math) and `cpu`
(the runtime: calling convention, BLAS, thread pool, executable).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

__all__ = ["compile_graph"]


#: Programs whose loop kernels all have at most this many elements are optimized with the light
#: pipeline (`jit.optimize(light=True)`): their run time is call overhead, their compile time is not.
#: Scalar programs only: at 16 elements a transcendental-heavy gradient ran 3-5x slower per call than
#: with O3 (nothing vectorized), which a training loop would repay many times over.
LIGHT_PIPELINE_MAX_ELEMENTS = 1


def _refuse_complex(order: list) -> None:
    """compile_graph lowers real graphs: name the first complex op and its line, suggest numpy.

    `LLVMBackend.compile` rewrites complex graphs as real ones first (`codegen.complex_split`); this guards
    the other callers.

    Raises:
        UnsupportedOpError: a node of the graph has a complex dtype or reads one.
    """
    from symgraph.errors import UnsupportedOpError
    from symgraph.ir import meta

    found = None
    for n in order:
        if n.dtype.kind == "c" or any(x.dtype.kind == "c" for x in n.inputs):
            if n.inputs or found is None:
                found = n
            if n.inputs:
                break
    if found is not None:
        what = "argument" if found.op.name == "input" else ("constant" if not found.inputs else f"op {found.op.name!r}")
        raise UnsupportedOpError(f"codegen: complex values ({what} with dtype "
                                 f"{found.dtype if found.dtype.kind == 'c' else found.inputs[0].dtype}) reach "
                                 f"compile_graph, which lowers real graphs only (the LLVM backend splits complex "
                                 f"graphs first, codegen.complex_split); compile with sg.compile(f, "
                                 f"backend='numpy') (docs/complex.md)", meta(found).location)


def compile_graph(graph: Any, order: list | None = None, donate: frozenset = frozenset(), name: str = "f",
                  nthreads: int | None = None, profile: bool | None = None, raw_entry: bool = False) -> Any:
    """Compile an optimized, scheduled graph to native code.

    Args:
        graph: a symgraph Graph (simplified; checkpointed if wanted).
        order: its schedule (default: `symgraph.passes.schedule.schedule(graph)`).
        donate: indices of input leaves whose buffers may be reused for outputs
            of the same shape and dtype (updated in place).
        name: label for the module and dumps.
        nthreads: threads for large kernels (default: SYMGRAPH_NUM_THREADS or the usable CPUs).
        profile: time every kernel (default: the SYMGRAPH_PROFILE environment
            variable); read the figures with `Executable.profile()`.
        raw_entry: give the entry the raw-pointer convention (a loop body called from native code).

    Loop regions (`scan` nodes) are compiled first, each body once into its own module
    (`_compile_regions`); the program calls a body once per step from a native loop
    (`codegen.llvm.region`), so compile time does not grow with the trip count.

    Programs whose loops (and LAPACK-lowered nodes) all have at most `LIGHT_PIPELINE_MAX_ELEMENTS` elements
    (scalar code) get the light LLVM pipeline, the others O3 with vectorization
    (`stats["pipeline"]`). Equal loop kernels share one native function (`llvm.module.build_module`);
    the compiler's Python and LLVM structures are freed before this returns
    and the C heap is trimmed (`jit.release_memory`).

    Returns:
        A `codegen.cpu.Executable` (`run(leaves)`, `fast(args)`, `stats`,
        `llvm_ir()`, `asm()`).

    Raises:
        UnsupportedOpError: the graph has an op without a native lowering.
        DTypeError: a dtype the backend does not support (complex, strings).
    """
    from symgraph.ir import collector_paused
    from symgraph.passes.schedule import schedule
    from symgraph.progress import stage as progress_stage

    from . import jit
    from .cpu import Executable, blas_library, call_abi
    from .kernels.buffers import plan_buffers
    from .kernels.expr import release_session
    from .kernels.partition import partition
    from .kernels.rows import plan_row_segments
    from .kernels.tasks import KernelKind
    from .llvm.context import vmath_module
    from .llvm.module import build_module, module_text, num_threads

    t0 = time.perf_counter()
    if order is None:
        order = schedule(graph)
    _refuse_complex(order)
    blas = blas_library()
    vm = vmath_module()
    if profile is None:
        profile = os.environ.get("SYMGRAPH_PROFILE", "") not in ("", "0")
    abi = "pointers" if raw_entry else call_abi()
    # the stages a long compile shows (symgraph.progress); a loop body's compile is part of "loop bodies"
    stage = (lambda _: None) if raw_entry else progress_stage
    t_r0 = time.perf_counter()
    if any(n.op.name in ("scan", "while", "cond") for n in order):
        stage("loop bodies")
    regions = _compile_regions(order, name, nthreads)
    t_regions = time.perf_counter() - t_r0
    t0 += t_regions  # the stage times below are the program's own; the bodies' are `region_seconds`
    # As in `simplify`: fusion and IR emission allocate millions of small objects (`collector_paused`).
    with collector_paused():
        stage("fuse")
        prog = partition(graph, order, donate=donate, blas=blas is not None)
        t_fuse = time.perf_counter() - t0
        _dump("fused", graph, kernels=[k.nodes for k in prog.kernels])
        segments = plan_row_segments(prog, num_threads() if nthreads is None else nthreads)
        bp = plan_buffers(prog, segments)
        lapack = _plan_lapack_scratch(prog, bp, regions)
        # LAPACK kernels count by their outputs: sort's and argsort's are native loop nests (a radix sort)
        # like a loop kernel's
        light = all(k.size <= LIGHT_PIPELINE_MAX_ELEMENTS for k in prog.kernels if k.kind is KernelKind.LOOP) and \
            all(t.node.size <= LIGHT_PIPELINE_MAX_ELEMENTS for k in prog.kernels if k.kind is KernelKind.LAPACK
                for t in k.tasks)
        if lapack is not None and any(c.routine == "fft" for c in lapack.order):
            light = False  # the native FFT's loops are to be vectorized (codegen.llvm.fft)
        stage("LLVM IR")
        mod, info = build_module(prog, bp, blas, name=name, nthreads=nthreads, abi=abi, profile=profile,
                                 lapack=lapack, raw=raw_entry, regions=regions, segments=segments, light=light)
        text = module_text(mod, info["prefer_512"])
        del mod  # free the llvmlite objects before LLVM parses the text
        release_session()  # the loop-body IR is not needed any more
    if light:
        text = jit.LIGHT_PIPELINE_MARK + text
    t_ir = time.perf_counter() - t0 - t_fuse
    if vm is not None and hasattr(vm, "runtime_init"):
        vm.runtime_init()
    key_extra = f"abi={abi};blas={sorted((blas or {}).values())};" + (vm.config_key() if vm is not None and
                                                                       hasattr(vm, "config_key") else "vmath=none")
    stage("LLVM")
    jitted = jit.compile_ir(text, key_extra=key_extra)
    t_llvm = time.perf_counter() - t0 - t_fuse - t_ir
    kinds = info["kernels"]
    stats = _program_stats(order, prog, bp, info, light, vm, abi, jitted.cache, len(regions),
                           (t_regions, t_fuse, t_ir, t_llvm))
    in_specs = [(x.shape, x.dtype) for x in graph.inputs]
    exe = Executable(graph, jitted, in_specs, bp.out_buffers, bp.out_plan, bp.arena_bytes, bp.consts,
                     prog.donated, stats, abi=abi, lapack=lapack)
    exe._regions = regions  # the loop bodies' code and constants, which the entry calls and reads
    if profile:
        exe.set_profile([(kind, [t.node for t in k.tasks]) for kind, k in zip(kinds, prog.kernels)])
    if os.environ.get("SYMGRAPH_DUMP"):
        _dump("lowered", graph, llvm_ir=exe.llvm_ir(), asm=exe.asm())
    del prog, bp, text
    jit.release_memory()  # LLVM's freed optimizer/emitter heap back to the OS (glibc)
    return exe


def _plan_lapack_scratch(prog: Any, bp: Any, regions: dict) -> Any:
    """The LAPACK calls' plan (`cpu.lapack.plan_lapack`): a status block and their shared scratch,
    placed at the end of the arena of `bp` (grown in place); None when the program calls no LAPACK.

    The status block also holds a copy of each region sub-graph's block whose calls may fail (a
    solve in a loop body): the region's native code copies it there when the sub-graph fails
    (`codegen.llvm.region`), so the program raises the body's error after its call.

    """
    from .cpu.lapack import plan_lapack
    from .kernels.tasks import KernelKind

    nested = {(r, gi): exe.lapack for r, rb in regions.items() for gi, exe in enumerate(rb.exes)
              if exe.lapack is not None and exe.lapack.can_fail}
    lapack = plan_lapack([t.node for k in prog.kernels if k.kind is KernelKind.LAPACK for t in k.tasks],
                         bp.arena_bytes, nested)
    if lapack is not None:
        bp.call_bytes += lapack.arena_bytes - bp.arena_bytes
        bp.arena_bytes = lapack.arena_bytes
    return lapack


def _program_stats(order: list, prog: Any, bp: Any, info: dict, light: bool, vm: Any, abi: str, cache: Any,
                   nregions: int, seconds: tuple) -> dict:
    """The `Executable.stats` of a compiled program: kernel counts by kind, threads, arena and peak
    bytes, the pipeline and call convention, and the stage seconds (regions, fuse, IR, LLVM)."""
    t_regions, t_fuse, t_ir, t_llvm = seconds
    kinds = info["kernels"]
    return {
        "backend": "llvm",
        "nodes": len(order),
        "kernels": sum(1 for k in kinds if k != "empty"),
        "loop_kernels": sum(1 for k in kinds if k.startswith("loop")),
        "gemm_kernels": kinds.count("gemm"),
        "lapack_kernels": kinds.count("lapack"),
        "parallel_kernels": info["parallel"],
        "row_segments": info.get("row_segments", 0),
        "row_tiled_kernels": info.get("row_tiled_kernels", 0),
        "concurrent_gemms": info["concurrent_gemms"],
        "kernel_functions": info["kernel_functions"],
        "entry_optimized": info.get("entry_optimized", True),
        "threads": info["threads"],
        "blas_threads": info.get("blas_threads"),
        "materialized": sum(1 for n in prog.materialized if n.op.kind != "source"),
        "arena_bytes": bp.arena_bytes,
        "peak_bytes": bp.peak_bytes,
        "call_bytes": bp.call_bytes,
        "donated_outputs": len(prog.donated),
        "pipeline": "light" if light else "O3",
        "vmath": vm is not None,
        "call_abi": abi,
        "releases_gil": info.get("release_gil", abi != "fastcall"),
        "cache": cache,
        "loop_regions": nregions,
        "region_seconds": t_regions,
        "fuse_seconds": t_fuse,
        "ir_seconds": t_ir,
        "llvm_seconds": t_llvm,
    }


_region_ids = itertools.count()


def _compile_regions(order: list, name: str, nthreads: int | None) -> dict:
    """Each loop region of the schedule compiled once (`codegen.llvm.region.RegionBody`), by region.

    Each sub-graph (`region.subgraphs()`: a loop body, the branches, a while loop's condition
    and body) is compiled like any graph, with a raw-pointer entry, registered with LLVM under
    a unique symbol that the program's module declares.
    """
    import numpy as np
    import llvmlite.binding as llvm

    from .llvm.region import RegionBody, chosen_regions

    out: dict = {}
    for r in chosen_regions(order):
        syms, exes, ptrs = [], [], []
        for g in r.subgraphs():
            exe = compile_graph(_real_body(g), name=f"{name}_region{len(out)}", nthreads=nthreads, raw_entry=True)
            sym = f"sg_region_{next(_region_ids)}"
            llvm.add_symbol(sym, exe.jitted.address)
            syms.append(sym)
            exes.append(exe)
            ptrs.append(np.array([c.ctypes.data for c in exe.consts] or [0], dtype=np.uint64))
        out[r] = RegionBody(syms, exes, ptrs)
    return out


def _real_body(g: Any) -> Any:
    """A region sub-graph with complex values inside but real inputs and outputs (a real carry through an FFT
    or a complex solve) as its real graph (`codegen.complex_split`): the same inputs and outputs in the same
    places, so the raw entry the region calls keeps its layout. Sub-graphs with complex inputs or outputs
    are split with their region by `LLVMBackend.compile`; real ones are returned as they are."""
    from symgraph.passes.schedule import schedule

    from .complex_split import has_complex, split_complex

    if any(x.dtype.kind == "c" for x in list(g.inputs) + list(g.outputs)):
        return g
    order = schedule(g)
    if not has_complex(order):
        return g
    return split_complex(g, order)[0]


def _dump(stage: str, graph: Any, **extra: Any) -> None:
    from symgraph import viz

    fn = getattr(viz, "dump_stage", None)
    if fn is not None:
        fn(stage, graph, **extra)
