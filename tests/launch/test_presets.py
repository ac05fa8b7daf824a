"""Every preset in launch/presets/ parses into a valid run: flags that exist,
belong to the preset's agent, and values the configs accept."""

import os

import pytest
from absl import flags

from agents import registry

PRESETS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'launch', 'presets')
# launch/benchmark.py's own flags (its presets are otherwise run flags).
BENCHMARK_ONLY = ('repeats', 'seconds', 'learner_steps')


def presets():
    return sorted(name for name in os.listdir(PRESETS) if name.endswith('.flags'))


def test_there_are_presets():
    assert 'clear_cartpole.flags' in presets() and 'sac_pendulum.flags' in presets()


@pytest.mark.parametrize('name', presets())
def test_preset_resolves(name, tmp_path):
    from launch import run  # defines run.py's flags on absl's FLAGS
    with open(os.path.join(PRESETS, name)) as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith('#')]
    assert all(line.startswith('--') for line in lines), lines
    assert not any(line.startswith('--logdir') for line in lines), 'presets leave --logdir'
    kept = [line for line in lines if line[2:].split('=')[0] not in BENCHMARK_ONLY]
    flagfile = tmp_path / name
    flagfile.write_text('\n'.join(kept) + '\n')
    flags.FLAGS.unparse_flags()
    try:
        flags.FLAGS(['run.py', f'--flagfile={flagfile}'])
        options, config = run.resolve()
    finally:
        flags.FLAGS.unparse_flags()
    assert isinstance(config, registry.get(options.agent).config_class)
