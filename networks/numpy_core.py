"""A numpy mirror of `ActorCriticCore.__call__` plus action sampling, for actors.

Why: on the 2-core machines this library targets, one `tf.function` call
costs milliseconds however small the graph (dispatch and executor overhead),
several times the whole step in numpy; that caps a small actor's env steps
and, in-process, takes the GIL from the learner (measured:
docs/benchmarks.md#clear-and-acer-actor-and-learner).

The Sonnet core stays the definition. `NumpyCore` walks its parts
(`ActorCriticCore.parts`) and builds one mirror per part from the part's exact
type (a subclass may behave differently, so it is refused too), and one per
action leaf class; a part or leaf class without a mirror raises a ValueError
naming it, so the mirror never silently diverges from the core, and such
cores act through the TF path. Mirrored: the running normalizer; the torso:
an mlp over one observation, or a Tuple/Dict (or Discrete) observation's
members, its vectors flattened (Discrete one-hot) into an mlp and each image
through its own `nature_cnn` or `simple` torso (`torsos.ConvTorso`; not
`impala_resnet`); the previous step with its reward transform (read from
the part); the LSTM memory; the policy head (Categorical, Gaussian and
TanhGaussian leaves) and the baseline head. The mirror reads the core's
variables again on `refresh()` (after every weight fetch);
`tests/networks/test_numpy_core.py` checks that both give the same outputs.

Image torsos are mirrored for TF-free acting and checks, but `supports()` is
False for them, so actors keep the TF path there: a numpy convolution
(im2col + matmul) is slower than TF's (measured on the Nature CNN:
docs/benchmarks.md#pixels-minatar-and-atari).
"""

import math
from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf
from numpy.lib.stride_tricks import sliding_window_view

from reverb_agents.networks import torsos
from reverb_agents.networks.cores import (
    REWARD_CLIPPINGS, ActorCriticCore, AdvantageHead, BaselineHead, CoreParts, LSTMMemory,
    PolicyHead, PreviousStep, QHead)
from reverb_agents.networks.distributions import (
    LOG_STD_MAX, LOG_STD_MIN, ActionSpace, Categorical, Gaussian, Leaf, TanhGaussian)
from reverb_agents.networks.normalizer import RunningNormalizer
from reverb_agents.networks.observations import ObservationTorso, without_action_mask


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # overflow-free logistic


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# --- action leaves ------------------------------------------------------------

class _CategoricalMirror:
    def __init__(self, leaf: Categorical):
        self.param_size = leaf.param_size
        self._eye = np.eye(leaf.size, dtype=np.float32)

    def encode(self, a: np.ndarray) -> np.ndarray:
        """`[B]` -> one-hot `[B, size]`."""
        return self._eye[a]

    def act(self, p: np.ndarray, rng: np.random.Generator, deterministic: bool,
            log_prob: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """logits `[B, n]` -> (action `[B]` int32, params `[B, n]`); adds the action's
        log-probability to `log_prob` `[B]` in place."""
        logp = _log_softmax(p)
        if deterministic:
            a = p.argmax(-1)
        else:  # Gumbel-max sampling
            a = (logp + rng.gumbel(size=logp.shape)).argmax(-1)
        a = a.astype(np.int32)
        log_prob += logp[np.arange(len(a)), a]
        return a, p.astype(np.float32, copy=False)


class _GaussianMirror:
    squash = False

    def __init__(self, leaf: Leaf):
        self.param_size = leaf.param_size

    def encode(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a, np.float32)

    def act(self, p: np.ndarray, rng: np.random.Generator, deterministic: bool,
            log_prob: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """raw params `[B, 2 d]` -> (action `[B, d]`, params with the log-std clipped as
        `split_params` does); adds the action's log-density to `log_prob` in place."""
        mean, log_std = np.split(p, 2, axis=1)
        log_std = np.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)
        p = np.concatenate([mean, log_std], axis=1)
        u = mean if deterministic else (
            mean + np.exp(log_std) * rng.standard_normal(mean.shape))
        u = u.astype(np.float32)
        z = (u - mean) * np.exp(-log_std)
        log_prob += (-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        a = u
        if self.squash:
            a = np.tanh(u)
            # log |d tanh(u) / du|, stable for large |u|.
            log_prob -= (2.0 * (math.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))).sum(-1)
        return a, p.astype(np.float32, copy=False)


class _TanhGaussianMirror(_GaussianMirror):
    squash = True


_LEAF_MIRRORS = {Categorical: _CategoricalMirror, Gaussian: _GaussianMirror,
                 TanhGaussian: _TanhGaussianMirror}


def _leaf_mirrors(action_space: ActionSpace) -> list:
    mirrors = []
    for leaf in action_space.leaves:
        mirror = _LEAF_MIRRORS.get(type(leaf))
        if mirror is None:
            raise ValueError(f'NumpyCore has no mirror of a {type(leaf).__name__} action leaf')
        mirrors.append(mirror(leaf))
    return mirrors


# --- core parts -------------------------------------------------------------------
#
# Each mirror takes its part at construction (checking what it can mirror, without
# reading variables: they may not exist yet), names the tensors it needs in `reads`
# (its variables, traced once into `NumpyCore`'s one compiled read) and takes their
# values, in the same nest, in `refresh`.

class _NormalizerMirror:
    def __init__(self, part: RunningNormalizer):
        self._part = part

    def reads(self) -> list:
        return [self._part.mean, self._part.variance]

    def refresh(self, values: list) -> None:
        self._mean, self._variance = values

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """`[B, D]` float32 -> mapped (`RunningNormalizer.map`) and clipped `[B, D]`."""
        clip = self._part.clip
        if self._part.map == 'standardize':
            z = (x - self._mean) / np.sqrt(self._variance + self._part.epsilon)
        else:
            z = x / np.sqrt(self._variance + np.square(self._mean) + self._part.epsilon)
        return np.clip(z, -clip, clip).astype(np.float32)


# Activations by identity: a torso module with another one is refused.
_ACTIVATIONS = {
    tf.nn.relu: lambda x: np.maximum(x, 0.0),
    torsos.leaky_relu: lambda x: np.where(x < 0, np.float32(0.01) * x, x),
}


def _activation(net: snt.Module, what: str):
    activation = _ACTIVATIONS.get(net.activation)
    if activation is None:
        raise ValueError(f'NumpyCore has no mirror of {what} with activation '
                         f'{net.activation!r}; it mirrors ReLU and torsos.leaky_relu')
    return activation


class _MLPMirror:
    """`torsos.MLP`: `[B, D]` float32 (already flat) -> `[B, F]`."""

    def __init__(self, net: torsos.MLP):
        self._net = net
        self._activation = _activation(net, 'an mlp torso')

    def reads(self) -> list:
        return [(layer.w, layer.b) for layer in self._net.layers]

    def refresh(self, values: list) -> None:
        self._layers = values

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for w, b in self._layers:
            x = self._activation(x @ w + b)
        return x


def _conv_valid(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """A VALID 2-D convolution as `tf.nn.conv2d` computes it: x `[B, H, W, C]`, w
    `[k, k, C, O]` -> `[B, (H - k) // stride + 1, (W - k) // stride + 1, O]`, by one
    matmul over the image patches (im2col)."""
    k, _, c, o = w.shape
    patches = sliding_window_view(x, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    n, h, wd = patches.shape[:3]  # patches: [B, H', W', C, k, k]
    cols = patches.reshape(n * h * wd, c * k * k)
    return (cols @ w.transpose(2, 0, 1, 3).reshape(c * k * k, o) + b).reshape(n, h, wd, o)


class _ConvMirror:
    """`torsos.ConvTorso` (`NatureCNN`, `SimpleVisualEncoder`): `[B, H, W, C]` -> `[B, F]`."""

    def __init__(self, net: torsos.ConvTorso):
        self._net = net
        self._activation = _activation(net, f'a {type(net).__name__} torso')

    def reads(self) -> list:
        return [[(conv.w, conv.b) for conv in self._net.convs],
                (self._net.linear.w, self._net.linear.b)]

    def refresh(self, values: list) -> None:
        convs, self._linear = values
        self._convs = [(w, b, stride)
                       for (w, b), (_, _, stride) in zip(convs, self._net.conv_layers)]

    def __call__(self, images: np.ndarray) -> np.ndarray:
        # As `torsos._image_to_float`: uint8 scaled to [0, 1], float used as it is.
        x = images.astype(np.float32)
        if images.dtype == np.uint8:
            x /= np.float32(255.0)
        for w, b, stride in self._convs:
            x = self._activation(_conv_valid(x, w, b, stride))
        w, b = self._linear
        return self._activation(x.reshape(x.shape[0], -1) @ w + b)


# Exact types: a subclass may compute something else.
_NET_MIRRORS = {torsos.MLP: _MLPMirror, torsos.NatureCNN: _ConvMirror,
                torsos.SimpleVisualEncoder: _ConvMirror, torsos.MinAtarCNN: _ConvMirror}


def _net_mirror(net: snt.Module, kind: str):
    mirror = _NET_MIRRORS.get(type(net))
    if mirror is None:
        raise ValueError(f'NumpyCore has no mirror of a {kind} torso '
                         f'({type(net).__name__}); it mirrors mlp, nature_cnn and simple')
    return mirror(net)


class _TorsoMirror:
    """`ObservationTorso`: the observation nest (numpy, `observation_spec` dtypes,
    `[B, ...]` leaves) -> features `[B, F]`."""

    def __init__(self, part: ObservationTorso):
        # Structure is fixed at construction: read once (a Sonnet property costs a name
        # scope per access, too much for every step).
        self._nested = part.nested
        self.has_images = bool(part.image_nets) or part.kind in torsos.IMAGE_KINDS
        if not self._nested:  # one observation: its torso on the (flattened) value
            self._net = _net_mirror(part.net, part.kind)
            self._images: List[Tuple[int, Any]] = []
            self._flatten = part.kind == 'mlp'
            return
        self._images = [(i, _net_mirror(net, part.kind)) for i, net in part.image_nets]
        self._net = None if part.net is None else _net_mirror(part.net, 'mlp')
        image_leaves = {i for i, _ in self._images}
        # Per vector member: its index and, for a Discrete, (start, one-hot table).
        self._vectors = [
            (i, (int(s.start), np.eye(int(s.n), dtype=np.float32))
             if isinstance(s, gym.spaces.Discrete) else None)
            for i, s in enumerate(part.leaf_spaces) if i not in image_leaves]

    def reads(self) -> list:
        return [[mirror.reads() for _, mirror in self._images],
                [] if self._net is None else self._net.reads()]

    def refresh(self, values: list) -> None:
        images, net = values
        for (_, mirror), image in zip(self._images, images):
            mirror.refresh(image)
        if self._net is not None:
            self._net.refresh(net)

    def __call__(self, observation: Any) -> np.ndarray:
        if not self._nested:
            if self._flatten:  # as `torsos.MLP`: flattened, float32
                observation = np.asarray(observation).reshape(len(observation), -1)
                observation = observation.astype(np.float32, copy=False)
            return self._net(observation)
        values = tf.nest.flatten(observation)  # the order of `leaf_spaces`
        features = [mirror(values[i]) for i, mirror in self._images]
        if self._net is not None:
            parts = []
            for i, one_hot in self._vectors:
                value = np.asarray(values[i])
                if one_hot is None:
                    parts.append(value.reshape(len(value), -1).astype(np.float32, copy=False))
                else:
                    start, table = one_hot
                    parts.append(table[value.astype(np.int64) - start])
            features.append(self._net(np.concatenate(parts, axis=1)))
        return features[0] if len(features) == 1 else np.concatenate(features, axis=1)


def _transform_reward(r: np.ndarray, scaling: float, mode: str) -> np.ndarray:
    """`networks.cores.transform_reward` in numpy (float32 in, float32 out)."""
    x = r * np.float32(scaling)
    if mode == 'abs_one':
        return np.clip(x, -1.0, 1.0)
    if mode == 'soft_asymmetric':
        squeezed = np.tanh(x / np.float32(5.0))
        return np.where(x < 0, np.float32(0.3) * squeezed, squeezed) * np.float32(5.0)
    if mode == 'none':
        return x
    raise ValueError(f'unknown reward_clipping {mode!r}; choose one of {REWARD_CLIPPINGS}')


class _PreviousStepMirror:
    def __init__(self, part: PreviousStep):
        self._part = part
        self._leaves = _leaf_mirrors(part.action_space)

    def reads(self) -> list:
        return []  # no variables

    def refresh(self, values: list) -> None:
        pass

    def __call__(self, x: np.ndarray, prev_action: Tuple[np.ndarray, ...],
                 prev_reward: np.ndarray, first: np.ndarray) -> np.ndarray:
        """`[B, F]` -> `[B, F + encoding_size + 1]`."""
        keep = (~first).astype(np.float32)[:, None]
        prev_reward = np.asarray(prev_reward).astype(np.float32, copy=False)
        # Read from the part at every step: the mirror keeps no copy that could diverge.
        if self._part.reward_transform is not None:
            prev_reward = _transform_reward(prev_reward, *self._part.reward_transform)
        return np.concatenate(
            [x] + [m.encode(a) * keep for m, a in zip(self._leaves, prev_action)]
            + [prev_reward[:, None] * keep], axis=1)


class _LSTMMirror:
    def __init__(self, part: LSTMMemory):
        self._part = part
        self.size = part.hidden_size

    def reads(self) -> list:
        return [self._part.input_to_hidden, self._part.hidden_to_hidden, self._part.b]

    def refresh(self, values: list) -> None:
        size = self.size
        w_i, w_h, b = values
        # One matmul of [x, h] with the stacked weights instead of two, and the
        # gate columns reordered from Sonnet's (i, f, g, o) to (i, f, o, g) so
        # one logistic covers the three sigmoid gates.
        order = np.concatenate([np.arange(0, 2 * size), np.arange(3 * size, 4 * size),
                                np.arange(2 * size, 3 * size)])
        self._w = np.concatenate([w_i, w_h], axis=0)[:, order]
        self._b = b[order]

    def initial_state(self, batch_size: int) -> snt.LSTMState:
        zeros = np.zeros([batch_size, self.size], np.float32)
        return snt.LSTMState(hidden=zeros, cell=zeros.copy())

    def __call__(self, x: np.ndarray, first: np.ndarray, state: snt.LSTMState
                 ) -> Tuple[np.ndarray, snt.LSTMState]:
        """x `[B, E]`, first `[B]` -> (output `[B, H]`, state); the state restarts at zero
        where `first`."""
        size = self.size
        keep = (~first).astype(np.float32)[:, None]
        hidden, cell = state.hidden * keep, state.cell * keep
        gates = np.concatenate([x, hidden], axis=1) @ self._w + self._b
        sig = _sigmoid(gates[:, :3 * size])
        cell = sig[:, size:2 * size] * cell + sig[:, :size] * np.tanh(gates[:, 3 * size:])
        hidden = sig[:, 2 * size:] * np.tanh(cell)
        return hidden, snt.LSTMState(hidden=hidden, cell=cell)


class _PolicyMirror:
    def __init__(self, part: PolicyHead):
        self._part = part
        self._action_space = part.action_space
        self._leaves = _leaf_mirrors(part.action_space)
        self._hidden = None if part.hidden is None else _MLPMirror(part.hidden)

    def reads(self) -> list:
        return [self._part.w, self._part.b, self._hidden.reads() if self._hidden else []]

    def refresh(self, values: list) -> None:
        self._w, self._b, hidden = values
        if self._hidden is not None:
            self._hidden.refresh(hidden)

    def __call__(self, x: np.ndarray, rng: np.random.Generator, deterministic: bool,
                 mask: Optional[np.ndarray] = None) -> Tuple[tuple, tuple, np.ndarray]:
        """features `[B, H]` -> (action per leaf, params per leaf, log_prob `[B]`);
        `mask` `[B, n]`: the core's action mask (`ActionSpace.mask_params`)."""
        if self._hidden is not None:
            x = self._hidden(x)
        flat_params = x @ self._w + self._b
        leaf_params, offset = [], 0
        for leaf in self._leaves:
            leaf_params.append(flat_params[:, offset:offset + leaf.param_size])
            offset += leaf.param_size
        if mask is not None:
            leaf_params = self._action_space.mask_params(leaf_params, mask, np.where)
        params, actions = [], []
        log_prob = np.zeros([x.shape[0]], np.float32)
        for leaf, p in zip(self._leaves, leaf_params):
            a, p = leaf.act(p, rng, deterministic, log_prob)
            actions.append(a)
            params.append(p)
        return tuple(actions), tuple(params), log_prob


class _BaselineMirror:
    def __init__(self, part: BaselineHead):
        self._part = part

    def reads(self) -> list:
        # With PopArt's statistics `[tasks]` ((0, 1) without normalisation).
        return [self._part.w, self._part.b, *self._part.statistics()]

    def refresh(self, values: list) -> None:
        self._w, self._b, self._mean, self._std = values

    def __call__(self, x: np.ndarray, task: Optional[np.ndarray] = None) -> np.ndarray:
        """features `[B, H]` -> `[B]`, in the reward's units: each row's task's value
        (`task` `[B]`; None, or a head shared by all tasks: its one output)."""
        values = (x @ self._w + self._b) * self._std + self._mean  # [B, tasks]
        if task is None or values.shape[1] == 1:
            return values[:, 0]
        return np.take_along_axis(values, np.asarray(task, np.int64)[:, None], 1)[:, 0]


_PART_MIRRORS = {
    RunningNormalizer: _NormalizerMirror,
    ObservationTorso: _TorsoMirror,
    PreviousStep: _PreviousStepMirror,
    LSTMMemory: _LSTMMirror,
    PolicyHead: _PolicyMirror,
    BaselineHead: _BaselineMirror,
}
# Heads an actor does not use: the Q values and the advantage only enter the
# learner's losses, and `step` returns neither, so they have no mirror.
_NOT_USED_WHEN_ACTING = (QHead, AdvantageHead)


def _part_mirrors(core: ActorCriticCore) -> Dict[str, Any]:
    """A mirror per present part, by `CoreParts` field; ValueError naming the first
    part without one."""
    if type(core) is not ActorCriticCore:  # a subclass's step is its own (networks.shadowed)
        raise ValueError(f'NumpyCore has no mirror of {type(core).__name__}')
    mirrors = {}
    for field, part in zip(CoreParts._fields, core.parts):
        if part is None or type(part) in _NOT_USED_WHEN_ACTING:
            continue
        mirror = _PART_MIRRORS.get(type(part))
        if mirror is None:
            raise ValueError(f'NumpyCore has no mirror of the {field} part '
                             f'{type(part).__name__}')
        mirrors[field] = mirror(part)
    return mirrors


class NumpyCore:
    """`step(obs, prev_action, prev_reward, first, state)` in numpy, batched over `[B]`."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, seed: int,
                 deterministic: bool = False):
        """Raises ValueError when a part of `core` (or an action leaf class) has no
        numpy mirror, or when `action_space` is not the core's."""
        mirrors = _part_mirrors(core)
        if tuple(action_space.leaves) != tuple(core.action_space.leaves):
            raise ValueError(f'NumpyCore got the action leaves {action_space.leaves}, but the '
                             f'core acts over {core.action_space.leaves}')
        self._normalizer = mirrors.get('normalizer')
        self._torso = mirrors['torso']
        self._previous_step = mirrors.get('previous_step')
        self._memory = mirrors.get('memory')
        self._memory_skip = core.memory_skip
        self._policy = mirrors['policy_head']
        self._baseline = mirrors.get('baseline_head')
        self._masked = core.masked
        self._mirrors: List[Any] = list(mirrors.values())
        self._deterministic = deterministic
        self._rng = np.random.default_rng(seed)
        self._read = None  # `refresh`'s compiled read, traced at its first call
        # Eagerly at construction: the trace costs as much as some 20 eager reads, and a
        # mirror never refreshed after it (an evaluation's) would not repay it.
        self._load(self._reads())

    @staticmethod
    def unsupported(core: ActorCriticCore) -> Optional[str]:
        """Why actors of `core` cannot act through a mirror (a part without one, as a
        network of the user's own), or None."""
        try:
            _part_mirrors(core)
        except ValueError as e:
            return f'{e}: the numpy mirror follows the built-in parts only'
        return None

    @staticmethod
    def supports(core: ActorCriticCore) -> bool:
        """True iff actors should act through the mirror: every part of `core` has a
        numpy mirror (the constructor accepts it) and the torso has no image torso
        (mirrored, but slower than the TF path: see the module's doc)."""
        try:
            mirrors = _part_mirrors(core)
        except ValueError:
            return False
        return not mirrors['torso'].has_images

    def refresh(self) -> None:
        """Re-reads the core's variables (call after the weights changed; an actor's, after
        every weight fetch) in one compiled call: an eager read per variable costs about 4x
        as much."""
        if self._read is None:
            self._read = tf.function(
                lambda: tf.nest.map_structure(tf.identity, self._reads()),
                autograph=False).get_concrete_function()
        self._load(self._read())

    def _reads(self) -> List[Any]:
        """Each mirror's `reads()`: the tensors its `refresh` takes."""
        return [mirror.reads() for mirror in self._mirrors]

    def _load(self, values: List[Any]) -> None:
        for mirror, value in zip(self._mirrors, tf.nest.map_structure(lambda t: t.numpy(), values)):
            mirror.refresh(value)

    def initial_state(self, batch_size: int) -> Any:
        if self._memory is None:
            return ()
        return self._memory.initial_state(batch_size)

    def step(self, observation: Any, prev_action: Tuple[np.ndarray, ...],
             prev_reward: np.ndarray, first: np.ndarray, state: Any,
             task: Optional[np.ndarray] = None):
        """Same contract as `launch.acting.policy.make_policy_step`'s function, numpy in and out.

        `observation`: the nest of `observation_spec` (`[B, ...]` leaves); `task`
        `[B]` picks each row's baseline output (None: task 0).
        Returns (action per leaf, params per leaf, log_prob [B], baseline [B], new state).
        """
        batch = len(first)
        mask = None
        if self._masked:
            observation, mask = without_action_mask(observation)
            mask = np.asarray(mask)
        if self._normalizer is not None:  # a vector Box observation `[B, D]`
            observation = self._normalizer(np.asarray(observation, np.float32))
        x = self._torso(observation)
        if self._previous_step is not None:
            x = self._previous_step(x, prev_action, prev_reward, first)
        if self._memory is not None:
            memory, state = self._memory(x, first, state)
            x = np.concatenate([x, memory], -1) if self._memory_skip else memory
        actions, params, log_prob = self._policy(x, self._rng, self._deterministic, mask)
        baseline = (np.zeros([batch], np.float32) if self._baseline is None
                    else self._baseline(x, task))
        return actions, params, log_prob, baseline.astype(np.float32), state
