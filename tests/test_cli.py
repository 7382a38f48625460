"""The `symgraph` command line, run as a subprocess: formats, stats, usage errors, user-code errors, --help.

Usage errors and --help run in-process through `symgraph.__main__.main` (what the process runs), and once
as a process for the exit status."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import symgraph as sg
from symgraph.__main__ import main

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not installed")

MODEL = textwrap.dedent("""\
    import numpy as np

    def seed(x, y):
        b = (x + y) * x
        return np.sum(b)

    def wave(x):
        return np.sin(x) * x

    def chain(x):
        for _ in range(6):
            x = np.tanh(x) * 1.5
        return np.sum(x)

    def raises(x):
        y = np.exp(x)
        return y / undefined_name

    def bad_matmul(a, b):
        return np.sum(a @ b)

    def vector(x):
        return x * 2.0

    def picked(logits, labels):
        return np.sum(logits[np.arange(logits.shape[0]), labels] ** 2)

    def power(z):
        return np.sum(np.abs(z) ** 2)

    class Model:
        @staticmethod
        def loss(w):
            return np.sum(w * w)
    """)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    p = d / "model.py"
    p.write_text(MODEL)
    return p


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "symgraph", *args], check=False, capture_output=True, cwd=cwd, timeout=300)


def out(r: subprocess.CompletedProcess) -> str:
    return r.stdout.decode()


def err(r: subprocess.CompletedProcess) -> str:
    return r.stderr.decode()


# ----- formats -----


def test_dump_text_of_gradient_matches_the_api(model):
    r = run("dump", f"{model}:seed", "--shapes", "3", "--shapes", "3", "--grad")
    assert r.returncode == 0, err(r)
    ns = {}
    exec(compile(MODEL, str(model), "exec"), ns)
    g = sg.trace(sg.grad(ns["seed"]), np.zeros(3), np.zeros(3), name="grad(seed)")

    def strip(t: str, here: str) -> list[str]:
        return [re.sub(rf", {here}$", "", line) for line in t.strip().splitlines()]

    # the nodes no user line builds (the seed) have the line that traced: here, this file's; in the command,
    # the traced function's (def seed, model.py:3)
    assert strip(out(r), r"model\.py:3") == strip(g.dump(), r"test_cli\.py:\d+")
    assert "# backward, model.py:4" in out(r)


def test_dump_second_derivative_text_and_dot(model):
    r = run("dump", f"{model}:wave", "--order", "2", "--simplify")
    assert r.returncode == 0, err(r)
    assert out(r).startswith("graph grad2(wave)(%0 x: float64[]) {") and "cos" in out(r)
    r = run("dump", f"{model}:wave", "--order", "2", "--format", "dot")
    assert r.returncode == 0, err(r)
    assert out(r).startswith('digraph "grad2(wave)" {') and "sg-role-backward" in out(r)


@needs_dot
def test_dump_dot_parses_and_svg_png_pdf_are_valid(model, tmp_path):
    r = run("dump", f"{model}:seed", "-s", "3", "-s", "3", "--grad", "-f", "dot")
    assert r.returncode == 0, err(r)
    chk = subprocess.run(["dot", "-Tsvg"], input=r.stdout, check=False, capture_output=True, timeout=60)
    assert chk.returncode == 0, chk.stderr
    r = run("dump", f"{model}:seed", "-s", "3", "-s", "3", "--grad", "--format", "svg")
    assert r.returncode == 0, err(r)
    root = ET.fromstring(r.stdout)
    assert root.tag.endswith("svg") and any("sg-role-backward" in e.get("class", "") for e in root.iter())
    for fmt, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF")):
        path = tmp_path / f"g.{fmt}"
        r = run("dump", f"{model}:seed", "-s", "3", "-s", "3", "--hessian", "--format", fmt, "-o", str(path))
        assert r.returncode == 0, err(r)
        assert path.read_bytes().startswith(magic) and r.stdout == b""


@needs_dot
def test_output_suffix_selects_format_and_checkpoint_draws_recomputed(model, tmp_path):
    pytest.importorskip("symgraph.passes.checkpoint")
    svg = tmp_path / "ck.svg"
    r = run("dump", f"{model}:chain", "-s", "4", "--grad", "--simplify", "--checkpoint", "sqrt", "-o", str(svg))
    assert r.returncode == 0, err(r)
    root = ET.parse(svg).getroot()
    recomputed = [e for e in root.iter() if "sg-node sg-role-recomputed" in e.get("class", "")]
    assert recomputed
    txt = tmp_path / "ck.txt"
    r = run("dump", f"{model}:chain", "-s", "4", "--grad", "--simplify", "--checkpoint", "sqrt", "-o", str(txt))
    assert r.returncode == 0, err(r)
    assert txt.read_text().count("# recomputed") == len(recomputed)


def test_dotted_function_name_and_float32(model):
    r = run("dump", f"{model}:Model.loss", "-s", "2,3", "--dtype", "float32", "--grad")
    assert r.returncode == 0, err(r)
    assert out(r).splitlines()[0] == "graph grad(Model.loss)(%0 w: float32[2,3]) {"


# ----- stats -----


def test_stats_counts_roles_and_peak_bytes(model):
    r = run("stats", f"{model}:chain", "-s", "4", "--grad", "--simplify")
    assert r.returncode == 0, err(r)
    text = out(r)
    ns = {}
    exec(compile(MODEL, str(model), "exec"), ns)
    g = sg.simplify(sg.trace(sg.grad(ns["chain"]), np.zeros(4)))
    from symgraph.passes.schedule import peak_bytes, schedule
    from symgraph.viz import role_counts

    for role, n in role_counts(g).items():
        assert re.search(rf"^  {role}\s+{n}$", text, re.MULTILINE), text
    assert f"planned peak bytes: {peak_bytes(schedule(g), g.outputs)} " in text
    assert text.splitlines()[0] == f"graph grad(chain): {len(g)} nodes, 1 inputs, 1 outputs"


def test_stats_with_checkpoint_and_compile(model):
    pytest.importorskip("symgraph.passes.checkpoint")
    plain = run("stats", f"{model}:chain", "-s", "4", "--grad", "--simplify")
    r = run("stats", f"{model}:chain", "-s", "4", "--grad", "--simplify", "--checkpoint", "sqrt", "--compile")
    assert r.returncode in (0, 2), err(r)
    assert re.search(r"^  recomputed\s+[1-9]\d*$", out(r), re.MULTILINE)

    def peak(t: str) -> int:
        return int(re.search(r"planned peak bytes: (\d+)", t).group(1))

    assert peak(out(r)) < peak(out(plain))
    if r.returncode == 2:  # sg.compile not available in this installation: a clear message
        assert "--compile needs sg.compile" in err(r)
    else:
        assert re.search(r"^  kernels\s+[1-9]\d*$", out(r), re.MULTILINE)
        assert re.search(r"^  compile seconds\s+\d+\.\d+$", out(r), re.MULTILINE)


# ----- errors and usage -----


def test_function_that_raises_prints_message_and_user_line(model):
    r = run("dump", f"{model}:raises", "-s", "3")
    assert r.returncode == 1
    e = err(r)
    assert "NameError" in e and "undefined_name" in e
    assert f"at {model}:17 (in raises)" in e and "return y / undefined_name" in e
    assert "Traceback" not in e
    r = run("dump", f"{model}:raises", "-s", "3", "--traceback")
    assert r.returncode == 1 and "Traceback" in err(r)


def test_symgraph_error_in_user_code_points_at_user_line(model):
    r = run("dump", f"{model}:bad_matmul", "-s", "3,4", "-s", "5,2")
    assert r.returncode == 1
    assert "ShapeError" in err(r) and "matmul" in err(r)
    assert f"{model}:20 (in bad_matmul)" in err(r) and "np.sum(a @ b)" in err(r)
    r = run("dump", f"{model}:vector", "-s", "3", "--grad")
    assert r.returncode == 1 and "NonScalarOutputError" in err(r)


@pytest.mark.parametrize("target, msg", [
    ("model.py", "expected FILE.py:FUNC"),
    ("nosuchfile.py:f", "no such file"),
    ("model.py:nosuch", "has no function 'nosuch'; functions defined there: Model, bad_matmul, chain"),
])
def test_bad_file_func_is_a_usage_error(model, target, msg):
    r = run("dump", target, cwd=model.parent)
    assert r.returncode == 2
    assert msg in err(r)


def test_usage_errors_exit_2(model, capsys):
    # in-process through `main` (what `python -m symgraph` runs; a fresh process per case cost ~1.5 s each):
    # the last case checks the process's own exit status 2
    def status(*args: str) -> int:
        return main(list(args))

    assert status("dump", f"{model}:seed", "-s", "3") == 2  # one shape for two arguments
    capsys.readouterr()
    assert status("dump", f"{model}:wave", "-s", "3", "--order", "2") == 2
    assert "--hessian" in capsys.readouterr().err
    assert status("dump", f"{model}:seed", "-s", "3,x", "-s", "3") == 2
    assert status("dump", f"{model}:seed", "--grad", "--hessian") == 2
    assert status("dump", f"{model}:seed", "--format", "jpeg") == 2
    assert status("frobnicate") == 2
    assert status() == 2
    assert run().returncode == 2


def test_help_explains_each_option(capsys):
    # in-process through `main` (`--help` exits 0 from argparse); test_usage_errors_exit_2 runs the process
    assert main(["--help"]) == 0
    h = capsys.readouterr().out
    assert "dump" in h and "stats" in h and "exit status" in h
    assert main(["dump", "--help"]) == 0
    h = capsys.readouterr().out
    for opt in ("--shapes", "--dtype", "--grad", "--hessian", "--order", "--simplify", "--checkpoint", "--format",
                "-o PATH", "--full"):
        assert opt in h, opt
    assert main(["stats", "--help"]) == 0
    h = capsys.readouterr().out
    assert "--compile" in h and "peak bytes" in h


def test_console_script_matches_module(model):
    exe = shutil.which("symgraph", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("console script not installed next to this interpreter")
    args = ["dump", f"{model}:seed", "-s", "3", "-s", "3"]
    a = subprocess.run([exe, *args], check=False, capture_output=True, timeout=120)
    b = run(*args)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    # the nodes no user line builds (the inputs, grad's copies of them) point at the traced function's line,
    # not at the launcher (bin/symgraph) or nowhere
    args = ["dump", f"{model}:seed", "-s", "3", "-s", "3", "--grad", "--format", "dot"]
    a = subprocess.run([exe, *args], check=False, capture_output=True, timeout=120)
    b = run(*args)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    tips = re.findall(r'tooltip="([^"]*)"', out(a))
    inputs = [t for t in tips if " input[name=" in t]
    assert len(inputs) == 2 and all(t.endswith("model.py:3 (in seed)") for t in inputs), inputs
    assert not [t for t in tips if "model.py:" not in t], tips


def test_per_argument_dtypes_let_integer_labels_through(model):
    r = run("dump", f"{model}:picked", "--shapes", "4,3:float32", "--shapes", "4:int64", "--grad")
    assert r.returncode == 0, err(r)
    text = out(r)
    assert "float32[4,3]" in text and "int64[4]" in text
    r = run("stats", f"{model}:picked", "--shapes", "4,3", "--shapes", "4:int64", "--grad", "--compile")
    assert r.returncode == 0, err(r)
    assert "compiled" in out(r)
    r = run("dump", f"{model}:picked", "--shapes", "4,3:int8", "--shapes", "4")
    assert r.returncode == 2 and "bad dtype 'int8'" in err(r)


def test_complex_arguments(model):
    r = run("dump", f"{model}:power", "--shapes", "3:complex64", "--grad")
    assert r.returncode == 0, err(r)
    assert "complex64[3]" in out(r) and "float32[3]" in out(r)  # |z| is real, the gradient complex
    r = run("stats", f"{model}:power", "--shapes", "3", "--dtype", "complex128", "--grad", "--compile")
    assert r.returncode == 0, err(r)
    assert "compiled" in out(r)


def test_missing_shapes_for_an_array_function_says_to_give_them(model):
    r = run("dump", f"{model}:bad_matmul")
    assert r.returncode != 0
    assert "no --shapes was given" in err(r) and "model.py" in err(r)


def test_unwritable_output_is_a_usage_error_and_an_old_file_survives(model, tmp_path):
    r = run("dump", f"{model}:chain", "-s", "4", "-o", str(tmp_path / "missing" / "g.html"))
    assert r.returncode == 2 and "does not exist" in err(r) and "Traceback" not in err(r)
    (tmp_path / "d.txt").mkdir()
    r = run("dump", f"{model}:chain", "-s", "4", "-o", str(tmp_path / "d.txt"))
    assert r.returncode == 2 and "cannot write" in err(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.txt"]  # no temporary file left behind
    old = tmp_path / "old.txt"
    old.write_text("keep")
    r = run("dump", f"{model}:chain", "-s", "4", "-o", str(old))
    assert r.returncode == 0 and "graph" in old.read_text()
