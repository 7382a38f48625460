"""The documentation site (docs/build_api.py, docs/guide.py): every public name has a docstring, every docs page
is in the user guide, the guide's link check finds broken links, and the whole build is clean."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "docs"))
import build_api  # noqa: E402
import guide  # noqa: E402

HAVE_PDOC = importlib.util.find_spec("pdoc") is not None


def test_every_public_name_has_a_docstring():
    assert build_api.missing_docstrings() == []


def test_the_check_finds_a_missing_docstring(monkeypatch):
    import symgraph.tree as tree

    def undocumented(x):
        return x

    monkeypatch.setattr(tree, "tree_map", undocumented)
    assert build_api.missing_docstrings(["symgraph.tree"]) == ["symgraph.tree.tree_map"]


def test_docs_page_lists_every_module():
    text = open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8").read()
    for m in build_api.MODULES:
        assert f"| `{m}` |" in text, m


def test_every_docs_page_is_in_the_guide():
    assert guide.unlisted_pages() == []
    assert all(os.path.exists(os.path.join(ROOT, src)) for src, _ in guide.GUIDE)


@pytest.mark.skipif(not HAVE_PDOC, reason="pdoc not installed (pip install -e '.[docs]')")
def test_the_guide_check_finds_broken_links(tmp_path, monkeypatch):
    (tmp_path / "docs" / "img").mkdir(parents=True)
    (tmp_path / "docs" / "img" / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "README.md").write_text("# Home\n\nSee [a](docs/a.md) and [a's part](docs/a.md#part-one).\n")
    (tmp_path / "docs" / "a.md").write_text(
        "# A page\n\n## Part one\n\n[gone](b.md), [no such part](a.md#part-two), [here](#part-one), "
        "[source](../setup.cfg), [web](https://example.org)\n\n![a picture](img/p.png)\n")
    (tmp_path / "docs" / "left-out.md").write_text("# Left out\n")
    (tmp_path / "setup.cfg").write_text("")
    monkeypatch.setattr(guide, "ROOT", tmp_path)
    monkeypatch.setattr(guide, "DOCS", tmp_path / "docs")
    monkeypatch.setattr(guide, "GUIDE", [("README.md", "Home"), ("docs/a.md", None)])
    out = tmp_path / "site"
    problems = guide.build_guide(out, [("symgraph.grad", "api/symgraph.html#grad")])
    assert sorted(problems) == sorted([
        "docs/left-out.md is not listed in docs/guide.py GUIDE (the site would not link to it)",
        "docs/a.md: link to a missing file b.md",
        "docs/a.md: link to a missing section docs/a.md#part-two",
        "docs/a.md: link to ../setup.cfg, which is not part of the site (a guide page or an image)",
    ]), problems
    home = (out / "index.html").read_text(encoding="utf-8")
    assert 'href="a.html"' in home and 'href="a.html#part-one"' in home  # links between pages: .md -> .html
    page = (out / "a.html").read_text(encoding="utf-8")
    assert 'src="img/p.png"' in page and (out / "img" / "p.png").exists()
    assert 'href="index.html">← Home' in page and 'href="https://example.org"' in page
    index = (out / "search-index.js").read_text(encoding="utf-8")
    assert '"title": "Part one"' in index and '"symgraph.grad"' in index


@pytest.mark.skipif(not HAVE_PDOC, reason="pdoc not installed (pip install -e '.[docs]')")
def test_site_builds_without_warnings(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "build_api.py"), "-o", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    api = tmp_path / "api"
    index = (api / "symgraph.html").read_text(encoding="utf-8")
    assert "search.js" in index or 'id="search' in index
    for page in ("symgraph/debugging.html", "symgraph/viz.html", "codegen.html", "symgraph/numpy.html"):
        assert (api / page).exists(), page
    assert "FloatingPointError" in (api / "symgraph" / "errors.html").read_text(encoding="utf-8")
    # the reference links back to the guide, from every depth
    assert 'href="../index.html">&larr;&nbsp;User guide' in index
    assert 'href="../../index.html">&larr;&nbsp;User guide' in (api / "symgraph" / "viz.html").read_text(
        encoding="utf-8")
    assert 'href="../index.html">&larr;&nbsp;User guide' in (api / "index.html").read_text(encoding="utf-8")
    # the guide: every page, each with the whole navigation and a link to the reference
    home = (tmp_path / "index.html").read_text(encoding="utf-8")
    for src, _ in guide.GUIDE:
        name = guide.page_name(src)
        assert (tmp_path / name).exists(), name
        assert f'href="{name}"' in home, name
    assert 'href="api/index.html"' in home and 'href="compile.html"' in home  # README's docs/compile.md link
    assert "docs/compile.md" not in home.split("<main>")[1].split('href="')[1]
    page = (tmp_path / "control-flow.html").read_text(encoding="utf-8")
    assert '<li class="current"><a href="control-flow.html">' in page and 'class="codehilite"' in page
    assert (tmp_path / "img" / "train_mlp_digits.png").exists()
    index = (tmp_path / "search-index.js").read_text(encoding="utf-8")
    assert '"url": "api/symgraph.html#grad"' in index and '"url": "compile.html#options"' in index


_DOC_REF = re.compile(r'docs/([A-Za-z0-9_-]+\.md)(?:,? \(?"([^"\n]+)"\)?)?')


def _source_doc_refs():
    """Every `docs/PAGE.md` (with its `"Section"` when one follows) named in the package's docstrings and
    messages, as (source file, page, section or None)."""
    for pkg in ("symgraph", "codegen"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    text = open(path, encoding="utf-8").read()
                    for m in _DOC_REF.finditer(text):
                        yield os.path.relpath(path, ROOT), m.group(1), m.group(2)


def test_docs_pages_and_sections_named_in_the_source_exist():
    refs = list(_source_doc_refs())
    assert len(refs) > 40  # the scan sees the references (docstrings and error messages name pages)
    bad = []
    for src, page, section in refs:
        path = os.path.join(ROOT, "docs", page)
        if not os.path.exists(path):
            bad.append(f"{src}: docs/{page} does not exist")
            continue
        if section is not None:
            # a section is a heading or a paragraph's bold lead ("**Threads.** ..."), backticks left out
            text = open(path, encoding="utf-8").read()
            heads = re.findall(r"^#+ (.*)$", text, re.M) + re.findall(r"^\*\*(.+?)\*\*", text, re.M)
            want = section.strip().lower().rstrip(".")
            if not any(h.replace("`", "").strip().lower().startswith(want) for h in heads):
                bad.append(f"{src}: docs/{page} has no section {section!r}")
    assert bad == []
