"""Run one (system, variant) of a workload in a fresh subprocess.

Peak resident memory can only be compared between fresh processes, so W4 and
W6 run every variant in its own ``python -m bench.subproc`` child, plus one
*baseline* child per system that only imports the system and holds the
parameters and the input. W2 uses the same children to time each system
with no other library's threads in the process. Protocol (lines starting with ``@@BENCH `` on the
child's stdout, JSON payloads):

1. child: imports, builds the data, builds the step and runs it once (timed:
   first call), writes the values to check to ``OUTDIR/check.npz`` and sends
   ``check``;
2. parent: compares them with the reference and answers ``GO`` or ``STOP``
   on the child's stdin (so nothing is timed before the check);
3. child (on GO): resets the kernel's peak-RSS counter, times the steps,
   sends ``result`` with times and memory figures.

Memory figures (bytes): ``peak_rss`` = the process's lifetime peak (VmHWM /
ru_maxrss, includes imports and compilation); ``step_peak`` = the peak during
the timed steps (VmHWM after resetting it through ``/proc/self/clear_refs``);
``rss_before_steps`` = resident memory just before the timed steps.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import traceback

__all__ = ["run_variant", "baseline_ok", "child_main", "read_status_bytes"]

TAG = "@@BENCH "


def read_status_bytes(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status (e.g. "VmHWM", "VmRSS") in bytes, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _peak_rss() -> int:
    # ru_maxrss is kept across execve (it can report the parent's size); VmHWM is per address space.
    hwm = read_status_bytes("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _send(kind: str, **payload) -> None:
    if isinstance(payload.get("message"), str):
        payload["message"] = " ".join(payload["message"].split())[:400]
    print(TAG + json.dumps({"kind": kind, **payload}, default=str), flush=True)


def child_main(argv: list[str]) -> int:
    """Child entry: ``python -m bench.subproc MODULE SYSTEM VARIANT CFG_JSON OUTDIR``.

    ``MODULE.child_setup(system, variant, cfg)`` must return a dict with
    ``step`` (zero-argument callable running one training step and returning
    its output; None for the baseline), ``check`` (output -> dict of NumPy
    arrays to compare), ``hold`` (anything to keep alive), optional
    ``planned_peak`` (bytes, or any JSON value), ``reps`` (number of timed
    samples), ``before_steps`` (zero-argument callable run after the check,
    right before ``rss_before_steps`` is read), ``warmup`` (untimed steps
    after ``before_steps``, default 0) and ``number`` (steps per timed
    sample, default 1; a sample's time is per step).
    """
    module, system, variant, cfg_json, outdir = argv
    cfg = json.loads(cfg_json)
    try:
        mod = importlib.import_module(module)
        setup = mod.child_setup(system, variant, cfg)
    except ImportError as e:
        _send("missing", message=f"{type(e).__name__}: {e}")
        return 0
    except Exception as e:                                       # noqa: BLE001
        _send("error", message=f"{type(e).__name__}: {e}", tb=traceback.format_exc(limit=4))
        return 0
    if setup.get("step") is None:                                # baseline
        _send("result", peak_rss=_peak_rss(), rss=read_status_bytes("VmRSS"))
        return 0
    step, check = setup["step"], setup["check"]
    try:
        t0 = time.perf_counter()
        out = step()
        first = time.perf_counter() - t0
        planned = setup.get("planned_peak")
        if callable(planned):
            planned = planned()
        import numpy as np
        np.savez(os.path.join(outdir, "check.npz"), **check(out))
        del out
    except Exception as e:                                       # noqa: BLE001
        _send("error", message=f"{type(e).__name__}: {e}", tb=traceback.format_exc(limit=4))
        return 0
    _send("check", first_call=first, planned_peak=planned, peak_rss_first=_peak_rss())
    answer = sys.stdin.readline().strip()
    if answer != "GO":
        return 0
    before = setup.get("before_steps")
    if before is not None:  # optional: e.g. drop caches, gc, malloc_trim (W6's step peak)
        before()
    for _ in range(int(setup.get("warmup", 0))):  # optional: short steps (W2) settle caches and thread pools
        step()
    number = max(1, int(setup.get("number", 1)))
    rss_before = read_status_bytes("VmRSS")
    reset = _reset_peak()
    times = []
    for _ in range(int(setup.get("reps", 5))):
        t0 = time.perf_counter()
        for _ in range(number - 1):
            step()
        out = step()
        times.append((time.perf_counter() - t0) / number)
        del out
    _send("result", times=times, median=statistics.median(times), first_call=first,
          planned_peak=planned,
          step_peak=read_status_bytes("VmHWM") if reset else None, rss_before_steps=rss_before)
    return 0


#: Seconds `run_variant` waits before starting a child (full runs / --quick).
SETTLE_SECONDS = 1.0
SETTLE_SECONDS_QUICK = 0.05


def run_variant(module: str, system: str, variant: str, cfg: dict, compare, timeout: float) -> dict:
    """Run one variant in a fresh child and return its report.

    Args:
        module: workload module defining ``child_setup``.
        system, variant: passed to ``child_setup``; variant "baseline" only
            holds parameters and input.
        cfg: JSON-serializable configuration (sizes, repetitions).
        compare: ``compare(dict_of_arrays) -> (ok, message)``; None skips the check.
        timeout: seconds for the whole child.

    Returns:
        dict with ``status`` ("ok", "WRONG", "missing", "error"), ``message``
        and the child's figures (see the module docstring).
    """
    import tempfile
    # Let the machine settle first: the previous child's and this process's library thread pools (OpenMP,
    # OpenBLAS, XLA) spin on after their last call. Without the pause about a third of W2's fresh
    # processes ran with the second core taken (every system, 1.5-2x slower; symgraph 1.63 ms
    # instead of 0.76 ms); with it, 3 of 3 processes per system agreed within 2%.
    time.sleep(SETTLE_SECONDS_QUICK if cfg.get("quick") else SETTLE_SECONDS)
    with tempfile.TemporaryDirectory(prefix="bench-") as outdir:
        cmd = [sys.executable, "-m", "bench.subproc", module, system, variant, json.dumps(cfg), outdir]
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        errf = open(os.path.join(outdir, "stderr.txt"), "w+")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf,
                                text=True, env=env)
        deadline = time.monotonic() + timeout
        report: dict = {"status": "error", "message": "child ended without a result"}
        try:
            import selectors
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"child exceeded {timeout:.0f} s")
                if not sel.select(timeout=remaining):
                    continue
                line = proc.stdout.readline()
                if not line:
                    break
                if not line.startswith(TAG):
                    continue
                msg = json.loads(line[len(TAG):])
                kind = msg.pop("kind")
                if kind in ("missing", "error"):
                    report = {"status": kind, **msg}
                    break
                if kind == "check":
                    report.update(msg)
                    ok, text = True, ""
                    if compare is not None:
                        import numpy as np
                        with np.load(os.path.join(outdir, "check.npz")) as z:
                            ok, text = compare({k: z[k] for k in z.files})
                    if not ok:
                        report.update(status="WRONG", message=text)
                        proc.stdin.write("STOP\n")
                        proc.stdin.flush()
                        break
                    proc.stdin.write("GO\n")
                    proc.stdin.flush()
                if kind == "result":
                    report.update(msg)
                    # VmHWM only: ru_maxrss survives execve and would include the parent's size.
                    report["peak_rss"] = max(x for x in (report.get("peak_rss_first"), report.get("step_peak"),
                                                         report.get("peak_rss"))
                                             if x is not None)
                    report.update(status="ok", message="")
                    break
        except Exception as e:                                   # noqa: BLE001
            report = {"status": "error", "message": f"{type(e).__name__}: {e}"}
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            errf.seek(0)
            err = errf.read()
            errf.close()
        if report.get("status") == "error" and report.get("message") == "child ended without a result":
            tail = err.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            report["message"] = f"child died (exit {proc.returncode}): {tail[0][:300]}"
        return report


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))


def baseline_ok(module: str, system: str, cfg: dict, timeout: float, baselines: dict, row) -> bool:
    """Run `system`'s baseline child once (cached in `baselines`); False, with `row` marked, if it failed.

    A peer that is not installed is "missing"; any other failure, and any
    failure of symgraph's own baseline, is an "error" with the child's message.
    """
    if system not in baselines:
        baselines[system] = run_variant(module, system, "baseline", cfg, None, timeout)
    base = baselines[system]
    if base["status"] == "ok":
        return True
    row.status = "missing" if base["status"] == "missing" and system != "symgraph" else "error"
    row.message = base.get("message", "")
    return False
