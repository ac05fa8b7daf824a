"""What every role of a run builds from its options and config alike.

The replay server, the learner and the actors each call `make_setup` with
the same flags, so their tables, item layout and networks agree. Everything
agent-specific comes from the agent's contract (`agents/contract.py`): its
data plan sizes the tables and lays out the items, its `build_core` makes
the acting network.
"""

import dataclasses
import os
from typing import Any, Callable, List, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
import reverb
import sonnet as snt
import tensorflow as tf
from absl import logging

from reverb_agents.agents import contract, registry
from reverb_agents.launch.runs import checkpoint_pairs, console, rundir
from reverb_agents.launch import environments
from reverb_agents.launch.environments import action_repeat, factory, shared_spaces, task_sequence
from reverb_agents.launch.acting.actor import Actor, EpisodeStats
from reverb_agents.launch.runs.options import RunOptions
from reverb_agents.networks import torsos
from reverb_agents.networks import user as user_lib
from reverb_agents.networks.numpy_core import NumpyCore
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import demos as demos_lib
from reverb_agents.replay import tables as tables_lib
from reverb_agents.replay import trajectory
from reverb_agents.replay.layout import ItemLayout
from reverb_agents.replay.mixing import MixedBatches
from reverb_agents.replay.variables import VariableFetcher


_SAID = [False]  # the actors' TensorFlow acting was announced in this process


@dataclasses.dataclass(frozen=True)
class RunSetup:
    """The run's agent, spaces, data plan and item layout."""
    options: RunOptions
    config: Any
    agent: contract.Agent
    observation_space: gym.Space
    action_space: ActionSpace
    plan: contract.DataPlan
    layout: ItemLayout

    @property
    def signature(self) -> trajectory.Sequence:
        return self.layout.signature


def set_intra_op_threads(threads: int) -> None:
    """TensorFlow's threads within one op (`RunOptions.intra_op_threads`; 0: its default).

    Takes effect only before TensorFlow first runs an op in this process; later
    (e.g. several runs in one test process) it logs that the setting stays as it
    is. On two cores SAC's learner ran ~20% more updates with one thread: its
    256-wide matmuls gain less from a second thread than it costs to share one
    with Reverb's and the actor's (docs/benchmarks.md).
    """
    current = tf.config.threading.get_intra_op_parallelism_threads()
    if not threads or threads == current:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:
        logging.warning('intra_op_threads=%d not applied: TensorFlow already runs with %s in '
                        'this process', threads, current or 'its default')


def seed_process(seed: int) -> None:
    """Seeds what initialises networks and draws at random in this process: TensorFlow,
    numpy and Python's `random`, which Keras' unseeded initializers draw their seeds
    from (`tf.random.set_seed` alone leaves a Keras layer's weights to the process)."""
    tf.keras.utils.set_random_seed(seed)


def resolve_config(options: RunOptions, config: Any) -> Any:
    """`config` for the run's environment: what the agent makes of its reward size
    (SAC: unset `reward_weights` of a vector reward become the plain sum) and of
    its number of tasks (CLEAR: one value output per task)."""
    agent = registry.get(options.agent)
    try:
        if options.is_sequence:  # every task has scalar rewards (`shared_spaces`)
            shared_spaces.shared_spaces(options.tasks)
            return for_tasks(options, config)
        return for_tasks(options, agent.for_reward_size(
            config, factory.declared_reward_size(options.env, options.env_kwargs)))
    except environments.EnvironmentSetupError:
        raise
    except ValueError as e:
        raise environments.EnvironmentSetupError(f'{options.env}: {e}') from None


def for_tasks(options: RunOptions, config: Any) -> Any:
    """What the agent makes of the run's number of tasks (1 outside a sequence)."""
    return registry.get(options.agent).for_tasks(
        config, len(options.tasks) if options.is_sequence else 1)


def make_envs(options: RunOptions, config: Any, num_envs: int, seed: int,
              start_env_steps: int = 0, evaluation: bool = False) -> gym.vector.VectorEnv:
    """The run's vector env (`options.env` made with `options.env_kwargs`), weighting
    vector rewards as the agent says; for a task sequence, the sequence from
    `start_env_steps` on. `evaluation`: environments to evaluate in, stepped in this
    process whatever `options.vector_env` says."""
    if options.is_sequence:
        return task_sequence.TaskSequenceVectorEnv(
            options.tasks, num_envs, seed, options.steps_per_task, options.task_cycles,
            start_env_steps)
    agent = registry.get(options.agent)
    return factory.make_vector_env(
        options.env, num_envs, seed, None if evaluation else options.vector_env or None,
        reward_weights=agent.reward_weights(config),
        wrap=action_repeat.wrapper(options.step_mul, options.fixed_step_mul),
        env_kwargs=options.env_kwargs)


def state_spec(core: ActorCriticCore) -> Any:
    """Specs of one environment's core state."""
    return tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape[1:], x.dtype),
                                 core.initial_state(1))


def check_networks(options: RunOptions, config: Any) -> None:
    """A network of the user's own, built once in this process before a run starts any
    other or writes anything: a bad one is one `EnvironmentSetupError` line here, not
    one per role."""
    if not config.network.users_own:
        return
    envs = make_envs(options, config, 1, options.seed, evaluation=True)
    try:
        make_setup(options, config, envs)
    finally:
        envs.close()


def make_setup(options: RunOptions, config: Any, envs: gym.vector.VectorEnv) -> RunSetup:
    """The run's setup; `envs` (any number of the run's environments) gives the spaces."""
    agent = registry.get(options.agent)
    config = for_tasks(options, config)  # as `resolve_config` made it (callers may skip it)
    torsos.set_precision(options.torso_precision)  # before any network is traced
    action_space = factory.check_spaces(options.env, envs, agent.squash_actions,
                                        config.network.rescale_actions)
    obs_space = envs.single_observation_space
    core = build_checked_core(options, config, obs_space, action_space)
    for path in agent.demo_files(config):  # one line now, not a traceback in the learner
        try:
            demos_lib.load_demos(path, obs_space, envs.single_action_space)
        except demos_lib.DemoError as e:
            raise environments.EnvironmentSetupError(str(e)) from None
    plan = sized_for_run(paced(agent.data_plan(config)), options)
    step_spec = trajectory.step_spec(observation_spec(obs_space), action_space.action_specs(),
                                     action_space.param_specs(), factory.reward_size(envs))
    layout = ItemLayout(step_spec, state_spec(core), plan.sequence_length, plan.sequence_period,
                        envs_per_item=options.num_envs if plan.group_envs else 0)
    return RunSetup(options, config, agent, obs_space, action_space, plan, layout)


def build_checked_core(options: RunOptions, config: Any, observation_space: gym.Space,
                       action_space: ActionSpace) -> ActorCriticCore:
    """The agent's core (a user's network's with its variables built), or one
    `EnvironmentSetupError` line: a space it cannot take, or a network of the user's
    own that fails its checks or its first unroll (`networks.user`)."""
    agent = registry.get(options.agent)
    user_parts = config.network.users_own
    if user_parts and options.torso_precision != 'float32':
        raise environments.EnvironmentSetupError(
            f'--torso_precision={options.torso_precision} computes the built-in convolution '
            f'torsos in that precision; a network of your own sets its own (Keras layers\' '
            f'dtype, e.g. mixed_bfloat16): leave --torso_precision at float32')
    try:
        core = agent.build_core(observation_space, action_space, config)
        if user_parts:  # a user's layers may fail only at their first unroll
            core.create_variables()
    except user_lib.NetworkError as e:
        raise environments.EnvironmentSetupError(str(e)) from None
    except UnsupportedSpaceError as e:
        raise environments.EnvironmentSetupError(f'{options.env}: {e}') from None
    except Exception as e:  # noqa: BLE001 -- a user's layer fails its first call
        if not user_parts:
            raise
        line = str(e).strip().splitlines()[0] if str(e).strip() else ''
        raise environments.EnvironmentSetupError(
            f'{options.env}: the network of your own (--torso={config.network.torso}'
            f'{", --memory=" + config.network.memory if config.network.memory else ""}) '
            f'failed in the core: {type(e).__name__}: {line}') from None
    return core


def network_table(learner: contract.Learner) -> str:
    """The learner's networks, one row per part: the core's (`ActorCriticCore.describe`)
    and the others it keeps (SAC's critics, ACER's average network), with their classes
    and trainable parameters."""
    rows = [(f'core/{part}', kind, count) for part, kind, count in learner.core.describe()]
    in_core = {id(v) for v in tf.Module.variables.fget(learner.core)}
    for name, value in sorted(vars(learner).items()):
        if (isinstance(value, snt.Module) and not isinstance(value, snt.Optimizer)
                and user_lib.param_count(value) and not  # not a part of the core again
                {id(v) for v in tf.Module.variables.fget(value)} <= in_core):
            rows.append((name, type(value).__name__, user_lib.param_count(value)))
    total = sum(count for _, _, count in rows)
    return 'networks:\n' + console.table(
        [(part, f'{kind}  {count:,} parameters') for part, kind, count in rows]
        + [('total', f'{total:,} trainable parameters')])


def make_core(setup: RunSetup) -> ActorCriticCore:
    """The agent's acting core with every variable created."""
    core = setup.agent.build_core(setup.observation_space, setup.action_space, setup.config)
    core.create_variables()
    return core


def make_learner(setup: RunSetup) -> contract.Learner:
    """The agent's learner (it owns a core of its own, `learner.core`)."""
    return setup.agent.build_learner(lambda: make_core(setup), setup.action_space, setup.config)


def pretrain(learner: contract.Learner) -> bool:
    """The learner's pre-training before any actor acts (`Learner.pretrain`: behavioural
    cloning on demonstrations, where its agent has any); nothing once it is done. True
    if it ran."""
    loss = learner.pretrain()
    if loss is not None:
        console.status(f'pre-trained the policy on demonstrations (last loss {loss:.3f})')
    return loss is not None


def paced(plan: contract.DataPlan) -> contract.DataPlan:
    """`plan`, if something paces its actors to its learner; else a ValueError (one line).

    Fresh sequences do (each is read once, and the actors wait on a full `queue`), or
    Reverb's `samples_per_insert` does. A mixed plan that replays every row has neither,
    so its actors would run through the budget while the learner took a step or two. A
    test that drives a learner by hand may drop the pace (`tests/conftest.py`); a run may not.
    """
    mixing = plan.batch_mixing  # `mixing`, or mixed batches of `replay_fraction`
    if (isinstance(mixing, MixedBatches) and mixing.replay_fraction == 1.0
            and plan.samples_per_insert is None):
        raise ValueError('the data plan replays every row of a batch (replay_fraction 1) with no '
                         'samples_per_insert: nothing would pace the actors to the learner')
    return plan


def sized_for_run(plan: contract.DataPlan, options: RunOptions) -> contract.DataPlan:
    """The agent's plan with the queue a deterministic run needs: at least what its
    schedule can write before the learner can read (`--queue_size` otherwise).

    There one thread takes turns and the actor acts a whole round only when no batch
    can be read: until `replay` holds its minimum the queue takes every round, and
    after it the learner leaves fewer than a batch's fresh sequences before the actor
    acts again. A queue of `min_replay_size + num_envs + batch_sequences` therefore
    always takes the next round; a smaller one would stop the run (threaded actors
    insert sequence by sequence and wait instead). A run that fitted before is the
    same run: the queue is first in, first out whatever its size.
    """
    if not options.deterministic:
        return plan
    return dataclasses.replace(plan, queue_size=max(
        plan.queue_size, plan.min_replay_size + options.num_envs + plan.batch_sequences))


def make_server_tables(setup: RunSetup) -> List[reverb.Table]:
    """The run's `queue`, `replay` and `variables` tables, sized from the data plan;
    `replay` samples in a seeded order in a deterministic run (`replay.seeded`)."""
    plan, layout = setup.plan, setup.layout
    published = list(make_core(setup).variables)
    return tables_lib.make_tables(
        layout.signature, tables_lib.variables_signature(published),
        queue_size=layout.items(plan.queue_size),
        replay_size=layout.items(plan.replay_size),
        min_replay_size=layout.items(plan.min_replay_size),
        replay_eviction=plan.replay_eviction, samples_per_insert=plan.samples_per_insert,
        priority_exponent=plan.priority_exponent,
        seeded_sampling=setup.options.deterministic)


def make_server(setup: RunSetup, port: int = 0,
                checkpoint: Union[bool, Tuple[str, Optional[str]]] = False,
                tables: Optional[List[reverb.Table]] = None) -> reverb.Server:
    """The run's Reverb server on `port` (0: a free one) serving `tables` (default
    `make_server_tables(setup)`). With `checkpoint` True, it loads the latest checkpoint
    in `<logdir>/replay_checkpoints` (else the replay of an in-process run's last
    checkpoint pair, if any), and `client.checkpoint()` writes a new one there;
    `checkpoint=(directory, path)` names them (an in-process run's pair,
    `launch.runs.checkpoint_pairs.Checkpoints.prepare_replay`)."""
    if checkpoint is True:
        checkpoint = (os.path.join(setup.options.logdir, rundir.REPLAY_CHECKPOINTS),
                      checkpoint_pairs.paired_replay(setup.options.logdir))
    # Reverb loads `path` only where `directory` holds no whole checkpoint.
    checkpointer = (reverb.checkpointers.DefaultCheckpointer(
        checkpoint[0], fallback_checkpoint_path=checkpoint[1]) if checkpoint else None)
    return reverb.Server(tables or make_server_tables(setup), port=port or None,
                         checkpointer=checkpointer)


def make_actor(setup: RunSetup, client: reverb.Client, envs: gym.vector.VectorEnv, seed: int,
               stats: EpisodeStats, env_steps_done: int = 0,
               replay_priority: Optional[Callable[[], float]] = None) -> Actor:
    """An actor writing to the agent's tables and fetching weights from `variables`.
    `env_steps_done`: steps already taken (a resumed run, a reconnected actor) count
    against the plan's uniformly random first steps. `replay_priority()`: the
    priority of each new `replay` item (a deterministic run's `SampleClock`)."""
    core = make_core(setup)
    reason = NumpyCore.unsupported(core)
    if reason and not _SAID[0]:  # once per process
        _SAID[0] = True
        console.status(f'actors act through TensorFlow: {reason}')
    fetcher = VariableFetcher(client, list(core.variables))
    priority_fn = None
    if replay_priority is not None:
        priority_fn = lambda table: (  # noqa: E731
            replay_priority() if table == tables_lib.REPLAY else 1.0)
    elif setup.plan.replay_eviction == 'reservoir':
        # A uniform random priority, and the lowest is evicted.
        priority_fn = lambda table: float(np.random.uniform())  # noqa: E731
    elif setup.plan.priority_exponent is not None:
        # The learner's largest priority so far, published with its weights.
        priority_fn = lambda table: fetcher.new_item_priority  # noqa: E731
    writer = setup.layout.writer(client, envs.num_envs, setup.plan.tables, priority_fn)
    return Actor(envs, core, setup.action_space, writer, fetcher, seed, stats,
                 random_steps=max(0, setup.plan.random_steps - env_steps_done))
