"""A numpy mirror of `ActorCriticCore.__call__` plus action sampling, for actors.

Why: on the 2-core machines this library targets, one `tf.function` call
costs about 1-2 ms however small the graph (dispatch and executor overhead),
which caps a 16-environment actor near 8k env steps/s and, in-process, takes
the GIL from the learner. The same step in numpy takes ~0.1-0.3 ms. The
Sonnet core stays the definition: this module reads its variables (after
every weight fetch) and `tests/networks/test_numpy_core.py` checks that both
give the same outputs. It covers cores whose torso is an MLP over one vector
observation (`ActorCriticCore.numpy_parts()` is not None); other cores act
through the TF path.
"""

import math
from typing import Any, Tuple

import numpy as np
import sonnet as snt

from networks.cores import ActorCriticCore
from networks.distributions import LOG_STD_MAX, LOG_STD_MIN, ActionSpace


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # overflow-free logistic


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


class NumpyCore:
    """`step(obs, prev_action, prev_reward, first, state)` in numpy, batched over `[B]`."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, seed: int,
                 deterministic: bool = False):
        parts = core.numpy_parts()
        if parts is None:
            raise ValueError('NumpyCore needs an MLP torso over one vector observation')
        self._parts = parts
        self._condition_on_previous = core.condition_on_previous
        self._action_space = action_space
        self._deterministic = deterministic
        self._rng = np.random.default_rng(seed)
        self.refresh()

    @staticmethod
    def supports(core: ActorCriticCore) -> bool:
        return core.numpy_parts() is not None

    def refresh(self) -> None:
        """Re-reads the core's variables (call after the weights changed)."""
        as_numpy = lambda pair: tuple(v.numpy() for v in pair)  # noqa: E731
        self._torso = [as_numpy(layer) for layer in self._parts['torso']]
        self._lstm = None
        if self._parts['lstm'] is not None:
            w_i, w_h, b = as_numpy(self._parts['lstm'])
            size = w_h.shape[0]
            # One matmul of [x, h] with the stacked weights instead of two, and the
            # gate columns reordered from Sonnet's (i, f, g, o) to (i, f, o, g) so
            # one logistic covers the three sigmoid gates.
            order = np.concatenate([np.arange(0, 2 * size), np.arange(3 * size, 4 * size),
                                    np.arange(2 * size, 3 * size)])
            self._lstm = (np.concatenate([w_i, w_h], axis=0)[:, order], b[order], size)
        self._policy_head = as_numpy(self._parts['policy_head'])
        normalizer = self._parts['normalizer']
        self._normalizer = None if normalizer is None else as_numpy(normalizer)
        head = self._parts['baseline_head']
        self._baseline_head = None if head is None else as_numpy(head)

    def initial_state(self, batch_size: int) -> Any:
        if self._lstm is None:
            return ()
        size = self._lstm[2]
        zeros = np.zeros([batch_size, size], np.float32)
        return snt.LSTMState(hidden=zeros, cell=zeros.copy())

    def _encode(self, actions) -> list:
        return [np.eye(leaf.size, dtype=np.float32)[a] if leaf.kind == 'categorical'
                else np.asarray(a, np.float32) for leaf, a in zip(self._action_space.leaves, actions)]

    def step(self, observation: np.ndarray, prev_action: Tuple[np.ndarray, ...],
             prev_reward: np.ndarray, first: np.ndarray, state: Any):
        """Same contract as `launch.actor.make_policy_step`'s function, numpy in and out.

        Returns (action per leaf, params per leaf, log_prob [B], baseline [B], new state).
        """
        batch = observation.shape[0]
        x = observation.reshape(batch, -1).astype(np.float32, copy=False)
        if self._normalizer is not None:  # as networks.normalizer.RunningNormalizer
            mean, variance = self._normalizer
            x = np.clip((x - mean) / np.sqrt(variance + 1e-8), -5.0, 5.0).astype(np.float32)
        for w, b in self._torso:
            x = np.maximum(x @ w + b, 0.0)
        keep = (~first).astype(np.float32)[:, None]
        if self._condition_on_previous:
            x = np.concatenate([x] + [e * keep for e in self._encode(prev_action)]
                               + [prev_reward.astype(np.float32)[:, None] * keep], axis=1)
        if self._lstm is not None:
            w, b, size = self._lstm
            hidden, cell = state.hidden * keep, state.cell * keep
            gates = np.concatenate([x, hidden], axis=1) @ w + b
            sig = _sigmoid(gates[:, :3 * size])
            cell = sig[:, size:2 * size] * cell + sig[:, :size] * np.tanh(gates[:, 3 * size:])
            x = hidden = sig[:, 2 * size:] * np.tanh(cell)
            state = snt.LSTMState(hidden=hidden, cell=cell)
        flat_params = x @ self._policy_head[0] + self._policy_head[1]
        baseline = (np.zeros([batch], np.float32) if self._baseline_head is None
                    else (x @ self._baseline_head[0] + self._baseline_head[1])[:, 0])

        params, actions, log_prob = [], [], np.zeros([batch], np.float32)
        offset = 0
        for leaf in self._action_space.leaves:
            p = flat_params[:, offset:offset + leaf.param_size]
            offset += leaf.param_size
            if leaf.kind == 'categorical':
                logp = _log_softmax(p)
                if self._deterministic:
                    a = p.argmax(-1)
                else:  # Gumbel-max sampling
                    a = (logp + self._rng.gumbel(size=logp.shape)).argmax(-1)
                a = a.astype(np.int32)
                log_prob += logp[np.arange(batch), a]
            else:
                mean, log_std = np.split(p, 2, axis=1)
                log_std = np.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)
                p = np.concatenate([mean, log_std], axis=1)
                u = mean if self._deterministic else (
                    mean + np.exp(log_std) * self._rng.standard_normal(mean.shape))
                u = u.astype(np.float32)
                z = (u - mean) * np.exp(-log_std)
                log_prob += (-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
                a = u
                if leaf.kind == 'tanh_gaussian':
                    a = np.tanh(u)
                    # log |d tanh(u) / du|, stable for large |u|.
                    log_prob -= (2.0 * (math.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))).sum(-1)
            params.append(p.astype(np.float32, copy=False))
            actions.append(a)
        return tuple(actions), tuple(params), log_prob, baseline.astype(np.float32), state
