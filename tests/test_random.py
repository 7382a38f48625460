"""Keyed random numbers (`sg.random`) and the warning for np.random drawn while a compiled function is traced."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import symgraph as sg


def test_keys_are_reproducible_and_split_apart():
    k = sg.random.key(0)
    assert isinstance(k, np.uint64) and k == sg.random.key(0) and k != sg.random.key(1)
    k1, k2 = sg.random.split(k)
    assert len({int(k), int(k1), int(k2)}) == 3
    np.testing.assert_array_equal(sg.random.split(k, 5)[:2], sg.random.split(k, 2))  # counter-based: a prefix
    assert sg.random.fold_in(k, 3) != sg.random.fold_in(k, 4)


def test_distributions_have_the_right_moments():
    k = sg.random.key(42)
    n = 200_000
    z = sg.random.normal(k, (n,))
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs(np.mean(z ** 4) - 3.0) < 0.05  # kurtosis of a normal
    u = sg.random.uniform(k, (n,), minval=-2.0, maxval=3.0)
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.02
    b = sg.random.bernoulli(k, 0.3, (n,))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 0.005
    p = np.array([0.1, 0.2, 0.7])
    c = sg.random.categorical(k, np.broadcast_to(np.log(p), (n, 3)))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / n, p, atol=0.005)
    perm = sg.random.permutation(k, 10)
    np.testing.assert_array_equal(np.sort(perm), np.arange(10))
    assert sg.random.normal(k, (3, 4), dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_compiled_step_draws_fresh_noise_per_call_and_matches_eager(backend):
    def noisy(x, key):
        key, sub = sg.random.split(key)
        return x + sg.random.normal(sub, x.shape), key

    cf = sg.compile(noisy, backend=backend)
    x, k = np.zeros(1000), sg.random.key(7)
    y1, k_next = cf(x, k)
    y2, _ = cf(x, k_next)
    assert not np.array_equal(y1, y2)                        # fresh per call
    e1, ek = noisy(x, k)                                     # eager: the same draw
    np.testing.assert_allclose(y1, e1, rtol=1e-12, atol=1e-12)
    assert ek == k_next
    # uniform and bernoulli are bitwise the same compiled and eager
    f = lambda key: (sg.random.uniform(key, (64,), dtype=np.float32), sg.random.bernoulli(key, 0.5, (64,)))  # noqa
    for got, want in zip(sg.compile(f, backend=backend)(k), f(k)):
        np.testing.assert_array_equal(got, want)


def test_gradients_through_noise_are_the_noise():
    k = sg.random.key(3)
    g = sg.grad(lambda w, key: np.sum(w * sg.random.normal(key, (5,))))(np.ones(5), k)
    np.testing.assert_allclose(g, sg.random.normal(k, (5,)), rtol=1e-12)


def test_bad_keys_and_shapes_are_clear_errors():
    with pytest.raises(sg.DTypeError, match="integer"):
        sg.random.key(1.5)
    with pytest.raises(sg.DTypeError, match="key"):
        sg.random.normal(np.float64(1.0), (3,))
    with pytest.raises(sg.ShapeError, match="negative"):
        sg.random.uniform(sg.random.key(0), (-1,))
    with pytest.raises(sg.DTypeError, match="float32 or float64"):
        sg.random.normal(sg.random.key(0), (2,), dtype=np.int32)
    with pytest.raises(sg.UnsupportedOpError, match="permutation"):
        sg.trace(lambda k: sg.random.permutation(k, 3), np.uint64(1))


def _frozen(record):
    return [w for w in record if issubclass(w.category, sg.random.FrozenRandomnessWarning)]


def test_np_random_global_generator_in_a_compiled_function_warns_once():
    cf = sg.compile(lambda x: x + np.random.normal(size=x.shape))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cf(np.zeros(3))
        cf(np.zeros(4))  # a new signature traces again: no second warning
    w = _frozen(rec)
    assert len(w) == 1
    assert "global generator" in str(w[0].message) and "sg.random" in str(w[0].message)
    assert w[0].filename == __file__  # points at the user's function


def test_a_closed_over_generator_and_default_rng_inside_warn():
    rng = np.random.default_rng(0)

    def f(x):
        return x * rng.uniform(size=3)

    def g(x):
        return x * np.random.default_rng().uniform(size=3)

    for fn, what in ((f, "'rng'"), (g, "default_rng")):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            sg.compile(fn)(np.ones(3))
        w = _frozen(rec)
        assert len(w) == 1 and what in str(w[0].message), [str(x.message) for x in rec]


def test_no_warning_without_np_random():
    k = sg.random.key(0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sg.compile(lambda x, k: x + sg.random.normal(k, (3,)))(np.zeros(3), k)
        sg.compile(lambda x: np.tanh(x))(np.zeros(3))
    assert not _frozen(rec)


def test_generators_reached_through_self_or_a_dict_warn_and_seeded_default_rng_does_not():
    class Model:
        def __init__(self):
            self.rng = np.random.default_rng(0)

        def noisy(self, x):
            return x + self.rng.normal(size=x.shape)

    gens = {"rng": np.random.default_rng(1)}

    def from_dict(x):
        return x + gens["rng"].normal(size=x.shape)

    def seeded(x):
        return x + np.random.default_rng(42).normal(size=x.shape)   # the same numbers in NumPy too

    for fn, what in ((Model().noisy, "self.rng"), (from_dict, "gens['rng']"), (seeded, None)):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            sg.compile(fn)(np.zeros(3))
        w = _frozen(rec)
        if what is None:
            assert not w
        else:
            assert len(w) == 1 and what in str(w[0].message)


def test_more_bad_input():
    with pytest.raises(sg.DTypeError, match="64 bits"):
        sg.random.key(2 ** 70)
    assert sg.random.key(-1) == sg.random.key(2 ** 64 - 1)   # int64 -1 and uint64 max are the same 64 bits
    with pytest.raises(sg.ShapeError, match="non-negative"):
        sg.random.permutation(sg.random.key(0), -1)
    with pytest.raises(sg.ShapeError, match="no categories"):
        sg.random.categorical(sg.random.key(0), np.zeros((3, 0)))
