"""A2C's configuration: one frozen dataclass, one line of doc per field.

`launch/` turns every field into an absl flag of the same name. `batch_size` counts
sequences of `unroll_length` learned steps, all fresh (nothing is replayed). The
`prior`, `signals` and `critic_pretrain` sub-configs are the declarations that give
the learner the KL to a prior policy, behavioural cloning and critic pre-training
(`agents.extras`).
"""

import dataclasses
from typing import Tuple

from reverb_agents.agents import configs
from reverb_agents.agents import network_config
from reverb_agents.agents import search
from reverb_agents.agents.configs import field, require, sub_config
from reverb_agents.agents.extras.critic_pretrain import CriticPretrainConfig
from reverb_agents.agents.prior import PriorConfig
from reverb_agents.agents.signals.config import SignalsConfig


@dataclasses.dataclass(frozen=True)
class A2CConfig:
    batch_size: int = field(16, 'sequences per learner step, all fresh (one per environment: '
                            'each batch is the latest round of every environment)')
    unroll_length: int = field(8, 'learner unroll T; stored sequences hold T + 1 steps',
                               search=search.Choice(5, 8, 16, 32))
    discounting: float = field(0.99, 'gamma',
                               search=search.DISCOUNTS)
    gae_lambda: float = field(0.95, "GAE's lambda (1: Monte-Carlo returns bootstrapped "
                              "at the sequence's end)",
                              search=search.LAMBDAS)
    baseline_cost: float = field(0.5, 'weight of 0.5 * (G - V)^2',
                                 search=search.VALUE_COSTS)
    entropy_cost: float = field(0.01, 'weight of the entropy bonus',
                                search=search.ENTROPY_COSTS)
    replay: configs.ReplayConfig = sub_config(configs.ReplayConfig)  # the queue's size
    prior: PriorConfig = sub_config(PriorConfig)  # --prior_actor (agents.prior)
    signals: SignalsConfig = sub_config(SignalsConfig)  # cloning only: --bc_demos, ...
    # --critic_pretrain_steps, --critic_pretrain_variables (`agents.extras`).
    critic_pretrain: CriticPretrainConfig = sub_config(CriticPretrainConfig)
    optimizer: configs.OptimizerConfig = sub_config(configs.OptimizerConfig)
    lstm_size: int = field(0, 'LSTM units; 0 makes the core feed-forward')
    hidden_sizes: Tuple[int, ...] = field((64, 64), 'MLP torso for vector observations',
                                          search=search.HIDDEN_SIZES)
    network: network_config.NetworkConfig = sub_config(network_config.NetworkConfig)  # --torso, --memory
    normalize: bool = field(True, network_config.NORMALIZE_DOC, search=search.Choice(True, False))

    def __post_init__(self):
        configs.require_positive(self, 'batch_size', 'unroll_length')
        configs.require_fraction(self, 'discounting', 'gae_lambda')
        network_config.check_memory(self)
        configs.require_sizes('hidden_sizes', self.hidden_sizes)
        for name in ('baseline_cost', 'entropy_cost', 'lstm_size'):
            require(getattr(self, name) >= 0, f'{name} must be >= 0, got {getattr(self, name)}')
        require(not self.signals.intrinsic, 'a2c learns no reward signals (--intrinsic); '
                'behavioural cloning (--bc_demos) is its only signals option')
        require(self.batch_size <= self.replay.queue_size,
                f'queue_size ({self.replay.queue_size}) must hold a batch ({self.batch_size}), '
                f'or the learner waits forever')
