"""Runs episodes from an exported SavedModel alone (TensorFlow, gymnasium, numpy).

`python launch/evaluate.py --saved_model=DIR --env=ID --episodes=N [--video_dir=DIR]
[--eval_epsilon=E] [--env_kwargs=k=v,...]` prints the mean and std of the returns as
JSON. The model records its environment's id and the run's `--env_kwargs`
(`repeat_action_probability=0.0` for a Pong policy trained without sticky actions),
and the environment is made with them; `--env_kwargs` replaces them. With
`--eval_epsilon` (ALF's epsilon-greedy evaluation) each step samples its
action from the policy with probability E instead of taking the greedy one. Of this
library it needs `launch/policies/load.py` and `launch/environments/suites.py` (the MinAtar
and Atari wrappers) alone (TensorFlow, gymnasium, numpy), so it is also an example of
serving the SavedModel elsewhere. TensorFlow's start-up lines are filtered as
`launch/run.py` filters them (`launch/runs/console.py`) unless `--verbose`.
Bad input (not a SavedModel, an environment whose spaces do not match the
model's specs) ends with one `error:` line and exit status 1. On a bandit
(`Bandit-*-v0`, `launch/environments/bandits.py`) it also prints the regret per
episode.
"""

import json
import os
import sys
from typing import TYPE_CHECKING, Optional, Tuple

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from reverb_agents.launch.runs import console  # noqa: E402  (imports nothing heavy)

if __name__ == '__main__' and not console.verbose_requested(sys.argv):
    console.quiet_native_output()  # before TensorFlow prints its CUDA start-up lines

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from reverb_agents.launch.command_line import help as help_lib  # noqa: E402  (no TensorFlow)
from reverb_agents.launch.environments import suites  # noqa: E402  (gymnasium, numpy)
from reverb_agents.launch.environments.bandits import IDS as BANDITS  # noqa: E402  (registers them)

if TYPE_CHECKING:  # TensorFlow is imported in `main`, after flags and --help
    from reverb_agents.launch.policies.load import Policy

flags.DEFINE_string('saved_model', None, 'directory written by launch/policies/export.py')
flags.DEFINE_string('env', None, f'gymnasium id (default: the one recorded in the model); '
                    f'the bandits {sorted(BANDITS)} report regret too')
flags.DEFINE_string('env_kwargs', '', 'keyword arguments for gymnasium.make, key=value,... as '
                    'launch/run.py takes them (default: those the model recorded, for its own '
                    'environment), e.g. repeat_action_probability=0.0')
flags.DEFINE_integer('episodes', 10, 'episodes to run')
flags.DEFINE_integer('seed', 0, 'seed of the first episode (episode i uses seed + i)')
flags.DEFINE_bool('deterministic', True, 'greedy / mean actions (else sampled)')
flags.DEFINE_float('eval_epsilon', 0.0, 'probability, per step, of an action sampled from the '
                   'policy instead of the greedy one (ALF epsilon-greedy), in [0, 1]')
flags.DEFINE_string('video_dir', None, 'record videos here (environments rendering rgb_array)')
flags.DEFINE_list('reward_weights', None,
                  'for an environment with vector rewards: one weight per component '
                  '(returns are the weighted sums)')
flags.DEFINE_bool('verbose', False, "show TensorFlow's own log lines (its CUDA start-up lines)")
FLAGS = flags.FLAGS


class EvaluationError(ValueError):
    """A bad flag or an environment that cannot be made (the policy's own checks raise
    `launch.policies.load.PolicyError`): one `error:` line."""


def run_episodes(policy: 'Policy', env: gym.Env, episodes: int, seed: int,
                 deterministic: bool = True, reward_weights=None,
                 epsilon: float = 0.0) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """One environment, episodes one after another (episode i reset with `seed + i`),
    batch size 1. Returns the returns and, for a bandit, the regrets (else None);
    `epsilon`'s choices are seeded by `seed`."""
    rng = np.random.default_rng(seed)
    played = [policy.play(env, seed + i, deterministic, epsilon, rng, reward_weights)
              for i in range(episodes)]
    regrets = [r for _, r in played]
    return (np.asarray([g for g, _ in played]),
            None if None in regrets else np.asarray(regrets))


def main(argv):
    del argv
    from reverb_agents.launch.policies.load import Policy, PolicyError
    try:
        if not 0.0 <= FLAGS.eval_epsilon <= 1.0:
            raise EvaluationError(f'--eval_epsilon must be in [0, 1], got {FLAGS.eval_epsilon}')
        from reverb_agents.launch.runs.options import parse_env_kwargs
        try:
            given = parse_env_kwargs(FLAGS.env_kwargs)
        except ValueError as e:
            raise EvaluationError(str(e)) from None
        policy = Policy(FLAGS.saved_model)
        env_id, env_kwargs = policy.environment(FLAGS.env, given)
        try:
            # render_mode only when recording: not every environment takes the argument.
            # MinAtar and Atari get the wrappers the policy was trained behind.
            suites.register(env_id)
            env = suites.make(env_id, **env_kwargs,
                              **({'render_mode': 'rgb_array'} if FLAGS.video_dir else {}))
        except (gym.error.Error, ImportError, TypeError) as e:  # ImportError: `module:Env`
            # ids, extras; TypeError: a keyword the environment does not take
            raise EvaluationError(f'cannot make environment {env_id!r}: {e}') from None
        policy.check_env(env)
        if FLAGS.video_dir:
            try:
                env = gym.wrappers.RecordVideo(env, FLAGS.video_dir,
                                               episode_trigger=lambda i: True)
            except gym.error.DependencyNotInstalled as e:
                raise EvaluationError(f'--video_dir: {e}') from None
        try:
            weights = [float(w) for w in FLAGS.reward_weights] if FLAGS.reward_weights else None
        except ValueError:
            raise EvaluationError(f'--reward_weights takes comma-separated floats, got '
                                  f'{",".join(FLAGS.reward_weights)!r}') from None
        try:
            returns, regrets = run_episodes(policy, env, FLAGS.episodes, FLAGS.seed,
                                   FLAGS.deterministic, weights, FLAGS.eval_epsilon)
        except gym.error.DependencyNotInstalled as e:  # rendering needs pygame, etc.
            raise EvaluationError(f'--video_dir: {e}') from None
        env.close()
    except (EvaluationError, PolicyError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    print(json.dumps({'env': env_id, **({'env_kwargs': env_kwargs} if env_kwargs else {}),
                      'episodes': FLAGS.episodes,
                      'eval_epsilon': FLAGS.eval_epsilon,
                      'return_mean': float(returns.mean()), 'return_std': float(returns.std()),
                      **({} if regrets is None else {'regret_mean': float(regrets.mean()),
                                                     'regret_std': float(regrets.std())}),
                      'returns': returns.tolist()}))


if __name__ == '__main__':
    app.run(main, flags_parser=help_lib.script_parser(
        FLAGS, __doc__, 'saved_model', '--saved_model=DIR [--env=ID] [--episodes=N] '
        '[--FLAG=VALUE ...]'))
