"""Newton's method with the exact Hessian: L2-regularized logistic regression on breast-cancer data.

The objective, with z = X w + b and labels y in {0, 1},

    L(w, b) = mean_i [log(1 + exp(z_i)) - y_i z_i] + (lam / 2) |w|^2

(the intercept b is not penalized), is minimized by Newton's method
theta <- theta - H^-1 g, where `sg.value_and_grad` and `sg.hessian` give g
and the exact Hessian H as one compiled function. Newton converges
quadratically: the gradient norm falls from ~1 to ~1e-16 in about ten steps.

The result is checked against scikit-learn's LogisticRegression, which
minimizes C sum_i logloss_i + |w|^2 / 2 with an unpenalized intercept: the
same minimizer when C = 1 / (n lam).

Data: `sklearn.datasets.load_breast_cancer` (569 real samples, 30 features,
bundled with scikit-learn), standardized.

Run:  python examples/newton_logistic_regression.py [--backend numpy] [--lam 1e-3]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Sequence

import numpy as np

import symgraph as sg
import symgraph.numpy as snp
from symgraph import nn


def load_data(n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Standardized float64 features (n, 30) and float64 0/1 labels (n,); the first n samples if n is given."""
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x, y = d.data[:n], d.target[:n].astype(np.float64)
    x = (x - x.mean(0)) / x.std(0)
    return x, y


def objective(theta: Any, x: Any, y: Any, lam: float) -> Any:
    """Mean logistic loss plus (lam / 2) |w|^2; theta = (w_1..w_d, b), shape (d + 1,)."""
    w, b = theta[:-1], theta[-1]
    z = snp.matmul(x, w) + b
    return nn.binary_cross_entropy_with_logits(z, y) + 0.5 * lam * snp.sum(w * w)


def newton(x: np.ndarray, y: np.ndarray, lam: float, backend: str = "llvm", max_iter: int = 10,
           tol: float = 1e-10, verbose: bool = True) -> dict:
    """Minimize `objective` by Newton's method with a backtracking safeguard.

    Args:
        x: (n, d) float64 features.
        y: (n,) float64 labels in {0, 1}.
        lam: L2 coefficient (> 0 keeps the Hessian positive definite).
        backend: sg.compile backend.
        max_iter: Newton steps allowed.
        tol: stop when the Newton decrement sqrt(g^T H^-1 g) is below tol.
        verbose: print one line per evaluated point.

    Returns:
        dict: "theta" (d + 1,), "iterations" (Newton steps taken before the
        decrement fell below tol), "history" (list of (loss, |g|, decrement)
        at each evaluated point), "converged", "seconds".

    References:
        Boyd & Vandenberghe, Convex Optimization (2004), sec. 9.5 (Newton's
        method, the Newton decrement as stopping criterion).
    """

    def loss_grad_hessian(theta: Any, x: Any, y: Any) -> tuple:
        f = lambda t: objective(t, x, y, lam)  # noqa: E731
        value, grad = sg.value_and_grad(f)(theta)
        return value, grad, sg.hessian(f)(theta)

    lgh = sg.compile(loss_grad_hessian, backend=backend)
    theta = np.zeros(x.shape[1] + 1)
    history = []
    t0 = time.perf_counter()
    converged = False
    steps = 0
    while True:
        f, g, h = lgh(theta, x, y)
        step = np.linalg.solve(h, g)
        decrement = float(np.sqrt(max(g @ step, 0.0)))
        history.append((float(f), float(np.linalg.norm(g)), decrement))
        if verbose:
            print(f"  step {steps:2d}: loss {float(f):.16f}  |grad| {np.linalg.norm(g):.3e}  decrement {decrement:.3e}")
        if decrement < tol:
            converged = True
            break
        if steps == max_iter:
            break
        # Backtracking (Armijo) on the Newton direction; near the optimum the full step is taken.
        alpha = 1.0
        while alpha > 1e-4 and float(lgh(theta - alpha * step, x, y)[0]) > float(f) - 0.25 * alpha * decrement**2:
            alpha *= 0.5
        theta = theta - alpha * step
        steps += 1
    return {"theta": theta, "iterations": steps, "history": history, "converged": converged,
            "seconds": time.perf_counter() - t0}


def sklearn_fit(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """scikit-learn's minimizer of the same objective: LogisticRegression(C = 1 / (n lam)), (coef, intercept)."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=1.0 / (len(x) * lam), tol=1e-12, max_iter=10_000, solver="newton-cholesky")
    clf.fit(x, y)
    return np.concatenate([clf.coef_.ravel(), clf.intercept_])


def main(argv: Sequence[str] | None = None) -> dict:
    """Run Newton's method, compare with scikit-learn, print the comparison.

    Returns:
        dict: "theta", "sklearn", "rel_err" (max_i |theta_i - sk_i| / |sk_i|),
        "iterations", "converged", "history", "train_accuracy".
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="llvm", choices=("llvm", "numpy"))
    ap.add_argument("--lam", type=float, default=1e-3, help="L2 coefficient lambda")
    ap.add_argument("--n", type=int, default=None, help="use the first n samples (default: all 569)")
    ap.add_argument("--max-iter", type=int, default=10)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    x, y = load_data(args.n)
    n, d = x.shape
    print(f"breast cancer: {n} samples, {d} standardized features; lambda = {args.lam:g}; backend={args.backend}")
    res = newton(x, y, args.lam, args.backend, args.max_iter, verbose=not args.quiet)
    sk = sklearn_fit(x, y, args.lam)
    theta = res["theta"]
    rel = float(np.max(np.abs(theta - sk) / np.abs(sk)))
    acc = float(np.mean(((x @ theta[:-1] + theta[-1]) > 0) == (y > 0.5)))
    status = "converged" if res["converged"] else "NOT converged"
    print(f"Newton: {status} in {res['iterations']} iterations ({res['seconds']:.3f} s, compile included)")
    print(f"max relative difference to scikit-learn (C = 1/(n lambda) = {1 / (n * args.lam):.4g}): {rel:.2e}")
    print(f"training accuracy: {100 * acc:.2f}%")
    return {"theta": theta, "sklearn": sk, "rel_err": rel, "iterations": res["iterations"],
            "converged": res["converged"], "history": res["history"], "train_accuracy": acc}


if __name__ == "__main__":
    main()
