"""Where the test suite's CPU goes: a pytest plugin that records each test's CPU.

    python -m pytest -q tests -p benchmarks.suite_cpu --suite-cpu-out=suite_cpu.json

For each test, the process that ran it (a pytest-xdist worker or pytest itself)
notes its own CPU (user + system, every thread: `getrusage(RUSAGE_SELF)`), the
CPU of the subprocesses it waited for (`RUSAGE_CHILDREN`: `launch/run.py` runs,
standalone SavedModel checks, ...; for the runs forked by the tests' fork
servers, `tests/forked.py`, the CPU the servers report) and the wall, setup and
teardown included (so a module fixture's cost lands on the first test that uses
it), and when and in which process it started (the suite's timeline: where
workers sat idle). At the end pytest writes one JSON: every test, and the sums
per file, largest first. Processes nobody waits for (Ray's workers) and the
kernel's own threads are not counted per test; the JSON's `machine` says how
busy the machine's cores were from the session's start to its end (Linux's
`/proc/stat`: everything running, this suite's uncounted processes and anybody
else's), beside its wall, so that `counted_share` says how much of it the
figures per test explain. The suite's time is CPU-bound on 2 cores, so these
sums, not the walls of `--durations`, say what a cut would save
(docs/benchmarks.md#the-test-suite).
"""

import glob
import json
import os
import resource
import shutil
import sys
import time
from typing import Dict, List, Optional, Tuple

import pytest

OPTION = '--suite-cpu-out'


def pytest_addoption(parser) -> None:
    parser.addoption(OPTION, default='suite_cpu.json',
                     help='where benchmarks.suite_cpu writes its JSON')


def _parts(config) -> str:
    return os.path.abspath(config.getoption(OPTION)) + '.parts'


def _cpu() -> Tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Runs forked by the tests' fork servers (`tests/forked.py`) are their children, not
    # this process's: the servers report each one's CPU back.
    forked = sys.modules.get('tests.forked')
    forked_s = forked.children_cpu_s() if forked else 0.0
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime + forked_s


def _busy_cpu_s() -> Optional[float]:
    """Seconds the machine's cores have spent busy since it booted (user, nice, system,
    interrupts; not idle, I/O wait or time stolen by the host), or None without
    `/proc/stat`."""
    try:
        with open('/proc/stat') as f:
            fields = [int(x) for x in f.readline().split()[1:8]]
    except (OSError, ValueError):
        return None
    user, nice, system, _, _, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf('SC_CLK_TCK')


_SESSION: Dict[str, Optional[float]] = {}  # the main process's start: busy CPU and wall


def pytest_configure(config) -> None:
    if not hasattr(config, 'workerinput'):  # pytest itself, not an xdist worker
        shutil.rmtree(_parts(config), ignore_errors=True)
        os.makedirs(_parts(config))
        _SESSION.update(busy_cpu_s=_busy_cpu_s(), wall=time.monotonic())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children = _cpu()
    at, started = time.time(), time.monotonic()
    yield
    own_after, children_after = _cpu()
    row = {'test': item.nodeid, 'own_cpu_s': round(own_after - own, 2),
           'subprocess_cpu_s': round(children_after - children, 2),
           'wall_s': round(time.monotonic() - started, 2),
           'started': round(at, 2), 'worker': os.getpid()}
    with open(os.path.join(_parts(item.config), f'{os.getpid()}.jsonl'), 'a') as f:
        f.write(json.dumps(row) + '\n')


def summarize(rows: List[Dict], wall_s: Optional[float] = None,
              machine_busy_cpu_s: Optional[float] = None) -> Dict:
    """The JSON: totals, the machine's busy CPU over `wall_s` (when known), CPU per file
    (largest first) and every test (largest first)."""
    files: Dict[str, float] = {}
    for row in rows:
        name = row['test'].split('::')[0]
        files[name] = files.get(name, 0.0) + row['own_cpu_s'] + row['subprocess_cpu_s']
    own = sum(r['own_cpu_s'] for r in rows)
    subprocesses = sum(r['subprocess_cpu_s'] for r in rows)
    machine = None
    if wall_s is not None and machine_busy_cpu_s is not None:
        machine = {'wall_s': round(wall_s, 1), 'busy_cpu_s': round(machine_busy_cpu_s, 1),
                   'cores_busy': round(machine_busy_cpu_s / max(wall_s, 1e-9), 2),
                   'counted_share': round((own + subprocesses) / max(machine_busy_cpu_s, 1e-9),
                                          3)}
    return {
        'tests': len(rows),
        'own_cpu_s': round(own, 1),
        'subprocess_cpu_s': round(subprocesses, 1),
        'machine': machine,
        'cpu_s_by_file': {k: round(v, 1) for k, v in
                          sorted(files.items(), key=lambda kv: -kv[1])},
        'by_test': sorted(rows, key=lambda r: -(r['own_cpu_s'] + r['subprocess_cpu_s'])),
    }


def pytest_sessionfinish(session, exitstatus) -> None:
    config = session.config
    if hasattr(config, 'workerinput'):
        return
    rows = []
    for path in glob.glob(os.path.join(_parts(config), '*.jsonl')):
        with open(path) as f:
            rows += [json.loads(line) for line in f]
    shutil.rmtree(_parts(config), ignore_errors=True)
    busy_before, busy = _SESSION.get('busy_cpu_s'), _busy_cpu_s()
    wall_s = time.monotonic() - _SESSION['wall']
    machine_busy = busy - busy_before if busy is not None and busy_before is not None else None
    with open(config.getoption(OPTION), 'w') as f:
        json.dump(summarize(rows, wall_s, machine_busy), f, indent=1)
