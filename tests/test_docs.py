"""Every Python block of every docs/ page runs as written, from the repository root; so do the README's.

The blocks of a page run in order in one process (later blocks continue
earlier ones, as a reader would run them). A page must not write into the
repository (pictures go to a temporary directory).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(p for p in os.listdir(DOCS) if p.endswith(".md"))


def _blocks(page: str) -> list[str]:
    with open(os.path.join(DOCS, page)) as fh:
        return re.findall(r"^```python\n(.*?)^```", fh.read(), re.S | re.M)


def _snapshot() -> dict[str, float]:
    return {os.path.join(d, f): os.path.getmtime(os.path.join(d, f))
            for d in (ROOT, DOCS, os.path.join(DOCS, "img")) for f in os.listdir(d)
            if os.path.isfile(os.path.join(d, f))}


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p)])
def test_docs_page_runs(page):
    code = "\n".join(f"print('### block {i}', flush=True)\n{b}" for i, b in enumerate(_blocks(page)))
    before = _snapshot()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SYMGRAPH_DUMP", None)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    started = [line for line in p.stdout.splitlines() if line.startswith("### block")]
    assert p.returncode == 0, f"{page}: {started[-1] if started else 'before block 0'} failed:\n{p.stderr[-3000:]}"
    assert len(started) == len(_blocks(page))
    after = _snapshot()
    changed = sorted(f for f in after if before.get(f) != after[f])
    assert not changed, f"{page} wrote into the repository: {changed}"


def test_the_fixed_pages_are_covered():
    """The pages a new-user trial found broken have Python blocks this test runs."""
    for page in ("compile.md", "vmath.md", "reliability.md", "visualization.md", "tracing.md"):
        assert _blocks(page), page


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not installed (the README renders an SVG)")
def test_readme_blocks_run_or_say_they_are_fragments(tmp_path):
    """The README's Python blocks run in order as a reader would paste them, in a scratch directory (they
    write grad.svg and grad.html), except the ones whose first line says they are a fragment."""
    with open(os.path.join(ROOT, "README.md")) as fh:
        blocks = re.findall(r"^```python\n(.*?)^```", fh.read(), re.S | re.M)
    run = [b for b in blocks if not b.startswith("# a fragment")]
    assert len(blocks) - len(run) <= 2 and len(run) >= 4
    code = "\n".join(f"print('### block {i}', flush=True)\n{b}" for i, b in enumerate(run))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SYMGRAPH_DUMP", None)
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    started = [line for line in p.stdout.splitlines() if line.startswith("### block")]
    assert p.returncode == 0, f"README: {started[-1] if started else 'before block 0'} failed:\n{p.stderr[-3000:]}"
    assert (tmp_path / "grad.svg").exists() and (tmp_path / "grad.html").exists()
