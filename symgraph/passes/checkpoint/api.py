"""The user API of checkpointing: `checkpoint` regions, `checkpoint_name`, and JAX-style saveability policies.

A policy is a predicate node -> bool saying which values may be saved.
`checkpoint(fn, policy)` wraps a function's inputs and outputs in marker ops
and records the region's policy here (`_REGIONS`); `checkpoint_name` tags a
value with a marker that `analysis._strip_markers` turns into names
(`names_of`). This module holds that state: `_REGIONS`, `_NAMES`.

References:
    JAX `jax.checkpoint` policies (docs.jax.dev, gradient-checkpointing).
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import lax as L
from ...errors import SymgraphError
from ...ir import Node, current_builder
from ...ops import OPS
from ...ops import remat as _remat_ops  # noqa: F401  (registers the marker ops)
from ...ops.linalg import parse_einsum
from ...tree import tree_flatten, tree_unflatten

_region_ids = itertools.count(1)  # ids of `checkpoint` regions, the keys of `_REGIONS`


# --------------------------------------------------------------------------- policies


class _Policy:
    """A saveability predicate: policy(node) -> True if the value may be saved."""

    def __init__(self, name: str, fn: Callable[[Node], bool], args: tuple = ()):
        self._name, self._fn, self._args = name, fn, args

    def __call__(self, node: Node) -> bool:
        return bool(self._fn(node))

    def __repr__(self) -> str:
        a = ", ".join(repr(x) for x in self._args)
        return f"{self._name}({a})" if self._args else self._name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Policy) and (self._name, self._args) == (other._name, other._args)

    def __hash__(self) -> int:
        return hash((self._name, self._args))


_NAMES: dict[int, tuple] = {}  # id(node) -> (weakref, frozenset of names); filled by _strip_markers


def names_of(node: Node) -> frozenset:
    """The `checkpoint_name` names attached to a value (inside policy predicates).

    Returns:
        frozenset of str (empty when the value was not named).
    """
    e = _NAMES.get(id(node))
    return e[1] if e is not None and e[0]() is node else frozenset()


def _set_names(node: Node, names: frozenset) -> None:
    k = id(node)
    _NAMES[k] = (weakref.ref(node, lambda _r, k=k: _NAMES.pop(k, None)), names)


def _is_dot(n: Node) -> bool:
    return n.op.kind == "contraction"


def _dot_no_batch(n: Node) -> bool:
    if n.op.name == "matmul":
        return n.ndim == 2
    if n.op.name == "einsum":
        ins, out = parse_einsum(n.attr("spec"), len(n.inputs))
        shared = set(out).intersection(*[set(s) for s in ins]) if ins else set()
        return not shared
    return False


#: Save every value (JAX's default outside checkpoint regions).
everything_saveable = _Policy("everything_saveable", lambda n: True)
#: Save nothing: recompute everything from the region's inputs (default inside `checkpoint`).
nothing_saveable = _Policy("nothing_saveable", lambda n: False)
#: Save contractions (matmul, einsum); recompute pointwise work.
dots_saveable = _Policy("dots_saveable", _is_dot)
#: Save contractions without batch dimensions (2-D matmul, einsum with no index shared by all).
dots_with_no_batch_dims_saveable = _Policy("dots_with_no_batch_dims_saveable", _dot_no_batch)


def save_only_these_names(*names: str) -> _Policy:
    """Policy: save only values tagged by `checkpoint_name` with one of `names`."""
    s = frozenset(names)
    return _Policy("save_only_these_names", lambda n: bool(names_of(n) & s), tuple(sorted(s)))


def save_any_names_but_these(*names: str) -> _Policy:
    """Policy: save named values except those named in `names`; unnamed values are recomputed."""
    s = frozenset(names)
    return _Policy("save_any_names_but_these", lambda n: bool(names_of(n)) and not (names_of(n) & s),
                   tuple(sorted(s)))


def save_from_both_policies(a: Callable[[Node], bool], b: Callable[[Node], bool]) -> _Policy:
    """Policy: save a value when either policy saves it."""
    return _Policy("save_from_both_policies", lambda n: a(n) or b(n), (a, b))


# --------------------------------------------------------------------------- user annotations


@dataclass
class _Region:
    policy: Callable[[Node], bool]
    name: str


_REGIONS: dict[int, _Region] = {}


def checkpoint(fn: Callable | None = None, policy: Callable[[Node], bool] | None = None,
               prevent_cse: bool = True) -> Callable:
    """Mark a function as a checkpoint region: its internal values are recomputed in the backward sweep.

    Like `jax.checkpoint`: inside a traced computation, the function's inputs
    and outputs are wrapped in identity markers; `apply_checkpoint` (run by
    `sg.compile`) saves only the internal values the policy allows and
    recomputes the others from the region's inputs. Values leaving the
    region are ordinary values of the enclosing computation. Called on
    concrete arrays it just calls `fn`.

    Args:
        fn: the function (also usable as `@checkpoint` or `@checkpoint(policy=...)`).
        policy: predicate node -> bool saying which internal values may be
            saved; default `nothing_saveable`. See `dots_saveable`,
            `save_only_these_names`, ...
        prevent_cse: accepted for JAX compatibility; the markers always keep
            the region's values apart from identical values outside it.

    Returns:
        A function with `fn`'s signature.
    """
    if fn is None:
        return functools.partial(checkpoint, policy=policy, prevent_cse=prevent_cse)
    if not callable(fn):
        raise SymgraphError(f"checkpoint: expected a function to wrap, got {type(fn).__name__}")
    pol = nothing_saveable if policy is None else policy
    if not callable(pol):
        raise SymgraphError(f"checkpoint: policy must be a predicate node -> bool, got {pol!r}")

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_flatten((args, kwargs))
        if not any(isinstance(x, Node) for x in leaves):
            return fn(*args, **kwargs)
        rid = next(_region_ids)
        _REGIONS[rid] = _Region(pol, getattr(fn, "__name__", "f"))
        ins = [L.bind("remat_begin", x, region=rid) if isinstance(x, Node) else x for x in leaves]
        a, kw = tree_unflatten(tree, ins)
        out = fn(*a, **kw)
        ol, otree = tree_flatten(out)
        ol = [L.bind("remat_end", x, region=rid) if isinstance(x, Node) else x for x in ol]
        return tree_unflatten(otree, ol)

    return wrapped


def checkpoint_name(x: Any, name: str) -> Any:
    """Tag a value with `name` for name-based policies (identity on values).

    Args:
        x: a traced value (or a pytree of them); concrete arrays pass through.
        name: the name `save_only_these_names(name)` refers to.

    Returns:
        x, wrapped in a `checkpoint_name` marker when traced.
    """
    leaves, tree = tree_flatten(x)
    op = OPS["checkpoint_name"]
    return tree_unflatten(tree, [current_builder().make(op, (v,), {"name": str(name)}) if isinstance(v, Node) else v
                                 for v in leaves])
