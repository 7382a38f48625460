"""JIT: host target machine, the optimization pipeline, object code and its caches.

The target machine is built from the host CPU name and feature string (both
part of every cache key), so LLVM emits the widest SIMD this CPU has. The
new pass manager runs at speed level 3 with loop and SLP vectorization.
Generated modules are compiled to object code once and loaded into an MCJIT
engine; with `SYMGRAPH_CACHE_DIR` set, the object bytes are also kept on
disk, keyed by a hash of the IR, the llvmlite version and the CPU (plain
object files, never pickled code).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import llvmlite
import llvmlite.binding as llvm

__all__ = ["target_machine", "host_key", "optimize", "LIGHT_PIPELINE_MARK", "wants_light_pipeline", "compile_ir", "compile_object", "Jitted", "CODEGEN_VERSION",
           "release_memory"]

log = logging.getLogger("symgraph.codegen")

#: Bumped whenever the generated code changes meaning (part of the disk cache key).
CODEGEN_VERSION = "1"

_lock = threading.Lock()
_llvm_lock = threading.RLock()  # LLVM compilation is serialized (one shared target machine)
_tm: Any = None
_tm_light: Any = None
_host: tuple[str, str] | None = None


def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def host_key() -> tuple[str, str]:
    """(CPU name, feature string) of this host, as LLVM sees them."""
    global _host
    if _host is None:
        _init()
        _host = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return _host


def has_avx512() -> bool:
    """Whether the host CPU has AVX-512F (then kernels prefer 512-bit vectors)."""
    return "+avx512f" in host_key()[1].split(",")


def _new_target_machine(opt: int = 3) -> Any:
    _init()
    cpu, feats = host_key()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=feats, opt=opt, reloc="default", codemodel="jitdefault")


def target_machine(light: bool = False) -> Any:
    """The host target machine (host CPU and features), created once.

    Code generation runs at level 3, or at level 0 with `light` (the light
    pipeline's fast instruction selection and register allocation: on the
    W5 scalar chain 5 ms less to compile, 0.3 us more per call).
    Used for optimization and object emission only: an MCJIT engine takes
    ownership of the target machine it is given, so each engine gets its own.
    """
    global _tm, _tm_light
    with _lock:
        if light:
            if _tm_light is None:
                _tm_light = _new_target_machine(opt=0)
            return _tm_light
        if _tm is None:
            _tm = _new_target_machine()
    return _tm


#: First line of the IR text of a module to optimize with `optimize(light=True)`; the choice travels
#: with the text, so it is part of the cache key and the compile worker makes the same one.
LIGHT_PIPELINE_MARK = "; symgraph pipeline: light\n"


def wants_light_pipeline(ir_text: str) -> bool:
    """Whether `ir_text` asks for the light pipeline (it starts with `LIGHT_PIPELINE_MARK`)."""
    return ir_text.startswith(LIGHT_PIPELINE_MARK)


def optimize(mod: Any, light: bool = False) -> None:
    """Optimize `mod` in place for the host.

    Args:
        mod: a parsed llvmlite module.
        light: instead of O3, inline the ``alwaysinline`` helpers and clean up (SROA,
            instcombine, simplifycfg, DCE). For programs whose loops have a handful of
            elements, where a call is call overhead and nothing is left to vectorize: on the
            100-step scalar chain with its gradient (W5) it takes 2 ms where O3 takes 9.
            Code generation then runs at level 0 (`target_machine(light=True)`): 5-6 ms
            instead of 10-11 ms there.
    """
    tm = target_machine()
    if light:
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_always_inliner_pass()
        mpm.add_sroa_pass()
        mpm.add_instruction_combine_pass()
        mpm.add_simplify_cfg_pass()
        mpm.add_dead_code_elimination_pass()
        mpm.run(mod, pb)
        return
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    pto.loop_unrolling = False  # vectorized loops are interleaved already; unrolling doubled code and compile time
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)


@dataclass
class Jitted:
    """A loaded native module.

    Attributes:
        engine: the MCJIT engine owning the code (keep it alive).
        address: the address of the entry function.
        ir_text: the unoptimized IR.
        cache: "memory" (compiled now), "disk" (object loaded from SYMGRAPH_CACHE_DIR).
        key: the cache key (hex).
    """

    engine: Any
    address: int
    ir_text: str
    cache: str
    key: str
    _opt_mod: Any = None

    def optimized_module(self) -> Any:
        with _llvm_lock:
            return self._optimized_module()

    def _optimized_module(self) -> Any:
        if self._opt_mod is None:
            mod = llvm.parse_assembly(self.ir_text)
            optimize(mod, light=wants_light_pipeline(self.ir_text))
            self._opt_mod = mod
        return self._opt_mod

    def llvm_ir(self) -> str:
        return str(self.optimized_module())

    def asm(self) -> str:
        with _llvm_lock:
            return target_machine(wants_light_pipeline(self.ir_text)).emit_assembly(self.optimized_module())


def _sha256(data: bytes = b"") -> Any:
    """A SHA-256 hash object. CPython's built-in implementation when it has one: `import hashlib`
    loads OpenSSL's libcrypto first (3 ms of the first compile); the digests are the same."""
    try:
        from _sha2 import sha256  # CPython >= 3.12
    except ImportError:
        try:
            from _sha256 import sha256  # CPython 3.8-3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data)


def cache_key(ir_text: str, extra: str = "") -> str:
    """SHA-256 of the IR text, codegen/llvmlite/LLVM versions, host CPU name and features, and `extra`.

    `extra` names the runtime libraries the object links against (vmath's
    libmvec variants, BLAS), so an object is never loaded where a symbol it
    calls is missing.
    """
    cpu, feats = host_key()
    h = _sha256()
    for part in (CODEGEN_VERSION, llvmlite.__version__, str(llvm.llvm_version_info), cpu, feats, extra, ir_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _cache_dir() -> str | None:
    d = os.environ.get("SYMGRAPH_CACHE_DIR")
    return d or None


#: Header of a disk-cache file: magic (8 bytes), then the SHA-256 of the object bytes (32 bytes).
CACHE_MAGIC = b"SGOBJ\x01\x00\x00"


def _wrap_cached_object(obj: bytes) -> bytes:
    """A disk-cache file's contents: `CACHE_MAGIC`, SHA-256 of `obj`, then `obj` (plain object code)."""
    return CACHE_MAGIC + _sha256(obj).digest() + obj


def _unwrap_cached_object(data: bytes) -> bytes | None:
    """The object bytes of a disk-cache file, or None when the header or the checksum does not match.

    LLVM's object loader trusts its input: an empty, truncated or overwritten
    file would crash the process. Only bytes whose SHA-256 matches the one
    written beside them reach it.
    """
    head = len(CACHE_MAGIC) + 32
    if len(data) <= head or not data.startswith(CACHE_MAGIC):
        return None
    obj = data[head:]
    if _sha256(obj).digest() != data[len(CACHE_MAGIC):head]:
        return None
    return obj


def compile_ir(ir_text: str, entry: str = "entry", key_extra: str = "") -> Jitted:
    """Optimize and compile IR text, or load its object code from the disk cache.

    Args:
        ir_text: a complete LLVM module (textual IR).
        entry: the name of the function whose address is returned.
        key_extra: more disk-cache key material (runtime library configuration).

    Returns:
        A Jitted record (engine, entry address, cache source).

    Raises:
        RuntimeError: LLVM rejected the module (a codegen bug; the message has LLVM's diagnostic).
    """
    with _llvm_lock:
        return _compile_ir(ir_text, entry, key_extra)


def compile_object(ir_text: str) -> bytes:
    """Parse, verify, optimize (`optimize`; light when the text starts with `LIGHT_PIPELINE_MARK`)
    and compile IR text to object code for this host.

    Raises:
        RuntimeError: LLVM rejected the module.
    """
    light = wants_light_pipeline(ir_text)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    optimize(mod, light=light)
    # The optimized module is not kept: `Jitted.llvm_ir()` rebuilds it from the text when asked.
    # Keeping it held the whole optimized program in LLVM's heap for the executable's lifetime.
    return target_machine(light).emit_object(mod)


def _use_compile_process() -> bool:
    return os.environ.get("SYMGRAPH_COMPILE_PROCESS", "") not in ("", "0")


class _Worker:
    """The compile worker process (`codegen.compile_worker`) of this process, started on first use."""

    proc: Any = None
    pid: int = 0  # the process that started it (a forked child starts its own)


def _compile_in_worker(ir_text: str) -> bytes | None:
    """Object code of `ir_text` compiled by the worker process, or None when the worker failed.

    On any failure (no worker, a crash, an error from LLVM) the worker is
    stopped and the caller compiles in-process, where a genuine error is
    raised with LLVM's message. Called with `_llvm_lock` held.
    """
    import struct
    import subprocess
    import sys

    w = _Worker
    data = ir_text.encode("utf-8")
    for attempt in (1, 2):  # a worker that has just exited on its idle timeout is replaced once
        try:
            if w.proc is None or w.pid != os.getpid() or w.proc.poll() is not None:
                w.proc = subprocess.Popen([sys.executable, "-m", "codegen.compile_worker"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, close_fds=True)
                w.pid = os.getpid()
            w.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            w.proc.stdin.flush()
            head = w.proc.stdout.read(9)
            if len(head) < 9:
                raise OSError("the compile worker exited")
            status, n = head[0], struct.unpack("<Q", head[1:])[0]
            payload = w.proc.stdout.read(n)
            if len(payload) < n:
                raise OSError("the compile worker exited")
            if status != 0:
                log.debug("codegen: the compile worker reported %s; compiling in this process",
                          payload.decode("utf-8", "replace"))
                return None
            return payload
        except (OSError, ValueError) as e:
            log.debug("codegen: compile worker failed (%s), attempt %d", e, attempt)
            _stop_worker()
    return None


def _stop_worker() -> None:
    w = _Worker
    if w.proc is not None and w.pid == os.getpid():
        try:
            w.proc.kill()
            w.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - already gone
            pass
    w.proc = None


def _compile_ir(ir_text: str, entry: str, key_extra: str) -> Jitted:
    key = cache_key(ir_text, key_extra)
    obj = None
    source = "memory"
    d = _cache_dir()
    path = os.path.join(d, f"{key}.o") if d else None
    if path and os.path.exists(path):
        try:
            with open(path, "rb") as f:
                obj = _unwrap_cached_object(f.read())
        except OSError:
            obj = None
        if obj is None:
            log.debug("codegen: object cache %s is unreadable, truncated or corrupt; recompiling", path)
        else:
            source = "disk"
    if obj is None:
        obj = _compile_in_worker(ir_text) if _use_compile_process() else None
        if obj is None:
            obj = compile_object(ir_text)
        if path:
            try:
                os.makedirs(d, exist_ok=True)
                import tempfile

                fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
                with os.fdopen(fd, "wb") as f:
                    f.write(_wrap_cached_object(obj))
                os.replace(tmp, path)
            except OSError as e:  # a read-only cache directory is not an error
                log.debug("codegen: could not write object cache %s: %s", path, e)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _new_target_machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    addr = engine.get_function_address(entry)
    if not addr:
        raise RuntimeError(f"codegen: entry function {entry!r} not found in the compiled object")
    return Jitted(engine, addr, ir_text, source, key)


_malloc_trim: Any = None


def release_memory() -> bool:
    """Return the C heap's free pages to the OS (glibc `malloc_trim(0)`); False where unavailable.

    LLVM frees the optimizer's and the object emitter's memory when a module
    is compiled, but glibc keeps the freed pages in the process heap, where
    they count in its resident memory for the rest of its life (on the W4
    gradient under "sqrt", 6.1 MiB). A call took 0.14-2 ms in a process
    holding the W4 arrays. It does nothing on other C libraries, or when
    SYMGRAPH_NO_MALLOC_TRIM is set.

    Returns:
        True when `malloc_trim(0)` was called, else False.
    """
    global _malloc_trim
    if os.environ.get("SYMGRAPH_NO_MALLOC_TRIM"):
        return False
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes

            fn = ctypes.CDLL(None).malloc_trim  # glibc only (musl, macOS and Windows have none)
            fn.argtypes = [ctypes.c_size_t]
            fn.restype = ctypes.c_int
            _malloc_trim = fn
        except (AttributeError, OSError, TypeError):  # no such symbol, or no C library handle
            _malloc_trim = False
    if not _malloc_trim:
        return False
    _malloc_trim(0)
    return True
