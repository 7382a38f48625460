"""A character-level decoder-only transformer trained on real text, with one compiled training step.

Model (W6 of the benchmarks): 2 pre-LN blocks, 4 heads, width 128, context
64, token and position embeddings, layer norm, GELU MLP, causal softmax
attention, dropout 0.1, trained with AdamW (warmup + cosine decay) on
batches of 16. The training step (forward, backward, AdamW) is one graph
compiled by `sg.compile`; parameters and optimizer state are donated.
Dropout masks come from a counter-based generator keyed by the step, so the
backward sweep regenerates them instead of storing them.

Text: the Python standard library's LICENSE.txt (real text shipped with
every CPython install; about 14k characters); if a distribution stripped it,
the docstrings of a fixed list of standard-library modules. Never generated
text. The last 10% is held out for validation.

The run prints the unigram entropy of the text (the loss of the best model
that ignores context), the validation loss falling below it, a sample of
generated characters, time per step, and with `--checkpoint sqrt` the step's
peak memory with and without checkpointing.

Run:  python examples/tiny_transformer.py [--steps 200] [--backend numpy] [--checkpoint sqrt]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import resource
import sys
import time
import tracemalloc
from typing import Any, Sequence

import numpy as np

import symgraph as sg
from symgraph import nn, optim

DOC_MODULES = ("json", "csv", "argparse", "textwrap", "string", "collections", "functools", "itertools",
               "pathlib", "shutil", "random", "statistics", "fractions", "decimal", "heapq", "bisect")


def load_text(source: str = "license") -> tuple[str, str]:
    """Real text from the installed Python: ("license") the stdlib LICENSE.txt, or ("docstrings") module docstrings.

    Returns:
        (text, description).
    """
    if source == "license":
        path = os.path.join(os.path.dirname(os.__file__), "LICENSE.txt")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return f.read(), path
        print(f"note: {path} is missing; using standard-library docstrings", file=sys.stderr)
    parts = []
    for name in DOC_MODULES:
        mod = importlib.import_module(name)
        parts.append(inspect.getdoc(mod) or "")
        for attr in sorted(vars(mod)):
            obj = getattr(mod, attr)
            if not attr.startswith("_") and getattr(obj, "__module__", None) == name and inspect.getdoc(obj):
                parts.append(inspect.getdoc(obj))
    return "\n\n".join(parts), f"docstrings of {len(DOC_MODULES)} standard-library modules"


def unigram_entropy(ids: np.ndarray, vocab: int) -> float:
    """Entropy (nats) of the character frequencies: the loss of the best context-free predictor."""
    p = np.bincount(ids, minlength=vocab) / len(ids)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def get_batch(data: np.ndarray, rng: np.random.Generator, batch: int, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), both (batch, context) int32: random windows and the same windows shifted by one."""
    start = rng.integers(0, len(data) - context - 1, batch)
    idx = start[:, None] + np.arange(context)[None, :]
    return data[idx], data[idx + 1]


def measure_step(step: Any, args: tuple) -> tuple[float, float, int]:
    """Compile `step` (first call) and measure a second call, both on copies of args.

    Returns:
        (compile seconds of the first call, seconds of the second call,
        tracemalloc peak bytes of the second call: NumPy-visible allocations).
    """
    t = time.perf_counter()
    step(*sg.tree_map(np.copy, args))
    first = time.perf_counter() - t
    args = sg.tree_map(np.copy, args)
    tracemalloc.start()
    try:
        t = time.perf_counter()
        step(*args)
        seconds = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return first, seconds, peak


def mib(n: Any) -> str:
    """Bytes as a MiB string."""
    return "n/a" if n is None else f"{n / 2**20:.1f} MiB"


def main(argv: Sequence[str] | None = None) -> dict:
    """Train the transformer; print validation losses, a generated sample and memory figures.

    Returns:
        dict: "unigram_entropy", "val_losses" [(step, loss)], "train_losses",
        "sample", "seconds_per_step", "peak_bytes" {variant: planned bytes},
        "traced_peak_bytes" {variant: bytes}, "arena_bytes" {variant: bytes of the native arena, None
        on the NumPy backend}, "checkpoint" (used or None), "params".
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="llvm", choices=("llvm", "numpy"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--checkpoint", default=None, help="compile(checkpoint=...) strategy, e.g. sqrt")
    ap.add_argument("--text", default="license", choices=("license", "docstrings"))
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--sample-chars", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    text, desc = load_text(args.text)
    chars = sorted(set(text))
    vocab = len(chars)
    index = {c: i for i, c in enumerate(chars)}
    data = np.array([index[c] for c in text], dtype=np.int32)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    h_unigram = unigram_entropy(data, vocab)
    print(f"text: {desc}: {len(text)} characters, vocabulary {vocab}; {len(train)} train / {len(val)} validation")
    print(f"unigram entropy of the text: {h_unigram:.4f} nats/char ({h_unigram / np.log(2):.3f} bits)")

    rng = np.random.default_rng(args.seed)
    params = nn.init_transformer(rng, vocab, args.width, args.heads, args.layers, args.context)
    warmup = max(1, min(50, args.steps // 10))
    lr = optim.warmup_cosine(args.lr, warmup, args.steps + 1, final=args.lr / 10) if args.steps > warmup else args.lr
    # decay matrices and embeddings, not biases and layer-norm gains (GPT-2 practice)
    opt = optim.adamw(lr, weight_decay=args.weight_decay, mask=lambda p: sg.tree_map(lambda x: np.ndim(x) >= 2, p))
    opt_state = opt.init(params)
    heads, rate = args.heads, args.dropout

    def step_fn(params: dict, opt_state: dict, batch: tuple) -> tuple:
        x, y = batch
        loss, grads = sg.value_and_grad(nn.transformer_loss)(params, x, y, heads, rate, opt_state["step"])
        params, opt_state = opt.update(grads, opt_state, params)
        return params, opt_state, loss

    def eval_loss(params: dict, x: Any, y: Any) -> Any:
        return nn.transformer_loss(params, x, y, heads)

    def last_logits(params: dict, x: Any) -> Any:
        return nn.transformer(params, x, heads)[0, -1]

    print(f"model: {args.layers} layers, {args.heads} heads, width {args.width}, context {args.context}, "
          f"{nn.count_params(params)} parameters; batch {args.batch}; backend={args.backend}")

    batch0 = get_batch(train, np.random.default_rng(12345), args.batch, args.context)
    variants = [None] if args.checkpoint is None else [args.checkpoint, None]
    steps_by_variant: dict = {}
    planned: dict = {}
    traced: dict = {}
    arenas: dict = {}
    used_checkpoint = args.checkpoint
    for v in variants:
        try:
            cf = sg.compile(step_fn, backend=args.backend, checkpoint=v, donate_argnums=(0, 1))
            first, secs, peak = measure_step(cf, (params, opt_state, batch0))
        except (TypeError, NotImplementedError, sg.SymgraphError) as e:
            if v is None:
                raise
            print(f"note: checkpoint={v!r} is unavailable here ({type(e).__name__}: {e}); training without it",
                  file=sys.stderr)
            used_checkpoint = None
            continue
        stats = getattr(cf, "stats", {}) or {}
        steps_by_variant[v] = cf
        planned[v] = stats.get("peak_bytes")
        arenas[v] = stats.get("arena_bytes")
        traced[v] = peak
        label = f"checkpoint={v!r}" if v else "no checkpointing"
        arena = f", native arena {mib(stats['arena_bytes'])}" if "arena_bytes" in stats else ""
        print(f"compiled step ({label}): first call (compiles) {first:.1f} s, second call {secs * 1e3:.0f} ms; "
              f"planned peak {mib(planned[v])}{arena}; NumPy allocations during one step (tracemalloc) {mib(peak)}")
    step = steps_by_variant[used_checkpoint]
    evaluate = sg.compile(eval_loss, backend=args.backend)
    sample_logits = sg.compile(last_logits, backend=args.backend)

    vrng = np.random.default_rng(args.seed + 1)
    val_batches = [get_batch(val, vrng, args.batch, args.context) for _ in range(args.eval_batches)]

    def val_loss() -> float:
        return float(np.mean([float(evaluate(params, x, y)) for x, y in val_batches]))

    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    bar = None if (tqdm is None or args.no_progress or not sys.stderr.isatty()) else tqdm(total=args.steps, unit="step", leave=False)
    val_losses = [(0, val_loss())]
    train_losses = []
    print(f"step     0: validation loss {val_losses[0][1]:.4f}")
    step_time = 0.0
    for i in range(1, args.steps + 1):
        batch = get_batch(train, rng, args.batch, args.context)
        t = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, batch)
        step_time += time.perf_counter() - t
        train_losses.append(float(loss))
        if bar is not None:
            bar.update(1)
        if i % args.eval_every == 0 or i == args.steps:
            vl = val_loss()
            val_losses.append((i, vl))
            below = "below" if vl < h_unigram else "above"
            msg = (f"step {i:5d}: train loss {np.mean(train_losses[-args.eval_every:]):.4f}, validation loss "
                   f"{vl:.4f} ({below} the unigram entropy {h_unigram:.4f})")
            if bar is not None:
                bar.write(msg)
            else:
                print(msg)
    if bar is not None:
        bar.close()
    sps = step_time / max(args.steps, 1)

    # Sampling: slide a window of `context` characters, starting from validation text.
    srng = np.random.default_rng(args.seed + 2)
    window = list(val[:args.context])
    out = []
    for _ in range(args.sample_chars):
        z = np.asarray(sample_logits(params, np.asarray(window, np.int32)[None, :]), np.float64) / args.temperature
        p = np.exp(z - z.max())
        nxt = int(srng.choice(vocab, p=p / p.sum()))
        out.append(chars[nxt])
        window = window[1:] + [nxt]
    sample = "".join(out)

    print(f"time per step: {sps * 1e3:.1f} ms ({args.steps} steps, backend={args.backend}, "
          f"checkpoint={used_checkpoint!r})")
    print(f"final validation loss {val_losses[-1][1]:.4f} vs unigram entropy {h_unigram:.4f} nats/char")
    print("prompt (validation text): " + repr("".join(chars[c] for c in val[:args.context])))
    print("generated:\n" + sample)
    if len(traced) > 1:
        for v in variants:
            if v in traced:
                label = f"checkpoint={v!r}" if v else "no checkpointing"
                held = (f"; native arena (every intermediate, allocated once and reused) {mib(arenas[v])}"
                        if arenas.get(v) is not None else "")
                print(f"peak memory of one step, {label}: planned {mib(planned[v])}{held} "
                      f"(NumPy allocations during the step: {mib(traced[v])})")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    print(f"process max RSS: {mib(rss)}")
    return {"unigram_entropy": h_unigram, "val_losses": val_losses, "train_losses": train_losses,
            "sample": sample, "seconds_per_step": sps, "peak_bytes": planned, "traced_peak_bytes": traced,
            "arena_bytes": arenas,
            "checkpoint": used_checkpoint, "params": params}


if __name__ == "__main__":
    main()
