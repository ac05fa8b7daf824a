"""The peer's side of `benchmarks/side_by_side.py`: Stable-Baselines3 on torch (CPU).

Runs in its own virtualenv, never this project's (see docs/benchmarks.md):

    python3 -m venv peer_venv
    peer_venv/bin/pip install torch==2.13.0 stable-baselines3 'gymnasium>=1.0'
    peer_venv/bin/python benchmarks/peer_sb3.py sac_updates

Prints one JSON object. Figures (each what our side measures too):

- `sac_updates`: SAC updates/s, batch 256, 256x256 actor and twin critics, on a
  replay buffer filled with random Pendulum-v1 steps (`model.train(...)` timed
  alone, the same work as our learner step);
- `sac_pendulum`: SAC on Pendulum-v1 for 5,000 env steps (RL Zoo's learning rate
  1e-3, 256 random warm-up steps as our preset), the wall of `learn()` and a
  deterministic evaluation over 10 episodes; `--net=128,128 --n_steps=3` give
  it the networks and n-step targets of our `sac_pendulum_5k_fast` preset;
- `sac_mujoco --env=Hopper-v5`: SAC with RL Zoo's MuJoCo settings (its defaults:
  Adam 3e-4, batch 256, 256x256, tau 0.005, automatic temperature; 10k random
  warm-up steps; one update per env step, one environment) for 100k env steps, the
  wall of `learn()` and a deterministic evaluation over 10 episodes: our
  `sac_hopper` / `sac_halfcheetah` presets' peer on this machine (`pip install
  'mujoco>=3.2,<4' imageio packaging` in the peer's venv too);
- `ppo_cartpole`: PPO with RL Zoo's CartPole-v1 hyperparameters until the last 20
  training episodes average >= 475, the wall of `learn()` and a greedy
  evaluation over 20 episodes when it stops;
- `untuned --algo=ppo|a2c|sac|recurrentppo --env=ID --steps=N`: the peer's column of
  `benchmarks/untuned.py --agents=sb3_ppo,...`: the algorithm with its class defaults
  (`MlpPolicy`, `MultiInputPolicy` for `Dict` observations, the `Lstm` policies for
  `RecurrentPPO`; one environment) for N env steps, then 20 greedy episodes of
  `--eval_env` (default: the same env), the wall of `learn()` beside them;
  `--threads` sets torch's threads.
  `RecurrentPPO` needs sb3-contrib, MinAtar ids `pip install minatar`, LunarLander
  `gymnasium[box2d]`, and the suite's own ids this checkout on PYTHONPATH.
"""

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import A2C, PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


class FloatObservation(gym.ObservationWrapper):
    """MinAtar's boolean image as float32, which SB3's policies take."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape,
                                                np.float32)

    def observation(self, observation):
        return observation.astype(np.float32)


def make_env(env_id):
    """`gym.make(env_id)`; MinAtar's ids registered first and their images as floats."""
    if env_id.startswith('MinAtar/'):
        import minatar.gym
        if env_id not in gym.registry:
            minatar.gym.register_envs()
        return FloatObservation(gym.make(env_id))
    return gym.make(env_id)


def evaluate(model, env_id, episodes, seed):
    """Mean and std of `episodes` deterministic episodes seeded seed + 10000 + i (a
    recurrent policy's state carried through each episode)."""
    env = make_env(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + 10000 + i)
        done, total, state, start = False, 0.0, None, np.ones((1,), bool)
        while not done:
            action, state = model.predict(obs, state=state, episode_start=start,
                                          deterministic=True)
            start = np.zeros((1,), bool)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns)), float(np.std(returns))


def sac(seed, learning_starts=256, net=(256, 256), n_steps=1):
    return SAC('MlpPolicy', 'Pendulum-v1', learning_rate=1e-3, batch_size=256,
               learning_starts=learning_starts, policy_kwargs={'net_arch': list(net)},
               n_steps=n_steps, seed=seed, device='cpu', verbose=0)


def sac_updates(args):
    model = sac(args.seed, learning_starts=10**9)  # acting only: fills the buffer
    model.learn(total_timesteps=2000)
    rates = []
    for _ in range(args.repeats):
        model.train(gradient_steps=10, batch_size=256)  # warm
        start = time.perf_counter()
        model.train(gradient_steps=args.updates, batch_size=256)
        rates.append(args.updates / (time.perf_counter() - start))
    return {'figure': 'sac_updates', 'updates_per_s': float(np.median(rates)), 'runs': rates}


def sac_pendulum(args):
    model = sac(args.seed, net=args.net, n_steps=args.n_steps)
    start = time.perf_counter()
    model.learn(total_timesteps=5000)
    wall = time.perf_counter() - start
    mean, std = evaluate(model, 'Pendulum-v1', 10, args.seed)
    return {'figure': 'sac_pendulum', 'seed': args.seed, 'net': args.net,
            'n_steps': args.n_steps, 'wall_time_s': wall,
            'eval_return_mean': mean, 'eval_return_std': std}


def sac_mujoco(args):
    model = SAC('MlpPolicy', args.env, learning_starts=10_000, seed=args.seed, device='cpu',
                verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - start
    mean, std = evaluate(model, args.env, 10, args.seed)
    return {'figure': 'sac_mujoco', 'env': args.env, 'seed': args.seed, 'env_steps': args.steps,
            'wall_time_s': wall, 'eval_return_mean': mean, 'eval_return_std': std}


class StopAtMean(BaseCallback):
    """Stops once the last `window` finished training episodes average >= target."""

    def __init__(self, target=475.0, window=20):
        super().__init__()
        self.target, self.window, self.returns, self.env_steps = target, window, [], 0

    def _on_step(self):
        self.env_steps += self.training_env.num_envs
        for info in self.locals['infos']:
            if 'episode' in info:
                self.returns.append(info['episode']['r'])
        recent = self.returns[-self.window:]
        return not (len(recent) == self.window and np.mean(recent) >= self.target)


def ppo_cartpole(args):
    # RL Zoo's hyperparams/ppo.yml, CartPole-v1 (linear schedules from 1 to 0 of progress).
    env = make_vec_env('CartPole-v1', n_envs=8, seed=args.seed)
    model = PPO('MlpPolicy', env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=lambda p: 0.001 * p,
                clip_range=lambda p: 0.2 * p, seed=args.seed, device='cpu', verbose=0)
    stop = StopAtMean()
    start = time.perf_counter()
    model.learn(total_timesteps=100_000, callback=stop)
    wall = time.perf_counter() - start
    mean, std = evaluate(model, 'CartPole-v1', 20, args.seed)
    return {'figure': 'ppo_cartpole', 'seed': args.seed, 'wall_time_s': wall,
            'env_steps': stop.env_steps, 'last_20_mean': float(np.mean(stop.returns[-20:])),
            'eval_return_mean': mean, 'eval_return_std': std}


def untuned(args):
    if args.threads:
        torch.set_num_threads(args.threads)
    env = make_env(args.env)
    dict_obs = isinstance(env.observation_space, gym.spaces.Dict)
    if args.algo == 'recurrentppo':
        from sb3_contrib import RecurrentPPO
        algo, policy = RecurrentPPO, 'MultiInputLstmPolicy' if dict_obs else 'MlpLstmPolicy'
    else:
        algo = {'ppo': PPO, 'a2c': A2C, 'sac': SAC}[args.algo]
        policy = 'MultiInputPolicy' if dict_obs else 'MlpPolicy'
    model = algo(policy, env, seed=args.seed, device='cpu', verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - start
    mean, std = evaluate(model, args.eval_env or args.env, 20, args.seed)
    return {'figure': 'untuned', 'algo': args.algo, 'policy': policy, 'env': args.env,
            'eval_env': args.eval_env or args.env, 'seed': args.seed, 'env_steps': args.steps,
            'wall_time_s': wall, 'eval_return_mean': mean, 'eval_return_std': std}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('figure', choices=['sac_updates', 'sac_pendulum', 'sac_mujoco',
                                           'ppo_cartpole', 'untuned'])
    parser.add_argument('--env', default='Hopper-v5', help="sac_mujoco's or untuned's env")
    parser.add_argument('--eval_env', default='', help="untuned's evaluation env (default "
                        '--env)')
    parser.add_argument('--algo', default='ppo', choices=['ppo', 'a2c', 'sac', 'recurrentppo'],
                        help="untuned's algorithm (its class defaults)")
    parser.add_argument('--threads', type=int, default=0,
                        help="untuned's torch threads (default: torch's own choice)")
    parser.add_argument('--steps', type=int, default=100_000,
                        help="sac_mujoco's or untuned's env steps")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--updates', type=int, default=200)
    parser.add_argument('--net', type=lambda t: [int(x) for x in t.split(',')],
                        default=[256, 256], help="sac_pendulum's hidden sizes")
    parser.add_argument('--n_steps', type=int, default=1, help="sac_pendulum's n-step targets")
    args = parser.parse_args()
    result = globals()[args.figure](args)
    import stable_baselines3
    result.update(peer=f'stable-baselines3 {stable_baselines3.__version__}',
                  torch=torch.__version__, torch_threads=torch.get_num_threads())
    print(json.dumps(result))


if __name__ == '__main__':
    main()
