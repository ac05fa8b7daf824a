"""Action distributions over a nest of gymnasium action spaces.

A gymnasium action space is flattened into *leaves*, each one independent
distribution and one instance of a `Leaf` subclass, which implements that
kind's behaviour (sizes, specs, log-probability, sampling, env conversion):

- `Discrete(n)` -> one `Categorical` leaf with `n` logits;
- `MultiDiscrete(nvec)` -> one `Categorical` leaf per element of `nvec`
    (several action heads, as with StarCraft-style actions);
- `Box(shape)` -> one `Gaussian` (diagonal) leaf over `prod(shape)` dimensions,
    parameterised by `[mean, log_std]` concatenated on the last axis; with
    `rescale=True` and finite bounds its actions are in `[-1, 1]` units inside
    the library, clipped there and rescaled to the bounds by `to_env` (so a
    policy's noise is the same share of any Box's range), otherwise in the
    Box's own units, clipped to its bounds; with `squash=True` (SAC) a
    `TanhGaussian` instead: actions live in `[-1, 1]` inside the library and
    are rescaled to the Box bounds by `to_env` (the bounds must be finite);
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
import itertools
import math
from typing import Any, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

UNIT_RANGE = '[-1, 1]'  # an export's `units` of a Gaussian leaf rescaled to its bounds
LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0
# The logit of an action an action mask forbids: exp underflows to an exact 0 in
# float32, and, unlike -inf, 0 * MASKED_LOGIT is 0, so entropies and KLs over the
# allowed actions stay finite.
MASKED_LOGIT = -1e9


class UnsupportedSpaceError(ValueError):
    """An environment space this library cannot handle."""


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One independent part of an action; each subclass is one kind of distribution.

    A leaf's parameters `p` are `[..., param_size]` and its action `a` is `[...]`
    int32 (discrete) or `[..., size]` float32. Every method works on any leading
    shape `[...]` unless it says otherwise.
    """
    size: int  # number of categories, or number of dimensions

    @property
    def discrete(self) -> bool:
        """True when actions are category indices (one-hot as a core input)."""
        return False

    @property
    def param_size(self) -> int:
        raise NotImplementedError

    @property
    def encoding_size(self) -> int:
        """Width of the leaf as a core input (one-hot or raw)."""
        return self.size

    def action_spec(self) -> tf.TensorSpec:
        """The spec of one action (no batch dimension)."""
        raise NotImplementedError

    @property
    def rescaled(self) -> bool:
        """True when the leaf's actions are in [-1, 1] units, rescaled to the Box's bounds
        on the way to the environment (`to_env`) and back (`from_env`)."""
        return False

    def clip_params(self, p: tf.Tensor) -> tf.Tensor:
        """The policy head's raw output `[..., param_size]` made valid (same shape)."""
        return p

    def log_prob(self, p: tf.Tensor, a: tf.Tensor) -> tf.Tensor:
        """Log-probability (density) of `a`: `[...]`."""
        raise NotImplementedError

    def entropy(self, p: tf.Tensor) -> tf.Tensor:
        """Closed-form entropy: `[...]`."""
        raise NotImplementedError

    def kl_divergence(self, p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        """Closed-form KL(p || q): `[...]`."""
        raise NotImplementedError

    def sample(self, p: tf.Tensor) -> tf.Tensor:
        """One action per row of `p` `[B, param_size]`: `[B]` / `[B, size]`."""
        raise NotImplementedError

    def mode(self, p: tf.Tensor) -> tf.Tensor:
        """The most likely action."""
        raise NotImplementedError

    def encode(self, a: tf.Tensor) -> tf.Tensor:
        """The action as a core input: `[..., encoding_size]` float32."""
        raise NotImplementedError

    def sample_uniform(self, batch_size: int, rng: np.random.Generator
                       ) -> Tuple[np.ndarray, float]:
        """`batch_size` uniformly random actions (numpy) and their log-density."""
        raise NotImplementedError

    def to_env(self, a: np.ndarray, space: gym.Space) -> np.ndarray:
        """Batched actions `[B]` / `[B, size]` -> the environment's values for this
        leaf; `space` is the gymnasium space the leaf was flattened from."""
        raise NotImplementedError

    def from_env(self, a: np.ndarray, space: gym.Space) -> np.ndarray:
        """The inverse of `to_env` for one leaf's batched values."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Categorical(Leaf):
    """`size` logits; actions are indices in `[0, size)`, `offset` added in the env."""
    offset: int = 0  # gymnasium's `start` for Discrete / MultiDiscrete

    @property
    def discrete(self) -> bool:
        return True

    @property
    def param_size(self) -> int:
        return self.size

    def action_spec(self) -> tf.TensorSpec:
        return tf.TensorSpec([], tf.int32)

    def log_prob(self, p: tf.Tensor, a: tf.Tensor) -> tf.Tensor:
        logp = tf.nn.log_softmax(p)
        # A one-hot sum, not a batched gather: the same value (masked logits are finite,
        # MASKED_LOGIT), and a gradient of a few ops instead of the gather's ~20.
        one_hot = tf.one_hot(tf.cast(a, tf.int32), self.size, dtype=logp.dtype)
        return tf.reduce_sum(one_hot * logp, -1)

    def entropy(self, p: tf.Tensor) -> tf.Tensor:
        logp = tf.nn.log_softmax(p)
        return -tf.reduce_sum(tf.exp(logp) * logp, -1)

    def kl_divergence(self, p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        logp, logq = tf.nn.log_softmax(p), tf.nn.log_softmax(q)
        return tf.reduce_sum(tf.exp(logp) * (logp - logq), -1)

    def sample(self, p: tf.Tensor) -> tf.Tensor:
        return tf.random.categorical(p, 1, dtype=tf.int32)[:, 0]

    def mode(self, p: tf.Tensor) -> tf.Tensor:
        return tf.argmax(p, -1, output_type=tf.int32)

    def encode(self, a: tf.Tensor) -> tf.Tensor:
        return tf.one_hot(a, self.size)

    def sample_uniform(self, batch_size: int, rng: np.random.Generator
                       ) -> Tuple[np.ndarray, float]:
        return rng.integers(0, self.size, batch_size).astype(np.int32), -math.log(self.size)

    def to_env(self, a: np.ndarray, space: gym.Space) -> np.ndarray:
        return np.asarray(a) + self.offset

    def from_env(self, a: np.ndarray, space: gym.Space) -> np.ndarray:
        return (np.asarray(a) - self.offset).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class _DiagonalGaussian(Leaf):
    """What both Gaussian kinds share: params `[..., 2 size]` = (mean, log-std)."""

    @property
    def param_size(self) -> int:
        return 2 * self.size

    def action_spec(self) -> tf.TensorSpec:
        return tf.TensorSpec([self.size], tf.float32)

    def clip_params(self, p: tf.Tensor) -> tf.Tensor:
        """Clips the log-std to [LOG_STD_MIN, LOG_STD_MAX]; the mean is left as it is."""
        mean, log_std = tf.split(p, 2, axis=-1)
        return tf.concat([mean, tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)], -1)

    def _sample_unsquashed(self, p: tf.Tensor) -> tf.Tensor:
        mean, log_std = tf.split(p, 2, axis=-1)
        return mean + tf.exp(log_std) * tf.random.normal(tf.shape(mean))

    def encode(self, a: tf.Tensor) -> tf.Tensor:
        return tf.cast(a, tf.float32)

    def to_env(self, a: np.ndarray, space: gym.Space) -> np.ndarray:
        # Clipped here only: the stored action keeps the unclipped sample, whose
        # log-probability the learner needs. In [-1, 1] units (`rescaled`) it is
        # clipped there first and mapped onto the bounds.
        a = np.asarray(a).reshape((-1,) + space.shape)
        if self.rescaled:
            a = from_unit_interval(np.clip(a, -1.0, 1.0), space.low, space.high)
        return np.clip(a, space.low, space.high).astype(space.dtype)

    def from_env(self, a: np.ndarray, space: gym.Space) -> np.ndarray:
        a = np.asarray(a, np.float32)
        if self.rescaled:
            a = to_unit_interval(a, space.low, space.high).astype(np.float32)
        return a.reshape(len(a), -1)


@dataclasses.dataclass(frozen=True)
class Gaussian(_DiagonalGaussian):
    """A diagonal Gaussian over `size` unbounded dimensions, clipped to the Box in
    `to_env`: in the Box's own units, or with `unit` in [-1, 1] units, rescaled to its
    (finite) bounds."""
    unit: bool = False

    @property
    def rescaled(self) -> bool:
        return self.unit

    def log_prob(self, p: tf.Tensor, a: tf.Tensor) -> tf.Tensor:
        return gaussian_log_prob(p, a)

    def entropy(self, p: tf.Tensor) -> tf.Tensor:
        _, log_std = tf.split(p, 2, axis=-1)
        return tf.reduce_sum(log_std + 0.5 * math.log(2 * math.pi * math.e), -1)

    def kl_divergence(self, p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        return gaussian_kl(p, q)

    def sample(self, p: tf.Tensor) -> tf.Tensor:
        return self._sample_unsquashed(p)

    def mode(self, p: tf.Tensor) -> tf.Tensor:
        return tf.split(p, 2, axis=-1)[0]

    def sample_uniform(self, batch_size: int, rng: np.random.Generator
                       ) -> Tuple[np.ndarray, float]:
        raise ValueError('uniform actions need bounded (squashed) continuous leaves')



@dataclasses.dataclass(frozen=True)
class TanhGaussian(_DiagonalGaussian):
    """tanh of a diagonal Gaussian (SAC): actions in (-1, 1), rescaled to the Box's
    finite bounds in `to_env`. No closed-form entropy; the KL divergence is the
    Gaussians' (`gaussian_kl`)."""

    def log_prob(self, p: tf.Tensor, a: tf.Tensor) -> tf.Tensor:
        # The pre-squash sample, recovered from the stored action in (-1, 1).
        u = tf.atanh(tf.clip_by_value(a, -1.0 + 1e-6, 1.0 - 1e-6))
        return gaussian_log_prob(p, u) - tanh_log_det(u)

    def _no_closed_form(self, what: str) -> ValueError:
        return ValueError(f'a tanh-squashed Gaussian has no closed-form {what}; '
                          'estimate it from samples (sample_squashed)')

    def entropy(self, p: tf.Tensor) -> tf.Tensor:
        raise self._no_closed_form('entropy')

    def kl_divergence(self, p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        return gaussian_kl(p, q)  # the shared squashing bijection leaves it unchanged

    def sample(self, p: tf.Tensor) -> tf.Tensor:
        return tf.tanh(self._sample_unsquashed(p))

    def mode(self, p: tf.Tensor) -> tf.Tensor:
        return tf.tanh(tf.split(p, 2, axis=-1)[0])

    def sample_uniform(self, batch_size: int, rng: np.random.Generator
                       ) -> Tuple[np.ndarray, float]:
        actions = rng.uniform(-1.0, 1.0, (batch_size, self.size)).astype(np.float32)
        return actions, -self.size * math.log(2.0)

    @property
    def rescaled(self) -> bool:
        return True


def _finite(space: gym.spaces.Box) -> bool:
    return bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))


def _leaves(space: gym.Space, path: str, squash: bool = False,
            rescale: bool = False) -> List[Leaf]:
    if isinstance(space, gym.spaces.Discrete):
        return [Categorical(int(space.n), int(space.start))]
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec, start = np.asarray(space.nvec).ravel(), np.asarray(space.start).ravel()
        return [Categorical(int(n), int(s)) for n, s in zip(nvec, start)]
    if isinstance(space, gym.spaces.Box):
        if not np.issubdtype(space.dtype, np.floating):
            raise UnsupportedSpaceError(
                    f'action space{path} is an integer Box {space}; use Discrete or '
                    'MultiDiscrete for integer actions')
        if squash and not _finite(space):
            raise UnsupportedSpaceError(
                    f'action space{path} {space} has infinite bounds; a squashed (tanh) '
                    'policy needs finite ones')
        size = int(np.prod(space.shape))
        return [TanhGaussian(size) if squash else Gaussian(size, rescale and _finite(space))]
    if isinstance(space, gym.spaces.Tuple):
        return [l for i, s in enumerate(space.spaces)
                for l in _leaves(s, f'{path}[{i}]', squash, rescale)]
    if isinstance(space, gym.spaces.Dict):
        return [l for k, s in space.spaces.items()
                for l in _leaves(s, f'{path}[{k!r}]', squash, rescale)]
    raise UnsupportedSpaceError(
            f'action space{path} {space} is not supported (supported: Discrete, '
            'MultiDiscrete, Box, and Tuple/Dict of those)')


class ActionSpace:
    """The flat leaves of a gymnasium action space, and distributions over them.

    Each method applies the leaves' own methods in order and sums (log-probability,
    entropy, KL) or collects (everything else) the per-leaf results.
    """

    def __init__(self, space: gym.Space, squash: bool = False, rescale: bool = False):
        """`squash`: Box actions as tanh-squashed Gaussians (SAC); `rescale`: unsquashed
        ones with finite bounds in [-1, 1] units (`Gaussian.unit`)."""
        self.space = space
        self.squash = squash
        self.leaves: Tuple[Leaf, ...] = tuple(_leaves(space, '', squash, rescale))

    # --- sizes and specs --------------------------------------------------

    @property
    def param_sizes(self) -> List[int]:
        return [l.param_size for l in self.leaves]

    @property
    def encoding_size(self) -> int:
        return sum(l.encoding_size for l in self.leaves)

    @property
    def is_discrete(self) -> bool:
        return all(l.discrete for l in self.leaves)

    def action_specs(self) -> Tuple[tf.TensorSpec, ...]:
        """Per-leaf spec of one action (no batch dimension)."""
        return tuple(l.action_spec() for l in self.leaves)

    def param_specs(self) -> Tuple[tf.TensorSpec, ...]:
        return tuple(tf.TensorSpec([l.param_size], tf.float32) for l in self.leaves)

    # --- distributions (all sum over leaves) ------------------------------

    def split_params(self, flat_params: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        """`[..., sum(param_sizes)]` -> per-leaf params; clips Gaussian log-stds."""
        parts = tf.split(flat_params, self.param_sizes, axis=-1)
        return tuple(leaf.clip_params(p) for leaf, p in zip(self.leaves, parts))

    def log_prob(self, params: Sequence[tf.Tensor], actions: Sequence[tf.Tensor]) -> tf.Tensor:
        """Log-probability of `actions` (per-leaf `[...]`), summed over leaves: `[...]`."""
        total = 0.0
        for leaf, p, a in zip(self.leaves, params, actions):
            total += leaf.log_prob(p, a)
        return total

    def entropy(self, params: Sequence[tf.Tensor]) -> tf.Tensor:
        """Entropy summed over leaves: `[...]`; ValueError for a tanh-squashed leaf."""
        total = 0.0
        for leaf, p in zip(self.leaves, params):
            total += leaf.entropy(p)
        return total

    def kl_divergence(self, params_p: Sequence[tf.Tensor],
                      params_q: Sequence[tf.Tensor]) -> tf.Tensor:
        """KL(p || q) summed over leaves: `[...]`."""
        total = 0.0
        for leaf, p, q in zip(self.leaves, params_p, params_q):
            total += leaf.kl_divergence(p, q)
        return total

    def policy_spec(self) -> List[dict]:
        """Each leaf's distribution kind and parameter width (an export's specs), and
        `units` for a Gaussian in [-1, 1] units (whose params mean other actions)."""
        return [{'kind': type(leaf).__name__, 'param_size': leaf.param_size,
                 **({'units': UNIT_RANGE} if isinstance(leaf, Gaussian) and leaf.unit else {})}
                for leaf in self.leaves]

    def sample(self, params: Sequence[tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        """One action per row: params `[B, ...]` -> per-leaf `[B]` / `[B, d]`."""
        return tuple(leaf.sample(p) for leaf, p in zip(self.leaves, params))

    def mode(self, params: Sequence[tf.Tensor]) -> Tuple[tf.Tensor, ...]:
        """The most likely action (argmax / mean) per leaf."""
        return tuple(leaf.mode(p) for leaf, p in zip(self.leaves, params))

    def encode(self, actions: Sequence[tf.Tensor]) -> tf.Tensor:
        """Actions as a core input: one-hot categorical leaves, raw Gaussian ones.

        Per-leaf `[...]` / `[..., d]` -> `[..., encoding_size]`.
        """
        return tf.concat([leaf.encode(a) for leaf, a in zip(self.leaves, actions)], -1)

    def sample_uniform(self, batch_size: int, rng: np.random.Generator,
                       mask: Optional[np.ndarray] = None
                       ) -> Tuple[Tuple[np.ndarray, ...], np.ndarray]:
        """Uniformly random actions (SAC's `learning_starts` phase), numpy.

        Returns (per-leaf actions `[B]` / `[B, d]`, their log-density `[B]`);
        unsquashed Gaussian leaves have no uniform distribution (ValueError).
        `mask` `[B, mask_size]` (see `mask_params`): uniform over the allowed actions.
        """
        if mask is not None:
            logits = self.mask_params(
                tuple(np.zeros([batch_size, n], np.float32) for n in self.param_sizes),
                np.asarray(mask), np.where)
            actions, log_prob = [], np.zeros([batch_size], np.float32)
            for p in logits:
                allowed = p > MASKED_LOGIT
                actions.append((p + rng.gumbel(size=p.shape)).argmax(-1).astype(np.int32))
                log_prob -= np.log(allowed.sum(-1)).astype(np.float32)
            return tuple(actions), log_prob
        actions, log_prob = [], 0.0
        for leaf in self.leaves:
            action, leaf_log_prob = leaf.sample_uniform(batch_size, rng)
            actions.append(action)
            log_prob += leaf_log_prob
        return tuple(actions), np.full([batch_size], log_prob, np.float32)

    # --- action masks -------------------------------------------------------

    @property
    def mask_size(self) -> int:
        """Width of an action mask: one entry per action of every categorical leaf,
        leaves concatenated (the gymnasium / PettingZoo `action_mask` convention)."""
        return sum(leaf.size for leaf in self.leaves)

    def check_maskable(self) -> None:
        """Raises `UnsupportedSpaceError` unless every leaf is categorical."""
        if not self.is_discrete:
            raise UnsupportedSpaceError(
                f'an action mask needs purely discrete actions (Discrete or MultiDiscrete), '
                f'got {self.space}')

    def mask_params(self, params: Sequence[Any], mask: Any, where=tf.where) -> Tuple[Any, ...]:
        """Per-leaf logits `[N, n_i]` with the forbidden actions' set to `MASKED_LOGIT`.

        `mask` `[N, mask_size]`: 1 (or any value > 0) where an action is allowed,
        each leaf's entries in leaf order. `where`: `tf.where`, or `np.where` for
        numpy values.
        """
        masked, offset = [], 0
        for leaf, p in zip(self.leaves, params):
            allowed = mask[:, offset:offset + leaf.size] > 0
            offset += leaf.size
            masked.append(where(allowed, p, MASKED_LOGIT))
        return tuple(masked)

    # --- conversion to and from the environment's nest --------------------

    def to_env(self, actions: Sequence[np.ndarray]) -> Any:
        """Batched per-leaf numpy actions -> the batched nest the vector env takes.

        Gaussian actions are clipped to the Box bounds here (the stored action
        keeps the unclipped sample, whose log-probability the learner needs);
        actions in [-1, 1] units (squashed, or `Gaussian.unit`) are rescaled to them.
        """
        it = iter(zip(self.leaves, actions))

        def build(space):
            if isinstance(space, gym.spaces.Discrete):
                leaf, a = next(it)
                return leaf.to_env(a, space)
            if isinstance(space, gym.spaces.MultiDiscrete):
                cols = [leaf.to_env(a, space)
                        for leaf, a in itertools.islice(it, int(np.prod(space.nvec.shape)))]
                return np.stack(cols, -1).reshape((-1,) + space.nvec.shape).astype(space.dtype)
            if isinstance(space, gym.spaces.Box):
                leaf, a = next(it)
                return leaf.to_env(a, space)
            if isinstance(space, gym.spaces.Tuple):
                return tuple(build(s) for s in space.spaces)
            return {k: build(s) for k, s in space.spaces.items()}

        return build(self.space)

    def from_env(self, env_actions: Any) -> Tuple[np.ndarray, ...]:
        """The batched nest of environment actions -> per-leaf numpy actions."""
        leaves = iter(self.leaves)
        out = []

        def walk(space, a):
            if isinstance(space, (gym.spaces.Discrete, gym.spaces.Box)):
                out.append(next(leaves).from_env(a, space))
            elif isinstance(space, gym.spaces.MultiDiscrete):
                a = np.asarray(a).reshape(len(a), -1)
                for i in range(a.shape[1]):
                    out.append(next(leaves).from_env(a[:, i], space))
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


def env_action_tensor(space: gym.Space, rescaled: bool, leaves: Sequence[tf.Tensor]) -> tf.Tensor:
    """Batched per-leaf actions `[B, ...]` -> the environment's format as one tensor, in
    the graph (`ActionSpace.to_env` is the numpy version): a `Discrete` index plus its
    `start`, a `MultiDiscrete` array of them, a `Box` action clipped to the bounds
    (one in [-1, 1] units, `rescaled`, first rescaled to them)."""
    dtype = tf.as_dtype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return tf.cast(leaves[0], dtype) + int(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        flat = tf.stack(leaves, -1) + np.asarray(space.start, np.int32).ravel()
        return tf.cast(tf.reshape(flat, [-1, *space.nvec.shape]), dtype)
    action = tf.reshape(leaves[0], [-1, *space.shape])
    if rescaled:
        action = from_unit_interval(tf.clip_by_value(action, -1.0, 1.0), space.low, space.high)
    return tf.cast(tf.clip_by_value(action, space.low, space.high), dtype)


def gaussian_log_prob(params: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """Diagonal Gaussian log-density: params `[..., 2 d]` (mean, log-std), x `[..., d]` -> `[...]`."""
    mean, log_std = tf.split(params, 2, axis=-1)
    z = (x - mean) * tf.exp(-log_std)
    return tf.reduce_sum(-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi), -1)


def gaussian_kl(p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
    """KL(p || q) of diagonal Gaussians: params `[..., 2 d]` (mean, log-std) -> `[...]`.
    Also the KL of their tanh-squashed (and rescaled) versions: KL divergence is
    unchanged when both distributions go through the same bijection."""
    mp, lsp = tf.split(p, 2, axis=-1)
    mq, lsq = tf.split(q, 2, axis=-1)
    return tf.reduce_sum(
        lsq - lsp + (tf.exp(2 * lsp) + tf.square(mp - mq)) / (2 * tf.exp(2 * lsq)) - 0.5, -1)


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
