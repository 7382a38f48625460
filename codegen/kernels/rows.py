"""Row tiles: runs of loop kernels over the same leading axis executed tile by tile, intermediates in a scratch.

A batched program (a `vmap` over P observations, a per-row Jacobian) partitions into many loop
kernels whose domains differ in their trailing axes ((P,), (P, 3), (P, 2, 15), ...) and so cannot
share one loop nest: each one streams its P-row operands through memory, and every intermediate
is a P-row buffer in the arena (at P = 31,843 observations of bundle adjustment, 20 kernels and a
16 MB arena). When every kernel of a run reads the run's own buffers only at the row it computes
(row-local), the run computes the same values tile by tile: rows [t, t + B) of the first kernel,
of the second, ..., then the next tile. Then

- an intermediate written and read only inside the run needs B rows, not P: it lives in a small
  scratch that stays in cache (`RowSegment.local`, its offset in the scratch), and
- every other buffer the run touches is read while its rows are still in cache.

Each element is computed by the same operations in the same order as without tiles (a kernel's
reductions keep the rows: each output is reduced whole within its row), so the results are the
same bits. This is loop fusion by tiling the shared outer loop (Halide's ``compute_at`` of the
producers at a tile of the consumer; Ragan-Kelley et al., PLDI 2013), decided from the
kernels' affine index forms alone.

`plan_row_segments` finds the runs after partitioning; `codegen.kernels.buffers.plan_buffers`
places their scratch and keeps every buffer a run touches alive across the whole run (tiles
interleave the kernels' lifetimes); `codegen.llvm.rows` emits a run as one function looping over
tiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from symgraph.ir import Node

from .tasks import Kernel, KernelKind, Program, TaskKind, task_loads

__all__ = ["RowSegment", "plan_row_segments", "TILE_SCRATCH_BYTES", "MIN_SEGMENT_ROWS"]

#: Bytes of scratch one tile's run-local intermediates may take: B = this / (their bytes per row),
#: so a tile's intermediates stay in the L2 cache while the run's kernels pass over them.
TILE_SCRATCH_BYTES = 1 << 17
#: Fewest rows of a run worth tiling (smaller programs stay as they are: they fit in cache).
MIN_SEGMENT_ROWS = 1024
#: Rows of a tile are a multiple of this (whole vectors of the kernels' row loops).
TILE_ROW_MULTIPLE = 16
#: Fewest rows of a tile.
MIN_TILE_ROWS = 16


@dataclass(eq=False)
class RowSegment:
    """A run of consecutive loop kernels executed tile by tile over their shared leading axis.

    Attributes:
        kernels: the kernels' indices, consecutive, in execution order.
        rows: P, the extent of every kernel's axis 0.
        tile: B, rows per tile (the last tile may be shorter).
        local: run-local intermediate -> its byte offset in one tile's scratch (B rows each).
        scratch_bytes: bytes of one tile's scratch (64-byte aligned slots).
        copies: scratches reserved (one per thread that may run tiles at once).
        arena_offset: where the scratch copies start in the arena (set by `plan_buffers`).
    """

    kernels: list[int]
    rows: int
    tile: int = 0
    local: dict = field(default_factory=dict)
    scratch_bytes: int = 0
    copies: int = 1
    arena_offset: int = 0

    @property
    def first(self) -> int:
        return self.kernels[0]

    @property
    def last(self) -> int:
        return self.kernels[-1]


def _row_local(aff, rows: int, row_size: int) -> bool:
    """Whether an element offset addresses row i0 of a buffer of `rows` rows of `row_size` elements:
    coefficient `row_size` on loop variable 0, and the rest of the form within [0, row_size)."""
    if row_size <= 0:
        return False
    c0 = 0
    rest = []
    for a, c in aff.terms:
        if a.op == "var" and a.attrs[0] == 0:
            c0 = c
        else:
            rest.append((a, c))
    if c0 != row_size or any(a.op == "var" and a.attrs[0] == 0 for a, _ in rest):
        return False
    lo = hi = aff.const
    for a, c in rest:
        alo, ahi = a.rng
        lo, hi = (lo + c * alo, hi + c * ahi) if c > 0 else (lo + c * ahi, hi + c * alo)
    return lo >= 0 and hi < row_size


def _rows_of(n: Node, rows: int) -> int:
    """Elements per row of n's buffer when it splits into `rows` rows (0: it does not)."""
    size = int(n.size)
    return size // rows if size and size % rows == 0 else 0


def _tileable(k: Kernel, rows: int, inside: set, donated_nodes: set) -> bool:
    """Whether kernel k may join a run over `rows` rows whose kernels wrote the buffers `inside`.

    A loop kernel whose axis 0 has `rows` and is not reduced, whose tasks are stores and
    reductions in registers (each output reduced within its row: the reduced loops are inner),
    that writes every buffer row-locally and reads the run's own buffers row-locally.
    """
    dom = k.domain
    if k.kind is not KernelKind.LOOP or not dom or dom[0] != rows or k.size == 0 or 0 in k.red_axes:
        return False
    dims = [i for i, d in enumerate(dom) if d > 1]
    for t in k.tasks:
        if t.kind is TaskKind.REDUCE:
            if not dims or dims[-1] not in k.red_axes:  # a reduction in memory fills its output first
                return False
        elif t.kind is not TaskKind.STORE:
            return False
        if t.node in donated_nodes or t.offset is None:
            return False
        if not _row_local(t.offset, rows, _rows_of(t.node, rows)):
            return False
    writes = inside | {t.node for t in k.tasks}
    for t in k.tasks:
        for e in task_loads(t):
            m = e.attrs[0]
            if m in writes and not _row_local(e.args[0], rows, _rows_of(m, rows)):
                return False
    return True


def _runs(prog: Program) -> list[RowSegment]:
    """Maximal runs of consecutive tileable kernels (two or more, at least `MIN_SEGMENT_ROWS` rows)."""
    donated_nodes = {prog.graph.outputs[k] for k in prog.donated}
    out: list[RowSegment] = []
    cur: RowSegment | None = None
    inside: set = set()
    for ki, k in enumerate(prog.kernels):
        rows = k.domain[0] if k.domain else 0
        if cur is not None and rows == cur.rows and _tileable(k, rows, inside, donated_nodes):
            cur.kernels.append(ki)
            inside |= {t.node for t in k.tasks}
            continue
        if cur is not None and len(cur.kernels) > 1:
            out.append(cur)
        cur, inside = None, set()
        if rows >= MIN_SEGMENT_ROWS and _tileable(k, rows, set(), donated_nodes):
            cur = RowSegment([ki], rows)
            inside = {t.node for t in k.tasks}
    if cur is not None and len(cur.kernels) > 1:
        out.append(cur)
    return out


def plan_row_segments(prog: Program, nthreads: int = 1) -> list[RowSegment]:
    """The runs of `prog` to execute tile by tile, their tiles and run-local intermediates.

    A materialized value is run-local when every kernel writing or reading it is in the run
    and it is not a graph output; it gets B rows of the run's scratch (offsets 64-byte aligned).
    The tile B is `TILE_SCRATCH_BYTES` over the local bytes per row, a multiple of
    `TILE_ROW_MULTIPLE`, at least `MIN_TILE_ROWS` and at most P. `nthreads` scratch copies are
    reserved when tiles may run on several threads.

    Args:
        prog: a partitioned program (`codegen.kernels.partition.partition`).
        nthreads: the threads the program may use.

    Returns:
        The runs in execution order (none may be empty of local values: a run is kept when it
        has at least one, since only then does tiling save memory traffic for sure).
    """
    outputs = set(prog.graph.outputs)
    segs = []
    for seg in _runs(prog):
        ks = set(seg.kernels)
        local_nodes = []
        seen = set()
        for ki in seg.kernels:
            for t in prog.kernels[ki].tasks:
                n = t.node
                if n in seen or n in outputs or n.op.kind == "source" or n not in prog.materialized:
                    continue
                seen.add(n)
                if all(r in ks for r in prog.readers.get(n, [])) and prog.first_write.get(n, -1) in ks \
                        and prog.producer.get(n, -1) in ks:
                    local_nodes.append(n)
        if not local_nodes:
            continue
        row_bytes = sum(_rows_of(n, seg.rows) * n.dtype.itemsize for n in local_nodes)
        tile = TILE_SCRATCH_BYTES // max(row_bytes, 1) // TILE_ROW_MULTIPLE * TILE_ROW_MULTIPLE
        seg.tile = int(min(seg.rows, max(MIN_TILE_ROWS, tile)))
        off = 0
        for n in local_nodes:
            seg.local[n] = off
            off += -(-(_rows_of(n, seg.rows) * n.dtype.itemsize * seg.tile) // 64) * 64
        seg.scratch_bytes = off
        seg.copies = max(1, min(nthreads, -(-seg.rows // seg.tile)))
        segs.append(seg)
    return segs


def local_row_bytes(n: Node, seg: RowSegment) -> int:
    """Bytes per row of a run-local value's buffer (the scratch's row stride for it)."""
    return _rows_of(n, seg.rows) * np.dtype(n.dtype).itemsize
