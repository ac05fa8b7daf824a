"""What a study leaves: `best.flags`, the best trial's policy, plots and a table.

`best.flags` is an absl flagfile: the agent and environment, the flags the study
passed to every trial, its budget (`--num_steps`, the trials') and the best trial's
settings, so `reverb-agents train --flagfile=<study_dir>/best.flags [--seed=S]` runs
the best trial's configuration as it was, and flags after it override it.
"""

import dataclasses
import os
import shutil
import subprocess
import sys
import warnings
from typing import Any, Dict, List, Optional

from reverb_agents.agents import search
from reverb_agents.launch.runs import console
from reverb_agents.launch.tuning import study as study_lib
from reverb_agents.launch.tuning.spaces import flag

BEST_FLAGS = 'best.flags'
BEST_SAVED_MODEL = 'best_saved_model'
PLOTS = {'history.png': 'plot_optimization_history', 'importances.png': 'plot_param_importances',
         'intermediate.png': 'plot_intermediate_values'}


def best_flags_text(plan: Any, trial: Any) -> str:
    """The flagfile of `trial`'s run (the module doc)."""
    lines = [f'# reverb-agents tune: study {plan.name}, trial {trial.number} of '
             f'{plan.dir}; {"final" if plan.fv.objective == "final" else "best"} greedy '
             f'return {trial.value:g}'
             + (f' (the mean of {plan.fv.trial_seeds} seeds)' if plan.fv.trial_seeds > 1 else ''),
             f'--agent={plan.agent}', f'--env={plan.env}']
    # The study's seed is not a setting: `--seed` after the flagfile picks a run's.
    lines += [a for a in plan.passed
              if a.split('=', 1)[0] not in ('--agent', '--env', '--seed', '-seed')]
    lines.append(f'--num_steps={plan.trial_steps}')
    if plan.deterministic:
        lines.append('# the trials ran --deterministic: the same seed gives the same run; '
                     'remove it for the threaded runner')
        lines.append('--deterministic')
    lines += [flag(name, value) for name, value in sorted(_values(plan, trial).items())]
    return '\n'.join(lines) + '\n'


def _values(plan: Any, trial: Any) -> Dict[str, Any]:
    """The trial's settings as the space gives them (a choice's tuple, not its key)."""
    return {name: space.value_of(trial.params[name]) if isinstance(space, search.Choice)
            else trial.params[name] for name, space in plan.space.items()}


def export_best(plan: Any, trial: Any) -> str:
    """The best trial's last checkpoint exported to `<study_dir>/best_saved_model`
    (`launch/policies/export.py`); '' with a status line when it could not be."""
    output = os.path.join(plan.dir, BEST_SAVED_MODEL)
    logdir = trial.user_attrs['logdir']
    if not os.path.isdir(logdir):  # another machine's trial, on a shared --storage
        console.status(f'the best trial ({trial.number}) ran on '
                       f'{trial.user_attrs.get("host", "another machine")}: its policy is in '
                       f'{logdir} there, not exported here (best.flags retrain it)')
        return ''
    staging = output + '.new'
    shutil.rmtree(staging, ignore_errors=True)
    process = subprocess.run(
        [sys.executable, '-m', 'reverb_agents.launch.policies.export',
         f'--logdir={logdir}', f'--output={staging}'],
        capture_output=True, text=True)
    if process.returncode != 0:
        lines = process.stderr.strip().splitlines() or ['no output']
        console.status(f'warning: the best trial was not exported: {lines[-1]}')
        return ''
    shutil.rmtree(output, ignore_errors=True)
    os.replace(staging, output)
    return output


def plots(study: Any, directory: str) -> List[str]:
    """Optuna's matplotlib plots as PNGs; those it cannot draw (too few trials) skipped."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots
    written = []
    for name, function in PLOTS.items():
        try:
            with warnings.catch_warnings():  # matplotlib's, on a plot with nothing in it
                warnings.simplefilter('ignore')
                axes = getattr(optuna_plots, function)(study)
        except Exception:  # noqa: BLE001  too few complete trials for this plot
            continue
        figure = (axes.flat[0] if hasattr(axes, 'flat') else axes).figure
        path = os.path.join(directory, name)
        figure.savefig(path, dpi=100, bbox_inches='tight')
        plt.close(figure)
        written.append(path)
    return written


def _short(value: Any) -> str:
    """A value for the table: floats to 4 significant digits."""
    return f'{value:.4g}' if isinstance(value, float) else flag('x', value)[4:]


def table(plan: Any, study: Any, trial: Any, wall_s: float) -> str:
    counts = study_lib.counts(study)
    rows = [('study', f'{plan.name} ({plan.dir})'),
            ('trials', ', '.join(f'{n.lower()} {c}' for n, c in sorted(counts.items()))),
            ('wall', f'{wall_s:.0f} s this command')]
    if trial is not None:
        rows.append(('best', f'trial {trial.number}: {trial.value:g}'))
        for name, value in sorted(_values(plan, trial).items()):
            rows.append((name, f'{_short(value)} (default {_short(plan.defaults[name])})'))
    return console.table(rows)


@dataclasses.dataclass
class TuneResult:
    """What `tune` returns (`reverb_agents.tune`)."""
    study_dir: str
    counts: Dict[str, int]  # trials by state: COMPLETE, PRUNED, FAIL, STOPPED (not counted), ...
    best_value: Optional[float] = None  # the best trial's score (None: no trial completed)
    best_params: Dict[str, Any] = dataclasses.field(default_factory=dict)
    best_flags: str = ''  # <study_dir>/best.flags
    saved_model: str = ''  # the best trial's policy, <study_dir>/best_saved_model
    plots: List[str] = dataclasses.field(default_factory=list)


def report(tracker: Any, result: TuneResult, finished: int) -> None:
    """The study's tracked run's last words: the best score and settings, `best.flags`
    and the plots as artifacts."""
    if result.best_value is not None:
        tracker.on_metrics({'best_value': result.best_value}, finished)
    for path in ([result.best_flags] if result.best_flags else []) + result.plots:
        tracker.on_artifact(path)


def write(study: Any, plan: Any, wall_s: float) -> TuneResult:
    """Writes the outputs of the study so far and prints its table."""
    trial = study_lib.best_trial(study)
    result = TuneResult(plan.dir, study_lib.counts(study))
    if trial is not None:
        path = os.path.join(plan.dir, BEST_FLAGS)
        with open(path + '.new', 'w') as f:
            f.write(best_flags_text(plan, trial))
        os.replace(path + '.new', path)
        result.best_flags, result.best_value = path, trial.value
        result.best_params = _values(plan, trial)
        result.saved_model = export_best(plan, trial)
    result.plots = plots(study, plan.dir)
    print(table(plan, study, trial, wall_s))
    if trial is None:
        console.status('no trial completed: no best.flags (the failed trials\' errors: '
                       f'{plan.dir}/trial-*.log)')
    return result
