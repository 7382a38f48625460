"""NumPy 2's array-API names (matrix_transpose, unstack, cumulative_sum/prod, vecdot, matvec, vecmat) and
the element-editing functions (delete, insert, compress, resize) on traced values: values against NumPy
(bit for bit: they only move data or repeat cumsum/cumprod), real and complex, derivatives against central
differences (both modes, order 2), the LLVM backend, vmap, and the errors NumPy raises as SymgraphErrors."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.batching import vmap
from symgraph.testing import check_grads

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4))
Z = X + 1j * RNG.standard_normal((3, 4))

CASES = {
    "matrix_transpose": lambda x: np.matrix_transpose(np.stack([x, 2 * x])),
    "unstack": lambda x: np.unstack(x, axis=1)[2],
    "cumulative_sum": lambda x: np.cumulative_sum(x, axis=1),
    "cumulative_sum_initial": lambda x: np.cumulative_sum(x, axis=0, include_initial=True),
    "cumulative_sum_0d": lambda x: np.cumulative_sum(x[0, 0]),
    "cumulative_prod_initial": lambda x: np.cumulative_prod(x[0], include_initial=True),
    "vecdot": lambda x: np.vecdot(x, x[0]),
    "vecdot_axis": lambda x: np.vecdot(x, 3 * x, axis=0),
    "matvec": lambda x: np.matvec(x, x[1]),
    "matvec_batched": lambda x: np.matvec(np.stack([x, -x]), x[2]),
    "vecmat": lambda x: np.vecmat(x[:, 0], x),
    "delete": lambda x: np.delete(x, 1, axis=1),
    "delete_list": lambda x: np.delete(x, [0, 2], axis=0),
    "delete_mask": lambda x: np.delete(x, [True, False, False, True], axis=1),
    "delete_slice": lambda x: np.delete(x, slice(0, 4, 2), axis=1),
    "delete_flat": lambda x: np.delete(x, [0, 5, 11]),
    "insert_column": lambda x: np.insert(x, 1, x[:, 0], axis=1),
    "insert_number": lambda x: np.insert(x, [1, 3], 5.0, axis=1),
    "insert_flat": lambda x: np.insert(x, 2, x[0]),
    "insert_block": lambda x: np.insert(x, 1, 2 * x[:, :1], axis=1),
    "insert_end": lambda x: np.insert(x, 3, x[0], axis=0),
    "compress": lambda x: np.compress([True, False, True], x, axis=0),
    "compress_flat": lambda x: np.compress([0, 1, 1], x),
    "resize": lambda x: np.resize(x, (5, 3)),
    "resize_repeat": lambda x: np.resize(x[0], (3, 7)),
}


@pytest.mark.parametrize("dtype", ["real", "complex"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_derivatives_llvm(name, dtype):
    f = CASES[name]
    x = X if dtype == "real" else Z
    ref = np.asarray(f(x))
    got = sg.compile(f, backend="numpy")(x)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if "vec" in name or "matvec" in name:
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-15)  # another order of the same sums
    else:
        assert got.tobytes() == ref.tobytes()
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    if dtype == "real" or "cumulative_prod" not in name:  # complex cumprod is not compiled natively yet
        np.testing.assert_allclose(sg.compile(f)(x), ref, rtol=1e-13, atol=1e-14)


def test_repeated_elements_add_their_cotangents():
    g = sg.grad(lambda v: np.sum(np.resize(v, (7,)) * np.arange(7.0)))(np.ones(3))
    np.testing.assert_array_equal(g, [0 + 3 + 6, 1 + 4, 2 + 5])
    g = sg.grad(lambda v: np.sum(np.insert(v, [0, 2], v[1]) ** 2))(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g, [2.0, 3 * 2 * 2.0, 6.0])  # v[1] appears three times


def test_vmap_matches_a_python_loop():
    xs = RNG.standard_normal((5, 3, 4))
    for f in (lambda x: np.delete(x, 1, axis=1), lambda x: np.insert(x, 2, x[0], axis=0),
              lambda x: np.cumulative_sum(x, axis=1, include_initial=True), lambda x: np.vecdot(x, x[0])):
        np.testing.assert_allclose(vmap(f)(xs), np.stack([f(x) for x in xs]), rtol=1e-14, atol=1e-15)


def test_errors():
    with pytest.raises(sg.ShapeError, match="at least 2-dimensional"):
        sg.trace(np.matrix_transpose, np.ones(3))
    with pytest.raises(sg.ShapeError, match="axis argument is required"):
        sg.trace(np.cumulative_sum, X)
    with pytest.raises(sg.ShapeError, match="vecdot"):
        sg.trace(lambda x: np.vecdot(x, x[0, :3]), X)
    with pytest.raises(sg.ShapeError, match="matvec"):
        sg.trace(lambda x: np.matvec(x, x[:, 0]), X)
    with pytest.raises(sg.UnsupportedOpError, match="obj must be concrete"):
        sg.trace(lambda x: np.delete(x, x[0, 0].astype(int)), X)
    with pytest.raises(sg.ShapeError, match="delete"):
        sg.trace(lambda x: np.delete(x, 9, axis=1), X)  # NumPy: IndexError
    with pytest.raises(sg.ShapeError, match="insert"):
        sg.trace(lambda x: np.insert(x, 1, np.ones(5), axis=1), X)  # values do not broadcast
    with pytest.raises(sg.UnsupportedOpError, match="condition must be concrete"):
        sg.trace(lambda x: np.compress(x[0] > 0, x, axis=1), X)
    assert sg.compile(lambda x: np.resize(x[:0], (2, 2)), backend="numpy")(X).tobytes() == np.zeros((2, 2)).tobytes()


LINALG_API = {
    "outer": lambda a: np.linalg.outer(a[0, 0], a[1, 1]), "cross": lambda a: np.linalg.cross(a[0], a[1]),
    "trace": lambda a: np.linalg.trace(a, offset=1), "diagonal": lambda a: np.linalg.diagonal(a, offset=-1),
    "tensordot": lambda a: np.linalg.tensordot(a, a[0], axes=1), "vecdot": lambda a: np.linalg.vecdot(a, a[0]),
    "matmul": lambda a: np.linalg.matmul(a, a), "matrix_transpose": lambda a: np.linalg.matrix_transpose(a),
}


@pytest.mark.parametrize("dtype", ["real", "complex"])
@pytest.mark.parametrize("name", sorted(LINALG_API))
def test_numpy2_linalg_names(name, dtype):
    # NumPy 2's np.linalg array-API functions work over the last axes (np.linalg.trace is not np.trace)
    a = RNG.standard_normal((2, 3, 3)) + (1j * RNG.standard_normal((2, 3, 3)) if dtype == "complex" else 0)
    f = LINALG_API[name]
    want = np.asarray(f(a))
    got = sg.compile(f, backend="numpy")(a)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(sg.compile(f)(a), want, rtol=1e-13, atol=1e-14)
    check_grads(f, (a,), order=2, modes=("fwd", "rev"))


def test_numpy2_linalg_name_errors():
    with pytest.raises(sg.ShapeError, match="1-d"):
        sg.trace(lambda a: np.linalg.outer(a, a), X)
    with pytest.raises(sg.ShapeError, match="3 elements"):
        sg.trace(lambda a: np.linalg.cross(a, a), X)
