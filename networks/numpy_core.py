"""A numpy mirror of `ActorCriticCore.__call__` plus action sampling, for actors.

Why: on the 2-core machines this library targets, one `tf.function` call
costs about 1-2 ms however small the graph (dispatch and executor overhead),
which caps a 16-environment actor near 8k env steps/s and, in-process, takes
the GIL from the learner. The same step in numpy takes ~0.1-0.3 ms.

The Sonnet core stays the definition. `NumpyCore` walks its parts
(`ActorCriticCore.parts`) and builds one mirror per part from the part's exact
type (a subclass may behave differently, so it is refused too), and one per
action leaf class; a part or leaf class without a mirror raises a ValueError
naming it, so the mirror never silently diverges from the core, and such
cores act through the TF path. Mirrored: the running normalizer, an mlp torso
over one Box observation, the previous step, the LSTM memory, the policy head
(Categorical, Gaussian and TanhGaussian leaves) and the baseline head. The
mirror reads the core's variables again on `refresh()` (after every weight
fetch); `tests/networks/test_numpy_core.py` checks that both give the same
outputs.
"""

import math
from typing import Any, Dict, List, Tuple

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from networks.cores import (
    ActorCriticCore, AdvantageHead, BaselineHead, CoreParts, LSTMMemory, PolicyHead,
    PreviousStep, QHead)
from networks.distributions import (
    LOG_STD_MAX, LOG_STD_MIN, ActionSpace, Categorical, Gaussian, Leaf, TanhGaussian)
from networks.normalizer import RunningNormalizer
from networks.observations import ObservationTorso


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
# reading variables: they may not exist yet) and reads the variables in `refresh`.

class _NormalizerMirror:
    def __init__(self, part: RunningNormalizer):
        self._part = part

    def refresh(self) -> None:
        self._mean = self._part.mean.numpy()
        self._variance = self._part.variance.numpy()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """`[B, D]` float32 -> standardised and clipped `[B, D]`."""
        clip = self._part.clip
        z = (x - self._mean) / np.sqrt(self._variance + self._part.epsilon)
        return np.clip(z, -clip, clip).astype(np.float32)


class _TorsoMirror:
    def __init__(self, part: ObservationTorso):
        if part.kind != 'mlp':
            raise ValueError(f'NumpyCore has no mirror of a {part.kind} torso; it mirrors '
                             'an mlp torso over one Box observation')
        if not isinstance(part.space, gym.spaces.Box):
            raise ValueError(f'NumpyCore has no mirror of a torso over a '
                             f'{type(part.space).__name__} observation space; it mirrors '
                             'an mlp torso over one Box observation')
        if part.net.activation is not tf.nn.relu:
            raise ValueError(f'NumpyCore has no mirror of an mlp torso with activation '
                             f'{part.net.activation!r}; it mirrors ReLU')
        self._part = part

    def refresh(self) -> None:
        self._layers = [(layer.w.numpy(), layer.b.numpy()) for layer in self._part.net.layers]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """`[B, D]` float32 (the flattened observation) -> features `[B, F]`."""
        for w, b in self._layers:
            x = np.maximum(x @ w + b, 0.0)
        return x


class _PreviousStepMirror:
    def __init__(self, part: PreviousStep):
        self._leaves = _leaf_mirrors(part.action_space)

    def refresh(self) -> None:
        pass  # no variables

    def __call__(self, x: np.ndarray, prev_action: Tuple[np.ndarray, ...],
                 prev_reward: np.ndarray, first: np.ndarray) -> np.ndarray:
        """`[B, F]` -> `[B, F + encoding_size + 1]`."""
        keep = (~first).astype(np.float32)[:, None]
        return np.concatenate(
            [x] + [m.encode(a) * keep for m, a in zip(self._leaves, prev_action)]
            + [prev_reward.astype(np.float32)[:, None] * keep], axis=1)


class _LSTMMirror:
    def __init__(self, part: LSTMMemory):
        self._part = part
        self.size = part.hidden_size

    def refresh(self) -> None:
        size = self.size
        w_i = self._part.input_to_hidden.numpy()
        w_h = self._part.hidden_to_hidden.numpy()
        b = self._part.b.numpy()
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
        self._leaves = _leaf_mirrors(part.action_space)

    def refresh(self) -> None:
        self._w, self._b = self._part.w.numpy(), self._part.b.numpy()

    def __call__(self, x: np.ndarray, rng: np.random.Generator, deterministic: bool
                 ) -> Tuple[tuple, tuple, np.ndarray]:
        """features `[B, H]` -> (action per leaf, params per leaf, log_prob `[B]`)."""
        flat_params = x @ self._w + self._b
        params, actions = [], []
        log_prob = np.zeros([x.shape[0]], np.float32)
        offset = 0
        for leaf in self._leaves:
            p = flat_params[:, offset:offset + leaf.param_size]
            offset += leaf.param_size
            a, p = leaf.act(p, rng, deterministic, log_prob)
            actions.append(a)
            params.append(p)
        return tuple(actions), tuple(params), log_prob


class _BaselineMirror:
    def __init__(self, part: BaselineHead):
        self._part = part

    def refresh(self) -> None:
        self._w, self._b = self._part.w.numpy(), self._part.b.numpy()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """features `[B, H]` -> `[B]`."""
        return (x @ self._w + self._b)[:, 0]


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
        self._policy = mirrors['policy_head']
        self._baseline = mirrors.get('baseline_head')
        self._mirrors: List[Any] = list(mirrors.values())
        self._deterministic = deterministic
        self._rng = np.random.default_rng(seed)
        self.refresh()

    @staticmethod
    def supports(core: ActorCriticCore) -> bool:
        """True iff every part of `core` has a numpy mirror."""
        try:
            _part_mirrors(core)
        except ValueError:
            return False
        return True

    def refresh(self) -> None:
        """Re-reads the core's variables (call after the weights changed)."""
        for mirror in self._mirrors:
            mirror.refresh()

    def initial_state(self, batch_size: int) -> Any:
        if self._memory is None:
            return ()
        return self._memory.initial_state(batch_size)

    def step(self, observation: np.ndarray, prev_action: Tuple[np.ndarray, ...],
             prev_reward: np.ndarray, first: np.ndarray, state: Any):
        """Same contract as `launch.actor.make_policy_step`'s function, numpy in and out.

        Returns (action per leaf, params per leaf, log_prob [B], baseline [B], new state).
        """
        batch = observation.shape[0]
        # The mlp torso flattens and casts the observation (the normalizer, which
        # needs a vector observation, sees the same values).
        x = observation.reshape(batch, -1).astype(np.float32, copy=False)
        if self._normalizer is not None:
            x = self._normalizer(x)
        x = self._torso(x)
        if self._previous_step is not None:
            x = self._previous_step(x, prev_action, prev_reward, first)
        if self._memory is not None:
            x, state = self._memory(x, first, state)
        actions, params, log_prob = self._policy(x, self._rng, self._deterministic)
        baseline = (np.zeros([batch], np.float32) if self._baseline is None
                    else self._baseline(x))
        return actions, params, log_prob, baseline.astype(np.float32), state
