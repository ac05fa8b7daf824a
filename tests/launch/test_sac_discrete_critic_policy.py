"""SAC with ALF's discrete policy (`discrete_policy='critic'`: softmax(min Q / alpha)
of the critics, no actor network) end to end: CartPole within a bounded budget,
actors acting through the TF core (no numpy mirror of the critics' policy), and
the exported SavedModel, which holds the critics and the temperature, acting
like the library's policy without the library."""

import os

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs.options import RunOptions
from tests.conftest import SAC_CRITIC_POLICY, SAC_FEED_FORWARD

# Small enough for about 40 s on 2 CPU cores (20-25 s of training); CartPole's
# random policy earns about 22. The full run is launch/presets/sac_cartpole_critic_policy.flags.
STEPS = 6000
NUM_ENVS = 8
CONFIG = SACConfig(**SAC_CRITIC_POLICY, critic_hidden_sizes=(64, 64), batch_size=128,
                   updates_per_step=0.5, target_update_tau=0.05, **SAC_FEED_FORWARD)


@pytest.fixture(scope='module')
def cartpole(tmp_path_factory):
    logdir = tmp_path_factory.mktemp('sac_critic_policy')
    options = RunOptions(agent='sac', env='CartPole-v1', num_envs=NUM_ENVS, num_steps=STEPS,
                         eval_episodes=10, seed=0, logdir=str(logdir), log_interval_s=1000.0)
    return inprocess.train(options, CONFIG), str(logdir)


def test_cartpole_learns_far_above_random_within_budget(cartpole):
    summary, _ = cartpole
    assert summary['env_steps'] <= STEPS + NUM_ENVS
    assert summary['config']['discrete_policy'] == 'critic'
    # Seeds 0-3 reached 184-315 (seed 0: 204-315 over four runs).
    assert summary['eval_return_mean'] >= 120.0, summary


def test_exported_critic_policy_acts_like_the_library_without_it(cartpole, tmp_path,
                                                                 compare_exported):
    summary, logdir = cartpole
    expected, standalone = compare_exported(logdir, summary['saved_model'], tmp_path)
    np.testing.assert_allclose(standalone, expected, rtol=1e-4)
    assert np.mean(expected) >= 60.0  # the trained policy (an untrained greedy one: ~10)
    # The policy is the critics': their MLPs and the temperature are in the SavedModel
    # (no actor head, no target critics).
    names = '\n'.join(name for name, _ in tf.train.list_variables(
        os.path.join(summary['saved_model'], 'variables', 'variables')))
    assert '_policy_head/critics/_mlps/' in names and '_policy_head/log_alpha/' in names, names
    assert 'target' not in names and '_policy_head/w/' not in names, names
