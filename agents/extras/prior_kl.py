"""The prior-KL term: `prior_kl_weight * KL(pi || prior)` at every learned step
(`agents.prior` loads the prior and computes the KL)."""

from typing import Any, Dict, Tuple

import tensorflow as tf

from reverb_agents.agents import prior as prior_lib
from reverb_agents.networks.distributions import ActionSpace


class PriorKL:
    """The KL to the config's prior policy (`PriorConfig`, `--prior_actor`)."""

    def __init__(self, config: prior_lib.PriorConfig, observation_space: Any,
                 action_space: ActionSpace):
        self.config = config
        self.prior = prior_lib.load_prior(config, observation_space, action_space)
        self._actions = action_space

    def loss(self, steps: Any, learned: Any, params_t: Any, loss_weights_t: tf.Tensor,
             mask_t: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """(the weighted KL summed with `loss_weights_t` `[T, B]`, {'loss/prior_kl': its
        mean where `mask_t` `[T, B]` is 1}); `steps[:learned]` are the learned steps and
        `params_t` the policy's per-leaf parameters there `[T, B, p]` (or a function
        giving them)."""
        kl_t = prior_lib.kl_to_prior(self.prior, self._actions,
                                     tf.nest.map_structure(lambda x: x[:learned], steps),
                                     params_t() if callable(params_t) else params_t)
        loss = self.config.prior_kl_weight * tf.reduce_sum(loss_weights_t * kl_t)
        return loss, {'loss/prior_kl': prior_lib.mean_kl(kl_t, mask_t)}
