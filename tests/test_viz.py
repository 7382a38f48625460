"""Visualization: text dumps, DOT (parsed and rendered by the real Graphviz), summaries, SYMGRAPH_DUMP."""

from __future__ import annotations

import functools
import inspect
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import symgraph as sg
from symgraph import lax as L
from symgraph import viz
from symgraph.errors import SymgraphError
from symgraph.ir import Builder, Graph, meta, role
from symgraph.tracing import make_input

HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` not installed (Debian package graphviz)")


def seed(x, y):
    b = (x + y) * x
    return np.sum(b)


SEED_LINE = inspect.getsourcelines(seed)[1] + 1  # the line of b = (x + y) * x


def chain(x, n=6):
    for _ in range(n):
        x = np.tanh(x) * 1.5
    return np.sum(x)


# ----- helpers -----


@functools.lru_cache(maxsize=16)
def parse_dot(src: str):
    """Parse DOT with pydot (slow: cached per source text).

    pydot's parser calls pyparsing names that pyparsing deprecates; those warnings are pydot's, not ours,
    so they are silenced here rather than shown in every test run's summary.
    """
    import warnings

    import pydot

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        (g,) = pydot.graph_from_dot_data(src)
    return g


def dot_nodes(src: str) -> dict[str, dict]:
    """Name -> attributes (quotes stripped) of every node statement, over all subgraphs."""
    g = parse_dot(src)
    out: dict[str, dict] = {}
    stack = [g]
    while stack:
        sub = stack.pop()
        for n in sub.get_nodes():
            name = n.get_name().strip('"')
            if name in ("node", "edge", "graph"):
                continue
            out.setdefault(name, {}).update({k: str(v).strip('"') for k, v in n.get_attributes().items()})
        stack.extend(sub.get_subgraphs())
    return out


def dot_edges(src: str) -> list[tuple[str, str]]:
    g = parse_dot(src)
    out = []
    stack = [g]
    while stack:
        sub = stack.pop()
        for e in sub.get_edges():
            out.append((str(e.get_source()).strip('"'), str(e.get_destination()).strip('"')))
        stack.extend(sub.get_subgraphs())
    return out


def role_of_class(attrs: dict) -> str | None:
    m = re.search(r"sg-role-(\S+)", attrs.get("class", ""))
    return m.group(1) if m else None


def graph_nodes(src: str) -> dict[str, dict]:
    """Drawn graph nodes (not legend, not reference boxes)."""
    return {k: a for k, a in dot_nodes(src).items() if "sg-node" in a.get("class", "")}


def dot_ok(src: str) -> None:
    r = subprocess.run(["dot", "-Tsvg"], input=src.encode(), check=False, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    ET.fromstring(r.stdout)


def hand_graph() -> Graph:
    """A graph with a known number of nodes per role: 4 forward, 3 recomputed, 5 backward."""
    with Builder():
        x = make_input((2, 3), np.float64, 0, "x")  # forward 1
        a = np.exp(x)  # forward 2
        b = a * x  # forward 3
        s = L.reduce("sum", b, (0, 1))  # forward 4
        with role("recomputed"):
            a2 = L.bind("copy", x, tag=("remat", 0))  # recomputed 1
            e2 = np.exp(a2)  # recomputed 2
            m2 = e2 * a2  # recomputed 3
        with role("backward"):
            c = L.constant(np.full((2, 3), 2.0))  # backward 1
            d = c * m2  # backward 2
            e = d + e2  # backward 3
            f = e * a  # backward 4
            g = np.tanh(f)  # backward 5
    return Graph([x], [s, g], name="hand")


# ----- dump -----


def test_dump_lists_every_node_with_id_op_inputs_attrs_type_role_and_line():
    g = sg.trace(seed, np.ones(3), np.ones(3))
    expected = "\n".join([
        "graph seed(%0 x: float64[3], %1 y: float64[3]) {",
        f"  %2 = add(%0, %1) : float64[3]  # forward, test_viz.py:{SEED_LINE}",
        f"  %3 = mul(%2, %0) : float64[3]  # forward, test_viz.py:{SEED_LINE}",
        f"  %4 = sum[axes=(0,)](%3) : float64[]  # forward, test_viz.py:{SEED_LINE + 1}",
        "  return %4",
        "}",
    ])
    assert g.dump() == expected
    assert viz.dump(g, show_location=False).splitlines()[1] == "  %2 = add(%0, %1) : float64[3]  # forward"


def test_dump_shows_backward_role_and_is_stable_within_and_between_processes():
    def second(x):
        return np.sum(np.sin(x) * x)

    def build():
        return sg.trace(sg.grad(sg.grad(lambda x: second(x))), 0.5)

    d1 = build().dump()
    sg.trace(sg.grad(chain), np.ones(3))  # advances the process-wide tag and node counters
    d2 = build().dump()
    assert d1 == d2
    assert "# backward" in d1 and "tag=fresh#0" in d1
    assert not re.search(r"0x[0-9a-f]{6,}", d1)
    # The same program in a fresh interpreter prints the same listing (up to the file name).
    code = ("import numpy as np, symgraph as sg\n"
            "def second(x):\n    return np.sum(np.sin(x) * x)\n"
            "print(sg.trace(sg.grad(sg.grad(lambda x: second(x))), 0.5).dump(show_location=False))\n")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == build().dump(show_location=False)


def test_dump_of_graph_returning_an_input_and_a_constant():
    g = sg.trace(lambda x: (x, 2.0), np.ones(2))
    text = g.dump()
    assert text.splitlines()[0] == "graph <lambda>(%0 x: float64[2]) {"
    assert "constant[value=2.]()" in text and text.splitlines()[-2] == "  return %0, %1"


# ----- DOT -----


def test_dot_counts_forward_backward_recomputed_of_a_known_graph():
    src = viz.to_dot(hand_graph())
    nodes = graph_nodes(src)
    roles = [role_of_class(a) for a in nodes.values()]
    assert (roles.count("forward"), roles.count("recomputed"), roles.count("backward")) == (4, 3, 5)
    # The three roles are drawn with different fill colours and line styles.
    looks = {role_of_class(a): (a["fillcolor"], a["style"]) for a in nodes.values() if "sg-op-constant" not in a["class"]
             and "sg-input" not in a["class"]}
    assert len({v[0] for v in looks.values()}) == 3 and len({v[1] for v in looks.values()}) == 3
    # Legend: one sample per role, inputs and outputs marked.
    legend = [a["label"] for a in dot_nodes(src).values() if a.get("class") == "sg-legend"]
    assert any("backward" in t for t in legend) and any("recomputed" in t for t in legend)
    ins = [a for a in nodes.values() if "sg-input" in a["class"]]
    outs = [a for a in nodes.values() if "sg-output" in a["class"]]
    assert len(ins) == 1 and ins[0]["shape"] == "invhouse"
    assert len(outs) == 2 and all(a["peripheries"] == "2" for a in outs)
    # Shapes and dtypes on labels; fan-out shown (x is read by exp, mul and copy).
    assert "float64[2,3]" in nodes["n0"]["label"] and "fan-out 3" in nodes["n0"]["label"]
    assert len(dot_edges(src)) == sum(len(n.inputs) for n in hand_graph()) + len(legend) - 1


@needs_dot
def test_dot_of_gradient_matches_roles_and_parses():
    g = sg.trace(sg.value_and_grad(seed), np.ones(3), np.ones(3))
    src = g.to_dot()
    dot_ok(src)
    nodes = graph_nodes(src)
    assert len(nodes) == len(g)
    want = viz.role_counts(g)
    got: dict[str, int] = {}
    for a in nodes.values():
        got[role_of_class(a)] = got.get(role_of_class(a), 0) + 1
    assert got == want and want["backward"] >= 3 and want["forward"] >= 5
    # Edges point at readers: every input slot of every node is one edge.
    assert len([e for e in dot_edges(src) if not e[0].startswith("legend")]) == sum(len(n.inputs) for n in g)


@needs_dot
def test_dot_of_second_derivative_and_hessian_render():
    g2 = sg.simplify(sg.trace(sg.grad(sg.grad(lambda x: np.sin(x) * x)), 0.3))
    g2.evaluate(0.3)
    np.testing.assert_allclose(g2.evaluate(0.3), 2 * np.cos(0.3) - 0.3 * np.sin(0.3))
    dot_ok(g2.to_dot())
    h = sg.trace(sg.hessian(lambda x: np.sum(np.tanh(x) ** 2)), np.ones(3))
    dot_ok(h.to_dot())
    assert sum(1 for a in graph_nodes(h.to_dot()).values() if role_of_class(a) == "backward") == \
        viz.role_counts(h)["backward"]


def test_dot_of_checkpointed_graph_shows_recomputed_nodes():
    C = pytest.importorskip("symgraph.passes.checkpoint")
    g = sg.simplify(sg.trace(sg.grad(lambda x: chain(x, 8)), np.ones(4)))
    ck = C.apply_checkpoint(g, "sqrt")
    counts = viz.role_counts(ck)
    assert counts.get("recomputed", 0) > 0
    nodes = graph_nodes(ck.to_dot())
    got = sum(1 for a in nodes.values() if role_of_class(a) == "recomputed")
    assert got == counts["recomputed"]
    assert all(a["style"] == viz.ROLE_STYLES["recomputed"][2] for a in nodes.values()
               if role_of_class(a) == "recomputed" and "sg-op-constant" not in a["class"])
    np.testing.assert_array_equal(ck.evaluate(np.linspace(0, 1, 4)), g.evaluate(np.linspace(0, 1, 4)))


def test_dot_kernel_clusters_and_fused_interior():
    g = sg.simplify(sg.trace(sg.grad(lambda x, y: np.sum(np.tanh((x + y) * x) @ y.T)), np.ones((3, 2)),
                             np.ones((3, 2))))
    ids = viz.node_ids(g)
    mm = [n for n in g if n.op.name == "matmul"]
    out = g.outputs[0]
    src = g.to_dot(kernels=[mm, [out]])
    pg = parse_dot(src)
    clusters = {s.get_name(): s for s in pg.get_subgraphs() if s.get_name().startswith("cluster_kernel")}
    assert set(clusters) == {"cluster_kernel_0", "cluster_kernel_1"}
    k0 = {n.get_name() for n in clusters["cluster_kernel_0"].get_nodes()} - {"graph", "node", "edge"}
    k1 = {n.get_name() for n in clusters["cluster_kernel_1"].get_nodes()} - {"graph", "node", "edge"}
    by_name = {f"n{i}": n for n, i in ids.items()}
    assert {f"n{ids[n]}" for n in mm} <= k0
    assert all(by_name[k].op.kind == "layout" for k in k0 - {f"n{ids[n]}" for n in mm})
    # The output's kernel also holds the unlisted elementwise nodes that only it reads.
    assert f"n{ids[out]}" in k1 and len(k1) > 3
    for n in g:
        if f"n{ids[n]}" in k1 and n is not out:
            assert n.op.kind in ("elementwise", "layout")
    assert "fused kernel" in src


def test_fan_out_and_duplicate_reads_are_visible():
    g = sg.trace(lambda x: x * x + np.exp(x), np.ones(2))
    src = g.to_dot()
    nodes = graph_nodes(src)
    assert "fan-out 2" in nodes["n0"]["label"]  # read by mul and exp (mul reads it twice: two edges)
    assert dot_edges(src).count(("n0", "n1")) == 2


def test_no_process_specific_text_in_dot():
    def build():
        return sg.trace(sg.grad(sg.grad(lambda x: np.sin(x) * x)), 0.5)

    g1 = build()
    sg.trace(sg.grad(chain), np.ones(3))
    g2 = build()
    assert g1.to_dot() == g2.to_dot()
    assert not re.search(r"0x[0-9a-f]{6,}", g1.to_dot())


# ----- summaries of large graphs -----


def _assert_summary_is_acyclic_and_complete(g: Graph, src: str) -> None:
    nodes = dot_nodes(src)
    drawn = {k for k, a in nodes.items() if re.search(r"sg-(node|summary|ref)", a.get("class", ""))}
    dg = nx.DiGraph([e for e in dot_edges(src) if e[0] in drawn and e[1] in drawn])
    assert nx.is_directed_acyclic_graph(dg)
    covered = 0
    for a in nodes.values():
        if "sg-summary" in a.get("class", ""):
            covered += int(re.search(r"(\d+) (?:ops summarized|\w+ ops, depth)", a["label"]).group(1))
        elif "sg-node" in a.get("class", ""):
            covered += 1
    outs = set(g.outputs)
    assert covered == sum(1 for n in g if n.op.name != "constant" or n in outs)


@needs_dot
def test_ten_thousand_node_gradient_renders_in_seconds_summarized(tmp_path):
    g = sg.simplify(sg.trace(sg.grad(lambda x: chain(x, 1700)), np.ones(3)))
    assert len(g) > 10_000
    t0 = time.perf_counter()
    path = g.render(tmp_path / "big.svg")
    dt = time.perf_counter() - t0
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert dt < 30, f"render of {len(g)} nodes took {dt:.1f} s"
    src = g.to_dot()
    assert "sg-summary" in src and len(graph_nodes(src)) < 50
    _assert_summary_is_acyclic_and_complete(g, src)


@needs_dot
def test_matmul_heavy_graph_falls_back_to_depth_bands():
    def mlp(w, x):
        for _ in range(120):
            x = np.tanh(x @ w) + x
        return np.sum(x)

    g = sg.simplify(sg.trace(sg.grad(mlp), np.ones((4, 4)), np.ones((2, 4))))
    src = g.to_dot(collapse=True, max_boxes=200, band_target=40)
    assert "depth bands" in src
    _assert_summary_is_acyclic_and_complete(g, src)
    t0 = time.perf_counter()
    dot_ok(src)
    assert time.perf_counter() - t0 < 30


def test_collapse_false_draws_every_node_and_chain_summary_on_request():
    g = sg.simplify(sg.trace(sg.grad(lambda x: chain(x, 12)), np.ones(3)))
    assert len(graph_nodes(g.to_dot(collapse=False))) == len(g)
    src = g.to_dot(collapse=True)
    assert "sg-summary" in src and "constants hidden" in src
    _assert_summary_is_acyclic_and_complete(g, src)
    # With checkpointing the recomputed chain is its own (green) summary.
    C = pytest.importorskip("symgraph.passes.checkpoint")
    ck = C.apply_checkpoint(g, "sqrt")
    src = ck.to_dot(collapse=True)
    _assert_summary_is_acyclic_and_complete(ck, src)
    assert any("sg-summary sg-role-recomputed" in a.get("class", "") for a in dot_nodes(src).values())


# ----- render -----


@needs_dot
def test_render_svg_png_pdf_through_dot(tmp_path):
    g = sg.trace(sg.grad(seed), np.ones(3), np.ones(3))
    svg = g.render(str(tmp_path / "g.svg"))
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    classes = [e.get("class", "") for e in root.iter()]
    assert any("sg-role-backward" in c for c in classes) and any("sg-role-forward" in c for c in classes)
    assert any("float64[3]" in (e.text or "") for e in root.iter())
    assert Path(viz.render(g, tmp_path / "g.png")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(viz.render(g, tmp_path / "g.pdf")).read_bytes()[:5] == b"%PDF-"
    assert Path(viz.render(g, tmp_path / "g.dot")).read_text(encoding="utf-8") == g.to_dot()
    assert Path(viz.render(g, tmp_path / "g.txt")).read_text(encoding="utf-8") == g.dump() + "\n"


def test_render_errors_name_graphviz_packages(tmp_path):
    g = sg.trace(seed, np.ones(3), np.ones(3))
    with pytest.raises(SymgraphError, match=r"apt-get install graphviz.*conda install -c conda-forge graphviz"):
        g.render(tmp_path / "g.svg", dot="no-such-dot-program-xyz")
    with pytest.raises(SymgraphError, match="suffix"):
        g.render(tmp_path / "g.bmpx")
    assert not os.path.exists(tmp_path / "g.svg")


def test_render_timeout_is_a_clear_error(tmp_path):
    slow = tmp_path / "slowdot"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    g = sg.trace(seed, np.ones(3), np.ones(3))
    with pytest.raises(SymgraphError, match="did not finish within 0.3 s"):
        g.render(tmp_path / "g.svg", dot=str(slow), timeout=0.3)


# ----- SYMGRAPH_DUMP -----


def test_dump_stage_is_a_noop_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("SYMGRAPH_DUMP", raising=False)
    monkeypatch.chdir(tmp_path)
    assert viz.dump_stage("traced", sg.trace(seed, np.ones(3), np.ones(3))) == []
    assert os.listdir(tmp_path) == []


def test_dump_stage_writes_numbered_txt_dot_and_extras(monkeypatch, tmp_path):
    d = tmp_path / "dumps"
    g = sg.trace(sg.grad(seed), np.ones(3), np.ones(3))
    s = sg.simplify(g)
    monkeypatch.setenv("SYMGRAPH_DUMP", str(d))
    w1 = viz.dump_stage("traced", g)
    w2 = viz.dump_stage("simplified", s)
    w3 = viz.dump_stage("fused", s, kernels=[[s.outputs[0]]], llvm_ir="define void @k() { ret void }",
                        asm=b"ret\n", note=["a", "b"])
    names = sorted(os.listdir(d))
    assert names == sorted(os.path.basename(p) for p in w1 + w2 + w3)
    stems = [n.split("-", 1) for n in names if n.endswith(".txt") and n.count("-") == 2]
    nums = [int(a) for a, _ in stems]
    assert nums == sorted(nums) and len(set(nums)) == 3  # one number per stage, in call order
    t1 = next(p for p in w1 if p.endswith(".txt"))
    assert Path(t1).read_text(encoding="utf-8") == g.dump() + "\n" and t1.endswith("-f-traced.txt") is False
    assert re.search(r"\d{3}-seed-traced\.txt$", t1)
    dot3 = Path(next(p for p in w3 if p.endswith("fused.dot"))).read_text()
    assert "cluster_kernel_0" in dot3
    ext = {os.path.splitext(p)[1] for p in w3}
    assert {".txt", ".dot", ".ll", ".s"} <= ext
    assert Path(next(p for p in w3 if p.endswith(".ll"))).read_text().startswith("define void")
    assert Path(next(p for p in w3 if p.endswith("-note.txt"))).read_text() == "a\n\nb"
    listing = Path(next(p for p in w3 if p.endswith("-kernels.txt"))).read_text()
    out_id = viz.node_ids(s)[s.outputs[0]]
    assert re.match(r"kernel 0: \d+ ops", listing) and f"%{out_id}" in listing.split()


def test_dump_stage_warns_instead_of_raising(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("SYMGRAPH_DUMP", str(blocker))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert viz.dump_stage("traced", sg.trace(seed, np.ones(3), np.ones(3))) == []
    assert any("SYMGRAPH_DUMP" in str(w.message) for w in rec)


def test_symgraph_dump_writes_every_stage_of_a_compiled_gradient(monkeypatch, tmp_path):
    comp = pytest.importorskip("symgraph.compile")
    pytest.importorskip("codegen")
    pytest.importorskip("symgraph.passes.checkpoint")
    monkeypatch.setenv("SYMGRAPH_DUMP", str(tmp_path))
    cf = comp.compile(sg.grad(lambda x: chain(x, 4)), checkpoint="sqrt")
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(cf(x), sg.grad(lambda x: chain(x, 4))(x), rtol=1e-12)
    names = sorted(os.listdir(tmp_path))
    stages = {m.group(1) for m in (re.match(r"\d{3}-[^-]+-([a-z]+)\.txt$", n) for n in names) if m}
    assert {"traced", "simplified", "checkpointed", "fused"} <= stages, names
    for st in ("traced", "simplified", "checkpointed", "fused"):
        assert any(n.endswith(f"-{st}.dot") for n in names)
    assert any(n.endswith(".ll") for n in names) and any(n.endswith(".s") for n in names)
    ck = (tmp_path / next(n for n in names if n.endswith("-checkpointed.txt"))).read_text()
    assert "# recomputed" in ck
    fused = (tmp_path / next(n for n in names if n.endswith("-fused.dot"))).read_text()
    assert "cluster_kernel_0" in fused
    # Numbers follow the pipeline order.
    order = [n for n in names if n.endswith(".txt") and re.match(r"\d{3}-[^-]+-[a-z]+\.txt$", n)]
    pos = {re.match(r"\d{3}-[^-]+-([a-z]+)", n).group(1): i for i, n in enumerate(order)}
    assert pos["traced"] < pos["simplified"] < pos["checkpointed"] < pos["fused"]


# ----- networkx -----


def test_to_networkx_keys_are_dump_ids_and_keep_node_data():
    g = sg.trace(sg.grad(seed), np.ones(3), np.ones(3))
    nxg = g.to_networkx()
    ids = viz.node_ids(g)
    assert sorted(nxg.nodes) == sorted(ids.values())
    for n, i in ids.items():
        d = nxg.nodes[i]
        assert d["op"] == n.op.name and d["shape"] == n.shape and d["role"] == meta(n).role
    assert nx.is_directed_acyclic_graph(nxg)
    assert list(nx.topological_sort(nxg))  # numbering is topological
    assert all(u < v for u, v in nxg.edges())


# ----- the documentation page runs -----

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "visualization.md")


def doc_code(dump_dir: str) -> str:
    text = Path(DOC).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return "\n".join(blocks).replace("/tmp/sgdump", dump_dir)


@needs_dot
def test_visualization_doc_examples_run_and_draw_every_picture(tmp_path):
    # the page writes its pictures to tempfile.mkdtemp() (not into docs/img): point that at tmp_path/tmp
    (tmp_path / "tmp").mkdir()
    script = tmp_path / "visualization_example.py"
    script.write_text(doc_code(str(tmp_path / "sgdump")))
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=False, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    committed = sorted(os.listdir(os.path.join(os.path.dirname(DOC), "img")))
    (out,) = [p for p in (tmp_path / "tmp").iterdir() if p.is_dir()]
    made = sorted(os.listdir(out))
    assert len(made) == 5 and set(made) <= set(committed)  # docs/img also holds other pages' pictures
    for name in made:
        root = ET.parse(out / name).getroot()
        assert root.tag.endswith("svg")
    # The printed listings in the page are what the code prints.
    page = Path(DOC).read_text(encoding="utf-8")
    for line in r.stdout.splitlines():
        if line.startswith("  %"):
            assert line in page, line
