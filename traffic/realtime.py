"""The real-time host's event loop: one RoCEv2 endpoint + rate agent on a raw socket.

:class:`RealTimeHost` drives the same :class:`~icefabric.traffic.endpoint.Endpoint` and
:class:`~icefabric.traffic.agent.Agent` the virtual-time engine drives, clocked by
``time.monotonic`` and wired to an AF_PACKET socket; caps arrive from the agent channel's
thread. ``icefabric-host`` (:mod:`icefabric.traffic.host`) builds one from its options.
"""

from __future__ import annotations

import logging
import queue
import select
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from icefabric.control.flowkey import FlowKey
from icefabric.traffic.endpoint import Endpoint

log = logging.getLogger("icefabric.traffic.host")

RX_BATCH = 64
REPORT_EVERY_S = 1.0
# A message to this host begun and then silent this long lost its last packet (the sender paces
# its packets at most a few ms apart): a receiver waiting for it (--expect) stops instead of
# waiting for ever, and fails.
STALL_S = 10.0
PACKET_OUTGOING = 4


def fmt_bps(bps: float) -> str:
    """``4.98 Mbit/s``."""
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= div:
            return f"{bps / div:.3g} {unit}"
    return f"{bps:.3g} bit/s"


class RealTimeHost:
    """The host's event loop: socket in, endpoint, agent, socket out, agent channel."""

    def __init__(
        self,
        endpoint: Endpoint,
        sock: socket.socket,
        *,
        controller: Any = None,
        expect_messages: int = 0,
    ) -> None:
        self.endpoint = endpoint
        self.agent = endpoint.agent
        self.sock = sock
        self.controller = controller
        self.expect_messages = expect_messages
        self.messages: list[tuple[str, int, int, float]] = []  # (src ip, tag, bytes, us)
        self.stop = threading.Event()
        self.caps: queue.SimpleQueue[dict[FlowKey, float]] = queue.SimpleQueue()
        self.starts: queue.SimpleQueue[tuple[tuple[str, float], ...]] = queue.SimpleQueue()
        self.send_errors = 0
        self._t0 = time.monotonic()
        self.t0_unix = time.time()  # the wall clock at now_us() == 0 (to line hosts up)
        self._flows: dict[str, FlowKey] = {}  # schedule flow id -> key
        self.executor: Any = None  # a WorkloadExecutor running this host's share, if any
        self.cap_applied: dict[FlowKey, float] = {}  # the last cap the controller set per flow
        self.posted_bytes: dict[FlowKey, int] = {}  # message bytes posted per flow
        self._caps_cv = threading.Condition()
        self._cap_keys: set[FlowKey] = set()  # flows the controller has capped so far
        self.short_messages = 0  # messages that completed with bytes missing
        self.cut_short: dict[FlowKey, int] = {}  # messages whose end never came: bytes received
        endpoint.on_message = self._on_message

    def now_us(self) -> float:
        """Microseconds since the host started."""
        return (time.monotonic() - self._t0) * 1e6

    def on_caps(self, caps: dict[FlowKey, float]) -> None:
        """AgentClient's callback (its thread): hand the cap set to the loop."""
        self.caps.put(caps)
        with self._caps_cv:
            self._cap_keys |= set(caps)
            self._caps_cv.notify_all()

    def on_starts(self, starts: tuple[tuple[str, float], ...]) -> None:
        """AgentClient's callback for the start table (after ``on_caps``): to the loop."""
        self.starts.put(starts)

    def wait_for_cap(self, keys: Sequence[FlowKey], timeout_s: float) -> bool:
        """Wait until the controller sent a cap for one of ``keys`` (it has taken their report
        and installed their path), or ``timeout_s``; whether it did."""
        with self._caps_cv:
            return (
                self._caps_cv.wait_for(
                    lambda: bool(self._cap_keys & set(keys)) or self.stop.is_set(), timeout_s
                )
                and not self.stop.is_set()
            )

    def open_flow(self, dst_ip: str, *, job: str = "", flow_id: str = "") -> FlowKey:
        """Open (and report) the QP of ``flow_id`` now, as a CCL connects its QPs at init."""
        key = self._flows.get(flow_id) if flow_id else None
        if key is None:
            key = self.endpoint.open_flow(dst_ip, job=job, flow_id=flow_id)
            if flow_id:
                self._flows[flow_id] = key
            self._report()
        return key

    def post(
        self, dst_ip: str, nbytes: int, tag: int, *, job: str = "", flow_id: str = ""
    ) -> FlowKey:
        """Queue a message to ``dst_ip`` (one flow per flow id; a new one per call without)."""
        key = self.open_flow(dst_ip, job=job, flow_id=flow_id)
        self.endpoint.post_send(key, nbytes, tag, now_us=self.now_us())
        self.posted_bytes[key] = self.posted_bytes.get(key, 0) + nbytes
        return key

    def _on_message(self, key: FlowKey, tag: int, nbytes: int, now_us: float) -> None:
        self.messages.append((key.src_ip, tag, nbytes, now_us))
        log.info("message %d from %s: %d bytes at %.0f us", tag, key.src_ip, nbytes, now_us)
        if self.executor is not None:
            self.executor.on_message(tag, now_us)

    def _report(self) -> None:
        if self.controller is not None:
            self.controller.report_flows(self.agent.flow_reports())

    def done(self) -> bool:
        """Own messages all sent and every expected message arrived."""
        if self.endpoint.backlog_bytes() > 0:
            return False
        if self.executor is not None and not self.executor.done:
            return False
        return len(self.messages) >= self.expect_messages

    def give_up_stalled(self, now_us: float) -> bool:
        """While this host waits for ``--expect`` messages: whether one begun here has been
        silent for STALL_S (its last packet lost), recorded in ``cut_short``."""
        if not self.expect_messages or self.executor is not None or self.done():
            return False
        for key, (nbytes, last_us) in self.endpoint.partial_messages().items():
            if last_us is not None and now_us - last_us >= STALL_S * 1e6:
                self.cut_short[key] = nbytes
        return bool(self.cut_short)

    def run(self, *, duration_s: float | None = None, linger_s: float = 0.2) -> None:
        """Run until done (then ``linger_s`` more for late CNPs/feedback), ``duration_s`` or stop."""
        ep = self.endpoint
        sock = self.sock
        sock.setblocking(False)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        done_at: float | None = None
        next_report = time.monotonic() + REPORT_EVERY_S
        if self.executor is not None:
            self.executor.start(self.now_us())
        while not self.stop.is_set():
            wall = time.monotonic()
            if deadline is not None and wall >= deadline:
                break
            if done_at is None and self.done():
                done_at = wall
            if done_at is not None and wall - done_at >= linger_s:
                break
            while not self.caps.empty():
                caps = self.caps.get()
                self.agent.apply_caps(caps)
                for key, bps in caps.items():
                    if key in self.agent.flows and isinstance(bps, int | float) and bps > 0:
                        self.cap_applied[key] = float(bps)
            while not self.starts.empty():
                self.agent.apply_starts(self.starts.get())
            now = self.now_us()
            t = self.agent.next_timer_us()
            if t is not None and t <= now:
                self.agent.on_timer(now)
            ep.repace(now)  # rates the agent changed (caps, timers, feedback) act at once
            for frame in ep.poll(now):
                self._send(frame)
            if wall >= next_report:
                next_report = wall + REPORT_EVERY_S
                self._report()
                if self.give_up_stalled(self.now_us()):
                    log.warning("a message stopped arriving before its last packet: giving up")
                    break
            wait = 0.01
            nxt = ep.next_send_us()
            if nxt is not None:
                wait = min(wait, max(0.0, (nxt - self.now_us()) / 1e6))
            t = self.agent.next_timer_us()
            if t is not None:
                wait = min(wait, max(0.0, (t - self.now_us()) / 1e6))
            readable, _, _ = select.select([sock], [], [], wait)
            if readable:
                self._receive_batch()

    def _receive_batch(self) -> None:
        for _ in range(RX_BATCH):
            try:
                data, addr = self.sock.recvfrom(65535)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("receive failed: %s", exc)
                return
            if isinstance(addr, tuple) and len(addr) > 2 and addr[2] == PACKET_OUTGOING:
                continue  # our own transmission (kernels without PACKET_IGNORE_OUTGOING)
            for reply in self.endpoint.receive(self.now_us(), data):
                self._send(reply)

    def _send(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
        except BlockingIOError:
            select.select([], [self.sock], [], 0.01)
            try:
                self.sock.send(frame)
            except OSError:
                self.send_errors += 1
        except OSError as exc:
            self.send_errors += 1
            log.warning("send failed: %s", exc)

    def summary_lines(
        self,
        host_names: dict[str, str] | None = None,
        switch_names: dict[int, str] | None = None,
        rate_note: str = "",
    ) -> list[str]:
        """One iperf-like line per flow sent and per flow received (see the module docstring)."""
        hosts = host_names or {}
        sws = switch_names or {}
        me = self.agent.host
        lines = []
        for key, st in sorted(self.endpoint.tx_stats().items(), key=lambda kv: kv[0].dst_qp):
            peer = hosts.get(key.dst_ip, key.dst_ip)
            secs = _span_s(st.first_tx_us, st.last_tx_us)
            rate = st.bytes_sent * 8 / secs if secs > 0 else 0.0
            cap = self.cap_applied.get(key)
            path = ">".join(sws.get(i, str(i)) for i in st.path_switches) or "- (no INT feedback)"
            left = self.endpoint.backlog_bytes(key)
            lines.append(
                f"{me} -> {peer} qp {key.dst_qp:#x}: sent {self.posted_bytes.get(key, 0)} bytes "
                f"({st.packets_sent} packets, {st.bytes_sent} on the wire) in {secs:.3f} s, "
                f"{fmt_bps(rate)}"
                f"{rate_note}, cap {fmt_bps(cap) + ' applied' if cap else 'none'}, path {path}"
                + (f", {left} bytes NOT SENT" if left else "")
            )
        for key, st in sorted(self.endpoint.rx_stats().items(), key=lambda kv: kv[0].dst_qp):
            peer = hosts.get(key.src_ip, key.src_ip)
            secs = _span_s(st.first_rx_us, st.last_rx_us)
            total = st.packets_received + st.psn_gap_losses
            pct = 100.0 * st.psn_gap_losses / total if total else 0.0
            cut = key in self.cut_short
            verdict = "complete" if st.psn_gap_losses == 0 and not cut else "INCOMPLETE"
            lines.append(
                f"{me} <- {peer} qp {key.dst_qp:#x}: received {st.bytes_received} bytes "
                f"({st.packets_received} of {total} packets) in {secs:.3f} s, goodput "
                f"{fmt_bps(st.goodput_bps())}, lost {st.psn_gap_losses} ({pct:.1f} %), "
                f"{st.messages_received} message(s) {verdict}"
                + (
                    f", 1 cut short ({self.cut_short[key]} bytes, its last packet never came)"
                    if cut
                    else ""
                )
            )
        return lines

    def lost_packets(self) -> int:
        """Packets missing from the flows sent to this host (PSN gaps)."""
        return sum(st.psn_gap_losses for st in self.endpoint.rx_stats().values())

    def stats(self) -> dict[str, Any]:
        """Everything the host measured, as plain data."""
        ep = self.endpoint
        out: dict[str, Any] = {
            "host": self.agent.host,
            "ip": self.agent.host_ip,
            "kind": self.agent.kind,
            "elapsed_us": self.now_us(),
            "clock_origin_unix": self.t0_unix,
            "tx": [s.to_dict() for s in ep.tx_stats().values()],
            "rx": [s.to_dict() for s in ep.rx_stats().values()],
            "messages": [
                {"src_ip": ip, "tag": tag, "bytes": n, "at_us": t}
                for ip, tag, n, t in self.messages
            ],
            "rates_bps": {str(k.dst_qp): self.agent.rate_bps(k) for k in self.agent.flows},
            "counters": asdict(ep.counters),
            "agent": asdict(self.agent.stats),
            "send_errors": self.send_errors,
        }
        if self.executor is not None:
            out["posted_us"] = {str(k): v for k, v in self.executor.posted_us.items()}
            out["arrived_us"] = {str(k): v for k, v in self.executor.arrived_us.items()}
        return out


def outcome(host: RealTimeHost, *, scheduled: bool) -> tuple[int, str | None]:
    """The exit code of a finished run and why it is not 0.

    1 when a message sent here stopped before its last packet (``cut_short``), when the work
    was not done, or (``--flow``/``--expect`` work) when a message sent here
    arrived with packets missing: it did not arrive whole. Schedule runs are experiments, whose
    losses are measured and reported rather than failed on."""
    if host.cut_short:
        return 1, (
            f"a message stopped arriving before its last packet ({STALL_S:g} s without one): "
            + ", ".join(
                f"{n} bytes from {k.src_ip}"
                for k, n in sorted(host.cut_short.items(), key=lambda kv: kv[0].dst_qp)
            )
        )
    if not host.done():
        return 1, "stopped before its work was done"
    lost = host.lost_packets()
    if not scheduled and lost:
        return 1, f"{lost} packet(s) lost: a message arrived incomplete"
    return 0, None


def _span_s(first_us: float | None, last_us: float | None) -> float:
    if first_us is None or last_us is None:
        return 0.0
    return max(0.0, (last_us - first_us) / 1e6)
