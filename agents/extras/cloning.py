"""The behavioural-cloning term: the cloning loss of demonstrated actions, annealed, and
its pre-training before any actor acts (`SignalsConfig`'s `bc_*` fields; the
demonstrations are the learner's `RewardSignals`')."""

from typing import Any, Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from reverb_agents.agents.signals.config import SignalsConfig
from reverb_agents.agents.signals.demos import demo_cloning_loss
from reverb_agents.agents.signals.losses import linear_decay
from reverb_agents.agents.signals.signals import RewardSignals
from reverb_agents.networks.distributions import ActionSpace


class BehaviourCloning:
    """Cloning on `rows` demonstration windows of `length` steps, unrolled by `core`."""

    def __init__(self, config: SignalsConfig, core: Any, action_space: ActionSpace,
                 signals: RewardSignals, length: int, rows: int):
        self.config = config
        self._core, self._actions, self._signals = core, action_space, signals
        self._length, self._rows = length, rows
        self._pretrain_step = None  # compiled at the first `pretrain` with something due

    @property
    def adds_loss(self) -> bool:
        """Whether the learning step adds the loss (`bc_strength` > 0)."""
        return bool(self.config.bc_strength)

    def cloning_loss(self) -> tf.Tensor:
        """The cloning loss `[]` of one sample of demonstration windows."""
        return demo_cloning_loss(self._signals.bc_demos, self._core, self._actions,
                                 self._length, self._rows)

    def loss(self, num_steps: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """(strength x the cloning loss, its metrics); the strength decays linearly to 0
        over `bc_steps` of the learner's `num_steps` (constant with 0)."""
        strength = linear_decay(self.config.bc_strength, self.config.bc_steps, num_steps)
        bc = self.cloning_loss()
        return strength * bc, {'bc/loss': bc, 'bc/strength': strength}

    def pretrain(self, apply: Callable[[List[tf.Tensor], List[tf.Variable]], Any]
                 ) -> Optional[float]:
        """`bc_pretrain_steps` cloning updates of the core's variables on the
        demonstrations alone (the rest of them, after a restore), each applied with
        `apply(gradients, variables)` in one compiled step; the last loss, or None if
        none was due."""
        if self._pretrain_step is None:
            @tf.function(autograph=False)
            def step() -> tf.Tensor:
                variables = self._core.trainable_variables
                with tf.GradientTape() as tape:
                    loss = self.cloning_loss()
                apply(tape.gradient(loss, variables), variables)
                return loss
            self._pretrain_step = step
        return self._signals.pretrain(self._pretrain_step, self.config.bc_pretrain_steps)
