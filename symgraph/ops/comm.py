"""Communication ops: the two halves of a non-blocking all-reduce across processes (data parallelism).

`allreduce_start(x; comm, bucket, reduce)` has the value of `x` and, when it
runs, posts a non-blocking all-reduce of `x` across the processes of `comm`;
`allreduce_wait(s; comm, bucket, reduce)` reads the start node `s` and has the
reduced value: the sum over the processes, or the mean when `reduce` is
"mean". The pair is split so that the schedule can post the reduction as soon
as `x` is final and wait for it as late as possible: the work scheduled
between them overlaps the communication (`Op.extra["schedule"]`: "early" and
"late", read by `symgraph.passes.schedule`).

`comm` is any hashable object with `start(x, bucket, reduce) -> array` (post
the reduction of array `x`; returns an array of x's values, the start's value)
and `wait(started, bucket) -> array` (the result, given the array the start
returned: pairs built for several batch elements share a bucket id): this module
never imports an MPI binding; `symgraph.distributed.Communicator` is the MPI
one. Both ops are host ops (`Op.extra["host"]`): a native backend runs them
between the compiled segments of the graph (`symgraph.segments`), the NumPy
evaluator calls their impl. Neither is constant-folded (a fold would
communicate at compile time).

Derivatives: the pair is the linear map x -> mean (or sum) over processes of x,
which is its own adjoint across processes, so the VJP of `allreduce_wait` is
the same reduction of the cotangent (a new start/wait pair) and the VJP of
`allreduce_start` the identity; the JVPs likewise.
"""

from __future__ import annotations

import itertools

from .. import lax as L
from ..ir import role
from .batch import LOOP
from .core import FREE, Op, register

_buckets = itertools.count()


def new_bucket() -> int:
    """A bucket id unused by any start/wait pair built in this process so far."""
    return next(_buckets)


def _same_shape(shape, comm, bucket, reduce):
    return shape


def _same_dtype(dtype, comm, bucket, reduce):
    return dtype


def _start_impl(x, comm, bucket, reduce):
    return comm.start(x, bucket, reduce)


def _wait_impl(x, comm, bucket, reduce):
    return comm.wait(x, bucket)


def allreduce_pair(x, comm, reduce: str = "mean"):
    """The node of the all-reduce of node `x` over `comm`: `allreduce_wait(allreduce_start(x))`.

    Built with role "communication" (drawn in its own style by the graph dump).
    """
    b = new_bucket()
    with role("communication"):
        s = L.bind("allreduce_start", x, comm=comm, bucket=b, reduce=reduce)
        return L.bind("allreduce_wait", s, comm=comm, bucket=b, reduce=reduce)


def _start_vjp(ct, node):
    return (ct,)


def _wait_vjp(ct, node):
    return (allreduce_pair(ct, node.attr("comm"), node.attr("reduce")),)


def _start_jvp(tangents, node):
    return tangents[0]


def _wait_jvp(tangents, node):
    t = tangents[0]
    return None if t is None else allreduce_pair(t, node.attr("comm"), node.attr("reduce"))


register(Op("allreduce_start", 1, "opaque", _same_shape, _same_dtype, _start_impl, _start_vjp, _start_jvp,
            linear=True, cost=FREE, foldable=False, cheap=False, batch=LOOP,
            doc="value of x; posts a non-blocking all-reduce of x across processes (host op)",
            extra={"host": True, "schedule": "early", "communication": True}))

register(Op("allreduce_wait", 1, "opaque", _same_shape, _same_dtype, _wait_impl, _wait_vjp, _wait_jvp,
            linear=True, cost=FREE, foldable=False, cheap=False, batch=LOOP,
            doc="the all-reduced value (sum or mean over processes) of its start node's input (host op)",
            extra={"host": True, "schedule": "late", "communication": True}))
