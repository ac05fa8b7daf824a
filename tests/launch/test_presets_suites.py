"""The presets of MinAtar, Atari and MuJoCo train for a few hundred env steps, as every
other preset does in test_presets.py (a file of its own so that the two run in parallel)."""

import pytest

from tests.launch.test_presets import (
    preset_env_ids, preset_lines, run_a_few_hundred_steps, trained_presets)


def test_there_are_suite_presets():
    assert 'clear_minatarbreakout.flags' in trained_presets(suite=True)
    assert 'clear_alepong.flags' not in _one_per_wiring(trained_presets(suite=True))
    assert 'sac_halfcheetah.flags' in trained_presets(suite=True)
    assert 'clear_cartpole.flags' not in trained_presets(suite=True)


# What the short run sets itself (or what changes no wiring): presets differing only there
# train the same configuration.
SET_BY_THE_RUN = ('--env=', '--num_steps=', '--eval_every_steps=', '--eval_episodes=', '--seed=')


def _one_per_wiring(names):
    """The presets but those equal to an earlier one except for the game of the same
    suite (Breakout / Space Invaders, Pong / Breakout, HalfCheetah / Hopper): the same
    wiring on spaces of the same kinds (test_presets.py still resolves their flags)."""
    from reverb_agents.launch.environments import suites
    kept, seen = [], set()
    for name in names:
        kinds = tuple(suites.suite_of(env) for env in preset_env_ids(name))
        # An Atari run's --env_kwargs is the short run's own (`run_a_few_hundred_steps`),
        # in place of the preset's (sticky actions or not: one ALE option's value).
        set_by_the_run = SET_BY_THE_RUN + (('--env_kwargs=',) if suites.ATARI in kinds else ())
        flags = tuple(line for line in preset_lines(name) if not line.startswith(set_by_the_run))
        key = (flags, kinds)
        if key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


@pytest.mark.parametrize('name', _one_per_wiring(trained_presets(suite=True)))
def test_suite_preset_runs_a_few_hundred_steps(name, tmp_path):
    run_a_few_hundred_steps(name, tmp_path)
