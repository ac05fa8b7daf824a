"""`benchmarks/pendulum_phases.py`: a Pendulum episode's return split at its first upright
step, against hand-counted figures and on the real environment."""

import gymnasium as gym
import numpy as np
import pytest

from benchmarks import pendulum_phases


def test_phases_split_each_episode_at_its_first_upright_step():
    rewards = np.array([[-5.0, -1.0, -0.01, -0.02, -0.03],  # upright from step 2
                        [-4.0, -3.0, -2.0, -1.0, -0.5]])  # never upright
    torques = np.array([[2.0, 2.0, -2.0, 2.0, 1.0],
                        [-2.0, 0.5, 0.5, -2.0, 2.0]])
    figures = pendulum_phases.phases(rewards, torques)
    assert figures['return'] == pytest.approx((-6.06 - 10.5) / 2)
    assert figures['swing_up_steps'] == pytest.approx((2 + 5) / 2)
    assert figures['swing_up_return'] == pytest.approx((-6.0 - 10.5) / 2)
    assert figures['upright_return'] == pytest.approx(-0.06 / 2)
    assert figures['full_torque_fraction'] == pytest.approx(7 / 10)
    # Upright: steps 2-4 of the first episode, -2 -> 2 (a flip) -> 1 (none).
    assert figures['upright_sign_flips'] == pytest.approx(1 / 2)


def test_play_measures_a_full_torque_policy_on_pendulum():
    def act(observation, state, reward, first):
        assert first == (state is None)
        return np.array([3.0], np.float32), 'state'  # clipped to Pendulum's 2 when measured

    figures = pendulum_phases.play(act, lambda: gym.make('Pendulum-v1'),
                                   lambda env, a: float(a[0]), seed=0, episodes=2)
    assert figures['full_torque_fraction'] == 1.0
    assert figures['upright_sign_flips'] == 0.0
    assert figures['return'] == pytest.approx(figures['swing_up_return']
                                              + figures['upright_return'])
    assert figures['return'] < -100  # spinning at full torque is far from the top


def test_a_missing_saved_model_is_one_error_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        pendulum_phases.main([f'--saved_model={tmp_path / "none"}'])
    assert str(exited.value).startswith('error: --saved_model: ')
