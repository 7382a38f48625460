"""Train an MLP on scikit-learn's handwritten digits with one compiled training step.

The whole step (forward, backward and the AdamW update) is one graph that
`sg.compile` turns into native code; parameters and optimizer state are
donated, so the compiled step updates their buffers in place.

Data: `sklearn.datasets.load_digits` (1797 real 8x8 handwritten digits,
bundled with scikit-learn, no download), pixels / 16, stratified 75/25
train/test split. Model: 64-256-256-10 ReLU MLP, softmax cross-entropy,
AdamW with a cosine learning-rate decay, batch 64, 40 epochs.

Run:  pip install -e ".[examples]" && python examples/train_mlp_digits.py
      python examples/train_mlp_digits.py --backend numpy --plot digits.png
      mpiexec -n 2 python examples/train_mlp_digits.py --data-parallel   (the distributed extra)

With --data-parallel every rank takes its contiguous slice of each minibatch
(`symgraph.distributed.shard`) and the compiled step averages the gradients
across the ranks (`sg.compile(..., data_parallel=True)`), so N ranks train the
same model on the same minibatches as one process, up to rounding.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Sequence

import numpy as np

import symgraph as sg
import symgraph.numpy as snp
from symgraph import nn, optim


def load_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Digits as float32 pixels in [0, 1] and int64 labels: (x_train, y_train, x_test, y_test)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    return x_tr, y_tr, x_te, y_te


def loss_fn(params: list, x: Any, y: Any) -> Any:
    """Mean softmax cross-entropy (nats) of the MLP's logits on a batch."""
    return snp.cross_entropy(nn.mlp(params, x, activation=snp.relu), y)


def make_step(opt: optim.Optimizer, data_parallel: bool = False):
    """The training step (params, opt_state, batch) -> (params, opt_state, loss), as one function.

    With `data_parallel` the returned loss is the mean over the MPI ranks (the
    gradients are averaged by `sg.compile(..., data_parallel=True)`).
    """

    def step(params: list, opt_state: dict, batch: tuple) -> tuple:
        x, y = batch
        loss, grads = sg.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = opt.update(grads, opt_state, params)
        if data_parallel:
            import symgraph.distributed as sgd

            loss = sgd.allreduce(loss)
        return params, opt_state, loss

    return step


def evaluate(params: list, x: Any, y: Any) -> tuple:
    """(mean loss, accuracy) on a data set."""
    logits = nn.mlp(params, x, activation=snp.relu)
    return snp.cross_entropy(logits, y), nn.accuracy(logits, y)


def plot(history: dict, path: str, title: str) -> None:
    """Training loss per step and test accuracy per epoch, side by side, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = np.arange(1, len(history["loss"]) + 1)
    ax1.plot(steps, history["loss"], lw=0.6, alpha=0.5, label="minibatch")
    k = max(1, len(steps) // 40)
    smooth = np.convolve(history["loss"], np.ones(k) / k, mode="valid")
    ax1.plot(steps[k - 1:], smooth, lw=1.8, label=f"moving mean ({k} steps)")
    ax1.set_yscale("log")
    ax1.set_xlabel("step")
    ax1.set_ylabel("cross-entropy (nats)")
    ax1.set_title("training loss")
    ax1.legend()
    epochs = np.arange(1, len(history["test_acc"]) + 1)
    ax2.plot(epochs, 100 * np.asarray(history["test_acc"]), marker="o", ms=3)
    ax2.axhline(97.0, color="gray", ls="--", lw=0.8, label="97%")
    ax2.set_ylim(80, 100)
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy (%)")
    ax2.set_title("test accuracy")
    ax2.legend(loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> dict:
    """Train, print the results and write the plot.

    Returns:
        dict with "test_accuracy", "seconds_per_step", "compile_seconds",
        "history" (loss per step, test loss/accuracy per epoch), "params",
        "steps", "backend".
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="llvm", choices=("llvm", "numpy"), help="sg.compile backend")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (cosine decay to 0)")
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (for quick runs)")
    ap.add_argument("--plot", default="train_mlp_digits.png", help="PNG path ('' for no plot)")
    ap.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    ap.add_argument("--data-parallel", action="store_true",
                    help="average gradients across MPI ranks (run under mpiexec -n N; the distributed extra)")
    args = ap.parse_args(argv)
    if args.data_parallel:
        import symgraph.distributed as sgd

        rank, nranks = sgd.rank(), sgd.size()
        cut = sgd.shard  # this rank's slice of each minibatch
    else:
        rank, nranks = 0, 1
        cut = (lambda b: b)  # noqa: E731
    say = print if rank == 0 else (lambda *a, **k: None)  # noqa: E731

    x_tr, y_tr, x_te, y_te = load_data()
    rng = np.random.default_rng(args.seed)
    params = nn.init_mlp(rng, [64, *args.hidden, 10])
    if args.data_parallel:
        params = sgd.broadcast(params)  # rank 0's initial values on every rank
    steps_per_epoch = len(x_tr) // args.batch
    total = args.epochs * steps_per_epoch
    if args.max_steps is not None:
        total = min(total, args.max_steps)
    opt = optim.adamw(optim.cosine_decay(args.lr, total), weight_decay=args.weight_decay)
    opt_state = opt.init(params)

    # One native function for forward + backward + update; params and optimizer
    # state (arguments 0 and 1) are donated: their buffers receive the new values.
    step = sg.compile(make_step(opt, args.data_parallel), backend=args.backend, donate_argnums=(0, 1),
                      data_parallel=True if args.data_parallel else None)
    evaluate_c = sg.compile(evaluate, backend=args.backend)
    say(f"digits: {len(x_tr)} train / {len(x_te)} test; MLP {[64, *args.hidden, 10]}, "
        f"{nn.count_params(params)} parameters; backend={args.backend}"
        + (f"; {nranks} MPI ranks, {args.batch // nranks}-{-(-args.batch // nranks)} samples each per step"
           if args.data_parallel else ""))

    # The first call compiles (trace, differentiate, simplify, lower): timed apart.
    t0 = time.perf_counter()
    step(sg.tree_map(np.copy, params), sg.tree_map(np.copy, opt_state), cut((x_tr[:args.batch], y_tr[:args.batch])))
    compile_seconds = time.perf_counter() - t0

    history: dict[str, list] = {"loss": [], "test_loss": [], "test_acc": []}
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is in the examples extra; run without a bar if missing
        tqdm = None
    bar = None if (tqdm is None or args.no_progress or rank != 0 or not sys.stderr.isatty()) else tqdm(total=total, unit="step", leave=False)
    step_time = 0.0
    n_steps = 0
    done = False
    for epoch in range(args.epochs):
        perm = rng.permutation(len(x_tr))
        for i in range(steps_per_epoch):
            idx = perm[i * args.batch:(i + 1) * args.batch]
            batch = cut((x_tr[idx], y_tr[idx]))
            t = time.perf_counter()
            params, opt_state, loss = step(params, opt_state, batch)
            step_time += time.perf_counter() - t
            n_steps += 1
            history["loss"].append(float(loss))
            if bar is not None:
                bar.update(1)
                if n_steps % 20 == 0:
                    bar.set_postfix(epoch=epoch + 1, loss=f"{float(loss):.4f}")
            if n_steps >= total:
                done = True
                break
        test_loss, test_acc = evaluate_c(params, x_te, y_te)
        history["test_loss"].append(float(test_loss))
        history["test_acc"].append(float(test_acc))
        if done:
            break
    if bar is not None:
        bar.close()

    sps = step_time / max(n_steps, 1)
    acc = history["test_acc"][-1]
    say(f"steps: {n_steps} ({epoch + 1} epochs of {steps_per_epoch}), batch {args.batch}")
    say(f"compile (first call): {compile_seconds:.2f} s; time per step: {sps * 1e3:.3f} ms "
          f"({sps:.2e} s/step, {n_steps / step_time:.0f} steps/s)")
    say(f"final training loss (last epoch mean): {np.mean(history['loss'][-steps_per_epoch:]):.4f}")
    say(f"test loss: {history['test_loss'][-1]:.4f}   test accuracy: {100 * acc:.2f}%")
    stats = getattr(step, "stats", None)
    if stats:
        shown = {k: stats[k] for k in ("nodes", "kernels", "peak_bytes") if k in stats}
        if shown:
            say("compiled step:", ", ".join(f"{k}={v}" for k, v in shown.items()))
    if args.plot and rank == 0:
        plot(history, args.plot, f"MLP {[64, *args.hidden, 10]} on load_digits, sg.compile(backend={args.backend!r}): "
             f"test accuracy {100 * acc:.2f}%, {sps * 1e3:.2f} ms/step")
        say(f"plot: {args.plot}")
    return {"test_accuracy": acc, "seconds_per_step": sps, "compile_seconds": compile_seconds,
            "history": history, "params": params, "opt_state": opt_state, "steps": n_steps,
            "backend": args.backend}


if __name__ == "__main__":
    main()
