"""SAC end to end: Pendulum within a bounded budget with the update-to-data
ratio held by Reverb, a mixed discrete/continuous task, and the exported
actor acting like the library's policy without the library."""

import contextlib
import csv
import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, registry
from reverb_agents.agents.policy_average import PolicyAverage
from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.launch.evaluation.periodic import PeriodicEvaluation
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.launch.policies import export
from tests.conftest import (EXPORT_SEEDS, SAC_FEED_FORWARD, library_greedy_returns,
                            run_standalone)

# SAC's run defaults (8 envs, 10 evaluation episodes) with 64x64 networks, 3-step
# targets and one update of 256 transitions per two env steps (the transitions of one
# update of 128 per step in half the updates: a small network's update costs its
# graph's ops more than its arithmetic). sac_pendulum_5k_fast.flags is the 128x128
# preset. 7k env steps: its evaluations cross -200 between 5k and 6k, earlier or later
# with the threads' timing, so 7k leaves a margin (docs/benchmarks.md#the-test-suite).
# The default 256x256 / 256 is the preset sac_pendulum.flags. The target step is the
# presets' 0.005: with the default 0.05 this small SAC scored -351.5 at 7k
# (docs/benchmarks.md#sacs-defaults).
RUN_DEFAULTS = registry.get('sac').run_defaults
SMALL_SAC_SETTINGS = dict(hidden_sizes=(64, 64), critic_hidden_sizes=(64, 64), batch_size=256,
                          updates_per_step=0.5, n_step=3, target_update_tau=0.005,
                          **SAC_FEED_FORWARD)
SMALL_SAC = configs.from_flat(SACConfig, SMALL_SAC_SETTINGS)
PENDULUM_STEPS = 7000


@pytest.fixture(scope='module')
def pendulum(tmp_path_factory):
    logdir = tmp_path_factory.mktemp('sac_pendulum')
    options = RunOptions(**{**RUN_DEFAULTS, 'agent': 'sac', 'env': 'Pendulum-v1',
                            'num_steps': PENDULUM_STEPS, 'seed': 0, 'logdir': str(logdir),
                            'log_interval_s': 1000.0})
    return inprocess.train(options, SMALL_SAC), str(logdir)


def test_pendulum_learns_within_budget(pendulum):
    summary, _ = pendulum
    assert summary['eval_return_mean'] >= -200.0, summary
    assert summary['env_steps'] <= PENDULUM_STEPS + RUN_DEFAULTS['num_envs']
    assert summary['eval_episodes'] == 10


def test_reverb_holds_the_update_to_data_ratio(pendulum):
    """One update per env step after the warm-up, within 10% over the run."""
    summary, _ = pendulum
    expected = (summary['env_steps'] - SMALL_SAC.learning_starts) * SMALL_SAC.updates_per_step
    assert abs(summary['learner_steps'] - expected) <= 0.1 * expected, summary


def test_exported_actor_acts_like_the_library_without_it(pendulum, tmp_path, compare_exported):
    summary, logdir = pendulum
    expected, standalone = compare_exported(logdir, summary['saved_model'], tmp_path)
    np.testing.assert_allclose(standalone, expected, rtol=1e-4)
    assert np.mean(expected) >= -400  # the trained actor, not an untrained one
    # Only the actor is exported: no critic variables in the SavedModel.
    names = '\n'.join(name for name, _ in tf.train.list_variables(
        os.path.join(summary['saved_model'], 'variables', 'variables')))
    assert 'policy_head' in names and 'critic' not in names, names


def _saved_variables(saved_model):
    reader = tf.train.load_checkpoint(os.path.join(saved_model, 'variables', 'variables'))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != '_CHECKPOINTABLE_OBJECT_GRAPH'}


def test_the_actors_average_is_evaluated_beside_the_learned_weights_and_exported(
        tmp_path, run_script, monkeypatch):
    logdir = str(tmp_path / 'run')
    options = RunOptions(**{**RUN_DEFAULTS, 'agent': 'sac', 'env': 'Pendulum-v1',
                            'num_steps': 600, 'seed': 0, 'logdir': logdir, 'eval_episodes': 2,
                            'eval_every_steps': 300, 'log_interval_s': 1000.0})
    config = configs.from_flat(SACConfig, {**SMALL_SAC_SETTINGS, 'learning_starts': 200,
                                           'policy_average_tau': 0.05})
    # Whether the scheduled evaluation runs while the average is in the core.
    swapped, scheduled = [], []
    swap, evaluate_at = PolicyAverage.swapped_into, PeriodicEvaluation.evaluate_at

    @contextlib.contextmanager
    def noting_swap(self, sources):
        with swap(self, sources):
            swapped.append(True)
            try:
                yield
            finally:
                swapped.pop()

    def noting_evaluate_at(self, core, point):
        scheduled.append((point, bool(swapped)))
        evaluate_at(self, core, point)

    monkeypatch.setattr(PolicyAverage, 'swapped_into', noting_swap)
    monkeypatch.setattr(PeriodicEvaluation, 'evaluate_at', noting_evaluate_at)
    summary = inprocess.train(options, config)
    monkeypatch.undo()
    assert scheduled == [(300, True)]  # the average, as the final evaluation's
    with open(os.path.join(logdir, 'eval.csv')) as f:
        rows = list(csv.DictReader(f))
    assert [int(row['env_steps']) for row in rows] == [300, 600]
    assert float(rows[-1]['return_mean']) == summary['eval_return_mean']
    assert np.isfinite(summary['eval_return_learned_mean']), summary
    assert summary['eval_return_mean'] != summary['eval_return_learned_mean']
    learner, action_space, _, env_id = export.restore_learner(logdir)
    learned = library_greedy_returns(learner.core, action_space, env_id, EXPORT_SEEDS)
    with learner.final_policy():
        averaged = library_greedy_returns(learner.core, action_space, env_id, EXPORT_SEEDS)
    core, *_ = export.restore_core(logdir)  # the policy the run exported, kept
    assert library_greedy_returns(core, action_space, env_id, EXPORT_SEEDS) == averaged
    exported = run_standalone(summary['saved_model'], env_id, EXPORT_SEEDS, tmp_path)['returns']
    np.testing.assert_allclose(exported, averaged, rtol=1e-4)
    assert not np.allclose(exported, learned, rtol=1e-4)
    # The export tool exports the run's final policy too, from its checkpoint.
    result = run_script('export', [f'--logdir={logdir}', f'--output={tmp_path / "again"}'])
    assert result.returncode == 0, result.stderr[-3000:]
    again, saved = _saved_variables(str(tmp_path / 'again')), _saved_variables(
        summary['saved_model'])
    assert again.keys() == saved.keys() and len(saved) > 2, saved.keys()
    for name, value in saved.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)


# --- a mixed discrete / continuous task ------------------------------------------

class TargetReach(gym.Env):
    """Pick the cued one of two targets (discrete) and reach its position (continuous).

    One step per episode. Observation: the two target positions in [-0.8, 0.8]
    and a one-hot cue. Action: Tuple(Discrete(2), Box(-1, 1, (1,))). Reward:
    1 - |a - p_k| when k is the cued target, 0 otherwise. A uniformly random
    policy earns about 0.19; the best one earns 1.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Tuple((gym.spaces.Discrete(2),
                                     gym.spaces.Box(-1.0, 1.0, (1,), np.float32)))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._targets = self.np_random.uniform(-0.8, 0.8, 2).astype(np.float32)
        self._cue = int(self.np_random.integers(2))
        return self._observation(), {}

    def _observation(self):
        cue = np.eye(2, dtype=np.float32)[self._cue]
        return np.concatenate([self._targets, cue])

    def step(self, action):
        k, position = int(action[0]), float(np.asarray(action[1]).ravel()[0])
        reward = 1.0 - abs(position - self._targets[k]) if k == self._cue else 0.0
        return self._observation(), reward, True, False, {}


gym.register(id='TargetReach-v0', entry_point=TargetReach)


def random_policy_return(episodes=4000, seed=0):
    env, rng, total = TargetReach(), np.random.default_rng(seed), 0.0
    env.reset(seed=seed)
    for _ in range(episodes):
        env.reset()
        _, reward, _, _, _ = env.step((int(rng.integers(2)), rng.uniform(-1, 1, 1)))
        total += reward
    return total / episodes


def test_mixed_actions_learn_far_above_random(tmp_path):
    random_return = random_policy_return()
    assert 0.15 < random_return < 0.25
    # 500 env steps (the first 256 random): 0.877 / 0.876 / 0.852 (seeds 0-2); 1k's
    # 0.968 / 0.955 / 0.929, 2k's 0.978 / 0.983 (seeds 0 / 1).
    options = RunOptions(agent='sac', env='TargetReach-v0', num_envs=8, num_steps=500, seed=0,
                         logdir=str(tmp_path), eval_episodes=50, log_interval_s=1000.0)
    config = SACConfig(hidden_sizes=(64, 64), critic_hidden_sizes=(64, 64), batch_size=128,
                       **SAC_FEED_FORWARD)
    summary = inprocess.train(options, config)
    # A policy that learned only the discrete half (the cued target, no reach) scores
    # about random + 0.4 = 0.60: the threshold sits between it and the measured runs.
    assert summary['eval_return_mean'] >= 0.75, summary
    assert summary['saved_model']  # one output per action component (launch/policies/signatures.py)
