"""Where an exported Pendulum policy's return goes: the swing-up, and holding it upright.

    python benchmarks/pendulum_phases.py --saved_model=DIR[,DIR...] --seed=S [--shifted]

Plays each SavedModel greedily on the untuned suite's scoring episodes (20, reset with
seeds `S + 10000 + i`, as `benchmarks/untuned.py` scores a run of seed S) and prints
one JSON line per model. An episode is upright from its first step whose reward is
above `UPRIGHT` (an angle within about 0.2 rad of the top at rest); before that it
swings up. Per model, the means over episodes of: the return; the swing-up's steps
and return; the return while upright; the part of all steps at full torque; and the
torque's changes of sign while upright (a bang-bang hold flips nearly every step).
`--shifted`: the suite's `PendulumShifted-v1` (`benchmarks/untuned_envs.py`), whose
torque is mapped back to Pendulum's own before it is measured.
(docs/benchmarks.md#clears-and-acers-pendulum-a-bang-bang-hold)
"""

import argparse
import json
import os
import sys
from typing import Callable, Dict, List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # benchmarks/ is a folder of the checkout, not of the package
    sys.path.insert(0, ROOT)

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import untuned_envs  # noqa: E402

EPISODES = 20
UPRIGHT = -0.05  # Pendulum's reward -(theta^2 + 0.1 theta_dot^2 + 0.001 u^2)
MAX_TORQUE = 2.0


def phases(rewards: np.ndarray, torques: np.ndarray) -> Dict[str, float]:
    """The figures of the module doc from `[episodes, steps]` rewards and torques (in
    Pendulum's own units, [-2, 2])."""
    upright = rewards > UPRIGHT
    first = np.where(upright.any(1), upright.argmax(1), rewards.shape[1])
    steps = np.arange(rewards.shape[1])[None]
    after = steps >= first[:, None]
    signs = np.sign(torques)
    flips = (signs[:, 1:] != signs[:, :-1]) & after[:, 1:] & after[:, :-1]
    return {'return': float(rewards.sum(1).mean()),
            'swing_up_steps': float(first.mean()),
            'swing_up_return': float(np.where(after, 0.0, rewards).sum(1).mean()),
            'upright_return': float(np.where(after, rewards, 0.0).sum(1).mean()),
            'full_torque_fraction': float((np.abs(torques) >= MAX_TORQUE - 1e-3).mean()),
            'upright_sign_flips': float(flips.sum(1).mean())}


def play(act: Callable[[np.ndarray, object, object, bool], tuple], make_env: Callable[[], gym.Env],
         torque: Callable[[gym.Env, np.ndarray], float], seed: int,
         episodes: int = EPISODES) -> Dict[str, float]:
    """`phases` of `episodes` episodes of `act(observation, state, reward, first) ->
    (action, state)`; `torque(env, action)`: the torque Pendulum applies."""
    rewards: List[List[float]] = []
    torques: List[List[float]] = []
    for i in range(episodes):
        env = make_env()
        observation, _ = env.reset(seed=seed + 10000 + i)
        state, reward, done, first = None, None, False, True
        rewards.append([])
        torques.append([])
        while not done:
            action, state = act(observation, state, reward, first)
            torques[-1].append(float(np.clip(torque(env, action), -MAX_TORQUE, MAX_TORQUE)))
            observation, reward, terminated, truncated, _ = env.step(action)
            rewards[-1].append(float(reward))
            done, first = terminated or truncated, False
    return phases(np.array(rewards), np.array(torques))


def measure(saved_model: str, seed: int, shifted: bool) -> Dict[str, float]:
    from reverb_agents.launch.policies.load import Policy
    policy = Policy(saved_model)

    def act(observation, state, reward, first):
        return policy.predict(observation, state, None, True, reward)

    if shifted:
        return play(act, untuned_envs.make_shifted_pendulum,
                    lambda env, a: float(np.ravel(env.action(a))[0]), seed)
    return play(act, lambda: gym.make('Pendulum-v1'), lambda env, a: float(np.ravel(a)[0]),
                seed)


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--saved_model', required=True, help='directories, comma-separated')
    parser.add_argument('--seed', type=int, default=0, help="the run's seed")
    parser.add_argument('--shifted', action='store_true', help='PendulumShifted-v1')
    args = parser.parse_args(argv)
    for path in args.saved_model.split(','):
        if not os.path.isdir(path):
            sys.exit(f'error: --saved_model: {path} is not a directory')
        figures = measure(path, args.seed, args.shifted)
        print(json.dumps({'saved_model': path, 'seed': args.seed,
                          **{k: round(v, 3) for k, v in figures.items()}}), flush=True)


if __name__ == '__main__':
    main()
