"""What the learner writes to TensorBoard besides the agent's scalars (`launch.runs.metrics`):
`action/<name>` histograms of the learner's batch, `variables/global_norm` and the
environments' numeric `info` as `env_info/<key>`.

One short real run (real Reverb, a real environment) checks all three in the
event files; the pieces they are made of are checked on their own first.
"""

import glob

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, contract
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.learning import data
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch import load_policy
from reverb_agents.launch.runs import metrics, run_files
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.replay.dataset import Batch
from reverb_agents.replay.trajectory import Sequence, Step

INFO_ENV = 'InfoCartPole-v0'


class InfoCartPole(gym.Wrapper):
    """CartPole whose steps report two numbers in `info`: the cart's position and a
    constant 1 (so its mean is known exactly)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, dict(info, cart_position=float(obs[0]),
                                                        one=1)


if INFO_ENV not in gym.registry:
    gym.register(INFO_ENV, entry_point=lambda **kwargs: InfoCartPole(gym.make('CartPole-v1')))


@pytest.mark.parametrize('space,names', [
    (gym.spaces.Discrete(3), ['0']),
    (gym.spaces.Box(-1.0, 1.0, (2,)), ['0']),
    (gym.spaces.MultiDiscrete([2, 3]), ['0', '1']),
    (gym.spaces.Dict({'move': gym.spaces.Discrete(3), 'aim': gym.spaces.Box(-1.0, 1.0, (2,)),
                      'keys': gym.spaces.MultiDiscrete([2, 2])}),
     ['aim', 'keys/0', 'keys/1', 'move']),  # gymnasium sorts a Dict's keys
    (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiDiscrete([4, 4]))),
     ['0', '1/0', '1/1']),
])
def test_action_names_follow_the_leaves(space, names):
    assert metrics.action_names(space) == names
    assert len(names) == len(ActionSpace(space).leaves)


def test_info_means_use_the_masks_and_skip_what_is_not_one_number_per_env():
    means = metrics.InfoMeans()
    means.add({'x': np.array([1.0, 5.0, 3.0]), '_x': np.array([True, False, True]),
               'episode': {'r': np.array([10.0, 0.0, 0.0]), '_r': np.array([True, False, False])},
               '_episode': np.array([True, False, False]),
               'reward_vector': np.ones([3, 2], np.float32),  # [B, k]: no scalar per env
               'name': np.array(['a', 'b', 'c'], object)})
    means.add({'x': np.array([0.0, 0.0, 6.0]), '_x': np.array([False, False, True])})
    means.add({})
    assert means.pop() == pytest.approx({'x': (1.0 + 3.0 + 6.0) / 3, 'episode/r': 10.0})
    assert means.pop() == {}  # since the last call


class FakeLearner(contract.Learner):
    """A learner whose step only reports a scalar (the contract's other defaults)."""

    def step(self, batch):
        return {'loss': tf.reduce_sum(batch.sequence.steps.reward)}


def fake_batch(first, discrete, continuous) -> Batch:
    """A time-major batch `[L, B]` whose actions are `discrete` and `continuous` `[L, B, 2]`."""
    L, B = first.shape
    zeros = tf.zeros([L, B])
    action = (tf.constant(discrete, tf.int32), tf.constant(continuous, tf.float32))
    steps = Step(observation=zeros, action=action, reward=zeros, discount=zeros,
                 first=tf.constant(first), prev_action=action, prev_reward=zeros,
                 behaviour_params=action, behaviour_log_prob=zeros, behaviour_baseline=zeros,
                 task=tf.zeros([L, B], tf.int32))
    return Batch(Sequence(steps, ()), tf.zeros([B], tf.bool))


@pytest.mark.parametrize('reader', ['tf.data', 'python'])
def test_learn_adds_the_batch_actions_of_valid_steps(reader):
    # Row 0: a placeholder step at t=1 (t=2 starts an episode); row 1: all real.
    first = np.array([[True, False], [False, False], [True, False], [False, False]])
    discrete = np.array([[10, 20], [11, 21], [12, 22], [13, 23]])
    continuous = np.stack([discrete, -discrete], -1).astype(np.float32)
    batch = fake_batch(first, discrete, continuous)
    batches = (iter(tf.data.Dataset.from_tensors(batch).repeat()) if reader == 'tf.data'
               else iter([batch]))
    result = data.make_learn(FakeLearner(), ['0', 'aim'])(batches)
    assert sorted(result) == ['action/0', 'action/aim', 'loss']
    # The last step only bootstraps; row 0's step 1 is the placeholder.
    expected = [10, 20, 21, 12, 22]
    assert sorted(result['action/0'].numpy().tolist()) == sorted(expected)
    aim = sorted(expected + [-a for a in expected])
    assert sorted(result['action/aim'].numpy().tolist()) == aim
    assert list(data.make_learn(FakeLearner())(iter([batch]))) == ['loss']  # names: opt-in


def read_events(logdir):
    """{tag: [(step, value)]} of scalars and {tag: [histogram [k, 3] arrays]}."""
    scalars, histograms = {}, {}
    for path in glob.glob(f'{logdir}/events.out.tfevents.*'):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == 'hparams':
                    continue  # the run's settings (`metrics.run_hparams`), not a curve
                array = tf.make_ndarray(value.tensor)
                if value.metadata.plugin_data.plugin_name == 'histograms':
                    histograms.setdefault(value.tag, []).append(array)
                else:
                    scalars.setdefault(value.tag, []).append((event.step, float(array)))
    return scalars, histograms


def test_a_short_run_writes_action_histograms_variable_norm_and_env_info(tmp_path):
    """Also: curves against env steps, progress.csv, evaluation every 1000 env steps and
    the best policy kept."""
    config = configs.from_flat(CLEARConfig, dict(
        lstm_size=8, hidden_sizes=(16,), batch_size=8, unroll_length=5, min_replay_size=8,
        queue_size=16))
    logdir = tmp_path / 'run'
    summary = inprocess.train(RunOptions(
        env=INFO_ENV, num_envs=4, num_steps=3000, seed=1, logdir=str(logdir), eval_episodes=1,
        log_interval_s=0.2, summary_interval_s=0.2, eval_every_steps=1000, export=False),
        config)
    assert summary['learner_steps'] > 0 and summary['saved_model'] is None  # --noexport
    assert not (logdir / 'saved_model').exists()
    scalars, histograms = read_events(logdir)

    # Training returns against env steps (not learner steps): increasing, within the run.
    curve = [step for step, _ in scalars['train/episode_return']]
    assert curve == sorted(curve) and 0 < curve[-1] <= summary['env_steps']
    assert curve[-1] > summary['learner_steps']
    # progress.csv: a row per log interval, then the last; returns and losses in it.
    rows = run_files.read_progress(str(logdir / metrics.PROGRESS_CSV))
    assert len(rows) >= 3
    assert [r['env_steps'] for r in rows] == sorted(r['env_steps'] for r in rows)
    assert rows[-1]['env_steps'] == summary['env_steps']
    assert rows[-1]['learner_steps'] == summary['learner_steps']
    assert 'loss/total_loss' in rows[-1] and rows[-1]['episodes'] > 20
    assert rows[-1]['return_mean'] == pytest.approx(summary['train_return_last20'], abs=1e-6)
    # Evaluations at 1000 and 2000 env steps and at the end; the best one exported.
    with open(logdir / 'eval.csv') as f:
        evaluations = [line.split(',') for line in f.read().split()[1:]]
    points = [int(e[0]) for e in evaluations]
    assert points[-1] == summary['env_steps'] and len(points) >= 2, points
    assert all(p % 1000 == 0 for p in points[:-1]) and points == sorted(set(points)), points
    assert sorted(step for step, _ in scalars['eval/return']) == points
    best = max(float(e[1]) for e in evaluations)
    assert summary['best_eval_return'] == pytest.approx(best)
    assert summary['saved_model_best'] == str(logdir / 'saved_model_best')
    policy = load_policy(summary['saved_model_best'])
    assert policy.env_id == INFO_ENV
    assert policy.run_episode(gym.make(INFO_ENV), seed=0) > 0

    # (a) one histogram per action leaf, of the batch's valid actions: CartPole's 0s and 1s,
    # at most (sequence length - 1) x batch of them.
    assert set(histograms) == {'action/0'}
    for buckets in histograms['action/0']:
        counts = buckets[:, 2]
        assert 0 < counts.sum() <= 5 * 8
        assert buckets[counts > 0, 0].min() >= 0.0 and buckets[counts > 0, 1].max() <= 1.0
    # (b) the learner's variables' global norm, as the learner holds them.
    norms = [v for _, v in scalars['variables/global_norm']]
    assert all(np.isfinite(norms)) and min(norms) > 0
    assert len(set(norms)) > 1  # it moves as the learner learns
    # (c) the environments' numeric info, averaged between writes.
    assert {v for _, v in scalars['env_info/one']} == {1.0}
    assert all(abs(v) <= 2.4 for _, v in scalars['env_info/cart_position'])
    # The agent's scalars are still there, next to the new ones.
    assert 'loss/total_loss' in scalars and 'env_steps' in scalars


def test_progress_csv_adds_a_column_for_a_metric_that_appears_later(tmp_path):
    """A learner whose phase changes (CLEAR after critic pre-training) starts reporting
    other metrics: they get columns, earlier rows stay, and a reopened file continues."""
    progress = metrics.ProgressCSV(str(tmp_path))
    progress.write(100, 1, 1.0, [], 0, {'critic_pretrain/baseline_loss': 2.0})
    progress.write(200, 2, 2.0, [5.0], 1, {'critic_pretrain/baseline_loss': 1.0})
    progress.write(300, 3, 3.0, [7.0], 2, {'loss/total_loss': 0.5, 'grad_norm': 3.0})
    rows = run_files.read_progress(str(tmp_path / metrics.PROGRESS_CSV))
    assert [r['env_steps'] for r in rows] == [100, 200, 300]
    assert [r['critic_pretrain/baseline_loss'] for r in rows[:2]] == [2.0, 1.0]
    assert rows[2]['loss/total_loss'] == 0.5 and rows[2]['grad_norm'] == 3.0
    assert 'return_mean' not in rows[0] and rows[2]['return_mean'] == 7.0
    assert not list(tmp_path.glob('*.partial'))
    resumed = metrics.ProgressCSV(str(tmp_path))
    resumed.write(400, 4, 1.0, [9.0], 3, {'loss/total_loss': 0.25, 'grad_norm': 1.0})
    rows = run_files.read_progress(str(tmp_path / metrics.PROGRESS_CSV))
    assert [r.get('loss/total_loss') for r in rows] == [None, None, 0.5, 0.25]
    assert rows[3]['wall_time_s'] == 4.0  # 1.0 after the 3.0 the file had
