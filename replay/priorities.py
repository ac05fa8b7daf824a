"""Prioritized replay's data side: the learner's new priorities back into `replay`.

The learner's step returns a priority per batch row (`agents.priorities`);
`PriorityUpdater.update` hands the replayed rows' to a thread that merges
whatever steps arrived since its last write into one
`reverb.Client.mutate_priorities` call, so the learner never waits on that
round trip. Items evicted in the meantime are ignored by Reverb.

New items enter at the largest priority set so far (`max_priority`), as
Schaul et al. do. Actors in other processes learn it from the `variables`
table: the learner publishes its weights with that number as the item's
priority (`replay.variables`), which `variables`' FIFO sampler never reads.
"""

import queue
import threading
from typing import Dict, Optional

import numpy as np
import reverb
from absl import logging

from reverb_agents.replay import tables

INITIAL_PRIORITY = 1.0  # new items' priority before the learner set any


class PriorityUpdater:
    """Batched, asynchronous priority writes to one table; the running maximum."""

    def __init__(self, client: reverb.Client, table: str = tables.REPLAY):
        self._client = client
        self._table = table
        self._pending: 'queue.Queue[Optional[Dict[int, float]]]' = queue.Queue()
        self._failed = False
        self.max_priority = INITIAL_PRIORITY
        self.num_writes = 0  # mutate_priorities calls made
        self._thread = threading.Thread(target=self._write_loop, name='priorities', daemon=True)
        self._thread.start()

    def update(self, keys: np.ndarray, priorities: np.ndarray, replayed: np.ndarray) -> None:
        """The rows' new priorities: keys `[B]` uint64, priorities `[B]`, replayed `[B]`
        bool (fresh rows are skipped). Rows of one item (grouped environments) give
        it their largest priority."""
        updates: Dict[int, float] = {}
        for key, priority in zip(keys[replayed].tolist(), priorities[replayed].tolist()):
            updates[key] = max(priority, updates.get(key, 0.0))
        if updates:
            self.max_priority = max(self.max_priority, max(updates.values()))
            self._pending.put(updates)

    def _write_loop(self) -> None:
        while True:
            updates = self._pending.get()
            if updates is None:
                return
            while True:  # everything queued since: one call
                try:
                    more = self._pending.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._pending.put(None)
                    break
                updates.update(more)
            try:
                self._client.mutate_priorities(self._table, updates=updates)
                self.num_writes += 1
            except Exception as e:  # a lost server: the learner's loop deals with it
                if not self._failed:
                    logging.warning('priority update failed (%s); later ones may be lost', e)
                self._failed = True

    def flush(self, timeout_s: float = 10.0) -> None:
        """Writes what is queued and stops the thread (no updates after this)."""
        self._pending.put(None)
        self._thread.join(timeout_s)
