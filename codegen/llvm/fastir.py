"""Cheap llvmlite instructions for the bulk of a loop body: float arithmetic and plain calls.

A large scalar program's kernels are hundreds of thousands of `fadd`/`fmul`/`fsub` and calls
of intrinsics (llvm.sin.f64). Built through `ir.IRBuilder`, each one passes the builder's
generic checks, `ir.Instruction.__init__` and, when the module is printed, the generic
`descr` with its format calls: about two thirds of the IR-emission stage of
`bench.scale --pipeline scalar`. `binop` and `call` build the same instructions
(`ir.Instruction` subclasses, registered in the function's name scope in the same order, so
they get the same names) with only what these cases need, and print them with one f-string
each. The text is byte for byte what llvmlite prints (tests/test_fastir.py compares them);
any case they do not cover (operands of different types, a call with a calling convention,
a variadic callee) goes through the builder as before.
"""

from __future__ import annotations

from llvmlite import ir
from llvmlite.ir.instructions import CallInstrAttributes, FastMathFlags

__all__ = ["binop", "call", "call_pointer"]


def _new_name(scope: object) -> str:
    """`scope.register("", deduplicate=True)` (llvmlite's `NameScope`): the next free ".N" of the function."""
    used = scope._useset
    counts = scope._basenamemap
    name = ""
    while name in used:
        ident = counts[""] + 1
        counts[""] = ident
        name = f".{ident}"
    used.add(name)
    return name


def _ref(v: ir.Value) -> str:
    """`v.get_reference()`, read from llvmlite's cache when it is there."""
    try:
        return v._StringReferenceCaching__cached_refstr
    except AttributeError:
        return v.get_reference()


class _BinOp(ir.Instruction):
    """`%".N" = <op> <type> <a>, <b>`: an unnamed binary instruction without flags or metadata."""

    def __init__(self, block: ir.Block, typ: ir.Type, opname: str, operands: tuple) -> None:
        # what `ir.Instruction.__init__` sets for name='' and flags=(), without its checks
        self.parent = block
        self.type = typ
        self._name = name = _new_name(block.scope)
        self._StringReferenceCaching__cached_refstr = f'%"{name}"'  # what `get_reference` caches
        self.opname = opname
        self.operands = operands
        self.flags = []
        self.metadata = {}

    def _to_string(self) -> str:
        a, b = self.operands
        return f'%"{self._name}" = {self.opname} {self.type} {_ref(a)}, {_ref(b)}'


class _Call(ir.CallInstr):
    """`%".N" = call <ret> @"f"(<ty> <a>, ...)`: an unnamed call of a function without calling
    convention, tail marker, attributes or metadata."""

    def __init__(self, block: ir.Block, fn: ir.Function, args: tuple) -> None:
        self._init(block, fn, fn.function_type.return_type, args)

    def _init(self, block: ir.Block, callee: ir.Value, ret: ir.Type, args: tuple) -> None:
        """The fields llvmlite's CallInstr has, set directly: `callee(*args)` returning `ret`."""
        self.parent = block
        self.type = ret
        self._name = name = _new_name(block.scope)
        self._StringReferenceCaching__cached_refstr = f'%"{name}"'
        self.cconv = ""
        self.tail = ""
        self.fastmath = FastMathFlags(())
        self.attributes = CallInstrAttributes(())
        self.arg_attributes = {}
        self.opname = "call"
        self.operands = [callee, *args]
        self.flags = []
        self.metadata = {}

    def _to_string(self) -> str:
        fn = self.operands[0]
        args = ", ".join([f"{a.type} {_ref(a)}" for a in self.operands[1:]])
        ref = f'%"{self._name}" = ' if not isinstance(self.type, ir.VoidType) else ""
        return f"{ref}call {self.type} {_ref(fn)}({args})"


class _PointerCall(_Call):
    """`%".N" = call <ret> %"p"(<ty> <a>, ...)`: a call through a function pointer (llvmlite's
    builder needs a function there)."""

    def __init__(self, block: ir.Block, ptr: ir.Value, ret: ir.Type, args: tuple) -> None:
        self._init(block, ptr, ret, args)


def binop(b: ir.IRBuilder, opname: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """`b.<opname>(x, y)` (fadd, fsub, fmul, fdiv, ...; no flags) as a `_BinOp`, inserted at b's position.

    Raises:
        ValueError: as the builder does, when x and y have different types.
    """
    if x.type is not y.type and x.type != y.type or b.debug_metadata is not None:
        return getattr(b, opname)(x, y)
    instr = _BinOp(b.block, x.type, opname, (x, y))
    b._insert(instr)
    return instr


def call(b: ir.IRBuilder, fn: ir.Function, args: list) -> ir.Value:
    """`b.call(fn, args)` as a `_Call` when fn is a plain function of exactly these argument types.

    Raises:
        TypeError: as the builder does, when an argument's type is not the parameter's.
    """
    fty = fn.function_type
    params = fty.args
    if fty.var_arg or fn.calling_convention or len(params) != len(args) or b.debug_metadata is not None \
            or any(a.type is not p and a.type != p for a, p in zip(args, params)) \
            or any(isinstance(p, ir.MetaDataType) for p in params):
        return b.call(fn, args)
    instr = _Call(b.block, fn, tuple(args))
    b._insert(instr)
    return instr


def call_pointer(b: ir.IRBuilder, ptr: ir.Value, ret: ir.Type, args: list) -> ir.Value:
    """A call of the function at pointer `ptr` (returning `ret`, no calling convention) on args, inserted at b's position."""
    instr = _PointerCall(b.block, ptr, ret, tuple(args))
    b._insert(instr)
    return instr
