"""Waiting with a deadline instead of a blind sleep: for a stop event, for a condition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

POLL_S = 0.2


def wait_until_stopped(stop: threading.Event, poll_s: float = POLL_S) -> None:
    """Return once ``stop`` is set, waking every ``poll_s`` seconds.

    A signal delivered to another thread only sets a flag, and a main thread blocked in an
    untimed wait would never run the Python handler that sets ``stop``.
    """
    while not stop.wait(poll_s):
        pass


def poll_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Call ``predicate`` every ``interval`` seconds until it holds; whether it held by
    ``timeout`` (it is asked once more at the deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
