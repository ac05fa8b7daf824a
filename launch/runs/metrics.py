"""What the learner writes to TensorBoard besides the agent's own scalars.

- `action/<name>`: a histogram per action leaf of the actions in the
  learner's batch (valid steps only), computed in `launch.learning.data.make_learn`
  under the names `action_names` gives the leaves;
- `variables/global_norm`: the global norm of the learner's trainable
  variables, computed when the summary is written;
- `env_info/<key>`: the mean of each numeric `info` value the actors'
  environments reported since the last write (`InfoMeans`; nested dicts
  such as `RecordEpisodeStatistics`' `episode` become `env_info/episode/r`);
- `env_steps`, `episode/return`, `episode/length` (means since the last write);
- `train/episode_return`: the same mean return, stepped by **env steps**
  (the x axis to compare runs of different agents or batch sizes on).

`SummaryWriter` writes them all; the learner loop decides when. `ProgressCSV`
keeps `<logdir>/progress.csv` for those who do not use TensorBoard.
"""

import csv
import os

import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from reverb_agents.agents import configs

HISTOGRAM_EVERY = 10  # an eager histogram costs ~0.1-0.3 s here: one write in ten has them


def action_names(space: gym.Space) -> List[str]:
    """One name per action leaf, in `networks.distributions.ActionSpace.leaves`' order.

    A Dict member is named by its key, a Tuple member and a MultiDiscrete
    element by its index, nested members by their path joined with '/'; a
    space that is one leaf (Discrete, Box) is '0'.
    """

    def walk(space: gym.Space, path: List[str]) -> List[List[str]]:
        if isinstance(space, gym.spaces.MultiDiscrete):
            return [path + [str(i)] for i in range(int(np.prod(space.nvec.shape)))]
        if isinstance(space, gym.spaces.Tuple):
            return [p for i, s in enumerate(space.spaces) for p in walk(s, path + [str(i)])]
        if isinstance(space, gym.spaces.Dict):
            return [p for k, s in space.spaces.items() for p in walk(s, path + [str(k)])]
        return [path]  # Discrete, Box: one leaf

    return ['/'.join(path) or '0' for path in walk(space, [])]


def numeric_info(info: Mapping[str, Any], prefix: str = '') -> Iterator[Tuple[str, np.ndarray]]:
    """(key, values reported) for every numeric value of a vector env's `info`.

    gymnasium's vector infos hold one array `[B]` per key and a boolean mask
    `_key` of the environments that reported it; nested dicts get keys joined
    with '/'. Booleans count as 0/1. Anything else (object arrays, vectors
    per environment such as `reward_vector` `[B, k]`) is skipped: it has no
    one scalar per environment.
    """
    for key, value in info.items():
        if key.startswith('_'):
            continue
        if isinstance(value, Mapping):
            yield from numeric_info(value, f'{prefix}{key}/')
            continue
        value = np.asarray(value)
        if value.ndim != 1 or not (np.issubdtype(value.dtype, np.number)
                                   or value.dtype == bool):
            continue
        mask = info.get(f'_{key}')
        if mask is not None:
            value = value[np.asarray(mask, bool)]
        if value.size:
            yield f'{prefix}{key}', value


class InfoMeans:
    """Thread-safe running sums of the actors' numeric `info` values (`numeric_info`)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sums: Dict[str, List[float]] = {}  # key -> [sum, count]

    def add(self, info: Mapping[str, Any]) -> None:
        if not info:  # most steps of most environments: keep the actor's hot path short
            return
        values = list(numeric_info(info))
        with self._lock:
            for key, value in values:
                total = self._sums.setdefault(key, [0.0, 0])
                total[0] += float(value.sum(dtype=np.float64))
                total[1] += value.size

    def pop(self) -> Dict[str, float]:
        """The mean of each key since the last call."""
        with self._lock:
            sums, self._sums = self._sums, {}
        return {key: total / count for key, (total, count) in sums.items()}


def run_hparams(options: Any, config: Any) -> Dict[str, Any]:
    """A run's settings as HParams values: the agent, environment, budget, seed and
    environments, and every config field by its flat name (tuples and None as text),
    so runs and tuning trials compare side by side in TensorBoard's HParams tab."""
    values = {'agent': options.agent, 'env': options.env, 'num_steps': options.num_steps,
              'num_envs': options.num_envs, 'seed': options.seed, **configs.flatten(config)}
    return {name: value if isinstance(value, (bool, int, float, str)) else
            ','.join(map(str, value)) if isinstance(value, tuple) else str(value)
            for name, value in values.items()}


class SummaryWriter:
    """The learner's TensorBoard file: scalars every write, histograms one write in ten,
    the run's HParams once."""

    def __init__(self, logdir: str, variables: Callable[[], Sequence[tf.Variable]],
                 hparams: Optional[Mapping[str, Any]] = None):
        """`variables()`: the learner's trainable variables, asked at each write
        (a learner may build some networks lazily, at its first step); `hparams`: the
        run's settings for TensorBoard's HParams dashboard (`run_hparams`), written once."""
        self._writer = tf.summary.create_file_writer(logdir)
        self._variables = variables
        self._writes = 0
        if hparams:
            from tensorboard.plugins.hparams import api as hparams_api
            with self._writer.as_default():
                hparams_api.hparams(dict(hparams), trial_id=os.path.basename(
                    os.path.normpath(logdir)))

    def write(self, step: int, env_steps: int, scalars: Mapping[str, float],
              histograms: Mapping[str, tf.Tensor], episodes: Sequence[Tuple[float, int]],
              env_info: Mapping[str, float]) -> None:
        """`scalars`: the agent's metrics; `histograms`: the step's other metrics
        (`action/<name>`); `episodes`: (return, length) finished since the last write."""
        with self._writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
            tf.summary.scalar('env_steps', env_steps)
            variables = self._variables()
            if variables:
                tf.summary.scalar('variables/global_norm', tf.linalg.global_norm(variables))
            if episodes:
                mean_return = np.mean([r for r, _ in episodes])
                tf.summary.scalar('episode/return', mean_return)
                tf.summary.scalar('episode/length', np.mean([n for _, n in episodes]))
                tf.summary.scalar('train/episode_return', mean_return, step=env_steps)
            for key, value in env_info.items():
                tf.summary.scalar(f'env_info/{key}', value)
            if self._writes % HISTOGRAM_EVERY == 0:
                for name, values in histograms.items():
                    tf.summary.histogram(name, values)
        self._writes += 1
        self._writer.flush()


PROGRESS_CSV = 'progress.csv'
PROGRESS_COLUMNS = ('env_steps', 'learner_steps', 'wall_time_s', 'return_mean', 'return_std',
                    'episodes')


class ProgressCSV:
    """`<logdir>/progress.csv`: one row per log interval.

    Columns: `PROGRESS_COLUMNS` (the return's mean and std over the last 20
    training episodes, empty before the first; `wall_time_s` counts earlier
    runs of the logdir too), then the agent's scalar metrics (losses) in the
    order they first appear; a resumed run appends under the same header. A
    metric that first appears later (a learner whose phase changes, e.g. CLEAR
    after its critic pre-training) adds a column: the file is rewritten under
    the wider header (earlier rows empty there) and replaces the old one whole.
    `wall_time=False` leaves `wall_time_s` out: a deterministic run's rows are
    then the same in every run.
    """

    def __init__(self, logdir: str, wall_time: bool = True):
        self.path = os.path.join(logdir, PROGRESS_CSV)
        self._columns = None
        self._first_columns = [c for c in PROGRESS_COLUMNS if wall_time or c != 'wall_time_s']
        self.wall_time_before = 0.0
        if os.path.exists(self.path):
            with open(self.path, newline='') as f:
                reader = csv.DictReader(f)
                rows = list(reader)
                self._columns = reader.fieldnames
            if rows and rows[-1].get('wall_time_s'):
                self.wall_time_before = float(rows[-1]['wall_time_s'])

    def write(self, env_steps: int, learner_steps: int, wall_time_s: float,
              returns: Sequence[float], episodes: int, metrics: Mapping[str, float]) -> None:
        row = {'env_steps': env_steps, 'learner_steps': learner_steps,
               'wall_time_s': round(self.wall_time_before + wall_time_s, 3),
               'return_mean': float(np.mean(returns)) if len(returns) else '',
               'return_std': float(np.std(returns)) if len(returns) else '',
               'episodes': episodes, **metrics}
        new_file = self._columns is None
        if new_file:
            self._columns = self._first_columns + sorted(metrics)
        else:
            added = sorted(set(metrics) - set(self._columns))
            if added:
                self._widen(self._columns + added)
        with open(self.path, 'a', newline='') as f:
            writer = csv.DictWriter(f, self._columns, extrasaction='ignore')
            if new_file:
                writer.writeheader()
            writer.writerow(row)

    def _widen(self, columns: List[str]) -> None:
        """Rewrites the file under `columns` (a superset of its header), atomically."""
        with open(self.path, newline='') as f:
            rows = list(csv.DictReader(f))
        partial = self.path + '.partial'
        with open(partial, 'w', newline='') as f:
            writer = csv.DictWriter(f, columns, restval='')
            writer.writeheader()
            writer.writerows(rows)
        os.replace(partial, self.path)
        self._columns = columns
