"""Op-table rows for complex numbers (docs/complex.md): the complex-part primitives and complex operands.

conj, real, imag, complex (x + iy from parts) and complex_abs are complex-only primitives; the
holomorphic ops (arithmetic, exp, log, sqrt, sin, cos, tan, tanh, pow, sum, prod, matmul, einsum)
get rows with complex operands. The table evaluates them against NumPy at complex64 and complex128
(the domains map the row's float dtype to the complex one of its width) and checks the derivatives
under JAX's convention with `check_grads` (directions in the real and imaginary parts, order 2,
both modes) and the VJP/JVP identity.
"""

from __future__ import annotations

import numpy as np

from opcase import OpCase, cplx, cplx_nonzero, real

from symgraph import lax as L

SHAPES1 = [(((2, 3),), {}), (((),), {})]


def _unary(name, dom=cplx, ref=None, **kw):
    return OpCase(name, lambda x: L.bind(name, x), ref, SHAPES1, (dom,), grad_variants=1, **kw)


def _holo(name, dom, ref):
    return OpCase(name, lambda x: L.unary(name, x), ref, SHAPES1, (dom,), grad_variants=1, name="complex")


def _bin(name, dom, ref):
    return OpCase(name, lambda x, y: L.binary(name, x, y), ref, [(((2, 3), (2, 3)), {}), (((2, 3), (3,)), {})],
                  (cplx, dom), grad_variants=1, name="complex")


CASES = [
    _unary("conj", ref=np.conjugate),
    _unary("real", ref=np.real),
    _unary("imag", ref=np.imag),
    _unary("complex_abs", cplx_nonzero, np.abs),
    OpCase("complex", lambda x, y: L.bind("complex", x, y), lambda x, y: x + 1j * y,
           [(((2, 3), (2, 3)), {}), (((), ()), {})], (real, real), grad_variants=1),
    *[_holo(n, cplx_nonzero if n in ("log", "sqrt") else cplx, getattr(np, n))
      for n in ("exp", "log", "sqrt", "sin", "cos", "tan", "tanh")],
    _bin("add", cplx, np.add), _bin("sub", cplx, np.subtract), _bin("mul", cplx, np.multiply),
    _bin("div", cplx_nonzero, np.divide), _bin("pow", cplx_nonzero, np.power),
    OpCase("neg", lambda x: L.neg(x), np.negative, SHAPES1, (cplx,), grad_variants=1, name="complex"),
    OpCase("cast", lambda x: L.cast(x, np.complex128), lambda x: x.astype(np.complex128), SHAPES1, (real,),
           grad_variants=1, name="to-complex"),
    OpCase("sum", lambda x: L.reduce("sum", x, 1), lambda x: np.sum(x, axis=1), [(((2, 3),), {})], (cplx,),
           name="complex"),
    OpCase("prod", lambda x: L.reduce("prod", x, 1), lambda x: np.prod(x, axis=1), [(((2, 3),), {})], (cplx,),
           name="complex"),
    OpCase("matmul", L.matmul, np.matmul, [(((2, 3), (3, 4)), {})], (cplx, cplx), name="complex"),
]
