"""The roles of a multi-process run, each an OS process of its own.

    python launch/run.py --role=replay  --replay_port=P            [agent/env/config flags]
    python launch/run.py --role=learner --replay_address=HOST:P    [same flags]
    python launch/run.py --role=actor   --replay_address=HOST:P --actor_id=K  [same flags]

Every role takes the same agent, environment and config flags and derives the
same tables, item layout and networks from them (`launch.building.setup.make_setup`); they
share nothing but the Reverb address. `launch/runners/launcher.py` starts them all on
one machine; any scheduler can place them on several.

Decisions this module makes (docs/design.md, "Multi-process roles"):
- **Env steps and episodes across processes** are real environment steps,
  as in one process: each actor reports its own, with the returns and
  lengths of the episodes it finished, through the server's `env_steps`
  queue and the learner drains it (`replay.env_steps`) into its episode
  record: progress, `train/episode_return`, `progress.csv`, the summary's
  training return and `--target_return` cover every actor's episodes.
- **A lost server.** Reverb clients wait for a server that went away (its
  datasets retry), which would hang a role; a `ServerWatchdog` ends the
  process with one error line once the server has been away for
  `--reconnect_timeout_s`. An actor rebuilds its writer after any outage
  (a writer does not survive a server restart); the learner's datasets
  resume by themselves and it republishes its weights.
- **Replay checkpoints** (Reverb's checkpointer) go to
  `<logdir>/replay_checkpoints` every `--replay_checkpoint_interval_s` and at
  shutdown; a replay server started on the same logdir loads the latest one.
- **One run per logdir**: the replay role holds `<logdir>/.lock` while it
  serves (`launch/runs/lockfile.py`), so a second run's replay role on the same
  logdir is refused with one line; it also refuses tables larger than the
  machine's memory (`launch/building/memory.py`).
- **SIGTERM / SIGINT** end a role cleanly: the learner checkpoints and exits 0
  without evaluating; the replay server checkpoints its tables first.
- **The learner process exits without closing its data stream** (`os._exit`
  in `launch/run.py`, after checkpoint, summary and SavedModel are written):
  closing it could wait out the data timeout on sample requests the server's
  rate limiter holds (see `launch.learning.learner_loop.LearnerRun.close_data`).
"""

import os
import signal
import sys
import threading
import time
from typing import Any, Dict, Optional

import reverb
from absl import logging

from reverb_agents.launch.learning import data
from reverb_agents.launch.runners import isolation
from reverb_agents.launch.building import memory
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.learning.learner_loop import LearnerRun
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.launch.runs.rundir import describe
from reverb_agents.replay import connection
from reverb_agents.replay import tables as tables_lib
from reverb_agents.replay.env_steps import EnvStepsCounter, EnvStepsReporter


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (the role then finishes cleanly)."""
    stop = threading.Event()
    received = []

    def handler(signum, frame):
        # Nothing but the event here: the handler runs between two bytecodes of the main
        # thread, which may be inside a write to stderr, and writing to it again from the
        # same thread raises "reentrant call" (the role would die without its checkpoint).
        received.append(signum)
        stop.set()

    def report():  # another thread may write: it waits for the main thread's write
        stop.wait()
        if received:
            logging.info('received signal %d; stopping', received[0])

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    threading.Thread(target=report, name='signals', daemon=True).start()
    return stop


def exit_with_error(message: str) -> None:
    """One error line and exit status 1, from any thread (the main one may be
    blocked inside Reverb)."""
    print(f'error: {message}', file=sys.stderr, flush=True)
    os._exit(1)


def _setup(options: RunOptions, config: Any, num_envs: int = 1):
    envs = setup_lib.make_envs(options, config, num_envs, options.seed)
    return envs, setup_lib.make_setup(options, config, envs)


def run_replay(options: RunOptions, config: Any, port: int,
               checkpoint_interval_s: float, stop: threading.Event) -> None:
    """Serves the run's tables on `port` until `stop`, checkpointing them. It holds the
    logdir's lock for the run (the learner and actors share the logdir and take none)."""
    envs, setup = _setup(options, config)
    envs.close()
    memory.check_replay_memory(setup.layout, setup.plan)
    with rundir.lock_logdir(options.logdir, command='run.py --role=replay'):
        _serve(setup, port, checkpoint_interval_s, stop)


def _serve(setup: setup_lib.RunSetup, port: int, checkpoint_interval_s: float,
           stop: threading.Event) -> None:
    server = setup_lib.make_server(setup, port, checkpoint=True)
    isolation.announce(server.port)  # isolated with its launcher, or open to the network
    client = reverb.Client(f'localhost:{server.port}')
    logging.info('replay server on port %d; tables hold %s', server.port,
                 tables_lib.table_sizes(client))

    def checkpoint():
        # Read first: the checkpoint then holds at least these replay items (read
        # after it, the sizes could count inserts the checkpoint missed).
        sizes = tables_lib.table_sizes(client)
        path = client.checkpoint()
        logging.info('replay checkpoint %s; tables held %s as it began', path, sizes)

    while not stop.wait(checkpoint_interval_s):
        checkpoint()
    checkpoint()
    server.stop()


def _check_signature(client: reverb.Client, setup: setup_lib.RunSetup, address: str) -> None:
    """One clear error when the server's tables were made for another agent or env."""
    served = client.server_info(timeout=10)
    table = setup.plan.tables[0]
    if table not in served:
        raise rundir.TrainingError(f'the Reverb server at {address} has no table {table!r}')
    if not setup.layout.matches(served[table].signature):
        raise rundir.TrainingError(
            f'the Reverb server at {address} serves items of another agent, environment or '
            f'config (its {table!r} signature differs); start every role with the same flags')


def run_learner(options: RunOptions, config: Any, address: str,
                connect_timeout_s: float, reconnect_timeout_s: float,
                stop: threading.Event) -> Optional[Dict[str, Any]]:
    """Learns from the server at `address` until the budget or `stop`.

    Returns the summary at the budget (after evaluation and export), None
    when stopped (after a checkpoint).
    """
    setup_lib.seed_process(options.seed)  # the learner's networks start from the seed
    envs, setup = _setup(options, config)
    envs.close()
    client = connection.wait_for_server(address, connect_timeout_s)
    _check_signature(client, setup, address)
    run = LearnerRun(setup)
    logging.info('%s', setup_lib.network_table(run.learner))
    publisher = run.make_publisher(client)
    publisher.publish()
    stats = EpisodeStats()  # filled with the episodes the actors report
    env_steps = EnvStepsCounter(client, add_episode=stats.add_episode)
    watchdog = connection.ServerWatchdog(address, reconnect_timeout_s, exit_with_error).start()

    def open_batches():
        return data.open_batches(address, setup.signature, setup.plan, client)

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
            except (RuntimeError, *connection.SERVER_ERRORS) as e:
                on_server_error(e)

    run.run(open_batches, publish, env_steps, stats, stop.is_set, on_server_error=on_server_error)
    if stop.is_set():
        run.save()
        logging.info('stopped at learner step %d, env step %d; checkpoint in %s',
                     run.learner_steps, run.total_env_steps(), run.checkpoints.manager.directory)
        return None
    watchdog.stop()
    summary = run.finish(stats)
    logging.info('eval return %.1f +- %.1f over %d episodes; %d env steps in %.1f s '
                 '(%.0f env steps/s)', summary['eval_return_mean'], summary['eval_return_std'],
                 summary['eval_episodes'], summary['env_steps'], summary['wall_time_s'],
                 summary['env_steps_per_s'])
    return summary


def run_actor(options: RunOptions, config: Any, address: str, actor_id: int,
              connect_timeout_s: float, reconnect_timeout_s: float,
              stop: threading.Event) -> None:
    """Acts with the latest published weights until `stop`.

    Actor K's environments are seeded `seed + 1000 * (K + 1)` onwards, so no two
    actors (nor the evaluation, at `seed + 10000`) share episodes.
    """
    seed = options.seed + 1000 * (actor_id + 1)
    envs = setup_lib.make_envs(options, config, options.num_envs, seed)
    setup = setup_lib.make_setup(options, config, envs)
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
    reporter = EnvStepsReporter(reverb.Client(address), lambda: stats.env_steps,
                                episodes=stats.pop_new).start()
    while not stop.is_set():
        outages = watchdog.outages
        actor = setup_lib.make_actor(setup, client, envs, seed, stats, stats.env_steps)
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
    reporter.stop()
    envs.close()
