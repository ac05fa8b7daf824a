"""launch/building/setup.py: what a run's data plan must have before a run starts."""

import dataclasses

import pytest

from reverb_agents.agents import configs, contract
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.replay.mixing import MixedBatches, ReplaySchedule

PLAN = contract.DataPlan(sequence_length=3, sequence_period=2, learned_steps=2,
                         batch_sequences=4, replay_fraction=0.5, replay_size=8, queue_size=8,
                         min_replay_size=1)


def test_a_plan_that_replays_every_row_needs_a_pace_of_its_own():
    """Fresh rows pace mixed batches; a plan with none needs Reverb's ratio (SAC's)."""
    unpaced = dataclasses.replace(PLAN, replay_fraction=1.0)
    for plan in (unpaced, dataclasses.replace(PLAN, mixing=MixedBatches(1.0))):
        with pytest.raises(ValueError, match='replays every row of a batch'):
            setup_lib.paced(plan)
    schedule = ReplaySchedule(2, poisson=False, start_size=1)
    for plan in (PLAN, dataclasses.replace(unpaced, samples_per_insert=2.0),
                 dataclasses.replace(PLAN, replay_fraction=0.0, mixing=schedule)):
        assert setup_lib.paced(plan) is plan


def test_a_small_batch_at_the_default_fraction_keeps_the_actors_to_the_learner(tmp_path):
    """0.9375 of a batch of 8 rounds to all 8; the batch keeps one fresh sequence instead,
    so the learner takes one step per fresh sequence and the actor stops near its budget
    (with none, the actor ran 5,645 steps of 2,000 past a learner of one step)."""
    config = configs.from_flat(CLEARConfig, dict(
        lstm_size=8, hidden_sizes=(16,), batch_size=8, unroll_length=5, min_replay_size=8))
    assert config.replay_fraction == 0.9375
    summary = inprocess.train(RunOptions(env='CartPole-v1', num_envs=4, num_steps=2000,
                                         logdir=str(tmp_path), eval_episodes=1, export=False),
                              config)
    # One fresh sequence of 5 steps a learner step: about 400, less the learner's lag.
    assert summary['learner_steps'] >= 200
    assert summary['env_steps'] <= 2500
