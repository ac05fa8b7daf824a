"""`--tracker=mlflow` (`launch/learning/trackers.py`) on real runs and a real MLflow store
(SQLite in the test's directory), read back with MLflow's client: a run's flags as
params, its curves as metrics by env step, its files and SavedModel as artifacts; a
tuning study's trials as children of the study's run; bad input one line."""

import pytest
from mlflow.tracking import MlflowClient

from reverb_agents.launch.learning.trackers import EXPERIMENT


def _runs(uri):
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    return client, client.search_runs([experiment.experiment_id])


def test_a_run_reports_its_params_curves_and_saved_model(tmp_path, run_cli):
    uri = f'sqlite:///{tmp_path / "mlflow.db"}'
    result = run_cli(['--agent=clear', '--env=CartPole-v1', '--num_steps=20000',
                      '--eval_every_steps=10000', '--eval_episodes=2', '--tracker=mlflow',
                      f'--tracking_uri={uri}', '--learning_rate=0.002'])
    assert result.returncode == 0, result.stderr[-2000:]
    client, (run,) = _runs(uri)
    assert run.info.status == 'FINISHED' and run.info.run_name == 'run'
    params = run.data.params
    assert params['agent'] == 'clear' and params['env'] == 'CartPole-v1'
    assert float(params['learning_rate']) == 0.002
    losses = client.get_metric_history(run.info.run_id, 'loss/total_loss')
    assert len(losses) >= 5 and len({m.step for m in losses}) == len(losses)  # by env step
    evaluations = client.get_metric_history(run.info.run_id, 'eval/return_mean')
    assert len(evaluations) >= 2 and evaluations[0].step == 10000  # then the final one
    assert 'summary/eval_return_mean' in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {'summary.json', 'progress.csv', 'run_config.json', 'saved_model'} <= artifacts
    assert 'saved_model/saved_model.pb' in {
        a.path for a in client.list_artifacts(run.info.run_id, 'saved_model')}
    assert (tmp_path / 'artifacts').is_dir()  # beside the store, not in the working directory


def test_a_studys_trials_are_children_of_its_run(tmp_path, run_script):
    uri = f'sqlite:///{tmp_path / "mlflow.db"}'
    result = run_script('tune', ['--agent=clear', '--env=CartPole-v1', '--no_preset',
                                 '--trial_steps=3000', '--search=learning_rate', '--trials=1',
                                 '--pruner=none', f'--study_dir={tmp_path / "study"}',
                                 '--tracker=mlflow', f'--tracking_uri={uri}'], timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    client, runs = _runs(uri)
    (study,) = [r for r in runs if r.info.run_name == 'tune-clear-CartPole-v1']
    trials = [r for r in runs if r.data.tags.get('mlflow.parentRunId') == study.info.run_id]
    assert [r.info.run_name for r in trials] == ['trial-0']
    assert 'best_value' in study.data.metrics
    assert 'best.flags' in {a.path for a in client.list_artifacts(study.info.run_id)}


@pytest.mark.parametrize('args, expected', [
    (['--tracker=wandb'], "tracker must be one of ('mlflow',)"),
    (['--tracker=mlflow', '--launcher=multiprocess'], 'reports an in-process run'),
])
def test_bad_tracker_input_is_one_line(args, expected, run_cli, error_lines):
    result = run_cli(['--agent=clear', '--env=CartPole-v1', '--num_steps=1000', *args])
    assert result.returncode == 1
    assert [line for line in error_lines(result.stderr) if expected in line], result.stderr
