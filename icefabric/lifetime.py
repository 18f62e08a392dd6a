"""A long-running command's main thread: wait for its stop event so signal handlers still run."""

from __future__ import annotations

import threading

POLL_S = 0.2


def wait_until_stopped(stop: threading.Event, poll_s: float = POLL_S) -> None:
    """Return once ``stop`` is set, waking every ``poll_s`` seconds.

    A signal delivered to another thread only sets a flag, and a main thread blocked in an
    untimed wait would never run the Python handler that sets ``stop``.
    """
    while not stop.wait(poll_s):
        pass
