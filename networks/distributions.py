"""Action distributions over a nest of gymnasium action spaces.

A gymnasium action space is flattened into *leaves*, each one independent
distribution:

- `Discrete(n)` -> one categorical leaf with `n` logits;
- `MultiDiscrete(nvec)` -> one categorical leaf per element of `nvec`
    (several action heads, as with StarCraft-style actions);
- `Box(shape)` -> one diagonal-Gaussian leaf over `prod(shape)` dimensions,
    parameterised by `[mean, log_std]` concatenated on the last axis;
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
    kind: str  # 'categorical' or 'gaussian'
    size: int  # number of categories, or number of dimensions
    offset: int = 0  # gymnasium's `start` for Discrete / MultiDiscrete

    @property
    def param_size(self) -> int:
        return self.size if self.kind == 'categorical' else 2 * self.size

    @property
    def encoding_size(self) -> int:
        """Width of the leaf as a core input (one-hot or raw)."""
        return self.size


def _leaves(space: gym.Space, path: str) -> List[Leaf]:
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
        return [Leaf('gaussian', int(np.prod(space.shape)))]
    if isinstance(space, gym.spaces.Tuple):
        return [l for i, s in enumerate(space.spaces) for l in _leaves(s, f'{path}[{i}]')]
    if isinstance(space, gym.spaces.Dict):
        return [l for k, s in space.spaces.items() for l in _leaves(s, f'{path}[{k!r}]')]
    raise UnsupportedSpaceError(
            f'action space{path} {space} is not supported (supported: Discrete, '
            'MultiDiscrete, Box, and Tuple/Dict of those)')


class ActionSpace:
    """The flat leaves of a gymnasium action space, and distributions over them."""

    def __init__(self, space: gym.Space):
        self.space = space
        self.leaves: Tuple[Leaf, ...] = tuple(_leaves(space, ''))

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
            if leaf.kind == 'gaussian':
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
            else:
                mean, log_std = tf.split(p, 2, axis=-1)
                z = (a - mean) * tf.exp(-log_std)
                total += tf.reduce_sum(-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi), -1)
        return total

    def entropy(self, params: Sequence[tf.Tensor]) -> tf.Tensor:
        """Entropy summed over leaves: `[...]`."""
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
                out.append(mean + tf.exp(log_std) * tf.random.normal(tf.shape(mean)))
        return tuple(out)

    def mode(self, params: Sequence[tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        """The most likely action (argmax / mean) per leaf."""
        return tuple(
                tf.argmax(p, -1, output_type=tf.int32) if leaf.kind == 'categorical'
                else tf.split(p, 2, axis=-1)[0] for leaf, p in zip(self.leaves, params))

    def encode(self, actions: Sequence[tf.Tensor]) -> tf.Tensor:
        """Actions as a core input: one-hot categorical leaves, raw Gaussian ones.

        Per-leaf `[...]` / `[..., d]` -> `[..., encoding_size]`.
        """
        parts = [tf.one_hot(a, leaf.size) if leaf.kind == 'categorical'
                          else tf.cast(a, tf.float32) for leaf, a in zip(self.leaves, actions)]
        return tf.concat(parts, -1)

    # --- conversion to and from the environment's nest --------------------

    def to_env(self, actions: Sequence[np.ndarray]) -> Any:
        """Batched per-leaf numpy actions -> the batched nest the vector env takes.

        Gaussian actions are clipped to the Box bounds here (the stored action
        keeps the unclipped sample, whose log-probability the learner needs).
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
                out.append(a.reshape(len(a), -1))
            elif isinstance(space, gym.spaces.Tuple):
                for s, x in zip(space.spaces, a):
                    walk(s, x)
            else:
                for k, s in space.spaces.items():
                    walk(s, a[k])

        walk(self.space, env_actions)
        return tuple(out)
