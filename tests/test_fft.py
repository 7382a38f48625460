"""FFT: the primitives (symgraph/ops/fourier.py) and np.fft on traced values (docs/fft.md)."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph import lax as L


@pytest.mark.parametrize("op", ["fft_c2c", "fft_r2c", "fft_c2r"])
def test_llvm_backend_compiles_the_primitives_natively(op):
    """The three primitives compile with the LLVM backend (codegen/llvm/fft.py) and agree with numpy.fft."""
    pytest.importorskip("llvmlite")
    x = np.linspace(0.0, 1.0, 8)
    fns = {"fft_c2c": lambda x: L.bind("real", L.bind("fft_c2c", L.cast(x, np.complex128), inverse=False)),
           "fft_r2c": lambda x: L.bind("imag", L.bind("fft_r2c", x)),
           "fft_c2r": lambda x: L.bind("fft_c2r", L.cast(x[:5], np.complex128), n=8)}
    want = {"fft_c2c": np.fft.fft(x).real, "fft_r2c": np.fft.rfft(x).imag,
            "fft_c2r": np.fft.irfft(x[:5].astype(np.complex128), 8, norm="forward")}[op]
    cf = sg.compile(fns[op])
    got = np.asarray(cf(x))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.asarray(sg.compile(fns[op], backend="numpy")(x)), want, rtol=0, atol=1e-14)


import warnings  # noqa: E402

import symgraph.numpy as snp  # noqa: E402

RNG = np.random.default_rng(18)


def _data(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


# (function, keyword arguments, real input only)
CALLS = [
    ("fft", {}, False), ("fft", {"n": 5, "axis": 0}, False), ("fft", {"n": 11}, False),
    ("ifft", {}, False), ("ifft", {"n": 4}, False),
    ("rfft", {}, True), ("rfft", {"n": 7, "axis": 0}, True), ("rfft", {"n": 12}, True),
    ("irfft", {}, False), ("irfft", {"n": 9}, False), ("irfft", {"n": 3, "axis": 0}, False),
    ("hfft", {}, False), ("hfft", {"n": 7}, False), ("ihfft", {}, True), ("ihfft", {"n": 5}, True),
    ("fft2", {}, False), ("ifft2", {"s": (3, 4)}, False), ("fftn", {"axes": (0, 2)}, False),
    ("ifftn", {"s": (5, 2), "axes": (2, 0)}, False), ("fftn", {}, False), ("ifftn", {}, False),
    ("rfft2", {}, True), ("irfft2", {}, False), ("rfftn", {"s": (4, 3), "axes": (0, 1)}, True),
    ("irfftn", {"axes": (0, 2)}, False), ("irfftn", {"s": (3, 5, 7)}, False), ("rfftn", {}, True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_values_equal_numpy_every_function_and_norm(dtype):
    """Every transform (odd and even lengths, batched over the other axes, n/s crop and pad), every norm: NumPy's
    dtype, shape and value. Unscaled results and all of float64/complex128 are NumPy's bits; float32 results with
    a factor are within a few ulps (pocketfft scales single precision in its own order)."""
    x = _data((3, 4, 6), dtype)
    for name, kw, real_only in CALLS:
        if real_only and np.dtype(dtype).kind == "c":
            continue
        for norm in (None, "backward", "ortho", "forward"):
            f = getattr(np.fft, name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # s without axes (NumPy 2 deprecates it)
                want = f(x, **kw, norm=norm)
                got = sg.trace(lambda x: f(x, **kw, norm=norm), x).evaluate(x)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, kw, norm)
            if np.dtype(dtype) in (np.float64, np.complex128) or norm in (None, "backward") and name in (
                    "fft", "rfft", "fft2", "fftn", "rfft2", "rfftn"):
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw} {norm}")
            else:
                np.testing.assert_allclose(got, want, rtol=0, atol=4e-7 * np.abs(want).max(), err_msg=f"{name} {kw}")


def test_integer_and_bool_inputs_give_double_precision_as_numpy():
    i = np.arange(6).reshape(2, 3)
    for name in ("fft", "rfft", "irfft", "hfft", "ihfft", "fftn"):
        want = getattr(np.fft, name)(i)
        got = sg.trace(lambda x: getattr(np.fft, name)(x), i).evaluate(i)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_shifts_and_frequencies():
    x = _data((4, 5), np.complex128)
    for name in ("fftshift", "ifftshift"):
        f = getattr(np.fft, name)
        for axes in (None, 1, (0,), (-1, 0)):
            np.testing.assert_array_equal(sg.trace(lambda x: f(x, axes=axes), x).evaluate(x), f(x, axes=axes))
    for n in (1, 4, 7):
        np.testing.assert_array_equal(snp.fft.fftfreq(n, 0.1), np.fft.fftfreq(n, 0.1))
        np.testing.assert_array_equal(snp.fft.rfftfreq(n, 2.0), np.fft.rfftfreq(n, 2.0))
        # a traced spacing: NumPy's formula in the graph (np.fft.fftfreq is not dispatched but computes it too)
        for fn in (snp.fft.fftfreq, np.fft.fftfreq, snp.fft.rfftfreq, np.fft.rfftfreq):
            got = sg.trace(lambda d: fn(n, d), np.float64(0.1)).evaluate(np.float64(0.1))
            np.testing.assert_allclose(got, getattr(np.fft, fn.__name__)(n, 0.1), rtol=1e-15)
    # d/dd sum(fftfreq(5, d)^2) = -2 * 10 / (25 d^3)
    assert np.isclose(sg.grad(lambda d: np.sum(np.fft.fftfreq(5, d) ** 2))(0.1), -800.0)


def test_namespace_mirrors_numpy_fft_and_computes_eagerly():
    import symgraph.numpy.fft as sfft

    assert snp.fft is sfft
    for name in np.fft.__all__:
        assert callable(getattr(sfft, name)), name
    x = _data((2, 6), np.float32)
    assert sfft.rfft(x).dtype == np.complex64
    np.testing.assert_array_equal(sfft.irfft(sfft.rfft(x), 6), np.fft.irfft(np.fft.rfft(x), 6))
    np.testing.assert_allclose(sg.trace(lambda x: sfft.fft2(x, norm="ortho"), x).evaluate(x),
                               np.fft.fft2(x, norm="ortho"), rtol=0, atol=1e-6)


# ----- derivatives: the cases autograd's tests/test_fft.py checks, here in both modes to order 2 -----

def _hermitian(name, x):
    """Half spectra for the inverse real transforms (so the finite differences see NumPy's use of them)."""
    return getattr(np.fft, name[1:])(x) if name.startswith("ir") else x


GRAD_CASES = [
    ("fft", {}, (5, 5)), ("fft", {"norm": "ortho"}, (5, 5)), ("fft", {"axis": 0}, (5, 5)),
    ("fft", {"n": 3}, (5, 5)), ("fft", {"n": 7}, (5, 5)), ("ifft", {"n": 3}, (5, 5)), ("ifft", {"n": 7}, (5, 5)),
    ("rfft", {"n": 2}, (4, 4)), ("rfft", {"n": 6}, (4, 4)), ("irfft", {"n": 2}, (4, 4)), ("irfft", {"n": 6}, (4, 4)),
    ("rfft", {"norm": "ortho"}, (4, 4)), ("rfft", {"axis": 0}, (4, 4)), ("irfft", {}, (4, 4)),
    ("irfft", {"norm": "ortho"}, (4, 4)), ("ifft", {}, (5, 5)), ("fft2", {}, (5, 5)), ("ifft2", {}, (5, 5)),
    ("fftn", {}, (5, 5)), ("ifftn", {}, (5, 5)), ("rfft2", {}, (4, 4)), ("irfft2", {}, (4, 4)),
    ("rfftn", {}, (4, 4, 4)), ("rfftn", {}, (5, 5, 5)), ("rfftn", {"axes": (0, 2)}, (4, 4, 4)),
    ("irfftn", {}, (4, 4, 4)), ("hfft", {"norm": "forward"}, (3, 5)), ("ihfft", {"n": 7}, (3, 5)),
    ("fftshift", {}, (5, 5)), ("fftshift", {}, (4, 4)), ("fftshift", {"axes": 1}, (5, 5)),
    ("ifftshift", {}, (5, 5)), ("ifftshift", {}, (4, 4)), ("ifftshift", {"axes": 1}, (5, 5)),
] + [(name, {"s": [D + 2, D - 2], "axes": [0, 2]}, (D, D, D)) for name, D in
     (("fft2", 5), ("ifft2", 5), ("fftn", 5), ("ifftn", 5), ("rfft2", 4), ("irfft2", 4), ("rfftn", 4), ("irfftn", 4))]


@pytest.mark.parametrize("name,kw,shape", GRAD_CASES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(GRAD_CASES)])
def test_check_grads_order2_both_modes(name, kw, shape):
    x = _hermitian(name, RNG.standard_normal(shape) / 10.0)
    f = getattr(np.fft, name)
    sg.check_grads(lambda x: f(x, **kw), (x,), order=2, modes=("fwd", "rev"))


def test_gradients_of_subsets_and_real_losses():
    x = RNG.standard_normal((4, 4, 4)) / 10.0
    sg.check_grads(lambda x: np.fft.rfftn(x)[[0, 1, 0], [2, 2, 1]], (x,), order=2, modes=("fwd", "rev"))
    h = np.fft.rfftn(x)
    sg.check_grads(lambda h: np.fft.irfftn(h)[[0, 1, 0], [3, 3, 2]], (h,), order=2, modes=("fwd", "rev"))
    # a spectral loss: sum |rfft x|^2 = (|X_0|^2 + 2 sum_inner |X_k|^2 + |X_nyq|^2); Parseval: n * sum x^2 for the
    # full spectrum, so the gradient of sum |fft x|^2 is 2 n x
    v = RNG.standard_normal(8)
    np.testing.assert_allclose(sg.grad(lambda v: np.sum(np.abs(np.fft.fft(v)) ** 2))(v), 16 * v, rtol=1e-12)
    z = _data((6,), np.complex128)
    np.testing.assert_allclose(sg.grad(lambda z: np.sum(np.abs(np.fft.ifft(z, norm="ortho")) ** 2))(z), 2 * np.conj(z),
                               rtol=1e-12)
    sg.check_grads(lambda z: np.real(np.fft.fft(z) * np.conj(np.fft.ifft(z))), (z,), order=2, modes=("fwd", "rev"))


def test_holomorphic_derivative_is_the_transform_of_the_weights():
    """d/dz sum(w * fft(z)) = F^T w = fft(w) (the DFT matrix is symmetric), and of ifft: ifft(w)."""
    z, w = _data((2, 5), np.complex128), _data((2, 5), np.complex128)
    g = sg.grad(lambda z: np.sum(w * np.fft.fft(z)), holomorphic=True)(z)
    np.testing.assert_allclose(g, np.fft.fft(w), rtol=1e-12)
    g = sg.grad(lambda z: np.sum(w * np.fft.ifft(z, norm="forward")), holomorphic=True)(z)
    np.testing.assert_allclose(g, np.fft.ifft(w, norm="forward"), rtol=1e-12)
    d = sg.grad(lambda z: np.sum(np.fft.fft(z * z) * w[0]), holomorphic=True)  # 2 z (F^T w)
    np.testing.assert_allclose(d(z[0]), 2 * z[0] * np.fft.fft(w[0]), rtol=1e-12)
    np.testing.assert_allclose(sg.jacobian(d, holomorphic=True)(z[0]), np.diag(2 * np.fft.fft(w[0])), atol=1e-12)


def test_vmap_equals_a_python_loop():
    xs = RNG.standard_normal((3, 4, 6))
    for fn in (lambda x: np.fft.rfft(x, axis=0), lambda x: np.fft.fftn(x, norm="ortho"),
               lambda x: np.fft.irfft(np.fft.fft(x), n=5), lambda x: np.fft.fftshift(np.fft.ihfft(x))):
        got = sg.vmap(fn)(xs)
        want = np.stack([fn(x) for x in xs])
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    g = sg.vmap(sg.grad(lambda x: np.sum(np.abs(np.fft.rfft2(x)) ** 2)))(xs)
    np.testing.assert_allclose(g, np.stack([sg.grad(lambda x: np.sum(np.abs(np.fft.rfft2(x)) ** 2))(x) for x in xs]),
                               rtol=1e-13)


def test_compiled_numpy_backend_equals_the_evaluator():
    x = RNG.standard_normal((8, 16)).astype(np.float32)

    def loss(x):
        return np.sum(np.abs(np.fft.rfft2(x, norm="ortho")) ** 2) + np.sum(np.fft.irfft(np.fft.fft(x), 16) ** 2)

    step = sg.compile(sg.value_and_grad(loss), backend="numpy")
    v, g = step(x)
    v0, g0 = sg.value_and_grad(loss)(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(v, v0)
    np.testing.assert_array_equal(g, g0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_llvm_compiled_transforms_equal_numpy(dtype):
    """Every transform of CALLS (odd, even, prime and padded lengths, batched) compiled natively: NumPy's dtype and
    shape, values within a few eps * log2(n) of the result's scale (the native FFT rounds in its own order)."""
    pytest.importorskip("llvmlite")
    x = _data((3, 4, 6), dtype)
    tol = 2e-6 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-14
    fns, wants = [], []
    for name, kw, real_only in CALLS:
        if real_only and np.dtype(dtype).kind == "c":
            continue
        for norm in (None, "ortho"):
            f = getattr(np.fft, name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                wants.append((name, kw, norm, f(x, **kw, norm=norm)))
                fns.append(lambda x, f=f, kw=kw, norm=norm: f(x, **kw, norm=norm))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        got = sg.compile(lambda x: tuple(fn(x) for fn in fns))(x)
    for g, (name, kw, norm, want) in zip(got, wants):
        g = np.asarray(g)
        assert g.dtype == want.dtype and g.shape == want.shape, (name, kw, norm)
        np.testing.assert_allclose(g, want, rtol=0, atol=tol * max(np.abs(want).max(), 1.0),
                                   err_msg=f"{name} {kw} {norm}")


def test_llvm_compiled_gradient_equals_the_evaluator():
    """A spectral loss's value and gradient compiled natively against the evaluator (numpy.fft)."""
    pytest.importorskip("llvmlite")
    x = RNG.standard_normal((4, 30))
    w = RNG.standard_normal(16) ** 2

    def loss(x):
        return np.sum(w * np.abs(np.fft.rfft(x, n=30)) ** 2) + np.sum(np.fft.irfft(np.fft.fft(x)[:, :9], 17) ** 2)

    v, g = sg.compile(sg.value_and_grad(loss))(x)
    v0, g0 = sg.value_and_grad(loss)(x)
    np.testing.assert_allclose(v, v0, rtol=1e-13)
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-12 * np.abs(g0).max())
    h = sg.compile(sg.grad(lambda x: np.sum(sg.grad(loss)(x) * x)))(x)  # second order through the native FFT
    h0 = sg.grad(lambda x: np.sum(sg.grad(loss)(x) * x))(x)
    np.testing.assert_allclose(h, h0, rtol=1e-12, atol=1e-12 * np.abs(h0).max())


def test_llvm_fft_inside_a_scan_body_compiles_natively():
    """A real carry through rfft/irfft in a scan body: the body is compiled as its real graph, natively."""
    pytest.importorskip("llvmlite")

    def f(x):
        def body(c, _):
            return c + np.fft.irfft(np.fft.rfft(c), 8), None
        return np.sum(sg.scan(body, x, None, length=3)[0])

    x = np.linspace(0.0, 1.0, 8)
    cf = sg.compile(f)
    np.testing.assert_allclose(cf(x), sg.trace(f, x).evaluate(x), rtol=1e-13)
    assert cf.stats["loop_regions"] == 1
    np.testing.assert_allclose(sg.compile(sg.grad(f))(x), sg.grad(f)(x), rtol=1e-12)


# ----- bad input: a SymgraphError at the user's line -----

@pytest.mark.parametrize("call,err,match", [
    (lambda x: np.fft.fft(x, norm="bad"), sg.ShapeError, "invalid norm 'bad'"),
    (lambda x: np.fft.rfftn(x, norm="Ortho"), sg.ShapeError, "invalid norm"),
    (lambda x: np.fft.fft(x, n=0), sg.ShapeError, "invalid number of FFT data points"),
    (lambda x: np.fft.irfft(x, n=-2), sg.ShapeError, "invalid number of FFT data points"),
    (lambda x: np.fft.fftn(x, axes=(0, 0)), sg.ShapeError, "repeated axes"),
    (lambda x: np.fft.ifft2(x, axes=(1, -1)), sg.ShapeError, "repeated axes"),
    (lambda x: np.fft.fft(x, axis=2), sg.ShapeError, "out of range"),
    (lambda x: np.fft.fftn(x, s=(2, 3), axes=(0,)), sg.ShapeError, "different lengths"),
    (lambda x: np.fft.rfft(x.astype(complex)), sg.DTypeError, "needs a real input"),
    (lambda x: np.fft.fft(x, out=np.zeros(3, complex)), sg.UnsupportedOpError, "out="),
])
def test_bad_input_raises_a_symgraph_error_at_the_user_line(call, err, match):
    x = np.ones((3, 4))
    with pytest.raises(err, match=match) as info:
        sg.trace(call, x)
    assert info.value.location is not None and info.value.location.filename == __file__
