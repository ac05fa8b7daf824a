"""The Optuna study behind `reverb-agents tune`: storage, sampler, pruner, the objective.

- Storage: SQLite in the study's directory (`<study_dir>/study.db`) unless `--storage`
  gives any database URL Optuna takes (`postgresql://...`), which lets the same
  command on several machines work on one study; Optuna hands out each trial
  once. Trials report a heartbeat, so a trial whose process was killed is marked
  failed after `GRACE_S` and does not count.
- The study records its agent, environment and objective (user attributes); a
  command naming the study with others is refused.
- Sampler: TPE seeded by `--seed` (and the worker's index); pruner: the median
  of earlier trials at the same evaluation (`median`), successive halving
  (`halving`) or none, fed by the trials' periodic greedy evaluations.
- The objective: the run's final greedy evaluation (`final`) or its best
  evaluation (`best`), the mean over the trial's seeds (`--trial_seeds`); a
  crashed trial is recorded failed with its error line (user attribute `error`)
  and the study goes on.
"""

import os
import socket
import time
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from reverb_agents.agents import search
from reverb_agents.launch.runs import console
from reverb_agents.launch.tuning import trials as trials_lib

PRUNERS = ('median', 'halving', 'none')
OBJECTIVES = ('final', 'best')
HEARTBEAT_S = 30
# SQLAlchemy takes postgresql:// to psycopg 3 and mysql:// to mysqlclient.
DRIVERS = (" (the URL's database driver: pip install 'psycopg[binary]' for postgresql://, "
           "mysqlclient for mysql://)")
GRACE_S = 120  # a running trial without a heartbeat for this long is failed
DB_NAME = 'study.db'
COUNTED = ('COMPLETE', 'PRUNED')  # finished trials; crashed ones count too (see `finished`)


class StudyError(ValueError):
    """A study this command cannot use (one line)."""


def optuna_module() -> Any:
    """`optuna`, or StudyError saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise StudyError("tuning needs Optuna: pip install 'reverb-agents[tune]' "
                         "(in a checkout: pip install -e '.[tune]')") from None
    # A failed trial is one line of ours (`objective`), not Optuna's traceback.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # The heartbeat and the matplotlib plots are "experimental" in Optuna's words, and
    # importances of a few trials warn that they are equal: not the user's to act on.
    warnings.filterwarnings('ignore', category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings('ignore', message='The number of trials is too small')
    return optuna


def storage_url(study_dir: str, storage: str) -> str:
    return storage or f'sqlite:///{os.path.abspath(os.path.join(study_dir, DB_NAME))}'


def open_storage(url: str, attempts: int = 5) -> Any:
    """Optuna's RDB storage at `url` with heartbeats, or StudyError (one line).

    Two machines started at once on an empty database both create its tables; the one
    that loses gets a duplicate-key or already-exists error and opens the tables the
    other made on a later attempt.
    """
    optuna = optuna_module()
    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S,
                                              grace_period=GRACE_S)
        except Exception as error:  # SQLAlchemy's many errors: its first line says why
            line = str(error).splitlines()[0] if str(error) else type(error).__name__
            racing = (type(error).__name__ == 'IntegrityError' or 'already exists' in line)
            if not racing or attempt == attempts - 1:
                if 'DB access module' in line:
                    line += DRIVERS
                raise StudyError(f'--storage={url}: cannot open it: {line}') from None
            time.sleep(0.5 * (attempt + 1))


def make_pruner(name: str, trials: int) -> Any:
    optuna = optuna_module()
    if name == 'median':
        # A quarter of the trials (at least one) complete before any is pruned.
        return optuna.pruners.MedianPruner(n_startup_trials=max(1, min(5, trials // 4)))
    if name == 'halving':
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def load(name: str, storage: Any, agent: str, env: str, objective: str, pruner: str,
         trials: int, seed: int, create: bool = True) -> Any:
    """The study `name` (created with `create`), its agent, environment and objective
    checked against this command's."""
    optuna = optuna_module()
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, min(10, trials // 3)))
    names = optuna.get_all_study_names(storage)
    if name not in names and not create:
        raise StudyError(f'no study {name!r} in the storage')
    study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                pruner=make_pruner(pruner, trials), direction='maximize',
                                load_if_exists=True)
    mine = {'agent': agent, 'env': env, 'objective': objective}
    # Another machine may be creating the study now and have written only some of its
    # attributes: this command writes those missing, then compares all of them as stored.
    stored = study.user_attrs  # each read is a query of the storage
    for key, value in mine.items():
        if key not in stored:
            study.set_user_attr(key, value)
    theirs = study.user_attrs  # again: this command's writes and any other machine's
    differ = [f'{k}={theirs.get(k)!r}' for k in mine if theirs.get(k) != mine[k]]
    if differ:
        raise StudyError(f'study {name!r} exists with {", ".join(differ)}; this command '
                         f'has agent={agent!r}, env={env!r}, objective={objective!r}: '
                         f'name another --study')
    return study


def finished(study: Any) -> int:
    """Trials that count towards `--trials`: complete, pruned, or crashed by themselves
    (not those a kill or Ctrl-C ended, which a resumed study runs again)."""
    count = 0
    for trial in study.get_trials(deepcopy=False):
        state = trial.state.name
        if state in COUNTED or (state == 'FAIL' and 'error' in trial.user_attrs):
            count += 1
    return count


def objective(space: Mapping[str, search.Space], which: str,
              trial_runs: Callable[[int, Sequence[str]], Sequence[Tuple[str, Sequence[str]]]]
              ) -> Callable[[Any], float]:
    """Optuna's objective: samples `space`, runs the trial's runs (`trials.run`; one per
    seed, `trial_runs(number, flags)` giving each one's directory and arguments for the
    sampled flags) and returns their mean score. The pruner follows the first run."""
    from reverb_agents.launch.tuning.spaces import flag
    optuna = optuna_module()

    def run_one(trial: Any) -> float:
        values = {name: s.suggest(trial, name) for name, s in space.items()}
        runs = trial_runs(trial.number, [flag(n, v) for n, v in values.items()])
        trial.set_user_attr('logdir', runs[0][0])
        trial.set_user_attr('host', socket.gethostname())  # whose disk the runs are on
        scores = []
        for index, (logdir, argv) in enumerate(runs):
            best = [float('-inf')]

            def report(env_steps: int, value: float, first: bool = index == 0) -> bool:
                best[0] = max(best[0], value)
                if not first:
                    return False
                trial.report(value, env_steps)
                return trial.should_prune()

            try:
                pruned, summary = trials_lib.run(argv, logdir, report, logdir + '.log')
            except Exception as error:  # the run's error line, or the tuner's own
                line = str(error) if isinstance(error, trials_lib.TrialFailed) else \
                    f'{type(error).__name__}: {error}'
                trial.set_user_attr('error', line)
                console.status(f'trial {trial.number} failed: {line}')
                raise
            if pruned:
                raise optuna.TrialPruned()
            final = summary.get('eval_return_mean')
            if final is None:
                trial.set_user_attr('error', 'the run wrote no final evaluation (summary.json)')
                raise trials_lib.TrialFailed(trial.user_attrs['error'])
            scores.append(max(best[0], float(final)) if which == 'best' else float(final))
        return sum(scores) / len(scores)
    return run_one


def best_trial(study: Any) -> Optional[Any]:
    """The best complete trial, or None."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == 'COMPLETE']
    return max(complete, key=lambda t: t.value) if complete else None


def counts(study: Any) -> Dict[str, int]:
    """Trials by state name (COMPLETE, PRUNED, FAIL, RUNNING, ...); STOPPED: those
    Optuna stores as FAIL because a kill or Ctrl-C ended them, which do not count
    (`finished`)."""
    out: Dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        state = trial.state.name
        if state == 'FAIL' and 'error' not in trial.user_attrs:
            state = 'STOPPED'
        out[state] = out.get(state, 0) + 1
    return out


__all__ = ['OBJECTIVES', 'PRUNERS', 'StudyError', 'best_trial', 'counts', 'finished', 'load',
           'objective', 'open_storage', 'storage_url']
