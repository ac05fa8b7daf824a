"""`--launcher=multiprocess`: every role of a run as a child process on this machine.

Starts the replay server, waits until it answers, then the learner and
`--num_actors` actors, each as `python launch/run.py --role=...` with the
user's flags; streams their output with a role prefix. It supervises them:

- an actor that exits is restarted with exponential backoff (1 s, 2 s, ... 30 s);
  the learner keeps learning meanwhile;
- a replay server that exits is restarted on the same port from its latest
  checkpoint; learner and actors reconnect;
- the learner finishing its budget ends the run (exit 0); the learner
  failing ends it with its error (exit 1): rerun with the same `--logdir`
  and `--resume` to resume from the last checkpoint;
- Ctrl-C / SIGTERM: the learner checkpoints and exits, then the actors stop,
  then the replay server checkpoints its tables and stops.

The roles are forked from one process that has imported TensorFlow
(`launch/runners/role_server.py`), so neither a role nor a restart pays that import;
where the server cannot start, each role is a new interpreter as before.
Children die with the launcher (Linux parent-death signals), so a killed
launcher leaves no orphans.

Network: `launch/run.py` has already moved the launcher into a network
namespace of its own with loopback only (`launch/runners/isolation.py`) when it gets
here, before any role starts; the roles inherit that namespace and meet at
127.0.0.1, so nothing outside the run reaches the replay server. The replay
role says so in one line or, where the run is not isolated
(`--network_isolation=off`, a kernel without user namespaces), which port is
open to the network.
"""

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import List, Optional

from absl import logging

from reverb_agents.launch.runners import role_server
from reverb_agents.replay import connection

# The checkout's and the wheel's `launch/run.py`: the script a user types, as each role's.
RUN_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run.py')
MAX_BACKOFF_S = 30.0
# Flags the launcher sets for each child itself.
LAUNCHER_FLAGS = ('launcher', 'num_actors', 'role', 'replay_address', 'replay_port', 'actor_id')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def child_argv(argv: List[str]) -> List[str]:
    """The user's flags without those the launcher sets per child."""
    kept = []
    for arg in argv:
        name = arg.lstrip('-').split('=', 1)[0]
        if arg.startswith('-') and (name in LAUNCHER_FLAGS or
                                    (name.startswith('no') and name[2:] in LAUNCHER_FLAGS)):
            continue
        kept.append(arg)
    return kept


@dataclasses.dataclass
class Child:
    """One role: forked by the role server when there is one, else a fresh interpreter."""
    name: str
    extra_flags: List[str]
    server: Optional[role_server.RoleServer] = None
    process: Optional[subprocess.Popen] = None
    pid: Optional[int] = None
    starts: int = 0
    restart_at: Optional[float] = None  # when a dead child is due to start again

    def start(self, base: List[str]) -> None:
        """`base`: `[python, run.py, flags...]`; the child adds its own flags."""
        if self.server is not None:
            self.pid = self.server.start(self.name, base[2:] + self.extra_flags)
        else:
            self.process = subprocess.Popen(
                base + self.extra_flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, preexec_fn=role_server.die_with_parent, text=True,
                bufsize=1)
            self.pid = self.process.pid
            threading.Thread(target=self._stream, args=(self.process,), daemon=True).start()
        self.starts += 1
        self.restart_at = None
        logging.info('started %s (pid %d, start %d)', self.name, self.pid, self.starts)

    def _stream(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            sys.stdout.write(f'[{self.name}] {line}')
            sys.stdout.flush()

    def returncode(self, timeout_s: float = 0) -> Optional[int]:
        """The exit status (negative: the signal), or None while it runs (after waiting
        up to `timeout_s`)."""
        if self.server is not None:
            return self.server.exit_code(self.pid, timeout_s)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.pid is not None and self.returncode() is None

    def stop(self, timeout_s: float) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`."""
        if not self.alive():
            return
        self._signal(signal.SIGTERM)
        if self.returncode(timeout_s) is None:
            logging.warning('%s did not stop within %.0f s; killing it', self.name, timeout_s)
            self._signal(signal.SIGKILL)
            self.returncode(timeout_s=60)

    def _signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass


def describe_exit(code: int) -> str:
    return f'signal {-code}' if code < 0 else f'status {code}'


def run(argv: List[str], num_actors: int, replay_port: int, connect_timeout_s: float) -> int:
    """Runs every role as a child process until the learner ends; the exit status."""
    port = replay_port or free_port()
    address = f'127.0.0.1:{port}'
    base = [sys.executable, RUN_PY] + child_argv(argv)
    try:
        server = role_server.RoleServer(RUN_PY)
    except (role_server.RoleServerError, OSError) as e:
        logging.warning('%s; starting each role as a new interpreter', e)
        server = None
    try:
        return _supervise(base, port, address, num_actors, connect_timeout_s, server)
    finally:
        if server is not None:
            server.close()


def _supervise(base: List[str], port: int, address: str, num_actors: int,
               connect_timeout_s: float, server: Optional[role_server.RoleServer]) -> int:
    replay = Child('replay', ['--role=replay', f'--replay_port={port}'], server)
    learner = Child('learner', ['--role=learner', f'--replay_address={address}'], server)
    actors = [Child(f'actor {k}', ['--role=actor', f'--replay_address={address}',
                                   f'--actor_id={k}'], server) for k in range(num_actors)]
    stopping = threading.Event()

    def on_signal(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def shutdown():
        learner.stop(timeout_s=120)  # checkpoints first
        for actor in actors:
            actor.stop(timeout_s=20)
        replay.stop(timeout_s=120)  # checkpoints its tables

    replay.start(base)
    try:
        connection.wait_for_server(address, connect_timeout_s)
    except connection.ServerUnavailableError as e:
        replay.stop(timeout_s=5)
        print(f'error: the replay server did not start: {e}', file=sys.stderr)
        return 1
    logging.info('replay server at %s; starting the learner and %d actors', address, num_actors)
    learner.start(base)
    for actor in actors:
        actor.start(base)

    status = 0
    while not stopping.wait(0.2):
        code = learner.returncode()
        if code is not None:
            if code != 0:
                print(f'error: the learner exited with {describe_exit(code)}; rerun with the '
                      'same --logdir and --resume to resume from its last checkpoint',
                      file=sys.stderr)
                status = 1
            break
        now = time.monotonic()
        for child in actors + [replay]:
            if child.alive():
                continue
            if child.restart_at is None:
                backoff = min(MAX_BACKOFF_S, 2.0 ** (child.starts - 1))
                logging.warning('%s exited with %s; restarting it in %.0f s', child.name,
                                describe_exit(child.returncode()), backoff)
                child.restart_at = now + backoff
            elif now >= child.restart_at:
                child.start(base)
    shutdown()
    return status
