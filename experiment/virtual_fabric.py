"""The virtual-time engine: embedded switches, host endpoints and agents in one discrete-event loop.

Every switch of the topology is an embedded :class:`~icefabric.target.device.Device` sharing one
:class:`~icefabric.target.runtime.clock.ManualClock`, with no scheduler thread: the engine
injects packets and calls ``run_until_idle`` itself.  Each switch serves P4Runtime on
``127.0.0.1:<free port>`` (:attr:`VirtualFabric.addresses`), so the controller installs the
pipeline and entries over real P4Runtime before (and between) runs.  The switches, their
servers, wiring and link cuts are an :class:`~icefabric.experiment.wire.InProcessFabric`
(:attr:`VirtualFabric.fabric`) whose transport is this engine (:meth:`VirtualFabric.start_switch`,
:meth:`VirtualFabric.attach_wire`).  Egress ports drain at the
topology's link rates times ``rate_scale`` (100 Gbit/s x 1e-3 = 100 Mbit/s, so Python is never
the bottleneck); a frame reaches the peer after its serialisation time plus the link's delay.
Hosts are :class:`~icefabric.traffic.endpoint.Endpoint` + :class:`~icefabric.traffic.agent.Agent`
pairs whose NICs send at the host link rate times ``rate_scale``.

Time is integer microseconds (the switches' timestamps).  Ties are broken by a sequence number,
switches and hosts are visited in topology order: the same inputs give the same results to the
last digit.  Keep anything that writes to the switches from other threads (the controller's
link probes: ``probe_interval_s=0``) out of a run.
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from icefabric.control.agents.protocol import (
    Caps,
    CapsAssembler,
    FrameReader,
    ProtocolError,
    caps_frames,
    decode_body,
)
from icefabric.control.fabric import switch_mac
from icefabric.control.flowkey import FlowKey
from icefabric.experiment.virtual_stats import ChannelStats, PortStats, ice_overhead_bytes, is_ce
from icefabric.experiment.wire import InProcessFabric
from icefabric.experiment.wiring import EmbeddedSwitch, PortWire, serve_switch
from icefabric.p4src.ice_p4 import (
    ETHERNET_BYTES,
    ICE_FEEDBACK_BYTES,
    INT_HOP_BYTES,
    INT_MAX_HOPS,
    IPV4_BYTES,
    UDP_BYTES,
)
from icefabric.topo.model import Switch
from icefabric.topo.spec import TopologySpec
from icefabric.traffic.agent import Agent, RateFactory
from icefabric.traffic.endpoint import DEFAULT_MTU, Endpoint, FlowStats
from icefabric.traffic.rate import DcqcnParams, IceParams, make_rate_control
from icefabric.traffic.roce import HEADER_BYTES, ICRC_BYTES

log = logging.getLogger(__name__)

# a feedback packet with a full path record
FEEDBACK_FRAME_BYTES = (
    ETHERNET_BYTES + IPV4_BYTES + UDP_BYTES + ICE_FEEDBACK_BYTES + INT_MAX_HOPS * INT_HOP_BYTES
)


def base_rtt_us(spec: TopologySpec, frame_bytes: int, rate_scale: float = 1.0) -> float:
    """ICE's T on ``spec``: the longest host-to-host path, there (frames of ``frame_bytes``)
    and back (a feedback frame), unloaded, with links at ``rate_scale`` x their rates."""
    tiers = max((s.tier for s in spec.switches), default=0)
    links = 2 + 2 * tiers
    rates = [spec.link_rate(ln) for ln in spec.links] + [spec.host_rate(h) for h in spec.hosts]
    slowest = min(rates) * 1e9 * rate_scale if rates else 1e9
    delays = [spec.link_delay(ln) for ln in spec.links] + [spec.defaults.link_delay_us]
    per_link = (frame_bytes + FEEDBACK_FRAME_BYTES) * 8e6 / slowest + 2 * max(delays)
    return links * per_link


MessageHook = Callable[[str, FlowKey, int, int, int], None]  # host, key, tag, nbytes, now_us
CpuHook = Callable[[str, bytes, int], None]  # switch, packet_in header + payload, now_us


@dataclass(slots=True, frozen=True, kw_only=True)
class VirtualConfig:
    """How the topology becomes a virtual-time fabric."""

    rate_scale: float = 1e-3  # link rates from the spec x this
    queue_packets: int = 1024  # egress queue capacity per port and priority (tail drop)
    mtu: int = DEFAULT_MTU  # RoCE payload bytes per packet
    kind: str = "ice"  # rate algorithm of every host agent ("ice" | "dcqcn")
    seed: int = 0  # seeds the agents' QP numbering
    base_rtt_us: float | None = None  # ICE's T; None: computed from the topology
    cnp_interval_us: float | None = None  # None: DCQCN's 50 us scaled to the host rate
    ice: IceParams | None = None  # ICE's constants before scaling (None: the defaults)
    reorder: bool = False  # NICs that place out-of-order packets (a sprayed fabric)

    def __post_init__(self) -> None:
        if not self.rate_scale > 0:
            raise ValueError(f"VirtualConfig: rate_scale must be > 0, got {self.rate_scale!r}")
        if self.queue_packets < 1:
            raise ValueError(f"VirtualConfig: queue_packets must be >= 1, got {self.queue_packets}")


@dataclass(slots=True)
class VirtualHost:
    """One host of the fabric: its endpoint, agent and attachment."""

    name: str
    leaf: str
    port: int
    endpoint: Endpoint
    line_rate_bps: float
    delay_us: float

    @property
    def agent(self) -> Agent:
        """The host's rate agent."""
        return self.endpoint.agent


_TO_SWITCH = 0
_TO_HOST = 1
_TO_AGENT = 2  # agent channel frames from the controller (caps), after the control delay


class VirtualFabric:
    """The discrete-event engine over a topology (see the module docstring): the transport of
    its in-process fabric (:attr:`fabric`); a context manager."""

    def __init__(
        self,
        spec: TopologySpec,
        config: VirtualConfig | None = None,
        *,
        rate_factories: Mapping[str, RateFactory] | None = None,
    ) -> None:
        from icefabric.target.runtime.clock import ManualClock

        self.spec = spec
        self.fabric = InProcessFabric(spec, self)
        self.config = cfg = config or VirtualConfig()
        self.clock = ManualClock()
        self.ports: dict[tuple[str, int], PortStats] = {}
        self.on_message: MessageHook | None = None
        self.on_cpu_packet: CpuHook | None = None
        self._events: list[tuple[int, int, int, str, int, bytes]] = []
        self._seq = 0
        self._rate_factories = dict(rate_factories or {})
        # What each switch / host wants next, refreshed whenever it was touched (see _step).
        self._dep: dict[str, int | None] = {}
        self._send: dict[str, float | None] = {}
        self._timer: dict[str, float | None] = {}
        self._touched: set[str] = set()  # hosts whose wishes changed outside _step
        self.channel = ChannelStats()
        self._readers: dict[str, tuple[FrameReader, CapsAssembler]] = {}
        self.frame_bytes = HEADER_BYTES + cfg.mtu + ICRC_BYTES + 4
        self.base_rtt_us = cfg.base_rtt_us or self._base_rtt()
        self.hosts: dict[str, VirtualHost] = {}
        self._by_ip: dict[str, str] = {}
        for h in spec.hosts:
            self.hosts[h.name] = self._make_host(h)
            self._by_ip[h.address] = h.name

    # ---- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> VirtualFabric:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Create every switch, serve it over P4Runtime and wire its ports."""
        self.fabric.start()

    def stop(self) -> None:
        """Stop every switch and its P4Runtime server."""
        self.fabric.stop()

    @property
    def switches(self) -> dict[str, EmbeddedSwitch]:
        """The fabric's switches by name."""
        return self.fabric.switches

    @property
    def addresses(self) -> dict[str, str]:
        """P4Runtime address of every switch."""
        return self.fabric.addresses

    def cut_link(self, a: str, b: str) -> None:
        """Drop everything on the link(s) between switches a and b, both directions."""
        self.fabric.cut_link(a, b)

    def heal_link(self, a: str, b: str) -> None:
        """Undo :meth:`cut_link`."""
        self.fabric.heal_link(a, b)

    # ---- the fabric's transport -------------------------------------------------------------
    def start_switch(self, spec: TopologySpec, switch: Switch, addr: str) -> EmbeddedSwitch:
        """``switch`` on the engine's ManualClock with no scheduler thread (:meth:`run_until`
        runs the switches), serving P4Runtime on ``addr``."""
        sw = serve_switch(spec, switch, addr, clock=self.clock, collect_limit=0)
        sw.device.packet_in_handlers.append(self._cpu_handler(switch.name))
        return sw

    def attach_wire(self, fabric: InProcessFabric, w: PortWire) -> None:
        """A frame leaving ``w``'s port reaches the peer switch or host after its serialisation
        time at the port's rate plus the link delay (an event of the engine)."""
        if w.link is not None:
            rate = self.spec.link_rate(w.link) * 1e9 * self.config.rate_scale
            delay = self.spec.link_delay(w.link)
            self._attach(fabric, w, rate, delay, _TO_SWITCH)
        else:
            vh = self.hosts[w.peer]
            self._attach(fabric, w, vh.line_rate_bps, vh.delay_us, _TO_HOST)

    def device(self, switch: str) -> Any:
        """The embedded Device of ``switch``."""
        return self.switches[switch].device

    # ---- hosts and flows --------------------------------------------------------------------
    def host(self, name: str) -> VirtualHost:
        """The host called ``name``."""
        return self.hosts[name]

    def host_of_ip(self, ip: str) -> str:
        """The host name owning ``ip``."""
        return self._by_ip[ip]

    def open_flow(self, src: str, dst: str, *, job: str = "", flow_id: str = "") -> FlowKey:
        """Open a QP from host ``src`` to host ``dst`` (the agent picks QP and source port)."""
        dst_ip = self.spec.host(dst).address
        return self.hosts[src].endpoint.open_flow(dst_ip, job=job, flow_id=flow_id)

    def post(self, key: FlowKey, nbytes: int, tag: int) -> None:
        """Queue a message of ``nbytes`` on flow ``key`` now; ``on_message`` fires at its receiver."""
        host = self._by_ip[key.src_ip]
        self.hosts[host].endpoint.post_send(key, nbytes, tag, now_us=self.now_us)
        self._touched.add(host)

    def apply_caps(self, caps: Mapping[FlowKey, float]) -> None:
        """Caps for flows anywhere in the fabric (each host gets its complete set)."""
        per_host: dict[str, dict[FlowKey, float]] = {name: {} for name in self.hosts}
        for key, bps in caps.items():
            host = self._by_ip.get(key.src_ip)
            if host is not None:
                per_host[host][key] = bps
        for name, host_caps in per_host.items():
            self.hosts[name].agent.apply_caps(host_caps)
            self._touched.add(name)

    def push_caps(
        self,
        caps: Mapping[FlowKey, float],
        *,
        starts: Mapping[str, tuple[tuple[str, float], ...]] | None = None,
        delay_us: float = 0.0,
    ) -> None:
        """The controller's caps, as the agent channel carries them: each host's complete set
        (with its start table from ``starts``, per host name) encoded as caps frames
        (:func:`caps_frames`), read back by the agent's frame reader and
        :class:`CapsAssembler` ``delay_us`` later (the control delay), then applied."""
        if not delay_us >= 0:
            raise ValueError(f"push_caps: delay_us must be >= 0, got {delay_us!r}")
        per_host: dict[str, dict[FlowKey, float]] = {name: {} for name in self.hosts}
        for key, bps in caps.items():
            host = self._by_ip.get(key.src_ip)
            if host is not None:
                per_host[host][key] = bps
        at = self.now_us + math.ceil(delay_us)
        for name, host_caps in per_host.items():
            frames = caps_frames(host_caps, (starts or {}).get(name, ()))
            self.channel.pushes += 1
            self.channel.bytes += len(frames)
            self._push(at, _TO_AGENT, name, 0, frames)

    def _agent_frames(self, host: str, data: bytes) -> None:
        reader, assembler = self._readers.setdefault(host, (FrameReader(), CapsAssembler()))
        for body in reader.feed(data):
            self.channel.frames += 1
            try:
                msg = decode_body(body)
            except ProtocolError as exc:
                self.channel.malformed += 1
                log.warning("virtual agent channel to %s: %s", host, exc)
                continue
            if isinstance(msg, Caps):
                complete = assembler.add(msg)
                if complete is not None:
                    agent = self.hosts[host].agent
                    agent.apply_caps(complete)
                    agent.apply_starts(assembler.starts)
                    self.channel.applied += 1

    # ---- time -------------------------------------------------------------------------------
    @property
    def now_us(self) -> int:
        """Current virtual time in microseconds."""
        return self.clock.now_us()

    def run_until(self, t_us: int) -> None:
        """Process every event up to ``t_us`` and leave the clock there."""
        self._refresh_all()
        while True:
            t = self._next_time(timers=True)
            if t is None or t > t_us:
                break
            self._step(t)
        if t_us > self.now_us:
            self.clock.set(t_us)

    def run_until_idle(self, max_us: int | None = None) -> int:
        """Run until no packet is queued, in flight or due from a host; returns the time.

        Rate-algorithm timers alone do not keep the fabric busy.  ``max_us`` bounds the run
        (RuntimeError naming what is still pending if it is reached).
        """
        self._refresh_all()
        while True:
            t = self._next_time(timers=False)
            if t is None:
                return self.now_us
            if max_us is not None and t > max_us:
                raise RuntimeError(
                    f"virtual fabric not idle at {max_us} us: {len(self._events)} frames in flight, "
                    f"backlog {sum(h.endpoint.backlog_bytes() for h in self.hosts.values())} bytes"
                )
            timer = self._next_timer()
            while timer is not None and timer < t:  # timers before the next packet event
                self._step(timer)
                timer = self._next_timer()
            self._step(t)

    # ---- stats ------------------------------------------------------------------------------
    def flow_stats(self) -> dict[FlowKey, FlowStats]:
        """Every flow: sender-side figures from its source, receiver-side from its destination."""
        out: dict[FlowKey, FlowStats] = {}
        for h in self.hosts.values():
            for key, st in h.endpoint.tx_stats().items():
                out[key] = FlowStats(
                    key=key,
                    bytes_sent=st.bytes_sent,
                    packets_sent=st.packets_sent,
                    messages_posted=st.messages_posted,
                    messages_sent=st.messages_sent,
                    first_tx_us=st.first_tx_us,
                    last_tx_us=st.last_tx_us,
                    cnps_received=st.cnps_received,
                    feedback_received=st.feedback_received,
                    path_kind=st.path_kind,
                    path_tag=st.path_tag,
                    path_switches=st.path_switches,
                )
        for h in self.hosts.values():
            for key, rx in h.endpoint.rx_stats().items():
                st = out.setdefault(key, FlowStats(key=key))
                st.bytes_received = rx.bytes_received
                st.packets_received = rx.packets_received
                st.messages_received = rx.messages_received
                st.first_rx_us = rx.first_rx_us
                st.last_rx_us = rx.last_rx_us
                st.psn_gap_losses = rx.psn_gap_losses
                st.out_of_order = rx.out_of_order
                st.ecn_marks = rx.ecn_marks
                st.cnps_sent = rx.cnps_sent
        return out

    def port_stats(self) -> dict[tuple[str, int], PortStats]:
        """Every switch port's figures (host ports and fabric ports)."""
        return self.ports

    def queue_depths(self) -> dict[tuple[str, int], int]:
        """Packets queued now on every switch port (all priorities): sample it between runs."""
        return {
            (switch, port): self.switches[switch].device.queue_depth(port)
            for (switch, port) in self.ports
        }

    def drops(self) -> dict[str, dict[str, int]]:
        """Packets each switch dropped, by reason (queue_full, egress_drop, ...)."""
        return {name: sw.device.drop_counts() for name, sw in self.switches.items()}

    # ---- internals --------------------------------------------------------------------------
    def _make_host(self, h: Any) -> VirtualHost:
        cfg = self.config
        rate = self.spec.host_rate(h) * 1e9 * cfg.rate_scale
        factory = self._rate_factories.get(h.name)
        if factory is None and cfg.ice is not None and cfg.kind == "ice":
            factory = functools.partial(
                make_rate_control, "ice", rate, base_rtt_us=self.base_rtt_us, ice=cfg.ice
            )
        agent = Agent(
            h.name,
            h.address,
            line_rate_bps=rate,
            kind=cfg.kind,
            base_rtt_us=self.base_rtt_us,
            seed=cfg.seed,
            rate_factory=factory,
        )
        cnp_interval = cfg.cnp_interval_us
        if cnp_interval is None:
            cnp_interval = DcqcnParams().scaled(rate).cnp_interval_us
        leaf = self.spec.switch(h.leaf)
        endpoint = Endpoint(
            agent,
            mac=h.mac,
            gateway_mac=switch_mac(leaf.switch_id),
            mtu=cfg.mtu,
            cnp_interval_us=cnp_interval,
            link_rate_scale=cfg.rate_scale,
            nic_quantum_us=1.0,  # the switches drain in whole microseconds per packet
            on_message=self._message_handler(h.name),
            reorder=cfg.reorder,
        )
        return VirtualHost(
            name=h.name,
            leaf=h.leaf,
            port=h.port,
            endpoint=endpoint,
            line_rate_bps=rate,
            delay_us=self.spec.defaults.link_delay_us,
        )

    def _base_rtt(self) -> float:
        """Longest host-to-host path, there (full frames) and back (feedback), unloaded."""
        return base_rtt_us(self.spec, self.frame_bytes, self.config.rate_scale)

    def _message_handler(self, host: str) -> Callable[[FlowKey, int, int, float], None]:
        def handle(key: FlowKey, tag: int, nbytes: int, now_us: float) -> None:
            if self.on_message is not None:
                self.on_message(host, key, tag, nbytes, int(now_us))

        return handle

    def _cpu_handler(self, switch: str) -> Callable[[bytes], None]:
        def handle(data: bytes) -> None:
            if self.on_cpu_packet is not None:
                self.on_cpu_packet(switch, data, self.now_us)

        return handle

    def _attach(
        self, fabric: InProcessFabric, w: PortWire, rate: float, delay_us: float, kind: int
    ) -> None:
        switch, port, peer, peer_port = w.switch, w.port, w.peer, w.peer_port
        device = fabric.switches[switch].device
        device.set_queue_rate(port, bps=round(rate))
        device.set_queue_depth(port, self.config.queue_packets)
        stats = PortStats(switch=switch, port=port, rate_bps=rate)
        self.ports[(switch, port)] = stats
        tm = device.tm
        cut = fabric.cut_ports
        push = self._push
        clock = self.clock

        def send(data: bytes) -> None:
            n = len(data)
            stats.tx_packets += 1
            stats.tx_bytes += n
            stats.overhead_bytes += ice_overhead_bytes(data)
            if is_ce(data):
                stats.ce_packets += 1
            depth = tm.depth(port)
            stats.queue_hist[depth] = stats.queue_hist.get(depth, 0) + 1
            if depth > stats.max_queue:
                stats.max_queue = depth
            if (switch, port) in cut:
                return
            arrive = clock.now_us() + math.ceil(n * 8e6 / rate + delay_us)
            push(arrive, kind, peer, peer_port, data)

        device.attach_port(port, send)

    def _push(self, t: int, kind: int, target: str, port: int, data: bytes) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, target, port, data))

    def _send_from_host(self, vh: VirtualHost, now: int, frames: list[bytes]) -> None:
        t = float(now)
        for frame in frames:
            # The NIC paces data; replies (CNPs) go out back to back after it.
            t_arrive = math.ceil(t + len(frame) * 8e6 / vh.line_rate_bps + vh.delay_us)
            self._push(t_arrive, _TO_SWITCH, vh.leaf, vh.port, frame)

    def _refresh_all(self) -> None:
        """Re-read every switch's and host's next wish (before a run: the caller may have
        changed anything, e.g. the controller wrote entries or sent packet-outs)."""
        now = self.now_us
        for name, sw in self.switches.items():
            dev = sw.device
            self._dep[name] = now if dev.backlog() else dev.next_departure_us()
        for name in self.hosts:
            self._refresh_host(name)
        self._touched.clear()

    def _refresh_host(self, name: str) -> None:
        vh = self.hosts[name]
        vh.endpoint.repace(float(self.now_us))  # rates its agent changed act at once
        self._send[name] = vh.endpoint.next_send_us()
        self._timer[name] = vh.agent.next_timer_us()

    def _next_timer(self) -> int | None:
        best: float | None = None
        for t in self._timer.values():
            if t is not None and (best is None or t < best):
                best = t
        return None if best is None else max(self.now_us, math.ceil(best))

    def _next_time(self, *, timers: bool) -> int | None:
        best: float | None = self._events[0][0] if self._events else None
        for dep in self._dep.values():
            if dep is not None and (best is None or dep < best):
                best = dep
        for t_send in self._send.values():
            if t_send is not None and (best is None or t_send < best):
                best = t_send
        if timers:
            for t_timer in self._timer.values():
                if t_timer is not None and (best is None or t_timer < best):
                    best = t_timer
        if best is None:
            return None
        return max(self.now_us, math.ceil(best))

    def _step(self, t: int) -> None:
        if t > self.now_us:
            self.clock.set(t)
        events = self._events
        switches = self.switches
        touched_switches: set[str] = set()
        touched = self._touched
        while events and events[0][0] <= t:
            _, _, kind, target, port, data = heapq.heappop(events)
            if kind == _TO_SWITCH:
                sw = switches.get(target)
                if sw is not None:
                    sw.device.inject(port, data)
                    touched_switches.add(target)
            elif kind == _TO_AGENT:
                self._agent_frames(target, data)
                touched.add(target)
            else:
                vh = self.hosts[target]
                touched.add(target)
                replies = vh.endpoint.receive(float(t), data)
                if replies:
                    self._send_from_host(vh, t, replies)
        for name, vh in self.hosts.items():
            due = self._timer[name]
            if due is not None and due <= t:
                vh.agent.on_timer(float(t))
                touched.add(name)
            t_send = self._send[name]
            if t_send is not None and t_send <= t:
                touched.add(name)
                frames = vh.endpoint.poll(float(t))
                if frames:
                    self._send_from_host(vh, t, frames)
        for name, sw in switches.items():
            dep = self._dep[name]
            if name in touched_switches or (dep is not None and dep <= t):
                device = sw.device
                device.run_until_idle()
                self._dep[name] = device.next_departure_us()
        # Hosts touched above, and those a message callback posted to or capped meanwhile.
        while touched:
            self._refresh_host(touched.pop())
