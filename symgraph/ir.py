"""The graph IR: immutable interned nodes, the builder that interns them, graphs.

A `Node` is one value: an op applied to input nodes with hashable attrs, with
a static shape and dtype. Nodes are interned by a `Builder`: building the same
op on the same inputs with the same attrs and tag returns the existing node,
so common subexpressions are shared and a value read twice is one node with
two readers (fan-out). Inside a traced function nodes act as tracers: they
support NumPy's operators and protocols (see `symgraph.tracing`).

`Node` declares that array interface and `Graph` its conveniences (`evaluate`,
`dump`, `to_dot`, `render`, `to_networkx`); the modules above that implement
them install the implementations when imported (`install_array_api`,
`install_graph_methods`), so this module imports none of them.

Metadata that must not affect identity (the user's source line, the role of a
node: forward, backward or recomputed) is kept out of the intern key: each
node carries it in a private slot, read with `meta` and replaced with
`set_meta`.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import threading
from typing import Any, Iterable, Iterator

import numpy as np

from .errors import ShapeError, SourceLocation, SymgraphError, _override, user_location

__all__ = ["Node", "Builder", "Graph", "ConstValue", "current_builder", "meta", "source_location", "role",
           "collector_paused", "install_array_api", "install_graph_methods"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block (restored as it was on exit).

    Building and rewriting large graphs allocates millions of small objects,
    and each automatic collection would rescan them all and the graph: trace,
    `simplify` and codegen's partition and IR emission run with it paused (on
    a 100,000-node scalar chain: partition 8.6 s -> 5.4 s, IR 5.1 s -> 2.8 s,
    trace of a value and gradient 1.99 s -> 1.42 s). Reference counting still
    frees acyclic garbage; cycles wait for the next collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

_ids = itertools.count()


class ConstValue:
    """A constant array used as a node attribute.

    Equality and hashing use (dtype, shape, bytes), so -0.0 and 0.0 are distinct
    constants and NaN constants intern.
    """

    __slots__ = ("array", "_key", "_hash")

    def __init__(self, array: Any, dtype: Any = None):
        a = np.array(array, dtype=dtype, copy=True, order="C")
        if a.dtype == object:
            raise SymgraphError(f"constant of dtype object is not supported: {type(array).__name__}")
        a.setflags(write=False)
        self.array = a
        self._key = (a.dtype.str, a.shape, a.tobytes())
        self._hash = hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstValue) and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        a = self.array
        if a.size <= 4:
            return np.array2string(a, separator=",", threshold=8).replace("\n", "")
        return f"<{a.dtype} {'x'.join(map(str, a.shape))}>"


class NodeMeta:
    """Side-table metadata of a node (not part of its identity).

    `location` is the user's source line, `role` one of forward, backward,
    tangent, recomputed; `origin` is, for a node built by a derivative rule
    (backward, tangent), the op name of the forward node whose rule built it
    (its location is then that forward node's line), else None.
    """

    __slots__ = ("location", "role", "origin")

    def __init__(self, location: SourceLocation | None, role: str, origin: str | None = None):
        self.location = location
        self.role = role
        self.origin = origin


_DEFAULT_META = NodeMeta(None, "forward")

#: (location, role, origin) -> the one NodeMeta with those fields. Nothing mutates a NodeMeta
#: (`set_meta` replaces it), so the nodes built at one user line in one role share it: one
#: object per line instead of one per node.
_METAS: dict[tuple, NodeMeta] = {}


def shared_meta(location: SourceLocation | None, role_name: str, origin: str | None = None) -> NodeMeta:
    """The shared `NodeMeta` with these fields (see `_METAS`); never mutate it."""
    key = (location, role_name, origin)
    m = _METAS.get(key)
    if m is None:
        m = _METAS[key] = NodeMeta(location, role_name, origin)
    return m


def _set_meta(node: "Node", m: NodeMeta) -> None:
    object.__setattr__(node, "_meta", m)


def set_meta(node: "Node", m: NodeMeta) -> None:
    """Replace a node's metadata (passes use it to carry location and role)."""
    object.__setattr__(node, "_meta", m)


def current_role() -> str:
    """The role given to nodes built now in this thread (see `role`)."""
    return _ctx.role


def current_origin() -> str | None:
    """The origin given to nodes built now in this thread (see `NodeMeta`, `role`)."""
    return _ctx.origin


def set_build_context(location: SourceLocation | None, role_name: str, origin: str | None = None) -> tuple:
    """Set this thread's location override, role and origin for nodes built from now on.

    A cheap, non-context-manager form of `source_location` + `role` for passes
    that switch context per node (`origin`: see `NodeMeta`). Returns the
    previous (location, role, origin) so the caller can restore it.
    """
    c = _ctx
    prev = (getattr(_override, "loc", None), c.role, c.origin)
    _override.loc = location
    c.role = role_name
    c.origin = origin
    return prev


def declare_numpy_view(node: "Node") -> "Node":
    """Record, for the running trace, that NumPy returns `node` as a view of its first input.

    Layout ops are views by their record (`Op.view`); a gather with constant
    indices that spells a NumPy view (np.diagonal, sliding_window_view) is
    declared here, so that tracing's in-place updates treat it as one (a
    read of it after a write into its base is refused, not stale). Returns
    `node`. Outside a trace it does nothing.
    """
    if tracing_active():
        current_builder().__dict__.setdefault("numpy_views", set()).add(id(node))
    return node


def is_numpy_view(node: "Node") -> bool:
    """Whether `declare_numpy_view` declared `node` in the running trace."""
    return tracing_active() and id(node) in current_builder().__dict__.get("numpy_views", ())


def meta(node: "Node") -> NodeMeta:
    """The metadata of a node (source location, role), kept out of its identity."""
    m = node._meta
    return _DEFAULT_META if m is None else m


class _Ctx(threading.local):
    def __init__(self) -> None:
        self.builders: list[Builder] = []
        self.role: str = "forward"
        self.origin: str | None = None  # the forward op whose derivative rule is building nodes (NodeMeta)


_ctx = _Ctx()


@contextlib.contextmanager
def _overriding(name: str, loc: SourceLocation | None) -> Iterator[None]:
    """Set the thread's location override `name` ("loc" or "default") for the block."""
    prev = getattr(_override, name, None)
    setattr(_override, name, loc)
    try:
        yield
    finally:
        setattr(_override, name, prev)


def source_location(loc: SourceLocation | None) -> contextlib.AbstractContextManager[None]:
    """Attribute nodes built inside the block to `loc` (used by passes)."""
    return _overriding("loc", loc)


def default_location(loc: SourceLocation | None) -> contextlib.AbstractContextManager[None]:
    """Attribute nodes built inside the block with no user frame on the stack to `loc`.

    The `symgraph` command traces on the user's behalf: its inputs (and the
    copies `grad` makes of them) would otherwise have no line, or the
    launcher's; it gives them the traced function's line.
    """
    return _overriding("default", loc)


@contextlib.contextmanager
def role(name: str, origin: str | None = None) -> Iterator[None]:
    """Mark nodes built inside the block with a role (forward, backward, recomputed) and origin (`NodeMeta`)."""
    prev = _ctx.role, _ctx.origin
    _ctx.role = name
    _ctx.origin = origin
    try:
        yield
    finally:
        _ctx.role, _ctx.origin = prev


class _NodeSlots:
    """The storage layout of `Node` (see `_new_node`)."""

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "tag", "id", "_meta", "__weakref__")


class _MutableNode(_NodeSlots):
    """A node under construction: plain slot stores, then its class becomes `Node`."""

    __slots__ = ()


class Node(_NodeSlots):
    """One value of the graph: `op(*inputs, **attrs)` with a static shape and dtype.

    Immutable and hashed by identity (interning makes structural equality
    identity within a builder). Comparison operators build comparison nodes,
    so do not use `==` between nodes to test identity; use `is`.

    Attributes:
        op: the registered `symgraph.ops.Op`.
        inputs: tuple of input nodes.
        attrs: sorted tuple of (name, hashable value) pairs.
        shape: tuple of ints.
        dtype: numpy dtype.
        tag: hashable or None; part of the identity (recomputed copies get one).
        id: a process-unique creation number (for stable ordering).
    """

    __slots__ = ()

    # Let NumPy defer to our __array_ufunc__ in mixed expressions.
    __array_priority__ = 1000

    def __init__(self, op: Any, inputs: tuple, attrs: tuple, shape: tuple, dtype: np.dtype, tag: Any = None):
        s = object.__setattr__
        s(self, "op", op)
        s(self, "inputs", inputs)
        s(self, "attrs", attrs)
        s(self, "shape", shape)
        s(self, "dtype", dtype)
        s(self, "tag", tag)
        s(self, "id", next(_ids))
        s(self, "_meta", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("symgraph nodes are immutable")

    def attr(self, name: str, default: Any = None) -> Any:
        """The value of attribute `name` (or `default`)."""
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def params(self) -> dict[str, Any]:
        """The attrs as a dict."""
        return dict(self.attrs)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the value (size times itemsize)."""
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        shp = ",".join(map(str, self.shape))
        return f"Node({self.op.name}#{self.id}, {self.dtype}[{shp}])"

    # Hashing is object identity (inherited from object, C speed); the array
    # interface below gives nodes comparison operators that build graph nodes,
    # so never use `==` to compare nodes: interning makes `is` the structural test.


# ----- the array interface of nodes -----
#
# Inside a traced function nodes act as arrays. `Node` declares the whole interface
# here: NumPy's operators and protocols, the ndarray methods and attributes, and the
# guards that refuse what a traced value cannot do (bool(), float(), in-place updates,
# the memory of a concrete array). Each member is a stub until the tracing layer,
# when it is imported, installs the implementations as the members themselves
# (`install_array_api`): the IR imports none of the layers that build on it.

_BINARY = ("add", "sub", "mul", "truediv", "pow", "matmul", "floordiv", "mod", "divmod", "and", "or", "xor",
           "lshift", "rshift")
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
_OPERATORS = tuple(f"__{n}__" for n in _BINARY + _COMPARISONS) + tuple(f"__r{n}__" for n in _BINARY)

#: Node members that are methods (operators, protocols, ndarray methods, guards).
ARRAY_METHODS = (
    _OPERATORS
    + ("__neg__", "__pos__", "__abs__", "__invert__", "__bool__", "__float__", "__int__", "__complex__",
       "__index__", "__array__", "__array_ufunc__", "__array_function__", "__getitem__", "__setitem__",
       "__len__", "__iter__")
    # in-place operators (a += v rebinds the traced array a: see "In-place updates" in symgraph.tracing)
    + ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__")
    # ndarray methods that trace
    + ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "take", "var", "std", "clip", "transpose",
       "squeeze", "ravel", "flatten", "swapaxes", "reshape", "astype", "dot", "copy", "conj", "conjugate",
       "all", "any", "round", "argpartition", "argsort", "cumprod", "cumsum", "diagonal", "repeat", "trace",
       "searchsorted")
    # in-place ndarray methods: they rebind a traced array of the running trace, as a[idx] = v does
    + ("sort", "fill", "put", "partition")
    # ndarray methods that raise, naming themselves: concrete values, in-place updates we refuse, no rule yet
    + ("item", "tolist", "resize", "itemset", "setfield", "byteswap", "choose", "compress", "getfield",
       "nonzero", "view", "dump", "dumps", "tofile", "tobytes", "to_device", "setflags")
)
#: Node members that are properties (the memory attributes raise, naming themselves).
ARRAY_PROPERTIES = ("T", "mT", "real", "imag", "itemsize", "at", "base", "ctypes", "data", "flags", "flat",
                    "strides", "device")


def _not_installed(name: str) -> Any:
    def fail(self: Node, *args: Any, **kwargs: Any) -> Any:
        raise SymgraphError(f"Node.{name}: nodes get their array interface from symgraph.tracing, which is not "
                            f"imported (import symgraph)")

    return fail


#: member name -> implementation, taking the node first (`install_array_api`)
_array_api: dict[str, Any] = {name: _not_installed(name) for name in ARRAY_METHODS + ARRAY_PROPERTIES}


def install_array_api(members: dict[str, Any]) -> None:
    """Give nodes their array interface: an implementation for every member of the interface.

    The tracing layer calls this once, when it is imported. Each implementation
    takes the node first: `members["__add__"](x, y)` is `x + y`,
    `members["T"](x)` is `x.T`.

    Args:
        members: name -> function, one per name of `ARRAY_METHODS` and `ARRAY_PROPERTIES`.

    Raises:
        SymgraphError: a member of the interface is missing, or a name is not one.
    """
    missing = set(_array_api) - set(members)
    extra = set(members) - set(_array_api)
    if missing or extra:
        raise SymgraphError(f"install_array_api: missing {sorted(missing)}, not in the interface {sorted(extra)}")
    _array_api.update(members)
    # The implementations become Node's members themselves: `x * y` calls the installed function
    # directly, without a forwarding frame (tracing calls them for every node it builds).
    for name, fn in members.items():
        if name in ARRAY_PROPERTIES:
            setattr(Node, name, property(fn, doc=f"x.{name} (see `install_array_api`)"))
        else:
            setattr(Node, name, fn)


def _forward(name: str) -> Any:
    impl = _array_api
    if name in ARRAY_PROPERTIES:
        return property(lambda self: impl[name](self), doc=f"x.{name} (see `install_array_api`)")
    if name in _OPERATORS:
        def binary(self: Node, other: Any) -> Any:
            return impl[name](self, other)

        fn = binary
    else:
        def method(self: Node, *args: Any, **kwargs: Any) -> Any:
            return impl[name](self, *args, **kwargs)

        fn = method
    fn.__name__ = fn.__qualname__ = name
    return fn


for _name in ARRAY_METHODS + ARRAY_PROPERTIES:
    setattr(Node, _name, _forward(_name))  # set after the class body: defining __eq__ there would unset __hash__
del _name


def _new_node(op: Any, inputs: tuple, attrs: tuple, shape: tuple, dtype: np.dtype, tag: Any, m: NodeMeta) -> Node:
    """`Node(op, inputs, attrs, shape, dtype, tag)` with metadata `m`, built cheaply.

    `Node.__setattr__` refuses writes, so `Node.__init__` stores each slot through
    `object.__setattr__`; here the slots are stored on a `_MutableNode` (same
    layout) whose class is then switched to `Node` (several times faster; the
    builder creates every node this way).
    """
    n = _MutableNode()
    n.op = op
    n.inputs = inputs
    n.attrs = attrs
    n.shape = shape
    n.dtype = dtype
    n.tag = tag
    n.id = next(_ids)
    n._meta = m
    _osetattr(n, "__class__", Node)
    return n


_osetattr = object.__setattr__


class Builder:
    """Interns nodes: the same (op, inputs, attrs, tag) gives the same node.

    Builders are used as context managers; the innermost active builder of the
    current thread is `current_builder()`. Every node is created through
    `make`, which runs the op's shape and dtype rules (or `remake`, which
    rebuilds a node on new inputs of the same shapes and dtypes).
    """

    def __init__(self, share: "Builder | None" = None) -> None:
        """A new builder; with `share`, one that interns into `share`'s table (same identities)."""
        self._table: dict[tuple, Node] = {} if share is None else share._table
        self._lock = threading.Lock() if share is None else share._lock
        #: A per-builder cache for layers above the IR (hashable key -> node);
        #: entries must be nodes this builder would intern to anyway.
        self.memo: dict[Any, Node] = {}

    @staticmethod
    def key(node: Node) -> tuple:
        """The intern key of a node: (op name, inputs, attrs, tag)."""
        return (node.op.name, node.inputs, node.attrs, node.tag)

    def adopt(self, node: Node) -> Node:
        """Register an existing node in this builder: returns the equal node already interned, or `node`."""
        key = (node.op.name, node.inputs, node.attrs, node.tag)
        found = self._table.get(key)
        if found is None:
            with self._lock:
                found = self._table.setdefault(key, node)
        return found

    def interned(self) -> int:
        """Number of nodes interned (a cheap change counter for passes)."""
        return len(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __enter__(self) -> "Builder":
        _ctx.builders.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _ctx.builders.pop()

    def make(self, op: Any, inputs: Iterable[Node] = (), attrs: Any = None, tag: Any = None) -> Node:
        """Build (or find) the node `op(*inputs, **attrs)`.

        Args:
            op: a registered Op.
            inputs: the input nodes.
            attrs: dict or sorted tuple of (name, hashable) pairs.
            tag: identity tag (None for ordinary nodes).

        Returns:
            The interned node.

        Raises:
            ShapeError, DTypeError: from the op's shape and dtype rules.
        """
        if type(inputs) is not tuple:
            inputs = tuple(inputs)
        if attrs is None:
            attrs_t: tuple = ()
        elif type(attrs) is tuple:
            attrs_t = attrs
        elif isinstance(attrs, dict):
            attrs_t = tuple(sorted(attrs.items())) if attrs else ()
        else:
            attrs_t = tuple(attrs)
        key = (op.name, inputs, attrs_t, tag)
        node = self._table.get(key)
        if node is not None:
            return node
        return self._create(key, op, inputs, attrs_t, tag)

    def remake(self, node: Node, inputs: tuple, meta: NodeMeta | None = None) -> Node:
        """`make(node.op, inputs, node.attrs, node.tag)`, for passes that rebuild a node on new inputs.

        When the new inputs have the shapes and dtypes of the old ones the
        shape and dtype rules (pure functions of those and the attrs) are not
        run again: the node's own shape and dtype are reused.

        Args:
            node: the node to rebuild.
            inputs: tuple of input nodes, as many as node.inputs.
            meta: metadata of the node if it is created (default: the thread's
                source location and role, as for `make`).

        Returns:
            The interned node.

        Raises:
            ShapeError, DTypeError: from the op's rules, when the shapes or dtypes differ.
        """
        op = node.op
        key = (op.name, inputs, node.attrs, node.tag)
        found = self._table.get(key)
        if found is not None:
            return found
        old = node.inputs
        if len(old) != len(inputs):
            return self._create(key, op, inputs, node.attrs, node.tag, meta)
        for x, y in zip(inputs, old):
            if type(x) is not Node or (x.shape != y.shape or (x.dtype is not y.dtype and x.dtype != y.dtype)):
                return self._create(key, op, inputs, node.attrs, node.tag, meta)
        if meta is None:
            meta = _current_meta()
        # setdefault is one atomic step: a thread that interned the same key first wins
        return self._table.setdefault(key, _new_node(op, inputs, node.attrs, node.shape, node.dtype, node.tag, meta))

    def _create(self, key: tuple, op: Any, inputs: tuple, attrs_t: tuple, tag: Any,
                meta: NodeMeta | None = None) -> Node:
        """`make` for a key not in the table yet: run the rules, create and intern the node."""
        params = dict(attrs_t) if attrs_t else _NO_PARAMS
        if op.nin is not None and len(inputs) != op.nin:
            raise SymgraphError(f"{op.name} takes {op.nin} inputs, got {len(inputs)}")
        for x in inputs:
            if type(x) is not Node:
                for i, x in enumerate(inputs):
                    if not isinstance(x, Node):
                        raise SymgraphError(f"{op.name}: input {i} is {type(x).__name__}, not a graph node")
        nin = len(inputs)
        if nin == 2:  # the common arities without building argument lists
            a, b = inputs
            shape = op.shape_rule(a.shape, b.shape, **params)
            dtype = op.dtype_rule(a.dtype, b.dtype, **params)
        elif nin == 1:
            a = inputs[0]
            shape = op.shape_rule(a.shape, **params)
            dtype = op.dtype_rule(a.dtype, **params)
        elif nin == 0:  # sources (constants, inputs)
            shape = op.shape_rule(**params)
            dtype = op.dtype_rule(**params)
        else:
            shape = op.shape_rule(*[x.shape for x in inputs], **params)
            dtype = op.dtype_rule(*[x.dtype for x in inputs], **params)
        if type(shape) is not tuple or (shape and not all(type(d) is int for d in shape)):
            shape = tuple(int(d) for d in shape)
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        if shape and (min(shape) < 0 or math.prod(shape) * dtype.itemsize >= 2**63):
            raise ShapeError(f"{op.name}: result shape {shape} ({dtype}) has a negative dimension or more bytes "
                             f"than can be addressed")
        if meta is None:
            meta = _current_meta()
        # setdefault is one atomic step: a thread that interned the same key first wins
        return self._table.setdefault(key, _new_node(op, inputs, attrs_t, shape, dtype, tag, meta))


def _current_meta() -> NodeMeta:
    """The shared NodeMeta of a node made now: the user's line and the build context's role and origin."""
    c = _ctx
    return shared_meta(user_location(), c.role, c.origin)


_NO_PARAMS: dict = {}  # never mutated: shape and dtype rules take their attrs as keywords


_default_builder_local = threading.local()


def current_builder() -> Builder:
    """The innermost active builder of this thread (a thread default if none)."""
    if _ctx.builders:
        return _ctx.builders[-1]
    b = getattr(_default_builder_local, "b", None)
    if b is None:
        b = _default_builder_local.b = Builder()
    return b


def tracing_active() -> bool:
    """Whether a builder is active in this thread (we are inside a trace)."""
    return bool(_ctx.builders)


def toposort(outputs: Iterable[Node]) -> list[Node]:
    """All nodes reachable from `outputs`, inputs before readers.

    Iterative depth-first search (no recursion: graphs of 100k+ nodes are
    normal after a few derivatives). Deterministic for a given graph.
    """
    order: list[Node] = []
    seen: set[Node] = set()  # pushed on the stack at some point (on it now, or done)
    add, emit = seen.add, order.append
    for out in outputs:
        if out in seen:
            continue
        add(out)
        stack: list[tuple[Node, Iterator[Node]]] = [(out, iter(out.inputs))]
        push = stack.append
        while stack:
            node, ins = stack[-1]
            for child in ins:  # resumes after the last input visited
                if child not in seen:
                    add(child)
                    if child.inputs:
                        push((child, iter(child.inputs)))
                        break
                    emit(child)  # a leaf (input, constant) is done at once: what its push and pop would do
            else:
                stack.pop()
                emit(node)
    return order


class Graph:
    """A graph: input nodes and output nodes; everything reachable belongs to it.

    Graphs hold no mutable state; passes return new graphs. `in_tree` and
    `out_tree` describe the pytree structure of the arguments and results,
    so that `evaluate` accepts and returns the same structures as the traced
    function.

    Attributes:
        inputs: list of input nodes (op "input"), one per argument leaf.
        outputs: list of output nodes, one per result leaf.
        in_tree, out_tree: TreeDefs (or None for flat lists).
        name: a label used by dumps.
    """

    def __init__(self, inputs: list[Node], outputs: list[Node], in_tree: Any = None, out_tree: Any = None, name: str = "f"):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.name = name
        self._order: list[Node] | None = None

    def replace(self, outputs: list[Node] | None = None, inputs: list[Node] | None = None, **kw: Any) -> "Graph":
        """A new graph with some fields replaced."""
        return Graph(
            self.inputs if inputs is None else inputs,
            self.outputs if outputs is None else outputs,
            kw.get("in_tree", self.in_tree),
            kw.get("out_tree", self.out_tree),
            kw.get("name", self.name),
        )

    def toposort(self) -> list[Node]:
        """Nodes reachable from the outputs (and the inputs), in topological order."""
        if self._order is None:
            order = toposort(self.outputs)
            seen = set(order)
            # Unused inputs still belong to the graph (they are arguments).
            missing = [x for x in self.inputs if x not in seen]
            self._order = missing + order
        return self._order

    @property
    def nodes(self) -> list[Node]:
        """Same as toposort()."""
        return self.toposort()

    def __len__(self) -> int:
        return len(self.toposort())

    def __iter__(self) -> Iterator[Node]:
        return iter(self.toposort())

    def readers(self) -> dict[Node, list[Node]]:
        """For each node, the nodes that read it (fan-out), in topological order.

        A node that reads the same input twice is listed twice.
        """
        rd: dict[Node, list[Node]] = {n: [] for n in self.toposort()}
        for n in self.toposort():
            for x in n.inputs:
                rd[x].append(n)
        return rd

    def check(self) -> None:
        """Validate the graph: re-run every shape and dtype rule, check inputs are bound.

        Raises:
            SymgraphError: naming the first inconsistent node.
        """
        inputs = set(self.inputs)
        for n in self.toposort():
            if n.op.name == "input" and n not in inputs:
                raise SymgraphError(f"node {n} is an unbound input of graph {self.name}")
            params = n.params
            shape = tuple(int(d) for d in n.op.shape_rule(*[x.shape for x in n.inputs], **params))
            dtype = np.dtype(n.op.dtype_rule(*[x.dtype for x in n.inputs], **params))
            if shape != n.shape or dtype != n.dtype:
                raise ShapeError(f"node {n}: stored {n.shape}/{n.dtype}, rules give {shape}/{dtype}")

    def evaluate(self, *args: Any) -> Any:
        """Run the graph with the NumPy reference evaluator (`symgraph.interpreter.evaluate`).

        Args:
            *args: arrays (or pytrees) matching the traced arguments.

        Returns:
            NumPy arrays in the structure of the traced function's result.
        """
        return _graph_method("evaluate")(self, *args)

    def dump(self, **kw: Any) -> str:
        """A text listing, one node per line (see `symgraph.viz.dump`)."""
        return _graph_method("dump")(self, **kw)

    def to_dot(self, **kw: Any) -> str:
        """Graphviz DOT source (see `symgraph.viz.to_dot`)."""
        return _graph_method("to_dot")(self, **kw)

    def render(self, path: str, **kw: Any) -> str:
        """Render through Graphviz's `dot` (see `symgraph.viz.render`)."""
        return _graph_method("render")(self, path, **kw)

    def to_networkx(self) -> Any:
        """A networkx.DiGraph with one vertex per node (see `symgraph.viz.to_networkx`)."""
        return _graph_method("to_networkx")(self)

    def to_html(self, path: Any = None, **kw: Any) -> str:
        """An offline interactive viewer in one HTML file (see `symgraph.viz.to_html`); returns its text."""
        return _graph_method("to_html")(self, path, **kw)

    def __repr__(self) -> str:
        return f"Graph({self.name}: {len(self.inputs)} inputs, {len(self.outputs)} outputs, {len(self)} nodes)"


#: Graph conveniences implemented above the IR, with the module that installs each when it is
#: imported (`install_graph_methods`): the IR imports neither the evaluator nor the dumps.
GRAPH_METHODS = {"evaluate": "symgraph.interpreter", "dump": "symgraph.viz", "to_dot": "symgraph.viz",
                 "render": "symgraph.viz", "to_networkx": "symgraph.viz", "to_html": "symgraph.viz"}
_graph_methods: dict[str, Any] = {}


def install_graph_methods(**methods: Any) -> None:
    """Implement Graph conveniences: `install_graph_methods(evaluate=fn)` makes `g.evaluate(*a)` call `fn(g, *a)`.

    Raises:
        SymgraphError: a name that is not one of `GRAPH_METHODS`.
    """
    extra = set(methods) - set(GRAPH_METHODS)
    if extra:
        raise SymgraphError(f"install_graph_methods: {sorted(extra)} are not Graph conveniences "
                            f"({sorted(GRAPH_METHODS)})")
    _graph_methods.update(methods)


def _graph_method(name: str) -> Any:
    fn = _graph_methods.get(name)
    if fn is None:
        raise SymgraphError(f"Graph.{name} is implemented by {GRAPH_METHODS[name]}, which is not imported "
                            f"(import symgraph)")
    return fn
