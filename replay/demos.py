"""Recorded demonstrations: one `.npz` file of whole episodes, and its checks.

A file holds N environment steps of E complete episodes, one after another,
as flat arrays (what `np.savez` writes; readable by numpy alone):

- `observation` `[N, *obs_shape]` (the observation space's dtype): the
  observation the action was taken in (before the step);
- `action` `[N]` int64 for a `Discrete` action space (the environment's
  integer, `start` included), `[N, *action_shape]` float32 for a `Box`;
- `reward` `[N]` float32, `terminated` `[N]` bool, `truncated` `[N]` bool:
  what `env.step(action)` returned;
- `spec`: a JSON string, `{"observation_space": ..., "action_space": ...,
  "env": id, "episodes": E}`, the spaces as `space_spec` describes them.

Every episode ends: its last step is `terminated` or `truncated` (a
truncation keeps its bootstrap, as in `replay.trajectory`), so the file's
last step ends one. Observations must be one `Box`, actions one `Box` or
`Discrete` space. `write_demos` writes a file from arrays of any source,
`load_demos` reads and checks one (against an environment's spaces when
given), `transitions` adds the core's inputs (`first`, `prev_action`,
`prev_reward`: `networks.cores.CoreInputs`). `launch/record.py` records a
SavedModel policy's episodes. Every problem with a file is a `DemoError`,
one line naming the path.
"""

import json
import os
import zipfile
from typing import Any, Dict, NamedTuple, Optional

import gymnasium as gym
import numpy as np

ARRAYS = ('observation', 'action', 'reward', 'terminated', 'truncated')
KEYS = ARRAYS + ('spec',)


class DemoError(ValueError):
    """A demonstrations file that is missing, unreadable, malformed or does not fit."""


class Demonstrations(NamedTuple):
    """N steps of whole episodes in episode order (see the module docstring)."""
    observation: np.ndarray  # [N, *obs_shape], the observation space's dtype
    action: np.ndarray  # [N] int64 (Discrete) or [N, *action_shape] float32 (Box)
    reward: np.ndarray  # [N] float32
    terminated: np.ndarray  # [N] bool
    truncated: np.ndarray  # [N] bool
    spec: Dict[str, Any]  # observation_space, action_space (space_spec), env, episodes


def _bound(values: np.ndarray) -> Any:
    """One number when every entry is the same, else the nested list."""
    flat = values.ravel()
    if flat.size and np.all(flat == flat[0]):
        return flat[0].item()
    return values.tolist()


def space_spec(space: gym.Space) -> Dict[str, Any]:
    """The JSON description of a space: `Box` -> kind, shape, dtype, low, high (one
    number when uniform, else nested lists; infinities as JSON's `Infinity`);
    `Discrete` -> kind, n, start. Raises `DemoError` for any other space."""
    if isinstance(space, gym.spaces.Box):
        return {'kind': 'Box', 'shape': list(space.shape), 'dtype': np.dtype(space.dtype).name,
                'low': _bound(space.low), 'high': _bound(space.high)}
    if isinstance(space, gym.spaces.Discrete):
        return {'kind': 'Discrete', 'n': int(space.n), 'start': int(space.start)}
    raise DemoError(f'demonstrations support Box and Discrete spaces only, got {space}')


def _describe(spec: Dict[str, Any]) -> str:
    if spec.get('kind') == 'Box':
        return f'Box of shape {tuple(spec["shape"])}'
    return f'Discrete({spec.get("n")}, start={spec.get("start")})'


def check_spaces(observation_space: gym.Space, action_space: gym.Space) -> None:
    """Raises `DemoError` unless observations are a `Box` and actions a `Box` or
    `Discrete` space (what a file can hold)."""
    _check_spaces(space_spec(observation_space), space_spec(action_space), 'demonstrations')


def _check_spaces(observation: Dict[str, Any], action: Dict[str, Any], where: str) -> None:
    if observation.get('kind') != 'Box':
        raise DemoError(f'{where}: observations must be a Box space, got {_describe(observation)}')
    if action.get('kind') not in ('Box', 'Discrete'):
        raise DemoError(f'{where}: actions must be a Box or Discrete space, got {action}')


def _checked(arrays: Dict[str, Any], observation: Dict[str, Any], action: Dict[str, Any],
             where: str) -> Dict[str, np.ndarray]:
    """The five arrays, converted to the file's dtypes, after every check of the format."""
    _check_spaces(observation, action, where)
    try:
        out = {name: np.asarray(arrays[name]) for name in ARRAYS}
    except ValueError as e:  # ragged lists
        raise DemoError(f'{where}: the arrays are not rectangular ({e})') from None
    lengths = {name: len(a) if a.ndim else None for name, a in out.items()}
    if len(set(lengths.values())) > 1:
        raise DemoError(f'{where}: the arrays must all hold N steps, got lengths '
                        + ', '.join(f'{name} {n}' for name, n in lengths.items()))
    n = lengths['reward']
    if not n:
        raise DemoError(f'{where}: no steps (the arrays must be [N, ...] with N >= 1)')
    obs_shape = tuple(observation['shape'])
    discrete = action['kind'] == 'Discrete'
    shapes = {'observation': (n, *obs_shape),
              'action': (n,) if discrete else (n, *action['shape']),
              'reward': (n,), 'terminated': (n,), 'truncated': (n,)}
    for name, shape in shapes.items():
        if out[name].shape != shape:
            raise DemoError(f'{where}: `{name}` must have shape {list(shape)} (N={n} steps), '
                            f'got {list(out[name].shape)}')
    if discrete:
        if not (np.issubdtype(out['action'].dtype, np.integer)
                or np.array_equal(out['action'], np.round(out['action']))):
            raise DemoError(f'{where}: Discrete actions must be integers')
        low, high = action['start'], action['start'] + action['n'] - 1
        if out['action'].min() < low or out['action'].max() > high:
            raise DemoError(f'{where}: Discrete actions must lie in [{low}, {high}], got '
                            f'[{out["action"].min()}, {out["action"].max()}]')
    for name in ('terminated', 'truncated'):
        if out[name].dtype != bool and not np.isin(out[name], (0, 1)).all():
            raise DemoError(f'{where}: `{name}` must be booleans')
    out['observation'] = out['observation'].astype(observation['dtype'], copy=False)
    out['action'] = out['action'].astype(np.int64 if discrete else np.float32, copy=False)
    out['reward'] = out['reward'].astype(np.float32, copy=False)
    out['terminated'] = out['terminated'].astype(bool, copy=False)
    out['truncated'] = out['truncated'].astype(bool, copy=False)
    if not (out['terminated'][-1] or out['truncated'][-1]):
        raise DemoError(f'{where}: the last episode does not end (its last step is neither '
                        f'terminated nor truncated); record whole episodes only')
    return out


def write_demos(path: str, observation, action, reward, terminated, truncated,
                observation_space: gym.Space, action_space: gym.Space,
                env_id: str = '') -> Demonstrations:
    """Writes N steps of whole episodes, from any source, to a new `.npz` file.

    Args:
      path: the file to create (its directories are created); an existing file is
        never overwritten. Name it `*.npz`: the name is used as given.
      observation: `[N, *obs_shape]`, the observation each action was taken in.
      action: `[N]` integers of a `Discrete` space (`start` included), or
        `[N, *action_shape]` floats of a `Box`.
      reward: `[N]`; terminated, truncated: `[N]` bools, as `env.step` returned them.
        Episodes follow one another: the step after a terminated or truncated one
        starts the next, and the last step must end an episode.
      observation_space: a `Box`; action_space: a `Box` or `Discrete`.
      env_id: the environment's id, kept in the spec (informative).

    Returns the `Demonstrations` written. Raises `DemoError` (nothing written) when
    the file exists, a space is unsupported, or the arrays do not fit the spaces.

        write_demos('demos/expert.npz', obs, actions, rewards, terminated, truncated,
                    env.observation_space, env.action_space, 'CartPole-v1')
    """
    where = str(path)
    spaces = {'observation_space': space_spec(observation_space),
              'action_space': space_spec(action_space)}
    arrays = _checked(dict(observation=observation, action=action, reward=reward,
                           terminated=terminated, truncated=truncated),
                      spaces['observation_space'], spaces['action_space'], where)
    episodes = int(np.sum(arrays['terminated'] | arrays['truncated']))
    spec = {**spaces, 'env': str(env_id), 'episodes': episodes}
    if os.path.exists(where):
        raise DemoError(f'{where}: the file exists; demonstrations are never overwritten')
    parent = os.path.dirname(os.path.abspath(where))
    os.makedirs(parent, exist_ok=True)
    try:
        with open(where, 'xb') as f:  # 'x': refuse a file created meanwhile too
            try:
                np.savez(f, spec=np.array(json.dumps(spec)), **arrays)
            except BaseException:
                os.remove(where)
                raise
    except FileExistsError:
        raise DemoError(f'{where}: the file exists; demonstrations are never overwritten') from None
    except OSError as e:
        raise DemoError(f'{where}: cannot write: {e.strerror or e}') from None
    return Demonstrations(spec=spec, **arrays)


def _match(role: str, have: Dict[str, Any], space: gym.Space, where: str) -> None:
    want = space_spec(space)
    keys = ('kind', 'shape') if want['kind'] == 'Box' else ('kind', 'n', 'start')
    if any(have.get(k) != want[k] for k in keys):
        raise DemoError(f'{where}: the file\'s {role}s are {_describe(have)} but the '
                        f'environment\'s are {_describe(want)}')


def load_demos(path: str, observation_space: Optional[gym.Space] = None,
               action_space: Optional[gym.Space] = None) -> Demonstrations:
    """Reads and checks a file of `write_demos`. When spaces are given the file must
    fit them (Box: the same shape; Discrete: the same n and start). Raises `DemoError`
    (missing, unreadable, wrong keys or shapes, an episode that does not end, spaces
    that differ: what the file has and what the environment has)."""
    where = str(path)
    if not os.path.isfile(where):
        raise DemoError(f'{where}: no such demonstrations file')
    try:
        data = np.load(where, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DemoError(f'{where}: not a readable .npz demonstrations file ({reason})') from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise DemoError(f'{where}: not a demonstrations file (one .npy array, not an .npz)')
    with data:
        missing = [k for k in KEYS if k not in data.files]
        if missing:
            raise DemoError(f'{where}: not a demonstrations file: no {", ".join(missing)} '
                            f'(it has {", ".join(sorted(data.files)) or "nothing"})')
        try:
            arrays = {k: data[k] for k in KEYS}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise DemoError(f'{where}: unreadable ({e})') from None
    try:
        spec = json.loads(str(arrays.pop('spec')))
        observation, action = spec['observation_space'], spec['action_space']
        missing = [k for k in ('env', 'episodes') if k not in spec]
    except (ValueError, TypeError, KeyError) as e:
        raise DemoError(f'{where}: its `spec` is not the JSON of write_demos ({e})') from None
    if missing:
        raise DemoError(f'{where}: its `spec` has no {", ".join(missing)}')
    if not (isinstance(observation, dict) and isinstance(action, dict)):
        raise DemoError(f'{where}: its `spec` describes no spaces')
    try:
        arrays = _checked(arrays, observation, action, where)
    except (TypeError, ValueError, KeyError) as e:
        if isinstance(e, DemoError):
            raise
        raise DemoError(f'{where}: its `spec` or arrays are malformed ({e})') from None
    episodes = int(np.sum(arrays['terminated'] | arrays['truncated']))
    if spec['episodes'] != episodes:
        raise DemoError(f'{where}: its spec says {spec["episodes"]} episodes but its '
                        f'steps hold {episodes}')
    if observation_space is not None:
        _match('observation', observation, observation_space, where)
    if action_space is not None:
        _match('action', action, action_space, where)
    return Demonstrations(spec=spec, **arrays)


def episode_ends(demos: Demonstrations) -> np.ndarray:
    """`[E]` int: the index of each episode's last step."""
    return np.flatnonzero(demos.terminated | demos.truncated)


def episode_returns(demos: Demonstrations) -> np.ndarray:
    """`[E]` float64: the undiscounted return of each episode, in order."""
    starts = np.concatenate([[0], episode_ends(demos)[:-1] + 1])
    return np.add.reduceat(np.asarray(demos.reward, np.float64), starts)


def transitions(demos: Demonstrations) -> Dict[str, np.ndarray]:
    """Every step with the inputs a library core needs (`networks.cores.CoreInputs`).

    Returns a dict of `[N, ...]` arrays, for every step i:
      `observation` `[N, *obs_shape]`, `action` `[N]` or `[N, *action_shape]`: as stored;
      `first` `[N]` bool: step i starts an episode (i = 0 or step i - 1 ended one);
      `prev_action`: like `action`, step i - 1's action, zeros where `first`;
      `prev_reward` `[N]` float32: step i - 1's reward, 0 where `first`;
      `reward` `[N]` float32 and `discount` `[N]` float32 (0 where the action
      terminated the episode, 1 otherwise, a truncation included), as in
      `replay.trajectory.Step`.
    Feed `observation, prev_action, prev_reward, first` to the core in order (the
    core resets its state and zeroes the previous action and reward where `first`).
    """
    ends = demos.terminated | demos.truncated
    first = np.concatenate([[True], ends[:-1]])
    prev_action = np.concatenate([np.zeros_like(demos.action[:1]), demos.action[:-1]])
    prev_action[first] = 0
    prev_reward = np.concatenate([[0.0], demos.reward[:-1]]).astype(np.float32)
    prev_reward[first] = 0.0
    return {'observation': demos.observation, 'action': demos.action, 'first': first,
            'prev_action': prev_action, 'prev_reward': prev_reward,
            'reward': demos.reward.astype(np.float32),
            'discount': (~demos.terminated).astype(np.float32)}
