"""`RewardSignals` (`agents.signals`): one learner's intrinsic signals, their models,
optimisers and demonstrations, and their part of the learner's step."""

from typing import Any, Callable, Dict, Optional, Tuple, Union

import gymnasium as gym
import sonnet as snt
import tensorflow as tf

from reverb_agents.agents.optimizers import Adam
from reverb_agents.agents.signals.config import SignalsConfig
from reverb_agents.agents.signals.demos import DemoBuffer
from reverb_agents.agents.signals.losses import (
    bounded_curiosity, gail_discriminator_loss, gail_reward, linear_decay)
from reverb_agents.agents.signals.models import ICM, Discriminator
from reverb_agents.agents.slots import create_slots
from reverb_agents.networks.cores import merge_time
from reverb_agents.networks.distributions import ActionSpace

FORWARD_WEIGHT = 0.2  # ICM's beta: the forward model's share of the ICM loss (Pathak et al.)


def _flat(x: Any) -> Any:
    """[T, B, ...] -> [T * B, ...] for every leaf of a nest."""
    return tf.nest.map_structure(merge_time, x)


class RewardSignals(snt.Module):
    """The intrinsic signals' models, optimisers and demonstrations of one learner."""

    def __init__(self, config: SignalsConfig, observation_space: gym.Space,
                 action_space: ActionSpace, observation_dtype: tf.DType = tf.float32):
        super().__init__(name='reward_signals')
        self.config = config
        self.names = config.intrinsic
        if 'curiosity' in self.names:
            self.curiosity = ICM(observation_space, action_space, config.curiosity_encoding_size,
                                 config.signal_hidden_size)
            self.curiosity_optimizer = Adam(config.curiosity_learning_rate)
            # The running mean of the squared (bounded) forward error: `curiosity_clip`'s
            # and `curiosity_normalize`'s scale.
            self.curiosity_mean_square = tf.Variable(0.0, trainable=False,
                                                     name='curiosity_mean_square')
            self.curiosity_updates = tf.Variable(0.0, trainable=False, name='curiosity_updates')
        if 'gail' in self.names:
            self.gail = Discriminator(observation_space, action_space, config.gail_use_actions,
                                      config.signal_hidden_size)
            self.gail_optimizer = Adam(config.gail_learning_rate)
            self.gail_demos = DemoBuffer(config.gail_demos, action_space, observation_dtype)
        self.bc_demos = (DemoBuffer(config.bc_demos, action_space, observation_dtype)
                         if config.uses_bc else None)
        self.pretrained_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                            name='pretrained_steps')

    def pretrain(self, step: Callable[[], tf.Tensor], steps: int) -> Optional[float]:
        """Runs `step()` (one behavioural-cloning update) until `steps` have run in
        all, counting in the checkpointed `pretrained_steps`; the last loss, or None."""
        loss = None
        while int(self.pretrained_steps.numpy()) < steps:
            loss = float(step().numpy())
            self.pretrained_steps.assign_add(1)
        return loss

    @property
    def strengths(self) -> Tuple[float, ...]:
        return tuple(getattr(self.config, f'{name}_strength') for name in self.names)

    def create_variables(self, observation: Any, action: Tuple[tf.Tensor, ...]) -> None:
        """Builds every model on a batch `[N, ...]` (before a checkpoint restore)."""
        if 'curiosity' in self.names:
            self.curiosity.losses(observation, action, observation)
            create_slots(self.curiosity_optimizer, self.curiosity.trainable_variables)
        if 'gail' in self.names:
            self.gail.logits(self.gail.inputs(observation, action))
            create_slots(self.gail_optimizer, self.gail.trainable_variables)

    def _update_mean_square(self, reward: tf.Tensor, mask: tf.Tensor, count: tf.Tensor
                            ) -> tf.Tensor:
        """Updates and returns the running mean of the squared curiosity reward: an
        exponential average of the batches' means (weight 8 / (8 + u) after u updates,
        at least 0.01, so the first batch sets it and it follows ICM as it learns)."""
        batch = tf.reduce_sum(mask * tf.square(reward)) / count
        rate = tf.maximum(8.0 / (8.0 + self.curiosity_updates), 0.01)
        self.curiosity_updates.assign_add(1.0)
        return self.curiosity_mean_square.assign_add(rate * (batch - self.curiosity_mean_square))

    def rewards_and_train(self, observation: Any, action: Tuple[tf.Tensor, ...],
                          mask: tf.Tensor, step: Union[int, tf.Tensor] = 0
                          ) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """Intrinsic rewards `[T, B, n]` (strength-weighted, no gradient) for the
        time-major steps `observation[:-1]`, `action[:-1]` -> `observation[1:]`
        (`[T + 1, B, ...]` in, `mask` `[T, B]` marks real steps), from the models as
        they are; then one update of each model on the masked steps. Metrics by name.
        `step` (the learner's) anneals the curiosity strength (`curiosity_steps`).
        """
        obs = _flat(tf.nest.map_structure(lambda x: x[:-1], observation))
        next_obs = _flat(tf.nest.map_structure(lambda x: x[1:], observation))
        act = _flat(tf.nest.map_structure(lambda x: x[:-1], action))
        flat_mask = tf.reshape(mask, [-1])
        count = tf.maximum(tf.reduce_sum(flat_mask), 1.0)
        rewards, metrics = [], {}
        if 'curiosity' in self.names:
            variables = self.curiosity.trainable_variables
            with tf.GradientTape() as tape:
                forward, inverse = self.curiosity.losses(obs, act, next_obs)
                forward_loss = tf.reduce_sum(flat_mask * forward) / count
                inverse_loss = tf.reduce_sum(flat_mask * inverse) / count
                loss = FORWARD_WEIGHT * forward_loss + (1.0 - FORWARD_WEIGHT) * inverse_loss
            self.curiosity_optimizer.apply(tape.gradient(loss, variables), variables)
            reward = bounded_curiosity(tf.stop_gradient(forward), self.config.curiosity_clip,
                                       self.curiosity_mean_square, self.curiosity_updates)
            mean_square = self._update_mean_square(reward, flat_mask, count)
            if self.config.curiosity_normalize:
                reward = reward / tf.sqrt(mean_square + 1e-8)
            reward = reward * linear_decay(self.config.curiosity_strength,
                                           self.config.curiosity_steps, step)
            rewards.append(reward)
            metrics.update({'curiosity/forward_loss': forward_loss,
                            'curiosity/inverse_loss': inverse_loss,
                            'curiosity/reward': tf.reduce_sum(flat_mask * reward) / count})
        if 'gail' in self.names:
            n = tf.shape(flat_mask)[0]
            policy = self.gail.inputs(obs, act)
            demo = self.gail.inputs(*self.gail_demos.sample(n))
            variables = self.gail.trainable_variables
            with tf.GradientTape() as tape:
                policy_logits = self.gail.logits(policy)
                demo_logits = self.gail.logits(demo)
                discriminator_loss = gail_discriminator_loss(demo_logits, policy_logits,
                                                             flat_mask)
                penalty = self.gail.gradient_penalty(demo, policy)
                loss = discriminator_loss + self.config.gail_gradient_penalty * penalty
            self.gail_optimizer.apply(tape.gradient(loss, variables), variables)
            reward = tf.stop_gradient(gail_reward(policy_logits, self.config.gail_reward)
                                      ) * self.config.gail_strength
            rewards.append(reward)
            metrics.update({
                'gail/loss': discriminator_loss, 'gail/gradient_penalty': penalty,
                'gail/reward': tf.reduce_sum(flat_mask * reward) / count,
                'gail/demo_estimate': tf.reduce_mean(tf.sigmoid(demo_logits)),
                'gail/policy_estimate': tf.reduce_sum(flat_mask * tf.sigmoid(policy_logits))
                                        / count})
        stacked = tf.stack(rewards, -1)  # [T * B, n]
        return tf.reshape(stacked, tf.concat([tf.shape(mask), [len(rewards)]], 0)), metrics
