"""Pytrees: nested tuples, lists and dicts of arrays (model parameters).

`tree_flatten` returns the leaves in a deterministic order (dict keys sorted)
and a `TreeDef` that `tree_unflatten` uses to rebuild the structure. `None` is
an empty subtree, as in JAX.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["TreeDef", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "tree_structure", "tree_paths"]


class TreeDef:
    """The structure of a pytree without its leaves.

    Attributes:
        kind: "leaf", "none", "tuple", "list", "dict" or "namedtuple".
        meta: the dict keys (sorted) or the namedtuple type.
        children: the TreeDefs of the children.
        num_leaves: the number of leaves below this node.
    """

    __slots__ = ("kind", "meta", "children", "num_leaves", "_hash")

    def __init__(self, kind: str, meta: Any, children: tuple["TreeDef", ...]):
        self.kind = kind
        self.meta = meta
        self.children = children
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in children)
        self._hash = hash((kind, meta, children))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TreeDef)
            and self._hash == other._hash
            and self.kind == other.kind
            and self.meta == other.meta
            and self.children == other.children
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children))
            return "{" + inner + "}"
        if self.kind == "list":
            return "[" + inner + "]"
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        return "(" + inner + ("," if len(self.children) == 1 else "") + ")"


_LEAF = TreeDef("leaf", None, ())
_NONE = TreeDef("none", None, ())


def tree_flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """Flatten a pytree into its leaves and structure.

    Iterative, so deep trees do not hit the recursion limit.

    Returns:
        (leaves, treedef): leaves in order (dict keys sorted).
    """
    leaves: list[Any] = []
    # Post-order build with an explicit stack: (obj, visited)
    stack: list[tuple[Any, bool]] = [(tree, False)]
    built: list[TreeDef] = []
    while stack:
        obj, visited = stack.pop()
        if visited:
            kind, meta, n = obj
            children = tuple(built[len(built) - n:]) if n else ()
            del built[len(built) - n:]
            built.append(TreeDef(kind, meta, children))
            continue
        if obj is None:
            built.append(_NONE)
        elif isinstance(obj, dict):
            keys = tuple(sorted(obj))
            stack.append((("dict", keys, len(keys)), True))
            for k in reversed(keys):
                stack.append((obj[k], False))
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
            stack.append((("namedtuple", type(obj), len(obj)), True))
            for c in reversed(obj):
                stack.append((c, False))
        elif isinstance(obj, (tuple, list)):
            stack.append((("tuple" if isinstance(obj, tuple) else "list", None, len(obj)), True))
            for c in reversed(obj):
                stack.append((c, False))
        else:
            leaves.append(obj)
            built.append(_LEAF)
    return leaves, built[0]


def tree_unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    """Rebuild a pytree of the given structure from its leaves.

    Raises:
        ValueError: if the number of leaves does not match.
    """
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree_unflatten: structure {treedef} needs {treedef.num_leaves} leaves, got {len(leaves)}")
    it = iter(leaves)

    def build(td: TreeDef) -> Any:
        # depth of pytrees is small (model parameters); recursion is fine here
        if td.kind == "leaf":
            return next(it)
        if td.kind == "none":
            return None
        kids = [build(c) for c in td.children]
        if td.kind == "tuple":
            return tuple(kids)
        if td.kind == "list":
            return kids
        if td.kind == "namedtuple":
            return td.meta(*kids)
        return dict(zip(td.meta, kids))

    try:
        return build(treedef)
    finally:
        # build refers to itself through its closure cell: clear the cell, or the cycle keeps the
        # leaves (often large arrays) alive until the next full garbage collection
        del build


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of a pytree, in flattening order."""
    return tree_flatten(tree)[0]


def tree_structure(tree: Any) -> TreeDef:
    """The TreeDef of a pytree."""
    return tree_flatten(tree)[1]


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply `fn` leaf-wise over one or more pytrees of the same structure.

    Raises:
        ValueError: if the structures differ.
    """
    leaves, td = tree_flatten(tree)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r)
        if rtd != td:
            raise ValueError(f"tree_map: structures differ: {td} vs {rtd}")
        others.append(rl)
    return tree_unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])


def tree_paths(treedef: TreeDef) -> list[str]:
    """The path of each leaf below `treedef`, in flattening order, as Python index syntax.

    Example: the structure of `({"w": [a, b]}, c)` gives `["[0]['w'][0]", "[0]['w'][1]", "[1]"]`; a
    namedtuple field is `.name`; a bare leaf is `""`. Used to name arguments in error messages.
    """
    paths: list[str] = []
    stack: list[tuple[TreeDef, str]] = [(treedef, "")]
    while stack:
        td, path = stack.pop()
        if td.kind == "leaf":
            paths.append(path)
            continue
        if td.kind == "dict":
            keys = [f"{path}[{k!r}]" for k in td.meta]
        elif td.kind == "namedtuple":
            keys = [f"{path}.{name}" for name in td.meta._fields]
        else:
            keys = [f"{path}[{i}]" for i in range(len(td.children))]
        stack.extend(reversed(list(zip(td.children, keys))))
    return paths
