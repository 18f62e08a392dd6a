"""The per-host rate agent: owns every local flow, its rate algorithm and the controller's cap.

One :class:`Agent` per host.  :meth:`Agent.open_flow` picks the flow's QP and UDP source port the
way a RoCE NIC does (QP numbers allocated in sequence from a per-host random base, seeded; the
source port from the Linux RDMA core's flow label of the QP pair, ``rdma_calc_flow_label`` ->
``rdma_flow_label_to_udp_sport``), so the controller learns keys it could not have derived from
the job description: :meth:`Agent.flow_reports` are what the agent channel sends.  The sending
rate of a flow is ``min(algorithm's rate, cap)``; :meth:`Agent.apply_caps` takes the
controller's complete cap set (a flow not in it has no cap), :meth:`Agent.apply_starts` its
start table: a flow of no job (traffic the controller cannot plan) with no cap that has not
sent yet starts at its destination prefix's rate (control/congestion/starts.py).  No clock, no I/O: the drivers
(virtual-time engine, real-time host) pass the time in.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from icefabric.control.agents.protocol import FlowReport, FlowState
from icefabric.control.flowkey import ROCE_UDP_PORT, FlowKey
from icefabric.traffic.rate import HopSample, RateControl, make_rate_control
from icefabric.traffic.roce import MAX_QP

log = logging.getLogger(__name__)

QP_BASE_MIN = 0x100  # QPNs below are reserved (QP0/QP1 and firmware QPs)
QP_SPACE = 1 << 20  # a NIC hands out QPNs from a window of this size above its base

RateFactory = Callable[[], RateControl]


def rdma_udp_sport(local_qp: int, remote_qp: int) -> int:
    """The UDP source port Linux's RDMA core gives a RoCEv2 QP pair (drivers/infiniband)."""
    v = (local_qp * remote_qp) & 0xFFFFFFFFFFFFFFFF
    v ^= v >> 20
    v ^= v >> 40
    fl = v & 0xFFFFF  # rdma_calc_flow_label
    fl_low = (fl & 0x03FFF) ^ ((fl & 0xFC000) >> 14)
    return (fl_low & 0x3FFF) | 0xC000  # rdma_flow_label_to_udp_sport


@dataclass(slots=True)
class AgentFlow:
    """One local flow as the agent sees it."""

    key: FlowKey
    job: str
    flow_id: str
    control: RateControl
    cap_bps: float | None = None
    state: str = "active"
    bytes_sent: int = 0
    feedbacks: int = 0
    cnps: int = 0

    def rate_bps(self) -> float:
        """min(algorithm's rate, cap)."""
        rate = self.control.rate_bps()
        return rate if self.cap_bps is None else min(rate, self.cap_bps)


@dataclass(slots=True)
class AgentStats:
    """What the agent ignored (and why) and did."""

    caps_applied: int = 0
    caps_unknown_flow: int = 0
    caps_invalid: int = 0
    starts_applied: int = 0  # flows started at a start table's rate
    starts_invalid: int = 0
    feedback_unknown_flow: int = 0
    cnp_unknown_flow: int = 0


class Agent:
    """Every local flow of one host with its rate algorithm (see the module docstring)."""

    def __init__(
        self,
        host: str,
        host_ip: str,
        *,
        line_rate_bps: float,
        kind: str = "ice",
        base_rtt_us: float | None = None,
        seed: int = 0,
        rate_factory: RateFactory | None = None,
    ) -> None:
        if not line_rate_bps > 0:
            raise ValueError(f"Agent {host}: line_rate_bps must be > 0, got {line_rate_bps!r}")
        self.host = host
        self.host_ip = host_ip
        self.line_rate_bps = line_rate_bps
        self.kind = kind
        self.base_rtt_us = base_rtt_us
        self._factory = rate_factory or (
            lambda: make_rate_control(kind, line_rate_bps, base_rtt_us=base_rtt_us)
        )
        self._factory()  # fail now on a bad kind, not at the first flow
        rng = random.Random(zlib.crc32(f"{host}/{seed}".encode()))
        self._next_qp = rng.randrange(QP_BASE_MIN, MAX_QP - QP_SPACE)
        self._qp_end = self._next_qp + QP_SPACE
        self.flows: dict[FlowKey, AgentFlow] = {}
        self.stats = AgentStats()
        self._changed: list[FlowReport] = []
        self._starts: list[tuple[ipaddress.IPv4Network, float]] = []  # longest prefix first

    # ---- flows ------------------------------------------------------------------------------
    def open_flow(self, dst_ip: str, *, job: str = "", flow_id: str = "") -> FlowKey:
        """A new flow to ``dst_ip``: allocate its QP, derive its source port, start its algorithm."""
        if self._next_qp >= self._qp_end:
            raise RuntimeError(f"Agent {self.host}: out of QP numbers")
        qp = self._next_qp
        self._next_qp += 1
        key = FlowKey(
            src_ip=self.host_ip,
            dst_ip=dst_ip,
            udp_sport=rdma_udp_sport(qp, qp),
            udp_dport=ROCE_UDP_PORT,
            dst_qp=qp,
        )
        flow = AgentFlow(key=key, job=job, flow_id=flow_id, control=self._factory())
        self.flows[key] = flow
        self._start(flow)
        self._changed.append(self._report(flow))
        return key

    def close_flow(self, key: FlowKey) -> None:
        """Forget a flow (reported as ``done``)."""
        flow = self.flows.pop(key, None)
        if flow is not None:
            flow.state = "done"
            self._changed.append(self._report(flow))

    def flow(self, key: FlowKey) -> AgentFlow | None:
        """The flow of ``key`` (None if not local)."""
        return self.flows.get(key)

    def find(self, *, dst_ip: str, qp: int) -> AgentFlow | None:
        """The local flow to ``dst_ip`` on QP ``qp`` (how a CNP names its flow)."""
        for flow in self.flows.values():
            if flow.key.dst_qp == qp and flow.key.dst_ip == dst_ip:
                return flow
        return None

    # ---- rates ------------------------------------------------------------------------------
    def rate_bps(self, key: FlowKey) -> float:
        """The flow's sending rate: min(algorithm, cap)."""
        return self.flows[key].rate_bps()

    def apply_caps(self, caps: Mapping[FlowKey, float]) -> None:
        """The controller's complete cap set: listed flows get their cap, the others none."""
        for key, bps in caps.items():
            if key not in self.flows:
                self.stats.caps_unknown_flow += 1
            elif not (isinstance(bps, int | float) and bps > 0):
                self.stats.caps_invalid += 1
                log.warning("%s: cap %r for %s ignored (expected bit/s > 0)", self.host, bps, key)
        for key, flow in self.flows.items():
            given = caps.get(key)
            cap = float(given) if isinstance(given, int | float) and given > 0 else None
            flow.cap_bps = cap
            flow.control.set_cap(cap)
            if cap is not None:
                self.stats.caps_applied += 1

    def apply_starts(self, starts: Sequence[tuple[str, float]]) -> None:
        """The controller's start table ((prefix, bit/s) pairs, replacing the last one): every
        flow of no job with no cap that has not sent yet starts at its destination's rate (the
        longest matching prefix; none matching: the algorithm's own start)."""
        table: list[tuple[ipaddress.IPv4Network, float]] = []
        for dst, bps in starts:
            try:
                net = ipaddress.IPv4Network(dst)
            except (TypeError, ValueError):
                net = None
            if net is None or not (isinstance(bps, int | float) and bps >= 0):
                self.stats.starts_invalid += 1
                log.warning(
                    "%s: start %r -> %r ignored (expected a prefix, bit/s >= 0)",
                    self.host,
                    dst,
                    bps,
                )
                continue
            table.append((net, float(bps)))
        self._starts = sorted(table, key=lambda e: -e[0].prefixlen)
        for flow in self.flows.values():
            self._start(flow)

    def start_rate(self, dst_ip: str) -> float | None:
        """The start table's rate for ``dst_ip`` (None: no prefix matches)."""
        ip = ipaddress.IPv4Address(dst_ip)
        for net, bps in self._starts:
            if ip in net:
                return bps
        return None

    def _start(self, flow: AgentFlow) -> None:
        # a CCL job's flow is planned: its caps follow (the table is for the traffic the
        # controller cannot plan, and it says what the caps leave now, not at the flow's phase)
        if flow.job or flow.cap_bps is not None or flow.bytes_sent or not self._starts:
            return
        bps = self.start_rate(flow.key.dst_ip)
        if bps is not None:
            flow.control.start_at(bps)
            self.stats.starts_applied += 1

    def on_feedback(
        self,
        key: FlowKey,
        now_us: float,
        hops: Sequence[HopSample],
        *,
        sent_us: float | None = None,
    ) -> None:
        """INT feedback for one of the flows (unknown flows are counted and ignored)."""
        flow = self.flows.get(key)
        if flow is None:
            self.stats.feedback_unknown_flow += 1
            return
        flow.feedbacks += 1
        flow.control.on_feedback(now_us, hops, sent_us=sent_us)

    def on_cnp(self, key: FlowKey, now_us: float) -> None:
        """A CNP for one of the flows."""
        flow = self.flows.get(key)
        if flow is None:
            self.stats.cnp_unknown_flow += 1
            return
        flow.cnps += 1
        flow.control.on_cnp(now_us)

    def on_bytes_sent(self, key: FlowKey, now_us: float, nbytes: int) -> None:
        """A flow put ``nbytes`` on the wire."""
        flow = self.flows[key]
        flow.bytes_sent += nbytes
        flow.control.on_bytes_sent(now_us, nbytes)

    def next_timer_us(self) -> float | None:
        """The earliest timer any flow's algorithm wants."""
        best: float | None = None
        for flow in self.flows.values():
            t = flow.control.next_timer_us()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def on_timer(self, now_us: float) -> None:
        """Run the due timers of every flow."""
        for flow in self.flows.values():
            t = flow.control.next_timer_us()
            if t is not None and t <= now_us:
                flow.control.on_timer(now_us)

    # ---- reports ----------------------------------------------------------------------------
    def flow_reports(self) -> list[FlowReport]:
        """Every local flow with its real key, job and flow id, rate and bytes (for the controller)."""
        return [self._report(f) for f in self.flows.values()]

    def take_changes(self) -> list[FlowReport]:
        """Reports of flows opened or closed since the last call (for incremental updates)."""
        out, self._changed = self._changed, []
        return out

    def _report(self, flow: AgentFlow) -> FlowReport:
        state: FlowState = "done" if flow.state == "done" else "active"
        return FlowReport(
            job=flow.job,
            flow_id=flow.flow_id,
            key=flow.key,
            state=state,
            rate_bps=flow.rate_bps() if state == "active" else None,
            bytes_sent=flow.bytes_sent,
        )
