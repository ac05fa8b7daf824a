"""Evaluation during training: a schedule in env steps, and the best policy kept.

`EvalSchedule` says when an evaluation is due: at every multiple of an
interval of env steps that the run's count has reached (checked after each
learner step, so an evaluation labelled N runs at the first learner step at
or after env step N), and at the end of the budget. A task sequence
evaluates every task on it (`launch/evaluation/continual.py`); one environment
(`--eval_every_steps`) on `PeriodicEvaluation`:

- `--eval_episodes` greedy episodes (`--eval_epsilon`) on environments of
  their own (seeds `seed + 20000` on: not the actors', not the final
  evaluation's), logged as TensorBoard `eval/return` against env steps and
  as a row of `<logdir>/eval.csv` (`env_steps,return_mean,return_std`);
- each evaluation better than every one before exports the policy to
  `<logdir>/saved_model_best` (written to a temporary directory first, then
  moved in place, so a crash while exporting leaves the previous best
  intact). The final evaluation counts as the schedule's last point.

A resumed run reads `eval.csv` back: the schedule goes on after its last
row and the best return to beat is the best of the rows.
"""

import csv
import os
import shutil
from typing import Any, Callable, Dict, Optional

import gymnasium as gym
import tensorflow as tf

from reverb_agents.launch.runs import console
from reverb_agents.launch.evaluation import episodes as evaluation
from reverb_agents.launch.policies import export
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace

CSV = 'eval.csv'
COLUMNS = ('env_steps', 'return_mean', 'return_std')
BEST = 'saved_model_best'
SEED_OFFSET = 20_000


class EvalSchedule:
    """Points every `interval` env steps up to `end` (and `end` itself), each once."""

    def __init__(self, interval: int, end: int, last_point: Optional[int] = None):
        self.interval, self.end, self.last_point = interval, end, last_point

    def due(self, env_steps: int) -> Optional[int]:
        """The latest point `env_steps` reached that is not evaluated yet, else None."""
        point = self.end if env_steps >= self.end else env_steps // self.interval * self.interval
        if point == 0 or (self.last_point is not None and point <= self.last_point):
            return None
        return point


class PeriodicEvaluation:
    """Greedy evaluations of one environment on schedule; the best kept (module doc)."""

    def __init__(self, options: RunOptions, action_space: ActionSpace,
                 observation_space: gym.Space,
                 make_envs: Callable[[int, int], gym.vector.VectorEnv]):
        self.options = options
        self._action_space, self._observation_space = action_space, observation_space
        self._make_envs = make_envs
        self.path = os.path.join(options.logdir, CSV)
        self.best_dir = os.path.join(options.logdir, BEST)
        rows = []
        if os.path.exists(self.path):
            with open(self.path, newline='') as f:
                rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
        best = max(rows, key=lambda r: r['return_mean'], default=None)
        self.best_return = best['return_mean'] if best else None
        self.best_env_steps = int(best['env_steps']) if best else None
        self.schedule = EvalSchedule(options.eval_every_steps, options.num_steps,
                                     int(rows[-1]['env_steps']) if rows else None)
        self._writer = tf.summary.create_file_writer(options.logdir)
        # Told of each evaluation: (env_steps, mean, std, is_best, best_return, final).
        self.listener: Optional[Callable[..., Any]] = None

    def due(self, env_steps: int) -> Optional[int]:
        """The latest scheduled point reached by `env_steps` and not yet evaluated, but
        the end of the budget (the final evaluation's, `record`), else None."""
        point = self.schedule.due(env_steps)
        return point if point is not None and point < self.options.num_steps else None

    def evaluate_due(self, core: ActorCriticCore, env_steps: int) -> None:
        point = self.due(env_steps)
        if point is not None:
            self.evaluate_at(core, point)

    def evaluate_at(self, core: ActorCriticCore, point: int) -> None:
        """Evaluates `core` now and records it at env step `point` (e.g. 0: a policy
        pre-trained on demonstrations, before any actor)."""
        mean, std, _ = evaluation.evaluate(
            core, self._action_space, self.options.env, self.options.eval_episodes,
            seed=self.options.seed + SEED_OFFSET, epsilon=self.options.eval_epsilon,
            make_envs=self._make_envs)
        self.record(core, point, mean, std)

    def record(self, core: ActorCriticCore, point: int, mean: float, std: float,
               final: bool = False) -> None:
        """Logs an evaluation at env step `point` (`final`: the run's last); exports the
        policy if it is the best."""
        new_file = not os.path.exists(self.path)
        with open(self.path, 'a', newline='') as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(COLUMNS)
            writer.writerow([point, mean, std])
        with self._writer.as_default(step=point):
            tf.summary.scalar('eval/return', mean)
        self._writer.flush()
        self.schedule.last_point = point
        best = self.best_return is None or mean > self.best_return
        if best:
            self.best_return, self.best_env_steps = mean, point
            self._export_best(core)
        console.status(f'evaluation at env step {point:,}: return {mean:.1f} +- {std:.1f} '
                       f'over {self.options.eval_episodes} episodes'
                       + (f' (best: {BEST})' if best else f' (best {self.best_return:.1f})'))
        if self.listener is not None:
            self.listener(point, mean, std, best, self.best_return, final)

    def summary(self) -> Dict[str, Any]:
        """`best_eval_return`, `best_eval_env_steps`, `saved_model_best` for summary.json."""
        return {'best_eval_return': self.best_return, 'best_eval_env_steps': self.best_env_steps,
                'saved_model_best': self.best_dir if os.path.isdir(self.best_dir) else None}

    def _export_best(self, core: ActorCriticCore) -> None:
        staging = self.best_dir + '.new'
        shutil.rmtree(staging, ignore_errors=True)
        if export.export_run_policy(core, self._action_space, self._observation_space,
                                    self.options, staging) is None:
            return
        old = self.best_dir + '.old'
        shutil.rmtree(old, ignore_errors=True)
        if os.path.exists(self.best_dir):
            os.rename(self.best_dir, old)
        os.rename(staging, self.best_dir)
        shutil.rmtree(old, ignore_errors=True)
