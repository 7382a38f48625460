"""Compiling in a worker process (SYMGRAPH_COMPILE_PROCESS=1): same object code, same results, safe fallbacks."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgraph as sg
from codegen import compile_worker
from codegen import jit


def _f(x, W):
    return np.sum(np.tanh(x @ W) * np.sin(x))


def _args():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 16))
    return x, x.T.copy() * 0.5


@pytest.fixture
def compile_process(monkeypatch):
    monkeypatch.setenv("SYMGRAPH_COMPILE_PROCESS", "1")
    yield jit._Worker
    jit._stop_worker()


def _module_text() -> str:
    captured = []
    real = jit._compile_ir

    def spy(text, entry, extra):
        captured.append(text)
        return real(text, entry, extra)

    jit._compile_ir = spy
    try:
        sg.compile(lambda x: np.exp(x) * 2.0 + 1.0)(np.linspace(0, 1, 37))
    finally:
        jit._compile_ir = real
    return captured[-1]


def test_worker_object_code_is_the_in_process_object_code(compile_process):
    text = _module_text()
    assert jit._compile_in_worker(text) == jit.compile_object(text)
    assert compile_process.proc is not None and compile_process.proc.poll() is None


def test_results_equal_in_process_compilation(compile_process):
    x, W = _args()
    got = sg.compile(sg.value_and_grad(_f, argnums=(0, 1)))(x, W)
    assert compile_process.proc is not None  # compiled by the worker
    os.environ.pop("SYMGRAPH_COMPILE_PROCESS")
    want = sg.compile(sg.value_and_grad(lambda x, W: _f(x, W) * 1.0, argnums=(0, 1)))(x, W)
    np.testing.assert_array_equal(got[0], want[0])
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a, b)


def test_a_dead_worker_is_replaced(compile_process):
    x, W = _args()
    sg.compile(lambda x: np.cos(x) + 3.0)(x)
    first = compile_process.proc
    first.kill()
    first.wait(timeout=30)
    r = sg.compile(lambda x: np.cos(x) * 3.0)(x)
    np.testing.assert_allclose(r, np.cos(x) * 3.0, rtol=1e-15)
    assert compile_process.proc is not None and compile_process.proc is not first


def test_llvm_errors_still_raise_with_llvm_message(compile_process):
    bad = "define i32 @entry() {\n  ret i64 0\n}\n"  # wrong return type: the verifier rejects it
    assert jit._compile_in_worker(bad) is None  # the worker reports the error; the caller compiles here
    with pytest.raises(RuntimeError):
        jit.compile_ir(bad)


def test_worker_protocol_and_idle_exit():
    text = _module_text()
    data = text.encode()
    inp = io.BytesIO(struct.pack("<Q", len(data)) + data)
    out = io.BytesIO()

    class Reader:  # select() needs a file descriptor; an exhausted BytesIO then reads as closed
        def __init__(self, b):
            self.b = b
            self.r, w = os.pipe()
            os.close(w)

        def fileno(self):
            return self.r

        def read(self, n):
            return self.b.read(n)

    compile_worker.serve(Reader(inp), out, idle_seconds=5)
    reply = out.getvalue()
    assert reply[0] == 0
    (n,) = struct.unpack("<Q", reply[1:9])
    assert reply[9:] == jit.compile_object(text) and len(reply) == 9 + n
    # an idle worker exits by itself
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        from codegen import compile_worker
        r, w = os.pipe()                       # nothing is ever written: the worker is idle
        t = time.perf_counter()
        compile_worker.serve(os.fdopen(r, "rb"), sys.stdout.buffer, idle_seconds=0.5)
        print(round(time.perf_counter() - t, 1))
    """)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert 0.4 <= float(r.stdout) <= 10
