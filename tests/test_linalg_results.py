"""np.linalg's result tuples are NumPy's own classes (QRResult, SVDResult, EighResult, EigResult), so a result or a
cotangent built the way NumPy builds it has the right pytree structure; `symgraph.numpy.linalg` is a module."""

import importlib

import numpy as np
import pytest

import symgraph as sg

RNG = np.random.default_rng(5)
R = RNG.normal(size=(4, 3))
S = RNG.normal(size=(3, 3))
S = S + S.T


@pytest.mark.parametrize("f,arg", [(lambda a: np.linalg.qr(a), R), (lambda a: np.linalg.svd(a, full_matrices=False), R),
                                   (lambda a: np.linalg.eigh(a), S), (lambda a: np.linalg.slogdet(a), S)],
                         ids=["qr", "svd", "eigh", "slogdet"])
def test_results_have_numpy_s_classes_and_differentiate_as_returned(f, arg):
    want = f(arg)
    got = sg.trace(f, arg).evaluate(arg)
    assert type(got) is type(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.abs(g), np.abs(w), rtol=1e-12, atol=1e-12)  # up to the sign gauge
    sg.check_grads(f, (arg,), order=1)
    out, pullback = sg.vjp(f, arg)
    (ct,) = pullback(want)  # a cotangent of NumPy's own structure
    assert ct.shape == arg.shape and np.all(np.isfinite(ct))


def test_qr_to_second_order():
    sg.check_grads(lambda a: np.linalg.qr(a), (R,), order=2)


def test_symgraph_numpy_linalg_is_a_module_with_numpy_s_names():
    mod = importlib.import_module("symgraph.numpy.linalg")
    import symgraph.numpy as snp

    assert snp.linalg is mod
    for name in ("solve", "inv", "det", "slogdet", "cholesky", "qr", "svd", "eigh", "eigvalsh", "norm", "pinv",
                 "lstsq", "matrix_power", "multi_dot", "cond", "matrix_rank", "LinAlgError"):
        assert hasattr(mod, name), name
    a = S + 4 * np.eye(3)
    np.testing.assert_allclose(sg.grad(lambda m: np.sum(mod.inv(m)))(a), sg.grad(lambda m: np.sum(np.linalg.inv(m)))(a))
