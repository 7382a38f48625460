"""The native FFT of compiled code: LLVM IR for batched 1-D transforms along the last axis on split arrays.

`fft_node_function(cx, kind, n, ty, inverse)` emits (once per module and signature) an internal
function ``void(ptr in_re, ptr in_im, ptr out_re, ptr out_im, ptr table, ptr work, i64 batch)``
that transforms `batch` contiguous rows, unnormalized, as the FFT primitives do
(`symgraph.ops.fourier`): "c2c" (forward, or `inverse`: the forward transform with the real and
imaginary parts exchanged on the way in and out, IDFT(v) = swap(DFT(swap(v)))), "r2c" (rows of n
reals to n//2 + 1 complex) and "c2r" (n//2 + 1 complex to n reals, the imaginary parts of the DC
and, for even n, Nyquist terms ignored). The algorithms and the table layout are
`codegen.cpu.fft`'s (Stockham radix 4/2/3/5 for lengths 2^a 3^b 5^c, Bluestein's chirp-z otherwise, real
transforms through the half-length complex one); the tables are an input buffer (a constant
node computed in float64 at compile time), the workspace is the arena's LAPACK scratch.

Each Stockham pass is a function of its own (noalias pointers, constant trip counts) whose inner
loop runs over contiguous elements sharing one twiddle, which LLVM's loop vectorizer turns into
vector code; the first pass (stride 1) is one loop over the butterflies, reading twiddles of its
own laid out contiguously. Float32 is computed in
float32, float64 in float64 (NumPy's pocketfft does the same).
"""

from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..cpu.fft import plan, plan_floats, radices
from .context import F64, I64, PTR, VOID, LoweringContext, for_range

__all__ = ["fft_node_function", "fft_complex_function"]


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _tname(ty: ir.Type) -> str:
    return "f64" if ty == F64 else "f32"


class _Fn:
    """One internal function being emitted: its builder, element type and complex helpers."""

    def __init__(self, cx: LoweringContext, name: str, nargs: int, ty: ir.Type, noalias: int = 0,
                 last_i64: bool = False):
        args = [PTR] * nargs + ([I64] if last_i64 else [])
        self.fn = ir.Function(cx.module, ir.FunctionType(VOID, args), name)
        self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        self.fn.attributes.add("noinline")  # each pass optimized once, called from every transform that needs it
        for a in self.fn.args[:noalias]:
            a.add_attribute("noalias")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.ty = ty
        self.args = self.fn.args

    def at(self, p: ir.Value, i) -> ir.Value:
        return self.b.gep(p, [_c(i) if isinstance(i, int) else i], source_etype=self.ty)

    def ld(self, p: ir.Value, i) -> ir.Value:
        return self.b.load(self.at(p, i), typ=self.ty)

    def st(self, v: ir.Value, p: ir.Value, i) -> None:
        self.b.store(v, self.at(p, i))

    def ldc(self, re: ir.Value, im: ir.Value, i) -> tuple:
        return (self.ld(re, i), self.ld(im, i))

    def stc(self, v: tuple, re: ir.Value, im: ir.Value, i) -> None:
        self.st(v[0], re, i)
        self.st(v[1], im, i)

    def k(self, v: float) -> ir.Constant:
        return ir.Constant(self.ty, v)

    def add(self, a: tuple, c: tuple) -> tuple:
        return (self.b.fadd(a[0], c[0]), self.b.fadd(a[1], c[1]))

    def sub(self, a: tuple, c: tuple) -> tuple:
        return (self.b.fsub(a[0], c[0]), self.b.fsub(a[1], c[1]))

    def mul(self, a: tuple, c: tuple) -> tuple:
        b = self.b
        return (b.fsub(b.fmul(a[0], c[0]), b.fmul(a[1], c[1])), b.fadd(b.fmul(a[0], c[1]), b.fmul(a[1], c[0])))

    def conj(self, a: tuple) -> tuple:
        return (a[0], self.b.fneg(a[1]))

    def mul_mi(self, a: tuple) -> tuple:
        """-i a."""
        return (a[1], self.b.fneg(a[0]))

    def scale(self, a: tuple, s: float) -> tuple:
        return (self.b.fmul(a[0], self.k(s)), self.b.fmul(a[1], self.k(s)))

    def idx(self, *terms) -> ir.Value:
        """sum of v * c over (v, c) pairs (v an ir.Value or an int)."""
        b = self.b
        out = _c(0)
        for v, c in terms:
            v = _c(v) if isinstance(v, int) else v
            out = b.add(out, v if c == 1 else b.mul(v, _c(c), flags=("nuw", "nsw")), flags=("nuw", "nsw"))
        return out

    def loop(self, lo, hi, body: Callable[[ir.Value], None], name: str = "i") -> None:
        lo = _c(lo) if isinstance(lo, int) else lo
        hi = _c(hi) if isinstance(hi, int) else hi
        for_range(self.b, lo, hi, body, name=name)

    def off(self, p: ir.Value, floats) -> ir.Value:
        return self.at(p, floats)

    def done(self) -> ir.Function:
        self.b.ret_void()
        return self.fn


def _cached(cx: LoweringContext, name: str, make: Callable[[], ir.Function]) -> ir.Function:
    fns = cx.__dict__.setdefault("_fft_functions", {})
    f = fns.get(name)
    if f is None:
        f = fns[name] = make()
    return f


# ----- the Stockham passes (Van Loan 1992, section 1.7; radix 4: section 2.3) -----


def _stage(cx: LoweringContext, ty: ir.Type, radix: int, length: int, s: int) -> ir.Function:
    """One autosort pass of a length-L transform: n = L / s points per subsequence, stride s.

    y[q + s(r + radix p)] = W_n^(r p) * (butterfly r of x[q + s(p + j m)], j < radix), m = n / radix,
    with W_n^e = W_L^(e s) read from the table (real parts at tw, imaginary at tw + L).
    """
    name = f"sg_fft_pass{radix}_{length}_{s}_{_tname(ty)}"

    def make() -> ir.Function:
        f = _Fn(cx, name, 5, ty, noalias=4)
        xr, xi, yr, yi, tw = f.args
        n = length // s
        m = n // radix

        def twid(p: ir.Value, r: int) -> tuple:
            if s == 1:  # the first pass: its own contiguous table after W_L (`_first_pass`)
                base = length + length + 2 * (r - 1) * m
                return (f.ld(tw, f.idx((p, 1), (base, 1))), f.ld(tw, f.idx((p, 1), (base + m, 1))))
            e = f.idx((p, s * r))
            return (f.ld(tw, e), f.ld(tw, f.idx((e, 1), (length, 1))))

        def over_p(p: ir.Value) -> None:
            ws = [twid(p, r) for r in range(1, radix)] if n > radix else None

            def over_q(q: ir.Value) -> None:
                xs = [f.ldc(xr, xi, f.idx((q, 1), (p, s), (j * m * s, 1))) for j in range(radix)]
                if radix == 2:
                    a, c = xs
                    outs = [f.add(a, c), f.sub(a, c)]
                elif radix in (3, 5):
                    outs = _small_dft(f, xs)
                else:
                    a, c, d, e = xs
                    apd, amd = f.add(a, d), f.sub(a, d)
                    cpe, jcme = f.add(c, e), f.mul_mi(f.sub(c, e))
                    outs = [f.add(apd, cpe), f.add(amd, jcme), f.sub(apd, cpe), f.sub(amd, jcme)]
                for r, v in enumerate(outs):
                    if r and ws is not None:
                        v = f.mul(v, ws[r - 1])
                    f.stc(v, yr, yi, f.idx((q, 1), (p, s * radix), (r * s, 1)))

            if s == 1:
                over_q(_c(0))
            else:
                f.loop(0, s, over_q, "q")

        f.loop(0, m, over_p, "p")
        return f.done()

    return _cached(cx, name, make)


def _small_dft(f: _Fn, xs: list) -> list:
    """The DFT of 3 or 5 points: y_r = x_0 + sum_j x_j W^(j r), W = exp(-2 pi i / radix), the symmetric pairs
    (j, radix - j) combined first (a ± b then one real and one imaginary product per pair and output)."""
    import math

    r = len(xs)
    b = f.b
    pairs = [(f.add(xs[j], xs[r - j]), f.sub(xs[j], xs[r - j])) for j in range(1, r // 2 + 1)]
    y0 = xs[0]
    for sm, _ in pairs:
        y0 = f.add(y0, sm)
    outs = [y0]
    for k in range(1, r):
        re, im = xs[0]
        for j, (sm, df) in enumerate(pairs, 1):
            c, sn = math.cos(2 * math.pi * j * k / r), -math.sin(2 * math.pi * j * k / r)
            # W^(jk) x_j + W^(-jk) x_(r-j) = c (x_j + x_(r-j)) + i sn (x_j - x_(r-j))
            re = b.fadd(re, b.fsub(b.fmul(sm[0], f.k(c)), b.fmul(df[1], f.k(sn))))
            im = b.fadd(im, b.fadd(b.fmul(sm[1], f.k(c)), b.fmul(df[0], f.k(sn))))
        outs.append((re, im))
    return outs


def _passes(length: int) -> list[tuple[int, int]]:
    """(radix, stride) of each Stockham pass (`codegen.cpu.fft.radices`)."""
    out, s = [], 1
    for r in radices(length):
        out.append((r, s))
        s *= r
    return out


def fft_complex_function(cx: LoweringContext, length: int, ty: ir.Type) -> ir.Function:
    """``void(ptr xr, ptr xi, ptr yr, ptr yi, ptr table, ptr work)``: y = DFT(x) of `length` (forward,
    unnormalized; x is not written; table: the plan's segments, `codegen.cpu.fft._plan_segments`)."""
    name = f"sg_fft_cplx_{length}_{_tname(ty)}"

    def make() -> ir.Function:
        algo, m = plan(length)
        f = _Fn(cx, name, 6, ty)
        xr, xi, yr, yi, tab, work = f.args
        if algo == "copy":
            f.stc(f.ldc(xr, xi, 0), yr, yi, 0)
        elif algo == "stockham":
            ps = _passes(m)
            bufs = [(f.off(work, 0), f.off(work, m)), (f.off(work, 2 * m), f.off(work, 3 * m))]
            cur = (xr, xi)
            for i, (radix, s) in enumerate(ps):
                dst = (yr, yi) if i == len(ps) - 1 else bufs[i % 2]
                f.b.call(_stage(cx, ty, radix, m, s), [cur[0], cur[1], dst[0], dst[1], tab])
                cur = dst
        else:
            _bluestein(cx, f, length, m)
        return f.done()

    return _cached(cx, name, make)


def _bluestein(cx: LoweringContext, f: _Fn, length: int, m: int) -> None:
    """y_k = c_k conj(DFT_M(conj(DFT_M(a) B)))_k, a_j = x_j c_j (j < L, zero padded to M): Bluestein's
    convolution, its inverse DFT by the conjugation identity (B holds 1/M)."""
    xr, xi, yr, yi, tab, work = f.args
    inner = fft_complex_function(cx, m, f.ty)
    t0 = plan_floats(m)  # the inner transform's tables come first
    cr, ci = f.off(tab, t0), f.off(tab, t0 + length)
    br, bi = f.off(tab, t0 + 2 * length), f.off(tab, t0 + 2 * length + m)
    ar, ai = f.off(work, 0), f.off(work, m)
    Ar, Ai = f.off(work, 2 * m), f.off(work, 3 * m)
    sw = f.off(work, 4 * m)
    zero = f.k(0.0)
    f.loop(0, length, lambda j: f.stc(f.mul(f.ldc(xr, xi, j), f.ldc(cr, ci, j)), ar, ai, j), "ja")

    def pad(j: ir.Value) -> None:
        f.st(zero, ar, j)
        f.st(zero, ai, j)

    f.loop(length, m, pad, "jz")
    f.b.call(inner, [ar, ai, Ar, Ai, tab, sw])
    f.loop(0, m, lambda k: f.stc(f.conj(f.mul(f.ldc(Ar, Ai, k), f.ldc(br, bi, k))), ar, ai, k), "kb")
    f.b.call(inner, [ar, ai, Ar, Ai, tab, sw])
    f.loop(0, length, lambda k: f.stc(f.mul(f.ldc(cr, ci, k), f.conj(f.ldc(Ar, Ai, k))), yr, yi, k), "ky")


# ----- one node: rows of a batch -----


def fft_node_function(cx: LoweringContext, kind: str, n: int, ty: ir.Type, inverse: bool = False) -> ir.Function:
    """``void(ptr in_re, ptr in_im, ptr out_re, ptr out_im, ptr table, ptr work, i64 batch)``: `batch`
    contiguous rows transformed (kind "c2c": n -> n; "r2c": n reals -> n//2 + 1; "c2r": n//2 + 1 -> n
    reals; the unused pointers of the real side are ignored). table: `codegen.cpu.fft.node_table`;
    work: `codegen.cpu.fft.node_work_floats` floats."""
    name = f"sg_fft_{kind}{'_inv' if inverse else ''}_{n}_{_tname(ty)}"

    def make() -> ir.Function:
        f = _Fn(cx, name, 6, ty, last_i64=True)
        in_r, in_i, out_r, out_i, tab, work, batch = f.args
        h = n // 2 + 1
        in_len, out_len = {"c2c": (n, n), "r2c": (n, h), "c2r": (h, n)}[kind]

        def row(bi: ir.Value) -> None:
            b = f.b
            xo, yo = b.mul(bi, _c(in_len)), b.mul(bi, _c(out_len))
            xr, xi = f.at(in_r, xo), f.at(in_i, xo)
            yr, yi = f.at(out_r, yo), f.at(out_i, yo)
            if kind == "c2c":
                cplx = fft_complex_function(cx, n, ty)
                args = [xi, xr, yi, yr] if inverse else [xr, xi, yr, yi]
                b.call(cplx, args + [tab, work])
            elif kind == "r2c":
                _r2c(cx, f, n, xr, yr, yi, tab, work)
            else:
                _c2r(cx, f, n, xr, xi, yr, tab, work)

        f.loop(0, batch, row, "row")
        return f.done()

    return _cached(cx, name, make)


def _r2c(cx: LoweringContext, f: _Fn, n: int, x: ir.Value, yr: ir.Value, yi: ir.Value, tab: ir.Value,
         work: ir.Value) -> None:
    """X_k, k <= n/2, of n reals. Even n (M = n/2): Z = DFT_M(x_2j + i x_2j+1), then
    X_k = E_k + W_n^k O_k with E_k = (Z_k + conj Z_(M-k)) / 2, O_k = -i (Z_k - conj Z_(M-k)) / 2."""
    zero = f.k(0.0)
    if n % 2:
        zr, zi, Zr, Zi, wk = (f.off(work, i * n) for i in range(5))

        def load(j: ir.Value) -> None:
            f.st(f.ld(x, j), zr, j)
            f.st(zero, zi, j)

        f.loop(0, n, load, "jr")
        f.b.call(fft_complex_function(cx, n, f.ty), [zr, zi, Zr, Zi, tab, wk])
        f.loop(0, n // 2 + 1, lambda k: f.stc(f.ldc(Zr, Zi, k), yr, yi, k), "ko")
        return
    m = n // 2
    wr, wi = tab, f.off(tab, m + 1)
    inner_tab = f.off(tab, 2 * (m + 1))
    zr, zi, Zr, Zi, wk = (f.off(work, i * m) for i in range(5))

    def deinterleave(j: ir.Value) -> None:
        f.st(f.ld(x, f.idx((j, 2))), zr, j)
        f.st(f.ld(x, f.idx((j, 2), (1, 1))), zi, j)

    f.loop(0, m, deinterleave, "jd")
    f.b.call(fft_complex_function(cx, m, f.ty), [zr, zi, Zr, Zi, inner_tab, wk])
    z0r, z0i = f.ldc(Zr, Zi, 0)
    f.stc((f.b.fadd(z0r, z0i), zero), yr, yi, 0)
    f.stc((f.b.fsub(z0r, z0i), zero), yr, yi, m)

    def post(k: ir.Value) -> None:
        a = f.ldc(Zr, Zi, k)
        c = f.conj(f.ldc(Zr, Zi, f.b.sub(_c(m), k)))
        e = f.scale(f.add(a, c), 0.5)
        o = f.scale(f.mul_mi(f.sub(a, c)), 0.5)
        f.stc(f.add(e, f.mul(f.ldc(wr, wi, k), o)), yr, yi, k)

    f.loop(1, m, post, "kp")


def _c2r(cx: LoweringContext, f: _Fn, n: int, xr: ir.Value, xi: ir.Value, y: ir.Value, tab: ir.Value,
         work: ir.Value) -> None:
    """n reals from X_k, k <= n/2 (unnormalized inverse). Even n (M = n/2): Z_k = E_k + i O_k with
    E_k = X_k + conj X_(M-k), O_k = (X_k - conj X_(M-k)) conj(W_n^k), the imaginary parts of X_0 and
    X_M dropped; z = IDFT_M(Z); y_2j = Re z_j, y_2j+1 = Im z_j. Odd n: the Hermitian spectrum completed."""
    zero = f.k(0.0)
    if n % 2:
        h = n // 2 + 1
        Yr, Yi, vr, vi, wk = (f.off(work, i * n) for i in range(5))
        f.stc((f.ld(xr, 0), zero), Yr, Yi, 0)

        def fill(k: ir.Value) -> None:
            v = f.ldc(xr, xi, k)
            f.stc(v, Yr, Yi, k)
            f.stc(f.conj(v), Yr, Yi, f.b.sub(_c(n), k))

        f.loop(1, h, fill, "kf")
        f.b.call(fft_complex_function(cx, n, f.ty), [Yi, Yr, vi, vr, tab, wk])
        f.loop(0, n, lambda j: f.st(f.ld(vr, j), y, j), "jo")
        return
    m = n // 2
    wr, wi = tab, f.off(tab, m + 1)
    inner_tab = f.off(tab, 2 * (m + 1))
    Zr, Zi, zr, zi, wk = (f.off(work, i * m) for i in range(5))
    x0, xm = f.ld(xr, 0), f.ld(xr, m)
    f.stc((f.b.fadd(x0, xm), f.b.fsub(x0, xm)), Zr, Zi, 0)

    def pre(k: ir.Value) -> None:
        a = f.ldc(xr, xi, k)
        c = f.conj(f.ldc(xr, xi, f.b.sub(_c(m), k)))
        e = f.add(a, c)
        o = f.mul(f.sub(a, c), f.conj(f.ldc(wr, wi, k)))
        f.stc((f.b.fsub(e[0], o[1]), f.b.fadd(e[1], o[0])), Zr, Zi, k)

    f.loop(1, m, pre, "kq")
    f.b.call(fft_complex_function(cx, m, f.ty), [Zi, Zr, zi, zr, inner_tab, wk])

    def interleave(j: ir.Value) -> None:
        f.st(f.ld(zr, j), y, f.idx((j, 2)))
        f.st(f.ld(zi, j), y, f.idx((j, 2), (1, 1)))

    f.loop(0, m, interleave, "ji")
