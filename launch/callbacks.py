"""Callbacks of the Python API (`launch.api.train(callbacks=...)`): see a run's progress,
stop it early.

A callback is any callable taking a `TrainingProgress`. The learner loop calls it
as often as it writes a `progress.csv` row (every `log_interval_s` seconds, 2 by
default, or every `log_interval_steps` learner steps). Returning False, or
raising `StopTraining`, ends the run as a target return does: the learner
checkpoints, the final evaluation runs and the policy is exported. Any other
return value (None included) lets it go on; any other exception ends the run
with that exception.
"""

import dataclasses
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from reverb_agents.launch.actor import EpisodeStats
from reverb_agents.launch.triggers import TARGET_WINDOW, Progress


class StopTraining(Exception):
    """Raised by a callback: end the run now, as a target return would."""


@dataclasses.dataclass(frozen=True)
class TrainingProgress:
    """What a callback sees."""
    env_steps: int  # environment steps, earlier runs of the logdir included
    learner_steps: int  # learner updates, earlier runs included
    episodes: int  # training episodes finished in this run
    recent_return: Optional[float]  # mean return of the last 20 of them (None: none yet)
    recent_returns: Tuple[float, ...]  # those returns
    metrics: Dict[str, float]  # the last learner step's scalars, by TensorBoard name
    elapsed_s: float  # seconds since this run's learner loop started
    logdir: str


Callback = Callable[[TrainingProgress], Any]


class ProgressCallbacks:
    """Calls `callbacks` on the progress-row schedule; `__call__` returns True once one
    asked to stop (`stopped` stays True)."""

    def __init__(self, callbacks: Sequence[Callback], logdir: str, steps: int = 0,
                 seconds: float = 2.0):
        for callback in callbacks:
            if not callable(callback):
                raise ValueError(f'a callback must be callable (taking a TrainingProgress), '
                                 f'got {callback!r}')
        self._callbacks, self._logdir = tuple(callbacks), logdir
        self._steps, self._seconds, self._last = steps, seconds, time.time()
        self.stopped = False

    def _due(self, progress: Progress, now: float) -> bool:
        if self._steps:
            return progress.step % self._steps == 0
        if now - self._last < self._seconds:
            return False
        self._last = now
        return True

    def __call__(self, progress: Progress, now: float, stats: EpisodeStats) -> bool:
        if self.stopped or not self._callbacks or not self._due(progress, now):
            return self.stopped
        returns = tuple(stats.recent_returns(TARGET_WINDOW))
        seen = TrainingProgress(
            env_steps=progress.env_steps, learner_steps=progress.step,
            episodes=stats.num_episodes,
            recent_return=sum(returns) / len(returns) if returns else None,
            recent_returns=returns,
            metrics={k: float(v.numpy()) for k, v in progress.metrics.items()
                     if v.shape.rank == 0},
            elapsed_s=progress.elapsed_s, logdir=self._logdir)
        for callback in self._callbacks:
            try:
                self.stopped = callback(seen) is False
            except StopTraining:
                self.stopped = True
            if self.stopped:
                break
        return self.stopped
