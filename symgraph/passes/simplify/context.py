"""The state of one `simplify` call and building nodes in it.

`_PassBuilder` canonicalizes commutative operands and stamps metadata; `_Run`
holds a call's options, builder, reader counts and statistics; the thread's
current run (`_run()`) is what rules build with (`_mk`, `_constant`, ...).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...errors import SourceLocation
from ...ir import Builder, ConstValue, Node, NodeMeta, set_build_context, set_meta
from ...ops import OPS, Op
from .analysis import _BCAST, _CONST, _splat, _uniform
from .options import SimplifyOptions

_NOLOC = SourceLocation("<simplify>", 0, "simplify")  # the location of nodes built without one


# --------------------------------------------------------------------------- the pass builder and the run


class _PassBuilder(Builder):
    """A builder that canonicalizes commutative operands and stamps metadata.

    New nodes get the role and source location of the node being rewritten
    (`cur_meta`), never the location of the simplifier's caller. When wrapping
    an existing builder it shares that builder's intern table, so results can
    be compared by identity with nodes built there.
    """

    def __init__(self, share: Builder | None = None):
        super().__init__(share)
        self._meta: NodeMeta = NodeMeta(None, "forward")
        self._synced: NodeMeta | None = None  # the metadata the thread's build context was last set from

    @property
    def cur_meta(self) -> NodeMeta:
        """Metadata given to the nodes built from now on (that of the node being rewritten)."""
        return self._meta

    @cur_meta.setter
    def cur_meta(self, m: NodeMeta) -> None:
        # Builder.make stamps new nodes with the thread's location override and role (see
        # symgraph.ir.source_location and role): `make` sets both from `m` when it is called
        # (most nodes being rewritten build nothing); `adopt` and `remake` pass the metadata.
        self._meta = m

    def adopt(self, node: Node, inputs: tuple) -> Node:
        """`node` rebuilt on `inputs`: the node itself when nothing changed and no equal node exists here.

        Adopting an unchanged node registers it in the intern table instead of
        creating a copy (cheap, and it keeps its metadata); an equal node
        already in the table is returned instead (CSE).
        """
        ins = node.inputs
        if len(inputs) != len(ins):
            return self.make(node.op, inputs, node.attrs, node.tag)
        for a, b in zip(inputs, ins):
            if a is not b:
                return self.remake(node, inputs)
        if _swapped(node.op, ins):
            return self.remake(node, inputs)
        return Builder.adopt(self, node)

    def adopt_canonical(self, node: Node, inputs: tuple) -> Node:
        """`adopt(node, inputs)` for inputs whose commutative operands are in order already (`_swapped` is
        False for them): the same node, without testing the order again."""
        ins = node.inputs
        if len(inputs) != len(ins):
            return self.make(node.op, inputs, node.attrs, node.tag)
        for a, b in zip(inputs, ins):
            if a is not b:
                return Builder.remake(self, node, inputs, self._meta)
        return Builder.adopt(self, node)

    def make(self, op: Any, inputs: Iterable[Node] = (), attrs: Any = None, tag: Any = None) -> Node:
        m = self._meta
        if m is not self._synced:
            self._synced = m
            set_build_context(m.location if m.location is not None else _NOLOC, m.role, m.origin)
        inputs = tuple(inputs)
        if _swapped(op, inputs):
            inputs = (inputs[1], inputs[0]) + inputs[2:]
        if self._meta.location is None:
            n = self.interned()
            node = Builder.make(self, op, inputs, attrs, tag)
            if self.interned() != n:
                set_meta(node, self._meta)  # no location: do not keep the placeholder
            return node
        return Builder.make(self, op, inputs, attrs, tag)

    def remake(self, node: Node, inputs: tuple, meta: NodeMeta | None = None) -> Node:
        """`make(node.op, inputs, node.attrs, node.tag)` (see `Builder.remake`).

        A new node gets `meta` (default `cur_meta`): the metadata `make` would give it.
        """
        if type(inputs) is not tuple:
            inputs = tuple(inputs)
        if _swapped(node.op, inputs):
            inputs = (inputs[1], inputs[0]) + inputs[2:]
        return Builder.remake(self, node, inputs, self._meta if meta is None else meta)


def _swapped(op: Op, ins: tuple) -> bool:
    """Whether the commutative operands of a node (both of add, mul, ...; a and b of muladd(a, b, c)) are out of order.

    The order is that of `_order_key` (splat constants last, otherwise creation order).
    """
    if not op.commutative:
        return False
    a = ins[0]
    b = ins[1]
    if a.dtype.kind == "c":
        return False  # NumPy's complex product is not bitwise commutative (its SIMD loop fuses a multiply-add)
    sa = (a.op is _CONST or a.op is _BCAST) and _splat(a) is not None
    sb = (b.op is _CONST or b.op is _BCAST) and _splat(b) is not None
    return sa > sb or (sa == sb and b.id < a.id)


def _order_key(x: Node) -> tuple[int, int]:
    # constants (splats) last, otherwise creation order
    if x.op is not _CONST and x.op is not _BCAST:
        return (0, x.id)
    return (1 if _splat(x) is not None else 0, x.id)


class _Run:
    """The state of one `simplify` call: options, builder, reader counts, statistics."""

    def __init__(self, options: SimplifyOptions, builder: _PassBuilder):
        self.options = options
        self.builder = builder
        self.readers: dict[Node, int] = {}  # node -> readers in the graph being rewritten
        self.stats: Counter = Counter()
        self.changes = 0
        self.stable: set[Node] = set()  # nodes on which no rule fired (rewrite pass)
        self.settled: dict[str, tuple] = {}  # stage -> outputs it last left unchanged
        self.splats: dict[tuple, Node] = {}  # (type, value, sign, dtype, shape) -> splat built by polynomial_pass
        self.dry_ops: dict[frozenset, int] = {}  # polynomial, atoms by rank -> operations of its Horner form


_local = threading.local()


def _run() -> _Run:
    r = getattr(_local, "run", None)
    if r is None:
        raise RuntimeError("simplify rules run only inside simplify()")
    return r


# --------------------------------------------------------------------------- building nodes in the current run


def _mk(name: str, *inputs: Node, **attrs: Any) -> Node:
    return _run().builder.make(OPS[name], inputs, attrs or None)


def _constant(value: Any, dtype: Any, shape: tuple = ()) -> Node:
    """A splat (0-d constant, broadcast when shape is not ()) or a constant array."""
    a = np.asarray(value, dtype=dtype)
    if a.ndim == 0 or _uniform(a):
        c = _run().builder.make(_CONST, (), {"value": ConstValue(a.reshape(-1)[0] if a.ndim else a)})
        shape = tuple(shape) if a.ndim == 0 else a.shape
        return c if shape == () else _run().builder.make(_BCAST, (c,), {"shape": shape})
    return _run().builder.make(_CONST, (), {"value": ConstValue(a)})


def _splat_like(value: Any, like: Node) -> Node:
    return _constant(np.asarray(value, dtype=like.dtype), like.dtype, like.shape)


def _single(x: Node) -> bool:
    """x has at most one reader: a rule may absorb it without duplicating work."""
    return _run().readers.get(x, 1) <= 1


def _reshape(x: Node, shape: tuple) -> Node:
    return x if x.shape == tuple(shape) else _mk("reshape", x, shape=tuple(shape))


def _broadcast(x: Node, shape: tuple) -> Node:
    return x if x.shape == tuple(shape) else _mk("broadcast_to", x, shape=tuple(shape))
