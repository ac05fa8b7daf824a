"""The Python API: docs/python-api.md's examples run as written; typed keywords reach the
run unchanged; environment objects and functions; callbacks; `Policy.predict`."""

import os
import re
import textwrap
import threading
from typing import Dict, List

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.launch import api
from reverb_agents.launch.policies import export
from reverb_agents.launch.learning.callbacks import StopTraining
from reverb_agents.launch.policies.load import PolicyError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, 'docs', 'python-api.md')


def doc_sections() -> Dict[str, List[str]]:
    """docs/python-api.md's `## ` sections that hold code -> their ```python blocks."""
    with open(DOC) as f:
        text = f.read()
    sections = {}
    for part in re.split(r'^## ', text, flags=re.M)[1:]:
        title, _, body = part.partition('\n')
        blocks = re.findall(r'^```python\n(.*?)^```', body, re.S | re.M)
        if blocks:
            sections[title.strip()] = blocks
    return sections


def run_section(title: str, tmp_path, forked_python) -> List[str]:
    """A section's blocks, in order, in one interpreter (forked from one that imported the
    library, `tests/forked.py`) started in `tmp_path` (its `runs/` go there); returns the
    printed lines. A traceback names the block."""
    harness = textwrap.dedent('''
        import json, sys
        namespace = {'__name__': '__main__'}
        for i, block in enumerate(json.load(open(sys.argv[1]))):
            exec(compile(block, f'docs/python-api.md block {i}', 'exec'), namespace)
    ''')
    (tmp_path / 'blocks.json').write_text(__import__('json').dumps(doc_sections()[title]))
    (tmp_path / 'harness.py').write_text(harness)
    result = forked_python('library', ['blocks.json'], script=str(tmp_path / 'harness.py'),
                           cwd=str(tmp_path), timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def printed(lines: List[str], label: str) -> str:
    """What the example printed after `label`."""
    found = [line[len(label):].strip() for line in lines if line.startswith(label)]
    assert found, (label, lines)
    return found[-1]


def test_every_section_with_code_is_tested():
    assert list(doc_sections()) == ['Train, stop early, predict', 'Your own environment']


def test_train_stop_early_predict_example(tmp_path, forked_python):
    """CLEAR's CartPole preset, a deterministic run stopped by EarlyStopping at its first
    evaluation of 500; the callback saw progress rows, evaluations and checkpoints;
    `predict` and the TensorFlow-only loop play the same greedy episode with the best
    evaluation's policy."""
    lines = run_section('Train, stop early, predict', tmp_path, forked_python)
    assert printed(lines, 'stopped by a callback:') == 'True'
    logdir = printed(lines, 'logdir:')
    assert logdir.startswith('runs/clear-CartPole-v1-') and (tmp_path / logdir).is_dir()
    assert printed(lines, 'TensorFlow-only return:') == printed(lines, 'predict return:')
    assert [line for line in lines if ' env steps: return ' in line], lines
    assert printed(lines, 'checkpoint:').startswith(f'{logdir}/checkpoints/ckpt-'), lines
    # Evaluations every 20k env steps until the stop, then the final one.
    evaluations = [line for line in lines if line.startswith('evaluation at ')]
    scheduled = [float(line.split(': ')[1].split()[0]) for line in evaluations[:-1]]
    points = [int(line.split()[2].rstrip(':').replace(',', '')) for line in evaluations[:-1]]
    assert points == list(range(20_000, 20_000 * (len(points) + 1), 20_000)), lines
    assert '(the best so far)' in evaluations[0]
    # The run is deterministic, so it is the same run every time: seed 2 reaches 500 at
    # 80k env steps (a random policy: about 20), and EarlyStopping stops it there.
    assert scheduled[-1] == 500 and len(scheduled) <= 5, lines
    assert float(printed(lines, 'eval return:')) == 500, lines
    # One greedy episode of the best policy, far above a random one's ~20.
    assert float(printed(lines, 'predict return:')) > 100, lines


def test_own_environment_example(tmp_path, forked_python):
    """The corridor learned from an object and from its class with `env_kwargs`: the
    shortest walk earns 1 - 0.1 x (length - 2), 0.7 for 5 cells and 0.5 for 7; a
    random walk earns about -3 and -5."""
    lines = run_section('Your own environment', tmp_path, forked_python)
    env_id, eval_return = printed(lines, 'object:').split()
    assert env_id == 'python/Corridor' and float(eval_return) >= 0.5, lines
    env_id, eval_return = printed(lines, 'class:').split()
    assert env_id == 'python/Corridor' and float(eval_return) >= 0.3, lines


class Uncopyable(gym.Env):
    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.lock = threading.Lock()  # deepcopy refuses it


@pytest.mark.parametrize('keywords,message', [
    (dict(lerning_rate=0.1), "unknown keyword 'lerning_rate': not a flag of launch/run.py "
                             "(did you mean 'learning_rate'?)"),
    (dict(num_envs=2.5), 'num_envs takes an int, got 2.5'),
    (dict(num_envs=True), 'num_envs takes an int, got True'),
    (dict(seed='1'), "seed takes an int, got '1'"),
    (dict(optimizer='sgd'), "optimizer must be one of"),
    (dict(learning_rate=0.0), 'learning_rate must be positive, got 0.0'),
    (dict(hidden_sizes=(8, 2.5)), 'hidden_sizes takes a tuple of ints, got (8, 2.5)'),
    (dict(hidden_sizes=64), 'hidden_sizes takes a tuple, got 64'),
    (dict(env_kwargs={'nope': 1}), "unexpected keyword argument 'nope'"),
    (dict(env_kwargs={'x': object()}), 'the values must be Python literals'),
    (dict(env=42), 'env must be a gymnasium id, a gymnasium.Env or a function'),
    (dict(env=Uncopyable()), 'env: cannot copy <Uncopyable instance> (TypeError: cannot '
                             "pickle '_thread.lock' object); a run makes several environments"),
    (dict(env=lambda: 3), 'returned int, not a gymnasium.Env'),
    (dict(callbacks=[3]), 'a callback must be a Callback or callable'),
    (dict(launcher='multiprocess'), 'train() runs in one process'),
])
def test_bad_input_raises_one_line_before_anything_is_written(tmp_path, keywords, message):
    with pytest.raises(ValueError) as raised:
        api.train(num_steps=100, logdir=str(tmp_path / 'run'), **keywords)
    assert message in str(raised.value) and '\n' not in str(raised.value)
    assert not os.listdir(tmp_path)


# One short real run: the clear_cartpole preset with a small LSTM, an environment
# function that records its keywords, typed keywords, and two callbacks, the second
# of which stops the run once the training episodes average 100.
ENV_KWARGS = {'label': 'p, q=r', 'names': ['a,b', 'x=y'], 'pair': (0.1, 1 / 3),
              'nested': {'k': [1, None, True]}}
LEARNING_RATE = 4e-3 / 3
NUM_STEPS = 300_000  # the preset's


@pytest.fixture(scope='module')
def short_run(tmp_path_factory):
    made, seen = [], []

    def cart_pole(**kwargs):
        made.append(kwargs)
        return gym.make('CartPole-v1')

    def stop_at_100(progress):
        if progress.recent_return is not None and progress.recent_return >= 100:
            raise StopTraining

    logdir = tmp_path_factory.mktemp('api') / 'run'
    # Progress rows (and callbacks) every 0.1 s: the run stops close to a mean of 100,
    # before the policy is perfect on every seed (test_predict_plays_... needs both).
    result = api.train('clear', cart_pole, seed=0, logdir=logdir, preset='clear_cartpole',
                       env_kwargs=ENV_KWARGS, learning_rate=LEARNING_RATE, hidden_sizes=(64, 32),
                       lstm_size=32, eval_episodes=3, log_interval_s=0.1,
                       callbacks=[seen.append, stop_at_100])
    return result, made, seen


def test_typed_keywords_reach_the_run_unchanged(short_run):
    result, made, _ = short_run
    assert result.env_id == 'python/cart_pole'
    assert made and all(kwargs == ENV_KWARGS for kwargs in made)
    assert type(made[0]['pair']) is tuple and type(made[0]['names']) is list
    recorded = result.policy.environment()[1]  # in the exported specs, for evaluate.py
    assert recorded == ENV_KWARGS and type(recorded['pair']) is tuple
    config = result.summary['config']
    assert config['optimizer']['learning_rate'] == LEARNING_RATE  # the same float, bit for bit
    assert config['hidden_sizes'] == (64, 32) and config['lstm_size'] == 32
    assert config['batch_size'] == 32  # the named preset's, for an id it does not name


def test_a_callback_stops_the_run_as_a_target_return_does(short_run):
    result, _, seen = short_run
    assert result.stopped_by_callback and seen[-1].recent_return >= 100
    assert all(p.recent_return is None or p.recent_return < 100 for p in seen[:-1])
    summary = result.summary
    assert summary['env_steps'] < NUM_STEPS and not summary['reached_target']
    assert summary['eval_episodes'] == 3 and summary['eval_return_mean'] is not None
    assert result.policy is not None and os.path.isdir(summary['saved_model'])
    last = seen[-1]
    assert last.logdir == result.logdir and last.learner_steps >= 1
    assert 0 < last.env_steps <= summary['env_steps'] and last.episodes >= 20
    assert 'loss/total_loss' in last.metrics and len(last.recent_returns) == 20
    assert [p.learner_steps for p in seen] == sorted(p.learner_steps for p in seen)


# Episode i of the predict test is cut at LIMITS[i] steps: the rows' episodes end apart
# even where the policy balances the pole to the end (500) on every seed.
LIMITS = (150, 300, 500)


def predict_episodes(policy, seeds, batched: bool):
    """Greedy returns of `predict`, one environment per seed (seed i cut at LIMITS[i]):
    one at a time, or all as one batch, each row started again (`episode_start`) once its
    episode ends until every seed has finished one episode."""
    if not batched:
        returns = []
        for seed, limit in zip(seeds, LIMITS):
            env = gym.make('CartPole-v1', max_episode_steps=limit)
            observation, _ = env.reset(seed=seed)
            state, reward, done, total = None, None, False, 0.0
            while not done:
                action, state = policy.predict(observation, state, reward=reward)
                observation, reward, terminated, truncated, _ = env.step(action)
                total, done = total + reward, terminated or truncated
            returns.append(total)
        return returns
    envs = [gym.make('CartPole-v1', max_episode_steps=limit) for limit in LIMITS[:len(seeds)]]
    observations = np.stack([env.reset(seed=seed)[0] for env, seed in zip(envs, seeds)])
    rewards, starts = np.zeros(len(seeds)), np.zeros(len(seeds), bool)
    totals, returns, state = np.zeros(len(seeds)), [None] * len(seeds), None
    while any(r is None for r in returns):
        actions, state = policy.predict(observations, state, starts, reward=rewards)
        for i, env in enumerate(envs):
            observations[i], rewards[i], terminated, truncated, _ = env.step(actions[i])
            totals[i] += rewards[i]
            starts[i] = terminated or truncated
            if starts[i]:
                returns[i] = totals[i] if returns[i] is None else returns[i]
                observations[i], totals[i] = env.reset(seed=seeds[i] + 1000)[0], 0.0
    return returns


def test_predict_plays_as_the_library_one_at_a_time_and_batched(short_run):
    """Against the library's own greedy policy (first step marked, previous action and
    reward fed): the same returns, also as one batch restarted row by row. The policy
    is recurrent and has learned; its episodes end apart (LIMITS)."""
    from tests.conftest import library_greedy_returns

    result, _, _ = short_run
    core, action_space, _, env_id = export.restore_core(result.logdir)
    seeds = [100, 101, 102]
    expected = [library_greedy_returns(core, action_space, 'CartPole-v1', [seed],
                                       gym.make('CartPole-v1', max_episode_steps=limit))[0]
                for seed, limit in zip(seeds, LIMITS)]
    assert len(set(expected)) > 1 and max(expected) > 50, expected
    assert predict_episodes(result.policy, seeds, batched=False) == expected
    assert predict_episodes(result.policy, seeds, batched=True) == expected


def test_predict_says_what_is_missing(short_run):
    policy = short_run[0].policy
    observation, _ = gym.make('CartPole-v1').reset(seed=0)
    action, state = policy.predict(observation)  # a new episode: no reward needed
    assert np.ndim(action) == 0 and not state.batched
    with pytest.raises(PolicyError, match='reads the previous reward: pass predict'):
        policy.predict(observation, state)
    policy.predict(observation, state, episode_start=True)  # a new episode again
    with pytest.raises(PolicyError, match='the state is of 1 episodes, the observation of 2'):
        policy.predict(np.stack([observation] * 2), state, reward=[1.0, 1.0])
    with pytest.raises(PolicyError, match=r'takes observations of shape \[4\]'):
        policy.predict(np.zeros([2, 3, 4]))


def test_the_readme_example_runs_as_written(tmp_path, forked_python):
    """README's Python block: a callback stopping CLEAR, a `predict` loop, and SAC on an
    environment object."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        readme = f.read()
    section = readme[readme.index('\n## Python API'):]
    block = re.search(r'^```python\n(.*?)^```', section, re.S | re.M).group(1)
    (tmp_path / 'readme.py').write_text(block)
    result = forked_python('library', [], script=str(tmp_path / 'readme.py'), cwd=str(tmp_path),
                           timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert float(printed(lines, 'eval return:')) > 100, lines  # a random policy: about 20
    assert float(printed(lines, 'predict return:')) > 100, lines
    env_id, steps = printed(lines, 'own environment:').split()
    assert env_id.startswith('python/') and int(steps) >= 1000, lines
