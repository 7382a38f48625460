"""The import graph of symgraph and codegen: no cycle, and no module imports a layer above its own.

Every module of `symgraph/` and `codegen/` is parsed with `ast`, and every
import statement is an edge, at module level and inside functions alike (a
function-level import hides a cycle from the interpreter; it does not remove
it). Relative imports are resolved. Importing `a.b.c` first runs the
`__init__` of package `a.b`, so that is an edge too (see `_implicit`).

The layers follow ../shared/DESIGN.md (ir < ops < tracing/numpy < transforms
< passes < compile < backends), each module placed where its imports put it:
the differentiation passes (autodiff) sit below the front end and the graph
passes, and the user-facing transformations, which on arrays trace, simplify
and evaluate, sit with compile above them.
"""

from __future__ import annotations

import ast
import pathlib

import networkx as nx
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("symgraph", "codegen")

#: Module (or package prefix) -> layer. A module may import its own layer and the layers below.
#: The key "symgraph" is the facade (symgraph/__init__.py) only; every other module needs its own entry.
LAYERS = {
    # foundations: no symgraph imports beyond each other
    "symgraph.errors": 0,
    "symgraph.files": 0,  # atomic file writes (state, the CLI, the HTML pages)
    "symgraph.tree": 0,
    "symgraph.closures": 0,  # closed-over-array detection, read by lax.constant
    "symgraph.progress": 0,  # a long compile's stage on a terminal (tqdm) and the seconds per stage
    # the IR: Node, Builder, Graph (its conveniences and Node's array interface are installed from above)
    "symgraph.ir": 1,
    # reads graphs only: dumps, DOT, networkx (every layer above may dump a graph)
    "symgraph.viz": 2,
    # the op registry and its records, lax (binding with explicit promotion), the rule modules
    "symgraph.ops": 3,
    "symgraph.lax": 3,
    # differentiation passes on nodes (vjp_nodes, jvp_nodes): custom rules and checkpointing build on them
    "symgraph.autodiff": 4,
    # the front end: tracing, the NumPy namespace and what is written with it
    "symgraph.indexing": 5,  # x[idx] and x.at[idx] on traced values
    "symgraph.inplace": 5,  # in-place updates of traced values (installed by tracing)
    "symgraph.conversions": 5,  # np.array / np.asarray ... of traced values while a trace runs (entered by tracing)
    "symgraph.tracing": 5,
    "symgraph.numpy": 5,
    "symgraph.custom": 5,
    "symgraph.nn": 5,
    "symgraph.optim": 5,
    "symgraph.random": 5,
    "symgraph.scipy": 5,
    "symgraph.scipy.integrate": 8,  # odeint: an adaptive solver built on scan and while_loop
    "symgraph.distributed": 5,  # MPI (mpi4py, imported lazily): communicator, broadcast, shard, gradient buckets
    "symgraph.state": 0,  # save_state / load_state: atomic .npz of a pytree  # SciPy's functions on traced values (tracing finds scipy.special's ufuncs there)
    # graph -> graph passes
    "symgraph.passes": 6,
    # running a graph: the argument rules and the NumPy reference evaluator
    "symgraph.signature": 7,
    "symgraph.interpreter": 7,
    "symgraph.backend": 7,  # the backend protocol and registry (backends are loaded by name)
    "symgraph.segments": 7,  # graphs with host ops (communication) as natively compiled segments
    "symgraph.eager": 7,  # what transformations called on arrays do: trace, simplify, evaluate
    "symgraph.debugging": 7,  # config.debug_nans: re-runs a graph op by op to find the first NaN/inf producer
    # the user API: transformations of functions (on arrays they trace, simplify and evaluate), compile
    # and the backend it ships
    "symgraph.transforms": 8,
    "symgraph.derived": 8,
    "symgraph.batching": 8,
    "symgraph.regions": 8,  # loop regions: the rules of the scan op (they differentiate and batch bodies)
    "symgraph.branches": 8,  # branch regions: the rules of the cond op
    "symgraph.control": 8,  # scan, fori_loop, cond, switch
    "symgraph.guards": 8,
    "symgraph.loop_checkpoint": 8,  # checkpointed loop reversal (snapshot and action loops)
    "symgraph.while_checkpoint": 8,  # reverse mode through while_loop(checkpoints=s): Revolve as an in-graph loop
    "symgraph.rolling": 8,  # Python loops rolled into scan loops (sg.compile(roll=True)); transforms call it  # bounded loops' run-time checks as extra outputs of compiled graphs
    "symgraph.testing": 8,
    "symgraph.numpy_backend": 8,
    "symgraph.compile": 8,
    "symgraph.numpy.coverage": 8,  # the coverage table's generator: traces, differentiates, asks the backend
    # the facade (re-exports the public API) and the command line
    "symgraph": 9,
    "symgraph.__main__": 9,
    # the backends. codegen.kernels is the backend-neutral kernel IR (loop-body Exprs, the partitioner,
    # the task kinds): it never imports the LLVM lowering (codegen.llvm) or the CPU runtime (codegen.cpu)
    "codegen.kernels": 10,
    # the LLVM backend: imports symgraph (see BACKENDS), never the reverse
    "codegen": 11,
}
FACADE = "symgraph"

#: A backend builds on symgraph up to the backend protocol and registry (`symgraph.backend`), never on
#: what drives backends (compile, the user API, the facade): the registry imports a backend by name
#: ("codegen.<module>:<factory>", with importlib) on first use, so `import symgraph` never imports
#: codegen or llvmlite, and a backend importing what loads it would close a cycle through that load.
#: symgraph itself never imports codegen (it is the layer above).
BACKENDS = {"codegen": LAYERS["symgraph.backend"]}  # backend package -> the highest symgraph layer it may import

#: Imports that work in progress removes (issue 15), exempt from the checks until then. Delete an entry
#: when its import is gone (`test_pending_imports_still_exist` says so); any other cycle or upward
#: import fails now.
PENDING: set[tuple[str, str]] = set()


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """Dotted module name -> (path, whether it is a package `__init__`)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _imports(name: str, source: str, is_pkg: bool) -> list[tuple[str, bool, int]]:
    """(imported symgraph or codegen module, inside a function?, line) for each import of a module."""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, inner, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    pkg = base[:len(base) - child.level + 1]
                    mod = ".".join(pkg + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                for a in child.names:  # `from pkg import sub` imports the submodule pkg.sub
                    sub = f"{mod}.{a.name}"
                    found.append((sub if sub in MODULES else mod, inner, child.lineno))
            visit(child, inner)

    visit(ast.parse(source), False)
    return [(m, lazy, line) for m, lazy, line in found if m.split(".")[0] in PACKAGES]


def _implicit(importer: str, target: str) -> list[str]:
    """The packages whose `__init__` importing `target` runs first, besides the importer's own.

    Top-level packages are left out: `symgraph/__init__.py` is the facade that re-exports the
    whole public API (its own layer, at the top); every `import symgraph.x` runs it, and nothing
    below it imports it by name.
    """
    parts = target.split(".")
    pkgs = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in pkgs if p in MODULES and importer != p and not importer.startswith(p + ".")]


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) -> where ("path:line", with "(in a function)" for function-level imports)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for name, (path, is_pkg) in MODULES.items():
        for target, lazy, line in _imports(name, path.read_text(), is_pkg):
            where = f"{path.relative_to(ROOT)}:{line}" + (" (in a function)" if lazy else "")
            for t in [target] + _implicit(name, target):
                seen = edges.setdefault((name, t), []) if t != name else []
                w = where if t == target else f"{where} (runs {t}/__init__)"
                if t != name and w not in seen:  # `from m import a, b` is one import
                    seen.append(w)
    return edges


EDGES = _edges()


def _layer(module: str) -> tuple[str, int]:
    keys = [k for k in LAYERS if module == k or (k != FACADE and module.startswith(k + "."))]
    key = max(keys, key=len, default=None)
    return key, LAYERS.get(key, -1)


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if _layer(m)[0] is None]
    assert not missing, f"give these modules a layer in LAYERS (tests/test_imports.py): {missing}"


def test_no_upward_import():
    bad = []
    for (a, b), where in sorted(EDGES.items()):
        if (a, b) in PENDING:
            continue
        ceiling = BACKENDS.get(a.split(".")[0], _layer(a)[1]) if b.startswith("symgraph") else _layer(a)[1]
        if _layer(b)[1] > ceiling:
            bad.append(f"{a} (layer {_layer(a)[1]}, may import up to {ceiling}) imports {b} (layer {_layer(b)[1]}) "
                       f"at {', '.join(where)}")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycle():
    g = nx.DiGraph(e for e in EDGES if e not in PENDING)
    cycles = []
    for scc in nx.strongly_connected_components(g):
        if len(scc) > 1:
            cycle = nx.find_cycle(g.subgraph(scc))
            steps = [f"  {a} -> {b}  ({', '.join(EDGES[a, b])})" for a, b in cycle]
            cycles.append(f"{len(scc)} modules {sorted(scc)}, for example\n" + "\n".join(steps))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_kernel_ir_does_not_import_llvmlite():
    """codegen.kernels, the kernel IR another backend starts from, knows nothing of LLVM (the layers keep it off
    codegen.llvm and codegen.cpu; this keeps it off llvmlite)."""
    bad = []
    for name, (path, _) in MODULES.items():
        if not name.startswith("codegen.kernels"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module or ""]
            else:
                continue
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports {m}" for m in mods if m.split(".")[0] == "llvmlite"]
    assert not bad, bad


def test_pending_imports_still_exist():
    gone = [edge for edge in sorted(PENDING) if edge not in EDGES]
    assert not gone, f"these imports are gone: delete them from PENDING in tests/test_imports.py: {gone}"


def test_the_walk_sees_function_level_relative_and_package_imports():
    """The parser resolves what the checks above rely on (on small sources, not on the tree)."""
    src = ("from .. import lax as L\nfrom ..errors import ShapeError\nfrom .core import OPS\n"
           "def f():\n    import codegen\n    from ..passes.schedule import schedule\n")
    assert _imports("symgraph.ops.elementwise", src, False) == [
        ("symgraph.lax", False, 1), ("symgraph.errors", False, 2), ("symgraph.ops.core", False, 3),
        ("codegen", True, 5), ("symgraph.passes.schedule", True, 6)]
    assert _imports("symgraph", "from . import lax\nfrom .ir import Graph\n", True) == [
        ("symgraph.lax", False, 1), ("symgraph.ir", False, 2)]
    assert _implicit("symgraph.lax", "symgraph.ops.core") == ["symgraph.ops"]
    assert _implicit("symgraph.ops.elementwise", "symgraph.ops.core") == []
    assert _implicit("codegen.jit", "symgraph.ir") == []
    assert _layer("symgraph.ops.core") == ("symgraph.ops", 3) and _layer("symgraph")[1] == 9
    assert _layer("codegen.jit")[0] == "codegen" and _layer("symgraph.new_module")[0] is None
