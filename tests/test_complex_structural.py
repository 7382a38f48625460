"""Structural and windowed NumPy functions on complex values: the values against NumPy (bit for bit where
only data moves), derivatives under JAX's convention against central differences (both modes, order 2),
and the LLVM backend (the complex split) against NumPy; nan_to_num on each part; correlate conjugates v."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.testing import check_grads

RNG = np.random.default_rng(11)
Z = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))

# (function of Z, whether only data moves: then the result is NumPy's bit for bit)
CASES = {
    "triu": (lambda z: np.triu(z, 1), True), "tril": (lambda z: np.tril(z, -1), True),
    "triu_batched": (lambda z: np.triu(np.stack([z, 2 * z]), -1), False),
    "flip": (lambda z: np.flip(z, 0), True), "fliplr": (np.fliplr, True), "flipud": (np.flipud, True),
    "roll": (lambda z: np.roll(z, 1, axis=1), True), "roll_flat": (lambda z: np.roll(z, -2), True),
    "rollaxis": (lambda z: np.rollaxis(z, 1), True), "rot90": (np.rot90, True),
    "tile": (lambda z: np.tile(z, (2, 1)), True), "repeat": (lambda z: np.repeat(z, 2, axis=0), True),
    "repeat_method": (lambda z: z.repeat(2, axis=1), True),
    "pad": (lambda z: np.pad(z, 1), True), "pad_reflect": (lambda z: np.pad(z, 1, mode="reflect"), True),
    "pad_edge": (lambda z: np.pad(z, (1, 2), mode="edge"), True),
    "pad_value": (lambda z: np.pad(z, 1, constant_values=2 + 1j), True),
    "hstack": (lambda z: np.hstack([z, 2 * z]), False), "vstack": (lambda z: np.vstack([z, z]), True),
    "column_stack": (lambda z: np.column_stack([z[0], z[1]]), True),
    "split": (lambda z: np.split(z, 2, axis=1)[1], True), "array_split": (lambda z: np.array_split(z, 3, axis=1)[1], True),
    "hsplit": (lambda z: np.hsplit(z, 2)[0], True), "vsplit": (lambda z: np.vsplit(z, 3)[2], True),
    "atleast_1d": (lambda z: np.atleast_1d(z[0, 0]), True), "atleast_2d": (lambda z: np.atleast_2d(z[0]), True),
    "atleast_3d": (np.atleast_3d, True), "append": (lambda z: np.append(z, z[0]), True),
    "diagflat": (lambda z: np.diagflat(z[0]), True),
    "take_along_axis": (lambda z: np.take_along_axis(z, np.array([[0], [3], [2]]), axis=1), True),
    "cross": (lambda z: np.cross(z[:, :3], z[::-1, :3]), False),
    "cumprod": (lambda z: np.cumprod(z, axis=1), False), "cumprod_method": (lambda z: z.cumprod(axis=0), False),
    "diff": (lambda z: np.diff(z, axis=1), False), "diff2": (lambda z: np.diff(z, n=2), False),
    "ediff1d": (np.ediff1d, False), "trapezoid": (lambda z: np.trapezoid(z, axis=1), False),
    "convolve": (lambda z: np.convolve(z[0], z[1][:3]), False),
    "correlate_full": (lambda z: np.correlate(z[0], z[1][:3], "full"), False),
    "correlate_swapped": (lambda z: np.correlate(z[0][:2], z[1], "same"), False),
    "correlate_valid": (lambda z: np.correlate(z[0], z[1][:2]), False),
    "linspace": (lambda z: np.linspace(z[0, 0], z[0, 1], 5), False),
    "select": (lambda z: np.select([np.real(z) > 0], [z], 0), True),
    "nan_to_num": (np.nan_to_num, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_against_numpy(name):
    f, moves = CASES[name]
    ref = f(Z)
    got = sg.compile(f, backend="numpy")(Z)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if moves:
        assert got.tobytes() == ref.tobytes()
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(sg.trace(f, Z).evaluate(Z) if hasattr(sg.trace(f, Z), "evaluate") else got, ref,
                               rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", sorted(CASES))
def test_derivatives_jax_convention(name):
    f, _ = CASES[name]
    check_grads(f, (Z,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", sorted(set(CASES) - {"cumprod", "cumprod_method"}))
def test_llvm_against_numpy(name):
    f, _ = CASES[name]
    np.testing.assert_allclose(sg.compile(f)(Z), f(Z), rtol=1e-13, atol=1e-14)
    g = sg.compile(sg.grad(lambda z: np.sum(np.abs(f(z)) ** 2)))(Z)
    np.testing.assert_allclose(g, sg.grad(lambda z: np.sum(np.abs(f(z)) ** 2))(Z), rtol=1e-12, atol=1e-13)


def test_complex_cumprod_refused_natively_with_the_fix():
    with pytest.raises(sg.UnsupportedOpError, match="backend='numpy'"):
        sg.compile(lambda z: np.cumprod(z, axis=1))(Z)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_nan_to_num_each_part(dtype):
    z = np.array([np.nan + 1j, complex(np.inf, -np.inf), complex(1, np.nan), 2 - 3j, complex(-np.inf, np.nan)], dtype)
    for backend in ("numpy", "llvm"):
        got = sg.compile(lambda z: np.nan_to_num(z, nan=-1.0, posinf=7.0), backend=backend)(z)
        assert got.dtype == dtype
        assert got.tobytes() == np.nan_to_num(z, nan=-1.0, posinf=7.0).tobytes()
    # derivative 1 on finite parts, 0 on replaced ones, part by part
    g = sg.grad(lambda z: np.sum(np.real(np.nan_to_num(z) * np.conj(z + 0))).real)(np.array([1 + 2j, np.nan + 3j]))
    assert g[0] == 2 * np.conj(1 + 2j)  # JAX: the gradient of |z|^2 is 2 conj(z)


@pytest.mark.parametrize("la,lv", [(5, 3), (3, 5), (4, 4), (1, 3)])
@pytest.mark.parametrize("mode", ["valid", "same", "full"])
def test_correlate_conjugates_v(la, lv, mode):
    a = RNG.standard_normal(la) + 1j * RNG.standard_normal(la)
    v = RNG.standard_normal(lv) + 1j * RNG.standard_normal(lv)
    np.testing.assert_allclose(sg.compile(lambda a, v: np.correlate(a, v, mode), backend="numpy")(a, v),
                               np.correlate(a, v, mode), rtol=1e-14, atol=1e-15)
    # mixed: real a, complex v, and the reverse
    np.testing.assert_allclose(sg.compile(lambda a, v: np.correlate(a, v, mode), backend="numpy")(a.real, v),
                               np.correlate(a.real, v, mode), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(sg.compile(lambda a, v: np.correlate(a, v, mode), backend="numpy")(a, v.real),
                               np.correlate(a, v.real, mode), rtol=1e-14, atol=1e-15)


def test_cond_and_while_with_complex_outputs_differentiate():
    # found by a new user's trial: complex branch outputs had zero derivatives in both modes
    f = lambda z: np.real(sg.cond(np.real(z) > 0, lambda c: c * 2, lambda c: c, z))  # noqa: E731
    assert sg.grad(f)(0.5 + 0.1j) == 2
    _, t = sg.jvp(lambda z: sg.cond(np.real(z) > 0, lambda c: c * 2, lambda c: c * 3, z), (0.5 + 0.1j,), (1 + 1j,))
    assert t == 2 + 2j
    assert sg.compile(sg.grad(f))(-0.5 + 0.1j) == 1
    g = lambda z: np.sum(np.abs(sg.while_loop(lambda c: np.abs(c) < 100, lambda c: c * 2, z, max_steps=20)) ** 2)  # noqa: E731
    z0 = np.complex128(0.5 + 0.1j)
    h = 1e-7
    fd = (g(z0 + h) - g(z0 - h)) / (2 * h) + 1j * (g(z0 + 1j * h) - g(z0 - 1j * h)) / (2 * h)
    np.testing.assert_allclose(sg.grad(g)(z0), np.conj(fd), rtol=1e-6)  # JAX's convention: conj(df/dx + i df/dy)


def test_pad_modes_and_errors_on_complex():
    z = np.array([1 + 2j, 3 - 1j, 0.5j])
    for kw in ({"mode": "linear_ramp", "end_values": 0.5j}, {"mode": "mean"}, {"mode": "mean", "stat_length": 2}):
        want = np.pad(z, 2, **kw)
        for backend in ("numpy", "llvm"):
            np.testing.assert_allclose(sg.compile(lambda z: np.pad(z, 2, **kw), backend=backend)(z), want, rtol=1e-15)
    with pytest.raises(sg.UnsupportedOpError, match="median"):
        sg.trace(lambda z: np.pad(z, 1, mode="median"), z)
    with pytest.raises(sg.DTypeError, match="imaginary"):
        sg.trace(lambda x: np.insert(x, 1, 1j), np.ones(3))  # NumPy: TypeError
    for f in (np.unstack, np.triu, np.tril):
        with pytest.raises(sg.ShapeError):
            sg.trace(f, np.float64(1.0))
