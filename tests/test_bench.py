"""Smoke test of the benchmark harness: ``python -m bench --all --quick --json PATH``.

No timing assertions: only that every workload reports, that the hand-written
NumPy system of each passes its correctness check, and that peers which are
not installed are listed as missing rather than dropped.

The default run smokes the workloads that take a few seconds each; W4 and W6
start two fresh processes per variant (about 40 s together on 2 cores) and run
with SYMGRAPH_LONG_TESTS=1, which runs ``--all``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALL_WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13"]
LONG = bool(os.environ.get("SYMGRAPH_LONG_TESTS"))
WORKLOADS = ALL_WORKLOADS if LONG else [w for w in ALL_WORKLOADS if w not in ("W4", "W6")]
# peers that the workloads list; each must appear in at least one table of the run
PEERS = {"jax", "torch", "autograd", "pytensor", "numba"}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    # --threads 1: one core per pytest worker; with OpenBLAS's threads competing with symgraph's pool (and
    # the other worker), W2's in-process NumPy step took ~180 ms instead of ~2 ms (22 -> 10 CPU-seconds)
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-m", "bench", *(["--all"] if LONG else WORKLOADS), "--quick", "--quiet",
                           "--threads", "1", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.exists(), proc.stdout[-3000:]
    data = json.loads(out.read_text())
    data["_stdout"] = proc.stdout
    return data


def _rows(workload: dict) -> list[dict]:
    return [r for t in workload["tables"] for r in t["rows"]]


def test_every_workload_reported(report):
    assert set(report["workloads"]) == set(WORKLOADS)
    for wid in WORKLOADS:
        w = report["workloads"][wid]
        assert "error" not in w, f"{wid}: {w.get('error')}"
        assert w["tables"], wid
        assert f"## {wid}" in report["_stdout"]


def test_numpy_row_passes_check(report):
    for wid in WORKLOADS:
        rows = [r for r in _rows(report["workloads"][wid]) if r["system"] == "numpy"]
        assert rows, f"{wid}: no numpy row"
        for r in rows:
            assert r["status"] == "ok" and r["check_passed"], f"{wid}: numpy row {r}"


def test_timings_present_for_numpy(report):
    for wid in WORKLOADS:
        for r in _rows(report["workloads"][wid]):
            if r["system"] == "numpy":
                assert r["median"] is not None and r["min"] <= r["median"] <= r["max"]
                assert r["first_call"] is not None


def test_missing_peers_listed_not_dropped(report):
    listed = {r["system"].split("+")[0].split("-")[0].split(".")[0]
              for w in report["workloads"].values() for r in _rows(w)}
    assert {"symgraph", "numpy"} <= listed
    for peer in PEERS:
        assert peer in listed, f"{peer} was dropped from every table"
        if importlib.util.find_spec(peer) is None:
            rows = [r for w in report["workloads"].values() for r in _rows(w)
                    if r["system"].split("+")[0].split("-")[0].split(".")[0] == peer]
            assert rows and all(r["status"] == "missing" for r in rows), peer
            assert all(r["message"] for r in rows), peer


def test_every_row_has_a_status(report):
    for w in report["workloads"].values():
        for r in _rows(w):
            assert r["status"] in {"ok", "WRONG", "missing", "error", "skipped"}
            if r["status"] not in ("ok",):
                assert r["message"], r


def test_machine_facts(report):
    m = report["machine"]
    assert m["cores"] >= 1
    assert "numpy" in m["versions"] and "llvmlite" in m["versions"]
    assert "--quick" in report["command"]
