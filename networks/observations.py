"""Observation specs and the torso that embeds a (nest of) observation(s).

Supported observation spaces: `Box` (vectors, or `[H, W, C]` images), `Discrete`
(one-hot inside the network), `MultiBinary`, `MultiDiscrete`, and `Tuple` /
`Dict` of those: each image member through its own image torso, the other
members flattened and concatenated into one vector for an MLP (see
`ObservationTorso`). Anything else raises `UnsupportedSpaceError` with one line
naming the space.
"""

from typing import Any, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from reverb_agents.networks import torsos
from reverb_agents.networks.distributions import UnsupportedSpaceError

# The key of a `Dict` observation's action mask (the gymnasium / PettingZoo
# convention): one 0/1 entry per discrete action, 1 = allowed. The policy
# reads it (`networks.cores.ActorCriticCore`); the torso never sees it.
ACTION_MASK = 'action_mask'


def split_action_mask(space: gym.Space) -> Tuple[gym.Space, Optional[int]]:
    """(the space the torso embeds, the mask's width or None).

    A `Dict` with an `ACTION_MASK` key loses that key; any other space is unchanged.
    """
    if not (isinstance(space, gym.spaces.Dict) and ACTION_MASK in space.spaces):
        return space, None
    mask = space.spaces[ACTION_MASK]
    if not (isinstance(mask, (gym.spaces.Box, gym.spaces.MultiBinary)) and len(mask.shape) == 1):
        raise UnsupportedSpaceError(
            f'observation[{ACTION_MASK!r}] must be a vector (MultiBinary or Box) of one '
            f'0/1 entry per action, got {mask}')
    rest = {k: v for k, v in space.spaces.items() if k != ACTION_MASK}
    if not rest:
        raise UnsupportedSpaceError(f'an observation of nothing but {ACTION_MASK!r}')
    return gym.spaces.Dict(rest), int(mask.shape[0])


def exported_observation(space: gym.Space) -> Tuple[gym.Space, Optional[str], int]:
    """How a SavedModel takes observations of `space` (`launch.policies.export`): (the space of
    its `observation` input, that member's key in a masked `Dict` or None, the
    mask's width or 0). A masked `Dict` of one member besides the mask exports that
    member; any other space is returned as it is (the exporter refuses what it
    cannot take)."""
    rest, mask_size = split_action_mask(space)
    if mask_size is not None and len(rest.spaces) == 1:
        (key, member), = rest.spaces.items()
        return member, key, mask_size
    return rest, None, mask_size or 0


def without_action_mask(observation: Any) -> Tuple[Any, Any]:
    """(the observation without its `ACTION_MASK` entry, the mask); a dict of
    batched values in, the mask `[N, n]`."""
    rest = {k: v for k, v in observation.items() if k != ACTION_MASK}
    return rest, observation[ACTION_MASK]


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
    """Embeds a batch of observations `[N, ...]` (any supported nest) into `[N, F]`.

    One observation (a `Box`, `MultiBinary` or `MultiDiscrete`): the `kind` torso
    (`torsos.make_torso`; 'auto' picks the Nature CNN for an `[H, W, C]` image).

    A `Tuple` / `Dict` (or one `Discrete`, one-hot): the members in `tf.nest.flatten`
    order (a Dict's keys sorted) are split in two parts, as ML-Agents and SB3's
    `CombinedExtractor` split them:

    - images (rank-3 `Box` members): each through its own image torso of `kind`
      ('auto': 'nature_cnn'), `[N, H_i, W_i, C_i]` -> `[N, F_i]`; images may differ
      in size and channels, so encoders are not shared;
    - vectors (every other member, and images too when `kind='mlp'`): flattened
      (`Discrete` one-hot), concatenated, then one MLP (`hidden_sizes`) `[N, D]` ->
      `[N, F_v]` (with `hidden_sizes=()` the flat vector itself: the critics' encoder).

    Features: `concat([F_0, F_1, ..., F_v])`, the images' encodings in member order
    first. Raises `UnsupportedSpaceError` (one line naming the member) for an image
    kind without an image to encode or an image too small for its torso.
    """

    def __init__(self, space: gym.Space, kind: str = 'auto',
                 hidden_sizes: Sequence[int] = (64, 64), name: Optional[str] = None):
        super().__init__(name=name)
        self._space = space
        self._spec = observation_spec(space)
        # The attribute names below are the checkpoints' object paths: `_net` is the one
        # torso of a single observation, or the MLP of a nest (as before nests held
        # images), and `_image_nets` only exists for nests with images.
        self._single = (isinstance(self._spec, tf.TensorSpec)
                        and not isinstance(space, gym.spaces.Discrete))
        self._leaf_spaces: Tuple[gym.Space, ...] = tuple(tf.nest.flatten(_space_nest(space)))
        self._image_leaves: Tuple[int, ...] = ()
        if self._single:
            self._kind = torsos.resolve_kind(kind, len(self._spec.shape), self._spec.shape[:2])
            kwargs = {'hidden_sizes': hidden_sizes} if self._kind == 'mlp' else {}
            self._net = _make_torso(self._spec, kind, '', **kwargs)
            return
        torsos.resolve_kind(kind, 3)  # an unknown kind fails here, whatever the members
        if kind != 'mlp':  # 'mlp' flattens images with the vectors, as for one image
            self._image_leaves = tuple(
                i for i, s in enumerate(self._leaf_spaces)
                if isinstance(s, gym.spaces.Box) and len(s.shape) == 3)
        if torsos.ALIASES.get(kind, kind) in torsos.IMAGE_KINDS and not self._image_leaves:
            raise UnsupportedSpaceError(
                f'torso {kind!r} needs an image observation (a rank-3 Box), got {space}')
        self._kind = 'mlp'
        if self._image_leaves:
            specs, paths = tf.nest.flatten(self._spec), _leaf_paths(space)
            # 'auto' resolves per image: images of a nest may differ in size.
            kinds = [torsos.resolve_kind(kind, 3, specs[i].shape[:2]) for i in self._image_leaves]
            self._kind = kinds[0]
            self._image_nets = [
                _make_torso(specs[i], k, paths[i], name=f'image_torso_{n}')
                for n, (i, k) in enumerate(zip(self._image_leaves, kinds))]
        vectors = len(self._leaf_spaces) - len(self._image_leaves)
        self._net = torsos.MLP(hidden_sizes) if vectors else None

    @property
    def space(self) -> gym.Space:
        return self._space

    @property
    def kind(self) -> str:
        """The torso built ('auto' and aliases resolved): 'mlp' or one of
        `torsos.IMAGE_KINDS`. For a nest, its first image member's torso, or 'mlp' when
        every member is a vector."""
        return self._kind

    @property
    def nested(self) -> bool:
        """True for a Tuple/Dict (or Discrete) space: members encoded as the class says."""
        return not self._single

    @property
    def leaf_spaces(self) -> Tuple[gym.Space, ...]:
        """The space of each member, in `tf.nest.flatten(observation)` order."""
        return self._leaf_spaces

    @property
    def net(self) -> Optional[snt.Module]:
        """The `networks.torsos` module of one observation, or a nest's MLP over its
        flattened vector members (None when every member is an image)."""
        return self._net

    @property
    def image_nets(self) -> Tuple[Tuple[int, snt.Module], ...]:
        """(member index in `leaf_spaces`, image torso) per image member of a nest."""
        if not self._image_leaves:
            return ()
        return tuple(zip(self._image_leaves, self._image_nets))

    def _flat_vector(self, leaves: Sequence[Tuple[gym.Space, tf.Tensor]]) -> tf.Tensor:
        """(space, `[N, ...]` value) per vector member -> `[N, D]`."""
        parts = []
        for s, o in leaves:
            if isinstance(s, gym.spaces.Discrete):
                parts.append(tf.one_hot(tf.cast(o, tf.int32) - int(s.start), int(s.n)))
            else:
                o = tf.cast(o, tf.float32)
                parts.append(tf.reshape(o, [tf.shape(o)[0], int(np.prod(o.shape[1:]))]))
        return tf.concat(parts, -1)

    def __call__(self, observation: Any) -> tf.Tensor:
        """observation nest `[N, ...]` -> features `[N, F]`."""
        if self._single:
            return self._net(observation)
        values = tf.nest.flatten(observation)  # same order as `leaf_spaces`
        features = [net(values[i]) for i, net in self.image_nets]
        vectors = [(s, v) for i, (s, v) in enumerate(zip(self._leaf_spaces, values))
                   if i not in self._image_leaves]
        if vectors:
            features.append(self._net(self._flat_vector(vectors)))
        return features[0] if len(features) == 1 else tf.concat(features, -1)


def _make_torso(spec: tf.TensorSpec, kind: str, path: str, **kwargs) -> snt.Module:
    """`torsos.make_torso` for one member; a too small image becomes one line naming it."""
    try:
        return torsos.make_torso(spec.shape, spec.dtype, kind, **kwargs)
    except torsos.ImageTooSmallError as e:
        raise UnsupportedSpaceError(f'observation{path} {tuple(spec.shape)}: {e}') from None


def _leaf_paths(space: gym.Space, path: str = '') -> list:
    """Each member's path ('[0]', "['image']"), in `tf.nest.flatten` order (for errors)."""
    if isinstance(space, gym.spaces.Tuple):
        return [p for i, s in enumerate(space.spaces) for p in _leaf_paths(s, f'{path}[{i}]')]
    if isinstance(space, gym.spaces.Dict):
        return [p for k in sorted(space.spaces)
                for p in _leaf_paths(space.spaces[k], f'{path}[{k!r}]')]
    return [path]


def _space_nest(space: gym.Space) -> Any:
    """Tuple/Dict spaces as plain tuples/dicts of leaf spaces, for `tf.nest`."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_space_nest(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: _space_nest(s) for k, s in space.spaces.items()}
    return space
