"""The real actor loop -> SequenceWriter -> Reverb, checked against replay/trajectory.py.

`launch.acting.actor.Actor` runs a bounded number of steps on real gymnasium vector
environments, writing into a real in-process Reverb server; the `queue` items
are then read back in FIFO order and stitched into each environment's full
trajectory (consecutive items overlap by one step).
"""

import inspect

import gymnasium as gym
import numpy as np
import pytest
import reverb
import tensorflow as tf

from reverb_agents.launch.environments import factory
from reverb_agents.launch.acting.actor import Actor
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs
from reverb_agents.networks.observations import observation_spec
from reverb_agents.replay import dataset as dataset_lib
from reverb_agents.replay import tables, trajectory
from reverb_agents.replay.writer import SequenceWriter

NUM_ENVS = 2
SEQUENCE_LENGTH = 5
TIMEOUT_MS = 2000

# --- a tiny environment whose episodes end at known steps ---------------------

SCHEDULED_ENV_ID = 'ReplayTestScheduledEpisodes-v0'
MAX_EPISODE_STEPS = 5
# Per episode: the step count at which the environment terminates, or None
# (never: TimeLimit truncates at MAX_EPISODE_STEPS). 5 terminates and
# truncates at once, which is a termination.
SCHEDULE = (3, None, 2, 5, None, 1)


def _episode_end(seed, episode):
    """(length, terminated) of episode `episode` of the env reset with `seed`."""
    terminate_at = SCHEDULE[(seed + episode) % len(SCHEDULE)]
    if terminate_at is None:
        return MAX_EPISODE_STEPS, False
    return terminate_at, True


def _reward(t, action):
    """Reward of the `t`-th action (1-based) of an episode; exact in float32."""
    return float(t) + 0.5 * float(action)


class ScheduledEpisodes(gym.Env):
    """Observation [episode index, steps taken in the episode, seed]."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self._seed = -1
        self._episode = -1
        self._t = 0

    def _obs(self):
        return np.array([self._episode, self._t, self._seed], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._seed, self._episode = seed, -1
        self._episode += 1
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        length, terminated = _episode_end(self._seed, self._episode)
        assert self._t <= length, 'stepped past the end of an episode'
        return self._obs(), _reward(self._t, action), terminated and self._t == length, False, {}


if SCHEDULED_ENV_ID not in gym.registry:
    gym.register(SCHEDULED_ENV_ID, entry_point=ScheduledEpisodes,
                 max_episode_steps=MAX_EPISODE_STEPS)


# --- running the actor ----------------------------------------------------------

class Run:
    """What one bounded actor run produced."""

    def __init__(self, core, action_space, actor, items, stop_calls, envs):
        self.core = core
        self.action_space = action_space
        self.actor = actor
        self.items = items  # [Sequence] in queue (FIFO) order
        self.stop_calls = stop_calls
        self.envs = envs
        self._trajectories = {}

    def trajectory(self, b):
        """Env `b`'s steps `[T, ...]`: its items stitched, overlaps removed."""
        if b not in self._trajectories:
            own = [item.steps for item in self.items[b::NUM_ENVS]]
            pieces = [own[0]] + [tf.nest.map_structure(lambda x: x[1:], s) for s in own[1:]]
            self._trajectories[b] = tf.nest.map_structure(
                lambda *xs: np.concatenate(xs), *pieces)
        return self._trajectories[b]


def _drain_queue(address, signature, timeout_ms=300):
    dataset = dataset_lib.item_dataset(
        address, tables.QUEUE, signature,
        max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
        rate_limiter_timeout_ms=timeout_ms)
    return [tf.nest.map_structure(lambda x: x.numpy(), sample.data) for sample in dataset]


def _actor_kwargs(path):
    return {} if path == 'default' else {'use_numpy': path == 'numpy'}


def _run_actor(env_id, num_steps, seed, path):
    tf.random.set_seed(seed)
    envs = factory.make_vector_env(env_id, NUM_ENVS, seed)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs, buffer_length=1000)
    action_space = factory.check_spaces(env_id, envs)
    obs_space = envs.single_observation_space
    obs_spec = observation_spec(obs_space)
    core = ActorCriticCore(obs_space, action_space, hidden_sizes=(8,), lstm_size=8)
    core.create_variables()
    step_spec = trajectory.step_spec(obs_spec, action_space.action_specs(),
                                     action_space.param_specs())
    state_spec = tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape[1:], x.dtype),
                                       core.initial_state(1))
    signature = trajectory.sequence_signature(step_spec, state_spec, SEQUENCE_LENGTH)
    server = reverb.Server(tables.make_tables(
        signature, tables.variables_signature(list(core.variables)),
        queue_size=1000, replay_size=1000))
    address = f'localhost:{server.port}'
    try:
        writer = SequenceWriter(reverb.Client(address), step_spec, state_spec, NUM_ENVS,
                                SEQUENCE_LENGTH, [tables.QUEUE])
        actor = Actor(envs, core, action_space, writer, fetcher=None, seed=seed,
                      **_actor_kwargs(path))
        if path != 'default' and hasattr(actor, 'policy'):
            assert actor.policy.uses_numpy == (path == 'numpy')
        calls = [0]

        def stop():
            calls[0] += 1
            return calls[0] > num_steps

        actor.run(stop, flush_timeout_ms=TIMEOUT_MS)
        writer.flush(timeout_ms=TIMEOUT_MS)
        writer.close()
        items = _drain_queue(address, signature)
    finally:
        server.stop()
    return Run(core, action_space, actor, items, calls[0], envs)


# 1 + 10 * (L - 1) steps: every step of the run is in exactly the 10 items per env.
SCHEDULED_STEPS = 1 + 10 * (SEQUENCE_LENGTH - 1)
CARTPOLE_STEPS = 1 + 30 * (SEQUENCE_LENGTH - 1)
RUNS = {'scheduled': (SCHEDULED_ENV_ID, SCHEDULED_STEPS, 100),
        'cartpole': ('CartPole-v1', CARTPOLE_STEPS, 3)}
# The actor acts through a numpy mirror of the core when it can, else through
# TF; the trajectory must be the same either way, so both paths are run.
ACTOR_PATHS = (['numpy', 'tf'] if 'use_numpy' in inspect.signature(Actor).parameters
               else ['default'])


@pytest.fixture(scope='module')
def runs():
    """(run name, actor path) -> Run, each made once per module."""
    cache = {}

    def get(name, path):
        if (name, path) not in cache:
            env_id, num_steps, seed = RUNS[name]
            cache[name, path] = _run_actor(env_id, num_steps, seed, path)
        return cache[name, path]

    return get


@pytest.fixture(params=ACTOR_PATHS)
def scheduled_run(request, runs):
    return runs('scheduled', request.param)


@pytest.fixture(params=ACTOR_PATHS)
def cartpole_run(request, runs):
    return runs('cartpole', request.param)


@pytest.fixture(params=[(name, path) for name in RUNS for path in ACTOR_PATHS],
                ids=lambda p: '-'.join(p))
def run_and_steps(request, runs):
    name, path = request.param
    return runs(name, path), RUNS[name][1]


# --- items ------------------------------------------------------------------------

def test_items_cover_the_run(run_and_steps):
    run, num_steps = run_and_steps
    assert run.stop_calls == num_steps + 1  # once per step, never waited on the queue
    num_sequences = (num_steps - 1) // (SEQUENCE_LENGTH - 1)
    assert len(run.items) == NUM_ENVS * num_sequences
    for b in range(NUM_ENVS):
        assert run.trajectory(b).reward.shape == (num_steps,)
        own = run.items[b::NUM_ENVS]
        for previous, current in zip(own, own[1:]):
            for p, c in zip(tf.nest.flatten(previous.steps), tf.nest.flatten(current.steps)):
                np.testing.assert_array_equal(c[0], p[-1])
    # The first item of each env starts the run: first step, zero core state.
    for b in range(NUM_ENVS):
        assert run.items[b].steps.first[0]
        for s in run.items[b].core_state:
            np.testing.assert_array_equal(s, np.zeros_like(s))


def test_core_state_is_the_state_before_the_first_step(run_and_steps):
    """Unrolling the (same) core from each item's core_state reproduces the actor's outputs."""
    run, _ = run_and_steps
    steps = tf.nest.map_structure(lambda *xs: np.stack(xs, 1), *[i.steps for i in run.items])
    state = tf.nest.map_structure(lambda *xs: np.stack(xs), *[i.core_state for i in run.items])
    outputs, _ = run.core.unroll(
        CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first), state)
    for params, behaviour in zip(outputs.policy_params, steps.behaviour_params):
        np.testing.assert_allclose(params.numpy(), behaviour, atol=1e-5)
    np.testing.assert_allclose(outputs.baseline.numpy(), steps.behaviour_baseline, atol=1e-5)
    # Non-trivial: without the stored state the outputs would differ.
    zero_state = tf.nest.map_structure(tf.zeros_like, state)
    wrong, _ = run.core.unroll(
        CoreInputs(steps.observation, steps.prev_action, steps.prev_reward, steps.first),
        zero_state)
    assert not np.allclose(wrong.baseline.numpy(), steps.behaviour_baseline, atol=1e-6)


# --- (a) terminated vs truncated ----------------------------------------------------

def _expected_scheduled_trajectory(seed, num_steps):
    """Per step (observation, first, discount, is_placeholder, reward_step) of one env."""
    rows = []
    episode = 0
    while len(rows) < num_steps:
        length, terminated = _episode_end(seed, episode)
        for t in range(length):
            discount = 0.0 if (terminated and t == length - 1) else 1.0
            rows.append(([episode, t, seed], t == 0, discount, False, t + 1))
        # The placeholder: final observation, reward 0, discount 0.
        rows.append(([episode, length, seed], False, 0.0, True, None))
        episode += 1
    return rows[:num_steps]


def test_scheduled_episode_ends(scheduled_run):
    for b in range(NUM_ENVS):
        steps = scheduled_run.trajectory(b)
        seed = 100 + b
        expected = _expected_scheduled_trajectory(seed, SCHEDULED_STEPS)
        np.testing.assert_array_equal(steps.observation, [e[0] for e in expected])
        np.testing.assert_array_equal(steps.first, [e[1] for e in expected])
        np.testing.assert_array_equal(steps.discount, [e[2] for e in expected])
        for t, (_, _, _, placeholder, k) in enumerate(expected):
            if placeholder:
                assert steps.reward[t] == 0.0, t
            else:
                assert steps.reward[t] == _reward(k, steps.action[0][t]), t
        # Both kinds of ending (and the terminated-at-the-time-limit one) occurred.
        ends = {_episode_end(seed, e) for e in range(int(steps.observation[-1, 0]))}
        assert {(MAX_EPISODE_STEPS, False), (MAX_EPISODE_STEPS, True)} <= ends
        assert any(terminated and length < MAX_EPISODE_STEPS for length, terminated in ends)


def test_episode_end_semantics_from_first(run_and_steps):
    """The rules of trajectory.py read off `first` alone (any environment)."""
    run, _ = run_and_steps
    for b in range(NUM_ENVS):
        steps = run.trajectory(b)
        first = steps.first
        placeholder = np.zeros_like(first)
        placeholder[:-1] = first[1:]  # step t is a placeholder iff first[t + 1]
        valid = trajectory.valid_mask(tf.constant(first)).numpy()
        np.testing.assert_array_equal(valid, 1.0 - placeholder[:-1])
        assert placeholder[:-1].any(), 'no episode ended; make the run longer'
        for t in np.flatnonzero(placeholder[:-1]):
            assert steps.reward[t] == 0.0 and steps.discount[t] == 0.0
            assert not first[t]  # an episode holds at least one real step
            assert t >= 1 and not placeholder[t - 1]
        # A zero discount on a real step ends the episode: a placeholder follows.
        # (`placeholder` is known up to T - 2, `first[T]` is not stored.)
        for t in np.flatnonzero((steps.discount[:-2] == 0.0) & ~placeholder[:-2]):
            assert placeholder[t + 1], t
        np.testing.assert_array_equal(np.unique(steps.discount), [0.0, 1.0])


def test_cartpole_terminations(cartpole_run):
    """CartPole episodes of a random policy all terminate (no 500-step time limit)."""
    for b in range(NUM_ENVS):
        steps = cartpole_run.trajectory(b)
        placeholder = np.append(steps.first[1:], False)
        real = ~placeholder
        np.testing.assert_array_equal(steps.reward, real.astype(np.float32))
        ends = np.flatnonzero(placeholder) - 1
        np.testing.assert_array_equal(np.flatnonzero(real & (steps.discount == 0)), ends)
        # CartPole terminates when the pole angle exceeds 12 degrees or the cart leaves
        # [-2.4, 2.4]: the final observation in the placeholder shows it.
        angle, position = 12 * 2 * np.pi / 360, 2.4
        final = np.abs(steps.observation[placeholder])
        assert np.all((final[:, 2] > angle - 1e-6) | (final[:, 0] > position - 1e-6))
        before = np.abs(steps.observation[real])
        assert np.all((before[:, 2] <= angle + 1e-6) & (before[:, 0] <= position + 1e-6))


# --- (b) prev_action / prev_reward ------------------------------------------------

def test_prev_action_and_reward(run_and_steps):
    run, _ = run_and_steps
    for b in range(NUM_ENVS):
        steps = run.trajectory(b)
        inside = np.flatnonzero(~steps.first[1:]) + 1  # t >= 1 within an episode
        assert len(inside) > len(steps.first) // 2
        for prev, action in zip(steps.prev_action, steps.action):
            np.testing.assert_array_equal(prev[inside], action[inside - 1])
        np.testing.assert_array_equal(steps.prev_reward[inside], steps.reward[inside - 1])
        # The run starts with zeros.
        assert steps.prev_reward[0] == 0.0
        assert all(prev[0] == 0 for prev in steps.prev_action)


# --- (c) behaviour_log_prob ---------------------------------------------------------

def test_behaviour_log_prob(run_and_steps):
    run, _ = run_and_steps
    for b in range(NUM_ENVS):
        steps = run.trajectory(b)
        (logits,), (action,) = steps.behaviour_params, steps.action
        log_softmax = logits - np.log(np.sum(np.exp(logits), -1, keepdims=True))
        expected = log_softmax[np.arange(len(action)), action]
        np.testing.assert_allclose(steps.behaviour_log_prob, expected, atol=1e-5)
        assert np.all(steps.behaviour_log_prob < 0)
        assert set(np.unique(action)) <= {0, 1}


# --- (d) episode returns ------------------------------------------------------------

def test_episode_returns_match_the_environment(run_and_steps):
    run, _ = run_and_steps
    new = run.actor.stats.pop_new()
    env_returns = list(run.envs.return_queue)
    env_lengths = list(run.envs.length_queue)
    assert len(new) == len(env_returns) > 0
    assert run.actor.stats.num_episodes == len(env_returns)
    np.testing.assert_allclose([r for r, _ in new], env_returns, rtol=1e-6)
    assert [n for _, n in new] == env_lengths
    # Env steps count real steps only (no placeholders).
    num_placeholders = sum(int(run.trajectory(b).first[1:].sum()) for b in range(NUM_ENVS))
    total = NUM_ENVS * len(run.trajectory(0).first)
    assert run.actor.stats.env_steps == total - num_placeholders
    # And from the stored trajectory: each episode's return is its rewards' sum.
    from_items = []
    for t in range(len(run.trajectory(0).first)):
        for b in range(NUM_ENVS):
            steps = run.trajectory(b)
            if t + 1 < len(steps.first) and steps.first[t + 1]:  # t is a placeholder
                start = np.flatnonzero(steps.first[:t])[-1]
                from_items.append(float(np.sum(steps.reward[start:t])))
    # Episodes are recorded at their last real step, i.e. one step before the
    # placeholder, in env order; the last step's ending has no placeholder yet.
    assert from_items == pytest.approx(env_returns[:len(from_items)])
    assert len(env_returns) - len(from_items) <= NUM_ENVS


def test_scheduled_returns_follow_the_schedule(scheduled_run):
    """The recorded returns are those of the scheduled episodes and the taken actions."""
    for b in range(NUM_ENVS):
        steps = scheduled_run.trajectory(b)
        seed = 100 + b
        starts = np.flatnonzero(steps.first)
        for e, start in enumerate(starts[:-1]):
            length, _ = _episode_end(seed, e)
            actions = steps.action[0][start:start + length]
            expected = sum(_reward(k + 1, a) for k, a in enumerate(actions))
            assert float(np.sum(steps.reward[start:start + length])) == expected
