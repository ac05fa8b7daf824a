"""Records an exported policy's episodes as demonstrations (`replay/demos.py`).

`python launch/record.py --saved_model=DIR --output=FILE [--env=ID] [--episodes=N]
[--seed=0] [--env_kwargs=k=v,...] [--sample]` plays N episodes (episode i reset
with seed + i; greedy actions, or with `--sample` actions the SavedModel samples,
unseeded) and writes every environment step to FILE with
`replay.demos.write_demos`. It prints one JSON line: the file, the environment,
the episodes and steps, the mean, min and max return and the returns. A policy
with a learned action repeat records each repeated environment step as a step
of its own. Bad input (no SavedModel, an unknown environment or one that does
not fit the policy or the format, an existing output file, `--episodes` < 1)
ends with one `error:` line and exit status 1.
"""

import json
import os
import sys
from typing import TYPE_CHECKING, Iterator, Tuple

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# Runnable as a script from a checkout as well as installed.

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from reverb_agents.launch.command_line import help as help_lib  # noqa: E402  (no TensorFlow)
from reverb_agents.replay import demos as demos_lib  # noqa: E402  (numpy and gymnasium only)

if TYPE_CHECKING:  # TensorFlow is imported in `main`, after the checks that need none
    from reverb_agents.launch.policies.load import Policy

flags.DEFINE_string('saved_model', None, 'directory written by launch/policies/export.py')
flags.DEFINE_string('env', None, 'gymnasium id (default: the one recorded in the model)')
flags.DEFINE_string('env_kwargs', '', 'keyword arguments for gymnasium.make, key=value,... '
                    '(default: those the model recorded, for its own environment)')
flags.DEFINE_integer('episodes', 10, 'episodes to record')
flags.DEFINE_integer('seed', 0, 'seed of the first episode (episode i uses seed + i)')
flags.DEFINE_bool('sample', False, 'sample actions from the policy (unseeded; default: '
                  'greedy / mean actions)')
flags.DEFINE_string('output', None, 'the .npz file to write (must not exist)')
FLAGS = flags.FLAGS

StepRecord = Tuple[np.ndarray, np.ndarray, float, bool, bool]


def play(policy: 'Policy', env: gym.Env, seed: int,
         deterministic: bool = True) -> Iterator[StepRecord]:
    """One episode, as `Policy.play` plays it, yielding every environment step:
    (observation before the step, action, reward, terminated, truncated)."""
    observation, _ = env.reset(seed=seed)
    state = policy.initial_state(1)
    prev_action, prev_reward, done = None, None, False
    while not done:
        action, state = policy.step(np.asarray(observation)[None], prev_action, prev_reward,
                                    state, deterministic)
        repeats = state.get('prev_step_mul')
        total = 0.0
        for _ in range(1 if repeats is None else int(repeats.numpy()[0])):
            next_observation, reward, terminated, truncated, _ = env.step(action[0])
            yield observation, action[0], float(reward), bool(terminated), bool(truncated)
            observation, total = next_observation, total + float(reward)
            done = terminated or truncated
            if done:
                break
        prev_action, prev_reward = action, np.array([total], np.float32)


def record(policy: 'Policy', env: gym.Env, env_id: str, episodes: int, seed: int, output: str,
           deterministic: bool = True) -> demos_lib.Demonstrations:
    """Plays `episodes` episodes (episode i reset with `seed + i`) and writes them."""
    steps = [s for i in range(episodes) for s in play(policy, env, seed + i, deterministic)]
    columns = [np.stack(column) for column in zip(*steps)]
    return demos_lib.write_demos(output, *columns, observation_space=env.observation_space,
                                 action_space=env.action_space, env_id=env_id)


def main(argv):
    del argv
    try:
        if FLAGS.episodes < 1:
            raise ValueError(f'--episodes must be >= 1, got {FLAGS.episodes}')
        for name in ('saved_model', 'output'):
            if not FLAGS[name].value:
                raise ValueError(f'--{name} is required ({FLAGS[name].help})')
        if os.path.exists(FLAGS.output):
            raise ValueError(f'{FLAGS.output}: the file exists; demonstrations are never '
                             f'overwritten')
        from reverb_agents.launch.runs import console
        console.quiet_native_output()  # TensorFlow's start-up lines, before it loads
        from reverb_agents.launch.runs.options import parse_env_kwargs
        from reverb_agents.launch.environments.factory import env_reward_size, make_env
        from reverb_agents.launch.policies.load import load_policy
        given = parse_env_kwargs(FLAGS.env_kwargs)
        policy = load_policy(FLAGS.saved_model)
        env_id, env_kwargs = policy.environment(FLAGS.env, given)
        env = make_env(env_id, env_kwargs)
        policy.check_env(env)
        demos_lib.check_spaces(env.observation_space, env.action_space)  # before playing
        if env_reward_size(env):
            raise ValueError(f'{env_id} has vector rewards; demonstrations store scalar ones')
        demos = record(policy, env, env_id, FLAGS.episodes, FLAGS.seed, FLAGS.output,
                       deterministic=not FLAGS.sample)
        env.close()
    except ValueError as e:  # PolicyError, EnvironmentSetupError, DemoError included
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    returns = demos_lib.episode_returns(demos)
    print(json.dumps({'output': FLAGS.output, 'env': env_id, 'episodes': len(returns),
                      'steps': len(demos.reward), 'return_mean': float(returns.mean()),
                      'return_min': float(returns.min()), 'return_max': float(returns.max()),
                      'returns': returns.tolist()}))


if __name__ == '__main__':
    app.run(main, flags_parser=help_lib.script_parser(
        FLAGS, __doc__, 'saved_model', '--saved_model=DIR --output=FILE [--env=ID] '
        '[--episodes=N] [--FLAG=VALUE ...]'))
