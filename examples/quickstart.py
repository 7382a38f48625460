"""Quickstart: trace plain NumPy code, dump the graph, evaluate it, differentiate it.

Run: python examples/quickstart.py
"""

import numpy as np

import symgraph as sg


def f(x):
    return np.sum(np.tanh(x) ** 2 + 0.5 * np.exp(-x * x))


x = np.linspace(-1.0, 1.0, 5)
g = sg.trace(f, x)
print(g.dump())
print("value (symgraph evaluator):", float(g.evaluate(x)))
print("value (NumPy):             ", float(f(x)))
assert np.allclose(g.evaluate(x), f(x))

grad_f = sg.grad(f)
print("gradient:", grad_f(x))
sg.check_grads(f, (x,), order=2)
print("check_grads to order 2: ok")
