"""Callbacks of the Python API (`launch.api.train(callbacks=...)`): see a run as it
goes (progress rows, evaluations, checkpoints) and stop it early.

A callback is a `Callback` (override any of `on_progress`, `on_evaluation`,
`on_checkpoint`) or a plain callable, which is called as `on_progress`:

- `on_progress(TrainingProgress)`: as often as the learner writes a
  `progress.csv` row (every `log_interval_s` seconds, 2 by default, or every
  `log_interval_steps` learner steps, and every 1/50 of the env-step budget);
- `on_evaluation(EvaluationResult)`: after each greedy evaluation of
  `--eval_every_steps`' schedule, and after the final one;
- `on_checkpoint(CheckpointSaved)`: after each checkpoint the learner writes.

Returning False, or raising `StopTraining`, ends the run as a target return
does: the learner checkpoints, the final evaluation runs and the policy is
exported. Any other return value (None included) lets it go on; any other
exception ends the run with that exception. `EarlyStopping` stops a run whose
evaluations reached a target or stopped improving (Stable-Baselines3's
`StopTrainingOnRewardThreshold` and `StopTrainingOnNoModelImprovement`).
"""

import dataclasses
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.learning.triggers import TARGET_WINDOW, Progress


class StopTraining(Exception):
    """Raised by a callback: end the run now, as a target return would."""


@dataclasses.dataclass(frozen=True)
class TrainingProgress:
    """What `on_progress` sees."""
    env_steps: int  # environment steps, earlier runs of the logdir included
    learner_steps: int  # learner updates, earlier runs included
    episodes: int  # training episodes finished in this run
    recent_return: Optional[float]  # mean return of the last 20 of them (None: none yet)
    recent_returns: Tuple[float, ...]  # those returns
    metrics: Dict[str, float]  # the last learner step's scalars, by TensorBoard name
    elapsed_s: float  # seconds since this run's learner loop started
    logdir: str


@dataclasses.dataclass(frozen=True)
class EvaluationResult:
    """What `on_evaluation` sees: one row of `<logdir>/eval.csv`."""
    env_steps: int  # the schedule's point (the budget for the final evaluation)
    return_mean: float  # over `eval_episodes` greedy episodes
    return_std: float
    is_best: bool  # better than every evaluation before: exported to saved_model_best
    best_return: float  # the best so far, this one included
    final: bool  # the run's final evaluation (stopping then changes nothing)
    logdir: str


@dataclasses.dataclass(frozen=True)
class CheckpointSaved:
    """What `on_checkpoint` sees."""
    env_steps: int
    learner_steps: int
    path: str  # the checkpoint's prefix (`<logdir>/checkpoints/ckpt-N`)
    logdir: str


class Callback:
    """Override what you need; each returns False (or raises `StopTraining`) to stop."""

    def on_progress(self, progress: TrainingProgress) -> Any:
        """A `progress.csv` row was written."""

    def on_evaluation(self, evaluation: EvaluationResult) -> Any:
        """An evaluation finished."""

    def on_checkpoint(self, checkpoint: CheckpointSaved) -> Any:
        """A checkpoint was written."""


class EarlyStopping(Callback):
    """Stops the run at the first evaluation that reaches `target` (when given), or once
    `patience` evaluations in a row did not beat the best one before them by more than
    `min_delta` (evaluations come every `eval_every_steps`)."""

    def __init__(self, patience: int = 3, min_delta: float = 0.0,
                 target: Optional[float] = None):
        if patience < 1:
            raise ValueError(f'patience must be >= 1, got {patience}')
        self.patience, self.min_delta, self.target = patience, min_delta, target
        self.best: Optional[float] = None
        self.since_best = 0

    def on_evaluation(self, evaluation: EvaluationResult) -> bool:
        if self.best is None or evaluation.return_mean > self.best + self.min_delta:
            self.best, self.since_best = evaluation.return_mean, 0
        else:
            self.since_best += 1
        reached = self.target is not None and evaluation.return_mean >= self.target
        return not reached and self.since_best < self.patience


CallbackLike = Union[Callback, Callable[[TrainingProgress], Any]]


class _Plain(Callback):
    def __init__(self, function: Callable[[TrainingProgress], Any]):
        self.on_progress = function


class RunEvents:
    """Calls `callbacks` on the run's events (progress rows on the `steps`/`seconds`
    schedule, and each `env_steps`); `stopped` turns True once one asked to stop, and
    stays."""

    def __init__(self, callbacks: Sequence[CallbackLike], logdir: str, steps: int = 0,
                 seconds: float = 2.0, env_steps: int = 0):
        for callback in callbacks:
            if not callable(callback) and not isinstance(callback, Callback):
                raise ValueError(f'a callback must be a Callback or callable (taking a '
                                 f'TrainingProgress), got {callback!r}')
        self._callbacks = tuple(c if isinstance(c, Callback) else _Plain(c) for c in callbacks)
        self._logdir = logdir
        self._steps, self._seconds, self._last = steps, seconds, time.time()
        self._env_steps, self._next_env_steps = env_steps, env_steps
        self.stopped = False

    @classmethod
    def of_run(cls, callbacks: Sequence[CallbackLike], options: Any) -> 'RunEvents':
        """`callbacks` on a run's progress-row cadences (`RunOptions`'s)."""
        return cls(callbacks, options.logdir, options.progress_row_steps,
                   options.log_interval_s, options.curve_env_steps)

    def add(self, callback: Callback) -> None:
        """One more callback (an experiment tracker's, `launch/learning/trackers.py`)."""
        self._callbacks += (callback,)

    def _call(self, method: str, event: Any) -> bool:
        """Every callback sees the event, those after a stop (the run's last checkpoint
        and final evaluation) included."""
        for callback in self._callbacks:
            try:
                stop = getattr(callback, method)(event) is False
            except StopTraining:
                stop = True
            self.stopped = self.stopped or stop
        return self.stopped

    def _due(self, progress: Progress, now: float) -> bool:
        """On the progress rows' cadences: learner steps or seconds, and env steps."""
        env_due = bool(self._env_steps) and progress.env_steps >= self._next_env_steps
        if env_due:
            self._next_env_steps = (progress.env_steps // self._env_steps + 1) * self._env_steps
        if self._steps:
            return progress.step % self._steps == 0 or env_due
        if now - self._last < self._seconds and not env_due:
            return False
        self._last = now
        return True

    def progress(self, progress: Progress, now: float, stats: EpisodeStats) -> bool:
        """After each learner step; returns `stopped`."""
        if self.stopped or not self._due(progress, now):
            return self.stopped
        returns = tuple(stats.recent_returns(TARGET_WINDOW))
        return self._call('on_progress', TrainingProgress(
            env_steps=progress.env_steps, learner_steps=progress.step,
            episodes=stats.num_episodes,
            recent_return=sum(returns) / len(returns) if returns else None,
            recent_returns=returns,
            metrics={k: float(v.numpy()) for k, v in progress.metrics.items()
                     if v.shape.rank == 0},
            elapsed_s=progress.elapsed_s, logdir=self._logdir))

    def evaluation(self, env_steps: int, mean: float, std: float, is_best: bool,
                   best_return: float, final: bool) -> bool:
        return self._call('on_evaluation', EvaluationResult(
            int(env_steps), float(mean), float(std), is_best, float(best_return), final,
            self._logdir))

    def checkpoint(self, env_steps: int, learner_steps: int, path: str) -> bool:
        return self._call('on_checkpoint', CheckpointSaved(env_steps, learner_steps, path,
                                                           self._logdir))
