"""Action repeat (`--step_mul`), fixed or chosen by the policy (the CLEAR seed's head).

- fixed (`--step_mul=N --fixed_step_mul`): every action is taken N times in a
  row, the rewards summed;
- learned (`--step_mul=N`, N > 1): the action space becomes
  `Dict(action=<the environment's>, step_mul=Discrete(N))`, so the policy has
  one more categorical head, trained like any other action leaf (V-trace,
  entropy, cloning of its stored logits); a chosen value k repeats the action
  k + 1 times.

A repeat stops early where the episode ends. Each step's `info['frames']`
holds the frames it stepped: the actors count `env_steps` as the frames
(`sum(k + 1)` over decisions, less where an episode ended inside a repeat)
and `agent_steps` as the decisions, so the env-step budget is in frames, as
in the seed. TensorBoard's `action/step_mul` histogram shows the chosen k.
"""

from typing import Any, Callable, Optional, Tuple

import gymnasium as gym

FRAMES = 'frames'  # the info key
ACTION, STEP_MUL = 'action', 'step_mul'  # the learned repeat's action keys


def _repeat(env: gym.Env, action: Any, times: int) -> Tuple[Any, Any, bool, bool, dict]:
    """`action` taken up to `times` times (until the episode ends); rewards summed."""
    total = 0.0
    for frames in range(1, times + 1):
        observation, reward, terminated, truncated, info = env.step(action)
        total = total + reward
        if terminated or truncated:
            break
    return observation, total, terminated, truncated, dict(info, **{FRAMES: frames})


class ActionRepeat(gym.Wrapper):
    """Every action taken `times` times (the fixed step_mul)."""

    def __init__(self, env: gym.Env, times: int):
        super().__init__(env)
        self._times = times

    def step(self, action):
        return _repeat(self.env, action, self._times)


class LearnedActionRepeat(gym.Wrapper):
    """Actions `{'action': a, 'step_mul': k}`: `a` taken k + 1 times, k in [0, max_times)."""

    def __init__(self, env: gym.Env, max_times: int):
        super().__init__(env)
        self.action_space = gym.spaces.Dict({ACTION: env.action_space,
                                             STEP_MUL: gym.spaces.Discrete(max_times)})

    def step(self, action):
        return _repeat(self.env, action[ACTION], int(action[STEP_MUL]) + 1)


def wrapper(step_mul: int, fixed: bool) -> Optional[Callable[[gym.Env], gym.Env]]:
    """The environment wrapper `--step_mul` / `--fixed_step_mul` ask for (None for 1)."""
    if step_mul < 1:
        raise ValueError(f'step_mul must be >= 1, got {step_mul}')
    if step_mul == 1:
        return None
    if fixed:
        return lambda env: ActionRepeat(env, step_mul)
    return lambda env: LearnedActionRepeat(env, step_mul)
