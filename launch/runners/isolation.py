"""Keeps a run's replay server off the network: the run in a network namespace of its own.

Reverb 0.14's server binds `[::]:port`, offers no bind address and no
authentication, so whoever reaches the machine could read the policy's
weights and insert into every table (the `variables` table the actors load
weights from included). A run on one machine needs no network, so
`launch/run.py` calls `start` first thing, while the process is still one
thread: it moves the process into a new network namespace (with a new user
namespace where the process lacks CAP_SYS_ADMIN, mapping its own uid and gid
so the files it writes keep their owner) and brings its loopback interface
up. Its server is then reachable through `localhost` by the run's own
processes (threads, async environments, the multi-process launcher's roles,
which inherit the namespace) and by nothing else.

Not isolated, each with one line saying what is open (`announce`,
`trusted_network_line`): `--network_isolation=off` (to attach something from
outside), a kernel that refuses the namespaces (the run goes on), roles
started one by one with `--role` (the others must reach them) and
`--launcher=ray` (Ray needs the network). Imports nothing heavy: it runs
before TensorFlow starts its threads. Design notes: docs/design.md,
"Network exposure".
"""

import ctypes
import fcntl
import ipaddress
import os
import socket
import struct
import sys
from typing import List, Optional, Tuple

from absl import flags

from reverb_agents.launch.runs import preset_files
from reverb_agents.launch.runs.options import RunOptions

MODES = ('auto', 'off')
ISOLATED = 'network: isolated (loopback only)'
# Why this process is not isolated; set by `start`, inherited by the processes it starts.
REASON_ENV = 'REVERB_AGENTS_NOT_ISOLATED'
NOT_STARTED_BY_RUN_PY = 'only runs started by launch/run.py are isolated, not the Python API'
_ROLE = 'a role started with --role is not isolated, the other roles must reach it'

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS = 0x8913, 0x8914
_IFF_UP, _IFF_LOOPBACK = 0x1, 0x8
_IFREQ = '16sH22x'  # struct ifreq: the interface's name, then ifr_flags in a 24-byte union


class IsolationError(RuntimeError):
    """The namespace was made but could not be set up; the process cannot go back."""


def define_flag(fv: flags.FlagValues) -> None:
    """`--network_isolation` on `fv`."""
    flags.DEFINE_enum(
        'network_isolation', 'auto', MODES,
        'auto: an in-process or multi-process run gets a network namespace of its own with '
        'loopback only, so nothing outside the run reaches its unauthenticated replay server '
        '(where the kernel allows it; otherwise one warning line); off: the server listens on '
        'all interfaces (to attach something from outside). Roles started with --role and '
        '--launcher=ray are never isolated', flag_values=fv)


def _flags_in(argv: List[str]) -> flags.FlagValues:
    """The few flags that decide isolation, parsed from `argv` (flagfiles expanded,
    every other flag left alone)."""
    fv = flags.FlagValues()
    for name, default in (('launcher', 'inprocess'), ('role', ''), ('preset', ''),
                          ('agent', 'clear'), ('env', RunOptions.env), ('tasks', '')):
        flags.DEFINE_string(name, default, '', flag_values=fv)
    flags.DEFINE_bool('no_preset', False, '', flag_values=fv)
    define_flag(fv)
    fv(argv, known_only=True)
    return fv


def decide(argv: List[str]) -> Optional[str]:
    """None when the run `argv` describes is to be isolated, else why not. Applies the
    default preset as `launch.command_line.run_flags.parse` does: a preset may set --launcher."""
    fv = _flags_in(argv)
    if fv.preset and fv.preset != preset_files.NO_PRESET:
        preset = preset_files.preset_path(fv.preset)
    elif (fv.preset == preset_files.NO_PRESET or fv.no_preset or fv.role or fv.tasks or any(
            arg.split('=', 1)[0] in ('--flagfile', '-flagfile') for arg in argv[1:])):
        preset = None
    else:
        preset = preset_files.default_preset(fv.agent, fv.env)
    if preset:
        fv = _flags_in([argv[0], f'--flagfile={preset}', *argv[1:]])
    if fv.network_isolation == 'off':
        return 'isolation is off (--network_isolation=off)'
    if fv.role:
        return _ROLE
    if fv.launcher == 'ray':
        return 'Ray runs on the network (--launcher=ray)'
    return None


def _threads() -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('Threads:'):
                return int(line.split()[1])
    return 0


def _write(path: str, text: str) -> None:
    with open(path, 'w') as f:
        f.write(text)


def _interface_flags(sock: socket.socket, name: str) -> int:
    request = struct.pack(_IFREQ, name.encode(), 0)
    return struct.unpack(_IFREQ, fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]


def _enter() -> Optional[str]:
    """Moves this process into new namespaces and sets them up; None when done, else why
    not. Past the unshare there is no way back: `isolate` tries it in a child first."""
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    # Root keeps its own user namespace where it may: in a new one it could no longer
    # override the permissions of files owned by other (unmapped) users.
    attempts = ([_CLONE_NEWNET] if uid == 0 else []) + [_CLONE_NEWUSER | _CLONE_NEWNET]
    for clone_flags in attempts:
        if libc.unshare(clone_flags) == 0:
            break
        error = ctypes.get_errno()
    else:
        return f'the kernel refused a network namespace (unshare: {os.strerror(error)})'
    try:
        if clone_flags & _CLONE_NEWUSER:
            if os.path.exists('/proc/self/setgroups'):  # must precede gid_map (Linux >= 3.19)
                _write('/proc/self/setgroups', 'deny')
            _write('/proc/self/uid_map', f'{uid} {uid} 1\n')
            _write('/proc/self/gid_map', f'{gid} {gid} 1\n')
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            up = _interface_flags(sock, 'lo') | _IFF_UP
            fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack(_IFREQ, b'lo', up))
        with socket.create_server(('127.0.0.1', 0)) as server:
            socket.create_connection(server.getsockname(), timeout=5).close()
    except OSError as e:  # e.g. AppArmor's restriction of unprivileged user namespaces
        return f'the network namespace could not be set up ({e})'
    return None


def _in_child() -> Optional[str]:
    """`_enter()`'s answer in a forked child, which then exits: this process is unchanged."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            reason = _enter()
        except BaseException as e:  # noqa: BLE001 - the child reports and exits whatever happens
            reason = f'the network namespace could not be made ({e})'
        os.write(write_end, (reason or '').encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, 'rb') as answer:
        reason = answer.read().decode()
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status != 0:
        return f'the network namespace probe ended with status {status}'
    return reason or None


def isolate() -> Optional[str]:
    """Moves this process into a network namespace of its own with loopback up.

    Returns None when done, else why not (the process is unchanged: a forked
    child tries first). Needs a process of one thread: the kernel moves only
    the calling thread's network namespace and refuses a new user namespace to
    a threaded process. Raises `IsolationError` when the child succeeded and
    this process then failed halfway (it cannot go back).
    """
    threads = _threads()
    if threads != 1:
        return f'the process already runs {threads} threads'
    reason = _in_child()
    if reason is not None:
        return reason
    reason = _enter()
    if reason is not None:
        raise IsolationError(f'{reason}; rerun with --network_isolation=off')
    return None


def loopback_only() -> bool:
    """True when this process's network namespace has no interface but loopback (nothing
    outside this host's namespace can reach a socket it listens on)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            return all(_interface_flags(sock, name) & _IFF_LOOPBACK
                       for _, name in socket.if_nameindex())
    except OSError:
        return False


def start(argv: List[str]) -> Tuple[bool, Optional[str]]:
    """`launch/run.py`'s first step: isolates the run `argv` describes where it should
    and can be. Returns (isolated, why not); the reason is also left in the
    environment for the processes this one starts. Raises `IsolationError`."""
    try:
        reason = decide(argv)
    except flags.Error:
        return False, None  # the full parse reports the bad flag and ends the run
    if reason is None:
        reason = isolate()
    if reason is None:
        os.environ.pop(REASON_ENV, None)
        return True, None
    if reason == _ROLE:  # a role the launcher started keeps the launcher's reason
        reason = os.environ.get(REASON_ENV, reason)
    os.environ[REASON_ENV] = reason
    return False, reason


def server_line(port: int) -> str:
    """One line on what reaches the replay server listening on `port` in this process."""
    if loopback_only():
        return f'{ISOLATED}: the replay server (port {port}) is reachable by this run only'
    reason = os.environ.get(REASON_ENV, NOT_STARTED_BY_RUN_PY)
    return (f'warning: the replay server listens on all interfaces, port {port}, without '
            f'authentication, so whoever reaches this machine can read the weights and write '
            f'the tables: {reason} (docs/design.md, "Network exposure")')


def announce(port: int) -> None:
    """Prints `server_line(port)` on stderr (the process started a server on `port`)."""
    print(server_line(port), file=sys.stderr, flush=True)


def is_loopback(address: str) -> bool:
    """True for a host:port whose host is this machine's loopback (localhost, 127.x, ::1)."""
    host = address.rpartition(':')[0].strip('[]')
    try:
        return host == 'localhost' or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def trusted_network_line(address: str, what: str = 'the replay server at {} is reached',
                         any_address: bool = False) -> Optional[str]:
    """For processes that talk across machines: one line saying that `what` (formatted
    with the host:port `address`) has no authentication and the network must be trusted.
    None when nothing leaves this machine: a network namespace with loopback only, or
    (unless `any_address`, for what listens on every interface whatever address its
    clients use) a loopback `address`."""
    if loopback_only() or (is_loopback(address) and not any_address):
        return None
    return (f'warning: {what.format(address)} without authentication: the network must be '
            f'trusted (docs/design.md, "Network exposure")')
