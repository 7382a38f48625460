"""The op table's vocabulary: input domains, the `OpCase` row and its builders.

tests/test_ops.py runs every row through the same checks (evaluation against
NumPy, shape/dtype rules, `check_grads` to order 2 in both modes, the VJP/JVP
identity, zero derivatives of non-differentiable ops, batching, the record's
facts). Its own rows are the core ops; a family of ops keeps its rows in a
file tests/cases_<family>.py that defines `CASES` (a list of `OpCase`), and
`extra_cases` collects them, so adding a family never edits test_ops.py.
"""

from __future__ import annotations

import importlib
import pathlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from symgraph import lax as L


# ----- input domains: (rng, shape, dtype) -> array -----


def real(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def pos(rng, shape, dtype):
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def unit(rng, shape, dtype):
    return rng.uniform(-0.9, 0.9, shape).astype(dtype)


def above_m1(rng, shape, dtype):
    return rng.uniform(-0.5, 2.0, shape).astype(dtype)


def nonzero(rng, shape, dtype):
    return (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)).astype(dtype)


def small_ints(rng, shape, dtype):
    """Floats with frequent ties (for comparisons)."""
    return rng.integers(-2, 3, shape).astype(dtype)


def with_nans(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    x[rng.random(shape) < 0.3] = np.nan
    return x


def _complex_of(dtype):
    return np.complex64 if np.dtype(dtype) in (np.float32, np.complex64) else np.complex128


def cplx(rng, shape, dtype):
    """Complex values of the float dtype's width (float32 -> complex64, float64 -> complex128)."""
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(_complex_of(dtype))


def cplx_nonzero(rng, shape, dtype):
    """Complex values with |z| in [0.5, 2], away from the negative real axis (log's and sqrt's branch cut)."""
    r = rng.uniform(0.5, 2.0, shape)
    phi = rng.uniform(-2.5, 2.5, shape)
    return (r * np.exp(1j * phi)).astype(_complex_of(dtype))


def boolean(rng, shape, dtype):
    return rng.random(shape) < 0.5


def indices(n):
    def sample(rng, shape, dtype):
        return rng.integers(-n, n, shape).astype(np.int64)  # negative indices wrap, repeats accumulate

    return sample


def key(rng, shape, dtype):
    return np.uint64(rng.integers(0, 2**62))


def integers(rng, shape, dtype):
    return rng.integers(-5, 6, shape).astype(np.int64)


@dataclass
class OpCase:
    """One row of the op table.

    Attributes:
        op: the primitive under test (it must appear in the traced graph).
        fn: builds the op from the arguments (eager NumPy on arrays, nodes when traced).
        ref: the NumPy reference.
        variants: list of (argument shapes, keyword params for fn and ref).
        domain: one sampler per argument.
        order: derivative order to check (0: not differentiable).
        grad_variants: how many of the first variants are gradient-checked.
        check_kw: extra keyword arguments for check_grads.
        dtypes: the float dtypes to evaluate in.
        ip_rtol: relative tolerance of the VJP/JVP inner-product identity.
        name: test id suffix.
    """

    op: str
    fn: Callable
    ref: Callable
    variants: list
    domain: tuple
    order: int = 2
    grad_variants: int = 2
    check_kw: dict = field(default_factory=dict)
    dtypes: tuple = (np.float32, np.float64)
    name: str = ""
    ip_rtol: float = 1e-10

    @property
    def id(self) -> str:
        return self.op + (f"-{self.name}" if self.name else "")


def unary_case(name, dom, ref, **kw):
    return OpCase(name, lambda x: L.unary(name, x), ref, [(((2, 3, 5),), {}), (((),), {}), (((1,),), {}),
                                                         (((4, 1),), {})], (dom,), **kw)


BINARY_SHAPES = [((2, 3, 5), (2, 3, 5)), ((2, 3, 5), (3, 1)), ((), ()), ((1,), (4,)), ((4, 1), (1, 3))]


def binary_case(name, doms, ref, float_op=False, **kw):
    return OpCase(name, lambda x, y: L.binary(name, x, y, float_op=float_op), ref, [(s, {}) for s in BINARY_SHAPES],
                  doms, **kw)


def reduction_case(name, ref, dom=real, **kw):
    variants = [(((2, 3, 5),), {"axis": (1, 2)}), (((2, 3, 5),), {"axis": None}), (((2, 3, 5),), {"axis": 0}),
                (((2, 3, 5),), {"axis": -1}), (((1,),), {"axis": 0}), (((4, 1),), {"axis": 1})]
    return OpCase(name, lambda x, axis: L.reduce(name, x, axis), lambda x, axis: ref(x, axis=axis), variants, (dom,),
                  **kw)


def extra_cases() -> list:
    """The `CASES` of every tests/cases_*.py, in file-name order."""
    out: list = []
    for path in sorted(pathlib.Path(__file__).parent.glob("cases_*.py")):
        out.extend(importlib.import_module(path.stem).CASES)
    return out
