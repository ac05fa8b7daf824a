"""The defaults remember: CLEAR and SAC with no preset and no flag on the memory task of
the untuned suite (recall a cue after 8 blank steps; chance 0.25, best 1), whose
feed-forward defaults scored at chance (docs/benchmarks.md#untuned-defaults)."""

import gymnasium as gym
import numpy as np

from reverb_agents import train


def test_clear_defaults_remember_a_cue(tmp_path):
    """The suite's budget for the task, 200k, stopping once a greedy check scores 0.95
    (about 17k env steps); `deterministic`, so the result is the seed's (with threads,
    to the budget: 1.0 on seeds 0, 1 and 2)."""
    import benchmarks.untuned_envs  # noqa: F401 -- registers CueMemory-v0
    result = train('clear', 'CueMemory-v0', 200_000, preset=False, deterministic=True, seed=0,
                   target_return=0.95, logdir=str(tmp_path / 'run'), export=False,
                   log_interval_s=1000.0)
    assert result.summary['eval_return_mean'] >= 0.9, result.summary


def test_sac_defaults_remember_a_cue_and_the_export_carries_the_memory(tmp_path):
    """SAC's recurrent actor (its default) with 64 x 64 networks for the suite's time,
    the suite's 10k budget, stopping once a greedy check scores 0.95 (at about 1.5k env
    steps: 1,520 on seed 0, 1,760 on seed 1, deterministic). The exported policy keeps
    the LSTM's state between steps: without it the query step would be at chance."""
    from reverb_agents.launch.policies.load import load_policy
    import benchmarks.untuned_envs  # noqa: F401 -- registers CueMemory-v0
    result = train('sac', 'CueMemory-v0', 10_000, preset=False, deterministic=True, seed=0,
                   hidden_sizes=(64, 64), critic_hidden_sizes=(64, 64), target_return=0.95,
                   logdir=str(tmp_path / 'run'), log_interval_s=1000.0)
    assert result.summary['config']['lstm_size'] > 0  # the default, not a flag
    assert result.summary['eval_return_mean'] >= 0.9, result.summary
    policy = load_policy(result.summary['saved_model'])
    env = gym.make('CueMemory-v0')
    returns = [policy.run_episode(env, seed=seed) for seed in range(20)]
    assert np.mean(returns) >= 0.9, returns
