"""codegen.llvm.fastir: its instructions print byte for byte as llvmlite's builder's, and compute the same."""

import numpy as np
import pytest
from llvmlite import ir

from codegen.llvm import fastir


def _two_functions():
    """The same body built twice: through the builder and through fastir."""
    mods = []
    for fast in (False, True):
        mod = ir.Module(name="m")
        d = ir.DoubleType()
        f32 = ir.FloatType()
        sin = ir.Function(mod, ir.FunctionType(d, [d]), "llvm.sin.f64")
        pw = ir.Function(mod, ir.FunctionType(d, [d, d]), "pow")
        sinf = ir.Function(mod, ir.FunctionType(f32, [f32]), "llvm.sin.f32")
        fn = ir.Function(mod, ir.FunctionType(d, [d, d, f32]), "f")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        x, y, z = fn.args
        ops = ("fadd", "fsub", "fmul", "fdiv")
        v = x
        for i in range(12):
            op = ops[i % 4]
            c = ir.Constant(d, 0.1 * i - 0.35)
            v = fastir.binop(b, op, v, c) if fast else getattr(b, op)(v, c)
            w = fastir.call(b, sin, [v]) if fast else b.call(sin, [v])
            v = fastir.binop(b, "fadd", w, y) if fast else b.fadd(w, y)
        v = fastir.call(b, pw, [x, v]) if fast else b.call(pw, [x, v])
        s = fastir.call(b, sinf, [z]) if fast else b.call(sinf, [z])
        s = b.fpext(s, d)
        b.ret(fastir.binop(b, "fmul", v, s) if fast else b.fmul(v, s))
        mods.append(mod)
    return mods


def test_text_is_llvmlites():
    slow, fast = _two_functions()
    assert str(fast) == str(slow)
    assert str(fast).count("call double @\"llvm.sin.f64\"") == 12


def test_mismatched_types_fall_back_and_raise_as_the_builder():
    mod = ir.Module(name="m")
    fn = ir.Function(mod, ir.FunctionType(ir.DoubleType(), [ir.DoubleType(), ir.FloatType()]), "g")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with pytest.raises(ValueError):
        fastir.binop(b, "fadd", *fn.args)
    sin = ir.Function(mod, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), "llvm.sin.f64")
    with pytest.raises(TypeError):
        fastir.call(b, sin, [fn.args[1]])


def test_compiled_value_matches_numpy():
    import llvmlite.binding as llvm
    import ctypes

    _, fast = _two_functions()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    m = llvm.parse_assembly(str(fast))
    m.verify()
    tm = llvm.Target.from_default_triple().create_target_machine()
    ee = llvm.create_mcjit_compiler(m, tm)
    ee.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_float)(
        ee.get_function_address("f"))
    x, y, z = 0.7, -0.2, np.float32(0.3)
    v = x
    for i in range(12):
        c = 0.1 * i - 0.35
        v = [v + c, v - c, v * c, v / c][i % 4]
        v = np.sin(v) + y
    expect = (x ** v) * float(np.sin(z))
    assert f(x, y, z) == pytest.approx(expect, rel=1e-9)
    assert f(x, y, z) == f(x, y, z)


def _scalar_program(x):
    return np.sin(x) * np.cos(x) + np.tan(x * 0.3) + np.exp(-x) * np.log(x + 2.0) + np.tanh(x) + np.log1p(x) + x ** 2.0


def test_light_programs_call_libm_through_pointers_with_the_same_values(monkeypatch):
    import codegen
    import symgraph as sg
    from codegen.llvm.context import LoweringContext

    xs = (0.1, 0.77, 1.3, -0.4, 3.1)
    graphs = [sg.simplify(sg.trace(sg.value_and_grad(_scalar_program), np.float64(x))) for x in xs]
    via_pointers = []
    for g, x in zip(graphs, xs):
        exe = codegen.compile_graph(g)
        assert exe.stats["pipeline"] == "light"
        text = exe.llvm_ir()
        assert "sg.fp.sin" in text and "llvm.sin.f64" not in text
        via_pointers.append([np.asarray(v) for v in exe.run([np.asarray(x)])])
    monkeypatch.setattr(LoweringContext, "math_pointer", lambda self, *a: None)
    for g, x, got in zip(graphs, xs, via_pointers):
        exe = codegen.compile_graph(g)
        assert "llvm.sin.f64" in exe.llvm_ir() and "sg.fp" not in exe.llvm_ir()
        want = [np.asarray(v) for v in exe.run([np.asarray(x)])]
        assert [v.tobytes() for v in got] == [v.tobytes() for v in want]
        # and the value is the function's (analytic derivative checked loosely: libm vs NumPy)
        d = (np.cos(x) ** 2 - np.sin(x) ** 2 + 0.3 / np.cos(0.3 * x) ** 2 - np.exp(-x) * np.log(x + 2.0)
             + np.exp(-x) / (x + 2.0) + 1.0 - np.tanh(x) ** 2 + 1.0 / (1.0 + x) + 2.0 * x)
        assert float(got[0]) == pytest.approx(_scalar_program(x), rel=1e-13)
        assert float(got[1]) == pytest.approx(d, rel=1e-12)
