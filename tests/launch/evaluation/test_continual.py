"""Continual-learning measurements (`launch/evaluation/continual.py`) and a task sequence run end to end."""

import csv
import json
import os

import pytest

from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.evaluation import continual
from reverb_agents.launch import environments
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs import run_files
from reverb_agents.launch.building import setup
from reverb_agents.launch.runs.options import RunOptions
from tests.launch.command_line.test_train import SMALL_CONFIG, SMALL_FLAGS, small_options

HAND_WRITTEN = """env_steps,task,return_mean,return_std
0,A,10.0,1.0
0,B,-500.0,0.0
0,C,5.0,0.0
50,A,60.0,2.0
50,B,-500.0,0.0
50,C,5.0,0.0
100,A,110.0,3.0
100,B,-480.0,0.0
100,C,5.0,0.0
150,A,80.0,1.0
150,B,-200.0,5.0
150,C,5.0,0.0
200,A,30.0,1.0
200,B,-100.0,5.0
200,C,4.0,0.0
300,A,35.0,1.0
300,B,-450.0,5.0
300,C,6.0,0.0
"""


def test_forgetting_from_a_hand_written_csv(tmp_path):
    path = tmp_path / continual.CSV
    path.write_text(HAND_WRITTEN)
    rows = run_files.read_continual(str(path))
    results = continual.forgetting(rows, ['A', 'B', 'C'], steps_per_task=100)
    by_task = {r['env']: r for r in results}
    # A: B=10, R=110 (end of its visit, step 100), E=35 (last row): (110-35)/(110-10).
    assert by_task['A'] == {'env': 'A', 'return_at_start': 10.0, 'return_after_training': 110.0,
                            'return_at_end': 35.0, 'forgetting': pytest.approx(0.75)}
    # B: B=-500, R=-100 (step 200), E=-450: (-100+450)/(-100+500) = 350/400.
    assert by_task['B']['forgetting'] == pytest.approx(0.875)
    # C is the task trained last: nothing after it to forget with.
    assert by_task['C']['forgetting'] is None
    assert continual.mean_forgetting(results) == pytest.approx((0.75 + 0.875) / 2)


def test_forgetting_is_clipped_and_null_for_a_task_never_learned():
    rows = [dict(env_steps=s, task=t, return_mean=r, return_std=0.0) for s, t, r in [
        (0, 'A', 10.0), (0, 'B', 10.0), (100, 'A', 50.0), (100, 'B', 10.0),
        (200, 'A', 70.0), (200, 'B', 9.0), (300, 'A', -20.0), (300, 'B', 12.0)]]
    # Two cycles of A, B with 50 steps per visit: A's last visit ends at step 150, so
    # R = 50 (the last row at or before it), E = -20: clipped to 1. B is trained last.
    results = continual.forgetting(rows, ['A', 'B'], steps_per_task=50, task_cycles=2)
    assert [r['forgetting'] for r in results] == [1.0, None]
    # B first, never learned (R = B = 10): null.
    assert continual.forgetting(rows, ['B', 'A'], 100)[0]['forgetting'] is None
    improved = [dict(r, return_mean=90.0) if (r['task'], r['env_steps']) == ('A', 300) else r
                for r in rows]
    assert continual.forgetting(improved, ['A', 'B'], 100)[0]['forgetting'] == 0.0
    assert continual.mean_forgetting([{'forgetting': None}]) is None


def test_a_task_sequence_run_writes_continual_csv_and_forgetting(tmp_path):
    logdir = tmp_path / 'run'
    options = small_options(logdir, env='CartPole-v1,Acrobot-v1', steps_per_task=600,
                            num_steps=1200, eval_episodes=2, export=False)
    summary = inprocess.train(options, SMALL_CONFIG)
    with open(logdir / continual.CSV) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(continual.COLUMNS)
    points = sorted({int(r['env_steps']) for r in rows})
    # The untrained policy, five evaluations per visit (every 120 steps), the end.
    assert points[0] == 0 and points[-1] == 1200
    assert set(points) <= set(range(0, 1201, 120))
    assert all({r['task'] for r in rows if int(r['env_steps']) == p} ==
               {'CartPole-v1', 'Acrobot-v1'} for p in points)
    on_disk = json.loads((logdir / 'summary.json').read_text())
    assert on_disk['env'] == 'CartPole-v1,Acrobot-v1'
    assert [t['env'] for t in on_disk['tasks']] == ['CartPole-v1', 'Acrobot-v1']
    expected = continual.forgetting(run_files.read_continual(str(logdir / continual.CSV)),
                                    ['CartPole-v1', 'Acrobot-v1'], 600)
    assert on_disk['tasks'] == expected
    assert on_disk['mean_forgetting'] == continual.mean_forgetting(expected)
    assert summary['env_steps'] >= 1200
    assert os.path.exists(logdir / 'checkpoints')
    # One value output and set of PopArt statistics per task, each moved by its own
    # task's steps: CartPole pays +1 a step, Acrobot -1.
    with open(logdir / 'progress.csv') as f:
        last = list(csv.DictReader(f))[-1]
    assert float(last['popart/task0/mean']) > 1.0, last
    assert float(last['popart/task1/mean']) < -1.0, last
    assert json.loads((logdir / 'run_config.json').read_text())['config']['num_tasks'] == 2


def test_a_bad_task_sequence_is_one_error_line(run_cli):
    """On the command line; the other bad sequences are in `test_run`'s in-process list."""
    result = run_cli([*SMALL_FLAGS, '--tasks=CartPole-v1,NoSuchEnv-v0', '--steps_per_task=100'],
                     timeout=60)
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(result.errors) == 1 and 'NoSuchEnv-v0' in result.errors[0], result.stderr[-2000:]
    assert 'Traceback' not in result.stderr


def test_clear_gets_one_value_output_per_task_with_popart():
    sequence = RunOptions(agent='clear', env='CartPole-v1,Acrobot-v1', steps_per_task=10)
    assert setup.resolve_config(sequence, CLEARConfig()).num_tasks == 2
    assert setup.resolve_config(sequence, CLEARConfig(num_tasks=1)).num_tasks == 1
    assert setup.resolve_config(sequence, CLEARConfig(value_normalization='none')).num_tasks == 1
    assert setup.resolve_config(RunOptions(agent='clear', env='CartPole-v1'),
                                CLEARConfig()).num_tasks == 1
    with pytest.raises(environments.EnvironmentSetupError, match='num_tasks=3: give 0'):
        setup.resolve_config(sequence, CLEARConfig(num_tasks=3))
