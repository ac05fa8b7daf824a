"""Fixtures shared across the test tiers.

- `run_cli(args, ...)`: `launch/run.py` as a subprocess with a temporary
  `--logdir`; `error_lines(text)`: its `error: ...` lines.
- `run_script(name, args, ...)`: any `launch/<name>.py` as a subprocess;
  `start_script(name, args)` one in the background, its output streamed.
  They fork it from a server that has imported TensorFlow and the library
  (`tests/forked.py`) unless `fresh=True` or `extra_env` names a variable read
  at start-up. `forked_python(kind, ...)` forks a script or code from that
  server ('library') or from one that imported TensorFlow but not this library
  ('tensorflow'); `fresh_python(code)` runs code in a new interpreter.
- `compare_exported(logdir, saved_model, tmp_path)`: the in-library greedy
  returns of a run's restored policy and the returns its SavedModel gives in a
  Python that never imports this library.
- `reverb_server(tables)`: a real Reverb server, stopped after the test.
- `wired_agent(name, env_id, **config)`: an agent wired as a run wires it (real
  tables, a real actor that filled them for one batch, a learner), small.
"""

import os

# Two xdist workers share the machine's 2 cores (pytest.ini; with a third the suite
# counted more CPU and was no faster: docs/benchmarks.md#the-test-suite),
# and many tests start runs in subprocesses besides: TensorFlow's per-process pool of
# one thread per core only oversubscribes them
# (one thread each made a sample of the suite 6-9% faster side by side). Set before
# TensorFlow starts (it reads the variable when it creates its context); subprocesses
# inherit it.
os.environ.setdefault('TF_NUM_INTRAOP_THREADS', '1')

import dataclasses
import gc
import json
import subprocess
import sys
import textwrap
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np
import pytest
import reverb

from reverb_agents.launch.runners import role_server
from tests import forked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT_SEEDS = [100, 101, 102]  # evaluation seeds of the export round trips


def _error_lines(text: str) -> List[str]:
    return [line for line in text.splitlines() if line.startswith('error:')]


@pytest.fixture(scope='session')
def error_lines() -> Callable[[str], List[str]]:
    """The lines of a process's output that report an error (`error: ...`)."""
    return _error_lines


@dataclasses.dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def errors(self) -> List[str]:
        return _error_lines(self.stderr)


# The checkout root on the path: `--env=tests.envs:...` names this package's test
# environments, as a user's `--env=mymodule:MyEnv-v0` names theirs.
_SCRIPT_ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join(
    p for p in (ROOT, os.environ.get('PYTHONPATH')) if p)}
# What each fork server imports: what a role imports (none of it defines a flag) and
# the rest of `launch/run.py`'s and the export CLI's modules, or TensorFlow without
# this library for the standalone SavedModel checks.
_PRELOADS = {
    'library': [*role_server.PRELOAD, 'reverb_agents.launch.runners.launcher',
                'reverb_agents.launch.policies.export'],
    'tensorflow': ['tensorflow', 'gymnasium'],
}
_fork_server, _close_fork_servers = forked.servers_for(_PRELOADS, _SCRIPT_ENV)


def pytest_collection_finish(session) -> None:
    """The collected modules (TensorFlow's included) leave the collector's reach, as
    the scripts' imports do (`console.freeze_imports`)."""
    gc.freeze()


@pytest.fixture(scope='session', autouse=True)
def fork_servers():
    """Stops this process's fork servers (`tests/forked.py`) at the end of the session."""
    yield
    _close_fork_servers()


def _run_script(name: str, args: Sequence[str], extra_env: Optional[Dict[str, str]] = None,
                timeout: float = 300, fresh: bool = False) -> CliResult:
    env = {**_SCRIPT_ENV, **(extra_env or {})}
    script = os.path.join(ROOT, 'launch', f'{name}.py')
    if fresh or forked.needs_fresh_interpreter(extra_env):
        result = subprocess.run([sys.executable, script, *args], capture_output=True,
                                text=True, timeout=timeout, env=env)
        return CliResult(result.returncode, result.stdout, result.stderr)
    return CliResult(*_fork_server('library').run([script, *args], env, os.getcwd(), timeout,
                                                  script=script))


def _fresh_python(code: str, timeout: float = 120) -> List[str]:
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def _forked_python(kind: str, argv: Sequence[str], script: Optional[str] = None,
                   code: Optional[str] = None, cwd: Optional[str] = None,
                   timeout: float = 300) -> CliResult:
    """`python script *argv` or `python -c code *argv`, forked from the `kind` server
    ('library' or 'tensorflow', which never imports this library)."""
    argv = [script, *argv] if script else list(argv)
    return CliResult(*_fork_server(kind).run(argv, dict(_SCRIPT_ENV), cwd or os.getcwd(),
                                             timeout, script=script, code=code))


@pytest.fixture(scope='session')
def forked_python() -> Callable[..., CliResult]:
    """`forked_python(kind, argv, script=None, code=None, cwd=None, timeout=300)`: a script
    or code run by a child of a fork server that imported TensorFlow ('tensorflow') or
    TensorFlow and this library ('library'), `tests/forked.py`."""
    return _forked_python


def _start_script(name: str, args: Sequence[str], cwd: Optional[str] = None) -> forked.Forked:
    script = os.path.join(ROOT, 'launch', f'{name}.py')
    return _fork_server('library').start([script, *args], dict(_SCRIPT_ENV), cwd or os.getcwd(),
                                         script=script, merged=True)


@pytest.fixture(scope='session')
def start_script() -> Callable[..., forked.Forked]:
    """`start_script('run', args, cwd=None)`: `launch/<name>.py` in the background, forked
    (`tests/forked.py`): a `Forked`, `subprocess.Popen`'s `pid`, `poll`, `wait`,
    `send_signal`, `kill`, and `stdout` streaming stdout and stderr merged."""
    return _start_script


@pytest.fixture(scope='session')
def fresh_python() -> Callable[..., List[str]]:
    """`fresh_python(code)`: `code` run by a new interpreter (what it imports is its own);
    the lines it printed (a failure shows its stderr)."""
    return _fresh_python


@pytest.fixture(scope='session')
def run_script() -> Callable[..., CliResult]:
    """`run_script('evaluate', ['--episodes=2', ...], extra_env=None, timeout=300,
    fresh=False)`: `launch/evaluate.py` as a subprocess (forked, unless `fresh`)."""
    return _run_script


@pytest.fixture
def run_cli(tmp_path) -> Callable[..., CliResult]:
    """`run_cli(args, extra_env=None, timeout=120, logdir=None)`: `launch/run.py` with
    `--logdir` (default `<tmp_path>/run`) and `args`, forked (`_run_script`)."""

    def run(args: Sequence[str], extra_env: Optional[Dict[str, str]] = None,
            timeout: float = 120, logdir: Optional[str] = None) -> CliResult:
        logdir = logdir or str(tmp_path / 'run')
        return _run_script('run', ['--no_preset', f'--logdir={logdir}', *args], extra_env,
                           timeout)

    return run


@pytest.fixture
def reverb_server():
    """`reverb_server(tables)` -> a running `reverb.Server`, stopped after the test."""
    servers = []

    def start(tables: Sequence[reverb.Table]) -> reverb.Server:
        servers.append(reverb.Server(list(tables)))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


# SAC's feed-forward actor (its default is recurrent): what the SAC cases below test.
SAC_FEED_FORWARD = dict(lstm_size=0, burn_in=0, unroll_length=1)
SAC_FEED_FORWARD_FLAGS = [f'--{name}={value}' for name, value in SAC_FEED_FORWARD.items()]
# SAC's critic policy (softmax(Q / alpha), no actor): no layers of an actor's own and
# its temperature in the critics' units, whose exported core holds no action-gap scale.
SAC_CRITIC_POLICY = dict(discrete_policy='critic', policy_hidden_sizes=(), temperature_unit='value')
# Small networks and batches, so each agent's case takes seconds.
SMALL = {
    'clear': dict(lstm_size=8, hidden_sizes=(8,), batch_size=4, unroll_length=5,
                  min_replay_size=4, queue_size=16),
    'acer': dict(lstm_size=8, hidden_sizes=(8,), batch_size=4, unroll_length=5,
                 replay_start_size=20, queue_size=16, advantage_hidden_sizes=(8,)),
    'sac': dict(hidden_sizes=(8,), critic_hidden_sizes=(8,), batch_size=8, learning_starts=16,
                **SAC_FEED_FORWARD),
    'a2c': dict(lstm_size=8, hidden_sizes=(8,), batch_size=4, unroll_length=5, queue_size=16),
}
WIRED_NUM_ENVS = 4


@pytest.fixture(scope='session')
def small_settings() -> Dict[str, Dict[str, Any]]:
    """Per agent, config values that make its networks and batches small."""
    return SMALL


@dataclasses.dataclass
class WiredAgent:
    agent: Any
    config: Any
    setup: Any
    envs: Any
    client: reverb.Client
    address: str
    learner: Any


def env_steps_for_one_batch(plan) -> int:
    """Env steps an actor of WIRED_NUM_ENVS environments takes to fill both tables
    for a batch."""
    sequences = max(plan.min_replay_size, plan.batch_sequences)
    rounds = -(-sequences // WIRED_NUM_ENVS) + 1
    return (rounds * plan.sequence_period + plan.sequence_length) * WIRED_NUM_ENVS


@pytest.fixture
def wired_agent(tmp_path, reverb_server):
    """`wired_agent(name, env_id, rate_limited=True, **config)` -> `WiredAgent`: `SMALL`
    settings (and `config` over them), real tables and an actor that filled them for
    one batch. `rate_limited=False` drops the plan's sample-to-insert ratio (SAC's),
    under which sampling beyond it would block."""
    from reverb_agents.agents import configs, registry
    from reverb_agents.launch.building import setup as setup_lib
    from reverb_agents.launch.acting.actor import EpisodeStats
    from reverb_agents.launch.runs.options import RunOptions
    from reverb_agents.replay.variables import VariablePublisher
    made = []

    def wire(name: str, env_id: str, rate_limited: bool = True, **config) -> WiredAgent:
        agent = registry.get(name)
        config = configs.from_flat(agent.config_class, {**SMALL.get(name, {}), **config})
        options = RunOptions(agent=name, env=env_id, num_envs=WIRED_NUM_ENVS,
                             logdir=str(tmp_path))
        envs = setup_lib.make_envs(options, config, WIRED_NUM_ENVS, 0)
        made.append(envs)
        setup = setup_lib.make_setup(options, config, envs)
        if not rate_limited:  # a test may then sample the table as often as it likes
            setup = dataclasses.replace(
                setup, plan=dataclasses.replace(setup.plan, samples_per_insert=None))
        server = reverb_server(setup_lib.make_server_tables(setup))
        address = f'localhost:{server.port}'
        client = reverb.Client(address)
        learner = setup_lib.make_learner(setup)
        VariablePublisher(client, list(learner.core.variables)).publish()
        stats = EpisodeStats()
        actor = setup_lib.make_actor(setup, client, envs, 0, stats)
        needed, deadline = env_steps_for_one_batch(setup.plan), time.monotonic() + 60
        actor.run(lambda: stats.env_steps >= needed or time.monotonic() > deadline,
                  max_env_steps=needed)
        assert stats.env_steps >= needed
        return WiredAgent(agent, config, setup, envs, client, address, learner)

    yield wire
    for envs in made:
        envs.close()


def library_greedy_returns(core, action_space, env_id: str, seeds: Sequence[int],
                           env: Optional[gym.Env] = None) -> List[float]:
    """In-library greedy returns, one environment (`env`, else `gym.make(env_id)`), batch
    size 1, episode i on seeds[i]."""
    import tensorflow as tf
    from reverb_agents.launch.acting.policy import Policy
    from reverb_agents.networks.observations import numpy_caster

    policy = Policy(core, action_space, seed=0, deterministic=True)
    env = env or gym.make(env_id)
    cast = numpy_caster(env.observation_space)  # as the actors store observations
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        state = policy.initial_state(1)
        prev_action = tuple(np.zeros([1, *s.shape], s.dtype.as_numpy_dtype)
                            for s in action_space.action_specs())
        prev_reward, first, total, done = np.zeros([1], np.float32), np.ones([1], bool), 0.0, False
        while not done:
            batched = cast(tf.nest.map_structure(lambda x: np.asarray(x)[None], obs))
            action, _, _, _, state = policy(batched, prev_action, prev_reward, first, state)
            env_action = tf.nest.map_structure(lambda a: a[0], action_space.to_env(action))
            obs, reward, terminated, truncated, _ = env.step(env_action)
            total += reward
            done = terminated or truncated
            prev_action, prev_reward = action, np.array([reward], np.float32)
            first = np.zeros([1], bool)
        returns.append(total)
    return returns


# A consumer with nothing but TensorFlow, numpy and gymnasium: it builds the inputs
# from the specs' `observation_inputs` (path into the observation, dtype), feeds
# `first` true and zeros for the previous action and reward at each episode's first
# step, and builds the environment's action from `action_outputs`.
STANDALONE = textwrap.dedent('''
    import json, sys
    import gymnasium as gym
    import numpy as np
    import tensorflow as tf

    path, env_id, seeds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    model = tf.saved_model.load(path)
    specs = json.loads(model.signatures['specs']()['specs'].numpy().decode())
    step = model.signatures['step_deterministic']
    inputs_, outputs_ = specs['observation_inputs'], specs['action_outputs']

    def at(nest, path):
        for key in path:
            nest = nest[key]
        return nest

    def env_action(values):
        if len(outputs_) == 1 and not outputs_[0]['path']:
            return values[0]
        parts = {o['path'][0]: v for o, v in zip(outputs_, values)}  # one level: Tuple / Dict
        return tuple(parts[i] for i in range(len(parts))) if 0 in parts else parts

    env = gym.make(env_id)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        inputs = dict(model.signatures['initial_state'](batch_size=tf.constant(1)))
        for o in outputs_:
            inputs[o['prev_name']] = tf.zeros([1, *o['shape']], o['dtype'])
        inputs['prev_reward'] = tf.zeros([1], tf.float32)
        total, done, t = 0.0, False, 0
        while not done:
            inputs['first'] = tf.constant([t == 0])
            for i in inputs_:
                inputs[i['name']] = tf.constant(np.asarray(at(obs, i['path']), i['dtype'])[None])
            out = step(**inputs)
            values = [out.pop(o['name']).numpy()[0] for o in outputs_]
            obs, reward, terminated, truncated, _ = env.step(env_action(values))
            total += float(reward)
            done, t = terminated or truncated, t + 1
            inputs.update(out)
            for o, v in zip(outputs_, values):
                inputs[o['prev_name']] = tf.constant(np.asarray(v)[None])
            inputs['prev_reward'] = tf.constant([reward], tf.float32)
        returns.append(total)
    library = sorted(m for m in sys.modules if m.split('.')[0] == 'reverb_agents')
    print(json.dumps({'returns': returns, 'library_modules': library}))
''')


def run_standalone(saved_model: str, env_id: str, seeds: Sequence[int], tmp_path) -> dict:
    """Runs STANDALONE in a Python that imported TensorFlow but not this library (cwd
    outside the checkout); returns its JSON.
    The checkout is on its path only so that an environment id `tests.envs:...`
    resolves; the script imports nothing of the library (checked)."""
    script = tmp_path / 'standalone.py'
    script.write_text(STANDALONE)
    result = _forked_python('tensorflow', [saved_model, env_id, json.dumps(list(seeds))],
                            script=str(script), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output['library_modules'] == []
    return output


@pytest.fixture(scope='session')
def compare_exported():
    """`compare_exported(logdir, saved_model, tmp_path)` -> (in-library greedy returns of
    the run's restored policy, the SavedModel's returns without the library), on
    `EXPORT_SEEDS`."""
    from reverb_agents.launch.policies import export

    def compare(logdir: str, saved_model: str, tmp_path):
        core, action_space, _, env_id = export.restore_core(logdir)
        expected = library_greedy_returns(core, action_space, env_id, EXPORT_SEEDS)
        return expected, run_standalone(saved_model, env_id, EXPORT_SEEDS, tmp_path)['returns']

    return compare


def _write_episode(path, observation, action, observation_space: gym.Space,
                   action_space: gym.Space) -> str:
    """`observation` `[N, ...]` and `action` `[N, ...]` as one episode (reward 1 per step,
    terminated at the last) in a new demonstrations file at `path`; returns the path."""
    from reverb_agents.replay import demos
    n = len(action)
    terminated = np.zeros(n, bool)
    terminated[-1] = True
    demos.write_demos(str(path), observation, action, np.ones(n, np.float32), terminated,
                      np.zeros(n, bool), observation_space, action_space, 'hand-made')
    return str(path)


@pytest.fixture(scope='session')
def write_episode() -> Callable[..., str]:
    """`write_episode(path, observation, action, observation_space, action_space)`: a
    demonstrations file (`replay/demos.py`) of one hand-made episode."""
    return _write_episode


def rule_action(observation: np.ndarray) -> int:
    """A hand-written CartPole controller: push towards the side the pole falls to."""
    return int(observation[2] + 0.5 * observation[3] > 0)


@pytest.fixture(scope='session')
def cartpole_rule_demos(tmp_path_factory) -> str:
    """A demonstrations file (`replay/demos.py`) of 5 CartPole-v1 episodes of `rule_action`
    (seeds 0-4), written with `replay.demos.write_demos` as any other source would."""
    from reverb_agents.replay import demos
    env = gym.make('CartPole-v1')
    observations, actions, terminated, truncated = [], [], [], []
    for seed in range(5):
        observation, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = rule_action(observation)
            observations.append(observation)
            actions.append(action)
            observation, _, end, cut, _ = env.step(action)
            terminated.append(end)
            truncated.append(cut)
            done = end or cut
    path = str(tmp_path_factory.mktemp('demos') / 'cartpole_rule.npz')
    demos.write_demos(path, np.array(observations, np.float32), np.array(actions),
                      np.ones(len(actions), np.float32), np.array(terminated),
                      np.array(truncated), env.observation_space, env.action_space,
                      'CartPole-v1')
    return path


@pytest.fixture
def run_main(capsys):
    """`run_main(args) -> (exit status, error: lines)`: `launch/run.py`'s main with `args`
    (its own parser, default presets included), in this process."""
    from absl import flags

    # train defines run.py's flags on absl's FLAGS
    from reverb_agents.launch.command_line import train as run

    def call(args):
        flags.FLAGS.unparse_flags()
        code = 0
        try:
            run.parse_flags(['run.py', *args])
            run.main([])
        except SystemExit as e:
            code = e.code
        finally:
            flags.FLAGS.unparse_flags()
        return code, [line for line in capsys.readouterr().err.splitlines()
                      if line.startswith('error:')]

    return call
