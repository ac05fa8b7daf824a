"""Runs episodes from an exported SavedModel alone (TensorFlow, gymnasium, numpy).

`python launch/evaluate.py --saved_model=DIR --env=ID --episodes=N [--video_dir=DIR]
[--eval_epsilon=E]` prints the mean and std of the returns as JSON. With
`--eval_epsilon` (ALF's epsilon-greedy evaluation) each step samples its
action from the policy with probability E instead of taking the greedy one. It imports nothing from this
library, so it is also an example of serving the SavedModel elsewhere.
Bad input (not a SavedModel, an environment whose spaces do not match the
model's specs) ends with one `error:` line and exit status 1.
"""

import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

flags.DEFINE_string('saved_model', None, 'directory written by launch/export.py')
flags.DEFINE_string('env', None, 'gymnasium id (default: the one recorded in the model)')
flags.DEFINE_integer('episodes', 10, 'episodes to run')
flags.DEFINE_integer('seed', 0, 'seed of the first episode (episode i uses seed + i)')
flags.DEFINE_bool('deterministic', True, 'greedy / mean actions (else sampled)')
flags.DEFINE_float('eval_epsilon', 0.0, 'probability, per step, of an action sampled from the '
                   'policy instead of the greedy one (ALF epsilon-greedy), in [0, 1]')
flags.DEFINE_string('video_dir', None, 'record videos here (environments rendering rgb_array)')
flags.DEFINE_list('reward_weights', None,
                  'for an environment with vector rewards: one weight per component '
                  '(returns are the weighted sums)')
FLAGS = flags.FLAGS


class EvaluationError(ValueError):
    pass


def load(saved_model: str):
    """(loaded model, specs dict); raises EvaluationError for anything else."""
    if not tf.saved_model.contains_saved_model(saved_model or ''):
        raise EvaluationError(f'{saved_model!r} is not a SavedModel directory')
    model = tf.saved_model.load(saved_model)
    if 'specs' not in model.signatures:
        raise EvaluationError(f'{saved_model!r} is a SavedModel without a policy `specs` signature')
    specs = json.loads(model.signatures['specs']()['specs'].numpy().decode())
    return model, specs


def check_env(env: gym.Env, specs: dict) -> None:
    observation = env.observation_space
    shape = list(getattr(observation, 'shape', None) or [])
    if shape != specs['observation']['shape']:
        raise EvaluationError(
            f'the environment observes {observation} but the policy expects shape '
            f'{specs["observation"]["shape"]} (exported for {specs["env"]})')
    action_shape = list(env.action_space.shape or [])
    if action_shape != specs['action']['shape']:
        raise EvaluationError(f'the environment acts in {env.action_space} but the policy '
                              f'outputs {specs["action"]["space"]}')


def scalar_reward(reward, weights) -> float:
    """The reward, or the weighted sum of a vector one."""
    reward = np.asarray(reward, np.float64)
    if reward.ndim == 0:
        if weights is not None:
            raise EvaluationError('--reward_weights given but the rewards are scalars')
        return float(reward)
    if weights is None or len(weights) != reward.size:
        raise EvaluationError(f'the environment\'s rewards have {reward.size} components: pass '
                              f'--reward_weights with {reward.size} numbers')
    return float(reward.ravel() @ np.asarray(weights, np.float64))


def run_episodes(model, specs: dict, env: gym.Env, episodes: int, seed: int,
                 deterministic: bool = True, reward_weights=None,
                 epsilon: float = 0.0) -> np.ndarray:
    """One environment, episodes one after another, batch size 1. Returns the returns
    (vector rewards weighted by `reward_weights`). With probability `epsilon` a step
    samples its action from the policy (`step`) instead of taking the greedy one
    (ALF's epsilon-greedy); the choices are seeded by `seed`."""
    step = model.signatures['step_deterministic' if deterministic else 'step']
    sample = model.signatures['step']
    rng = np.random.default_rng(seed)
    obs_dtype = tf.as_dtype(specs['observation']['dtype'])
    action_dtype = tf.as_dtype(specs['action']['dtype'])
    returns = []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)
        inputs = dict(model.signatures['initial_state'](batch_size=tf.constant(1)))
        # "No previous action" at the first step (models exported before the specs
        # said so took zeros).
        first = specs.get('first_prev_action', 0)
        inputs['prev_action'] = tf.cast(
            tf.broadcast_to(first, [1, *specs['action']['shape']]), action_dtype)
        inputs['prev_reward'] = tf.zeros([1], tf.float32)
        if 'step_mul' in specs:  # a learned action repeat: the policy says how often
            inputs['prev_step_mul'] = tf.zeros([1], tf.int32)
        total, done = 0.0, False
        while not done:
            inputs['observation'] = tf.constant(np.asarray(observation)[None], obs_dtype)
            explore = epsilon and rng.random() < epsilon
            outputs = (sample if explore else step)(**inputs)
            action = outputs.pop('action')
            repeats = outputs.pop('step_mul', None)
            reward = 0.0
            for _ in range(1 if repeats is None else int(repeats.numpy()[0])):
                observation, one, terminated, truncated, _ = env.step(action.numpy()[0])
                reward += scalar_reward(one, reward_weights)
                done = terminated or truncated
                if done:
                    break
            total += reward
            if repeats is not None:
                inputs['prev_step_mul'] = repeats
            inputs.update(outputs)
            inputs['prev_action'] = action
            inputs['prev_reward'] = tf.constant([reward], tf.float32)
        returns.append(total)
    return np.asarray(returns)


def main(argv):
    del argv
    try:
        if not 0.0 <= FLAGS.eval_epsilon <= 1.0:
            raise EvaluationError(f'--eval_epsilon must be in [0, 1], got {FLAGS.eval_epsilon}')
        model, specs = load(FLAGS.saved_model)
        env_id = FLAGS.env or specs['env']
        try:
            # render_mode only when recording: not every environment takes the argument.
            env = gym.make(env_id, **({'render_mode': 'rgb_array'} if FLAGS.video_dir else {}))
        except (gym.error.Error, ImportError) as e:  # ImportError: `module:Env` ids
            raise EvaluationError(f'cannot make environment {env_id!r}: {e}') from None
        check_env(env, specs)
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
            returns = run_episodes(model, specs, env, FLAGS.episodes, FLAGS.seed,
                                   FLAGS.deterministic, weights, FLAGS.eval_epsilon)
        except gym.error.DependencyNotInstalled as e:  # rendering needs pygame, etc.
            raise EvaluationError(f'--video_dir: {e}') from None
        env.close()
    except EvaluationError as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    print(json.dumps({'env': env_id, 'episodes': FLAGS.episodes,
                      'eval_epsilon': FLAGS.eval_epsilon,
                      'return_mean': float(returns.mean()), 'return_std': float(returns.std()),
                      'returns': returns.tolist()}))


if __name__ == '__main__':
    app.run(main)
