"""The Python API: `from launch import train, load_policy`.

    from reverb_agents.launch import train, load_policy
    result = train(agent='clear', env='CartPole-v1', num_steps=300_000, seed=1)
    result.summary['eval_return_mean'], result.logdir
    result.policy.run_episode(gymnasium.make('CartPole-v1'), seed=0)

`train` takes what `launch/run.py` takes, as keyword arguments: run options
(`seed`, `num_envs`, `logdir`, `eval_every_steps`, `env_kwargs` as a dict,
...) and any field of the agent's config (`learning_rate`, `lstm_size`, ...).
They go through the command line's own parser and checks
(`launch/command_line.py`) on a private set of absl flags, so a bad value
raises the `ValueError` whose message the command line would print, and a
caller's own absl flags are never touched. As on the command line, the
agent's preset for the environment applies (`preset=False`: none) and a
`logdir` that holds a run needs `resume=True`. Runs in one process.
"""

import dataclasses
from typing import Any, Dict, Optional

from absl import flags

from reverb_agents.launch import command_line, environments, inprocess, rundir
from reverb_agents.launch.policy import Policy, load_policy


@dataclasses.dataclass
class Result:
    """What `train` returns."""
    summary: Dict[str, Any]  # `<logdir>/summary.json`
    logdir: str
    policy: Optional[Policy]  # the exported final policy (None if it could not be exported)


def _flag(name: str, value: Any) -> str:
    if isinstance(value, bool):
        value = 'true' if value else 'false'
    elif isinstance(value, dict):
        value = ','.join(f'{k}={v!r}' for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        value = ','.join(str(v) for v in value)
    return f'--{name}={value}'


def train(agent: str = 'clear', env: str = 'CartPole-v1', num_steps: Optional[int] = None,
          *, resume: bool = False, preset: bool = True, **overrides: Any) -> Result:
    """Trains `agent` on `env` in this process (see the module doc) and returns the
    summary, the run's directory and the exported policy.

    Raises ValueError (one line: the command line's `error:` message) for bad
    input, `launch.rundir.TrainingError` when a run cannot go on.
    """
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    argv = ['train', _flag('agent', agent), _flag('env', env)]
    if num_steps is not None:
        argv.append(_flag('num_steps', num_steps))
    argv += [_flag(name, value) for name, value in overrides.items()]
    if not preset:
        argv.append('--no_preset')
    try:
        command_line.parse(argv, fv)
    except flags.Error as e:
        raise ValueError(str(e)) from None
    if fv.role or fv.launcher != 'inprocess':
        raise ValueError('train() runs in one process: leave role and launcher out')
    try:
        options, config = command_line.resolve(fv)
    except environments.EnvironmentSetupError as e:
        raise ValueError(str(e)) from None
    rundir.check_start(options.logdir, resume, options, config)
    summary = inprocess.train(options, config)
    policy = load_policy(summary['saved_model']) if summary.get('saved_model') else None
    return Result(summary, options.logdir, policy)


__all__ = ['Result', 'train', 'load_policy']
