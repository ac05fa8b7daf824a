"""The run's flags, their presets and what they resolve to (`RunOptions`, the agent's config).

`resolve` builds a run's `RunOptions` and the agent's config from typed
values by flag name. `launch/run.py` defines the flags on absl's global
`FLAGS` and reads them with `flag_values`; the Python API (`launch.api.train`)
parses only a preset and its agent/env on a private `FlagValues` (the caller's
own absl flags are never touched) and sets its typed keywords directly.

- **Presets.** The flagfiles in `launch/presets/` are package data, found
  through `importlib.resources`, so an installed wheel has them too.
  `--preset=NAME` applies `presets/NAME.flags` (or a `.flags` path) first;
  without it, `<agent>_<env>.flags` applies when it exists (`clear` and
  `CartPole-v1`: `clear_cartpole.flags`) unless `--preset=none` (or
  `--no_preset`) or a `--flagfile` is given. The command line's flags
  override a preset. A demonstrations path such as
  `launch/presets/demos/x.npz` that is not found from the working directory is
  looked up in the installed presets (`package_path`).
- **Environment keywords.** `--env_kwargs=key=value,...` go to
  `gymnasium.make`; each value is a Python literal when it reads as one
  (`3`, `0.5`, `True`, `(1, 2)`), a string otherwise.
"""

import os
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from absl import flags

from reverb_agents.agents import registry
from reverb_agents.launch.command_line import config_flags
from reverb_agents.launch.runners import isolation, ray_launcher
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.environments import task_sequence
from reverb_agents.launch.runs.preset_files import (NO_PRESET, default_preset, list_presets,
                                                    package_path, preset_path)
from reverb_agents.launch.runs.options import (DETERMINISTIC_CHECKPOINT_STEPS,
                                               DETERMINISTIC_LOG_STEPS, VECTOR_ENVS, RunOptions,
                                               parse_env_kwargs)

ROLES = ('replay', 'learner', 'actor')
LAUNCHERS = ('inprocess', 'multiprocess', 'ray')
DEMO_FLAGS = ('gail_demos', 'bc_demos')  # files a preset may name (`package_path`)
RUNS = 'runs'  # where runs without --logdir go, under the working directory
_DEFAULTS = RunOptions(logdir='-')
DETERMINISTIC_HELP = (
    'in-process runs: the same --seed gives the same progress.csv (it then has no '
    'wall-time column), evaluation and final checkpoint, bit for bit. TensorFlow op '
    'determinism; acting and learning take turns in one thread (no overlap) on a schedule '
    'the data plan fixes; replay is sampled uniformly in a seeded order; progress rows and '
    'checkpoints come every N learner steps. About 3x the wall time of the default CLEAR '
    'preset (docs/design.md, "Reproducible runs"). Refuses other launchers, prioritized '
    'replay, reservoir eviction and resuming')


def _default_help(field: str) -> str:
    """'(default X; sac: Y)': RunOptions' default and the agents that differ."""
    parts = [f'default {getattr(_DEFAULTS, field)}'] + [
        f'{name}: {a.run_defaults[field]}' for name, a in sorted(registry.AGENTS.items())
        if field in a.run_defaults]
    return f'({"; ".join(parts)})'


def define_flags(fv: flags.FlagValues) -> None:
    """Every flag of `launch/run.py` (the run's, the roles', every agent config's) on `fv`."""
    # Long: a table of the run's flags, one definition per line, read as a list.
    def string(name, default, text):
        flags.DEFINE_string(name, default, text, flag_values=fv)

    def integer(name, default, text):
        flags.DEFINE_integer(name, default, text, flag_values=fv)

    def real(name, default, text):
        flags.DEFINE_float(name, default, text, flag_values=fv)

    def boolean(name, default, text):
        flags.DEFINE_bool(name, default, text, flag_values=fv)

    string('agent', 'clear', f'agent to train: one of {sorted(registry.AGENTS)}')
    string('env', _DEFAULTS.env, 'any gymnasium environment id (or module:Env-v0)')
    string('env_kwargs', '', 'keyword arguments for gymnasium.make, key=value,... (values '
           'read as Python literals where they are one, else as strings)')
    string('vector_env', '', f'how the actor\'s environments are stepped: one of '
           f'{list(VECTOR_ENVS)} (default: the environment\'s own vectorised version if it '
           f'has one, else sync); async runs each in a subprocess; ale steps Atari games in '
           f'ALE\'s C++ vector env')
    string('tasks', '', 'a task sequence instead of --env: gymnasium ids A,B,C trained in '
           'turn, --steps_per_task each, no task identity given')
    integer('steps_per_task', None, 'env steps per visit of a task (--tasks)')
    integer('task_cycles', _DEFAULTS.task_cycles, 'times a task sequence is gone through')
    integer('eval_every_steps', _DEFAULTS.eval_every_steps,
            'env steps between greedy evaluations during training (--eval_episodes each; '
            'eval/return, the best kept as saved_model_best); 0: none, or five per task '
            'visit of a sequence (every task evaluated)')
    integer('step_mul', _DEFAULTS.step_mul,
            'action repeat: with --fixed_step_mul every action is taken this many times; '
            'without, the policy picks 1..step_mul per decision (a learned head)')
    boolean('fixed_step_mul', _DEFAULTS.fixed_step_mul,
            'repeat every action --step_mul times instead of learning how often')
    integer('num_envs', None, f'environments per actor, stepped together '
            f'{_default_help("num_envs")}')
    integer('num_steps', None, f'environment-step budget {_default_help("num_steps")}')
    integer('seed', _DEFAULTS.seed, 'random seed (environments, sampling, initialisation)')
    string('logdir', '', f'the run\'s directory: TensorBoard logs, checkpoints, progress.csv, '
           f'summary.json, the policy (default: a new {RUNS}/<agent>-<env>-<date>-<time>)')
    boolean('resume', False, 'continue the run in --logdir from its last checkpoint (the same '
            'agent, environment, config and seed)')
    string('preset', '', f'flags applied first, overridden by the command line: a preset\'s '
           f'name ({", ".join(list_presets()[:3])}, ... in launch/presets/), a .flags path, '
           f'or {NO_PRESET!r}; default: <agent>_<env> where one exists '
           f'(reverb-agents presets lists them)')
    boolean('no_preset', False, f'an alias of --preset={NO_PRESET} (--help leaves it out)')
    boolean('verbose', False, 'show TensorFlow\'s and Reverb\'s own log lines and every '
            'absl INFO line')
    integer('eval_episodes', None, f'greedy evaluation episodes (at the end and every '
            f'--eval_every_steps) {_default_help("eval_episodes")}')
    real('eval_epsilon', _DEFAULTS.eval_epsilon,
         'epsilon-greedy evaluation (ALF): each step of each evaluation episode samples '
         'from the policy with this probability, in [0, 1]')
    real('target_return', _DEFAULTS.target_return,
         'stop early once the last 20 training episodes average this return (and, with '
         '--target_greedy, a greedy evaluation of --eval_episodes episodes does too)')
    boolean('target_greedy', _DEFAULTS.target_greedy,
            '--target_return also needs a greedy evaluation at least as good: checked '
            'when the training mean reaches it, again after 20 more episodes if not')
    real('log_interval_s', _DEFAULTS.log_interval_s,
         'seconds between progress.csv rows (and progress lines off a terminal)')
    real('checkpoint_interval_s', _DEFAULTS.checkpoint_interval_s,
         'seconds between learner checkpoints')
    integer('log_interval_steps', _DEFAULTS.log_interval_steps,
            f'learner steps between progress.csv rows instead of --log_interval_s (0: by '
            f'seconds; --deterministic: {DETERMINISTIC_LOG_STEPS} when 0)')
    integer('checkpoint_interval_steps', _DEFAULTS.checkpoint_interval_steps,
            f'learner steps between checkpoints instead of --checkpoint_interval_s (0: by '
            f'seconds; --deterministic: {DETERMINISTIC_CHECKPOINT_STEPS:,} when 0)')
    boolean('deterministic', _DEFAULTS.deterministic, DETERMINISTIC_HELP)
    boolean('export', _DEFAULTS.export, 'write the final policy as a SavedModel in '
            '<logdir>/saved_model (--noexport: none, as in a sweep; launch/policies/export.py '
            'exports any checkpoint later)')
    string('tracker', _DEFAULTS.tracker, "an experiment tracker the run reports to: 'mlflow' "
           '(its flags as params, progress and evaluations as metrics, summary.json and the '
           "SavedModel as artifacts; the mlflow extra), or '' for none")
    string('tracking_uri', _DEFAULTS.tracking_uri, "the tracker's store (default: "
           'MLFLOW_TRACKING_URI, else SQLite in ./mlruns)')
    string('torso_precision', _DEFAULTS.torso_precision, 'image torsos\' compute: float32, or '
           'bfloat16 from float32 weights (about half a Nature CNN learner step on CPUs with '
           'AMX or AVX512-BF16; the export computes in float32)')
    integer('intra_op_threads', None, f'TensorFlow\'s threads within one op (its matmuls); '
            f'0: one per core {_default_help("intra_op_threads")}')
    boolean('save_replay', None, f'in-process runs: checkpoint the replay tables with the '
            f'learner and restore them on --resume {_default_help("save_replay")}')
    string('launcher', 'inprocess', 'inprocess: one process (server, actor thread, learner); '
           'multiprocess: every role as a child process on this machine; ray: every role '
           'as a Ray actor on a Ray cluster (pip install -e .[ray])')
    integer('num_actors', 2, 'actor processes (--launcher=multiprocess or ray)')
    string('ray_address', '', "--launcher=ray: '' starts a local Ray instance; 'auto' or "
           'host:port joins a running cluster')
    real('actor_cpus', 1.0, '--launcher=ray: CPUs each actor reserves')
    string('actor_resources', '', '--launcher=ray: custom Ray resources each actor needs, '
           'name=amount,... (pins actors to the nodes that have them)')
    string('learner_resources', '', '--launcher=ray: custom Ray resources the learner (and '
           'the replay server beside it) needs, name=amount,... (pins them to a node)')
    integer('learner_gpus', -1, '--launcher=ray: GPUs for the learner (-1: 1 if the cluster '
            'has a GPU, else 0)')
    string('role', '', 'run one role of a multi-process run: replay, learner or actor')
    string('replay_address', '', 'host:port of the replay server (learner, actor)')
    integer('replay_port', 0, 'port of the replay server (0: a free one). Reverb listens on '
            'all interfaces: unless the run is isolated (--network_isolation), firewall it')
    isolation.define_flag(fv)
    integer('actor_id', 0, 'this actor\'s index (seeds its environments)')
    real('connect_timeout_s', 20.0, 'seconds to wait for the replay server to answer at start')
    real('reconnect_timeout_s', 120.0,
         'seconds a role waits for a lost replay server before it gives up')
    real('replay_checkpoint_interval_s', 60.0,
         'seconds between checkpoints of the replay tables (--role=replay)')
    config_flags.define_flags(registry.CONFIG_CLASSES, fv)


def parse(argv: List[str], fv: flags.FlagValues) -> Tuple[List[str], Optional[str]]:
    """Parses `argv` (program name first) into `fv`, the default preset first where one
    applies (see the module doc); returns (the arguments left, the preset applied or None).
    Raises `flags.Error` for an unknown flag or a value of the wrong type."""
    rest = fv(argv)
    if fv.preset and fv.preset != NO_PRESET:
        preset = preset_path(fv.preset)
    elif (fv.preset == NO_PRESET or fv.no_preset or fv.role or fv.tasks or any(
            arg.split('=', 1)[0] in ('--flagfile', '-flagfile') for arg in argv[1:])):
        return rest, None
    else:
        preset = default_preset(fv.agent, fv.env)
    if preset is None:
        return rest, None
    fv.unparse_flags()
    return fv([argv[0], f'--flagfile={preset}', *argv[1:]]), preset


def new_logdir(agent: str, env: str, root: str = RUNS) -> str:
    """A directory that does not exist yet: `<root>/<agent>-<env>-<YYYYmmdd-HHMMSS>`
    (`-2`, `-3`, ... appended when two runs start within one second)."""
    stamp = time.strftime('%Y%m%d-%H%M%S')
    name = '+'.join(re.sub(r'[^A-Za-z0-9_.-]', '_', e.rpartition(':')[2]) for e in env.split(','))
    base = os.path.join(root, f'{agent}-{name}-{stamp}')
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f'{base}-{n}'
    return path


def flag_values(fv: flags.FlagValues) -> Dict[str, Any]:
    """The parsed flags as the typed values `resolve` takes: each flag's value by name,
    `env_kwargs` read into a dict, `env` None when it was not given (the default then)."""
    values = {name: fv[name].value for name in fv}
    values['env_kwargs'] = parse_env_kwargs(fv.env_kwargs)
    values['env'] = fv.env if fv['env'].present else None
    return values


def resolve(values: Mapping[str, Any]) -> Tuple[RunOptions, Any]:
    """The run's options and the agent's config from typed values by flag name (every
    flag of `define_flags`; `flag_values` reads them from the command line, the Python
    API sets its keywords directly). A run without `logdir` gets `new_logdir`'s name
    (not created here).

    Raises ValueError (one line) for unknown roles or launchers, a field of
    another agent, or a value an options or config check refuses.
    """
    v = dict(values)
    role, launcher = v['role'], v['launcher']
    if role and role not in ROLES:
        raise ValueError(f'unknown --role={role!r}; choose one of {list(ROLES)}')
    if launcher not in LAUNCHERS:
        raise ValueError(f'unknown --launcher={launcher!r}; choose one of {list(LAUNCHERS)}')
    if launcher != 'inprocess' and v['num_actors'] < 1:
        raise ValueError(f'--num_actors must be >= 1, got {v["num_actors"]}')
    if launcher == 'ray':
        ray_launcher.check_flags(v['ray_address'], v['actor_cpus'], v['actor_resources'],
                                 v['learner_resources'])
    if role in ('learner', 'actor') and not v['replay_address']:
        raise ValueError(f'--role={role} needs --replay_address=host:port')
    if role and not v['logdir']:
        raise ValueError(f'--role={role} needs --logdir (the run\'s directory, shared by '
                         f'its roles)')
    agent = registry.get(v['agent'])
    for name in DEMO_FLAGS:
        if v[name]:
            v[name] = package_path(v[name])
    config = config_flags.config_from_values(v['agent'], registry.CONFIG_CLASSES, v)
    per_agent = {name: v[name]
                 for name in ('num_envs', 'num_steps', 'eval_episodes', 'save_replay',
                              'intra_op_threads')}
    env, sequence = v['env'] or _DEFAULTS.env, {}
    if v['tasks']:
        env, sequence = _task_sequence(v, per_agent['num_steps'])
        per_agent['num_steps'] = sequence.pop('num_steps')
    elif v['steps_per_task'] is not None:
        raise ValueError('--steps_per_task needs --tasks')
    options = RunOptions(
        agent=v['agent'], env=env, seed=v['seed'],
        logdir=v['logdir'] or new_logdir(v['agent'], env), **sequence,
        env_kwargs=dict(v['env_kwargs']),
        **{name: v[name] for name in (
            'vector_env', 'eval_every_steps', 'step_mul', 'fixed_step_mul', 'eval_epsilon',
            'target_return', 'target_greedy', 'log_interval_s', 'checkpoint_interval_s',
            'log_interval_steps', 'checkpoint_interval_steps', 'deterministic',
            'torso_precision', 'export', 'tracker', 'tracking_uri')},
        launcher='multiprocess' if role else launcher,
        **{**agent.run_defaults, **{k: x for k, x in per_agent.items() if x is not None}})
    return options, setup_lib.resolve_config(options, config)


def _task_sequence(v: Mapping[str, Any], num_steps: Optional[int]) -> Tuple[str, Dict[str, int]]:
    """`env` ('A,B') and the sequence's RunOptions fields from --tasks and its flags."""
    if v['env'] is not None:
        raise ValueError('give --env or --tasks, not both')
    if v['launcher'] != 'inprocess' or v['role']:
        raise ValueError('task sequences run in one process (--launcher=inprocess)')
    tasks = task_sequence.parse_tasks(v['tasks'])
    steps, cycles = v['steps_per_task'], v['task_cycles']
    if steps is None or steps < 1:
        raise ValueError(f'--tasks needs --steps_per_task >= 1 (env steps per task visit), '
                         f'got {steps}')
    if cycles < 1:
        raise ValueError(f'--task_cycles must be >= 1, got {cycles}')
    total = len(tasks) * steps * cycles
    if num_steps is not None and num_steps != total:
        raise ValueError(f'--num_steps={num_steps} but the sequence is {total} env steps '
                         f'(tasks x --steps_per_task x --task_cycles); leave --num_steps out')
    return ','.join(tasks), {'steps_per_task': steps, 'task_cycles': cycles, 'num_steps': total}
