"""A compile worker process: LLVM IR text in, object code out (`SYMGRAPH_COMPILE_PROCESS=1`).

The parent (`codegen.jit`) starts one worker with `python -m codegen.compile_worker`
and keeps it for the life of the process. For each module it writes a request
on the worker's standard input and reads the reply from its standard output:

    request: 8-byte little-endian length, then the IR text (UTF-8)
    reply:   1 status byte (0: object code follows, 1: an error message follows),
             8-byte little-endian length, then the payload

The worker runs exactly what the parent would run in-process (`jit.optimize` on
the same host target machine, then `emit_object`), so the object code is the
same bytes. What the worker spends on compiling, LLVM's heap and the optimizer's
and the X86 back end's code pages, is then resident in the worker, not in the
process that holds the training data (PyTorch's Inductor compiles in worker
processes too). The worker exits when its standard input closes or after
`IDLE_SECONDS` without a request, so its memory is given back soon after the
last compile.
"""

from __future__ import annotations

import struct
import sys


#: Seconds without a request after which the worker exits (the parent starts a new one when needed),
#: so that a training run does not keep a compiler's memory alive in a second process.
IDLE_SECONDS = 30.0


def serve(inp, out, idle_seconds: float = IDLE_SECONDS) -> None:  # noqa: ANN001 - binary streams
    """Answer requests from `inp` on `out` until `inp` is closed or no request came for `idle_seconds`."""
    import select

    from . import jit

    while True:
        ready, _, _ = select.select([inp], [], [], idle_seconds)
        if not ready:
            return
        head = inp.read(8)
        if len(head) < 8:
            return
        (n,) = struct.unpack("<Q", head)
        text = inp.read(n).decode("utf-8")
        try:
            obj, status = jit.compile_object(text), 0
        except Exception as e:  # noqa: BLE001 - every failure goes back to the parent as text
            obj, status = f"{type(e).__name__}: {e}".encode(), 1
        out.write(bytes([status]) + struct.pack("<Q", len(obj)) + obj)
        out.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
