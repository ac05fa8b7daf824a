"""Connecting to a Reverb server that may not be there (yet, or any more).

A Reverb client never fails on its own when its server is gone: samplers and
datasets retry until it is back, so a process whose server died would wait
forever. `wait_for_server` bounds the first connection; `ServerWatchdog`
notices a server that stayed away too long, so a role can exit with one clear
error naming the address instead of hanging.
"""

import threading
import time
from typing import Callable

import reverb
import tensorflow as tf
from absl import logging

PROBE_TIMEOUT_S = 2  # one ServerInfo call
# What a Reverb operation raises when its server went away (a restart, a crash).
SERVER_ERRORS = (tf.errors.UnavailableError, tf.errors.CancelledError,
                 reverb.errors.DeadlineExceededError)


class ServerUnavailableError(ConnectionError):
    """No Reverb server answered at an address within the time allowed."""


def answers(client: reverb.Client) -> bool:
    try:
        client.server_info(timeout=PROBE_TIMEOUT_S)
        return True
    except Exception:  # Reverb raises DeadlineExceeded, Unavailable or RuntimeError here
        return False


def wait_for_server(address: str, timeout_s: float) -> reverb.Client:
    """A client of the server at `address`, once it answers; raises after `timeout_s`."""
    client = reverb.Client(address)
    deadline = time.monotonic() + timeout_s
    while not answers(client):
        if time.monotonic() >= deadline:
            raise ServerUnavailableError(
                f'no Reverb server answered at {address} within {timeout_s:.0f} s')
        time.sleep(0.5)
    return client


class ServerWatchdog:
    """Calls `on_lost(message)` once the server has not answered for `timeout_s`.

    Polls from a daemon thread. `outages` counts the polls the server did not
    answer: a role compares it before and after a piece of work to learn that
    its connection may have broken meanwhile (a writer does not recover from
    a server restart by itself).
    """

    def __init__(self, address: str, timeout_s: float, on_lost: Callable[[str], None],
                 poll_s: float = 2.0):
        self._address = address
        self._client = reverb.Client(address)
        self._timeout_s = timeout_s
        self._on_lost = on_lost
        self._poll_s = poll_s
        self._last_ok = time.monotonic()
        self.outages = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='reverb-watchdog', daemon=True)

    def start(self) -> 'ServerWatchdog':
        self._thread.start()
        logging.info('watching the Reverb server at %s (%.0f s without an answer ends the role)',
                     self._address, self._timeout_s)
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            if answers(self._client):
                self._last_ok = time.monotonic()
                continue
            self.outages += 1
            if time.monotonic() - self._last_ok > self._timeout_s:
                self._on_lost(f'the Reverb server at {self._address} has not answered for '
                              f'{self._timeout_s:.0f} s')
                return
