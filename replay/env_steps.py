"""Real environment steps counted across processes, through a Reverb queue.

In one process the learner reads the actor's count directly. Across
processes each actor reports the real environment steps it took since its
last report (`EnvStepsReporter`: placeholder steps at episode ends never
count) as one int64 item of the `env_steps` table, a queue; the learner
drains it (`EnvStepsCounter`). So `summary.json`'s `env_steps` means the same
in both. Reports left in the queue while no learner runs are counted by the
next one. A replay server restored from its checkpoint brings back reports
the learner had drained after that checkpoint, which are then counted again
(at most one replay checkpoint interval of steps).
"""

import threading
import time
from typing import Callable

import numpy as np
import reverb

from replay import tables


class EnvStepsReporter:
    """Reports `total()`'s increase every `period_s` from a thread, and once at `stop()`."""

    def __init__(self, client: reverb.Client, total: Callable[[], int], period_s: float = 0.5):
        self._client, self._total, self._period_s = client, total, period_s
        self._reported = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name='env_steps_reporter',
                                        daemon=True)

    def start(self) -> 'EnvStepsReporter':
        self._thread.start()
        return self

    def report(self) -> None:
        total = self._total()
        if total > self._reported:
            try:
                self._client.insert(np.int64(total - self._reported), {tables.ENV_STEPS: 1.0})
                self._reported = total
            except Exception:  # noqa: BLE001 - a server away: the increase waits for the next try
                pass

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            self.report()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.report()


class EnvStepsCounter:
    """Env steps reported since construction; reads the queue at most every `refresh_s`."""

    def __init__(self, client: reverb.Client, refresh_s: float = 0.1):
        self._client, self._refresh_s = client, refresh_s
        self._steps = 0
        self._read_at = 0.0

    def __call__(self) -> int:
        if time.monotonic() - self._read_at >= self._refresh_s:
            self._read_at = time.monotonic()
            try:
                self._drain()
            except Exception:  # noqa: BLE001 - a server away: the watchdog decides when to give up
                pass
        return self._steps

    def _drain(self) -> None:
        queued = self._client.server_info(timeout=10)[tables.ENV_STEPS].current_size
        if queued:
            # Exactly the queued items: sampling them never blocks.
            for sample in self._client.sample(tables.ENV_STEPS, num_samples=queued,
                                              emit_timesteps=False):
                self._steps += int(np.asarray(sample.data[0]))
