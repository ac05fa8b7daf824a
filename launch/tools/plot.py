"""Plots runs: `python launch/plot.py LOGDIR [LOGDIR ...] --output=FILE.png`.

Learning curves (the default): the training return (the mean of the last 20
episodes, `<logdir>/progress.csv`) against env steps, one line per group of
runs with a band of one standard deviation over the runs of the group (the
seeds). `--group_by=agent` (default) groups by agent (IMPALA for a CLEAR run
without replay); `--group_by=FLAG` by the value of any config field or
run option (`--group_by=replay_fraction`). Runs are averaged over the env
steps all of them reached (each interpolated onto one grid).

`--continual`: one panel per task of a task sequence (`launch/evaluation/continual.py`),
the greedy evaluation return against env steps, one line (mean, with a band
of one standard deviation over the evaluation episodes) per logdir, and the
env-step ranges in which each panel's task was trained shaded. The legend
names each logdir by its agent and `replay_fraction` (IMPALA for a CLEAR run
without replay) and, when the runs differ in seed, the seed. Every logdir
must be a run of the same sequence.
"""

import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Sequence

from absl import app, flags

from reverb_agents.launch.command_line import help as help_lib  # no TensorFlow
from reverb_agents.launch.runs.options import RunOptions  # no TensorFlow either
from reverb_agents.launch.runs.run_files import flat_config, read_continual, read_progress

flags.DEFINE_multi_string('continual', None, 'task-sequence logdirs to plot (repeat the flag '
                          'or list them after it)')
flags.DEFINE_string('output', '', 'the PNG to write (default: curve.png, or continual.png '
                    'with --continual)')
flags.DEFINE_string('title', '', 'figure title (default: the environment or task sequence)')
flags.DEFINE_string('group_by', 'agent', 'learning curves: one line per agent, or per value '
                    'of this config field or run option')
FLAGS = flags.FLAGS


# The files a run writes, read here without their writers (`launch/runs/metrics.py`,
# `rundir.py`, `continual.py`), which import TensorFlow: plotting reads CSV and JSON only.
PROGRESS_CSV = 'progress.csv'
CONTINUAL_CSV = 'continual.csv'
RUN_CONFIG = 'run_config.json'
SUMMARY = 'summary.json'


class PlotError(ValueError):
    """A logdir that cannot be plotted."""


def _read_json(path: str) -> Dict[str, Any]:
    """A JSON object file ({} when missing); PlotError when it is not one."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            value = json.load(f)
    except ValueError as e:
        raise PlotError(f'{path} is not JSON ({e})') from None
    if not isinstance(value, dict):
        raise PlotError(f'{path} holds no JSON object')
    return value


def _run_files(logdir: str) -> Dict[str, Any]:
    """`run_config.json` and `summary.json` of `logdir` ({} for those missing)."""
    return {'run': _read_json(os.path.join(logdir, RUN_CONFIG)),
            'summary': _read_json(os.path.join(logdir, SUMMARY))}



def agent_label(agent: str, config: Dict[str, Any]) -> str:
    """'CLEAR (replay_fraction=0.5)', 'IMPALA (replay_fraction=0)', 'SAC'."""
    fraction = config.get('replay_fraction')
    if agent == 'clear' and fraction == 0:
        return 'IMPALA (replay_fraction=0)'
    if fraction is not None:
        return f'{agent.upper()} (replay_fraction={fraction:g})'
    return agent.upper()


def _env_option_defaults() -> Dict[str, Any]:
    """The defaults of the options `RunOptions.env_options` records when they differ."""
    fields = {f.name: f for f in dataclasses.fields(RunOptions)}
    return {name: (fields[name].default_factory() if fields[name].default is dataclasses.MISSING
                   else fields[name].default)
            for name in ('env_kwargs', 'steps_per_task', 'task_cycles', 'step_mul',
                         'fixed_step_mul')}


def load_curve(logdir: str, group_by: str = 'agent') -> Dict[str, Any]:
    """A run's learning curve: {'env_steps', 'returns' (arrays), 'group', 'env'}."""
    import numpy as np
    path = os.path.join(logdir, PROGRESS_CSV)
    if not os.path.exists(path):
        raise PlotError(f'{logdir!r} has no {PROGRESS_CSV}: not a run directory')
    rows = [r for r in read_progress(path) if 'return_mean' in r]
    if len(rows) < 2:
        raise PlotError(f'{path} has fewer than two rows with a training return')
    files = _run_files(logdir)
    run = files['run']
    config = flat_config(run.get('config', {}))
    agent = run.get('agent', '?')
    if group_by == 'agent':
        group = agent_label(agent, config)
    else:
        # `env_options` records the options that differ from their defaults.
        known = {**_env_option_defaults(), **config, **run.get('env_options', {}),
                 'env': run.get('env'),
                 'seed': run.get('seed', files['summary'].get('seed'))}
        if group_by not in known:
            raise PlotError(f'--group_by={group_by}: {logdir} records no such flag')
        label, value = agent_label(agent, config), f'{group_by}={known[group_by]}'
        group = label if value in label else f'{label}, {value}'  # named once
    return {'env_steps': np.array([r['env_steps'] for r in rows]),
            'returns': np.array([r['return_mean'] for r in rows]),
            'group': group, 'env': run.get('env', '?')}


def plot_curves(logdirs: Sequence[str], output: str, group_by: str = 'agent',
                title: str = '') -> str:
    """Writes the learning-curve figure (see the module doc) to `output`; returns its path."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    curves = [load_curve(d, group_by) for d in logdirs]
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for curve in curves:
        groups.setdefault(curve['group'], []).append(curve)
    fig, ax = plt.subplots(figsize=(6, 4))
    for group, members in groups.items():
        end = min(c['env_steps'][-1] for c in members)
        start = max(c['env_steps'][0] for c in members)
        grid = np.linspace(start, end, 200)
        ys = np.stack([np.interp(grid, c['env_steps'], c['returns']) for c in members])
        mean, std = ys.mean(0), ys.std(0)
        line, = ax.plot(grid, mean, label=f'{group} ({len(members)} run'
                        f'{"s" if len(members) > 1 else ""})')
        if len(members) > 1:
            ax.fill_between(grid, mean - std, mean + std, color=line.get_color(), alpha=0.2,
                            linewidth=0)
    ax.set_xlabel('env steps')
    ax.set_ylabel('training return (last 20 episodes)')
    ax.set_title(title or ', '.join(dict.fromkeys(c['env'] for c in curves)))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc='best')
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output, dpi=100)
    plt.close(fig)
    return output


def load_run(logdir: str) -> Dict[str, Any]:
    """A task-sequence run's rows, tasks and label ({'rows', 'tasks', 'steps_per_task',
    'task_cycles', 'label', 'seed'})."""
    path = os.path.join(logdir, CONTINUAL_CSV)
    if not os.path.exists(path):
        raise PlotError(f'{logdir!r} has no {CONTINUAL_CSV}: not a task-sequence run '
                        f'(--tasks)')
    rows = read_continual(path)
    files = _run_files(logdir)
    run, summary = files['run'], files['summary']
    sequence = run.get('env_options', {})
    label = agent_label(run.get('agent', '?'), run.get('config', {}))
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
            raise PlotError('give the runs to plot: LOGDIR [LOGDIR ...] (--continual LOGDIR '
                            '... for task sequences)')
        if FLAGS.continual:
            path = plot_continual(logdirs, FLAGS.output or 'continual.png', FLAGS.title)
        else:
            path = plot_curves(logdirs, FLAGS.output or 'curve.png', FLAGS.group_by,
                               FLAGS.title)
    except (PlotError, OSError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    print(path)


if __name__ == '__main__':
    app.run(main, flags_parser=help_lib.script_parser(
        FLAGS, __doc__, 'output', 'LOGDIR [LOGDIR ...] [--continual] [--FLAG=VALUE ...]'))
