"""Acting cost of a network of the user's own: one actor's policy call for a batch of
environments, a Keras torso (and memory) against the built-in network of the same
shape, side by side in one process: prints JSON.

    python benchmarks/acting_cost.py --rounds=5 --steps=2000 --output=acting.json

Per case, `launch.acting.policy.Policy` (what actors and evaluations act with) is called
`--steps` times on a batch of `--num_envs` CartPole-shaped observations, the cases
alternating round by round so that each sees the same load on the shared machine.
The cases: the built-in MLP (64, 64) acting through its numpy mirror (what a run
of the built-in network does), the same through TensorFlow, and a Keras Sequential
of the same shape (network_examples/my_networks.py:mlp), which acts through TensorFlow
(no mirror follows a user's layers); and the same three with a 64-unit memory
(the built-in LSTM, a Keras LSTMCell). The JSON holds each round's microseconds
per call, the medians and their ratios against the built-in numpy path and the
built-in TensorFlow path (docs/benchmarks.md#networks-of-your-own).
"""

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # network_examples/ is a folder of the checkout, not of the package
    sys.path.insert(0, ROOT)

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from reverb_agents.launch.acting.policy import Policy  # noqa: E402
from reverb_agents.networks.cores import ActorCriticCore  # noqa: E402
from reverb_agents.networks.distributions import ActionSpace  # noqa: E402

SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = ActionSpace(gym.spaces.Discrete(2))
KERAS_TORSO = dict(torso='network_examples.my_networks:mlp', torso_kwargs='units=64,layers=2')
CASES = {  # name: (core options, act through the numpy mirror)
    'builtin_numpy': (dict(hidden_sizes=(64, 64), lstm_size=0), True),
    'builtin_tf': (dict(hidden_sizes=(64, 64), lstm_size=0), False),
    'keras': (dict(KERAS_TORSO, lstm_size=0), False),
    'builtin_lstm_numpy': (dict(hidden_sizes=(64, 64), lstm_size=64), True),
    'builtin_lstm_tf': (dict(hidden_sizes=(64, 64), lstm_size=64), False),
    'keras_lstm': (dict(KERAS_TORSO, memory='network_examples.my_networks:lstm',
                        memory_kwargs='units=64', lstm_size=0), False),
}


def make_policy(options: dict, use_numpy: bool) -> Policy:
    core = ActorCriticCore(SPACE, ACTIONS, **options)
    core.create_variables()
    policy = Policy(core, ACTIONS, seed=0, use_numpy=use_numpy)
    assert policy.uses_numpy == use_numpy
    return policy


def time_calls(policy: Policy, num_envs: int, steps: int) -> float:
    """Microseconds per call of `policy` on a batch of `num_envs` environments."""
    rng = np.random.default_rng(0)
    observation = rng.uniform(-1, 1, [num_envs, 4]).astype(np.float32)
    prev_action = (np.zeros([num_envs], np.int32),)
    prev_reward = np.zeros([num_envs], np.float32)
    first = np.zeros([num_envs], bool)
    state = policy.initial_state(num_envs)
    policy(observation, prev_action, prev_reward, first, state)  # traced before the clock
    start = time.perf_counter()
    for _ in range(steps):
        actions, _, _, _, state = policy(observation, prev_action, prev_reward, first, state)
        prev_action = tuple(actions)
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--steps', type=int, default=2000)
    parser.add_argument('--num_envs', type=int, default=64)
    parser.add_argument('--output', default='')
    args = parser.parse_args()
    tf.config.threading.set_inter_op_parallelism_threads(1)  # as an actor's process
    policies = {name: make_policy(*case) for name, case in CASES.items()}
    rounds = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, policy in policies.items():
            rounds[name].append(round(time_calls(policy, args.num_envs, args.steps), 1))
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    ratios = {
        'keras / builtin_numpy': medians['keras'] / medians['builtin_numpy'],
        'keras / builtin_tf': medians['keras'] / medians['builtin_tf'],
        'keras_lstm / builtin_lstm_numpy': medians['keras_lstm'] / medians['builtin_lstm_numpy'],
        'keras_lstm / builtin_lstm_tf': medians['keras_lstm'] / medians['builtin_lstm_tf'],
    }
    report = {'num_envs': args.num_envs, 'steps': args.steps, 'us_per_call': rounds,
              'median_us_per_call': medians,
              'ratios': {k: round(v, 3) for k, v in ratios.items()}}
    text = json.dumps(report, indent=1)
    print(text)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(text + '\n')


if __name__ == '__main__':
    main()
