"""The backend protocol and registry (`symgraph.backend`) and the one set of argument rules (`symgraph.signature`).

- the registry names "numpy" and "llvm"; an unknown name is the clear `compile` error;
- a backend registered by a test is what `sg.compile(f, backend=name)` uses;
- `inspect` names what a backend has, and refuses the rest with a SymgraphError;
- one table of arguments: the evaluator, the "numpy" executable and the "llvm" executable make
  the same accept / cast / refuse decision on each (their only parameter is the casting level);
  the generated fast path never accepts what the checked path would refuse or convert;
- donation: the same rule for both backends.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph import backend as B
from symgraph import signature as S
from symgraph.numpy_backend import NumpyBackend
from symgraph.passes.schedule import schedule


def test_the_registry_lists_numpy_and_llvm():
    names = B.backend_names()
    assert "numpy" in names and "llvm" in names
    assert isinstance(B.get_backend("numpy"), NumpyBackend)
    assert isinstance(B.get_backend("numpy"), B.Backend)


def test_an_unknown_backend_is_a_clear_error():
    with pytest.raises(sg.SymgraphError, match=r"unknown backend 'nope'; choose one of .*'llvm'.*'numpy'"):
        sg.compile(lambda x: x, backend="nope")
    with pytest.raises(sg.SymgraphError, match="unknown backend"):
        B.get_backend("nope")
    with pytest.raises(sg.SymgraphError, match="is registered"):
        B.register_backend("numpy", NumpyBackend())


class Toy(B.Backend):
    """A backend of the test: the NumPy one, counting its compiles."""

    name = "toy"

    def __init__(self):
        self.compiled = 0

    def compile(self, graph, order, *, donate=frozenset(), name="f"):
        self.compiled += 1
        exe = B.get_backend("numpy").compile(graph, order, donate=donate, name=name)
        exe.stats["backend"] = "toy"
        return exe


@pytest.fixture
def toy():
    t = Toy()
    B.register_backend("toy", t)
    try:
        yield t
    finally:
        B.unregister_backend("toy")


def test_a_registered_backend_is_used_by_compile(toy):
    assert "toy" in B.backend_names()
    cf = sg.compile(lambda x: np.tanh(x) * 2.0, backend="toy")
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(cf(x), np.tanh(x) * 2.0, rtol=1e-15)
    np.testing.assert_allclose(cf(x + 1), np.tanh(x + 1) * 2.0, rtol=1e-15)
    assert toy.compiled == 1  # one signature, compiled once, by the toy
    assert cf.stats["backend"] == "toy" and "compile_seconds" in cf.stats
    assert cf.release_arena() == 0 and cf.profile() is None
    # a backend given as a factory is built on first use
    B.register_backend("toy", Toy, replace=True)
    cf2 = sg.compile(lambda x: x + 1, backend="toy")
    np.testing.assert_array_equal(cf2(x), x + 1)
    assert B.get_backend("toy").compiled == 1


def test_inspect_names_what_a_backend_has():
    cf = sg.compile(lambda x: x * 3.0, backend="numpy")
    cf(np.ones(3))
    exe = cf._current().exe
    for call in (lambda: exe.inspect("llvm_ir"), cf.llvm_ir, cf.asm):
        with pytest.raises(sg.SymgraphError, match=r"backend 'numpy' has no '(llvm_ir|asm)'"):
            call()
    pytest.importorskip("llvmlite")
    cl = sg.compile(lambda x: x * 3.0)
    cl(np.ones(3))
    exe = cl._current().exe
    assert exe.inspectable() == ("llvm_ir", "asm")
    assert "define" in exe.inspect("llvm_ir") and cl.llvm_ir() == exe.inspect("llvm_ir")
    assert cl.asm() == exe.inspect("asm")
    with pytest.raises(sg.SymgraphError, match="has no 'ptx'"):
        exe.inspect("ptx")


# ----- one table of argument rules -----

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
Y = np.arange(6.0).reshape(2, 3)


def _f(p, s):
    return p["w"] * p["b"] + s


def _graph():
    return sg.trace(_f, {"w": X, "b": Y}, 1.0)


# row -> (arguments (p, s, ...), decision under casting "equiv", decision under "same_kind");
# a decision is "accept" (the value of _f on the arguments), "cast" (the value on the arguments cast
# to the traced dtypes) or the error class
ROWS = {
    "exact": (({"w": X, "b": Y}, 1.0), "accept", "accept"),
    "numpy scalar": (({"w": X, "b": Y}, np.float64(2.0)), "accept", "accept"),
    "0-d array": (({"w": X, "b": Y}, np.array(2.0)), "accept", "accept"),
    "non-contiguous": (({"w": np.asfortranarray(X), "b": np.ones((2, 6))[:, ::2]}, 1.0), "accept", "accept"),
    "transposed": (({"w": np.ascontiguousarray(X.T).T, "b": Y}, 1.0), "accept", "accept"),
    "read-only": (({"w": X, "b": Y.copy()}, 1.0), "accept", "accept"),
    "byte-swapped": (({"w": X.astype(">f8"), "b": Y}, 1.0), "accept", "accept"),
    "same-kind dtype": (({"w": X.astype(np.float32), "b": Y}, 1.0), sg.DTypeError, "cast"),
    "python int": (({"w": X, "b": Y}, 2), sg.DTypeError, "cast"),
    "int array": (({"w": X, "b": np.arange(6).reshape(2, 3)}, 1.0), sg.DTypeError, "cast"),
    "wrong dtype kind": (({"w": X.astype(complex), "b": Y}, 1.0), sg.DTypeError, sg.DTypeError),
    "string leaf": (({"w": X, "b": Y}, "abc"), sg.DTypeError, sg.DTypeError),
    "object array": (({"w": X.astype(object), "b": Y}, 1.0), sg.DTypeError, sg.DTypeError),
    "wrong shape": (({"w": np.ones((3, 2)), "b": Y}, 1.0), sg.ShapeError, sg.ShapeError),
    "pytree mismatch (extra key)": (({"w": X, "b": Y, "c": Y}, 1.0), sg.ShapeError, sg.ShapeError),
    "pytree mismatch (missing argument)": (({"w": X, "b": Y},), sg.ShapeError, sg.ShapeError),
}
ROWS["read-only"][0][0]["b"].setflags(write=False)

#: consumer -> its casting level (the one parameter of the rules)
CASTING = {"evaluate": S.EVALUATE_CASTING, "numpy": S.COMPILED_CASTING, "llvm": S.COMPILED_CASTING}


def _consumers():
    g = _graph()
    order = schedule(g)
    out = {"evaluate": lambda args: g.evaluate(*args)}
    exes = {"numpy": B.get_backend("numpy").compile(g, order)}
    try:
        exes["llvm"] = B.get_backend("llvm").compile(g, order)
    except sg.SymgraphError:  # no llvmlite
        pass
    for name, exe in exes.items():
        out[name] = lambda args, exe=exe: exe.run(sg.tree_flatten(args)[0])[0]
    return out, exes


CONSUMERS, EXES = _consumers()


def _decide(call, args):
    before = [np.array(a, copy=True) for a in sg.tree_leaves(args) if isinstance(a, np.ndarray) and a.dtype != object]
    try:
        got = call(args)
    except sg.SymgraphError as e:
        return type(e)
    after = [a for a in sg.tree_leaves(args) if isinstance(a, np.ndarray) and a.dtype != object]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)  # arguments are never written
    p, s = args
    exact = _f({k: np.asarray(v).astype(np.float64) for k, v in p.items()}, np.float64(s))
    np.testing.assert_allclose(got, exact, rtol=1e-15)
    assert np.asarray(got).dtype == np.float64
    same = all(np.asarray(v).dtype.newbyteorder("=") == np.float64 for v in p.values()) and \
        type(s) in (float, np.float64, np.ndarray)
    return "accept" if same else "cast"


@pytest.mark.parametrize("row", list(ROWS))
def test_one_argument_rule_table(row):
    args, equiv, same_kind = ROWS[row]
    want = {"equiv": equiv, "same_kind": same_kind}
    got = {name: _decide(call, args) for name, call in CONSUMERS.items()}
    for name, decision in got.items():
        assert decision == want[CASTING[name]], (row, name, decision)
    # the backends agree with each other, and with the evaluator wherever the casting level does not matter
    if equiv == same_kind:
        assert len(set(got.values())) == 1, (row, got)
    assert got["numpy"] == got.get("llvm", got["numpy"])
    # the generated fast path takes only arguments the checked path accepts as they are
    exe = EXES.get("llvm")
    if exe is not None and exe.fast is not None:
        r = exe.fast(args)
        if r is not S.MISS:
            assert equiv == "accept", row
            np.testing.assert_array_equal(r, exe.run(sg.tree_flatten(args)[0])[0])


def test_the_fast_path_takes_exact_arguments():
    exe = EXES.get("llvm")
    if exe is None:
        pytest.skip("no llvmlite")
    assert exe.fast is not None
    assert exe.fast(ROWS["exact"][0]) is not S.MISS
    assert exe.fast(ROWS["0-d array"][0]) is not S.MISS
    unaligned = np.frombuffer(bytearray(6 * 8 + 1), dtype=np.uint8)[1:].view(np.float64).reshape(2, 3)
    unaligned[...] = X
    assert not unaligned.flags.aligned
    assert exe.fast(({"w": unaligned, "b": Y}, 1.0)) is S.MISS  # the checked path copies it
    np.testing.assert_allclose(exe.run([Y, unaligned, 1.0])[0], X * Y + 1.0, rtol=1e-15)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_donation_follows_one_rule(backend):
    if backend == "llvm":
        pytest.importorskip("llvmlite")
    cf = sg.compile(lambda a, b: a * 2.0 + b, backend=backend, donate_argnums=0)
    x, y = np.arange(4.0), np.ones(4)
    r = cf(x, y)
    assert r is x and np.array_equal(x, np.arange(4.0) * 2 + 1)  # donated: written in place
    for make in (lambda: (x, x), lambda: (x, x[:]), lambda: (x[:], y), lambda: (_readonly(x), y)):
        a, b = make()
        want = a * 2.0 + b
        ref = np.array(x, copy=True)
        r = cf(a, b)
        assert r is not a and r is not x  # aliased, a view or read-only: a fresh output
        np.testing.assert_array_equal(r, want)
        np.testing.assert_array_equal(x, ref)  # and the argument is left alone


def _readonly(a):
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def test_the_pool_and_blas_ir_files_are_package_data():
    pytest.importorskip("llvmlite")
    from codegen.cpu import blas, ll, pool

    text = pool.pool_ir(202, "declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()", 50_000)
    assert "define void @symgraph_pool_run(" in text and "syscall(i64 202," in text and "${" not in text
    assert "@symgraph_blas_enter" in blas.blas_threads_ir("get_n", "set_n")
    with pytest.raises(KeyError):
        ll.ll_text("pool.ll", SYS_FUTEX=202)  # every placeholder must be given
