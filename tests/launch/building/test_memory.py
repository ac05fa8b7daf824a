"""The replay's memory said up front (`launch/building/memory.py`): tables larger than the
available memory are one `error:` line naming the flag, over half of it a warning."""

import os
import re

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import configs, registry
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.launch.building import memory
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import trajectory
from reverb_agents.replay.layout import ItemLayout
from tests.conftest import SAC_FEED_FORWARD

GB = 10 ** 9


def unpacked_item_bytes(layout: ItemLayout) -> int:
    """An item's bytes from its unpacked `Sequence` of specs, field by field."""
    return sum(s.shape.num_elements() * s.dtype.size for s in tf.nest.flatten(layout.signature))


def atari_sac_layout() -> ItemLayout:
    """SAC's items for 84x84x4 uint8 frames and 6 discrete actions: 8 environments' length-2
    sequences per item."""
    frames = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    step = trajectory.step_spec(observation_spec(frames), (tf.TensorSpec([], tf.int32),),
                                (tf.TensorSpec([6], tf.float32),))
    return ItemLayout(step, tf.TensorSpec([0], tf.float32), sequence_length=2, period=1,
                      envs_per_item=8)


def test_a_million_frames_are_refused_on_a_24_gib_machine():
    layout = atari_sac_layout()
    plan = registry.get('sac').data_plan(SACConfig(**SAC_FEED_FORWARD))
    assert plan.replay_size == 1_000_000
    per_sequence = unpacked_item_bytes(layout) / 8
    assert memory.item_bytes(layout) == unpacked_item_bytes(layout)
    assert 2 * 84 * 84 * 4 < per_sequence < 2 * 84 * 84 * 4 * 1.01  # two frames, and a little
    available = int(21.9 * GB)  # what a 24 GiB machine has left
    with pytest.raises(rundir.TrainingError) as refused:
        memory.check_replay_memory(layout, plan, available=available)
    total = layout.items(plan.replay_size) * memory.item_bytes(layout)
    assert str(refused.value) == (
        f'replay would hold ~{total / GB:.1f} GB (1,000,000 sequences x '
        f'{per_sequence / 1000:.1f} kB) but 21.9 GB of memory is available; lower --replay_size'
        + memory.COMPRESSED_HINT)
    assert memory.MEMORY_LIMIT_ENV in memory.COMPRESSED_HINT
    # A tenth of it fits in less than half: no line at all.
    small = registry.get('sac').data_plan(configs.from_flat(SACConfig, {'replay_size': 100_000}))
    assert memory.check_replay_memory(layout, small, available=available) is None


def cartpole_setup(config, **options) -> setup_lib.RunSetup:
    options = RunOptions(agent='clear', env='CartPole-v1', num_envs=4, **options)
    envs = setup_lib.make_envs(options, config, options.num_envs, 0)
    try:
        return setup_lib.make_setup(options, config, envs)
    finally:
        envs.close()


def test_both_tables_count_and_the_larger_share_names_its_flag():
    config = configs.from_flat(CLEARConfig, {'replay_size': 5000, 'queue_size': 64})
    setup = cartpole_setup(config)
    tables = memory.table_bytes(setup.layout, setup.plan)
    item = unpacked_item_bytes(setup.layout)
    assert tables == {'queue': (64, 64 * item), 'replay': (5000, 5000 * item)}
    total = 5064 * item
    # Between half and all of it: a warning, and the run goes on.
    warning = memory.check_replay_memory(setup.layout, setup.plan, available=int(1.5 * total))
    assert 'more than half' in warning and warning.endswith('lower --replay_size if the '
                                                            'machine runs short')
    with pytest.raises(rundir.TrainingError, match=r'lower --replay_size \(sizes uncompressed'):
        memory.check_replay_memory(setup.layout, setup.plan, available=total - 1)
    assert memory.check_replay_memory(setup.layout, setup.plan, available=2 * total) is None
    # A queue as large as the replay: both flags, the larger first.
    config = configs.from_flat(CLEARConfig, {'replay_size': 5000, 'queue_size': 20_000})
    setup = cartpole_setup(config)
    with pytest.raises(rundir.TrainingError, match=r'lower --queue_size or --replay_size \('):
        memory.check_replay_memory(setup.layout, setup.plan, available=1000)


def test_a_deterministic_runs_queue_counts_as_sized_for_its_schedule():
    """`--deterministic` sizes the queue to at least min_replay_size + num_envs + batch
    (`setup.sized_for_run`): the estimate counts those sequences, not `--queue_size`."""
    config = configs.from_flat(CLEARConfig, {'replay_size': 5000, 'queue_size': 16,
                                             'min_replay_size': 1000})
    setup = cartpole_setup(config, deterministic=True)
    capacity = setup.plan.queue_size
    assert capacity >= 1000 + 4
    item = unpacked_item_bytes(setup.layout)
    tables = memory.table_bytes(setup.layout, setup.plan)
    assert tables['queue'] == (capacity, capacity * item)
    with pytest.raises(rundir.TrainingError):
        memory.check_replay_memory(setup.layout, setup.plan,
                                   available=(5000 + capacity) * item - 1)


def test_available_memory_is_measured_or_given(monkeypatch):
    monkeypatch.delenv(memory.MEMORY_LIMIT_ENV, raising=False)
    measured = memory.available_bytes()
    with open('/proc/meminfo') as f:
        meminfo = dict(line.split(':', 1) for line in f)
    # MemAvailable moves while other work runs: the measurement is at most it, near it.
    assert 0 < measured <= int(meminfo['MemAvailable'].split()[0]) * 1024 * 1.2
    monkeypatch.setenv(memory.MEMORY_LIMIT_ENV, '12345')
    assert memory.available_bytes() == 12345
    monkeypatch.setenv(memory.MEMORY_LIMIT_ENV, '2GB')
    with pytest.raises(ValueError, match=memory.MEMORY_LIMIT_ENV):
        memory.available_bytes()


def test_the_command_line_refuses_with_one_line_before_writing(run_cli, tmp_path):
    logdir = tmp_path / 'run'
    result = run_cli(['--agent=clear', '--env=CartPole-v1', '--num_envs=4', '--replay_size=5000',
                      '--num_steps=1000'], extra_env={memory.MEMORY_LIMIT_ENV: '100000'},
                     logdir=str(logdir), timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(result.errors) == 1 and 'Traceback' not in result.stderr, result.stderr[-2000:]
    assert re.fullmatch(r'error: replay would hold ~[\d.]+ MB \(5,064 sequences x [\d.]+ kB\) '
                        r'but 100\.0 kB of memory is available; lower --replay_size \(sizes '
                        r'uncompressed: .* lets a larger replay start\)',
                        result.errors[0]), result.errors[0]
    assert not os.path.exists(logdir)  # nothing written, not even the lock
