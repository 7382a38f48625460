"""Keyed random numbers: fresh per call inside compiled code, reproducible, and a watch on np.random.

A key is a uint64 scalar; every draw is a pure function of its key (JAX's
model): pass keys as arguments and `split` them to get new ones, so a
compiled training step draws new noise on every call and the backward sweep
regenerates it instead of storing it. Draws are built on the counter-based
generator of `symgraph.numpy.random_uniform` (SplitMix64, Steele, Lea & Flood,
"Fast splittable pseudorandom number generators", OOPSLA 2014), the one
dropout masks use, so a draw is the same bits in the evaluator and in LLVM
code (uniform, bernoulli, split); normal and categorical go through log, cos
and sqrt, whose compiled forms agree with NumPy's to rounding.

`NumpyRandomWatch` is how `compile` notices code that draws from NumPy's
global generator or a `numpy.random.Generator` while it is traced: those
values become constants of the compiled code, and `compile` warns once.
"""

from __future__ import annotations

import inspect
import math
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from . import numpy as snp
from .closures import reachable
from .errors import DTypeError, ShapeError, UnsupportedOpError
from .ir import Node

__all__ = ["key", "split", "fold_in", "uniform", "normal", "bernoulli", "categorical", "permutation",
           "FrozenRandomnessWarning", "NumpyRandomWatch"]

# salts of the draws made here (dropout call sites use small salts from 0)
_SPLIT_SALT = 0x5EED_0001
_UNIFORM_SALT = 0x5EED_0002
_NORMAL_SALTS = (0x5EED_0003, 0x5EED_0004)
_GUMBEL_SALT = 0x5EED_0005
_PERMUTATION_SALT = 0x5EED_0006
_FOLD_SALT = 0x5EED_1000
_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment


def _check_key(k: Any, fn: str) -> Any:
    if isinstance(k, Node):
        if k.dtype.kind not in "iu" or k.shape != ():
            raise DTypeError(f"sg.random.{fn}: a key is an integer scalar (sg.random.key(seed)), got a traced "
                             f"{k.dtype}{list(k.shape)}")
        return k
    a = np.asarray(k)
    if a.dtype.kind not in "iu" or a.shape != ():
        raise DTypeError(f"sg.random.{fn}: a key is an integer scalar (sg.random.key(seed)), got "
                         f"{type(k).__name__} {a.dtype}{list(a.shape)}")
    return a.astype(np.uint64)


def _shape(shape: Any, fn: str) -> tuple[int, ...]:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise ShapeError(f"sg.random.{fn}: shape must be a tuple of integers, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"sg.random.{fn}: negative dimension in shape {out}")
    return out


def _bits_to_keys(u: Any) -> Any:
    """53-bit keys from uniforms of `random_uniform` (exact: u * 2**53 is an integer)."""
    return snp.multiply(u, 2.0 ** 53).astype(np.uint64)


def key(seed: int) -> np.uint64:
    """A key from an integer seed.

    Args:
        seed: a Python or NumPy integer in [-2**63, 2**64) (negative seeds are taken modulo 2**64).

    Returns:
        A NumPy uint64 scalar: pass it to the draws, or as an argument of a
        compiled function.

    Raises:
        DTypeError: the seed is not an integer, or does not fit in 64 bits.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise DTypeError(f"sg.random.key: the seed must be an integer, got {type(seed).__name__}")
    if not -(1 << 63) <= int(seed) < (1 << 64):
        raise DTypeError(f"sg.random.key: the seed {seed} does not fit in 64 bits (int64 or uint64)")
    u = snp.random_uniform(np.uint64(int(seed) % (1 << 64)), (), salt=_SPLIT_SALT)
    return np.uint64(_bits_to_keys(u))


def split(key: Any, num: int = 2) -> Any:
    """`num` new keys from `key` (the old one should not be used again).

    Args:
        key: a key (uint64 scalar, traced or not).
        num: how many keys (a Python int >= 1).

    Returns:
        A uint64 array of shape (num,); unpack it (``k1, k2 = split(key)``).

    Raises:
        DTypeError: `key` is not an integer scalar.
        ShapeError: num < 1.
    """
    k = _check_key(key, "split")
    if int(num) < 1:
        raise ShapeError(f"sg.random.split: num must be at least 1, got {num}")
    return _bits_to_keys(snp.random_uniform(k, (int(num),), salt=_SPLIT_SALT))


def fold_in(key: Any, data: Any) -> Any:
    """A new key from `key` and an integer (a step or layer number), as `split` but addressed.

    `data` may be a Python or NumPy integer or a traced integer scalar (a loop
    counter inside a compiled step); both give the same key for the same
    value: data * 0x9E3779B97F4A7C15 (SplitMix64's golden-ratio increment) is
    added to the key modulo 2**64, and the sum is drawn from once.

    Raises:
        DTypeError: `key` is not an integer scalar, or `data` is not an integer scalar.
    """
    k = _check_key(key, "fold_in")
    if isinstance(data, Node):
        if data.dtype.kind not in "iub" or data.shape != ():
            raise DTypeError(f"sg.random.fold_in: data must be an integer scalar, got a traced "
                             f"{data.dtype}{list(data.shape)}")
        mixed = snp.add(k, snp.multiply(data.astype(np.uint64), np.uint64(_GOLDEN)))  # wraps mod 2**64
    elif isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        if isinstance(k, Node):
            mixed = snp.add(k, np.uint64(int(data) * _GOLDEN % (1 << 64)))
        else:
            mixed = np.uint64((int(k) + int(data) * _GOLDEN) % (1 << 64))
    else:
        raise DTypeError(f"sg.random.fold_in: data must be an integer, got {type(data).__name__}")
    return _bits_to_keys(snp.random_uniform(mixed, (), salt=_FOLD_SALT))


def uniform(key: Any, shape: Sequence[int] = (), dtype: Any = np.float64, minval: float = 0.0,
            maxval: float = 1.0) -> Any:
    """Uniform values in [minval, maxval).

    Args:
        key: a key. shape: the result's shape. dtype: float32 or float64.
        minval, maxval: the interval (numbers or arrays broadcasting to `shape`).

    Returns:
        An array (traced inside a trace) of `shape` and `dtype`.

    Raises:
        DTypeError: a non-float dtype or a bad key. ShapeError: a bad shape.
    """
    dt = _float_dtype(dtype, "uniform")
    u = snp.random_uniform(_check_key(key, "uniform"), _shape(shape, "uniform"), salt=_UNIFORM_SALT, dtype=dt)
    if isinstance(minval, (int, float)) and isinstance(maxval, (int, float)) and (minval, maxval) == (0.0, 1.0):
        return u
    return snp.add(snp.multiply(u, snp.subtract(maxval, minval)), minval).astype(dt)


def normal(key: Any, shape: Sequence[int] = (), dtype: Any = np.float64) -> Any:
    """Standard normal values (Box & Muller 1958: sqrt(-2 log u1) cos(2 pi u2), computed in float64).

    Args:
        key: a key. shape: the result's shape. dtype: float32 or float64.

    Returns:
        An array of `shape` and `dtype`.

    Raises:
        DTypeError: a non-float dtype or a bad key. ShapeError: a bad shape.
    """
    dt = _float_dtype(dtype, "normal")
    k, s = _check_key(key, "normal"), _shape(shape, "normal")
    u1 = snp.random_uniform(k, s, salt=_NORMAL_SALTS[0])
    u2 = snp.random_uniform(k, s, salt=_NORMAL_SALTS[1])
    r = snp.sqrt(snp.multiply(-2.0, snp.log1p(snp.negative(u1))))  # 1 - u1 in (0, 1]: finite
    return snp.multiply(r, snp.cos(snp.multiply(2.0 * math.pi, u2))).astype(dt)


def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None) -> Any:
    """Booleans that are True with probability `p`.

    Args:
        key: a key. p: a probability (number or array). shape: the result's
            shape (default: p's shape).

    Returns:
        A bool array.

    Raises:
        DTypeError: a bad key. ShapeError: a bad shape.
    """
    if shape is None:
        shape = np.shape(p) if not isinstance(p, Node) else p.shape
    u = snp.random_uniform(_check_key(key, "bernoulli"), _shape(shape, "bernoulli"), salt=_UNIFORM_SALT)
    return snp.less(u, p)


def categorical(key: Any, logits: Any, axis: int = -1) -> Any:
    """Category indices drawn with probabilities softmax(logits) along `axis` (the Gumbel-max trick).

    Args:
        key: a key. logits: unnormalized log-probabilities (float array).
        axis: the categories' axis.

    Returns:
        An int64 array of logits' shape without `axis`.

    Raises:
        DTypeError: a bad key. ShapeError: no categories (a 0-d logits or an empty axis).
    """
    shape = logits.shape if isinstance(logits, Node) else np.shape(logits)
    ax = axis % len(shape) if shape else 0
    if not shape or shape[ax] == 0:
        raise ShapeError(f"sg.random.categorical: logits of shape {tuple(shape)} have no categories along axis {axis}")
    u = snp.random_uniform(_check_key(key, "categorical"), tuple(shape), salt=_GUMBEL_SALT)
    u = snp.add(snp.multiply(u, 1.0 - 2.0 ** -53), 2.0 ** -54)  # in (0, 1): the Gumbel noise is finite
    gumbel = snp.negative(snp.log(snp.negative(snp.log(u))))
    return snp.argmax(snp.add(logits, gumbel), axis=axis)


def permutation(key: Any, n: int) -> np.ndarray:
    """A random permutation of range(n) (the order of n uniform draws).

    Args:
        key: a concrete key (not traced). n: a Python int.

    Returns:
        An int64 NumPy array of shape (n,).

    Raises:
        UnsupportedOpError: a traced key (symgraph has no sort in graphs yet:
            draw the permutation outside the compiled function and pass it in).
        ShapeError: n is negative or not an integer.
    """
    if isinstance(key, Node):
        raise UnsupportedOpError("sg.random.permutation: the key is traced, and symgraph has no sort in graphs yet; "
                                 "draw the permutation outside the compiled function and pass it as an argument")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ShapeError(f"sg.random.permutation: n must be a non-negative integer, got {n!r}")
    u = snp.random_uniform(_check_key(key, "permutation"), (int(n),), salt=_PERMUTATION_SALT)
    return np.argsort(u, kind="stable").astype(np.int64)


def _float_dtype(dtype: Any, fn: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise DTypeError(f"sg.random.{fn}: dtype must be float32 or float64, got {dt}")
    return dt


# ----- noticing np.random inside a compiled trace -----


class FrozenRandomnessWarning(UserWarning):
    """NumPy random numbers were drawn while a compiled function was traced: they are constants of its code."""


class NumpyRandomWatch:
    """``with NumpyRandomWatch(fn) as w:`` around a trace; afterwards `w.drawn` names the generators drawn from.

    Watched: NumPy's global generator (``np.random.normal`` and friends), the
    ``numpy.random.Generator`` / ``RandomState`` objects that `fn` reaches by
    name (`symgraph.closures.reachable`: closure, globals, defaults, a bound
    method's attributes, one level into containers, functions it reaches), and
    unseeded generators made by ``np.random.default_rng()`` during the trace.
    A generator is "drawn from" when its state changed.
    """

    def __init__(self, fn: Callable):
        self.fn = fn
        self.drawn: list[str] = []

    def __enter__(self) -> "NumpyRandomWatch":
        self._global = _global_state()
        gens: dict[int, tuple[str, Any]] = {}
        for binding, v in reachable(self.fn):
            if isinstance(v, (np.random.Generator, np.random.RandomState)):
                gens.setdefault(id(v), (binding.label, v))
        self._gens = [(name, g, _gen_state(g)) for name, g in gens.values()]
        self._made: list[Any] = []
        self._default_rng = np.random.default_rng
        made = self._made
        original = self._default_rng

        def default_rng(*args: Any, **kwargs: Any) -> Any:
            g = original(*args, **kwargs)
            if (args[0] if args else kwargs.get("seed")) is None:  # seeded ones repeat in NumPy too
                made.append(g)
            return g

        np.random.default_rng = default_rng
        return self

    def __exit__(self, *exc: Any) -> None:
        np.random.default_rng = self._default_rng
        if not _same_state(_global_state(), self._global):
            self.drawn.append("NumPy's global generator (np.random.*)")
        for name, g, state in self._gens:
            if not _same_state(_gen_state(g), state):
                self.drawn.append(f"the generator {name!r}")
        if self._made:
            self.drawn.append("an unseeded generator made by np.random.default_rng() inside the function")

    def warn(self, what: str) -> None:
        """Warn (category `FrozenRandomnessWarning`) at `fn`'s definition that `self.drawn` are frozen."""
        code = getattr(inspect.unwrap(self.fn), "__code__", None)
        filename = code.co_filename if code is not None else "<unknown>"
        lineno = code.co_firstlineno if code is not None else 0
        msg = (f"{what}: {' and '.join(self.drawn)} was drawn from while the function was traced; the values "
               f"drawn are constants of the compiled code, the same on every call. For fresh random numbers per "
               f"call pass a key argument and draw with sg.random (key, sub = sg.random.split(key); "
               f"sg.random.normal(sub, shape)), or draw outside and pass the values as an argument.")
        warnings.warn_explicit(msg, FrozenRandomnessWarning, filename, lineno, module=__name__)


def _global_state() -> Any:
    return np.random.get_state(legacy=False)


def _gen_state(g: Any) -> Any:
    return g.get_state(legacy=False) if isinstance(g, np.random.RandomState) else g.bit_generator.state


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b
