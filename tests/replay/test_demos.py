"""The demonstrations file (`replay.demos`): round trip, checks, episode helpers."""

import json

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.replay.demos import (DemoError, Demonstrations, check_spaces, episode_returns,
                          load_demos, space_spec, transitions, write_demos)

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(4, start=1)
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def tiny(action_space=DISCRETE):
    """Two episodes: 3 steps terminated, then 2 steps truncated."""
    observation = np.arange(15, dtype=np.float32).reshape(5, 3) / 20
    if isinstance(action_space, gym.spaces.Discrete):
        action = np.array([1, 2, 3, 4, 2])
    else:
        action = np.array([[0.5, 0.1], [-1, 0.2], [2, 0.3], [0, 0.4], [1, 1]], np.float32)
    return dict(observation=observation, action=action,
                reward=np.array([1.0, 2.0, 3.0, 10.0, 20.0]),
                terminated=np.array([False, False, True, False, False]),
                truncated=np.array([False, False, False, False, True]))


def write(path, action_space=DISCRETE, **changes):
    arrays = {**tiny(action_space), **changes}
    return write_demos(str(path), **arrays, observation_space=OBS, action_space=action_space,
                       env_id='Tiny-v0')


@pytest.mark.parametrize('action_space', [DISCRETE, BOX], ids=['discrete', 'box'])
def test_round_trip(tmp_path, action_space):
    path = tmp_path / 'sub' / 'demos.npz'  # parent directories are created
    written = write(path, action_space)
    loaded = load_demos(str(path), OBS, action_space)
    assert isinstance(loaded, Demonstrations)
    for name, expected in tiny(action_space).items():
        np.testing.assert_array_equal(getattr(loaded, name), expected)
        np.testing.assert_array_equal(getattr(written, name), getattr(loaded, name))
    assert loaded.observation.dtype == np.float32 and loaded.reward.dtype == np.float32
    assert loaded.terminated.dtype == bool and loaded.truncated.dtype == bool
    if action_space is DISCRETE:
        assert loaded.action.dtype == np.int64 and loaded.action.shape == (5,)
    else:
        assert loaded.action.dtype == np.float32 and loaded.action.shape == (5, 2)
    assert loaded.spec == {'observation_space': space_spec(OBS),
                           'action_space': space_spec(action_space),
                           'env': 'Tiny-v0', 'episodes': 2}
    np.testing.assert_allclose(episode_returns(loaded), [6.0, 30.0])
    # numpy alone reads it: the spec is a JSON string.
    with np.load(str(path)) as data:
        assert json.loads(str(data['spec']))['env'] == 'Tiny-v0'


def test_space_spec():
    assert space_spec(DISCRETE) == {'kind': 'Discrete', 'n': 4, 'start': 1}
    assert space_spec(OBS) == {'kind': 'Box', 'shape': [3], 'dtype': 'float32',
                               'low': -1.0, 'high': 1.0}
    assert space_spec(BOX)['low'] == [-2.0, 0.0]
    with pytest.raises(DemoError, match='Box and Discrete spaces only'):
        space_spec(gym.spaces.MultiDiscrete([2, 3]))


def test_unsupported_spaces_are_refused(tmp_path):
    with pytest.raises(DemoError, match='Box and Discrete spaces only'):
        write_demos(str(tmp_path / 'd.npz'), **tiny(), observation_space=OBS,
                    action_space=gym.spaces.MultiBinary(2))
    with pytest.raises(DemoError, match='observations must be a Box space'):
        write_demos(str(tmp_path / 'd.npz'), **{**tiny(), 'observation': np.zeros(5)},
                    observation_space=gym.spaces.Discrete(3), action_space=DISCRETE)
    assert not (tmp_path / 'd.npz').exists()
    check_spaces(OBS, BOX)
    with pytest.raises(DemoError, match=r'observations must be a Box space, got Discrete\(3'):
        check_spaces(gym.spaces.Discrete(3), DISCRETE)


def test_box_shape_mismatch(tmp_path):
    path = tmp_path / 'demos.npz'
    write(path)
    with pytest.raises(DemoError) as error:
        load_demos(str(path), observation_space=gym.spaces.Box(-1, 1, (4,), np.float32))
    message = str(error.value)
    assert str(path) in message and '\n' not in message
    assert "file's observations are Box of shape (3,)" in message
    assert "environment's are Box of shape (4,)" in message


def test_discrete_n_mismatch(tmp_path):
    path = tmp_path / 'demos.npz'
    write(path)
    with pytest.raises(DemoError, match=r"file's actions are Discrete\(4, start=1\) but "
                                        r"the environment's are Discrete\(2, start=1\)"):
        load_demos(str(path), OBS, gym.spaces.Discrete(2, start=1))
    with pytest.raises(DemoError, match=r"environment's are Box of shape \(2,\)"):
        load_demos(str(path), OBS, BOX)


def test_refuses_to_overwrite(tmp_path):
    path = tmp_path / 'demos.npz'
    path.write_bytes(b'precious')
    with pytest.raises(DemoError, match='the file exists'):
        write(path)
    assert path.read_bytes() == b'precious'


def test_missing_and_unreadable_files(tmp_path):
    missing = tmp_path / 'nowhere.npz'
    with pytest.raises(DemoError, match=f'{missing}: no such demonstrations file'):
        load_demos(str(missing))
    text = tmp_path / 'text.npz'
    text.write_text('not numpy')
    with pytest.raises(DemoError, match='not a readable .npz'):
        load_demos(str(text))
    other = tmp_path / 'other.npz'
    np.savez(str(other), observation=np.zeros(3))
    with pytest.raises(DemoError, match='no action, reward, terminated, truncated, spec'):
        load_demos(str(other))


def test_unterminated_last_episode_is_refused(tmp_path):
    with pytest.raises(DemoError, match='the last episode does not end'):
        write(tmp_path / 'd.npz', truncated=np.zeros(5, bool))
    assert not (tmp_path / 'd.npz').exists()


@pytest.mark.parametrize('changes,match', [
    (dict(reward=np.zeros(4)), 'must all hold N steps, got lengths observation 5, action 5, '
                               'reward 4, terminated 5, truncated 5'),
    (dict(reward=np.zeros([5, 2])), r'`reward` must have shape \[5\]'),
    (dict(action=np.zeros([5, 1], np.int64)), r'`action` must have shape \[5\]'),
    (dict(action=np.array([1, 2, 3, 5, 2])), r'Discrete actions must lie in \[1, 4\]'),
    (dict(observation=np.zeros([5, 2])), r'`observation` must have shape \[5, 3\]'),
    (dict(terminated=np.full(5, 0.5)), '`terminated` must be booleans'),
    ({k: np.zeros([0] + list(v.shape[1:])) for k, v in tiny().items()}, 'no steps'),
])
def test_lengths_and_shapes_are_checked(tmp_path, changes, match):
    with pytest.raises(DemoError, match=match):
        write(tmp_path / 'd.npz', **changes)


def test_transitions_by_hand():
    steps = transitions(Demonstrations(spec={}, **tiny()))
    np.testing.assert_array_equal(steps['first'], [True, False, False, True, False])
    np.testing.assert_array_equal(steps['prev_action'], [0, 1, 2, 0, 4])
    np.testing.assert_array_equal(steps['prev_reward'], [0.0, 1.0, 2.0, 0.0, 10.0])
    np.testing.assert_array_equal(steps['discount'], [1, 1, 0, 1, 1])  # truncation bootstraps
    np.testing.assert_array_equal(steps['action'], [1, 2, 3, 4, 2])
    assert steps['prev_reward'].dtype == np.float32 and steps['first'].dtype == bool
    assert steps['prev_action'].dtype == np.int64

    box = transitions(Demonstrations(spec={}, **tiny(BOX)))
    np.testing.assert_array_equal(box['prev_action'], np.array(
        [[0, 0], [0.5, 0.1], [-1, 0.2], [0, 0], [0, 0.4]], np.float32))
    assert box['prev_action'].shape == (5, 2) and box['prev_action'].dtype == np.float32
