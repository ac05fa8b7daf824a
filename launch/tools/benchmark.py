"""Throughput benchmark: `python launch/benchmark.py --agent=clear` prints JSON.

Measured side by side in one process, each `--repeats` times (medians
reported, all runs listed):

- `raw_env_steps_per_s`: the vector environment alone, random actions
  (`make_vec`'s default implementation or `--vector_env`'s, and a
  `SyncVectorEnv`: `raw_sync_env_steps_per_s`), with the
  wrappers a run adds (`launch.environments.suites`); env steps are frames where the
  environment reports them (Atari: 4 per decision), as a run counts them;
- `actor_env_steps_per_s`: the actor loop (batched policy, numpy buffers,
  sequences into a real Reverb server), no learner;
- `learner_steps_per_s`, `learner_samples_per_s`: learner steps on mixed
  batches drawn from Reverb (tables filled by the actor first, no rate
  limiter), read the way a run reads them (`launch/learning/data.py`);
  `learner_samples_per_s` counts transitions, the data plan's
  `transitions_per_batch` per learner step (sequences x learned steps: SAC's
  `batch_size`, CLEAR's and ACER's `batch_size * unroll_length`);
- `learner_in_memory_steps_per_s`: the same learner step reading one fixed
  batch held in memory (a repeating `tf.data` dataset, read inside the
  compiled step as the Reverb batches are), and `reverb_feed_cost` =
  1 - Reverb rate / in-memory rate (what feeding from Reverb costs);
- with `--run_steps=N`, `run_env_steps_per_s`: a whole in-process run of N
  env steps (actor, Reverb and learner together), from its summary.json.

Atari (`pip install -e '.[atari]'`): `python launch/benchmark.py
--flagfile=launch/presets/benchmark_clear_pong.flags` (CLEAR, Nature CNN,
batches of 32 x 20 frames' decisions).

SAC: `python launch/benchmark.py --agent=sac --env=Pendulum-v1 --num_envs=8`
(batch 256, 256x256 actor and twin critics by default).

`--compare_samplers` measures instead the learner fed from Reverb twice per
repeat, side by side: with uniform sampling and with prioritized replay
(Reverb's prioritized selector, importance weights in the loss, priorities
written back by `replay.priorities.PriorityUpdater`), and reports
`priority_cost` = 1 - median(prioritized rate / uniform rate).
"""

import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from reverb_agents.launch.runs import console  # noqa: E402  (imports nothing heavy)

if __name__ == '__main__' and not console.verbose_requested(sys.argv):
    console.quiet_native_output()  # before TensorFlow prints its CUDA start-up lines

import numpy as np  # noqa: E402
import reverb  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from reverb_agents.agents import registry  # noqa: E402
from reverb_agents.launch.command_line import config_flags  # noqa: E402
from reverb_agents.launch.learning import data  # noqa: E402
from reverb_agents.launch.runners import inprocess  # noqa: E402
from reverb_agents.launch.command_line import help as help_lib  # noqa: E402
from reverb_agents.launch.environments import factory  # noqa: E402
from reverb_agents.launch.environments.action_repeat import FRAMES  # noqa: E402
from reverb_agents.launch.building import setup as setup_lib  # noqa: E402
from reverb_agents.launch.acting.actor import Actor  # noqa: E402
from reverb_agents.launch.runs.options import (TORSO_PRECISIONS, VECTOR_ENVS, RunOptions)  # noqa: E402
from reverb_agents.replay import tables as tables_lib  # noqa: E402
from reverb_agents.replay.priorities import PriorityUpdater  # noqa: E402

flags.DEFINE_string('agent', 'clear', f'one of {sorted(registry.AGENTS)}')
flags.DEFINE_string('env', 'CartPole-v1', 'gymnasium id')
flags.DEFINE_integer('num_envs', 16, 'environments per actor')
flags.DEFINE_integer('repeats', 3, 'measurements per quantity (median reported)')
flags.DEFINE_float('seconds', 5.0, 'duration of each actor / env measurement')
flags.DEFINE_integer('learner_steps', 100, 'learner steps per measurement')
flags.DEFINE_integer('run_steps', 0, 'also time whole in-process runs of this many env '
                     'steps (run_env_steps_per_s); 0: not')
flags.DEFINE_integer('intra_op_threads', None, "TensorFlow's threads within one op; 0: one "
                     "per core (default: the agent's, as launch/run.py)")
flags.DEFINE_enum('torso_precision', 'float32', list(TORSO_PRECISIONS),
                  "image torsos' compute (launch/run.py's --torso_precision)")
flags.DEFINE_enum('vector_env', '', list(VECTOR_ENVS),
                  "how the actor's environments are stepped (run.py's --vector_env): the "
                  'actor, the whole run and the first vector-env rate use it')
flags.DEFINE_bool('compare_samplers', False,
                  'learner steps/s with uniform and with prioritized replay, side by side')
flags.DEFINE_bool('verbose', False, "show TensorFlow's and Reverb's own log lines")
config_flags.define_flags(registry.CONFIG_CLASSES)
FLAGS = flags.FLAGS


def _timed_loop(fn, seconds):
    """Calls fn() until `seconds` pass; returns (calls, elapsed)."""
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        count += 1
    return count, time.perf_counter() - start


def raw_env_rate(env_id, num_envs, seconds, mode=None, reward_weights=None):
    """Env steps/s of the vector env a run makes (its suite's wrappers included),
    random actions; frames where the env reports them (Atari's frame skip)."""
    envs = factory.make_vector_env(env_id, num_envs, 0, vectorization_mode=mode,
                                        reward_weights=reward_weights)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    actions = [envs.action_space.sample() for _ in range(64)]
    i, frames = [0], [0]

    def step():
        info = envs.step(actions[i[0] % 64])[-1]
        frames[0] += int(np.sum(info[FRAMES])) if FRAMES in info else num_envs
        i[0] += 1

    _, elapsed = _timed_loop(step, seconds)
    envs.close()
    return frames[0] / elapsed


def run_rate(config, num_steps: int) -> float:
    """Env steps/s of a whole in-process run (`launch/run.py`'s) of `num_steps`, from
    its summary.json: start-up (tracing) and its one evaluation episode included."""
    with tempfile.TemporaryDirectory() as logdir:
        options = RunOptions(agent=FLAGS.agent, env=FLAGS.env, num_envs=FLAGS.num_envs,
                             num_steps=num_steps, logdir=logdir, eval_episodes=1,
                             torso_precision=FLAGS.torso_precision, vector_env=FLAGS.vector_env)
        return inprocess.train(options, config)['env_steps_per_s']


class Setup:
    """Server, cores, writer and learner for one agent, as a run wires them."""

    def __init__(self, agent_name, config, env_id, num_envs):
        options = RunOptions(agent=agent_name, env=env_id, num_envs=num_envs,
                             torso_precision=FLAGS.torso_precision, vector_env=FLAGS.vector_env)
        self.envs = setup_lib.make_envs(options, config, num_envs, 0)
        self.setup = setup = setup_lib.make_setup(options, config, self.envs)
        self.plan = setup.plan
        self.action_space = setup.action_space
        self.actor_core = setup_lib.make_core(setup)
        self.learner = setup_lib.make_learner(setup)
        self.signature = setup.signature
        self.server = reverb.Server(tables_lib.make_tables(
            self.signature, tables_lib.variables_signature(self.learner.core.variables),
            queue_size=10**6, replay_size=10**6, min_replay_size=1,
            priority_exponent=self.plan.priority_exponent))
        self.address = f'localhost:{self.server.port}'
        self.client = reverb.Client(self.address)
        self.num_envs = num_envs

    def actor_rate(self, seconds):
        """Env steps/s of the actor loop writing into `queue` and `replay`."""
        writer = self.setup.layout.writer(self.client, self.num_envs,
                                          [tables_lib.QUEUE, tables_lib.REPLAY])
        actor = Actor(self.envs, self.actor_core, self.action_space, writer, None, seed=0)
        deadline = []

        def stop():
            if not deadline:  # start timing after the first step (tracing)
                deadline.append(None)
                return False
            if deadline[0] is None:
                deadline[0] = time.perf_counter() + seconds
                self._start, self._steps0 = time.perf_counter(), actor.stats.env_steps
            return time.perf_counter() >= deadline[0]

        actor.run(stop)
        writer.flush(timeout_ms=60_000)
        return (actor.stats.env_steps - self._steps0) / (time.perf_counter() - self._start)

    def learner_rates(self, num_steps):
        """(steps/s on batches from Reverb, steps/s on one batch held in memory)."""
        iterator = data.open_batches(self.address, self.signature, self.plan, self.client,
                                     60_000)
        updater = (PriorityUpdater(self.client) if self.plan.priority_exponent is not None
                   else None)
        learn = data.make_learn(self.learner, priorities=updater)
        fixed = next(iter(data.open_batches(self.address, self.signature, self.plan,
                                            self.client, 60_000)))

        def timed(step):
            try:
                step()  # trace
                start = time.perf_counter()
                for _ in range(num_steps):
                    metrics = step()
            except StopIteration:  # the tables ran dry before the measurement's end
                raise SystemExit('error: the actor wrote fewer sequences than the learner '
                                 'measurement needs; raise --seconds') from None
            next(iter(metrics.values())).numpy()
            return num_steps / (time.perf_counter() - start)

        # The baseline reads the same way, inside the compiled step, from a
        # dataset that repeats one batch already in memory: only where the
        # batch comes from differs.
        in_memory_iterator = iter(tf.data.Dataset.from_tensors(fixed).repeat())
        from_reverb = timed(lambda: learn(iterator))
        in_memory = timed(lambda: learn(in_memory_iterator))
        if updater is not None:
            updater.flush()
        return from_reverb, in_memory


def _fill(setup: Setup) -> None:
    """Runs the actor until `queue` holds the fresh items every learner measurement
    takes (prefetch included), and `replay` what one run of it writes."""
    plan = setup.plan
    needed = setup.setup.layout.items(plan.num_fresh) * (FLAGS.learner_steps + 2) * 2
    setup.actor_rate(FLAGS.seconds)  # replay's items
    while setup.client.server_info()[tables_lib.QUEUE].current_size < needed * FLAGS.repeats:
        setup.actor_rate(FLAGS.seconds)


def compare_samplers(config) -> dict:
    """Learner steps/s fed from Reverb, uniform and prioritized, side by side."""
    configs = {sampler: dataclasses.replace(
        config, replay=dataclasses.replace(config.replay, replay_sampler=sampler))
        for sampler in ('uniform', 'prioritized')}
    setups = {name: Setup(FLAGS.agent, c, FLAGS.env, FLAGS.num_envs)
              for name, c in configs.items()}
    for setup in setups.values():
        _fill(setup)
    runs = {name: [] for name in setups}
    for _ in range(FLAGS.repeats):
        for name, setup in setups.items():
            runs[name].append(setup.learner_rates(FLAGS.learner_steps)[0])
    return {
        'agent': FLAGS.agent, 'env': FLAGS.env, 'num_envs': FLAGS.num_envs,
        'transitions_per_batch': setups['uniform'].plan.transitions_per_batch,
        'config': dataclasses.asdict(configs['prioritized']), 'repeats': FLAGS.repeats,
        'learner_steps_per_s': {name: statistics.median(r) for name, r in runs.items()},
        'priority_cost': 1.0 - statistics.median(
            p / u for p, u in zip(runs['prioritized'], runs['uniform'])),
        'runs': runs,
    }


def main(argv):
    del argv
    agent = registry.get(FLAGS.agent)
    threads = (FLAGS.intra_op_threads if FLAGS.intra_op_threads is not None
               else agent.run_defaults.get('intra_op_threads', 0))
    setup_lib.set_intra_op_threads(threads)
    config = config_flags.config_from_flags(FLAGS.agent, registry.CONFIG_CLASSES)
    if FLAGS.compare_samplers:
        print(json.dumps(compare_samplers(config), indent=2))
        return
    setup = Setup(FLAGS.agent, config, FLAGS.env, FLAGS.num_envs)
    runs = {'raw_env_steps_per_s': [], 'raw_sync_env_steps_per_s': [],
            'actor_env_steps_per_s': [], 'learner_steps_per_s': [],
            'learner_in_memory_steps_per_s': []}
    plan = setup.plan
    # Fresh items per batch (a schedule's on-policy batches are all fresh).
    num_fresh = setup.setup.layout.items(plan.num_fresh)
    for _ in range(FLAGS.repeats):
        weights = agent.reward_weights(config)
        runs['raw_env_steps_per_s'].append(
            raw_env_rate(FLAGS.env, FLAGS.num_envs, FLAGS.seconds, FLAGS.vector_env or None,
                         weights))
        runs['raw_sync_env_steps_per_s'].append(
            raw_env_rate(FLAGS.env, FLAGS.num_envs, FLAGS.seconds, 'sync', weights))
        runs['actor_env_steps_per_s'].append(setup.actor_rate(FLAGS.seconds))
        # The queue must hold every fresh sequence the learner measurement takes.
        queued = setup.client.server_info()[tables_lib.QUEUE].current_size
        if queued < num_fresh * (FLAGS.learner_steps + 1):
            raise SystemExit(f'error: the actor wrote {queued} sequences, fewer than the '
                             'learner measurement needs; raise --seconds')
        from_reverb, in_memory = setup.learner_rates(FLAGS.learner_steps)
        runs['learner_steps_per_s'].append(from_reverb)
        runs['learner_in_memory_steps_per_s'].append(in_memory)
        if FLAGS.run_steps:
            runs.setdefault('run_env_steps_per_s', []).append(run_rate(config, FLAGS.run_steps))
    median = {k: statistics.median(v) for k, v in runs.items()}
    samples_per_step = plan.transitions_per_batch
    result = {
        'agent': FLAGS.agent,
        'env': FLAGS.env,
        'num_envs': FLAGS.num_envs,
        'vector_env': FLAGS.vector_env or 'default',
        'batch_sequences': plan.batch_sequences,
        'transitions_per_batch': plan.transitions_per_batch,
        'sequence_length': plan.sequence_length,
        'config': dataclasses.asdict(config),
        'intra_op_threads': threads,
        'repeats': FLAGS.repeats,
        **median,
        'learner_samples_per_s': median['learner_steps_per_s'] * samples_per_step,
        'actor_to_raw_env_ratio': median['actor_env_steps_per_s'] / median['raw_env_steps_per_s'],
        # Side by side per repeat, then the median: robust to the machine's noise.
        'reverb_feed_cost': 1.0 - statistics.median(
            r / m for r, m in zip(runs['learner_steps_per_s'],
                                  runs['learner_in_memory_steps_per_s'])),
        'runs': runs,
    }
    print(json.dumps(result, indent=2))


if __name__ == '__main__':
    app.run(main, flags_parser=help_lib.script_parser(
        FLAGS, __doc__, 'repeats', '[--agent=NAME] [--env=ID] [--FLAG=VALUE ...]',
        agent_fields=True))
