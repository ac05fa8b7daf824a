"""replay/batches.py: how a batch divides between the tables, and the one check of
`replay_fraction` that configs and the data plan reach through it."""

import math

import pytest

from reverb_agents.replay.batches import split_batch


@pytest.mark.parametrize('batch_size, replay_fraction, expected', [
    (8, 0.0, (8, 0)),
    (8, 1.0, (0, 8)),
    (8, 0.5, (4, 4)),
    (8, 0.25, (6, 2)),
    (10, 0.3, (7, 3)),  # 0.3 * 10 = 3.0000000000000004
    (10, 0.7, (3, 7)),  # 0.7 * 10 = 7.000000000000001
    (6, 1 / 3, (4, 2)),
    (4, 0.1, (4, 0)),  # 0.4 rounds down
    (4, 0.2, (3, 1)),  # 0.8 rounds up
    (5, 0.5, (3, 2)),  # Python's round: 2.5 -> 2 (half to even)
    (7, 0.5, (3, 4)),  # 3.5 -> 4
    (1, 0.5, (1, 0)),  # 0.5 -> 0
    (0, 0.5, (0, 0)),
])
def test_split_batch(batch_size, replay_fraction, expected):
    num_fresh, num_replayed = split_batch(batch_size, replay_fraction)
    assert (num_fresh, num_replayed) == expected
    assert num_replayed == round(replay_fraction * batch_size)
    assert isinstance(num_fresh, int) and isinstance(num_replayed, int)


@pytest.mark.parametrize('batch_size, replay_fraction, expected', [
    (8, 0.9375, (1, 7)),  # round(7.5) = 8 would leave no fresh row
    (4, 0.875, (1, 3)),  # round(3.5) = 4
    (2, 0.99, (1, 1)),
    (1, 0.51, (1, 0)),  # one row: fresh unless everything is replayed
    (1, 1.0, (0, 1)),
    (16, 0.9375, (1, 15)),  # exact: no rounding to hold back
])
def test_a_fraction_below_one_keeps_a_fresh_row(batch_size, replay_fraction, expected):
    """Fresh rows pace a learner of mixed batches; only a fraction of 1 replays them all."""
    assert split_batch(batch_size, replay_fraction) == expected


def test_clear_refuses_a_fraction_of_one():
    from reverb_agents.agents.clear.config import CLEARConfig
    with pytest.raises(ValueError, match='^replay_fraction must be below 1'):
        CLEARConfig(replay_fraction=1.0)


BAD_FRACTIONS = [-0.1, -1e-9, 1.0 + 1e-9, 1.5, 2, math.nan, math.inf, -math.inf]


@pytest.mark.parametrize('replay_fraction', BAD_FRACTIONS)
def test_split_batch_rejects_fraction_outside_unit_interval(replay_fraction):
    with pytest.raises(ValueError, match=r'^replay_fraction must be in \[0, 1\], got'):
        split_batch(8, replay_fraction)


@pytest.mark.parametrize('replay_fraction', [1.5, math.nan])
def test_the_config_and_the_data_plan_refuse_a_bad_fraction_through_split_batch(
        replay_fraction):
    from reverb_agents.agents import contract
    from reverb_agents.agents.clear.config import CLEARConfig
    message = r'^replay_fraction must be in \[0, 1\], got'
    with pytest.raises(ValueError, match=message):
        CLEARConfig(replay_fraction=replay_fraction)
    with pytest.raises(ValueError, match=message):
        contract.DataPlan(sequence_length=3, sequence_period=2, learned_steps=2,
                          batch_sequences=4, replay_fraction=replay_fraction, replay_size=8,
                          queue_size=8, min_replay_size=1)


def test_agent_configs_load_no_reverb(fresh_python):
    """Agent configs size their batches without the replay server's library: a fresh
    process that imports every agent's config (and builds one) has no `reverb` loaded."""
    code = ('import sys\n'
            'from reverb_agents.agents.acer.config import ACERConfig\n'
            'from reverb_agents.agents.clear.config import CLEARConfig\n'
            'from reverb_agents.agents.sac.config import SACConfig\n'
            'CLEARConfig(replay_fraction=0.5), ACERConfig(), SACConfig(online_fraction=0.5)\n'
            'print(sorted(m for m in sys.modules if m.split(".")[0] == "reverb"))\n')
    assert fresh_python(code)[-1] == '[]'
