"""`LearnerExtras`: the terms a learner's config declares (`agents.extras`), built once
and applied through three calls."""

from typing import Any, Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from reverb_agents.agents.extras.cloning import BehaviourCloning
from reverb_agents.agents.extras.critic_pretrain import CriticPretraining
from reverb_agents.agents.extras.prior_kl import PriorKL
from reverb_agents.agents.signals.signals import RewardSignals


class LearnerExtras:
    """A learner's prior KL, behavioural cloning, reward signals and critic pre-training,
    each None unless its sub-config asks for it (`LearnerBase.attach_extras` builds them).

    A plain object, not a `tf.Module`: what it holds with state (the reward signals'
    models, the critic's optimiser) the learner keeps as its own attributes, so that
    checkpoints name them there.
    """

    def __init__(self, prior_kl: Optional[PriorKL] = None,
                 cloning: Optional[BehaviourCloning] = None,
                 signals: Optional[RewardSignals] = None,
                 critic_pretrain: Optional[CriticPretraining] = None):
        """The terms (`signals`: the learner's `RewardSignals` when it learns intrinsic
        rewards); none: a learner with no extras."""
        self.prior_kl, self.cloning = prior_kl, cloning
        self.signals, self.critic_pretrain = signals, critic_pretrain

    @property
    def active(self) -> bool:
        """Whether `added_to` adds anything (a prior, or cloning's loss)."""
        return self.prior_kl is not None or (self.cloning is not None
                                             and self.cloning.adds_loss)

    def added_to(self, total: tf.Tensor, steps: Any, learned: Any,
                 params_t: Any, loss_weights_t: tf.Tensor, mask_t: tf.Tensor,
                 num_steps: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """(`total` plus every declared loss term, their metrics), inside the learner's
        tape. `steps`: the batch's trajectory fields `[T', B, ...]`, of which
        `[:learned]` are the learned steps (`-1`: all but the bootstrap step);
        `params_t`: the policy's per-leaf parameters there `[T, B, p]` (or a function
        giving them, called only if the prior needs them); `loss_weights_t` `[T, B]`:
        how the learner weighs its own per-step losses; `mask_t` `[T, B]`: the valid
        steps (the metrics' means); `num_steps`: the learner's steps (annealing)."""
        metrics: Dict[str, tf.Tensor] = {}
        if self.prior_kl is not None:
            loss, kl_metrics = self.prior_kl.loss(steps, learned, params_t, loss_weights_t,
                                                  mask_t)
            total += loss
            metrics.update(kl_metrics)
        if self.cloning is not None and self.cloning.adds_loss:
            loss, bc_metrics = self.cloning.loss(num_steps)
            total += loss
            metrics.update(bc_metrics)
        return total, metrics

    def signal_rewards(self, observation: Any, action: Any, mask_t: tf.Tensor,
                       num_steps: tf.Tensor) -> Tuple[Optional[tf.Tensor], Dict[str, tf.Tensor]]:
        """(the intrinsic rewards `[T, B, n]` of the steps `observation[:-1]`,
        `action[:-1]` -> `observation[1:]` (`[T + 1, B, ...]`; `mask_t` `[T, B]` marks
        real steps), or None without reward signals; their metrics), from the signals'
        models as they are, then one update of each (`RewardSignals.rewards_and_train`)."""
        if self.signals is None:
            return None, {}
        return self.signals.rewards_and_train(observation, action, mask_t, num_steps)

    def pretrain(self, apply: Callable[[List[tf.Tensor], List[tf.Variable]], Any]
                 ) -> Optional[float]:
        """Cloning's pre-training (`BehaviourCloning.pretrain`), or None without it."""
        return None if self.cloning is None else self.cloning.pretrain(apply)
