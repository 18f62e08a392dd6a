"""Digest queues: messages the data plane sends to the controller."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence


class DigestType:
    """One digest type (P4Info name) with a bounded FIFO of member-value tuples."""

    def __init__(self, name: str, member_widths: Sequence[int], *, capacity: int = 4096) -> None:
        self.name = name
        self.member_widths = tuple(member_widths)
        self.capacity = capacity
        self._queue: deque[tuple[int, ...]] = deque()
        self._lock = threading.Lock()
        self.dropped = 0
        self.listeners: list[Callable[[DigestType], None]] = []

    def push(self, values: Sequence[int]) -> None:
        """Queue one message (values masked to the member widths); full queue drops it."""
        if len(values) != len(self.member_widths):
            raise ValueError(
                f"digest {self.name}: {len(values)} values for {len(self.member_widths)} members"
            )
        msg = tuple(v & ((1 << w) - 1) for v, w in zip(values, self.member_widths, strict=True))
        with self._lock:
            if len(self._queue) >= self.capacity:
                self.dropped += 1
                return
            self._queue.append(msg)
        for listener in list(self.listeners):
            listener(self)

    def pop(self, max_items: int | None = None) -> list[tuple[int, ...]]:
        """Remove and return up to `max_items` queued messages (all when None)."""
        with self._lock:
            n = len(self._queue) if max_items is None else min(max_items, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def __len__(self) -> int:
        return len(self._queue)
