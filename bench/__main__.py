"""Command line: ``python -m bench W1 [W2 ...] [--all] [--quick] [--json PATH] [--plot DIR]``.

``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` slow a current NumPy's
OpenBLAS; NumPy reads them when it is imported, so if either is set this
module re-executes ``python -m bench`` with both removed from the
environment of the benchmark process (and only of it).
"""

from __future__ import annotations

import os
import sys

_OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _reexec_without_openblas_env() -> None:
    found = {k: os.environ[k] for k in _OPENBLAS_VARS if k in os.environ}
    if not found or "numpy" in sys.modules:
        return
    env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS_VARS}
    env["BENCH_OPENBLAS_REMOVED"] = " ".join(f"{k}={v}" for k, v in found.items())
    os.execve(sys.executable, [sys.executable, "-m", "bench", *sys.argv[1:]], env)


if __name__ == "__main__":
    _reexec_without_openblas_env()

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import time  # noqa: E402

from . import NAMED_ONLY, WORKLOADS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads, print their tables, optionally write JSON and plots.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``).

    Returns:
        Process exit code: 0 when the harness ran (even if some systems
        errored or were WRONG), 2 on bad arguments.
    """
    p = argparse.ArgumentParser(prog="python -m bench", description="symgraph benchmark harness")
    p.add_argument("workloads", nargs="*", metavar="W", help="workload ids: " + " ".join({**WORKLOADS, **NAMED_ONLY}))
    p.add_argument("--all", action="store_true", help="run every workload")
    p.add_argument("--quick", action="store_true", help="small sizes, few repetitions (CI smoke run)")
    p.add_argument("--json", metavar="PATH", help="write all results as JSON to PATH")
    p.add_argument("--plot", metavar="DIR", help="write one PNG per workload into DIR (needs matplotlib)")
    p.add_argument("--systems", metavar="A,B", help="only run these systems (others shown as skipped)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="limit BLAS/OpenMP/Numba/XLA/torch threads to N (set before any of them is imported)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    ids = list(WORKLOADS) if args.all else [w.upper() for w in args.workloads]
    modules = {**WORKLOADS, **NAMED_ONLY}
    bad = [w for w in ids if w not in modules]
    if not ids or bad:
        p.print_usage(sys.stderr)
        print(f"unknown or no workloads: {bad or '(none)'}; choose from {' '.join(modules)} or --all "
              f"(all but {' '.join(NAMED_ONLY)})",
              file=sys.stderr)
        return 2
    from .common import set_thread_env

    set_thread_env(args.threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from .harness import Settings, format_table, error_message
    from .machine import format_machine, load_average, machine_info

    settings = Settings.make(args.quick, args.systems.split(",") if args.systems else None)
    settings.verbose = not args.quiet
    command = "python -m bench " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    info = machine_info()
    print(f"$ {command}")
    print(format_machine(info))
    print()
    report = {"command": command, "quick": args.quick, "machine": info, "workloads": {},
              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    results = []
    for wid in ids:
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(modules[wid])
            res = mod.run(settings)
        except Exception as e:                                   # noqa: BLE001
            import traceback
            traceback.print_exc()
            print(f"## {wid}: harness error: {error_message(e)}\n", flush=True)
            report["workloads"][wid] = {"id": wid, "error": error_message(e), "tables": []}
            continue
        res.seconds = time.perf_counter() - t0
        res.notes.append(f"load average after the workload (1/5/15 min): {load_average()}")
        results.append(res)
        print(f"## {wid} — {res.title}  ({res.seconds:.1f} s)")
        for n in res.notes:
            print(f"  {n}")
        for t in res.tables:
            print(format_table(t))
            print()
        sys.stdout.flush()
        report["workloads"][wid] = res.as_dict()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=_json_default)
        print(f"wrote {args.json}")
    if args.plot:
        try:
            from .plot import plot_workloads
            for path in plot_workloads(results, args.plot, info):
                print(f"wrote {path}")
        except Exception as e:                                   # noqa: BLE001
            print(f"plotting failed: {error_message(e)}")
    return 0


def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    if isinstance(o, set):
        return sorted(o)
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
