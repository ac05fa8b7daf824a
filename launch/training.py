"""In-process training: an embedded Reverb server, one actor thread, the learner.

The roles talk only through Reverb (sequences into `queue`/`replay`, weights
through `variables`), exactly as they would across processes.
"""

import dataclasses
import json
import math
import os
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import gymnasium as gym
import numpy as np
import reverb
import tensorflow as tf
from absl import logging

from launch import environments, evaluation, export, registry
from launch.actor import Actor, EpisodeStats
from networks.cores import CoreInputs
from networks.observations import observation_spec
from replay import tables as tables_lib
from replay import trajectory
from replay.variables import VariableFetcher, VariablePublisher
from replay.writer import SequenceWriter


RUN_CONFIG = 'run_config.json'  # agent, env and config of a run, written at its start
DATA_TIMEOUT_MS = 20_000  # a learner dataset ends after this long without data
# What a Reverb operation raises when its server went away (a restart, a crash).
SERVER_ERRORS = (tf.errors.UnavailableError, tf.errors.CancelledError,
                 reverb.errors.DeadlineExceededError)


class TrainingError(RuntimeError):
    """A run that cannot go on (NaN loss, corrupt checkpoint, ...)."""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    agent: str = 'clear'
    env: str = 'CartPole-v1'
    num_envs: int = 64  # environments per actor, stepped together
    num_steps: int = 300_000  # env-step budget
    seed: int = 0
    logdir: str = '/tmp/agents_run'
    eval_episodes: int = 20
    target_return: Optional[float] = None  # stop early when the last 20 episodes average this
    log_interval_s: float = 5.0
    checkpoint_interval_s: float = 60.0
    publish_period: int = 5  # learner steps between weight publications
    summary_interval_s: float = 2.0  # seconds between TensorBoard writes (and NaN checks)


def state_spec(core) -> Any:
    return tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape[1:], x.dtype),
                                 core.initial_state(1))


def create_variables(core, obs_spec, action_space) -> None:
    """One unroll on zeros so every variable exists (Sonnet builds lazily)."""
    step = trajectory.zeros(trajectory.step_spec(
        obs_spec, action_space.action_specs(), action_space.param_specs()), (2, 1))
    inputs = CoreInputs(step.observation, step.prev_action, step.prev_reward, step.first)
    outputs, _ = core.unroll(inputs, core.initial_state(1))
    if core.has_advantage_head:
        core.advantage(outputs.features[0], step.action[0][0])


def build_agent(agent: registry.AgentDefinition, observation_space, action_space, config):
    """(core, learner) with every variable created; the learner owns the core."""
    obs_spec = observation_spec(observation_space)

    def make_core():
        core = agent.build_core(observation_space, action_space, config)
        create_variables(core, obs_spec, action_space)
        return core

    core = make_core()
    return core, agent.build_learner(core, action_space, config, make_core)


def _export(core, action_space, obs_space, options: RunOptions) -> Optional[str]:
    """The final policy as `<logdir>/saved_model`; None (with a warning) if unsupported."""
    path = os.path.join(options.logdir, 'saved_model')
    try:
        return export.export_policy(core, action_space, obs_space, options.env, path)
    except export.ExportError as e:
        logging.warning('no SavedModel: %s', e)
        return None


def item_signature(agent: registry.AgentDefinition, config, step_spec: trajectory.Step,
                   core_state_spec: Any, num_envs: int) -> trajectory.Sequence:
    """The tables' signature for an agent whose actors step `num_envs` environments."""
    return trajectory.sequence_signature(step_spec, core_state_spec, config.sequence_length,
                                         envs_per_item=num_envs if agent.group_envs else 0)


def make_writer(agent: registry.AgentDefinition, config, client: reverb.Client,
                step_spec: trajectory.Step, core_state_spec: Any, num_envs: int,
                tables, priority_fn=None) -> SequenceWriter:
    """The actors' writer, laid out as `item_signature` says."""
    return SequenceWriter(client, step_spec, core_state_spec, num_envs, config.sequence_length,
                          tables, priority_fn, period=agent.sequence_period(config),
                          group_envs=agent.group_envs)


def make_learn(learner) -> Callable[[Iterator], Dict[str, tf.Tensor]]:
    """`learn(iterator)`: one learner step on the iterator's next batch.

    A `tf.data` iterator is read inside the compiled step, which saves the
    Python-side handling of every batch (~15% of a SAC step here); any other
    iterator (ACER's schedule) is read in Python. Raises StopIteration when
    the data ends.
    """

    @tf.function(autograph=False)
    def learn_in_graph(iterator):
        return learner.step(iterator.get_next())

    def learn(iterator):
        if isinstance(iterator, tf.data.Iterator):
            try:
                return learn_in_graph(iterator)
            except tf.errors.OutOfRangeError:
                raise StopIteration from None
        return learner.step(next(iterator))

    return learn


@dataclasses.dataclass(frozen=True)
class RunSetup:
    """What every role of a run derives from its options and config alike.

    The replay server, the learner and the actors each build this from the
    same flags, so their tables, signatures and networks agree.
    """
    options: RunOptions
    config: Any
    agent: registry.AgentDefinition
    observation_space: Any
    action_space: Any
    step_spec: trajectory.Step
    core_state_spec: Any
    signature: trajectory.Sequence

    @property
    def sequences_per_item(self) -> int:
        """Sequences one item holds (an actor's `num_envs` when the agent groups them)."""
        return self.options.num_envs if self.agent.group_envs else 1

    @property
    def env_steps_per_item(self) -> int:
        """New environment steps an item brings (placeholder steps at episode ends included)."""
        return self.agent.sequence_period(self.config) * self.sequences_per_item


def make_envs(options: RunOptions, config: Any, num_envs: int,
              seed: int) -> gym.vector.VectorEnv:
    """The run's vector env (`options.env`), weighting vector rewards as the config says."""
    return environments.make_vector_env(options.env, num_envs, seed,
                                        reward_weights=registry.reward_weights(config))


def make_setup(options: RunOptions, config: Any, envs: gym.vector.VectorEnv) -> RunSetup:
    """The run's setup; `envs` (any number of the run's environments) gives the spaces."""
    agent = registry.get(options.agent)
    action_space = environments.check_spaces(options.env, envs, agent.squash_actions)
    obs_space = envs.single_observation_space
    obs_spec = observation_spec(obs_space)
    core = agent.build_core(obs_space, action_space, config)
    step_spec = trajectory.step_spec(obs_spec, action_space.action_specs(),
                                     action_space.param_specs(), environments.reward_size(envs))
    core_state_spec = state_spec(core)
    signature = item_signature(agent, config, step_spec, core_state_spec, options.num_envs)
    return RunSetup(options, config, agent, obs_space, action_space, step_spec, core_state_spec,
                    signature)


def make_core(setup: RunSetup):
    """The agent's acting core with every variable created."""
    core = setup.agent.build_core(setup.observation_space, setup.action_space, setup.config)
    create_variables(core, observation_spec(setup.observation_space), setup.action_space)
    return core


def make_server_tables(setup: RunSetup) -> List[reverb.Table]:
    """The run's `queue`, `replay` and `variables` tables, sized from the config."""
    config, agent = setup.config, setup.agent
    # Sizes in the configs count sequences; a grouped item holds num_envs of them.
    items = lambda sequences: -(-sequences // setup.sequences_per_item)  # noqa: E731 (ceil)
    published = list(make_core(setup).variables)
    return tables_lib.make_tables(
        setup.signature, tables_lib.variables_signature(published),
        queue_size=items(config.queue_size), replay_size=items(config.replay_size),
        min_replay_size=items(agent.min_replay_size(config)),
        replay_eviction=config.replay_eviction,
        samples_per_insert=agent.samples_per_insert(config))


def make_actor(setup: RunSetup, client: reverb.Client, envs: gym.vector.VectorEnv, seed: int,
               stats: EpisodeStats) -> Actor:
    """An actor writing to the agent's tables and fetching weights from `variables`."""
    config = setup.config
    core = make_core(setup)
    priority_fn = ((lambda table: float(np.random.uniform()))
                   if config.replay_eviction == 'reservoir' else None)
    writer = make_writer(setup.agent, config, client, setup.step_spec, setup.core_state_spec,
                         envs.num_envs, setup.agent.write_tables(config), priority_fn)
    return Actor(envs, core, setup.action_space, writer,
                 VariableFetcher(client, list(core.variables)), seed, stats,
                 random_steps=setup.agent.random_steps(config))


class LearnerRun:
    """The learner's side of a run: networks, checkpoints, the loop, the summary.

    Shared by the in-process run and the learner process. The caller says how
    many env steps were taken (`env_steps`: a callable, steps since this run
    started) and when to stop; the loop publishes weights, writes TensorBoard
    summaries, checks for non-finite losses and checkpoints on a schedule.
    """

    def __init__(self, setup: RunSetup):
        self.setup = setup
        options = setup.options
        os.makedirs(options.logdir, exist_ok=True)
        self.core, self.learner = build_agent(setup.agent, setup.observation_space,
                                              setup.action_space, setup.config)
        self.env_steps_counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                             name='env_steps')
        checkpoint = tf.train.Checkpoint(learner=self.learner, env_steps=self.env_steps_counter)
        self.manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(options.logdir, 'checkpoints'), max_to_keep=3)
        if self.manager.latest_checkpoint:
            try:
                checkpoint.restore(self.manager.latest_checkpoint)
            except (tf.errors.OpError, ValueError, AssertionError) as e:
                raise TrainingError(f'cannot restore checkpoint {self.manager.latest_checkpoint}: '
                                    f'{str(e).splitlines()[0]}') from None
            logging.info('Resumed from %s at learner step %d, env step %d',
                         self.manager.latest_checkpoint, int(self.learner.num_steps.numpy()),
                         int(self.env_steps_counter.numpy()))
        # Written only once the checkpoint (if any) matched: a failed resume changes nothing.
        with open(os.path.join(options.logdir, RUN_CONFIG), 'w') as f:
            json.dump({'agent': options.agent, 'env': options.env,
                       'config': dataclasses.asdict(setup.config)}, f, indent=2)
        self.start_env_steps = int(self.env_steps_counter.numpy())
        self.start_learner_steps = int(self.learner.num_steps.numpy())
        self.published = list(self.core.variables)
        self._last_metrics = {}
        self._iterator = None  # the last data stream, kept open until `close_data`
        self._env_steps = lambda: 0
        self.wall_time = 0.0
        self.reached_target = False

    @property
    def learner_steps(self) -> int:
        return int(self.learner.num_steps.numpy())

    def total_env_steps(self) -> int:
        return self.start_env_steps + self._env_steps()

    def _finite_values(self, metrics) -> Dict[str, float]:
        """Metric values; raises (before anything is saved) if any is NaN or Inf."""
        values = {k: float(v.numpy()) for k, v in metrics.items()}
        if not all(math.isfinite(v) for v in values.values()):
            raise TrainingError(
                f'non-finite loss at learner step {self.learner_steps}: {values}; '
                f'the last good checkpoint is kept in {self.manager.directory}')
        return values

    def save(self) -> None:
        self._finite_values(self._last_metrics)  # never checkpoint weights a NaN step produced
        self.env_steps_counter.assign(self.total_env_steps())
        self.manager.save(checkpoint_number=self.learner_steps)

    def run(self, batches: Callable[[], Iterator], publish: Callable[[], None],
            env_steps: Callable[[], int], stats: EpisodeStats, should_stop: Callable[[], bool],
            recent_actions: Callable[[], list] = lambda: [],
            on_server_error: Optional[Callable[[Exception], None]] = None) -> None:
        """Learns until the env-step budget, the target return or `should_stop()`.

        `batches()` opens the learner's data stream (again after a data timeout);
        `on_server_error(e)`, when given, waits for a lost Reverb server to come
        back (raising if it does not), after which the stream is reopened.
        """
        options = self.setup.options
        self._env_steps = env_steps
        summary_writer = tf.summary.create_file_writer(options.logdir)
        summary_writes = 0

        def write_summaries(step, metrics):
            nonlocal summary_writes
            # Per-episode writes cost ~2 ms each here; aggregate since the last write.
            values = self._finite_values(metrics)
            episodes = stats.pop_new()
            with summary_writer.as_default(step=step):
                for k, v in values.items():
                    tf.summary.scalar(k, v)
                tf.summary.scalar('env_steps', self.total_env_steps())
                if episodes:
                    tf.summary.scalar('episode/return', np.mean([r for r, _ in episodes]))
                    tf.summary.scalar('episode/length', np.mean([n for _, n in episodes]))
                # An eager histogram costs ~0.1-0.3 s here: one in ten writes has them.
                summary_writes += 1
                if summary_writes % 10 == 1:
                    for i, actions in enumerate(recent_actions()):
                        tf.summary.histogram(f'actions/{i}', actions)

        learn = make_learn(self.learner)
        iterator = batches()
        steps_this_run = 0
        start = time.time()
        last_log = last_checkpoint = last_summary = start
        try:
            while not should_stop():
                env_steps_now = self.total_env_steps()
                if env_steps_now >= options.num_steps:
                    break
                self.learner.set_progress(env_steps_now / options.num_steps)
                try:
                    metrics = learn(iterator)
                except StopIteration:
                    # The actor died (the caller raises its error), or it stopped at the
                    # budget before this batch was complete.
                    if should_stop() or self.total_env_steps() >= options.num_steps:
                        break
                    logging.warning('no data for %.0f s; reopening the learner\'s datasets',
                                    DATA_TIMEOUT_MS / 1000)
                    iterator = batches()
                    continue
                except SERVER_ERRORS as e:
                    if on_server_error is None:
                        raise
                    iterator = None
                    on_server_error(e)
                    iterator = batches()
                    publish()
                    continue
                self._last_metrics = metrics
                steps_this_run += 1
                step = self.start_learner_steps + steps_this_run
                if step % options.publish_period == 0:
                    publish()
                now = time.time()
                if now - last_summary >= options.summary_interval_s:
                    last_summary = now
                    write_summaries(step, metrics)
                mean_return, _, count = stats.recent(20)
                if options.target_return is not None and count >= 20 and \
                        mean_return >= options.target_return:
                    self.reached_target = True
                    break
                if now - last_log >= options.log_interval_s:
                    last_log = now
                    elapsed = now - start
                    logging.info('env steps %d (%.0f/s)  learner steps %d (%.1f/s)  '
                                 'return (last 20) %.1f  episodes %d',
                                 env_steps_now, env_steps() / elapsed, step,
                                 steps_this_run / elapsed, mean_return, stats.num_episodes)
                if now - last_checkpoint >= options.checkpoint_interval_s:
                    last_checkpoint = now
                    self.save()
        finally:
            self.wall_time = time.time() - start
            self.steps_this_run = steps_this_run
            summary_writer.flush()
            # Dropping the iterator now could wait for samples the server's rate
            # limiter holds back (up to the data timeout, more than once): see
            # `close_data`.
            self._iterator = iterator

    def close_data(self) -> None:
        """Drops the learner's data stream; call it once nothing can block it.

        A sample request blocked in the server's rate limiter (SAC's learner
        waiting for inserts when the budget ends) is not cancelled by closing
        the stream: the close waits out the data timeout (measured: 40 s at the
        end of a multi-process SAC run). In-process runs call this after
        stopping their server, which fails the blocked requests at once; the
        learner process exits without waiting (`launch/run.py`).
        """
        self._iterator = None

    def finish(self, stats: EpisodeStats) -> Dict[str, Any]:
        """Checkpoints, evaluates, exports; returns the summary (also summary.json)."""
        options = self.setup.options
        self.save()
        logging.info('learner step %d, env step %d: checkpointed; evaluating %d episodes',
                     self.learner_steps, self.total_env_steps(), options.eval_episodes)
        eval_mean, eval_std, _ = evaluation.evaluate(
            self.core, self.setup.action_space, options.env, options.eval_episodes,
            seed=options.seed + 10_000, reward_weights=registry.reward_weights(self.setup.config))
        mean_return, _, _ = stats.recent(20)
        logging.info('evaluation: %.1f +- %.1f; exporting the policy', eval_mean, eval_std)
        saved_model = _export(self.core, self.setup.action_space, self.setup.observation_space,
                              options)
        wall_time = max(self.wall_time, 1e-9)
        summary = {
            'agent': options.agent,
            'env': options.env,
            'env_steps': self.total_env_steps(),
            'learner_steps': self.learner_steps,
            'wall_time_s': self.wall_time,
            'env_steps_per_s': self._env_steps() / wall_time,
            'learner_steps_per_s': self.steps_this_run / wall_time,
            'train_return_last20': mean_return if math.isfinite(mean_return) else None,
            'reached_target': self.reached_target,
            'eval_return_mean': eval_mean,
            'eval_return_std': eval_std,
            'eval_episodes': options.eval_episodes,
            'saved_model': saved_model,
            'seed': options.seed,
            'config': dataclasses.asdict(self.setup.config),
        }
        with open(os.path.join(options.logdir, 'summary.json'), 'w') as f:
            json.dump(summary, f, indent=2)
        return summary


def train(options: RunOptions, config: Any) -> Dict[str, Any]:
    """Trains in one process; returns the summary (also written to summary.json)."""
    registry.get(options.agent)
    os.makedirs(options.logdir, exist_ok=True)
    tf.random.set_seed(options.seed)
    np.random.seed(options.seed)

    envs = make_envs(options, config, options.num_envs, options.seed)
    setup = make_setup(options, config, envs)
    run = LearnerRun(setup)
    server = reverb.Server(make_server_tables(setup))
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    publisher = VariablePublisher(client, run.published)
    publisher.publish()  # after the restore: actors start from the checkpoint's weights

    stats = EpisodeStats()
    actor = make_actor(setup, client, envs, options.seed, stats)
    stop_event = threading.Event()
    actor_error = []

    def run_actor():
        try:
            actor.run(stop_event.is_set, max_env_steps=options.num_steps)
        except Exception as e:  # surfaced in the main thread
            if not stop_event.is_set():  # after a stop, errors come from the server going away
                logging.exception('the actor failed')
                actor_error.append(e)
                stop_event.set()

    def batches():
        # Datasets end after `DATA_TIMEOUT_MS` without data, so a learner waiting
        # for an actor that died (or stalled) gets control back.
        return setup.agent.batches(address, setup.signature, config, client, DATA_TIMEOUT_MS)

    thread = threading.Thread(target=run_actor, name='actor', daemon=True)
    thread.start()
    try:
        run.run(batches, publisher.publish, lambda: stats.env_steps, stats, stop_event.is_set,
                actor.recent_actions)
    finally:
        # The actor may be blocked on a full queue, and the learner's prefetch on
        # an empty one; stopping the server releases both (in-flight work fails,
        # which no longer matters), so the process never hangs on the way out.
        stop_event.set()
        thread.join(timeout=2)
        server.stop()
        thread.join(timeout=30)
        run.close_data()
    if actor_error:
        raise actor_error[0]
    summary = run.finish(stats)
    envs.close()
    return summary
