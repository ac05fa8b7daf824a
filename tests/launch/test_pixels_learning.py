"""CLEAR learns from pixels: MinAtar Breakout's uint8 images, within a bounded budget,
with the torso computing in float32; with it computing in bfloat16 a short run trains
through the bfloat16 torso and still exports a float32 one. (That bfloat16 learns as
float32 does is a measurement, docs/benchmarks.md#pixels-minatar-and-atari; its
arithmetic is tests/networks/test_torsos.py's.)"""

import tensorflow as tf

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.networks import torsos

# The network and optimiser of launch/presets/clear_minatarbreakout.flags, with batches
# three-quarters replayed (half the preset's updates per frame: it reaches the target in
# about 50k frames, half the frames and three-quarters of the CPU time of 50-50 batches)
# and the minimal action set, for at most 250k frames; value targets in the reward's
# units, as the preset pins (it was measured before PopArt).
CONFIG = dict(batch_size=32, unroll_length=20, replay_fraction=0.75, replay_size=20000,
              lstm_size=0, learning_rate=0.0006, entropy_cost=0.01,
              value_normalization='none')


def graph_dtypes(saved_model: str) -> set:
    """Every dtype the exported `step` signature's graph names."""
    graph = tf.saved_model.load(saved_model).signatures['step'].graph.as_graph_def()
    functions = [graph.node] + [f.node_def for f in graph.library.function]
    return {tf.dtypes.as_dtype(value.type).name for nodes in functions for node in nodes
            for value in node.attr.values() if value.WhichOneof('value') == 'type'}


def test_clear_learns_minatar_breakout_from_uint8_images(tmp_path):
    config = configs.from_flat(CLEARConfig, CONFIG)
    options = RunOptions(agent='clear', env='MinAtar/Breakout-v1', num_envs=64,
                         num_steps=250_000, eval_episodes=5, seed=0, logdir=str(tmp_path),
                         log_interval_s=1000.0,
                         target_return=2.5)  # stops once a greedy check scores it too
    summary = inprocess.train(options, config)
    # A uniformly random policy scores about 0.5 (one brick, now and then).
    assert summary['eval_return_mean'] >= 2.0, summary
    dtypes = graph_dtypes(summary['saved_model'])
    assert 'float32' in dtypes and 'bfloat16' not in dtypes, dtypes


def test_a_bfloat16_torso_trains_and_exports_in_float32(tmp_path, monkeypatch):
    """A short run of the same network with `torso_precision='bfloat16'`: the torso is
    traced in bfloat16 (at least once), and the SavedModel holds no bfloat16."""
    # The run sets the process-wide precision; the test's own setting is undone after it.
    monkeypatch.setattr(torsos, '_PRECISION', ['float32'])
    traced = []
    precision = torsos.precision
    monkeypatch.setattr(torsos, 'precision', lambda: traced.append(precision()) or traced[-1])
    config = configs.from_flat(CLEARConfig, {**CONFIG, 'batch_size': 8, 'unroll_length': 5})
    options = RunOptions(agent='clear', env='MinAtar/Breakout-v1', num_envs=8,
                         num_steps=1000, eval_episodes=1, seed=0, logdir=str(tmp_path),
                         log_interval_s=1000.0, torso_precision='bfloat16')
    summary = inprocess.train(options, config)
    assert summary['learner_steps'] >= 1 and summary['eval_return_mean'] is not None
    assert 'bfloat16' in traced, traced
    dtypes = graph_dtypes(summary['saved_model'])
    assert 'float32' in dtypes and 'bfloat16' not in dtypes, dtypes
