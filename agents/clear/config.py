"""CLEAR's configuration: one frozen dataclass, one line of doc per field.

`launch/` turns every field into an absl flag of the same name, so the
defaults live here only. `batch_size` counts sequences of `unroll_length`
learned steps.
"""

import dataclasses
from typing import Tuple

from reverb_agents.agents import configs
from reverb_agents.agents import network_config
from reverb_agents.agents import policy_average
from reverb_agents.agents import search
from reverb_agents.agents.configs import field, require, sub_config
from reverb_agents.agents.extras.critic_pretrain import CriticPretrainConfig
from reverb_agents.agents.prior import PriorConfig
from reverb_agents.agents.returns import REWARD_CLIPPINGS
from reverb_agents.agents.signals.config import SignalsConfig
from reverb_agents.replay.batches import split_batch


ADVANTAGES = ('vtrace', 'gae')


@dataclasses.dataclass(frozen=True)
class CLEARConfig:
    # Data.
    batch_size: int = field(32, 'sequences per learner step (fresh + replayed)',
                            search=search.Choice(8, 16, 32, 64))
    unroll_length: int = field(20, 'learner unroll T; stored sequences hold T + 1 steps',
                               search=search.UNROLL_LENGTHS)
    # 0.9375 with 16 environments (`CLEAR.run_defaults`): two fresh sequences a step, eight
    # times the updates per env step of the paper's 0.5 (the seed's own proportion), measured
    # on the untuned suite (docs/benchmarks.md#more-updates-per-env-step).
    replay_fraction: float = field(0.9375, "replayed share of a batch: 0 = IMPALA, 0.5 = the "
                                   "CLEAR paper's",
                                   search=search.Uniform(0.0, 0.9375))
    min_replay_size: int = field(64, 'sequences in replay before it is sampled')
    replay: configs.ReplayConfig = sub_config(configs.ReplayConfig)
    prior: PriorConfig = sub_config(PriorConfig)  # --prior_actor (agents.prior)
    # Returns.
    discounting: float = field(0.99, 'gamma',
                               search=search.DISCOUNTS)
    advantage: str = field('vtrace', "'vtrace' (off-policy corrected) or 'gae' (the A3C "
                           "meta-RL seed's generalised advantage estimation, no correction)")
    gae_lambda: float = field(1.0, "GAE's lambda (--advantage=gae)")
    vtrace_lambda: float = field(1.0, "V-trace's lambda: traces lambda * min(1, rho); 1 is "
                                 "plain V-trace",
                                 search=search.LAMBDAS)
    reward_scaling: float = field(1.0, 'rewards are multiplied by this, then clipped (the seed)')
    reward_clipping: str = field(
        'none', "clip the scaled reward: 'abs_one' (the seed's), 'soft_asymmetric' or 'none'")
    value_normalization: str = field('popart', network_config.VALUE_NORMALIZATION_DOC)
    popart_step_size: float = field(3e-4, network_config.POPART_STEP_DOC)
    num_tasks: int = field(0, network_config.NUM_TASKS_DOC)
    # Loss weights.
    baseline_cost: float = field(0.5, 'weight of 0.5 * (vs - V)^2',
                                 search=search.VALUE_COSTS)
    # 0.01 left a third of LunarLander's seeds under 150 and MountainCar (shaped) at -200
    # on one seed in three (docs/benchmarks.md#a-smaller-entropy-bonus-for-clear).
    entropy_cost: float = field(0.003, 'weight of the entropy bonus',
                                search=search.ENTROPY_COSTS)
    entropy_cost_final: float = field(-1.0, 'anneal the entropy weight linearly to this over '
                                      '--entropy_anneal_steps learner steps (< 0: no annealing)')
    entropy_anneal_steps: int = field(0, 'learner steps of the entropy annealing')
    policy_cloning_cost: float = field(0.01, 'weight of KL(mu || pi) on replayed rows')
    value_cloning_cost: float = field(0.005, 'weight of (V - V_mu)^2 on replayed rows')
    clip_advantage: bool = field(False, 'keep only positive advantages in the policy gradient')
    policy_average_tau: float = field(0.0, policy_average.TAU_DOC)
    # --critic_pretrain_steps, --critic_pretrain_variables (`agents.extras`).
    critic_pretrain: CriticPretrainConfig = sub_config(CriticPretrainConfig)
    # Reward signals (curiosity, GAIL) and behavioural cloning (`agents.signals`).
    signals: SignalsConfig = sub_config(SignalsConfig)
    # Optimiser (Adam or RMSProp, `--optimizer`).
    optimizer: configs.OptimizerConfig = sub_config(configs.OptimizerConfig)
    # Network.
    lstm_size: int = field(64, 'LSTM units; 0 makes the core feed-forward',
                           search=search.LSTM_SIZES)
    hidden_sizes: Tuple[int, ...] = field((64, 64), 'MLP torso for vector observations',
                                          search=search.HIDDEN_SIZES)
    # --torso, --memory; the torso's features also go around the memory (--memory_skip):
    # docs/benchmarks.md#untuned-defaults
    network: network_config.NetworkConfig = sub_config(network_config.network_with_skip)
    normalize: bool = field(True, network_config.NORMALIZE_DOC, search=search.Choice(True, False))
    prev_reward_input: str = field('transformed', network_config.PREV_REWARD_DOC)

    def __post_init__(self):
        configs.require_positive(self, 'batch_size', 'unroll_length', 'min_replay_size')
        configs.require_fraction(self, 'discounting', 'gae_lambda', 'vtrace_lambda',
                                 'policy_average_tau')
        configs.require_choice('advantage', self.advantage, ADVANTAGES)
        require(self.entropy_anneal_steps >= 0,
                f'entropy_anneal_steps must be >= 0, got {self.entropy_anneal_steps}')
        require((self.entropy_cost_final >= 0) == (self.entropy_anneal_steps > 0),
                'entropy annealing needs both --entropy_cost_final >= 0 and '
                '--entropy_anneal_steps > 0')
        configs.require_choice('reward_clipping', self.reward_clipping, REWARD_CLIPPINGS)
        network_config.check_value_normalization(self)
        network_config.check_memory(self)
        configs.require_choice('prev_reward_input', self.prev_reward_input,
                               network_config.PREV_REWARD_INPUTS)
        configs.require_sizes('hidden_sizes', self.hidden_sizes)
        for name in ('reward_scaling', 'baseline_cost', 'entropy_cost', 'policy_cloning_cost',
                     'value_cloning_cost', 'lstm_size'):
            require(getattr(self, name) >= 0,
                    f'{name} must be >= 0 (a weight or a size), got {getattr(self, name)}')
        # split_batch is where replay_fraction's range is checked.
        num_fresh, num_replayed = split_batch(self.batch_size, self.replay_fraction)
        require(self.replay_fraction < 1.0,
                'replay_fraction must be below 1: the learner is paced by the fresh part of '
                'its batches, and with none the actors would run free')
        require(num_replayed <= self.replay.replay_size,
                f'replay_size ({self.replay.replay_size}) is smaller than the replayed part '
                f'of a batch ({num_replayed})')
        require(num_fresh <= self.replay.queue_size,
                f'queue_size ({self.replay.queue_size}) must hold the fresh part of a batch '
                f'({num_fresh}), or the learner waits forever')

    @property
    def sequence_length(self) -> int:
        return self.unroll_length + 1
