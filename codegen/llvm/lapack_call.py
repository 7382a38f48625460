"""The emission state of one LAPACK node in compiled code (`Call`), shared by the real and complex emitters.

`codegen.llvm.lapack` (the real routines, the FFT, the sorts) and `codegen.llvm.lapack_complex` (the complex
routines on split parts) emit a node's work through one `Call`: buffers of the arena's LAPACK scratch, loads
and stores in the working precision, LAPACK's ILP64 Fortran ABI (every argument by address, the hidden lengths
of character arguments appended), the finiteness accumulator, and `fail`, which writes (call number + 1,
info, batch index, detail) into the status slot the executable reads after the call (the first failure is
kept).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ..cpu.lapack import NONFINITE, LapackCall, symbol
from .context import F64, I8, I64, PTR, VOID, LoweringContext, for_range

__all__ = ["Call", "c64"]


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class Call:
    """The emission state of one LAPACK node: its buffers, working precision, batch index and status slot."""

    def __init__(self, cx: LoweringContext, call: LapackCall, scratch: ir.Value, status: ir.Value, number: int,
                 ty: ir.Type):
        self.cx, self.call, self.scratch, self.status, self.number = cx, call, scratch, status, number
        self.ty = ty  # the working precision of the routine's buffers
        self.routine_dtype: Any = None  # the routines' precision when it is not ty's real one (complex calls)
        self.info = cx.alloca(I64, "lapack_info")
        self.acc = cx.alloca(F64, "lapack_finite")
        self.bi: ir.Value = c64(0)  # the matrix being worked on
        self.dst: ir.Value = None    # this matrix's output (set per matrix)

    @property
    def b(self) -> ir.IRBuilder:
        return self.cx.builder

    def buf(self, name: str) -> ir.Value:
        return self.b.gep(self.scratch, [c64(self.call.offsets[name])], source_etype=I8)

    def at(self, p: ir.Value, i: ir.Value, ty: ir.Type = None) -> ir.Value:
        return self.b.gep(p, [i], source_etype=ty or self.ty)

    def load(self, p: ir.Value, i: ir.Value, ty: ir.Type = None) -> ir.Value:
        return self.b.load(self.at(p, i, ty), typ=ty or self.ty)

    def store(self, v: ir.Value, p: ir.Value, i: ir.Value, ty: ir.Type = None) -> None:
        self.b.store(v, self.at(p, i, ty))

    def convert(self, v: ir.Value, to: ir.Type) -> ir.Value:
        """A float between the working precision and the node's dtype."""
        if v.type == to:
            return v
        return self.b.fptrunc(v, to) if v.type == F64 else self.b.fpext(v, to)

    def lin(self, *terms: tuple) -> ir.Value:
        """sum of v * c over (v, c) pairs (v an ir.Value or an int)."""
        bb = self.b
        out = c64(0)
        for v, c in terms:
            v = c64(v) if isinstance(v, int) else v
            out = bb.add(out, v if c == 1 else bb.mul(v, c64(c)))
        return out

    def loop(self, lo: Any, hi: Any, body: Callable[[ir.Value], None], name: str) -> None:
        lo = c64(lo) if isinstance(lo, int) else lo
        hi = c64(hi) if isinstance(hi, int) else hi
        for_range(self.b, lo, hi, body, name=name)

    def loop2(self, rows: int, cols: int, body: Callable[[ir.Value, ir.Value], None], name: str) -> None:
        self.loop(0, rows, lambda i: self.loop(0, cols, lambda j: body(i, j), f"{name}j"), f"{name}i")

    def int_arg(self, v: int) -> ir.Value:
        a = self.cx.alloca(I64)
        self.b.store(c64(v), a)
        return a

    def int_var(self, v: ir.Value) -> ir.Value:
        """An integer argument computed at run time (by address, as every Fortran argument)."""
        a = self.cx.alloca(I64)
        self.b.store(v, a)
        return a

    def char_arg(self, ch: str) -> ir.Value:
        a = self.cx.alloca(I8)
        self.b.store(ir.Constant(I8, ord(ch)), a)
        return a

    def float_arg(self, v: float) -> ir.Value:
        a = self.cx.alloca(self.ty)
        self.b.store(ir.Constant(self.ty, v), a)
        return a

    def finite(self, v: ir.Value) -> None:
        """Add v - v (0 for finite v, NaN otherwise) to the finiteness accumulator."""
        bb = self.b
        v = self.convert(v, F64)
        bb.store(bb.fadd(bb.load(self.acc, typ=F64), bb.fsub(v, v)), self.acc)

    def is_nonfinite(self) -> ir.Value:
        s = self.b.load(self.acc, typ=F64)
        return self.b.fcmp_unordered("uno", s, s)

    def if_finite(self, body: Callable[[], None]) -> None:
        """body() when every value added to the finiteness accumulator was finite, else record NONFINITE
        (LAPACK is never called on NaN or infinity)."""
        with self.b.if_else(self.is_nonfinite(), likely=False) as (bad, good):
            with bad:
                self.fail(c64(NONFINITE))
            with good:
                body()

    def fail(self, code: ir.Value, detail: ir.Value = None) -> None:
        """Record (call number + 1, code, batch index, detail) unless an earlier failure is recorded."""
        bb = self.b
        with bb.if_then(bb.icmp_signed("==", bb.load(self.status, typ=I64), c64(0))):
            bb.store(c64(self.number + 1), self.status)
            bb.store(code, bb.gep(self.status, [c64(1)], source_etype=I64))
            bb.store(self.bi, bb.gep(self.status, [c64(2)], source_etype=I64))
            bb.store(detail if detail is not None else c64(0), bb.gep(self.status, [c64(3)], source_etype=I64))

    def ok(self) -> ir.Value:
        """Whether no failure is recorded yet."""
        return self.b.icmp_signed("==", self.b.load(self.status, typ=I64), c64(0))

    def fortran(self, routine: str, args: list, nchars: int, check: str | None = "nonzero") -> None:
        """Call `routine` in the working precision; check "nonzero" / "negative" fails on such an info
        (the last argument must then be `self.info`), None: the routine has no info."""
        dtype = self.routine_dtype or (np.float64 if self.ty == F64 else np.float32)
        fn = self.cx.function(symbol(routine, dtype), VOID, [PTR] * len(args) + [I64] * nchars)
        self.b.call(fn, args + [c64(1)] * nchars)
        if check is None:
            return
        bb = self.b
        code = bb.load(self.info, typ=I64)
        with bb.if_then(bb.icmp_signed("!=" if check == "nonzero" else "<", code, c64(0)), likely=False):
            self.fail(code)
