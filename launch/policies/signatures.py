"""The tensors an exported policy's signatures take and give, for any nest of spaces.

A SavedModel signature takes and returns flat, named tensors, so nests are
flattened (`launch/policies/export.py` writes the signatures, `launch/policies/load.py` reads them):

- **observation**: one input per leaf of a `Tuple` / `Dict` observation (nested
  ones too), named `observation_<key or index>` with `_` between levels
  (`observation_image`, `observation_vector`, `observation_0`); a single tensor is
  `observation`. An action mask (`networks.observations.ACTION_MASK`) is its own
  input `action_mask` (float32 `[B, n]`); a masked `Dict` of one other member
  exports that member as `observation`.
- **action**: one output per component (`Discrete`, `MultiDiscrete` or `Box`) of a
  `Tuple` / `Dict` action, `action_<key or index>`, and the matching input
  `prev_action_<key or index>`; a single one is `action` / `prev_action`.

Names join with `_`, not `/`: TensorFlow rewrites a signature input that is not a
Python identifier (`observation/image` becomes `observation_image`) and logs a
warning on every call that uses the original name. A key with other characters
has them replaced by `_`; two leaves that would share a name are an `ExportError`.

`Part.describe` is what `specs.json` lists for each (`observation_inputs`,
`action_outputs`): the name, the path into the environment's nest (keys and
indices; `[]` for the whole), shape and dtype without the batch dimension.
"""

import re
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple, Union

import gymnasium as gym
import tensorflow as tf

from reverb_agents.launch.policies import load as policy
from reverb_agents.networks.observations import ACTION_MASK, exported_observation, observation_spec

PathElement = Union[str, int]  # a Dict key or a Tuple index


class ExportError(ValueError):
    """A policy this exporter cannot write."""


class Part(NamedTuple):
    """One flat tensor of a signature and where it lives in the environment's nest."""
    name: str  # the signature's key
    path: Tuple[PathElement, ...]  # keys / indices into the nest; () for the whole
    space: gym.Space  # the leaf's space
    spec: tf.TensorSpec  # shape and dtype of one row (no batch dimension)

    @property
    def prev_name(self) -> str:
        """An action component's input of the previous step."""
        return f'prev_{self.name}'

    def batched(self, name: str = '') -> tf.TensorSpec:
        """The spec `[None, ...]` of a signature argument (`name` or `self.name`)."""
        return tf.TensorSpec([None, *self.spec.shape], self.spec.dtype, name=name or self.name)

    def describe(self) -> Dict[str, Any]:
        return {'name': self.name, 'path': list(self.path), 'shape': self.spec.shape.as_list(),
                'dtype': self.spec.dtype.name}


def _leaves(space: gym.Space, path: Tuple[PathElement, ...] = ()) -> List[Tuple[tuple, gym.Space]]:
    """(path, leaf space) of every leaf, in the space's own order (a `Dict`'s keys as
    gymnasium keeps them: the order `networks.distributions` flattens actions in)."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, s in enumerate(space.spaces) for leaf in _leaves(s, path + (i,))]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for k, s in space.spaces.items() for leaf in _leaves(s, path + (k,))]
    return [(path, space)]


def _name(prefix: str, path: Sequence[PathElement]) -> str:
    return '_'.join([prefix] + [re.sub(r'\W', '_', str(p), flags=re.ASCII) for p in path])


def _unique(parts: List[Part]) -> List[Part]:
    names = [p.name for p in parts]
    for part in parts:
        if names.count(part.name) > 1:
            raise ExportError(f'two members of the nest export as {part.name!r} '
                              f'({[p.path for p in parts if p.name == part.name]}): rename a key')
    return parts


def observation_parts(space: gym.Space) -> List[Part]:
    """The inputs an observation of `space` feeds (the action mask last)."""
    member, key, mask_size = exported_observation(space)
    if key is not None:
        parts = [Part('observation', (key,), member, observation_spec(member))]
    else:
        parts = [Part(_name('observation', path), path, leaf, observation_spec(leaf))
                 for path, leaf in _leaves(member)]
    if mask_size:
        parts.append(Part(ACTION_MASK, (ACTION_MASK,), space[ACTION_MASK],
                          tf.TensorSpec([mask_size], tf.float32)))
    return _unique(parts)


def action_parts(space: gym.Space) -> List[Part]:
    """The outputs an action of `space` is made of, in `networks.distributions` leaf order."""
    def spec(leaf: gym.Space) -> tf.TensorSpec:
        if not isinstance(leaf, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box)):
            raise ExportError(f'export needs actions of Discrete, MultiDiscrete and Box '
                              f'components, got {leaf} in {space}')
        shape = () if isinstance(leaf, gym.spaces.Discrete) else leaf.shape
        return tf.TensorSpec(shape, tf.as_dtype(leaf.dtype))

    return _unique([Part(_name('action', path), path, leaf, spec(leaf))
                    for path, leaf in _leaves(space)])


def pack(parts: Sequence[Part], values: Sequence[Any]) -> Any:
    """The nest the parts' paths describe, holding `values` (one per part): the value
    itself for a path `()`, else dicts for keys and tuples for indices."""
    return policy.pack([part.path for part in parts], values)
