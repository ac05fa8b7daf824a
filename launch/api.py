"""The Python API: `from reverb_agents import train, load_policy` (docs/python-api.md).

    result = train('clear', 'CartPole-v1', 300_000, seed=1)
    result.summary['eval_return_mean'], result.logdir
    result.policy.run_episode(gymnasium.make('CartPole-v1'), seed=0)

`train` takes what `launch/run.py` takes, as typed keyword arguments: run options
(`seed`, `num_envs`, `logdir`, `eval_every_steps`, `env_kwargs` as a dict, ...)
and any field of the agent's config (`learning_rate`, `hidden_sizes` as a tuple,
...). They are set on a private set of absl flags through the command line's own
parsers and checks (`launch/command_line.py`), so a bad value raises the
`ValueError` the command line would print, and a caller's own absl flags are
never touched. As on the command line, the agent's preset for the environment
applies (`preset=False`: none; a name: that one) and a `logdir` that holds a run
needs `resume=True`. Runs in one process.

`env` is a gymnasium id, an environment object or a function that makes one. An
object or a function is registered with gymnasium as `python/<its class or
function name>` (the run's `env`, in its logdir's name and `run_config.json`),
so the run makes its environments as it makes any other: an object is copied
(`copy.deepcopy`) for each training and evaluation environment. That id exists
in this process only: `launch/evaluate.py` and `--resume` from another process
need an id gymnasium knows there (`module:Env-v0`).

`callbacks` (`launch/callbacks.py`) see the run's progress as often as
`progress.csv` gets a row and stop it by returning False.
"""

import copy
import dataclasses
import difflib
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import gymnasium as gym
from absl import flags

from reverb_agents.launch import command_line, environments, inprocess, rundir
from reverb_agents.launch.callbacks import Callback, ProgressCallbacks, StopTraining, TrainingProgress
from reverb_agents.launch.policy import Policy, load_policy
from reverb_agents.launch.preset_files import NO_PRESET

ENV_NAMESPACE = 'python'  # gymnasium's namespace of the environments given as objects
EnvSource = Union[str, gym.Env, Callable[..., gym.Env]]
# Flags the choice of the default preset depends on (`command_line.parse`): they go
# through the command line itself, the others are set after it.
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


def _literal(value: Any) -> str:
    """`repr(value)` with every comma inside a string written `\\x2c`, so that
    `command_line.parse_env_kwargs` never splits a string at a `, name=` inside it."""
    if isinstance(value, (str, bytes)):
        return repr(value).replace(',', '\\x2c')
    if isinstance(value, dict):
        return '{' + ', '.join(f'{_literal(k)}: {_literal(v)}' for k, v in value.items()) + '}'
    if isinstance(value, (list, tuple)):
        items = ', '.join(_literal(v) for v in value)
        return f'[{items}]' if isinstance(value, list) else f'({items}{"," * (len(value) == 1)})'
    return repr(value)


def _flag_value(flag: flags.Flag, name: str, value: Any) -> Any:
    """`value` as `flag.parse` takes it: lists of strings for list flags (numbers
    written exactly: the config's element type reads them back), `env_kwargs` as the
    command line's text, which must read back as the same dict."""
    if name == 'env_kwargs':
        if not isinstance(value, Mapping):
            raise ValueError(f'env_kwargs must be a dict, got {value!r}')
        text = ','.join(f'{k}={_literal(v)}' for k, v in value.items())
        if command_line.parse_env_kwargs(text) != dict(value):
            raise ValueError(f'env_kwargs={value!r}: the values must be Python literals '
                             f'(numbers, strings, tuples, lists, dicts); pass a function that '
                             f'makes the environment for anything else')
        return text
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(flag.parser, flags.ListParser) and isinstance(value, (list, tuple)):
        return [v if isinstance(v, str) else str(v) for v in value]
    return value


def _parse(argv: List[str], overrides: Dict[str, Any]) -> flags.FlagValues:
    """The run's flags: `argv` through the command line (default preset included), then
    each override parsed from its typed value."""
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    for name in overrides:
        if name not in fv:
            close = difflib.get_close_matches(name, list(fv), n=1)
            raise ValueError(f'unknown keyword {name!r}: not a flag of launch/run.py'
                             + (f' (did you mean {close[0]!r}?)' if close else ''))
    try:
        command_line.parse(argv, fv)
        for name, value in overrides.items():
            if value is not None:  # None: the default, as a flag left out
                fv[name].parse(_flag_value(fv[name], name, value))
    except flags.Error as e:
        raise ValueError(str(e)) from None
    return fv


def train(agent: str = 'clear', env: Optional[EnvSource] = None,
          num_steps: Optional[int] = None, *,
          callbacks: Union[Callback, Sequence[Callback]] = (), preset: Union[bool, str] = True,
          resume: bool = False, **overrides: Any) -> Result:
    """Trains `agent` on `env` (default CartPole-v1) in this process (see the module
    doc) and returns the summary, the run's directory and the exported policy.

    Raises ValueError (one line: the command line's `error:` message) for bad input,
    `launch.rundir.TrainingError` when a run cannot go on; an exception a callback
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
    fv = _parse(argv, overrides)
    if fv.role or fv.launcher != 'inprocess':
        raise ValueError('train() runs in one process: leave role and launcher out')
    try:
        options, config = command_line.resolve(fv)
    except environments.EnvironmentSetupError as e:
        raise ValueError(str(e)) from None
    callbacks = (callbacks,) if callable(callbacks) else tuple(callbacks)
    on_progress = ProgressCallbacks(callbacks, options.logdir, options.progress_row_steps,
                                    options.log_interval_s) if callbacks else None
    rundir.check_start(options.logdir, resume, options, config)
    summary = inprocess.train(options, config, on_progress)
    policy = load_policy(summary['saved_model']) if summary.get('saved_model') else None
    return Result(summary, options.logdir, policy, options.env,
                  bool(on_progress and on_progress.stopped))


__all__ = ['Result', 'StopTraining', 'TrainingProgress', 'register_env', 'train',
           'load_policy']
