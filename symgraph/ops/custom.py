"""Wrapper ops for user-defined derivative rules (`symgraph.custom`).

`custom_vjp_call(*arg_leaves, *residual_leaves, primal_out; rule, index)` and
`custom_jvp_call(*arg_leaves, primal_out; rule, index)` have the value of
their last input (leaf `index` of the user function's output, computed by the
user's primal code). Their derivative rules call the user's rules, held by the
`rule` attribute (a record from `symgraph.custom`), and block the primal code
inside the wrapper:
- custom_vjp_call: VJP = the user's bwd on the residual nodes and the
  cotangent (cotangents for the argument leaves only); JVP = the tangent of
  the primal output (forward mode differentiates the primal code).
- custom_jvp_call: JVP = the user's rule on the argument tangents (the primal
  code's own tangents are never built: `jvp_reads`); VJP = reverse mode on
  the rule's tangent expression, which is linear in fresh tangent placeholders.

Facts for other passes: `identity_of=-1` — the value equals the last input
(an opaque op that is an identity is a derivative wrapper, so `simplify` may
replace the node by it once no more differentiation will happen);
`Op.extra["jvp_reads"]`: which inputs' tangents the JVP rule reads (forward
mode skips the others).
Batching uses the generic loop (`batch=LOOP`: the user's rules are not batched).
"""

from __future__ import annotations

from .batch import LOOP
from .core import Op, register


def _last_shape(*shapes, rule, index):
    return shapes[-1]


def _last_dtype(*dtypes, rule, index):
    return dtypes[-1]


def _last_impl(*xs, rule, index):
    return xs[-1]


def _rule_vjp(ct, node):
    return node.attr("rule").vjp(ct, node)


def _rule_jvp(tangents, node):
    return node.attr("rule").jvp(tangents, node)


register(Op("custom_vjp_call", None, "opaque", _last_shape, _last_dtype, _last_impl, _rule_vjp, _rule_jvp,
            doc="value of the last input (a custom_vjp function's output leaf); VJP from the user's bwd rule",
            identity_of=-1, cheap=False, batch=LOOP, extra={"jvp_reads": lambda n: (len(n.inputs) - 1,)}))

register(Op("custom_jvp_call", None, "opaque", _last_shape, _last_dtype, _last_impl, _rule_vjp, _rule_jvp,
            doc="value of the last input (a custom_jvp function's output leaf); JVP from the user's rule",
            identity_of=-1, cheap=False, batch=LOOP, extra={"jvp_reads": lambda n: tuple(range(len(n.inputs) - 1))}))
