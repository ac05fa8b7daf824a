"""The terms any learner may add to its policy's loss, composed once.

- the KL to a prior policy (`agents.prior`, `--prior_actor`, `--prior_kl_weight`),
  logged as `loss/prior_kl`;
- behavioural cloning on demonstrations (`agents.signals`, `--bc_strength`
  annealed over `--bc_steps`), logged as `bc/loss` and `bc/strength`, and its
  pre-training before any interaction (`--bc_pretrain_steps`, `Learner.pretrain`).

An agent whose config has the `prior` and `signals` sub-configs gets both through
`agents.learner_base.LearnerBase`: `attach_extras` builds one `PolicyExtras` (and the
reward signals it reads demonstrations from), the learner's step calls `added_to`
once, and the base's `pretrain` runs cloning's pre-training; the extras' metric
names are the sub-configs' (`PriorConfig.metric_names`, `SignalsConfig.metric_names`).

A plain object, not a `tf.Module`: what it holds (the prior policy, the learner's
reward signals and core) is checkpointed, or not, where the learner keeps it.
"""

from typing import Any, Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from reverb_agents.agents import prior as prior_lib
from reverb_agents.agents.signals.demos import demo_cloning_loss
from reverb_agents.agents.signals.losses import linear_decay
from reverb_agents.agents.signals.signals import RewardSignals
from reverb_agents.networks.distributions import ActionSpace


class PolicyExtras:
    """A learner's prior KL and behavioural cloning (the module doc)."""

    def __init__(self, config: Any, core: Any, action_space: ActionSpace,
                 signals: Optional[RewardSignals], bc_length: int,
                 bc_rows: int):
        """`config`: the agent's config (its `prior` and, if any, `signals` sub-configs);
        `signals`: the learner's `RewardSignals` (its demonstrations), or None;
        `bc_length` x `bc_rows`: the demonstration windows one cloning loss unrolls."""
        self._prior_config = config.prior
        self._signals_config = getattr(config, 'signals', None)
        self.prior = prior_lib.load_prior(config.prior, core.observation_space, action_space)
        self._core, self._actions, self._signals = core, action_space, signals
        self._bc_length, self._bc_rows = bc_length, bc_rows
        self._pretrain_step = None  # compiled at the first `pretrain` with something due

    @property
    def active(self) -> bool:
        """Whether `added_to` adds anything (a prior, or cloning)."""
        return self.prior is not None or self.clones

    @property
    def clones(self) -> bool:
        return bool(self._signals_config is not None and self._signals_config.bc_strength)

    def added_to(self, total: tf.Tensor, steps: Any, learned: Any,
                 params_t: Any, loss_weights_t: tf.Tensor, mask_t: tf.Tensor,
                 num_steps: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """(`total` plus the extras, their metrics). `steps`: the batch's trajectory
        fields `[T', B, ...]`, of which `[:learned]` are the learned steps (`-1`: all but
        the bootstrap step), sliced only if a term needs them; `params_t`: the policy's
        per-leaf parameters there `[T, B, p]` (or a function giving them, called only if
        the prior needs them); the KL `[T, B]` is summed with
        `loss_weights_t` (how the learner weighs its own per-step losses) and
        `loss/prior_kl` is its mean where `mask_t` is 1; `num_steps`: the learner's
        steps (cloning's annealing)."""
        metrics: Dict[str, tf.Tensor] = {}
        if self.prior is not None:
            kl_t = prior_lib.kl_to_prior(self.prior, self._actions,
                                         tf.nest.map_structure(lambda x: x[:learned], steps),
                                         params_t() if callable(params_t) else params_t)
            total += self._prior_config.prior_kl_weight * tf.reduce_sum(loss_weights_t * kl_t)
            metrics['loss/prior_kl'] = prior_lib.mean_kl(kl_t, mask_t)
        if self.clones:
            strength = linear_decay(
                self._signals_config.bc_strength, self._signals_config.bc_steps, num_steps)
            bc = self.bc_loss()
            total += strength * bc
            metrics.update({'bc/loss': bc, 'bc/strength': strength})
        return total, metrics

    def bc_loss(self) -> tf.Tensor:
        """Behavioural cloning `[]` on `bc_rows` demonstration windows of `bc_length`."""
        return demo_cloning_loss(self._signals.bc_demos, self._core, self._actions,
                                 self._bc_length, self._bc_rows)

    def pretrain(self, apply: Callable[[List[tf.Tensor], List[tf.Variable]], Any]
                 ) -> Optional[float]:
        """`bc_pretrain_steps` cloning updates of the core's variables on the
        demonstrations alone (the rest of them, after a restore), each applied with
        `apply(gradients, variables)` (the learner's clipped step with the policy's
        optimiser) in one compiled step; the last loss, or None if none was due."""
        if self._signals is None:
            return None
        if self._pretrain_step is None:
            @tf.function(autograph=False)
            def step() -> tf.Tensor:
                variables = self._core.trainable_variables
                with tf.GradientTape() as tape:
                    loss = self.bc_loss()
                apply(tape.gradient(loss, variables), variables)
                return loss
            self._pretrain_step = step
        return self._signals.pretrain(self._pretrain_step,
                                      self._signals_config.bc_pretrain_steps)
