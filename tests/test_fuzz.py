"""Random-program fuzzing: every stage cross-checked on programs from tests/programs.py.

Per random program (see `programs.py` for the generator and the oracles):
- the NumPy evaluator vs plain NumPy, and the simplified vs the unsimplified graph;
- reverse vs forward mode vs central finite differences, first and second
  order, float64 (four second-order mode combinations);
- every checkpoint strategy ("sqrt", "revolve", "mincut", a byte budget) vs none;
- the LLVM backend (`sg.compile`) vs the evaluator, for the program and for a
  compiled value_and_grad (with a checkpoint strategy drawn at random).

Profiles (SYMGRAPH_FUZZ): "ci" (default) tries 2,410 programs in about a
minute and a half; "long" tries 50,000. Hypothesis shrinks a failure to a
small program and prints it as runnable source.

`python tests/test_fuzz.py [N] [--out report.json]` runs N programs per the
long profile's mix with the seeded generator, continues past failures and
reports every failing seed (used for the figures in docs/reliability.md).
"""

from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

import programs as P  # noqa: E402

import symgraph as sg  # noqa: E402

PROFILE = os.environ.get("SYMGRAPH_FUZZ", "ci")

#: Programs per check, per profile (the sum is the number of programs tried).
COUNTS = {
    "ci": {"values": 2000, "derivatives": 150, "checkpoint": 120, "llvm": 100, "llvm_grad": 40},
    "long": {"values": 38000, "derivatives": 6000, "checkpoint": 3000, "llvm": 2200, "llvm_grad": 800},
}[PROFILE]

F64 = (np.float64,)
VALUE_CFG = P.Config()
DIFF_CFG = P.Config(differentiable=True, dtypes=F64)
LLVM_CFG = P.Config(max_ops=8)


def _settings(name: str) -> settings:
    return settings(max_examples=COUNTS[name], deadline=None, suppress_health_check=list(HealthCheck),
                    print_blob=True)


@_settings("values")
@given(P.programs(VALUE_CFG))
def test_fuzz_evaluator_and_simplify(prog):
    g = P.check_evaluator(prog)
    P.check_simplify(prog, g)


@_settings("derivatives")
@given(P.programs(DIFF_CFG))
def test_fuzz_derivatives_fwd_rev_fd(prog):
    P.check_derivatives(prog)


@_settings("checkpoint")
@given(P.programs(DIFF_CFG))
def test_fuzz_checkpoint_strategies(prog):
    P.check_checkpoint(prog)


@_settings("llvm")
@given(P.programs(LLVM_CFG))
def test_fuzz_llvm_vs_evaluator(prog):
    P.check_llvm(prog)


@_settings("llvm_grad")
@given(P.programs(P.Config(max_ops=6, differentiable=True)), st.sampled_from([None, "sqrt", "revolve", "mincut"]))
def test_fuzz_llvm_value_and_grad(prog, checkpoint):
    P.check_llvm_grad(prog, checkpoint=checkpoint)


def test_profile_tries_enough_programs():
    """The CI profile tries at least 2,000 programs; the long one 50,000."""
    assert sum(COUNTS.values()) >= (50_000 if PROFILE == "long" else 2_000)


def test_generator_covers_the_op_set():
    """400 seeded programs use every construct family, and every traced primitive of the op set appears."""
    feats: set[str] = set()
    ops: set[str] = set()
    for seed in range(400):
        p = P.program_from_seed(seed, VALUE_CFG)
        feats |= p.features
        ops |= {n.op.name for n in sg.trace(p.fn, *p.args)}
    for f in ("matmul", "matmul_batched", "einsum", "where", "where_guard", "gather", "gather_traced", "at_add",
              "at_set", "slice", "concatenate", "stack", "reshape", "transpose", "broadcast_to", "sum", "max_reduce",
              "argmax", "prod", "logsumexp", "softmax", "norm", "dropout", "input_i", "python_scalar", "fanout"):
        assert f in feats, f
    want = {"add", "sub", "mul", "div", "neg", "pow", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan",
            "tanh", "sigmoid", "erf", "abs", "sign", "floor", "maximum", "minimum", "where", "lt", "le", "gt", "ge",
            "logical_and", "logical_or", "logical_not", "isnan", "cast", "sum", "max", "min", "prod", "argmax",
            "reshape", "transpose", "broadcast_to", "expand_dims", "squeeze", "slice", "gather", "scatter_add",
            "concatenate", "matmul", "einsum", "stop_gradient", "random_uniform", "constant", "input"}
    assert want <= ops, sorted(want - ops)


def test_programs_are_deterministic_and_printable():
    a = P.program_from_seed(123)
    b = P.program_from_seed(123)
    assert a.source == b.source and all(np.array_equal(x, y) for x, y in zip(a.args, b.args))
    ns = P._namespace(False, a.dtype)
    exec(repr(a), ns)  # the printed program runs as is
    with np.errstate(all="ignore"):
        P.assert_close(ns["prog"](*ns["args"]), a.reference(), 0, 0, "repr round trip")


# --------------------------------------------------------------------------- regressions found by the fuzzer


def test_regression_np_inner_on_tracers():
    """np.inner on tracers: result shape a.shape[:-1] + b.shape[:-1] (was (2,) for (2,3),(2,3); IndexError for a 1-d b)."""
    rng = np.random.default_rng(0)
    for sa, sb in [((2, 3), (2, 3)), ((5, 2), (2,)), ((3,), (4, 3)), ((2, 4, 3), (5, 3)), ((), (3,))]:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        got = sg.trace(lambda a, b: np.inner(a, b), a, b).evaluate(a, b)
        np.testing.assert_allclose(got, np.inner(a, b), rtol=1e-12)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    sg.check_grads(lambda a, b: np.inner(a, b), (a, b), order=2)


def test_regression_compile_returns_an_input_that_is_not_the_first():
    """A compiled function returning its second argument unchanged (codegen plan_buffers used list.index: ==)."""
    x, y = np.arange(3.0), np.arange(4.0).reshape(2, 2)
    for backend in ("numpy", "llvm"):
        cf = P.compile_fn(lambda x, y: (x * 2.0, y), backend=backend)
        a, b = cf(x, y)
        np.testing.assert_array_equal(a, x * 2.0)
        np.testing.assert_array_equal(b, y)
        assert b is not y


def test_regression_llvm_zero_size_reshape():
    """A zero-size slice followed by a reshape (codegen.kernels.affine.reshape_index divided by a zero dimension)."""
    for f, x in [(lambda x: x[0:0, None], np.ones(3)), (lambda x: np.sin(x)[0:0, None] * 2.0, np.ones(3)),
                 (lambda x: (x * 2)[:, 0:0].reshape(0, 2), np.ones((2, 3)))]:
        got = P.compile_fn(f)(x)
        want = sg.trace(f, x).evaluate(x)
        assert got.shape == want.shape


def test_regression_llvm_prod_backward():
    """Compiled value_and_grad through prod's backward (slices, concatenations of ones): was miscompiled
    (the value read 1.0 for the last row; the gradient through a matmul was wrong)."""
    x = np.arange(1, 13, dtype=float).reshape(4, 3)
    f = sg.value_and_grad(lambda x: np.sum(np.prod(x, axis=1, keepdims=True)))
    v, g = P.compile_fn(f)(x)
    assert float(v) == 1950.0
    np.testing.assert_allclose(g, np.prod(x, axis=1, keepdims=True) / x, rtol=1e-12)
    a = np.arange(1, 9, dtype=float).reshape(4, 2) / 4
    b = np.arange(1, 7, dtype=float).reshape(2, 3) / 4
    for h in (sg.grad(lambda a: np.sum(np.prod(a @ b, axis=-1))),
              sg.grad(lambda a: np.sum(np.prod(np.concatenate([a, a[:, :1]], axis=1) * 2.0, axis=-1)))):
        np.testing.assert_allclose(P.compile_fn(h)(a), h(a), rtol=1e-12)


def test_regression_llvm_grad_of_prod_with_checkpoint():
    """The long run's one mismatch (llvm_grad, checkpoint="sqrt"): the prod-backward miscompile."""
    x = np.array([[[0.0468, 1.212], [0.7387, -0.7891]], [[-1.2199, 0.5612], [0.566, -1.7688]]])
    f = sg.value_and_grad(lambda x: np.prod((np.sqrt(x + 1.9) - x) * 0.9) + np.sum(np.einsum("ijk->ki", x)))
    want = f(x)
    for ck in (None, "sqrt", "revolve", "mincut"):
        v, g = P.compile_fn(f, checkpoint=ck)(x)
        np.testing.assert_allclose(v, want[0], rtol=1e-12)
        np.testing.assert_allclose(g, want[1], rtol=1e-12)


def test_regression_matmul_fold_with_zero_contraction():
    """(..., m, 0) @ (0,) and (..., m, 0) @ (0, n): the N-d @ 2-d row folding reshaped with -1 and a zero size."""
    for sa, sb in [((0, 1, 0), (0,)), ((2, 3, 0), (0, 4)), ((2, 0, 3), (3, 2))]:
        a, b = np.ones(sa), np.ones(sb)
        g = sg.trace(lambda a, b: np.matmul(a, b), a, b)
        np.testing.assert_array_equal(g.evaluate(a, b), np.matmul(a, b))
        np.testing.assert_array_equal(P.compile_fn(lambda a, b: a @ b)(a, b), np.matmul(a, b))


# --------------------------------------------------------------------------- standalone long runner


def _run(n: int, out: str | None = None) -> dict:
    """Run n seeded programs in the long profile's proportions; count every failure (no early stop)."""
    import collections
    import json
    import time
    import traceback

    long = {"values": 38000, "derivatives": 6000, "checkpoint": 3000, "llvm": 2200, "llvm_grad": 800}
    total = sum(long.values())
    plan = {k: max(1, round(n * v / total)) for k, v in long.items()}
    cfgs = {"values": VALUE_CFG, "derivatives": DIFF_CFG, "checkpoint": DIFF_CFG, "llvm": LLVM_CFG,
            "llvm_grad": P.Config(max_ops=6, differentiable=True)}
    report: dict = {"programs": 0, "failures": [], "per_check": {}, "non_smooth": 0, "seconds": {}}
    groups: dict = collections.defaultdict(list)
    for check, count in plan.items():
        t0 = time.perf_counter()
        fails = 0
        for seed in range(count):
            prog = P.program_from_seed(10_000_000 * list(plan).index(check) + seed, cfgs[check])
            try:
                if check == "values":
                    P.check_simplify(prog, P.check_evaluator(prog))
                elif check == "derivatives":
                    if P.check_derivatives(prog) == "non-smooth":
                        report["non_smooth"] += 1
                elif check == "checkpoint":
                    P.check_checkpoint(prog)
                elif check == "llvm":
                    P.check_llvm(prog)
                else:
                    P.check_llvm_grad(prog, checkpoint=[None, "sqrt", "revolve", "mincut"][seed % 4])
            except Exception as e:  # noqa: BLE001  (count, classify, continue)
                fails += 1
                tb = traceback.extract_tb(e.__traceback__)[-1]
                key = f"{check}: {type(e).__name__} in {os.path.basename(tb.filename)}:{tb.name}: {str(e)[:120]}"
                groups[key].append(prog.seed)
                report["failures"].append({"check": check, "seed_index": seed, "error": f"{type(e).__name__}: {e}"[:500],
                                           "program": repr(prog) if len(repr(prog)) < 4000 else prog.source})
            report["programs"] += 1
        report["per_check"][check] = {"programs": count, "failures": fails}
        report["seconds"][check] = round(time.perf_counter() - t0, 1)
        print(f"{check}: {count} programs, {fails} failures, {report['seconds'][check]} s", flush=True)
    report["groups"] = {k: len(v) for k, v in groups.items()}
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=50_000)
    ap.add_argument("--out", default=None)
    ns = ap.parse_args()
    r = _run(ns.n, ns.out)
    print(f"{r['programs']} programs, {len(r['failures'])} failures, {r['non_smooth']} skipped as non-smooth")
    for k, v in r["groups"].items():
        print(f"  {v:6d}  {k}")
    if r["failures"]:
        sys.exit(1)
