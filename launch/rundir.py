"""A run's directory: what it holds and the checks that keep it intact.

`<logdir>/run_config.json` (agent, env, config) is written once a run has
started cleanly; `<logdir>/checkpoints/` holds the learner's checkpoints.
Every check here fails with a `TrainingError` (one line) *before* anything in
the directory is written, so a refused run leaves an earlier run untouched:
a `--logdir` that is a file, a directory holding another agent's or
environment's run, and a checkpoint that is corrupt or does not match the
learner being built.
"""

import dataclasses
import json
import os
from typing import Any, Dict, Optional

import tensorflow as tf

RUN_CONFIG = 'run_config.json'  # agent, env and config of a run, written at its start
CHECKPOINTS = 'checkpoints'


class TrainingError(RuntimeError):
    """A run that cannot go on (NaN loss, corrupt checkpoint, ...)."""


def check_logdir(logdir: str) -> None:
    """Raises unless `logdir` is a directory or can be made one."""
    path = os.path.abspath(logdir)
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    if path and not os.path.isdir(path):
        raise TrainingError(f'--logdir={logdir} is not a directory ({path} is a file)')


def read_run_config(logdir: str) -> Optional[Dict[str, Any]]:
    """`run_config.json` of `logdir` ({'agent', 'env', 'config', 'env_options'}), or None."""
    path = os.path.join(logdir, RUN_CONFIG)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            run = json.load(f)
        return {'agent': run['agent'], 'env': run['env'], 'config': run['config'],
                'env_options': run.get('env_options', {})}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TrainingError(f'{path} is not a run config ({e}); use another --logdir') from None


def check_same_run(logdir: str, agent: str, env: str) -> None:
    """Raises when `logdir` holds a run of another agent or environment."""
    run = read_run_config(logdir)
    if run is not None and (run['agent'], run['env']) != (agent, env):
        raise TrainingError(
            f'{logdir} holds a run of --agent={run["agent"]} --env={run["env"]}, not '
            f'--agent={agent} --env={env}; use another --logdir')


def write_run_config(logdir: str, agent: str, env: str, config: Any,
                     env_options: Optional[Dict[str, Any]] = None) -> None:
    """`env_options`: what else makes the run's environments (`RunOptions.env_options`:
    a task sequence's schedule, an action repeat)."""
    run = {'agent': agent, 'env': env, 'config': dataclasses.asdict(config)}
    if env_options:
        run['env_options'] = env_options
    with open(os.path.join(logdir, RUN_CONFIG), 'w') as f:
        json.dump(run, f, indent=2)


def checkpoint_manager(checkpoint: tf.train.Checkpoint, logdir: str) -> tf.train.CheckpointManager:
    """The learner's checkpoints in `<logdir>/checkpoints`, the last three kept."""
    directory = os.path.join(logdir, CHECKPOINTS)
    try:
        manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=3)
    except Exception as e:  # noqa: BLE001 - a corrupt index raises protobuf's ParseError
        raise TrainingError(f'cannot read the checkpoint index in {directory}: '
                            f'{describe(e)}') from None
    # An index TF cannot parse reads as "no checkpoint": training would start
    # over and overwrite the checkpoints it could not read.
    if manager.latest_checkpoint is None and os.path.isdir(directory) and os.listdir(directory):
        raise TrainingError(f'cannot read the checkpoint index in {directory}: it holds files '
                            'but names no checkpoint; use another --logdir')
    return manager


def restore(checkpoint: tf.train.Checkpoint, path: str) -> None:
    """Restores `path` into `checkpoint`; raises unless every object built so far matched
    (a corrupt file, another agent's or another network's checkpoint)."""
    try:
        checkpoint.restore(path).assert_existing_objects_matched()
    except Exception as e:  # noqa: BLE001 - a damaged file raises OpError, IndexError, ...
        raise TrainingError(f'cannot restore checkpoint {path}: {describe(e)}') from None


def describe(error: Exception) -> str:
    """An exception in one line: its message's first line, or its type if it has none."""
    message = str(error)
    return message.splitlines()[0] if message else type(error).__name__
