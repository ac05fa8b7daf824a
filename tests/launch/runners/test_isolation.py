"""The replay server is reachable by the run only (`launch/runners/isolation.py`).

Real runs of `launch/run.py` as subprocesses; the test reads, from the machine's
own network namespace, every listening TCP socket (`/proc/net/tcp`, `tcp6`) and
the sockets the run's processes hold (`/proc/<pid>/fd`), and sends no traffic.
A multi-process run's roles share the launcher's namespace: checked with these
helpers on a run of `tests/launch/runners/test_launcher.py` (its learner-kill test).
"""

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Dict, List, Set, Tuple

import pytest
from absl import flags

from reverb_agents.launch.command_line import run_flags as command_line
from reverb_agents.launch.runners import isolation
from tests import forked

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SMALL = ['--agent=clear', '--env=CartPole-v1', '--no_preset', '--num_envs=4', '--lstm_size=8',
         '--hidden_sizes=16', '--batch_size=8', '--unroll_length=5', '--min_replay_size=8',
         '--queue_size=16', '--eval_episodes=1', '--log_interval_s=0.5',
         '--num_steps=100000000']  # never reached: the test kills the run once it has looked
START_TIMEOUT_S = 180  # two shared cores: TensorFlow alone takes seconds to import
LISTEN = '0A'  # the TCP state column of /proc/net/tcp


def _address(hex_address: str) -> ipaddress._BaseAddress:
    """/proc/net/tcp's address: 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_address)
    return ipaddress.ip_address(b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def listening(net: str = '/proc/net') -> Dict[int, Tuple[ipaddress._BaseAddress, int]]:
    """Socket inode -> (address, port) of every listening TCP socket in the network
    namespace `net` shows (`/proc/net`: this process's; `/proc/<pid>/net`: pid's)."""
    out = {}
    for name in ('tcp', 'tcp6'):
        with open(os.path.join(net, name)) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == LISTEN:
                    host, port = fields[1].split(':')
                    out[int(fields[9])] = (_address(host), int(port, 16))
    return out


def process_tree(root: int) -> List[int]:
    """`root` and every process descending from it."""
    parents = {}
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/stat') as f:
                parents[int(entry)] = int(f.read().rpartition(')')[2].split()[1])
        except (ValueError, OSError):
            continue
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sorted(tree)


def socket_inodes(pids: List[int]) -> Set[int]:
    """The socket inodes the processes `pids` hold open."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:  # exited meanwhile
            continue
        for fd in fds:
            try:
                match = re.fullmatch(r'socket:\[(\d+)\]', os.readlink(f'/proc/{pid}/fd/{fd}'))
            except OSError:
                continue
            if match:
                inodes.add(int(match.group(1)))
    return inodes


def is_loopback(address: ipaddress._BaseAddress) -> bool:
    mapped = getattr(address, 'ipv4_mapped', None)
    return (mapped or address).is_loopback


class Run:
    """`launch/run.py` in the background, in a session of its own (forked:
    `start_script`), its output collected."""

    def __init__(self, start_script, args: List[str]):
        self.process = start_script('run', args)
        self._output = forked.Output(self.process.stdout)
        self.lines = self._output.lines

    def wait_for(self, pattern: re.Pattern, timeout_s: float = START_TIMEOUT_S) -> re.Match:
        """The first line matching `pattern`; fails once the run's output ended, or on
        timeout."""
        return self._output.wait_for(pattern, timeout_s)[1]

    def wait_for_training(self) -> None:
        """Until the learner has taken a step on env steps the actors sent."""
        self.wait_for(re.compile(r'env steps [1-9]\d* of .*learner steps [1-9]\d* '))

    def exposed(self) -> Dict[int, Tuple[ipaddress._BaseAddress, int]]:
        """The run's listening sockets in the machine's namespace (this test's)."""
        held = socket_inodes(process_tree(self.process.pid))
        return {inode: where for inode, where in listening().items() if inode in held}

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # the run and the roles it started
        self.process.wait()


@pytest.fixture
def start_run(tmp_path, start_script):
    started = []

    def start(*args: str) -> Run:
        run = Run(start_script, [f'--logdir={tmp_path / f"run{len(started)}"}', *args])
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


PROBE = textwrap.dedent('''
    import json, os, socket, sys, threading
    from reverb_agents.launch.runners import isolation
    if sys.argv[1] == 'threaded':
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    before = os.readlink('/proc/self/ns/net')
    reason = isolation.isolate()
    out = dict(reason=reason, loopback_only=isolation.loopback_only(), uid=os.geteuid(),
               gid=os.getegid(), moved=os.readlink('/proc/self/ns/net') != before)
    if reason is None:
        with open(sys.argv[2], 'w') as f:
            f.write('x')
        out['file_uid'] = os.stat(sys.argv[2]).st_uid
        server = socket.create_server(('::', 0), family=socket.AF_INET6, dualstack_ipv6=True)
        port = server.getsockname()[1]
        out['reached'] = []
        for host in ('127.0.0.1', '::1', 'localhost'):
            socket.create_connection((host, port), timeout=5).close()
            out['reached'].append(host)
    print(json.dumps(out))
''')


def _probe(directory, mode: str, as_user: Tuple[str, ...] = ()) -> dict:
    """`isolation.isolate()` in a fresh Python (`as_user`: a command prefix that runs it
    as another user) and what the process then sees."""
    result = subprocess.run([*as_user, sys.executable, '-c', PROBE, mode,
                             os.path.join(str(directory), 'file')],
                            capture_output=True, text=True, timeout=60, cwd='/')
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope='module')
def isolation_available(tmp_path_factory) -> bool:
    return _probe(tmp_path_factory.mktemp('probe'), 'plain')['reason'] is None


def test_isolate_gives_loopback_only_keeps_the_owner_and_reaches_localhost(tmp_path):
    out = _probe(tmp_path, 'plain')
    if out['reason'] is not None:
        assert not out['moved']
        pytest.skip(f'this kernel allows no network namespace here: {out["reason"]}')
    assert out['moved'] and out['loopback_only']
    assert (out['uid'], out['gid']) == (os.geteuid(), os.getegid())
    assert out['file_uid'] == os.geteuid()
    assert out['reached'] == ['127.0.0.1', '::1', 'localhost']


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('setpriv'),
                    reason='needs root to run the probe as another user (setpriv)')
def test_isolate_as_a_user_without_privileges_maps_its_own_ids():
    user = 4321  # not 65534: an unmapped id reads as 65534 inside a user namespace
    directory = tempfile.mkdtemp(prefix='isolation-')  # readable by that user, unlike tmp_path
    try:
        os.chown(directory, user, user)
        out = _probe(directory, 'plain', ('setpriv', f'--reuid={user}', f'--regid={user}',
                                          '--clear-groups'))
    finally:
        shutil.rmtree(directory)
    if out['reason'] is not None:
        assert not out['moved']
        pytest.skip(f'no unprivileged user namespaces here: {out["reason"]}')
    assert out['moved'] and out['loopback_only']
    assert (out['uid'], out['gid'], out['file_uid']) == (user, user, user)
    assert out['reached'] == ['127.0.0.1', '::1', 'localhost']


def test_isolate_refuses_a_threaded_process_and_leaves_it_alone(tmp_path):
    out = _probe(tmp_path, 'threaded')
    assert re.fullmatch(r'the process already runs \d+ threads', out['reason'])
    assert not out['moved'] and out['loopback_only'] == isolation.loopback_only()


@pytest.mark.parametrize('args, isolated', [
    ([], True),  # the default preset, in-process
    (['--agent=sac', '--env=Pendulum-v1'], True),
    (['--preset=clear_cartpole_multiprocess'], True),
    (['--preset=clear_cartpole_ray'], False),  # a preset sets --launcher=ray
    ([f'--flagfile={ROOT}/launch/presets/clear_cartpole_ray.flags'], False),
    (['--preset=clear_cartpole_ray', '--launcher=inprocess'], True),
    (['--launcher', 'ray'], False),
    (['--role=replay', '--logdir=x'], False),
    (['--network_isolation=off'], False),
])
def test_the_early_decision_agrees_with_the_full_parse(args, isolated):
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    argv = ['run.py', *args]
    command_line.parse(argv, fv)
    full = fv.network_isolation == 'auto' and not fv.role and fv.launcher != 'ray'
    assert full == isolated
    assert (isolation.decide(argv) is None) == isolated


def test_an_inprocess_run_listens_on_no_interface_of_the_machine(start_run, isolation_available):
    if not isolation_available:  # the run would warn, as the test with isolation off checks
        pytest.skip('this kernel allows no network namespace here')
    run = start_run(*SMALL)
    run.wait_for_training()
    exposed = run.exposed()
    assert run.process.poll() is None, '\n'.join(run.lines)  # alive while it was looked at
    assert all(is_loopback(address) for address, _ in exposed.values()), exposed
    assert not exposed  # not even on loopback: its sockets are in a namespace of its own
    port = int(run.wait_for(re.compile(
        r'^network: isolated \(loopback only\): the replay server \(port (\d+)\)')).group(1))
    pid = run.process.pid
    assert os.readlink(f'/proc/{pid}/ns/net') != os.readlink('/proc/self/ns/net')
    # The server is there, in the run's own namespace, whose only interface is loopback.
    inside = listening(f'/proc/{pid}/net')
    assert port in {p for inode, (_, p) in inside.items() if inode in socket_inodes([pid])}
    assert not [line for line in run.lines if 'listens on all interfaces' in line]


def test_isolation_off_listens_on_all_interfaces_and_says_so_in_one_line(start_run):
    run = start_run(*SMALL, '--network_isolation=off')
    run.wait_for_training()
    exposed = run.exposed()
    assert run.process.poll() is None, '\n'.join(run.lines)
    warnings = [line for line in run.lines if 'listens on all interfaces' in line]
    assert len(warnings) == 1, run.lines
    port = int(re.search(r'port (\d+),', warnings[0]).group(1))
    assert warnings[0].startswith('warning: ') and '--network_isolation=off' in warnings[0]
    assert [(address, p) for address, p in exposed.values() if not is_loopback(address)] == [
        (ipaddress.ip_address('::'), port)]
    assert run.lines.index(warnings[0]) < 5  # among the run's first lines


def test_a_replay_role_started_alone_names_its_open_port(start_run):
    run = start_run(*SMALL, '--role=replay')
    match = run.wait_for(re.compile(r'^warning: the replay server listens on all interfaces, '
                                    r'port (\d+), .*started with --role'))
    port = int(match.group(1))
    deadline = time.monotonic() + 30
    while port not in {p for _, p in run.exposed().values()} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (ipaddress.ip_address('::'), port) in run.exposed().values()
