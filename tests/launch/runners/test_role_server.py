"""`launch/runners/role_server.py`: the multi-process launcher's roles forked from one server.
A small script stands in for `launch/run.py` (the server forks whatever script it is
given; the launcher's real roles run in tests/launch/runners/test_launcher.py), and the
server imports nothing heavy, so that these checks take a second."""

import os
import signal
import time

import pytest

from reverb_agents.launch.runners import role_server

SCRIPT = '''
import os, sys, time
mode = sys.argv[1]
print(f'hello from {mode} {os.getppid()}', flush=True)
print('to stderr', file=sys.stderr, flush=True)
if mode == 'exit3':
    sys.exit(3)
if mode == 'wait':
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print('interrupted', flush=True)
        sys.exit(130)
sys.stdout.write('no newline at the end')
'''


@pytest.fixture
def server(tmp_path):
    script = tmp_path / 'role.py'
    script.write_text(SCRIPT)
    out = open(tmp_path / 'out', 'w')
    server = role_server.RoleServer(str(script), preload=(), stdout=out)
    yield server, tmp_path / 'out'
    server.close()
    out.close()


def test_roles_run_the_script_with_their_argv_and_report_their_exits(server):
    server, out = server
    done = server.start('done', ['done'])
    failed = server.start('failed', ['exit3'])
    assert server.exit_code(done, timeout_s=30) == 0
    assert server.exit_code(failed, timeout_s=30) == 3
    lines = out.read_text().splitlines()
    assert sorted(lines) == sorted([
        f'[done] hello from done {server.pid}', '[done] to stderr',
        '[done] no newline at the end',
        f'[failed] hello from exit3 {server.pid}', '[failed] to stderr'])


def test_ctrl_c_reaches_the_roles_not_the_server_and_a_kill_is_reported(server):
    server, out = server
    waiting = server.start('waiting', ['wait'])
    killed = server.start('killed', ['wait'])
    deadline = time.monotonic() + 30
    while out.read_text().count('hello') < 2:  # both inside their sleep
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(server.pid, signal.SIGINT)  # what Ctrl-C sends the whole process group
    os.kill(waiting, signal.SIGINT)
    os.kill(killed, signal.SIGKILL)
    assert server.exit_code(waiting, timeout_s=30) == 130
    assert server.exit_code(killed, timeout_s=30) == -signal.SIGKILL
    assert '[waiting] interrupted' in out.read_text().splitlines()
    again = server.start('again', ['done'])  # the server lived through Ctrl-C
    assert server.exit_code(again, timeout_s=30) == 0
    running = server.start('running', ['wait'])
    assert server.exit_code(running) is None
    os.kill(running, signal.SIGKILL)
    assert server.exit_code(running, timeout_s=30) == -signal.SIGKILL


def test_a_killed_server_takes_its_roles_with_it(server):
    server, _ = server
    role = server.start('waiting', ['wait'])
    os.kill(server.pid, signal.SIGKILL)
    assert server.exit_code(role, timeout_s=30) == -signal.SIGKILL  # as the launcher sees it
    deadline = time.monotonic() + 30
    while _alive(role):  # the parent-death signal ended it
        assert time.monotonic() < deadline, 'the role outlived its server'
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split(') ')[1][0] != 'Z'
    except FileNotFoundError:
        return False
