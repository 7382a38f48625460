"""Data-parallel training on MPI: the communicator, broadcast, sharding, gradient averaging.

    import symgraph.distributed as sgd
    params = sgd.broadcast(params)                  # rank 0's values on every rank
    x_local, y_local = sgd.shard((x, y))            # this rank's contiguous slice
    step = sg.compile(train_step, data_parallel=True)

Run with `mpiexec -n N python train.py` (or `srun`). mpi4py is imported on
first use (the `distributed` extra: `pip install -e ".[distributed]"`); a
missing mpi4py raises a `SymgraphError` naming the extra.

In a step compiled with `data_parallel=...` the gradients that `sg.grad` /
`sg.value_and_grad` build at the step's top level are averaged across the
ranks before the code that reads them (the optimizer update): they are cut
into buckets (reverse leaf order, the order reverse mode finishes them for
parameters listed input-to-output, at most `BUCKET_BYTES` each, one dtype
per bucket), and each bucket is one `allreduce_start`/`allreduce_wait` pair
of graph ops (`symgraph.ops.comm`, role "communication"): the start is
scheduled right after the bucket's last gradient, the wait right before the
first reader, so the rest of the backward sweep runs while MPI's
non-blocking all-reduce (`MPI_Iallreduce`) is in flight (PyTorch DDP's
buckets; Li et al., "PyTorch Distributed", VLDB 2020, section 3.2).

Before the first all-reduce of a new signature the ranks compare every
gradient leaf's shape and dtype (one `allgather`); a mismatch raises on
every rank, naming the rank and the leaf. With more than one rank, an
uncaught exception on any rank aborts all of them (`MPI_Abort`) instead of
leaving the others waiting in a collective (set SYMGRAPH_MPI_ABORT=0 to
keep Python's default); `DataParallel(timeout=...)` bounds each wait.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from . import lax as L
from . import numpy as snp
from .errors import SymgraphError
from .ir import Node, role
from .ops.comm import allreduce_pair
from .tree import tree_flatten, tree_unflatten

__all__ = ["rank", "size", "broadcast", "shard", "shard_bounds", "allreduce", "barrier", "DataParallel",
           "Communicator", "BUCKET_BYTES", "DistributedError", "set_comm"]

#: Largest gradient bucket, bytes (PyTorch DDP's default is 25 MB; models on CPUs are smaller).
BUCKET_BYTES = 1 << 20

_INSTALL = 'pip install -e ".[distributed]" (mpi4py and the mpich wheel), or mpi4py built against your MPI'


class DistributedError(SymgraphError):
    """Ranks that disagree (shapes, dtypes), a timed-out wait, or MPI missing."""


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(f"symgraph.distributed needs mpi4py and an MPI library: {_INSTALL} ({e})") from None
    return MPI


_state: dict[str, Any] = {"comm": None, "wrappers": {}, "hooked": False}


def __getattr__(name: str) -> Any:
    if name == "comm":  # the default communicator, MPI.COMM_WORLD unless set_comm changed it
        return _world()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _world() -> Any:
    c = _state["comm"]
    if c is None:
        c = _state["comm"] = _mpi().COMM_WORLD
        _install_abort(c)
    return c


def set_comm(comm: Any) -> None:
    """Use the mpi4py communicator `comm` instead of MPI.COMM_WORLD for everything here."""
    _state["comm"] = comm
    _install_abort(comm)


def _install_abort(comm: Any) -> None:
    """With several ranks, an uncaught exception prints its traceback, then aborts every rank."""
    if _state["hooked"] or comm.Get_size() < 2 or os.environ.get("SYMGRAPH_MPI_ABORT", "1") == "0":
        return
    _state["hooked"] = True
    prev = sys.excepthook

    def hook(etype: Any, value: Any, tb: Any) -> None:
        prev(etype, value, tb)
        try:
            sys.stderr.write(f"symgraph.distributed: rank {comm.Get_rank()} raised; aborting all ranks\n")
            sys.stderr.flush()
            time.sleep(0.3)  # let mpiexec forward this rank's output before MPI_Abort ends the job
        finally:
            _mpi().COMM_WORLD.Abort(1)

    sys.excepthook = hook


def rank() -> int:
    """This process's rank in the default communicator (0 .. size()-1)."""
    return _world().Get_rank()


def size() -> int:
    """The number of processes in the default communicator."""
    return _world().Get_size()


def barrier() -> None:
    """Wait until every rank reaches this call."""
    _world().Barrier()


def broadcast(tree: Any, root: int = 0) -> Any:
    """Rank `root`'s pytree on every rank (initial parameters, optimizer state).

    Args:
        tree: a pytree of arrays and Python values (only `root`'s is read;
            other ranks may pass None).
        root: the rank whose values are sent.

    Returns:
        A copy of `root`'s tree, structure and dtypes included (pickled by
        mpi4py, arrays as buffers).
    """
    c = _world()
    return c.bcast(tree if c.Get_rank() == root else None, root=root)


def shard_bounds(n: int, rank: int, size: int) -> tuple[int, int]:
    """The [start, stop) of rank `rank`'s part of n items split into `size` contiguous parts.

    The first n % size ranks get one item more (numpy.array_split's rule):
    10 items on 3 ranks are [0, 4), [4, 7), [7, 10). With fewer items than
    ranks the last ranks get empty parts.
    """
    if size < 1 or not 0 <= rank < size:
        raise DistributedError(f"shard: rank {rank} is not in 0..{size - 1}")
    base, extra = divmod(int(n), size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def shard(x: Any, axis: int = 0, *, rank: int | None = None, size: int | None = None) -> Any:
    """This rank's contiguous slice of an array, or of every array of a pytree (a dataset).

    Args:
        x: an array, or a pytree of arrays sharing the length of `axis` (inputs and labels).
        axis: the axis split across ranks.
        rank, size: default the default communicator's; give both to shard without MPI.

    Returns:
        Views of the slices `shard_bounds(n, rank, size)` along `axis`; an
        uneven split gives the first n % size ranks one more item.

    Raises:
        DistributedError: leaves of different lengths along `axis`.
    """
    if rank is None or size is None:
        c = _world()
        rank = c.Get_rank() if rank is None else rank
        size = c.Get_size() if size is None else size
    leaves, td = tree_flatten(x)
    arrs = [np.asarray(a) for a in leaves]
    ns = {a.shape[axis] for a in arrs}
    if len(ns) > 1:
        raise DistributedError(f"shard: the arrays have different lengths {sorted(ns)} along axis {axis}")
    out = []
    for a in arrs:
        lo, hi = shard_bounds(a.shape[axis], rank, size)
        idx = [slice(None)] * a.ndim
        idx[axis] = slice(lo, hi)
        out.append(a[tuple(idx)])
    return tree_unflatten(td, out)


class Communicator:
    """An mpi4py communicator as the `comm` attribute of the all-reduce ops (`symgraph.ops.comm`).

    One per mpi4py communicator (`Communicator.of`); compares by identity, so
    graphs on the same communicator share it. Keeps the pending non-blocking
    reductions by bucket id and timing counters.

    Attributes:
        mpi: the mpi4py communicator.
        timeout: seconds a wait may take before raising DistributedError (None: wait forever).
        wait_seconds: total time spent waiting for reductions (communication not overlapped).
        inflight_seconds: total time from posting each reduction to the start of its wait (the
            graph's work that ran while it was in flight).
        done_at_wait: reductions already finished when their wait began (one `MPI_Test`).
        reductions, bytes: reductions done and bytes reduced (per rank).
    """

    def __init__(self, mpi_comm: Any, timeout: float | None = None):
        self.mpi = mpi_comm
        self.timeout = timeout
        self._pending: dict[int, tuple] = {}
        self.wait_seconds = 0.0
        self.inflight_seconds = 0.0
        self.done_at_wait = 0
        self.reductions = 0
        self.bytes = 0

    @classmethod
    def of(cls, mpi_comm: Any) -> "Communicator":
        """The Communicator of an mpi4py communicator (created once)."""
        w = _state["wrappers"].get(id(mpi_comm))
        if w is None or w.mpi is not mpi_comm:
            w = _state["wrappers"][id(mpi_comm)] = cls(mpi_comm)
        return w

    @property
    def rank(self) -> int:
        return self.mpi.Get_rank()

    @property
    def size(self) -> int:
        return self.mpi.Get_size()

    def __repr__(self) -> str:
        return f"Communicator(size={self.size})"

    def start(self, x: np.ndarray, bucket: int, reduce: str) -> np.ndarray:
        """Post the all-reduce (sum) of `x`; returns the buffer sent, which `wait` takes to find the result."""
        send = np.asarray(x, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        if self.size == 1:  # the sum over one rank is the value itself (nothing writes into it)
            recv, req = send, None
        else:
            recv = np.empty_like(send)
            req = self.mpi.Iallreduce(send, recv, op=_mpi().SUM)
        self._pending[(bucket, id(send))] = (req, send, recv, reduce, time.perf_counter())
        self.reductions += 1
        self.bytes += send.nbytes
        return send

    def progress(self) -> None:
        """Let MPI move pending reductions forward (called between compiled segments)."""
        reqs = [p[0] for p in self._pending.values() if p[0] is not None]
        if reqs:
            _mpi().Request.Testall(reqs)

    def wait(self, started: np.ndarray, bucket: int) -> np.ndarray:
        """The result of the reduction `start` posted and returned `started` for (the mean for "mean").

        Raises:
            DistributedError: the wait took longer than `timeout` seconds.
        """
        req, send, recv, reduce, posted = self._pending.pop((bucket, id(started)))
        t0 = time.perf_counter()
        self.inflight_seconds += t0 - posted
        if req is not None:
            if req.Test():  # finished while the graph computed: fully overlapped
                self.done_at_wait += 1
            elif self.timeout is None:
                req.Wait()
            else:
                while not req.Test():
                    if time.perf_counter() - t0 > self.timeout:
                        raise DistributedError(f"rank {self.rank}: an all-reduce did not finish within "
                                               f"{self.timeout} s (another rank stopped or is much slower)")
                    time.sleep(1e-4)
        self.wait_seconds += time.perf_counter() - t0
        if reduce == "mean" and self.size > 1:
            np.divide(recv, self.size, out=recv)
        return recv

    def check_same(self, specs: list[tuple], names: list[str]) -> None:
        """Raise on every rank unless all ranks pass the same (shape, dtype) list.

        Raises:
            DistributedError: naming the first rank and leaf that differ from rank 0's.
        """
        if self.size == 1:
            return
        everyone = self.mpi.allgather(specs)
        ref = everyone[0]
        for r, got in enumerate(everyone):
            if len(got) != len(ref):
                raise DistributedError(f"data_parallel: rank {r} has {len(got)} gradient leaves, rank 0 has "
                                       f"{len(ref)}; every rank must train the same parameters")
            for i, (a, b) in enumerate(zip(ref, got)):
                if a != b:
                    raise DistributedError(
                        f"data_parallel: rank {r} has gradient leaf {i} ({names[i]}) of shape {b[0]} dtype {b[1]}, "
                        f"rank 0 has shape {a[0]} dtype {a[1]}; every rank must train the same parameters")


class DataParallel:
    """How `sg.compile(step, data_parallel=DataParallel(...))` reduces gradients.

    Args:
        comm: an mpi4py communicator (default: the module's, MPI.COMM_WORLD).
        bucket_bytes: the largest bucket of gradients reduced as one message.
        reduce: "mean" (gradients averaged: each rank's loss is a mean over
            its own shard) or "sum" (for a loss already divided by the global
            batch size: exact with uneven shards).
        timeout: seconds a wait for a reduction may take (None: forever).
    """

    def __init__(self, comm: Any = None, bucket_bytes: int = BUCKET_BYTES, reduce: str = "mean",
                 timeout: float | None = None):
        if reduce not in ("mean", "sum"):
            raise DistributedError(f"DataParallel: reduce must be 'mean' or 'sum', got {reduce!r}")
        if not isinstance(bucket_bytes, (int, np.integer)) or bucket_bytes < 1:
            raise DistributedError(f"DataParallel: bucket_bytes must be a positive int, got {bucket_bytes!r}")
        self._comm = comm
        self.bucket_bytes = int(bucket_bytes)
        self.reduce = reduce
        self.timeout = timeout

    @classmethod
    def coerce(cls, value: Any) -> "DataParallel":
        """`data_parallel=` of `sg.compile`: True, an mpi4py communicator or a DataParallel."""
        if isinstance(value, DataParallel):
            return value
        if value is True:
            return cls()
        if hasattr(value, "Iallreduce") or all(hasattr(value, a) for a in ("start", "wait", "check_same")):
            return cls(comm=value)
        raise DistributedError(f"compile: data_parallel must be True, an mpi4py communicator or "
                               f"symgraph.distributed.DataParallel, got {value!r}")

    def communicator(self) -> Any:
        """The `comm` attribute of the all-reduce ops: a `Communicator` (or the object given, when it
        already has `start`, `wait` and `check_same`, e.g. a stand-in in tests)."""
        if all(hasattr(self._comm, a) for a in ("start", "wait", "check_same")):
            return self._comm
        c = Communicator.of(self._comm if self._comm is not None else _world())
        if self.timeout is not None:
            c.timeout = self.timeout
        return c

    def reducer(self) -> Any:
        """The gradient reducer for `symgraph.transforms.reducing_gradients`."""
        comm = self.communicator()

        def reduce(grads: list[Node], names: list[str]) -> list[Node]:
            comm.check_same([(tuple(g.shape), str(g.dtype)) for g in grads], names)
            return bucketed_allreduce(grads, comm, self.bucket_bytes, self.reduce)

        return reduce


def _buckets(grads: list[Node], bucket_bytes: int) -> list[list[int]]:
    """Leaf indices per bucket, in the order reverse mode finished the gradients (creation order).

    Reverse mode builds a parameter's gradient when the last contribution to it arrives, so
    the node's creation number orders the gradients by when they are final: the output
    layer's first, the embedding's last, whatever the order of the leaves (a dict's sorted
    keys). Ties (one node for several leaves) keep reverse leaf order.
    """
    out: list[list[int]] = []
    cur: list[int] = []
    nbytes = 0
    for i in sorted(reversed(range(len(grads))), key=lambda i: grads[i].id):
        g = grads[i]
        if g.size == 0:
            continue
        if cur and (g.dtype != grads[cur[0]].dtype or nbytes + g.nbytes > bucket_bytes):
            out.append(cur)
            cur, nbytes = [], 0
        cur.append(i)
        nbytes += g.nbytes
    if cur:
        out.append(cur)
    return out


def bucketed_allreduce(grads: list[Node], comm: Communicator, bucket_bytes: int = BUCKET_BYTES,
                       reduce: str = "mean") -> list[Node]:
    """Nodes of the all-reduced gradients: one start/wait pair per bucket of flattened leaves.

    Args:
        grads: gradient nodes (any shapes; float dtypes).
        comm: the Communicator.
        bucket_bytes: the largest bucket, bytes (a larger leaf is a bucket of its own).
        reduce: "mean" or "sum".

    Returns:
        Nodes of the same shapes and dtypes, in the order of `grads`.
    """
    out = list(grads)
    # on MPI the mean's division runs in the graph (fused into the reader, the optimizer's update),
    # not as a pass of its own over the reduced bucket; one rank divides by nothing
    divide = isinstance(comm, Communicator) and reduce == "mean"
    with role("communication"):
        for b in _buckets(grads, bucket_bytes):
            flat = [L.reshape(grads[i], (grads[i].size,)) for i in b]
            x = flat[0] if len(flat) == 1 else snp.concatenate(flat)
            r = allreduce_pair(x, comm, "sum" if divide else reduce)
            if divide and comm.size > 1:
                r = r / np.asarray(comm.size, dtype=r.dtype)
            off = 0
            for i in b:
                n = grads[i].size
                piece = r if len(b) == 1 else r[off:off + n]
                out[i] = L.reshape(piece, grads[i].shape)
                off += n
    return out


def allreduce(x: Any, reduce: str = "mean") -> Any:
    """The mean (or sum) over ranks of `x`: a graph op inside a trace, MPI's all-reduce on arrays.

    Use it for values other than gradients: a step's loss or accuracy averaged over ranks.

    Args:
        x: an array or a traced value (float or integer; "mean" of integers gives floats on arrays).
        reduce: "mean" or "sum".
    """
    comm = Communicator.of(_world())
    if isinstance(x, Node):
        return allreduce_pair(x, comm, reduce)
    a = np.asarray(x, order="C")
    r = np.empty_like(a)
    comm.mpi.Allreduce(a, r, op=_mpi().SUM)
    return r / comm.size if reduce == "mean" else r
