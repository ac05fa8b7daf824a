"""One run per log directory: `<logdir>/.lock`, held with `flock` for the life of a run.

The file holds its holder's pid, host, command and start time (JSON). It is
created with O_CREAT|O_EXCL, and an exclusive `flock` on it is held until the
run ends; the kernel drops a flock when its process dies, however it dies, so
a lock file whose flock can be taken is stale (its run crashed or was killed)
and is taken over: the new holder writes its own pid. A clean release deletes
the file. Imports nothing of the project (`launch/runs/rundir.py` turns
`LogdirInUseError` into its one-line `TrainingError`).
"""

import datetime
import fcntl
import json
import os
import socket
import sys
from typing import Any, Dict, Optional

LOCK_FILE = '.lock'


class LogdirInUseError(RuntimeError):
    """Another live process holds the log directory's lock."""


def _holder(fd: int) -> Dict[str, Any]:
    """What the lock file behind `fd` says of its holder ({} while it is being written)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 4096).decode() or '{}')
    except (OSError, ValueError):
        return {}


def _in_use(logdir: str, holder: Dict[str, Any]) -> LogdirInUseError:
    who = f'{holder.get("command", "another run")} pid {holder.get("pid", "?")}'
    started = holder.get('started')
    where = (f' on {holder["host"]}' if holder.get('host') not in (None, socket.gethostname())
             else '')
    return LogdirInUseError(f'{logdir} is in use by {who}{where}'
                            + (f' (started {started})' if started else '')
                            + '; wait for it or choose another --logdir')


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def check_free(logdir: str) -> None:
    """Raises `LogdirInUseError` while a live process holds `logdir`'s lock; writes nothing."""
    try:
        fd = os.open(os.path.join(logdir, LOCK_FILE), os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):  # no lock, or no directory to hold one
        return
    try:
        if not _try_flock(fd):
            raise _in_use(logdir, _holder(fd))
    finally:
        os.close(fd)  # drops the probe's flock, if it took one


class LogdirLock:
    """The held lock of one log directory (`acquire`); `release` ends it."""

    def __init__(self, logdir: str, fd: int, took_over: Optional[Dict[str, Any]],
                 made_dir: bool):
        self.logdir = logdir
        self.path = os.path.join(logdir, LOCK_FILE)
        self.took_over = took_over  # a stale lock's record of its dead holder; None if fresh
        self._fd: Optional[int] = fd
        self._made_dir = made_dir

    def release(self) -> None:
        """Deletes the lock file, then drops the flock; a log directory the lock created
        and nothing else filled goes too."""
        if self._fd is None:
            return
        # Unlinked while still held: a process that opened the old file and gets its
        # flock after this sees that the path no longer names it (`acquire` retries).
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None
        if self._made_dir:
            try:
                os.rmdir(self.logdir)
            except OSError:  # the run wrote something: keep it
                pass

    def __enter__(self) -> 'LogdirLock':
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(logdir: str, command: Optional[str] = None) -> LogdirLock:
    """Takes `logdir`'s lock (making the directory if needed), or raises
    `LogdirInUseError` naming the live holder. A stale lock is taken over.
    `command`: how the holder is named in a refusal (default: the program's name)."""
    made_dir = not os.path.isdir(logdir)
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, LOCK_FILE)
    for _ in range(10):  # each retry means another process released or took over meanwhile
        try:
            fd, created = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            try:
                fd, created = os.open(path, os.O_RDWR), False
            except FileNotFoundError:  # released between the two opens
                continue
        if not _try_flock(fd):
            holder = _holder(fd)
            os.close(fd)
            raise _in_use(logdir, holder)
        try:
            same_file = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same_file = False
        if not same_file:  # its holder released (and unlinked) it before our flock
            os.close(fd)
            continue
        stale = None if created else _holder(fd)
        record = {'pid': os.getpid(), 'host': socket.gethostname(),
                  'command': command or os.path.basename(sys.argv[0] or 'python'),
                  'started': datetime.datetime.now().isoformat(timespec='seconds')}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(record).encode())
        os.fsync(fd)
        return LogdirLock(logdir, fd, stale, made_dir)
    raise LogdirInUseError(f'{logdir}: could not take its lock {path} (it kept changing '
                           'hands); wait for the other runs or choose another --logdir')
