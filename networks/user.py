"""Networks of the user's own as a core's torso or memory: Keras layers and models,
Sonnet modules, Keras RNN cells and Sonnet RNN cores (docs/networks.md).

A torso factory is `f(observation_space, **torso_kwargs)` returning a
`tf.keras.layers.Layer` (a `Model` too) or an `snt.Module` that maps the
observation nest of one step, batched `[N, ...]` (a dict of tensors for a `Dict`
observation, the action mask taken out; leaves as stored: uint8 images stay
uint8, a `Discrete` is an int32 index), to features `[N, F]` float. For a `Dict`
observation it may instead return a dict of per-key Keras layers (each key's
leaf `[N, ...]` -> `[N, F_k]`), or `(that dict, combiner)` where the combiner
takes the list of per-key features in sorted key order (default: concatenate),
as TF-Agents' `preprocessing_layers` / `preprocessing_combiner`.

A memory factory is `f(**memory_kwargs)` returning a Keras RNN cell (anything
with `state_size`: `GRUCell`, `LSTMCell`, `StackedRNNCells`, a custom cell) or an
`snt.RNNCore`. Its state is kept as a flat tuple of `[B, ...]` float tensors (what
actors store and the learner replays), reset to the initial state where `first`.

Each core calls the factory itself, so every copy (an actor's, SAC's target
critics, ACER's average network) has layers of its own. What the factory returns
is checked once, with one line naming what is wrong (`NetworkError`): the type,
the output's rank, dtype and batch size on a probe batch, that there are
trainable variables, and layers this library refuses: those that behave
differently in training (`Dropout`, `BatchNormalization`: the importance weights
of off-policy learning assume the learner's policy is the one that acted;
`LayerNormalization` normalises without that) and weight or activity
regularizers (`layer.losses`, which no agent's loss adds).
"""

import copy
import importlib
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf
from absl import logging

from reverb_agents.networks import user_spec
from reverb_agents.networks.distributions import UnsupportedSpaceError
from reverb_agents.networks.observations import ObservationTorso, observation_spec

_PROBE_BATCH = 3  # rows of the check's zero batch (not 1: a squeezed batch shows)
_WARNED = set()  # the factories whose compiled optimizer this process said it ignores


class NetworkError(UnsupportedSpaceError):
    """A network of the user's own that this library cannot use (one line): the wiring
    reports it as it reports an unsupported space, before any process starts."""


def resolve(flag: str, spec: str) -> Callable[..., Any]:
    """The factory `spec` names (`MODULE:FUNCTION` or `<local>:NAME`); NetworkError (one
    line, the import's own message kept) when it cannot be imported or is not callable."""
    user_spec.check_spec(flag, spec)
    if user_spec.is_local(spec):
        try:
            return user_spec.local_factory(spec)
        except ValueError as e:
            raise NetworkError(f'--{flag}: {e}') from None
    module_name, attribute = spec.split(':')
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as e:  # an import runs the module: anything it raises
        raise NetworkError(f'--{flag}={spec}: cannot import {module_name} '
                           f'({type(e).__name__}: {e})') from None
    for part in attribute.split('.'):
        if not hasattr(value, part):
            raise NetworkError(f'--{flag}={spec}: {module_name} has no {attribute}')
        value = getattr(value, part)
    if not callable(value):
        raise NetworkError(f'--{flag}={spec}: {attribute} is a {type(value).__name__}, '
                           f'not a function')
    return value


def _call(flag: str, spec: str, factory: Callable[..., Any], *args: Any,
          **kwargs: Any) -> Any:
    """`factory(*args, **kwargs)`; what it raises becomes one NetworkError line."""
    try:
        return factory(*args, **kwargs)
    except TypeError as e:
        if kwargs and 'argument' in str(e):
            raise NetworkError(f'--{flag}={spec} does not take --{flag}_kwargs='
                               f'{user_spec.format_kwargs(flag, kwargs)}: {e}') from None
        raise NetworkError(f'--{flag}={spec} raised TypeError: {e}') from None
    except Exception as e:
        raise NetworkError(f'--{flag}={spec} raised {type(e).__name__}: {e}') from None


_TRAINING_BEHAVIOUR = tuple(c for c in (
    tf.keras.layers.Dropout, tf.keras.layers.BatchNormalization,
    tf.keras.layers.GaussianNoise, tf.keras.layers.GaussianDropout,
    tf.keras.layers.AlphaDropout, getattr(snt, 'BatchNorm', None),
    getattr(snt, 'Dropout', None)) if c is not None)


def _modules_of(net: Any) -> list:
    return [net] + list(net.submodules) if isinstance(net, tf.Module) else [net]


def _check_layers(flag: str, spec: str, nets: Sequence[Any]) -> None:
    """Refuses training-behaviour layers; a compiled model's optimizer and loss are
    ignored with one logged line."""
    for net in nets:
        for module in _modules_of(net):
            if isinstance(module, _TRAINING_BEHAVIOUR):
                raise NetworkError(
                    f'--{flag}={spec}: {type(module).__name__} behaves differently when '
                    f'training and acting, and off-policy learning (V-trace, Retrace, '
                    f'replay) assumes the policy that acted is the one learned; remove it '
                    f'(LayerNormalization normalises the same way in both)')
        if (isinstance(net, tf.keras.Model) and getattr(net, 'optimizer', None) is not None
                and spec not in _WARNED):  # once per process, not per copy
            _WARNED.add(spec)
            logging.warning('--%s=%s: the compiled model\'s own optimizer and loss are '
                            'ignored: the agent trains it with its losses', flag, spec)


def _check_no_losses(flag: str, spec: str, nets: Sequence[Any]) -> None:
    for net in nets:
        if isinstance(net, tf.keras.layers.Layer) and net.losses:
            raise NetworkError(
                f'--{flag}={spec}: its layers add losses (kernel, bias or activity '
                f'regularizers), which no agent adds to its own; remove the regularizers')


def _probe(spec_nest: Any, batch: int) -> Any:
    return tf.nest.map_structure(
        lambda s: tf.zeros([batch] + s.shape.as_list(), s.dtype), spec_nest)


class UserTorso(snt.Module):
    """A user's torso: observation nest `[N, ...]` -> features `[N, F]` float32."""

    def __init__(self, space: gym.Space, spec: str, kwargs: Optional[Mapping[str, Any]] = None,
                 flag: str = 'torso', name: str = 'user_torso'):
        """Calls the factory `spec` names with `(space, **kwargs)` and checks what it
        returns on a probe batch (module doc); raises NetworkError (one line)."""
        super().__init__(name=name)
        self.spec, self._space = spec, space
        built = _call(flag, spec, resolve(flag, spec), space, **dict(kwargs or {}))
        combiner = None
        if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], dict):
            built, combiner = built
        # The attribute names are the checkpoints' object paths.
        self._per_key: Optional[Dict[str, Any]] = None
        self._net = None
        if isinstance(built, dict):
            keys = sorted(space.spaces) if isinstance(space, gym.spaces.Dict) else None
            if keys is None or sorted(built) != keys:
                raise NetworkError(
                    f'--{flag}={spec} returned per-key layers for {sorted(built)}, but the '
                    f'observation is {space}: a dict needs one layer per key of a Dict '
                    f'observation')
            for key, layer in built.items():
                _check_kind(flag, spec, layer, f'[{key!r}]')
            self._per_key = dict(built)
            self._combiner = combiner
            nets = list(built.values()) + ([combiner] if isinstance(combiner, tf.Module) else [])
        else:
            _check_kind(flag, spec, built, '')
            self._net = built
            nets = [built]
        self.network_class = type(built).__name__ if self._net is not None else 'dict of layers'
        _check_layers(flag, spec, nets)
        probe = _probe(observation_spec(space), _PROBE_BATCH)
        out = self(probe, check=True, flag=flag)
        _check_no_losses(flag, spec, nets)
        if not param_count(self):
            raise NetworkError(f'--{flag}={spec} creates no trainable variable: the agent '
                               f'would learn nothing in it')
        self.output_size = int(out.shape[-1])

    def __call__(self, observation: Any, check: bool = False, flag: str = 'torso') -> tf.Tensor:
        """observation nest `[N, ...]` -> `[N, F]` float32."""
        if self._per_key is None:
            out = self._net(observation)
        else:
            parts = [self._per_key[k](observation[k]) for k in sorted(self._per_key)]
            if check:
                for key, part in zip(sorted(self._per_key), parts):
                    _check_output(flag, f'{self.spec} [{key!r}]', part)
            out = (self._combiner(parts) if self._combiner is not None
                   else tf.concat([tf.cast(p, tf.float32) for p in parts], -1))
        if check:
            _check_output(flag, self.spec, out)
        return tf.cast(out, tf.float32)


def _check_kind(flag: str, spec: str, net: Any, where: str) -> None:
    if not isinstance(net, (tf.keras.layers.Layer, snt.Module)):
        raise NetworkError(f'--{flag}={spec}{where} returned a {type(net).__name__}: expected a '
                           f'tf.keras layer or model, or a Sonnet module')


def _check_output(flag: str, spec: str, out: Any) -> None:
    """A rank-2 float tensor with the probe batch's rows."""
    ok = (isinstance(out, tf.Tensor) and out.shape.rank == 2 and out.dtype.is_floating
          and out.shape[0] == _PROBE_BATCH)
    if not ok:
        got = (f'{out.dtype.name} of shape {out.shape.as_list()}' if isinstance(out, tf.Tensor)
               else type(out).__name__)
        raise NetworkError(f'--{flag}={spec} must map a batch of {_PROBE_BATCH} observations '
                           f'to features [{_PROBE_BATCH}, F] (a rank-2 float tensor), got {got}')


# --- memory -------------------------------------------------------------------------


# Sequences at most this long are unrolled as a Python loop, traced whole: the same
# ops without the while loop's per-step overhead (docs/benchmarks.md#the-memorys-unroll).
# Longer or unknown lengths keep a while loop, whose traced graph does not grow with T.
STATIC_UNROLL_MAX_STEPS = 64


def unroll_memory(step: Callable[[tf.Tensor, tf.Tensor, Any], Tuple[tf.Tensor, Any]],
                  x: tf.Tensor, first: tf.Tensor, state: Any) -> Tuple[tf.Tensor, Any]:
    """`step(x_t, first_t, state)` over x `[T, B, E]`, first `[T, B]` -> (outputs
    `[T, B, H]`, final state): a Python loop where T is known when traced and at most
    STATIC_UNROLL_MAX_STEPS, a while loop otherwise."""
    static_steps = x.shape[0]
    if static_steps is not None and 0 < static_steps <= STATIC_UNROLL_MAX_STEPS:
        outputs = []
        for t in range(static_steps):
            out, state = step(x[t], first[t], state)
            outputs.append(out)
        return tf.stack(outputs), state
    num_steps = tf.shape(x)[0]
    outputs = tf.TensorArray(tf.float32, size=num_steps)

    def body(t, state, outputs):
        out, state = step(x[t], first[t], state)
        return t + 1, state, outputs.write(t, out)

    _, state, outputs = tf.while_loop(lambda t, *_: t < num_steps, body, (0, state, outputs))
    return outputs.stack(), state


def reset_state(first: tf.Tensor, state: Any, initial: Any) -> Any:
    """`state` with the rows where `first` `[B]` is true replaced by `initial`'s."""
    return tf.nest.map_structure(lambda s, i: tf.where(first[:, None], i, s), state, initial)


class LSTMMemory(snt.LSTM):
    """An LSTM whose state restarts from `initial_state` wherever `first` is true."""

    def __init__(self, hidden_size: int, name: str = 'lstm'):
        super().__init__(hidden_size, name=name)
        self.hidden_size = hidden_size

    def step(self, x: tf.Tensor, first: tf.Tensor, state: snt.LSTMState
             ) -> Tuple[tf.Tensor, snt.LSTMState]:
        """x `[B, E]`, first `[B]` -> (output `[B, H]`, state)."""
        return self(x, reset_state(first, state, self.initial_state(tf.shape(first)[0])))

    def unroll(self, x: tf.Tensor, first: tf.Tensor, state: snt.LSTMState
               ) -> Tuple[tf.Tensor, snt.LSTMState]:
        """x `[T, B, E]`, first `[T, B]` -> (outputs `[T, B, H]`, final state)."""
        return unroll_memory(self.step, x, first, state)


def _state_sizes(state_size: Any) -> Tuple[Tuple[int, ...], ...]:
    """A Keras cell's `state_size` (an int, a TensorShape or a nest of them) -> the
    trailing shape of each flat state tensor."""
    sizes = []
    for leaf in tf.nest.flatten(state_size):
        shape = tf.TensorShape(leaf).as_list() if not isinstance(leaf, int) else [leaf]
        sizes.append(tuple(int(s) for s in shape))
    return tuple(sizes)


class UserMemory(snt.Module):
    """A user's memory: a Keras RNN cell or an `snt.RNNCore` whose state restarts from
    the initial state wherever `first` is true. The state is a flat tuple of
    `[B, ...]` float32 tensors."""

    def __init__(self, spec: str, kwargs: Optional[Mapping[str, Any]] = None,
                 flag: str = 'memory', name: str = 'user_memory'):
        """Calls the factory `spec` names with `**kwargs` and checks the cell; raises
        NetworkError (one line)."""
        super().__init__(name=name)
        self.spec = spec
        cell = _call(flag, spec, resolve(flag, spec), **dict(kwargs or {}))
        if isinstance(cell, tf.keras.layers.RNN):
            raise NetworkError(f'--{flag}={spec} returned the RNN layer {type(cell).__name__}: '
                               f'return its cell (e.g. tf.keras.layers.GRUCell(64)), which the '
                               f'core steps itself')
        self._sonnet = isinstance(cell, snt.RNNCore)
        if not self._sonnet and not (isinstance(cell, tf.keras.layers.Layer)
                                     and hasattr(cell, 'state_size')):
            raise NetworkError(f'--{flag}={spec} returned a {type(cell).__name__}, which has no '
                               f'state_size: expected a Keras RNN cell (GRUCell, LSTMCell, '
                               f'StackedRNNCells, a custom cell) or an snt.RNNCore')
        _check_layers(flag, spec, [cell])
        self._cell = cell  # the checkpoints' object path
        self.network_class = type(cell).__name__
        if self._sonnet:
            self._structure = cell.initial_state(1)
            self._sizes = tuple(tuple(s.shape[1:]) for s in tf.nest.flatten(self._structure))
        else:
            self._sizes = _state_sizes(cell.state_size)
        self._flag = flag

    def initial_state(self, batch_size: Any) -> Tuple[tf.Tensor, ...]:
        if self._sonnet:
            return tuple(tf.cast(s, tf.float32)
                         for s in tf.nest.flatten(self._cell.initial_state(batch_size)))
        return tuple(tf.zeros(tf.concat([[batch_size], list(size)], 0) if size
                              else [batch_size]) for size in self._sizes)

    def __call__(self, x: tf.Tensor, state: Tuple[tf.Tensor, ...]
                 ) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
        if self._sonnet:
            out, new = self._cell(x, tf.nest.pack_sequence_as(self._structure, list(state)))
        else:  # a Keras cell takes its flat states as a list, as Keras' RNN layer gives them
            out, new = self._cell(x, list(state))
        new = tuple(tf.cast(s, tf.float32) for s in tf.nest.flatten(new))
        if len(new) != len(state):
            raise NetworkError(f'--{self._flag}={self.spec}: the cell returned {len(new)} '
                               f'state tensors, its state_size declares {len(state)}')
        return tf.cast(out, tf.float32), new

    def step(self, x: tf.Tensor, first: tf.Tensor, state: Tuple[tf.Tensor, ...]
             ) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
        """x `[B, E]`, first `[B]` -> (output `[B, H]`, state)."""
        return self(x, reset_state(first, state, self.initial_state(tf.shape(first)[0])))

    def unroll(self, x: tf.Tensor, first: tf.Tensor, state: Tuple[tf.Tensor, ...]
               ) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
        """x `[T, B, E]`, first `[T, B]` -> (outputs `[T, B, H]`, final state)."""
        return unroll_memory(self.step, x, first, state)

    def check(self, input_size: int) -> None:
        """One probe step `[3, input_size]`: the output a rank-2 float and trainable
        variables made; NetworkError (one line) otherwise."""
        probe = tf.zeros([_PROBE_BATCH, input_size])
        out, _ = self(probe, self.initial_state(_PROBE_BATCH))
        _check_output(self._flag, self.spec, out)
        _check_no_losses(self._flag, self.spec, [self._cell])
        if not param_count(self):
            raise NetworkError(f'--{self._flag}={self.spec} creates no trainable variable')


# --- torsos of either kind, and the Python API's factories --------------------------


def make_torso(space: gym.Space, torso: str, hidden_sizes: Sequence[int],
               torso_kwargs: str = '', name: Optional[str] = None) -> snt.Module:
    """A built-in `ObservationTorso` of kind `torso`, or a `UserTorso` when `torso` is
    `MODULE:FUNCTION` (`torso_kwargs`: its `key=value,...`)."""
    if user_spec.is_user_network(torso):
        kwargs = user_spec.parse_kwargs('torso_kwargs', torso_kwargs)
        return UserTorso(space, torso, kwargs, name=name or 'user_torso')
    if torso_kwargs:
        raise NetworkError(f'--torso_kwargs={torso_kwargs} is for a torso of your own '
                           f'(--torso=MODULE:FUNCTION), not the built-in {torso!r}')
    return ObservationTorso(space, torso, hidden_sizes, name=name)


def make_memory(memory: str, memory_kwargs: str = '') -> Optional[UserMemory]:
    """A `UserMemory` for `MODULE:FUNCTION`; None for ''."""
    if not memory:
        if memory_kwargs:
            raise NetworkError(f'--memory_kwargs={memory_kwargs} is for a memory of your own '
                               f'(--memory=MODULE:FUNCTION)')
        return None
    return UserMemory(memory, user_spec.parse_kwargs('memory_kwargs', memory_kwargs))


def spec_of(flag: str, network: Any) -> str:
    """The config text of what the Python API's `torso=` / `memory=` got: a name as it
    is; a function defined at module level of an importable module as
    `MODULE:FUNCTION` (every launcher can use it); anything else registered in this
    process (`<local>:NAME`, in-process runs only): a lambda, a closure, a function
    of `__main__`, or a layer or module object, which each core gets a copy of."""
    if isinstance(network, str):
        return network
    if isinstance(network, (tf.keras.layers.Layer, snt.Module)):
        return user_spec.register_local(type(network).__name__, _copier(flag, network))
    if not callable(network):
        raise ValueError(f'{flag} takes a built-in name, MODULE:FUNCTION, a function or a '
                         f'Keras layer / Sonnet module, got {network!r}')
    module, qualname = getattr(network, '__module__', None), getattr(network, '__qualname__', '')
    if module and module != '__main__' and '<' not in qualname:
        spec = f'{module}:{qualname}'
        try:
            if resolve(flag, spec) is network:
                return spec
        except NetworkError:
            pass
    return user_spec.register_local(getattr(network, '__name__', type(network).__name__),
                                    network)


def _copier(flag: str, network: Any) -> Callable[..., Any]:
    """A factory giving each core a fresh copy of a layer or module object: Keras by its
    config (`clone_model` for a Sequential or Functional model), Sonnet by deepcopy
    before any variable exists. ValueError (one line) for an object neither copies."""
    if isinstance(network, tf.keras.Model) and (network._is_graph_network  # pylint: disable=protected-access
                                               or isinstance(network, tf.keras.Sequential)):
        return lambda *args, **kwargs: tf.keras.models.clone_model(network)
    if isinstance(network, tf.keras.layers.Layer) and not isinstance(network, tf.keras.Model):
        try:
            type(network).from_config(network.get_config())
        except Exception as e:
            raise ValueError(f'{flag}: cannot copy the {type(network).__name__} from its config '
                             f'({type(e).__name__}: {e}); give a function that makes it') from None
        return lambda *args, **kwargs: type(network).from_config(network.get_config())
    if isinstance(network, snt.Module) and not tf.Module.variables.fget(network):
        return lambda *args, **kwargs: copy.deepcopy(network)
    raise ValueError(f'{flag}: a run builds several copies of the network (the learner\'s, '
                     f'the actors\', evaluation\'s), and a {type(network).__name__} with '
                     f'variables or a subclassed Keras model cannot be copied: give a '
                     f'function that makes it')


def param_count(module: Optional[tf.Module]) -> int:
    """Trainable parameters of `module` (0 for None or none; Sonnet's own property
    raises for a module without variables)."""
    if module is None:
        return 0
    return int(sum(np.prod(v.shape) for v in tf.Module.trainable_variables.fget(module)))
