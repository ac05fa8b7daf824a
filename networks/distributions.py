"""Action distributions over a nest of gymnasium action spaces.

A gymnasium action space is flattened into *leaves*, each one independent
distribution:

- `Discrete(n)` -> one categorical leaf with `n` logits;
- `MultiDiscrete(nvec)` -> one categorical leaf per element of `nvec`
    (several action heads, as with StarCraft-style actions);
- `Box(shape)` -> one diagonal-Gaussian leaf over `prod(shape)` dimensions,
    parameterised by `[mean, log_std]` concatenated on the last axis; with
    `squash=True` (SAC) a tanh-squashed Gaussian instead: actions live in
    `[-1, 1]` inside the library and are rescaled to the Box bounds by
    `to_env` (the bounds must be finite);
- `Tuple` / `Dict` -> the leaves of their members, in gymnasium's order.

Inside the library an action is a tuple with one tensor per leaf (`[...]`
int32 for a categorical leaf, `[..., d]` float32 for a Gaussian one) and the
distribution parameters are a tuple with one tensor per leaf (`[..., n]`
logits or `[..., 2 d]` mean and log-std). Log-probabilities, entropies and KL
divergences sum over the leaves, so a nest of actions behaves like one.
`ActionSpace.to_env` / `from_env` convert batched actions to and from the
nest the environment expects.
"""

import dataclasses
import math
from typing import Any, List, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


class UnsupportedSpaceError(ValueError):
    """An environment space this library cannot handle."""


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One independent part of an action: categorical or diagonal Gaussian."""
    kind: str  # 'categorical', 'gaussian' or 'tanh_gaussian'
    size: int  # number of categories, or number of dimensions
    offset: int = 0  # gymnasium's `start` for Discrete / MultiDiscrete

    @property
    def param_size(self) -> int:
        return self.size if self.kind == 'categorical' else 2 * self.size

    @property
    def encoding_size(self) -> int:
        """Width of the leaf as a core input (one-hot or raw)."""
        return self.size


def _leaves(space: gym.Space, path: str, squash: bool = False) -> List[Leaf]:
    if isinstance(space, gym.spaces.Discrete):
        return [Leaf('categorical', int(space.n), int(space.start))]
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec, start = np.asarray(space.nvec).ravel(), np.asarray(space.start).ravel()
        return [Leaf('categorical', int(n), int(s)) for n, s in zip(nvec, start)]
    if isinstance(space, gym.spaces.Box):
        if not np.issubdtype(space.dtype, np.floating):
            raise UnsupportedSpaceError(
                    f'action space{path} is an integer Box {space}; use Discrete or '
                    'MultiDiscrete for integer actions')
        if squash and not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise UnsupportedSpaceError(
                    f'action space{path} {space} has infinite bounds; a squashed (tanh) '
                    'policy needs finite ones')
        return [Leaf('tanh_gaussian' if squash else 'gaussian', int(np.prod(space.shape)))]
    if isinstance(space, gym.spaces.Tuple):
        return [l for i, s in enumerate(space.spaces)
                for l in _leaves(s, f'{path}[{i}]', squash)]
    if isinstance(space, gym.spaces.Dict):
        return [l for k, s in space.spaces.items()
                for l in _leaves(s, f'{path}[{k!r}]', squash)]
    raise UnsupportedSpaceError(
            f'action space{path} {space} is not supported (supported: Discrete, '
            'MultiDiscrete, Box, and Tuple/Dict of those)')


class ActionSpace:
    """The flat leaves of a gymnasium action space, and distributions over them."""

    def __init__(self, space: gym.Space, squash: bool = False):
        self.space = space
        self.squash = squash
        self.leaves: Tuple[Leaf, ...] = tuple(_leaves(space, '', squash))

    # --- sizes and specs --------------------------------------------------

    @property
    def param_sizes(self) -> List[int]:
        return [l.param_size for l in self.leaves]

    @property
    def encoding_size(self) -> int:
        return sum(l.encoding_size for l in self.leaves)

    @property
    def is_discrete(self) -> bool:
        return all(l.kind == 'categorical' for l in self.leaves)

    def action_specs(self) -> Tuple[tf.TensorSpec, ...]:
        """Per-leaf spec of one action (no batch dimension)."""
        return tuple(tf.TensorSpec([], tf.int32) if l.kind == 'categorical'
                                  else tf.TensorSpec([l.size], tf.float32) for l in self.leaves)

    def param_specs(self) -> Tuple[tf.TensorSpec, ...]:
        return tuple(tf.TensorSpec([l.param_size], tf.float32) for l in self.leaves)

    # --- distributions (all sum over leaves) ------------------------------

    def split_params(self, flat_params: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        """`[..., sum(param_sizes)]` -> per-leaf params; clips Gaussian log-stds."""
        parts = tf.split(flat_params, self.param_sizes, axis=-1)
        out = []
        for leaf, p in zip(self.leaves, parts):
            if leaf.kind != 'categorical':
                mean, log_std = tf.split(p, 2, axis=-1)
                p = tf.concat([mean, tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)], -1)
            out.append(p)
        return tuple(out)

    def log_prob(self, params: Sequence[tf.Tensor], actions: Sequence[tf.Tensor]) -> tf.Tensor:
        """Log-probability of `actions` (per-leaf `[...]`), summed over leaves: `[...]`."""
        total = 0.0
        for leaf, p, a in zip(self.leaves, params, actions):
            if leaf.kind == 'categorical':
                logp = tf.nn.log_softmax(p)
                total += tf.gather(logp, tf.cast(a, tf.int32), batch_dims=len(a.shape))
            elif leaf.kind == 'gaussian':
                total += gaussian_log_prob(p, a)
            else:
                # The pre-squash sample, recovered from the stored action in (-1, 1).
                u = tf.atanh(tf.clip_by_value(a, -1.0 + 1e-6, 1.0 - 1e-6))
                total += gaussian_log_prob(p, u) - tanh_log_det(u)
        return total

    def _no_closed_form(self, what: str) -> None:
        if any(l.kind == 'tanh_gaussian' for l in self.leaves):
            raise ValueError(f'a tanh-squashed Gaussian has no closed-form {what}; '
                             'estimate it from samples (sample_squashed)')

    def entropy(self, params: Sequence[tf.Tensor]) -> tf.Tensor:
        """Entropy summed over leaves: `[...]`."""
        self._no_closed_form('entropy')
        total = 0.0
        for leaf, p in zip(self.leaves, params):
            if leaf.kind == 'categorical':
                logp = tf.nn.log_softmax(p)
                total += -tf.reduce_sum(tf.exp(logp) * logp, -1)
            else:
                _, log_std = tf.split(p, 2, axis=-1)
                total += tf.reduce_sum(log_std + 0.5 * math.log(2 * math.pi * math.e), -1)
        return total

    def kl_divergence(self, params_p: Sequence[tf.Tensor],
                                        params_q: Sequence[tf.Tensor]) -> tf.Tensor:
        """KL(p || q) summed over leaves: `[...]`."""
        self._no_closed_form('KL divergence')
        total = 0.0
        for leaf, p, q in zip(self.leaves, params_p, params_q):
            if leaf.kind == 'categorical':
                logp, logq = tf.nn.log_softmax(p), tf.nn.log_softmax(q)
                total += tf.reduce_sum(tf.exp(logp) * (logp - logq), -1)
            else:
                mp, lsp = tf.split(p, 2, axis=-1)
                mq, lsq = tf.split(q, 2, axis=-1)
                total += tf.reduce_sum(
                        lsq - lsp + (tf.exp(2 * lsp) + tf.square(mp - mq)) / (2 * tf.exp(2 * lsq)) - 0.5,
                        -1)
        return total

    def sample(self, params: Sequence[tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        """One action per row: params `[B, ...]` -> per-leaf `[B]` / `[B, d]`."""
        out = []
        for leaf, p in zip(self.leaves, params):
            if leaf.kind == 'categorical':
                out.append(tf.random.categorical(p, 1, dtype=tf.int32)[:, 0])
            else:
                mean, log_std = tf.split(p, 2, axis=-1)
                u = mean + tf.exp(log_std) * tf.random.normal(tf.shape(mean))
                out.append(tf.tanh(u) if leaf.kind == 'tanh_gaussian' else u)
        return tuple(out)

    def mode(self, params: Sequence[tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        """The most likely action (argmax / mean) per leaf."""
        out = []
        for leaf, p in zip(self.leaves, params):
            if leaf.kind == 'categorical':
                out.append(tf.argmax(p, -1, output_type=tf.int32))
            else:
                mean = tf.split(p, 2, axis=-1)[0]
                out.append(tf.tanh(mean) if leaf.kind == 'tanh_gaussian' else mean)
        return tuple(out)

    def encode(self, actions: Sequence[tf.Tensor]) -> tf.Tensor:
        """Actions as a core input: one-hot categorical leaves, raw Gaussian ones.

        Per-leaf `[...]` / `[..., d]` -> `[..., encoding_size]`.
        """
        parts = [tf.one_hot(a, leaf.size) if leaf.kind == 'categorical'
                          else tf.cast(a, tf.float32) for leaf, a in zip(self.leaves, actions)]
        return tf.concat(parts, -1)

    def sample_uniform(self, batch_size: int, rng: np.random.Generator
                       ) -> Tuple[Tuple[np.ndarray, ...], np.ndarray]:
        """Uniformly random actions (SAC's `learning_starts` phase), numpy.

        Returns (per-leaf actions `[B]` / `[B, d]`, their log-density `[B]`);
        unsquashed Gaussian leaves have no uniform distribution (ValueError).
        """
        actions, log_prob = [], 0.0
        for leaf in self.leaves:
            if leaf.kind == 'categorical':
                actions.append(rng.integers(0, leaf.size, batch_size).astype(np.int32))
                log_prob -= math.log(leaf.size)
            elif leaf.kind == 'tanh_gaussian':
                actions.append(rng.uniform(-1.0, 1.0, (batch_size, leaf.size)).astype(np.float32))
                log_prob -= leaf.size * math.log(2.0)
            else:
                raise ValueError('uniform actions need bounded (squashed) continuous leaves')
        return tuple(actions), np.full([batch_size], log_prob, np.float32)

    # --- conversion to and from the environment's nest --------------------

    def to_env(self, actions: Sequence[np.ndarray]) -> Any:
        """Batched per-leaf numpy actions -> the batched nest the vector env takes.

        Gaussian actions are clipped to the Box bounds here (the stored action
        keeps the unclipped sample, whose log-probability the learner needs);
        squashed actions in [-1, 1] are rescaled to the bounds.
        """
        it = iter(actions)

        def build(space):
            if isinstance(space, gym.spaces.Discrete):
                return np.asarray(next(it)) + int(space.start)
            if isinstance(space, gym.spaces.MultiDiscrete):
                cols = [np.asarray(next(it)) for _ in range(int(np.prod(space.nvec.shape)))]
                flat = np.stack(cols, -1) + np.asarray(space.start).ravel()
                return flat.reshape((-1,) + space.nvec.shape).astype(space.dtype)
            if isinstance(space, gym.spaces.Box):
                a = np.asarray(next(it)).reshape((-1,) + space.shape)
                if self.squash:
                    a = from_unit_interval(np.clip(a, -1.0, 1.0), space.low, space.high)
                return np.clip(a, space.low, space.high).astype(space.dtype)
            if isinstance(space, gym.spaces.Tuple):
                return tuple(build(s) for s in space.spaces)
            return {k: build(s) for k, s in space.spaces.items()}

        return build(self.space)

    def from_env(self, env_actions: Any) -> Tuple[np.ndarray, ...]:
        """The batched nest of environment actions -> per-leaf numpy actions."""
        out = []

        def walk(space, a):
            if isinstance(space, gym.spaces.Discrete):
                out.append((np.asarray(a) - int(space.start)).astype(np.int32))
            elif isinstance(space, gym.spaces.MultiDiscrete):
                a = np.asarray(a).reshape(len(a), -1) - np.asarray(space.start).ravel()
                out.extend(a[:, i].astype(np.int32) for i in range(a.shape[1]))
            elif isinstance(space, gym.spaces.Box):
                a = np.asarray(a, np.float32)
                if self.squash:
                    a = to_unit_interval(a, space.low, space.high).astype(np.float32)
                out.append(a.reshape(len(a), -1))
            elif isinstance(space, gym.spaces.Tuple):
                for s, x in zip(space.spaces, a):
                    walk(s, x)
            else:
                for k, s in space.spaces.items():
                    walk(s, a[k])

        walk(self.space, env_actions)
        return tuple(out)


def from_unit_interval(a: Any, low: Any, high: Any) -> Any:
    """A squashed action in [-1, 1] rescaled to [low, high]; numpy arrays or tensors."""
    return low + (a + 1.0) * 0.5 * (high - low)


def to_unit_interval(a: Any, low: Any, high: Any) -> Any:
    """The inverse of `from_unit_interval`: [low, high] -> [-1, 1]."""
    return 2.0 * (a - low) / (high - low) - 1.0


def gaussian_log_prob(params: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """Diagonal Gaussian log-density: params `[..., 2 d]` (mean, log-std), x `[..., d]` -> `[...]`."""
    mean, log_std = tf.split(params, 2, axis=-1)
    z = (x - mean) * tf.exp(-log_std)
    return tf.reduce_sum(-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi), -1)


def tanh_log_det(u: tf.Tensor) -> tf.Tensor:
    """log |d tanh(u) / du| summed over the last axis, stable for large |u|: `[..., d]` -> `[...]`."""
    return tf.reduce_sum(2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u)), -1)


def sample_squashed(params: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """A reparameterised tanh-Gaussian sample and its log-probability.

    params `[..., 2 d]` -> (action `[..., d]` in (-1, 1), log_prob `[...]`); gradients
    flow to `params` through the action (SAC's actor loss needs them).
    """
    mean, log_std = tf.split(params, 2, axis=-1)
    u = mean + tf.exp(log_std) * tf.random.normal(tf.shape(mean))
    return tf.tanh(u), gaussian_log_prob(params, u) - tanh_log_det(u)
