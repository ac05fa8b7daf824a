"""The critic pre-training term (the CLEAR seed's `build_critic_learner`): the first
`critic_pretrain_steps` learner steps fit the baseline to Monte-Carlo returns.

The returns are of the rewards as the learner's losses see them
(`LearnerBase.transformed_rewards`), bootstrapped with the current baseline at each
sequence's end; the loss is 0.5 (G - V)^2 in the baseline head's normalised units
(PopArt; plain units without it), whose statistics the returns move. The updates have
an optimiser of their own, as the seed's critic learner has, and count as learner
steps, so a restored run resumes in the phase it was in.

By default (`critic_pretrain_variables='baseline'`) only the baseline head learns, so
every variable the policy's output depends on stays as it is: the seed's default
critic is a network of its own, which its pre-training moves without touching the
actor, and here the torso and memory are the policy's too. 'all' differentiates with
respect to every trainable variable of the core, as the seed's loss does; the policy
head gets no gradient either way.
"""

import dataclasses
from typing import Any, Callable, Dict, Tuple

import sonnet as snt
import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.agents.configs import field, require, require_choice
from reverb_agents.agents.slots import create_slots
from reverb_agents.networks.cores import CoreInputs
from reverb_agents.networks.popart import update_statistics
from reverb_agents.replay import trajectory

CRITIC_PRETRAIN = 'critic_pretrain'  # the learner's phase (`contract.Learner.phase`)
CRITIC_PRETRAIN_METRICS = ('critic_pretrain/baseline_loss', 'critic_pretrain/grad_norm',
                           'critic_pretrain/learning_rate')
CRITIC_PRETRAIN_VARIABLES = ('baseline', 'all')


@dataclasses.dataclass(frozen=True)
class CriticPretrainConfig:
    critic_pretrain_steps: int = field(
        0, 'first learner steps minimise the baseline loss alone, on Monte-Carlo returns '
        '(the seed)')
    critic_pretrain_variables: str = field(
        'baseline', "what critic pre-training trains: 'baseline' (the value head alone: the "
        "policy does not move) or 'all' (every core variable, torso and LSTM too, as the seed)")

    def __post_init__(self):
        require(self.critic_pretrain_steps >= 0,
                f'critic_pretrain_steps must be >= 0, got {self.critic_pretrain_steps}')
        require_choice('critic_pretrain_variables', self.critic_pretrain_variables,
                       CRITIC_PRETRAIN_VARIABLES)

    def metric_names(self) -> Tuple[str, ...]:
        """What a pre-training step returns besides the baseline head's PopArt metrics."""
        return CRITIC_PRETRAIN_METRICS if self.critic_pretrain_steps else ()


# (rewards, discounts) `[T, B]` as the learner's losses see them, from the batch's steps
# `[T + 1, B]`, the baseline `[T, B]` and the valid steps `[T, B]`.
RewardsFn = Callable[[Any, tf.Tensor, tf.Tensor], Tuple[tf.Tensor, tf.Tensor]]


class CriticPretraining:
    """The phase and its compiled step over one learner's `ActorCriticCore`."""

    def __init__(self, config: CriticPretrainConfig, core: Any, optimizer: snt.Optimizer,
                 learning_rate: tf.Variable, apply: Callable[..., tf.Tensor],
                 rewards: RewardsFn):
        """`optimizer`: this term's own (the learner keeps it, so its checkpoint holds
        it); `apply(gradients, variables, replayed, unroll_length, optimizer)`: the
        learner's counted, clipped update; `rewards`: the learner's `RewardsFn`."""
        self.config, self.optimizer = config, optimizer
        self._core, self._learning_rate = core, learning_rate
        self._apply, self._rewards = apply, rewards
        self._due = config.critic_pretrain_steps > 0
        create_slots(optimizer, self.variables())
        self.step = tf.function(self._step, autograph=False)

    def due(self, num_steps: tf.Variable) -> bool:
        """Whether the learner's next step (its `num_steps` so far) pre-trains; read
        eagerly, and only until the phase ends."""
        if self._due and int(num_steps.numpy()) >= self.config.critic_pretrain_steps:
            self._due = False
        return self._due

    @property
    def pending(self) -> bool:
        """`due` as last read (a step traced inside a caller's function cannot read it)."""
        return self._due

    def variables(self) -> Tuple[tf.Variable, ...]:
        """What pre-training trains (`critic_pretrain_variables`)."""
        if self.config.critic_pretrain_variables == 'all':
            return self._core.trainable_variables
        return self._core.parts.baseline_head.trainable_variables

    def _step(self, batch: Any) -> Dict[str, tf.Tensor]:
        steps = batch.sequence.steps  # [T + 1, B, ...]
        inputs = CoreInputs(steps.observation, steps.prev_action, steps.prev_reward,
                            steps.first, steps.task)
        mask_t = trajectory.valid_mask(steps.first)  # [T, B]
        head = self._core.parts.baseline_head
        group = head.group_of(steps.task[:-1])
        variables = self.variables()
        with tf.GradientTape() as tape:
            outputs, _ = self._core.unroll(inputs, batch.sequence.core_state)
            v_t = outputs.baseline[:-1]
            r_t, discount_t = self._rewards(steps, v_t, mask_t)
            g_t = returns.discounted_returns(r_t, discount_t,
                                             tf.stop_gradient(outputs.baseline[-1]))
            loss = tf.reduce_sum(mask_t * 0.5 * tf.square(
                tf.stop_gradient(head.normalize(g_t, group)) - head.normalize(v_t, group)))
        grad_norm = self._apply(tape.gradient(loss, variables), variables, batch.replayed,
                                tf.shape(mask_t)[0], self.optimizer)
        return {'critic_pretrain/baseline_loss': loss, 'critic_pretrain/grad_norm': grad_norm,
                'critic_pretrain/learning_rate': tf.identity(self._learning_rate),
                **update_statistics(head, g_t, mask_t, steps.task[:-1])}
