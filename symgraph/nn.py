"""Neural-network building blocks: initializers, dense layers, MLPs, causal self-attention, a GPT-style model.

Models are pure functions of a parameter pytree (nested dicts and lists of
arrays) and their inputs, written with `symgraph.numpy`; they run eagerly on
NumPy arrays and trace into graphs (so `sg.grad`, `sg.compile` and
checkpointing apply). The numerically delicate pieces (softmax, log_softmax,
logsumexp, cross_entropy, layer_norm, gelu, embedding, dropout) are the
composites of `symgraph.numpy`; this module composes them. Initializers take
a `numpy.random.Generator` and return NumPy arrays.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from . import numpy as snp
from .ir import Node
from .tree import tree_leaves

__all__ = [
    "glorot_uniform", "normal", "zeros", "ones",
    "init_dense", "linear", "dense", "init_mlp", "mlp",
    "init_layer_norm", "layer_norm",
    "causal_mask", "masked_softmax", "init_attention", "causal_self_attention",
    "init_block", "transformer_block", "init_transformer", "transformer", "transformer_loss",
    "accuracy", "count_params", "softplus", "log_sigmoid", "binary_cross_entropy_with_logits",
]

# ----- initializers (NumPy, outside the graph) -----


def glorot_uniform(rng: np.random.Generator, shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """Uniform on [-a, a] with a = sqrt(6 / (fan_in + fan_out)) (fans: the last two axes).

    Args:
        rng: a NumPy Generator.
        shape: (..., fan_in, fan_out).
        dtype: float32 (default) or float64.

    Returns:
        An array of `shape` and `dtype`.

    References:
        Glorot & Bengio, "Understanding the difficulty of training deep
        feedforward neural networks", AISTATS 2010.
    """
    shape = tuple(int(d) for d in shape)
    fan_in, fan_out = (shape[-2], shape[-1]) if len(shape) >= 2 else (shape[0], shape[0])
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, shape).astype(dtype)


def normal(rng: np.random.Generator, shape: Sequence[int], std: float = 0.02, dtype: Any = np.float32) -> np.ndarray:
    """Gaussian N(0, std²) entries (GPT-2 uses std 0.02)."""
    return (rng.standard_normal(tuple(int(d) for d in shape)) * std).astype(dtype)


def zeros(shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """All zeros."""
    return np.zeros(tuple(int(d) for d in shape), dtype)


def ones(shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """All ones."""
    return np.ones(tuple(int(d) for d in shape), dtype)


def count_params(params: Any) -> int:
    """Total number of scalars in a parameter pytree."""
    return int(sum(np.size(x) if not isinstance(x, Node) else x.size for x in tree_leaves(params)))


# ----- dense layers and MLPs -----


def init_dense(rng: np.random.Generator, n_in: int, n_out: int, dtype: Any = np.float32) -> dict:
    """{"w": (n_in, n_out) Glorot-uniform, "b": (n_out,) zeros}."""
    return {"w": glorot_uniform(rng, (n_in, n_out), dtype), "b": zeros((n_out,), dtype)}


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, Node) else np.shape(x)


def linear(x: Any, w: Any, b: Any = None) -> Any:
    """x @ w (+ b) for x of shape (..., n_in) and w (n_in, n_out); returns (..., n_out).

    Leading axes of x are folded into one before the product, so the graph has
    one (rows, n_in) @ (n_in, n_out) matmul: w is not broadcast over the batch,
    and its gradient is a single x_2dᵀ @ ct instead of a batched product summed
    afterwards (which would materialize batch copies of w-sized arrays).
    """
    xs = _shape(x)
    n_out = _shape(w)[-1]
    if len(xs) > 2:
        y = snp.reshape(snp.matmul(snp.reshape(x, (-1, xs[-1])), w), xs[:-1] + (n_out,))
    else:
        y = snp.matmul(x, w)
    return y if b is None else snp.add(y, b)


def dense(params: dict, x: Any) -> Any:
    """x @ w + b for x of shape (..., n_in); returns (..., n_out) (see `linear`)."""
    return linear(x, params["w"], params["b"])


def init_mlp(rng: np.random.Generator, sizes: Sequence[int], dtype: Any = np.float32) -> list:
    """A list of dense layers for sizes (n_0, n_1, ..., n_L)."""
    return [init_dense(rng, m, n, dtype) for m, n in zip(sizes[:-1], sizes[1:])]


def mlp(params: list, x: Any, activation: Callable[[Any], Any] = snp.tanh) -> Any:
    """Dense layers with `activation` between them (none after the last): the logits.

    Args:
        params: from `init_mlp`.
        x: (..., n_0) inputs.
        activation: elementwise function (tanh, snp.relu, snp.gelu, ...).

    Returns:
        (..., n_L) outputs of the last (linear) layer.
    """
    h = x
    for i, layer in enumerate(params):
        h = dense(layer, h)
        if i + 1 < len(params):
            h = activation(h)
    return h


def accuracy(logits: Any, labels: Any) -> Any:
    """Fraction of rows whose arg-max equals the integer label (a float64 scalar)."""
    return snp.mean(snp.astype(snp.equal(snp.argmax(logits, axis=-1), labels), np.float64))


# ----- layer norm -----


def init_layer_norm(d: int, dtype: Any = np.float32) -> dict:
    """{"g": ones (d,), "b": zeros (d,)}."""
    return {"g": ones((d,), dtype), "b": zeros((d,), dtype)}


def layer_norm(params: dict, x: Any, eps: float = 1e-5) -> Any:
    """`symgraph.numpy.layer_norm` over the last axis with gain g and bias b."""
    return snp.layer_norm(x, params["g"], params["b"], axis=-1, eps=eps)


# ----- attention -----


def causal_mask(t: int) -> np.ndarray:
    """(t, t) bool: True where query position i may attend to key position j (j <= i)."""
    return np.tril(np.ones((t, t), dtype=bool))


def masked_softmax(scores: Any, mask: Any, axis: int = -1) -> Any:
    """Softmax of `scores` over `axis` with the entries where `mask` is False excluded.

    Masked scores are replaced by a large negative number (-1e9, finite so that
    `x - max` never forms inf - inf) before the max-shifted softmax, so they
    get probability exactly 0 (exp underflows) and no gradient (`where` sends
    the cotangent to the kept branch only). A row must keep at least one entry.

    Args:
        scores: float array (..., t_q, t_k).
        mask: bool array broadcastable to scores.shape.
        axis: the normalized axis.

    Returns:
        Probabilities of scores' shape and dtype.
    """
    return snp.softmax(snp.where(mask, scores, -1e9), axis=axis)


def init_attention(rng: np.random.Generator, d_model: int, dtype: Any = np.float32, std: float = 0.02,
                   out_std: float | None = None) -> dict:
    """Fused q/k/v projection {"qkv": dense (d, 3d)} and output projection {"out": dense (d, d)}."""
    out_std = std if out_std is None else out_std
    return {
        "qkv": {"w": normal(rng, (d_model, 3 * d_model), std, dtype), "b": zeros((3 * d_model,), dtype)},
        "out": {"w": normal(rng, (d_model, d_model), out_std, dtype), "b": zeros((d_model,), dtype)},
    }


def causal_self_attention(params: dict, x: Any, n_heads: int, dropout_rate: float = 0.0, key: Any = None,
                          salt: int = 0) -> Any:
    """Multi-head causal self-attention, composed from matmul and a masked softmax.

    q, k, v = split(x @ W_qkv + b), per head h: softmax(q_h k_hᵀ / sqrt(d_h), causal) v_h;
    heads concatenated and projected by W_out. Dropout (if rate > 0) on the
    attention probabilities, with the counter-based generator of
    `symgraph.numpy.dropout` (the mask is regenerated, not stored).

    Args:
        params: from `init_attention`.
        x: (batch, t, d_model) float array.
        n_heads: number of heads; must divide d_model.
        dropout_rate: attention-probability dropout in [0, 1).
        key: integer scalar (array or traced) seeding dropout; vary it per step.
        salt: distinguishes call sites sharing a key (two salts per call are used: salt, salt+1).

    Returns:
        (batch, t, d_model) float array.

    Raises:
        ValueError: n_heads does not divide d_model, or dropout without a key.

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    """
    b, t, d = _shape(x)
    if d % n_heads:
        raise ValueError(f"causal_self_attention: n_heads={n_heads} does not divide d_model={d}")
    hd = d // n_heads
    w, bias = params["qkv"]["w"], params["qkv"]["b"]

    def heads(i: int) -> Any:
        # Slice the fused weight, not the (b, t, 3d) activation: the backward
        # sweep then pads (unslices) small weight-sized cotangents only.
        y = linear(x, w[:, i * d:(i + 1) * d], bias[i * d:(i + 1) * d])     # (b, t, d)
        return snp.transpose(snp.reshape(y, (b, t, n_heads, hd)), (0, 2, 1, 3))  # (b, h, t, hd)

    q, k, v = heads(0), heads(1), heads(2)
    q = snp.multiply(q, 1.0 / math.sqrt(hd))
    scores = snp.matmul(q, snp.swapaxes(k, -1, -2))                 # (b, h, t, t)
    probs = masked_softmax(scores, causal_mask(t))
    if dropout_rate > 0.0:
        if key is None:
            raise ValueError("causal_self_attention: dropout_rate > 0 needs a key")
        probs = snp.dropout(probs, dropout_rate, key, salt=salt)
    y = snp.matmul(probs, v)                                         # (b, h, t, hd)
    y = snp.reshape(snp.transpose(y, (0, 2, 1, 3)), (b, t, d))
    return dense(params["out"], y)


# ----- a GPT-style decoder-only transformer -----


def init_block(rng: np.random.Generator, d_model: int, n_layers: int = 1, dtype: Any = np.float32) -> dict:
    """One pre-LN block: ln1, attention, ln2, MLP (d -> 4d -> d); residual projections scaled by 1/sqrt(2 n_layers)."""
    out_std = 0.02 / math.sqrt(2 * n_layers)
    return {
        "ln1": init_layer_norm(d_model, dtype),
        "attn": init_attention(rng, d_model, dtype, out_std=out_std),
        "ln2": init_layer_norm(d_model, dtype),
        "fc": {"w": normal(rng, (d_model, 4 * d_model), 0.02, dtype), "b": zeros((4 * d_model,), dtype)},
        "proj": {"w": normal(rng, (4 * d_model, d_model), out_std, dtype), "b": zeros((d_model,), dtype)},
    }


def transformer_block(params: dict, x: Any, n_heads: int, dropout_rate: float = 0.0, key: Any = None,
                      salt: int = 0) -> Any:
    """x + drop(attn(ln1 x)), then + drop(proj(gelu(fc(ln2 x)))) (pre-LN, as GPT-2). Uses salts salt..salt+2."""
    h = causal_self_attention(params["attn"], layer_norm(params["ln1"], x), n_heads, dropout_rate, key, salt)
    if dropout_rate > 0.0:
        h = snp.dropout(h, dropout_rate, key, salt=salt + 1)
    x = snp.add(x, h)
    h = dense(params["proj"], snp.gelu(dense(params["fc"], layer_norm(params["ln2"], x))))
    if dropout_rate > 0.0:
        h = snp.dropout(h, dropout_rate, key, salt=salt + 2)
    return snp.add(x, h)


def init_transformer(rng: np.random.Generator, vocab_size: int, d_model: int = 128, n_heads: int = 4,
                     n_layers: int = 2, context: int = 64, dtype: Any = np.float32) -> dict:
    """Parameters of a decoder-only transformer (token and position embeddings, blocks, final LN, head).

    Returns:
        {"tok": (V, d), "pos": (context, d), "blocks": [block, ...], "ln_f": ..., "head": dense (d, V)}.
    """
    if d_model % n_heads:
        raise ValueError(f"init_transformer: n_heads={n_heads} does not divide d_model={d_model}")
    return {
        "tok": normal(rng, (vocab_size, d_model), 0.02, dtype),
        "pos": normal(rng, (context, d_model), 0.01, dtype),
        "blocks": [init_block(rng, d_model, n_layers, dtype) for _ in range(n_layers)],
        "ln_f": init_layer_norm(d_model, dtype),
        "head": {"w": normal(rng, (d_model, vocab_size), 0.02, dtype), "b": zeros((vocab_size,), dtype)},
    }


def transformer(params: dict, tokens: Any, n_heads: int, dropout_rate: float = 0.0, key: Any = None,
                block_fn: Callable[..., Any] | None = None) -> Any:
    """Next-token logits of a decoder-only transformer.

    Args:
        params: from `init_transformer`.
        tokens: (batch, t) integer ids, t <= context.
        n_heads: attention heads per block.
        dropout_rate: dropout on the embeddings, attention probabilities and
            residual branches (0 for evaluation).
        key: integer scalar seeding dropout (e.g. the optimizer's step).
        block_fn: replaces `transformer_block` (e.g. `sg.checkpoint(transformer_block)`).

    Returns:
        (batch, t, vocab) float logits.
    """
    block_fn = block_fn or transformer_block
    b, t = _shape(tokens)
    pos = params["pos"][:t] if t != np.shape(params["pos"])[0] else params["pos"]
    x = snp.add(snp.embedding(params["tok"], tokens), pos)          # (b, t, d)
    if dropout_rate > 0.0:
        x = snp.dropout(x, dropout_rate, key, salt=1)
    for i, blk in enumerate(params["blocks"]):
        x = block_fn(blk, x, n_heads, dropout_rate, key, 10 * (i + 1))
    return dense(params["head"], layer_norm(params["ln_f"], x))


def transformer_loss(params: dict, tokens: Any, targets: Any, n_heads: int, dropout_rate: float = 0.0,
                     key: Any = None, block_fn: Callable[..., Any] | None = None) -> Any:
    """Mean next-character cross-entropy (nats) of `transformer` on (batch, t) tokens and targets."""
    logits = transformer(params, tokens, n_heads, dropout_rate, key, block_fn)
    b, t, v = logits.shape
    return snp.cross_entropy(snp.reshape(logits, (b * t, v)), snp.reshape(targets, (b * t,)))


# ----- smooth losses of logits -----


def softplus(x: Any) -> Any:
    """log(1 + exp(x)), stable for large |x|, with exact derivatives of every order at every x.

    Two analytic branches, each fed only the inputs it is selected for ("double
    where"): x + log1p(exp(-x)) for x > 0 and log1p(exp(x)) otherwise. Neither
    branch overflows, and unlike max(x, 0) + log1p(exp(-|x|)) no kink of
    max/abs is crossed, so the derivative at 0 is 1/2, not a tie convention.
    """
    pos = snp.greater(x, 0.0)
    xp = snp.where(pos, x, 0.0)
    xn = snp.where(pos, 0.0, x)
    return snp.where(pos, snp.add(xp, snp.log1p(snp.exp(snp.negative(xp)))), snp.log1p(snp.exp(xn)))


def log_sigmoid(x: Any) -> Any:
    """log(sigmoid(x)) = -softplus(-x), stable."""
    return snp.negative(softplus(snp.negative(x)))


def binary_cross_entropy_with_logits(logits: Any, labels: Any, reduction: str = "mean") -> Any:
    """-y log σ(z) - (1 - y) log(1 - σ(z)) = softplus(z) - y z, for labels y in [0, 1].

    Args:
        logits: float array z of any shape.
        labels: array of z's shape (0/1 or probabilities).
        reduction: "mean" (default), "sum" or "none".

    Returns:
        A scalar (mean/sum) or per-element losses (nats).
    """
    losses = snp.subtract(softplus(logits), snp.multiply(labels, logits))
    if reduction == "mean":
        return snp.mean(losses)
    if reduction == "sum":
        return snp.sum(losses)
    return losses
