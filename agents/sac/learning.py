"""The SAC learner: a `tf.Module` with one `@tf.function` step.

Action types (see `networks.distributions`, with `squash=True`):

- continuous: a tanh-squashed Gaussian actor; the critics take the action,
  Q(s, a) has one output; one temperature;
- discrete (`Discrete`, or `MultiDiscrete` branches as in ML-Agents): a
  categorical actor per branch; the critics output one value per action of
  each branch; expectations over actions are exact; one temperature per branch;
- mixed (e.g. `Tuple(Discrete, Box)`, as in ALF): the critics take the
  continuous action and output one value per discrete action. The discrete
  action comes from a categorical head trained toward softmax(Q(s, a_c, .) /
  alpha_d), the policy ALF computes from the critics directly: here the
  actor alone acts (and is exported), with no critic at acting time.

`discrete_policy='critic'` (purely discrete actions, feed-forward; ALF's
discrete SAC): no actor network. The core's policy head is a
`networks.cores.SoftQPolicyHead` that owns the online critics and the
temperatures and acts with softmax(min_r Q_r(s, .) / alpha_b) per branch; this
learner trains those variables in place (they are `self.critics` and
`self.log_alpha`), keeps its own target critics, and has no actor loss or
actor update. The same policy (from the online critics, alpha a constant)
gives the expectation and the entropy bonus of the targets (V(s') = sum_a
pi(a|s') (min_r Q'_r(s', a) - alpha log pi(a|s'))) and the entropy of the
temperature loss; as everywhere here the expectations are exact where ALF
uses the sampled action's log pi (the same expectation). What acts, what is
published and what is exported is the core: critics and temperatures included.

One step computes every loss from the same parameters, then applies the
critics', the actor's and the temperatures' Adam updates, and moves the
target critics every `target_update_period` steps. The batch is sequences of
`burn_in + T + n_step` steps (T = `unroll_length`): the first `burn_in` only
warm up the stored core state (no gradient, R2D2), the next T are learned
from, each with an n-step target over the steps after it (see
`agents.returns.n_step_targets`). As in ALF, the entropy reward (alpha times
the policy's entropy at the next observation: -alpha log pi of a sample for
the continuous group, the exact expectation for discrete branches) is added to
the reward of every step of an n-step target, not only to its bootstrap value.
Transitions that start at an episode's final observation (a placeholder, see
`replay.trajectory`) are masked out of all three losses (critic, actor,
temperature) and of the metrics, except for the critics' non-episodic reward
signal components (below).

Vector rewards (`reward_weights`, k components, as in ALF): the critics
output one value per component (per discrete action), each learned with its
own TD target; targets and the actor take ALF's pessimistic value over
replicas component by component, in the direction of the component's weight
(the minimum for a positive weight, the maximum for a negative one, see
`losses.replica_min`), and the actor maximises the weighted sum. The entropy
bonus enters every component's target, so with weights that sum to 1 the
weighted critic is the soft Q of the weighted reward.

Reward signals (`agents.signals`): each intrinsic signal (curiosity,
GAIL) is one more reward component after the environment's, with its own
discount (the n-step targets take a gamma per component) and weight 1 (its
strength is in its reward); the environment's components are weighted by
their `reward_weights` (1 for a scalar reward) times `extrinsic_strength`.
A non-episodic component's return runs on across an episode's end: the
placeholder's transition (reward 0) leads to the next episode's first step, and
its component is learned there, so the value that the episode's last step
bootstraps from is a learned one (`_critic_mask`).
The signals' rewards are computed for the batch's steps by the models as they
are, which then take one update each. Behavioural cloning adds the
demonstrations' negative log-likelihood to the actor loss; `pretrain()` trains
the actor on demonstrations alone before any actor acts.

Recurrent SAC (`lstm_size > 0`, for partially observed tasks): the actor's
LSTM output ("memory") is also an input of the critics, so the critics see
the history the actor remembers. The actor loss treats it as a constant input
of Q; the critics' TD loss trains the LSTM and torso through it
(`memory_learns_from_critics`, default on), so the memory learns to carry
what predicts returns. Trained by the actor loss alone it did not: on
Pendulum without its velocity it stayed at random-policy returns for 30k
steps (docs/benchmarks.md). Feed-forward SAC (the default) stores length-`n + 1`
sequences, one starting at every step.
"""

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.agents.signals import losses as signal_losses
from reverb_agents.agents.learner_base import LearnerBase
from reverb_agents.agents.slots import create_slots
from reverb_agents.agents.policy_average import soft_update
from reverb_agents.agents.sac import losses
from reverb_agents.agents.sac.config import SACConfig, resolve_target_entropy
from reverb_agents.networks.critics import CriticEnsemble
from reverb_agents.networks.cores import (ActorCriticCore, CoreInputs, SoftQPolicyHead,
                                          merge_time)
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError, sample_squashed
from reverb_agents.networks.observations import (
    ACTION_MASK, observation_spec, split_action_mask, without_action_mask)
from reverb_agents.replay import trajectory
from reverb_agents.replay.dataset import Batch

# temperature_unit='action_gap': the least scale alpha is multiplied by, so a branch
# whose action values are all equal still has a temperature (float32's resolution of
# values near 1).
MIN_ACTION_GAP_SCALE = 1e-6


def log_alpha_floor(config: SACConfig, num_groups: int, num_branches: int,
                    gap_units: bool) -> Optional[np.ndarray]:
    """Each temperature group's least log alpha, [num_groups] (the continuous group first,
    then the discrete branches): min_log_alpha for every group, the larger
    action_gap_min_log_alpha for the branches measured in action gaps; None: no floor."""
    floor = np.full([num_groups], -np.inf, np.float32)
    if config.min_log_alpha is not None:
        floor[:] = config.min_log_alpha
    if gap_units and config.action_gap_min_log_alpha is not None:
        branches = slice(num_groups - num_branches, num_groups)
        floor[branches] = np.maximum(floor[branches], config.action_gap_min_log_alpha)
    return None if np.all(np.isneginf(floor)) else floor


def temperature_groups(action_space: ActionSpace) -> List[str]:
    """Names of the temperature groups: 'continuous' (all continuous leaves),
    then 'branch_<b>' per discrete branch."""
    continuous = any(not leaf.discrete for leaf in action_space.leaves)
    branches = sum(leaf.discrete for leaf in action_space.leaves)
    return (['continuous'] if continuous else []) + [f'branch_{b}' for b in range(branches)]


def metric_names(config: SACConfig, action_space: ActionSpace) -> Tuple[str, ...]:
    """The keys of `SACLearner.step`'s metrics."""
    groups = temperature_groups(action_space)
    return (('losses/actor', 'losses/alpha', 'losses/critic_grad_norm', 'losses/value',
             'policy/q_mean', 'policy/target_mean', 'policy/value_estimate',
             'policy/learning_rate', 'policy/actor_learning_rate',
             'policy/alpha_learning_rate')
            + tuple(f'losses/critic_{r}' for r in range(config.num_critic_replicas))
            + tuple(f'policy/{kind}_{g}' for g in groups for kind in ('alpha', 'entropy'))
            + (tuple(f'policy/entropy_anchor_{g}' for g in groups if g != 'continuous')
               if config.slow_entropy_anchor else ())
            + (tuple(f'policy/action_gap_scale_{g}' for g in groups if g != 'continuous')
               if config.tracks_action_gaps else ()))


class SACLearner(LearnerBase):
    """Owns the actor core, the critics and their targets, the temperatures,
    three optimisers and the counters. `self.optimizer` (from `LearnerBase`) is
    the critics'. With `discrete_policy='critic'` the core owns the online critics
    and the temperatures (`SoftQPolicyHead`) and there is no actor optimiser."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, config: SACConfig):
        # Long: SAC owns more parts than any learner: actor, critics and targets, temperatures,
        # three optimisers, signals.
        super().__init__(config, name='sac_learner')
        if not action_space.squash:
            raise ValueError('SAC needs a squashed action space (ActionSpace(space, squash=True))')
        self.core = core
        self._actions = action_space
        leaves = action_space.leaves
        self._continuous = [i for i, l in enumerate(leaves) if not l.discrete]
        self._discrete = [i for i, l in enumerate(leaves) if l.discrete]
        self._continuous_dims = sum(leaves[i].size for i in self._continuous)
        self._branch_sizes = [leaves[i].size for i in self._discrete]
        # Temperature groups: all continuous dimensions together, then each branch.
        targets = ([resolve_target_entropy(config, 'continuous', self._continuous_dims)]
                   if self._continuous else [])
        targets += [resolve_target_entropy(config, 'discrete', n) for n in self._branch_sizes]
        self.target_entropy = tf.constant(targets, tf.float32)
        # 'critic': the policy is the core's SoftQPolicyHead, which owns the online
        # critics and the temperatures; this learner trains them in place.
        self._critic_policy = config.discrete_policy == 'critic'
        soft_q_head = core.parts.policy_head if self._critic_policy else None
        if self._critic_policy:
            if self._continuous:
                raise UnsupportedSpaceError(
                    f"discrete_policy='critic' needs purely discrete actions, got "
                    f"{action_space.space}")
            if not isinstance(soft_q_head, SoftQPolicyHead):
                raise ValueError("discrete_policy='critic' needs a core whose policy head is a "
                                 "SoftQPolicyHead (agents.sac.agent.SAC.build_core)")
            if soft_q_head.log_alpha.shape != (len(targets),):
                raise ValueError(f'the core has {soft_q_head.log_alpha.shape[0]} temperatures, '
                                 f'the action space {len(targets)} branches')
            self.log_alpha = soft_q_head.log_alpha
        else:
            self.log_alpha = tf.Variable(tf.fill([len(targets)], config.initial_alpha_log),
                                         name='log_alpha')
        self._slow_anchor = config.slow_entropy_anchor
        if self._slow_anchor:
            # Per discrete branch, from its uniform policy's entropy, the actor's at the start.
            self.entropy_anchor = tf.Variable(
                [math.log(self._branch_sizes[k]) for k in range(len(self._discrete))],
                trainable=False, name='entropy_anchor')
        # Where the discrete branches' groups start in log_alpha (after the continuous one).
        self._branch_start = len(targets) - len(self._discrete)
        self._gap_units = config.gap_temperature and bool(self._discrete)
        # temperature_unit='value_with_gap_floor': alpha in the critics' units, floored at
        # exp(action_gap_min_log_alpha) times the gap scale.
        self._gap_floor = (config.temperature_unit == 'value_with_gap_floor'
                           and bool(self._discrete))
        self._gap_scale = self._gap_units or self._gap_floor
        if self._gap_scale:
            # Per discrete branch: the running spread of the critics' action values that
            # scales its alpha, and the updates it has seen (the first sets it).
            self.action_gap_scale = tf.Variable(tf.ones([len(self._discrete)]), trainable=False,
                                                name='action_gap_scale')
            self.action_gap_updates = tf.Variable(0.0, trainable=False,
                                                  name='action_gap_updates')
        self._floor_halflife = self._gap_floor and bool(config.action_gap_floor_halflife)
        if self._floor_halflife:
            # Per discrete branch: the largest batch spread so far, and the updates since
            # a batch last set it, which the falling floor counts.
            self.action_gap_peak = tf.Variable(tf.zeros([len(self._discrete)]), trainable=False,
                                               name='action_gap_peak')
            self.action_gap_since_peak = tf.Variable(tf.zeros([len(self._discrete)]),
                                                     trainable=False,
                                                     name='action_gap_since_peak')
        self._log_alpha_floor = log_alpha_floor(config, len(targets), len(self._discrete),
                                                self._gap_units)
        if config.normalize_entropy_reward:
            # ALF's ScalarAdaptiveNormalizer(unit_std=True) of log pi, one per group:
            # the running mean of each group's entropy and the updates it has seen.
            self.entropy_mean = tf.Variable(tf.zeros([len(targets)]), trainable=False,
                                            name='entropy_mean')
            self.entropy_mean_updates = tf.Variable(0.0, trainable=False,
                                                    name='entropy_mean_updates')

        self._num_outputs = sum(self._branch_sizes) if self._discrete else 1
        signals = config.signals
        self._env_vector = config.reward_weights is not None  # the env's rewards are vectors
        weights = None
        if config.reward_weights or signals.intrinsic:
            env_weights = tuple(config.reward_weights or (1.0,))
            weights = (tuple(w * signals.extrinsic_strength for w in env_weights)
                       + (1.0,) * len(signals.intrinsic))
        self._reward_weights = None if weights is None else tf.constant(weights, tf.float32)
        self._reward_size = len(weights) if weights else 1
        self._gammas = tf.constant(
            [config.discounting] * (self._reward_size - len(signals.intrinsic))
            + list(signals.gammas), tf.float32)
        # Cloning: one demonstrated step per batch row (windows of `unroll_length` for a
        # recurrent actor).
        self.attach_extras(core, action_space, config.unroll_length if core.recurrent else 1,
                           config.sequences_per_batch)
        num_outputs = self._num_outputs * self._reward_size
        # The critics see what the actor's torso sees: the observation without its
        # action mask (`networks.observations.ACTION_MASK`), as the critics of a
        # `SoftQPolicyHead` do; a mask only restricts which actions the expectations
        # over a branch include, through the policy's masked logits.
        observation_space, _ = split_action_mask(core.observation_space)

        def critics(name):
            return CriticEnsemble(observation_space, config.num_critic_replicas,
                                  config.critic_hidden_sizes, num_outputs, config.network.torso,
                                  config.network.torso_kwargs,
                                  memory_size=config.lstm_size if self._critic_memory else 0,
                                  name=name)

        self._critic_memory = core.recurrent and config.critic_memory
        self.critics = soft_q_head.critics if self._critic_policy else critics('critics')
        self.target_critics = critics('target_critics')
        self._create_critic_variables(observation_space)

        def lr_variable(value, name):
            return tf.Variable(value, dtype=tf.float32, trainable=False, name=name)

        self.actor_learning_rate = lr_variable(config.actor_learning_rate, 'actor_learning_rate')
        self.alpha_learning_rate = lr_variable(config.alpha_learning_rate, 'alpha_learning_rate')
        # No actor network to train with discrete_policy='critic'.
        self.actor_optimizer = (None if self._critic_policy
                                else self.make_optimizer(self.actor_learning_rate))
        self.alpha_optimizer = self.make_optimizer(self.alpha_learning_rate)
        self._learn_memory = (core.recurrent and config.memory_learns_from_critics
                              and not self._critic_memory)
        # The critics' TD gradient on the actor's torso and LSTM is far larger than the
        # actor's own (docs/benchmarks.md#why-the-recurrent-policy-falls-late): summed in
        # one Adam, its scale sets the step and the actor's gradient barely moves the
        # features its policy head reads. Its own Adam gives each loss a step of its own.
        self.memory_optimizer = (self.make_optimizer(self.actor_learning_rate)
                                 if self._learn_memory and config.memory_optimizer else None)
        # One Adam for both losses: their gradients on the actor's variables are summed,
        # so one backward pass of the summed loss through the actor's unroll gives the
        # sum (the unroll's backward pass is most of a recurrent step).
        self._one_backward = self._learn_memory and self.memory_optimizer is None
        create_slots(self.optimizer, self.critics.trainable_variables)
        create_slots(self.actor_optimizer, core.trainable_variables)
        create_slots(self.memory_optimizer, core.trainable_variables)
        create_slots(self.alpha_optimizer, [self.log_alpha])

    def _create_critic_variables(self, observation_space) -> None:
        """Builds the critics (Sonnet builds lazily) and copies them to the targets."""
        observation = trajectory.zeros(observation_spec(observation_space), (1,))
        action = tf.zeros([1, self._continuous_dims])
        memory = None
        if self._critic_memory:
            sequence = tf.nest.map_structure(lambda x: x[None], observation)  # [1, 1, ...]
            memory = self.critics.remember(sequence, tf.ones([1, 1], tf.bool), 0)[0]
            self.target_critics.remember(sequence, tf.ones([1, 1], tf.bool), 0)
        elif self.core.recurrent:
            memory = tf.zeros([1, self.core.features_size])
        self.critics(observation, action, memory)
        self.target_critics(observation, action, memory)
        for target, source in zip(self.target_critics.variables, self.critics.variables):
            target.assign(source)

    def _critic_observation(self, observation: Any) -> Any:
        """The critics' input from an observation nest `[N, ...]`: what the actor's
        torso sees (normalised when the core normalises), the action mask left out."""
        if self.core.masked:
            observation, _ = without_action_mask(observation)
        return self.core.normalize_observation(observation)

    def _target_entropies(self, observation: Any) -> List[tf.Tensor]:
        """Each temperature group's entropy target: a scalar, or for the branches of a
        masked core (purely discrete) `[N]`, scaled to what each row's mask allows
        (`losses.masked_target_entropy`); observation nest `[N, ...]`."""
        targets = tf.unstack(self.target_entropy, num=self.target_entropy.shape[0])
        if not self.core.masked:
            return targets
        return [losses.masked_target_entropy(t, a)
                for t, a in zip(targets, self._allowed(observation))]

    def _allowed(self, observation: Any) -> List[Optional[tf.Tensor]]:
        """Per discrete branch, the action mask's `[N, n_b]` (1: allowed) of an
        observation nest `[N, ...]`; None for each branch of an unmasked core."""
        if not self.core.masked:
            return [None] * len(self._discrete)
        return tf.split(observation[ACTION_MASK], self._branch_sizes, axis=-1)

    def _alphas(self) -> List[tf.Tensor]:
        """Each temperature group's alpha in the critics' units: exp(log alpha), a
        discrete branch's times its action-gap scale with temperature_unit='action_gap',
        or never below exp(action_gap_min_log_alpha) times it with
        'value_with_gap_floor'."""
        alphas = tf.exp(self.log_alpha)
        start = self._branch_start
        if self._gap_units:
            alphas = tf.concat([alphas[:start], alphas[start:] * self._action_gap_scale()], 0)
        elif self._gap_floor:
            alphas = tf.concat([alphas[:start], tf.exp(tf.maximum(
                self.log_alpha[start:], self._gap_log_floor()))], 0)
        return tf.unstack(alphas, num=self.log_alpha.shape[0])

    def _action_gap_scale(self) -> tf.Tensor:
        """Each discrete branch's action-gap scale `[n_branches]`, floored (so identical
        action values leave the policy a temperature)."""
        return tf.maximum(self.action_gap_scale, MIN_ACTION_GAP_SCALE)

    def _gap_log_floor(self) -> tf.Tensor:
        """temperature_unit='value_with_gap_floor': each discrete branch's least log
        alpha in the critics' units, action_gap_min_log_alpha plus the log of its
        action-gap scale `[n_branches]`, less log(1 + n / h) with action_gap_floor_halflife
        h, n updates since a batch's spread last set a record (-inf until a batch has set
        the scale)."""
        floor = self.config.action_gap_min_log_alpha + tf.math.log(self._action_gap_scale())
        if self._floor_halflife:
            floor -= tf.math.log1p(self.action_gap_since_peak
                                   / self.config.action_gap_floor_halflife)
        return tf.where(self.action_gap_updates > 0.5, floor, -np.inf)

    def _log_alpha_lower_bound(self) -> Optional[tf.Tensor]:
        """Each temperature group's least log alpha `[groups]` after a step: the static
        floor (`log_alpha_floor`) and, with 'value_with_gap_floor', each discrete
        branch's gap floor, the larger of the two; None: no floor."""
        if not self._gap_floor:
            return self._log_alpha_floor
        floor = tf.concat([tf.fill([self._branch_start], -np.inf), self._gap_log_floor()], 0)
        if self._log_alpha_floor is not None:
            floor = tf.maximum(floor, self._log_alpha_floor)
        return floor

    def set_progress(self, fraction: float) -> None:
        super().set_progress(fraction)  # the critics'
        config, anneal = self.config, self.config.optimizer.annealed
        self.assign_rate(self.actor_learning_rate, anneal(config.actor_learning_rate, fraction))
        self.assign_rate(self.alpha_learning_rate, anneal(config.alpha_learning_rate, fraction))

    # --- policy pieces ------------------------------------------------------

    def _policy(self, params: Tuple[tf.Tensor, ...]):
        """Per-row policy pieces from per-leaf params `[N, p]`.

        Returns (continuous action `[N, d]` (reparameterised sample), its log-prob
        `[N]` (None without continuous leaves), per-branch log-probabilities `[N, n_b]`).
        """
        batch = tf.shape(params[0])[0]
        actions, log_prob = [], None
        for i in self._continuous:
            a, lp = sample_squashed(params[i])
            actions.append(a)
            log_prob = lp if log_prob is None else log_prob + lp
        action = tf.concat(actions, -1) if actions else tf.zeros([batch, 0])
        branch_log_probs = [tf.nn.log_softmax(params[i]) for i in self._discrete]
        return action, log_prob, branch_log_probs

    def _per_component(self, q: tf.Tensor) -> tf.Tensor:
        """Critic outputs `[..., outputs * k]` -> `[..., outputs, k]` (k = 1: scalar rewards)."""
        return tf.reshape(q, tf.concat([tf.shape(q)[:-1], [self._num_outputs,
                                                           self._reward_size]], 0))

    def _components(self, q: tf.Tensor) -> tf.Tensor:
        """Critic outputs `[..., outputs * k]` -> `[k, ..., outputs]`."""
        q = self._per_component(q)
        rank = len(q.shape)
        return tf.transpose(q, [rank - 1] + list(range(rank - 1)))

    def _weighted(self, q: tf.Tensor) -> tf.Tensor:
        """Critic outputs `[..., outputs * k]` -> their weighted sum `[..., outputs]`."""
        if self._reward_weights is None:
            return q
        return tf.reduce_sum(self._per_component(q) * self._reward_weights, -1)

    def _branches(self, q: tf.Tensor) -> List[tf.Tensor]:
        return tf.split(q, self._branch_sizes, axis=-1)

    def _split_alphas(self, alphas: List[tf.Tensor]):
        """(continuous group's alpha or None, per-branch alphas)."""
        alpha_c = alphas[0] if self._continuous else None
        return alpha_c, alphas[self._branch_start:]

    def _replica_min(self, q: tf.Tensor) -> tf.Tensor:
        """Critic outputs `[R, ..., outputs * k]` -> the pessimistic value over replicas
        `[..., outputs * k]`, per component in the direction of its weight (scalar
        rewards: the minimum)."""
        q_min = losses.replica_min(self._per_component(q), self._reward_weights)
        return tf.reshape(q_min, tf.shape(q)[1:])

    def _expected_q(self, q_min: tf.Tensor, branch_log_probs) -> tf.Tensor:
        """E_pi Q(s, .) `[..., N]` from replica-min Q `[..., N, outputs]` at the policy's
        continuous action (leading dims: reward components), without entropy terms."""
        if self._discrete:
            return losses.discrete_soft_value(self._branches(q_min), branch_log_probs,
                                              [0.0] * len(self._discrete), entropy=False)
        return q_min[..., 0]

    def _entropies(self, log_prob: Optional[tf.Tensor], branch_log_probs) -> List[tf.Tensor]:
        """Per temperature group `[N]`: -log pi of the sampled continuous action, then
        each branch's exact entropy."""
        return ([-log_prob] if self._continuous else []) + [
            -tf.reduce_sum(tf.exp(lp) * lp, -1) for lp in branch_log_probs]

    def _entropy_reward(self, entropies: List[tf.Tensor], alphas: List[tf.Tensor]) -> tf.Tensor:
        """`[N]`: the continuous group's alpha H plus the mean over branches of
        alpha_b H_b (the branch mean of `losses.discrete_soft_value`)."""
        alpha_c, alpha_d = self._split_alphas(alphas)
        reward = 0.0
        if self._discrete:
            offset = len(entropies) - len(self._discrete)
            reward = tf.add_n([a * h for a, h in zip(alpha_d, entropies[offset:])]) / len(
                self._discrete)
        if self._continuous:
            reward += alpha_c * entropies[0]
        return reward

    def _normalize_entropies(self, entropies: List[tf.Tensor]) -> List[tf.Tensor]:
        """ALF's `normalize_entropy_reward`: each group's entropy minus its running mean,
        updated first with this batch's mean (speed 8: a batch's weight is 8 / (8 + u)
        after u updates, so the first sets the mean). Keeps the entropy reward's mean
        near 0, so an episode's length does not bias its soft return."""
        speed = 8.0
        batch_mean = tf.stack([tf.reduce_mean(h) for h in entropies])
        rate = speed / (speed + self.entropy_mean_updates)
        mean = self.entropy_mean.assign_add(rate * (batch_mean - self.entropy_mean))
        self.entropy_mean_updates.assign_add(1.0)
        return [h - mean[g] for g, h in enumerate(entropies)]

    def _q_taken(self, q: tf.Tensor, action: Tuple[tf.Tensor, ...]) -> tf.Tensor:
        """`[..., N, outputs]` -> `[..., N]` at the taken discrete actions (branch mean)."""
        if not self._discrete:
            return q[..., 0]
        batch_dims = len(q.shape) - 1
        taken = [tf.gather(qb, tf.broadcast_to(action[i], tf.shape(qb)[:-1]),
                           batch_dims=batch_dims)
                 for qb, i in zip(self._branches(q), self._discrete)]
        return tf.add_n(taken) / len(taken)

    def _continuous_part(self, action: Tuple[tf.Tensor, ...]) -> tf.Tensor:
        if not self._continuous:
            return tf.zeros([tf.shape(action[0])[0], 0])
        return tf.concat([action[i] for i in self._continuous], -1)

    # --- the step ------------------------------------------------------------

    def _actor_outputs(self, inputs: CoreInputs, core_state):
        """Policy params and memory at the learned positions `[T, B]` (differentiable,
        call inside the actor's tape) and at the positions after them `[T + n - 1, B]`
        (constants), from `[T + n, B]` inputs.

        A feed-forward actor runs the two parts separately, so its backward pass
        covers only the `T` learned rows; a recurrent one unrolls all `T + n` steps.
        Memory (the LSTM output, which the critics also see) is None without an LSTM.
        """
        T = self.config.unroll_length
        if not self.core.recurrent:
            current, _ = self.core.unroll(tf.nest.map_structure(lambda x: x[:T], inputs), ())
            return current.policy_params, None, None, None
        outputs, _ = self.core.unroll(inputs, core_state)
        params = outputs.policy_params
        memory = outputs.features
        return (tuple(p[:T] for p in params), memory[:T],
                tuple(tf.stop_gradient(p[1:]) for p in params), tf.stop_gradient(memory[1:]))

    def _critic_memories(self, steps) -> Tuple[tf.Tensor, tf.Tensor]:
        """`critic_memory`: the critics' own memory at the learned steps `[T * B, H]`
        (differentiable) and the target critics' at the steps after them
        `[T + n - 1, B, H]`, from `[burn_in + T + n, B]` steps."""
        config = self.config
        length = tf.shape(steps.first)[0]
        observation = self._critic_observation(
            tf.nest.map_structure(merge_time, steps.observation))
        observation = tf.nest.map_structure(
            lambda x: tf.reshape(x, tf.concat([[length, -1], tf.shape(x)[1:]], 0)), observation)
        online = self.critics.remember(observation, steps.first, config.burn_in)
        target = self.target_critics.remember(observation, steps.first, config.burn_in)
        return merge_time(online[:config.unroll_length]), tf.stop_gradient(target[1:])

    def critic_targets(self, steps, alphas: List[tf.Tensor], next_params=None,
                       next_memory=None, signal_rewards=None) -> tf.Tensor:
        """TD targets `[T, B]` (`[T, B, k]` with `reward_weights` or reward signals) of
        the `T` learned transitions of `[T + n, B]` steps.

        The bootstrap value at s' is the target critics' pessimistic value over
        replicas (`_replica_min`) at the policy's action at s' (exact expectation
        for discrete branches). With `use_entropy_reward`, as in ALF, step j's
        reward gains gamma d_j alpha H(pi(.|s_{j+1})) (`_entropy_reward`) at every
        step of the n-step sum, j = 0..T + n - 2 (`agents.returns.n_step_targets`
        for the indices and episode ends), so the bootstrap is the soft value;
        `normalize_entropy_reward` centres each group's entropy first (ALF's
        adaptive normalizer, updated here). `next_params` / `next_memory`
        (`[T + n - 1, B, ...]`) are the actor's outputs at steps 1.. (computed here
        for a feed-forward actor). `signal_rewards` `[T + n - 1, B, m]`: the intrinsic
        signals' rewards of steps 0..T + n - 2, components after the environment's,
        each discounted by its own gamma.
        """
        # Long: its docstring defines the soft targets of every action kind and reward shape it
        # builds.
        config = self.config
        T, n = config.unroll_length, config.n_step
        observation = tf.nest.map_structure(lambda x: x[1:], steps.observation)
        if next_params is None:
            inputs = CoreInputs(observation, tuple(a[1:] for a in steps.prev_action),
                                steps.prev_reward[1:], steps.first[1:])
            next_params = self.core.unroll(inputs, ())[0].policy_params
        params = tuple(merge_time(p) for p in next_params)
        action, log_prob, branch_log_probs = self._policy(params)
        q = self.target_critics(self._critic_observation(
            tf.nest.map_structure(merge_time, observation)), action,
            None if next_memory is None else merge_time(next_memory))
        values = self._expected_q(self._components(self._replica_min(q)),
                                  branch_log_probs)  # [k, N']
        values = tf.reshape(tf.transpose(values), [T + n - 1, -1, self._reward_size])
        entropy_rewards = None
        if config.use_entropy_reward:
            entropies = self._entropies(log_prob, branch_log_probs)
            if config.normalize_entropy_reward:
                entropies = self._normalize_entropies(entropies)
            # [T + n - 1, B, 1]: row j is the entropy reward of step j + 1's observation.
            entropy_rewards = tf.reshape(self._entropy_reward(entropies, alphas),
                                         [T + n - 1, -1, 1])
        reward = steps.reward if self._env_vector else steps.reward[..., None]
        reward = reward * config.reward_scaling
        if signal_rewards is not None:  # [T + n - 1, B, m] for steps 0..T + n - 2
            # A placeholder's action was never taken: no reward. A non-episodic
            # component's return runs on from there into the next episode
            # (`signal_losses.across_episode_ends`); an episodic one's ends before it.
            real = trajectory.valid_mask(steps.first)[..., None]
            signal_rewards = tf.pad(signal_rewards * real, [[0, 1], [0, 0], [0, 0]])
            reward = tf.concat([reward, signal_rewards], -1)

        # The n-step window of each learned transition t, side by side on the batch
        # axis; a trailing axis of 1 lets discounts and episode starts broadcast over
        # reward components.
        def windows(x, length):
            return tf.concat([x[t:t + length] for t in range(T)], axis=1)
        gamma = self._gammas if self._reward_weights is not None else config.discounting
        discount = steps.discount[..., None]
        if signal_rewards is not None:
            # A non-episodic signal's return runs on across a termination (a time limit's).
            m = signal_rewards.shape[-1]
            discount = tf.concat([tf.repeat(discount, self._reward_size - m, -1),
                                  signal_losses.component_discounts(
                                      steps.discount, tf.ones([m]), config.signals.episodic)],
                                 -1)
        targets = returns.n_step_targets(
            windows(reward, n), windows(discount, n),
            windows(steps.first[..., None], n + 1), windows(values, n), gamma,
            None if entropy_rewards is None else windows(entropy_rewards, n))
        targets = tf.reshape(targets, [T, -1, self._reward_size])
        return targets if self._reward_weights is not None else targets[..., 0]

    def pretrain(self) -> Optional[float]:
        """`bc_pretrain_steps` actor updates on the demonstrations alone (`agents.extras`);
        the last BC loss, or None if none was due."""
        return self.extras.pretrain(
            lambda gradients, variables: self.clip_and_apply(gradients, variables,
                                                             self.actor_optimizer))

    def _burn_in(self, batch: Batch):
        """The `[T + n, B]` steps after the burn-in prefix, and the core state warmed up
        on that prefix without gradient (the stored state when `burn_in` is 0)."""
        K = self.config.burn_in
        all_steps, core_state = batch.sequence.steps, batch.sequence.core_state
        if K:
            burn = tf.nest.map_structure(lambda x: x[:K], all_steps)
            _, core_state = self.core.unroll(
                CoreInputs(burn.observation, burn.prev_action, burn.prev_reward, burn.first),
                core_state)
            core_state = tf.nest.map_structure(tf.stop_gradient, core_state)
        return tf.nest.map_structure(lambda x: x[K:], all_steps), core_state

    def _actor_and_alpha_losses(self, params, behaviour_params, critic_observation, memory,
                                entropy_observation, alpha_list: List[tf.Tensor],
                                mask: tf.Tensor, valid_rows: tf.Tensor):
        """The actor's loss rows `[T * B]` and mean, the temperatures' loss, the
        entropies per temperature group and, with temperature_unit='action_gap', each
        discrete branch's mean spread of the critics' action values `[n_branches]` (else
        None) (call inside the actor's tape); `params` and `behaviour_params` (the
        acting policy's, stored) per leaf `[T * B, p]`."""
        config = self.config
        action, log_prob, branch_log_probs = self._policy(params)
        critic_action = action
        if config.dqda_clipping:
            # Per-row dQ/da clipped at dqda_clipping (the loss is a mean over the
            # valid rows, so a row's gradient carries 1 / valid_rows).
            critic_action = losses.clip_gradient(action, config.dqda_clipping / valid_rows)
        q_policy = self._weighted(
            self._replica_min(self.critics(critic_observation, critic_action, memory)))
        alpha_c, alpha_d = self._split_alphas(alpha_list)
        actor_rows, gaps = 0.0, None
        if self._discrete:
            actor_rows = losses.discrete_actor_loss(self._branches(q_policy),
                                                    branch_log_probs, alpha_d)
        if self._gap_scale:  # each branch's mean spread over the valid rows
            gaps = tf.stack([
                losses.masked_mean(losses.action_spread(q, a), mask)
                for q, a in zip(self._branches(q_policy), self._allowed(entropy_observation))])
        if self._continuous:
            # Mixed actions: Q already entered through the discrete expectation.
            q_c = 0.0 if self._discrete else q_policy[:, 0]
            actor_rows += losses.continuous_actor_loss(q_c, log_prob, alpha_c)
        entropies = self._entropies(log_prob, branch_log_probs)
        # Not in `actor_rows`, whose negative is the soft value the metrics report.
        loss_rows, mean_penalty = actor_rows, 0.0
        if config.entropy_penalty and not self._slow_anchor:  # per row
            row_penalty = tf.add_n([
                losses.entropy_penalty(h, self._actions.leaves[i].entropy(behaviour_params[i]))
                for h, i in zip(self._branch_entropies(entropies), self._discrete)])
            loss_rows = actor_rows + config.entropy_penalty / len(self._discrete) * row_penalty
        elif self._slow_anchor:  # on the batch's mean entropy of each branch
            mean_penalty = config.entropy_penalty * tf.reduce_mean(losses.entropy_penalty(
                tf.stack([losses.masked_mean(h, mask)
                          for h in self._branch_entropies(entropies)]), self.entropy_anchor))
        # Placeholder rows hold a final observation the policy never acts at.
        actor_loss = losses.masked_mean(loss_rows, mask) + mean_penalty
        alpha_loss = tf.add_n([
            losses.temperature_loss(self.log_alpha[g], h, target, mask)
            for g, (h, target) in enumerate(
                zip(entropies, self._target_entropies(entropy_observation)))])
        return actor_rows, actor_loss, alpha_loss, entropies, gaps

    def _branch_entropies(self, entropies: List[tf.Tensor]) -> List[tf.Tensor]:
        """The discrete branches' entries of the temperature groups' `entropies`
        (`[T * B]` each), which come last."""
        return entropies[self._branch_start:]

    def _move_entropy_anchor(self, entropies: List[tf.Tensor], mask: tf.Tensor) -> None:
        """entropy_anchor='slow': each branch's average steps toward the batch's mean."""
        means = tf.stack([losses.masked_mean(h, mask) for h in self._branch_entropies(entropies)])
        soft_update([self.entropy_anchor], [tf.stop_gradient(means)],
                    self.config.entropy_anchor_tau)

    def _move_action_gap_scale(self, gaps: tf.Tensor) -> None:
        """temperature_unit 'action_gap' or 'value_with_gap_floor': each branch's scale
        follows the batch's spread (`losses.rising_scale`; the first update sets it)."""
        first = tf.fill(tf.shape(gaps), self.action_gap_updates < 0.5)
        self.action_gap_scale.assign(losses.rising_scale(
            self.action_gap_scale, tf.stop_gradient(gaps), self.config.action_gap_tau, first))
        self.action_gap_updates.assign_add(1.0)
        if self._floor_halflife:
            record = gaps > self.action_gap_peak
            self.action_gap_since_peak.assign(
                tf.where(record, 0.0, self.action_gap_since_peak + 1.0))
            self.action_gap_peak.assign(tf.maximum(self.action_gap_peak, gaps))

    def _apply_updates(self, actor_tape, critic_tape, actor_and_alpha_loss, alpha_loss,
                       critic_loss, batch: Batch) -> tf.Tensor:
        """Applies the actor's, the temperatures' and the critics' gradients and moves
        the target critics; returns the critics' gradient norm."""
        config = self.config
        critic_variables = self.critics.trainable_variables
        if self._critic_policy:
            # No actor: the core's trainable variables are the critics and the
            # temperatures, which only the critic and temperature losses train.
            alpha_gradient = actor_tape.gradient(alpha_loss, self.log_alpha)
            critic_gradients = critic_tape.gradient(critic_loss, critic_variables)
        elif self._one_backward:
            actor_variables = self.core.trainable_variables
            # The critic tape also recorded the actor's loss; the temperatures enter
            # the critic loss only through its targets, which are constants.
            # (Targets in a list sum their gradients, each weighted by its output gradient.)
            *actor_gradients, alpha_gradient = critic_tape.gradient(
                [actor_and_alpha_loss, critic_loss], actor_variables + (self.log_alpha,),
                output_gradients=[tf.ones([]), tf.constant(config.memory_critic_scale)])
            critic_gradients = critic_tape.gradient(critic_loss, critic_variables)
            self.actor_optimizer.apply(actor_gradients, actor_variables)
        else:
            actor_variables = self.core.trainable_variables
            *actor_gradients, alpha_gradient = actor_tape.gradient(
                actor_and_alpha_loss, actor_variables + (self.log_alpha,))
            gradients = critic_tape.gradient(
                critic_loss, critic_variables + (actor_variables if self._learn_memory else ()))
            critic_gradients = gradients[:len(critic_variables)]
            memory_gradients = gradients[len(critic_variables):]
            if self._learn_memory and self.memory_optimizer is not None:
                self.memory_optimizer.apply(memory_gradients, actor_variables)
            elif self._learn_memory:
                # The one-pass step's sum (`_one_backward`), taken after two passes: only
                # a test that clears `_one_backward` steps this way, to check that step.
                scale = config.memory_critic_scale
                actor_gradients = [a if m is None else a + scale * m for a, m in
                                   zip(actor_gradients, memory_gradients)]
            self.actor_optimizer.apply(actor_gradients, actor_variables)
        self.alpha_optimizer.apply([alpha_gradient], [self.log_alpha])
        if config.max_log_alpha is not None:
            self.log_alpha.assign(tf.minimum(self.log_alpha, config.max_log_alpha))
        floor = self._log_alpha_lower_bound()
        if floor is not None:
            self.log_alpha.assign(tf.maximum(self.log_alpha, floor))
        grad_norm = self._apply(critic_gradients, critic_variables, batch.replayed,
                                tf.constant(config.unroll_length))
        # tau on update steps, 0 otherwise: no branch in the graph.
        update = tf.cast(self.num_steps % config.target_update_period == 0, tf.float32)
        soft_update(self.target_critics.variables, self.critics.variables,
                    update * config.target_update_tau)
        return grad_norm

    def _critic_mask(self, mask: tf.Tensor) -> tf.Tensor:
        """Where the critics learn: `mask` `[T * B]` (0 at placeholder rows), or with
        reward signals `[T * B, k]`, each non-episodic signal's component learned at
        the placeholders too (`signal_losses.learned_mask`): the last real step
        bootstraps from the final observation's value, which, left unlearned, is
        extrapolated, and the returns diverge (docs/reward-signals.md)."""
        signals = self.config.signals
        if not signals.intrinsic:
            return mask
        env = tf.tile(mask[:, None], [1, self._reward_size - len(signals.intrinsic)])
        return tf.concat([env, signal_losses.learned_mask(mask[:, None], signals.episodic)],
                         -1)

    def _critic_losses(self, critic_observation, action, memory, targets: tf.Tensor,
                       mask: tf.Tensor, weights: tf.Tensor):
        """Q of the taken actions `[R, T * B, k]` and each replica's TD loss `[R]` against
        `targets` `[T * B, k]` where `mask` (`[T * B]` or `[T * B, k]`, `_critic_mask`)
        says, the rows weighted by prioritized replay's `weights` `[B]`."""
        q = self.critics(critic_observation, self._continuous_part(action), memory)
        q_taken = self._q_taken(self._components(q), action)  # [k, R, T * B]
        q_taken = tf.transpose(q_taken, [1, 2, 0])  # [R, T * B, k]
        return q_taken, losses.critic_loss(q_taken, targets, mask,
                                           tf.tile(weights, [self.config.unroll_length]))

    @tf.function(autograph=False)
    def learn(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One update from `[burn_in + T + n, B]` sequences. Returns scalar metrics."""
        # Long: the two nested tapes must hold the actor's unroll and both losses in one scope.
        config = self.config
        T = config.unroll_length
        steps, core_state = self._burn_in(batch)  # [T + n, B]
        learned = tf.nest.map_structure(lambda x: merge_time(x[:T]), steps)  # [T * B] rows
        # [T * B]: 0 where the row's observation is an episode's final one (a placeholder).
        mask = 1.0 - tf.cast(merge_time(steps.first[1:T + 1]), tf.float32)
        critic_mask = self._critic_mask(mask)
        valid_rows = tf.maximum(tf.reduce_sum(mask), 1.0)
        weights = self.importance_weights(batch)  # [B]: 1 unless replay is prioritized
        if config.normalize:  # statistics first, as ML-Agents updates before its update
            self.core.update_normalizer(learned.observation)
        alpha_list = self._alphas()
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first)
        signal_rewards, signal_metrics = None, {}
        if config.signals.intrinsic:  # steps 0..T + n - 2, real where the next is no `first`
            signal_rewards, signal_metrics = self.extras.signal_rewards(
                steps.observation, steps.action, trajectory.valid_mask(steps.first),
                self.num_steps)
        # The critics see what the actor's torso sees.
        critic_observation = self._critic_observation(learned.observation)

        # The critic tape holds the actor's unroll too, so the critics' TD loss can
        # reach the LSTM through the memory they see (`memory_learns_from_critics`).
        with tf.GradientTape(persistent=self._one_backward) as critic_tape:
            with tf.GradientTape() as actor_tape:
                params_t, memory_live, next_params, next_memory = self._actor_outputs(
                    inputs, core_state)  # [T, B]
                memory_live = None if memory_live is None else merge_time(memory_live)
                if self._critic_memory:  # the critics see theirs, not the actor's
                    memory_live, next_memory = self._critic_memories(batch.sequence.steps)
                # The actor loss sees the memory as a constant input of Q.
                memory = None if memory_live is None else tf.stop_gradient(memory_live)
                actor_rows, actor_loss, alpha_loss, entropies, gaps = self._actor_and_alpha_losses(
                    tuple(merge_time(p) for p in params_t), learned.behaviour_params,
                    critic_observation, memory,
                    learned.observation, alpha_list, mask, valid_rows)
                # One backward pass for both: the actor loss sees alpha as a constant and
                # the temperature loss sees the entropy as one.
                actor_and_alpha_loss = actor_loss + alpha_loss
                if self.extras.active:  # weighing each learned step as the actor loss does
                    mask_t = tf.reshape(mask, [T, -1])
                    actor_and_alpha_loss, extra_metrics = self.extras.added_to(
                        actor_and_alpha_loss, steps, T, params_t, mask_t / valid_rows, mask_t,
                        self.num_steps)
                    signal_metrics.update(extra_metrics)

            with critic_tape.stop_recording():  # constants for the critic loss
                targets = tf.reshape(
                    self.critic_targets(steps, alpha_list, next_params, next_memory,
                                        signal_rewards),
                    [-1, self._reward_size])  # [T * B, k]
            q_taken, critic_losses = self._critic_losses(
                critic_observation, learned.action,
                memory_live if self._learn_memory or self._critic_memory else memory,
                targets, critic_mask, weights)
            critic_loss = tf.reduce_sum(critic_losses)

        if self._gap_scale:  # before the updates, whose clip of log alpha reads it
            self._move_action_gap_scale(gaps)
        grad_norm = self._apply_updates(actor_tape, critic_tape, actor_and_alpha_loss,
                                        alpha_loss, critic_loss, batch)
        if self._slow_anchor:
            self._move_entropy_anchor(entropies, mask)
        if self._critic_policy:  # the actor loss is no loss here: its value is the estimate
            actor_loss = tf.zeros([])
        metrics = self._step_metrics(actor_loss, alpha_loss, grad_norm, critic_losses,
                                     q_taken, targets, actor_rows, entropies, alpha_list, mask)
        metrics.update(signal_metrics)
        metrics.update(self.priority_outputs(
            batch, weights, tf.reshape(losses.abs_td_errors(q_taken, targets), [T, -1]),
            tf.reshape(mask, [T, -1])))
        return metrics

    def _step_metrics(self, actor_loss, alpha_loss, grad_norm, critic_losses, q_taken, targets,
                      actor_rows, entropies, alpha_list, mask) -> Dict[str, tf.Tensor]:
        """The step's scalars: means over valid rows (and replicas and reward components)."""
        metrics = {
            'losses/actor': actor_loss,
            'losses/alpha': alpha_loss,
            'losses/critic_grad_norm': grad_norm,
            # ML-Agents' "Losses/Value Loss": the mean of the critics' losses.
            'losses/value': tf.reduce_mean(critic_losses),
            'policy/q_mean': losses.masked_mean(tf.reduce_mean(q_taken, [0, 2]), mask),
            'policy/target_mean': losses.masked_mean(tf.reduce_mean(targets, -1), mask),
            # ML-Agents' "Policy/Value Estimate": the soft value V(s) = E_pi[Q(s, a) -
            # alpha log pi(a|s)] from the online critics, which is minus the actor's
            # loss of the row (with reward components: the weighted value).
            'policy/value_estimate': losses.masked_mean(-tf.stop_gradient(actor_rows), mask),
            'policy/learning_rate': tf.identity(self.learning_rate),  # the critics'
            'policy/actor_learning_rate': tf.identity(self.actor_learning_rate),
            'policy/alpha_learning_rate': tf.identity(self.alpha_learning_rate),
        }
        for r in range(self.config.num_critic_replicas):
            metrics[f'losses/critic_{r}'] = critic_losses[r]
        for g, name in enumerate(temperature_groups(self._actions)):
            metrics[f'policy/alpha_{name}'] = alpha_list[g]
            metrics[f'policy/entropy_{name}'] = losses.masked_mean(entropies[g], mask)
        if self._slow_anchor:
            for k in range(len(self._discrete)):
                metrics[f'policy/entropy_anchor_branch_{k}'] = self.entropy_anchor[k]
        if self._gap_scale:
            for k in range(len(self._discrete)):
                metrics[f'policy/action_gap_scale_branch_{k}'] = self.action_gap_scale[k]
        return metrics
