"""Structural NumPy functions (issue 17): cumsum/cumprod, diff, sort, triangles and diagonals, flips and rolls,
tiling, splitting, padding, windows and convolutions, selections, gathers and scatters along an axis.

Each row is plain NumPy code. For each: the traced value equals NumPy's in
float32 and float64 on several shapes (0-d where NumPy accepts it, size 0,
size 1, non-contiguous input), check_grads in both modes to order 2, vmap
against a loop, and the LLVM-compiled result against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph.errors import DTypeError, ShapeError, TracerConversionError, UnsupportedOpError

swv = np.lib.stride_tricks.sliding_window_view
pytestmark = [pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors are deprecated"),
              pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")]

# (name, f, input shapes per variant (a tuple of shapes: one per argument), grads?)
ROWS = [
    ("cumsum", lambda x: np.cumsum(x, axis=-1), [((7,),), ((3, 5),), ((0,),), ((1,),), ((2, 0, 3),)], True),
    ("cumsum_flat", lambda x: np.cumsum(x), [((3, 4),), ((),), ((1, 1),)], True),
    ("cumsum_axis0", lambda x: x.cumsum(0) if False else np.cumsum(x, 0), [((4, 3),), ((9,),)], True),
    ("cumprod", lambda x: np.cumprod(x, axis=0), [((6,),), ((4, 3),), ((0,),), ((1,),)], True),
    ("cumprod_flat", lambda x: np.cumprod(x), [((2, 3),), ((),)], True),
    ("diff", lambda x: np.diff(x), [((6,),), ((3, 5),), ((1,),), ((0,),)], True),
    ("diff2_axis0", lambda x: np.diff(x, n=2, axis=0), [((5, 2),), ((6,),)], True),
    ("diff_prepend", lambda x: np.diff(x, prepend=0.5, append=x[..., :1]), [((4,),), ((2, 3),)], True),
    ("ediff1d", lambda x: np.ediff1d(x, to_begin=[1.0, 2.0], to_end=3.0), [((2, 3),), ((1,),), ((),)], True),
    ("gradient", lambda x: np.gradient(x, 0.5), [((6,),), ((2,),)], True),
    ("gradient_2d", lambda x: np.stack(np.gradient(x, 2.0, 0.5, edge_order=2)), [((4, 3),)], True),
    ("gradient_coords", lambda x: np.stack(np.gradient(x, np.array([0.0, 0.5, 1.7, 2.0]), np.arange(3.0) * 0.5)),
     [((4, 3),)], True),
    ("gradient_coords_o2", lambda x: np.gradient(x, np.array([0.0, 0.5, 1.7, 2.0, 3.5]), edge_order=2, axis=-1),
     [((5,),), ((2, 5),)], True),
    ("sort", lambda x: np.sort(x), [((7,),), ((3, 5),), ((0,),), ((1,),), ((2, 0),)], True),
    ("sort_axis0", lambda x: np.sort(x, axis=0), [((5, 3),), ((4,),)], True),
    ("sort_flat", lambda x: np.sort(x, axis=None), [((3, 4),), ((),)], True),
    ("sort_long_rows", lambda x: np.sort(x, axis=0), [((40, 2),), ((64,),), ((33,),)], True),
    ("argsort", lambda x: np.argsort(x, axis=-1), [((7,),), ((3, 5),), ((0,),), ((1,),)], False),
    ("argsort_long_rows", lambda x: np.argsort(x), [((2, 50),), ((128,),)], False),
    ("argsort_axis0", lambda x: np.argsort(x, axis=0), [((5, 2),)], False),
    ("sort_by_argsort", lambda x: np.take_along_axis(x, np.argsort(x, axis=1), axis=1), [((3, 6),)], True),
    ("partition", lambda x: np.sort(np.partition(x, 2)[..., :3]), [((6,),), ((2, 5),)], True),
    ("argpartition_topk", lambda x: np.take_along_axis(x, np.argpartition(x, -2)[..., -2:], -1).sum(-1),
     [((6,),), ((3, 4),)], True),
    ("tril", lambda x: np.tril(x), [((4, 4),), ((3, 5),), ((2, 3, 4),), ((0, 3),), ((1, 1),)], True),
    ("tril_k", lambda x: np.tril(x, k=1), [((4, 3),), ((5,),)], True),
    ("triu", lambda x: np.triu(x, -1), [((4, 5),), ((2, 3, 3),)], True),
    ("diag_vec", lambda x: np.diag(x, 1), [((4,),), ((1,),), ((0,),)], True),
    ("diag_vec_neg", lambda x: np.diag(x, -2), [((3,),)], True),
    ("diag_mat", lambda x: np.diag(x, -1), [((4, 5),), ((3, 3),)], True),
    ("diagflat", lambda x: np.diagflat(x, 1), [((2, 2),), ((),)], True),
    ("diagonal", lambda x: np.diagonal(x, 1, 0, 2), [((3, 2, 4),), ((4, 1, 2),)], True),
    ("trace", lambda x: np.trace(x), [((4, 4),), ((3, 5),), ((2, 3, 2),), ((0, 0),)], True),
    ("trace_offset", lambda x: np.trace(x, offset=-1, axis1=1, axis2=0), [((4, 3),)], True),
    ("flip", lambda x: np.flip(x), [((5,),), ((3, 4),), ((),), ((0, 2),)], True),
    ("flip_axis", lambda x: np.flip(x, axis=(0, -1)), [((2, 3, 4),)], True),
    ("fliplr", lambda x: np.fliplr(x), [((3, 4),)], True),
    ("flipud", lambda x: np.flipud(x), [((3, 4),), ((5,),)], True),
    ("rot90", lambda x: np.rot90(x), [((3, 4),), ((2, 3, 4),)], True),
    ("rot90_k", lambda x: np.concatenate([np.rot90(x, k, (1, 0)).ravel() for k in (2, 3, 4, -1)]), [((3, 4),)], True),
    ("roll", lambda x: np.roll(x, 2), [((5,),), ((3, 4),), ((0,),), ((1,),)], True),
    ("roll_axes", lambda x: np.roll(x, (1, -2, 5), axis=(0, 1, 0)), [((3, 4),)], True),
    ("rollaxis", lambda x: np.rollaxis(x, 2, 0) * np.rollaxis(x, 0, 3).sum(), [((2, 3, 4),)], True),
    ("swapaxes_kw", lambda x: np.swapaxes(x, axis1=0, axis2=-1), [((2, 3, 4),)], True),
    ("tile", lambda x: np.tile(x, (2, 3)), [((3,),), ((2, 3),), ((),), ((0, 2),)], True),
    ("tile_short_reps", lambda x: np.tile(x, 2), [((2, 3),)], True),
    ("repeat", lambda x: np.repeat(x, 3), [((2, 2),), ((),), ((0,),)], True),
    ("repeat_axis", lambda x: np.repeat(x, [1, 0, 2], axis=1), [((2, 3),)], True),
    ("repeat_axis0", lambda x: np.repeat(x, 2, axis=0), [((3, 2),)], True),
    ("split", lambda x: np.concatenate([s * (i + 1) for i, s in enumerate(np.split(x, 3))]), [((6,),), ((3, 2),)],
     True),
    ("split_indices", lambda x: np.concatenate([s.sum(1) * (i + 1) for i, s in enumerate(np.split(x, [1, 3], axis=1))]),
     [((2, 5),)], True),
    ("array_split", lambda x: np.concatenate([s.sum(0, keepdims=True) for s in np.array_split(x, 3)]),
     [((7,),), ((5, 2),)], True),
    ("hsplit", lambda x: np.concatenate([s.ravel() * (i + 2) for i, s in enumerate(np.hsplit(x, 2))]),
     [((3, 4),), ((4,),)], True),
    ("vsplit", lambda x: np.concatenate([s.ravel() * (i + 2) for i, s in enumerate(np.vsplit(x, 2))]), [((4, 3),)],
     True),
    ("dsplit", lambda x: np.concatenate([s.ravel() * (i + 2) for i, s in enumerate(np.dsplit(x, [1]))]),
     [((2, 2, 3),)], True),
    ("pad_constant", lambda x: np.pad(x, 2), [((3,),), ((2, 3),), ((0,),), ((),)], True),
    ("pad_constant_values", lambda x: np.pad(x, ((1, 0), (2, 3)), constant_values=((1.5, 2.0), (-1.0, 4.0))),
     [((2, 3),)], True),
    ("pad_edge", lambda x: np.pad(x, ((3, 1), (0, 2)), mode="edge"), [((2, 3),), ((1, 1),)], True),
    ("pad_reflect", lambda x: np.pad(x, (4, 6), mode="reflect"), [((3,),), ((4, 3),)], True),
    ("pad_symmetric", lambda x: np.pad(x, (5, 2), mode="symmetric"), [((3,),), ((2, 3),)], True),
    ("pad_wrap", lambda x: np.pad(x, (4, 7), mode="wrap"), [((3,),), ((2, 2),)], True),
    ("pad_maximum", lambda x: np.pad(x, ((1, 2), (0, 3)), mode="maximum"), [((3, 4),), ((1, 2),)], True),
    ("pad_minimum_stat", lambda x: np.pad(x, 2, mode="minimum", stat_length=((1, 2), (3, 1))), [((4, 5),)], True),
    ("pad_mean", lambda x: np.pad(x, (2, 1), mode="mean", stat_length=2), [((5,),), ((3, 4),)], True),
    ("pad_median", lambda x: np.pad(x, ((1, 1), (2, 0)), mode="median"), [((4, 5),), ((3, 3),)], True),
    ("pad_linear_ramp", lambda x: np.pad(x, ((2, 3), (1, 2)), mode="linear_ramp", end_values=((1.5, -2.0), (0.0, 3.0))),
     [((3, 4),), ((1, 1),)], True),
    ("kron", lambda a, b: np.kron(a, b), [((2, 3), (3, 2)), ((3,), (2, 2)), ((), (3,))], True),
    ("cross", lambda a, b: np.cross(a, b), [((3,), (3,)), ((4, 3), (3,)), ((2, 2), (2, 2)), ((3, 2), (3,))], True),
    ("cross_axes", lambda a, b: np.cross(a, b, axisa=0, axisb=0, axisc=0), [((3, 4), (3, 4))], True),
    ("select", lambda x: np.select([x > 0.5, x < -0.5], [x * x, np.sin(x)], default=-x), [((5,),), ((2, 3),), ((),)],
     True),
    ("piecewise", lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: -v * v, lambda v: np.exp(v)]),
     [((6,),), ((),)], True),
    ("piecewise_otherwise", lambda x: np.piecewise(x, [x < -0.5, x > 0.5], [0.5, lambda v: v ** 3, lambda v: 2 * v]),
     [((6,),)], True),
    ("nan_to_num", lambda x: np.nan_to_num(np.where(x > 1, np.inf, np.where(x < -1, -np.inf,
                                                                                np.where(abs(x) < 0.2, np.nan, x)))),
     [((9,),), ((2, 5),), ((),)], True),
    ("nan_to_num_vals", lambda x: np.nan_to_num(x / (x > 0), nan=1.0, posinf=9.0, neginf=-9.0), [((6,),)], False),
    ("take_along_axis", lambda x: np.take_along_axis(x, np.array([[0, 2, 2, 1]]), axis=1), [((3, 3),)], True),
    ("take_along_axis_neg", lambda x: np.take_along_axis(x, np.array([[-1], [0]]), axis=0), [((2, 4),)], True),
    ("take_along_axis_none", lambda x: np.take_along_axis(x, np.array([5, 0, 5]), axis=None), [((2, 3),)], True),
    ("convolve_full", lambda a, v: np.convolve(a, v), [((5,), (3,)), ((2,), (4,)), ((1,), (1,))], True),
    ("convolve_same", lambda a, v: np.convolve(a, v, mode="same"), [((6,), (3,)), ((3,), (4,)), ((5,), (2,))], True),
    ("convolve_valid", lambda a, v: np.convolve(a, v, "valid"), [((6,), (3,)), ((3,), (5,))], True),
    ("correlate", lambda a, v: np.concatenate([np.correlate(a, v, m) for m in ("full", "same", "valid")]),
     [((5,), (3,)), ((2,), (4,))], True),
    ("sliding_window_view", lambda x: swv(x, 3) @ np.array([1.0, -2.0, 0.5]), [((6,),), ((3,),)], True),
    ("sliding_window_view_2d", lambda x: swv(x, (2, 2)).sum((-1, -2)) ** 2, [((3, 4),)], True),
    ("sliding_window_view_axis", lambda x: swv(x, 2, axis=0) * 1.5, [((4, 3),)], True),
    # linear algebra forms (numpy/linear_algebra.py)
    ("einsum_interleaved", lambda a, b: np.einsum(a, [0, 1], b, [2, 1], [0, 2]), [((3, 4), (2, 4))], True),
    ("einsum_interleaved_implicit", lambda a, b: np.einsum(a, [1, 0], b, [1, 2]), [((3, 4), (3, 2))], True),
    ("einsum_interleaved_ellipsis", lambda a, b: np.einsum(a, [Ellipsis, 1], b, [0, 1], [Ellipsis, 0]),
     [((2, 3, 4), (5, 4))], True),
    ("einsum_diag", lambda x: np.einsum("ii->i", x), [((4, 4),), ((1, 1),), ((0, 0),)], True),
    ("einsum_trace", lambda x: np.einsum("ii", x), [((4, 4),)], True),
    ("einsum_diag_batched", lambda x: np.einsum("bii->bi", x), [((2, 3, 3),)], True),
    ("einsum_repeated_mixed", lambda a, b: np.einsum("iji,j->i", a, b), [((3, 2, 3), (2,))], True),
    ("einsum_interleaved_diag", lambda x: np.einsum(x, [0, 0], [0]), [((3, 3),)], True),
    ("norm_vec", lambda x: np.stack([np.linalg.norm(x, o) for o in (None, 2, 1, -1, np.inf, -np.inf, 3, 0.5, -2)]),
     [((5,),), ((1,),)], True),
    ("norm_vec_axis", lambda x: np.linalg.norm(x, 3, axis=1, keepdims=True), [((3, 4),)], True),
    ("norm_count", lambda x: np.linalg.norm(np.where(x > 0, x, 0.0), 0), [((6,),)], False),
    ("norm_mat", lambda x: np.stack([np.linalg.norm(x, o) for o in (None, "fro", 1, -1, np.inf, -np.inf)]),
     [((3, 4),), ((1, 1),)], True),
    ("norm_mat_axes", lambda x: np.stack([np.linalg.norm(x, o, axis=(2, 0)) for o in ("fro", 1, -1, np.inf, -np.inf)]),
     [((2, 3, 4),)], True),
    ("norm_nd", lambda x: np.linalg.norm(x), [((2, 3, 4),), ((),), ((0,),)], True),
    ("dot_nd", lambda a, b: np.dot(a, b), [((2, 3), (4, 3, 5)), ((2, 2, 3), (2, 3, 4)), ((3,), (2, 3, 2))], True),
    ("dot_nd_vec", lambda a, b: np.dot(a, b), [((2, 3, 4), (4,))], True),
]

IDS = [r[0] for r in ROWS]


def _draw(shapes, dtype, seed=0, noncontig=False):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if noncontig and len(s) >= 1:
            big = rng.standard_normal(tuple(d * 2 for d in s[:-1]) + (s[-1] * 2,)).astype(dtype)
            out.append(big[tuple(slice(None, None, 2) for _ in s)])
        else:
            out.append(np.asarray(rng.standard_normal(s), dtype))
    return out


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if np.dtype(dtype) == np.float32 else dict(rtol=1e-11, atol=1e-11)


def _assert_same(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, **_tol(dtype))


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_match_numpy(row, dtype):
    name, f, variants, _ = row
    for shapes in variants:
        for noncontig in (False, True):
            args = _draw(shapes, dtype, noncontig=noncontig)
            want = f(*args)
            got = sg.trace(f, *args).evaluate(*args)
            _assert_same(got, want, dtype)


@pytest.mark.parametrize("row", [r for r in ROWS if r[3]], ids=[r[0] for r in ROWS if r[3]])
def test_grads_order2_both_modes(row):
    name, f, variants, _ = row
    for shapes in variants[:2]:
        args = _draw(shapes, np.float64, seed=1)
        if any(a.size == 0 for a in args):
            continue
        sg.check_grads(f, args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_vmap_equals_loop(row):
    name, f, variants, _ = row
    shapes = variants[0]
    draws = [_draw(shapes, np.float64, seed=s) for s in range(3)]
    batch = [np.stack([d[i] for d in draws]) for i in range(len(shapes))]
    got = sg.vmap(f)(*batch)
    want = np.stack([f(*d) for d in draws])
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_compiled_matches_numpy(row):
    name, f, variants, grads = row
    for shapes in variants:
        args = _draw(shapes, np.float64, seed=2)
        _assert_same(sg.compile(f)(*args), f(*args), np.float64)
    if grads and all(a.size for a in _draw(variants[0], np.float64)):
        args = _draw(variants[0], np.float64, seed=3)
        loss = lambda *a: np.sum(np.sin(f(*a)))  # noqa: E731
        np.testing.assert_allclose(sg.compile(sg.grad(loss))(*args), sg.grad(loss)(*args), rtol=1e-10, atol=1e-12)


# ----- specific facts -----


@pytest.mark.parametrize("n", [6, 40])
def test_long_cumprod_gradient_is_exact_with_zeros(n):
    x = np.random.default_rng(n).choice([0.0, 1.0, -1.0, 2.0, -0.5], n)
    w = np.arange(1.0, n + 1)
    f = lambda v: np.sum(np.cumprod(v) * w)  # noqa: E731
    want = np.array([sum(w[k] * np.prod(np.delete(x[:k + 1], i)) for k in range(i, n)) for i in range(n)])
    np.testing.assert_array_equal(sg.grad(f)(x), want)
    np.testing.assert_array_equal(sg.compile(sg.grad(f))(x), want)
    t = np.random.default_rng(1).standard_normal(n)
    np.testing.assert_allclose(sg.jvp(f, (x,), (t,))[1], want @ t, rtol=1e-12)
    sg.check_grads(f, (np.random.default_rng(2).uniform(0.5, 1.5, n),), order=2)


def test_cumprod_gradient_is_exact_with_zeros_and_negatives():
    x = np.array([2.0, 0.0, -3.0, 0.0, 1.5, -0.5])
    f = lambda x: np.sum(np.cumprod(x) * np.arange(1.0, 7.0))  # noqa: E731
    g = sg.grad(f)(x)
    # d/dx_i sum_k w_k prod_{j<=k} x_j = sum_{k>=i} w_k prod_{j<=k, j!=i} x_j
    want = np.array([sum((k + 1) * np.prod(np.delete(x[:k + 1], i)) for k in range(i, 6)) for i in range(6)])
    np.testing.assert_array_equal(g, want)
    assert np.isfinite(sg.hessian(f)(x)).all()
    sg.check_grads(f, (x,), order=2)
    np.testing.assert_array_equal(sg.compile(sg.grad(f))(x), want)


def test_cumsum_and_cumprod_are_numpys_bit_for_bit():
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((5, 32)).astype(dtype) * 10.0 ** rng.integers(-3, 4, (5, 32))
        for f in (lambda v: np.cumsum(v, 1), lambda v: np.cumprod(v, 1), lambda v: np.cumsum(v[:, :7], 0)):
            np.testing.assert_array_equal(sg.trace(f, x).evaluate(x), f(x))
            np.testing.assert_array_equal(sg.compile(f)(x), f(x))
        # cumsum is the scan primitive at every length: NumPy's left-to-right sums, evaluated and compiled
        for y, ax in ((rng.standard_normal(5000).astype(dtype), 0), (rng.standard_normal((300, 70)).astype(dtype), 0),
                      (rng.standard_normal((70, 300)).astype(dtype), 1), (rng.standard_normal((3, 200, 4)).astype(dtype), 1)):
            f = lambda v, ax=ax: np.cumsum(v, axis=ax)  # noqa: E731
            np.testing.assert_array_equal(sg.trace(f, y).evaluate(y), f(y))
            np.testing.assert_array_equal(sg.compile(f)(y), f(y))
        z = (1.0 + rng.standard_normal(1000) / 1000).astype(dtype)  # cumprod: the scan primitive too
        np.testing.assert_array_equal(sg.compile(np.cumprod)(z), np.cumprod(z))
        np.testing.assert_array_equal(sg.trace(np.cumprod, z).evaluate(z), np.cumprod(z))


def test_compiled_cumsum_is_one_scan_kernel_and_its_gradient_a_reversed_scan():
    x = np.random.default_rng(5).standard_normal((64, 256))
    cf = sg.compile(lambda v: np.cumsum(v, axis=1))
    cf(x)
    assert [n.op.name for n in cf.graph.nodes if n.op.kind != "source"] == ["cumsum"]
    g = sg.grad(lambda v: np.sum(np.cumsum(v, axis=1) * np.arange(256.0)))(x)
    np.testing.assert_array_equal(g, np.broadcast_to(np.cumsum(np.arange(256.0)[::-1])[::-1], x.shape))


def test_cumsum_dtypes_follow_numpy():
    for x in [np.arange(5, dtype=np.int32), np.array([True, False, True]), np.arange(4, dtype=np.uint8),
              np.arange(3.0, dtype=np.float32)]:
        for fn in (np.cumsum, np.cumprod):
            got = sg.trace(lambda v: fn(v), x).evaluate(x)
            assert got.dtype == fn(x).dtype
            np.testing.assert_array_equal(got, fn(x))
    x = np.arange(4, dtype=np.int32)
    assert sg.trace(lambda v: np.cumsum(v, dtype=np.float32), x).evaluate(x).dtype == np.float32


def test_integer_and_bool_inputs_keep_numpys_dtypes():
    rng = np.random.default_rng(3)
    for dt in (np.int32, np.int64, np.bool_):
        x = rng.integers(-3, 4, (4, 5)).astype(dt)
        v = rng.integers(-3, 4, 3).astype(dt)
        for f in (lambda a: np.cumsum(a, 1), lambda a: np.cumprod(a), lambda a: np.diff(a), lambda a: np.trace(a),
                  lambda a: np.pad(a, 1, constant_values=1), lambda a: np.pad(a, 2, mode="symmetric"),
                  lambda a: np.convolve(a[0], v), lambda a: np.correlate(a[0], v, "same"), lambda a: np.tril(a),
                  lambda a: np.kron(a, a[:2, :2]), lambda a: np.sort(a), lambda a: np.roll(a, 1), lambda a: np.tile(a, 2),
                  lambda a: np.select([a > 0], [a]), lambda a: np.nan_to_num(a), lambda a: np.gradient(a[0])):
            try:
                want = f(x)
            except (TypeError, ValueError):
                continue  # NumPy refuses it for this dtype
            got = sg.compile(f)(x)
            assert got.dtype == want.dtype, (dt, got.dtype, want.dtype)
            np.testing.assert_array_equal(got, want)


def test_sort_nan_last_stable_ties_and_ints():
    x = np.array([3.0, np.nan, -1.0, 3.0, np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0])
    np.testing.assert_array_equal(sg.trace(np.sort, x).evaluate(x), np.sort(x))
    np.testing.assert_array_equal(sg.trace(np.argsort, x).evaluate(x), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(sg.compile(np.argsort)(x), np.argsort(x, kind="stable"))
    i = np.array([[3, 1, 2, 1, 0], [0, 0, -5, 7, 7]], np.int32)
    for f in (lambda v: np.sort(v, axis=1), lambda v: np.argsort(v, axis=0), lambda v: np.sort(v, axis=None)):
        got = sg.compile(f)(i)
        assert got.dtype == f(i).dtype
        np.testing.assert_array_equal(got, f(i) if f(i).dtype != np.int64 or True else None)
    b = np.array([True, False, True, False])
    np.testing.assert_array_equal(sg.trace(np.sort, b).evaluate(b), np.sort(b))
    assert sg.trace(np.argsort, x).evaluate(x).dtype == np.int64


@pytest.mark.parametrize("n", [5, 33, 64, 100])
def test_sort_rows_agree_with_numpy_on_ties_nans_and_ints(n):
    rng = np.random.default_rng(n)
    f = rng.integers(-3, 4, (3, n)).astype(float)
    f[rng.random((3, n)) < 0.2] = np.nan
    f[0, :3] = [np.inf, -np.inf, -0.0]
    for x in [f, f.astype(np.float32), rng.integers(-3, 4, (2, n)).astype(np.int32), rng.random((2, n)) < 0.5]:
        for fn in (lambda v: np.argsort(v, axis=1), lambda v: np.sort(v, axis=1), lambda v: np.argsort(v.T, axis=0)):
            want = fn(x) if fn(x).dtype != np.int64 else (np.argsort(x, axis=1, kind="stable")
                                                         if fn(x).shape == x.shape else np.argsort(x.T, 0, kind="stable"))
            np.testing.assert_array_equal(sg.trace(fn, x).evaluate(x), want)
            np.testing.assert_array_equal(sg.compile(fn)(x), want)


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int64, np.uint8])
def test_compiled_sort_is_numpys_stable_sort_bit_for_bit(dt):
    """The native radix sort (codegen/llvm/sort.py) in its three regimes: straight insertion (10), byte digits
    (300) and 11-bit digits (70000); -0.0 and 0.0 in input order, NaNs (signed, with payloads) last in input
    order, infinities, ties; rows along the last axis and along axis 0."""
    rng = np.random.default_rng(7)
    for shape in [(3, 10), (2, 300), (70000,)]:
        x = rng.integers(-4, 5, shape).astype(dt) if np.dtype(dt).kind != "u" else rng.integers(0, 9, shape).astype(dt)
        if np.dtype(dt).kind == "f":
            u = rng.random(shape)
            x[u < 0.1], x[(u > 0.1) & (u < 0.2)], x[(u > 0.2) & (u < 0.25)] = np.nan, -0.0, np.inf
            f = x.reshape(-1)
            f[:3] = [-np.nan, -np.inf, -0.0]
            f.view(np.uint64 if dt == np.float64 else np.uint32)[3] = \
                0x7FF8000000000005 if dt == np.float64 else 0x7FC00005  # a NaN with a payload
        for fn, ref in [(np.sort, lambda v: np.sort(v, kind="stable")),
                        (lambda v: np.argsort(v, axis=0), lambda v: np.argsort(v, axis=0, kind="stable"))]:
            got, want = sg.compile(fn)(x), ref(x)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (dt, shape)


def test_sort_gradient_follows_the_permutation_and_argsort_has_none():
    x = np.array([0.3, -1.0, 2.0, 0.1])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    g = sg.grad(lambda v: np.sum(np.sort(v) * w))(x)
    np.testing.assert_array_equal(g, w[np.argsort(np.argsort(x))])
    g0 = sg.grad(lambda v: np.sum(v * np.argsort(v)))(x)
    np.testing.assert_array_equal(g0, np.argsort(x).astype(float))


def test_partition_contract_and_topk():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 8))
    p = sg.trace(lambda v: np.partition(v, 3, axis=1), x).evaluate(x)
    np.testing.assert_array_equal(p[:, 3], np.partition(x, 3, axis=1)[:, 3])
    assert (p[:, :3] <= p[:, 3:4]).all() and (p[:, 4:] >= p[:, 3:4]).all()
    ap = sg.trace(lambda v: np.argpartition(v, -2, axis=1), x).evaluate(x)
    np.testing.assert_array_equal(np.sort(np.take_along_axis(x, ap, 1)[:, -2:], 1), np.sort(x, 1)[:, -2:])
    with pytest.raises(ShapeError, match="kth"):
        sg.trace(lambda v: np.partition(v, 9), x)


def test_take_along_axis_with_traced_indices_and_broadcasting():
    x = np.arange(12.0).reshape(3, 4)
    idx = np.array([[1], [3], [0]])
    got = sg.compile(lambda v, i: np.take_along_axis(v, i, 1))(x, idx)
    np.testing.assert_array_equal(got, np.take_along_axis(x, idx, 1))
    neg = np.array([[-1, 0]])
    np.testing.assert_array_equal(sg.compile(lambda v, i: np.take_along_axis(v, i, 1))(x, np.broadcast_to(neg, (3, 2))),
                                  np.take_along_axis(x, np.broadcast_to(neg, (3, 2)), 1))
    np.testing.assert_array_equal(sg.trace(lambda v: np.take_along_axis(v, np.array([[2, 0, 1, 1]]), 0), x).evaluate(x),
                                  np.take_along_axis(x, np.array([[2, 0, 1, 1]]), 0))
    with pytest.raises(ShapeError, match="out of bounds"):
        sg.trace(lambda v: np.take_along_axis(v, np.array([[4]]), 1), x)
    with pytest.raises(DTypeError):
        sg.trace(lambda v: np.take_along_axis(v, np.array([[0.5]]), 1), x)


def test_put_along_axis_repeated_traced_indices_last_write_wins():
    x = np.arange(12.0).reshape(3, 4) * 0.1
    idx = np.array([[0, 2, 0], [3, 3, 3], [-1, 1, 3]])   # repeats within a row; -1 and 3 are the same target
    vals = np.arange(9.0).reshape(3, 3) + 100.0
    want = x.copy()
    np.put_along_axis(want, idx, vals, 1)

    def f(a, v, i):  # the indices traced (an argument)
        out = a.copy()
        np.put_along_axis(out, i, v, 1)
        return out

    np.testing.assert_array_equal(sg.trace(f, x, vals, idx).evaluate(x, vals, idx), want)
    np.testing.assert_array_equal(sg.compile(f)(x, vals, idx), want)
    w = np.arange(12.0).reshape(3, 4) + 1.0
    ga, gv = sg.grad(lambda a, v, i: np.sum(f(a, v, i) * w), argnums=(0, 1))(x, vals, idx)
    np.testing.assert_array_equal(ga, np.where(want == x, w, 0.0))   # arr where not written
    np.testing.assert_array_equal(gv, [[0.0, 3.0, 1.0], [0.0, 0.0, 8.0], [0.0, 10.0, 12.0]])  # the last writes
    sg.check_grads(lambda a, v: np.sum(np.sin(f(a, v, idx))), (x, vals), order=2)
    i2 = np.stack([idx, idx[::-1]])
    out = sg.vmap(f)(np.stack([x, 2 * x]), np.stack([vals, vals]), i2)
    np.testing.assert_array_equal(out, np.stack([want, f(2 * x, vals, idx[::-1])]))


def test_put_along_axis_functional_form_and_clear_error():
    x = np.arange(12.0).reshape(3, 4)
    idx = np.array([[1, 1], [3, 0], [0, 2]])
    vals = np.array([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    want = x.copy()
    np.put_along_axis(want, idx, vals, 1)
    f = lambda a, v: snp.put_along_axis(a, idx, v, 1)  # noqa: E731
    np.testing.assert_array_equal(sg.trace(f, x, vals).evaluate(x, vals), want)
    np.testing.assert_array_equal(sg.compile(f)(x, vals), want)
    np.testing.assert_array_equal(snp.put_along_axis(x, idx, vals, 1), want)  # eager: a new array
    sg.check_grads(lambda a, v: np.sum(np.sin(f(a, v))), (x, vals), order=2)
    np.testing.assert_array_equal(sg.vmap(f)(np.stack([x, 2 * x]), np.stack([vals, vals])),
                                  np.stack([want, snp.put_along_axis(2 * x, idx, vals, 1)]))
    # NumPy's in-place spelling writes into a traced array of the running trace (tracing's in-place updates)
    def inplace(a, v):
        out = a.copy()
        assert np.put_along_axis(out, idx, v, 1) is None
        return out

    np.testing.assert_array_equal(sg.trace(inplace, x, vals).evaluate(x, vals), want)
    np.testing.assert_array_equal(sg.compile(inplace)(x, vals), want)
    sg.check_grads(lambda a, v: np.sum(np.sin(inplace(a, v))), (x, vals), order=2)
    with pytest.raises(TracerConversionError, match="argument"):
        sg.trace(lambda a: np.put_along_axis(a, idx, 1.0, 1), x)     # an argument: NumPy would write the caller's
    with pytest.raises(TracerConversionError, match=r"symgraph.numpy.put_along_axis\(arr, indices, values, axis\)"):
        sg.trace(lambda v: np.put_along_axis(np.zeros((3, 4)), idx, v, 1), vals)
    with pytest.raises(TracerConversionError, match="inplace"):
        snp.put_along_axis(x, idx, vals, 1, inplace=True)


def test_add_at_and_maximum_at_functional():
    a = np.array([1.0, -2.0, 3.0, 0.5])
    i = np.array([0, 2, 0, -1, 2])
    b = np.array([1.0, 5.0, 2.0, -3.0, 0.25])
    for fn, uf in ((snp.add_at, np.add), (snp.maximum_at, np.maximum)):
        want = a.copy()
        uf.at(want, i, b)
        np.testing.assert_array_equal(sg.trace(lambda x, y: fn(x, i, y), a, b).evaluate(a, b), want)
        np.testing.assert_array_equal(sg.compile(lambda x, y: fn(x, i, y))(a, b), want)
        sg.check_grads(lambda x, y: np.sum(np.sin(fn(x, i, y))), (a, b), order=2)
    m = np.arange(6.0).reshape(3, 2)
    want = m.copy()
    np.add.at(want, [0, 0, 2], 1.5)
    np.testing.assert_array_equal(sg.trace(lambda x: snp.add_at(x, [0, 0, 2], 1.5), m).evaluate(m), want)


def test_norm_conventions_at_zero_and_singular_value_ords():
    z = np.zeros(3)
    for o in (None, 2, 1, np.inf, 3):
        np.testing.assert_array_equal(sg.grad(lambda v, o=o: np.linalg.norm(v, o))(z), z)
    m = np.array([[1.0, -2.0], [3.0, 4.0]])
    for o in (2, -2, "nuc"):  # from the singular values since issue 18 (tests/test_linalg_spectral.py)
        np.testing.assert_allclose(sg.trace(lambda v, o=o: np.linalg.norm(v, o), m).evaluate(m), np.linalg.norm(m, o),
                                   rtol=1e-14)
    with pytest.raises(ShapeError):
        sg.trace(lambda v: np.linalg.norm(v, 1), np.ones((2, 2, 2)))
    i = np.arange(6).reshape(2, 3)
    assert sg.trace(lambda v: np.linalg.norm(v, 1), i).evaluate(i) == np.linalg.norm(i, 1)


def test_dot_nd_shape_error():
    with pytest.raises(ShapeError, match="not aligned"):
        sg.trace(lambda a: np.dot(a, np.ones((2, 4, 3))), np.ones((2, 3)))


def test_errors_are_symgraph_errors():
    x = np.ones((3, 4))
    cases = [
        (lambda v: np.split(v, 2), ShapeError),
        (lambda v: np.pad(v, 1, mode=lambda *a: None), UnsupportedOpError),
        (lambda v: np.pad(v.astype(np.int64), 1, mode="mean"), UnsupportedOpError),
        (lambda v: np.pad(v, 1, mode="maximum", stat_length=0), ShapeError),
        (lambda v: np.pad(v, -1), ShapeError),
        (lambda v: np.diagonal(v[0]), ShapeError),
        (lambda v: np.convolve(v, v[0]), ShapeError),
        (lambda v: np.convolve(v[0, :0], v[0]), ShapeError),
        (lambda v: np.cross(v, v), ShapeError),
        (lambda v: swv(v, (5, 1)), ShapeError),
        (lambda v: np.select([v > 0], [v, v]), ShapeError),
        (lambda v: np.diff(v, -1), ShapeError),
        (lambda v: np.sort(v, order="a"), UnsupportedOpError),
        (lambda v: np.vsplit(v[0], 2), ShapeError),
        (lambda v: np.gradient(v, np.arange(4.0), np.arange(4.0)), ShapeError),
        (lambda v: np.repeat(v, [1, 2], axis=1), ShapeError),
        (lambda v: np.roll(v, (1, 2, 3), axis=(0, 1)), ShapeError),
        (lambda v: np.pad(v, ((1, 2, 3),)), ShapeError),
        (lambda v: np.select([v > 0, v[:2] > 0], [v, v]), ShapeError),
        (lambda v: np.take_along_axis(v, np.zeros((2, 5), int), 1), ShapeError),
    ]
    for f, err in cases:
        with pytest.raises(err):
            sg.trace(f, x)
        with pytest.raises(sg.SymgraphError):
            sg.trace(f, x)


def test_functions_are_in_the_tables_and_namespace():
    for fn in [np.cumsum, np.cumprod, np.diff, np.ediff1d, np.gradient, np.sort, np.argsort, np.partition,
               np.argpartition, np.tril, np.triu, np.diag, np.diagflat, np.diagonal, np.trace, np.repeat, np.tile,
               np.roll, np.flip, np.fliplr, np.flipud, np.rot90, np.rollaxis, np.split, np.array_split, np.hsplit,
               np.vsplit, np.dsplit, np.pad, np.kron, np.cross, np.select, np.piecewise, np.nan_to_num,
               np.take_along_axis, np.put_along_axis, np.convolve, np.correlate, swv]:
        assert fn in snp.FUNCTIONS, fn
        assert hasattr(snp, fn.__name__), fn.__name__


def test_eager_calls_are_numpys():
    x = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_array_equal(snp.cumsum(x, 1), np.cumsum(x, 1))
    np.testing.assert_array_equal(snp.sort(x), np.sort(x))
    np.testing.assert_array_equal(snp.pad(x, 1, mode="wrap"), np.pad(x, 1, mode="wrap"))


def test_sort_of_a_long_row_compiles_and_differentiates():
    x = np.random.default_rng(0).standard_normal((2, 3000))
    cf = sg.compile(lambda v: np.sort(v, axis=1))
    np.testing.assert_array_equal(cf(x), np.sort(x, axis=1))
    w = np.arange(3000.0)
    g = sg.compile(sg.grad(lambda v: np.sum(np.sort(v, axis=1) * w)))(x)
    np.testing.assert_array_equal(g, w[np.argsort(np.argsort(x, axis=1), axis=1)])


def test_numpy_keyword_spellings_trace():
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    for f in [lambda v: np.swapaxes(v, axis1=0, axis2=2), lambda v: np.swapaxes(a=v, axis1=1, axis2=-1),
              lambda v: np.moveaxis(v, source=[0, 1], destination=[-1, -2]), lambda v: np.reshape(v, shape=(4, 6)),
              lambda v: np.transpose(a=v, axes=(2, 0, 1)), lambda v: np.expand_dims(a=v, axis=(0, 4)),
              lambda v: np.squeeze(v[:1], axis=0), lambda v: np.take(a=v, indices=[1, 0], axis=1),
              lambda v: np.take(v, [30, -30, 2], mode="clip"), lambda v: np.take(v, [30, -30, 2], axis=2, mode="wrap"),
              lambda v: np.concatenate([v, v], axis=None), lambda v: np.stack([v, v], axis=-1, dtype=np.float32),
              lambda v: np.broadcast_to(v[0, 0], shape=(3, 4)), lambda v: np.cumsum(a=v, axis=1),
              lambda v: np.sort(v, axis=None), lambda v: np.flip(m=v, axis=1), lambda v: np.roll(v, shift=1, axis=2),
              lambda v: np.pad(v, pad_width=((0, 0), (1, 1), (2, 0)), mode="edge"),
              lambda v: np.diagonal(v, offset=1, axis1=1, axis2=2), lambda v: np.trace(v, axis1=1, axis2=2)]:
        got, want = sg.trace(f, x).evaluate(x), f(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)  # cumsum: rounding of the doubling scan


def test_ufunc_at_writes_into_traced_arrays_and_names_the_fix_elsewhere():
    a = np.array([1.0, -2.0, 3.0, 0.5])
    i = np.array([0, 2, 0, -1, 2])
    b = np.array([1.0, 5.0, 2.0, -3.0, 0.25])
    for uf in (np.add, np.maximum):
        def f(x, y, uf=uf):
            out = x.copy()
            assert uf.at(out, i, y) is None
            return out

        want = a.copy()
        uf.at(want, i, b)
        np.testing.assert_array_equal(sg.trace(f, a, b).evaluate(a, b), want)
        np.testing.assert_array_equal(sg.compile(f)(a, b), want)
        sg.check_grads(lambda x, y, f=f: np.sum(np.sin(f(x, y))), (a, b), order=2)
    with pytest.raises(TracerConversionError, match=r"np\.add\.at.*argument"):
        sg.trace(lambda v: np.add.at(v, [0, 1], 1.0), a)
    with pytest.raises(UnsupportedOpError, match=r"symgraph\.numpy\.add_at\(a, indices"):
        sg.trace(lambda v: np.add.at(np.zeros(4), [0, 1], v), 1.0)
    with pytest.raises(UnsupportedOpError, match=r"np\.multiply\.at"):
        sg.trace(lambda v: np.multiply.at(v.copy(), [0, 1], 2.0), a)


def test_add_and_multiply_accumulate_are_cumsum_and_cumprod():
    rng = np.random.default_rng(8)
    for x in (np.arange(1, 7, dtype=np.int32).reshape(2, 3), rng.standard_normal((3, 4)), np.array([True, False, True]),
              (np.arange(5) * 60).astype(np.uint8), rng.standard_normal((3, 4)).astype(np.float32)):
        for f in (lambda v: np.add.accumulate(v), lambda v: np.multiply.accumulate(v),
                  lambda v: np.add.accumulate(v, axis=-1), lambda v: np.add.accumulate(v, dtype=np.float32)):
            want = f(x)
            for got in (sg.trace(f, x).evaluate(x), sg.compile(f)(x)):
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
    sg.check_grads(lambda v: np.multiply.accumulate(v, axis=1), (rng.standard_normal((2, 5)),), order=2)
    with pytest.raises(UnsupportedOpError, match="np.subtract.accumulate"):
        sg.trace(lambda v: np.subtract.accumulate(v), np.ones(3))
