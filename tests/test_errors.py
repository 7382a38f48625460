"""The bad-input catalog: every public entry point, every kind of bad input.

Each case either raises the right `SymgraphError` subclass, with a message
that names the op / argument / shapes, located at the user's line
(`e.location.filename == __file__` and the line of the offending call or
statement), or gives the correct result (checked against NumPy and the
analytic derivative). Compiled (LLVM) calls with bad input run in a
subprocess, which must exit normally: the process never crashes.

Sections:
1. the argument matrix: entry point x kind of argument (wrong types, object,
   complex, integer and bool arrays, empty, 0-d, Python scalars, NaN/inf,
   non-contiguous, Fortran-ordered, read-only, big-endian, unaligned, float32);
2. errors inside traced functions: Python control flow and conversions on
   tracers, unsupported NumPy functions and keyword arguments, in-place
   writes, shape/axis/index errors, huge requested sizes;
3. API misuse: wrong shapes of tangents/cotangents/arguments, argnums,
   strategies, backends, static arguments;
4. compiled LLVM calls with bad input, in a subprocess;
5. conventions at ties and zeros, made uniform across equivalent spellings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp

compile_fn = getattr(sg, "compile", None)
if not callable(compile_fn):  # until symgraph exports it: sg.compile is then the submodule
    from symgraph.compile import compile as compile_fn

HERE = os.path.abspath(__file__)
with open(HERE) as _f:
    _SRC = _f.read().splitlines()


def line_of(marker: str) -> int:
    """The line of this file holding the comment `# @marker` (unique)."""
    hits = [i + 1 for i, s in enumerate(_SRC) if s.rstrip().endswith(f"# @{marker}")]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def assert_error(exc_info, cls, line: int, *words: str) -> None:
    """The error is `cls`, names every word, and points at this file's `line`."""
    e = exc_info.value
    assert isinstance(e, cls), f"{type(e).__name__}: {e}"
    msg = str(e)
    for w in words:
        assert w in msg, f"{w!r} not in message: {msg}"
    assert e.location is not None, msg
    assert os.path.abspath(e.location.filename) == HERE, (e.location, msg)
    assert e.location.lineno == line, (e.location, line, msg)


# --------------------------------------------------------------------------- 1. the argument matrix


def F(x):
    """Scalar: sum(tanh(x)^2)."""
    return np.sum(np.tanh(x) ** 2)


def G(x):
    """Elementwise: sin(x) x."""
    return np.sin(x) * x


def dF(x):
    t = np.tanh(x)
    return 2 * t * (1 - t * t)


def d2F(x):
    t = np.tanh(x)
    return (2 - 6 * t * t) * (1 - t * t)


def dG(x):
    return np.cos(x) * x + np.sin(x)


def _diag(d, shape):
    n = int(np.prod(shape, dtype=np.int64))
    return np.diag(np.ravel(d)).reshape(tuple(shape) + tuple(shape)) if n else np.zeros(tuple(shape) * 2)


def _ones(a):
    return np.ones(np.shape(a), dtype=np.asarray(a).dtype if np.asarray(a).dtype.kind == "f" else np.float64)


_TRACED_G = sg.trace(G, np.zeros((2, 3)))

# entry point -> (call, reference on a float array, needs a float argument (derivative))
ENTRIES = {
    "trace+evaluate": (lambda a: sg.trace(G, a).evaluate(a), lambda x: G(x), False),
    "evaluate": (lambda a: _TRACED_G.evaluate(a), lambda x: G(x), False),
    "grad": (lambda a: sg.grad(F)(a), dF, True),
    "value_and_grad": (lambda a: sg.value_and_grad(F)(a)[1], dF, True),
    "vjp": (lambda a: sg.vjp(G, a)[1](_ones(a))[0], dG, True),
    "jvp": (lambda a: sg.jvp(G, (a,), (_ones(a),))[1], dG, True),
    "jacobian": (lambda a: sg.jacobian(G)(a), lambda x: _diag(dG(x), np.shape(x)), True),
    "hessian": (lambda a: sg.hessian(F)(a), lambda x: _diag(d2F(x), np.shape(x)), True),
    "hvp": (lambda a: sg.hvp(F, (a,), (_ones(a),)), d2F, True),
    "check_grads": (lambda a: sg.check_grads(G, (a,)), None, True),
    "compile(numpy)": (lambda a: compile_fn(G, backend="numpy")(a), lambda x: G(x), False),
    "compile(numpy) of grad": (lambda a: compile_fn(sg.grad(F), backend="numpy")(a), dF, True),
}


def _unaligned(n):
    buf = np.zeros(n * 8 + 1, np.uint8)
    a = np.frombuffer(buf.data, dtype=np.float64, count=n, offset=1)
    a = a.copy() if a.flags.aligned else a  # platforms that align anyway: still a valid case
    return a


def _readonly(a):
    a = np.array(a)
    a.setflags(write=False)
    return a


_X = np.array([[-0.7, 0.2, 1.3], [0.4, -1.1, 0.9]])

# kind -> (argument factory, outcome): outcome "ok", or an error class for every entry, or
# "deriv" (DTypeError where a derivative is requested, ok elsewhere)
KINDS = {
    "str": (lambda: "abc", sg.DTypeError),
    "object array": (lambda: np.array([1.0, None, 2.0], dtype=object), sg.DTypeError),
    # complex values trace (docs/complex.md); F's output is then complex, which grad refuses, and a float
    # tangent/cotangent does not fit a complex primal/output
    "complex array": (lambda: np.ones(3, complex), "complex"),
    "datetime array": (lambda: np.array(["2020-01-01"], dtype="datetime64[D]"), sg.DTypeError),
    "int array": (lambda: np.array([[1, -2, 0], [3, 1, 2]]), "deriv"),
    "bool array": (lambda: np.array([[True, False, True], [False, False, True]]), "deriv"),
    "python int": (lambda: 3, "deriv"),
    "empty": (lambda: np.ones((0,)), "ok"),
    "empty 2-d": (lambda: np.ones((2, 0)), "ok"),
    "0-d array": (lambda: np.array(0.7), "ok"),
    "numpy scalar": (lambda: np.float64(0.7), "ok"),
    "python float": (lambda: 0.7, "ok"),
    "nan": (lambda: np.array([[np.nan, 0.5, -0.3], [1.0, np.nan, 2.0]]), "ok"),
    "inf": (lambda: np.array([[np.inf, -np.inf, 0.5], [1.0, 2.0, -3.0]]), "ok"),
    "non-contiguous": (lambda: np.linspace(-1, 1, 12).reshape(2, 6)[:, ::2], "ok"),
    "transposed": (lambda: np.ascontiguousarray(_X.T).T, "ok"),
    "fortran order": (lambda: np.asfortranarray(_X), "ok"),
    "read-only": (lambda: _readonly(_X), "ok"),
    "big-endian": (lambda: _X.astype(">f8"), "ok"),
    "unaligned": (lambda: _unaligned_copy(), "ok"),
    "float32": (lambda: _X.astype(np.float32), "ok"),
    "masked array": (lambda: np.ma.masked_array(_X, _X > 1), sg.UnsupportedOpError),  # the mask would be lost
    # a pytree of scalars (as in JAX); G and F treat it as an array, so the error says to pass np.asarray(...)
    "list of numbers": (lambda: [[-0.7, 0.2, 1.3], [0.4, -1.1, 0.9]], sg.DTypeError),
}


def _unaligned_copy():
    a = _unaligned(6).reshape(2, 3)
    if a.flags.writeable:
        a[...] = _X
    return a


def _outcome(entry: str, kind: str):
    _, out = KINDS[kind]
    needs_float = ENTRIES[entry][2]
    if out == "deriv":
        out = sg.DTypeError if needs_float else "ok"
    if out == "complex":
        out = "ok" if entry in ("trace+evaluate", "check_grads", "compile(numpy)") else sg.DTypeError
        if entry == "evaluate":
            return sg.ShapeError  # a numeric leaf: its shape (3,) is checked against the traced (2, 3) first
    if entry in ("evaluate", "jvp", "hvp") and kind == "list of numbers":
        # a traced graph checks the structure first (a list is not the traced array); jvp's and hvp's array
        # tangents do not have the list's structure
        return sg.ShapeError
    if entry == "evaluate" and out == "ok":
        # the graph was traced for float64 (2, 3): other shapes are ShapeErrors, same-kind dtypes are cast
        a = KINDS[kind][0]()
        if np.shape(a) != (2, 3):
            return sg.ShapeError
        if np.asarray(a).dtype.kind in "fiub":
            return "ok"
    return out


MATRIX = [(e, k) for e in ENTRIES for k in KINDS]


@pytest.mark.parametrize("entry,kind", MATRIX, ids=[f"{e}-{k}" for e, k in MATRIX])
def test_argument_matrix(entry, kind):
    call, ref, _ = ENTRIES[entry]
    make, _ = KINDS[kind]
    a = make()
    before = np.array(a, copy=True) if isinstance(a, np.ndarray) and a.dtype != object else None
    want = _outcome(entry, kind)
    if want != "ok":
        with pytest.raises(sg.SymgraphError) as e:
            call(a)
        assert_error(e, want, call.__code__.co_firstlineno)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            got = call(a)
        except sg.SymgraphError as err:
            if entry == "check_grads" and kind in ("nan", "inf"):
                # derivatives cannot be checked at non-finite points: a GradientCheckError naming the values
                assert type(err).__name__ == "GradientCheckError" and "nan" in str(err)
                return
            raise
        if ref is None:
            assert got is None
        else:
            x = np.asarray(a)
            x = x.astype(np.float64) if x.dtype.kind in "biu" or x.dtype.byteorder == ">" or entry == "evaluate" else x
            want_val = np.asarray(ref(x))
            got = np.asarray(got)
            assert got.shape == want_val.shape, (got.shape, want_val.shape)
            if entry in ("jacobian", "hessian") and not np.all(np.isfinite(x)):
                # IEEE: 0 * nan = nan, so rows/columns of non-finite entries may hold NaN; the diagonal is exact
                n = int(np.prod(np.shape(x), dtype=np.int64))
                got2, want2 = got.reshape(n, n), want_val.reshape(n, n)
                np.testing.assert_allclose(np.diag(got2), np.diag(want2), rtol=1e-10, equal_nan=True)
                off = ~np.eye(n, dtype=bool)
                bad = ~np.isfinite(np.ravel(x))
                allowed_nan = (bad[:, None] | bad[None, :]) & off
                assert np.all((got2[off] == 0) | (allowed_nan[off] & np.isnan(got2[off])))
                return
            got_dtype = got.dtype.newbyteorder("=")  # a big-endian argument may give big-endian float64
            if np.asarray(a).dtype == np.float32 and entry != "evaluate":
                assert got_dtype == np.float32
                np.testing.assert_allclose(got, want_val, rtol=2e-5, atol=2e-6)
            else:
                assert got_dtype == (np.complex128 if x.dtype.kind == "c" else np.float64), got.dtype
                np.testing.assert_allclose(got, want_val, rtol=1e-10, atol=1e-12, equal_nan=True)
    if before is not None:
        np.testing.assert_array_equal(np.asarray(a), before)  # arguments are never written


# --------------------------------------------------------------------------- 2. errors inside traced functions


def f_if(x):
    if np.sum(x) > 0:  # @if
        return x
    return -x


def f_while(x):
    while np.max(x) > 0:  # @while
        x = x - 1.0
    return x


def f_and(x):
    return np.sum(x) > 0 and np.sum(x) < 1  # @and


def f_not(x):
    return 1.0 if not np.sum(x) else 0.0  # @not


def f_float(x):
    return float(np.sum(x)) * x  # @float


def f_int(x):
    return x * int(np.sum(x))  # @int


def f_item(x):
    return x * np.sum(x).item()  # @item


def f_tolist(x):
    return np.array(x.tolist())  # @tolist


def f_range(x):
    n = np.argmax(x)
    return sum(x[:, 0] for _ in range(n))  # @range


def f_setitem(x):
    a = np.zeros((2, 3))
    a[0, 1] = x[0, 0]  # @setitem
    return a


def f_augassign_slice(x):
    a = np.zeros((2, 3))
    a[:, 1] += x[:, 1]  # @augassign
    return a


def f_sort(x):
    # (x.sort() and x.fill() write in place and trace: tests/test_inplace.py)
    x.resize((3, 2))  # @sort
    return x


def f_fill(x):
    x.setfield(0.0, np.float64)  # @fill
    return x


def f_out(x):
    np.exp(x, out=x)  # @out
    return x


def f_sum_out(x):
    return np.sum(x, out=np.zeros(()))  # @sumout


def f_sum_where(x):
    return np.sum(x, where=x > 0)  # @sumwhere


def f_add_where(x):
    return np.add(x, 1.0, where=x > 0)  # @addwhere


def f_cumsum(x):  # np.cumsum traces since issue 17; np.histogram has no rule
    return np.histogram(x)  # @cumsum


def f_sortfn(x):  # np.sort traces since issue 17; np.unique has no rule
    return np.unique(x)  # @sortfn


def f_inv(x):  # np.linalg.inv and np.linalg.eig trace since issue 18; np.roots (a companion-matrix eig) does not
    return np.roots(x[0])  # @inv


def f_nextafter(x):  # a ufunc without a rule (np.arctan, the example before issue 17, has one now)
    return np.nextafter(x, 1.0)  # @nextafter


def f_ufunc_at(x):  # np.add.at / np.maximum.at write into traced arrays since issue 17; multiply.at has no rule
    np.multiply.at(x, [0], 2.0)  # @ufuncat
    return x


def f_accumulate(x):  # np.add.accumulate traces since issue 17 (cumsum); subtract.accumulate has no rule
    return np.subtract.accumulate(x)  # @accumulate


def f_norm1(x):  # norm(ord=1) traces since issue 17, ord='nuc' since issue 18; qr(mode='raw') does not
    return np.linalg.qr(x, mode="raw")  # @norm1


def f_reshape_f(x):
    return np.reshape(x, (3, 2), order="F")  # @reshapeF


def f_boolmask(x):
    return x[x > 0]  # @boolmask


def f_where1(x):
    return np.where(x > 0)  # @where1


def f_einsum_interleaved(x):  # the interleaved form traces since issue 17; out= does not
    return np.einsum(x, [0, 1], [1], out=np.empty(3))  # @einsumint


def f_int_shift(x):
    return np.left_shift(np.argmax(x, axis=0), 1) + x[0]  # @shift


def f_add_shapes(x):
    return x + np.ones(4)  # @addshapes


def f_matmul(x):
    return x @ x  # @matmul


def f_reshape(x):
    return x.reshape(4, 2)  # @reshape


def f_index_oob(x):
    return x[5]  # @indexoob


def f_index_float(x):
    return x[1.5]  # @indexfloat


def f_too_many(x):
    return x[0, 0, 0]  # @toomany


def f_concat(x):
    return np.concatenate([x, x.T])  # @concat


def f_axis(x):
    return np.sum(x, axis=2)  # @axis


def f_swapaxes(x):
    return np.swapaxes(x, 0, 5)  # @swapaxes


def f_moveaxis(x):
    return np.moveaxis(x, 0, 5)  # @moveaxis


def f_max_empty(x):
    return np.max(x[:0])  # @maxempty


def f_str_arith(x):
    return x + "a"  # @strarith


def f_complex(x):
    return np.maximum(x * 1j, x)  # @complex


def f_random_key(x):
    return snp.random_uniform(x[0, 0], (3,))  # @randomkey


def f_huge(x):
    return np.broadcast_to(x, (2**40, 2**40, 2, 3))  # @huge


def f_negative(x):
    return np.broadcast_to(x, (-2, 2, 3))  # @negative


def f_at_traced(x):
    return x.at[np.argmax(x, axis=0)].set(0.0)  # @attraced


def f_at_repeat(x):
    return x.at[[0, 0]].set(1.0)  # @atrepeat


def f_escape(x):
    _LEAK.append(x)
    return x


_LEAK: list = []

T = sg.TracerConversionError
U = sg.UnsupportedOpError
S = sg.ShapeError
D = sg.DTypeError

# function, error class, marker, words the message must contain
INSIDE = [
    (f_if, T, "if", ["bool()", "where"]),
    (f_while, T, "while", ["bool()"]),
    (f_and, T, "and", ["bool()"]),
    (f_not, T, "not", ["bool()"]),
    (f_float, T, "float", ["float()", "shape ()"]),
    (f_int, T, "int", ["int()"]),
    (f_item, T, "item", [".item()"]),
    (f_tolist, T, "tolist", [".tolist()"]),
    (f_range, T, "range", ["index"]),
    (f_setitem, T, "setitem", ["NumPy array", "np.zeros_like", ".at["]),
    (f_augassign_slice, T, "augassign", ["NumPy array", "np.zeros_like", ".at["]),
    (f_sort, T, "sort", ["x.resize", "in place"]),
    (f_fill, T, "fill", ["x.setfield", "in place"]),
    (f_out, U, "out", ["np.exp", "out="]),
    (f_sum_out, U, "sumout", ["np.sum", "out"]),
    (f_sum_where, U, "sumwhere", ["np.sum", "where"]),
    (f_add_where, U, "addwhere", ["np.add", "where"]),
    (f_cumsum, U, "cumsum", ["np.histogram"]),
    (f_sortfn, U, "sortfn", ["np.unique"]),
    (f_inv, U, "inv", ["np.roots"]),
    (f_nextafter, U, "nextafter", ["np.nextafter"]),
    (f_ufunc_at, U, "ufuncat", ["np.multiply.at"]),
    (f_accumulate, U, "accumulate", ["np.subtract.accumulate"]),
    (f_norm1, U, "norm1", ["np.linalg.qr", "mode='raw'"]),
    (f_reshape_f, U, "reshapeF", ["order='F'"]),
    (f_boolmask, U, "boolmask", ["boolean mask", "np.where"]),
    (f_where1, U, "where1", ["np.where", "one argument"]),
    (f_einsum_interleaved, U, "einsumint", ["einsum", "out="]),
    (f_int_shift, U, "shift", ["left_shift", "integer"]),
    (f_add_shapes, S, "addshapes", ["add", "(2, 3)", "(4,)"]),
    (f_matmul, S, "matmul", ["matmul", "(2, 3)"]),
    (f_reshape, S, "reshape", ["reshape", "(2, 3)", "(4, 2)"]),
    (f_index_oob, S, "indexoob", ["index 5", "size 2"]),
    (f_index_float, U, "indexfloat", ["float"]),
    (f_too_many, S, "toomany", ["too many indices", "(2, 3)"]),
    (f_concat, S, "concat", ["concatenate", "(3, 2)", "(2, 3)"]),
    (f_axis, S, "axis", ["sum", "axis 2"]),
    (f_swapaxes, S, "swapaxes", ["swapaxes", "axis 5"]),
    (f_moveaxis, S, "moveaxis", ["moveaxis", "axis 5"]),
    (f_max_empty, S, "maxempty", ["max", "zero-size"]),
    (f_str_arith, D, "strarith", ["add", "str"]),
    (f_complex, U, "complex", ["np.maximum", "complex values", "docs/complex.md"]),
    (f_random_key, D, "randomkey", ["random_uniform", "key"]),
    (f_huge, S, "huge", ["broadcast_to", "1099511627776"]),
    (f_negative, S, "negative", ["broadcast_to", "-2"]),
    (f_at_traced, U, "attraced", ["traced indices"]),
    (f_at_repeat, U, "atrepeat", ["repeated"]),
]

VIA = {
    "trace": lambda f: sg.trace(f, _X),
    "grad": lambda f: sg.grad(lambda x: np.sum(f(x)))(_X),
    "jvp": lambda f: sg.jvp(f, (_X,), (_X,)),
    "compile(numpy)": lambda f: compile_fn(f, backend="numpy")(_X),
    "vmap": lambda f: __import__("symgraph.batching", fromlist=["vmap"]).vmap(lambda r: f(r + _X * 0))(np.stack([_X, _X])),
}
INSIDE_CASES = [(f, cls, m, w, v) for f, cls, m, w in INSIDE for v in VIA]


@pytest.mark.parametrize("f,cls,marker,words,via", INSIDE_CASES,
                         ids=[f"{c[0].__name__}-{c[4]}" for c in INSIDE_CASES])
def test_errors_inside_traced_functions(f, cls, marker, words, via):
    with pytest.raises(sg.SymgraphError) as e:
        VIA[via](f)
    assert_error(e, cls, line_of(marker), *words)


def test_escaped_tracer_is_a_clear_error():
    _LEAK.clear()
    sg.trace(f_escape, _X)
    leaked = _LEAK.pop()
    with pytest.raises(sg.SymgraphError):
        np.asarray(leaked)  # a graph node is not an array
    with pytest.raises(sg.TracerConversionError):
        float(leaked[0, 0])


def test_huge_requested_sizes_are_errors_not_crashes():
    """Sizes that overflow are ShapeErrors at trace time; merely enormous ones fail with MemoryError at run time."""
    g = sg.trace(lambda x: np.exp(np.broadcast_to(x, (10**6, 10**6, 2, 3))), _X)  # fine as a graph
    with pytest.raises(MemoryError):
        g.evaluate(_X)
    with pytest.raises(MemoryError):
        compile_fn(lambda x: np.exp(np.broadcast_to(x, (10**6, 10**6, 2, 3))), backend="numpy")(_X)
    with pytest.raises(sg.ShapeError):
        sg.trace(lambda x: snp.random_uniform(np.argmax(x), (2**40, 2**40)), _X)
    # a reduction of a huge broadcast simplifies to a product: no memory needed
    big = sg.grad(lambda x: np.sum(np.exp(np.broadcast_to(x, (10**6, 10**6, 2, 3)))))(_X)
    np.testing.assert_allclose(big, 1e12 * np.exp(_X), rtol=1e-12)


# --------------------------------------------------------------------------- 3. API misuse


def test_api_misuse():
    x = _X
    cases = [
        (lambda: sg.grad(np.tanh)(x), sg.NonScalarOutputError, ["(2, 3)", "jacobian"]),
        (lambda: sg.hessian(np.sin)(x), sg.NonScalarOutputError, ["(2, 3)"]),
        (lambda: sg.value_and_grad(lambda x: (x, x))(x), sg.NonScalarOutputError, ["2 arrays"]),
        (lambda: sg.grad(lambda x: np.argmax(x))(x), sg.DTypeError, ["int64"]),
        (lambda: sg.jacobian(lambda x: np.argmax(x))(x), sg.DTypeError, ["int64"]),
        (lambda: sg.grad(F, argnums=3)(x), sg.SymgraphError, ["argnums 3"]),
        (lambda: sg.grad(lambda: 1.0)(), sg.SymgraphError, ["argnums 0"]),
        (lambda: sg.value_and_grad(F, has_aux=True)(x), sg.SymgraphError, ["has_aux"]),
        (lambda: sg.vjp(np.sin, x)[1](np.ones(4)), sg.ShapeError, ["cotangent", "(4,)", "(2, 3)"]),
        (lambda: sg.vjp(np.sin, x)[1]((x, x)), sg.ShapeError, ["structure"]),
        (lambda: sg.vjp(np.sin, x)[1]("abc"), sg.DTypeError, ["str"]),
        (lambda: sg.vjp(np.sin, np.arange(3))[1](np.ones(3)), sg.DTypeError, ["int64"]),
        (lambda: sg.jvp(np.sin, (x,), (np.ones(3),)), sg.ShapeError, ["tangent", "(3,)", "(2, 3)"]),
        (lambda: sg.jvp(np.sin, (x,), (x, x)), sg.ShapeError, ["structure"]),
        (lambda: sg.jvp(np.sin, (np.arange(3),), (np.ones(3),)), sg.DTypeError, ["int64"]),
        (lambda: sg.jvp(np.sin, (x,), (x.astype(np.float32),)), sg.DTypeError, ["tangent", "argument 0 (x)", "float32", "float64"]),
        (lambda: sg.jvp(np.sin, (x,), (np.ones((2, 3), int),)), sg.DTypeError, ["tangent", "int64", "float64"]),
        (lambda: sg.jvp(np.sin, (x.astype(np.float32),), (x,)), sg.DTypeError, ["tangent", "float64", "float32"]),
        (lambda: sg.jvp(np.sin, (1.0,), (1,)), sg.DTypeError, ["tangent", "int64", "float64"]),
        (lambda: sg.jvp(np.sin, (x,), (np.ma.masked_array(x),)), sg.UnsupportedOpError, ["tangent", "MaskedArray"]),
        (lambda: sg.hvp(F, (x,), (x.astype(np.float32),)), sg.DTypeError, ["hvp(F)", "float32"]),
        (lambda: sg.hessian(np.sin)(x), sg.NonScalarOutputError, ["hessian(sin)", "hessian needs a scalar"]),
        (lambda: compile_fn(F)("abc"), sg.DTypeError, ["compile(F)", "argument 0 (x)", "str"]),
        (lambda: compile_fn(lambda p: p["w"])({"w": "abc"}), sg.DTypeError, ["argument 0 (p['w'])", "str"]),
        (lambda: compile_fn(lambda n, x: x * n, static_argnums=0)(2, "abc"), sg.DTypeError, ["argument 1 (x)"]),
        (lambda: compile_fn(lambda x, *, s: x * s, backend="numpy")(x, s="abc"), sg.DTypeError, ["s (keyword)"]),
        (lambda: sg.grad(F)("abc"), sg.DTypeError, ["grad(F)", "argument 0 (x)"]),
        (lambda: sg.grad(lambda p: p[0] * p[1])((1.0, [2.0, 3.0])), sg.DTypeError, ["argument 0", "[1]", "pytree",
                                                                                 "np.asarray"]),
        (lambda: compile_fn(F, donate_argnums=(3,)), sg.SymgraphError, ["donate_argnums 3", "F takes 1"]),
        (lambda: compile_fn(F, donate_argnums=-2), sg.SymgraphError, ["donate_argnums -2", "F takes 1"]),
        (lambda: compile_fn(lambda *xs: xs[0], donate_argnums=2)(x), sg.SymgraphError, ["donate_argnums 2", "passed 1"]),
        (lambda: compile_fn(lambda *xs: xs[0], static_argnums=1)(x), sg.SymgraphError, ["static_argnums 1", "passed 1"]),
        (lambda: sg.hvp(F, (x,), (np.ones(3),)), sg.ShapeError, ["(3,)", "(2, 3)"]),
        (lambda: _TRACED_G.evaluate(np.ones(4)), sg.ShapeError, ["(4,)", "(2, 3)"]),
        (lambda: _TRACED_G.evaluate(x, x), sg.ShapeError, ["structure"]),
        (lambda: _TRACED_G.evaluate(np.ones((2, 3), complex)), sg.DTypeError, ["complex128"]),
        (lambda: sg.trace(lambda i: i * 2, np.arange(3)).evaluate(np.ones(3)), sg.DTypeError, ["float64", "int64"]),
        (lambda: sg.trace(lambda x: "s", x), sg.DTypeError, ["result 0", "str"]),
        (lambda: sg.trace(3, x), sg.SymgraphError, ["callable"]),
        (lambda: compile_fn(3), sg.SymgraphError, ["callable"]),
        (lambda: compile_fn(F, backend="cuda"), sg.SymgraphError, ["cuda"]),
        (lambda: compile_fn(F, static_argnums=0)(x), sg.SymgraphError, ["unhashable", "ndarray"]),
        (lambda: compile_fn(F, static_argnums=3)(x), sg.SymgraphError, ["static_argnums 3"]),
        (lambda: compile_fn(F, static_argnums=0, donate_argnums=0), sg.SymgraphError, ["static and donated"]),
        (lambda: compile_fn(F).graph, sg.SymgraphError, ["not compiled yet"]),
        (lambda: compile_fn(sg.grad(F), checkpoint="foo")(x), sg.SymgraphError, ["unknown strategy", "foo"]),
        (lambda: compile_fn(sg.grad(F), checkpoint=-5)(x), sg.SymgraphError, ["budget", "-5"]),
        (lambda: compile_fn(sg.grad(F), checkpoint=1)(x), sg.SymgraphError, ["budget", "infeasible"]),
        (lambda: compile_fn(sg.grad(F), backend="numpy")(np.ones(3, complex)), sg.DTypeError, ["complex128",
                                                                                               "holomorphic=True"]),
        (lambda: sg.check_grads(lambda x: np.floor(10 * x), (x,)), sg.SymgraphError, ["central differences"]),
    ]
    for call, cls, words in cases:
        with pytest.raises(sg.SymgraphError) as e:
            call()
        assert_error(e, cls, call.__code__.co_firstlineno, *words)


def test_api_rejects_wrong_python_types():
    """Public entry points given objects of the wrong type raise SymgraphErrors (not AttributeError/ValueError)."""
    from symgraph.passes.checkpoint import apply_checkpoint, checkpoint

    g = sg.trace(sg.grad(F), _X)
    cases = [
        lambda: sg.evaluate(F, _X),
        lambda: sg.simplify("not a graph"),
        lambda: apply_checkpoint("not a graph", "sqrt"),
        lambda: apply_checkpoint(sg.trace(F, _X), "foo"),
        lambda: apply_checkpoint(g, 1e9),
        lambda: sg.grad(F, argnums="a")(_X),
        lambda: compile_fn(F, static_argnums="a"),
        lambda: sg.check_grads(G, ("abc",)),
        lambda: checkpoint(3)(_X),
    ]
    failures = []
    for call in cases:
        try:
            call()
            failures.append((call.__code__.co_firstlineno, "no error"))
        except sg.SymgraphError as e:
            if e.location is None or e.location.lineno != call.__code__.co_firstlineno:
                failures.append((call.__code__.co_firstlineno, f"location {e.location}"))
        except Exception as e:  # noqa: BLE001
            failures.append((call.__code__.co_firstlineno, f"{type(e).__name__}: {e}"))
    assert not failures, "\n".join(f"line {ln}: {m}" for ln, m in failures)


def test_where_guard_through_broadcast_is_finite_or_warns():
    """A guard whose untaken branch is non-finite: no NaN in the gradient, or a warning naming the line."""
    c = np.array([[True], [False]])

    def f(x):
        return np.sum(np.where(c & (x > 0), np.sqrt(x)[None, :], 0.0))  # @guardbcast

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = sg.grad(f)(np.array([-1.0, 0.0, 4.0]))
    if np.all(np.isfinite(g)):
        np.testing.assert_allclose(g, [0.0, 0.0, 0.25])
    else:
        assert any(str(line_of("guardbcast")) in str(m.message) for m in w), (g, [str(m.message) for m in w])


# --------------------------------------------------------------------------- 4. compiled calls with bad input (subprocess)

_SUBPROCESS = r'''
import json, sys, warnings
import numpy as np
import symgraph as sg
try:
    from symgraph import compile as _c
    compile_fn = _c if callable(_c) else None
except ImportError:
    compile_fn = None
if compile_fn is None:
    from symgraph.compile import compile as compile_fn

def G(x):
    return np.sin(x) * x
def F(x):
    return np.sum(np.tanh(x) ** 2)
def dG(x):
    return np.cos(x) * x + np.sin(x)
def dF(x):
    t = np.tanh(x)
    return 2 * t * (1 - t * t)
X = np.array([[-0.7, 0.2, 1.3], [0.4, -1.1, 0.9]])
ro = X.copy(); ro.setflags(write=False)
buf = np.zeros(6 * 8 + 1, np.uint8)
un = np.frombuffer(buf.data, dtype=np.float64, count=6, offset=1).reshape(2, 3)
if un.flags.writeable:
    un[...] = X
args = {
    "str": "abc", "None": None, "list": [1.0, 2.0], "dict": {"a": 1.0},
    "object": np.array([1.0, None]), "complex": np.ones(3, complex), "datetime": np.array(["2020-01-01"], "datetime64[D]"),
    "float16": X.astype(np.float16), "int": np.array([[1, -2, 0], [3, 1, 2]]), "bool": X > 0, "uint8": np.arange(6, dtype=np.uint8),
    "empty": np.ones(0), "empty2": np.ones((2, 0)), "0-d": np.array(0.7), "scalar": 0.7, "nan": np.array([np.nan, 1.0]),
    "inf": np.array([np.inf, -np.inf, 1.0]), "strided": np.linspace(-1, 1, 12).reshape(2, 6)[:, ::2],
    "transposed": np.ascontiguousarray(X.T).T, "fortran": np.asfortranarray(X), "readonly": ro,
    "bigendian": X.astype(">f8"), "unaligned": un, "float32": X.astype(np.float32), "other shape": np.ones((4, 5, 2)),
    "masked": np.ma.masked_array(X, X > 1),
    "huge broadcast": "HUGE",
}
cg = compile_fn(G)
cgrad = compile_fn(sg.grad(F))
cg(X); cgrad(X)  # compiled for float64 (2, 3): the bad calls below hit the fast path first
for name, a in args.items():
    for which, fn, ref, deriv in (("G", cg, G, False), ("grad", cgrad, dF, True)):
        rec = {"case": name, "fn": which}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if isinstance(a, str) and a == "HUGE":
                    r = compile_fn(lambda x: np.exp(np.broadcast_to(x, (10**6, 10**6, 2, 3))))(X)  # @sub-huge
                else:
                    r = fn(a)  # @sub-call
            try:
                x = np.asarray(a, dtype=np.float64) if not isinstance(a, (list, dict, str)) and a is not None else None
            except Exception:
                x = None
            rec["outcome"] = "ok"
            if x is not None:
                want = ref(x)
                rec["value_ok"] = bool(np.shape(r) == np.shape(want) and np.allclose(r, want, rtol=1e-5, atol=1e-6, equal_nan=True))
                rec["dtype"] = str(np.asarray(r).dtype)
        except sg.SymgraphError as e:
            rec.update(outcome="error", type=type(e).__name__, symgraph=True, msg=str(e)[:300],
                       line=e.location.lineno if e.location else None,
                       file=e.location.filename if e.location else None)
        except MemoryError as e:
            rec.update(outcome="memory", type=type(e).__name__, msg=str(e)[:200])
        except Exception as e:
            rec.update(outcome="error", type=type(e).__name__, symgraph=False, msg=str(e)[:300])
        print(json.dumps(rec), flush=True)
print("DONE", flush=True)
'''


@pytest.fixture(scope="module")
def compiled_bad_calls(tmp_path_factory):
    path = tmp_path_factory.mktemp("sub") / "bad_calls.py"
    path.write_text(textwrap.dedent(_SUBPROCESS))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(HERE)) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    src = path.read_text().splitlines()
    lines = {m: [i + 1 for i, s in enumerate(src) if s.rstrip().endswith(f"# @{m}")][0] for m in ("sub-call", "sub-huge")}
    return p, recs, str(path), lines


# kind -> expected outcome of compiled G / compiled grad(F): ("ok"|error class name, for G), (for grad)
_EXPECT = {
    "str": ("DTypeError", "DTypeError"), "object": ("DTypeError", "DTypeError"),
    "complex": ("ok", "DTypeError"), "datetime": ("DTypeError", "DTypeError"),
    "float16": ("DTypeError", "DTypeError"), "int": ("ok", "DTypeError"), "bool": ("ok", "DTypeError"),
    "uint8": ("ok", "DTypeError"), "empty": ("ok", "ok"), "empty2": ("ok", "ok"), "0-d": ("ok", "ok"),
    "scalar": ("ok", "ok"), "nan": ("ok", "ok"), "inf": ("ok", "ok"), "strided": ("ok", "ok"),
    "transposed": ("ok", "ok"), "fortran": ("ok", "ok"), "readonly": ("ok", "ok"), "bigendian": ("ok", "ok"),
    "unaligned": ("ok", "ok"), "float32": ("ok", "ok"), "other shape": ("ok", "ok"),
    "list": ("DTypeError", "DTypeError"), "masked": ("UnsupportedOpError", "UnsupportedOpError"),
}


def test_compiled_calls_with_bad_input_never_crash(compiled_bad_calls):
    p, recs, path, lines = compiled_bad_calls
    assert p.returncode == 0, f"the process died (code {p.returncode}):\n{p.stderr[-3000:]}"
    assert "DONE" in p.stdout
    by = {(r["case"], r["fn"]): r for r in recs}
    problems = []
    for kind, (eg, egrad) in _EXPECT.items():
        for which, exp in (("G", eg), ("grad", egrad)):
            r = by[(kind, which)]
            if (kind, which) == ("complex", "G"):
                # complex values trace, and the LLVM backend compiles sin(z) * z natively (docs/complex.md)
                if r["outcome"] != "ok" or not r.get("value_ok") or r.get("dtype") != "complex128":
                    problems.append(f"{kind}/{which}: expected sin(z) * z compiled natively, got {r}")
                continue
            if exp == "ok":
                if r["outcome"] != "ok" or not r.get("value_ok", True):
                    problems.append(f"{kind}/{which}: expected a correct result, got {r}")
            elif r.get("type") != exp or r["file"] != path or r["line"] != lines["sub-call"]:
                problems.append(f"{kind}/{which}: expected {exp} at line {lines['sub-call']}, got {r}")
    for kind in ("None", "dict"):  # pytrees: a SymgraphError (or a Python TypeError from f itself)
        for which in ("G", "grad"):
            r = by[(kind, which)]
            if r["outcome"] == "error" and not r["symgraph"] and r["type"] != "TypeError":
                problems.append(f"{kind}/{which}: {r}")
    r = by[("huge broadcast", "G")]
    if r["outcome"] not in ("memory",) and not (r["outcome"] == "error" and r["symgraph"]):
        problems.append(f"huge broadcast: {r}")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- 5. conventions at ties and zeros


def _d(f, x):
    """Reverse- and forward-mode derivative of scalar f at x (both must agree)."""
    rev = float(sg.grad(f)(x))
    fwd = float(sg.jvp(f, (x,), (1.0,))[1])
    assert rev == fwd or (np.isnan(rev) and np.isnan(fwd)), (rev, fwd)
    return rev


def test_relu_spellings_agree_at_zero():
    """maximum(x, 0), where(x > 0, x, 0), relu, clip(x, 0, None): derivative 0 at 0 and 1 above (docs/differentiation.md)."""
    spellings = [
        lambda x: np.maximum(x, 0.0),
        lambda x: np.where(x > 0, x, 0.0),
        lambda x: snp.relu(x),
        lambda x: np.clip(x, 0.0, None),
        lambda x: np.fmax(x, 0.0),
        lambda x: x * (x > 0),
    ]
    for f in spellings:
        assert _d(f, 0.0) == 0.0
        assert _d(f, 1.5) == 1.0
        assert _d(f, -1.5) == 0.0
        assert float(sg.grad(sg.grad(f))(0.0)) == 0.0
    assert _d(lambda x: np.maximum(0.0, x), 0.0) == 1.0  # the tie goes to the second operand
    assert _d(lambda x: np.minimum(x, 0.0), 0.0) == 0.0
    assert _d(lambda x: np.minimum(0.0, x), 0.0) == 1.0


def test_abs_sign_clip_max_conventions():
    assert _d(np.abs, 0.0) == 0.0 == float(np.sign(0.0))
    assert _d(lambda x: abs(x), 0.0) == 0.0
    assert _d(np.abs, -2.0) == -1.0
    for x, want in [(-1.0, 0.0), (-0.5, 0.0), (0.0, 1.0), (0.5, 0.0), (1.0, 0.0)]:
        assert _d(lambda x: np.clip(x, -0.5, 0.5), x) == want, x
    x = np.array([1.0, 3.0, 3.0])
    for f in (np.max, lambda x: x.max(), lambda x: np.amax(x), lambda x: np.maximum.reduce(x), lambda x: snp.max(x)):
        np.testing.assert_array_equal(sg.grad(f)(x), [0.0, 0.5, 0.5])
        np.testing.assert_array_equal(sg.jvp(f, (x,), (np.array([1.0, 2.0, 4.0]),))[1], 3.0)
    np.testing.assert_array_equal(sg.grad(np.min)(np.array([2.0, 1.0, 1.0, 1.0])), [0.0, 1 / 3, 1 / 3, 1 / 3])
    # max(x, axis) at ties equals the mean of the tied entries' tangents in forward mode too
    m = np.array([[2.0, 2.0], [1.0, 0.0]])
    np.testing.assert_array_equal(sg.grad(lambda m: np.sum(np.max(m, axis=1)))(m), [[0.5, 0.5], [1.0, 0.0]])


def test_sqrt_and_norm_at_zero():
    assert _d(np.sqrt, 0.0) == np.inf
    z = np.zeros(3)
    np.testing.assert_array_equal(sg.grad(np.linalg.norm)(z), np.zeros(3))
    np.testing.assert_array_equal(sg.hessian(np.linalg.norm)(z), np.zeros((3, 3)))
    np.testing.assert_array_equal(sg.grad(lambda x: np.linalg.norm(x) ** 2)(z), np.zeros(3))
    x = np.array([3.0, 4.0])
    np.testing.assert_allclose(sg.grad(np.linalg.norm)(x), x / 5.0, rtol=1e-15)
    np.testing.assert_allclose(sg.grad(lambda x: snp.linalg.norm(x))(x), x / 5.0, rtol=1e-15)


def test_where_guards_do_not_poison_gradients():
    x = np.array([-1.0, 0.0, 4.0])
    for f in (lambda x: np.where(x > 0, np.sqrt(x), 0.0), lambda x: np.where(x > 0, np.log(x), 0.0),
              lambda x: np.where(x <= 0, 0.0, np.sqrt(x) * 2.0)):
        g = sg.grad(lambda x: np.sum(f(x)))(x)
        assert np.all(np.isfinite(g)), g
        assert g[0] == g[1] == 0.0
        h = sg.hessian(lambda x: np.sum(f(x)))(x)
        assert np.all(np.isfinite(h)), h


def test_conventions_hold_in_compiled_code():
    """The LLVM backend computes the same derivatives at ties and zeros as the evaluator."""
    x = np.array([-1.0, 0.0, 0.0, 2.0, 2.0])
    fns = [lambda x: np.sum(np.maximum(x, 0.0)), lambda x: np.sum(np.abs(x)), lambda x: np.max(x),
           lambda x: np.sum(np.clip(x, 0.0, 2.0)), lambda x: np.sum(np.where(x > 0, np.sqrt(x), 0.0)),
           lambda x: np.linalg.norm(x * 0.0)]
    for f in fns:
        np.testing.assert_array_equal(compile_fn(sg.grad(f))(x), sg.grad(f)(x))


# --------------------------------------------------------------------------- 6. what the argument checks still accept


def test_jvp_tangent_dtypes_that_are_accepted():
    """Matching tangents, and Python floats (they take the primal's dtype), give J v in the primal's dtype."""
    x = np.array([0.3, -1.2, 2.0])
    for dt in (np.float32, np.float64):
        xd = x.astype(dt)
        out, t = sg.jvp(np.sin, (xd,), (np.full(3, 2.0, dt),))
        assert t.dtype == dt
        np.testing.assert_allclose(t, 2 * np.cos(x), rtol=1e-6 if dt == np.float32 else 1e-15)
        out, t = sg.jvp(lambda v: np.sum(v * v), (xd,), (np.ones(3, dt),))
        np.testing.assert_allclose(t, 2 * np.sum(x), rtol=1e-6)
    out, t = sg.jvp(np.sin, (np.float32(0.5),), (2.0,))  # a Python float tangent for a float32 primal
    assert t.dtype == np.float32 and abs(float(t) - 2 * np.cos(0.5)) < 1e-6
    # inside a trace (inline path) the same rule holds
    g = sg.trace(lambda v: sg.jvp(np.sin, (v,), (v * 0 + 1.0,))[1], x)
    np.testing.assert_allclose(g.evaluate(x), np.cos(x), rtol=1e-15)
    with pytest.raises(sg.DTypeError):
        sg.trace(lambda v: sg.jvp(np.sin, (v,), (v.astype(np.float32),))[1], x)


def test_pytrees_of_scalars_and_lists_are_accepted():
    """Tuples and lists of scalars and lists of arrays are pytrees (as in JAX and autograd)."""
    g = sg.grad(lambda p: p[0] * p[1] ** 2)((3.0, 2.0))
    assert isinstance(g, tuple) and float(g[0]) == 4.0 and float(g[1]) == 12.0
    gl = sg.grad(lambda p: p[0] * p[1] ** 2)([3.0, 2.0])
    assert isinstance(gl, list) and [float(v) for v in gl] == [4.0, 12.0]
    ws = [np.array([1.0, 2.0]), np.array([3.0])]
    gl = sg.grad(lambda ws: np.sum(ws[0] ** 2) + np.sum(ws[1]))(ws)
    assert isinstance(gl, list)
    np.testing.assert_array_equal(gl[0], [2.0, 4.0])
    np.testing.assert_array_equal(gl[1], [1.0])
    cf = compile_fn(lambda ws: ws[0] * 2.0, backend="numpy")
    np.testing.assert_array_equal(cf(ws), [2.0, 4.0])


def test_a_list_of_numbers_used_as_an_array_says_to_pass_an_array():
    def f(x):
        return np.sum(x * x)  # @listmul

    for call in (lambda: sg.grad(f)([1.0, 2.0]), lambda: compile_fn(f, backend="numpy")([1.0, 2.0]),
                 lambda: sg.trace(lambda x: x @ x, [1.0, 2.0])):
        with pytest.raises(sg.DTypeError, match=r"pytree of scalars.*np\.asarray") as e:
            call()
        assert isinstance(e.value, TypeError)  # also a TypeError, for code that catches those
    with pytest.raises(sg.DTypeError) as e:
        sg.grad(f)([1.0, 2.0])  # @listcall
    # the error points at the call that passed the list (where the fix goes) and names the line that failed
    assert e.value.location is not None and e.value.location.lineno == line_of("listcall")
    assert f"test_errors.py:{line_of('listmul')}" in str(e.value)


def test_masked_arrays_are_rejected_everywhere():
    m = np.ma.masked_array(_X, _X > 1)
    g = sg.trace(G, _X)
    for call in (lambda: sg.trace(G, m), lambda: g.evaluate(m), lambda: sg.grad(F)(m),
                 lambda: compile_fn(G, backend="numpy")(m), lambda: sg.jacobian(G)(m)):
        with pytest.raises(sg.UnsupportedOpError, match="MaskedArray"):
            call()
    # an unmasked (plain) copy of the data is the documented way out
    np.testing.assert_allclose(compile_fn(G, backend="numpy")(np.ma.filled(m, 0.0)), G(np.where(_X > 1, 0.0, _X)))


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_donate_argnums_in_range_still_donates(backend):
    """A negative in-range donate index is accepted and the buffer is reused."""
    cf = compile_fn(lambda a, b: a + b, backend=backend, donate_argnums=-2)
    a, b = np.ones(4), np.full(4, 2.0)
    r = cf(a, b)
    np.testing.assert_array_equal(r, 3.0)
    assert r is a


def test_vjp_cotangent_dtype_must_match_the_output():
    """As jvp's tangents: a cotangent array of another dtype is refused (it used to be cast silently); a
    Python float takes the output's dtype; matching cotangents give J^T u in the primal's dtype."""
    x = np.array([0.3, -1.2, 2.0])
    for dt, other in ((np.float32, np.float64), (np.float64, np.float32)):
        out, pb = sg.vjp(np.sin, x.astype(dt))
        with pytest.raises(sg.DTypeError, match=f"cotangent 0 has dtype {np.dtype(other)}.*output has dtype "
                                             f"{np.dtype(dt)}"):
            pb(np.ones(3, other))
        (g,) = pb(np.full(3, 2.0, dt))
        assert g.dtype == dt
        np.testing.assert_allclose(g, 2 * np.cos(x), rtol=1e-6 if dt == np.float32 else 1e-15)
        out, pb = sg.vjp(lambda v: np.sum(v * v), x.astype(dt))
        (g,) = pb(1.0)
        assert g.dtype == dt
        np.testing.assert_allclose(g, 2 * x, rtol=1e-6)


def test_bit_operators_work_on_bool_masks_and_refuse_integers():
    """&, |, ^, ~ of traced integers used to cast to bool silently ((a & 6) gave True); now they raise a
    SymgraphError at the user's line, as np.bitwise_and does; << and >> raise it too (they raised TypeError).
    Bool masks keep working."""
    a = np.array([1, 2, 3, 12], np.int32)
    for f in (lambda a: a & 6, lambda a: a | 1, lambda a: a ^ 1, lambda a: ~a, lambda a: a << 1,
              lambda a: a >> 1, lambda a: 6 & a):
        with pytest.raises(sg.UnsupportedOpError, match="bit operations") as ei:
            sg.compile(f)(a)
        assert "test_errors.py" in str(ei.value)
    x = np.array([1.0, 2.0, -1.0, 0.5])
    f = lambda x: ((x > 0) & (x < 1.5)) | (~(x > 1) ^ (x < 0))  # noqa: E731
    np.testing.assert_array_equal(sg.compile(f)(x), f(x))
    np.testing.assert_array_equal(sg.compile(lambda x: np.array([True, False, True, False]) & (x > 0))(x),
                                  np.array([True, False, False, False]))


def test_matmul_shape_error_shows_the_shapes_as_given():
    """A vector operand is promoted to a matrix inside matmul; the message used to show (1, 10) for a (10,) vector."""
    with pytest.raises(sg.ShapeError, match=r"10 \(operand 0 shape \(10,\)\) vs 64 \(operand 1 shape \(64, 10\)\)"):
        sg.trace(lambda a, b: a @ b, np.ones(10), np.ones((64, 10)))
    with pytest.raises(sg.ShapeError, match=r"operand 1 shape \(4,\)"):
        sg.trace(lambda a, b: a @ b, np.ones((3, 10)), np.ones(4))
