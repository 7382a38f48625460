"""Compatibility module: vector math moved to `codegen.llvm.vmath`; import from there.

Re-exports its public names. Its state (the default implementation, the libmvec table) lives
in `codegen.llvm.vmath.runtime`; `set_default_impl` here is that module's.
"""

from __future__ import annotations

from .llvm.vmath import (FUNCTIONS, IMPLS, POLY_SIN_COS_EXACT_LIMIT, POLY_TRIG_NAN_LIMIT, apply_function_attributes,
                         config_key, emit, fit_chebyshev, function_attributes, get_default_impl, libmvec_available,
                         prepare_module, runtime_init, set_default_impl)

__all__ = ["FUNCTIONS", "IMPLS", "POLY_SIN_COS_EXACT_LIMIT", "POLY_TRIG_NAN_LIMIT", "apply_function_attributes",
           "config_key", "emit", "fit_chebyshev", "function_attributes", "get_default_impl", "libmvec_available",
           "prepare_module", "runtime_init", "set_default_impl"]
