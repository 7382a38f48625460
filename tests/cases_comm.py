"""Op-table rows for the communication ops (symgraph/ops/comm.py), with a one-process stand-in communicator.

With one process the all-reduce mean (and sum) of x is x, so each row checks the start/wait pair against the
identity: evaluation, rules, derivatives (the pair is linear and its own adjoint), batching. The MPI
behaviour is tested in tests/test_distributed.py under mpiexec.
"""

from __future__ import annotations

import numpy as np

from opcase import OpCase, real
from symgraph.ops.comm import allreduce_pair


class OneProcess:
    """The communicator protocol of symgraph.ops.comm for a single process: the reduction is the identity."""

    def start(self, x, bucket, reduce):
        return np.array(x, copy=True)

    def wait(self, started, bucket):
        return started

    def progress(self):
        pass


ONE = OneProcess()
_SHAPES = [(((2, 3),), {}), (((),), {}), (((4,),), {})]

CASES = [
    OpCase("allreduce_start", lambda x: allreduce_pair(x, ONE, "mean"), lambda x: x.copy(), _SHAPES, (real,),
           name="mean"),
    OpCase("allreduce_wait", lambda x: allreduce_pair(x, ONE, "sum"), lambda x: x.copy(), _SHAPES, (real,),
           name="sum"),
]
