"""SAC's configuration: one frozen dataclass, one line of doc per field.

Defaults follow Stable-Baselines3 / the SAC paper for continuous control
(256x256 networks, batch 256, tau 0.005, twin critics, learned temperature
from alpha = 1) with rl-zoo's Adam step of 1e-3 and a short random warm-up
(small tasks learn in a few thousand steps; use 3e-4 for MuJoCo-size tasks) and ML-Agents for discrete branches (target
entropy = `discrete_target_entropy_scale * log(n)` per branch).
"""

import dataclasses
import math
from typing import Any, Optional, Tuple

from agents.clear.config import check_schedule


@dataclasses.dataclass(frozen=True)
class SACConfig:
    # Data.
    batch_size: int = 256  # transitions per learner step (batch_size / unroll_length sequences)
    replay_size: int = 1_000_000  # sequences the replay table keeps (= transitions when unroll_length is 1)
    replay_eviction: str = 'fifo'  # 'fifo' or 'reservoir' (random discard)
    learning_starts: int = 256  # env steps of uniform random actions, and replay items before learning
    updates_per_step: float = 1.0  # learner updates per env step; Reverb's SampleToInsertRatio holds it
    n_step: int = 1  # n-step TD targets (feed-forward: sequences of n + 1 steps)
    online_fraction: float = 0.0  # share of a batch taken fresh from `queue` (0: replay only)
    queue_size: int = 1024  # fresh transitions buffered for the online share
    # Returns.
    discounting: float = 0.99  # gamma
    reward_scaling: float = 1.0  # rewards are multiplied by this
    use_entropy_reward: bool = True  # add -alpha log pi of the next step to the TD target
    reward_weights: Optional[Tuple[float, ...]] = None  # k floats: learn k reward components, act on their weighted sum
    # Critics.
    num_critic_replicas: int = 2  # Q networks; targets use the minimum over them
    critic_hidden_sizes: tuple = (256, 256)  # each critic's MLP over [observation, continuous action]
    target_update_tau: float = 0.005  # target <- tau * online + (1 - tau) * target (CartPole learns with 0.05: README)
    target_update_period: int = 1  # learner steps between target updates
    # Actor.
    hidden_sizes: tuple = (256, 256)  # the actor's MLP torso
    lstm_size: int = 0  # actor LSTM units; > 0 makes SAC recurrent (partially observed tasks)
    burn_in: int = 0  # steps that warm up the stored core state before the learned ones (R2D2)
    unroll_length: int = 1  # transitions learned per stored sequence (recurrent: e.g. 8)
    memory_learns_from_critics: bool = True  # recurrent: the critics' TD loss also trains the actor's LSTM and torso
    torso: str = 'auto'  # 'auto', 'mlp', 'nature_cnn' or 'impala_resnet'
    dqda_clipping: Optional[float] = None  # clip each element of dQ/da in the actor loss; None: off
    normalize: bool = False  # standardise vector observations with running statistics (ML-Agents)
    # Temperature (one per continuous group and per discrete branch).
    initial_log_alpha: float = 0.0  # log alpha at the start (alpha = 1)
    init_entcoef: Optional[float] = None  # ML-Agents' spelling: initial alpha; overrides initial_log_alpha
    target_entropy: Optional[float] = None  # overrides every group's default (in code: also a callable(kind, size) -> float)
    continuous_target_entropy_scale: float = 1.0  # continuous default: -scale * action dims
    discrete_target_entropy_scale: float = 0.2  # discrete default: scale * log(n) per branch (ML-Agents)
    max_log_alpha: Optional[float] = None  # clip log alpha from above; None: no clip
    # Optimisers (Adam).
    actor_learning_rate: float = 1e-3  # actor Adam step size (rl-zoo's Pendulum value; 3e-4 in the paper)
    critic_learning_rate: float = 1e-3  # critics' Adam step size
    alpha_learning_rate: float = 1e-3  # temperatures' Adam step size
    learning_rate_schedule: str = 'constant'  # 'constant' or 'linear' (all three to 0 at the budget)
    adam_beta1: float = 0.9  # Adam first-moment decay
    adam_beta2: float = 0.999  # Adam second-moment decay
    adam_epsilon: float = 1e-8  # Adam epsilon
    clip_grad_norm: Optional[float] = None  # global-norm clip of the critics' gradients; None: off

    def __post_init__(self):
        check_schedule(self)
        checks = [
            (self.batch_size >= 1, f'batch_size must be positive, got {self.batch_size}'),
            (self.n_step >= 1, f'n_step must be >= 1, got {self.n_step}'),
            (self.unroll_length >= 1, f'unroll_length must be >= 1, got {self.unroll_length}'),
            (self.burn_in >= 0 and self.lstm_size >= 0,
             f'burn_in and lstm_size must be >= 0, got {self.burn_in}, {self.lstm_size}'),
            (self.batch_size % self.unroll_length == 0,
             f'batch_size ({self.batch_size}) must be a multiple of unroll_length '
             f'({self.unroll_length}): a batch is whole sequences'),
            (self.updates_per_step > 0,
             f'updates_per_step must be positive, got {self.updates_per_step}'),
            (self.learning_starts >= 1,
             f'learning_starts must be >= 1 (replay must hold data), got {self.learning_starts}'),
            (self.num_critic_replicas >= 1,
             f'num_critic_replicas must be >= 1, got {self.num_critic_replicas}'),
            (0.0 < self.target_update_tau <= 1.0,
             f'target_update_tau must be in (0, 1], got {self.target_update_tau}'),
            (self.target_update_period >= 1,
             f'target_update_period must be >= 1, got {self.target_update_period}'),
            (0.0 <= self.online_fraction < 1.0,
             f'online_fraction must be in [0, 1), got {self.online_fraction}'),
            (0.0 <= self.discounting <= 1.0, f'discounting must be in [0, 1], got {self.discounting}'),
            (self.init_entcoef is None or self.init_entcoef > 0,
             f'init_entcoef must be positive, got {self.init_entcoef}'),
            (self.reward_weights is None or len(self.reward_weights) >= 1,
             'reward_weights must hold at least one number'),
            (self.replay_size >= self.learning_starts,
             f'replay_size ({self.replay_size}) must hold learning_starts ({self.learning_starts})'),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        if self.online_fraction > 0:
            num_fresh = self.batch_size - round((1 - self.online_fraction) * self.batch_size)
            if num_fresh > self.queue_size:
                raise ValueError(f'queue_size ({self.queue_size}) must hold the fresh part of a '
                                 f'batch ({num_fresh})')

    # The launcher's names for the data plan, shared with the other agents' configs.
    @property
    def replay_fraction(self) -> float:
        return 1.0 - self.online_fraction

    @property
    def min_replay_size(self) -> int:
        """Sequences before learning (each holds `unroll_length` new transitions)."""
        return -(-self.learning_starts // self.unroll_length)

    @property
    def sequence_length(self) -> int:
        """burn-in, the learned transitions, and the n steps their targets look ahead."""
        return self.burn_in + self.unroll_length + self.n_step

    @property
    def sequences_per_batch(self) -> int:
        return self.batch_size // self.unroll_length

    @property
    def samples_per_insert(self) -> float:
        """Replayed transitions sampled per transition inserted (the UTD ratio in samples)."""
        # An inserted sequence brings `unroll_length` env steps per environment; a
        # batch samples `batch_size / unroll_length` sequences.
        return self.updates_per_step * round(self.replay_fraction * self.batch_size)

    @property
    def learning_rate(self) -> float:
        """`LearnerBase`'s step size: the critics' (the other two have their own)."""
        return self.critic_learning_rate

    @property
    def initial_alpha_log(self) -> float:
        return math.log(self.init_entcoef) if self.init_entcoef else self.initial_log_alpha


def resolve_target_entropy(config: SACConfig, kind: str, size: int) -> float:
    """The entropy target of one temperature group.

    kind 'continuous' (size = action dims) or 'discrete' (size = n of the branch).
    """
    override: Any = config.target_entropy
    if callable(override):
        return float(override(kind, size))
    if override is not None:
        return float(override)
    if kind == 'continuous':
        return -config.continuous_target_entropy_scale * size
    return config.discrete_target_entropy_scale * math.log(size)
