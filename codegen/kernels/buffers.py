"""Buffers of a partitioned program: arguments, constants, outputs, and one arena planned by lifetime.

Arguments and constants belong to the caller, outputs are fresh arrays (or donated
arguments), every other materialized value gets a slot in one arena. Slots are placed by
lifetime in kernel steps (from the producing kernel to the last reader) with
`symgraph.passes.schedule.assign_offsets`, so the arena is the planned peak (plus alignment).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symgraph.passes.schedule import assign_offsets, interval_peak

from symgraph.ir import Node

from .rows import local_row_bytes
from .tasks import Program

__all__ = ["BufferPlan", "plan_buffers"]


@dataclass
class BufferPlan:
    """Where each materialized value lives.

    Attributes:
        ref: node -> ("in", leaf) | ("out", j) | ("const", c) | ("arena", offset).
        out_buffers: [(shape, dtype)] of the fresh output arrays.
        out_plan: per graph output, how the runtime produces it.
        consts: constant arrays passed to native code (C-contiguous).
        arena_bytes: arena size (bytes).
        peak_bytes: planned peak of live intermediates and outputs, each output
            counted from the first kernel that writes it (bytes).
        call_bytes: memory one call holds (bytes): the arena plus the fresh
            output arrays, which the runtime allocates before the call (the
            honest peak of a call; at least `peak_bytes` up to alignment).
    """

    ref: dict
    out_buffers: list
    out_plan: list
    consts: list
    arena_bytes: int
    peak_bytes: int
    call_bytes: int = 0


def plan_buffers(prog: Program, segments: list | tuple = ()) -> BufferPlan:
    """Assign a buffer to every materialized node of a partitioned program.

    Args:
        prog: the partitioned program.
        segments: its row-tiled runs (`codegen.kernels.rows.plan_row_segments`): a run-local
            value gets ref ("tile", run index, byte offset in a tile's scratch, bytes per row) and no slot of
            its own; each run's scratch copies get one arena slot (`RowSegment.arena_offset`, set
            here); every other value a run touches stays alive from the run's first kernel to its
            last (tiles interleave the kernels, so no two of them may share bytes).
    """
    g = prog.graph
    ref: dict = {}
    for i, x in enumerate(g.inputs):
        ref[x] = ("in", i)
    consts: list[np.ndarray] = []
    for n, a in prog.consts.items():
        ref[n] = ("const", len(consts))
        consts.append(np.ascontiguousarray(a))
    out_buffers: list = []
    out_plan: list = []
    first: dict = {}
    n_steps = len(prog.kernels)
    out_intervals = []
    for k, o in enumerate(g.outputs):
        if o in first:
            out_plan.append(("dup", first[o]))
            continue
        first[o] = k
        if o.op.name == "input":
            out_plan.append(("copy_in", next(i for i, x in enumerate(g.inputs) if x is o)))
            continue
        if o.op.name == "constant" and o not in prog.materialized:
            out_plan.append(("const", o.attr("value").array))
            continue
        if k in prog.donated:
            li = prog.donated[k]
            ref[o] = ("in", li)
            out_plan.append(("in", li))
            continue
        ref[o] = ("out", len(out_buffers))
        out_plan.append(("buf", len(out_buffers)))
        out_buffers.append((o.shape, o.dtype))
        out_intervals.append((prog.first_write.get(o, 0), n_steps, o.nbytes))
    # arena slots
    nodes: list = []
    intervals = []
    for si, seg in enumerate(segments):
        for n, off in seg.local.items():
            ref[n] = ("tile", si, off, local_row_bytes(n, seg))
        nodes.append(seg)
        intervals.append((seg.first, seg.last, seg.scratch_bytes * seg.copies))
    for n in prog.order:
        if n in ref or n not in prog.materialized or n.op.kind == "source":
            continue
        # live from the first kernel writing it (a concatenate is written piece by piece) to its last reader;
        # empty values (no task) still get a zero-size slot
        first_step = prog.first_write.get(n, 0)
        last_step = max(prog.readers.get(n, [first_step]) + [prog.producer.get(n, first_step)])
        for seg in segments:  # touched inside a run: alive across all of it
            if first_step <= seg.last and last_step >= seg.first:
                first_step, last_step = min(first_step, seg.first), max(last_step, seg.last)
        nodes.append(n)
        intervals.append((first_step, last_step, n.nbytes))
    offsets, total = assign_offsets(intervals)
    for n, off in zip(nodes, offsets):
        if isinstance(n, Node):
            ref[n] = ("arena", off)
        else:
            n.arena_offset = off
    peak = interval_peak(intervals + out_intervals)
    out_bytes = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize for shape, dt in out_buffers)
    return BufferPlan(ref, out_buffers, out_plan, consts, total, peak, total + out_bytes)
