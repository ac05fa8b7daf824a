"""Observation specs and the torso that embeds a (nest of) observation(s).

Supported observation spaces: `Box` (vectors, or `[H, W, C]` images), `Discrete`
(one-hot inside the network), `MultiBinary`, `MultiDiscrete`, and `Tuple` /
`Dict` of non-image members (flattened and concatenated into one vector).
Anything else raises `UnsupportedSpaceError` with one line naming the space.
"""

from typing import Any, Optional, Sequence

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from networks import torsos
from networks.distributions import UnsupportedSpaceError


def _leaf_spec(space: gym.Space, path: str) -> tf.TensorSpec:
    if isinstance(space, gym.spaces.Box):
        dtype = tf.uint8 if space.dtype == np.uint8 else tf.float32
        return tf.TensorSpec(space.shape, dtype)
    if isinstance(space, gym.spaces.Discrete):
        return tf.TensorSpec([], tf.int32)
    if isinstance(space, (gym.spaces.MultiBinary, gym.spaces.MultiDiscrete)):
        return tf.TensorSpec(space.shape, tf.float32)
    raise UnsupportedSpaceError(
        f'observation space{path} {space} is not supported (supported: Box, '
        'Discrete, MultiBinary, MultiDiscrete, and Tuple/Dict of those)')


def observation_spec(space: gym.Space, path: str = '') -> Any:
    """The nest of `tf.TensorSpec` (no batch dimension) an observation is stored as."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(observation_spec(s, f'{path}[{i}]') for i, s in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Dict):
        return {k: observation_spec(s, f'{path}[{k!r}]') for k, s in space.spaces.items()}
    return _leaf_spec(space, path)


def to_numpy(space: gym.Space, observation: Any) -> Any:
    """A batched observation from the environment, cast to `observation_spec`."""
    return numpy_caster(space)(observation)


def numpy_caster(space: gym.Space):
    """A function casting batched observations to `observation_spec` (built once:
    actors call it every step)."""
    spec = observation_spec(space)
    if isinstance(spec, tf.TensorSpec):
        dtype = spec.dtype.as_numpy_dtype
        return lambda observation: np.asarray(observation, dtype)
    return lambda observation: tf.nest.map_structure(
        lambda s, o: np.asarray(o, s.dtype.as_numpy_dtype), spec, observation)


class ObservationTorso(snt.Module):
    """Embeds a batch of observations `[N, ...]` (any supported nest) into `[N, F]`."""

    def __init__(self, space: gym.Space, kind: str = 'auto',
                 hidden_sizes: Sequence[int] = (64, 64), name: Optional[str] = None):
        super().__init__(name=name)
        self._space = space
        self._spec = observation_spec(space)
        if isinstance(self._spec, tf.TensorSpec) and not isinstance(space, gym.spaces.Discrete):
            self._kind = torsos.resolve_kind(kind, len(self._spec.shape))
            kwargs = {'hidden_sizes': hidden_sizes} if self._kind == 'mlp' else {}
            self._net = torsos.make_torso(self._spec.shape, self._spec.dtype, kind, **kwargs)
        else:
            if kind not in ('auto', 'mlp'):
                raise ValueError(f'torso {kind!r} needs one image observation, got {space}')
            for s in tf.nest.flatten(self._spec):
                if len(s.shape) == 3:
                    raise UnsupportedSpaceError(
                        f'image observations inside a Tuple/Dict are not supported: {space}')
            self._kind = 'mlp'
            self._net = torsos.MLP(hidden_sizes)

    @property
    def space(self) -> gym.Space:
        return self._space

    @property
    def kind(self) -> str:
        """The torso built: 'mlp', 'nature_cnn' or 'impala_resnet' ('auto' resolved)."""
        return self._kind

    @property
    def net(self) -> snt.Module:
        """The `networks.torsos` module applied to the (flattened) observation."""
        return self._net

    def _flat_vector(self, observation: Any) -> tf.Tensor:
        parts = []
        spaces = tf.nest.flatten(_space_nest(self._space))  # same order as the values
        for s, o in zip(spaces, tf.nest.flatten(observation)):
            if isinstance(s, gym.spaces.Discrete):
                parts.append(tf.one_hot(tf.cast(o, tf.int32) - int(s.start), int(s.n)))
            else:
                o = tf.cast(o, tf.float32)
                parts.append(tf.reshape(o, [tf.shape(o)[0], int(np.prod(o.shape[1:]))]))
        return tf.concat(parts, -1)

    def __call__(self, observation: Any) -> tf.Tensor:
        if isinstance(self._spec, tf.TensorSpec) and not isinstance(self._space, gym.spaces.Discrete):
            return self._net(observation)
        return self._net(self._flat_vector(observation))


def _space_nest(space: gym.Space) -> Any:
    """Tuple/Dict spaces as plain tuples/dicts of leaf spaces, for `tf.nest`."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_space_nest(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: _space_nest(s) for k, s in space.spaces.items()}
    return space
