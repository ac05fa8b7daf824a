"""In-process training: an embedded Reverb server, one actor thread, the learner.

The roles talk only through Reverb (sequences into `queue`/`replay`, weights
through `variables`), exactly as they would across processes. A deterministic
run (`--deterministic`, `launch/runners/deterministic.py`) has no actor thread: the
learner's data stream makes the actor act, one round at a time, in the main
thread.

Ctrl-C (SIGINT), as ML-Agents does, ends the run with what was learned: the
learner stops after its current step, the actor and the server stop, and
`finish` checkpoints at the last learner step (a `--save_replay` run saves
its pair of learner and replay checkpoints before its server stops), exports
the policy (no evaluation, so this takes seconds) and writes `summary.json`
with `interrupted: true`; `launch/run.py` then exits with status 130. A
second Ctrl-C while saving, or one while a finished run evaluates, aborts
(KeyboardInterrupt): the checkpoints already written stay.

A run holds its logdir's lock (`launch/runs/lockfile.py`) from start to end, and
refuses, before building anything, a replay larger than the machine's memory
(`launch/building/memory.py`).
"""

import contextlib
import os
import signal
import threading
from typing import Any, Dict, Iterator, Optional

import reverb
from absl import logging

from reverb_agents.agents import registry
from reverb_agents.launch.runs import console, rundir
from reverb_agents.launch.learning import data, trackers
from reverb_agents.launch.runners import deterministic, isolation
from reverb_agents.launch.building import memory
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.learning.callbacks import RunEvents
from reverb_agents.launch.learning.learner_loop import LearnerRun
from reverb_agents.launch.runs.metrics import run_hparams
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.replay import tables as tables_lib


@contextlib.contextmanager
def interrupt_event() -> Iterator[threading.Event]:
    """An event the first SIGINT sets; the second raises KeyboardInterrupt as usual.

    A flag rather than the KeyboardInterrupt Python raises by default: that
    exception lands wherever the main thread happens to be (inside a trigger's
    checkpoint write or weight publication), while the flag stops the loop
    between learner steps. Outside the main thread (a caller's worker thread)
    signals cannot be handled, and the event is never set.
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return

    done = threading.Event()

    def handler(signum, frame):
        # No writing here: the main thread may be inside a write to stderr, and a second
        # write from the same thread raises "reentrant call" (`roles.stop_on_signals`).
        interrupted.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def report():
        while not done.is_set():
            if interrupted.wait(0.2):
                console.status('interrupted: stopping after this learner step to checkpoint '
                               'and export (Ctrl-C again to abort)')
                return

    previous = signal.signal(signal.SIGINT, handler)
    threading.Thread(target=report, name='interrupt', daemon=True).start()
    try:
        yield interrupted
    finally:
        done.set()
        signal.signal(signal.SIGINT, previous)


def _pair_replay(setup: setup_lib.RunSetup, client: reverb.Client, run: LearnerRun,
                 restored_from: Optional[str]) -> None:
    """With `--save_replay`: says what the server restored (from `restored_from`), and
    makes every learner checkpoint write the tables' first, as a pair
    (`launch/runs/checkpoint_pairs.py`)."""
    held = {table: size for table, size in tables_lib.table_sizes(client).items()
            if table in setup.plan.tables and size}
    if held:
        console.status(f'replay restored from {restored_from}: '
                       + ', '.join(f'{table} {size:,} items' for table, size in held.items()))

    def write_replay() -> Optional[str]:
        try:
            return client.checkpoint()
        except (RuntimeError, reverb.errors.ReverbError) as e:
            logging.warning("replay checkpoint failed: %s; this checkpoint is the learner's "
                            'alone (a resume starts with an empty replay)', e)
            return None

    run.checkpoints.write_replay = write_replay


def train(options: RunOptions, config: Any, events: Optional[RunEvents] = None
          ) -> Dict[str, Any]:
    """Trains `options.agent` with `config` in one process; returns the summary
    (also `<logdir>/summary.json`; `summary['interrupted']` after Ctrl-C). Raises
    `launch.runs.rundir.TrainingError` and `ValueError`s (bad input) with one-line
    messages, and KeyboardInterrupt for a second Ctrl-C.

    `options.deterministic`: no actor thread; the learner's data stream makes the
    actor act when the next batch needs it (`launch/runners/deterministic.py`). `events`: the
    Python API's callbacks (`launch/learning/callbacks.py`); `options.tracker`: an
    experiment tracker told of the run (`launch/learning/trackers.py`).
    """
    registry.get(options.agent)
    rundir.check_logdir(options.logdir)
    tracker = trackers.make(options.tracker, os.path.basename(os.path.normpath(options.logdir)),
                            options.tracking_uri)
    if tracker is None:
        return _locked_train(options, config, events)
    events = trackers.with_tracker(events, tracker, options)
    tracker.on_start(run_hparams(options, config))
    status = 'FAILED'
    try:
        summary = _locked_train(options, config, events)
        status = 'KILLED' if summary.get('interrupted') else 'FINISHED'
        trackers.report_end(tracker, summary, options.logdir)
        return summary
    finally:
        tracker.on_end(status)


def _locked_train(options: RunOptions, config: Any, events: Optional[RunEvents]
                  ) -> Dict[str, Any]:
    # One run per logdir: a second one is refused while this one lives (`launch/runs/lockfile.py`).
    with rundir.lock_logdir(options.logdir), deterministic.op_determinism(options.deterministic):
        return _train(options, config, events)


def _train(options: RunOptions, config: Any, events: Optional[RunEvents]) -> Dict[str, Any]:
    # Long: the one place an in-process run's parts start and stop, in order, under one try/finally.
    setup_lib.seed_process(options.seed)

    envs = setup_lib.make_envs(options, config, options.num_envs, options.seed)
    setup = setup_lib.make_setup(options, config, envs)
    memory.check_replay_memory(setup.layout, setup.plan)
    if options.deterministic:
        deterministic.check(setup)
    run = LearnerRun(setup, pair_replay=options.save_replay)
    if options.is_sequence and run.start_env_steps:  # a resumed sequence goes on where it was
        envs.close()
        envs = setup_lib.make_envs(options, config, options.num_envs, options.seed,
                                   run.start_env_steps)
    server_tables = setup_lib.make_server_tables(setup)
    # Once the learner is restored: what killed saves left is deleted first.
    replay_dirs = run.checkpoints.prepare_replay() if options.save_replay else False
    server = setup_lib.make_server(setup, checkpoint=replay_dirs, tables=server_tables)
    isolation.announce(server.port)  # first: what the network exposes
    console.status(setup_lib.network_table(run.learner))
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    if replay_dirs:
        _pair_replay(setup, client, run, replay_dirs[1])
    publisher = run.make_publisher(client)
    publisher.publish()  # after the restore: actors start from the checkpoint's weights

    stats = EpisodeStats()
    clock = deterministic.sample_clock(options.seed) if options.deterministic else None
    actor = setup_lib.make_actor(setup, client, envs, options.seed, stats, run.start_env_steps,
                                 replay_priority=clock and clock.new_item_priority)
    stop_event = threading.Event()
    actor_error = []

    def run_actor():
        try:
            # The learner ends the run once the actor's steps reach the budget. A learner
            # of fresh sequences (a queue) would wait out the data timeout
            # (`data.DATA_TIMEOUT_MS`) for the rest of its last batch if the actor
            # stopped there, so that actor acts on until the learner has the data (see
            # `Actor.run`). A rate-limited one (SAC) holds its actor back, never the
            # other way round: its budget stays exact.
            if setup.plan.samples_per_insert:
                actor.run(stop_event.is_set, max_env_steps=options.num_steps)
            else:
                actor.run(stop_event.is_set, soft_budget=options.num_steps)
        except Exception as e:  # surfaced in the main thread
            if not stop_event.is_set():  # after a stop, errors come from the server going away
                logging.exception('the actor failed')
                actor_error.append(e)
                stop_event.set()

    with interrupt_event() as interrupted:
        def should_stop() -> bool:
            return stop_event.is_set() or interrupted.is_set()

        seeded_reads, thread = None, None
        if options.deterministic:  # the learner's data stream makes the actor act
            seeded_reads = deterministic.seeded_reads(
                setup, actor, stats, {table.name: table for table in server_tables}, clock,
                should_stop)
        else:
            thread = threading.Thread(target=run_actor, name='actor', daemon=True)
            thread.start()

        def open_batches():
            return data.open_batches(address, setup.signature, setup.plan, client,
                                     seeded_reads=seeded_reads)

        learned = False
        try:
            run.run(open_batches, publisher.publish, lambda: stats.env_steps, stats,
                    should_stop, events=events)
            learned = True
        finally:
            # The actor may be blocked on a full queue, and the learner's prefetch on
            # an empty one; stopping the server releases both (in-flight work fails,
            # which does not matter any more), so the process never hangs on the way out.
            # The actor sees the stop within a flush timeout and one step: waited for
            # first, so that no Reverb call of its own outlives the server (a sample
            # would then block until the 30 s join below gives up; seen under load).
            stop_event.set()
            if thread is not None:
                thread.join(timeout=10)
            try:
                if replay_dirs and learned and not actor_error:
                    run.save(quiet=True)  # the last pair, while the server has its tables
            finally:
                run.checkpoints.write_replay = None
                server.stop()
                if thread is not None:
                    thread.join(timeout=30)
                run.close_data()
    if actor_error:
        raise actor_error[0]
    # Outside the handler: Ctrl-C while evaluating or saving aborts (the checkpoint
    # `finish` writes first stays).
    summary = run.finish(stats, interrupted=interrupted.is_set())
    envs.close()
    return summary
