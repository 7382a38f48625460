"""The polynomial stage of `simplify`: elementwise polynomial regions rewritten in Horner form.

`polynomial_pass` finds the regions of float add/sub/neg/mul/muladd nodes
(with division by a constant and pow by a small integer) whose values flow
to one root, expands each root's polynomial in the region's atoms with like
terms collected, and rebuilds the root in Horner form (`horner`) when that
needs fewer operations and is safe (`_safe_region`). A polynomial is a dict
{monomial: coefficient}; a monomial is a sorted tuple of (atom index,
exponent) pairs; () is the constant monomial. Coefficients are Python floats.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ...ir import Graph, Node, meta
from .analysis import _BCAST, _CONST, _bounded_atom, _splat
from .context import _Run
from .horner import _dry_ops, _emit, _NodeFactory
from .options import MAX_POLY_DEGREE, MAX_POLY_TERMS, MAX_POW

# --------------------------------------------------------------------------- polynomial algebra


def _poly_const(c: float) -> dict:
    return {(): c} if c != 0 else {}


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    if not m1:
        return m2
    if not m2:
        return m1
    if len(m1) == 1 and len(m2) > 1:
        m1, m2 = m2, m1
    if len(m2) == 1:  # insert one factor into the sorted monomial
        v, e = m2[0]
        k = bisect.bisect_left(m1, (v,))
        if k < len(m1) and m1[k][0] == v:
            return m1[:k] + ((v, m1[k][1] + e),) + m1[k + 1:]
        return m1[:k] + m2 + m1[k:]
    d = dict(m1)
    for v, e in m2:
        d[v] = d.get(v, 0) + e
    return tuple(sorted(d.items()))


def _padd(p: dict, q: dict, sign: float = 1.0) -> dict:
    r = dict(p)
    for m, c in q.items():
        v = r.get(m, 0.0) + sign * c
        if v == 0:
            r.pop(m, None)
        else:
            r[m] = v
    return r


def _pmul(p: dict, q: dict) -> dict:
    r: dict = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = _mono_mul(m1, m2)
            v = r.get(m, 0.0) + c1 * c2
            r[m] = v
    return {m: c for m, c in r.items() if c != 0}


def _pscale(p: dict, c: float) -> dict:
    return {m: v * c for m, v in p.items() if v * c != 0}


def _degree(p: dict) -> int:
    return max((sum(e for _, e in m) for m in p), default=0)


def _poly_role(x: Node) -> int:
    """0: not a polynomial op; 1: add/sub/neg/mul/muladd; 2: div by constant; 3: pow by small integer."""
    if x.tag is not None or x.dtype.kind != "f":
        return 0
    name = x.op.name
    if x.op.ring:
        return 1
    if name == "div":
        s = _splat(x.inputs[1])
        return 2 if s is not None and s != 0 and np.isfinite(s) else 0
    if name == "pow":
        s = _splat(x.inputs[1])
        return 3 if s is not None and np.isfinite(s) and float(s).is_integer() and 1 <= s <= MAX_POW else 0
    return 0


# --------------------------------------------------------------------------- the stage


def polynomial_pass(graph: Graph, run: _Run) -> Graph:
    """Graph -> Graph: canonicalize elementwise polynomial regions (needs `reassociate`).

    A region is a maximal set of float add/sub/neg/mul nodes (plus division by
    a constant and pow by a small integer) whose values flow only to one root:
    a region node read by a non-polynomial node, by two regions, or by an
    output is a root. Everything else a region reads is an atom (or a splat
    constant, a coefficient). Each root's polynomial in its atoms is expanded
    with like terms collected; when its Horner form needs fewer operations
    than the region has, the root is rebuilt from it and the region dies.

    Unless `assume_finite`, a root is rewritten only when every atom and every
    region value has a magnitude bound below the dtype's overflow threshold
    (no inf can appear on either side) and the polynomial still reads every
    atom (a NaN atom still makes the result NaN).

    Steps: `_find_regions`, magnitude bounds (`_bounded_atom`),
    `_region_polynomials`, then `_rebuild_roots` (with `_safe_region`).
    """
    if not run.options.reassociate:
        return graph
    order = graph.toposort()
    regions = _find_regions(order, graph.outputs)
    if regions is None:
        return graph
    role, owner, size = regions
    fin = run.options.assume_finite
    bound: dict[Node, float] = {}
    if not fin:  # with assume_finite no bound is read
        for n in order:
            bound[n] = _bounded_atom(n, bound)
    poly, atoms, atom_ix = _region_polynomials(order, role, owner, size, bound, fin)
    return _rebuild_roots(graph, order, run, role, owner, size, poly, bound, atom_ix, atoms)


def _find_regions(order: list[Node], outputs: list[Node]) -> tuple[dict, dict, dict] | None:
    """The polynomial regions of a graph in topological `order`: (role, owner, size), or None.

    role maps each region candidate (`_poly_role` > 0) to its role; owner maps
    it to the root its value flows to (itself when it is a root); size counts
    the nodes of each root's region. None when there is no candidate or every
    region has one node (nothing to rewrite).
    """
    role: dict[Node, int] = {}  # the region candidates (nodes keyed by identity, as everywhere here)
    for n in order:
        r = _poly_role(n)
        if r:
            role[n] = r
    if not role:
        return None
    outs = set(outputs)
    rd: dict[Node, list[Node]] = {}  # readers of the region candidates
    for n in order:
        for x in n.inputs:
            if x in role:
                lst = rd.get(x)
                if lst is None:
                    rd[x] = [n]
                else:
                    lst.append(n)
    # ownership: the root each region node's value flows to (reverse topological order)
    owner: dict[Node, Node] = {}
    size: dict[Node, int] = {}
    for n in reversed(order):
        if n not in role:
            continue
        readers = rd.get(n)
        o: Node | None = None
        if n in outs or not readers:
            o = n
        else:
            for r in readers:
                if r not in role:
                    o = n  # read outside the region
                    break
                ro = owner[r]
                if o is None:
                    o = ro
                elif o is not ro:
                    o = n  # read by two regions
                    break
        owner[n] = o  # type: ignore[assignment]
        size[o] = size.get(o, 0) + 1  # type: ignore[index]
    if all(k == 1 for k in size.values()):
        return None  # only regions of one node: nothing to rewrite
    return role, owner, size


def _region_polynomials(order: list[Node], role: dict, owner: dict, size: dict, bound: dict,
                        fin: bool) -> tuple[dict[Node, dict | None], list[Node], dict[Node, int]]:
    """The polynomial of each region node in its region's atoms: (poly, atoms, atom_ix).

    Nodes are visited in forward order and atoms numbered per pass in the
    order they are first read. poly[n] is None where n is not a polynomial
    worth keeping: a region of one node, an input that is not an atom (its
    magnitude bound is too large, unless `fin`), or more than MAX_POLY_TERMS
    monomials or a degree above MAX_POLY_DEGREE.
    """
    atom_ix: dict[Node, int] = {}
    atoms: list[Node] = []
    poly: dict[Node, dict | None] = {}
    deg: dict[Node, int] = {}  # an upper bound of each polynomial's total degree
    limits: dict[np.dtype, float] = {}

    def leaf(x: Node, lim: float) -> tuple[dict | None, int]:
        s = _splat(x) if x.op is _CONST or x.op is _BCAST else None
        if s is not None and s.dtype.kind == "f" and (math.isfinite(s) if s.dtype.itemsize <= 8 else np.isfinite(s)):
            return _poly_const(float(s)), 0
        if x in role and owner[x] is not x:
            return poly[x], deg.get(x, 0)
        if not fin and not bound[x] < lim:
            return None, 0
        i = atom_ix.get(x)
        if i is None:
            i = atom_ix[x] = len(atoms)
            atoms.append(x)
        return {((i, 1),): 1.0}, 1

    for n in order:
        if n not in role:
            continue
        lim = limits.get(n.dtype)
        if lim is None:
            lim = limits[n.dtype] = _limit(n.dtype)
        ls = [leaf(x, lim) for x in n.inputs]  # every input: atoms are numbered in this order
        if size[owner[n]] == 1:
            poly[n] = None  # a region of one node is never rewritten (its atoms are numbered all the same)
            continue
        ps, ds = zip(*ls)
        if None in ps:
            poly[n] = None
            continue
        poly[n], deg[n] = _node_polynomial(n, ps, ds)
    return poly, atoms, atom_ix


def _node_polynomial(n: Node, ps: tuple, ds: tuple) -> tuple[dict | None, int]:
    """(polynomial, degree bound) of region node n from its inputs' polynomials ps and degree bounds ds.

    The polynomial is None when it has more than MAX_POLY_TERMS monomials or
    a degree above MAX_POLY_DEGREE.
    """
    name = n.op.name
    if name == "add":
        p = _padd(ps[0], ps[1])
        d = max(ds)
    elif name == "sub":
        p = _padd(ps[0], ps[1], -1.0)
        d = max(ds)
    elif name == "neg":
        p = _pscale(ps[0], -1.0)
        d = ds[0]
    elif name == "mul":
        p = _pmul(ps[0], ps[1])
        d = ds[0] + ds[1]
    elif name == "muladd":
        p = _padd(_pmul(ps[0], ps[1]), ps[2])
        d = max(ds[0] + ds[1], ds[2])
    elif name == "div":
        p = _pscale(ps[0], 1.0 / float(_splat(n.inputs[1])))
        d = ds[0]
    else:  # pow
        k = int(_splat(n.inputs[1]))
        p = ps[0]
        for _ in range(k - 1):
            p = _pmul(p, ps[0])
            if len(p) > MAX_POLY_TERMS:
                break
        d = ds[0] * k
    if d > MAX_POLY_DEGREE:
        d = _degree(p)  # the bound is too high: the exact degree decides
    if len(p) > MAX_POLY_TERMS or d > MAX_POLY_DEGREE:
        return None, d
    return p, d


def _rebuild_roots(graph: Graph, order: list[Node], run: _Run, role: dict, owner: dict, size: dict,
                   poly: dict, bound: dict, atom_ix: dict, atoms: list) -> Graph:
    """Rebuild the roots whose Horner form is cheaper than their region, and the nodes that read them.

    Returns `graph` itself when no root is rewritten.
    """
    fin = run.options.assume_finite
    b = run.builder
    new: dict[Node, Node] = {}
    for n in order:
        ins = n.inputs
        if n in role and owner[n] is n and poly[n] is not None and size[n] > 1:
            p = poly[n]
            if _dry_ops(p, run.dry_ops) < size[n] and _safe_region(n, p, owner, role, bound, atom_ix, atoms, fin):
                b.cur_meta = meta(n)
                h = _emit(p, _NodeFactory(atoms, new, n, run))
                new[n] = h
                run.stats["polynomial"] += 1
                run.changes += 1
                continue
        if not new:
            continue
        for x in ins:
            if new.get(x, x) is not x:
                break
        else:
            continue  # reads nothing rewritten
        new[n] = b.remake(n, tuple([new.get(x, x) for x in ins]), meta(n))
    if not new:
        return graph  # no root rewritten
    return Graph(graph.inputs, [new.get(o, o) for o in graph.outputs], graph.in_tree, graph.out_tree,
                 name=graph.name)


def _limit(dt: np.dtype) -> float:
    return float(np.finfo(dt).max) * 2.0 ** -16


def _safe_region(root: Node, p: dict, owner: dict, role: dict, bound: dict, atom_ix: dict, atoms: list,
                 fin: bool) -> bool:
    """No inf on either side and every atom kept (see `polynomial_pass`)."""
    if fin:
        return True
    lim = _limit(root.dtype)
    used: set[int] = set()
    stack = [root]
    seen = {root}
    while stack:
        n = stack.pop()
        if not bound[n] < lim:
            return False
        for x in n.inputs:
            if x in seen:
                continue
            seen.add(x)
            if x in role and owner[x] is root:
                stack.append(x)
            elif x in atom_ix:
                used.add(atom_ix[x])
    kept = {v for m in p for v, _ in m}
    if not used <= kept:
        return False
    total = 0.0
    for m, c in p.items():
        t = abs(c)
        for v, e in m:
            t *= max(1.0, bound[atoms[v]]) ** e
        total += t
    return total < lim
