"""launch/tools/plot.py --continual: one panel per task, one line per run."""

import glob
import json
import os

import pytest

from reverb_agents.launch.tools import plot
from tests.launch.evaluation.test_continual import HAND_WRITTEN


def _fake_run(directory, replay_fraction, seed, csv_text=HAND_WRITTEN, tasks='A,B,C'):
    """A logdir as a task-sequence run leaves it (the csv, run config and summary)."""
    directory.mkdir()
    (directory / 'continual.csv').write_text(csv_text)
    (directory / 'run_config.json').write_text(json.dumps({
        'agent': 'clear', 'env': tasks, 'config': {'replay_fraction': replay_fraction},
        'env_options': {'steps_per_task': 100, 'task_cycles': 1}}))
    (directory / 'summary.json').write_text(json.dumps({'seed': seed, 'mean_forgetting': 0.5}))
    return str(directory)


def test_continual_plot_of_two_runs(tmp_path):
    clear = _fake_run(tmp_path / 'clear', 0.5, 0)
    impala = _fake_run(tmp_path / 'impala', 0.0, 0)
    assert plot.load_run(impala)['label'].startswith('IMPALA')
    assert plot.load_run(clear)['label'].startswith('CLEAR (replay_fraction=0.5)')
    assert plot.trained_ranges(['A', 'B', 'A'], 100, 2, 'A') == [(0, 100), (200, 300),
                                                                 (300, 400), (500, 600)]
    output = tmp_path / 'figures' / 'continual.png'
    assert plot.plot_continual([clear, impala], str(output)) == str(output)
    assert output.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and output.stat().st_size > 10_000


def test_runs_of_other_sequences_or_without_a_csv_are_one_error(tmp_path, run_script):
    clear = _fake_run(tmp_path / 'clear', 0.5, 0)
    other = _fake_run(tmp_path / 'other', 0.5, 1, HAND_WRITTEN.replace(',C,', ',D,'), 'A,B,D')
    with pytest.raises(plot.PlotError, match='different task sequences'):
        plot.plot_continual([clear, other], str(tmp_path / 'x.png'))
    # The second logdir comes after the flag's value, as the README writes it.
    result = run_script('plot', ['--continual', clear, str(tmp_path),
                                 f'--output={tmp_path}/y.png'])
    assert result.returncode == 1 and len(result.errors) == 1
    assert 'no continual.csv' in result.errors[0]
    assert not (tmp_path / 'y.png').exists()


def test_learning_curves_of_two_seeds_from_real_runs(tmp_path):
    """Two short real runs write progress.csv; their mean +- std over the seeds is one line."""
    from reverb_agents.agents import configs
    from reverb_agents.agents.clear.config import CLEARConfig
    from reverb_agents.launch.runners import inprocess
    from reverb_agents.launch.runs import metrics, run_files
    from reverb_agents.launch.runs.options import RunOptions

    config = configs.from_flat(CLEARConfig, dict(
        lstm_size=8, hidden_sizes=(16,), batch_size=8, unroll_length=5, min_replay_size=8,
        queue_size=16))
    logdirs = []
    for seed in (0, 1):
        logdir = str(tmp_path / f'seed{seed}')
        inprocess.train(RunOptions(env='CartPole-v1', num_envs=4, num_steps=2000, seed=seed,
                                   logdir=logdir, eval_episodes=1, log_interval_s=0.1,
                                   export=False), config)
        rows = run_files.read_progress(f'{logdir}/{metrics.PROGRESS_CSV}')
        assert len(rows) >= 3 and rows[-1]['env_steps'] >= 2000
        logdirs.append(logdir)
    curves = [plot.load_curve(d) for d in logdirs]
    label = f'CLEAR (replay_fraction={CLEARConfig().replay_fraction})'  # the agent's default
    assert {c['group'] for c in curves} == {label}
    assert {plot.load_curve(d, 'seed')['group'] for d in logdirs} == {
        f'{label}, seed=0', f'{label}, seed=1'}
    with pytest.raises(plot.PlotError, match='--group_by=nope'):
        plot.load_curve(logdirs[0], 'nope')
    # An environment option the run left at its default is grouped by that default.
    assert plot.load_curve(logdirs[0], 'env_kwargs')['group'] == f'{label}, env_kwargs={{}}'
    output = tmp_path / 'curve.png'
    assert plot.plot_curves(logdirs, str(output)) == str(output)
    assert output.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and output.stat().st_size > 10_000
    with pytest.raises(plot.PlotError, match='no progress.csv'):
        plot.load_curve(str(tmp_path))


def test_a_run_of_seconds_leaves_a_curve_and_every_phase_its_summaries(tmp_path, run_cli,
                                                                       run_script):
    """Rows and summaries by env steps as well as by time (`RunOptions.curve_env_steps`),
    and at the end of a phase: CLEAR's 20k-step CartPole run (a few seconds) is drawn,
    and its 30 critic pre-training steps are in TensorBoard."""
    import tensorflow as tf
    logdir = str(tmp_path / 'run')
    result = run_cli(['--agent=clear', '--env=CartPole-v1', '--num_steps=20000',
                      '--critic_pretrain_steps=30', '--noexport'])
    assert result.returncode == 0, result.stderr[-2000:]
    with open(os.path.join(logdir, 'progress.csv')) as f:
        assert len(f.readlines()) - 1 >= 10
    plot = run_script('plot', [logdir, f'--output={tmp_path / "curve.png"}'])
    assert plot.returncode == 0, plot.stderr[-2000:]
    assert os.path.getsize(tmp_path / 'curve.png') > 0
    tags = set()
    for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    assert {'critic_pretrain/baseline_loss', 'loss/total_loss'} <= tags, sorted(tags)
