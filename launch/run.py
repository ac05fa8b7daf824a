"""Trains an agent: `python launch/run.py --agent=clear [--env=CartPole-v1] ...`.

Every field of the agent's config is also a flag (see `--helpfull`). Bad
input ends with one line on stderr and exit status 1. Ctrl-C checkpoints,
exports and exits with status 130 (`launch/inprocess.py`).
"""

import os
import sys
from typing import Any, Dict, Optional, Tuple

# Runnable as a script from a checkout as well as installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app, flags, logging  # noqa: E402

from agents import registry  # noqa: E402
from launch import (  # noqa: E402
    config_flags, environments, inprocess, launcher, rundir, roles, task_sequence)
from launch import setup as setup_lib  # noqa: E402
from launch.options import RunOptions  # noqa: E402
from replay import connection  # noqa: E402

ROLES = ('replay', 'learner', 'actor')
LAUNCHERS = ('inprocess', 'multiprocess')

flags.DEFINE_string('agent', 'clear', f'agent to train: one of {sorted(registry.AGENTS)}')
_DEFAULTS = RunOptions()
flags.DEFINE_string('env', _DEFAULTS.env, 'any gymnasium environment id (or module:Env-v0)')


def _default_help(field: str) -> str:
    """'(default X; sac: Y)': RunOptions' default and the agents that differ."""
    parts = [f'default {getattr(_DEFAULTS, field)}'] + [
        f'{name}: {a.run_defaults[field]}' for name, a in sorted(registry.AGENTS.items())
        if field in a.run_defaults]
    return f'({"; ".join(parts)})'


flags.DEFINE_string('tasks', '', 'a task sequence instead of --env: gymnasium ids A,B,C '
                    'trained in turn, --steps_per_task each, no task identity given')
flags.DEFINE_integer('steps_per_task', None, 'env steps per visit of a task (--tasks)')
flags.DEFINE_integer('task_cycles', _DEFAULTS.task_cycles,
                     'times a task sequence is gone through (--tasks)')
flags.DEFINE_integer('eval_every_steps', _DEFAULTS.eval_every_steps,
                     'env steps between evaluations of every task of a sequence '
                     '(0: five per task visit); --eval_episodes episodes each')
flags.DEFINE_integer('step_mul', _DEFAULTS.step_mul,
                     'action repeat: with --fixed_step_mul every action is taken this many '
                     'times; without, the policy picks 1..step_mul per decision (a learned head)')
flags.DEFINE_bool('fixed_step_mul', _DEFAULTS.fixed_step_mul,
                  'repeat every action --step_mul times instead of learning how often')
flags.DEFINE_integer('num_envs', None,
                     f'environments per actor, stepped together {_default_help("num_envs")}')
flags.DEFINE_integer('num_steps', None, f'environment-step budget {_default_help("num_steps")}')
flags.DEFINE_integer('seed', _DEFAULTS.seed, 'random seed (environments, sampling, initialisation)')
flags.DEFINE_string('logdir', _DEFAULTS.logdir, 'TensorBoard logs, checkpoints, summary.json')
flags.DEFINE_integer('eval_episodes', None,
                     f'greedy evaluation episodes at the end {_default_help("eval_episodes")}')
flags.DEFINE_float('eval_epsilon', _DEFAULTS.eval_epsilon,
                   'epsilon-greedy evaluation (ALF): each step of each evaluation episode '
                   'samples from the policy with this probability, in [0, 1]')
flags.DEFINE_float('target_return', _DEFAULTS.target_return,
                   'stop early once the last 20 training episodes average this return')
flags.DEFINE_float('log_interval_s', _DEFAULTS.log_interval_s, 'seconds between progress lines')
flags.DEFINE_float('checkpoint_interval_s', _DEFAULTS.checkpoint_interval_s,
                   'seconds between learner checkpoints')
flags.DEFINE_string('launcher', 'inprocess',
                    'inprocess: one process (server, actor thread, learner); multiprocess: '
                    'every role as a child process on this machine')
flags.DEFINE_integer('num_actors', 2, 'actor processes (--launcher=multiprocess)')
flags.DEFINE_string('role', '', 'run one role of a multi-process run: replay, learner or actor')
flags.DEFINE_string('replay_address', '', 'host:port of the replay server (learner, actor)')
flags.DEFINE_integer('replay_port', 0, 'port of the replay server (0: a free one). Reverb '
                     'listens on all interfaces: on a shared network, firewall this port')
flags.DEFINE_integer('actor_id', 0, 'this actor\'s index (seeds its environments)')
flags.DEFINE_float('connect_timeout_s', 20.0,
                   'seconds to wait for the replay server to answer at start')
flags.DEFINE_float('reconnect_timeout_s', 120.0,
                   'seconds a role waits for a lost replay server before it gives up')
flags.DEFINE_float('replay_checkpoint_interval_s', 60.0,
                   'seconds between checkpoints of the replay tables (--role=replay)')
config_flags.define_flags(registry.CONFIG_CLASSES)
FLAGS = flags.FLAGS


def resolve() -> Tuple[RunOptions, Any]:
    """The run's options and the agent's config from the parsed flags.

    Raises ValueError (one line) for unknown roles or launchers, a flag of
    another agent, or a value an options or config check refuses.
    """
    if FLAGS.role and FLAGS.role not in ROLES:
        raise ValueError(f'unknown --role={FLAGS.role!r}; choose one of {list(ROLES)}')
    if FLAGS.launcher not in LAUNCHERS:
        raise ValueError(f'unknown --launcher={FLAGS.launcher!r}; '
                         f'choose one of {list(LAUNCHERS)}')
    if FLAGS.role in ('learner', 'actor') and not FLAGS.replay_address:
        raise ValueError(f'--role={FLAGS.role} needs --replay_address=host:port')
    agent = registry.get(FLAGS.agent)
    config = config_flags.config_from_flags(FLAGS.agent, registry.CONFIG_CLASSES)
    per_agent = {name: getattr(FLAGS, name) for name in ('num_envs', 'num_steps', 'eval_episodes')}
    env, sequence = FLAGS.env, {}
    if FLAGS.tasks:
        env, sequence = _task_sequence(per_agent['num_steps'])
        per_agent['num_steps'] = sequence.pop('num_steps')
    elif FLAGS.steps_per_task is not None:
        raise ValueError('--steps_per_task needs --tasks')
    options = RunOptions(
        agent=FLAGS.agent, env=env, seed=FLAGS.seed, logdir=FLAGS.logdir, **sequence,
        step_mul=FLAGS.step_mul, fixed_step_mul=FLAGS.fixed_step_mul,
        eval_epsilon=FLAGS.eval_epsilon, target_return=FLAGS.target_return,
        log_interval_s=FLAGS.log_interval_s, checkpoint_interval_s=FLAGS.checkpoint_interval_s,
        **{**agent.run_defaults, **{k: v for k, v in per_agent.items() if v is not None}})
    return options, setup_lib.resolve_config(options, config)


def _task_sequence(num_steps: Optional[int]) -> Tuple[str, Dict[str, int]]:
    """`env` ('A,B') and the sequence's RunOptions fields from --tasks and its flags."""
    if FLAGS['env'].present:
        raise ValueError('give --env or --tasks, not both')
    if FLAGS.launcher != 'inprocess' or FLAGS.role:
        raise ValueError('task sequences run in one process (--launcher=inprocess)')
    tasks = task_sequence.parse_tasks(FLAGS.tasks)
    if FLAGS.steps_per_task is None or FLAGS.steps_per_task < 1:
        raise ValueError(f'--tasks needs --steps_per_task >= 1 (env steps per task visit), '
                         f'got {FLAGS.steps_per_task}')
    if FLAGS.task_cycles < 1:
        raise ValueError(f'--task_cycles must be >= 1, got {FLAGS.task_cycles}')
    total = len(tasks) * FLAGS.steps_per_task * FLAGS.task_cycles
    if num_steps is not None and num_steps != total:
        raise ValueError(f'--num_steps={num_steps} but the sequence is {total} env steps '
                         f'(tasks x --steps_per_task x --task_cycles); leave --num_steps out')
    return ','.join(tasks), {'steps_per_task': FLAGS.steps_per_task,
                             'task_cycles': FLAGS.task_cycles,
                             'eval_every_steps': FLAGS.eval_every_steps, 'num_steps': total}


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    try:
        options, config = resolve()
        rundir.check_logdir(options.logdir)
        # Roles first: the launcher hands its own flags (a preset's
        # --launcher=multiprocess included) to the roles it starts.
        if FLAGS.role:
            run_role(options, config)
            return
        if FLAGS.launcher == 'multiprocess':
            sys.exit(launcher.run(sys.argv[1:], FLAGS.num_actors, FLAGS.replay_port,
                                  FLAGS.connect_timeout_s))
        summary = inprocess.train(options, config)
    except (registry.UnknownAgentError, environments.EnvironmentSetupError, rundir.TrainingError,
            connection.ServerUnavailableError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        # Ctrl-C before training began, or a second one while saving: whatever was
        # being written may be incomplete; the checkpoints before it stay.
        print(f'interrupted before the run finished saving; complete checkpoints, if any, '
              f'stay in {os.path.join(FLAGS.logdir, rundir.CHECKPOINTS)}', file=sys.stderr,
              flush=True)
        os._exit(130)  # not through teardown: an actor thread or a data stream may still block
    if summary['interrupted']:
        sys.exit(130)  # 128 + SIGINT: the shell's status for a run Ctrl-C ended
    logging.info('eval return %.1f +- %.1f over %d episodes; %d env steps in %.1f s',
                 summary['eval_return_mean'], summary['eval_return_std'],
                 summary['eval_episodes'], summary['env_steps'], summary['wall_time_s'])


def run_role(options: RunOptions, config) -> None:
    stop = roles.stop_on_signals()
    if FLAGS.role == 'replay':
        roles.run_replay(options, config, FLAGS.replay_port, FLAGS.replay_checkpoint_interval_s,
                         stop)
    elif FLAGS.role == 'learner':
        roles.run_learner(options, config, FLAGS.replay_address, FLAGS.connect_timeout_s,
                          FLAGS.reconnect_timeout_s, stop)
        # Checkpoint, summary and SavedModel are written; exiting through Python's
        # teardown would close a data stream the server may hold blocked for up to
        # the data timeout (see `launch.learner_loop.LearnerRun.close_data`).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    else:
        roles.run_actor(options, config, FLAGS.replay_address, FLAGS.actor_id,
                        FLAGS.connect_timeout_s, FLAGS.reconnect_timeout_s, stop)


if __name__ == '__main__':
    app.run(main)
