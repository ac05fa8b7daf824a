"""`reverb-agents tune` (`launch/tuning/`) on real runs: a tiny CLEAR study on CartPole
that prunes, writes `best.flags` that `train` runs and HParams in its trials' event
files, resumes (after it finished, and after a kill) without repeating a finished
trial; a trial of two seeds scoring their mean; two processes (as two machines) on
one study through `--storage`, one with two `--jobs`, and one joining a study another
is still creating; each bad input one `error:` line before any trial starts, an
existing study untouched."""

import glob
import json
import os
import signal
import time

import optuna
import pytest
import tensorflow as tf

from reverb_agents.launch.tuning import study as study_lib


def _study(trial_steps):
    return ['--agent=clear', '--env=CartPole-v1', '--no_preset', f'--trial_steps={trial_steps}',
            '--search=learning_rate,entropy_cost', '--evaluations=3']


# Two fields, tiny trials: each run is a few seconds of CLEAR on CartPole.
STUDY = _study(3000)
# Long enough for the trials' evaluations to differ, so that the median pruner prunes.
PRUNED_STUDY = _study(6000)


def _load(study_dir, name='clear-CartPole-v1'):
    return optuna.load_study(study_name=name,
                             storage=f'sqlite:///{os.path.join(study_dir, study_lib.DB_NAME)}')


def _states(study):
    return [t.state.name for t in sorted(study.trials, key=lambda t: t.number)]


def _tags(logdir):
    tags = set()
    for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    return tags


def test_a_tiny_study_prunes_and_its_best_flags_train(tmp_path, run_script):
    study_dir = str(tmp_path / 'study')
    result = run_script('tune', [*PRUNED_STUDY, '--trials=3', f'--study_dir={study_dir}'],
                        timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    study = _load(study_dir)
    states = _states(study)
    assert 'PRUNED' in states and 'COMPLETE' in states, states
    assert 'best' in result.stdout and 'learning_rate' in result.stdout  # the table
    best = study_lib.best_trial(study)
    text = open(os.path.join(study_dir, 'best.flags')).read()
    assert f'--learning_rate={best.params["learning_rate"]!r}' in text, text
    assert '--agent=clear' in text and '--num_steps=6000' in text
    for name in ('history.png', 'best_saved_model/saved_model.pb'):
        assert os.path.exists(os.path.join(study_dir, name)), name
    # Every trial is an ordinary run directory, with its settings in the HParams tab.
    assert '_hparams_/session_start_info' in _tags(os.path.join(study_dir, 'trial-0'))
    run = run_script('run', [f'--flagfile={study_dir}/best.flags', '--num_steps=1000',
                             f'--logdir={tmp_path / "again"}', '--noexport'])
    assert run.returncode == 0, run.stderr[-2000:]
    with open(tmp_path / 'again' / 'run_config.json') as f:
        assert json.load(f)['config']['optimizer']['learning_rate'] == \
            pytest.approx(best.params['learning_rate'])
    # The same command with a larger budget runs only the trials still due.
    result = run_script('tune', [*PRUNED_STUDY, '--trials=4', f'--study_dir={study_dir}'],
                        timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    study = _load(study_dir)
    assert [t.number for t in study.trials] == [0, 1, 2, 3]
    assert _states(study)[:3] == states  # the finished trials as they were


def test_a_killed_study_resumes_without_repeating_a_finished_trial(tmp_path, start_script,
                                                                   run_script):
    study_dir = str(tmp_path / 'study')
    args = [*STUDY, '--trials=3', '--pruner=none', f'--study_dir={study_dir}']
    process = start_script('tune', args)
    deadline = time.time() + 300
    while time.time() < deadline:
        if os.path.exists(os.path.join(study_dir, 'trial-0')):  # the study exists
            if 'COMPLETE' in _states(_load(study_dir)):
                break
        time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = {t.number: t.state.name for t in _load(study_dir).trials}
    assert 'COMPLETE' in before.values(), before
    result = run_script('tune', args, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    after = {t.number: t.state.name for t in _load(study_dir).trials}
    for number, state in before.items():
        if state == 'COMPLETE':
            assert after[number] == 'COMPLETE'  # not run again
    assert list(after.values()).count('COMPLETE') == 3, after
    # The killed trial's run stopped with the study (no run left writing to its dir).
    for number, state in after.items():
        if state != 'COMPLETE':
            log = os.path.join(study_dir, f'trial-{number}', 'progress.csv')
            size = os.path.getsize(log) if os.path.exists(log) else 0
            time.sleep(2)
            assert (os.path.getsize(log) if os.path.exists(log) else 0) == size


def test_trials_a_kill_ended_are_counted_apart_from_failed_ones():
    """Optuna stores a trial a kill ended as FAIL, like a crashed one; only the crashed
    one (its error line recorded) counts towards `--trials`, and the counts the table
    prints say which is which."""
    study = optuna.create_study()
    trial = optuna.trial.create_trial
    study.add_trial(trial(state=optuna.trial.TrialState.COMPLETE, value=1.0))
    study.add_trial(trial(state=optuna.trial.TrialState.FAIL, user_attrs={'error': 'boom'}))
    study.add_trial(trial(state=optuna.trial.TrialState.FAIL))
    study.add_trial(trial(state=optuna.trial.TrialState.FAIL))
    assert study_lib.counts(study) == {'COMPLETE': 1, 'FAIL': 1, 'STOPPED': 2}
    assert study_lib.finished(study) == 2


def test_two_machines_share_one_study_through_its_storage(tmp_path, start_script):
    """Two `tune` processes, each with its own study directory (as two machines have),
    against one `--storage` and `--study`: each trial runs once, on one of them; the
    first runs two at once (`--jobs=2`). docs/tuning.md shows the same with PostgreSQL."""
    storage = f'sqlite:///{tmp_path / "shared.db"}'
    dirs = [str(tmp_path / f'machine-{k}') for k in (0, 1)]
    processes = [start_script('tune', [*STUDY, '--trials=3', '--pruner=none', '--study=shared',
                                       f'--storage={storage}', f'--study_dir={directory}',
                                       *(['--jobs=2'] if k == 0 else [])])
                 for k, directory in enumerate(dirs)]
    for process in processes:
        assert process.wait(timeout=600) == 0, process.output()[-2000:]
    trials = optuna.load_study(study_name='shared', storage=storage).trials
    assert sum(t.state.name == 'COMPLETE' for t in trials) >= 3, [t.state.name for t in trials]
    ran_on = {t.number: [k for k, d in enumerate(dirs)
                         if os.path.isdir(os.path.join(d, f'trial-{t.number}'))]
              for t in trials}
    assert all(len(machines) == 1 for machines in ran_on.values()), ran_on
    assert {machines[0] for machines in ran_on.values()} == {0, 1}, ran_on
    for k, process in enumerate(processes):  # the best policy here, or where it is
        assert (os.path.isdir(os.path.join(dirs[k], 'best_saved_model'))
                or 'not exported here' in process.output()), process.output()[-2000:]
    first = [t for t in trials if ran_on[t.number] == [0]]
    assert any(a.datetime_start < b.datetime_complete and b.datetime_start < a.datetime_complete
               for a in first for b in first if a is not b), first  # two at once


def test_a_study_another_machine_is_still_creating_is_joined(tmp_path):
    """A study whose creator has written only some of its attributes (two machines that
    start at once) is joined, its missing attributes written; one that differs is refused."""
    storage = study_lib.open_storage(f'sqlite:///{tmp_path / "racing.db"}')
    half = optuna.create_study(study_name='racing', storage=storage, direction='maximize')
    half.set_user_attr('agent', 'clear')
    args = dict(name='racing', storage=storage, pruner='none', trials=3, seed=0)
    study = study_lib.load(agent='clear', env='CartPole-v1', objective='final', **args)
    assert study.user_attrs == {'agent': 'clear', 'env': 'CartPole-v1', 'objective': 'final'}
    with pytest.raises(study_lib.StudyError, match="env='CartPole-v1'"):
        study_lib.load(agent='clear', env='Acrobot-v1', objective='final', **args)


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize('case', ['search', 'space_kind', 'space_file', 'with_fixed', 'trials',
                                  'storage', 'driver', 'jobs', 'other_env'])
def test_bad_input_is_one_line_before_any_trial(case, tmp_path, run_script):
    study_dir = tmp_path / 'study'
    study_dir.mkdir()
    db = study_dir / study_lib.DB_NAME
    existing = optuna.create_study(study_name='clear-CartPole-v1', storage=f'sqlite:///{db}')
    existing.set_user_attr('agent', 'clear')
    existing.set_user_attr('env', 'Acrobot-v1' if case == 'other_env' else 'CartPole-v1')
    existing.set_user_attr('objective', 'final')
    before = db.read_bytes()
    uniform_int = _write(tmp_path / 'kind.json', '{"batch_size": {"uniform": [8.0, 64.0]}}')
    not_json = _write(tmp_path / 'bad.json', '{not json')
    wider = _write(tmp_path / 'wider.json', '{"replay_fraction": {"uniform": [0.0, 0.99]}}')
    args, expected = {
        'search': (['--search=learning_rate,no_such_field'],
                   'no_such_field is not a field of clear'),
        'space_kind': ([f'--space={uniform_int}'],
                       'batch_size: uniform 8..64 cannot hold its default 32'),
        'space_file': ([f'--space={not_json}'], 'not readable as JSON'),
        # A range checked against the command's config: 31 of 32 sequences replayed
        # from a replay of 30 (the default's 30 fit).
        'with_fixed': ([f'--space={wider}', '--replay_size=30'],
                       'replay_fraction: uniform 0..0.99 reaches 0.99, which clear refuses'),
        'trials': (['--trials=0'], '--trials must be >= 1'),
        'storage': (['--storage=sqlite:////no/such/dir/study.db'], 'cannot open it'),
        # A database URL whose driver is not installed (mysqlclient is in no extra).
        'driver': (['--storage=mysql://user@127.0.0.1:1/studies'],
                   "driver: pip install 'psycopg[binary]' for postgresql://"),
        'jobs': (['--jobs=4096'], 'at most --jobs='),
        'other_env': ([], "exists with env='Acrobot-v1'"),
    }[case]
    base = [a for a in STUDY if not a.startswith('--search=')]
    result = run_script('tune', [*base, '--trials=2', f'--study_dir={study_dir}', *args])
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith('error:')]
    assert len(errors) == 1 and expected in errors[0], result.stderr[-2000:]
    assert not glob.glob(str(study_dir / 'trial-*'))  # no trial started
    assert db.read_bytes() == before  # the existing study as it was


def test_help_lists_tunes_flags_and_the_agents_ranges(run_script):
    result = run_script('tune', ['--help', '--agent=a2c'])
    assert result.returncode == 0, result.stderr[-2000:]
    assert '--trials=20' in result.stdout and '--pruner=median' in result.stdout
    assert 'tuned over one of 0.8 / 0.9' in ' '.join(result.stdout.split())  # gae_lambda's


def test_the_python_api_takes_the_same_arguments_typed_and_two_seeds_score_their_mean(
        tmp_path):
    from reverb_agents import tune
    study_dir = tmp_path / 'study'
    result = tune('clear', 'CartPole-v1', trials=1, trial_steps=3000, preset=False,
                  search=('learning_rate',), study_dir=str(study_dir), pruner='none',
                  trial_seeds=2, seed=3, entropy_cost=0.02, hidden_sizes=(32, 32))
    assert result.counts == {'COMPLETE': 1} and result.best_value is not None
    assert set(result.best_params) == {'learning_rate'}
    text = open(result.best_flags).read()
    assert '--entropy_cost=0.02' in text and '--hidden_sizes=32,32' in text  # fixed, passed
    finals = []
    for seed in (3, 4):
        with open(study_dir / 'trial-0' / f'seed-{seed}' / 'summary.json') as f:
            finals.append(json.load(f)['eval_return_mean'])
    assert result.best_value == pytest.approx(sum(finals) / 2)
    assert '--seed' not in text and 'the mean of 2 seeds' in text
    with pytest.raises(ValueError, match="unknown keyword 'entropy'"):
        tune('clear', 'CartPole-v1', trials=1, study_dir=str(tmp_path / 'other'), entropy=0.1)
