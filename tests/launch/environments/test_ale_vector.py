"""`--vector_env=ale` (launch/environments/ale_vector.py): ALE's C++ vector env gives what
the library's gymnasium Atari vector env gives, step for step, and says what it cannot do."""

import re

import numpy as np
import pytest

from reverb_agents.launch.environments import EnvironmentSetupError, factory

pytest.importorskip('ale_py', reason="the atari extra is not installed (pip install -e '.[atari]')")

# No noop starts and no sticky actions: both paths are then deterministic given the
# actions; 200 frames per episode truncate every game at its 50th step, so the steps
# below cross an autoreset (and the frame stack's padding after it) twice.
SAME = dict(noop_max=0, repeat_action_probability=0.0, max_num_frames_per_episode=200)


def test_the_same_steps_as_the_gymnasium_path():
    ale = factory.make_vector_env('ALE/Pong-v5', 2, 0, 'ale', env_kwargs=SAME)
    gym_envs = factory.make_vector_env('ALE/Pong-v5', 2, 0, 'sync', env_kwargs=SAME)
    try:
        assert ale.single_observation_space == gym_envs.single_observation_space
        assert ale.single_action_space == gym_envs.single_action_space
        a, _ = ale.reset(seed=0)
        b, _ = gym_envs.reset(seed=0)
        np.testing.assert_array_equal(a, b)
        rng = np.random.default_rng(0)
        ends, resetting = 0, np.zeros(2, bool)
        for t in range(120):
            actions = rng.integers(0, 6, size=2)
            a, b = ale.step(actions), gym_envs.step(actions)
            for name, x, y in zip(('observation', 'reward', 'terminated', 'truncated'), a, b):
                np.testing.assert_array_equal(x, y, err_msg=f'{name} at step {t}')
            # Frames of the real steps (a reset step's are not counted by the actor).
            frames = np.where(resetting, 0, a[4]['frames'])
            np.testing.assert_array_equal(frames, np.where(resetting, 0, b[4].get('frames', 0)),
                                          err_msg=f'step {t}')
            assert set(frames[~resetting]) == {4} or resetting.all(), (t, frames)
            resetting = a[2] | a[3]
            ends += int(resetting.sum())
        assert ends == 4  # two episodes ended in each game
    finally:
        ale.close()
        gym_envs.close()


@pytest.mark.parametrize('env_id,kwargs,message', [
    ('CartPole-v1', {}, '--vector_env=ale steps Atari games (ALE/<Game>-v5), not CartPole-v1'),
    ('ALE/Pong-v5', {'terminal_on_life_loss': True}, 'does not end episodes at a life loss'),
    ('ALE/Breakout-v5', {'fire_to_serve': True}, 'does not press FIRE after a lost life'),
    ('ALE/Pong-v5', {'obs_type': 'rgb'}, "not ['obs_type']"),
])
def test_what_it_cannot_do_is_one_error(env_id, kwargs, message):
    with pytest.raises(EnvironmentSetupError, match=re.escape(message)):
        factory.make_vector_env(env_id, 2, 0, 'ale', env_kwargs=kwargs)
