"""The hand-written C++ peers of the field's problems (bench/cpp): built with g++, checked against symgraph.

Each test that needs a compiler skips without one; the library is built into
a temporary cache directory (about a second of g++ per source), so the tests
never reuse a stale build.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from bench.field import CPP_NAME, rho_compare
from bench.harness import Settings, run_case

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh build cache and in-process library table; the default compiler."""
    from bench.cpp import build
    monkeypatch.setenv("SYMGRAPH_BENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(build, "_loaded", {})
    return tmp_path


def _settings(*names) -> Settings:
    s = Settings.make(quick=True, systems=set(names))
    s.verbose = False
    s.min_reps, s.max_reps, s.budget = 1, 1, 0.0
    return s


def _perturbed(d, k, n, seed):
    """A GMM instance with O(1) entries everywhere (seeded), unlike the generator's small sizes."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(k), rng.standard_normal((k, d)), 0.5 * rng.standard_normal((k, d + d * (d - 1) // 2)),
            rng.standard_normal((n, d)))


@needs_cxx
def test_gmm_cpp_matches_symgraph(cache):
    import symgraph as sg

    from bench.cpp.build import load
    from bench.w8_gmm import gmm_cpp, gmm_objective, make_input

    fn = gmm_cpp(load("gmm"))
    assert list(cache.glob("gmm-*.so")), "the library was not built into the cache"
    # n = 300: three blocks of points, the last one padded; d = 5 is not a multiple of 4 (dot4's rows)
    cases = [make_input(3, 4, 50), _perturbed(5, 3, 300, 0), _perturbed(1, 2, 7, 1)]
    for inputs in cases:
        f, grads = fn(*inputs)
        cf = sg.compile(sg.value_and_grad(gmm_objective, argnums=(0, 1, 2)))
        f_sg, g_sg = cf(*inputs)
        ok, msg, _, worst = rho_compare((f, grads), (f_sg, g_sg))
        assert ok, msg
        assert worst < 1e-8
        assert all(g.shape == a.shape for g, a in zip(grads, inputs[:3]))
        assert abs(f) > 1.0 and np.abs(grads[2]).max() > 1e-3      # a real value, not an untouched buffer


@needs_cxx
def test_gmm_cpp_gradient_changes_with_the_input(cache):
    from bench.cpp.build import load
    from bench.w8_gmm import gmm_cpp, gmm_numpy

    fn = gmm_cpp(load("gmm"))
    inputs = list(_perturbed(4, 3, 40, 2))
    inputs[1] = inputs[1] + 0.1                                     # shift the means
    f, grads = fn(*inputs)
    ref = gmm_numpy(*inputs)
    assert rho_compare((f, grads), ref)[0]
    assert not rho_compare((f, grads), gmm_numpy(*_perturbed(4, 3, 40, 2)))[0]
    with pytest.raises(ValueError, match="shapes"):
        fn(inputs[0], inputs[1], inputs[2][:, :3], inputs[3])


@needs_cxx
def test_gmm_cpp_row_in_the_harness(cache):
    from bench.w8_gmm import gmm_numpy, make_input, systems
    inputs = make_input(3, 4, 50)
    t = run_case(_settings("numpy", CPP_NAME), "tiny", inputs, lambda: gmm_numpy(*inputs), systems(),
                 check=rho_compare)
    row = {r.system: r for r in t.rows}[CPP_NAME]
    assert row.status == "ok", row.message
    assert row.max_rel_err < 1e-8 and row.median > 0


def test_no_compiler_reports_missing(cache, monkeypatch):
    from bench.w8_gmm import gmm_numpy, make_input, systems
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    inputs = make_input(2, 3, 10)
    t = run_case(_settings("numpy", CPP_NAME), "tiny", inputs, lambda: gmm_numpy(*inputs), systems(),
                 check=rho_compare)
    row = {r.system: r for r in t.rows}[CPP_NAME]
    assert row.status == "missing"
    assert "no-such-compiler-xyz" in row.message


@needs_cxx
def test_compile_error_is_reported(cache, monkeypatch, tmp_path):
    from bench.cpp import build
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken.cpp").write_text("int f( {\n")
    monkeypatch.setattr(build, "SOURCE_DIR", src)
    with pytest.raises(build.CompileFailed, match="broken.cpp"):
        build.load("broken")
    assert not list(cache.glob("broken-*.so")) and not list(cache.glob("*.so"))


# --------------------------------------------------------------------------- W9 bundle adjustment

def _ba_case(n, m, p, seed, zero_rotation=False):
    from bench.w9_ba import Pattern, make_input
    inputs = list(make_input(n, m, p, distinct=True, seed=seed))
    if zero_rotation:                                  # the Rodrigues formula's theta = 0 branch
        inputs[0] = inputs[0].copy()
        inputs[0][::2, :3] = 0.0
    return inputs, Pattern(n, m, p, inputs[4])


@needs_cxx
@pytest.mark.parametrize("zero_rotation", [False, True])
def test_ba_cpp_matches_symgraph_and_complex_step(cache, zero_rotation):
    import symgraph as sg

    from bench.cpp.build import load
    from bench.w9_ba import _finish, _sg_make, ba_cpp, numpy_complex_step
    inputs, pattern = _ba_case(4, 9, 70, seed=5, zero_rotation=zero_rotation)
    err, werr, blocks, dw = ba_cpp(load("ba"))(*inputs)
    assert blocks.shape == (70, 2, 15) and np.abs(blocks).max() > 1.0
    out = _finish(pattern, err, werr, blocks, dw)
    ok, msg, _, _ = rho_compare(out, _sg_make(pattern)(sg)(*inputs))
    assert ok, msg
    ok, msg, _, _ = rho_compare(out, numpy_complex_step(pattern)(*inputs))
    assert ok, msg


@needs_cxx
def test_ba_cpp_row_in_the_harness(cache):
    from bench.w9_ba import numpy_complex_step, systems
    inputs, pattern = _ba_case(3, 10, 60, seed=6)
    t = run_case(_settings("numpy", CPP_NAME), "tiny", inputs, lambda: numpy_complex_step(pattern)(*inputs),
                 systems(pattern), check=rho_compare)
    row = {r.system: r for r in t.rows}[CPP_NAME]
    assert row.status == "ok", row.message
    assert row.max_rel_err < 1e-8
