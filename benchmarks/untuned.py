"""The untuned-defaults suite: every agent, its defaults only, on tasks nobody tuned for.

    python benchmarks/untuned.py [--agents=clear,acer,sac] [--tasks=cartpole,...]
        [--seeds=0,1,2] [--jobs=2] [--extra_flags='--value_normalization=none']
        [--out=untuned.json] [--logdir_root=/tmp/untuned] [--budget_scale=1.0]
        [--best=best.json] [--list] [--peer=sb3 --peer_python=PEER_VENV/bin/python]

Why: a default is chosen for tasks nobody has a preset for, so it is measured
on such tasks. Each run is `launch/run.py --agent=A --env=ENV --no_preset
--num_steps=N --seed=S --eval_episodes=20 --logdir=... <extra_flags>` in a
subprocess (`--jobs` at a time): no preset and no hyperparameter set here, so
`--extra_flags` compares one setting against the defaults on the same table.
`--eval_episodes=20` is the one run flag set, so every agent is scored on as many
greedy episodes (SAC's run default is 10). The runs measure the checkout the
suite is in, so the interpreter must import the library from it: one with another
checkout installed (`pip install -e`, e.g. the main checkout's, running a worktree
of an older commit) is refused with an error line (`check_library_root`).

**Tasks** (`TASKS`; the environments beyond gymnasium's are
`benchmarks/untuned_envs.py`, which documents them). Random and best are in
score units (below): random is a uniformly random policy's mean, best the
optimum or the best known return.

| task | environment | random | best |
| --- | --- | --- | --- |
| cartpole | CartPole-v1 | 22.2 | 500 |
| acrobot | Acrobot-v1 | -494 | -60 |
| mountaincar_shaped | ShapedMountainCar-v0 (potential-based shaping) | -200 | -100 |
| pendulum | Pendulum-v1 (continuous) | -1208 | -150 |
| lunarlander | LunarLander-v3 (needs box2d) | -181 | 280 |
| cartpole_reward_x0.01 | CartPole-v1, rewards x 0.01 | 22.2 | 500 |
| cartpole_reward_x100 | CartPole-v1, rewards x 100 | 22.2 | 500 |
| cartpole_obs_x1000 | CartPole-v1, observations x 1000 | 22.2 | 500 |
| masked_cue | MaskedCue-v0: cued 4-way choice, `action_mask` | 6.67 | 20 |
| memory | CueMemory-v0: recall a cue after 8 blank steps | 0.25 | 1 |
| dict_reach | DictReach-v0: gridworld, `Dict` observation | -0.40 | 0.907 |
| corridor | Corridor-v0: 50 cells, a forward action per cell, 1000-step episodes | -0.72 | 0.95 |
| cartpole_novelocity (held out) | CartPoleNoVelocity-v1: CartPole-v1 without its velocities | 22.2 | 500 |
| mountaincar_continuous (held out) | MountainCarContinuous-v0 (sparse, continuous) | -33.4 | 94 |
| pendulum_shifted (held out) | PendulumShifted-v1: Pendulum-v1, action bounds [-10, 30] | -1208 | -150 |
| grid_multidiscrete (held out) | GridMultiDiscrete-v0: a 9 x 9 grid, `MultiDiscrete([3, 3])` | -0.60 | 0.916 |
| minatar_breakout (held out) | MinAtar/Breakout-v1 (needs minatar), 10 x 10 x 4 images | 0.37 | 25.2 |
| cartpole_noisy_reward (held out) | CartPoleNoisyReward-v1: rewards + N(0, 1), scored on CartPole-v1 | 22.2 | 500 |

**Decision and held-out tasks.** The first twelve are the tasks the defaults were
chosen on; the six marked held out were added afterwards and only report (the
table counts the two sets apart), so that a default tuned to twelve tasks shows
it. The held-out references: MountainCarContinuous's best is the best reported
(~94), random a uniform policy's (200 episodes); MinAtar Breakout's best is the
best return measured here (`clear_minatarbreakout`, 5M frames), random a uniform
policy's over 500 episodes; the others in `benchmarks/untuned_envs.py`.
ACER takes one Discrete or Box action, so it skips the `MultiDiscrete` task.

LunarLander needs Box2D: `pip install "gymnasium[box2d]"` installed here in
seconds (a Box2D 2.3.10 wheel and pygame-ce; no swig, no build). It is not in
setup.py, so without it the task is skipped with a printed line; so is MinAtar
without the minatar extra.

**The peer** (`--peer=sb3`, or the `sb3_*` agents by name): Stable-Baselines3's
PPO, A2C, SAC (Box actions only) and sb3-contrib's `RecurrentPPO` (the memory
tasks only) with their class defaults, one environment, run by
`benchmarks/peer_sb3.py untuned` in the peer's own venv (`--peer_python`), on the
same budgets (PPO, A2C and `RecurrentPPO` the sequence agents', SAC SAC's), seeds
and 20-episode greedy scoring; `--extra_flags` are not passed to it. Each peer run
takes one torch thread: with torch's default two beside another job on two shared
cores, SB3's SAC ran 10k env steps of MountainCarContinuous for over 13 minutes
(its threads wait on each other), where one thread took 190 s.

**Scores.** The score of a run is its greedy evaluation's mean return
(`summary.json`'s `eval_return_mean`, 20 episodes) in the task's original
units: the reward-scaled CartPoles divide it by their scale (exact: the
return is the scale times the episode's length), so every CartPole scores
out of 500; ShapedMountainCar's shaped return is not MountainCar's, so the
run's exported policy plays 20 greedy episodes of MountainCar-v0 itself
(`launch/evaluate.py`) and that return is the score (each run's
`score_source` says which: 'MountainCar-v0 (original env)', or the shaped
return where no policy was exported).
The **fraction of best** is (score - random) / (best - random): 0 at random,
1 at best, comparable across tasks whose returns are negative. `--best` gives
the best score measured per task with any settings (a JSON object
`{task: score}`, or an earlier output of this script, whose best run score
per task is taken) instead of the documented best.

**Budgets** (`BUDGETS`, env steps, x `--budget_scale`). Two families, because
their costs per env step differ ~50x on 2 shared cores: CLEAR and ACER learn
from sequences of a 64-environment actor (CLEAR ~10k env steps/s, ACER ~2.7k),
SAC updates once per env step (~100 env steps/s). The sequence family's
budgets are what a run can use in about 1-2 minutes on one core: 300k for the
control tasks (CLEAR's CartPole preset solves it in 300k; none is tuned),
100k-200k for the small synthetic tasks, which need fewer samples, and 1M for
MountainCar (shaped), the budget RL Zoo gives PPO and A2C on MountainCar-v0: at
300k no agent of the suite, ours or the peer's, reached 0.8 of its best
(docs/benchmarks.md, "MountainCar (shaped) at RL Zoo's budget"). SAC gets
10k (its own run default, in which its Pendulum preset solves Pendulum; 5k on
the masked task), and more where 10k leaves a task unsettled, up to the budget
RL Zoo gives an off-policy agent on it (its SAC's on the continuous tasks, its
DQN's on the discrete ones): CartPole and every variant of it 30k
(CartPole's training return still rose at 10k; RL Zoo's DQN 50k-200k),
MountainCar (shaped) 120k (RL Zoo's DQN on MountainCar-v0), LunarLander 100k
(its DQN 100k-150k), MountainCarContinuous 50k (its SAC) and the corridor 30k
(30 of its 1000-step episodes), MinAtar Breakout 100k (the Atari 100k budget
discrete SAC was published on); the memory task stays at 10k, which its
recurrent actor settles in. Measured walls
per run (2 jobs on 2 shared cores): CLEAR 20-40 s, ACER ~60-130 s (MountainCar
(shaped)'s 1M: CLEAR ~230 s, ACER ~370 s), SAC
~100-120 s per 10k env steps feed-forward, 1.5-2.4x that recurrent (its 120k
runs 21-36 minutes feed-forward), so the full default suite (3 agents x 12 tasks x 3
seeds, `--jobs=2`) takes about three hours. The six held-out tasks' 51 runs
took 6,608 s at `--jobs=1` beside the peer's suite (MinAtar's 500k: CLEAR
~130 s, ACER ~350 s a run; SAC's MinAtar then at 10k, where its 100k runs take
about 2.1 hours each, three side by side); the peer's on-policy runs take 250-1,450 s each,
`RecurrentPPO` over 1,800 s.

**Checked** (CLEAR defaults, seed 0, the budgets above): memory 1.0 (fraction 1.00);
dict_reach 0.917 (1.01: 20 episodes can beat the expected best); masked_cue
7.2 (0.04; with `--lstm_size=0` 20, solved; with `--reward_scaling=0.1` 6.45);
corridor -1 (stuck; training return -0.15; `--lstm_size=0` -1 too), which ACER's
defaults solve (0.95 by 140k env steps), so it is learnable in the budget.

**Output**: `--out` JSON (tasks with their references and budgets, every run
with agent, task, seed, return, score, fraction, walls and its error line if
any), rewritten after each run so that a stopped suite keeps what it finished,
and a markdown table on stdout: rows tasks (held-out ones marked), columns
agents, cell the median fraction of best over seeds (and the minimum) and the
median wall of a run, 'n/a' where the agent does not take the task; the last
rows count the tasks at >= 0.8 and give the median per agent, decision and
held-out tasks apart; failed runs are listed under it with their error line.
"""

import argparse
import concurrent.futures
import dataclasses
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # runnable as a script from a checkout
    sys.path.insert(0, ROOT)

from benchmarks import untuned_envs as envs  # noqa: E402  (gymnasium and numpy only)

EVAL_EPISODES = 20
# The budget family of each agent (see the module doc): the peer's on-policy algorithms
# get the sequence agents' env steps, its SAC SAC's.
FAMILIES = {'clear': 'sequence', 'acer': 'sequence', 'sac': 'sac',
            'sb3_ppo': 'sequence', 'sb3_a2c': 'sequence', 'sb3_sac': 'sac',
            'sb3_recurrentppo': 'sequence'}
INSTALL = {'Box2D': 'pip install "gymnasium[box2d]"',
           'minatar': "pip install -e '.[minatar]'"}  # Task.needs -> how to install it
PEERS = {'sb3_ppo': 'ppo', 'sb3_a2c': 'a2c', 'sb3_sac': 'sac',
         'sb3_recurrentppo': 'recurrentppo'}  # agent -> benchmarks/peer_sb3.py --algo


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of the suite; `random` and `best` are in score units."""
    name: str
    env: str  # launch/run.py's --env
    random: float
    best: float
    budgets: Mapping[str, int]  # family -> env steps
    reward_scale: float = 1.0  # score = eval return / reward_scale
    score_env: Optional[str] = None  # score by playing the exported policy in this env
    needs: Optional[str] = None  # a module the environment needs; the task is skipped without
    actions: str = 'discrete'  # 'discrete', 'box' or 'multidiscrete': which agents take it
    memory: bool = False  # needs memory: the peer's recurrent algorithm runs it
    held_out: bool = False  # reports only: no default was chosen on it (module doc)


def takes(agent: str, task: Task) -> bool:
    """Whether `agent` runs on `task`: ACER takes one Discrete or Box action, SB3's SAC
    a Box, and the peer's `RecurrentPPO` runs the memory tasks only."""
    if agent == 'acer':
        return task.actions in ('discrete', 'box')
    if agent == 'sb3_sac':
        return task.actions == 'box'
    if agent == 'sb3_recurrentppo':
        return task.memory
    return True


def _budgets(sequence: int, sac: int) -> Dict[str, int]:
    return {'sequence': sequence, 'sac': sac}


# (sequence family, SAC): why these, in the module doc.
BUDGETS = {
    'cartpole': _budgets(300_000, 30_000),
    'acrobot': _budgets(300_000, 10_000),
    'mountaincar_shaped': _budgets(1_000_000, 120_000),  # RL Zoo's PPO and A2C: module doc
    'pendulum': _budgets(300_000, 10_000),
    'lunarlander': _budgets(300_000, 100_000),
    'cartpole_reward_x0.01': _budgets(300_000, 30_000),
    'cartpole_reward_x100': _budgets(300_000, 30_000),
    'cartpole_obs_x1000': _budgets(300_000, 30_000),
    'masked_cue': _budgets(100_000, 5_000),  # a contextual bandit: few samples
    'memory': _budgets(200_000, 10_000),
    'dict_reach': _budgets(200_000, 10_000),
    'corridor': _budgets(300_000, 30_000),
    # Held out (module doc).
    'cartpole_novelocity': _budgets(300_000, 30_000),
    'mountaincar_continuous': _budgets(300_000, 50_000),
    'pendulum_shifted': _budgets(300_000, 10_000),
    'grid_multidiscrete': _budgets(200_000, 10_000),
    'minatar_breakout': _budgets(500_000, 100_000),  # a pixel game's short budget
    'cartpole_noisy_reward': _budgets(300_000, 30_000),
}


def _ours(name: str, env_id: str, **kwargs: Any) -> Task:
    reference = envs.REFERENCES[env_id]
    return Task(name, envs.cli_id(env_id), reference.random, reference.best, BUDGETS[name],
                **kwargs)


TASKS: Tuple[Task, ...] = (
    # Random returns measured over 50-1,000 episodes; best: the best reported returns
    # (Acrobot, Pendulum, LunarLander, whose "solved" is 200) or the optimum.
    Task('cartpole', 'CartPole-v1', 22.2, 500.0, BUDGETS['cartpole']),
    Task('acrobot', 'Acrobot-v1', -494.0, -60.0, BUDGETS['acrobot']),
    _ours('mountaincar_shaped', envs.SHAPED_MOUNTAIN_CAR, score_env='MountainCar-v0'),
    Task('pendulum', 'Pendulum-v1', -1208.0, -150.0, BUDGETS['pendulum'], actions='box'),
    Task('lunarlander', 'LunarLander-v3', -181.0, 280.0, BUDGETS['lunarlander'],
         needs='Box2D'),
    _ours('cartpole_reward_x0.01', envs.CARTPOLE_REWARD_SMALL, reward_scale=0.01),
    _ours('cartpole_reward_x100', envs.CARTPOLE_REWARD_LARGE, reward_scale=100.0),
    _ours('cartpole_obs_x1000', envs.CARTPOLE_OBS_LARGE),
    _ours('masked_cue', envs.MASKED_CUE),
    _ours('memory', envs.CUE_MEMORY, memory=True),
    _ours('dict_reach', envs.DICT_REACH),
    _ours('corridor', envs.CORRIDOR),
    # Held out: added after the defaults were chosen, and never used to choose them.
    _ours('cartpole_novelocity', envs.CARTPOLE_NO_VELOCITY, memory=True, held_out=True),
    Task('mountaincar_continuous', 'MountainCarContinuous-v0', -33.4, 94.0,
         BUDGETS['mountaincar_continuous'], actions='box', held_out=True),
    _ours('pendulum_shifted', envs.PENDULUM_SHIFTED, actions='box', held_out=True),
    _ours('grid_multidiscrete', envs.GRID_MULTIDISCRETE, actions='multidiscrete',
          held_out=True),
    Task('minatar_breakout', 'MinAtar/Breakout-v1', 0.37, 25.2, BUDGETS['minatar_breakout'],
         needs='minatar', held_out=True),
    _ours('cartpole_noisy_reward', envs.CARTPOLE_NOISY_REWARD, score_env='CartPole-v1',
          held_out=True),
)
TASKS_BY_NAME = {task.name: task for task in TASKS}


def budget(task: Task, agent: str, scale: float = 1.0) -> int:
    """The env-step budget of `agent` on `task`, x `scale` (at least 1,000 steps, so a
    smoke run still learns a little and evaluates a trained policy)."""
    return max(1_000, int(round(task.budgets[FAMILIES[agent]] * scale)))


def fraction_of_best(score: float, random: float, best: float) -> float:
    """(score - random) / (best - random): 0 at random, 1 at best."""
    return (score - random) / (best - random)


def load_best(path: str) -> Dict[str, float]:
    """The best score per task from `path`: `{task: score}`, or an earlier output of
    this script (its best run score per task)."""
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict) and 'runs' in data:
        best: Dict[str, float] = {}
        for run in data['runs']:
            if run.get('score') is not None:
                best[run['task']] = max(best.get(run['task'], -float('inf')), run['score'])
        return best
    if not isinstance(data, dict) or not all(isinstance(v, (int, float))
                                             for v in data.values()):
        raise ValueError(f'--best={path}: expected {{task: score}} or an output of '
                         f'benchmarks/untuned.py')
    return {task: float(score) for task, score in data.items()}


# --- one run ------------------------------------------------------------------------------

def run_command(task: Task, agent: str, seed: int, num_steps: int, logdir: str,
                extra_flags: Sequence[str]) -> List[str]:
    """The `launch/run.py` command of one run (extra flags last, so they win)."""
    return [sys.executable, 'launch/run.py', f'--agent={agent}',
            f'--env={task.env}', '--no_preset', f'--num_steps={num_steps}', f'--seed={seed}',
            f'--eval_episodes={EVAL_EPISODES}', f'--logdir={logdir}', *extra_flags]


def _error_line(process: subprocess.CompletedProcess) -> str:
    """A failed process's `error:` line, else the last line it wrote."""
    lines = (process.stderr + '\n' + process.stdout).splitlines()
    errors = [line for line in lines if line.startswith('error:')]
    rest = [line for line in lines if line.strip()]
    return (errors or rest or [f'exit status {process.returncode}'])[-1].strip()


def _run_env() -> Dict[str, str]:
    """The runs' environment: the checkout on the path, so that `launch/run.py` imports
    the task environments (`benchmarks.untuned_envs:...`) as `--env` names them."""
    path = os.environ.get('PYTHONPATH')
    return dict(os.environ, PYTHONPATH=ROOT + (os.pathsep + path if path else ''))


def original_env_score(saved_model: str, env_id: str, seed: int,
                       timeout_s: float) -> float:
    """The mean return of `EVAL_EPISODES` greedy episodes of `saved_model` in `env_id`
    (`launch/evaluate.py`)."""
    process = subprocess.run(
        [sys.executable, 'launch/evaluate.py',
         f'--saved_model={saved_model}', f'--env={env_id}', f'--episodes={EVAL_EPISODES}',
         f'--seed={seed}'], cwd=ROOT, env=_run_env(), capture_output=True, text=True,
        timeout=timeout_s)
    if process.returncode != 0:
        raise RuntimeError(f'scoring on {env_id}: {_error_line(process)}')
    return float(json.loads(process.stdout.strip().splitlines()[-1])['return_mean'])


def peer_command(task: Task, agent: str, seed: int, num_steps: int, peer_python: str,
                 threads: int = 1) -> List[str]:
    """The `benchmarks/peer_sb3.py untuned` command of one of the peer's runs: its class
    defaults, evaluated greedily where this suite scores (`score_env`, else the task),
    with `threads` torch threads."""
    return [peer_python, 'benchmarks/peer_sb3.py', 'untuned', f'--algo={PEERS[agent]}',
            f'--env={task.env}', f'--eval_env={task.score_env or task.env}',
            f'--steps={num_steps}', f'--seed={seed}', f'--threads={threads}']


def _peer_result(task: Task, process: subprocess.CompletedProcess, logdir: str
                 ) -> Dict[str, Any]:
    """A peer run's return and score (its JSON line also kept as `logdir/peer.json`)."""
    if process.returncode != 0:
        return {'error': _error_line(process)}
    try:
        result = json.loads(process.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {'error': f'error: the peer printed no JSON: {_error_line(process)}'}
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, 'peer.json'), 'w') as f:
        json.dump(result, f, indent=2)
    value = result['eval_return_mean']  # evaluated on score_env where the task has one
    scored = ({'score': value, 'score_source': f'{task.score_env} (original env)'}
              if task.score_env else _scaled(task, value))
    return {'return': value, 'train_wall_s': result['wall_time_s'],
            'env_steps': result['env_steps'], **scored}


def _scaled(task: Task, value: float) -> Dict[str, Any]:
    """The score of a greedy evaluation's mean return on the task itself."""
    return {'score': value / task.reward_scale,
            'score_source': 'eval return' if task.reward_scale == 1.0
            else f'eval return / {task.reward_scale:g}'}


def run_one(task: Task, agent: str, seed: int, num_steps: int, logdir: str,
            extra_flags: Sequence[str], timeout_s: float, peer_python: str = ''
            ) -> Dict[str, Any]:
    """One run and its score; a failed run has `error` (one line) and no score. The
    peer's agents (`PEERS`) run `peer_command` with `peer_python`, without the extra
    flags, which are this library's."""
    peer = agent in PEERS
    command = (peer_command(task, agent, seed, num_steps, peer_python) if peer
               else run_command(task, agent, seed, num_steps, logdir, extra_flags))
    out: Dict[str, Any] = {'agent': agent, 'task': task.name, 'seed': seed, 'env': task.env,
                           'num_steps': num_steps, 'logdir': logdir,
                           'command': shlex.join(['python', *command[1:]]), 'return': None,
                           'score': None, 'score_source': None, 'fraction': None,
                           'error': None}
    start = time.perf_counter()
    try:
        process = subprocess.run(command, cwd=ROOT, env=_run_env(), capture_output=True,
                                 text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return dict(out, wall_s=time.perf_counter() - start,
                    error=f'error: no result after {timeout_s:.0f} s (--run_timeout_s)')
    out['wall_s'] = time.perf_counter() - start
    if peer:
        return dict(out, **_peer_result(task, process, logdir))
    summary_path = os.path.join(logdir, 'summary.json')
    if process.returncode != 0 or not os.path.exists(summary_path):
        return dict(out, error=_error_line(process))
    with open(summary_path) as f:
        summary = json.load(f)
    out.update(train_wall_s=summary.get('wall_time_s'), env_steps=summary.get('env_steps'))
    if summary.get('eval_return_mean') is None:
        return dict(out, error='error: summary.json has no eval_return_mean')
    out['return'] = summary['eval_return_mean']
    if summary.get('eval_return_learned_mean') is not None:
        # The learned weights on the same episodes where the run scores an average of
        # them (SAC's `--policy_average_tau`): a pair within the run. A task scored on
        # its original env has no export of them to score there.
        out['learned_return'] = summary['eval_return_learned_mean']
        if not task.score_env:
            out['learned_score'] = out['learned_return'] / task.reward_scale
    scored = _scaled(task, out['return'])
    if task.score_env:
        if summary.get('saved_model'):
            try:
                scored = {'score': original_env_score(summary['saved_model'],
                                                      task.score_env, seed, timeout_s),
                          'score_source': f'{task.score_env} (original env)'}
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                return dict(out, error=f'error: {e}')
        else:
            scored['score_source'] = 'shaped eval return (no exported policy)'
    return dict(out, **scored)


# --- the suite ------------------------------------------------------------------------------

def plan(tasks: Sequence[Task], agents: Sequence[str], seeds: Sequence[int],
         scale: float) -> List[Tuple[Task, str, int, int]]:
    """(task, agent, seed, budget) of every run, the slow SAC runs first so that the
    parallel jobs end together."""
    runs = [(task, agent, seed, budget(task, agent, scale))
            for task in tasks for agent in agents for seed in seeds if takes(agent, task)]
    return sorted(runs, key=lambda r: FAMILIES[r[1]] != 'sac')


def run_suite(runs: Sequence[Tuple[Task, str, int, int]], logdir_root: str, jobs: int,
              extra_flags: Sequence[str], timeout_s: float, peer_python: str = '',
              on_result: Callable[[List[Dict[str, Any]]], None] = lambda results: None
              ) -> List[Dict[str, Any]]:
    """Every run, `jobs` at a time; a line per finished run on stderr, and
    `on_result(results so far)` after each."""
    os.makedirs(logdir_root, exist_ok=True)
    results: List[Dict[str, Any]] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_one, task, agent, seed, steps,
                               os.path.join(logdir_root, f'{agent}-{task.name}-s{seed}'),
                               extra_flags, timeout_s, peer_python)
                   for task, agent, seed, steps in runs]
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            result = future.result()
            results.append(result)
            outcome = result['error'] or f'score {result["score"]:.4g}'
            print(f'[{i}/{len(futures)}] {result["agent"]} {result["task"]} seed '
                  f'{result["seed"]}: {outcome} ({result["wall_s"]:.0f} s)', file=sys.stderr,
                  flush=True)
            on_result(results)
    return results


def add_fractions(results: List[Dict[str, Any]], references: Mapping[str, Tuple[float, float]]
                  ) -> None:
    for result in results:
        if result['score'] is not None:
            random, best = references[result['task']]
            result['fraction'] = fraction_of_best(result['score'], random, best)
            if result.get('learned_score') is not None:
                result['learned_fraction'] = fraction_of_best(result['learned_score'],
                                                              random, best)


def table(results: Sequence[Dict[str, Any]], tasks: Sequence[Task], agents: Sequence[str]
          ) -> str:
    """The markdown table: per task and agent the median fraction of best over seeds
    (min) and the median wall of a run; 'n/a' where the agent does not take the task.
    Held-out tasks are marked; the last rows count the tasks at >= 0.8 per agent, for
    the decision tasks and the held-out ones apart."""
    lines = ['| task | ' + ' | '.join(agents) + ' |', '| --- |' + ' --- |' * len(agents)]
    errors: List[str] = []
    medians: Dict[Tuple[str, bool], List[float]] = {}
    for task in tasks:
        cells = []
        for agent in agents:
            if not takes(agent, task):
                cells.append('n/a')
                continue
            mine = [r for r in results if r['task'] == task.name and r['agent'] == agent]
            fractions = [r['fraction'] for r in mine if r['fraction'] is not None]
            cell = ''
            if fractions:
                wall = statistics.median(r['wall_s'] for r in mine if r['fraction'] is not None)
                cell = f'{statistics.median(fractions):.2f} ({min(fractions):.2f}), {wall:.0f} s'
                medians.setdefault((agent, task.held_out), []).append(
                    statistics.median(fractions))
            refs = []
            for r in mine:  # the error lines go under the table, numbered
                if r['error']:
                    errors.append(f'[{len(errors) + 1}] {agent} {task.name} seed {r["seed"]}: '
                                  f'{r["error"]}')
                    refs.append(str(len(errors)))
            if refs:
                cell += f' error [{", ".join(refs)}]'
            cells.append(cell.strip() or '-')
        name = f'{task.name} (held out)' if task.held_out else task.name
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    for held_out, label in ((False, 'decision tasks'), (True, 'held-out tasks')):
        if any(t.held_out == held_out for t in tasks):
            lines.append(f'| **{label}: >= 0.8, median** | ' + ' | '.join(
                _summary(medians.get((agent, held_out), [])) for agent in agents) + ' |')
    return '\n'.join(lines + ([''] + errors if errors else []))


def _summary(fractions: Sequence[float]) -> str:
    if not fractions:
        return '-'
    solved = sum(f >= 0.8 for f in fractions)
    return f'{solved}/{len(fractions)}, {statistics.median(fractions):.2f}'


def list_tasks(tasks: Sequence[Task], agents: Sequence[str], scale: float) -> str:
    """`--list`: tasks, environments, references and budgets."""
    lines = ['| task | env | random | best | ' + ' | '.join(f'{a} steps' for a in agents)
             + ' |', '| --- |' + ' --- |' * (3 + len(agents))]
    for task in tasks:
        missing = ' (skipped: needs ' + task.needs + ')' if not _available(task) else ''
        lines.append(f'| {task.name} | {task.env}{missing} | {task.random:.4g} | '
                     f'{task.best:.4g} | '
                     + ' | '.join(f'{budget(task, a, scale):,}' if takes(a, task) else 'n/a'
                                  for a in agents) + ' |')
    return '\n'.join(lines)


def _available(task: Task) -> bool:
    return task.needs is None or importlib.util.find_spec(task.needs) is not None


def suite_folder(root: str, stamp: str) -> str:
    """A new folder under `root` for one suite's runs, named from `stamp`: two suites
    started in the same second (the same stamp) get two folders, so no run directory
    is shared."""
    os.makedirs(root, exist_ok=True)
    return tempfile.mkdtemp(prefix=f'{stamp}-', dir=root)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--agents', default='clear,acer,sac', help='comma-separated agents: '
                        f'{", ".join(FAMILIES)} (the sb3_* ones are the peer, run with '
                        '--peer_python)')
    parser.add_argument('--peer', default='', choices=['', 'sb3'],
                        help="'sb3' adds the peer's columns: " + ', '.join(PEERS))
    parser.add_argument('--peer_python', default=os.environ.get('PEER_PYTHON', ''),
                        help="the peer venv's python (benchmarks/peer_sb3.py's venv; default "
                        '$PEER_PYTHON)')
    parser.add_argument('--tasks', default='', help='comma-separated tasks (default: all)')
    parser.add_argument('--seeds', default='0,1,2', help='comma-separated seeds')
    parser.add_argument('--jobs', type=int, default=2, help='runs at a time (subprocesses)')
    parser.add_argument('--extra_flags', default='',
                        help="flags appended to every run, e.g. '--value_normalization=none'")
    parser.add_argument('--out', default='', help='write the JSON here (default: untuned-'
                        "<date>-<time>.json in the suite's folder under --logdir_root)")
    parser.add_argument('--logdir_root', default='/tmp/untuned',
                        help='runs go to <root>/<date>-<time>-<suffix>/<agent>-<task>-s<seed> '
                             '(a suffix of its own per suite)')
    parser.add_argument('--budget_scale', type=float, default=1.0,
                        help='multiplies every budget (0.05 for a smoke run)')
    parser.add_argument('--best', default='', help='JSON of the best score per task with '
                        'any settings (default: the documented best of each task)')
    # A guard against a hung run, not a budget: recurrent SAC's runs at its longest budgets
    # take up to about 2.1 hours on two shared cores (MinAtar's 100k, three at a time).
    parser.add_argument('--run_timeout_s', type=float, default=10800.0,
                        help='a run still going after this is stopped and reported as failed')
    parser.add_argument('--list', action='store_true', help='print the tasks and exit')
    return parser.parse_args(argv)


def _selection(args: argparse.Namespace) -> Tuple[List[Task], List[str], List[int]]:
    """The tasks, agents and seeds asked for; ValueError (one line) for unknown ones."""
    agents = [a.strip() for a in args.agents.split(',') if a.strip()]
    if args.peer == 'sb3':
        agents += [a for a in PEERS if a not in agents]
    unknown = [a for a in agents if a not in FAMILIES]
    if unknown:
        raise ValueError(f'unknown agents {unknown}; the suite has budgets for '
                         f'{sorted(FAMILIES)}')
    names = [t.strip() for t in args.tasks.split(',') if t.strip()] or list(TASKS_BY_NAME)
    unknown = [t for t in names if t not in TASKS_BY_NAME]
    if unknown:
        raise ValueError(f'unknown tasks {unknown}; choose from {list(TASKS_BY_NAME)}')
    try:
        seeds = [int(s) for s in args.seeds.split(',') if s.strip()]
    except ValueError:
        raise ValueError(f'--seeds takes comma-separated integers, got {args.seeds!r}') from None
    if (not args.list and any(a in PEERS for a in agents)
            and not os.path.isfile(args.peer_python)):
        raise ValueError(f'the peer ({", ".join(a for a in agents if a in PEERS)}) runs in '
                         f'its own venv: --peer_python={args.peer_python or "?"} is no file '
                         f'(benchmarks/peer_sb3.py says how to make the venv)')
    if args.jobs < 1 or args.budget_scale <= 0 or not seeds:
        raise ValueError('--jobs must be >= 1, --budget_scale > 0 and --seeds not empty')
    return [TASKS_BY_NAME[n] for n in names], agents, seeds


def library_root() -> Optional[str]:
    """The checkout this interpreter imports the library from (where
    `reverb_agents.agents` lives), or None where it cannot import it."""
    try:
        spec = importlib.util.find_spec('reverb_agents.agents')
    except ImportError:
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))


def check_library_root(agents: Sequence[str]) -> None:
    """ValueError (one line) where our runs would import another checkout's library: an
    editable install maps `reverb_agents` to the checkout it was installed from whatever
    the working folder, so a second checkout (a frozen worktree of a commit) run with the
    first one's interpreter measures the first one's code."""
    if all(a in PEERS for a in agents):
        return
    found = library_root()
    if found is not None and os.path.realpath(found) != os.path.realpath(ROOT):
        raise ValueError(f'this Python imports the library from {found}, not from this '
                         f'checkout ({ROOT}): the runs would measure that code; run the '
                         f"suite with a Python that has this checkout installed "
                         f"(pip install -e {ROOT})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        tasks, agents, seeds = _selection(args)
        if not args.list:
            check_library_root(agents)
        best = load_best(args.best) if args.best else {}
    except (ValueError, OSError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 1
    if args.list:
        print(list_tasks(tasks, agents, args.budget_scale))
        return 0
    runnable = []
    for task in tasks:
        if _available(task):
            runnable.append(task)
        else:
            print(f'skipping {task.name}: {task.env} needs {task.needs} '
                  f'({INSTALL[task.needs]})', file=sys.stderr)
    references = {t.name: (t.random, best.get(t.name, t.best)) for t in runnable}
    stamp = time.strftime('%Y%m%d-%H%M%S')
    logdir_root = suite_folder(args.logdir_root, stamp)
    extra = shlex.split(args.extra_flags)
    start = time.perf_counter()
    order = {(t.name, a, s): i for i, (t, a, s) in enumerate(
        (t, a, s) for t in runnable for a in agents for s in seeds)}
    output: Dict[str, Any] = {
        'suite': 'untuned', 'agents': agents, 'seeds': seeds, 'extra_flags': extra,
        'budget_scale': args.budget_scale, 'eval_episodes': EVAL_EPISODES,
        'logdir_root': logdir_root,
        'tasks': {t.name: {'env': t.env, 'random': t.random, 'best': references[t.name][1],
                           'best_source': args.best if t.name in best else 'documented',
                           'documented_best': t.best, 'reward_scale': t.reward_scale,
                           'score_env': t.score_env, 'held_out': t.held_out,
                           'budgets': {a: budget(t, a, args.budget_scale) for a in agents}}
                  for t in runnable},
        'skipped_tasks': [t.name for t in tasks if t not in runnable]}
    out = args.out or os.path.join(logdir_root, f'untuned-{stamp}.json')
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)

    def write(results: List[Dict[str, Any]]) -> None:
        """The JSON with the runs so far (a stopped suite keeps what it finished)."""
        add_fractions(results, references)
        runs = sorted(results, key=lambda r: order[r['task'], r['agent'], r['seed']])
        output.update(runs=runs, table=table(runs, runnable, agents),
                      wall_s=time.perf_counter() - start)
        with open(out + '.new', 'w') as f:
            json.dump(output, f, indent=2)
        os.replace(out + '.new', out)

    results = run_suite(plan(runnable, agents, seeds, args.budget_scale), logdir_root,
                        args.jobs, extra, args.run_timeout_s, args.peer_python, write)
    write(results)
    markdown = output['table']
    print(markdown)
    print(f'\n{len(results)} runs in {output["wall_s"]:.0f} s; fraction of best = '
          f'(score - random) / (best - random), median over seeds (min); JSON: {out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
