"""Progress of a long compile: the stage it is in, on a terminal, and the seconds of every stage.

`sg.compile` runs a `CompileProgress` around each build: the stages (trace,
which differentiates too, as grad is a graph transformation run while
tracing; simplify, checkpoint, schedule; then the backend's: its setup, loop
bodies, fuse, LLVM IR, LLVM) call `stage(name)`, which costs a thread-local
look-up when no compile is running. A compile still running after `DELAY`
seconds (about two) shows a tqdm bar (tqdm is in the examples and test
extras) with the current stage, when standard error is a terminal and tqdm
is installed; otherwise nothing is shown. `SYMGRAPH_PROGRESS=0` never shows
it, `=1` shows it on any stream. Every compile records the seconds per stage
(`cf.stats["stage_seconds"]`), shown or not.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

__all__ = ["CompileProgress", "stage", "DELAY", "STAGES"]

#: Seconds a compile runs before the bar appears.
DELAY = 2.0
#: The stages in the order a compile runs them (the bar's steps).
STAGES = ("trace", "simplify", "checkpoint", "schedule", "backend", "loop bodies", "fuse", "LLVM IR", "LLVM")

_active = threading.local()


def stage(name: str) -> None:
    """Enter stage `name` of the compile running on this thread (nothing when none is)."""
    p = getattr(_active, "p", None)
    if p is not None:
        p.enter(name)


def _wanted(stream: Any) -> bool:
    env = os.environ.get("SYMGRAPH_PROGRESS", "")
    if env == "0":
        return False
    if env == "1":
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class CompileProgress:
    """One compile's stages: seconds per stage, and a bar on a terminal once it runs longer than `DELAY`.

    Use as a context manager on the thread that compiles; `stage(name)` (the module function) switches
    stages. A nested compile (a loop body compiled inside the program's) reports into the outer one.

    Args:
        name: the compiled function's name (the bar's label).
        stream: where the bar goes (default: standard error at entry).
        delay: seconds before the bar appears (default `DELAY`; 0: at once).
    """

    def __init__(self, name: str, stream: Any = None, delay: float | None = None) -> None:
        self.name = name
        self.stream = stream
        self.delay = DELAY if delay is None else delay
        self.seconds: dict[str, float] = {}
        self._stage: str | None = None
        self._t = self._start = 0.0
        self._bar: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._outer: CompileProgress | None = None
        self._done = False

    def __enter__(self) -> "CompileProgress":
        self._outer = getattr(_active, "p", None)
        if self._outer is not None:  # nested: the outer compile reports
            return self
        _active.p = self
        self._t = self._start = time.perf_counter()
        if self.stream is None:
            self.stream = sys.stderr
        if _wanted(self.stream):
            if self.delay <= 0:
                self._show()
            else:
                self._timer = threading.Timer(self.delay, self._show)
                self._timer.daemon = True
                self._timer.start()
        return self

    def enter(self, name: str) -> None:
        """Switch to stage `name` (the time since the last switch goes to the previous stage)."""
        now = time.perf_counter()
        with self._lock:
            if self._stage is not None:
                self.seconds[self._stage] = self.seconds.get(self._stage, 0.0) + now - self._t
            self._stage, self._t = name, now
            if self._bar is not None:
                self._update()

    def _show(self) -> None:
        try:
            from tqdm import tqdm
        except ImportError:
            return
        with self._lock:
            if self._done or self._bar is not None:
                return
            self._bar = tqdm(total=len(STAGES), desc=f"compile {self.name}", unit="stage", file=self.stream,
                             leave=False, bar_format="{desc}: {n_fmt}/{total_fmt} {bar} [{elapsed}]{postfix}")
            self._bar.start_t -= time.perf_counter() - self._start  # the elapsed time is the compile's
            self._update()

    def _update(self) -> None:  # under the lock
        st = self._stage or "start"
        n = STAGES.index(st) if st in STAGES else len(STAGES) if st == "done" else self._bar.n
        if n > self._bar.n:
            self._bar.update(n - self._bar.n)
        self._bar.set_postfix_str(st, refresh=True)

    def __exit__(self, *exc: Any) -> None:
        if self._outer is not None:
            return
        self.enter("done")
        _active.p = None
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._bar is not None:
                self._bar.close()
        self.seconds.pop("done", None)
