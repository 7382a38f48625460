"""W14 — data-parallel weak scaling: the W2 MLP and W6 transformer training steps on 1 and 2 MPI ranks.

Each rank trains on its own batch of 256 digits (weak scaling: the global
batch grows with the ranks) with one thread (SYMGRAPH_NUM_THREADS=1,
OPENBLAS_NUM_THREADS=1). The step is W2's (float32 MLP 64-256-256-10, softmax
cross-entropy, SGD 0.1) compiled with ``sg.compile(step,
data_parallel=True)``; the 1-process baseline is the same step compiled
without it. Weak-scaling efficiency = (2-rank throughput) / (2 x 1-process
throughput), throughput in samples per second.

Each configuration runs in fresh processes under ``mpiexec -n N`` (the
``distributed`` extra); rank 0 times blocks of steps after a barrier and
reports the median step. Also reported: the seconds per step a rank spent
waiting for reductions (communication not hidden behind the backward sweep)
and a blocking ``MPI_Allreduce`` of the same gradient bytes timed alone (what
the communication costs when nothing overlaps it).

The second table is the same for W6's transformer step (bench.w6_transformer
FULL: 2 layers, width 128, context 64, batch 16 per rank, AdamW, parameters
and moments donated), each rank with its own batch and dropout masks and the
parameters broadcast from rank 0 (``BENCH_W14_MODELS=mlp`` or
``transformer`` runs one table).

Peer: torch DistributedDataParallel with the gloo backend, the same model
and step (forward, backward, SGD / torch.optim.AdamW), ranks started by the
same ``mpiexec`` (``PMI_RANK`` / ``PMI_SIZE``), one thread; a row "missing"
without torch.

Each rank pins itself to its own CPU (rank r on CPU r): the harness's
``--threads 1`` pins the harness to one CPU, and before 2026-12-04 the ranks
inherited that, so two ranks shared one core (the efficiency of 0.53 in the
docs of that time measured that, not the communication).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

TITLE = "Data-parallel weak scaling of the W2 MLP and W6 transformer steps (1 thread per rank)"


def _pin_rank() -> None:
    """Pin this rank to its own CPU (rank r on CPU r mod the CPUs), before any library starts threads.

    The harness's ``--threads 1`` pins itself to one CPU and child processes
    inherit that; `measure` gives mpiexec every CPU back, and each rank takes one.
    """
    r = int(os.environ.get("PMI_RANK", "0"))
    cpus = sorted(_all_cpus())
    if hasattr(os, "sched_setaffinity") and cpus:
        os.sched_setaffinity(0, {cpus[r % len(cpus)]})


def _all_cpus() -> set[int]:  # noqa: N802 - the machine's CPUs, not this process's affinity
    n = os.cpu_count() or 1
    return set(range(n))


def _child(mode: str, steps: int, blocks: int) -> None:
    _pin_rank()
    import numpy as np

    import symgraph as sg
    import symgraph.distributed as sgd

    from .w2_mlp import BATCH, KEYS, LR, init_params, load_data, loss_fn

    r, n = sgd.rank(), sgd.size()
    x, y, _ = load_data()
    xb, yb = x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]  # each rank its own batch
    lr = np.float32(LR)
    import symgraph.numpy as snp

    def step(p, x, y):
        loss, g = sg.value_and_grad(lambda p: loss_fn(p, x, y, snp))(p)
        return loss, {k: p[k] - lr * g[k] for k in KEYS}

    bucket = int(os.environ.get("SYMGRAPH_W14_BUCKET_BYTES", sgd.BUCKET_BYTES))
    cf = sg.compile(step, data_parallel=sgd.DataParallel(bucket_bytes=bucket)) if mode == "dp" else sg.compile(step)
    st = [sgd.broadcast(init_params())]

    def one() -> None:
        _, st[0] = cf(st[0], xb, yb)

    _timed(mode, one, steps, blocks, sum(v.nbytes for v in st[0].values()), cf)


def _torch_child(steps: int, blocks: int) -> None:
    """The same step with torch DistributedDataParallel (gloo); ranks from mpiexec's PMI_RANK / PMI_SIZE."""
    _pin_rank()
    import torch
    import torch.distributed as dist

    from .w2_mlp import BATCH, KEYS, LR, _torch_loss, init_params, load_data

    r, _ = _torch_init(torch, dist, "29531")

    class MLP(torch.nn.Module):
        def __init__(self, p0: dict) -> None:
            super().__init__()
            self.p = torch.nn.ParameterDict({k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in p0.items()})

        def forward(self, x: Any, y: Any) -> Any:
            return _torch_loss(torch, self.p, x, y)

    model = torch.nn.parallel.DistributedDataParallel(MLP(init_params()))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y, _ = load_data()
    xb = torch.from_numpy(x[r * BATCH:(r + 1) * BATCH].copy())
    yb = torch.from_numpy(y[r * BATCH:(r + 1) * BATCH].copy())

    _torch_timed(torch, dist, model, opt, (xb, yb), steps, blocks, 20,
                 {"bytes": sum(v.nbytes for v in init_params().values()), "keys": list(KEYS)})


def _torch_init(torch: Any, dist: Any, port: str) -> tuple[int, int]:
    """One thread, and the gloo process group of the ranks mpiexec started (PMI_RANK / PMI_SIZE): (rank, size)."""
    torch.set_num_threads(1)
    r, n = int(os.environ.get("PMI_RANK", "0")), int(os.environ.get("PMI_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", port)
    dist.init_process_group("gloo", rank=r, world_size=n)
    return r, n


def _torch_timed(torch: Any, dist: Any, model: Any, opt: Any, batch: tuple, steps: int, blocks: int, warmup: int,
                 info: dict) -> None:
    """Warm up, time `blocks` blocks of `steps` DDP steps after barriers; rank 0 prints the slowest rank's median."""
    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(*batch).backward()
        opt.step()

    for _ in range(warmup):
        step()
    times, cpus = [], []
    for _ in range(blocks):
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps)
        cpus.append((time.process_time() - c0) / steps)
    med = torch.tensor([statistics.median(times), statistics.median(cpus)], dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        print("W14JSON " + json.dumps({"ranks": dist.get_world_size(), "mode": "torch", "step": float(med[0]),
                                       "cpu": float(med[1]),
                                       "wait": None, "allreduce": None, **info,
                                       "blocks": [round(t, 7) for t in times]}), flush=True)
    dist.destroy_process_group()


def _w6_child(mode: str, steps: int, blocks: int) -> None:
    """W6's transformer step (loss, gradients, AdamW; bench.w6_transformer.FULL) on this rank's own batch."""
    _pin_rank()
    import numpy as np

    import symgraph as sg
    import symgraph.distributed as sgd
    import symgraph.numpy as snp

    from . import w6_transformer as w6

    r, n = sgd.rank(), sgd.size()
    cfg = w6.FULL
    data = w6.make_data(cfg, seed=r)  # each rank its own batch and dropout masks
    x, y, masks = data["x"], data["y"], data["masks"]
    mask = w6.causal_mask(cfg["T"])
    p = sgd.broadcast(w6.make_data(cfg, seed=0)["params"])  # the same initial parameters everywhere
    vg = sg.value_and_grad(lambda p, x, y, masks: w6.loss_fn(snp, p, x, y, masks, cfg, mask))

    def sstep(p, m, v, t, x, y, masks):
        loss, g = vg(p, x, y, masks)
        return (*w6.adamw_update(snp, p, m, v, t, g), loss)

    bucket = int(os.environ.get("SYMGRAPH_W14_BUCKET_BYTES", sgd.BUCKET_BYTES))
    dp = sgd.DataParallel(bucket_bytes=bucket) if mode == "dp" else None
    cf = sg.compile(sstep, donate_argnums=(0, 1, 2), data_parallel=dp) if dp else sg.compile(sstep, donate_argnums=(0, 1, 2))
    st = [p, {k: np.zeros_like(a) for k, a in p.items()}, {k: np.zeros_like(a) for k, a in p.items()},
          np.zeros((), np.float32)]

    def step():
        st[0], st[1], st[2], st[3], _ = cf(st[0], st[1], st[2], st[3], x, y, masks)

    _timed(mode, step, steps, blocks, sum(a.nbytes for a in p.values()), cf)


def _timed(mode: str, step: Any, steps: int, blocks: int, nbytes: int, cf: Any) -> None:
    """Warm up, time `blocks` blocks of `steps` steps after barriers, time a blocking all-reduce; rank 0 prints."""
    import numpy as np

    import symgraph.distributed as sgd

    r, n = sgd.rank(), sgd.size()
    for _ in range(20):  # compile and warm up
        step()
    comm = sgd.Communicator.of(sgd.comm) if mode == "dp" else None
    times, cpus, waits, flights, done = [], [], [], [], []
    for _ in range(blocks):
        sgd.barrier()
        w0, f0, d0, r0 = (comm.wait_seconds, getattr(comm, "inflight_seconds", 0.0), getattr(comm, "done_at_wait", 0),
                          comm.reductions) if comm else (0.0, 0.0, 0, 0)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps)
        cpus.append((time.process_time() - c0) / steps)
        if comm:
            waits.append((comm.wait_seconds - w0) / steps)
            flights.append((getattr(comm, "inflight_seconds", 0.0) - f0) / steps)
            done.append((getattr(comm, "done_at_wait", 0) - d0) / max(comm.reductions - r0, 1))
    if not comm:
        waits, flights, done = [0.0], [0.0], [0.0]
    buf = np.ones(nbytes // 4, np.float32)
    out = np.empty_like(buf)
    ar = []
    for _ in range(blocks):
        sgd.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            sgd.comm.Allreduce(buf, out)
        ar.append((time.perf_counter() - t0) / steps)
    everyone = sgd.comm.gather({"step": statistics.median(times), "cpu": statistics.median(cpus),
                                "wait": statistics.median(waits),
                                "inflight": statistics.median(flights), "done": statistics.median(done),
                                "allreduce": statistics.median(ar)}, root=0)
    if r == 0:
        stats = cf.stats
        print("W14JSON " + json.dumps({
            "ranks": n, "mode": mode, "step": max(e["step"] for e in everyone), "cpu": max(e["cpu"] for e in everyone),
            "wait": max(e["wait"] for e in everyone), "allreduce": max(e["allreduce"] for e in everyone),
            "inflight": min(e["inflight"] for e in everyone), "done": min(e["done"] for e in everyone),
            "bytes": nbytes, "communication": stats.get("communication"), "segments": stats.get("segments"),
            "blocks": [round(t, 7) for t in times]}), flush=True)


def _w6_torch_child(steps: int, blocks: int) -> None:
    """W6's step with torch DDP (gloo) and torch.optim.AdamW, the model of bench.w6_transformer.TorchOps."""
    _pin_rank()
    import torch
    import torch.distributed as dist

    from . import w6_transformer as w6

    r, _ = _torch_init(torch, dist, "29533")
    cfg = w6.FULL
    data = w6.make_data(cfg, seed=r)
    p0 = w6.make_data(cfg, seed=0)["params"]
    ops = w6.TorchOps(torch)
    xt, yt = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
    mt = [[torch.from_numpy(a) for a in ms] for ms in data["masks"]]
    maskt = torch.from_numpy(w6.causal_mask(cfg["T"]))

    class Transformer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(torch.from_numpy(v.copy()))
                                             for k, v in p0.items()})

        def forward(self, x: Any, y: Any) -> Any:
            p = {k: self.p[k.replace(".", "_")] for k in p0}
            return w6.loss_fn(ops, p, x, y, mt, cfg, maskt)

    model = torch.nn.parallel.DistributedDataParallel(Transformer())
    opt = torch.optim.AdamW(model.parameters(), lr=w6.LR, betas=(w6.BETA1, w6.BETA2), eps=w6.EPS,
                            weight_decay=w6.WD)

    _torch_timed(torch, dist, model, opt, (xt, yt), steps, blocks, 5, {"bytes": sum(v.nbytes for v in p0.values())})


def measure(n: int, mode: str, steps: int, blocks: int, timeout: float = 600, model: str = "mlp") -> dict:
    """Run `_child` under `mpiexec -n n` in fresh processes; return rank 0's figures.

    Raises:
        RuntimeError: mpiexec missing or the run failed.
    """
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        raise RuntimeError("mpiexec not found: pip install -e '.[distributed]'")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, SYMGRAPH_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # every CPU back for mpiexec's processes (`--threads 1` pinned this one to a single CPU); each rank pins itself
    unpin = (lambda: os.sched_setaffinity(0, _all_cpus())) if hasattr(os, "sched_setaffinity") else None
    p = subprocess.run([exe, "-n", str(n), sys.executable, "-m", "bench.w14_scaling", "--child", mode, str(steps),
                        str(blocks), model], capture_output=True, text=True, timeout=timeout, env=env, cwd=root,
                       preexec_fn=unpin)
    for line in p.stdout.splitlines():
        if line.startswith("W14JSON "):
            return json.loads(line[len("W14JSON "):])
    raise RuntimeError(f"mpiexec -n {n} failed ({p.returncode}): {p.stderr[-2000:]}")


MODELS = {  # model: (table title, samples per rank per step, (steps, blocks, rounds) full, quick)
    "mlp": ("W14 weak scaling: W2 MLP step", 256, (50, 9, 3), (20, 5, 1)),
    "transformer": ("W14 weak scaling: W6 transformer step (AdamW)", 16, (10, 9, 3), (3, 3, 1)),
}


def run(settings):  # noqa: ANN001 - bench.harness.Settings
    """Measure each configuration in fresh processes; rounds alternate configurations, medians reported."""
    from .harness import WorkloadResult

    models = os.environ.get("BENCH_W14_MODELS", "mlp,transformer").split(",")
    return WorkloadResult("W14", TITLE, [_table(settings, m) for m in models])


def _table(settings, model: str):  # noqa: ANN001, ANN202 - bench.harness.Settings -> Table
    from .harness import Row, Table

    title, per_rank, full, quick = MODELS[model]
    steps, blocks, rounds = quick if settings.quick else full
    configs = [("symgraph 1 process (sg.compile)", 1, "plain"), ("symgraph 1 rank (data_parallel)", 1, "dp"),
               ("symgraph 2 ranks (data_parallel)", 2, "dp")]
    torch_ok = _has_torch()
    if torch_ok:
        configs += [("torch DDP gloo 1 rank", 1, "torch"), ("torch DDP gloo 2 ranks", 2, "torch")]
    res: dict[str, list[dict]] = {name: [] for name, _, _ in configs}
    for _ in range(rounds):
        for name, n, mode in configs:
            res[name].append(measure(n, mode, steps, blocks, model=model))
    bases = {"plain": configs[0][0], "dp": configs[0][0], "torch": "torch DDP gloo 1 rank"}
    rows = []
    for name, n, mode in configs:
        step = statistics.median(r["step"] for r in res[name])
        base = statistics.median(r["step"] for r in res[bases[mode]])
        row = Row(name, median=step, min=min(r["step"] for r in res[name]), max=max(r["step"] for r in res[name]),
                  reps=rounds * blocks, number=steps)
        # weak scaling: (n-rank throughput) / (n x 1-process throughput) = 1-process step / n-rank step
        row.extras = {"ranks": n, "samples/s": round(n * per_rank / step), "efficiency": round(base / step, 3)}
        cpu = statistics.median(r["cpu"] for r in res[name])
        row.extras["cpu/step"] = f"{cpu * 1e3:.2f} ms"
        row.extras["efficiency (cpu)"] = round(statistics.median(r["cpu"] for r in res[bases[mode]]) / cpu, 3)
        if mode == "dp":
            row.extras["wait/step"] = f"{statistics.median(r['wait'] for r in res[name]) * 1e6:.0f} us"
            row.extras["allreduce alone"] = f"{statistics.median(r['allreduce'] for r in res[name]) * 1e6:.0f} us"
            row.extras["in flight/step"] = f"{statistics.median(r['inflight'] for r in res[name]) * 1e6:.0f} us"
            row.extras["done at wait"] = f"{statistics.median(r['done'] for r in res[name]):.0%}"
        rows.append(row)
    if not torch_ok:
        rows.append(Row("torch DDP gloo", status="missing", message="torch is not installed"))
    last = res[configs[2][0]][-1]
    notes = [f"gradient bytes per step {last['bytes']}, buckets {last['communication']['buckets']}, overlapped "
             f"nodes per bucket {last['communication']['overlapped_nodes']}, native segments {last['segments']}; "
             f"{per_rank} samples per rank per step; efficiency = 1-rank step / n-rank step (symgraph: against the "
             f"plain 1-process step; torch: against DDP on 1 rank); {rounds} rounds x {blocks} blocks of {steps} "
             "steps, slowest rank; each rank pinned to its own CPU",
             "in flight/step: time from posting each bucket's reduction to the start of its wait, summed over "
             "buckets (the work that overlaps it; smallest rank); done at wait: share of reductions finished when "
             "their wait began (fully overlapped; smallest rank)",
             "cpu/step: CPU time of a rank's process per step (slowest rank; time the process was descheduled "
             "by other work on the machine does not count, MPI's busy waits do); efficiency (cpu): the same "
             "ratio on CPU time",
             "wait/step: time a rank spent in MPI waits per step (communication not hidden); allreduce alone: a "
             "blocking MPI_Allreduce of the same bytes timed by itself",
             f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine)"]
    return Table(title, rows, extra_columns=["ranks", "samples/s", "efficiency", "cpu/step", "efficiency (cpu)", "wait/step", "allreduce alone",
                                                "in flight/step", "done at wait"],
                 notes=notes)


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        mode_, steps_, blocks_ = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        if (sys.argv[5] if len(sys.argv) > 5 else "mlp") == "transformer":
            _w6_torch_child(steps_, blocks_) if mode_ == "torch" else _w6_child(mode_, steps_, blocks_)
        elif mode_ == "torch":
            _torch_child(steps_, blocks_)
        else:
            _child(mode_, steps_, blocks_)
    else:
        for cfg in ((1, "plain"), (1, "dp"), (2, "dp")):
            print(cfg, measure(cfg[0], cfg[1], 50, 5))
