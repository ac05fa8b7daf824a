"""The actor-critic core: torso -> [prev action, prev reward] -> LSTM -> heads.

One module serves the actors (`__call__`, one step for a batch of
environments) and the learner (`unroll`, `[T, B]` sequences). Both reset the
recurrent state, and zero the previous action and reward, wherever `first` is
true, so an episode may start anywhere inside a sequence. With
`lstm_size=0` the core is feed-forward with the same interface; its state is
an empty tuple.
"""

from typing import Any, NamedTuple, Optional, Sequence, Tuple

import gymnasium as gym
import sonnet as snt
import tensorflow as tf

from networks.distributions import ActionSpace, UnsupportedSpaceError
from networks.normalizer import RunningNormalizer
from networks.observations import ObservationTorso


class CoreInputs(NamedTuple):
    """What the core sees at one step; leading dims `[B]` (step) or `[T, B]` (unroll)."""
    observation: Any  # nest of [..., *obs_shape]
    prev_action: Tuple[tf.Tensor, ...]  # per action leaf: [...] or [..., d]
    prev_reward: tf.Tensor  # [...]
    first: tf.Tensor  # [...] bool: a new episode starts here


class AgentOutput(NamedTuple):
    policy_params: Tuple[tf.Tensor, ...]  # per action leaf: [..., param_size]
    baseline: tf.Tensor  # [...]
    q_values: tf.Tensor  # [..., num_q_values] (width 0 when the core has no Q head)
    features: tf.Tensor  # [..., H]: what the heads see (the LSTM output)


def _merge(x: tf.Tensor) -> tf.Tensor:
    """[T, B, ...] -> [T * B, ...]."""
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


def _split(x: tf.Tensor, t_b: tf.Tensor) -> tf.Tensor:
    """[T * B, ...] -> [T, B, ...]."""
    return tf.reshape(x, tf.concat([t_b, tf.shape(x)[1:]], 0))


class ActorCriticCore(snt.RNNCore):
    """Policy and baseline over a recurrent (or feed-forward) state."""

    def __init__(self,
                 observation_space: gym.Space,
                 action_space: ActionSpace,
                 torso: str = 'auto',
                 hidden_sizes: Sequence[int] = (64, 64),
                 lstm_size: int = 128,
                 num_q_values: int = 0,
                 advantage_hidden_sizes: Optional[Sequence[int]] = None,
                 condition_on_previous: bool = True,
                 baseline: bool = True,
                 normalize_observations: bool = False,
                 name: Optional[str] = None):
        """`num_q_values > 0` adds a Q head (one value per discrete action, ACER);
        `advantage_hidden_sizes` adds an A(x, a) MLP (ACER's SDN, continuous);
        `condition_on_previous=False` leaves the previous action and reward out of
        the heads' input (SAC's pi(a | s) over a Markov state); `baseline=False`
        drops the value head (SAC's actor: its critics live in the learner), and
        `AgentOutput.baseline` is then zeros; `normalize_observations` standardises
        a vector observation with running statistics (`networks.normalizer`) that
        the learner updates."""
        super().__init__(name=name)
        self._action_space = action_space
        self.observation_space = observation_space
        self.condition_on_previous = condition_on_previous
        self._torso = ObservationTorso(observation_space, torso, hidden_sizes)
        self._normalizer = None
        if normalize_observations:
            if not (isinstance(observation_space, gym.spaces.Box)
                    and len(observation_space.shape) == 1):
                raise UnsupportedSpaceError(
                    f'observation normalisation needs a vector Box observation, got '
                    f'{observation_space}')
            self._normalizer = RunningNormalizer(int(observation_space.shape[0]),
                                                 name='observation_normalizer')
        self._lstm = snt.LSTM(lstm_size) if lstm_size > 0 else None
        self._policy_head = snt.Linear(
            sum(action_space.param_sizes), w_init=snt.initializers.Orthogonal(0.01),
            name='policy_head')
        self._baseline_head = snt.Linear(1, name='baseline_head') if baseline else None
        self._q_head = snt.Linear(num_q_values, name='q_head') if num_q_values else None
        self._advantage_net = (None if advantage_hidden_sizes is None else snt.nets.MLP(
            list(advantage_hidden_sizes) + [1], name='advantage_head'))

    @property
    def has_advantage_head(self) -> bool:
        return self._advantage_net is not None

    @property
    def features_size(self) -> int:
        """Width of `AgentOutput.features` (the heads' input); needs built variables."""
        return int(self._policy_head.w.shape[0])

    @property
    def recurrent(self) -> bool:
        return self._lstm is not None

    def numpy_parts(self) -> Optional[dict]:
        """The variables of each stage, for `networks.numpy_core`; None when the
        torso is not an MLP over one vector observation."""
        torso = self._torso.vector_mlp_layers()
        if torso is None:
            return None
        # snt.LSTM keeps its weights in `_w_i`, `_w_h` (no public names).
        lstm = None if self._lstm is None else (
            self._lstm._w_i, self._lstm._w_h, self._lstm.b)
        return {'torso': torso, 'lstm': lstm,
                'policy_head': (self._policy_head.w, self._policy_head.b),
                'baseline_head': (None if self._baseline_head is None
                                  else (self._baseline_head.w, self._baseline_head.b)),
                'normalizer': (None if self._normalizer is None
                               else (self._normalizer.mean, self._normalizer.variance))}

    def normalize_observation(self, observation: Any) -> Any:
        """The observation the torso sees (standardised when the core normalises)."""
        return observation if self._normalizer is None else self._normalizer(observation)

    def update_normalizer(self, observation: tf.Tensor) -> None:
        """Merges `[N, D]` observations into the running statistics (if any)."""
        if self._normalizer is not None:
            self._normalizer.update(observation)

    def initial_state(self, batch_size: int, **unused) -> Any:
        if self._lstm is None:
            return ()
        return self._lstm.initial_state(batch_size)

    def _embed(self, inputs: CoreInputs) -> tf.Tensor:
        """Per-row embedding, `[N, ...]` -> `[N, F + A + 1]` (`[N, F]` without the
        previous action and reward)."""
        features = self._torso(self.normalize_observation(inputs.observation))
        if not self.condition_on_previous:
            return features
        keep = 1.0 - tf.cast(inputs.first, tf.float32)[:, None]
        prev_action = self._action_space.encode(inputs.prev_action) * keep
        prev_reward = tf.cast(inputs.prev_reward, tf.float32)[:, None] * keep
        return tf.concat([features, prev_action, prev_reward], -1)

    def _heads(self, x: tf.Tensor) -> AgentOutput:
        params = self._action_space.split_params(self._policy_head(x))
        q_values = (self._q_head(x) if self._q_head is not None
                    else tf.zeros([tf.shape(x)[0], 0], tf.float32))
        baseline = (tf.squeeze(self._baseline_head(x), -1) if self._baseline_head is not None
                    else tf.zeros([tf.shape(x)[0]], tf.float32))
        return AgentOutput(params, baseline, q_values, x)

    def advantage(self, features: tf.Tensor, action: tf.Tensor) -> tf.Tensor:
        """A(x, a) of a stochastic dueling network (ACER, continuous actions).

        features `[N, H]` (`AgentOutput.features`), action `[N, d]` -> `[N]`.
        """
        if self._advantage_net is None:
            raise ValueError('this core was built without an advantage head')
        return tf.squeeze(self._advantage_net(tf.concat([features, action], -1)), -1)

    def _reset(self, first: tf.Tensor, state: Any) -> Any:
        initial = self.initial_state(tf.shape(first)[0])
        return tf.nest.map_structure(
            lambda s, i: tf.where(first[:, None], i, s), state, initial)

    def __call__(self, inputs: CoreInputs, prev_state: Any) -> Tuple[AgentOutput, Any]:
        """One step for a batch: inputs `[B, ...]` -> (outputs `[B, ...]`, state)."""
        x = self._embed(inputs)
        state = prev_state
        if self._lstm is not None:
            x, state = self._lstm(x, self._reset(inputs.first, prev_state))
        return self._heads(x), state

    def unroll(self, inputs: CoreInputs, initial_state: Any) -> Tuple[AgentOutput, Any]:
        """Sequences: inputs `[T, B, ...]` -> (outputs `[T, B, ...]`, final state).

        The torso and heads run once over all `T * B` rows; only the LSTM
        steps through time.
        """
        t_b = tf.shape(inputs.first)[:2]
        x = self._embed(tf.nest.map_structure(_merge, inputs))  # [T * B, E]
        state = initial_state
        if self._lstm is not None:
            x = _split(x, t_b)  # [T, B, E]
            # A while loop (not a Python loop) keeps the traced graph small:
            # tracing time no longer grows with T.
            num_steps = tf.shape(x)[0]
            outputs = tf.TensorArray(tf.float32, size=num_steps)

            def body(t, state, outputs):
                out, state = self._lstm(x[t], self._reset(inputs.first[t], state))
                return t + 1, state, outputs.write(t, out)

            _, state, outputs = tf.while_loop(
                lambda t, *_: t < num_steps, body, (0, state, outputs))
            x = _merge(outputs.stack())  # [T * B, H]
        out = self._heads(x)
        return tf.nest.map_structure(lambda y: _split(y, t_b), out), state
