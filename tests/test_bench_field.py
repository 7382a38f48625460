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
    s = Settings.make(quick=True, systems={"symgraph", "symgraph-roll", "numpy"})
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


# --------------------------------------------------------------------------- W12 small evals

def test_small_eval_inputs_follow_the_generators():
    from bench.w12_small import llsq_inputs, lse_inputs, ode_inputs
    np.random.seed(31337)
    first, second = np.random.rand(2500), np.random.rand(5000)
    np.testing.assert_array_equal(lse_inputs((2500, 5000))[5000], second)
    np.testing.assert_array_equal(lse_inputs((2500,))[2500], first)
    np.random.seed(31337)
    np.testing.assert_array_equal(llsq_inputs((16,))[16], np.random.rand(128))
    np.random.seed(31337)
    np.testing.assert_array_equal(ode_inputs(((1000, 1),))[(1000, 1)], np.random.rand(1000))


def test_small_eval_hand_derivatives_against_central_differences():
    from bench.w12_small import (kmeans_cost, kmeans_input, kmeans_numpy, llsq, llsq_data, llsq_numpy, lse,
                                 lse_numpy, ode_last, ode_numpy)
    rng = np.random.default_rng(5)
    x = rng.random(30)
    v, g = lse_numpy(x)
    assert rho(v, np.log(np.sum(np.exp(x)))) < 1e-14
    assert max(rho(central_difference(lse, x, (i,)), g[i]) for i in range(30)) < 1e-8
    T, s = llsq_data(20, 8)
    x = rng.random(8)
    v, g = llsq_numpy(x, T, s)
    assert max(rho(central_difference(lambda z: llsq(z, T, s), x, (i,)), g[i]) for i in range(8)) < 1e-8
    x = 2 * rng.random(7)                        # n <= 4 s: the last element depends on every x_i
    for steps in (1, 2, 3):
        v, g = ode_numpy(x, steps)
        fd = [central_difference(lambda z: ode_last(z, steps), x, (i,)) for i in range(7)]
        assert max(rho(fd, g)) < 1e-8, steps
        assert (steps < 2) or np.all(g != 0)
    c, p = kmeans_input(4, 60, 3)
    f, direction = kmeans_numpy(c, p)
    assert rho(f, kmeans_cost(c, p)) < 1e-12
    assign = np.argmin(((p[None] - c[:, None]) ** 2).sum(2), axis=0)
    for j in range(4):                           # Newton step lands on the cluster mean
        np.testing.assert_allclose(c[j] - direction[j], p[assign == j].mean(axis=0), rtol=1e-12)


def test_small_evals_symgraph_in_the_harness():
    from bench.w12_small import (_kmeans_symgraph, _lse_torch, _llsq_torch, _ode_systems, _vg_systems,
                                 kmeans_input, kmeans_numpy, llsq, llsq_data, llsq_numpy, lse, lse_numpy,
                                 ode_numpy)
    from bench.field import numpy_system, symgraph_system
    x = np.random.default_rng(2).random(100)
    _rows_ok(run_case(_settings(), "lse", (x,), lambda: lse_numpy(x), _vg_systems(lse, 1, lse_numpy, _lse_torch),
                      check=rho_compare))
    T, s = llsq_data(40, 16)
    w = np.random.default_rng(3).random(16)
    _rows_ok(run_case(_settings(), "llsq", (w, T, s), lambda: llsq_numpy(w, T, s),
                      _vg_systems(llsq, 1, llsq_numpy, _llsq_torch), check=rho_compare))
    x = 2 * np.random.default_rng(4).random(6)
    t = run_case(_settings(), "ode", (x,), lambda: ode_numpy(x, 2), _ode_systems(2), check=rho_compare)
    assert np.all(ode_numpy(x, 2)[1][:5] != 0)
    _rows_ok(t)
    c, p = kmeans_input(5, 80, 3)
    _rows_ok(run_case(_settings(), "kmeans", (c, p), lambda: kmeans_numpy(c, p),
                      [symgraph_system(_kmeans_symgraph), numpy_system(kmeans_numpy)], check=rho_compare))


# --------------------------------------------------------------------------- W9 bundle adjustment

def _ba_all_residuals(theta, n, m, p, feats, obs):
    from bench.w9_ba import gather, residuals_vectorized
    cams, X, w = theta[:11 * n].reshape(n, 11), theta[11 * n:11 * n + 3 * m].reshape(m, 3), theta[11 * n + 3 * m:]
    return np.concatenate([residuals_vectorized(gather(cams, X, w, obs), feats).ravel(), 1 - w * w])


def test_ba_csr_jacobian_against_dense_central_differences():
    from bench.w9_ba import Pattern, make_input, numpy_complex_step
    n, m, p = 2, 3, 5
    cams, X, w, feats, obs = make_input(n, m, p, distinct=True, seed=1)
    pattern = Pattern(n, m, p, obs)
    r, data = numpy_complex_step(pattern)(cams, X, w, feats, obs)
    theta = np.concatenate([cams.ravel(), X.ravel(), w])
    np.testing.assert_allclose(r, _ba_all_residuals(theta, n, m, p, feats, obs), rtol=1e-14)
    J = pattern.csr(data[:30 * p].reshape(p, 2, 15), data[30 * p:]).toarray()
    assert J.shape == (3 * p, 11 * n + 3 * m + p)
    fd = np.empty_like(J)
    for k in range(theta.size):
        h = 1e-6 * max(1.0, abs(theta[k]))
        tp, tm = theta.copy(), theta.copy()
        tp[k] += h
        tm[k] -= h
        fd[:, k] = (_ba_all_residuals(tp, n, m, p, feats, obs) - _ba_all_residuals(tm, n, m, p, feats, obs)) / (2 * h)
    assert rho(J, fd).max() < 1e-6              # central differences of residuals ~1e2: ~1e-8 absolute
    assert np.count_nonzero(J) <= 31 * p and np.all(fd[J == 0] == 0)


def test_ba_rodrigues_at_zero_rotation():
    from bench.w9_ba import _rodrigues
    X = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(_rodrigues(np.zeros(3), X, np), X)
    r = np.array([0.0, 0.0, np.pi / 2])                # quarter turn about z
    np.testing.assert_allclose(_rodrigues(r, X, np), [-2.0, 1.0, 3.0], atol=1e-15)


def test_ba_symgraph_in_the_harness():
    from bench.w9_ba import Pattern, make_input, numpy_complex_step, systems
    n, m, p = 3, 7, 40
    inputs = make_input(n, m, p, distinct=True, seed=2)
    pattern = Pattern(n, m, p, inputs[4])
    _rows_ok(run_case(_settings(), "ba", inputs, lambda: numpy_complex_step(pattern)(*inputs), systems(pattern),
                      check=rho_compare))


# --------------------------------------------------------------------------- W10 LSTM

def test_lstm_input_follows_the_generator():
    from bench.w10_lstm import make_input
    m, e, st, q = make_input(2, 40)
    assert m.shape == (4, 56) and e.shape == (3, 14) and st.shape == (4, 14) and q.shape == (40, 14)
    np.random.seed(31337)
    np.testing.assert_array_equal(st, np.random.random((4, 14)))      # state, main_params, extra_params
    np.testing.assert_array_equal(m, np.random.random((4, 56)))
    np.testing.assert_array_equal(e, np.random.random((3, 14)))
    codes = (q * 2.0 ** np.arange(13, -1, -1)).sum(axis=1)             # bits, most significant first
    assert set(np.unique(q)) <= {0.0, 1.0} and all(32 <= c < 127 or c == 0x2019 for c in codes)


def test_lstm_objective_matches_a_direct_loop_and_hand_gradient_central_differences():
    from bench.w10_lstm import lstm_numpy, lstm_objective, make_input
    m, e, st, q = make_input(2, 9)
    # ADBench's loop written elementwise, for one input
    l, (c, b) = 2, q.shape
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    h, cl, total = st[0::2].copy(), st[1::2].copy(), 0.0
    for t in range(c - 1):
        x = q[t] * e[0]
        for i in range(l):
            for j in range(b):
                fo = sig(x[j] * m[2 * i, j] + m[2 * i + 1, j])
                ig = sig(h[i, j] * m[2 * i, b + j] + m[2 * i + 1, b + j])
                og = sig(x[j] * m[2 * i, 2 * b + j] + m[2 * i + 1, 2 * b + j])
                ch = np.tanh(h[i, j] * m[2 * i, 3 * b + j] + m[2 * i + 1, 3 * b + j])
                cl[i, j] = cl[i, j] * fo + ig * ch
                h[i, j] = og * np.tanh(cl[i, j])
            x = h[i].copy()
        y = x * e[1] + e[2]
        total += np.sum(q[t + 1] * (y - np.log(np.sum(np.exp(y)) + 2)))
    f, (gm, ge) = lstm_numpy(m, e, st, q)
    assert rho(f, -total / ((c - 1) * b)) < 1e-14 and rho(lstm_objective(m, e, st, q), f) < 1e-14
    for which, grad, idx in ((0, gm, [(0, 3), (1, 20), (2, 40), (3, 55), (1, 13)]), (1, ge, [(0, 5), (1, 9), (2, 13)])):
        for ix in idx:
            def fn(v, which=which):
                a = [m, e, st, q]
                a[which] = v
                return lstm_objective(*a)
            assert rho(central_difference(fn, [m, e][which], ix), grad[ix]) < 1e-8, (which, ix)


def test_lstm_symgraph_scan_and_roll_in_the_harness():
    from bench.w10_lstm import lstm_numpy, make_input, systems
    inputs = make_input(2, 12)
    _rows_ok(run_case(_settings(), "lstm", inputs, lambda: lstm_numpy(*inputs), systems(), check=rho_compare),
             names=("symgraph", "symgraph-roll", "numpy"))


# --------------------------------------------------------------------------- W12 particle (nested derivatives)

def test_particle_hand_derivative_and_symgraph_nested_gradient():
    import symgraph as sg

    from bench.w12_particle import trajectory_masked, trajectory_numpy, trajectory_steps, MAX_STEPS
    for w in (0.0, 0.2):
        v, d = trajectory_numpy(w)
        fd = central_difference(lambda z: trajectory_numpy(float(z[0]))[0], np.array([w]), (0,), 1e-6)
        assert rho(fd, d) < 1e-8
        assert trajectory_steps(w) < MAX_STEPS
    obj = (lambda w: trajectory_masked(w, sg.grad, np, sg.fori_loop))
    f, g = sg.compile(obj), sg.compile(sg.grad(obj))       # reverse over reverse, through the masked loop
    for w in (0.0, 0.2):
        v, d = trajectory_numpy(w)
        assert rho(f(w), v) < 1e-12 and rho(g(w), d) < 1e-10


def test_particle_argmin_reaches_gradbench_answer():
    from bench.w12_particle import W_EXPECTED, argmin
    # the driver on a quadratic with the same stopping rules, and the eval's answer from the hand-derived run
    assert abs(argmin(lambda w: 100 * (w - 0.3) ** 2, lambda w: 200 * (w - 0.3), 0.0) - 0.3) < 1e-4
    # a first step below 1e-5 stops at once (GradBench's rule)
    assert argmin(lambda w: (w - 0.3) ** 2, lambda w: 2 * (w - 0.3), 0.0) == 0.0
    assert W_EXPECTED == 0.2071918746486116


def test_saddle_nested_optimizations_match_gradbench():
    from bench.w12_particle import SADDLE_EXPECTED, saddle_numpy, saddle_systems
    ref = saddle_numpy([1.0, 1.0])
    np.testing.assert_allclose(ref, np.full(4, SADDLE_EXPECTED), rtol=1e-12)   # GradBench's expected output
    # symgraph reverse over reverse (through a bounded sg.while_loop) and forward over forward
    chosen = [s for s in saddle_systems() if s.name in ("symgraph", "symgraph-ff", "numpy")]
    settings = _settings()
    settings.systems = {"symgraph", "symgraph-ff", "numpy"}
    rows = _rows_ok(run_case(settings, "saddle", (np.array([1.0, 1.0]),), ref, chosen, check=rho_compare,
                             timed=False), names=("symgraph", "symgraph-ff", "numpy"))
    assert rows["symgraph"].max_abs_err < 1e-15


def test_det_eval_hand_gradient_and_symgraph():
    from bench.w12_small import _det_torch, _vg_systems, det, det_inputs, det_numpy
    from bench.field import symgraph_system
    A = det_inputs((5,))[5]
    d, g = det_numpy(A)
    fd = np.array([[central_difference(lambda M: np.linalg.det(M), A, (i, j)) for j in range(5)] for i in range(5)])
    assert rho(fd, g).max() < 1e-8
    t = run_case(_settings(), "det", (A,), lambda: det_numpy(A),
                 [symgraph_system(lambda sg: sg.value_and_grad(det), name="symgraph"),
                  *_vg_systems(det, 1, det_numpy, _det_torch)[1:2]], check=rho_compare)
    _rows_ok(t)


# --------------------------------------------------------------------------- W11 hand tracking

def test_ht_synthetic_model_structure_and_rest_pose():
    from bench.w11_ht import N_BONES, N_THETA, _angle_axis, make_model, pose_index, skinned_vertices
    model = make_model()
    parents = model["parents"]
    assert len(parents) == N_BONES == 22 and parents[0] == -1
    assert all(0 <= p < b for b, p in enumerate(parents) if b > 0)           # parents come first
    np.testing.assert_allclose(model["weights"].sum(axis=1), 1.0, rtol=1e-14)
    assert model["triangles"].max() < len(model["base_positions"])
    idx = pose_index()
    assert sorted(idx[idx < N_THETA].tolist()) == list(range(N_THETA))       # every parameter used once
    # at theta = 0 every bone sits at its base pose: the skinned mesh is the base mesh
    np.testing.assert_allclose(skinned_vertices(np.zeros(N_THETA), model), model["base_positions"][:, :3],
                               atol=1e-12)
    np.testing.assert_allclose(_angle_axis(np.array([0.0, 0.0, np.pi / 2]), np) @ [1.0, 2.0, 3.0],
                               [-2.0, 1.0, 3.0], atol=1e-15)
    np.testing.assert_array_equal(_angle_axis(np.full(3, 1e-6), np), np.eye(3))   # the spec's small-angle branch


@pytest.mark.parametrize("complicated", [False, True])
def test_ht_symgraph_jacobian_against_finite_differences(complicated):
    from bench.w11_ht import corners, fd_complicated, fd_simple, make_input, make_model, systems
    model = make_model()
    theta, us, corr, pts = make_input(10, complicated, model)
    inputs = (theta, us, corners(model, corr), pts) if complicated else (theta, corr, pts)
    ref = (fd_complicated if complicated else fd_simple)(model)
    err, J = ref(*inputs)
    assert J.shape == (30, 28 if complicated else 26)
    # a residual depends on its own u only: moving u[0] moves rows 0..2 only
    if complicated:
        bumped = ref(theta, us + np.eye(10)[:, :1] * np.array([1e-3, 0.0]), *inputs[2:])[0]
        assert np.all(bumped[3:] == err[3:]) and np.any(bumped[:3] != err[:3])
    _rows_ok(run_case(_settings(), "ht", inputs, (err, J), systems(model, complicated), check=rho_compare))
