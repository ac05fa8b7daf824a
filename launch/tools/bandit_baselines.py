"""Reference regrets for the meta-RL bandits (`launch/environments/bandits.py`).

    python launch/bandit_baselines.py --env=Bandit-Dependent-v0 --episodes=20000 [--horizon=100]
        [--env_kwargs=difficulty=hard] [--seed=0]

Plays the same `--episodes` tasks (one per episode, drawn as the
environment draws them) with each reference policy and prints, as JSON, the
mean cumulative regret per episode (the sum of `info['regret']`) and its
standard error:

- `random`: uniform over the arms;
- `ucb1`: Auer et al. 2002 (every arm once, then the highest mean +
  sqrt(2 ln t / n));
- `thompson`: Thompson sampling from each arm's Beta posterior (uniform priors);
- `greedy`: the arm with the highest posterior mean;
- on the dependent task also `thompson_joint` and `greedy_joint`, whose one
  posterior over p1 knows that p2 = 1 - p1 (a success of one arm is
  evidence against the other);
- `bayes_optimal` (two-arm tasks): the Bayes-optimal policy for the task
  prior, by finite-horizon dynamic programming over the posteriors
  (`dependent_dp`, `independent_dp`); `bayes_optimal_expected` is its exact
  expected regret.

`Bandit-ElevenArms-v0` gets
`random`, `ucb1` and `bayes_optimal` (pull the informative arm, then the
arm it names; ElevenArms counts a reward above 3 as a success for UCB1).
`Bandit-Restless-v0` gets the stationary policies only (no DP: its arms
move).
"""

import json
import sys
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

# Runnable as a script from a checkout as well as installed.

from reverb_agents.launch.environments import bandits  # noqa: E402

# A policy: (rng, counts state) -> arms `[B]`. State: successes and failures per arm `[B, k]`.
Policy = Callable[[np.random.Generator, np.ndarray, np.ndarray, int], np.ndarray]


def _posterior_p1(successes: np.ndarray, failures: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Beta parameters of p1 on the dependent task: arm 1's successes and arm 2's
    failures are evidence for p1, the others against."""
    return (1 + successes[:, 0] + failures[:, 1], 1 + failures[:, 0] + successes[:, 1])


def random_policy(rng, successes, failures, t):
    return rng.integers(successes.shape[1], size=successes.shape[0])


def ucb1(rng, successes, failures, t):
    pulls = successes + failures
    untried = pulls == 0
    means = successes / np.maximum(pulls, 1)
    bonus = np.sqrt(2.0 * np.log(max(t, 1)) / np.maximum(pulls, 1))
    score = np.where(untried, np.inf, means + bonus)
    return _argmax_random_ties(rng, score)


def _argmax_random_ties(rng, score: np.ndarray) -> np.ndarray:
    noise = rng.uniform(size=score.shape) * 1e-9
    return np.argmax(score + noise, axis=1)


def thompson(dependent: bool) -> Policy:
    def policy(rng, successes, failures, t):
        if dependent:
            a, b = _posterior_p1(successes, failures)
            p1 = rng.beta(a, b)
            return np.where(p1 >= 0.5, 0, 1)
        return _argmax_random_ties(rng, rng.beta(1 + successes, 1 + failures))
    return policy


def greedy(dependent: bool) -> Policy:
    def policy(rng, successes, failures, t):
        if dependent:
            a, b = _posterior_p1(successes, failures)
            mean = a / (a + b)
            return np.where(mean > 0.5, 0, np.where(mean < 0.5, 1, rng.integers(2, size=len(a))))
        return _argmax_random_ties(rng, (1 + successes) / (2 + successes + failures))
    return policy


def dependent_dp(horizon: int, difficulty: str = 'uniform') -> Tuple[float, List[np.ndarray]]:
    """Bayes-optimal play of the dependent two-arm bandit: (expected total reward,
    actions[t][k]) where k counts the outcomes so far that favour p1 (arm 1
    successes and arm 2 failures) after t pulls. The prior over p1 is
    `difficulty`'s (uniform, or two equally likely points)."""
    choices = bandits.DIFFICULTIES[difficulty]

    def favouring_p1(k: np.ndarray, t: int) -> np.ndarray:
        """P(the next pull's outcome favours p1 | k of t did) = E[p1 | data]."""
        if choices is None:
            return (k + 1.0) / (t + 2.0)
        lo, hi = choices
        # Log-likelihood ratio of p1 = hi against p1 = lo after k of t favoured p1.
        llr = (2 * k - t) * (np.log(hi) - np.log(lo))
        w_hi = 1.0 / (1.0 + np.exp(-llr))
        return w_hi * hi + (1 - w_hi) * lo

    value = np.zeros(horizon + 1)  # V_{H}(k), k = 0..H
    actions = [None] * horizon
    for t in reversed(range(horizon)):
        k = np.arange(t + 1, dtype=np.float64)
        q = favouring_p1(k, t)
        up, same = value[1:t + 2], value[0:t + 1]  # the next level's V at k + 1 and k
        arm1 = q * (1.0 + up) + (1 - q) * same
        arm2 = (1 - q) * (1.0 + same) + q * up
        actions[t] = np.where(arm1 >= arm2, 0, 1).astype(np.int8)
        value = np.maximum(arm1, arm2)
    return float(value[0]), actions


def independent_dp(horizon: int) -> Tuple[float, List[np.ndarray]]:
    """Bayes-optimal play of two independent Bernoulli arms with uniform priors:
    (expected total reward, actions[t][s1, f1, s2]) (f2 = t - s1 - f1 - s2)."""
    value = np.zeros([horizon + 1] * 3)  # V at level H, indexed [s1, f1, s2]
    actions = [None] * horizon
    for t in reversed(range(horizon)):
        n = t + 1
        s1, f1, s2 = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing='ij')
        f2 = t - s1 - f1 - s2
        valid = f2 >= 0
        p1 = (s1 + 1.0) / (s1 + f1 + 2.0)
        p2 = (s2 + 1.0) / (s2 + np.maximum(f2, 0) + 2.0)
        nxt = value
        arm1 = p1 * (1 + nxt[1:n + 1, :n, :n]) + (1 - p1) * nxt[:n, 1:n + 1, :n]
        arm2 = p2 * (1 + nxt[:n, :n, 1:n + 1]) + (1 - p2) * nxt[:n, :n, :n]
        actions[t] = np.where(arm1 >= arm2, 0, 1).astype(np.int8)
        value = np.where(valid, np.maximum(arm1, arm2), 0.0)
    return float(value[0, 0, 0]), actions


def expected_best(task: str, difficulty: str, horizon: int) -> float:
    """E[sum over the horizon of the best arm's expected reward] under the task prior."""
    if task == 'dependent':
        choices = bandits.DIFFICULTIES[difficulty]
        return horizon * (0.75 if choices is None else max(choices))
    if task == 'independent':
        return horizon * 2.0 / 3.0
    raise ValueError(task)


def play(env_kwargs: Dict, episodes: int, seed: int, policy: Policy,
         table: Optional[Callable[[np.ndarray, np.ndarray, int], np.ndarray]] = None
         ) -> np.ndarray:
    """Regret per episode of `policy` (or of a DP `table(successes, failures, t)`) on
    `episodes` tasks drawn with `seed` (the same tasks for every policy)."""
    tasks = bandits.BanditTasks(episodes, **env_kwargs)
    tasks.seed(seed)
    tasks.draw(np.ones(episodes, bool))
    draws = np.random.default_rng(seed + 1)  # reward draws, shared by every policy
    tasks.rng = draws
    decide = np.random.default_rng(seed + 2)
    successes = np.zeros([episodes, tasks.k])
    failures = np.zeros([episodes, tasks.k])
    regret = np.zeros(episodes)
    for t in range(tasks.horizon):
        arms = table(successes, failures, t) if table is not None else policy(
            decide, successes, failures, t)
        rewards, regrets, _ = tasks.pull(arms)
        regret += regrets
        rows = np.arange(episodes)
        if tasks.task == 'eleven_arms':
            high = rewards >= np.median([bandits.TARGET_REWARD, bandits.OTHER_REWARD])
            successes[rows, arms] += high
            failures[rows, arms] += ~high
        else:
            successes[rows, arms] += rewards
            failures[rows, arms] += 1 - rewards
    return regret


def references(env_id: str, episodes: int, seed: int, env_kwargs: Dict) -> Dict[str, Dict]:
    """{policy: {'regret_mean', 'regret_stderr'}} (see the module doc)."""
    task = bandits.IDS.get(env_id)
    if task is None:
        raise ValueError(f'{env_id!r} is not a bandit; choose one of {list(bandits.IDS)}')
    kwargs = dict(task=task, horizon=100, difficulty='uniform', volatility=0.05)
    unknown = set(env_kwargs) - set(kwargs)
    if unknown:
        raise ValueError(f'unknown bandit keyword(s) {sorted(unknown)}; '
                         f'known: {sorted(set(kwargs) - {"task"})}')
    kwargs.update(env_kwargs)
    bandits.check(kwargs['task'], kwargs['horizon'], kwargs['difficulty'], kwargs['volatility'])
    dependent = task == 'dependent'
    policies: Dict[str, Tuple[Optional[Policy], Optional[Callable]]] = {
        'random': (random_policy, None), 'ucb1': (ucb1, None)}
    if task != 'eleven_arms':
        policies['thompson'] = (thompson(False), None)
        policies['greedy'] = (greedy(False), None)
    if dependent:
        policies['thompson_joint'] = (thompson(True), None)
        policies['greedy_joint'] = (greedy(True), None)
    out: Dict[str, Dict] = {}
    horizon = kwargs['horizon']
    if task == 'dependent':
        expected, dp = dependent_dp(horizon, kwargs['difficulty'])
        policies['bayes_optimal'] = (None, lambda s, f, t: dp[t][
            (s[:, 0] + f[:, 1]).astype(np.int64)].astype(np.int64))
        out['bayes_optimal_expected'] = {
            'regret_mean': expected_best(task, kwargs['difficulty'], horizon) - expected}
    elif task == 'independent':
        expected, dp = independent_dp(horizon)
        policies['bayes_optimal'] = (None, lambda s, f, t: dp[t][
            s[:, 0].astype(np.int64), f[:, 0].astype(np.int64),
            s[:, 1].astype(np.int64)].astype(np.int64))
        out['bayes_optimal_expected'] = {
            'regret_mean': expected_best(task, 'uniform', horizon) - expected}
    elif task == 'eleven_arms':
        def optimal(s, f, t):
            if t == 0:
                return np.full(s.shape[0], 10)
            return optimal.target
        probe = bandits.BanditTasks(episodes, **kwargs)
        probe.seed(seed)
        probe.draw(np.ones(episodes, bool))
        optimal.target = np.argmax(probe.values[:, :10], axis=1)  # what arm 10 tells
        policies['bayes_optimal'] = (None, optimal)
    for name, (policy, table) in policies.items():
        regret = play(kwargs, episodes, seed, policy, table)
        out[name] = {'regret_mean': float(regret.mean()),
                     'regret_stderr': float(regret.std() / np.sqrt(episodes))}
    return out


def main(argv):
    from absl import flags
    FLAGS = flags.FLAGS
    try:
        from reverb_agents.launch.runs.options import parse_env_kwargs
        if FLAGS.episodes < 1:
            raise ValueError(f'--episodes must be >= 1, got {FLAGS.episodes}')
        env_kwargs = parse_env_kwargs(FLAGS.env_kwargs)
        if FLAGS.horizon is not None:
            env_kwargs['horizon'] = FLAGS.horizon
        result = references(FLAGS.env, FLAGS.episodes, FLAGS.seed, env_kwargs)
    except ValueError as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    print(json.dumps({'env': FLAGS.env, 'episodes': FLAGS.episodes, **env_kwargs,
                      'regret': result}, indent=2))


if __name__ == '__main__':
    from absl import app, flags
    flags.DEFINE_string('env', 'Bandit-Dependent-v0', f'one of {list(bandits.IDS)}')
    flags.DEFINE_integer('episodes', 20000, 'tasks, one episode each')
    flags.DEFINE_integer('horizon', None, 'pulls per episode (default: the environment\'s, 100)')
    flags.DEFINE_string('env_kwargs', '', 'bandit keywords, key=value,... (difficulty, '
                        'horizon, volatility)')
    flags.DEFINE_integer('seed', 0, 'seed of the tasks and reward draws')
    from reverb_agents.launch.command_line import help as help_lib  # no TensorFlow
    app.run(main, flags_parser=help_lib.script_parser(
        flags.FLAGS, __doc__, 'episodes', '--env=ID [--episodes=N] [--FLAG=VALUE ...]'))
