"""Row-tiled runs of loop kernels (codegen.kernels.rows, codegen.llvm.rows): same bits, small arena."""

import numpy as np
import pytest

import symgraph as sg
from codegen.kernels import rows as rows_mod


def _residual(q, m):
    """A per-row residual with a Rodrigues-like rotation (several kernel domains per row)."""
    rot, x = q[0:3], q[3:6]
    theta = np.sqrt(np.sum(rot * rot) + 1e-3)
    u = rot / theta
    y = x * np.cos(theta) + np.cross(u, x) * np.sin(theta) + u * np.sum(u * x)
    proj = y[:2] / (y[2] + 5.0)
    return q[6] * (proj * (1.0 + q[7] * np.sum(proj * proj)) - m)


def _blocks(q, m):
    return sg.vmap(_residual)(q, m), sg.vmap(sg.jacobian(_residual))(q, m)


def _inputs(p, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((p, 8)), rng.standard_normal((p, 2))


def _compiled(fn, *args, tiles=True, monkeypatch=None):
    keep = rows_mod.MIN_SEGMENT_ROWS
    if not tiles:
        monkeypatch.setattr(rows_mod, "MIN_SEGMENT_ROWS", 1 << 62)
    cf = sg.compile(fn)
    out = cf(*args)
    if not tiles:
        monkeypatch.setattr(rows_mod, "MIN_SEGMENT_ROWS", keep)
    return cf, out


def _fd_jacobian(q, m, h=1e-6):
    """Central differences of the vectorized residual, column by column."""
    cols = []
    for k in range(q.shape[1]):
        e = np.zeros_like(q)
        e[:, k] = h
        plus = np.stack([_residual(a, b) for a, b in zip(q + e, m)])
        minus = np.stack([_residual(a, b) for a, b in zip(q - e, m)])
        cols.append((plus - minus) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("p", [3001, 4096])
def test_tiled_jacobian_same_bits_and_small_arena(p, monkeypatch):
    monkeypatch.setenv("SYMGRAPH_NUM_THREADS", "1")  # one scratch copy
    q, m = _inputs(p)
    cf, (r, J) = _compiled(_blocks, q, m)
    st = cf.stats
    assert st["row_segments"] >= 1 and st["row_tiled_kernels"] >= 2
    cf0, (r0, J0) = _compiled(_blocks, q, m, tiles=False, monkeypatch=monkeypatch)
    assert cf0.stats["row_segments"] == 0
    np.testing.assert_array_equal(r, r0)
    np.testing.assert_array_equal(J, J0)
    # the run-local intermediates take a tile's rows, not P rows
    assert st["arena_bytes"] < cf0.stats["arena_bytes"] / 4
    # and the values are right: residuals against NumPy, the Jacobian against central differences
    np.testing.assert_allclose(r, np.stack([_residual(a, b) for a, b in zip(q, m)]), rtol=1e-12, atol=1e-12)
    idx = np.arange(0, p, 97)
    np.testing.assert_allclose(J[idx], _fd_jacobian(q[idx], m[idx]), rtol=1e-6, atol=1e-7)


def test_tiled_on_threads_same_bits(monkeypatch):
    q, m = _inputs(20000, seed=1)
    monkeypatch.setenv("SYMGRAPH_NUM_THREADS", "1")
    cf1, out1 = _compiled(_blocks, q, m)
    monkeypatch.setenv("SYMGRAPH_NUM_THREADS", "2")
    cf2, out2 = _compiled(_blocks, q, m)
    assert cf2.stats["row_segments"] >= 1 and cf2.stats["parallel_kernels"] >= 1
    for a, b in zip(out1, out2):
        np.testing.assert_array_equal(a, b)


def test_rows_read_across_stay_correct():
    """A kernel reading a value at another row (a reversal) ends the run before it: with P larger than a
    tile, tiling across it would read rows not computed yet (NaN here when the check is removed)."""
    x = np.random.default_rng(2).standard_normal((40000, 3))

    def f(x):
        s = np.sum(np.sin(x) * x, axis=1)   # (P, 3) -> (P,): row-local
        r = np.exp(s[::-1])                 # reads s at row P - 1 - i
        return r[:, None] * x, r * 2.0

    cf = sg.compile(f)
    got = cf(x)
    r = np.exp(np.sum(np.sin(x) * x, axis=1)[::-1])
    np.testing.assert_allclose(got[0], r[:, None] * x, rtol=1e-13)
    np.testing.assert_allclose(got[1], 2.0 * r, rtol=1e-13)
    assert cf.stats["row_tiled_kernels"] < 3   # the reversal's kernel is not in the same run as s's


def test_rows_reduced_and_scanned_stay_correct():
    """Reductions over the rows and running sums along them are not tiled; the values stay right."""
    x = np.random.default_rng(3).standard_normal((40000, 3))

    def f(x):
        a = np.sin(x) * x
        s = np.sum(a, axis=1)
        col = np.sum(a * s[:, None], axis=0)
        return np.cumsum(s) + s, col

    got = sg.compile(f)(x)
    a = np.sin(x) * x
    s = a.sum(axis=1)
    np.testing.assert_allclose(got[0], np.cumsum(s) + s, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(got[1], (a * s[:, None]).sum(axis=0), rtol=1e-10)


def test_row_local_forms():
    """`_row_local`: row i's elements only, from the affine form of an index."""
    from codegen.kernels.affine import Aff
    from codegen.kernels.expr import Expr

    i, j = Expr.var(0, 100), Expr.var(1, 3)
    assert rows_mod._row_local(Aff(((i, 15), (j, 1)), 3), 100, 15)      # x[i, 3 + j] of (100, 15)
    assert not rows_mod._row_local(Aff(((i, 15), (j, 1)), 13), 100, 15)  # past the row's end
    assert not rows_mod._row_local(Aff(((i, -1),), 99), 100, 1)          # x[99 - i]
    assert not rows_mod._row_local(Aff(((j, 1),), 0), 100, 1)            # no row index: a broadcast


def test_tiled_under_the_plain_entry_same_bits(monkeypatch):
    """A program with an unoptimized entry (`module._plain_entry`: base pointers computed where used) calls
    its runs the same way: the same bits as with the optimized entry."""
    from codegen.llvm import module

    q, m = _inputs(5000, seed=4)
    _, want = _compiled(_blocks, q, m)
    monkeypatch.setattr(module, "PLAIN_ENTRY_MIN_KERNELS", 2)
    cf, got = _compiled(_blocks, q, m)
    assert not cf.stats["entry_optimized"] and cf.stats["row_segments"] >= 1
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
