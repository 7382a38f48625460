"""Complex values on the LLVM backend: a complex graph rewritten as a real one, each value a pair of real arrays.

`split_complex(graph)` rebuilds a scheduled graph in which every complex64/complex128 node becomes two
float32/float64 nodes, its real and imaginary parts, so the rest of the backend (fusion, vectorized
loops, BLAS) compiles it unchanged: complex arithmetic becomes vectorized real arithmetic in the fused
loops. A complex argument is passed as two real arrays and a complex result is assembled from two
(`ComplexExecutable`). The formulas are NumPy's where NumPy states one (Smith's division with NumPy's
branch and zero-divisor rule, NumPy's repeated products for integer powers); the elementary functions
(exp, log, sqrt, sin, cos, tan, tanh, other powers) are Kahan's stable formulas with C99 Annex G's special
values (codegen.complex_elementary). NumPy's own loops may fuse a multiply-add in the product or scale |z|
differently, so compiled values agree with NumPy's to a few ulps, not bit for bit (tests/test_complex.py
measures it).

The FFT primitives (fft_c2c, fft_r2c, fft_c2r) become `fft_parts` nodes on the parts, which compiled
code runs with its own FFT (codegen/llvm/fft.py). Loops and branches (scan, while, cond) become the same
region over split sub-graphs. The complex linear-algebra primitives (cholesky, triangular_solve, lu, eigh,
eigvalsh, svd, svdvals, qr, eig, eigvals) become `lapack_parts` nodes on the parts, which compiled code runs
as the complex LAPACK routines (codegen/llvm/lapack_complex.py: interleaved column-major copies in the
arena's scratch, as LAPACK reads them). Ops without a pair rule here make `split_complex` raise an
UnsupportedOpError naming the op and suggesting backend="numpy" (docs/complex.md lists both sets).
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from symgraph.ops.lapack_parts import LAPACK_PRIMITIVES

from .complex_elementary import ELEMENTARY, cpow

__all__ = ["split_complex", "ComplexExecutable", "has_complex", "PAIR_OPS"]

_tags = itertools.count()

#: Ops applied to the real and the imaginary part alike (the same attrs; other inputs passed through).
PARTWISE = frozenset({
    "copy", "stop_gradient", "broadcast_to", "reshape", "transpose", "slice", "unslice", "sum", "concatenate",
    "gather", "checkpoint_name", "remat_begin", "remat_end", "cumsum", "expand_dims", "squeeze", "scatter_add",
})
#: The complex linear-algebra primitives: each one `lapack_parts` node (symgraph.ops.lapack_parts) on the parts,
#: run as the complex LAPACK routine (codegen/llvm/lapack_complex.py).
LAPACK_OPS = LAPACK_PRIMITIVES
#: Every complex op the split lowers natively.
PAIR_OPS = PARTWISE | {"input", "constant", "cast", "add", "sub", "neg", "mul", "div", "conj", "real", "imag",
                       "complex", "complex_abs", "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "where", "eq",
                       "ne", "isnan", "matmul", "einsum", "prod", "pow", "scan", "while", "cond",
                       "fft_c2c", "fft_r2c", "fft_c2r"} | LAPACK_OPS
#: The FFT primitives (symgraph.ops.fourier): each one `fft_parts` node (symgraph.ops.fourier_parts) on the
#: parts, run by the native FFT (codegen/llvm/fft.py) with its constant table.
FFT_KINDS = {"fft_c2c": "c2c", "fft_r2c": "r2c", "fft_c2r": "c2r"}


def has_complex(order: Sequence[Any]) -> bool:
    """Whether a node of the schedule has a complex dtype or reads one."""
    return any(n.dtype.kind == "c" or any(x.dtype.kind == "c" for x in n.inputs) for n in order)


def _refuse(n: Any) -> None:
    from symgraph.errors import UnsupportedOpError
    from symgraph.ir import meta

    raise UnsupportedOpError(f"codegen: complex op {n.op.name!r} (dtype {n.dtype if n.dtype.kind == 'c' else n.inputs[0].dtype}) "
                             f"is not lowered natively by the LLVM backend yet (it lowers {', '.join(sorted(PAIR_OPS - PARTWISE - {'input', 'constant'}))} "
                             f"and layout ops); compile with sg.compile(f, backend='numpy'), which runs the same "
                             f"graph through NumPy (docs/complex.md)", meta(n).location)


def split_complex(graph: Any, order: Sequence[Any]) -> tuple[Any, list, list]:
    """The real graph of a complex one.

    Args:
        graph: a scheduled graph holding complex values.
        order: its schedule.

    Returns:
        (real graph, in_plan, out_plan): in_plan[i] is ("real", j) or ("complex", j_re, j_im) for the
        original input i (positions in the real graph's inputs); out_plan[k] likewise for the outputs,
        with the complex dtype last: ("complex", k_re, k_im, dtype).

    Raises:
        UnsupportedOpError: a complex op without a pair rule (names it and its line).
    """
    from symgraph import lax as L
    from symgraph.ir import Builder, Graph, meta, source_location
    from symgraph.ops import OPS
    from symgraph.ops.core import real_dtype
    from symgraph.tree import tree_flatten

    val: dict[Any, Any] = {}  # node -> real node, or (re, im) for a complex node
    new_inputs: list = []
    in_plan: list = []

    def new_input(n: Any, dtype: Any, part: str) -> Any:
        node = b.make(OPS["input"], (), {"shape": n.shape, "dtype": np.dtype(dtype), "index": len(new_inputs),
                                         "name": f"{n.attr('name')}.{part}" if part else n.attr("name")},
                      ("complex_split", next(_tags)))
        new_inputs.append(node)
        return node

    with Builder() as b:
        for n in graph.inputs:
            if n.dtype.kind == "c":
                f = real_dtype(n.dtype)
                val[n] = (new_input(n, f, "real"), new_input(n, f, "imag"))
                in_plan.append(("complex", len(new_inputs) - 2, len(new_inputs) - 1))
            else:
                val[n] = new_input(n, n.dtype, "")
                in_plan.append(("real", len(new_inputs) - 1))
        for n in order:
            if n in val:
                continue
            with source_location(meta(n).location):
                val[n] = _rule(n, val, b, L)
        outs, out_plan = [], []
        for o in graph.outputs:
            v = val[o]
            if isinstance(v, tuple):
                out_plan.append(("complex", len(outs), len(outs) + 1, o.dtype))
                outs.extend(v)
            else:
                out_plan.append(("real", len(outs)))
                outs.append(v)
    # flat tuples of leaves in and out, so the real program gets the generated fast call path (`fast`)
    flat_in, flat_out = tree_flatten(tuple(range(len(new_inputs))))[1], tree_flatten(tuple(range(len(outs))))[1]
    return Graph(new_inputs, outs, flat_in, flat_out, name=graph.name), in_plan, out_plan


def _rule(n: Any, val: dict, b: Any, L: Any) -> Any:
    """The real node, or the (re, im) pair, of node n from its inputs' values."""
    from symgraph.ops.core import real_dtype

    name = n.op.name
    ins = [val[x] for x in n.inputs]
    cplx = n.dtype.kind == "c" or any(isinstance(v, tuple) for v in ins)
    if not cplx:
        return n if not n.inputs else b.remake(n, tuple(ins))
    if name not in PAIR_OPS:
        _refuse(n)
    if name == "constant":
        a = n.attr("value").array
        # (np.array, not np.ascontiguousarray: that makes a 0-d constant 1-d)
        return (L.constant(np.array(a.real, order="C")), L.constant(np.array(a.imag, order="C")))
    if name in PARTWISE:
        return tuple(b.make(n.op, [v[p] if isinstance(v, tuple) else v for v in ins], n.attrs, n.tag) for p in (0, 1))
    if name == "cast":
        (v,) = ins
        src, dst = n.inputs[0].dtype, n.dtype
        if src.kind != "c":  # real -> complex: a zero imaginary part
            re = L.cast(v, real_dtype(dst))
            return (re, L.zeros_like(re))
        if dst.kind == "c":
            return (L.cast(v[0], real_dtype(dst)), L.cast(v[1], real_dtype(dst)))
        return L.cast(v[0], dst)  # complex -> real keeps the real part
    if name == "real":
        return ins[0][0]
    if name == "imag":
        return ins[0][1]
    if name == "complex":
        return (ins[0], ins[1])
    if name == "conj":
        return (ins[0][0], L.neg(ins[0][1]))
    if name == "neg":
        return (L.neg(ins[0][0]), L.neg(ins[0][1]))
    if name in ("add", "sub"):
        (ar, ai), (br, bi) = ins
        return (L.bind(name, ar, br), L.bind(name, ai, bi))
    if name == "mul":
        (ar, ai), (br, bi) = ins
        return (ar * br - ai * bi, ar * bi + ai * br)
    if name == "matmul":
        (ar, ai), (br, bi) = ins
        return (L.bind("matmul", ar, br) - L.bind("matmul", ai, bi), L.bind("matmul", ar, bi) + L.bind("matmul", ai, br))
    if name == "einsum":
        return _einsum(n, ins, L)
    if name in ("scan", "while", "cond"):
        return _region(n, ins, val, b)
    if name == "prod":
        return _prod(n, ins[0], L)
    if name == "isnan":
        return L.binary("logical_or", L.unary("isnan", ins[0][0]), L.unary("isnan", ins[0][1]))
    if name == "div":
        return _smith_div(*ins[0], *ins[1], L)
    if name == "pow":
        k = _integer_exponent(n.inputs[1])
        if k is None:  # exp(b log a), with NumPy's rules for a zero base or exponent
            return cpow(ins[0], ins[1])
        return _int_power(ins[0], k, L)
    if name in FFT_KINDS:
        return _fft(n, ins, val, L)
    if name in LAPACK_OPS:
        return _lapack(n, ins, L)
    if name == "complex_abs":
        return L.binary("hypot", ins[0][0], ins[0][1])
    if name in ELEMENTARY:
        return ELEMENTARY[name](*ins[0])
    if name == "where":
        c, a, bb = (ins[0], *(v if isinstance(v, tuple) else (v, L.zeros_like(v)) for v in ins[1:]))  # real: 0j
        return (L.bind("where", c, a[0], bb[0]), L.bind("where", c, a[1], bb[1]))
    if name in ("eq", "ne"):
        (ar, ai), (br, bi) = ins
        both = "logical_and" if name == "eq" else "logical_or"
        return L.bind(both, L.bind(name, ar, br), L.bind(name, ai, bi))
    _refuse(n)  # pragma: no cover - PAIR_OPS and the rules above agree


def _fft(n: Any, ins: list, val: dict, L: Any) -> Any:
    """An FFT primitive as one fft_parts node on the parts (its table made once per split graph, kind, n, dtype)."""
    from symgraph.ops.fourier_parts import fft_parts

    from .cpu.fft import node_table

    kind = FFT_KINDS[n.op.name]
    length = n.shape[-1] if kind != "r2c" else n.inputs[0].shape[-1]
    x = ins[0]
    parts = tuple(x) if isinstance(x, tuple) else (x,)
    if kind == "r2c" and isinstance(x, tuple):  # pragma: no cover - fft_r2c reads real input
        _refuse(n)
    dtype = parts[0].dtype
    key = ("fft_table", "c2c" if kind == "c2c" else "real", length, dtype.str)
    table = val.get(key)
    if table is None:  # r2c and c2r of one length share a table (codegen.cpu.fft.node_table)
        table = val[key] = L.constant(node_table(kind, length, dtype))
    p = fft_parts(*parts, table=table, kind=kind, n=length, inverse=bool(n.attr("inverse", False)))
    if kind == "c2r":
        return p
    return _halves(p, L)


def _lapack(n: Any, ins: list, L: Any) -> Any:
    """A complex linear-algebra primitive as one lapack_parts node on the parts (a complex operand as its two
    parts, a real one as itself: eig of a real matrix); a complex result is the packed node's two halves."""
    from symgraph.ops.lapack_parts import lapack_parts

    parts = [p for v in ins for p in (v if isinstance(v, tuple) else (v,))]
    kinds = "".join("c" if isinstance(v, tuple) else "r" for v in ins)
    p = lapack_parts(*parts, of=n.op.name, params=n.attrs, kinds=kinds, out=n.dtype)
    if n.dtype.kind != "c":
        return p
    return _halves(p, L)


def _halves(p: Any, L: Any) -> tuple:
    """(p[0], p[1]) of a packed (2, ...) node."""
    nd = len(p.shape)

    def half(i: int) -> Any:
        s = L.bind("slice", p, starts=(i,) + (0,) * (nd - 1), stops=(i + 1,) + p.shape[1:], steps=(1,) * nd)
        return L.reshape(s, p.shape[1:])

    return (half(0), half(1))


def _region(n: Any, ins: list, val: dict, b: Any) -> Any:
    """A loop (scan, while) or branch (cond) with complex values: the same region over the split sub-graphs
    (each complex value of a sub-graph a pair of real ones, in place, so a scan body's consts, carries and xs
    stay contiguous). The split region is made once per region, so the output leaves of one loop (sibling
    nodes) stay one loop."""
    region = n.attr("region")
    kind = type(region)  # symgraph.regions.Region or WhileRegion, symgraph.branches.Branches (a layer above)
    key = ("split_region", id(region))
    got = val.get(key)
    if got is None:
        def split(g: Any) -> tuple:
            return split_complex(g, g.toposort())

        def width(plan: list, lo: int, hi: int) -> int:
            return sum(2 if p[0] == "complex" else 1 for p in plan[lo:hi])

        if n.op.name == "scan":
            real, in_plan, out_plan = split(region.body)
            nc, nk = region.nc, region.nk
            new = kind(real, width(in_plan, 0, nc), width(in_plan, nc, nc + nk),
                         width(in_plan, nc + nk, len(in_plan)), region.length, region.reverse, name=region.name,
                         simplify_body=False)
        elif n.op.name == "while":
            cond = split(region.cond)[0]
            real, in_plan, out_plan = split(region.body)
            new = kind(cond, real, width(in_plan, 0, region.nk), name=region.name, simplify_body=False)
        elif n.op.name == "cond":
            graphs = [split(g) for g in region.graphs]
            out_plan = graphs[0][2]
            new = kind([g[0] for g in graphs], name=region.name, simplify_body=False)
        else:  # pragma: no cover - the region ops are scan, while and cond
            _refuse(n)
        got = val[key] = (new, out_plan, region)  # the region kept alive: its id is the key
    new, out_plan, _ = got
    flat = [p for v in ins for p in (v if isinstance(v, tuple) else (v,))]
    plan = out_plan[n.attr("index")]
    leaves = [b.make(n.op, flat, {"region": new, "index": k}, n.tag) for k in plan[1:3 if plan[0] == "complex" else 2]]
    return tuple(leaves) if plan[0] == "complex" else leaves[0]


def _einsum(n: Any, ins: list, L: Any) -> tuple:
    """A complex einsum as real einsums of the parts: the operands are multilinear, so each choice of the
    real or imaginary part of every complex operand is one real einsum, i^k for k imaginary parts chosen
    (2^m einsums for m complex operands: 4 for a product of two, as matmul)."""
    spec = n.attr("spec")
    parts = [v if isinstance(v, tuple) else (v,) for v in ins]
    re, im = [], []
    for choice in itertools.product(*[range(len(p)) for p in parts]):
        k = sum(choice)
        term = L.bind("einsum", *[p[c] for p, c in zip(parts, choice)], spec=spec)
        (re if k % 2 == 0 else im).append((term, k % 4 >= 2))

    def total(terms: list) -> Any:
        out = None
        for term, negative in terms:
            out = term if out is None and not negative else (L.neg(term) if out is None else
                                                              (out - term if negative else out + term))
        return out

    return total(re), total(im)


def _prod(n: Any, x: tuple, L: Any) -> tuple:
    """A complex product over `axes` as a fixed pairwise tree of complex multiplies (NumPy's complex prod
    multiplies left to right: the same product to rounding). The reduced axes go last and are flattened, as
    `symgraph.ops.structural._prod_grad` does; each level multiplies the first half by the second (an odd
    element is carried to the next level), log2(n) levels of elementwise products on slices."""
    axes = tuple(n.attr("axes"))
    shape = n.inputs[0].shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    m = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    kshape = tuple(shape[i] for i in kept)
    parts = [L.reshape(L.transpose(p, kept + axes), kshape + (m,)) for p in x]
    if m == 0:
        ones = L.reshape(L.bind("sum", parts[0], axes=(len(kshape),)), kshape)
        return (L.full_like(ones, 1.0), L.full_like(ones, 0.0))
    nd = len(kshape) + 1

    def take(v: Any, lo: int, hi: int) -> Any:
        return L.bind("slice", v, starts=(0,) * (nd - 1) + (lo,), stops=kshape + (hi,), steps=(1,) * nd)

    while m > 1:
        h = m // 2
        a = [take(p, 0, h) for p in parts]
        b = [take(p, h, 2 * h) for p in parts]
        prod = list(_cmul(a, b))
        if m % 2:
            prod = [L.bind("concatenate", q, take(p, 2 * h, m), axis=nd - 1) for q, p in zip(prod, parts)]
        parts, m = prod, h + m % 2
    return tuple(L.reshape(p, kshape) for p in parts)


def _integer_exponent(y: Any) -> int | None:
    """y's value when it is one integer constant 0 < |k| < 100 (NumPy's repeated-product range), else None."""
    while y.op.name in ("broadcast_to", "reshape", "cast"):
        y = y.inputs[0]
    if y.op.name != "constant":
        return None
    a = y.attr("value").array
    if a.size == 0:
        return None
    v = complex(a.reshape(-1)[0])
    if not np.all(a == a.reshape(-1)[0]) or v.imag != 0 or v.real != int(v.real) or not 0 < abs(v.real) < 100:
        return None
    return int(v.real)


def _cmul(a: tuple, b: tuple) -> tuple:
    return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])


def _int_power(a: tuple, k: int, L: Any) -> tuple:
    """a ** k for an integer constant k, as NumPy's complex power for 0 < |k| < 100: binary powering
    (a*a for 2, a*(a*a) for 3), then 1/r by Smith's division for k < 0."""
    n = abs(k)
    if n == 1:
        r = a
    elif n == 2:
        r = _cmul(a, a)
    elif n == 3:
        r = _cmul(a, _cmul(a, a))
    else:
        r, p, mask = None, a, 1
        while True:
            if n & mask:
                # NumPy starts from 1 + 0i: 1*p is p for finite p, and NaN where p has an infinite part
                r = _cmul((L.full_like(p[0], 1.0), L.zeros_like(p[0])) if r is None else r, p)
            mask <<= 1
            if n < mask:
                break
            p = _cmul(p, p)
    if k < 0:
        one = L.full_like(r[0], 1.0)
        r = _smith_div(one, L.zeros_like(r[0]), r[0], r[1], L)
    # NumPy's zero base: +0 for k > 0 (whatever the zeros' signs), NaN for k < 0
    zero = L.binary("logical_and", L.binary("eq", a[0], 0.0), L.binary("eq", a[1], 0.0))
    z0 = L.full_like(r[0], 0.0 if k > 0 else float("nan"))
    return (L.where(zero, z0, r[0]), L.where(zero, z0, r[1]))


def _smith_div(ar: Any, ai: Any, br: Any, bi: Any, L: Any) -> tuple:
    """(ar + i ai) / (br + i bi) as NumPy's complex division: Smith's algorithm (Smith 1962, CACM 5(8)).

    |br| >= |bi|: rat = bi/br, scl = 1/(br + bi*rat), ((ar + ai*rat)*scl, (ai - ar*rat)*scl);
    otherwise the same with the roles of br and bi exchanged; a zero divisor gives (ar/|br|, ai/|bi|).
    """
    abr, abi = L.unary("abs", br, float_op=False), L.unary("abs", bi, float_op=False)
    first = L.binary("ge", abr, abi)
    zero = L.binary("logical_and", L.binary("eq", abr, 0.0), L.binary("eq", abi, 0.0))
    # each branch on safe operands (the other branch's divisor where it is not taken)
    br1 = L.where(first, br, 1.0)
    rat1 = bi / br1
    scl1 = 1.0 / (br1 + bi * rat1)
    re1, im1 = (ar + ai * rat1) * scl1, (ai - ar * rat1) * scl1
    bi2 = L.where(first, 1.0, bi)
    rat2 = br / bi2
    scl2 = 1.0 / (bi2 + br * rat2)
    re2, im2 = (ar * rat2 + ai) * scl2, (ai * rat2 - ar) * scl2
    re0, im0 = ar / abr, ai / abi
    re = L.where(zero, re0, L.where(first, re1, re2))
    im = L.where(zero, im0, L.where(first, im1, im2))
    return re, im


class ComplexExecutable:
    """The compiled real graph of a complex one: complex arguments in as two real arrays, results assembled.

    Implements `symgraph.backend.Executable` (run, fast, stats, release, inspect, profile). `fast(args)` is
    generated per signature when the real program has one (`_make_fast`): the argument checks of
    `symgraph.signature.fast_match_source`, each complex argument copied into its two parts, the real
    program's own fast call, the complex results assembled; anything it does not accept returns MISS and the
    caller takes the checked path (`run`).
    """

    backend = "llvm"

    def __init__(self, inner: Any, in_plan: list, out_plan: list, in_specs: list, in_tree: Any = None,
                 out_tree: Any = None):
        self.inner = inner
        self.in_plan = in_plan
        self.out_plan = out_plan
        self.in_specs = in_specs
        self.stats = dict(inner.stats)
        self.stats["complex_split"] = True
        self.fast = self._make_fast(in_tree, out_tree)

    def _make_fast(self, in_tree: Any, out_tree: Any) -> Any:
        """The generated fast call (see the class docstring), or None (no fast path for this signature)."""
        from symgraph.signature import MISS, fast_match_source, fast_pack_source

        inner = getattr(self.inner, "fast", None)
        if inner is None or in_tree is None:
            return None
        ns: dict[str, Any] = {"_inner": inner, "_copy": np.array, "_empty": np.empty, "_MISS": MISS}
        match = fast_match_source(in_tree, self.in_specs, frozenset(), ns)
        if match is None:
            return None
        lines, names = match
        lines.insert(0, "def fast(args):")
        flat = []
        for plan, a in zip(self.in_plan, names):
            if plan[0] == "complex":  # C-order copies of the parts (a 0-d argument stays 0-d)
                lines += [f"    {a}r = _copy({a}.real, order='C')", f"    {a}i = _copy({a}.imag, order='C')"]
                flat += [f"{a}r", f"{a}i"]
            else:
                flat.append(a)
        lines += [f"    o = _inner(({', '.join(flat)}{',' if len(flat) == 1 else ''}))", "    if o is _MISS:",
                  "        return _MISS"]
        res = []
        for k, plan in enumerate(self.out_plan):
            if plan[0] == "complex":
                ns[f"CD{k}"] = plan[3]
                lines += [f"    z{k} = _empty(o[{plan[1]}].shape, CD{k})", f"    z{k}.real = o[{plan[1]}]",
                          f"    z{k}.imag = o[{plan[2]}]"]
                res.append(f"z{k}")
            else:
                res.append(f"o[{plan[1]}]")
        lines.append(f"    return {fast_pack_source(out_tree, res, ns)}")
        src = "\n".join(lines)
        exec(compile(src, "<symgraph complex fast call>", "exec"), ns)  # noqa: S102
        fast = ns["fast"]
        fast.__source__ = src
        return fast

    def run(self, leaves: list[Any]) -> list[Any]:
        """Split the complex leaves, run the real program, assemble the complex results."""
        from symgraph.errors import DTypeError, ShapeError

        if len(leaves) != len(self.in_plan):
            raise ShapeError(f"expected {len(self.in_plan)} argument leaves, got {len(leaves)}")
        flat: list = []
        for plan, x, (shape, dtype) in zip(self.in_plan, leaves, self.in_specs):
            if plan[0] == "complex":
                a = np.asarray(x)
                if a.dtype.kind not in "biufc" or not np.can_cast(a.dtype, dtype, "same_kind"):
                    raise DTypeError(f"argument has dtype {a.dtype}, the compiled signature has {dtype}")
                a = a.astype(dtype, copy=False)
                # (np.array: np.ascontiguousarray makes a 0-d argument's parts 1-d)
                flat.extend((np.array(a.real, order="C"), np.array(a.imag, order="C")))
            else:
                flat.append(x)
        outs = self.inner.run(flat)
        res = []
        for plan in self.out_plan:
            if plan[0] == "complex":
                re, im = outs[plan[1]], outs[plan[2]]
                z = np.empty(np.shape(re), plan[3])
                z.real = re
                z.imag = im
                res.append(z)
            else:
                res.append(outs[plan[1]])
        return res

    def release(self) -> int:
        return self.inner.release()

    def inspect(self, what: str) -> str:
        return self.inner.inspect(what)

    def inspectable(self) -> tuple[str, ...]:
        return self.inner.inspectable() if hasattr(self.inner, "inspectable") else ()

    def profile(self, reset: bool = False) -> Any:
        return self.inner.profile(reset) if hasattr(self.inner, "profile") else None
