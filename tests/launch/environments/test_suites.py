"""Environment suites behind extras (launch/environments/suites.py): MinAtar, Atari, MuJoCo."""
import sys

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.launch import environments
from reverb_agents.launch.environments import factory, suites


def test_suites_and_bandits_load_no_tensorflow(fresh_python):
    """What `launch/tools/evaluate.py` imports of the environments: no TensorFlow, no
    networks, no wiring (the package's `__init__` imports nothing)."""
    code = ('import sys\n'
            'from reverb_agents.launch.environments import bandits, suites\n'
            'suites.register("CartPole-v1"); suites.make("Bandit-Dependent-v0").reset(seed=0)\n'
            'print(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"\n'
            '             or m.startswith("reverb_agents.")\n'
            '             and not m.startswith("reverb_agents.launch.environments")))\n')
    assert fresh_python(code)[-1] == "['reverb_agents.launch']"


def test_minatar_images_are_uint8_grids_of_0_and_255():
    envs = factory.make_vector_env('MinAtar/Breakout-v1', 2, seed=0)
    try:
        space = envs.single_observation_space
        assert space.shape == (10, 10, 4) and space.dtype == np.uint8
        observation, _ = envs.reset(seed=0)
        assert observation.dtype == np.uint8 and observation.shape == (2, 10, 10, 4)
        assert set(np.unique(observation)) == {0, 255}
        assert envs.single_action_space == gym.spaces.Discrete(3)  # v1: minimal action set
    finally:
        envs.close()


def _play(env, steps, seed=0):
    """Random actions for up to `steps` steps or the episode's end: the per-step results."""
    rng = np.random.default_rng(seed)
    observation, info = env.reset(seed=seed)
    out = [(observation, 0.0, False, False, info)]
    for _ in range(steps):
        out.append(env.step(int(rng.integers(env.action_space.n))))
        if out[-1][2] or out[-1][3]:
            break
    return out


def test_atari_chain_stacks_84x84_grey_frames_last():
    env = factory.make_env('ALE/Breakout-v5')
    try:
        assert env.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        steps = _play(env, 30)
        first = steps[0][0]
        # Reset fills the stack with the first frame.
        assert all(np.array_equal(first[..., 0], first[..., k]) for k in range(4))
        for (before, *_), (after, _, _, _, info) in zip(steps[1:-1], steps[2:]):
            assert after.dtype == np.uint8 and after.shape == (84, 84, 4)
            np.testing.assert_array_equal(after[..., :3], before[..., 1:])  # oldest frame out
            assert info['frames'] == 4  # frame skip 4: env_steps count emulator frames
        assert any(not np.array_equal(a[0][..., 3], b[0][..., 3])
                   for a, b in zip(steps[1:], steps[2:]))
    finally:
        env.close()


def test_atari_life_loss_ends_an_episode_only_when_asked():
    """Breakout has 5 lives: random play loses one within a few hundred steps."""
    def lives_at_end(**kwargs):
        env = factory.make_env('ALE/Breakout-v5', kwargs)
        try:
            steps = _play(env, 400)
            return steps[-1][2], env.unwrapped.ale.lives()
        finally:
            env.close()

    terminated, lives = lives_at_end(terminal_on_life_loss=True)
    assert terminated and lives == 4  # ended at the first lost life
    terminated, lives = lives_at_end()
    assert lives < 5 and not (terminated and lives > 0)  # played on after losing lives


def test_fire_to_serve_serves_the_ball_for_a_policy_that_never_fires():
    """Breakout waits for FIRE: a policy that only plays NOOP keeps its 5 lives for ever
    unless `fire_to_serve` serves each ball for it (then the ball is missed, again and
    again, until the game ends)."""
    def noop_play(**kwargs):
        env = factory.make_env('ALE/Breakout-v5', {'repeat_action_probability': 0.0, **kwargs})
        try:
            env.reset(seed=0)
            for step in range(2000):
                _, _, terminated, truncated, info = env.step(0)
                assert info['frames'] >= 1
                if terminated or truncated:
                    return step, env.unwrapped.ale.lives(), terminated
            return step, env.unwrapped.ale.lives(), False
        finally:
            env.close()

    _, lives, terminated = noop_play()
    assert lives == 5 and not terminated
    steps, lives, terminated = noop_play(fire_to_serve=True)
    assert terminated and lives == 0 and steps < 2000


def test_fire_to_serve_on_a_game_without_fire_is_one_error():
    with pytest.raises(environments.EnvironmentSetupError, match='has no FIRE action'):
        factory.make_env('ALE/Freeway-v5', {'fire_to_serve': True})


def test_mujoco_environments_are_recognised_and_made():
    assert suites.suite_of('HalfCheetah-v5') == suites.MUJOCO
    assert suites.suite_of('CartPole-v1') is None
    env = factory.make_env('Hopper-v5')
    try:
        assert env.observation_space.shape == (11,) and env.action_space.shape == (3,)
    finally:
        env.close()


@pytest.mark.parametrize('env_id, module, extra', [
    ('MinAtar/Breakout-v1', 'minatar.gym', 'minatar'),
    ('ALE/Pong-v5', 'ale_py', 'atari'),
    ('HalfCheetah-v5', 'mujoco', 'mujoco'),
])
def test_a_missing_extra_is_one_line_naming_it(monkeypatch, env_id, module, extra):
    # As on a machine without the extra: the package cannot be imported and its ids
    # are not registered yet.
    monkeypatch.setitem(sys.modules, module, None)
    prefix = env_id.split('/')[0] + '/'
    for key in [k for k in gym.registry if '/' in prefix and k.startswith(prefix)]:
        monkeypatch.delitem(gym.registry, key)
    with pytest.raises(environments.EnvironmentSetupError) as raised:
        factory.make_vector_env(env_id, 1, seed=0)
    message = str(raised.value)
    assert f"pip install -e '.[{extra}]'" in message and '\n' not in message


class _Noisy(gym.ObservationWrapper):
    """A toy suite's wrapper: the observation plus 1."""

    def observation(self, observation):
        return observation + 1.0


def test_a_new_suite_is_one_entry(monkeypatch):
    """A suite added with `add_suite` alone (ids `Toy/...`, registered on first use and
    made through its wrapper) is recognised, made and vectorised by the factory."""
    monkeypatch.setattr(suites, 'SUITES', dict(suites.SUITES))
    registered = []

    def register(env_id):
        if 'Toy/CartPole-v0' not in gym.registry:
            registered.append(env_id)
            gym.register('Toy/CartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')

    suites.add_suite(suites.Suite('toy', lambda name: name.startswith('Toy/'), register,
                                  lambda env_id, **kw: _Noisy(gym.make(env_id, **kw)),
                                  wraps=True))
    try:
        assert suites.suite_of('Toy/CartPole-v0') == 'toy'
        envs = factory.make_vector_env('Toy/CartPole-v0', 2, seed=0)
        assert isinstance(envs, gym.vector.SyncVectorEnv)  # built from the wrapped make
        observation, _ = envs.reset(seed=0)
        plain, _ = gym.make('CartPole-v1').reset(seed=0)
        np.testing.assert_allclose(observation[0], plain + 1.0, rtol=1e-6)
        assert registered == ['Toy/CartPole-v0']
        envs.close()
    finally:
        gym.registry.pop('Toy/CartPole-v0', None)



def test_image_observations_cross_reverb_as_uint8(wired_agent):
    """MinAtar images written by a real actor come back from Reverb as the same uint8
    bytes (the table's signature says uint8, never float), and the learner steps on them
    (CLEAR here; SAC's images take the same path through the same writer and dataset)."""
    import tensorflow as tf

    from reverb_agents.launch.learning import data
    wired = wired_agent('clear', 'MinAtar/Breakout-v1', lstm_size=0)
    signature = tf.nest.flatten(wired.setup.signature.steps.observation)
    assert [s.dtype for s in signature] == [tf.uint8]
    batches = data.open_batches(wired.address, wired.setup.signature, wired.setup.plan,
                                wired.client, timeout_ms=30_000)
    batch = next(batches)
    observation = np.asarray(tf.nest.flatten(batch.sequence.steps.observation)[0])
    assert observation.dtype == np.uint8 and observation.shape[-3:] == (10, 10, 4)
    assert set(np.unique(observation)) == {0, 255}
    metrics = data.make_learn(wired.learner)(iter([batch]))
    assert all(np.isfinite(v.numpy()) for v in metrics.values())
