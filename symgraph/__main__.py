"""The `symgraph` command line (also `python -m symgraph`): dump and measure graphs of a function in a file.

    symgraph dump  FILE.py:FUNC --shapes 3,4 [--grad|--hessian|--order N] [--format text|dot|svg|png|pdf|html] [-o PATH]
    symgraph stats FILE.py:FUNC --shapes 3,4 [--grad|--hessian|--order N] [--compile]

Exit status: 0 success, 2 bad usage (unknown option, bad FILE:FUNC, bad
shape, an option this installation cannot honour), 1 an error in the user's
code (the message and the user's line are printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import linecache
import os
import re
import sys
import textwrap
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import symgraph as sg

from . import errors as errors_mod
from . import viz
from .backend import backend_names
from .errors import SourceLocation, SymgraphError, _internal_dirs
from .files import write_atomically
from .ir import default_location
from .passes.checkpoint import apply_checkpoint
from .passes.schedule import peak_bytes, schedule

__all__ = ["main"]

EXIT_OK, EXIT_USER, EXIT_USAGE = 0, 1, 2

_DESCRIPTION = """\
Trace a Python function from a file into a symgraph graph, optionally
differentiate, simplify and checkpoint it, then print or draw the graph
(`dump`) or report its size and planned memory (`stats`).

The function is named FILE.py:FUNC (FUNC may be dotted, e.g. Model.loss). It
is called once on tracers of the shapes given by --shapes (one per positional
argument, each with an optional :DTYPE, e.g. --shapes 64:int64 for integer
labels) and the dtype given by --dtype for the others; only shapes and dtypes
matter, not values.
"""

_EPILOG = """\
examples:
  symgraph dump model.py:loss --shapes 3 --shapes 3              text listing
  symgraph dump model.py:loss --shapes 3 --shapes 3 --grad --simplify -o grad.svg
  symgraph dump model.py:loss --shapes 3 --shapes 3 --grad -o grad.html    interactive, offline viewer
  symgraph dump model.py:f --shapes '' --order 3 --format dot     3rd derivative of a scalar function
  symgraph stats model.py:loss --shapes 64,10 --shapes 10 --grad --checkpoint sqrt --compile
  symgraph dump model.py:xent --shapes 64,10:float32 --shapes 64:int64 --grad   integer labels

exit status: 0 ok, 1 error in the user's code (message and user line printed),
2 bad usage.
"""


class _UsageError(Exception):
    """Bad command-line usage (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with our exit status for usage errors (2, as argparse's default) and prog name."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


_ARG_DTYPES = ("float64", "float32", "complex128", "complex64", "int64", "int32", "bool")


def _arg(text: str) -> tuple[tuple[int, ...], str | None]:
    """One --shapes value: "D1,D2,..." with an optional ":DTYPE" (e.g. 64,10:float32 or 64:int64)."""
    body, sep, dt = text.rpartition(":") if ":" in text else (text, "", "")
    if sep:
        dt = dt.strip().lower()
        if dt not in _ARG_DTYPES:
            raise argparse.ArgumentTypeError(f"bad dtype {dt!r} in {text!r}: use one of {', '.join(_ARG_DTYPES)}")
        return _shape(body), dt
    return _shape(text), None


def _shape(text: str) -> tuple[int, ...]:
    t = text.strip().strip("()[] ")
    if t in ("", "scalar"):
        return ()
    if re.fullmatch(r"\d+(x\d+)+", t):
        t = t.replace("x", ",")
    try:
        parts = t.split(",")
        if len(parts) > 1 and parts[-1].strip() == "":  # "(3,)"
            parts = parts[:-1]
        dims = tuple(int(d) for d in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: use comma-separated sizes like 3,4 "
                                         f"(or '' / scalar for a 0-d argument)") from None
    if any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: sizes must be >= 0")
    return dims


def _argnums(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(a) for a in text.split(",") if a.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --argnums {text!r}: use comma-separated ints like 0,1") from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="FILE.py:FUNC",
                   help="the Python file and the function in it to trace (FUNC may be dotted: Class.method)")
    p.add_argument("--shapes", "-s", action="append", type=_arg, default=[], metavar="D1,D2,...[:DTYPE]",
                   help="shape of one positional argument, e.g. 3,4 for a 3x4 array, optionally with its dtype "
                        "(64:int64 for integer labels; float64, float32, int64, int32, bool); give it once per "
                        "argument, in order ('' or 'scalar' for a 0-d argument). Default: every argument is a "
                        "scalar")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32", "complex128", "complex64"),
                   help="dtype of every argument without its own :DTYPE (default float64)")
    d = p.add_mutually_exclusive_group()
    d.add_argument("--grad", action="store_true",
                   help="trace sg.grad(FUNC) (FUNC must return a scalar) instead of FUNC")
    d.add_argument("--hessian", action="store_true",
                   help="trace sg.hessian(FUNC): shape in.shape + in.shape (FUNC returns a scalar)")
    d.add_argument("--order", type=int, metavar="N",
                   help="trace N nested sg.grad of FUNC, i.e. the N-th derivative of a scalar function of "
                        "scalars (--order 1 is --grad, 0 the function itself)")
    p.add_argument("--argnums", type=_argnums, default=(0,), metavar="I[,J...]",
                   help="positional arguments to differentiate with --grad/--hessian/--order (default 0)")
    p.add_argument("--simplify", action="store_true",
                   help="run sg.simplify on the graph (CSE, constant folding, algebraic rewrites, DCE)")
    p.add_argument("--checkpoint", metavar="STRATEGY",
                   help="rematerialize with symgraph.passes.checkpoint.apply_checkpoint: sqrt, sqrt:K, revolve, "
                        "revolve:S, mincut, none, or a byte budget (an int); recomputed nodes are drawn green. "
                        "Runs after --simplify")
    p.add_argument("--name", help="graph name used in the listing and titles (default: derived from FUNC)")
    p.add_argument("--traceback", action="store_true", help="on errors, also print the full Python traceback")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="symgraph", description=_DESCRIPTION, epilog=_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    dp = sub.add_parser("dump", help="print or draw the graph of a function",
                        description=textwrap.fill(
                            "Trace FUNC (optionally differentiate, simplify, checkpoint) and write its graph as text "
                            "(one node per line: id, op, inputs, attrs, dtype[shape], role, source line), Graphviz "
                            "DOT, or a picture (SVG, PNG, PDF through Graphviz's `dot`) where forward, backward and "
                            "recomputed nodes are drawn differently.", 78),
                        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(dp)
    dp.add_argument("--format", "-f", choices=("text", "dot", "svg", "png", "pdf", "html"),
                    help="output format: text (the node listing), dot (Graphviz source), svg/png/pdf (drawn by "
                         "Graphviz's `dot` program), html (an offline interactive viewer, one file, no Graphviz). "
                         "Default: from the -o suffix (.txt .dot .svg .png .pdf .html), else text")
    dp.add_argument("-o", "--output", metavar="PATH", help="write to PATH instead of standard output")
    c = dp.add_mutually_exclusive_group()
    c.add_argument("--full", action="store_true",
                   help="draw every node even in large graphs (default: graphs over 2000 nodes are summarized)")
    c.add_argument("--collapse", action="store_true", help="summarize elementwise chains even in small graphs")
    dp.add_argument("--no-legend", action="store_true", help="omit the legend from DOT and pictures")
    dp.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                    help="give up on Graphviz after this many seconds (default 120)")
    sp = sub.add_parser("stats", help="node counts per role, planned peak bytes, compiled kernel count",
                        description=textwrap.fill(
                            "Trace FUNC (optionally differentiate, simplify, checkpoint) and print its node counts "
                            "per role (forward, backward, recomputed) and per op kind, and the planned peak bytes of "
                            "its schedule (symgraph.passes.schedule.peak_bytes). With --compile, also compile it "
                            "with sg.compile and print the kernel count and compile time.", 78),
                        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(sp)
    sp.add_argument("--compile", action="store_true",
                    help="also compile with sg.compile (checkpoint strategy passed on) and report kernels and "
                         "compile seconds from its .stats")
    sp.add_argument("--backend", default="llvm", choices=backend_names(), help="backend for --compile (default llvm)")
    sp.add_argument("--data-parallel", action="store_true",
                    help="compile with data_parallel=True (implies --compile; one MPI rank unless run under mpiexec; "
                         "the distributed extra) and report the gradient buckets, the bytes reduced per call, the "
                         "nodes scheduled between each all-reduce's start and wait, and the native segments")
    return p


# ----- loading the user's function -----


def _load(target: str) -> tuple[Callable, str]:
    """Import FILE.py and return (FUNC, its name). Raises _UsageError for a bad FILE:FUNC."""
    path, sep, func = target.rpartition(":")
    if not sep or not path or not func:
        raise _UsageError(f"expected FILE.py:FUNC, got {target!r}")
    if not os.path.isfile(path):
        raise _UsageError(f"no such file: {path!r} (from {target!r})")
    path = os.path.abspath(path)
    modname = "_symgraph_cli_" + "".join(ch if ch.isalnum() else "_" for ch in os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise _UsageError(f"cannot import {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    sys.path.insert(0, os.path.dirname(path))
    spec.loader.exec_module(module)  # errors here are the user's (exit 1)
    obj: Any = module
    for part in func.split("."):
        if not hasattr(obj, part):
            avail = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                           and getattr(v, "__module__", None) == modname)
            raise _UsageError(f"{os.path.basename(path)} has no function {func!r}"
                              + (f"; functions defined there: {', '.join(avail)}" if avail else ""))
        obj = getattr(obj, part)
    if not callable(obj):
        raise _UsageError(f"{func!r} in {os.path.basename(path)} is a {type(obj).__name__}, not a function")
    return obj, func


def _n_positional(f: Callable) -> tuple[int, int] | None:
    """(required, maximum) positional parameters of f, or None when unknown."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return None
    req = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return req, 1 << 30
    return req, sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _checkpoint_strategy(text: str) -> Any:
    t = text.strip()
    if t.lower() in ("none", "null"):
        return None
    if t.isdigit():
        return int(t)
    name, sep, arg = t.partition(":")
    if sep:
        if not arg.isdigit():
            raise _UsageError(f"bad --checkpoint {text!r}: the number after ':' must be an int (e.g. sqrt:4)")
        return (name.lower(), int(arg))
    return t.lower()


def _build(args: argparse.Namespace) -> tuple[Any, Callable, tuple]:
    """Load, transform and trace the function. Returns (graph, traced function, example args)."""
    f, fname = _load(args.target)
    shapes = [shape for shape, _ in args.shapes]
    own_dtypes = [dt for _, dt in args.shapes]
    npos = _n_positional(f)
    if not shapes and npos is not None:
        shapes = [()] * npos[0]
    if npos is not None and not npos[0] <= len(shapes) <= npos[1]:
        want = str(npos[0]) if npos[0] == npos[1] else f"{npos[0]} to {npos[1]}" if npos[1] < 1 << 30 else f"{npos[0]}+"
        raise _UsageError(f"{fname} takes {want} positional arguments but {len(shapes)} --shapes were given "
                          f"(give --shapes once per argument)")
    for a in args.argnums:
        if not -len(shapes) <= a < len(shapes):
            raise _UsageError(f"--argnums {a} is out of range for {len(shapes)} arguments")
    dtypes = [np.dtype(dt or args.dtype) for dt in own_dtypes] + [np.dtype(args.dtype)] * (len(shapes) - len(own_dtypes))
    example = tuple(np.zeros(s, dt) for s, dt in zip(shapes, dtypes))
    nums = args.argnums[0] if len(args.argnums) == 1 else tuple(args.argnums)
    fn, label = f, fname
    if args.hessian:
        fn, label = sg.hessian(f, argnums=nums), f"hessian({fname})"
    elif args.grad or args.order is not None:
        order = 1 if args.grad else args.order
        if order < 0:
            raise _UsageError(f"--order must be >= 0, got {order}")
        if order >= 2:
            bad = [(a, shapes[a]) for a in args.argnums if shapes[a] != ()]
            if bad:
                raise _UsageError(f"--order {order} nests sg.grad, so the differentiated arguments must be scalars; "
                                  f"argument {bad[0][0]} has shape {bad[0][1]} (use --hessian for a vector argument)")
        for _ in range(order):
            fn = sg.grad(fn, argnums=nums)
        label = fname if order == 0 else (f"grad({fname})" if order == 1 else f"grad{order}({fname})")
    strategy = _checkpoint_strategy(args.checkpoint) if args.checkpoint is not None else None
    try:
        with default_location(_def_line(f)):
            g = sg.trace(fn, *example, name=args.name or label)
    except SymgraphError as e:
        if not args.shapes and example:
            e.message += ("\n  (no --shapes was given, so every argument was traced as a scalar; give --shapes "
                          "once per argument, e.g. --shapes 64,10 --shapes 10)")
        raise
    if args.simplify:
        g = sg.simplify(g)
    if args.checkpoint is not None:
        g = apply_checkpoint(g, strategy)
    return g, fn, example


class _Unavailable(Exception):
    """An option needs a component this installation lacks (exit status 2)."""


# ----- commands -----


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _cmd_dump(args: argparse.Namespace) -> int:
    fmt = args.format
    if fmt is None:
        suffix = os.path.splitext(args.output or "")[1].lower()
        fmt = {".txt": "text", ".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png", ".pdf": "pdf",
               ".html": "html", ".htm": "html"}.get(suffix, "text")
    if fmt in ("png", "pdf") and args.output is None and sys.stdout.isatty():
        raise _UsageError(f"--format {fmt} writes binary data: give -o PATH (or redirect standard output)")
    if args.output:  # before tracing: a typo in -o should not cost a compile
        where = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(where):
            raise _UsageError(f"-o {args.output}: the directory {where} does not exist")
    g, _, _ = _build(args)
    kw: dict[str, Any] = {"legend": not args.no_legend}
    if args.full:
        kw["collapse"] = False
    elif args.collapse:
        kw["collapse"] = True
    if fmt == "text":
        data: bytes = (viz.dump(g) + "\n").encode("utf-8")
    elif fmt == "dot":
        data = viz.to_dot(g, **kw).encode("utf-8")
    elif fmt == "html":
        data = viz.to_html(g, collapse=kw.get("collapse")).encode("utf-8")
    else:
        try:
            data = viz.render_bytes(g, fmt, timeout=args.timeout, **kw)
        except SymgraphError as e:  # Graphviz missing, failing or too slow: not the user's code
            raise _Unavailable(e.message) from None
    if args.output:
        try:
            write_atomically(args.output, lambda f: f.write(data))
        except OSError as e:
            raise _UsageError(f"cannot write {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return EXIT_OK


def _cmd_stats(args: argparse.Namespace) -> int:
    g, fn, example = _build(args)
    order = schedule(g)
    roles = viz.role_counts(g)
    kinds = Counter(n.op.kind for n in order)
    lines = [f"graph {g.name}: {len(order)} nodes, {len(g.inputs)} inputs, {len(g.outputs)} outputs"]
    lines.append("nodes per role:")
    lines += [f"  {r:<12} {c:>8}" for r, c in roles.items()]
    lines.append("nodes per op kind:")
    lines += [f"  {k:<12} {c:>8}" for k, c in kinds.most_common()]
    pb = peak_bytes(order, g.outputs)
    lines.append(f"planned peak bytes: {pb} ({_human(pb)}; intermediates and outputs, inputs excluded)")
    print("\n".join(lines), flush=True)
    if not (args.compile or args.data_parallel):
        return EXIT_OK
    strategy = _checkpoint_strategy(args.checkpoint) if args.checkpoint is not None else None
    rng = np.random.default_rng(0)
    real = tuple(rng.standard_normal(x.shape).astype(x.dtype) if x.dtype.kind == "f" else
                 (rng.random(x.shape) < 0.5) if x.dtype.kind == "b" else rng.integers(0, 2, x.shape).astype(x.dtype)
                 for x in example)
    t0 = time.perf_counter()
    cf = sg.compile(fn, backend=args.backend, checkpoint=strategy, data_parallel=True if args.data_parallel else None)
    cf(*real)
    wall = time.perf_counter() - t0
    st = dict(getattr(cf, "stats", {}) or {})
    out = [f"compiled ({args.backend}):"]
    if "kernels" in st:
        out.append(f"  kernels            {st['kernels']}")
    else:
        out.append("  kernels            (not reported by sg.compile)")
    if "compile_seconds" in st:
        out.append(f"  compile seconds    {st['compile_seconds']:.3f}")
    out.append(f"  first call seconds {wall:.3f} (compile + one run)")
    for k in ("nodes", "peak_bytes", "arena_bytes", "segments"):
        if k in st:
            out.append(f"  {k:<18} {st[k]}")
    if args.data_parallel:
        comm = [n for n in cf.graph.toposort() if n.op.extra.get("communication")]
        starts = [n for n in comm if n.op.name == "allreduce_start"]
        out.append(f"communication (data_parallel, {len(comm)} nodes of role communication):")
        out.append(f"  buckets            {len(starts)}")
        out.append(f"  bytes per call     {sum(n.nbytes for n in starts)}")
        c = st.get("communication")
        if c:
            out.append(f"  overlapped nodes   {c['overlapped_nodes']} (scheduled between each start and its wait)")
    print("\n".join(out))
    return EXIT_OK


# ----- errors -----


def _user_frame(exc: BaseException, user_file: str | None) -> tuple[str, int, str] | None:
    """The innermost traceback frame in the user's file (else outside symgraph/numpy/stdlib)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if user_file:
        mine = [fr for fr in frames if os.path.abspath(fr.filename) == user_file]
        if mine:
            fr = mine[-1]
            return fr.filename, fr.lineno or 0, fr.name
    internal = _internal_dirs() + (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
    outside = [fr for fr in frames if not fr.filename.startswith(internal) and not fr.filename.startswith("<frozen")]
    if outside:
        fr = outside[-1]
        return fr.filename, fr.lineno or 0, fr.name
    return None


def _report_user_error(exc: BaseException, target: str, show_tb: bool) -> None:
    path = target.rpartition(":")[0]
    user_file = os.path.abspath(path) if path else None
    if isinstance(exc, SymgraphError):
        msg = exc.message
        loc = (exc.location.filename, exc.location.lineno, exc.location.function) if exc.location else None
    else:
        msg = str(exc)
        loc = None
    if loc is None:
        loc = _user_frame(exc, user_file)
    sys.stderr.write(f"symgraph: error: {type(exc).__name__}: {msg}\n")
    if loc is not None:
        fn, line, func = loc
        sys.stderr.write(f"  at {fn}:{line} (in {func})\n")
        src = linecache.getline(fn, line).strip()
        if src:
            sys.stderr.write(f"    {src}\n")
    if show_tb:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def _def_line(f: Any) -> SourceLocation | None:
    """The line where the traced function is defined (the location of nodes no user line builds)."""
    code = getattr(inspect.unwrap(getattr(f, "__func__", f)), "__code__", None)
    if code is None:
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)


def _launcher_is_internal() -> None:
    """The console script that runs `main` (bin/symgraph) is not the user's code: skip its frame in locations."""
    launcher = getattr(sys.modules.get("__main__"), "__file__", None)
    if launcher:
        for name in {launcher, os.path.abspath(launcher)}:
            errors_mod._FILE_INTERNAL[name] = True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: arguments without the program name (default: sys.argv[1:]).

    Returns:
        The exit status: 0 ok, 1 error in the user's code, 2 bad usage.
    """
    if argv is None:  # the command line itself (not a call from Python code)
        _launcher_is_internal()
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return int(e.code or 0)
    try:
        return {"dump": _cmd_dump, "stats": _cmd_stats}[args.command](args)
    except (_UsageError, _Unavailable) as e:
        sys.stderr.write(f"symgraph {args.command}: error: {e}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except BaseException as e:  # noqa: BLE001  (user code may raise anything)
        if isinstance(e, SystemExit):
            return int(e.code or 0) if isinstance(e.code, int) else EXIT_USER
        _report_user_error(e, args.target, args.traceback)
        return EXIT_USER


if __name__ == "__main__":
    sys.exit(main())
