"""The actor-critic core, built from parts: torso -> previous step -> memory -> heads.

- torso: an optional `RunningNormalizer` (vector observations), then the
  `ObservationTorso` that embeds the observation nest into features `[N, F]`;
- previous step (optional, `PreviousStep`): the previous action and reward
  appended to the features, the reward optionally scaled and clipped as the
  learner sees it (`reward_transform`);
- memory (optional, `LSTMMemory`): an LSTM; without it the core is
  feed-forward with the same interface, and its state is an empty tuple;
- heads, all reading the memory's output (`AgentOutput.features`): the policy
  (`PolicyHead`, always), and optionally a baseline (`BaselineHead`), Q values
  (`QHead`) and an advantage A(x, a) (`AdvantageHead`).

With `soft_q_policy` (discrete SAC as ALF does it) the policy head is a
`SoftQPolicyHead` instead: critics and temperatures whose per-branch logits are
min over replicas Q_b(s, .) / alpha_b; the torso is then the critics' shared
observation encoder, and the core has no previous step, memory or other head.

`ActorCriticCore.parts` lists them (`CoreParts`), which is how
`networks.numpy_core` builds its mirror. One module serves the actors
(`__call__`, one step for a batch of environments) and the learner (`unroll`,
`[T, B]` sequences). Both reset the recurrent state, and zero the previous
action and reward, wherever `first` is true, so an episode may start anywhere
inside a sequence.
"""

import math
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import gymnasium as gym
import sonnet as snt
import tensorflow as tf

from reverb_agents.networks.critics import CriticEnsemble
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError
from reverb_agents.networks.normalizer import RunningNormalizer
from reverb_agents.networks.observations import (
    ObservationTorso, observation_spec, split_action_mask, without_action_mask)
from reverb_agents.networks.popart import PopArtLinear
from reverb_agents.networks.torsos import MLP
from reverb_agents.networks.user import (
    LSTMMemory, UserMemory, UserTorso, make_memory, make_torso, param_count)


class CoreInputs(NamedTuple):
    """What the core sees at one step; leading dims `[B]` (step) or `[T, B]` (unroll)."""
    observation: Any  # nest of [..., *obs_shape]
    prev_action: Tuple[tf.Tensor, ...]  # per action leaf: [...] or [..., d]
    prev_reward: tf.Tensor  # [...]
    first: tf.Tensor  # [...] bool: a new episode starts here
    # [...] int32: the task of a task sequence; () (an empty nest, so that tf.nest maps
    # over inputs without one): task 0.
    task: Any = ()


class AgentOutput(NamedTuple):
    policy_params: Tuple[tf.Tensor, ...]  # per action leaf: [..., param_size]
    baseline: tf.Tensor  # [...]
    q_values: tf.Tensor  # [..., num_q_values] (width 0 when the core has no Q head)
    features: tf.Tensor  # [..., H]: what the heads see (the LSTM output)


def merge_time(x: tf.Tensor) -> tf.Tensor:
    """[T, B, ...] -> [T * B, ...]."""
    # Trailing sizes known at trace time make the shape a constant: 2 ops, not the 9 of
    # one computed in the graph, and every trace pays for each op in Python.
    rest = tf.TensorShape(x.shape)[2:]
    if rest.is_fully_defined():
        return tf.reshape(x, [-1] + rest.as_list())
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


def split_time(x: tf.Tensor, t_b: tf.Tensor) -> tf.Tensor:
    """[T * B, ...] -> [T, B, ...] (`t_b`: `[T, B]`)."""
    rest = tf.TensorShape(x.shape)[1:]
    rest = rest.as_list() if rest.is_fully_defined() else tf.shape(x)[1:]
    return tf.reshape(x, tf.concat([t_b, rest], 0))


# --- the previous reward's transform ------------------------------------------------
#
# The learners' reward transform lives here, with the core that feeds it to the
# LSTM, and `agents.returns` uses it (networks may not import agents:
# tests/test_structure.py), so the learner and the core cannot disagree.

REWARD_CLIPPINGS = ('abs_one', 'soft_asymmetric', 'none')
RewardTransform = Tuple[float, str]  # (scaling, clipping mode)


def check_reward_transform(reward_transform: Optional[RewardTransform]) -> None:
    """Raises ValueError unless `reward_transform` is None or (finite scaling, a mode
    of `REWARD_CLIPPINGS`)."""
    if reward_transform is None:
        return
    try:
        scaling, mode = reward_transform
        finite = math.isfinite(float(scaling))
    except (TypeError, ValueError):
        raise ValueError(f'reward_transform must be None or (scaling, clipping mode), got '
                         f'{reward_transform!r}') from None
    if not finite or mode not in REWARD_CLIPPINGS:
        raise ValueError(f'reward_transform must be (finite scaling, one of '
                         f'{REWARD_CLIPPINGS}), got {reward_transform!r}')


def transform_reward(r: tf.Tensor, scaling: float, mode: str) -> tf.Tensor:
    """`r * scaling`, then clipped: 'abs_one' to [-1, 1]; 'soft_asymmetric' IMPALA's
    `5 tanh(x / 5)`, times 0.3 below zero; 'none' unchanged. Any shape."""
    x = r * scaling
    if mode == 'abs_one':
        return tf.clip_by_value(x, -1.0, 1.0)
    if mode == 'soft_asymmetric':
        squeezed = tf.tanh(x / 5.0)
        return tf.where(x < 0, 0.3 * squeezed, squeezed) * 5.0
    if mode == 'none':
        return x
    raise ValueError(f'unknown reward_clipping {mode!r}; choose one of {REWARD_CLIPPINGS}')


# --- the parts ----------------------------------------------------------------
#
# Each part subclasses the Sonnet module that holds its variables (not a
# wrapper around it), so variable names stay `<core>/policy_head/w:0` and so on.

class PreviousStep(snt.Module):
    """Appends the previous action and reward to the features (no variables).

    Both are zeroed where `first` is true: they belong to the previous episode.
    `reward_transform` (scaling, clipping mode) feeds the reward as the learner
    sees it (`transform_reward`), as the A3C meta-RL and IMPALA seeds do; None: raw.
    """

    def __init__(self, action_space: ActionSpace,
                 reward_transform: Optional[RewardTransform] = None,
                 name: str = 'previous_step'):
        super().__init__(name=name)
        check_reward_transform(reward_transform)
        self.action_space = action_space
        self.reward_transform: Optional[RewardTransform] = (
            None if reward_transform is None
            else (float(reward_transform[0]), str(reward_transform[1])))

    def __call__(self, features: tf.Tensor, prev_action: Tuple[tf.Tensor, ...],
                 prev_reward: tf.Tensor, first: tf.Tensor) -> tf.Tensor:
        """features `[N, F]`, per-leaf prev_action `[N]` / `[N, d]`, prev_reward and
        first `[N]` -> `[N, F + encoding_size + 1]`."""
        keep = 1.0 - tf.cast(first, tf.float32)[:, None]
        prev_action = self.action_space.encode(prev_action) * keep
        prev_reward = tf.cast(prev_reward, tf.float32)
        if self.reward_transform is not None:
            prev_reward = transform_reward(prev_reward, *self.reward_transform)
        prev_reward = prev_reward[:, None] * keep
        return tf.concat([features, prev_action, prev_reward], -1)


class PolicyHead(snt.Linear):
    """Features `[N, H]` -> per-leaf distribution parameters `[N, param_size]`
    (log-stds clipped, `ActionSpace.split_params`); with `hidden_sizes`, an MLP of
    the policy's own (ReLU) between the features and the output layer."""

    def __init__(self, action_space: ActionSpace, hidden_sizes: Sequence[int] = (),
                 name: str = 'policy_head'):
        # Small initial weights: the first policy is close to uniform / zero-mean.
        super().__init__(sum(action_space.param_sizes),
                         w_init=snt.initializers.Orthogonal(0.01), name=name)
        self.action_space = action_space
        self.hidden = MLP(tuple(hidden_sizes), name='hidden') if hidden_sizes else None

    @property
    def features_size(self) -> int:
        """Width of the features it reads; needs built variables."""
        first = self.hidden.layers[0] if self.hidden is not None else self
        return int(first.w.shape[0])

    def __call__(self, features: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        if self.hidden is not None:
            features = self.hidden(features)
        return self.action_space.split_params(super().__call__(features))


def _task_rows(values: tf.Tensor, task: Optional[tf.Tensor]) -> tf.Tensor:
    """`[N, num_tasks, ...]` -> each row's task's entry `[N, ...]` (`task` `[N]`; None,
    or a single task: the first)."""
    if task is None or values.shape[1] == 1:
        return values[:, 0]
    return tf.gather(values, tf.cast(task, tf.int32), axis=1, batch_dims=1)


class BaselineHead(PopArtLinear):
    """Features `[N, H]` -> the state value `[N]`, in the reward's units; with
    `normalized`, learned in PopArt's normalised units (`networks.popart`).

    `num_tasks > 1` (a task sequence): one value output per task, each with its
    own PopArt statistics (Hessel et al. 2019's multi-task PopArt), so a task
    whose returns are 100 times another's does not set the other's scale; a
    row's value is its task's output (`task` `[N]`, None: task 0).
    """

    def __init__(self, normalized: bool = False, popart_step_size: float = 3e-4,
                 num_tasks: int = 1, name: str = 'baseline_head'):
        if num_tasks < 1:
            raise ValueError(f'num_tasks must be >= 1, got {num_tasks}')
        super().__init__(num_tasks, normalized=normalized, groups=num_tasks,
                         step_size=popart_step_size, count_per_group=num_tasks > 1,
                         name=name)

    def __call__(self, features: tf.Tensor, task: Optional[tf.Tensor] = None) -> tf.Tensor:
        return _task_rows(super().__call__(features), task)

    def normalized(self, features: tf.Tensor, task: Optional[tf.Tensor] = None) -> tf.Tensor:
        """features `[N, H]` -> the normalised value `[N]`."""
        return _task_rows(super().normalized(features), task)


class QHead(PopArtLinear):
    """Features `[N, H]` -> one value per discrete action `[N, num_values]` (ACER), in
    the reward's units; with `normalized`, one set of PopArt statistics for all.

    `num_tasks > 1`: a block of `num_values` outputs per task, each block with its own
    statistics; a row's values are its task's block (`task` `[N]`, None: task 0).
    """

    def __init__(self, num_values: int, normalized: bool = False,
                 popart_step_size: float = 3e-4, num_tasks: int = 1, name: str = 'q_head'):
        if num_tasks < 1:
            raise ValueError(f'num_tasks must be >= 1, got {num_tasks}')
        super().__init__(num_values * num_tasks, normalized=normalized, groups=num_tasks,
                         step_size=popart_step_size, count_per_group=num_tasks > 1, name=name)
        self.num_values = num_values

    def _task_block(self, values: tf.Tensor, task: Optional[tf.Tensor]) -> tf.Tensor:
        """`[N, num_tasks * num_values]` -> each row's task's values `[N, num_values]`."""
        if self.groups == 1:
            return values
        return _task_rows(tf.reshape(values, [-1, self.groups, self.num_values]), task)

    def __call__(self, features: tf.Tensor, task: Optional[tf.Tensor] = None) -> tf.Tensor:
        return self._task_block(super().__call__(features), task)

    def normalized(self, features: tf.Tensor, task: Optional[tf.Tensor] = None) -> tf.Tensor:
        """features `[N, H]` -> the normalised values `[N, num_values]`."""
        return self._task_block(super().normalized(features), task)


class AdvantageHead(snt.nets.MLP):
    """A(x, a) of a stochastic dueling network (ACER, continuous actions):
    features `[N, H]`, action `[N, d]` -> `[N]`. `num_tasks > 1`: one output per task
    (each scaled by its task's sigma), a row's being its task's (`task` `[N]`)."""

    def __init__(self, hidden_sizes: Sequence[int], num_tasks: int = 1,
                 name: str = 'advantage_head'):
        super().__init__(list(hidden_sizes) + [num_tasks], name=name)

    @property
    def output_layer(self) -> snt.Linear:
        """The last linear layer (PopArt rescales it with the value's sigma)."""
        return self._layers[-1]

    def __call__(self, features: tf.Tensor, action: tf.Tensor,
                 task: Optional[tf.Tensor] = None) -> tf.Tensor:
        return _task_rows(super().__call__(tf.concat([features, action], -1)), task)


class SoftQPolicySpec(NamedTuple):
    """What a `SoftQPolicyHead` is built from (`ActorCriticCore(soft_q_policy=...)`)."""
    num_replicas: int  # critics; the policy takes the minimum over them
    hidden_sizes: Tuple[int, ...]  # each critic's MLP
    initial_log_alpha: float  # every branch's log temperature at the start


class SoftQPolicyHead(snt.Module):
    """A policy with no actor network (ALF's SAC for purely discrete actions):
    per branch b, logits = min over replicas Q_b(s, .) / alpha_b.

    Owns the critics (`critics`, a `networks.critics.CriticEnsemble` with one
    output per action of each branch) and the temperatures (`log_alpha` `[branches]`),
    so a core with this head acts with nothing but its own variables; a learner
    trains both in place. Its input is the critics' encoding of the observation
    (`critics.encoder`, which the core uses as its torso): `[N, E]` -> per-branch
    logits `[N, n_b]`. Alpha enters as a constant (no gradient), as in ALF.
    """

    def __init__(self, observation_space: gym.Space, action_space: ActionSpace,
                 spec: SoftQPolicySpec, torso: str = 'auto', torso_kwargs: str = '',
                 name: str = 'soft_q_policy_head'):
        super().__init__(name=name)
        if not all(leaf.discrete for leaf in action_space.leaves):
            raise UnsupportedSpaceError(
                f'a policy from the critics (softmax(Q / alpha)) needs purely discrete actions '
                f'(Discrete or MultiDiscrete), got {action_space.space}')
        self.action_space = action_space
        self._branch_sizes = [leaf.size for leaf in action_space.leaves]
        self.critics = CriticEnsemble(observation_space, int(spec.num_replicas),
                                      tuple(spec.hidden_sizes), sum(self._branch_sizes), torso,
                                      torso_kwargs, name='critics')
        self.log_alpha = tf.Variable(
            tf.fill([len(self._branch_sizes)], float(spec.initial_log_alpha)), name='log_alpha')

    @property
    def encoder(self) -> ObservationTorso:
        return self.critics.encoder

    def q_values(self, features: tf.Tensor) -> tf.Tensor:
        """The encoder's output `[N, E]` -> every replica's Q `[R, N, sum n_b]`."""
        return self.critics.from_encoding(features)

    def __call__(self, features: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        q_min = tf.reduce_min(self.q_values(features), 0)
        alpha = tf.stop_gradient(tf.exp(self.log_alpha))
        return tuple(q / alpha[b] for b, q in
                     enumerate(tf.split(q_min, self._branch_sizes, axis=-1)))


class CoreParts(NamedTuple):
    """An `ActorCriticCore`'s parts in the order data flows through them; None: absent."""
    normalizer: Optional[RunningNormalizer]  # torso: maps a vector observation
    torso: Union[ObservationTorso, UserTorso]  # observation nest `[N, ...]` -> `[N, F]`
    previous_step: Optional[PreviousStep]  # + previous action and reward
    memory: Optional[Union[LSTMMemory, UserMemory]]  # None: feed-forward
    policy_head: Any  # PolicyHead, or SoftQPolicyHead (critics and temperatures)
    baseline_head: Optional[BaselineHead]
    q_head: Optional[QHead]
    advantage_head: Optional[AdvantageHead]


class ActorCriticCore(snt.RNNCore):
    """Policy and baseline over a recurrent (or feed-forward) state."""

    def __init__(self,
                 observation_space: gym.Space,
                 action_space: ActionSpace,
                 torso: str = 'auto',
                 hidden_sizes: Sequence[int] = (64, 64),
                 lstm_size: int = 128,
                 torso_kwargs: str = '',
                 memory: str = '',
                 memory_kwargs: str = '',
                 memory_skip: bool = False,
                 policy_hidden_sizes: Sequence[int] = (),
                 num_q_values: int = 0,
                 advantage_hidden_sizes: Optional[Sequence[int]] = None,
                 condition_on_previous: bool = True,
                 baseline: bool = True,
                 normalize_observations: bool = False,
                 observation_map: str = 'rms',
                 reward_transform: Optional[RewardTransform] = None,
                 soft_q_policy: Optional[SoftQPolicySpec] = None,
                 value_normalization: bool = False,
                 popart_step_size: float = 3e-4,
                 num_tasks: int = 1,
                 name: Optional[str] = None):
        """`num_q_values > 0` adds a Q head (one value per discrete action, ACER);
        `advantage_hidden_sizes` adds an A(x, a) MLP (ACER's SDN, continuous);
        `condition_on_previous=False` leaves the previous action and reward out of
        the heads' input (SAC's pi(a | s) over a Markov state); `baseline=False`
        drops the value head (SAC's actor: its critics live in the learner), and
        `AgentOutput.baseline` is then zeros; `normalize_observations` maps a vector
        observation with running statistics (`networks.normalizer`, its
        `observation_map`: 'rms' or 'standardize') that the learner updates;
        `reward_transform` (scaling, clipping mode: one of `REWARD_CLIPPINGS`) scales
        and clips the previous reward before the core sees it, as
        `agents.returns.transform_rewards` does for the learner (None: raw; ignored
        with `condition_on_previous=False`); `soft_q_policy` makes the policy
        head a `SoftQPolicyHead` (critics with `torso`, softmax(min Q / alpha), purely
        discrete actions) whose encoder is the torso (`hidden_sizes` unused); it needs
        `lstm_size=0`, `condition_on_previous=False`, `baseline=False` and no Q or
        advantage head. `value_normalization` learns the baseline and Q heads with
        PopArt (`networks.popart`, statistics moving by `popart_step_size`); their
        outputs stay in the reward's units, and the advantage head's output is
        scaled by the baseline's sigma. `num_tasks > 1` gives the baseline, the Q
        head and the advantage head one output (block) and one set of statistics
        per task, chosen by `CoreInputs.task`.

        A network of the user's own (`networks.user`, docs/networks.md): `torso`
        `MODULE:FUNCTION` (with `torso_kwargs`, `key=value,...`) replaces the built-in
        torso (`hidden_sizes` unused); `memory` `MODULE:FUNCTION` (with
        `memory_kwargs`) takes the LSTM's place and needs `lstm_size=0`.

        `memory_skip` passes the torso's features around the memory: the heads see
        them beside the memory's output (concatenated), so what needs no memory is
        read as a feed-forward core reads it (no effect without a memory).
        `policy_hidden_sizes` gives the policy head layers of its own after the
        features, which only the policy's loss trains where a learner's other losses
        also train the features (SAC's critics read them)."""
        # Long: its docstring documents each part a core is built from; the body checks and
        # assembles them.
        super().__init__(name=name)
        if memory and lstm_size:
            raise ValueError(f'--memory={memory} takes the LSTM\'s place: leave --lstm_size at 0 '
                             f'(got {lstm_size})')
        if soft_q_policy is not None and (lstm_size or memory or condition_on_previous or baseline
                                          or num_q_values or advantage_hidden_sizes is not None):
            raise ValueError('a soft-Q policy core is feed-forward with no other head: '
                             'lstm_size=0, condition_on_previous=False, baseline=False, '
                             'no Q or advantage head')
        self._action_space = action_space
        self.observation_space = observation_space
        self.condition_on_previous = condition_on_previous
        # An action mask (`networks.observations.ACTION_MASK`) goes to the policy only.
        torso_space, mask_size = split_action_mask(observation_space)
        self.masked = mask_size is not None
        if self.masked:
            action_space.check_maskable()
            if mask_size != action_space.mask_size:
                raise UnsupportedSpaceError(
                    f'the action mask has {mask_size} entries but the actions '
                    f'{action_space.space} need {action_space.mask_size}')
        # The attribute names below are the checkpoints' object paths.
        # Torso.
        self._normalizer = None
        if normalize_observations:
            if not (isinstance(observation_space, gym.spaces.Box)
                    and len(observation_space.shape) == 1):
                raise UnsupportedSpaceError(
                    f'observation normalisation needs a vector Box observation, got '
                    f'{observation_space}')
            self._normalizer = RunningNormalizer(int(observation_space.shape[0]),
                                                 map=observation_map,
                                                 name='observation_normalizer')
        if soft_q_policy is None:
            self._torso = make_torso(torso_space, torso, hidden_sizes, torso_kwargs)
        else:  # the critics' encoder, shared with the head
            soft_q_head = SoftQPolicyHead(torso_space, action_space, soft_q_policy, torso,
                                          torso_kwargs)
            self._torso = soft_q_head.encoder
        # Conditioning on the previous step.
        check_reward_transform(reward_transform)  # also when unused: a bad value is a bug
        self._previous_step = (PreviousStep(action_space, reward_transform)
                               if condition_on_previous else None)
        # Memory.
        self._lstm = LSTMMemory(lstm_size) if lstm_size > 0 else make_memory(memory,
                                                                            memory_kwargs)
        self.memory_skip = bool(memory_skip) and self._lstm is not None
        # Heads.
        self._policy_head = (PolicyHead(action_space, policy_hidden_sizes)
                             if soft_q_policy is None else soft_q_head)
        self._baseline_head = (BaselineHead(value_normalization, popart_step_size, num_tasks)
                               if baseline else None)
        self._q_head = (QHead(num_q_values, value_normalization, popart_step_size, num_tasks)
                        if num_q_values else None)
        self._advantage_net = (None if advantage_hidden_sizes is None
                               else AdvantageHead(advantage_hidden_sizes, num_tasks))
        if isinstance(self._lstm, UserMemory):  # checked on what the torso gives it
            x, _ = self._embed(tf.nest.map_structure(lambda t: t[0], self._zero_inputs()))
            self._lstm.check(int(x.shape[-1]))

    @property
    def parts(self) -> CoreParts:
        return CoreParts(normalizer=self._normalizer, torso=self._torso,
                         previous_step=self._previous_step, memory=self._lstm,
                         policy_head=self._policy_head, baseline_head=self._baseline_head,
                         q_head=self._q_head, advantage_head=self._advantage_net)

    @property
    def action_space(self) -> ActionSpace:
        return self._action_space

    def describe(self) -> List[Tuple[str, str, int]]:
        """(part, class, trainable parameters) per present part, in data-flow order: what
        `model.summary()` tells a Keras user (a user's part shows its own class)."""
        rows = []
        for field, part in zip(CoreParts._fields, self.parts):
            if part is None:
                continue
            kind = type(part).__name__
            if isinstance(part, (UserTorso, UserMemory)):
                kind = f'{part.network_class} ({part.spec})'
            rows.append((field, kind, param_count(part)))
        return rows

    @property
    def has_advantage_head(self) -> bool:
        return self._advantage_net is not None

    @property
    def features_size(self) -> int:
        """Width of `AgentOutput.features` (the heads' input); needs built variables."""
        if isinstance(self._policy_head, SoftQPolicyHead):
            return self._policy_head.critics.input_size
        return self._policy_head.features_size

    @property
    def recurrent(self) -> bool:
        return self._lstm is not None

    def _zero_inputs(self, batch: int = 1) -> CoreInputs:
        """Zero inputs `[T=2, B=batch, ...]`."""
        def zeros(spec: tf.TensorSpec) -> tf.Tensor:
            return tf.zeros([2, batch] + spec.shape.as_list(), spec.dtype)

        return CoreInputs(
            observation=tf.nest.map_structure(zeros, observation_spec(self.observation_space)),
            prev_action=tuple(zeros(s) for s in self._action_space.action_specs()),
            prev_reward=tf.zeros([2, batch], tf.float32),
            first=tf.zeros([2, batch], tf.bool))

    def create_variables(self) -> None:
        """Builds every variable (Sonnet builds lazily): one unroll of `[T=2, B=1]`
        zeros, and one call of the advantage head when there is one."""
        inputs = self._zero_inputs()
        outputs, _ = self.unroll(inputs, self.initial_state(1))
        if self.has_advantage_head:
            self.advantage(outputs.features[0], inputs.prev_action[0][0])

    def normalize_observation(self, observation: Any) -> Any:
        """The observation the torso sees (mapped by the normaliser when the core has one)."""
        return observation if self._normalizer is None else self._normalizer(observation)

    def update_normalizer(self, observation: Any) -> None:
        """Merges `[..., D]` observations (`[N, D]` rows, or `[T, B, D]` sequences) into
        the running statistics; nothing when the core does not normalise (any nest)."""
        if self._normalizer is not None:
            self._normalizer.update(tf.reshape(observation, [-1, observation.shape[-1]]))

    def initial_state(self, batch_size: int, **unused) -> Any:
        if self._lstm is None:
            return ()
        return self._lstm.initial_state(batch_size)

    def _embed(self, inputs: CoreInputs) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
        """Torso and previous step, per row: `[N, ...]` -> (`[N, E]`, action mask
        `[N, n]` or None)."""
        observation, mask = inputs.observation, None
        if self.masked:
            observation, mask = without_action_mask(observation)
        x = self._torso(self.normalize_observation(observation))
        if self._previous_step is not None:
            x = self._previous_step(x, inputs.prev_action, inputs.prev_reward, inputs.first)
        return x, mask

    def _heads(self, x: tf.Tensor, mask: Optional[tf.Tensor] = None,
               task: Any = ()) -> AgentOutput:
        """The heads on the memory's output `[N, H]`; forbidden actions' logits are
        `MASKED_LOGIT` where `mask` `[N, n]` is 0; `task` `[N]` picks the baseline's
        output (`()`: task 0)."""
        batch = tf.shape(x)[0]
        params = self._policy_head(x)
        if mask is not None:
            params = self._action_space.mask_params(params, tf.cast(mask, tf.float32))
        task = None if isinstance(task, tuple) else task
        q_values = self._q_head(x, task) if self._q_head is not None else tf.zeros([batch, 0])
        baseline = (self._baseline_head(x, task) if self._baseline_head is not None
                    else tf.zeros([batch], tf.float32))
        return AgentOutput(params, baseline, q_values, x)

    def advantage(self, features: tf.Tensor, action: tf.Tensor,
                  task: Optional[tf.Tensor] = None) -> tf.Tensor:
        """A(x, a) of a stochastic dueling network (ACER, continuous actions).

        features `[N, H]` (`AgentOutput.features`), action `[N, d]`, task `[N]` (None:
        task 0) -> `[N]`.
        """
        if self._advantage_net is None:
            raise ValueError('this core was built without an advantage head')
        head = self._baseline_head
        group = None if task is None or head is None else head.group_of(task)
        advantage = self._advantage_net(features, action, group)
        if head is not None and head.normalized_output:
            advantage *= head.std(group)  # in the value's units
        return advantage

    def __call__(self, inputs: CoreInputs, prev_state: Any) -> Tuple[AgentOutput, Any]:
        """One step for a batch: inputs `[B, ...]` -> (outputs `[B, ...]`, state)."""
        x, mask = self._embed(inputs)
        state = prev_state
        if self._lstm is not None:
            memory, state = self._lstm.step(x, inputs.first, prev_state)
            x = tf.concat([x, memory], -1) if self.memory_skip else memory
        return self._heads(x, mask, inputs.task), state

    def unroll(self, inputs: CoreInputs, initial_state: Any) -> Tuple[AgentOutput, Any]:
        """Sequences: inputs `[T, B, ...]` -> (outputs `[T, B, ...]`, final state).

        The torso and heads run once over all `T * B` rows; only the memory
        steps through time.
        """
        t_b = tf.shape(inputs.first)[:2]
        merged = tf.nest.map_structure(merge_time, inputs)
        x, mask = self._embed(merged)  # [T * B, E]
        state = initial_state
        if self._lstm is not None:
            outputs, state = self._lstm.unroll(split_time(x, t_b), inputs.first, state)
            memory = merge_time(outputs)  # [T * B, H]
            x = tf.concat([x, memory], -1) if self.memory_skip else memory
        out = self._heads(x, mask, merged.task)
        return tf.nest.map_structure(lambda y: split_time(y, t_b), out), state
