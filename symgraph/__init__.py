"""symgraph: a symbol-to-symbol differentiating graph compiler for NumPy code.

Trace a Python function into a graph, differentiate it as a graph pass (to
any order), simplify, checkpoint, and compile it to native code with LLVM.
The public API is listed in `__all__`; see README.md and docs/.
"""

from .ops import (  # noqa: F401  (the rule modules register the primitives; symgraph.ops is the registry)
    comm as _comm_ops,
    custom as _custom_ops,
    eig as _eig_ops,
    elementwise as _elementwise_ops,
    factor as _factor_ops,
    fourier as _fourier_ops,
    fourier_parts as _fourier_parts_ops,
    lapack_parts as _lapack_parts_ops,
    linalg as _linalg_ops,
    loops as _loop_ops,
    remat as _remat_ops,
    scan as _scan_ops,
    special as _special_ops,
    spectral as _spectral_ops,
    structural as _structural_ops,
)
from . import tracing as _tracing  # noqa: F401  (installs the array interface of nodes)
from . import nn, numpy, optim, random, viz  # noqa: F401  (viz installs Graph.dump, to_dot, render, to_networkx)
from .errors import (
    DTypeError,
    FloatingPointError,
    LinAlgError,
    LoopLimitError,
    NonScalarOutputError,
    ShapeError,
    SymgraphError,
    LinAlgError,
    TracerConversionError,
    UnsupportedOpError,
)
from .interpreter import evaluate  # (installs Graph.evaluate)
from .ir import Builder, Graph, Node
from .passes import checkpoint as checkpoint_policies
from .passes.checkpoint import (
    Revolve,
    apply_checkpoint,
    checkpoint,
    checkpoint_name,
    checkpoint_stats,
    dots_saveable,
    dots_with_no_batch_dims_saveable,
    everything_saveable,
    names_of,
    nothing_saveable,
    print_saved_residuals,
    save_any_names_but_these,
    save_from_both_policies,
    save_only_these_names,
    saved_residuals,
)
from .passes.simplify import simplify
from .tracing import trace
from .batching import vmap
from .compile import CompiledFunction, compile  # noqa: A004  (sg.compile, per the API)
from .custom import custom_jvp, custom_vjp
from .control import cond, fori_loop, scan, switch, while_loop
from . import loop_checkpoint as _loop_checkpoint  # noqa: F401  (installs Region.checkpointed_reverse)
from . import while_checkpoint as _while_checkpoint  # noqa: F401  (installs WhileRegion.checkpointed_vjp)
from .while_checkpoint import while_schedule_counts
from .testing import check_grads, check_vjp_jvp
from .eager import config
from .state import StateError, load_state, save_state
from .transforms import grad, hessian, hvp, jacfwd, jacobian, jacrev, jvp, stop_gradient, value_and_grad, vjp
from .derived import (
    deriv, elementwise_grad, grad_named, hessian_tensor_product, hessian_vector_product, linearize, make_ggnvp,
    make_hvp, make_jvp, make_vjp, tensor_jacobian_product, vector_jacobian_product,
)
from .tree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten

__version__ = "0.1.0"

__all__ = [
    "trace", "Graph", "Node", "Builder", "evaluate", "numpy", "viz", "nn", "optim", "random",
    "grad", "value_and_grad", "vjp", "jvp", "jacobian", "jacfwd", "jacrev", "hessian", "hvp", "stop_gradient",
    "vmap", "scan", "fori_loop", "cond", "switch", "while_loop", "custom_vjp", "custom_jvp", "config", "check_vjp_jvp",
    "while_schedule_counts",
    "elementwise_grad", "deriv", "grad_named", "make_vjp", "make_jvp", "linearize", "vector_jacobian_product",
    "tensor_jacobian_product", "hessian_tensor_product", "hessian_vector_product", "make_hvp", "make_ggnvp",
    "compile", "CompiledFunction", "simplify", "check_grads",
    "checkpoint", "checkpoint_name", "saved_residuals", "print_saved_residuals", "apply_checkpoint",
    "checkpoint_stats", "Revolve", "checkpoint_policies", "everything_saveable", "nothing_saveable",
    "dots_saveable", "dots_with_no_batch_dims_saveable", "save_only_these_names", "save_any_names_but_these",
    "save_from_both_policies", "names_of",
    "tree_map", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure",
    "SymgraphError", "ShapeError", "DTypeError", "NonScalarOutputError", "TracerConversionError",
    "UnsupportedOpError", "FloatingPointError", "LinAlgError", "LoopLimitError", "save_state", "load_state", "StateError",
]
