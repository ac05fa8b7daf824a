"""CLEAR learns from pixels: MinAtar Breakout's uint8 images, within a bounded budget."""

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch import inprocess
from reverb_agents.launch.options import RunOptions

# The network and optimiser of launch/presets/clear_minatarbreakout.flags, with CLEAR's
# 50-50 batches (a quarter of its updates per frame: 4x the frames per second) and the
# minimal action set, for 250k frames; value targets in the reward's units, as the preset
# pins (it was measured before PopArt).
CONFIG = dict(batch_size=32, unroll_length=20, replay_fraction=0.5, replay_size=20000,
              lstm_size=0, learning_rate=0.0006, entropy_cost=0.01,
              value_normalization='none')


def test_clear_learns_minatar_breakout_from_uint8_images(tmp_path):
    config = configs.from_flat(CLEARConfig, CONFIG)
    options = RunOptions(agent='clear', env='MinAtar/Breakout-v1', num_envs=64,
                         num_steps=250_000, eval_episodes=5, seed=0, logdir=str(tmp_path),
                         log_interval_s=1000.0)
    summary = inprocess.train(options, config)
    # A uniformly random policy scores about 0.5 (one brick, now and then).
    assert summary['eval_return_mean'] >= 2.0, summary
