"""The run's own options (not an agent's): environment, budget, logdir, cadence."""

import dataclasses
from typing import Optional

from agents.configs import require, require_fraction


@dataclasses.dataclass(frozen=True)
class RunOptions:
    agent: str = 'clear'
    env: str = 'CartPole-v1'
    num_envs: int = 64  # environments per actor, stepped together
    num_steps: int = 300_000  # env-step budget
    seed: int = 0
    logdir: str = '/tmp/agents_run'
    eval_episodes: int = 20  # greedy evaluation episodes at the end
    eval_epsilon: float = 0.0  # evaluation samples from the policy with this probability
    target_return: Optional[float] = None  # stop early when the last 20 episodes average this
    log_interval_s: float = 5.0  # seconds between progress lines
    checkpoint_interval_s: float = 60.0  # seconds between learner checkpoints
    publish_period: int = 5  # learner steps between weight publications
    summary_interval_s: float = 2.0  # seconds between TensorBoard writes (and NaN checks)

    def __post_init__(self):
        for name in ('num_envs', 'num_steps', 'eval_episodes', 'publish_period'):
            value = getattr(self, name)
            require(value >= 1, f'{name} must be >= 1, got {value}')
        for name in ('log_interval_s', 'checkpoint_interval_s', 'summary_interval_s'):
            value = getattr(self, name)
            require(value > 0, f'{name} must be positive (seconds), got {value}')
        require_fraction(self, 'eval_epsilon')
        require(bool(self.logdir), '--logdir must name a directory')
