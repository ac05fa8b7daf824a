"""Trains an agent: `python launch/run.py --agent=clear [--env=CartPole-v1] ...`.

Every field of the agent's config is also a flag (see `--helpfull`). Bad
input ends with one line on stderr and exit status 1.
"""

import os
import sys

# Runnable as a script from a checkout as well as installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app, flags, logging  # noqa: E402

from launch import config_flags, environments, registry, training  # noqa: E402

flags.DEFINE_string('agent', 'clear', f'agent to train: one of {sorted(registry.AGENTS)}')
_DEFAULTS = training.RunOptions()
flags.DEFINE_string('env', _DEFAULTS.env, 'any gymnasium environment id (or module:Env-v0)')


def _default_help(field: str) -> str:
    """'(default X; sac: Y)': RunOptions' default and the agents that differ."""
    parts = [f'default {getattr(_DEFAULTS, field)}'] + [
        f'{name}: {a.run_defaults[field]}' for name, a in sorted(registry.AGENTS.items())
        if field in a.run_defaults]
    return f'({"; ".join(parts)})'


flags.DEFINE_integer('num_envs', None,
                     f'environments per actor, stepped together {_default_help("num_envs")}')
flags.DEFINE_integer('num_steps', None, f'environment-step budget {_default_help("num_steps")}')
flags.DEFINE_integer('seed', _DEFAULTS.seed, 'random seed (environments, sampling, initialisation)')
flags.DEFINE_string('logdir', _DEFAULTS.logdir, 'TensorBoard logs, checkpoints, summary.json')
flags.DEFINE_integer('eval_episodes', None,
                     f'greedy evaluation episodes at the end {_default_help("eval_episodes")}')
flags.DEFINE_float('target_return', _DEFAULTS.target_return,
                   'stop early once the last 20 training episodes average this return')
flags.DEFINE_float('log_interval_s', _DEFAULTS.log_interval_s, 'seconds between progress lines')
flags.DEFINE_float('checkpoint_interval_s', _DEFAULTS.checkpoint_interval_s,
                   'seconds between learner checkpoints')
config_flags.define_flags([a.config_class for a in registry.AGENTS.values()])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    try:
        agent = registry.get(FLAGS.agent)
        config = config_flags.config_from_flags(agent.config_class)
        per_agent = {name: getattr(FLAGS, name) for name in ('num_envs', 'num_steps',
                                                            'eval_episodes')}
        options = training.RunOptions(
            agent=FLAGS.agent, env=FLAGS.env, seed=FLAGS.seed, logdir=FLAGS.logdir,
            target_return=FLAGS.target_return, log_interval_s=FLAGS.log_interval_s,
            checkpoint_interval_s=FLAGS.checkpoint_interval_s,
            **{**agent.run_defaults, **{k: v for k, v in per_agent.items() if v is not None}})
        summary = training.train(options, config)
    except (registry.UnknownAgentError, environments.EnvironmentSetupError, training.TrainingError,
            ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    logging.info('eval return %.1f +- %.1f over %d episodes; %d env steps in %.1f s',
                 summary['eval_return_mean'], summary['eval_return_std'],
                 summary['eval_episodes'], summary['env_steps'], summary['wall_time_s'])


if __name__ == '__main__':
    app.run(main)
