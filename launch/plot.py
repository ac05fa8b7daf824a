"""Plots runs: `python launch/plot.py --continual LOGDIR [LOGDIR ...] --output=FILE.png`.

`--continual`: one panel per task of a task sequence (`launch/continual.py`),
the greedy evaluation return against env steps, one line (mean, with a band
of one standard deviation over the evaluation episodes) per logdir, and the
env-step ranges in which each panel's task was trained shaded. The legend
names each logdir by its agent and `replay_fraction` (IMPALA for a CLEAR run
without replay) and, when the runs differ in seed, the seed. Every logdir
must be a run of the same sequence.
"""

import os
import sys
from typing import Any, Dict, List, Sequence

# Runnable as a script from a checkout as well as installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

flags.DEFINE_multi_string('continual', None, 'task-sequence logdirs to plot (repeat the flag '
                          'or list them after it)')
flags.DEFINE_string('output', 'continual.png', 'the PNG to write')
flags.DEFINE_string('title', '', 'figure title (default: the task sequence)')
FLAGS = flags.FLAGS


class PlotError(ValueError):
    """A logdir that cannot be plotted."""


def load_run(logdir: str) -> Dict[str, Any]:
    """A task-sequence run's rows, tasks and label ({'rows', 'tasks', 'steps_per_task',
    'task_cycles', 'label', 'seed'})."""
    import json
    from launch import continual, rundir
    path = os.path.join(logdir, continual.CSV)
    if not os.path.exists(path):
        raise PlotError(f'{logdir!r} has no {continual.CSV}: not a task-sequence run '
                        f'(--tasks)')
    rows = continual.read_rows(path)
    run = rundir.read_run_config(logdir) or {}
    summary_path = os.path.join(logdir, 'summary.json')
    summary = {}
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    config = run.get('config', {})
    sequence = run.get('env_options', {})
    agent = run.get('agent', '?')
    fraction = config.get('replay_fraction')
    if agent == 'clear' and fraction == 0:
        label = 'IMPALA (replay_fraction=0)'
    elif fraction is not None:
        label = f'{agent.upper()} (replay_fraction={fraction:g})'
    else:
        label = agent.upper()
    group = label
    if summary.get('mean_forgetting') is not None:
        label += f', forgetting {summary["mean_forgetting"]:.2f}'
    return {'rows': rows, 'tasks': list(dict.fromkeys(r['task'] for r in rows)),
            'group': group,
            'sequence': run.get('env', '').split(','), 'steps_per_task':
            sequence.get('steps_per_task'), 'task_cycles': sequence.get('task_cycles', 1),
            'label': label, 'seed': summary.get('seed')}


def trained_ranges(sequence: Sequence[str], steps_per_task: int, task_cycles: int,
                   task: str) -> List[tuple]:
    """The (start, end) env steps of every visit of `task`."""
    return [(v * steps_per_task, (v + 1) * steps_per_task)
            for v in range(len(sequence) * task_cycles)
            if sequence[v % len(sequence)] == task]


def plot_continual(logdirs: Sequence[str], output: str, title: str = '') -> str:
    """Writes the figure (see the module doc) to `output`; returns its path."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    runs = [load_run(d) for d in logdirs]
    tasks = runs[0]['tasks']
    if any(r['tasks'] != tasks for r in runs[1:]):
        raise PlotError('the logdirs are runs of different task sequences: '
                        + '; '.join(f'{d}: {",".join(r["tasks"])}' for d, r in zip(logdirs, runs)))
    seeds = {r['seed'] for r in runs}
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    # One colour per agent / replay fraction, one line style per run within it.
    palette = plt.rcParams['axes.prop_cycle'].by_key()['color']
    groups = list(dict.fromkeys(r['group'] for r in runs))
    styles = ['-', '--', ':', '-.']
    looks = []
    for run in runs:
        same = sum(1 for look in looks if look[0] == run['group'])
        looks.append((run['group'], palette[groups.index(run['group']) % len(palette)],
                      styles[same % len(styles)]))
    for ax, task in zip(axes[0], tasks):
        first = runs[0]
        if first['steps_per_task']:
            for start, end in trained_ranges(first['sequence'], first['steps_per_task'],
                                             first['task_cycles'], task):
                ax.axvspan(start, end, color='0.9', zorder=0)
        for i, run in enumerate(runs):
            own = sorted((r for r in run['rows'] if r['task'] == task),
                         key=lambda r: r['env_steps'])
            x = np.array([r['env_steps'] for r in own])
            mean = np.array([r['return_mean'] for r in own])
            std = np.array([r['return_std'] for r in own])
            label = run['label'] + (f', seed {run["seed"]}' if len(seeds) > 1 else '')
            _, color, style = looks[i]
            ax.plot(x, mean, color=color, linestyle=style, label=label)
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.15, linewidth=0)
        ax.set_title(f'{task} (shaded: trained)')
        ax.set_xlabel('env steps')
        ax.set_ylabel('greedy evaluation return')
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc='best')
    fig.suptitle(title or ' -> '.join(runs[0]['sequence']))
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output, dpi=100)
    plt.close(fig)
    return output


def main(argv):
    logdirs = list(FLAGS.continual or []) + list(argv[1:])
    try:
        if not logdirs:
            raise PlotError('give the runs to plot: --continual LOGDIR [LOGDIR ...]')
        path = plot_continual(logdirs, FLAGS.output, FLAGS.title)
    except (PlotError, OSError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    print(path)


if __name__ == '__main__':
    app.run(main)
