"""Vector-math configuration and the libmvec runtime: the default implementation, host features, glibc's libmvec.

Which implementation `emit` takes by default (`set_default_impl`, SYMGRAPH_VMATH), what the
host can run (`function_attributes`, `config_key` for cache keys), glibc's libmvec loaded
once (`runtime_init`, `libmvec_available`), the module bookkeeping that keeps its vector
variants alive until the vectorizer runs (`prepare_module`), and the "libmvec" implementation
itself: a scalar call that every evaluation, packed or not, runs as the same vector variant
(`_libmvec_call`). Which functions exist and their libm names are facts of the op records
(`symgraph.ops.Op.math`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import sys
import threading
from functools import cache

import numpy as np
from llvmlite import ir
from llvmlite.ir.instructions import CallInstrAttributes

from symgraph.ops import OPS

__all__ = ["FUNCTIONS", "IMPLS", "apply_function_attributes", "config_key", "function_attributes",
           "get_default_impl", "libmvec_available", "prepare_module", "runtime_init", "set_default_impl"]

#: op name -> number of arguments of every function `emit` knows: the ops whose record has `math`.
FUNCTIONS: dict[str, int] = {op.name: op.nin for op in OPS.values() if op.math is not None}

#: Implementation choices for `emit(impl=...)` and `set_default_impl`.
IMPLS = ("auto", "libmvec", "poly")

# The C names looked up in libmvec (glibc >= 2.35 has most, 2.22 exp/log/sin/cos/pow): every op's libm name.
_LIBM_NAMES: dict[str, int] = {OPS[f].math.libm: n for f, n in FUNCTIONS.items() if OPS[f].math.libm}
# x86 VFABI ISA letters: b = SSE4, c = AVX, d = AVX2, e = AVX-512; vector bits and the host feature.
_ISAS = (("b", 128, "sse4.1"), ("c", 256, "avx"), ("d", 256, "avx2"), ("e", 512, "avx512f"))

_lock = threading.Lock()
_libmvec: dict[tuple[str, str], tuple[tuple[str, int], ...]] | None = None  # (func, "f64"/"f32") -> ((isa, vf),)
_libmvec_path: str | None = None
_default_impl = os.environ.get("SYMGRAPH_VMATH", "auto")
if _default_impl not in IMPLS:  # pragma: no cover - environment misconfiguration
    _default_impl = "auto"


# ----- configuration and runtime -----


def set_default_impl(impl: str) -> str:
    """Choose the implementation `emit` uses when its `impl` argument is None.

    Args:
        impl: "auto" (libmvec for float64 when available, else polynomial),
            "libmvec" (libmvec where it has the function, for float64 and
            float32, else polynomial) or "poly" (polynomial IR only: the
            portable path for macOS/musl/non-x86 hosts).

    Returns:
        The previous default. The environment variable SYMGRAPH_VMATH sets the
        initial value.

    Raises:
        ValueError: for an unknown name.
    """
    global _default_impl
    if impl not in IMPLS:
        raise ValueError(f"vmath impl must be one of {IMPLS}, got {impl!r}")
    previous, _default_impl = _default_impl, impl
    return previous


def get_default_impl() -> str:
    """Return the implementation `emit` uses by default ("auto", "libmvec" or "poly")."""
    return _default_impl


@cache
def _host_features() -> frozenset:
    from llvmlite import binding as llvm

    try:
        fmap = llvm.get_host_cpu_features()
    except RuntimeError:  # pragma: no cover - hosts where LLVM cannot tell
        return frozenset()
    return frozenset(k for k, v in fmap.items() if v)


def _is_x86_64_linux() -> bool:
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


def runtime_init() -> bool:
    """Load glibc's libmvec into the process once and record its vector variants.

    Safe to call any number of times and from several threads; the first call
    does the work. Without libmvec (non-glibc, non-x86-64, old glibc) it
    returns False without error and `emit` uses the polynomial path. Must run
    before MCJIT finalizes code that calls libmvec (emit calls it itself, and
    code loaded from an on-disk object cache needs it too).

    Returns:
        True when libmvec is loaded and at least one variant usable on this
        host's ISA was found.
    """
    global _libmvec, _libmvec_path
    if _libmvec is not None:
        return bool(_libmvec)
    with _lock:
        if _libmvec is not None:
            return bool(_libmvec)
        found: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {}
        if _is_x86_64_linux():
            lib = None
            # the soname first: find_library runs `ldconfig -p` in a subprocess (~2 ms)
            for path in ("libmvec.so.1", None):
                try:
                    path = path or ctypes.util.find_library("mvec")
                    if not path:
                        break
                    lib = ctypes.CDLL(path)
                    from llvmlite import binding as llvm

                    llvm.load_library_permanently(path)
                    break
                except (OSError, RuntimeError):
                    lib = None
            if lib is not None:
                _libmvec_path = path
                feats = _host_features()
                for func, nargs in _LIBM_NAMES.items():
                    for kind, suffix, ebits in (("f64", "", 64), ("f32", "f", 32)):
                        params = "v" * nargs
                        variants = []
                        for isa, vbits, feature in _ISAS:
                            vf = vbits // ebits
                            if feature in feats and hasattr(lib, f"_ZGV{isa}N{vf}{params}_{func}{suffix}"):
                                variants.append((isa, vf))
                        # one variant per vector width: prefer the newest ISA (AVX2 over AVX)
                        by_vf = {vf: isa for isa, vf in variants}
                        if by_vf:
                            found[(func, kind)] = tuple(sorted((isa, vf) for vf, isa in by_vf.items()))
        _libmvec = found
        return bool(found)


def libmvec_available(name: str = "exp", dtype: str = "float64") -> bool:
    """Whether `emit` can use libmvec for `name` at `dtype` on this host (loads it if needed).

    Args:
        name: an op name of `FUNCTIONS` ("arcsinh") or a C name ("asinh").
        dtype: float64 or float32.
    """
    runtime_init()
    kind = "f64" if np.dtype(dtype) == np.float64 else "f32"
    return bool(_libmvec and (_libm_name(name), kind) in _libmvec)


def _libm_name(name: str) -> str:
    """The C function libmvec is searched for: the op's libm name, or for a composite the one it uses."""
    op = OPS.get(name)
    spec = op.math if op is not None else None
    if spec is None:
        return name
    return spec.libm or spec.via


def function_attributes() -> list[str]:
    """Function attributes for kernel functions whose loops call `emit`.

    Returns:
        Attribute strings in LLVM syntax, e.g. ``['"prefer-vector-width"="512"']``
        on AVX-512 hosts (without it the cost model keeps 256-bit vectors and
        the AVX-512 libmvec variants are never chosen). Attach them with
        `apply_function_attributes` (llvmlite's attribute set rejects quoted
        string attributes).
    """
    attrs = []
    if "avx512f" in _host_features():
        attrs.append('"prefer-vector-width"="512"')
    return attrs


class _OpenFunctionAttributes(ir.FunctionAttributes):
    """llvmlite function attributes that also accept ``"key"="value"`` and ``memory(...)``."""

    def add(self, name):
        if name in self._known:
            return super().add(name)
        return set.add(self, name)


class _OpenCallAttributes(CallInstrAttributes):
    """llvmlite call-site attributes that also accept ``"key"="value"`` and ``memory(...)``."""

    def add(self, name):
        if name in self._known:
            return super().add(name)
        return set.add(self, name)


def _open_attributes(fn: ir.Function) -> _OpenFunctionAttributes:
    attrs = fn.attributes
    if not isinstance(attrs, _OpenFunctionAttributes):
        new = _OpenFunctionAttributes()
        for a in attrs:
            set.add(new, a)
        new.alignstack = attrs.alignstack
        new.personality = attrs.personality
        fn.attributes = new
    return fn.attributes


def apply_function_attributes(fn: ir.Function, extra: list[str] | tuple[str, ...] = ()) -> None:
    """Attach `function_attributes()` (and `extra`) to an llvmlite function definition.

    Args:
        fn: the kernel function (llvmlite.ir.Function).
        extra: more attribute strings in LLVM syntax.
    """
    attrs = _open_attributes(fn)
    for a in [*function_attributes(), *extra]:
        attrs.add(a)


def config_key() -> str:
    """A short string naming every choice that changes the code `emit` generates.

    Put it in compile-cache keys next to the CPU name and features.
    """
    runtime_init()
    mv = ",".join(f"{f}.{k}:{'+'.join(f'{i}{v}' for i, v in var)}" for (f, k), var in sorted((_libmvec or {}).items()))
    return f"vmath1;impl={_default_impl};fma={'fma' in _host_features()};libmvec={mv or 'none'}"


# ----- module bookkeeping -----

_USED = "llvm.compiler.used"


def _update_compiler_used(module: ir.Module, fns) -> None:
    """Make `llvm.compiler.used` list `fns` (keeps entries already there)."""
    gv = module.globals.get(_USED)
    refs: list[str] = []
    if gv is not None and gv.initializer is not None:
        refs = [c.get_reference().split(" ", 1)[-1] for c in gv.initializer.constant]
    for fn in fns:
        ref = fn.get_reference()
        if ref not in refs:
            refs.append(ref)
    ptr = ir.PointerType()
    arr = ir.ArrayType(ptr, len(refs))
    if gv is None:
        gv = ir.GlobalVariable(module, arr, _USED)
        gv.linkage = "appending"
        gv.section = "llvm.metadata"
    gv.value_type = arr
    gv.initializer = ir.Constant(arr, [ir.FormattedConstant(ptr, r) for r in refs])


def _module_variants(module: ir.Module) -> list:
    reg = getattr(module, "_symgraph_vmath_variants", None)
    if reg is None:
        reg = []
        module._symgraph_vmath_variants = reg
    return reg


def prepare_module(module: ir.Module) -> None:
    """Add the globals `emit`'s calls need; idempotent, callable before or after `emit`.

    `emit` already declares what it uses and keeps `llvm.compiler.used` (the
    list that keeps libmvec variant declarations alive until the vectorizer
    runs) up to date; this call re-syncs that list (for example after another
    component rebuilt the global) and loads libmvec into the process.

    Args:
        module: the llvmlite module holding the kernels.
    """
    runtime_init()
    variants = _module_variants(module)
    if variants:
        _update_compiler_used(module, variants)


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, fnty, name)
    return fn


def _intrinsic(module: ir.Module, base: str, ty, nargs: int) -> ir.Function:
    suffix = "f64" if isinstance(ty, ir.DoubleType) else "f32"
    return _declare(module, f"{base}.{suffix}", ir.FunctionType(ty, [ty] * nargs))




# ----- the libmvec implementation -----


def _libmvec_call(builder: ir.IRBuilder, name: str, args, kind: str):
    """A call whose every evaluation, packed or scalar, is libmvec's widest variant of `name`.

    libmvec's vector functions and libm's scalar ones differ in the last
    bits, so a loop whose body packs libmvec calls and whose remainder calls
    libm gives an element other bits depending on where the loop's vector
    steps fall: on the thread split, the fusion, the checkpoint strategy.
    Here the scalar callee is an internal ``noinline`` wrapper that splats
    its argument into the widest variant (``_ZGVeN8v_sin`` on AVX-512) and
    takes lane 0; the call site's VFABI attribute maps it to that variant
    only, so the vectorizer packs it at that width or calls the wrapper per
    lane. Each element is computed by the same function whatever the loop.
    """
    module = builder.module
    ty = args[0].type
    suffix = "" if kind == "f64" else "f"
    scalar_name = name + suffix
    params = "v" * len(args)
    isa, vf = max(_libmvec[(name, kind)], key=lambda v: (v[1], [i[0] for i in _ISAS].index(v[0])))
    vname = f"_ZGV{isa}N{vf}{params}_{scalar_name}"
    vty = ir.VectorType(ty, vf)
    vfn = _declare(module, vname, ir.FunctionType(vty, [vty] * len(args)))
    wrapper = _mvec_scalar(module, f"sg_mvec_{scalar_name}", vfn, ty, vf, len(args))
    variants = _module_variants(module)
    # The wrapper is listed too: a used function keeps its signature, which the call site's VFABI
    # attribute describes (interprocedural constant propagation once dropped a constant pow exponent
    # from it, and the vectorizer then built an invalid call).
    added = False
    for f in (vfn, wrapper):
        if f not in variants:
            variants.append(f)
            added = True
    if added or module.globals.get(_USED) is None:  # else the list already has them (one rebuild per new variant)
        _update_compiler_used(module, variants)
    call = builder.call(wrapper, list(args))
    call.attributes = _OpenCallAttributes()
    call.attributes.add(f'"vector-function-abi-variant"="_ZGV_LLVM_N{vf}{params}_{wrapper.name}({vname})"')
    call.attributes.add("nounwind")
    call.attributes.add("memory(none)")
    return call


def _mvec_scalar(module: ir.Module, fname: str, vfn: ir.Function, ty, vf: int, nargs: int) -> ir.Function:
    """`ty fname(ty...)`: `vfn` on the arguments splatted to `vf` lanes, lane 0 (defined once per module)."""
    fn = module.globals.get(fname)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), fname)
    fn.linkage = "internal"
    attrs = _open_attributes(fn)
    for a in ("noinline", "nounwind", "willreturn", "memory(none)"):
        attrs.add(a)
    apply_function_attributes(fn)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vty = ir.VectorType(ty, vf)
    vecs = []
    for a in fn.args:
        v = ir.Constant(vty, None)
        for lane in range(vf):
            v = b.insert_element(v, a, ir.Constant(ir.IntType(32), lane))
        vecs.append(v)
    b.ret(b.extract_element(b.call(vfn, vecs), ir.Constant(ir.IntType(32), 0)))
    return fn


# ----- entry point -----
