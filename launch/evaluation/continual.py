"""Continual-learning measurements of a task sequence: evaluation of every task, forgetting.

Every `RunOptions.eval_interval` env steps (five times per visit by default),
and once before training, the learner's current policy plays
`eval_episodes` greedy episodes of **every** task of the sequence. Each
evaluation appends one row per task to `<logdir>/continual.csv`:

    env_steps,task,return_mean,return_std

`env_steps` is the scheduled point (a multiple of the interval, 0 for the
untrained policy, the sequence's last step for the final evaluation); the
evaluation runs at the first learner step after the actors' count reached
it. `task` is the gymnasium id. TensorBoard gets `eval/<task>/return` against
env steps.

Forgetting (`forgetting`), recomputable from the csv alone: for each task
but the one trained last, B = its return at env step 0, R = its return at the
end of its last training visit (the last row at or before that visit's end),
E = its return at the end of the run (the last row);
`forgetting = clip((R - E) / (R - B), 0, 1)` when R > B, otherwise null (it
never learned, so there is nothing to forget). `mean_forgetting` is the mean of
the non-null values (null when there are none). With one cycle this is the
definition of the issue that built it; with several, "its own visit" is its last.
"""

import csv
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from reverb_agents.launch.runs import console
from reverb_agents.launch.evaluation import episodes as evaluation, periodic as periodic_evaluation
from reverb_agents.launch.environments import shared_spaces
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.launch.runs.run_files import read_continual
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace

CSV = 'continual.csv'
COLUMNS = ('env_steps', 'task', 'return_mean', 'return_std')


def visit_ends(tasks: Sequence[str], steps_per_task: int, task_cycles: int) -> Dict[str, int]:
    """Each distinct task's env step at the end of its last visit."""
    ends = {}
    for visit in range(len(tasks) * task_cycles):
        ends[tasks[visit % len(tasks)]] = (visit + 1) * steps_per_task
    return ends


def forgetting(rows: Sequence[Dict[str, Any]], tasks: Sequence[str], steps_per_task: int,
               task_cycles: int = 1) -> List[Dict[str, Any]]:
    """Per distinct task, in first-visit order: `{'env', 'return_at_start',
    'return_after_training', 'return_at_end', 'forgetting'}` (see the module doc;
    the task trained last has `forgetting` None, as has a task without the rows)."""
    ends = visit_ends(tasks, steps_per_task, task_cycles)
    last_task = tasks[(len(tasks) * task_cycles - 1) % len(tasks)]
    results = []
    for task in dict.fromkeys(tasks):
        own = sorted((r for r in rows if r['task'] == task), key=lambda r: r['env_steps'])
        start = next((r['return_mean'] for r in own if r['env_steps'] == 0), None)
        trained = [r['return_mean'] for r in own if r['env_steps'] <= ends[task]]
        after = trained[-1] if trained else None
        end = own[-1]['return_mean'] if own else None
        value = None
        if task != last_task and None not in (start, after, end) and after > start:
            value = float(np.clip((after - end) / (after - start), 0.0, 1.0))
        results.append({'env': task, 'return_at_start': start, 'return_after_training': after,
                        'return_at_end': end, 'forgetting': value})
    return results


def mean_forgetting(results: Sequence[Dict[str, Any]]) -> Optional[float]:
    """The mean of the non-null `forgetting` values; None when there are none."""
    values = [r['forgetting'] for r in results if r['forgetting'] is not None]
    return float(np.mean(values)) if values else None


class ContinualEvaluation:
    """Evaluates every task of `options`' sequence on schedule and keeps `continual.csv`."""

    def __init__(self, options: RunOptions, action_space: ActionSpace):
        self.options = options
        self._action_space = action_space
        self._shared = shared_spaces.shared_spaces(options.tasks)
        self.path = os.path.join(options.logdir, CSV)
        rows = read_continual(self.path) if os.path.exists(self.path) else []
        self.schedule = periodic_evaluation.EvalSchedule(
            options.eval_interval, options.sequence_steps,
            max((r['env_steps'] for r in rows), default=None))
        self._writer = tf.summary.create_file_writer(options.logdir)

    @property
    def last_point(self) -> Optional[int]:
        """The env steps of the last evaluation (None before the first)."""
        return self.schedule.last_point

    def due(self, env_steps: int) -> Optional[int]:
        """The latest scheduled point reached by `env_steps` and not yet evaluated."""
        return self.schedule.due(env_steps)

    def evaluate_due(self, core: ActorCriticCore, env_steps: int) -> None:
        """Evaluates every task if a scheduled point was reached by `env_steps`."""
        point = self.due(env_steps)
        if point is not None:
            self.evaluate(core, point)

    def evaluate(self, core: ActorCriticCore, point: int) -> List[Dict[str, Any]]:
        """Evaluates every task now; appends the rows, labelled `point`, and returns them."""
        options, rows = self.options, []
        for i, task in enumerate(dict.fromkeys(options.tasks)):
            mean, std, _ = evaluation.evaluate(
                core, self._action_space, task, options.eval_episodes,
                seed=options.seed + 10_000 + 100 * i, epsilon=options.eval_epsilon,
                make_envs=lambda n, seed, task=task: shared_spaces.make_task_vector_env(
                    task, self._shared, n, seed))
            rows.append({'env_steps': point, 'task': task, 'return_mean': mean,
                         'return_std': std})
        new_file = not os.path.exists(self.path)
        with open(self.path, 'a', newline='') as f:
            writer = csv.DictWriter(f, COLUMNS)
            if new_file:
                writer.writeheader()
            writer.writerows(rows)
        with self._writer.as_default(step=point):
            for row in rows:
                tf.summary.scalar(f'eval/{row["task"]}/return', row['return_mean'])
        self._writer.flush()
        self.schedule.last_point = point
        console.status(f'evaluation at env step {point:,}: ' + '  '.join(
            f'{r["task"]} {r["return_mean"]:.1f}' for r in rows))
        return rows

    def summary(self) -> Dict[str, Any]:
        """`tasks`, `mean_forgetting` and the final evaluation (means over the tasks of
        the last row's return mean and std) for `summary.json`."""
        options = self.options
        rows = read_continual(self.path) if os.path.exists(self.path) else []
        results = forgetting(rows, options.tasks, options.steps_per_task, options.task_cycles)
        final = [r for r in rows if r['env_steps'] == self.last_point]
        return {
            'tasks': results,
            'mean_forgetting': mean_forgetting(results),
            'eval_return_mean': float(np.mean([r['return_mean'] for r in final]))
            if final else None,
            'eval_return_std': float(np.mean([r['return_std'] for r in final]))
            if final else None,
        }
