"""The data-parallel build in one process: bucket order, what crosses the native segments' cuts, the unchecked
segment calls (symgraph.segments, symgraph.distributed). A stand-in communicator plays one rank; the MPI
behaviour is tested under mpiexec in tests/test_distributed.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph import distributed as sgd
from symgraph.errors import DTypeError, ShapeError


class _Stub:
    """The Communicator protocol for one process; `wait` may return a broken value (dtype, shape)."""

    size = 1

    def __init__(self, broken=None):
        self.log, self.broken = [], broken

    def start(self, x, bucket, reduce):
        self.log.append(("start", x.size))
        return np.asarray(x)  # the input itself, as MPI's start returns its send buffer

    def wait(self, started, bucket):
        if self.broken == "dtype":
            return started.astype(np.float32)
        if self.broken == "shape":
            return started[:-1]
        if self.broken == "alias":  # the same values, in the caller's (donated) array
            return self.alias
        return started

    def progress(self):
        pass

    def check_same(self, specs, names):
        pass


def _data():
    rng = np.random.default_rng(3)
    # sorted keys put the input layer ("z_in") last: reverse leaf order would reduce it first
    params = {"a_out": rng.normal(size=(8, 2)) * 0.4, "z_in": rng.normal(size=(5, 8)) * 0.4}
    x = rng.normal(size=(16, 5))
    y = rng.normal(size=(16, 2))
    return params, x, y


def _loss(p, x, y):
    return np.mean((np.tanh(x @ p["z_in"]) @ p["a_out"] - y) ** 2)


def test_buckets_follow_the_order_gradients_are_final():
    params, x, y = _data()
    comm = _Stub()
    f = sg.compile(sg.grad(_loss), data_parallel=sgd.DataParallel(comm, bucket_bytes=64))
    g = f(params, x, y)
    ref = sg.grad(_loss)(params, x, y)
    for k in params:
        np.testing.assert_allclose(g[k], ref[k], rtol=1e-13, atol=1e-15)
    # the output layer's gradient (16 values) is final first, the input layer's (40) last
    assert [e[1] for e in comm.log if e[0] == "start"] == [16, 40]


def _adamw_step(backend, data_parallel, bucket_bytes=1 << 20):
    opt = sg.optim.adamw(1e-2, weight_decay=1e-2)

    def step(p, s, x, y):
        loss, g = sg.value_and_grad(_loss)(p, x, y)
        p, s = opt.update(g, s, p)
        return p, s, loss

    dp = sgd.DataParallel(_Stub(), bucket_bytes=bucket_bytes) if data_parallel else None
    return sg.compile(step, backend=backend, donate_argnums=(0, 1), data_parallel=dp), opt


@pytest.mark.parametrize("bucket_bytes", [1 << 20, 64])
def test_update_after_the_wait_reads_no_intermediate(bucket_bytes):
    params, x, y = _data()
    dp, opt = _adamw_step("llvm", True, bucket_bytes)
    plain, _ = _adamw_step("llvm", False)
    p1, s1 = {k: v.copy() for k, v in params.items()}, opt.init(params)
    p0, s0 = {k: v.copy() for k, v in params.items()}, opt.init(params)
    for _ in range(3):
        p1, s1, l1 = dp(p1, s1, x, y)
        p0, s0, l0 = plain(p0, s0, x, y)
    for k in params:
        np.testing.assert_allclose(p1[k], p0[k], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(l1, l0, rtol=1e-12)
    st = dp.stats
    if bucket_bytes > 100:
        # one bucket: the optimizer's gradient-free parts (beta1 * m, the scalar broadcasts) are computed
        # where the update reads them, after the wait: nothing crosses the cut but the bucket itself
        assert st["segments"] == 2 and st["cut_bytes"] == 0
    else:
        # two buckets: the first start cuts the backward sweep; what crosses is backward work, no view
        assert st["communication"]["buckets"] == 2 and st["communication"]["overlapped_nodes"][0] > 0
        assert 0 < st["cut_bytes"] < 16 * 8 * 8 * 4


@pytest.mark.parametrize("broken, error", [("dtype", DTypeError), ("shape", ShapeError)])
def test_host_result_of_the_wrong_kind_raises(broken, error):
    params, x, y = _data()
    f = sg.compile(sg.grad(_loss), data_parallel=sgd.DataParallel(_Stub(broken)))
    with pytest.raises(error, match="allreduce_wait returned"):
        f(params, x, y)


def test_donated_argument_read_through_a_host_op():
    # the gradient of sum(w * stop_gradient(w)) has w's values; the stub's wait returns the caller's donated
    # array itself, which the last segment overwrites while it reads it in reverse order: that segment takes
    # the checked call, which copies an aliased donated argument first
    def step(p):
        g = sg.grad(lambda q: np.sum(q["w"] * sg.stop_gradient(q["w"])))(p)
        return {"w": p["w"] - 0.25 * g["w"][::-1]}

    comm = _Stub(broken="alias")
    f = sg.compile(step, donate_argnums=(0,), data_parallel=sgd.DataParallel(comm))
    w = np.arange(64.0)
    for _ in range(2):
        comm.alias = w.copy()
        out = f({"w": comm.alias})
        np.testing.assert_array_equal(out["w"], w - 0.25 * w[::-1])


def test_arguments_are_checked_once():
    params, x, y = _data()
    f = sg.compile(sg.grad(_loss), data_parallel=sgd.DataParallel(_Stub()))
    f(params, x, y)
    with pytest.raises(ShapeError):
        f(params, x[:, :4], y)
    with pytest.raises(DTypeError):
        f(params, x.astype(np.complex128), y)
    g = f(params, np.asfortranarray(x), y)  # a layout the segments' entries do not take: copied once
    ref = sg.grad(_loss)(params, x, y)
    np.testing.assert_allclose(g["z_in"], ref["z_in"], rtol=1e-13, atol=1e-15)


def test_cheap_chain_recomputed_after_the_cut():
    # two buckets: w2's gradient is reduced while w1's is computed, which reads z = x @ w1 and a = z*z + 1;
    # a (and the broadcast 1.0) are computed again after the cut from z, which crosses: only z is written out
    rng = np.random.default_rng(0)
    p = {"w1": rng.normal(size=(5, 32)), "w2": rng.normal(size=(32, 3))}
    x = rng.normal(size=(40, 5))

    def loss(p, x):
        z = x @ p["w1"]
        a = z * z + 1.0
        return np.sum((a * a) @ p["w2"])

    f = sg.compile(sg.grad(loss), data_parallel=sgd.DataParallel(_Stub(), bucket_bytes=8 * 96))
    g = f(p, x)
    z = x @ p["w1"]
    a = z * z + 1.0
    np.testing.assert_allclose(g["w2"], (a * a).T @ np.ones((40, 3)), rtol=1e-12)
    np.testing.assert_allclose(g["w1"], x.T @ ((np.ones((40, 3)) @ p["w2"].T) * 2 * a * 2 * z), rtol=1e-12)
    assert f.stats["communication"]["buckets"] == 2
    assert f.stats["cut_bytes"] == z.nbytes
