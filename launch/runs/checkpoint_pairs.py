"""A run's checkpoints: the learner's and, in an in-process `--save_replay` run, the
replay checkpoint paired with the newest learner checkpoint.

Reverb writes its checkpoint apart from the learner's, and each one deletes
the others in its directory, so a run killed between the two writes would
resume a learner and a replay of different moments. One save of a pair, in
this order:

1. Reverb writes the tables into `replay_pairs/staging/<time>` (its `DONE`
   file last), and that directory is renamed to `replay_pairs/<time>`;
2. the learner's `checkpoints/ckpt-<N>` (N: the learner step);
3. `replay_pairs/pair.json`, naming both, written to a temporary file and
   renamed over the old one: the commit.

A resume restores the pair the record names, whatever a killed save left
after it: a replay without its learner checkpoint, or a learner checkpoint
without its record (killed between 2 and 3: the record still names the
previous pair, whose learner checkpoint is one save old, and TF keeps three).
`prepare_replay` deletes those leftovers once the resumed run has restored its
learner, so the directory again holds what the record says. A commit deletes
older pairs' replays: only the newest is ever restored, and a replay can be
gigabytes. A save without a pair (no `--save_replay`, a multi-process
learner, a replay checkpoint that failed) deletes the record first, so a
resume never pairs a replay with a learner older than the latest.

Without a record, a resume restores the latest learner checkpoint, and the
server the latest replay checkpoint in `replay_checkpoints` (a multi-process
run's, or an in-process one written before pairs).
"""

import glob
import json
import os
import shutil
from typing import Any, Callable, Dict, Optional, Tuple

import tensorflow as tf

from reverb_agents.launch.runs import rundir
from reverb_agents.launch.runs.rundir import (PAIR_RECORD, REPLAY_CHECKPOINTS, REPLAY_PAIRS,
                                              STAGING, TrainingError)

DONE = 'DONE'  # Reverb writes it into a checkpoint's directory once the checkpoint is whole


def complete(path: Optional[str]) -> bool:
    """Whether `path` is a whole Reverb checkpoint."""
    return bool(path) and os.path.exists(os.path.join(path, DONE))


def latest_replay_checkpoint(directory: str) -> Optional[str]:
    """The newest whole checkpoint in a Reverb checkpointer's `directory` (Reverb's own
    choice: names are times, the greatest wins), or None."""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    return next((os.path.join(directory, n) for n in reversed(names)
                 if complete(os.path.join(directory, n))), None)


def read_record(logdir: str) -> Optional[Dict[str, Any]]:
    """`replay_pairs/pair.json` ({'step', 'learner', 'replay'}, the last two as paths),
    or None; raises when it is unreadable or names a checkpoint that is not there."""
    path = os.path.join(logdir, REPLAY_PAIRS, PAIR_RECORD)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            record = json.load(f)
        pair = {'step': int(record['step']),
                'learner': os.path.join(logdir, rundir.CHECKPOINTS, record['learner']),
                'replay': os.path.join(logdir, REPLAY_PAIRS, record['replay'])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TrainingError(f'{path} is not a checkpoint pair record ({e}); use another '
                            '--logdir, or delete it to resume the latest learner checkpoint '
                            'without its replay') from None
    if not os.path.exists(pair['learner'] + '.index'):
        raise TrainingError(f'{path} names the learner checkpoint {pair["learner"]}, which '
                            'is missing')
    if not complete(pair['replay']):
        raise TrainingError(f'{path} names the replay checkpoint {pair["replay"]}, which is '
                            'missing or incomplete')
    return pair


def paired_replay(logdir: str) -> Optional[str]:
    """The replay checkpoint of the record, if it is whole; else None (never raises: for
    a multi-process replay server, whose own checkpoints come first)."""
    try:
        pair = read_record(logdir)
    except TrainingError:
        return None
    return pair and pair['replay']


class Checkpoints:
    """The learner's checkpoints in `<logdir>/checkpoints` (the newest three kept), and,
    when `paired` (an in-process `--save_replay` run), the replay checkpoint of the
    newest one (the module doc)."""

    def __init__(self, checkpoint: tf.train.Checkpoint, logdir: str, paired: bool):
        self.checkpoint = checkpoint
        self.logdir = logdir
        self.paired = paired
        self.manager = rundir.checkpoint_manager(checkpoint, logdir)
        self.directory = os.path.join(logdir, REPLAY_PAIRS)
        self.staging = os.path.join(self.directory, STAGING)
        self.pair = read_record(logdir) if paired else None
        # A paired run's: writes Reverb's checkpoint, returns its directory (None: failed).
        self.write_replay: Optional[Callable[[], Optional[str]]] = None
        self._saved_step: Optional[int] = None  # this run's last save

    def restore(self) -> Optional[str]:
        """Restores the record's learner checkpoint (paired) or the latest one; returns
        its path, or None where there is none. Raises `TrainingError` unless it matches."""
        path = self.pair['learner'] if self.pair else self.manager.latest_checkpoint
        if path:
            rundir.restore(self.checkpoint, path)
        return path

    def prepare_replay(self) -> Tuple[str, Optional[str]]:
        """For a paired run's server, once its learner is restored: deletes what killed
        saves left (see the module doc) and returns (the directory Reverb writes into,
        the checkpoint it restores: the record's, or the latest in `replay_checkpoints`)."""
        shutil.rmtree(self.staging, ignore_errors=True)  # never paired
        if self.pair is None:
            self._prune(keep=None)
            return self.staging, latest_replay_checkpoint(
                os.path.join(self.logdir, REPLAY_CHECKPOINTS))
        self._prune(keep=self.pair['replay'])
        names = [os.path.basename(p) for p in self.manager.checkpoints]
        learner = os.path.basename(self.pair['learner'])
        if learner in names and names[-1] != learner:  # newer ones a killed save left
            older = names[:names.index(learner) + 1]
            # The state file first, so that it never names a deleted checkpoint; names
            # relative to its directory, as TF's manager writes them.
            tf.compat.v1.train.update_checkpoint_state(self.manager.directory, learner, older)
            for name in names[len(older):]:
                for path in glob.glob(os.path.join(self.manager.directory, name + '.*')):
                    os.remove(path)
            self.manager = rundir.checkpoint_manager(self.checkpoint, self.logdir)
        return self.staging, self.pair['replay']

    def save(self, step: int) -> Optional[str]:
        """Writes the learner checkpoint `ckpt-<step>` and, in a paired run, the replay's
        first (`write_replay`; the pair in the order of the module doc; the learner's
        alone where it failed). Returns the learner checkpoint's path; None when this
        run saved `step` already (an in-process run saves its pair before its server
        stops, and its final save then has nothing to add)."""
        if step == self._saved_step:
            return None
        staged = self.write_replay() if self.paired and self.write_replay else None
        if complete(staged):
            path = self._save_pair(step, staged)
        else:
            self._drop()
            path = self.manager.save(checkpoint_number=step)
        self._saved_step = step
        return path

    def _save_pair(self, step: int, staged: str) -> str:
        replay = os.path.join(self.directory, os.path.basename(staged))
        os.rename(staged, replay)
        learner = self.manager.save(checkpoint_number=step)
        record = os.path.join(self.directory, PAIR_RECORD)
        with open(record + '.tmp', 'w') as f:
            json.dump({'step': step, 'learner': os.path.basename(learner),
                       'replay': os.path.basename(replay)}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(record + '.tmp', record)
        self.pair = {'step': step, 'learner': learner, 'replay': replay}
        self._prune(keep=replay)
        return learner

    def _drop(self) -> None:
        """Deletes the record (first: a resume then takes the latest learner checkpoint
        alone) and every kept replay."""
        record = os.path.join(self.directory, PAIR_RECORD)
        if os.path.exists(record):
            os.remove(record)
        self.pair = None
        self._prune(keep=None)

    def _prune(self, keep: Optional[str]) -> None:
        """Deletes the kept replays but `keep` (record and staging stay)."""
        if not os.path.isdir(self.directory):
            return
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if name not in (PAIR_RECORD, STAGING) and path != keep and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
