"""The presets of MinAtar, Atari and MuJoCo train for a few hundred env steps, as every
other preset does in test_presets.py (a file of its own so that the two run in parallel)."""

import pytest

from tests.launch.test_presets import run_a_few_hundred_steps, trained_presets


def test_there_are_suite_presets():
    assert 'clear_minatarbreakout.flags' in trained_presets(suite=True)
    assert 'sac_halfcheetah.flags' in trained_presets(suite=True)
    assert 'clear_cartpole.flags' not in trained_presets(suite=True)


@pytest.mark.parametrize('name', trained_presets(suite=True))
def test_suite_preset_runs_a_few_hundred_steps(name, tmp_path):
    run_a_few_hundred_steps(name, tmp_path)
