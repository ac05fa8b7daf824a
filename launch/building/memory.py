"""The replay's memory, said up front: tables the machine cannot hold are refused at set-up.

What the tables would hold: the sequences the data plan sizes them for
(`--replay_size` for `replay`, `--queue_size` for `queue`, the tables a
written sequence goes into), times the bytes of one sequence as the item
layout stores it (every field of every step of it, plus the core state; a
grouped item holds several sequences). That is the uncompressed size, an
upper bound: Reverb compresses its chunks (Snappy), which shrinks image
frames, so a replay of frames may fit where the check refuses it.

What is available: `/proc/meminfo`'s MemAvailable, or less where a cgroup
of this process leaves less (v2: `memory.max` - `memory.current` of its own
cgroup and every ancestor; v1: `memory.limit_in_bytes` - `memory.usage_in_bytes`).
`REVERB_AGENTS_MEMORY_LIMIT_BYTES` (bytes) replaces the measurement: tests set
a small one, and a user who knows the replay fits (compressible frames) a
large one.

Over what is available: one `TrainingError` line naming the flag to lower.
Over half of it: one warning line, and the run goes on.
"""

import os
from typing import Dict, List, Optional, Tuple

from absl import logging

from reverb_agents.agents.contract import DataPlan
from reverb_agents.launch.runs.rundir import TrainingError
from reverb_agents.replay.layout import ItemLayout
from reverb_agents.replay.tables import QUEUE, REPLAY

MEMORY_LIMIT_ENV = 'REVERB_AGENTS_MEMORY_LIMIT_BYTES'
TABLE_FLAGS = {REPLAY: 'replay_size', QUEUE: 'queue_size'}  # the flag that sizes each table
# The sizes are uncompressed: image frames shrink in Reverb's chunks (Atari Breakout's
# 2,053 sequences of 84x84x4 frames, 1.2 GB by this count, checkpoint to 19 MB:
# docs/design.md, "The replay's memory, said up front"), which the user may vouch for.
COMPRESSED_HINT = (f' (sizes uncompressed: where the frames compress, {MEMORY_LIMIT_ENV}=<bytes> '
                   f'lets a larger replay start)')


def item_bytes(layout: ItemLayout) -> int:
    """Bytes of one stored item, uncompressed: its packed columns ([L, (E,) F] per dtype
    for the steps, [(E,) F] for the core state)."""
    return sum(spec.shape.num_elements() * spec.dtype.size for spec in layout.packed_signature)


def table_bytes(layout: ItemLayout, plan: DataPlan) -> Dict[str, Tuple[int, int]]:
    """{table: (sequences, bytes)} for the tables a written sequence goes into."""
    sizes = {REPLAY: plan.replay_size, QUEUE: plan.queue_size}
    return {table: (sizes[table], layout.items(sizes[table]) * item_bytes(layout))
            for table in plan.tables if table in sizes}


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _cgroup_free() -> List[int]:
    """Bytes each cgroup limit of this process still leaves (none without a limit)."""
    free = []
    for line in (_read('/proc/self/cgroup') or '').splitlines():
        hierarchy, controllers, path = (line.split(':', 2) + ['', ''])[:3]
        if hierarchy == '0':  # v2: this cgroup and its ancestors
            parts = [p for p in path.strip().split('/') if p]
            for depth in range(len(parts), -1, -1):
                directory = os.path.join('/sys/fs/cgroup', *parts[:depth])
                limit = (_read(os.path.join(directory, 'memory.max')) or 'max').strip()
                used = (_read(os.path.join(directory, 'memory.current')) or '0').strip()
                if limit.isdigit() and used.isdigit():
                    free.append(int(limit) - int(used))
        elif 'memory' in controllers.split(','):  # v1: its own cgroup, or the root seen
            for directory in {os.path.join('/sys/fs/cgroup/memory', path.strip().lstrip('/')),
                              '/sys/fs/cgroup/memory'}:
                limit = (_read(os.path.join(directory, 'memory.limit_in_bytes')) or '').strip()
                used = (_read(os.path.join(directory, 'memory.usage_in_bytes')) or '0').strip()
                if limit.isdigit() and used.isdigit() and int(limit) < 1 << 60:  # else none
                    free.append(int(limit) - int(used))
    return free


def available_bytes() -> Optional[int]:
    """Memory this process can still take, in bytes (see the module doc); None where
    nothing says (not Linux)."""
    override = os.environ.get(MEMORY_LIMIT_ENV, '').strip()
    if override:
        if not override.isdigit():
            raise ValueError(f'{MEMORY_LIMIT_ENV} must be a number of bytes, got {override!r}')
        return int(override)
    known = _cgroup_free()
    for line in (_read('/proc/meminfo') or '').splitlines():
        if line.startswith('MemAvailable:'):
            known.append(int(line.split()[1]) * 1024)  # kB
    return max(0, min(known)) if known else None


def human_bytes(n: float) -> str:
    """`n` bytes in decimal units: '28.2 kB', '21.9 GB'."""
    for unit, scale in (('TB', 1e12), ('GB', 1e9), ('MB', 1e6), ('kB', 1e3)):
        if n >= scale:
            return f'{n / scale:.1f} {unit}'
    return f'{int(n)} B'


def check_replay_memory(layout: ItemLayout, plan: DataPlan,
                        available: Optional[int] = None) -> Optional[str]:
    """Raises `TrainingError` when the tables would hold more than `available` bytes
    (default `available_bytes()`); logs and returns a warning over half of it; None
    when they fit (or nothing says what is available)."""
    available = available_bytes() if available is None else available
    tables = table_bytes(layout, plan)
    total = sum(size for _, size in tables.values())
    if available is None or not total or total <= available / 2:
        return None
    sequences = sum(n for n, _ in tables.values())
    # The flags of the tables that hold a tenth or more of it, the largest first.
    flags = ' or '.join(f'--{TABLE_FLAGS[t]}' for t, (_, size) in
                        sorted(tables.items(), key=lambda kv: -kv[1][1]) if size >= total / 10)
    held = (f'replay would hold ~{human_bytes(total)} ({sequences:,} sequences x '
            f'{human_bytes(total / sequences)})')
    if total > available:
        raise TrainingError(f'{held} but {human_bytes(available)} of memory is available; '
                            f'lower {flags}{COMPRESSED_HINT}')
    warning = (f'{held}, more than half of the {human_bytes(available)} of memory available; '
               f'lower {flags} if the machine runs short')
    logging.warning(warning)
    return warning
