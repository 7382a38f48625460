"""`Executable.release_arena` / `CompiledFunction.release_arena`: pooled arenas are dropped and reallocated.

- after a call the signature keeps one arena (`arena_bytes`); releasing it
  returns that many bytes, frees the array, and the next call (fast path or
  checked path) allocates a fresh arena and gives the same results;
- `cf.release_arena()` covers every compiled signature; the numpy backend
  keeps no arena (0 bytes).
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp

pytest.importorskip("codegen")


def _f(x, w):
    h = snp.tanh(x @ w)
    return snp.sum(h * h, axis=0), snp.exp(h)


def _ref(x, w):
    h = np.tanh(x @ w)
    return np.sum(h * h, axis=0), np.exp(h)


def _args(n=48, k=32, m=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, k)), rng.standard_normal((k, m)) / np.sqrt(k)


def test_release_arena_frees_the_pooled_arena_and_the_next_call_reallocates():
    cf = sg.compile(_f)
    x, w = _args()
    first = cf(x, w)
    exe = cf._current().exe
    nbytes = cf.stats["arena_bytes"]
    assert nbytes > 0 and len(exe._pool) == 1
    arena = weakref.ref(exe._pool[0].base)  # the aligned view's owner
    assert exe._pool[0].nbytes == nbytes
    assert exe.release_arena() == nbytes
    assert exe._pool == []
    gc.collect()
    assert arena() is None  # nothing else held it: the memory is freed
    assert exe.release_arena() == 0  # nothing left to drop
    again = cf(x, w)  # fast path: allocates a new arena into the same pool
    assert len(exe._pool) == 1
    for a, b, r in zip(first, again, _ref(x, w)):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(a, b)
    # checked path (a Fortran-ordered argument misses the fast path): same pool
    assert exe.release_arena() == nbytes
    np.testing.assert_allclose(cf(np.asfortranarray(x), w)[1], _ref(x, w)[1], rtol=1e-12)
    assert len(exe._pool) == 1


def test_compiled_function_release_arena_covers_every_signature():
    cf = sg.compile(_f)
    (x1, w1), (x2, w2) = _args(), _args(n=20, k=8, m=12, seed=1)
    cf(x1, w1)
    b1 = cf.stats["arena_bytes"]
    cf(x2, w2)
    b2 = cf.stats["arena_bytes"]
    assert cf.signatures == 2 and b1 > 0 and b2 > 0 and b1 != b2
    assert cf.release_arena() == b1 + b2
    assert cf.release_arena() == 0
    for x, w in ((x1, w1), (x2, w2)):
        for a, r in zip(cf(x, w), _ref(x, w)):
            np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)
    assert cf.release_arena() == b1 + b2


def test_release_arena_before_any_call_and_on_the_numpy_backend():
    cf = sg.compile(_f)
    assert cf.release_arena() == 0  # nothing compiled yet
    cn = sg.compile(_f, backend="numpy")
    x, w = _args()
    cn(x, w)
    assert cn.release_arena() == 0
    np.testing.assert_allclose(cn(x, w)[0], _ref(x, w)[0], rtol=1e-12)
