"""Tunes an agent's settings on an environment: an Optuna study whose trials are runs.

`reverb-agents tune --agent=A --env=ID --trials=N --trial_steps=S [--jobs=J]
[--study=NAME] [--storage=URL] [any train flag]`: an Optuna study
(`launch/tuning/study.py`) over the agent's declared search space
(`launch/tuning/spaces.py`; `--search=a,b` narrows it, `--space=FILE` replaces it);
each trial is an ordinary run directory `<study_dir>/trial-<n>`
(`launch/tuning/trials.py`; with `--trial_seeds=K`, K runs `trial-<n>/seed-<s>` whose
mean is the score), `--deterministic` unless the command says otherwise, so that
trials differ by their settings. Every train flag on this command (a preset,
`--num_envs`, a config field) is passed to every trial; a config field given here is
fixed and leaves the space. `--jobs=J` runs J trials at once, each a process. The
same command again resumes the study; `--storage=URL` shares it between machines.

At the end, in the study's directory (`runs/tune-<study>` unless `--study_dir`):
`best.flags` (a preset `reverb-agents train --flagfile=` runs as it is), the best
trial's policy exported to `best_saved_model`, `history.png` and `importances.png`
(Optuna's matplotlib plots), and a table on the console. Bad input is one `error:`
line before any trial starts; nothing of an existing study is lost.
"""

import os
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import flags

from reverb_agents.launch.runs import console
from reverb_agents.launch.runs import options as options_lib

TUNE_FLAGS = ('trials', 'trial_steps', 'trial_seeds', 'jobs', 'study', 'storage', 'study_dir',
              'search', 'space', 'objective', 'pruner', 'evaluations')
USAGE = '--agent=A --env=ID --trials=N --trial_steps=S [--jobs=J] [train flags]'
STUDY_ROOT = 'runs'  # <STUDY_ROOT>/tune-<study>
TRIAL_EVAL_EPISODES = 10  # each trial's greedy evaluations, unless --eval_episodes is given
# A trial's process: TensorFlow, the agent and a Reverb server (measured: docs/tuning.md).
TRIAL_BASE_BYTES = 1_500_000_000


class TuneError(ValueError):
    """Bad input to `tune` (one line)."""


def define_flags(fv: flags.FlagValues) -> None:
    """The run's flags (every train flag) and tune's own."""
    from reverb_agents.launch.command_line import run_flags
    from reverb_agents.launch.tuning import study
    run_flags.define_flags(fv)
    flags.DEFINE_integer('trials', 20, 'trials the study runs in all (finished ones count '
                         'when it resumes)', flag_values=fv)
    flags.DEFINE_integer('trial_steps', None, "each trial's env-step budget (default: the "
                         "run's --num_steps)", flag_values=fv)
    flags.DEFINE_integer('trial_seeds', 1, 'runs per trial, seeds --seed, --seed + 1, ...; '
                         'the trial scores their mean (the pruner follows the first)',
                         flag_values=fv)
    flags.DEFINE_integer('jobs', 1, 'trials run at once on this machine, each a process',
                         flag_values=fv)
    flags.DEFINE_string('study', '', "the study's name (default <agent>-<env>)", flag_values=fv)
    flags.DEFINE_string('storage', '', "Optuna storage URL (default: SQLite in the study's "
                        'directory); postgresql://... shares one study between machines',
                        flag_values=fv)
    flags.DEFINE_string('study_dir', '', "the study's directory (default runs/tune-<study>)",
                        flag_values=fv)
    flags.DEFINE_list('search', [], 'tune only these fields (of those with a search space)',
                      flag_values=fv)
    flags.DEFINE_string('space', '', 'a JSON or YAML file {field: space} replacing the '
                        "agent's search space (agents/search.py's forms)", flag_values=fv)
    flags.DEFINE_enum('objective', 'final', study.OBJECTIVES, "a trial's score: its final "
                      'greedy evaluation, or its best periodic or final one', flag_values=fv)
    flags.DEFINE_enum('pruner', 'median', study.PRUNERS, 'stops trials behind the others at '
                      'the same evaluation', flag_values=fv)
    flags.DEFINE_integer('evaluations', 5, 'periodic greedy evaluations per trial (what the '
                         'pruner sees)', flag_values=fv)


def _flag_name(arg: str) -> str:
    return arg.lstrip('-').split('=', 1)[0]


def passed_through(argv: Sequence[str]) -> List[str]:
    """The command's train flags: `argv` (program first) without tune's own flags."""
    names = set(TUNE_FLAGS) | {f'no{n}' for n in TUNE_FLAGS}
    out, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg.startswith('-') and _flag_name(arg) in names:
            skip = '=' not in arg and _flag_name(arg) in TUNE_FLAGS  # `--trials 5`
            continue
        out.append(arg)
    return out


def given(args: Sequence[str]) -> List[str]:
    """The flag names `args` set (`--name=v`, `--name`, `--noname`)."""
    return [_flag_name(a) for a in args if a.startswith('-')]


class Plan:
    """What a study runs, checked: built from the parsed flags before any trial."""

    def __init__(self, argv: Sequence[str], fv: flags.FlagValues):
        # Long: every check of the command in one place, in the order a user reads it.
        from reverb_agents.agents import registry
        from reverb_agents.launch.command_line import run_flags
        from reverb_agents.launch.tuning import spaces, study
        self.fv, self.agent = fv, fv.agent
        for name in ('trials', 'trial_seeds', 'jobs', 'evaluations'):
            if fv[name].value < 1:
                raise TuneError(f'--{name} must be >= 1, got {fv[name].value}')
        if fv.trial_steps is not None and fv.trial_steps < 1:
            raise TuneError(f'--trial_steps must be >= 1, got {fv.trial_steps}')
        self.passed = passed_through(argv)
        forbidden = [n for n in ('logdir', 'resume', 'role', 'launcher') if n in given(self.passed)]
        if forbidden:
            raise TuneError(f'--{forbidden[0]}: a trial is an in-process run in the study\'s '
                            f'directory; leave it out')
        options, config = run_flags.resolve(run_flags.flag_values(fv))
        self.trial_steps = fv.trial_steps or options.num_steps
        self.name = fv.study or f'{self.agent}-{options.env}'.replace('/', '_').replace(':', '_')
        self.dir = fv.study_dir or os.path.join(STUDY_ROOT, f'tune-{self.name}')
        self.env = options.env
        config_class = registry.get(self.agent).config_class
        self.defaults = {**{n: getattr(options, n) for n in options_lib.SEARCH}, **_flat(config)}
        fixed = [n for n in given(self.passed) if n in self.defaults]
        self.space = spaces.choose(config_class, self.agent, fv.search, fv.space, fixed,
                                   config)
        self.storage_url = study.storage_url(self.dir, fv.storage)
        self.check_jobs(fv.jobs, options, config)
        self.deterministic = not any(n in ('deterministic', 'nodeterministic')
                                     for n in given(self.passed))
        self.eval_episodes = 'eval_episodes' not in given(self.passed)

    def check_jobs(self, jobs: int, options: Any, config: Any) -> None:
        """`jobs` trials at once must fit this machine's cores and memory."""
        from reverb_agents.launch.building import memory
        cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') \
            else os.cpu_count() or 1
        if jobs > cores:
            raise TuneError(f'--jobs={jobs}: this machine runs {cores} processes at once '
                            f'(cores); at most --jobs={cores}')
        available = memory.available_bytes()
        if available is not None and jobs * TRIAL_BASE_BYTES > available:
            most = max(1, available // TRIAL_BASE_BYTES)
            raise TuneError(
                f'--jobs={jobs}: each trial needs about {memory.human_bytes(TRIAL_BASE_BYTES)} '
                f'and {memory.human_bytes(available)} is available: at most --jobs={most}')

    def trial_runs(self, number: int, tuned: Sequence[str]) -> List[Tuple[str, List[str]]]:
        """A trial's runs, (directory, arguments) each: the passed flags, the budget and
        directory, the seed (with `--trial_seeds` > 1: `--seed`, `--seed` + 1, ...), the
        tuned flags."""
        seeds = self.fv.trial_seeds
        runs = []
        for index in range(seeds):
            logdir = os.path.join(self.dir, f'trial-{number}')
            if seeds > 1:
                logdir = os.path.join(logdir, f'seed-{self.fv.seed + index}')
            argv = [*self.passed, f'--num_steps={self.trial_steps}', f'--logdir={logdir}',
                    f'--eval_every_steps={max(1, self.trial_steps // (self.fv.evaluations + 1))}',
                    '--noexport']
            if seeds > 1:
                argv.append(f'--seed={self.fv.seed + index}')
            if self.deterministic:
                argv.append('--deterministic')
            if self.eval_episodes:
                argv.append(f'--eval_episodes={TRIAL_EVAL_EPISODES}')
            runs.append((logdir, [*argv, *tuned]))
        return runs


def _flat(config: Any) -> Dict[str, Any]:
    from reverb_agents.agents import configs
    return configs.flatten(config)


def run(argv: Sequence[str]) -> Any:
    """Parses `argv` (program name first), runs or resumes the study, writes its outputs
    and returns them (`outputs.TuneResult`). Raises TuneError (or another ValueError)
    with one line for bad input."""
    from reverb_agents.launch.command_line import run_flags
    from reverb_agents.launch.tuning import outputs, study as study_lib
    fv = flags.FlagValues()
    define_flags(fv)
    try:
        run_flags.parse(list(argv), fv)
    except flags.Error as error:
        raise TuneError(str(error).splitlines()[0]) from None
    plan = Plan(argv, fv)
    storage_existed = plan.storage_url.startswith('sqlite:///') and os.path.exists(
        plan.storage_url[len('sqlite:///'):])
    os.makedirs(plan.dir, exist_ok=True)
    try:
        storage = study_lib.open_storage(plan.storage_url)
        study = study_lib.load(plan.name, storage, plan.agent, plan.env, fv.objective,
                               fv.pruner, fv.trials, fv.seed)
    except BaseException:
        if not storage_existed and not os.listdir(plan.dir):
            os.rmdir(plan.dir)
        raise
    done = study_lib.finished(study)
    remaining = max(0, fv.trials - done)
    console.status(f'study {plan.name} ({plan.dir}): {done} of {fv.trials} trials done; '
                   f'tuning {", ".join(f"{n} ({s.describe()})" for n, s in plan.space.items())}')
    tracker = study_tracker(plan, fv)
    status = 'FAILED'
    start = time.time()
    try:
        if remaining:
            optimize(study, plan, fv, remaining)
        result = outputs.write(study, plan, time.time() - start)
        status = 'FINISHED'
        if tracker is not None:
            outputs.report(tracker, result, study_lib.finished(study))
        return result
    except KeyboardInterrupt:
        status = 'KILLED'
        raise
    finally:
        if tracker is not None:
            tracker.on_end(status)


def optimize(study: Any, plan: Plan, fv: flags.FlagValues, remaining: int) -> None:
    """Runs `remaining` more trials, `--jobs` at a time, until the study has `--trials`."""
    from reverb_agents.launch.tuning import study as study_lib
    optuna = study_lib.optuna_module()
    objective = study_lib.objective(plan.space, fv.objective, plan.trial_runs)
    stop = optuna.study.MaxTrialsCallback(
        fv.trials, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
    try:
        study.optimize(objective, n_trials=remaining, n_jobs=fv.jobs, catch=(Exception,),
                       callbacks=[stop], show_progress_bar=sys.stderr.isatty())
    except KeyboardInterrupt:
        console.status(f'stopped: {study_lib.finished(study)} of {fv.trials} trials done; '
                       f'the same command resumes the study')
        raise


def study_tracker(plan: Plan, fv: flags.FlagValues) -> Any:
    """With `--tracker`: the study's own tracked run, whose id the trials (processes that
    inherit this environment) take as their parent; None without."""
    from reverb_agents.launch.learning import trackers
    tracker = trackers.make(fv.tracker, f'tune-{plan.name}', fv.tracking_uri)
    if tracker is None:
        return None
    tracker.on_start({'agent': plan.agent, 'env': plan.env, 'trials': fv.trials,
                      'trial_steps': plan.trial_steps, 'objective': fv.objective,
                      'pruner': fv.pruner, **{f'space/{n}': s.describe()
                                              for n, s in plan.space.items()}})
    os.environ[trackers.PARENT_RUN_ENV] = tracker.run_id
    return tracker


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`reverb-agents tune`: exit status 0, 1 on bad input (one line), 130 on Ctrl-C."""
    from reverb_agents.launch.command_line import help as help_lib
    argv = list(sys.argv if argv is None else argv)
    if not console.verbose_requested(argv):
        console.quiet_native_output()  # TensorFlow's start-up lines (the checks import it)
    # `kill PID` stops a study as Ctrl-C does (a shell's background job ignores SIGINT).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if help_lib.wants_help(argv):
        fv = flags.FlagValues()
        define_flags(fv)
        print(help_lib.script_help(fv, argv, __doc__, 'trials', USAGE, agent_fields=True))
        return 0
    try:
        run(argv)
    except KeyboardInterrupt:
        return 130
    except ValueError as error:  # TuneError, StudyError, SpaceError, a run flag's check
        print(f'error: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
