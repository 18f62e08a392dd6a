"""Clocks for the embedded target: real monotonic time and a manual clock for tests."""

from __future__ import annotations

import threading
import time


class Clock:
    """Real time in microseconds since the clock was created (BMv2: time since switch start)."""

    def __init__(self) -> None:
        self._origin_ns = time.monotonic_ns()

    def now_us(self) -> int:
        """Return microseconds elapsed since the clock was created."""
        return (time.monotonic_ns() - self._origin_ns) // 1000


class ManualClock(Clock):
    """A clock that only moves when told to: deterministic timestamps for tests."""

    def __init__(self, start_us: int = 0) -> None:
        super().__init__()
        if start_us < 0:
            raise ValueError(f"ManualClock start_us must be >= 0, got {start_us}")
        self._now = start_us
        self._lock = threading.Lock()

    def now_us(self) -> int:
        """Return the current manual time in microseconds."""
        return self._now

    def advance(self, us: int) -> None:
        """Move the clock forward by `us` microseconds."""
        if us < 0:
            raise ValueError(f"ManualClock.advance: us must be >= 0, got {us}")
        with self._lock:
            self._now += us

    def set(self, us: int) -> None:
        """Set the clock to `us` microseconds; time never goes backwards."""
        with self._lock:
            if us < self._now:
                raise ValueError(f"ManualClock.set: {us} is before the current time {self._now}")
            self._now = us
