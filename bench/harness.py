"""Timing, correctness checking and reporting shared by all workloads.

A workload defines *cases*. A case has inputs, a NumPy reference and a list of
`System` s. For each case the harness:

1. prepares every system (imports, data conversion; not timed). An
   ``ImportError`` of a peer marks it "missing" (with the message); any other
   exception marks it "error: <message>". Nothing is dropped.
2. builds it and makes the first call, timed together as the *first-call*
   time (tracing + compilation for the compiling systems), under a time limit.
3. checks the first call's output against the reference; a mismatch is
   printed and the system is marked "WRONG" and not timed.
4. times the systems that passed, round-robin (one repetition of each system
   in turn, so drift and background load hit all systems alike), after one
   warm-up call each. Short calls are repeated ``number`` times inside a
   repetition; the number of repetitions is at least ``min_reps`` and grows
   for short calls up to a time budget.

All times are seconds (``time.perf_counter``). Ratios are
``peer_median / symgraph_median`` (> 1: symgraph is faster).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import statistics
import sys
import time
import traceback
from typing import Any, Callable, Iterable, Sequence

import numpy as np

__all__ = [
    "Settings", "System", "Row", "Table", "WorkloadResult", "run_case", "to_numpy", "flatten",
    "compare", "time_limit", "format_seconds", "format_table", "fmt_bytes", "error_message",
]

BASE_SYSTEM = "symgraph"


@dataclasses.dataclass
class Settings:
    """Run settings shared by all workloads.

    Attributes:
        quick: small sizes and few repetitions (the CI smoke run).
        min_reps: minimum number of timed repetitions per system.
        max_reps: maximum number of timed repetitions per system.
        budget: target seconds of timed repetitions per system and case.
        min_rep_seconds: a repetition repeats a short call until it lasts at
            least this long (seconds), to keep timer overhead negligible.
        first_call_limit: seconds allowed for build + first call before the
            system is reported as an error (timeout).
        systems: if not None, only systems whose name is in this set run
            (the others are reported as "skipped").
        verbose: print progress to stderr.
    """

    quick: bool = False
    min_reps: int = 7
    max_reps: int = 200
    budget: float = 2.0
    min_rep_seconds: float = 2e-3
    first_call_limit: float = 300.0
    systems: set | None = None
    verbose: bool = True

    @classmethod
    def make(cls, quick: bool, systems: Iterable[str] | None = None) -> "Settings":
        """Settings for a full or a ``--quick`` run."""
        sel = set(systems) if systems else None
        if quick:
            return cls(quick=True, min_reps=5, max_reps=30, budget=0.05, min_rep_seconds=5e-4,
                       first_call_limit=60.0, systems=sel)
        return cls(systems=sel)


@dataclasses.dataclass
class System:
    """One implementation of a case.

    Attributes:
        name: row label, e.g. "jax" or "numba-parallel".
        prepare: ``prepare(*inputs) -> build``; does imports and data
            conversion (not timed). ``build() -> step`` compiles (timed with
            the first call); ``step() -> output`` runs one call and returns
            its result (blocking until it is computed).
        peer: True for peers: an ImportError in ``prepare`` means "missing".
            For symgraph itself every exception is an "error".
        note: free text shown under the table.
    """

    name: str
    prepare: Callable[..., Callable[[], Callable[[], Any]]]
    peer: bool = True
    note: str = ""


@dataclasses.dataclass
class Row:
    """Result of one system on one case (times in seconds)."""

    system: str
    status: str = "ok"          # ok | WRONG | missing | error | skipped
    message: str = ""
    median: float | None = None
    min: float | None = None
    max: float | None = None
    first_call: float | None = None
    reps: int = 0
    number: int = 0
    ratio: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    extras: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready dictionary."""
        d = dataclasses.asdict(self)
        d["check_passed"] = self.status == "ok"
        return d


@dataclasses.dataclass
class Table:
    """The rows of one case (or of several cases merged, see `key`)."""

    name: str
    rows: list[Row]
    extra_columns: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    key: str | None = None       # extra column that distinguishes merged cases (e.g. "n")
    timed: bool = True           # False: only the extra columns are meaningful

    def as_dict(self) -> dict:
        """JSON-ready dictionary."""
        return {"name": self.name, "key": self.key, "extra_columns": self.extra_columns,
                "notes": self.notes, "rows": [r.as_dict() for r in self.rows]}


@dataclasses.dataclass
class WorkloadResult:
    """All tables of a workload."""

    wid: str
    title: str
    tables: list[Table]
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        """JSON-ready dictionary."""
        return {"id": self.wid, "title": self.title, "notes": self.notes, "seconds": self.seconds,
                "tables": [t.as_dict() for t in self.tables]}


# --------------------------------------------------------------------------- utilities

def log(msg: str, settings: Settings | None = None) -> None:
    """Print a progress line to stderr."""
    if settings is None or settings.verbose:
        print(msg, file=sys.stderr, flush=True)


def error_message(exc: BaseException, limit: int = 300) -> str:
    """One-line ``Type: message`` of an exception, truncated to `limit` characters."""
    msg = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


class FirstCallTimeout(Exception):
    """Build + first call exceeded `Settings.first_call_limit`."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise `FirstCallTimeout` in the main thread after `seconds` (SIGALRM).

    A no-op where SIGALRM is unavailable or outside the main thread.
    """
    if seconds is None or not hasattr(signal, "setitimer"):
        yield
        return

    def handler(signum, frame):
        raise FirstCallTimeout(f"no result within {seconds:.0f} s")

    try:
        old = signal.signal(signal.SIGALRM, handler)
    except ValueError:          # not in the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def to_numpy(obj: Any) -> Any:
    """Convert a result pytree (NumPy, JAX, torch, PyTensor, Python numbers) to NumPy."""
    if isinstance(obj, dict):
        return {k: to_numpy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_numpy(v) for v in obj) if not hasattr(obj, "_fields") else tuple(to_numpy(v) for v in obj)
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):          # torch.Tensor
        return obj.detach().cpu().numpy()
    return np.asarray(obj)


def flatten(obj: Any) -> list[np.ndarray]:
    """Leaves of a pytree in a canonical order (dicts by sorted key)."""
    if isinstance(obj, dict):
        return [leaf for k in sorted(obj) for leaf in flatten(obj[k])]
    if isinstance(obj, (list, tuple)):
        return [leaf for v in obj for leaf in flatten(v)]
    return [np.asarray(obj)]


def compare(out: Any, ref: Any, rtol: float, atol: float) -> tuple[bool, str, float, float]:
    """Compare a result pytree with the reference.

    Returns:
        (ok, message, max_abs_err, max_rel_err). Relative error is
        ``|out - ref| / max(|ref|, atol)`` elementwise.
    """
    a, b = flatten(to_numpy(out)), flatten(ref)
    if len(a) != len(b):
        return False, f"{len(a)} output leaves, expected {len(b)}", math.inf, math.inf
    max_abs = max_rel = 0.0
    bad = []
    for i, (x, y) in enumerate(zip(a, b)):
        dt = np.complex128 if np.iscomplexobj(x) or np.iscomplexobj(y) else np.float64  # complex: both parts
        x = np.asarray(x, dtype=dt)
        y = np.asarray(y, dtype=dt)
        if x.size == 1 and y.size == 1:
            x, y = x.reshape(()), y.reshape(())
        if x.shape != y.shape:
            bad.append(f"leaf {i}: shape {x.shape}, expected {y.shape}")
            max_abs = max_rel = math.inf
            continue
        if x.size == 0:
            continue
        diff = np.abs(x - y)
        diff = np.where(np.isnan(x) & np.isnan(y), 0.0, diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
        ea = float(diff.max())
        er = float((diff / np.maximum(np.abs(y), atol)).max())
        max_abs, max_rel = max(max_abs, ea), max(max_rel, er)
        if not np.all(diff <= atol + rtol * np.abs(y)):
            bad.append(f"leaf {i} {y.shape}: max abs err {ea:.3g}, max rel err {er:.3g}")
    if bad:
        return False, "; ".join(bad[:4]) + (" ..." if len(bad) > 4 else ""), max_abs, max_rel
    return True, "", max_abs, max_rel


# --------------------------------------------------------------------------- running a case

def run_case(settings: Settings, name: str, inputs: Sequence[Any], reference: Any,
             systems: Sequence[System], rtol: float = 1e-7, atol: float = 1e-12,
             extra: Callable[[Row, Callable[[], Any] | None], dict] | None = None,
             extra_columns: Sequence[str] = (), notes: Sequence[str] = (),
             timed: bool = True,
             check: Callable[[Any, Any], tuple[bool, str, float, float]] | None = None) -> Table:
    """Prepare, check and time every system on one case.

    Args:
        settings: run settings.
        name: table title, e.g. "n=1000000".
        inputs: positional inputs passed to every ``System.prepare``.
        reference: the expected output pytree (NumPy), or a zero-argument
            callable computing it (called once, before any system runs).
        systems: the implementations; all appear in the table.
        rtol, atol: tolerances of the correctness check.
        extra: ``extra(row, step) -> dict`` adds workload-specific columns
            after timing (``step`` is None for systems that did not run).
        extra_columns: names of the extra columns, in print order.
        notes: lines printed under the table.
        timed: False to only build, check and first-call (no repetitions).
        check: ``check(out, reference) -> (ok, message, max_abs_err,
            max_rel_err)`` replaces the rtol/atol comparison (e.g. ADBench's
            relative error measure, `bench.field.rho_compare`).

    Returns:
        The table; rows in the order of `systems`.
    """
    if callable(reference):
        reference = reference()
    rows: dict[str, Row] = {}
    steps: dict[str, Callable[[], Any]] = {}
    all_notes = list(notes)
    for s in systems:
        row = Row(s.name)
        rows[s.name] = row
        if s.note:
            all_notes.append(f"{s.name}: {s.note}")
        if settings.systems is not None and s.name not in settings.systems:
            row.status, row.message = "skipped", "not selected (--systems)"
            continue
        try:
            build = s.prepare(*inputs)
        except ImportError as e:
            row.status = "missing" if s.peer else "error"
            row.message = error_message(e)
            continue
        except Exception as e:                                   # noqa: BLE001
            row.status, row.message = "error", error_message(e)
            _debug(e, settings)
            continue
        try:
            with time_limit(settings.first_call_limit):
                t0 = time.perf_counter()
                step = build()
                out = step()
                row.first_call = time.perf_counter() - t0
        except Exception as e:                                   # noqa: BLE001
            row.status, row.message = "error", error_message(e)
            _debug(e, settings)
            continue
        try:
            ok, msg, ea, er = (check(out, reference) if check is not None
                               else compare(out, reference, rtol, atol))
        except Exception as e:                                   # noqa: BLE001
            ok, msg, ea, er = False, "output not comparable: " + error_message(e), None, None
        row.max_abs_err, row.max_rel_err = ea, er
        if not ok:
            row.status, row.message = "WRONG", msg
            print(f"  [{name}] {s.name}: WRONG: {msg}", flush=True)
            continue
        steps[s.name] = step
        log(f"  [{name}] {s.name}: first call {format_seconds(row.first_call)}, check ok "
            f"(max rel err {er:.2g})", settings)
    if timed and steps:
        _time_round_robin(settings, steps, rows)
    base = rows.get(BASE_SYSTEM)
    for row in rows.values():
        if base is not None and base.status == "ok" and base.median and row.median is not None:
            row.ratio = row.median / base.median
        if extra is not None:
            try:
                row.extras.update(extra(row, steps.get(row.system)))
            except Exception as e:                               # noqa: BLE001
                row.extras["extra_error"] = error_message(e)
                _debug(e, settings)
    return Table(name=name, rows=list(rows.values()), extra_columns=list(extra_columns),
                 notes=all_notes, timed=timed)


def _debug(exc: BaseException, settings: Settings) -> None:
    if settings.verbose and not settings.quick:
        tb = traceback.extract_tb(exc.__traceback__)[-3:]
        for fr in tb:
            log(f"      at {fr.filename}:{fr.lineno} in {fr.name}", settings)


def _time_round_robin(settings: Settings, steps: dict[str, Callable[[], Any]], rows: dict[str, Row]) -> None:
    number, reps, samples = {}, {}, {}
    for n, step in steps.items():                 # warm-up call, also an estimate
        t0 = time.perf_counter()
        step()
        est = max(time.perf_counter() - t0, 1e-9)
        number[n] = max(1, int(math.ceil(settings.min_rep_seconds / est))) if est < settings.min_rep_seconds else 1
        per_rep = est * number[n]
        reps[n] = int(min(settings.max_reps, max(settings.min_reps, settings.budget / per_rep)))
        samples[n] = []
    pending = list(steps)
    while pending:
        for n in list(pending):
            step, k = steps[n], number[n]
            t0 = time.perf_counter()
            for _ in range(k):
                step()
            samples[n].append((time.perf_counter() - t0) / k)
            if len(samples[n]) >= reps[n]:
                pending.remove(n)
    for n, xs in samples.items():
        r = rows[n]
        r.median, r.min, r.max = statistics.median(xs), min(xs), max(xs)
        r.reps, r.number = len(xs), number[n]


# --------------------------------------------------------------------------- formatting

def format_seconds(t: float | None) -> str:
    """A time in seconds with an adapted unit (ns, us, ms, s)."""
    if t is None:
        return "-"
    if t < 1e-6:
        return f"{t * 1e9:.0f} ns"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.3f} s"


def fmt_bytes(b: float | None) -> str:
    """A byte count in MiB (or KiB below 1 MiB)."""
    if b is None:
        return "-"
    if abs(b) < 1 << 20:
        return f"{b / 1024:.1f} KiB"
    return f"{b / (1 << 20):.1f} MiB"


def _fmt_extra(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:.4g}"
    return str(v)


def format_table(table: Table) -> str:
    """Render a table as fixed-width text (one line per system)."""
    head = ["system"]
    if table.key:
        head = [table.key, "system"]
    if table.timed:
        head += ["median", "min", "max", "first call", "ratio"]
    else:
        head += ["first call"]
    head += [c for c in table.extra_columns if c != table.key] + ["status"]
    lines = []
    for r in table.rows:
        cells = [r.system]
        if table.key:
            cells = [_fmt_extra(r.extras.get(table.key)), r.system]
        if table.timed:
            cells += [format_seconds(r.median), format_seconds(r.min), format_seconds(r.max),
                      format_seconds(r.first_call), "-" if r.ratio is None else f"{r.ratio:.2f}"]
        else:
            cells += [format_seconds(r.first_call)]
        cells += [_fmt_extra(r.extras.get(c)) for c in table.extra_columns if c != table.key]
        status = r.status if r.status == "ok" else f"{r.status}: {r.message}" if r.message else r.status
        if r.extras.get("extra_error"):
            status += f" (extra: {r.extras['extra_error']})"
        cells.append(status)
        lines.append(cells)
    widths = [max(len(h), *(len(c) for c in col)) if lines else len(h)
              for h, col in zip(head, zip(*lines) if lines else [[]] * len(head))]
    widths[-1] = len(head[-1])                    # status: no padding
    out = [f"### {table.name}"]
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    for cells in lines:
        out.append("  ".join(c.ljust(w) if i < len(cells) - 1 else c for i, (c, w) in enumerate(zip(cells, widths))))
    for n in table.notes:
        out.append(f"  note: {n}")
    return "\n".join(out)


def merge_tables(name: str, tables: Sequence[Table], key: str, notes: Sequence[str] = ()) -> Table:
    """Merge per-case tables into one long table with a `key` column."""
    rows, extra, all_notes = [], [key], list(notes)
    for t in tables:
        rows.extend(t.rows)
        for c in t.extra_columns:
            if c not in extra:
                extra.append(c)
        for n in t.notes:
            if n not in all_notes:
                all_notes.append(n)
    return Table(name=name, rows=rows, extra_columns=extra, notes=all_notes, key=key,
                 timed=all(t.timed for t in tables))
