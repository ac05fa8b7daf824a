"""ACER's configuration: one frozen dataclass, one line of doc per field.

Defaults follow chainerrl's ACER where the seed has them; the data and
optimiser fields mirror CLEAR's so `launch/` wires both the same way.
"""

import dataclasses
from typing import Optional

from agents.clear.config import check_reward_and_schedule


@dataclasses.dataclass(frozen=True)
class ACERConfig:
    # Data and schedule.
    batch_size: int = 16  # sequences per update (on-policy and replayed alike)
    unroll_length: int = 20  # T; stored sequences hold T + 1 steps
    replay_ratio: float = 4.0  # replayed updates after each on-policy one (n_times_replay)
    replay_ratio_poisson: bool = False  # draw the number of replayed updates from Poisson(replay_ratio)
    replay_start_size: int = 10_000  # env steps in replay before replayed updates start
    replay_size: int = 5000  # sequences the replay table keeps
    replay_eviction: str = 'fifo'  # 'fifo' or 'reservoir'
    queue_size: int = 64  # fresh sequences buffered before actors wait for the learner
    # Returns.
    discounting: float = 0.99  # gamma
    reward_clipping: str = 'abs_one'  # 'abs_one', 'soft_asymmetric' or 'none'
    reward_scaling: float = 0.1  # rewards are multiplied by this after clipping
    use_Q_opc: bool = False  # Q_opc targets (unit traces) instead of Retrace
    # Losses.
    pi_loss_coef: float = 1.0  # weight of the policy loss
    Q_loss_coef: float = 0.5  # weight of 0.5 * (Q_ret - Q)^2
    beta: float = 1e-2  # entropy bonus
    truncation_threshold: Optional[float] = 10.0  # c of truncated importance sampling; None disables
    use_trust_region: bool = True  # project the policy gradient (efficient trust region)
    trust_region_alpha: float = 0.99  # decay of the average policy network
    trust_region_delta: float = 1.0  # bound on the KL step towards the average policy
    normalize_loss_by_steps: bool = True  # divide losses by the number of steps in the batch
    sdn_samples: int = 5  # actions sampled for the mean advantage of the SDN (continuous)
    # Optimiser (Adam).
    learning_rate: float = 1e-3  # Adam step size
    learning_rate_schedule: str = 'linear'  # 'linear' (to 0 at the env-step budget) or 'constant'
    adam_beta1: float = 0.9  # Adam first-moment decay
    adam_beta2: float = 0.999  # Adam second-moment decay
    adam_epsilon: float = 1e-8  # Adam epsilon
    clip_grad_norm: Optional[float] = 40.0  # global-norm clip; None or 0 disables
    # Network.
    lstm_size: int = 64  # LSTM units; 0 makes the core feed-forward
    hidden_sizes: tuple = (64, 64)  # MLP torso for vector observations
    torso: str = 'auto'  # 'auto', 'mlp', 'nature_cnn' or 'impala_resnet'
    advantage_hidden_sizes: tuple = (64,)  # MLP of A(x, a) (continuous actions)

    def __post_init__(self):
        check_reward_and_schedule(self)
        if self.replay_ratio < 0:
            raise ValueError(f'replay_ratio must be >= 0, got {self.replay_ratio}')
        if not 0.0 <= self.trust_region_alpha < 1.0:
            raise ValueError(f'trust_region_alpha must be in [0, 1), got {self.trust_region_alpha}')
        if self.batch_size > self.queue_size:
            raise ValueError(f'queue_size ({self.queue_size}) must hold a batch '
                             f'({self.batch_size}), or the learner waits forever')

    @property
    def sequence_length(self) -> int:
        return self.unroll_length + 1

    @property
    def min_replay_sequences(self) -> int:
        return max(self.batch_size, self.replay_start_size // self.unroll_length)
