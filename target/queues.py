"""The traffic manager's egress queues: one FIFO per port with a drain rate and a capacity.

Like BMv2 with set_queue_rate / set_queue_depth: a packet may leave when the port's previous
packet's transmission slot (1/pps, or its size in bits / bps) is over; a full queue tail-drops.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DEPTH = 64  # packets, as BMv2's default queue depth


@dataclass(slots=True)
class Queued:
    """A packet waiting in an egress queue, with what egress needs to know about it."""

    ctx: Any
    egress_port: int
    egress_rid: int
    instance_type: int
    enq_ts: int
    enq_qdepth: int
    packet_length: int
    preserved: dict[str, int] | None
    truncate: int | None
    passes: int
    seq: int = 0


@dataclass(slots=True, eq=False)
class PortQueue:
    """One port's FIFO."""

    packets: deque[Queued] = field(default_factory=deque)
    pps: int | None = None
    bps: int | None = None
    capacity: int = DEFAULT_DEPTH
    next_free_us: int = 0

    def ready_time(self) -> int:
        """When the head packet may leave."""
        return max(self.next_free_us, self.packets[0].enq_ts)


class TrafficManager:
    """Per-port egress queues; the device enqueues after ingress and pops ready packets."""

    def __init__(self) -> None:
        self.queues: dict[int, PortQueue] = {}
        self.default = PortQueue()
        self._busy: set[PortQueue] = set()
        self._seq = 0

    def queue(self, port: int) -> PortQueue:
        """The queue of `port` (created with the default rate and depth)."""
        q = self.queues.get(port)
        if q is None:
            d = self.default
            q = self.queues[port] = PortQueue(pps=d.pps, bps=d.bps, capacity=d.capacity)
        return q

    def targets(self, port: int | None) -> list[PortQueue]:
        """One port's queue, or every queue and the default when `port` is None."""
        if port is None:
            return [self.default, *self.queues.values()]
        return [self.queue(port)]

    def clear(self) -> None:
        """Drop every queued packet."""
        for q in self.queues.values():
            q.packets.clear()
        self._busy.clear()

    def enqueue(self, item: Queued) -> bool:
        """Append to the port's queue (sets enq_qdepth); False when the queue is full."""
        q = self.queue(item.egress_port)
        depth = len(q.packets)
        if depth >= q.capacity:
            return False
        item.enq_qdepth = depth
        self._seq += 1
        item.seq = self._seq
        q.packets.append(item)
        self._busy.add(q)
        return True

    def pop_ready(self, now: int) -> tuple[Queued, int] | None:
        """The packet that may leave now (earliest ready time, then FIFO) and deq_qdepth."""
        best: PortQueue | None = None
        best_key = (0, 0)
        for q in self._busy:
            t = q.ready_time()
            if t <= now:
                key = (t, q.packets[0].seq)
                if best is None or key < best_key:
                    best, best_key = q, key
        if best is None:
            return None
        item = best.packets.popleft()
        if not best.packets:
            self._busy.discard(best)
        gap = 0.0
        if best.pps:
            gap = 1e6 / best.pps
        if best.bps:
            gap = max(gap, item.packet_length * 8e6 / best.bps)
        best.next_free_us = best_key[0] + round(gap) if gap else best_key[0]
        return item, len(best.packets)

    def next_departure_us(self) -> int | None:
        """Earliest time a queued packet may leave (None when every queue is empty)."""
        times = [q.ready_time() for q in list(self._busy) if q.packets]
        return min(times) if times else None

    def depth(self, port: int) -> int:
        """Packets waiting in a port's queue now."""
        q = self.queues.get(port)
        return len(q.packets) if q else 0
