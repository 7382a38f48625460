"""Checkpointing markers: identity ops that carry rematerialization annotations.

`checkpoint_name(x; name)` tags a value for name-based policies
(`save_only_these_names`); `remat_begin(x; region)` and `remat_end(x; region)`
wrap the inputs and outputs of a `symgraph.checkpoint` region. All three are
the identity (value, VJP and JVP); `symgraph.passes.checkpoint.apply_checkpoint`
reads and removes them, so compiled graphs never contain them.
"""

from __future__ import annotations

from .core import Op, register, same_dtype, same_shape

__all__: list[str] = []


def _identity(x, **_):
    return x


def _identity_vjp(ct, node):
    # d(x)/dx = I: the cotangent passes through unchanged
    return (ct,)


def _identity_jvp(t, node):
    return t[0]


for _name, _doc in (
    ("checkpoint_name", "identity; attr name tags the value for name-based checkpoint policies"),
    ("remat_begin", "identity; marks an input of checkpoint region attr region (removed by apply_checkpoint)"),
    ("remat_end", "identity; marks an output of checkpoint region attr region (removed by apply_checkpoint)"),
):
    register(Op(_name, 1, "elementwise", same_shape, same_dtype, _identity, _identity_vjp, _identity_jvp,
                linear=True, doc=_doc, identity_of=0, marker=True))
