"""The learner loop's triggers: actions run every N learner steps or every N seconds
(`Every`), and the two that report progress: the display (`launch/console.py`)
and the rows of `progress.csv` (`launch.metrics.ProgressCSV`)."""

import dataclasses
import time
from typing import Callable, Dict

import tensorflow as tf

from launch import console
from launch.actor import EpisodeStats
from launch.metrics import ProgressCSV

TARGET_WINDOW = 20  # training episodes the target return (and the recent return) averages


@dataclasses.dataclass(frozen=True)
class Progress:
    """What a trigger sees after a learner step."""
    step: int  # learner steps, earlier runs of this logdir included
    steps_this_run: int
    env_steps: int  # env steps, earlier runs included
    metrics: Dict[str, tf.Tensor]
    elapsed_s: float  # since this run's loop started


class Every:
    """Runs `action(progress)` every `steps` learner steps or every `seconds`."""

    def __init__(self, action: Callable[[Progress], None], steps: int = 0, seconds: float = 0.0):
        self._action, self._steps, self._seconds = action, steps, seconds
        self._last = time.time()

    def __call__(self, progress: Progress, now: float) -> None:
        if self._steps and progress.step % self._steps == 0:
            self._action(progress)
        elif self._seconds and now - self._last >= self._seconds:
            self._last = now
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
