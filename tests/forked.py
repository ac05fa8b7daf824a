"""Command-line runs forked from an interpreter that has already imported TensorFlow.

Most tests that run `launch/run.py` (or `evaluate.py`, a standalone SavedModel
check, ...) as a separate process care about what the process does with its
arguments: its output, its exit status, the files it writes. Each fresh
interpreter first spends 5-6 CPU-seconds importing TensorFlow, and the suite
starts dozens of them on 2 cores (docs/benchmarks.md#the-test-suite). A
`ForkServer` imports the heavy modules once, then forks one child per request,
which runs the script (or code) as `__main__` with the request's argv,
environment, working directory and standard streams, and ends as an interpreter
ends (non-daemon threads joined, `atexit` handlers run, streams flushed). This
is what `multiprocessing`'s `forkserver` start method does for its workers.
Children run side by side: `ForkServer.run` waits for one to end, and
`ForkServer.start` leaves it in the background as a `Forked`, which stands in
for the `subprocess.Popen` of a test that reads a run's output as it comes and
signals or kills it (a multi-process launcher, Ctrl-C, a killed run). `Output`
reads such a stream (a `Forked`'s or a `Popen`'s) on a thread, so that a test
waits for a line, or for the whole output, without a blocking read.

A forked child differs from a fresh interpreter in what happened before its
argv was read: the imports, TensorFlow's start-up log lines (printed by the
server, not the child), the environment TensorFlow read while it loaded, and
Python's hash seed (shared by the children). Tests about start-up itself (help
without noise, quiet consoles, import paths, `--deterministic` across
processes, environment variables TensorFlow reads when it loads) start fresh
interpreters instead (`conftest.py`: `fresh=True`, or an `extra_env` that
names such a variable). TensorFlow's eager context is never created in the
server, so each child starts its own thread pools.
"""

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

# The server: imports `preload`, then forks a child per request (a JSON line on stdin,
# with an `id`) and answers with the child's pid at once, and with its exit status and
# CPU when it ends. Single-threaded: a select loop over stdin and the children's pidfds,
# so that children run side by side (a test's run in the background and another run).
_SERVER = r"""
import atexit, json, os, runpy, select, sys, threading
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # as launch/*.py set it before importing
for name in json.loads(sys.argv[1]):
    __import__(name)
if 'tensorflow' in sys.modules:
    from tensorflow.python.eager import context
    assert context.context()._context_handle is None, 'the preload started TensorFlow'
import gc
gc.freeze()  # as the scripts do after their imports (`console.freeze_imports`)

def child(request):
    os.setsid()  # its own process group: a timeout kills whatever it started
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    out = os.open(request['stdout'], os.O_WRONLY | os.O_TRUNC)
    err = out if request['stderr'] == request['stdout'] else os.open(
        request['stderr'], os.O_WRONLY | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in {out, err}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(request['env'])
    os.chdir(request['cwd'])
    # PYTHONPATH's entries go after the script's directory, as a fresh interpreter puts them.
    extra = [p for p in request['env'].get('PYTHONPATH', '').split(os.pathsep)
             if p and p not in sys.path]
    sys.path[1:1] = extra
    if 'numpy' in sys.modules:  # a fresh interpreter seeds numpy's global generator anew
        sys.modules['numpy'].random.seed()
    code = 1
    try:
        if request['script']:
            sys.argv = list(request['argv'])
            sys.path[0] = os.path.dirname(os.path.abspath(request['script']))
            runpy.run_path(request['script'], run_name='__main__')
        else:
            sys.argv = ['-c', *request['argv']]
            sys.path[0] = ''
            exec(compile(request['code'], '<string>', 'exec'), {'__name__': '__main__'})
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

def reply(message):
    os.write(1, (json.dumps(message) + '\n').encode())

children = {}  # pidfd -> (request id, pid)
pending, reading = b'', True
reply({'ready': True})
while reading or children:
    ready, _, _ = select.select([0] * reading + list(children), [], [])
    for fd in ready:
        if fd == 0:
            data = os.read(0, 1 << 16)
            reading = bool(data)
            pending += data
            while b'\n' in pending:
                line, pending = pending.split(b'\n', 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    for pidfd in children:
                        os.close(pidfd)
                    child(request)
                children[os.pidfd_open(pid)] = (request['id'], pid)
                reply({'id': request['id'], 'pid': pid})
        else:
            request_id, pid = children.pop(fd)
            os.close(fd)
            _, status, usage = os.wait4(pid, 0)
            reply({'id': request_id, 'returncode': os.waitstatus_to_exitcode(status),
                   'cpu_s': usage.ru_utime + usage.ru_stime})
"""

_CHILDREN_CPU_S = [0.0]  # the CPU of every child this process's servers forked


def children_cpu_s() -> float:
    """User + system CPU-seconds of the children forked for this process so far (the
    suite's CPU plugin, `benchmarks/suite_cpu.py`, adds them to the test's)."""
    return _CHILDREN_CPU_S[0]


class Forked:
    """A forked child, as much of `subprocess.Popen` as the tests use: `pid`, `poll()`,
    `wait(timeout)`, `send_signal()`, `kill()`, `returncode`, and `stdout`, its merged
    output line by line as it is written (when started with `merged=True`)."""

    def __init__(self, output: str, directory: tempfile.TemporaryDirectory):
        self.pid = -1  # until the server forked it
        self.returncode: Optional[int] = None
        self._output, self._directory = output, directory
        self._started, self._ended = threading.Event(), threading.Event()

    def _start(self, pid: int) -> None:
        self.pid = pid
        self._started.set()

    def _end(self, returncode: int) -> None:
        self.returncode = returncode
        self._ended.set()

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(str(self.pid), timeout)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    @property
    def stdout(self) -> Iterator[str]:
        """The output's lines as they are written, until the child has ended."""
        with open(self._output) as f:
            partial = ''
            while True:
                ended = self._ended.is_set()  # before the read: nothing written is missed
                partial += f.readline()
                if partial.endswith('\n'):
                    yield partial
                    partial = ''
                elif ended:
                    break
                else:
                    time.sleep(0.05)
            if partial:
                yield partial

    def output(self, name: str = 'stdout') -> str:
        with open(os.path.join(self._directory.name, name)) as f:
            return f.read()


class Output:
    """A child's output (`Forked.stdout`, or a `subprocess.Popen`'s), read line by line on
    a thread as it is written, so that a test waits for a line without a blocking read.
    `on_line(line)`, if given, sees each line first (on the reading thread)."""

    def __init__(self, stream: Iterable[str],
                 on_line: Optional[Callable[[str], None]] = None):
        self.lines: List[str] = []
        self._ended = False
        self._changed = threading.Condition()
        self._on_line = on_line
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Iterable[str]) -> None:
        try:
            for line in stream:
                line = line.rstrip('\n')
                if self._on_line:
                    self._on_line(line)
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def wait_for(self, pattern: str, timeout_s: float, start: int = 0
                 ) -> Tuple[int, re.Match]:
        """(index, match) of the first line from `start` on that matches `pattern`; fails
        once the output has ended without one, or after `timeout_s`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        i = start
        with self._changed:
            while True:
                while i < len(self.lines):
                    match = regex.search(self.lines[i])
                    if match:
                        return i, match
                    i += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ended:
                    raise AssertionError(f'no line matching {pattern!r}; output:\n' +
                                         self.text(last=150))
                self._changed.wait(min(remaining, 0.5))

    def wait_end(self, timeout_s: float = 30) -> None:
        """Until every line is read. A forked child ends before the reader's last read of
        its output file, and a `Popen`'s pipe stays open while a process it started lives."""
        with self._changed:
            assert self._changed.wait_for(lambda: self._ended, timeout_s), \
                'the output did not end:\n' + self.text(last=150)

    def text(self, last: Optional[int] = None) -> str:
        """The lines read so far (the `last` ones only, if given), one string."""
        with self._changed:
            return '\n'.join(self.lines[-last:] if last else self.lines)


class ForkServer:
    """A server process that imports `preload` once and forks a child per request;
    children run side by side. Thread-safe."""

    def __init__(self, preload: Sequence[str], env: Dict[str, str]):
        self._log = tempfile.NamedTemporaryFile(prefix='forkserver-', suffix='.log', delete=False)
        self._process = subprocess.Popen(
            [sys.executable, '-c', _SERVER, json.dumps(list(preload))], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self._lock = threading.Lock()  # one request written, and its pid read, at a time
        self._children: Dict[int, Forked] = {}
        self._next_id = 0
        self._reported_s = 0.0  # the CPU of its children, added to `children_cpu_s`
        if not select.select([self._process.stdout], [], [], 300)[0]:
            self._failed('did not start within 300 s')
        if not self._process.stdout.readline():  # {"ready": true}: the imports are done
            self._failed('ended while it started')
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _failed(self, why: str) -> None:
        with open(self._log.name) as f:
            raise RuntimeError(f'the fork server {why}:\n' + f.read()[-3000:])

    def _read_replies(self) -> None:
        for line in self._process.stdout:
            reply = json.loads(line)
            if 'pid' in reply:
                self._children[reply['id']]._start(reply['pid'])
                continue
            _CHILDREN_CPU_S[0] += reply['cpu_s']
            self._reported_s += reply['cpu_s']
            self._children.pop(reply['id'])._end(reply['returncode'])
        for child in list(self._children.values()):
            child._started.set()  # the server ended: a request waiting on its pid fails

    def start(self, argv: Sequence[str], env: Dict[str, str], cwd: str,
              script: Optional[str] = None, code: Optional[str] = None,
              merged: bool = False) -> Forked:
        """`script` (a path, with `argv` as `sys.argv`, the script's path first) or `code`
        (as `python -c code *argv`) in a forked child; its stdout and stderr go to files
        (`Forked.output`), or, `merged`, to one (`Forked.stdout` streams it)."""
        directory = tempfile.TemporaryDirectory()
        out, err = (os.path.join(directory.name, name) for name in ('stdout', 'stderr'))
        for path in (out, err):
            open(path, 'w').close()
        child = Forked(out, directory)
        with self._lock:
            request_id, self._next_id = self._next_id, self._next_id + 1
            self._children[request_id] = child
            request = {'id': request_id, 'script': script, 'code': code, 'argv': list(argv),
                       'env': env, 'cwd': cwd, 'stdout': out, 'stderr': out if merged else err}
            self._process.stdin.write(json.dumps(request) + '\n')
            self._process.stdin.flush()
        if not child._started.wait(60) or child.pid < 0:
            self._failed('did not fork a child')
        return child

    def run(self, argv: Sequence[str], env: Dict[str, str], cwd: str, timeout: float,
            script: Optional[str] = None, code: Optional[str] = None
            ) -> Tuple[int, str, str]:
        """(exit status, stdout, stderr) of `start(...)`'s child once it has ended.
        Raises `subprocess.TimeoutExpired` after `timeout` seconds, its process group
        killed."""
        child = self.start(argv, env, cwd, script=script, code=code)
        try:
            child.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(60)
            timed_out = True
        stdout, stderr = child.output('stdout'), child.output('stderr')
        child._directory.cleanup()
        if timed_out:
            raise subprocess.TimeoutExpired([script or '-c', *argv], timeout, stdout, stderr)
        return child.returncode, stdout, stderr

    def close(self) -> None:
        """Ends the server (once its children have). Reaped, it counts in this process's
        `RUSAGE_CHILDREN` with all its children: their CPU leaves `children_cpu_s`, so
        that it counts once."""
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        _CHILDREN_CPU_S[0] -= self._reported_s
        self._reported_s = 0.0
        os.unlink(self._log.name)


# Environment variables a child cannot take from its request: read when the
# interpreter starts or when TensorFlow loads (in the server, before any request).
# PYTHONPATH is the exception: the child adds its entries to `sys.path` itself.
START_UP_VARIABLES = ('PYTHON', 'TF_', 'CUDA', 'LD_', 'XLA_', 'OMP_', 'MKL', 'GRPC')


def needs_fresh_interpreter(extra_env: Optional[Dict[str, str]]) -> bool:
    """Whether an environment on top of the test's needs a fresh interpreter."""
    return any(key.startswith(START_UP_VARIABLES) and key != 'PYTHONPATH'
               for key in (extra_env or {}))


def servers_for(preloads: Dict[str, List[str]], env: Dict[str, str]):
    """`get(kind)` -> the `ForkServer` of `preloads[kind]`, started on first use; and
    `close()` for all."""
    servers: Dict[str, ForkServer] = {}
    lock = threading.Lock()

    def get(kind: str) -> ForkServer:
        with lock:
            if kind not in servers:
                servers[kind] = ForkServer(preloads[kind], env)
            return servers[kind]

    def close() -> None:
        for server in servers.values():
            server.close()

    return get, close
