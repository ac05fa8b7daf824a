"""The Python API: `from reverb_agents import train, load_policy` (docs/python-api.md).

    result = train('clear', 'CartPole-v1', 300_000, seed=1)
    result.summary['eval_return_mean'], result.logdir
    result.policy.run_episode(gymnasium.make('CartPole-v1'), seed=0)

`train` takes what `launch/run.py` takes, as typed keyword arguments: run options
(`seed`, `num_envs`, `logdir`, `eval_every_steps`, `env_kwargs` as a dict, ...)
and any field of the agent's config (`learning_rate`, `hidden_sizes` as a tuple,
...). They build the run's `RunOptions` and config directly
(`launch.command_line.run_flags.resolve`, which the command line also ends in), after a
check of each value's type; the options' and configs' own checks then refuse
a bad value with the `ValueError` the command line would print. As on the
command line, the agent's preset for the environment applies first
(`preset=False`: none; a name: that one), read on a private set of absl flags
(a caller's own absl flags are never touched), and a `logdir` that holds a run
needs `resume=True`. Runs in one process.

`env` is a gymnasium id, an environment object or a function that makes one. An
object or a function is registered with gymnasium as `python/<its class or
function name>` (the run's `env`, in its logdir's name and `run_config.json`),
so the run makes its environments as it makes any other: an object is copied
(`copy.deepcopy`) for each training and evaluation environment. That id exists
in this process only: `launch/evaluate.py` and `--resume` from another process
need an id gymnasium knows there (`module:Env-v0`).

`callbacks` (`launch/learning/callbacks.py`) see the run's progress rows, evaluations and
checkpoints, and stop it by returning False.
"""

import ast
import copy
import dataclasses
import difflib
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import gymnasium as gym
from absl import flags

from reverb_agents.launch.command_line import run_flags as command_line
from reverb_agents.launch import environments
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.learning.callbacks import (Callback, CallbackLike, CheckpointSaved,
                                                     EarlyStopping, EvaluationResult, RunEvents,
                                                     StopTraining, TrainingProgress)
from reverb_agents.launch.policies.load import Policy, load_policy
from reverb_agents.launch.runs.preset_files import NO_PRESET
from reverb_agents.launch.tuning import tune as tuning
from reverb_agents.launch.tuning.outputs import TuneResult
from reverb_agents.launch.tuning.spaces import flag as flag_text
from reverb_agents.networks import user as user_lib
from reverb_agents.networks import user_spec

ENV_NAMESPACE = 'python'  # gymnasium's namespace of the environments given as objects
EnvSource = Union[str, gym.Env, Callable[..., gym.Env]]
# Flags the choice of the default preset depends on (`command_line.parse`): they go
# through the command line itself, the others are set on its values.
_BEFORE_PRESET = ('tasks', 'no_preset', 'role')


@dataclasses.dataclass
class Result:
    """What `train` returns."""
    summary: Dict[str, Any]  # `<logdir>/summary.json`
    logdir: str
    policy: Optional[Policy]  # the exported final policy (None if it could not be exported)
    env_id: str  # the run's gymnasium id (`python/<name>` for an environment object)
    stopped_by_callback: bool = False  # a callback ended the run


def _copy_of(env: gym.Env, **kwargs: Any) -> gym.Env:
    if kwargs:
        raise TypeError(f'an environment object takes no env_kwargs (got {sorted(kwargs)}): '
                        f'pass a function that makes the environment instead')
    return copy.deepcopy(env)


def _made_by(factory: Callable[..., gym.Env], **kwargs: Any) -> gym.Env:
    env = factory(**kwargs)
    if not isinstance(env, gym.Env):
        raise TypeError(f'{factory!r} returned {type(env).__name__}, not a gymnasium.Env')
    return env


def register_env(env: EnvSource) -> str:
    """The gymnasium id a run of `env` uses: an id as it is; an environment object, or a
    function (a class) making one from `env_kwargs`, registered as `python/<name>` (a
    later registration of the same name replaces this one). Raises ValueError for
    anything else, or an object that cannot be copied."""
    if isinstance(env, str):
        return env
    if isinstance(env, gym.Env):
        try:
            _copy_of(env).close()
        except Exception as e:  # deepcopy raises whatever a member's __deepcopy__ does
            raise ValueError(
                f'env: cannot copy {env} ({type(e).__name__}: {e}); a run makes several '
                f'environments (training and evaluation): pass a function that makes one, '
                f'env=lambda: MyEnv(...)') from None
        factory, name = (lambda **kwargs: _copy_of(env, **kwargs)), type(env.unwrapped).__name__
    elif callable(env):
        factory, name = env, getattr(env, '__name__', type(env).__name__)
    else:
        raise ValueError(f'env must be a gymnasium id, a gymnasium.Env or a function that '
                         f'makes one, got {env!r}')
    name = re.sub(r'[^\w.-]', '', name) or 'env'  # '<lambda>' -> 'lambda'
    env_id = f'{ENV_NAMESPACE}/{name}'
    gym.registry.pop(env_id, None)
    gym.register(env_id, entry_point=lambda **kwargs: _made_by(factory, **kwargs))
    return env_id


_TYPES = {'int': (int,), 'float': (int, float), 'bool': (bool,), 'string': (str,),
          'string enum': (str,)}
_NAMES = {'int': 'an int', 'float': 'a number', 'bool': 'True or False', 'string': 'a string',
          'string enum': 'a string'}


def _typed(flag: flags.Flag, name: str, value: Any) -> Any:
    """`value` checked against `flag`'s type, as `command_line.resolve` takes it: lists
    as tuples (their elements checked by the config), `env_kwargs` a dict of Python
    literals (it is written to `run_config.json` and compared on `--resume`)."""
    if name == 'env_kwargs':
        if not isinstance(value, Mapping):
            raise ValueError(f'env_kwargs must be a dict, got {value!r}')
        try:
            literal = ast.literal_eval(repr(dict(value))) == dict(value)
        except (ValueError, SyntaxError):
            literal = False
        if not literal:
            raise ValueError(f'env_kwargs={value!r}: the values must be Python literals '
                             f'(numbers, strings, tuples, lists, dicts); pass a function that '
                             f'makes the environment for anything else')
        return dict(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    kind = flag.flag_type()
    if isinstance(flag.parser, flags.ListParser):
        if not isinstance(value, (str, list, tuple)):
            raise ValueError(f'{name} takes a tuple, got {value!r}')
        return tuple(flag.parser.parse(value) if isinstance(value, str) else value)
    if not isinstance(value, _TYPES[kind]) or (isinstance(value, bool) and kind != 'bool'):
        raise ValueError(f'{name} takes {_NAMES[kind]}, got {value!r}')
    if kind == 'string enum' and value not in flag.parser.enum_values:
        raise ValueError(f'{name} takes one of {flag.parser.enum_values}, got {value!r}')
    return float(value) if kind == 'float' else value


def _user_networks(overrides: Dict[str, Any]) -> None:
    """`torso=` / `memory=` given as a function or a layer object become their config
    text (`networks.user.spec_of`: `MODULE:FUNCTION`, or `<local>:NAME` for this
    process); `torso_kwargs=` / `memory_kwargs=` given as a dict, `key=value,...`."""
    for name in ('torso', 'memory'):
        if overrides.get(name) is not None:
            overrides[name] = user_lib.spec_of(name, overrides[name])
    for name in ('torso_kwargs', 'memory_kwargs'):
        if overrides.get(name) is not None:
            overrides[name] = user_spec.format_kwargs(name, overrides[name])


def _values(argv: List[str], overrides: Dict[str, Any]) -> Dict[str, Any]:
    """The run's typed values: `argv` (agent, env, preset) through the command line with
    the preset it applies, then each override set as it is (`_typed`)."""
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    for name in overrides:
        if name not in fv:
            close = difflib.get_close_matches(name, list(fv), n=1)
            raise ValueError(f'unknown keyword {name!r}: not a flag of launch/run.py'
                             + (f' (did you mean {close[0]!r}?)' if close else ''))
    try:
        command_line.parse(argv, fv)
        values = command_line.flag_values(fv)
    except flags.Error as e:
        raise ValueError(str(e)) from None
    for name, value in overrides.items():
        if value is not None:  # None: the default, as a flag left out
            values[name] = _typed(fv[name], name, value)
    return values


def train(agent: str = 'clear', env: Optional[EnvSource] = None,
          num_steps: Optional[int] = None, *,
          callbacks: Union[CallbackLike, Sequence[CallbackLike]] = (),
          preset: Union[bool, str] = True,
          resume: bool = False, **overrides: Any) -> Result:
    """Trains `agent` on `env` (default CartPole-v1) in this process (see the module
    doc) and returns the summary, the run's directory and the exported policy.

    Raises ValueError (one line: the command line's `error:` message) for bad input,
    `launch.runs.rundir.TrainingError` when a run cannot go on; an exception a callback
    raises (other than `StopTraining`) ends the run and propagates.
    """
    argv = ['train', f'--agent={agent}']
    if env is not None:
        argv.append(f'--env={register_env(env)}')
    if preset is not True:
        argv.append(f'--preset={preset or NO_PRESET}')
    for name in _BEFORE_PRESET:
        if name in overrides:
            value = overrides.pop(name)
            argv.append(f'--{name}={str(value).lower() if isinstance(value, bool) else value}')
    if num_steps is not None:
        overrides['num_steps'] = num_steps
    _user_networks(overrides)
    values = _values(argv, overrides)
    if values['role'] or values['launcher'] != 'inprocess':
        raise ValueError('train() runs in one process: leave role and launcher out')
    try:
        options, config = command_line.resolve(values)
    except environments.EnvironmentSetupError as e:
        raise ValueError(str(e)) from None
    if callable(callbacks) or isinstance(callbacks, Callback):
        callbacks = (callbacks,)
    events = RunEvents.of_run(tuple(callbacks), options) if callbacks else None
    rundir.check_start(options.logdir, resume, options, config)
    try:
        setup_lib.check_networks(options, config)
    except environments.EnvironmentSetupError as e:
        raise ValueError(str(e)) from None
    summary = inprocess.train(options, config, events)
    policy = load_policy(summary['saved_model']) if summary.get('saved_model') else None
    return Result(summary, options.logdir, policy, options.env, bool(events and events.stopped))


def tune(agent: str, env: str, trials: int = 20, trial_steps: Optional[int] = None, *,
         trial_seeds: int = 1, preset: Union[bool, str] = True, jobs: int = 1,
         study: str = '', storage: str = '',
         study_dir: str = '', search: Sequence[str] = (), space: str = '',
         objective: str = 'final', pruner: str = 'median', evaluations: int = 5,
         **overrides: Any) -> TuneResult:
    """`reverb-agents tune` (`launch/tuning/tune.py`, docs/tuning.md) with typed
    arguments: `env` a gymnasium id (trials are processes of their own), `overrides`
    any train flag, passed to every trial (a config field given here is fixed, out of
    the search). Raises ValueError (one line) for bad input."""
    argv = ['tune', f'--agent={agent}', f'--env={env}', f'--trials={trials}',
            f'--trial_seeds={trial_seeds}', f'--jobs={jobs}', f'--study={study}', f'--storage={storage}',
            f'--study_dir={study_dir}', f'--search={",".join(search)}', f'--space={space}',
            f'--objective={objective}', f'--pruner={pruner}', f'--evaluations={evaluations}']
    if trial_steps is not None:
        argv.append(f'--trial_steps={trial_steps}')
    if preset is not True:
        argv.append(f'--preset={preset or NO_PRESET}')
    _user_networks(overrides)
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    for name, value in overrides.items():
        if name not in fv:
            raise ValueError(f'unknown keyword {name!r}: not a flag of launch/run.py')
        argv.append(flag_text(name, _typed(fv[name], name, value)))
    return tuning.run(argv)


__all__ = ['Callback', 'CheckpointSaved', 'EarlyStopping', 'EvaluationResult', 'Result',
           'StopTraining', 'TrainingProgress', 'TuneResult', 'register_env', 'train', 'tune',
           'load_policy']
