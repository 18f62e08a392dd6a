"""The traffic manager's egress queues: per port N strict-priority FIFOs with a rate and a capacity.

Like BMv2 simple_switch with `--priority-queues N` (N = 1 by default) and set_queue_rate /
set_queue_depth: `standard_metadata.priority` p picks the port's queue p (p >= N drops the
packet, as BMv2 does); among the queues of a port whose head may leave, the highest priority
goes first (strict priority).  Each queue has its own drain rate and capacity: a packet may
leave when its queue's previous packet's transmission slot (1/pps, or its size in bits / bps)
is over; a full queue tail-drops.  enq_qdepth/deq_qdepth are the depth of the packet's own
queue and qid is its priority, as BMv2 (simple_switch.cpp enqueue/egress_thread) reports them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DEPTH = 64  # packets, as BMv2's default queue depth
MAX_PRIORITY_QUEUES = 8  # standard_metadata.priority is bit<3>


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
    priority: int = 0


@dataclass(slots=True, eq=False)
class PortQueue:
    """One FIFO of a port (one per priority)."""

    packets: deque[Queued] = field(default_factory=deque)
    pps: int | None = None
    bps: int | None = None
    capacity: int = DEFAULT_DEPTH
    next_free_us: int = 0
    priority: int = 0

    def ready_time(self) -> int:
        """When the head packet may leave."""
        return max(self.next_free_us, self.packets[0].enq_ts)


class TrafficManager:
    """Per-port egress queues; the device enqueues after ingress and pops ready packets."""

    def __init__(self, priority_queues: int = 1) -> None:
        if not 1 <= priority_queues <= MAX_PRIORITY_QUEUES:
            raise ValueError(
                f"priority_queues must be in [1, {MAX_PRIORITY_QUEUES}], got {priority_queues}"
            )
        self.priority_queues = priority_queues
        self.ports: dict[int, list[PortQueue]] = {}  # port -> its queues, index = priority
        self.default = [PortQueue(priority=p) for p in range(priority_queues)]
        self._busy: set[PortQueue] = set()
        self._seq = 0
        self._last: tuple[PortQueue, int] | None = None  # queue and time of the last departure

    def port_queues(self, port: int) -> list[PortQueue]:
        """The queues of `port`, index = priority (created with the default rates and depths)."""
        qs = self.ports.get(port)
        if qs is None:
            qs = [
                PortQueue(pps=d.pps, bps=d.bps, capacity=d.capacity, priority=d.priority)
                for d in self.default
            ]
            self.ports[port] = qs
        return qs

    def queue(self, port: int, priority: int = 0) -> PortQueue:
        """The queue of `port` for `priority` (ValueError if there is no such queue)."""
        self._check_priority(priority)
        return self.port_queues(port)[priority]

    def _check_priority(self, priority: int) -> None:
        if not 0 <= priority < self.priority_queues:
            raise ValueError(
                f"priority {priority} out of range: this switch has {self.priority_queues} "
                f"queue(s) per port (priorities 0..{self.priority_queues - 1})"
            )

    def targets(self, port: int | None, priority: int | None = None) -> list[PortQueue]:
        """Queues to configure: one port's (or every port's and the default's when `port` is
        None), all priorities or only `priority`."""
        if priority is not None:
            self._check_priority(priority)
        groups = [self.default, *self.ports.values()] if port is None else [self.port_queues(port)]
        if priority is None:
            return [q for g in groups for q in g]
        return [g[priority] for g in groups]

    def clear(self) -> None:
        """Drop every queued packet."""
        for qs in self.ports.values():
            for q in qs:
                q.packets.clear()
        self._busy.clear()

    def enqueue(self, item: Queued) -> bool:
        """Append to the queue of the item's port and priority (sets enq_qdepth to that queue's
        depth, as BMv2); False when that queue is full or the priority has no queue."""
        qs = self.ports.get(item.egress_port) or self.port_queues(item.egress_port)
        prio = item.priority
        if prio >= self.priority_queues:
            return False
        q = qs[prio]
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
        """The packet that may leave now and deq_qdepth (its queue's depth after it left).

        Highest priority first, then earliest ready time, then FIFO: among a port's queues
        whose head may leave, the highest priority wins (strict priority, as BMv2)."""
        best: PortQueue | None = None
        best_key = (0, 0, 0)
        for q in self._busy:
            t = q.ready_time()
            if t <= now:
                key = (-q.priority, t, q.packets[0].seq)
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
        t = best_key[1]
        best.next_free_us = t + round(gap) if gap else t
        self._last = (best, t)
        return item, len(best.packets)

    def charge_last(self, nbytes: int) -> None:
        """The packet :meth:`pop_ready` returned last put ``nbytes`` on the wire (egress cut it,
        grew it or dropped it: 0): its transmission slot on a bit-rate queue follows."""
        if self._last is None:
            return
        q, t = self._last
        self._last = None
        if not q.bps:
            return
        gap = max(1e6 / q.pps if q.pps else 0.0, nbytes * 8e6 / q.bps)
        q.next_free_us = t + round(gap)

    def next_departure_us(self) -> int | None:
        """Earliest time a queued packet may leave (None when every queue is empty)."""
        times = [q.ready_time() for q in list(self._busy) if q.packets]
        return min(times) if times else None

    def depth(self, port: int, priority: int | None = None) -> int:
        """Packets waiting in a port's queues now (only the `priority` queue if given)."""
        qs = self.ports.get(port)
        if not qs:
            return 0
        if priority is not None:
            self._check_priority(priority)
            return len(qs[priority].packets)
        return sum(len(q.packets) for q in qs)
