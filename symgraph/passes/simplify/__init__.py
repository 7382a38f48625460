"""Simplification: rule tables run to a fixed point, plus polynomial canonicalization.

`simplify(graph)` rebuilds a graph bottom-up in a builder. Rebuilding
re-interns every node (common subexpressions merge: CSE), drops what the
outputs do not reach (dead code elimination), removes the `copy` nodes that
transformations insert, folds constants with each op's own NumPy
implementation, and rewrites nodes through `RULES`, small functions keyed by op
name, each commented with its identity. A second stage (`polynomial_pass`)
brings elementwise add/sub/neg/mul/muladd regions into a canonical sum of
monomials, collects like terms and re-emits the polynomial in Horner form, one
`muladd` (a*b + c rounded twice, bit for bit equal to mul then add) per step
and Horner in v*v for even and odd polynomials; this is what keeps nested
derivatives small (the n-th derivative of tanh is a polynomial of degree n + 1
in tanh x). The stages form a flat pipeline, `PIPELINE`, run until nothing
changes. `broadcast_to` of a constant is never folded, so the identity basis
of jacobian/hessian stays structural and their graph sizes do not depend on n.

Semantics. Rules are exact (bit for bit, NaN, inf and the sign of zero
included) unless they belong to one of two opt-in classes:
- `reassociate=True` (the default) also allows rewrites that change rounding
  only: combining constant factors, sum of a broadcast as a product, the
  polynomial stage, pow with small integer exponents as products. No
  rewrite of this class turns a finite value into inf or NaN or back: the
  polynomial stage only runs on regions whose atoms are provably bounded
  (tanh, sin, sigmoid, ... and constants; checked with a magnitude bound), and
  keeps every atom the region read, so a NaN still propagates. The sign of an
  exactly zero result is not preserved by this class.
- `assume_finite=True` (off by default) assumes no NaN or inf and ignores the
  sign of zero: x*0 -> 0, x-x -> 0, x+0 -> x everywhere, zeros through
  matmul, polynomial regions over any atoms.

Nodes with a tag (other than the ("fresh", k) tags of the `copy` nodes made by
transformations) are never rewritten, folded, merged with untagged nodes or
looked through by a rule: recomputed copies made by checkpointing survive.

The package, one job per module (lowest first):
- `options`: `SimplifyOptions` and the size limits of every stage;
- `analysis`: what a node is, read without building: splats, zero tests,
  whether it may hold -0.0, magnitude bounds;
- `context`: the state of one call (`_Run`, the thread's current run), the
  pass builder and the helpers rules build nodes with;
- `rules`: the rule registry (`rule`, `RULES`, `GENERIC_RULES`) and the
  rules, each commented with its identity;
- `rewrite`: the rewrite stage (`rewrite_pass`);
- `horner`: emission of a polynomial in Horner form, and its operation count;
- `polynomial`: the polynomial stage (`polynomial_pass`);
- `driver`: `PIPELINE` and `simplify`, the fixed-point driver.

References:
    PyTensor's canonicalize/specialize rewrites and the single-client rule;
    tinygrad's `graph_rewrite` tables; Horner's scheme for polynomial
    evaluation (Knuth, TAOCP vol. 2, 4.6.4).
"""

from .driver import PIPELINE, simplify
from .options import FOLD_LIMIT, SimplifyOptions
from .polynomial import polynomial_pass
from .rewrite import rewrite_pass
from .rules import GENERIC_RULES, RULES, rule
from . import masks  # noqa: E402,F401  (registers the guard-mask rules)

__all__ = [
    "FOLD_LIMIT",
    "GENERIC_RULES",
    "PIPELINE",
    "RULES",
    "SimplifyOptions",
    "polynomial_pass",
    "rewrite_pass",
    "rule",
    "simplify",
]
