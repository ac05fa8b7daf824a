"""Deterministic in-process runs (`--deterministic`): the same seed, the same run.

A normal in-process run overlaps an actor thread with the learner, and what
each sees depends on thread timing: which weights the actor has fetched when,
how many sequences wait in `queue` when the learner's `tf.data` stream
prefetches, which items Reverb's unseeded `Uniform` selector draws. Here:

- **One thread, one schedule.** The learner's data stream drives the actor
  (`replay.seeded.SeededBatches`): when the tables cannot give the next batch,
  the actor acts one round (every environment to its next written sequence,
  then a weight fetch), and again, until they can; then the learner takes its
  step, publishes every `publish_period` steps, and asks for the next batch.
  The data plan alone fixes what is read when; acting and learning never
  overlap.
- **Seeded sampling.** `replay` samples uniformly in an order a seeded clock
  fixes (`replay.seeded.SampleClock`); `queue` is FIFO; a `ReplaySchedule`'s
  Poisson counts come from a seeded generator.
- **TensorFlow op determinism** (`tf.config.experimental.enable_op_determinism`)
  and the seeds the run always sets (TensorFlow's and numpy's global seeds,
  the environments', the actor's and the evaluations' generators).
- **Cadences in learner steps**: `progress.csv` rows and checkpoints
  (`RunOptions.progress_row_steps`, `checkpoint_steps`); the rows leave out
  `wall_time_s`.

What cannot be made deterministic is refused with one line (`check`):
prioritized replay and reservoir eviction (Reverb draws both from its own
generator) and resuming (the actor's environments and generators are not in
the checkpoint).
"""

import contextlib
import os
from typing import Callable, Iterator, Mapping

import numpy as np
import reverb
import tensorflow as tf
from tensorflow.python.framework import config as tf_config

from reverb_agents.launch.learning import data
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.acting.actor import Actor, EpisodeStats
from reverb_agents.launch.building.setup import RunSetup
from reverb_agents.replay import seeded

_DONE = object()  # what the actor's rounds give once they have ended


def check(setup: RunSetup) -> None:
    """Raises (one line) for what a deterministic run cannot reproduce; before anything
    of the run is written."""
    plan, logdir = setup.plan, setup.options.logdir
    if plan.priority_exponent is not None:
        raise ValueError("--deterministic samples replay uniformly in a seeded order; "
                         "prioritized replay (--replay_sampler=prioritized) draws from "
                         "Reverb's unseeded generator: leave one of them out")
    if plan.replay_eviction != 'fifo':
        raise ValueError(f'--deterministic evicts replay FIFO; --replay_eviction='
                         f"{plan.replay_eviction} draws from Reverb's unseeded generator")
    checkpoints = os.path.join(logdir, rundir.CHECKPOINTS)
    if os.path.isdir(checkpoints) and os.listdir(checkpoints):
        raise rundir.TrainingError(
            f'--deterministic runs are reproducible from their start and do not resume '
            f'(the actor\'s environments and generators are not in the checkpoint): '
            f'{logdir} holds checkpoints; leave --deterministic out to resume it')


@contextlib.contextmanager
def op_determinism(enabled: bool) -> Iterator[None]:
    """TensorFlow's op determinism while the block runs (when `enabled`)."""
    if not enabled or tf_config.is_op_determinism_enabled():
        yield
        return
    tf.config.experimental.enable_op_determinism()
    try:
        yield
    finally:
        # TensorFlow has no public switch back; a process that trains again (a test
        # run, the Python API) gets its default kernels back.
        tf_config.disable_op_determinism()


def sample_clock(seed: int) -> seeded.SampleClock:
    """The run's `replay` clock (its own stream of `seed`)."""
    return seeded.SampleClock(np.random.SeedSequence([seed, 1]))


def seeded_reads(setup: RunSetup, actor: Actor, stats: EpisodeStats,
                 server_tables: Mapping[str, reverb.Table], clock: seeded.SampleClock,
                 stop: Callable[[], bool]) -> data.SeededReads:
    """How the learner reads its batches: `actor` acts one round at a time whenever the
    tables cannot give the next batch, until the env-step budget or `stop()`."""
    options = setup.options
    rounds = actor.rounds(stop)
    written = [server_tables[table] for table in setup.plan.tables]
    items = setup.layout.items(options.num_envs)  # per table and round

    def act() -> bool:
        if stats.env_steps >= options.num_steps or stop():
            return False
        for table in written:
            # Nothing else runs: a table that cannot take the round now never will.
            if not table.can_insert(items):
                # The queue is sized for the schedule (setup.sized_for_run): what can
                # stop it here is replay's samples-per-insert limiter.
                raise rundir.TrainingError(
                    f'--deterministic: {table.name} cannot take the actor\'s next {items} '
                    f'items and the learner cannot take a batch, so the schedule would wait '
                    f'forever (its samples-per-insert limit, set by SAC\'s --updates_per_step, '
                    f'holds the insert); run without --deterministic')
        return next(rounds, _DONE) is not _DONE

    return data.SeededReads(server_tables, clock, act,
                            np.random.default_rng(np.random.SeedSequence([options.seed, 2])))

