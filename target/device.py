"""The in-process switch: BMv2 simple_switch semantics around a compiled v1model Pipeline.

Ingress -> (clone I2E, digests, resubmit, multicast, drop, unicast) -> per-port strict-priority
FIFO queues (`priority_queues`, selected by standard_metadata.priority, a clone's by its
session's class of service) with a drain rate and a capacity -> egress -> (clone E2E, drop,
recirculate, output).  Two ways to run it: deterministic (`inject` + `run_until_idle`, usually
with a ManualClock) and real time (`start()` runs one scheduler thread; ports call `inject`
from their receive threads).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from icefabric.target.queues import Queued, TrafficManager
from icefabric.target.runtime.clock import Clock

DROP_PORT = 511
MAX_PASSES = 32  # resubmit/recirculate/clone passes allowed per received packet
MAX_PACKET_BYTES = 65535

NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)

Sender = Callable[[bytes], None]


@dataclass(frozen=True, slots=True)
class Replica:
    """One copy made by the replication engine: egress port and egress_rid (instance)."""

    egress_port: int
    instance: int = 0


@dataclass(frozen=True, slots=True)
class CloneSession:
    """A clone (mirror) session: replicas, class of service, truncation (0 = whole packet)."""

    replicas: tuple[Replica, ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0


@dataclass(slots=True)
class _Arrival:
    port: int
    data: bytes
    instance_type: int = NORMAL
    preserved: dict[str, int] | None = None
    passes: int = 0


def _preserved(result: Any, field_list: int | None) -> dict[str, int] | None:
    """Fields of `field_list` from an Ingress/EgressResult (or its ctx); None if none."""
    if field_list is None:
        return None
    for owner in (result, getattr(result, "ctx", None)):
        for name in ("preserved_fields", "preserved"):
            fn = getattr(owner, name, None)
            if callable(fn):
                return dict(fn(field_list))
    return {}


class Device:
    """One switch: a pipeline, ports, a traffic manager and a packet replication engine."""

    def __init__(
        self,
        *,
        device_id: int = 0,
        cpu_port: int | None = None,
        clock: Clock | None = None,
        log: logging.Logger | None = None,
        priority_queues: int = 1,
    ) -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.clock = clock or Clock()
        self.log = log or logging.getLogger("icefabric.target.device")
        self.pipeline: Any = None
        self.program: Any = None
        self.lock = threading.RLock()  # held while a packet is processed / state replaced
        self.mcast_groups: dict[int, tuple[Replica, ...]] = {}
        self.clone_sessions: dict[int, CloneSession] = {}
        self.drops: Tally[str] = Tally()
        self.rx_packets: Tally[int] = Tally()
        self.tx_packets: Tally[int] = Tally()
        self.max_packet_bytes = MAX_PACKET_BYTES
        self.collect_limit = 100_000  # packets kept for collect(); 0 when only real ports count
        self._arrivals: deque[_Arrival] = deque()
        self.tm = TrafficManager(priority_queues)
        self._prio_slot: int | None = None  # standard_metadata.priority of the pipeline
        self._collected: deque[tuple[int, bytes]] = deque()
        self._senders: dict[int, Sender] = {}
        self.packet_in_handlers: list[Sender] = []
        self.log_messages: deque[str] = deque(maxlen=1000)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._running = False
        self._waiting = False

    # --- program ---------------------------------------------------------------------------
    def make_pipeline(self, program: Any) -> Any:
        """A fresh Pipeline of `program` wired to this device's clock and log (not installed)."""
        from icefabric.target.compiler.pipeline import PipelineEnv

        env = PipelineEnv(clock=self.clock, log=self.log, log_msg=self._log_msg)
        return program.instantiate(env)

    def set_program(self, program: Any) -> None:
        """Instantiate a fresh Pipeline of `program` and reset forwarding state."""
        self.set_pipeline(self.make_pipeline(program), program=program)

    def set_pipeline(self, pipeline: Any, *, program: Any = None, keep_pre: bool = False) -> None:
        """Install a pipeline; queued packets are dropped, the PRE is cleared unless `keep_pre`."""
        with self.lock:
            self.pipeline = pipeline
            sm = getattr(
                getattr(getattr(pipeline, "program", None), "compiled", None), "sm_slots", {}
            )
            self._prio_slot = sm.get("priority")
            if program is not None:
                self.program = program
            if not keep_pre:
                self.mcast_groups.clear()
                self.clone_sessions.clear()
            self._arrivals.clear()
            self.tm.clear()

    def _log_msg(self, text: str) -> None:
        self.log_messages.append(text)
        self.log.info("log_msg: %s", text)

    # --- replication engine ----------------------------------------------------------------
    def set_multicast_group(
        self, group_id: int, replicas: Sequence[Replica | tuple[int, int]]
    ) -> None:
        """Create or replace multicast group `group_id` (copies leave in this order)."""
        if not 0 < group_id < 1 << 16:
            raise ValueError(f"multicast group id {group_id} not in [1, 65535]")
        self.mcast_groups[group_id] = tuple(
            r if isinstance(r, Replica) else Replica(*r) for r in replicas
        )

    def delete_multicast_group(self, group_id: int) -> None:
        """Remove a multicast group (KeyError if absent)."""
        del self.mcast_groups[group_id]

    def set_clone_session(self, session_id: int, session: CloneSession) -> None:
        """Create or replace clone session `session_id`."""
        if not 0 < session_id < 1 << 16:
            raise ValueError(f"clone session id {session_id} not in [1, 65535]")
        self.clone_sessions[session_id] = session

    def delete_clone_session(self, session_id: int) -> None:
        """Remove a clone session (KeyError if absent)."""
        del self.clone_sessions[session_id]

    # --- queues ----------------------------------------------------------------------------
    @property
    def priority_queues(self) -> int:
        """Strict-priority queues per egress port (simple_switch --priority-queues)."""
        return self.tm.priority_queues

    def set_priority_queues(self, n: int) -> None:
        """Use `n` (1..8) queues per port; queued packets are dropped, rates/depths reset."""
        with self.lock:
            self.tm.clear()
            self.tm = TrafficManager(n)

    def set_queue_rate(
        self,
        port: int | None,
        pps: int | None = None,
        bps: int | None = None,
        *,
        priority: int | None = None,
    ) -> None:
        """Drain rate of one port's queues (all ports when None), each priority queue its own
        (only `priority`'s when given), as BMv2 set_queue_rate; None/None = unlimited."""
        for q in self.tm.targets(port, priority):
            q.pps, q.bps = pps, bps

    def set_queue_depth(
        self, port: int | None, packets: int, *, priority: int | None = None
    ) -> None:
        """Capacity in packets of each of one port's queues (all ports when None; only
        `priority`'s when given), as BMv2 set_queue_depth; tail drop beyond."""
        if packets < 1:
            raise ValueError(f"queue depth must be >= 1, got {packets}")
        for q in self.tm.targets(port, priority):
            q.capacity = packets

    def queue_depth(self, port: int, priority: int | None = None) -> int:
        """Packets waiting in a port's queues now (only the `priority` queue when given)."""
        return self.tm.depth(port, priority)

    # --- packet I/O ------------------------------------------------------------------------
    def attach_port(self, port: int, send: Sender) -> None:
        """Send packets leaving `port` to `send` instead of the collect() buffer."""
        self._senders[port] = send

    def detach_port(self, port: int) -> None:
        """Stop sending to `port` (packets leaving it are dropped as unknown_port)."""
        self._senders.pop(port, None)

    def inject(self, port: int, data: bytes) -> None:
        """A packet arrives on `port`."""
        self.rx_packets[port] += 1
        self._arrivals.append(_Arrival(port, bytes(data)))
        if self._waiting:  # only wake the scheduler when it sleeps (see _loop)
            with self._wake:
                self._wake.notify()

    def packet_out(self, data_with_packet_out_header: bytes) -> None:
        """A PacketOut from the controller: enters ingress on the CPU port."""
        if self.cpu_port is None:
            raise ValueError("packet_out: this device has no CPU port (cpu_port=None)")
        self.inject(self.cpu_port, data_with_packet_out_header)

    def collect(self, port: int | None = None) -> list[tuple[int, bytes]]:
        """Remove and return (port, bytes) that left the switch (only `port` if given)."""
        with self.lock:
            out: list[tuple[int, bytes]] = []
            if port is None:
                out.extend(self._collected)
                self._collected.clear()
                return out
            keep: deque[tuple[int, bytes]] = deque()
            for item in self._collected:
                (out if item[0] == port else keep).append(item)
            self._collected = keep
            return out

    def backlog(self) -> int:
        """Packets waiting for ingress processing."""
        return len(self._arrivals)

    def drop_counts(self) -> dict[str, int]:
        """Packets dropped so far, by reason."""
        return dict(self.drops)

    # --- processing ------------------------------------------------------------------------
    def run_until_idle(self) -> None:
        """Process every arrival and send every queued packet whose time has come."""
        while True:
            with self.lock:
                progressed = False
                if self._arrivals:
                    self._ingress(self._arrivals.popleft())
                    progressed = True
                if self._drain_ready():
                    progressed = True
            if not progressed:
                return

    def next_departure_us(self) -> int | None:
        """Earliest time a queued packet may leave (None when all queues are empty)."""
        return self.tm.next_departure_us()

    def _drain_ready(self) -> bool:
        """Send queued packets whose time has come, oldest ready time (then FIFO) first."""
        now = self.clock.now_us()
        progressed = False
        pop = self.tm.pop_ready
        while True:
            got = pop(now)
            if got is None:
                return progressed
            self._egress(got[0], now, got[1])
            progressed = True

    def _drop(self, reason: str) -> None:
        self.drops[reason] += 1

    def _ingress(self, arr: _Arrival) -> None:
        pipeline = self.pipeline
        if pipeline is None:
            self._drop("no_pipeline")
            return
        if len(arr.data) > self.max_packet_bytes:
            self._drop("oversized")
            return
        if arr.passes > MAX_PASSES:
            self._drop("loop_limit")
            return
        try:
            res = pipeline.ingress(
                arr.data,
                arr.port,
                instance_type=arr.instance_type,
                preserved=arr.preserved,
                packet_length=len(arr.data),
            )
        except Exception:
            self.log.exception("ingress failed on port %d (%d bytes)", arr.port, len(arr.data))
            self._drop("pipeline_error")
            return
        length = len(arr.data)
        if res.clone is not None:
            self._clone_i2e(arr, res, length)
        for name, values in res.digests:
            digest = pipeline.digests.get(name)
            if digest is None:
                self.log.error("digest %s is not declared by the program", name)
            else:
                digest.push(values)
        if res.resubmit is not None:
            pre = _preserved(res, res.resubmit)
            self._arrivals.append(_Arrival(arr.port, arr.data, RESUBMIT, pre, arr.passes + 1))
            return
        truncate = getattr(res, "truncate", None)
        if res.mcast_grp:
            self._multicast(
                res.ctx, res.mcast_grp, length, None, truncate, arr.passes, copy_first=False
            )
            return
        if res.drop or res.egress_spec == DROP_PORT:
            # BMv2 does not drop on a parser error; a program that drops such a packet is counted apart
            self._drop("parser_error" if getattr(res, "parser_error", 0) else "ingress_drop")
            return
        slot = self._prio_slot
        prio = res.ctx.S[slot] if slot is not None else 0
        self._enqueue(res.ctx, res.egress_spec, 0, NORMAL, length, None, truncate, arr.passes, prio)

    def _clone_i2e(self, arr: _Arrival, res: Any, length: int) -> None:
        session_id, field_list = _clone_parts(res.clone)
        session = self.clone_sessions.get(session_id)
        if session is None:
            self._drop("clone_session_missing")
            return
        parse = getattr(self.pipeline, "parse", None)
        if parse is None:
            self.log.error(
                "I2E clone needs Pipeline.parse(); clone to session %d skipped", session_id
            )
            self._drop("clone_unsupported")
            return
        pre = _preserved(res, field_list)
        data = arr.data
        trunc = session.packet_length_bytes or None
        for rep in session.replicas:
            try:
                ctx = parse(
                    data, arr.port, instance_type=INGRESS_CLONE, preserved=pre, packet_length=length
                )
            except Exception:
                self.log.exception("parse of I2E clone failed")
                self._drop("pipeline_error")
                return
            self._enqueue(
                ctx,
                rep.egress_port,
                rep.instance,
                INGRESS_CLONE,
                length,
                pre,
                trunc,
                arr.passes + 1,
                session.class_of_service,
            )

    def _multicast(
        self,
        ctx: Any,
        group: int,
        length: int,
        preserved: dict[str, int] | None,
        truncate: int | None,
        passes: int,
        *,
        copy_first: bool,
        instance_type: int = REPLICATION,
    ) -> None:
        replicas = self.mcast_groups.get(group)
        if not replicas:
            self._drop("multicast_group_empty")
            return
        last = len(replicas) - 1
        slot = self._prio_slot
        prio = ctx.S[slot] if slot is not None else 0  # copies keep the metadata, as BMv2
        for i, rep in enumerate(replicas):
            c = ctx if (i == last and not copy_first) else ctx.copy()
            self._enqueue(
                c,
                rep.egress_port,
                rep.instance,
                instance_type,
                length,
                preserved,
                truncate,
                passes,
                prio,
            )

    def _enqueue(
        self,
        ctx: Any,
        port: int,
        rid: int,
        instance_type: int,
        length: int,
        preserved: dict[str, int] | None,
        truncate: int | None,
        passes: int,
        priority: int = 0,
    ) -> None:
        """Queue a packet for egress at ``priority``: a clone's is its session's class of
        service (its metadata is reset, as BMv2's; P4Runtime's CloneSessionEntry.class_of_service
        chooses the copies' queue, which BMv2's PI refuses: there clones use queue 0)."""
        item = Queued(
            ctx,
            port,
            rid,
            instance_type,
            self.clock.now_us(),
            0,
            length,
            preserved,
            truncate,
            passes,
            0,
            priority,
        )
        if priority >= self.tm.priority_queues:
            self.log.error(
                "priority %d out of range (%d queue(s) per port): packet to port %d dropped",
                priority,
                self.tm.priority_queues,
                port,
            )
            self._drop("priority_out_of_range")
            return
        if not self.tm.enqueue(item):
            self._drop("queue_full")

    def _egress(self, item: Queued, now: int, deq_depth: int) -> None:
        # qid defaults to 0 in Pipeline.egress: pass it only when it is not (duck-typed pipelines)
        extra = {"qid": item.priority} if item.priority else {}
        try:
            res = self.pipeline.egress(
                item.ctx,
                egress_port=item.egress_port,
                egress_rid=item.egress_rid,
                instance_type=item.instance_type,
                enq_timestamp=item.enq_ts,
                enq_qdepth=item.enq_qdepth,
                deq_timedelta=now - item.enq_ts,
                deq_qdepth=deq_depth,
                preserved=item.preserved,
                **extra,
            )
        except Exception:
            self.log.exception("egress failed on port %d", item.egress_port)
            self._drop("pipeline_error")
            return
        if res.clone is not None:
            self._clone_e2e(item, res)
        if res.drop or res.data is None:
            self.tm.charge_last(0)  # nothing left the port
            self._drop("egress_drop")
            return
        data = res.data
        truncate = getattr(res, "truncate", None) or item.truncate
        if truncate and truncate < len(data):
            data = data[:truncate]
        if res.recirculate is not None:
            self.tm.charge_last(0)  # back to ingress, not onto the wire
            pre = _preserved(res, res.recirculate)
            self._arrivals.append(_Arrival(item.egress_port, data, RECIRC, pre, item.passes + 1))
            return
        if len(data) != item.packet_length:  # egress added headers (INT) or cut a clone
            self.tm.charge_last(len(data))
        self._output(item.egress_port, data)

    def _clone_e2e(self, item: Queued, res: Any) -> None:
        session_id, field_list = _clone_parts(res.clone)
        session = self.clone_sessions.get(session_id)
        if session is None:
            self._drop("clone_session_missing")
            return
        pre = _preserved(res, field_list)
        ctx = getattr(res, "clone_ctx", None)
        if ctx is None:
            parse = getattr(self.pipeline, "parse", None)
            if parse is None or res.data is None:
                self.log.error("E2E clone needs EgressResult.clone_ctx or Pipeline.parse()")
                self._drop("clone_unsupported")
                return
            ctx = parse(
                res.data,
                item.egress_port,
                instance_type=EGRESS_CLONE,
                preserved=pre,
                packet_length=len(res.data),
            )
        trunc = session.packet_length_bytes or None
        for i, rep in enumerate(session.replicas):
            c = ctx if i == len(session.replicas) - 1 else ctx.copy()
            self._enqueue(
                c,
                rep.egress_port,
                rep.instance,
                EGRESS_CLONE,
                item.packet_length,
                pre,
                trunc,
                item.passes + 1,
                session.class_of_service,
            )

    def _output(self, port: int, data: bytes) -> None:
        self.tx_packets[port] += 1
        if port == self.cpu_port and self.packet_in_handlers:
            for handler in list(self.packet_in_handlers):
                try:
                    handler(data)
                except Exception:
                    self.log.exception("packet-in handler failed")
            return
        send = self._senders.get(port)
        if send is not None:
            try:
                send(data)
            except OSError as exc:
                self.log.warning("send on port %d failed: %s", port, exc)
                self._drop("tx_error")
            return
        if (self._senders and port != self.cpu_port) or len(self._collected) >= self.collect_limit:
            self._drop("unknown_port")  # nothing attached, and collect() is not being used
            return
        self._collected.append((port, data))

    # --- real time ---------------------------------------------------------------------------
    def start(self) -> None:
        """Run the scheduler thread (real-time mode)."""
        if self._thread is not None:
            return
        self._running = True
        self._thread = threading.Thread(
            target=self._loop, name=f"ice-switch-{self.device_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the scheduler thread."""
        self._running = False
        with self._wake:
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while self._running:
            try:
                self.run_until_idle()
            except Exception:  # never let the scheduler die
                self.log.exception("scheduler error")
            with self._wake:
                self._waiting = True  # set before the check: inject() sees it or we see its packet
                if self._arrivals or not self._running:
                    self._waiting = False
                    continue
                nxt = self.next_departure_us()
                timeout = 0.5 if nxt is None else max(0.0, (nxt - self.clock.now_us()) / 1e6)
                self._wake.wait(timeout)
                self._waiting = False


def _clone_parts(clone: Any) -> tuple[int, int | None]:
    """(session id, field list id) of a CloneRequest or a plain tuple."""
    if isinstance(clone, tuple):
        return int(clone[0]), clone[1] if len(clone) > 1 else None
    return int(clone.session_id), getattr(
        clone, "field_list_id", getattr(clone, "field_list", None)
    )
