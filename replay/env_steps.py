"""Real environment steps and finished episodes counted across processes, through a
Reverb queue.

In one process the learner reads the actor's count and episodes directly.
Across processes each actor reports the real environment steps it took since
its last report (`EnvStepsReporter`: placeholder steps at episode ends never
count) and the (return, length) of the episodes it finished since then, as
one item `(steps, returns [n], lengths [n])` of the `env_steps` table, a
queue; the learner drains it (`EnvStepsCounter`) into its own episode record,
so its progress, TensorBoard curves and `--target_return` see the actors'
episodes. So `summary.json`'s `env_steps` means the same in both. Reports left in the queue while no learner runs are counted by the
next one. A replay server restored from its checkpoint brings back reports
the learner had drained after that checkpoint, which are then counted again
(at most one replay checkpoint interval of steps).
"""

import threading
import time
from typing import Callable, List, Optional, Tuple

import numpy as np
import reverb

from reverb_agents.replay import tables


Episodes = Callable[[], List[Tuple[float, int]]]  # (return, length) finished since last asked


def _item(steps: int, episodes: List[Tuple[float, int]]):
    return (np.int64(steps), np.array([r for r, _ in episodes], np.float64),
            np.array([n for _, n in episodes], np.int64))


class EnvStepsReporter:
    """Reports `total()`'s increase and `episodes()` every `period_s` from a thread, and
    once at `stop()`."""

    def __init__(self, client: reverb.Client, total: Callable[[], int], period_s: float = 0.5,
                 episodes: Optional[Episodes] = None):
        self._client, self._total, self._period_s = client, total, period_s
        self._episodes = episodes or list
        self._pending: List[Tuple[float, int]] = []  # episodes not yet reported
        self._reported = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name='env_steps_reporter',
                                        daemon=True)

    def start(self) -> 'EnvStepsReporter':
        self._thread.start()
        return self

    def report(self) -> None:
        total = self._total()
        self._pending += self._episodes()
        if total > self._reported or self._pending:
            try:
                self._client.insert(_item(total - self._reported, self._pending),
                                    {tables.ENV_STEPS: 1.0})
                self._reported, self._pending = total, []
            except Exception:  # noqa: BLE001 - a server away: the report waits for the next try
                pass

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            self.report()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.report()


class EnvStepsCounter:
    """Env steps reported since construction; reads the queue at most every `refresh_s`.
    `add_episode(return, length)`: called for every episode reported."""

    def __init__(self, client: reverb.Client, refresh_s: float = 0.1,
                 add_episode: Optional[Callable[[float, int], None]] = None):
        self._client, self._refresh_s = client, refresh_s
        self._add_episode = add_episode
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
                steps, returns, lengths = (np.asarray(x).reshape(-1) for x in sample.data)
                self._steps += int(steps[0])
                if self._add_episode is not None:
                    for episode_return, length in zip(returns, lengths):
                        self._add_episode(float(episode_return), int(length))
