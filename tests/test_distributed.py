"""Data-parallel training (symgraph.distributed) and the atomic training state (sg.save_state / load_state).

The MPI tests run `mpiexec -n 2` in a subprocess with a timeout (the `distributed` extra: mpi4py and the
mpich wheel; skipped when they are missing). The rest runs in this process: sharding, the state file, and
the all-reduce ops with a one-rank stand-in communicator (graph, schedule, segments, dump).
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import symgraph as sg
from symgraph import distributed as sgd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ----- sharding (no MPI needed: rank and size given) -----


def test_shard_even_and_uneven():
    x = np.arange(20).reshape(10, 2)
    parts = [sgd.shard(x, rank=r, size=3) for r in range(3)]
    assert [p.shape[0] for p in parts] == [4, 3, 3]
    np.testing.assert_array_equal(np.concatenate(parts), x)
    assert sgd.shard_bounds(10, 2, 3) == (7, 10)
    # fewer items than ranks: the last ranks get empty parts
    assert [sgd.shard_bounds(2, r, 4) for r in range(4)] == [(0, 1), (1, 2), (2, 2), (2, 2)]
    # a dataset (pytree) is cut consistently; another axis
    xs, ys = sgd.shard((x, np.arange(10)), rank=1, size=2)
    np.testing.assert_array_equal(xs, x[5:])
    np.testing.assert_array_equal(ys, np.arange(5, 10))
    np.testing.assert_array_equal(sgd.shard(x, axis=1, rank=0, size=2), x[:, :1])
    with pytest.raises(sgd.DistributedError, match="different lengths"):
        sgd.shard((x, np.arange(9)), rank=0, size=2)


# ----- training state -----

Point = collections.namedtuple("Point", ["x", "y"])


def _state_tree():
    rng = np.random.default_rng(1)
    return {"params": {"w": rng.normal(size=(3, 4)).astype(np.float32), "b": np.zeros(4)},
            "opt": {"step": np.int32(7), "m": [rng.normal(size=2), (np.arange(3, dtype=np.int64), None)]},
            "pos": 123, "lr": 0.5, "done": False, "name": "run-1", "pt": Point(np.float64(1.5), np.ones((0, 2))),
            "by_int": {5: np.array(2.0, dtype=np.float16), 7: 1}}


def _same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert sorted(a, key=str) == sorted(b, key=str)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def test_state_round_trip(tmp_path):
    p = tmp_path / "state.npz"
    t = _state_tree()
    sg.save_state(p, t)
    _same(t, sg.load_state(p))
    assert [f.name for f in tmp_path.iterdir()] == ["state.npz"]  # no temporary file left


def test_state_errors(tmp_path):
    with pytest.raises(sg.StateError, match="no such file"):
        sg.load_state(tmp_path / "missing.npz")
    p = tmp_path / "s.npz"
    sg.save_state(p, {"w": np.arange(1000.0)})
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])  # a truncated file
    with pytest.raises(sg.StateError, match="corrupt or incomplete"):
        sg.load_state(p)
    np.savez(tmp_path / "plain.npz", a=np.ones(2))
    with pytest.raises(sg.StateError, match="not a symgraph state file"):
        sg.load_state(tmp_path / "plain.npz")
    with pytest.raises(sg.StateError, match="object"):
        sg.save_state(p, {"w": np.array([None, 1], dtype=object)})
    with pytest.raises(sg.StateError, match="leaf is a"):
        sg.save_state(p, {"w": object()})


def test_state_failed_write_keeps_previous(tmp_path, monkeypatch):
    p = tmp_path / "s.npz"
    sg.save_state(p, {"w": np.ones(3)})

    def broken(f, **kw):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(sg.StateError, match="disk full"):
        sg.save_state(p, {"w": np.zeros(3)})
    monkeypatch.undo()
    np.testing.assert_array_equal(sg.load_state(p)["w"], np.ones(3))
    assert [f.name for f in tmp_path.iterdir()] == ["s.npz"]


_KILL_WRITER = """
import sys, numpy as np, symgraph as sg
i = 0
while True:
    sg.save_state(sys.argv[1], {"i": i, "w": np.full(200_000, float(i))})
    i += 1
    if i == 3:
        print("ready", flush=True)
"""


def test_state_survives_kill(tmp_path):
    """A writer killed at a random moment leaves a complete file: some earlier state, never a torn one."""
    p = tmp_path / "s.npz"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", _KILL_WRITER, str(p)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    t = sg.load_state(p)
    assert t["i"] >= 2 and np.all(t["w"] == float(t["i"]))


def _model():
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(6, 8)) * 0.4, "b1": np.zeros(8), "w2": rng.normal(size=(8, 1)) * 0.4}
    x = rng.normal(size=(24, 6))
    y = np.sin(x.sum(axis=1, keepdims=True))
    return params, x, y


def _loss(p, x, y):
    h = np.tanh(x @ p["w1"] + p["b1"])
    return np.mean((h @ p["w2"] - y) ** 2)


def test_resume_after_interruption_gives_same_parameters(tmp_path):
    params, x, y = _model()
    opt = sg.optim.adam(1e-2)

    @sg.compile
    def step(p, s, xb, yb):
        loss, g = sg.value_and_grad(_loss)(p, xb, yb)
        p, s = opt.update(g, s, p)
        return p, s, loss

    def run(n_steps, state=None, stop_at=None):
        st = state or {"params": params, "opt": opt.init(params), "pos": 0}
        for _ in range(st["pos"], n_steps):
            i = st["pos"] % 3
            p, s, _ = step(st["params"], st["opt"], x[8 * i:8 * i + 8], y[8 * i:8 * i + 8])
            st = {"params": p, "opt": s, "pos": st["pos"] + 1}
            sg.save_state(tmp_path / "ckpt.npz", st)
            if st["pos"] == stop_at:
                return st
        return st

    full = run(10)
    run(10, stop_at=6)  # "killed" after step 6
    resumed = run(10, state=sg.load_state(tmp_path / "ckpt.npz"))
    assert resumed["pos"] == 10
    for k in full["params"]:
        np.testing.assert_array_equal(resumed["params"][k], full["params"][k])


# ----- the all-reduce ops in one process (a stand-in communicator: one rank) -----


class _OneRank:
    """The Communicator protocol for a single process; records what was reduced."""

    size = rank = 0

    def __init__(self):
        self.pending, self.log = {}, []

    def start(self, x, bucket, reduce):
        self.log.append(("start", bucket, x.size))
        return np.array(x)

    def wait(self, started, bucket):
        self.log.append(("wait", bucket))
        return started.copy()

    def progress(self):
        self.log.append(("progress",))

    def check_same(self, specs, names):
        self.names = names


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_data_parallel_graph_one_rank(backend):
    params, x, y = _model()
    comm = _OneRank()
    opt = sg.optim.sgd(0.1)

    def step(p, xb, yb):
        loss, g = sg.value_and_grad(_loss)(p, xb, yb)
        return opt.update(g, opt.init(p), p)[0], g

    dp = sg.compile(step, backend=backend, data_parallel=sgd.DataParallel(comm, bucket_bytes=300))
    p1, g1 = dp(params, x, y)
    p0, g0 = sg.compile(step, backend=backend)(params, x, y)
    for k in params:
        np.testing.assert_allclose(g1[k], g0[k], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(p1[k], p0[k], rtol=1e-13, atol=1e-15)
    assert comm.names == ["argument 0['b1']", "argument 0['w1']", "argument 0['w2']"]
    ops = [n.op.name for n in dp.graph.toposort()]
    # buckets in the order reverse mode finishes the gradients (w2, then b1 = sum of the hidden layer's
    # cotangent, then w1 = x.T @ that cotangent), at most 300 bytes unless one leaf is larger: [w2, b1], [w1]
    assert ops.count("allreduce_start") == ops.count("allreduce_wait") == 2
    starts = [e for e in comm.log if e[0] == "start"]
    assert [s[2] for s in starts] == [8 + 8, 48]
    if backend == "llvm":
        c = dp.stats["communication"]
        assert c["buckets"] == 2 and c["bytes"] == (8 + 48 + 8) * 8
        assert c["overlapped_nodes"][0] > 0  # w1's gradient is computed between the first start and its wait
        assert dp.stats["segments"] >= 3 and ("progress",) in comm.log
    # every start runs before any wait: the waits come after the backward sweep
    kinds = [e[0] for e in comm.log if e[0] != "progress"]
    assert kinds == ["start"] * 2 + ["wait"] * 2
    dot = dp.graph.to_dot()
    assert "sg-role-communication" in dot and "communication" in dot


def test_data_parallel_argument_errors():
    with pytest.raises(sgd.DistributedError, match="data_parallel must be"):
        sg.compile(lambda x: x, data_parallel="yes")
    with pytest.raises(sgd.DistributedError, match="reduce must be"):
        sgd.DataParallel(reduce="max")


# ----- two MPI ranks -----

_MPI_SCRIPT = r"""
import sys
import numpy as np
import symgraph as sg
import symgraph.distributed as sgd

r, n = sgd.rank(), sgd.size()
assert n == 2
rng = np.random.default_rng(100 + r)              # different on each rank: broadcast must fix it
params = {"w1": rng.normal(size=(6, 8)) * 0.4, "b1": np.zeros(8), "w2": rng.normal(size=(8, 1)) * 0.4}
params = sgd.broadcast(params)
everyone = sgd.comm.allgather(params)
assert all(np.array_equal(everyone[0][k], everyone[1][k]) for k in params)
X = np.random.default_rng(0).normal(size=(37, 6)); Y = np.sin(X.sum(axis=1, keepdims=True))

def loss(p, x, y, scale):
    h = np.tanh(x @ p["w1"] + p["b1"])
    return np.sum((h @ p["w2"] - y) ** 2) * scale

# 1) equal shards, mean: the averaged gradient is the full-batch gradient
x, y = sgd.shard((X[:36], Y[:36]))
for backend in ("llvm", "numpy"):
    g = sg.compile(lambda p, x, y: sg.grad(loss)(p, x, y, 1.0 / len(x)), data_parallel=True, backend=backend)(params, x, y)
    ref = sg.grad(loss)(params, X[:36], Y[:36], 1.0 / 36)
    for k in params:
        np.testing.assert_allclose(g[k], ref[k], rtol=1e-12, atol=1e-14)
    gs = sgd.comm.allgather(g)
    assert all(np.array_equal(gs[0][k], gs[1][k]) for k in params), "gradients differ across ranks"

# 2) uneven shards (19 + 18 rows), reduce="sum" of losses scaled by the global size; 50 SGD steps
x, y = sgd.shard((X, Y))
assert len(x) == (19 if r == 0 else 18)
opt = sg.optim.sgd(0.05, momentum=0.9)
def step(p, s, x, y):
    g = sg.grad(loss)(p, x, y, 1.0 / 37)
    return opt.update(g, s, p)
dstep = sg.compile(step, data_parallel=sgd.DataParallel(reduce="sum", bucket_bytes=256), donate_argnums=(0, 1))
p, s = {k: v.copy() for k, v in params.items()}, opt.init(params)
for _ in range(50):
    p, s = dstep(p, s, x, y)
assert dstep.stats["communication"]["buckets"] >= 2
p1, s1 = {k: v.copy() for k, v in params.items()}, opt.init(params)
single = sg.compile(step)
for _ in range(50):
    p1, s1 = single(p1, s1, X, Y)
ps = sgd.comm.allgather(p)
for k in params:
    assert np.array_equal(ps[0][k], ps[1][k]), "parameters differ across ranks"
    np.testing.assert_allclose(p[k], p1[k], rtol=1e-9, atol=1e-12)

# 3) the state: rank 0 writes, every rank reads the same bits
sg.save_state(sys.argv[1], {"params": p, "opt": s, "pos": 50})
back = sg.load_state(sys.argv[1])
for k in params:
    assert np.array_equal(back["params"][k], p[k])

# 4) allreduce of other values: a graph op inside compile, MPI on arrays; shapes kept (0-d stays 0-d)
m = sg.compile(lambda v: sgd.allreduce(v * 2.0))(np.float64(r))
assert m.shape == () and m == 1.0, m
assert np.array_equal(sgd.allreduce(np.array([r, 1.0]), reduce="sum"), [1.0, 2.0])

# 5) ranks that disagree on a parameter's shape: a clear error on both, before any all-reduce
bad = dict(params, b1=np.zeros(8 if r == 0 else 9))
try:
    sg.compile(lambda p: sg.grad(lambda q: np.sum(q["b1"] ** 2) + np.sum(q["w1"]))(p), data_parallel=True)(bad)
except sgd.DistributedError as e:
    assert "rank 1" in str(e) and "['b1']" in str(e) and "(9,)" in str(e), str(e)
else:
    raise AssertionError("no error for mismatched shapes")
print(f"rank {r} OK", flush=True)
"""

_RAISE_SCRIPT = r"""
import time
import symgraph.distributed as sgd
if sgd.rank() == 1:
    raise RuntimeError("rank one failed on purpose")
sgd.barrier()   # rank 0 would wait here forever without the abort
time.sleep(60)
"""


def _mpiexec():
    pytest.importorskip("mpi4py")
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        pytest.skip("mpiexec not found (pip install -e '.[distributed]')")
    return exe


def _run_mpi(script, tmp_path, timeout, *args):
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, PYTHONPATH=ROOT, SYMGRAPH_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    return subprocess.run([_mpiexec(), "-n", "2", sys.executable, str(path), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_two_ranks(tmp_path):
    r = _run_mpi(_MPI_SCRIPT, tmp_path, 240, str(tmp_path / "state.npz"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0 OK" in r.stdout and "rank 1 OK" in r.stdout


def test_rank_that_raises_stops_all(tmp_path):
    t0 = time.perf_counter()
    r = _run_mpi(_RAISE_SCRIPT, tmp_path, 120)
    assert r.returncode != 0
    assert "rank one failed on purpose" in r.stderr and "aborting all ranks" in r.stderr
    assert time.perf_counter() - t0 < 60


def test_readme_example_two_ranks_same_accuracy(tmp_path):
    """The README's second line: the digits MLP with --data-parallel on two ranks, the accuracy of one process."""
    import importlib.util
    import re

    pytest.importorskip("sklearn")
    script = os.path.join(ROOT, "examples", "train_mlp_digits.py")
    args = ["--max-steps", "30", "--plot", "", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=ROOT, SYMGRAPH_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([_mpiexec(), "-n", "2", sys.executable, script, "--data-parallel", *args],
                       capture_output=True, text=True, timeout=240, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 MPI ranks" in r.stdout
    acc2 = float(re.search(r"test accuracy: ([0-9.]+)%", r.stdout).group(1))
    spec = importlib.util.spec_from_file_location("train_mlp_digits_dp", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    one = mod.main(args)
    assert acc2 == round(100 * one["test_accuracy"], 2)


def test_stats_command_shows_communication(tmp_path):
    pytest.importorskip("mpi4py")
    model = tmp_path / "model.py"
    model.write_text("import numpy as np\n\ndef loss(w, x):\n    return np.sum(np.tanh(x @ w) ** 2)\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "symgraph", "stats", f"{model}:loss", "--shapes", "10,4", "--shapes",
                        "32,10", "--grad", "--data-parallel"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "buckets            1" in r.stdout and "bytes per call     320" in r.stdout  # the 10x4 float64 gradient
    assert "segments           2" in r.stdout
