"""The learner loop's triggers: actions run every N learner steps or every N seconds
(`Every`), the two that report progress: the display (`launch/runs/console.py`)
and the rows of `progress.csv` (`launch.runs.metrics.ProgressCSV`), and the stop at
`--target_return` (`TargetCheck`)."""

import dataclasses
import time
from typing import Callable, Dict, Optional

import tensorflow as tf

from reverb_agents.launch.runs import console
from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.runs.metrics import ProgressCSV

TARGET_WINDOW = 20  # training episodes the target return (and the recent return) averages


class TargetCheck:
    """Whether a run has reached `target` (None: never): the last `TARGET_WINDOW`
    training episodes average it and, with `greedy` (a callable returning the mean
    return of a greedy evaluation), the policy's greedy play does too. A training
    mean can be reached by a sampling policy whose greedy play is worse (CLEAR on
    CartPole stopped at a training mean of 487.9 with a greedy evaluation of 284.1);
    after a failed greedy check the next waits for `TARGET_WINDOW` more training
    episodes.
    """

    def __init__(self, target: Optional[float], greedy: Optional[Callable[[], float]] = None):
        self.target, self._greedy = target, greedy
        self._next_check = 0  # episodes finished before the next greedy check may run
        self.greedy_return: Optional[float] = None  # the last greedy check's mean

    def __call__(self, stats: EpisodeStats) -> bool:
        if self.target is None:
            return False
        mean_return, _, count = stats.recent(TARGET_WINDOW)
        if count < TARGET_WINDOW or mean_return < self.target:
            return False
        if self._greedy is None:
            return True
        if stats.num_episodes < self._next_check:
            return False
        self._next_check = stats.num_episodes + TARGET_WINDOW
        self.greedy_return = self._greedy()
        console.status(f'training mean {mean_return:.1f} >= {self.target:g}; greedy '
                       f'evaluation {self.greedy_return:.1f}')
        return self.greedy_return >= self.target


@dataclasses.dataclass(frozen=True)
class Progress:
    """What a trigger sees after a learner step."""
    step: int  # learner steps, earlier runs of this logdir included
    steps_this_run: int
    env_steps: int  # env steps, earlier runs included
    metrics: Dict[str, tf.Tensor]
    elapsed_s: float  # since this run's loop started


class Every:
    """Runs `action(progress)` every `steps` learner steps or, when `steps` is 0, every
    `seconds`; and, with `env_steps`, whenever the env steps pass another multiple of
    it (so a fast run still leaves a curve)."""

    def __init__(self, action: Callable[[Progress], None], steps: int = 0, seconds: float = 0.0,
                 env_steps: int = 0):
        self._action, self._steps, self._seconds = action, steps, seconds
        self._env_steps, self._next_env_steps = env_steps, env_steps
        self._last = time.time()

    def __call__(self, progress: Progress, now: float) -> None:
        if self._steps and progress.step % self._steps == 0:
            self.force(progress, now)
        elif not self._steps and self._seconds and now - self._last >= self._seconds:
            self.force(progress, now)
        elif self._env_steps and progress.env_steps >= self._next_env_steps:
            self.force(progress, now)

    def force(self, progress: Progress, now: float) -> None:
        """Runs the action now (the last step of a phase), restarting the cadences."""
        self._last = now
        if self._env_steps:
            self._next_env_steps = (progress.env_steps // self._env_steps + 1) * self._env_steps
        self._action(progress)


def show_progress(stats: EpisodeStats, display: console.ProgressDisplay,
                  env_steps_this_run: Callable[[], int]) -> Callable[[Progress], None]:
    """Refreshes `display` with the run's totals and this run's rates."""
    def show(progress: Progress) -> None:
        mean_return, _, _ = stats.recent(TARGET_WINDOW)
        elapsed = max(progress.elapsed_s, 1e-9)
        display.update(progress.env_steps, env_steps_this_run() / elapsed, progress.step,
                       progress.steps_this_run / elapsed, mean_return, stats.num_episodes)
    return show


def write_progress_row(stats: EpisodeStats, progress_csv: ProgressCSV
                       ) -> Callable[[Progress], None]:
    """Appends a row (steps, time, recent returns, the step's scalar metrics)."""
    def write(progress: Progress) -> None:
        progress_csv.write(
            progress.env_steps, progress.step, progress.elapsed_s,
            stats.recent_returns(TARGET_WINDOW), stats.num_episodes,
            {k: float(v.numpy()) for k, v in progress.metrics.items() if v.shape.rank == 0})
    return write
