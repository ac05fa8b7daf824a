"""Experiment trackers: a run's settings, curves and files sent to a tracking service.

A tracker is four calls the in-process runner makes (`Tracker`): `on_start(params)`
when the run starts, `on_metrics(metrics, step)` with each progress row's scalars
and each evaluation (stepped by env steps), `on_artifact(path)` for the run's files
at its end, `on_end(status)`. `TrackerCallback` turns the run's callback events
(`launch.learning.callbacks`) into `on_metrics`, so another tracker is one class.

`--tracker=mlflow` (`MLflowTracker`, the `mlflow` extra): an MLflow run per run,
named by its directory, in the experiment `MLFLOW_EXPERIMENT_NAME` (default
`reverb-agents`) of the store `--tracking_uri`, else `MLFLOW_TRACKING_URI`, else
SQLite in `./mlruns` (`mlruns/mlflow.db`, artifacts in `mlruns/artifacts`: MLflow 3
refuses its old file store unless told otherwise). Params: the run's settings
(`metrics.run_hparams`); metrics: the learner's scalars, the training return, the evaluations, and at the
end `summary.json`'s numbers; artifacts: `summary.json`, `run_config.json`,
`progress.csv`, `eval.csv` and the exported SavedModel. With
`MLFLOW_PARENT_RUN_ID` set (a tuning study's run, `launch/tuning/`) the run is its
child.
"""

import logging
import math
import os
import time
from typing import Any, Mapping, Optional

from reverb_agents.launch.learning.callbacks import (Callback, EvaluationResult, RunEvents,
                                                     TrainingProgress)

from reverb_agents.launch.runs.options import TRACKERS

EXPERIMENT = 'reverb-agents'  # the MLflow experiment unless MLFLOW_EXPERIMENT_NAME names one
DEFAULT_ROOT = 'mlruns'  # the store without a tracking URI, under the working directory
PARENT_RUN_ENV = 'MLFLOW_PARENT_RUN_ID'
# The run's files a tracker keeps (and the SavedModel, where one was exported).
ARTIFACTS = ('summary.json', 'run_config.json', 'progress.csv', 'eval.csv')
PARAM_CHARS = 500  # MLflow keeps param values up to a limit; a long one is cut here


class TrackerError(ValueError):
    """A tracker that cannot start (one line)."""


class Tracker:
    """What a run tells a tracking service (the module doc); every call optional."""

    def on_start(self, params: Mapping[str, Any]) -> None:
        """The run starts with these settings."""

    def on_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Scalars at env step `step`."""

    def on_artifact(self, path: str) -> None:
        """A file or directory of the run, at its end."""

    def on_end(self, status: str) -> None:
        """'FINISHED', 'FAILED' or 'KILLED' (Ctrl-C)."""


class TrackerCallback(Callback):
    """A run's progress rows and evaluations as `tracker.on_metrics`, by env step."""

    def __init__(self, tracker: Tracker):
        self.tracker = tracker

    def on_progress(self, progress: TrainingProgress) -> None:
        metrics = dict(progress.metrics)
        if progress.recent_return is not None:
            metrics['train/episode_return'] = progress.recent_return
        self.tracker.on_metrics(metrics, progress.env_steps)

    def on_evaluation(self, evaluation: EvaluationResult) -> None:
        self.tracker.on_metrics({'eval/return_mean': evaluation.return_mean,
                                 'eval/return_std': evaluation.return_std},
                                evaluation.env_steps)


class MLflowTracker(Tracker):
    """One MLflow run (the module doc), through `MlflowClient` (no global active run, so
    runs in one process do not mix)."""

    def __init__(self, run_name: str, tracking_uri: str = ''):
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise TrackerError("--tracker=mlflow needs MLflow: pip install "
                               "'reverb-agents[mlflow]'") from None
        for name in ('mlflow', 'alembic'):  # their INFO lines on creating the tables
            logging.getLogger(name).setLevel(logging.WARNING)
        self.uri = tracking_uri or os.environ.get('MLFLOW_TRACKING_URI') or ''
        if not self.uri:
            root = os.path.abspath(DEFAULT_ROOT)
            os.makedirs(root, exist_ok=True)
            self.uri = f'sqlite:///{os.path.join(root, "mlflow.db")}'
        name = os.environ.get('MLFLOW_EXPERIMENT_NAME') or EXPERIMENT
        # A SQLite store keeps its artifacts beside its database (MLflow's default is
        # ./mlruns under whatever directory the process runs in).
        artifacts = (os.path.join(os.path.dirname(self.uri[len('sqlite:///'):]), 'artifacts')
                     if self.uri.startswith('sqlite:///') else None)
        try:
            self.client = MlflowClient(self.uri)
            experiment = self.client.get_experiment_by_name(name)
            self.experiment_id = (experiment.experiment_id if experiment is not None else
                                  self.client.create_experiment(name, artifacts))
        except Exception as error:  # MLflow's errors for a store it cannot use
            raise TrackerError(f'MLflow tracking store {self.uri}: '
                               f'{str(error).splitlines()[0]}') from None
        self.run_name = run_name
        self.run_id = ''

    def on_start(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param
        parent = os.environ.get(PARENT_RUN_ENV)
        tags = {'mlflow.parentRunId': parent} if parent else {}
        run = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=tags)
        self.run_id = run.info.run_id
        self.client.log_batch(self.run_id, params=[
            Param(k, str(v)[:PARAM_CHARS]) for k, v in sorted(params.items())])

    def on_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, int(step)) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and math.isfinite(v)]
        if batch and self.run_id:
            self.client.log_batch(self.run_id, metrics=batch)

    def on_artifact(self, path: str) -> None:
        if not self.run_id or not os.path.exists(path):
            return
        if os.path.isdir(path):
            self.client.log_artifacts(self.run_id, path, os.path.basename(path))
        else:
            self.client.log_artifact(self.run_id, path)

    def on_end(self, status: str) -> None:
        if self.run_id:
            self.client.set_terminated(self.run_id, status)


def make(name: str, run_name: str, tracking_uri: str = '') -> Optional[Tracker]:
    """The tracker `--tracker` names ('' : none)."""
    if name == 'mlflow':
        return MLflowTracker(run_name, tracking_uri)
    if name:
        raise TrackerError(f'unknown --tracker={name!r}; choose one of {list(TRACKERS)}')
    return None


def with_tracker(events: Optional[RunEvents], tracker: Tracker, options: Any) -> RunEvents:
    """`events` (a new `RunEvents` on the progress rows' cadence when None) with the
    tracker's callback added."""
    if events is None:
        events = RunEvents.of_run((), options)
    events.add(TrackerCallback(tracker))
    return events


def report_end(tracker: Tracker, summary: Mapping[str, Any], logdir: str) -> None:
    """The run's last words: `summary.json`'s numbers as metrics (`summary/<key>`, at
    its env steps) and its files as artifacts (`ARTIFACTS`, the SavedModel)."""
    numbers = {f'summary/{k}': float(v) for k, v in summary.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    tracker.on_metrics(numbers, int(summary.get('env_steps') or 0))
    for name in ARTIFACTS:
        tracker.on_artifact(os.path.join(logdir, name))
    if summary.get('saved_model'):
        tracker.on_artifact(summary['saved_model'])
