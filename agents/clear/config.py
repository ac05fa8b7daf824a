"""CLEAR's configuration: one frozen dataclass, one line of doc per field.

`launch/` turns every field into an absl flag of the same name, so the
defaults live here only.
"""

import dataclasses
from typing import Optional

REWARD_CLIPPINGS = ('abs_one', 'soft_asymmetric', 'none')
LEARNING_RATE_SCHEDULES = ('linear', 'constant')


def check_schedule(config) -> None:
    """The `learning_rate_schedule` check every agent config shares."""
    if config.learning_rate_schedule not in LEARNING_RATE_SCHEDULES:
        raise ValueError(f'learning_rate_schedule must be one of {LEARNING_RATE_SCHEDULES}, '
                         f'got {config.learning_rate_schedule!r}')


def check_reward_and_schedule(config) -> None:
    """The `reward_clipping` and `learning_rate_schedule` checks of the configs that clip."""
    if config.reward_clipping not in REWARD_CLIPPINGS:
        raise ValueError(f'reward_clipping must be one of {REWARD_CLIPPINGS}, '
                         f'got {config.reward_clipping!r}')
    check_schedule(config)


@dataclasses.dataclass(frozen=True)
class CLEARConfig:
    # Data.
    batch_size: int = 32  # sequences per learner step (fresh + replayed)
    unroll_length: int = 20  # learner unroll T; stored sequences hold T + 1 steps
    replay_fraction: float = 0.5  # replayed share of a batch: 0 = IMPALA, 0.5 = CLEAR
    replay_size: int = 5000  # sequences the replay table keeps
    replay_eviction: str = 'fifo'  # 'fifo' or 'reservoir' (random discard, keeps old tasks)
    min_replay_size: int = 64  # sequences in replay before it is sampled
    queue_size: int = 64  # fresh sequences buffered before actors wait for the learner
    # Returns.
    discounting: float = 0.99  # gamma
    reward_clipping: str = 'abs_one'  # 'abs_one', 'soft_asymmetric' or 'none'
    reward_scaling: float = 0.1  # rewards are multiplied by this after clipping
    # Loss weights.
    baseline_cost: float = 0.5  # weight of 0.5 * (vs - V)^2
    entropy_cost: float = 0.01  # weight of the entropy bonus
    policy_cloning_cost: float = 0.01  # weight of KL(mu || pi) on replayed rows
    value_cloning_cost: float = 0.005  # weight of (V - V_mu)^2 on replayed rows
    clip_advantage: bool = False  # keep only positive advantages in the policy gradient
    # Optimiser (Adam).
    learning_rate: float = 1e-3  # Adam step size
    learning_rate_schedule: str = 'linear'  # 'linear' (to 0 at the env-step budget, as IMPALA) or 'constant'
    adam_beta1: float = 0.9  # Adam first-moment decay
    adam_beta2: float = 0.999  # Adam second-moment decay
    adam_epsilon: float = 1e-8  # Adam epsilon
    clip_grad_norm: Optional[float] = 40.0  # global-norm clip; None or 0 disables
    # Network.
    lstm_size: int = 64  # LSTM units; 0 makes the core feed-forward
    hidden_sizes: tuple = (64, 64)  # MLP torso for vector observations
    torso: str = 'auto'  # 'auto', 'mlp', 'nature_cnn' or 'impala_resnet'

    def __post_init__(self):
        check_reward_and_schedule(self)
        if not 0.0 <= self.replay_fraction <= 1.0:
            raise ValueError(f'replay_fraction must be in [0, 1], got {self.replay_fraction}')
        if self.batch_size < 1 or self.unroll_length < 1:
            raise ValueError('batch_size and unroll_length must be positive '
                             f'(got {self.batch_size}, {self.unroll_length})')
        if not 0.0 <= self.discounting <= 1.0:
            raise ValueError(f'discounting must be in [0, 1], got {self.discounting}')
        num_replayed = round(self.replay_fraction * self.batch_size)
        if num_replayed > self.replay_size:
            raise ValueError(f'replay_size ({self.replay_size}) is smaller than the '
                             f'replayed part of a batch ({num_replayed})')
        if self.batch_size - num_replayed > self.queue_size:
            raise ValueError(f'queue_size ({self.queue_size}) must hold the fresh part of a '
                             f'batch ({self.batch_size - num_replayed}), or the learner waits forever')

    @property
    def sequence_length(self) -> int:
        return self.unroll_length + 1
