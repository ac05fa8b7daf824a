"""The multi-process launcher's roles, forked from one process that imported TensorFlow.

Each role of `--launcher=multiprocess` is `launch/run.py --role=...`. Started as
a fresh interpreter, every role (and every restart of a killed actor or replay
server) spends seconds of CPU importing TensorFlow before it does anything. The
launcher instead starts this server once; it imports what a role imports and
then, per request, forks a child that runs `launch/run.py` as `__main__` with
the role's argv, as `multiprocessing`'s forkserver does. TensorFlow's eager
context is never created here, so every role starts its own (threads, devices).

One thread, one loop (forking from a process whose other threads might hold
locks is how forked children deadlock): requests arrive as JSON lines on the
control socket (`{"name", "argv"}`), each child's output comes back on a pipe
and is written to this process's standard output with the role's prefix, and
exits are reported as `{"name", "pid", "code"}` after the child's output has
been drained. Children die with the server and the server with the launcher
(parent-death signals); the server ignores Ctrl-C, which reaches the roles as
it always did (they share the launcher's process group).

`RoleServer` is the launcher's side: `start(name, argv) -> pid`, `exit_code(pid)`.
"""

import ctypes
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence

from reverb_agents.launch.runs import console

PR_SET_PDEATHSIG = 1
# What `launch/run.py` imports for a role (none of it defines a flag or starts TensorFlow).
PRELOAD = ('tensorflow', 'reverb', 'sonnet', 'gymnasium', 'absl.app',
           'reverb_agents.launch.command_line.run_flags', 'reverb_agents.launch.runners.inprocess',
           'reverb_agents.launch.runners.roles', 'reverb_agents.launch.runners.ray_launcher')


def die_with_parent() -> None:
    """SIGTERM to this process when its parent dies (Linux `PR_SET_PDEATHSIG`)."""
    try:
        ctypes.CDLL('libc.so.6', use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def _child(script: str, argv: List[str], write_end: int) -> None:
    """In the forked child: the role's streams and signals, then `script` as `__main__`;
    never returns."""
    code = 1
    try:
        die_with_parent()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        sys.argv = [script, *argv]
        sys.path[0] = os.path.dirname(script)
        try:
            runpy.run_path(script, run_name='__main__')
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:  # sys.exit('message'): printed, status 1
                print(e.code, file=sys.stderr)
        threading._shutdown()  # what an interpreter does on its way out
        import atexit
        atexit._run_exitfuncs()
    except BaseException:  # noqa: B036: the child must end here whatever happened
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve(control: socket.socket, script: str) -> None:
    """The server's loop until the control socket closes and every child has ended."""
    children: Dict[int, dict] = {}  # pid -> {name, fd, partial}
    buffer, closed = b'', False
    while not closed or children:
        readable = [c['fd'] for c in children.values() if c['fd'] is not None]
        ready, _, _ = select.select(readable + ([] if closed else [control]), [], [], 0.1)
        for child in list(children.values()):
            if child['fd'] in ready:
                _forward(child)
        if control in ready:
            data = control.recv(65536)
            closed = not data
            buffer += data
            while b'\n' in buffer:
                line, buffer = buffer.split(b'\n', 1)
                request = json.loads(line)
                read_end, write_end = os.pipe()
                pid = os.fork()
                if pid == 0:
                    control.close()
                    os.close(read_end)
                    _child(script, request['argv'], write_end)
                os.close(write_end)
                children[pid] = {'name': request['name'], 'fd': read_end, 'partial': b''}
                control.sendall(json.dumps({'name': request['name'], 'pid': pid}).encode() + b'\n')
        for pid, child in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                continue
            # The rest of its output, then its exit (what has been written; a descendant
            # still holding the pipe open must not hold the server).
            while child['fd'] is not None and select.select([child['fd']], [], [], 0)[0]:
                _forward(child)
            if child['fd'] is not None:
                _write(child, [child['partial']] if child['partial'] else [])
                os.close(child['fd'])
            del children[pid]
            if not closed:
                control.sendall(json.dumps({'name': child['name'], 'pid': pid, 'code':
                                            os.waitstatus_to_exitcode(status)}).encode() + b'\n')


def _forward(child: dict) -> None:
    """Copies what `child` wrote since the last call to stdout, whole lines prefixed."""
    data = os.read(child['fd'], 65536)
    if not data:
        os.close(child['fd'])
        child['fd'] = None
        data = b'\n' if child['partial'] else b''
    lines = (child['partial'] + data).split(b'\n')
    child['partial'] = lines.pop()
    _write(child, lines)


def _write(child: dict, lines: List[bytes]) -> None:
    """`lines` (without their newlines) to stdout, each with the child's prefix."""
    prefix = f'[{child["name"]}] '.encode()
    if lines:
        os.write(1, b''.join(prefix + line + b'\n' for line in lines))


def main() -> None:
    """`python -m reverb_agents.launch.runners.role_server FD SCRIPT MODULE...`: imports the
    modules, then serves on socket FD."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=int(sys.argv[1]))
    for name in sys.argv[3:]:
        __import__(name)
    if 'tensorflow' in sys.modules:
        from tensorflow.python.eager import context
        if context.context()._context_handle is not None:
            raise SystemExit('error: the role server started TensorFlow before forking')
    console.freeze_imports()  # and the children share these pages unwritten
    control.sendall(b'{"ready": true}\n')
    serve(control, sys.argv[2])


class RoleServerError(RuntimeError):
    pass


class RoleServer:
    """The launcher's handle on a role server running `script` for its roles."""

    def __init__(self, script: str, preload: Sequence[str] = PRELOAD, stdout: Any = None,
                 timeout_s: float = 300):
        """`preload`: the modules imported before the first fork; `stdout`: where the roles'
        prefixed output goes (default: this process's standard output)."""
        ours, theirs = socket.socketpair()
        self._socket = ours
        self._process = subprocess.Popen(
            [sys.executable, '-m', 'reverb_agents.launch.runners.role_server', str(theirs.fileno()),
             script, *preload], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
            stdout=stdout, preexec_fn=die_with_parent)
        theirs.close()
        self._lines = self._socket.makefile('r')
        self._changed = threading.Condition()
        self._pids: Dict[str, int] = {}  # the last pid each name started as
        self._codes: Dict[int, int] = {}
        ready, _, _ = select.select([self._socket], [], [], timeout_s)
        if not ready or not self._lines.readline():
            self.close()
            raise RoleServerError('the role server did not start')
        threading.Thread(target=self._read, name='role_server', daemon=True).start()

    def _read(self) -> None:
        for line in self._lines:
            message = json.loads(line)
            with self._changed:
                if 'code' in message:
                    self._codes[message['pid']] = message['code']
                else:
                    self._pids[message['name']] = message['pid']
                self._changed.notify_all()
        with self._changed:  # the server is gone: so are its children
            for pid in self._pids.values():
                self._codes.setdefault(pid, -signal.SIGKILL)
            self._changed.notify_all()

    def start(self, name: str, argv: List[str], timeout_s: float = 60) -> int:
        """Forks `name` with `argv` (the script's arguments); its pid."""
        with self._changed:
            self._pids.pop(name, None)
            self._socket.sendall(json.dumps({'name': name, 'argv': argv}).encode() + b'\n')
            if not self._changed.wait_for(lambda: name in self._pids, timeout_s):
                raise RoleServerError(f'the role server did not start {name}')
            return self._pids[name]

    def exit_code(self, pid: int, timeout_s: Optional[float] = 0) -> Optional[int]:
        """The exit status of `pid` (negative: the signal), or None while it runs (after
        waiting up to `timeout_s`)."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._codes, timeout_s)
            return self._codes.get(pid)

    @property
    def pid(self) -> int:
        """The server's own pid."""
        return self._process.pid

    def close(self) -> None:
        """Ends the server once its children have ended."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._socket.close()


if __name__ == '__main__':
    main()
