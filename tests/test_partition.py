"""np.partition / np.argpartition as a selection (issue 17): every result a valid partition (each kth in its
sorted place, nothing larger before it, nothing smaller after, NaN last) in the evaluator (NumPy's
introselect) and compiled (the radix selection of codegen/llvm/select.py), for floats with ties, NaN, -0.0
and infinities, integers, several kth, every axis; derivatives through the gather (check_grads, both modes,
order 2), compiled gradients against the evaluator's, batching; the compiled graph selects, not sorts."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.errors import ShapeError

RNG = np.random.default_rng(17)


def _assert_partition(x, perm, kth, axis=-1):
    """perm is a permutation of every row along axis that partitions x around each k in kth."""
    x, perm = np.moveaxis(x, axis, -1), np.moveaxis(perm, axis, -1)
    n = x.shape[-1]
    assert perm.dtype == np.int64
    np.testing.assert_array_equal(np.sort(perm, axis=-1), np.broadcast_to(np.arange(n), perm.shape))
    got, want = np.take_along_axis(x, perm, -1), np.sort(x, axis=-1)
    for k in np.atleast_1d(kth) % n:
        np.testing.assert_array_equal(got[..., k], want[..., k])  # NaN == NaN here
        kv = want[..., k:k + 1]
        with np.errstate(invalid="ignore"):
            assert not (got[..., :k] > kv).any() and not (got[..., k + 1:] < kv).any()
        # NaN is the largest: none before a number, only NaN after a NaN
        assert not (np.isnan(got[..., :k]) & ~np.isnan(kv)).any()
        assert not (~np.isnan(got[..., k + 1:]) & np.isnan(kv)).any()


def _sample(shape, dtype):
    x = RNG.standard_normal(shape) * 4
    if np.dtype(dtype).kind == "f":
        m = RNG.random(shape)
        x = np.where(m < 0.15, 1.5, x)               # ties
        x = np.where((m >= 0.15) & (m < 0.2), np.nan, x)
        x = np.where((m >= 0.2) & (m < 0.23), -0.0, x)
        x = np.where((m >= 0.23) & (m < 0.25), np.inf, x)
        x = np.where((m >= 0.25) & (m < 0.27), -np.inf, x)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("n", [1, 7, 3000])
def test_compiled_and_evaluated_results_are_partitions(dtype, n):
    x = _sample((3, n), dtype) if dtype is not np.bool_ else RNG.random((3, n)) < 0.5
    kth = sorted({0, n - 1, n // 2})
    perm = sg.compile(lambda v: np.argpartition(v, kth, axis=-1))(x)
    _assert_partition(x, perm, kth)
    ev = sg.trace(lambda v: np.argpartition(v, kth, axis=-1), x).evaluate(x)
    np.testing.assert_array_equal(ev, np.argpartition(x, kth, axis=-1))  # the evaluator is NumPy's introselect
    part = sg.compile(lambda v: np.partition(v, [-1, n // 3]))(x)
    assert part.dtype == x.dtype
    perm2 = sg.compile(lambda v: np.argpartition(v, [-1, n // 3]))(x)
    _assert_partition(x, perm2, [-1, n // 3])
    np.testing.assert_array_equal(part, np.take_along_axis(x, perm2, -1))


def test_all_equal_sorted_reversed_and_adversarial_rows():
    """Rows where a quickselect degrades (all equal, sorted, reversed, organ pipe, few distinct values), floats
    sharing their top bits (one exponent), and keys differing only in the last bit."""
    n = 4097
    base = np.arange(n, dtype=np.float64)
    rows = [np.full(n, 2.0), base, base[::-1], np.concatenate([base[: n // 2], base[n // 2::-1]])[:n],
            (base % 3) - 1.0, 1.0 + base * 2.0 ** -40, np.nextafter(1.0, 2.0) * np.ones(n) - (base % 2) * 2.0 ** -52]
    x = np.stack(rows)
    f = sg.compile(lambda v: np.argpartition(v, (0, 10, n // 2, n - 1)))
    _assert_partition(x, f(x), (0, 10, n // 2, n - 1))


def test_axes_kth_forms_and_errors():
    x = _sample((4, 5, 6), np.float64)
    for axis in (0, 1, 2, -1, None):
        ref = x.ravel() if axis is None else x
        ax = -1 if axis is None else axis
        perm = sg.compile(lambda v: np.argpartition(v, 2, axis=axis))(x)
        _assert_partition(ref, perm, 2, ax)
        ev = sg.trace(lambda v: np.argpartition(v, -2, axis=axis), x).evaluate(x)
        np.testing.assert_array_equal(ev, np.argpartition(x, -2, axis=axis))  # the evaluator is NumPy's
    many = list(range(0, 6))  # more kth than the selection takes: the stable sort, also a partition
    np.testing.assert_array_equal(sg.compile(lambda v: np.partition(v, many * 3 + [5]))(x[0, 0]), np.sort(x[0, 0]))
    for bad in (6, -7):
        with pytest.raises(ShapeError, match="kth"):
            sg.trace(lambda v: np.partition(v, bad), x)
    with pytest.raises(ShapeError, match="kth must be an integer"):
        sg.trace(lambda v: np.partition(v, 1.5), x)


def test_compiled_code_selects_instead_of_sorting():
    f = sg.compile(lambda v: np.partition(v, 5))
    f(np.arange(100.0))
    dump = f.graph.dump()
    assert "argpartition" in dump and "argsort" not in dump and " sort(" not in dump


def test_derivatives_route_to_the_selected_elements():
    """partition's values are x gathered through the permutation: the cotangent of each output reaches the
    element it came from. A top-k loss has the same gradient whatever the arrangement inside the parts."""
    x = RNG.standard_normal((3, 9))
    topk = lambda v: np.sum(np.partition(v, -3, axis=1)[:, -3:] ** 3)  # noqa: E731
    sg.check_grads(topk, (x,), order=2)
    want = np.where(x >= np.sort(x, 1)[:, -3:-2], 3 * x ** 2, 0.0)
    np.testing.assert_allclose(sg.grad(topk)(x), want, rtol=1e-14)
    np.testing.assert_allclose(sg.compile(sg.grad(topk))(x), want, rtol=1e-14)
    kth_value = lambda v: np.sum(np.partition(v, (2, 5), axis=0)[[2, 5]] * np.arange(1.0, 4.0))  # noqa: E731
    y = RNG.standard_normal((8, 3))
    sg.check_grads(kth_value, (y,), order=2)
    np.testing.assert_allclose(sg.compile(sg.grad(kth_value))(y), sg.grad(kth_value)(y), rtol=1e-14)


def test_batching_is_the_loop():
    x = _sample((5, 4, 30), np.float64)
    perm = sg.vmap(lambda v: np.argpartition(v, (3, 20)))(x)
    for i in range(5):
        _assert_partition(x[i], perm[i], (3, 20))
    got = sg.compile(sg.vmap(lambda v: np.partition(v, 7)))(x)
    want = np.sort(x, -1)
    np.testing.assert_array_equal(np.sort(got, -1), want)  # a rearrangement of each row
    np.testing.assert_array_equal(got[..., 7], want[..., 7])
    with np.errstate(invalid="ignore"):
        assert not (got[..., :7] > want[..., 7:8]).any() and not (got[..., 8:] < want[..., 7:8]).any()
