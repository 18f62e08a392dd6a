"""Waiting with a deadline instead of a blind sleep: for a stop event, for a condition, for a
condition variable, and the deadline itself for waits that block in a call (a socket read)."""

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


class Deadline:
    """A point ``timeout`` seconds from now on the monotonic clock, for waits that cannot be a
    polled predicate (a socket read, a condition variable): ``left()`` is what remains."""

    __slots__ = ("at",)

    def __init__(self, timeout: float) -> None:
        self.at = time.monotonic() + timeout

    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.at


def wait_on(
    cond: threading.Condition, predicate: Callable[[], bool], timeout: float, recheck_s: float
) -> bool:
    """With ``cond`` held, wait until ``predicate`` holds: woken by ``cond.notify`` and at least
    every ``recheck_s`` seconds (for state that changes without a notify); whether it held by
    ``timeout``."""
    deadline = Deadline(timeout)
    with cond:
        while not predicate():
            left = deadline.left()
            if left <= 0:
                return False
            cond.wait(min(left, recheck_s))
    return True
