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

One step computes every loss from the same parameters, then applies the
critics', the actor's and the temperatures' Adam updates, and moves the
target critics every `target_update_period` steps. The batch is sequences of
`n_step + 1` steps; the first transition of each is learned from, with an
n-step target (see `losses.n_step_targets`). Sequences whose first step is
an episode's final observation (a placeholder, see `replay.trajectory`) are
masked out of the critic loss.
"""

from typing import Dict, List, Optional, Tuple

import sonnet as snt
import tensorflow as tf

from agents.learner_base import LearnerBase
from agents.sac import losses
from agents.sac.config import SACConfig, resolve_target_entropy
from networks.critics import CriticEnsemble
from networks.cores import ActorCriticCore, CoreInputs
from networks.distributions import ActionSpace, sample_squashed
from networks.observations import observation_spec
from replay import trajectory
from replay.dataset import Batch


def _merge(x: tf.Tensor) -> tf.Tensor:
    """[T, B, ...] -> [T * B, ...]."""
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


class SACLearner(LearnerBase):
    """Owns the actor core, the critics and their targets, the temperatures,
    three optimisers and the counters. `self.optimizer` (from `LearnerBase`) is
    the critics'."""

    def __init__(self, core: ActorCriticCore, action_space: ActionSpace, config: SACConfig):
        super().__init__(config, name='sac_learner')
        if not action_space.squash:
            raise ValueError('SAC needs a squashed action space (ActionSpace(space, squash=True))')
        if core.recurrent:
            raise ValueError('this SAC learner is feed-forward; build the core with lstm_size=0')
        self.core = core
        self._action_space = action_space
        leaves = action_space.leaves
        self._continuous = [i for i, l in enumerate(leaves) if l.kind == 'tanh_gaussian']
        self._discrete = [i for i, l in enumerate(leaves) if l.kind == 'categorical']
        self._continuous_dims = sum(leaves[i].size for i in self._continuous)
        self._branch_sizes = [leaves[i].size for i in self._discrete]
        # Temperature groups: all continuous dimensions together, then each branch.
        targets = ([resolve_target_entropy(config, 'continuous', self._continuous_dims)]
                   if self._continuous else [])
        targets += [resolve_target_entropy(config, 'discrete', n) for n in self._branch_sizes]
        self.target_entropy = tf.constant(targets, tf.float32)
        self.log_alpha = tf.Variable(tf.fill([len(targets)], config.initial_alpha_log),
                                     name='log_alpha')

        num_outputs = sum(self._branch_sizes) if self._discrete else 1
        observation_space = core.observation_space

        def critics(name):
            return CriticEnsemble(observation_space, config.num_critic_replicas,
                                  config.critic_hidden_sizes, num_outputs, config.torso,
                                  name=name)

        self.critics = critics('critics')
        self.target_critics = critics('target_critics')
        self._create_critic_variables(observation_space)

        def lr_variable(value, name):
            return tf.Variable(value, dtype=tf.float32, trainable=False, name=name)

        self.actor_learning_rate = lr_variable(config.actor_learning_rate, 'actor_learning_rate')
        self.alpha_learning_rate = lr_variable(config.alpha_learning_rate, 'alpha_learning_rate')
        self.actor_optimizer = self._adam(self.actor_learning_rate)
        self.alpha_optimizer = self._adam(self.alpha_learning_rate)

    def _adam(self, learning_rate: tf.Variable) -> snt.optimizers.Adam:
        c = self.config
        return snt.optimizers.Adam(learning_rate=learning_rate, beta1=c.adam_beta1,
                                   beta2=c.adam_beta2, epsilon=c.adam_epsilon)

    def _create_critic_variables(self, observation_space) -> None:
        """Builds the critics (Sonnet builds lazily) and copies them to the targets."""
        observation = trajectory.zeros(observation_spec(observation_space), (1,))
        action = tf.zeros([1, self._continuous_dims])
        self.critics(observation, action)
        self.target_critics(observation, action)
        for target, source in zip(self.target_critics.variables, self.critics.variables):
            target.assign(source)

    def set_progress(self, fraction: float) -> None:
        if self.config.learning_rate_schedule == 'linear':
            scale = max(0.0, 1.0 - fraction)
            self.learning_rate.assign(self.config.critic_learning_rate * scale)
            self.actor_learning_rate.assign(self.config.actor_learning_rate * scale)
            self.alpha_learning_rate.assign(self.config.alpha_learning_rate * scale)

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

    def _branches(self, q: tf.Tensor) -> List[tf.Tensor]:
        return tf.split(q, self._branch_sizes, axis=-1)

    def _split_alphas(self, alphas: List[tf.Tensor]):
        """(continuous group's alpha or None, per-branch alphas)."""
        alpha_c = alphas[0] if self._continuous else None
        return alpha_c, alphas[len(alphas) - len(self._discrete):]

    def _soft_value(self, q_min: tf.Tensor, log_prob: Optional[tf.Tensor], branch_log_probs,
                    alphas: List[tf.Tensor], entropy: bool) -> tf.Tensor:
        """V(s) `[N]` from min-over-replicas Q `[N, outputs]` at the policy's continuous action."""
        alpha_c, alpha_d = self._split_alphas(alphas)
        if self._discrete:
            value = losses.discrete_soft_value(self._branches(q_min), branch_log_probs,
                                               alpha_d, entropy)
        else:
            value = q_min[:, 0]
        if self._continuous and entropy:
            value -= alpha_c * log_prob
        return value

    def _q_taken(self, q: tf.Tensor, action: Tuple[tf.Tensor, ...]) -> tf.Tensor:
        """`[R, N, outputs]` -> `[R, N]` at the taken discrete actions (branch mean)."""
        if not self._discrete:
            return q[..., 0]
        taken = [tf.gather(qb, tf.broadcast_to(action[i][None], tf.shape(qb)[:2]), batch_dims=2)
                 for qb, i in zip(self._branches(q), self._discrete)]
        return tf.add_n(taken) / len(taken)

    def _continuous_part(self, action: Tuple[tf.Tensor, ...]) -> tf.Tensor:
        if not self._continuous:
            return tf.zeros([tf.shape(action[0])[0], 0])
        return tf.concat([action[i] for i in self._continuous], -1)

    # --- the step ------------------------------------------------------------

    def critic_targets(self, steps, alphas: List[tf.Tensor]) -> tf.Tensor:
        """TD targets `[B]` of the first transition of `[n + 1, B]` steps.

        V(s') = min over the target critics at the policy's action at s' (exact
        expectation for discrete branches), minus alpha log pi when
        `use_entropy_reward`; see `losses.n_step_targets` for episode ends.
        """
        config = self.config
        n = config.n_step
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first)
        next_outputs, _ = self.core.unroll(tf.nest.map_structure(lambda x: x[1:], inputs), ())
        next_params = tuple(_merge(p) for p in next_outputs.policy_params)
        next_action, next_log_prob, next_branch_log_probs = self._policy(next_params)
        next_observations = tf.nest.map_structure(lambda x: _merge(x[1:]), steps.observation)
        q_next = tf.reduce_min(self.target_critics(
            self.core.normalize_observation(next_observations), next_action), 0)
        next_values = self._soft_value(q_next, next_log_prob, next_branch_log_probs,
                                       alphas, config.use_entropy_reward)
        return losses.n_step_targets(
            steps.reward[:n] * config.reward_scaling, steps.discount[:n], steps.first,
            tf.reshape(next_values, [n, -1]), config.discounting)

    @tf.function(autograph=False)
    def step(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One update from `[n + 1, B]` sequences. Returns scalar metrics."""
        config = self.config
        steps = batch.sequence.steps
        first = steps.first  # [n + 1, B]
        mask = 1.0 - tf.cast(first[1], tf.float32)  # [B]
        if config.normalize:  # statistics first, as ML-Agents updates before its update
            self.core.update_normalizer(steps.observation[0])
        alphas = tf.exp(self.log_alpha)
        alpha_list = tf.unstack(alphas, num=self.log_alpha.shape[0])
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, first)
        observation_0 = tf.nest.map_structure(lambda x: x[0], steps.observation)
        # The critics see what the actor's torso sees.
        critic_observation = self.core.normalize_observation(observation_0)
        # Outside the tapes: the critic loss reads the targets as constants.
        targets = self.critic_targets(steps, alpha_list)

        with tf.GradientTape() as actor_tape:
            outputs, _ = self.core.unroll(tf.nest.map_structure(lambda x: x[:1], inputs), ())
            params_0 = tuple(p[0] for p in outputs.policy_params)
            action_0, log_prob_0, branch_log_probs_0 = self._policy(params_0)

            critic_action = action_0
            if config.dqda_clipping:
                # Per-row dQ/da clipped at dqda_clipping (the loss is a mean over B rows).
                critic_action = losses.clip_gradient(
                    action_0, config.dqda_clipping / tf.cast(tf.shape(mask)[0], tf.float32))
            q_policy = tf.reduce_min(self.critics(critic_observation, critic_action), 0)
            alpha_c, alpha_d = self._split_alphas(alpha_list)
            actor_rows = 0.0
            if self._discrete:
                actor_rows = losses.discrete_actor_loss(self._branches(q_policy),
                                                        branch_log_probs_0, alpha_d)
            if self._continuous:
                # Mixed actions: Q already entered through the discrete expectation.
                q_c = 0.0 if self._discrete else q_policy[:, 0]
                actor_rows += losses.continuous_actor_loss(q_c, log_prob_0, alpha_c)
            actor_loss = tf.reduce_mean(actor_rows)

            entropies = ([-log_prob_0] if self._continuous else []) + [
                -tf.reduce_sum(tf.exp(lp) * lp, -1) for lp in branch_log_probs_0]
            alpha_losses = [losses.temperature_loss(self.log_alpha[g], h, self.target_entropy[g])
                            for g, h in enumerate(entropies)]
            alpha_loss = tf.add_n(alpha_losses)
            # One backward pass for both: the actor loss sees alpha as a constant and
            # the temperature loss sees the entropy as one.
            actor_and_alpha_loss = actor_loss + alpha_loss

        with tf.GradientTape() as critic_tape:
            q = self.critics(critic_observation, self._continuous_part(
                tuple(a[0] for a in steps.action)))
            q_taken = self._q_taken(q, tuple(a[0] for a in steps.action))  # [R, B]
            critic_losses = losses.critic_loss(q_taken, targets, mask)  # [R]
            critic_loss = tf.reduce_sum(critic_losses)

        actor_variables = self.core.trainable_variables
        *actor_gradients, alpha_gradient = actor_tape.gradient(
            actor_and_alpha_loss, actor_variables + (self.log_alpha,))
        self.actor_optimizer.apply(actor_gradients, actor_variables)
        self.alpha_optimizer.apply([alpha_gradient], [self.log_alpha])
        if config.max_log_alpha is not None:
            self.log_alpha.assign(tf.minimum(self.log_alpha, config.max_log_alpha))
        critic_variables = self.critics.trainable_variables
        grad_norm = self._apply(critic_tape.gradient(critic_loss, critic_variables),
                                critic_variables, batch.replayed, tf.constant(1))
        # tau on update steps, 0 otherwise: no branch in the graph.
        update = tf.cast(self.num_steps % config.target_update_period == 0, tf.float32)
        losses.soft_update(self.target_critics.variables, self.critics.variables,
                           update * config.target_update_tau)

        metrics = {
            'losses/actor': actor_loss,
            'losses/alpha': alpha_loss,
            'losses/critic_grad_norm': grad_norm,
            'policy/q_mean': tf.reduce_mean(q_taken),
            'policy/target_mean': tf.reduce_mean(targets),
        }
        for r in range(config.num_critic_replicas):
            metrics[f'losses/critic_{r}'] = critic_losses[r]
        names = (['continuous'] if self._continuous else []) + [
            f'branch_{b}' for b in range(len(self._discrete))]
        for g, name in enumerate(names):
            metrics[f'policy/alpha_{name}'] = alpha_list[g]
            metrics[f'policy/entropy_{name}'] = tf.reduce_mean(entropies[g])
        return metrics
