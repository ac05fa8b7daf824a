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
import select
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Sequence, Tuple

# The server: imports `preload`, then answers one request per line of stdin with a
# forked child's pid, then (when the child has ended) its exit status and CPU.
_SERVER = r'''
import atexit, json, os, runpy, sys, threading
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # as launch/*.py set it before importing
for name in json.loads(sys.argv[1]):
    __import__(name)
if 'tensorflow' in sys.modules:
    from tensorflow.python.eager import context
    assert context.context()._context_handle is None, 'the preload started TensorFlow'

def child(request):
    os.setsid()  # its own process group: a timeout kills whatever it started
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request['stdout'], os.O_WRONLY | os.O_TRUNC),
                            (2, request['stderr'], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(request['env'])
    os.chdir(request['cwd'])
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

print(json.dumps({'ready': True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    print(json.dumps({'pid': pid}), flush=True)
    _, status, usage = os.wait4(pid, 0)
    print(json.dumps({'returncode': os.waitstatus_to_exitcode(status),
                      'cpu_s': usage.ru_utime + usage.ru_stime}), flush=True)
'''

_CHILDREN_CPU_S = [0.0]  # the CPU of every child this process's servers forked


def children_cpu_s() -> float:
    """User + system CPU-seconds of the children forked for this process so far (the
    suite's CPU plugin, `benchmarks/suite_cpu.py`, adds them to the test's)."""
    return _CHILDREN_CPU_S[0]


class ForkServer:
    """A server process that imports `preload` once and forks a child per `run`. One
    request at a time (a pytest-xdist worker runs one test at a time); thread-safe."""

    def __init__(self, preload: Sequence[str], env: Dict[str, str]):
        self._log = tempfile.NamedTemporaryFile(prefix='forkserver-', suffix='.log', delete=False)
        self._process = subprocess.Popen(
            [sys.executable, '-c', _SERVER, json.dumps(list(preload))], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self._lock = threading.Lock()
        self._reported_s = 0.0  # the CPU of its children, added to `children_cpu_s`
        self._reply(timeout=300)  # {'ready': True}: the imports are done

    def _reply(self, timeout: Optional[float]) -> dict:
        ready, _, _ = select.select([self._process.stdout], [], [], timeout)
        line = self._process.stdout.readline() if ready else ''
        if not line:
            if not ready:
                raise TimeoutError
            with open(self._log.name) as f:
                raise RuntimeError('the fork server ended:\n' + f.read()[-3000:])
        return json.loads(line)

    def run(self, argv: Sequence[str], env: Dict[str, str], cwd: str, timeout: float,
            script: Optional[str] = None, code: Optional[str] = None
            ) -> Tuple[int, str, str]:
        """(exit status, stdout, stderr) of `script` (a path, with `argv` as `sys.argv`, the
        script's path first) or `code` (as `python -c code *argv`) in a forked child.
        Raises `subprocess.TimeoutExpired` after `timeout` seconds, its process group
        killed."""
        with self._lock, tempfile.TemporaryDirectory() as directory:
            out, err = os.path.join(directory, 'stdout'), os.path.join(directory, 'stderr')
            for path in (out, err):
                open(path, 'w').close()
            request = {'script': script, 'code': code, 'argv': list(argv), 'env': env,
                       'cwd': cwd, 'stdout': out, 'stderr': err}
            self._process.stdin.write(json.dumps(request) + '\n')
            self._process.stdin.flush()
            pid = self._reply(timeout=60)['pid']
            try:
                done = self._reply(timeout=timeout)
                timed_out = False
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                done, timed_out = self._reply(timeout=60), True
            _CHILDREN_CPU_S[0] += done['cpu_s']
            self._reported_s += done['cpu_s']
            with open(out) as f_out, open(err) as f_err:
                stdout, stderr = f_out.read(), f_err.read()
            if timed_out:
                raise subprocess.TimeoutExpired([script or '-c', *argv], timeout, stdout, stderr)
            return done['returncode'], stdout, stderr

    def close(self) -> None:
        """Ends the server. Reaped, it counts in this process's `RUSAGE_CHILDREN` with all
        its children: their CPU leaves `children_cpu_s`, so that it counts once."""
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
START_UP_VARIABLES = ('PYTHON', 'TF_', 'CUDA', 'LD_', 'XLA_', 'OMP_', 'MKL', 'GRPC')


def needs_fresh_interpreter(extra_env: Optional[Dict[str, str]]) -> bool:
    """Whether an environment on top of the test's needs a fresh interpreter."""
    return any(key.startswith(START_UP_VARIABLES) for key in (extra_env or {}))


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
