"""ACER's configuration: one frozen dataclass, one line of doc per field.

Defaults follow chainerrl's ACER where the seed has them. `batch_size` counts
sequences of `unroll_length` learned steps; each on-policy batch is followed
by `replay_ratio` replayed ones (the schedule is declared in `agents/acer/agent.py`).
As in chainerrl, rewards reach the losses unchanged by default
(`reward_clipping='none'`, `reward_scaling=1`), `use_Q_opc` changes only the
policy's advantage, and the entropy bonus is weighted by `pi_loss_coef`.
"""

import dataclasses
from typing import Optional, Tuple

from reverb_agents.agents import configs
from reverb_agents.agents import network_config
from reverb_agents.agents import policy_average
from reverb_agents.agents import search
from reverb_agents.agents.configs import field, require, sub_config
from reverb_agents.agents.prior import PriorConfig
from reverb_agents.agents.returns import REWARD_CLIPPINGS

# The average network's LSTM state at a sequence's first step (`average_network_state`).
AVERAGE_NETWORK_STATES = ('stored', 'reset', 'acted')

@dataclasses.dataclass(frozen=True)
class ACERConfig:
    # Data and schedule.
    # 8: twice the updates per env step of 16 for the same sequences learned, which
    # solved Pendulum and LunarLander untuned (docs/benchmarks.md#acers-batches-of-8).
    batch_size: int = field(8, 'sequences per update (on-policy and replayed alike)',
                            search=search.Choice(8, 16, 32))
    unroll_length: int = field(20, 'T; stored sequences hold T + 1 steps',
                               search=search.UNROLL_LENGTHS)
    replay_ratio: float = field(4.0, 'replayed updates after each on-policy one (n_times_replay)',
                                search=search.Choice(0.0, 1.0, 2.0, 4.0, 8.0))
    replay_ratio_poisson: bool = field(
        False, 'draw the number of replayed updates from Poisson(replay_ratio)')
    replay_start_size: int = field(10_000, 'env steps in replay before replayed updates start')
    disable_online_update: bool = field(
        False, 'learn from replayed batches only: on-policy batches are drained and dropped')
    replay: configs.ReplayConfig = sub_config(configs.ReplayConfig)
    prior: PriorConfig = sub_config(PriorConfig)  # --prior_actor (agents.prior)
    # Returns.
    discounting: float = field(0.99, 'gamma',
                               search=search.DISCOUNTS)
    reward_clipping: str = field(
        'none', "'abs_one', 'soft_asymmetric' or 'none', applied after reward_scaling")
    reward_scaling: float = field(1.0, 'rewards are multiplied by this, then clipped')
    use_Q_opc: bool = field(
        False, "the policy's advantage uses Q_opc (unit traces) instead of Q_ret; the Q "
        'loss (and the continuous V target) always regress on Retrace Q_ret')
    value_normalization: str = field('popart', network_config.VALUE_NORMALIZATION_DOC)
    popart_step_size: float = field(3e-4, network_config.POPART_STEP_DOC)
    num_tasks: int = field(0, network_config.NUM_TASKS_DOC)
    # Losses.
    pi_loss_coef: float = field(1.0, 'weight of the policy loss, entropy bonus included')
    Q_loss_coef: float = field(0.5, 'weight of 0.5 * (Q_ret - Q)^2',
                               search=search.VALUE_COSTS)
    beta: float = field(1e-2, 'entropy bonus (inside pi_loss_coef, outside the trust region)',
                        search=search.ENTROPY_COSTS)
    truncation_threshold: Optional[float] = field(
        10.0, 'c of truncated importance sampling; unset disables')
    use_trust_region: bool = field(True, 'project the policy gradient (efficient trust region)')
    trust_region_alpha: float = field(0.99, 'decay of the average policy network')
    trust_region_delta: float = field(1.0, 'bound on the KL step towards the average policy',
                                      search=search.LogUniform(0.1, 10.0))
    average_network_state: str = field(
        'stored', "the average network's LSTM state at a sequence's start: 'stored' (the "
        "actors' stored state, as the network's), 'reset' (zeros, chainerrl's replay) or "
        "'acted' (chainerrl's: actors run the average network and store its own state for "
        "on-policy updates; replayed sequences start both networks from zeros)")
    normalize_loss_by_steps: bool = field(True, 'divide losses by the number of steps in the batch')
    # Not the trust region's average network above: this one only evaluates and exports.
    policy_average_tau: float = field(0.0, policy_average.TAU_DOC)
    sdn_samples: int = field(5, 'actions sampled for the mean advantage of the SDN (continuous)')
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
    advantage_hidden_sizes: Tuple[int, ...] = field((64,), 'MLP of A(x, a) (continuous actions)')

    def __post_init__(self):
        configs.require_positive(self, 'batch_size', 'unroll_length', 'sdn_samples',
                                 'trust_region_delta')
        configs.require_fraction(self, 'discounting', 'policy_average_tau')
        configs.require_choice('reward_clipping', self.reward_clipping, REWARD_CLIPPINGS)
        network_config.check_value_normalization(self)
        configs.require_choice('average_network_state', self.average_network_state,
                               AVERAGE_NETWORK_STATES)
        network_config.check_memory(self)
        configs.require_choice('prev_reward_input', self.prev_reward_input,
                               network_config.PREV_REWARD_INPUTS)
        configs.require_sizes('hidden_sizes', self.hidden_sizes)
        configs.require_sizes('advantage_hidden_sizes', self.advantage_hidden_sizes)
        for name in ('replay_ratio', 'replay_start_size', 'reward_scaling', 'pi_loss_coef',
                     'Q_loss_coef', 'beta', 'lstm_size'):
            require(getattr(self, name) >= 0,
                    f'{name} must be >= 0 (a count, weight or size), got {getattr(self, name)}')
        require(self.truncation_threshold is None or self.truncation_threshold > 0,
                f'truncation_threshold must be positive (a bound on importance weights; '
                f'unset disables truncation), got {self.truncation_threshold}')
        require(0.0 <= self.trust_region_alpha < 1.0,
                f'trust_region_alpha must be in [0, 1) (a decay rate), got {self.trust_region_alpha}')
        require(not self.disable_online_update or self.replay_ratio > 0,
                'disable_online_update learns only from replayed batches, so replay_ratio '
                f'must be > 0, got {self.replay_ratio}')
        require(self.batch_size <= self.replay.queue_size,
                f'queue_size ({self.replay.queue_size}) must hold a batch ({self.batch_size}), '
                'or the learner waits forever')
        require(self.batch_size <= self.replay.replay_size,
                f'replay_size ({self.replay.replay_size}) must hold a batch ({self.batch_size})')

    @property
    def sequence_length(self) -> int:
        return self.unroll_length + 1

    @property
    def min_replay_sequences(self) -> int:
        """Sequences in replay before replayed updates start."""
        return max(self.batch_size, self.replay_start_size // self.unroll_length)
