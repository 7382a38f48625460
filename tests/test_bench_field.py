"""Smoke tests of the field's benchmark problems (bench/w8_gmm.py ... ): tiny sizes, values asserted.

Each workload's hand-written NumPy derivative is checked against central
finite differences, and symgraph's compiled derivative against the
hand-written one with ADBench's ρ < 1e-8, through the harness's own
`run_case` (only the symgraph and numpy systems, so no peer is needed).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.field import central_difference, rho, rho_compare
from bench.harness import Settings, run_case


def _settings() -> Settings:
    s = Settings.make(quick=True, systems={"symgraph", "numpy"})
    s.verbose = False
    s.min_reps, s.max_reps, s.budget = 1, 1, 0.0
    return s


def _rows_ok(table, names=("symgraph", "numpy")):
    rows = {r.system: r for r in table.rows}
    for n in names:
        assert rows[n].status == "ok", (n, rows[n].status, rows[n].message)
        assert rows[n].max_rel_err < 1e-8
    return rows


def test_rho_measure():
    assert rho(1.0, 1.0) == 0.0
    assert rho(0.0, 1e-9) == pytest.approx(1e-9)            # max(1, .) keeps small values absolute
    assert rho(1e6, 1e6 + 1) == pytest.approx(1 / (2e6 + 1))
    ok, _, _, r = rho_compare((np.ones(3), 2.0), (np.ones(3) + 1e-7, 2.0))
    assert not ok and r == pytest.approx(1e-7 / (2 + 1e-7))
    assert not rho_compare(np.array([np.nan]), np.array([1.0]))[0]


# --------------------------------------------------------------------------- W8 GMM

def test_gmm_input_follows_the_generator():
    from bench.w8_gmm import make_input
    a, m, i, x = make_input(3, 4, 7)
    assert a.shape == (4,) and m.shape == (4, 3) and i.shape == (4, 6) and x.shape == (7, 3)
    np.random.seed(31337)
    u = np.random.uniform(0, 1, 200 * 3)
    g = np.random.normal(0, 1, 200 * (1 + 3 + 3) + 10_000 * 3)
    np.testing.assert_array_equal(m.ravel(), u[:12])
    np.testing.assert_array_equal(a, g[:4])
    np.testing.assert_array_equal(i.ravel(), g[4:28])
    np.testing.assert_array_equal(x.ravel(), g[28:49])


def test_gmm_objective_against_a_direct_sum():
    from scipy.special import logsumexp, multigammaln

    from bench.w8_gmm import gmm_numpy, gmm_objective, make_input
    d, k, n = 3, 4, 9
    a, m, icf, x = make_input(d, k, n)
    total = -n * d / 2 * np.log(2 * np.pi) - n * logsumexp(a)
    Qs = []
    for kk in range(k):
        Q = np.diag(np.exp(icf[kk, :d]))
        c = d
        for j in range(d):
            for r in range(j + 1, d):
                Q[r, j] = icf[kk, c]
                c += 1
        Qs.append(Q)
    for xi in x:
        total += logsumexp([a[kk] + icf[kk, :d].sum() - 0.5 * np.sum((Qs[kk] @ (xi - m[kk])) ** 2)
                            for kk in range(k)])
    nn = d + 1
    for kk in range(k):
        total -= 0.5 * (np.sum(np.exp(icf[kk, :d]) ** 2) + np.sum(icf[kk, d:] ** 2))
    total += k * (nn * d * np.log(1 / np.sqrt(2)) - multigammaln(0.5 * nn, d))
    assert rho(gmm_objective(a, m, icf, x), total) < 1e-12
    assert rho(gmm_numpy(a, m, icf, x)[0], total) < 1e-12


def test_gmm_hand_gradient_against_central_differences():
    from bench.w8_gmm import gmm_numpy, gmm_objective, make_input
    args = list(make_input(4, 3, 25))
    _, grads = gmm_numpy(*args)
    for which in range(3):
        for idx in list(np.ndindex(args[which].shape))[::2]:
            def f(v, which=which):
                a = list(args)
                a[which] = v
                return gmm_objective(*a)
            fd = central_difference(f, args[which], idx)
            assert rho(fd, grads[which][idx]) < 1e-8, (which, idx)


def test_gmm_symgraph_in_the_harness():
    from bench.w8_gmm import gmm_numpy, make_input, systems
    inputs = make_input(3, 4, 50)
    t = run_case(_settings(), "tiny", inputs, lambda: gmm_numpy(*inputs), systems(), check=rho_compare)
    _rows_ok(t)
