"""A host's RoCEv2 sender and receiver, driven by the caller with times (no clock, no I/O).

Sender: :meth:`Endpoint.post_send` queues a message on a flow (a QP the :class:`Agent` opened);
:meth:`Endpoint.poll` returns the frames due at ``now_us``, each flow paced at the agent's rate
(``min(algorithm, cap)``) and all of them together at the NIC's line rate, flows served round
robin; :meth:`Endpoint.next_send_us` says when the next frame is due; :meth:`Endpoint.repace`
applies a rate the agent changed to the gap a flow is waiting out.  A message becomes
SEND_FIRST / MIDDLE / LAST_WITH_IMMEDIATE packets (SEND_ONLY_WITH_IMMEDIATE when it fits in
one) of at most ``mtu`` payload bytes; the 4-byte immediate carries the message's tag, so the
receiver knows which message completed without any side channel.

Receiver: :meth:`Endpoint.receive` takes any frame and returns the frames to send back (CNPs).
RoCEv2 data updates the flow's stats (bytes, first/last packet, PSN gaps as losses, CE marks) and
completes messages: ``on_message(flow_key, tag, nbytes, now_us)`` fires at each LAST/ONLY packet
(``nbytes`` = payload received, so a message with losses completes short and the losses show in
the stats; there is no retransmission).  A CE-marked packet is answered with a RoCEv2 CNP, at
most one per flow per ``cnp_interval_us`` (DCQCN's N: 50 us at 40 Gbit/s, scaled).  CNPs and ICE
feedback for local flows go to the agent.  Malformed frames are counted and dropped.

QP pairs are numbered alike on both ends (connection setup is not modelled): the receiver sends
a CNP to the data's QP number, and the sender finds its flow by (peer address, QP).
"""

from __future__ import annotations

import logging
import math
import struct
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from icefabric.control.flowkey import ROCE_UDP_PORT, FlowKey
from icefabric.traffic.agent import Agent
from icefabric.traffic.roce import (
    BTH_BYTES,
    ECN_CE,
    ETH_BYTES,
    FEEDBACK_PORT,
    HEADER_BYTES,
    ICRC_BYTES,
    IPV4_BYTES,
    OP_CNP,
    OP_SEND_FIRST,
    OP_SEND_MIDDLE,
    PSN_MOD,
    UDP_BYTES,
    FrameBuilder,
    MalformedFrame,
    RoceHeader,
    build_cnp,
    parse_feedback,
    parse_roce,
    udp_dport,
)

log = logging.getLogger(__name__)

OP_SEND_LAST_IMM = 0x03
OP_SEND_ONLY_IMM = 0x05
IMM_BYTES = 4
DEFAULT_MTU = 1024  # RoCE path MTU (payload bytes per packet)
SENT_RING = 1024  # send times remembered per flow, for feedback's sent_us
REORDER_WINDOW = 4096  # packets a reorder-tolerant receiver holds per flow (bounded state)
MAX_RX_FLOWS = 65_536  # receive flows kept per host (like the agent channel's flows per host)

MessageCallback = Callable[[FlowKey, int, int, float], None]


@dataclass(slots=True)
class FlowStats:
    """One flow's figures, on the sending host (tx side) or the receiving host (rx side)."""

    key: FlowKey
    bytes_sent: int = 0
    packets_sent: int = 0
    messages_posted: int = 0
    messages_sent: int = 0
    first_tx_us: float | None = None
    last_tx_us: float | None = None
    cnps_received: int = 0
    feedback_received: int = 0
    bytes_received: int = 0
    packets_received: int = 0
    messages_received: int = 0
    first_rx_us: float | None = None
    last_rx_us: float | None = None
    psn_gap_losses: int = 0
    out_of_order: int = 0
    ecn_marks: int = 0
    cnps_sent: int = 0
    # The path the last feedback reported: kind (PATH_KIND_*), tag and switch ids, first first.
    path_kind: int | None = None
    path_tag: int | None = None
    path_switches: tuple[int, ...] = ()

    def goodput_bps(self) -> float:
        """Payload bits received per second between the first and last packet (0 if < 2)."""
        if self.first_rx_us is None or self.last_rx_us is None:
            return 0.0
        span = self.last_rx_us - self.first_rx_us
        return self.bytes_received * 8e6 / span if span > 0 else 0.0

    def completion_us(self) -> float | None:
        """When the last packet arrived (a flow's completion once it has nothing left)."""
        return self.last_rx_us

    def to_dict(self) -> dict[str, object]:
        """Plain data (JSON)."""
        return {
            "key": self.key.to_dict(),
            "bytes_sent": self.bytes_sent,
            "packets_sent": self.packets_sent,
            "messages_posted": self.messages_posted,
            "messages_sent": self.messages_sent,
            "first_tx_us": self.first_tx_us,
            "last_tx_us": self.last_tx_us,
            "cnps_received": self.cnps_received,
            "feedback_received": self.feedback_received,
            "bytes_received": self.bytes_received,
            "packets_received": self.packets_received,
            "messages_received": self.messages_received,
            "first_rx_us": self.first_rx_us,
            "last_rx_us": self.last_rx_us,
            "psn_gap_losses": self.psn_gap_losses,
            "out_of_order": self.out_of_order,
            "ecn_marks": self.ecn_marks,
            "cnps_sent": self.cnps_sent,
            "path_kind": self.path_kind,
            "path_tag": self.path_tag,
            "path_switches": list(self.path_switches),
            "goodput_bps": self.goodput_bps(),
        }


@dataclass(slots=True)
class _Message:
    tag: int
    left: int
    first: bool = True


@dataclass(slots=True)
class _TxFlow:
    key: FlowKey
    builder: FrameBuilder
    stats: FlowStats
    queue: deque[_Message] = field(default_factory=deque)
    psn: int = 0
    next_tx_us: float = 0.0
    paced_rate_bps: float = 0.0  # the rate next_tx_us was paced at (0: not paced yet)
    # Send time of the last SENT_RING PSNs (feedback names its data packet by PSN).
    sent_psn: list[int] = field(default_factory=lambda: [-1] * SENT_RING)
    sent_at: list[float] = field(default_factory=lambda: [0.0] * SENT_RING)


@dataclass(slots=True)
class _RxFlow:
    stats: FlowStats
    expected_psn: int | None = None
    msg_bytes: int = 0
    last_cnp_us: float = float("-inf")
    # reorder-tolerant receiver: frames ahead of expected_psn, placed until the gap fills
    held: dict[int, bytes] = field(default_factory=dict)


@dataclass(slots=True)
class EndpointCounters:
    """Frames the endpoint dropped, by reason."""

    malformed_roce: int = 0
    malformed_feedback: int = 0
    feedback_unknown_flow: int = 0
    cnp_unknown_flow: int = 0
    not_for_us: int = 0
    other: int = 0
    rx_evicted: int = 0  # receive flows dropped (least recently heard) past MAX_RX_FLOWS


class Endpoint:
    """One host's sender and receiver (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        *,
        mac: str,
        gateway_mac: str,
        mtu: int = DEFAULT_MTU,
        cnp_interval_us: float = 50.0,
        link_rate_scale: float = 1.0,
        granularity_us: float = 1.0,
        nic_quantum_us: float = 0.0,
        on_message: MessageCallback | None = None,
        reorder: bool = False,
    ) -> None:
        if not 64 <= mtu <= 9000:
            raise ValueError(f"Endpoint {agent.host}: mtu {mtu} out of range 64..9000")
        self.agent = agent
        self.host = agent.host
        self.ip = agent.host_ip
        self.mac = mac
        self.gateway_mac = gateway_mac
        self.mtu = mtu
        self.cnp_interval_us = cnp_interval_us
        self.link_rate_scale = link_rate_scale
        self.on_message = on_message
        # A NIC that places out-of-order packets (Spectrum-X / Ultra Ethernet style, for a
        # sprayed fabric): a packet up to REORDER_WINDOW PSNs ahead is held (counted in
        # out_of_order, never a loss) and delivered in PSN order once the gap before it fills;
        # a message completes when all its packets are in. Off: RoCE's go-back-N view (a gap
        # is a loss, a late packet is dropped).
        self.reorder = reorder
        self.granularity_us = granularity_us  # how late a driver may poll (its time step)
        # The NIC's serialisation time rounded up to this (0: exact).  The virtual-time switches
        # drain a port in whole microseconds per packet; a NIC exactly at the same line rate
        # would outrun them by a fraction of a microsecond per frame and build a queue.
        self.nic_quantum_us = nic_quantum_us
        self.frame_bytes = HEADER_BYTES + mtu + ICRC_BYTES  # a full data frame
        self.tx: dict[FlowKey, _TxFlow] = {}
        # (src ip, sport, qp), least recently heard first: unsolicited frames can add entries,
        # so past MAX_RX_FLOWS the oldest is evicted (counted in rx_evicted)
        self.rx: OrderedDict[tuple[str, int, int], _RxFlow] = OrderedDict()
        self.counters = EndpointCounters()
        self._order: list[FlowKey] = []  # round-robin order of tx flows
        self._rr = 0
        self._nic_free_us = 0.0

    # ---- sender -----------------------------------------------------------------------------
    def open_flow(self, dst_ip: str, *, job: str = "", flow_id: str = "") -> FlowKey:
        """Open a QP to ``dst_ip`` through the agent (it picks the QP and source port)."""
        key = self.agent.open_flow(dst_ip, job=job, flow_id=flow_id)
        builder = FrameBuilder(
            src_mac=self.mac,
            dst_mac=self.gateway_mac,
            src_ip=self.ip,
            dst_ip=dst_ip,
            sport=key.udp_sport,
            qp=key.dst_qp,
            max_payload=self.mtu + IMM_BYTES,
        )
        self.tx[key] = _TxFlow(key=key, builder=builder, stats=FlowStats(key=key))
        self._order.append(key)
        return key

    def close_flow(self, key: FlowKey) -> FlowStats:
        """Close a flow (its unsent messages are dropped); returns its final sender stats."""
        flow = self.tx.pop(key, None)
        if flow is None:
            raise KeyError(f"Endpoint {self.host}: no open flow {key}")
        self._order.remove(key)
        self._rr = 0
        self.agent.close_flow(key)
        return flow.stats

    def post_send(self, key: FlowKey, nbytes: int, tag: int, now_us: float | None = None) -> None:
        """Queue a message of ``nbytes`` on flow ``key``; ``tag`` (32 bits) names it at the receiver."""
        flow = self.tx.get(key)
        if flow is None:
            raise KeyError(f"Endpoint {self.host}: no open flow {key}")
        if nbytes <= 0:
            raise ValueError(f"Endpoint {self.host}: message size must be > 0, got {nbytes}")
        if not 0 <= tag < 1 << 32:
            raise ValueError(f"Endpoint {self.host}: tag {tag} is not a 32-bit number")
        if not flow.queue and now_us is not None:
            flow.next_tx_us = max(flow.next_tx_us, now_us)
        flow.queue.append(_Message(tag=tag, left=nbytes))
        flow.stats.messages_posted += 1

    def backlog_bytes(self, key: FlowKey | None = None) -> int:
        """Bytes posted and not yet sent (one flow's, or all)."""
        flows = [self.tx[key]] if key is not None else list(self.tx.values())
        return sum(m.left for f in flows for m in f.queue)

    def next_send_us(self) -> float | None:
        """When the next frame is due (None: nothing queued)."""
        best: float | None = None
        for flow in self.tx.values():
            if flow.queue:
                t = flow.next_tx_us
                if best is None or t < best:
                    best = t
        if best is None:
            return None
        return max(best, self._nic_free_us)

    def poll(self, now_us: float) -> list[bytes]:
        """Frames due by ``now_us`` (paced per flow at the agent's rate, NIC at line rate)."""
        out: list[bytes] = []
        order = self._order
        n = len(order)
        line = self.agent.line_rate_bps
        while n and self._nic_free_us <= now_us:
            sent = False
            for i in range(n):
                idx = (self._rr + i) % n
                flow = self.tx[order[idx]]
                if not flow.queue or flow.next_tx_us > now_us:
                    continue
                psn = flow.psn
                slot = psn % SENT_RING
                flow.sent_psn[slot] = psn
                flow.sent_at[slot] = now_us
                frame = self._next_frame(flow)
                out.append(frame)
                bits = len(frame) * 8.0
                # The frame leaves when the NIC is free; a poll up to one time step late keeps
                # the schedule (the virtual-time engine polls at whole microseconds).
                start = max(flow.next_tx_us, self._nic_free_us, now_us - self.granularity_us)
                rate = self.agent.rate_bps(flow.key)
                step = bits * 1e6 / rate
                # The flow's own rate limiter is a token bucket one frame deep, as a NIC's
                # per-QP limiter: tokens accrue on the flow's schedule, not from when the shared
                # NIC let its last frame out, so a frame that waited for another flow's frame
                # does not push back every later one (the time was lost for good, and a flow
                # capped at half the line beside a sibling at the other half ran ~1.5 % under
                # its cap); after idle time pacing restarts from now.
                flow.next_tx_us = max(flow.next_tx_us, start - step) + step
                flow.paced_rate_bps = rate
                gap = bits * 1e6 / line
                if self.nic_quantum_us > 0:
                    q = self.nic_quantum_us
                    gap = math.ceil(gap / q) * q
                self._nic_free_us = start + gap
                self._account(flow, now_us, len(frame))
                self._rr = (idx + 1) % n
                sent = True
                break
            if not sent:
                break
        return out

    def repace(self, now_us: float) -> None:
        """Apply rates the agent changed since a flow's last frame to the gap it is waiting
        out, as a NIC's per-QP rate limiter does (tokens accrue at the new rate from now on):
        the rest of the gap, ``next_tx - now`` at the old rate, is sent at the new one.  Without
        it a flow cut to a low rate waited out the whole long gap of that rate however soon its
        rate came back up, while the simulator's rates act at once.  Call it after the agent's
        events (feedback, CNPs, timers, caps)."""
        for flow in self.tx.values():
            old = flow.paced_rate_bps
            if not flow.queue or old <= 0 or flow.next_tx_us <= now_us:
                continue
            rate = self.agent.rate_bps(flow.key)
            if rate != old:
                flow.next_tx_us = now_us + (flow.next_tx_us - now_us) * old / rate
                flow.paced_rate_bps = rate

    def _next_frame(self, flow: _TxFlow) -> bytes:
        msg = flow.queue[0]
        size = min(msg.left, self.mtu)
        last = size == msg.left
        psn = flow.psn
        flow.psn = (psn + 1) % PSN_MOD
        if last:
            opcode = OP_SEND_ONLY_IMM if msg.first else OP_SEND_LAST_IMM
            frame = flow.builder.frame(opcode, psn, size + IMM_BYTES, immediate=msg.tag)
            flow.queue.popleft()
            flow.stats.messages_sent += 1
        else:
            opcode = OP_SEND_FIRST if msg.first else OP_SEND_MIDDLE
            frame = flow.builder.frame(opcode, psn, size)
            msg.left -= size
            msg.first = False
        return frame

    def _account(self, flow: _TxFlow, now_us: float, nbytes: int) -> None:
        s = flow.stats
        s.packets_sent += 1
        s.bytes_sent += nbytes
        if s.first_tx_us is None:
            s.first_tx_us = now_us
        s.last_tx_us = now_us
        self.agent.on_bytes_sent(flow.key, now_us, nbytes)

    # ---- receiver ---------------------------------------------------------------------------
    def receive(self, now_us: float, frame: bytes) -> list[bytes]:
        """Take one frame off the wire; returns the frames to send in reply (CNPs)."""
        port = udp_dport(frame)
        if port == ROCE_UDP_PORT:
            return self._receive_roce(now_us, frame)
        if port == FEEDBACK_PORT:
            self._receive_feedback(now_us, frame)
            return []
        self.counters.other += 1
        return []

    def _receive_roce(self, now_us: float, frame: bytes) -> list[bytes]:
        try:
            h = parse_roce(frame)
        except MalformedFrame as exc:
            self.counters.malformed_roce += 1
            log.debug("%s: dropped: %s", self.host, exc)
            return []
        if h.dst_ip != self.ip:
            self.counters.not_for_us += 1
            return []
        if h.opcode == OP_CNP:
            flow = self.agent.find(dst_ip=h.src_ip, qp=h.qp)
            if flow is None:
                self.counters.cnp_unknown_flow += 1
                return []
            self.tx[flow.key].stats.cnps_received += 1
            self.agent.on_cnp(flow.key, now_us)
            return []
        rkey = (h.src_ip, h.sport, h.qp)
        rx = self.rx.get(rkey)
        if rx is None:
            if len(self.rx) >= MAX_RX_FLOWS:
                self.rx.popitem(last=False)
                self.counters.rx_evicted += 1
            key = FlowKey(
                src_ip=h.src_ip,
                dst_ip=h.dst_ip,
                udp_sport=h.sport,
                udp_dport=h.dport,
                dst_qp=h.qp,
            )
            rx = self.rx[rkey] = _RxFlow(stats=FlowStats(key=key))
        else:
            self.rx.move_to_end(rkey)
        s = rx.stats
        if self.reorder:
            if rx.expected_psn is None:
                rx.expected_psn = 0  # every QP here starts at PSN 0 (_TxFlow.psn)
            ahead = (h.psn - rx.expected_psn) % PSN_MOD
            if ahead >= PSN_MOD // 2 or (ahead and h.psn in rx.held):
                s.out_of_order += 1  # behind what was delivered, or held already: a duplicate
                return []
            if ahead and ahead < REORDER_WINDOW and len(rx.held) < REORDER_WINDOW:
                s.out_of_order += 1
                rx.held[h.psn] = frame
                return []
            # in order (or beyond the window: a loss, as without reordering)
            replies = self._accept(now_us, h, frame, rx)
            while rx.expected_psn in rx.held:
                nxt = rx.held.pop(rx.expected_psn)
                replies += self._accept(now_us, parse_roce(nxt), nxt, rx)
            return replies
        return self._accept(now_us, h, frame, rx)

    def _accept(self, now_us: float, h: RoceHeader, frame: bytes, rx: _RxFlow) -> list[bytes]:
        """A data packet at (or past) the next expected PSN: account, mark, complete."""
        s = rx.stats
        if rx.expected_psn is None and 0 < h.psn < PSN_MOD // 2:
            # Every QP here starts at PSN 0 (_TxFlow.psn): the packets before the first one
            # seen were lost, not "before the flow began" (a message short at its start).
            s.psn_gap_losses += h.psn
        elif rx.expected_psn is not None and h.psn != rx.expected_psn:
            gap = (h.psn - rx.expected_psn) % PSN_MOD
            if gap < PSN_MOD // 2:
                s.psn_gap_losses += gap
            else:
                s.out_of_order += 1
                return []
        rx.expected_psn = (h.psn + 1) % PSN_MOD
        payload = h.payload_bytes
        completes = h.opcode in (OP_SEND_LAST_IMM, OP_SEND_ONLY_IMM)
        tag = 0
        if completes:
            if payload < IMM_BYTES:
                self.counters.malformed_roce += 1
                return []
            off = ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES
            (tag,) = struct.unpack_from("!I", frame, off)
            payload -= IMM_BYTES
        s.packets_received += 1
        s.bytes_received += payload
        if s.first_rx_us is None:
            s.first_rx_us = now_us
        s.last_rx_us = now_us
        if h.opcode in (OP_SEND_FIRST, OP_SEND_ONLY_IMM):
            rx.msg_bytes = 0
        rx.msg_bytes += payload
        replies: list[bytes] = []
        if h.ecn == ECN_CE:
            s.ecn_marks += 1
            if now_us - rx.last_cnp_us >= self.cnp_interval_us:
                rx.last_cnp_us = now_us
                s.cnps_sent += 1
                replies.append(
                    build_cnp(
                        src_mac=self.mac,
                        dst_mac=self.gateway_mac,
                        src_ip=self.ip,
                        dst_ip=h.src_ip,
                        qp=h.qp,
                    )
                )
        if completes:
            s.messages_received += 1
            nbytes, rx.msg_bytes = rx.msg_bytes, 0
            if self.on_message is not None:
                self.on_message(s.key, tag, nbytes, now_us)
        return replies

    def _receive_feedback(self, now_us: float, frame: bytes) -> None:
        try:
            fb = parse_feedback(
                frame, link_rate_scale=self.link_rate_scale, qdepth_unit_bytes=self.frame_bytes
            )
        except MalformedFrame as exc:
            self.counters.malformed_feedback += 1
            log.debug("%s: feedback dropped: %s", self.host, exc)
            return
        key = FlowKey(
            src_ip=fb.flow_src_ip,
            dst_ip=fb.flow_dst_ip,
            udp_sport=fb.flow_sport,
            udp_dport=fb.flow_dport,
            dst_qp=fb.flow_qp,
        )
        flow = self.tx.get(key)
        if flow is None:
            self.counters.feedback_unknown_flow += 1
            return
        st = flow.stats
        st.feedback_received += 1
        st.path_kind, st.path_tag = fb.path_kind, fb.path_tag
        st.path_switches = tuple(h.switch_id for h in fb.hops)
        slot = fb.psn % SENT_RING
        sent = flow.sent_at[slot] if flow.sent_psn[slot] == fb.psn else None
        self.agent.on_feedback(key, now_us, fb.hops, sent_us=sent)

    # ---- stats ------------------------------------------------------------------------------
    def tx_stats(self) -> dict[FlowKey, FlowStats]:
        """Sender-side stats of every local flow."""
        return {k: f.stats for k, f in self.tx.items()}

    def rx_stats(self) -> dict[FlowKey, FlowStats]:
        """Receiver-side stats of every flow that sent to this host."""
        return {r.stats.key: r.stats for r in self.rx.values()}

    def partial_messages(self) -> dict[FlowKey, tuple[int, float | None]]:
        """Flows sent to this host with a message begun and not ended: its payload bytes so
        far and when the flow's last packet arrived (a lost LAST packet leaves one here)."""
        return {
            r.stats.key: (r.msg_bytes, r.stats.last_rx_us) for r in self.rx.values() if r.msg_bytes
        }
