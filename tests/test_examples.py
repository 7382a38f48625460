"""Short runs of the training examples, gradient checks of their models, backend agreement, donation.

The examples are imported from examples/ by path and driven through their
`main(argv)` functions with small settings, so this file stays CI-sized.
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph import nn, optim

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"

import sklearn  # noqa: E402,F401  (in the test extra: the examples are part of the suite)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def mlp_example():
    return _load("train_mlp_digits")


@pytest.fixture(scope="module")
def newton_example():
    return _load("newton_logistic_regression")


@pytest.fixture(scope="module")
def transformer_example():
    return _load("tiny_transformer")


def _llvm_available() -> bool:
    try:
        import codegen  # noqa: F401
        import llvmlite  # noqa: F401
    except ImportError:
        return False
    return True


# ----- the MLP on digits -----


def test_mlp_example_short_run_learns(mlp_example, tmp_path, capsys):
    png = tmp_path / "digits.png"
    # with the progress bar allowed: standard error is not a terminal here, so tqdm must stay quiet
    res = mlp_example.main(["--backend", "numpy", "--epochs", "3", "--hidden", "64", "--plot", str(png)])
    assert "\r" not in capsys.readouterr().err
    loss = np.asarray(res["history"]["loss"])
    assert res["steps"] == 3 * (1347 // 64) == len(loss)
    assert loss[-10:].mean() < 0.5 * loss[:5].mean()
    assert res["test_accuracy"] > 0.85  # 3 epochs of a small MLP; the full run reaches 97-98%
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert res["seconds_per_step"] > 0


def test_mlp_parameter_gradients_pass_check_grads(mlp_example):
    x_tr, y_tr, _, _ = mlp_example.load_data()
    params = nn.init_mlp(np.random.default_rng(1), [64, 7, 10], dtype=np.float64)
    params = sg.tree_map(lambda a: a + 0.1 * np.random.default_rng(2).standard_normal(a.shape), params)
    x, y = x_tr[:6].astype(np.float64), y_tr[:6]
    sg.check_grads(lambda p: mlp_example.loss_fn(p, x, y), (params,), order=1)


def test_mlp_compiled_step_matches_eager_step(mlp_example):
    """The compiled step (one graph) equals the same step run eagerly (grad evaluated, update in NumPy)."""
    x_tr, y_tr, _, _ = mlp_example.load_data()
    opt = optim.adamw(optim.cosine_decay(3e-3, 10), weight_decay=1e-4)
    step = mlp_example.make_step(opt)
    params = nn.init_mlp(np.random.default_rng(0), [64, 32, 10])
    state = opt.init(params)
    cf = sg.compile(step, backend="numpy")
    pc, sc = params, state
    pe, se = params, state
    for k in range(3):
        batch = (x_tr[k * 16:(k + 1) * 16], y_tr[k * 16:(k + 1) * 16])
        pc, sc, lc = cf(pc, sc, batch)
        pe, se, le = step(pe, se, batch)
        assert float(lc) == pytest.approx(float(le), rel=1e-5)
    for a, b in zip(sg.tree_leaves((pc, sc)), sg.tree_leaves((pe, se))):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not _llvm_available(), reason="the LLVM backend (codegen, llvmlite) is not importable")
def test_mlp_llvm_step_matches_numpy_backend(mlp_example):
    x_tr, y_tr, _, _ = mlp_example.load_data()
    opt = optim.adamw(optim.cosine_decay(3e-3, 10), weight_decay=1e-4)
    params = nn.init_mlp(np.random.default_rng(0), [64, 32, 10])
    state = opt.init(params)
    results = {}
    for backend in ("numpy", "llvm"):
        cf = sg.compile(mlp_example.make_step(opt), backend=backend, donate_argnums=(0, 1))
        p, s = sg.tree_map(np.copy, params), sg.tree_map(np.copy, state)
        for k in range(3):
            p, s, loss = cf(p, s, (x_tr[k * 16:(k + 1) * 16], y_tr[k * 16:(k + 1) * 16]))
        results[backend] = (p, s, float(loss))
    assert results["llvm"][2] == pytest.approx(results["numpy"][2], rel=1e-4)
    for a, b in zip(sg.tree_leaves(results["llvm"][:2]), sg.tree_leaves(results["numpy"][:2])):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("llvm", marks=pytest.mark.skipif(
    not _llvm_available(), reason="the LLVM backend is not importable"))])
def test_mlp_step_reuses_donated_buffers(mlp_example, backend):
    """Across steps the parameters and optimizer moments stay in the same arrays (updated in place)."""
    x_tr, y_tr, _, _ = mlp_example.load_data()
    opt = optim.adam(1e-3)
    params = nn.init_mlp(np.random.default_rng(0), [64, 16, 10])
    state = opt.init(params)
    cf = sg.compile(mlp_example.make_step(opt), backend=backend, donate_argnums=(0, 1))
    ids = [id(a) for a in sg.tree_leaves((params, state))]
    p, s = params, state
    for k in range(4):
        p, s, _ = cf(p, s, (x_tr[k * 8:(k + 1) * 8], y_tr[k * 8:(k + 1) * 8]))
        assert [id(a) for a in sg.tree_leaves((p, s))] == ids
    assert int(s["step"]) == 4


# ----- Newton's method -----


def test_newton_matches_sklearn_on_a_subset(newton_example):
    res = newton_example.main(["--backend", "numpy", "--n", "200", "--lam", "1e-2", "--quiet"])
    assert res["converged"] and res["iterations"] <= 10
    assert res["rel_err"] < 1e-6
    losses = [h[0] for h in res["history"]]
    assert all(b <= a + 1e-15 for a, b in zip(losses, losses[1:]))
    assert res["history"][-1][1] < 1e-8  # gradient norm at the solution


def test_newton_hessian_is_exact(newton_example):
    """sg.hessian of the objective equals the closed form X~^T diag(s(1-s)) X~ / n + lam I (intercept unpenalized)."""
    x, y = newton_example.load_data(50)
    lam = 1e-2
    theta = np.random.default_rng(0).standard_normal(x.shape[1] + 1) * 0.1
    h = sg.hessian(lambda t: newton_example.objective(t, x, y, lam))(theta)
    xt = np.hstack([x, np.ones((len(x), 1))])
    s = 1 / (1 + np.exp(-(xt @ theta)))
    ref = xt.T @ (xt * (s * (1 - s))[:, None]) / len(x) + lam * np.diag(np.r_[np.ones(x.shape[1]), 0.0])
    np.testing.assert_allclose(h, ref, rtol=1e-10, atol=1e-13)
    sg.check_grads(lambda t: newton_example.objective(t, x[:10], y[:10], lam), (theta,), order=2)


# ----- the transformer -----

TINY = ["--backend", "numpy", "--width", "32", "--heads", "2", "--context", "16", "--batch", "8",
        "--eval-every", "20", "--eval-batches", "2", "--sample-chars", "20", "--no-progress", "--lr", "1e-2"]


def test_transformer_example_short_run_learns(transformer_example):
    res = transformer_example.main(TINY + ["--steps", "40"])
    first, last = res["val_losses"][0][1], res["val_losses"][-1][1]
    assert last < first - 0.5
    assert np.mean(res["train_losses"][-10:]) < np.mean(res["train_losses"][:5])
    assert 3.0 < res["unigram_entropy"] < 4.5  # nats/char of English text
    assert len(res["sample"]) == 20


def test_transformer_checkpoint_option_reports_both_peaks(transformer_example):
    res = transformer_example.main(TINY + ["--steps", "2", "--checkpoint", "sqrt"])
    assert None in res["traced_peak_bytes"]
    if res["checkpoint"] is not None:  # the checkpointing pass is available
        assert set(res["peak_bytes"]) == {"sqrt", None}
        # "sqrt" recomputes the sub-blocks of the whole training step (1.49 vs 2.53 MB planned here)
        assert res["peak_bytes"]["sqrt"] < 0.7 * res["peak_bytes"][None]
        assert res["traced_peak_bytes"]["sqrt"] < res["traced_peak_bytes"][None]


def test_unigram_entropy_and_batches(transformer_example):
    ids = np.array([0, 0, 1, 1], np.int32)
    assert transformer_example.unigram_entropy(ids, 3) == pytest.approx(np.log(2))
    data = np.arange(100, dtype=np.int32)
    x, y = transformer_example.get_batch(data, np.random.default_rng(0), 4, 8)
    assert x.shape == y.shape == (4, 8)
    np.testing.assert_array_equal(y, x + 1)
    text, desc = transformer_example.load_text("license")
    assert len(text) > 5000 and "Python" in text


def test_transformer_gradients_pass_check_grads():
    """Gradients of the whole tiny model (embedding, LN, attention, GELU, dropout, CE) against finite differences."""
    rng = np.random.default_rng(0)
    params = nn.init_transformer(rng, 7, 8, 2, 2, 4, np.float64)
    # larger weights than the init so every path contributes measurably
    params = sg.tree_map(lambda a: a * 10 if a.ndim >= 2 else a + 0.1 * rng.standard_normal(a.shape), params)
    toks, tgt = rng.integers(0, 7, (2, 4)), rng.integers(0, 7, (2, 4))
    sg.check_grads(lambda p: nn.transformer_loss(p, toks, tgt, 2, 0.1, np.int32(5)), (params,), order=1)


def test_attention_pieces_pass_second_order_checks():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5))
    sg.check_grads(lambda z: nn.masked_softmax(z, nn.causal_mask(5)[:3]), (x,), order=2)
    sg.check_grads(lambda z: snp.cross_entropy(z, np.array([0, 4, 2])), (x,), order=2)
    sg.check_grads(lambda z, g, b: snp.layer_norm(z, g, b), (x, rng.standard_normal(5), rng.standard_normal(5)),
                   order=2)
    sg.check_grads(snp.gelu, (x,), order=2)
    sg.check_grads(lambda z: snp.gelu(z, approximate=False), (x,), order=2)
    sg.check_grads(nn.softplus, (5 * x,), order=2)
    sg.check_grads(lambda z: snp.dropout(z, 0.3, np.int32(7), salt=3), (x,), order=2)
    sg.check_grads(lambda t: snp.embedding(t, np.array([[1, 0], [3, 1]])), (rng.standard_normal((4, 3)),), order=2)
    p = nn.init_attention(rng, 8, np.float64, std=0.5)
    sg.check_grads(lambda p, z: nn.causal_self_attention(p, z, 2), (p, rng.standard_normal((2, 3, 8))), order=2)


def test_attention_is_causal_and_matches_numpy():
    rng = np.random.default_rng(3)
    p = nn.init_attention(rng, 8, np.float64, std=0.5)
    x = rng.standard_normal((2, 5, 8))
    y = nn.causal_self_attention(p, x, 2)
    # NumPy reference, written out per head
    qkv = x @ p["qkv"]["w"] + p["qkv"]["b"]
    q, k, v = qkv[..., :8], qkv[..., 8:16], qkv[..., 16:]
    out = np.zeros_like(x)
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        s = q[..., sl] @ np.swapaxes(k[..., sl], -1, -2) / 2.0
        s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        out[..., sl] = a @ v[..., sl]
    np.testing.assert_allclose(y, out @ p["out"]["w"] + p["out"]["b"], rtol=1e-12, atol=1e-12)
    # changing a later position does not change earlier outputs
    x2 = x.copy()
    x2[:, 3:] += 1.0
    y2 = nn.causal_self_attention(p, x2, 2)
    np.testing.assert_allclose(y2[:, :3], y[:, :3], rtol=1e-12, atol=1e-12)
    assert np.abs(y2[:, 3:] - y[:, 3:]).max() > 1e-3


def test_softplus_is_stable_and_exact_at_zero():
    z = np.array([-800.0, -30.0, 0.0, 30.0, 800.0])
    np.testing.assert_allclose(nn.softplus(z), np.logaddexp(0.0, z), rtol=1e-15)
    g = sg.grad(lambda t: snp.sum(nn.softplus(t)))(z)
    np.testing.assert_allclose(g, np.exp(-np.logaddexp(0.0, -z)), rtol=1e-14)  # the logistic function
    h = sg.hessian(lambda t: snp.sum(nn.softplus(t)))(np.array([0.0]))
    assert float(h[0, 0]) == pytest.approx(0.25)


@pytest.mark.skipif(not _llvm_available(), reason="the LLVM backend (codegen, llvmlite) is not importable")
def test_transformer_llvm_step_matches_numpy_backend():
    """Embedding gather/scatter, attention, dropout masks, AdamW: the native step equals the evaluator's."""
    rng = np.random.default_rng(0)
    params = nn.init_transformer(rng, 20, 16, 2, 1, 8)
    opt = optim.adamw(1e-2)
    state = opt.init(params)

    def step(p, s, batch):
        x, y = batch
        loss, g = sg.value_and_grad(nn.transformer_loss)(p, x, y, 2, 0.1, s["step"])
        p, s = opt.update(g, s, p)
        return p, s, loss

    batch = (rng.integers(0, 20, (4, 8)).astype(np.int32), rng.integers(0, 20, (4, 8)).astype(np.int32))
    out = {}
    for backend in ("numpy", "llvm"):
        cf = sg.compile(step, backend=backend)
        p, s = params, state
        for _ in range(3):
            p, s, loss = cf(p, s, batch)
        out[backend] = (p, s, float(loss))
    assert out["llvm"][2] == pytest.approx(out["numpy"][2], rel=1e-5)
    for a, b in zip(sg.tree_leaves(out["llvm"][:2]), sg.tree_leaves(out["numpy"][:2])):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
