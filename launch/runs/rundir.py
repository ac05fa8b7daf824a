"""A run's directory: what it holds and the checks that keep it intact.

`<logdir>/run_config.json` (agent, env, config) is written once a run has
started cleanly; `<logdir>/checkpoints/` holds the learner's checkpoints;
`<logdir>/replay_pairs/` an in-process `--save_replay` run's replay checkpoint
paired with its last learner checkpoint (`launch/runs/checkpoint_pairs.py`);
`<logdir>/.lock` says which live process runs there (`launch/runs/lockfile.py`,
`lock_logdir`).
Every check here fails with a `TrainingError` (one line) *before* anything in
the directory is written, so a refused run leaves an earlier run untouched:
a `--logdir` that is a file or in use by a live run, a directory holding
another agent's or environment's run, and a checkpoint that is corrupt or
does not match the learner being built.
"""

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

import tensorflow as tf
from absl import logging

from reverb_agents.launch.runs import lockfile
from reverb_agents.launch.runs.run_files import flat_config

RUN_CONFIG = 'run_config.json'  # agent, env and config of a run, written at its start
SUMMARY = 'summary.json'  # what a run reached, written at its end
CHECKPOINTS = 'checkpoints'
REPLAY_CHECKPOINTS = 'replay_checkpoints'  # Reverb's checkpoints of a multi-process run's tables
REPLAY_PAIRS = 'replay_pairs'  # an in-process run's replay checkpoint of its last learner one
PAIR_RECORD = 'pair.json'  # in REPLAY_PAIRS: the learner and replay checkpoints of one save
STAGING = 'staging'  # in REPLAY_PAIRS: where Reverb writes a checkpoint before it is paired
KEPT_CHECKPOINTS = 3  # learner checkpoints kept (the pair's replay: only the newest)


class TrainingError(RuntimeError):
    """A run that cannot go on (NaN loss, corrupt checkpoint, ...)."""


def check_logdir(logdir: str) -> None:
    """Raises unless `logdir` is a directory or can be made one."""
    if not logdir:
        raise TrainingError('--logdir must name a directory')
    path = os.path.abspath(logdir)
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    if path and not os.path.isdir(path):
        raise TrainingError(f'--logdir={logdir} is not a directory ({path} is a file)')


# Config fields added after runs were stored without them, and the value those runs had
# (agent or None for any, sub-config or None for the top, field, value): an older run
# rebuilt (exported, resumed) stays the same run.
LEGACY_FIELDS = ((None, 'network', 'rescale_actions', False),
                 (None, 'network', 'observation_map', 'standardize'),
                 ('sac', None, 'policy_average_tau', 0.0))


def read_run_config(logdir: str) -> Optional[Dict[str, Any]]:
    """`run_config.json` of `logdir` ({'agent', 'env', 'config', 'env_options', 'seed'}),
    or None (`seed` None for a run that did not record it); a field stored runs lack
    has their value (`LEGACY_FIELDS`)."""
    path = os.path.join(logdir, RUN_CONFIG)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            run = json.load(f)
        config = run['config']
        for agent, section, name, value in LEGACY_FIELDS:
            fields = config if section is None else config.get(section)
            if agent in (None, run['agent']) and isinstance(fields, dict):
                fields.setdefault(name, value)
        return {'agent': run['agent'], 'env': run['env'], 'config': config,
                'env_options': run.get('env_options', {}), 'seed': run.get('seed')}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise TrainingError(f'{path} is not a run config ({e}); use another --logdir') from None


def check_same_run(logdir: str, agent: str, env: str) -> None:
    """Raises when `logdir` holds a run of another agent or environment."""
    run = read_run_config(logdir)
    if run is not None and (run['agent'], run['env']) != (agent, env):
        raise TrainingError(
            f'{logdir} holds a run of --agent={run["agent"]} --env={run["env"]}, not '
            f'--agent={agent} --env={env}; use another --logdir')


def write_run_config(logdir: str, agent: str, env: str, config: Any,
                     env_options: Optional[Dict[str, Any]] = None,
                     seed: Optional[int] = None) -> None:
    """`env_options`: what else makes the run's environments (`RunOptions.env_options`:
    a task sequence's schedule, an action repeat, gymnasium keywords)."""
    run = {'agent': agent, 'env': env, 'config': dataclasses.asdict(config)}
    if env_options:
        run['env_options'] = env_options
    if seed is not None:
        run['seed'] = seed
    with open(os.path.join(logdir, RUN_CONFIG), 'w') as f:
        json.dump(run, f, indent=2)


def write_summary(logdir: str, summary: Dict[str, Any]) -> str:
    """Writes a run's `summary.json`; returns its path."""
    path = os.path.join(logdir, SUMMARY)
    with open(path, 'w') as f:
        json.dump(summary, f, indent=2)
    return path



def run_differences(stored: Dict[str, Any], agent: str, env: str, config: Any,
                    env_options: Dict[str, Any], seed: int) -> List[str]:
    """'--name=stored (now new)' for every flag in which a new start differs from the run
    `stored` (`read_run_config`): agent, env, config fields, environment options, seed.
    A config field the run does not record (`unrecorded_fields`) is no difference."""
    pairs = [('agent', stored['agent'], agent), ('env', stored['env'], env)]
    if stored.get('seed') is not None:
        pairs.append(('seed', stored['seed'], seed))
    old_env, new_env = (json.loads(json.dumps(o)) for o in (stored['env_options'], env_options))
    pairs += [(k, old_env.get(k), new_env.get(k)) for k in sorted(set(old_env) | set(new_env))]
    if stored['agent'] == agent:
        old, new = flat_config(stored['config']), flat_config(dataclasses.asdict(config))
        pairs += [(k, old[k], new.get(k)) for k in sorted(old)]
    return [f'--{name}={old} (now {new})' for name, old, new in pairs if old != new]


def unrecorded_fields(stored: Dict[str, Any], agent: str, config: Any) -> Dict[str, Any]:
    """The config fields of `agent` that the run `stored` does not record (it started
    before they existed, and `LEGACY_FIELDS` does not say the value it had), by name,
    with their values in `config`."""
    if stored['agent'] != agent:
        return {}
    recorded = flat_config(stored['config'])
    return {name: value for name, value in sorted(flat_config(dataclasses.asdict(config)).items())
            if name not in recorded}


def check_start(logdir: str, resume: bool, options: Any, config: Any) -> None:
    """A new run needs a missing or empty `logdir`; `--resume` needs a run there started
    with the same agent, environment, config and seed (`options`: `RunOptions`).
    Raises `TrainingError` naming the choices or the differing flags."""
    check_free(logdir)
    held = os.path.isdir(logdir) and bool(set(os.listdir(logdir)) - {lockfile.LOCK_FILE})
    if not resume:
        if held:
            raise TrainingError(
                f'--logdir={logdir} already holds a run: add --resume to continue it, or '
                f'leave --logdir out for a new directory (or name an empty one)')
        return
    if not held:
        raise TrainingError(f'--resume: --logdir={logdir} holds no run to resume')
    stored = read_run_config(logdir)
    if stored is None:  # the checkpoint's restore tells whether it matches
        return
    differences = run_differences(stored, options.agent, options.env, config,
                                  options.env_options, options.seed)
    if differences:
        raise TrainingError(f'--resume: {logdir} holds a run with other flags: '
                            f'{", ".join(differences)}; resume with its flags or leave '
                            f'--resume out (and --logdir) for a new run')
    # The checkpoint's restore still refuses a value that changes what the learner holds.
    for name, value in unrecorded_fields(stored, options.agent, config).items():
        logging.warning('--resume: %s does not record --%s (the run started before it '
                        'existed); resuming with --%s=%s', logdir, name, name, value)


def check_free(logdir: str) -> None:
    """Raises while a live process holds `logdir` (`launch/runs/lockfile.py`); writes nothing."""
    try:
        lockfile.check_free(logdir)
    except lockfile.LogdirInUseError as e:
        raise TrainingError(str(e)) from None


def lock_logdir(logdir: str, command: Optional[str] = None) -> lockfile.LogdirLock:
    """Takes `logdir` for this process until the returned lock is released (a `with`
    block); raises while another live process holds it. A crashed run's stale lock is
    taken over."""
    try:
        lock = lockfile.acquire(logdir, command)
    except lockfile.LogdirInUseError as e:
        raise TrainingError(str(e)) from None
    if lock.took_over is not None:
        logging.warning('took over the lock of %s from pid %s, which is gone', logdir,
                        lock.took_over.get('pid', '?'))
    return lock


def checkpoint_manager(checkpoint: tf.train.Checkpoint, logdir: str) -> tf.train.CheckpointManager:
    """The learner's checkpoints in `<logdir>/checkpoints`, the last three kept."""
    directory = os.path.join(logdir, CHECKPOINTS)
    try:
        manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=KEPT_CHECKPOINTS)
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
