"""The roles of a multi-process run, each an OS process of its own.

    python launch/run.py --role=replay  --replay_port=P            [agent/env/config flags]
    python launch/run.py --role=learner --replay_address=HOST:P    [same flags]
    python launch/run.py --role=actor   --replay_address=HOST:P --actor_id=K  [same flags]

Every role takes the same agent, environment and config flags and derives the
same tables, signatures and networks from them (`training.make_setup`); they
share nothing but the Reverb address. `launch/launcher.py` starts them all on
one machine; any scheduler can place them on several.

Decisions this module adds to DESIGN.md:
- **Env steps across processes** are counted by the learner from the replay
  server: items inserted into the agent's first table since the learner
  started, times the env steps each item brings (`RunSetup.env_steps_per_item`;
  placeholder steps at episode ends count, unlike in-process runs). Actors log
  their own episode returns; the learner's summary has no training return.
- **A lost server.** Reverb clients wait for a server that went away (its
  datasets retry), which would hang a role; a `ServerWatchdog` ends the
  process with one error line once the server has been away for
  `--reconnect_timeout_s`. An actor rebuilds its writer after any outage
  (a writer does not survive a server restart); the learner's datasets
  resume by themselves and it republishes its weights.
- **Replay checkpoints** (Reverb's checkpointer) go to
  `<logdir>/replay_checkpoints` every `--replay_checkpoint_interval_s` and at
  shutdown; a replay server started on the same logdir loads the latest one.
- **SIGTERM / SIGINT** end a role cleanly: the learner checkpoints and exits 0
  without evaluating; the replay server checkpoints its tables first.
- **The learner process exits without closing its data stream** (`os._exit`
  in `launch/run.py`, after checkpoint, summary and SavedModel are written):
  closing it could wait out the data timeout on sample requests the server's
  rate limiter holds (see `training.LearnerRun.close_data`).
"""

import os
import signal
import sys
import threading
import time
from typing import Any, Dict, Optional

import reverb
import tensorflow as tf
from absl import logging

from launch import environments, training
from launch.actor import EpisodeStats
from replay import connection
from replay.packing import Packing
from replay.variables import VariablePublisher

REPLAY_CHECKPOINTS = 'replay_checkpoints'


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (the role then finishes cleanly)."""
    stop = threading.Event()

    def handler(signum, frame):
        logging.info('received signal %d; stopping', signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def exit_with_error(message: str) -> None:
    """One error line and exit status 1, from any thread (the main one may be
    blocked inside Reverb)."""
    print(f'error: {message}', file=sys.stderr, flush=True)
    os._exit(1)


def describe(error: Exception) -> str:
    """An exception in one line: its message's first line, or its type if it has none."""
    message = str(error)
    return message.splitlines()[0] if message else type(error).__name__


def _setup(options: training.RunOptions, config: Any, num_envs: int = 1):
    envs = training.make_envs(options, config, num_envs, options.seed)
    return envs, training.make_setup(options, config, envs)


def table_sizes(client: reverb.Client) -> Dict[str, int]:
    return {name: info.current_size for name, info in client.server_info(timeout=10).items()}


def run_replay(options: training.RunOptions, config: Any, port: int,
               checkpoint_interval_s: float, stop: threading.Event) -> None:
    """Serves the run's tables on `port` until `stop`, checkpointing them."""
    envs, setup = _setup(options, config)
    envs.close()
    checkpointer = reverb.checkpointers.DefaultCheckpointer(
        os.path.join(options.logdir, REPLAY_CHECKPOINTS))
    server = reverb.Server(training.make_server_tables(setup), port=port,
                           checkpointer=checkpointer)
    client = reverb.Client(f'localhost:{server.port}')
    logging.info('replay server on port %d; tables hold %s', server.port, table_sizes(client))

    def checkpoint():
        # Read first: the checkpoint then holds at least these replay items (read
        # after it, the sizes could count inserts the checkpoint missed).
        sizes = table_sizes(client)
        path = client.checkpoint()
        logging.info('replay checkpoint %s; tables held %s as it began', path, sizes)

    while not stop.wait(checkpoint_interval_s):
        checkpoint()
    checkpoint()
    server.stop()


def _check_signature(client: reverb.Client, setup: training.RunSetup, address: str) -> None:
    """One clear error when the server's tables were made for another agent or env."""
    served = client.server_info(timeout=10)
    table = setup.agent.write_tables(setup.config)[0]
    if table not in served:
        raise training.TrainingError(f'the Reverb server at {address} has no table {table!r}')
    ours = [(s.shape.as_list(), s.dtype) for s in Packing(setup.signature).packed_signature()]
    theirs = [(s.shape.as_list(), s.dtype) for s in tf.nest.flatten(served[table].signature)]
    if ours != theirs:
        raise training.TrainingError(
            f'the Reverb server at {address} serves items of another agent, environment or '
            f'config (its {table!r} signature differs); start every role with the same flags')


class InsertedEnvSteps:
    """Env steps since construction, from the server's insert count of one table.

    Read at most every `refresh_s` (a ServerInfo call costs ~1 ms). A server
    restored from an older checkpoint counts fewer inserts than last seen;
    only increases are added, so the count never goes backwards.
    """

    def __init__(self, client: reverb.Client, table: str, steps_per_item: int,
                 refresh_s: float = 0.1):
        self._client, self._table = client, table
        self._steps_per_item = steps_per_item
        self._refresh_s = refresh_s
        self._last = self._inserts()
        self._items = 0
        self._read_at = time.monotonic()

    def _inserts(self) -> int:
        info = self._client.server_info(timeout=10)[self._table]
        return int(info.rate_limiter_info.insert_stats.completed)

    def __call__(self) -> int:
        if time.monotonic() - self._read_at >= self._refresh_s:
            self._read_at = time.monotonic()
            try:
                now = self._inserts()
            except Exception:  # the server is away; the watchdog decides when to give up
                now = self._last
            self._items += max(0, now - self._last)
            self._last = now
        return self._items * self._steps_per_item


def run_learner(options: training.RunOptions, config: Any, address: str,
                connect_timeout_s: float, reconnect_timeout_s: float,
                stop: threading.Event) -> Optional[Dict[str, Any]]:
    """Learns from the server at `address` until the budget or `stop`.

    Returns the summary at the budget (after evaluation and export), None
    when stopped (after a checkpoint).
    """
    envs, setup = _setup(options, config)
    envs.close()
    client = connection.wait_for_server(address, connect_timeout_s)
    _check_signature(client, setup, address)
    run = training.LearnerRun(setup)
    publisher = VariablePublisher(client, run.published)
    publisher.publish()
    env_steps = InsertedEnvSteps(client, setup.agent.write_tables(config)[0],
                                 setup.env_steps_per_item)
    watchdog = connection.ServerWatchdog(address, reconnect_timeout_s, exit_with_error).start()

    def batches():
        return setup.agent.batches(address, setup.signature, config, client,
                                   training.DATA_TIMEOUT_MS)

    def on_server_error(error):
        logging.warning('lost the Reverb server at %s (%s); waiting up to %.0f s', address,
                        describe(error), reconnect_timeout_s)
        connection.wait_for_server(address, reconnect_timeout_s)

    def publish():
        # An insert into a server that went away raises (RuntimeError from the
        # writer's confirmation, or a gRPC status); wait for it and publish again.
        while True:
            try:
                return publisher.publish()
            except (RuntimeError, *training.SERVER_ERRORS) as e:
                on_server_error(e)

    stats = EpisodeStats()  # episodes happen in the actors' processes
    run.run(batches, publish, env_steps, stats, stop.is_set, on_server_error=on_server_error)
    if stop.is_set():
        run.save()
        logging.info('stopped at learner step %d, env step %d; checkpoint in %s',
                     run.learner_steps, run.total_env_steps(), run.manager.directory)
        return None
    watchdog.stop()
    summary = run.finish(stats)
    logging.info('eval return %.1f +- %.1f over %d episodes; %d env steps in %.1f s '
                 '(%.0f env steps/s)', summary['eval_return_mean'], summary['eval_return_std'],
                 summary['eval_episodes'], summary['env_steps'], summary['wall_time_s'],
                 summary['env_steps_per_s'])
    return summary


def run_actor(options: training.RunOptions, config: Any, address: str, actor_id: int,
              connect_timeout_s: float, reconnect_timeout_s: float,
              stop: threading.Event) -> None:
    """Acts with the latest published weights until `stop`.

    Actor K's environments are seeded `seed + 1000 * (K + 1)` onwards, so no two
    actors (nor the evaluation, at `seed + 10000`) share episodes.
    """
    seed = options.seed + 1000 * (actor_id + 1)
    envs = training.make_envs(options, config, options.num_envs, seed)
    setup = training.make_setup(options, config, envs)
    client = connection.wait_for_server(address, connect_timeout_s)
    _check_signature(client, setup, address)
    watchdog = connection.ServerWatchdog(address, reconnect_timeout_s, exit_with_error).start()
    stats = EpisodeStats()
    start = time.time()

    def log_progress():
        while not stop.wait(options.log_interval_s):
            mean_return, _, count = stats.recent(20)
            logging.info('actor %d: env steps %d (%.0f/s)  return (last 20) %.1f  episodes %d',
                         actor_id, stats.env_steps, stats.env_steps / (time.time() - start),
                         mean_return, stats.num_episodes)

    threading.Thread(target=log_progress, daemon=True).start()
    while not stop.is_set():
        outages = watchdog.outages
        actor = training.make_actor(setup, client, envs, seed, stats)
        try:
            actor.run(lambda: stop.is_set() or watchdog.outages != outages)
        except Exception as e:  # noqa: BLE001 - any failure of a lost server's writer
            # The watchdog polls every few seconds; an error from a server that
            # went away just now is told apart by asking the server directly.
            if stop.is_set() or (watchdog.outages == outages and connection.answers(client)):
                raise
            logging.warning('actor %d: writer failed while the server was away: %s', actor_id,
                            describe(e))
        if not stop.is_set():
            logging.warning('actor %d: the Reverb server at %s was away; reconnecting',
                            actor_id, address)
            client = connection.wait_for_server(address, reconnect_timeout_s)
    envs.close()
