"""The real-time host: one RoCEv2 endpoint + rate agent on an AF_PACKET socket.

``icefabric-host`` (or ``python -m icefabric.traffic.host``) runs in a Mininet host or network
namespace.  It sends RoCEv2 messages paced by the host's rate agent (DCQCN or ICE), answers
CE-marked packets with CNPs, feeds ICE feedback and CNPs to the agent, and, given a controller
address, reports its flows' real keys and applies the caps it receives over the agent channel
(:class:`icefabric.control.agents.client.AgentClient`, which reconnects with backoff).  The
endpoint and agent are the same classes the virtual-time engine drives; only the clock
(``time.monotonic``) and the wire (a raw socket) differ.

Work comes from ``--flow DST_IP:BYTES`` (one message per flow) or ``--schedule FILE`` (a
collective's dependency schedule, :class:`icefabric.traffic.workload.Schedule` as JSON, of which
this host runs its share: message ids are the tags).  The process ends when its work is done
(own messages sent and, for a schedule, every message to it arrived; ``--expect N`` waits for N
messages), at ``--duration``, or on SIGINT/SIGTERM; ``--stats FILE`` then gets its figures.

Inside a Mininet host started by ``python -m icefabric.topo.mininet`` it needs no options but its
work: the interface is the namespace's only one, the topology comes from ``$ICE_TOPOLOGY`` and
the host is the one whose address the interface holds (``--host`` takes a name or an address:
the Mininet CLI turns every node name into its IP), the controller is the default agent socket
when it exists, and the pace is the smaller of the topology's host rate and what the switch
target (``$ICE_TARGET``) forwards without loss (:data:`TARGET_PACE_BPS`). At exit it prints one
summary line per flow (bytes, time, goodput, loss, rate, cap, path) and exits 1 when a message
sent to it arrived with a packet missing (``--flow``/``--expect`` work).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from icefabric.control.flowkey import FlowKey
from icefabric.traffic.agent import Agent
from icefabric.traffic.endpoint import DEFAULT_MTU, Endpoint
from icefabric.traffic.rate import DcqcnParams, rate_kinds
from icefabric.traffic.roce import ip_bytes, mac_bytes

log = logging.getLogger("icefabric.traffic.host")

MAX_SCHEDULE_BYTES = 64 << 20
RX_BATCH = 64
REPORT_EVERY_S = 1.0
PACKET_OUTGOING = 4
SIOCGIFADDR = 0x8915
# The default pace (bit/s) per switch target when --line-rate and --rate-scale are not given:
# what its Mininet fabric forwards with no loss on the shared 2-core machine (the README's
# tour, tests/e2e/test_readme_tour.py: 1 MB, 0 lost). Python's ice-switch forwards a few
# thousand packets/s per process; BMv2's simple_switch_grpc some tens of thousands.
TARGET_PACE_BPS = {"embedded": 5e6, "bmv2": 20e6}
DEFAULT_PACE_BPS = 5e6  # no topology and no target known
FLOW_SETUP_S = 2.0  # --flow with a controller: wait this long for its cap before sending


class UsageError(ValueError):
    """A bad option or input file (exit code 2, one line)."""


def parse_rate(text: str) -> float:
    """``100M`` / ``2.5G`` / ``1e9`` -> bit/s."""
    t = text.strip()
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}.get(t[-1:].upper(), 1.0)
    if mult != 1.0:
        t = t[:-1]
    try:
        value = float(t) * mult
    except ValueError:
        raise UsageError(f"rate {text!r}: expected bit/s like 100M, 2.5G or 1e9") from None
    if not value > 0:
        raise UsageError(f"rate {text!r}: must be > 0")
    return value


@dataclass(frozen=True, slots=True)
class FlowArg:
    """``--flow DST_IP:BYTES``."""

    dst_ip: str
    nbytes: int


def parse_flow(text: str) -> FlowArg:
    """Parse ``DST_IP:BYTES``."""
    ip, sep, size = text.rpartition(":")
    try:
        ip_bytes(ip)
        nbytes = int(size)
    except ValueError:
        raise UsageError(f"--flow {text!r}: expected DST_IP:BYTES, e.g. 10.0.2.1:1000000") from None
    if not sep or nbytes <= 0:
        raise UsageError(f"--flow {text!r}: expected DST_IP:BYTES with BYTES > 0")
    return FlowArg(ip, nbytes)


def iface_mac(iface: str) -> str:
    """The MAC address of ``iface`` (from sysfs)."""
    try:
        return Path(f"/sys/class/net/{iface}/address").read_text().strip()
    except OSError:
        raise UsageError(f"--iface {iface}: no such interface in this namespace") from None


def namespace_interfaces() -> list[str]:
    """The interfaces of this network namespace other than loopback, sorted."""
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return []
    return sorted(n for n in names if n != "lo" and not n.startswith("bonding_"))


def default_iface() -> str:
    """The namespace's only interface (a Mininet host's ``hN-eth0``); UsageError otherwise."""
    names = namespace_interfaces()
    if len(names) != 1:
        listed = ", ".join(names) or "none"
        raise UsageError(
            f"--iface is needed: this namespace has {len(names)} interfaces ({listed})"
        )
    return names[0]


def iface_ipv4(iface: str) -> str | None:
    """The IPv4 address of ``iface`` (SIOCGIFADDR), None when it has none."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            req = struct.pack("256s", iface.encode()[:15])
            res = fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)
        except OSError:
            return None
    return socket.inet_ntoa(res[20:24])


def default_controller() -> list[str]:
    """The default agent channel when it is there (next to ``icectl run``'s API socket)."""
    from icefabric.control.agents.protocol import agent_socket_for
    from icefabric.control.daemon.paths import default_socket

    api = os.environ.get("ICECTL_SOCKET") or str(default_socket())
    path = agent_socket_for(api)
    return [str(path)] if path.exists() else []


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
            now = self.now_us()
            t = self.agent.next_timer_us()
            if t is not None and t <= now:
                self.agent.on_timer(now)
            for frame in ep.poll(now):
                self._send(frame)
            if wall >= next_report:
                next_report = wall + REPORT_EVERY_S
                self._report()
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
            verdict = "complete" if st.psn_gap_losses == 0 else "INCOMPLETE"
            lines.append(
                f"{me} <- {peer} qp {key.dst_qp:#x}: received {st.bytes_received} bytes "
                f"({st.packets_received} of {total} packets) in {secs:.3f} s, goodput "
                f"{fmt_bps(st.goodput_bps())}, lost {st.psn_gap_losses} ({pct:.1f} %), "
                f"{st.messages_received} message(s) {verdict}"
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

    1 when the work was not done, or (``--flow``/``--expect`` work) when a message sent here
    arrived with packets missing: it did not arrive whole. Schedule runs are experiments, whose
    losses are measured and reported rather than failed on."""
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


def build_parser() -> argparse.ArgumentParser:
    """The ``icefabric-host`` command line."""
    ap = argparse.ArgumentParser(
        prog="icefabric-host",
        description=(
            "Run one RoCEv2 host (endpoint + rate agent) on a network interface: send messages "
            "paced by DCQCN or ICE, answer ECN marks with CNPs, report real flow keys to the ICE "
            "controller and obey its caps. Needs CAP_NET_RAW (root) for the AF_PACKET socket."
        ),
        epilog=(
            "examples:\n"
            "  mininet> h3 icefabric-host --expect 1 &        # in the Mininet CLI: all defaults\n"
            "  mininet> h1 icefabric-host --flow h3:1000000\n"
            "  icefabric-host --iface h2-eth0 --ip 10.0.2.1 --gateway-mac 02:1c:e0:00:00:02 --expect 1\n"
            "  icefabric-host --iface h1-eth0 --ip 10.0.1.1 --gateway-mac 02:1c:e0:00:00:01 \\\n"
            "      --flow 10.0.2.1:1000000 --kind ice --line-rate 100M --rate-scale 1e-3 \\\n"
            "      --controller /run/icefabric/icectl-agents.sock --stats h1.json\n"
            "  icefabric-host --topology topo.yaml --host h1 --iface h1-eth0 --schedule s.json\n"
            "exit codes: 0 done, 1 runtime failure or a message that arrived with packets "
            "missing, 2 bad options or input files"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--iface",
        help="network interface to send and receive on (default: the namespace's only one)",
    )
    ap.add_argument(
        "--topology",
        type=Path,
        default=Path(os.environ["ICE_TOPOLOGY"]) if os.environ.get("ICE_TOPOLOGY") else None,
        help="topology spec: fills --ip/--mac/--gateway-mac/--line-rate from --host "
        "(default: $ICE_TOPOLOGY, which the Mininet bring-up sets)",
    )
    ap.add_argument(
        "--host",
        help="this host: its name or address in the topology (default: the host whose address "
        "the interface holds); reported to the controller",
    )
    ap.add_argument("--ip", help="this host's IPv4 address")
    ap.add_argument("--mac", help="this host's MAC (default: the interface's)")
    ap.add_argument("--gateway-mac", help="MAC to send to (the leaf's router MAC, or the peer's)")
    ap.add_argument(
        "--line-rate",
        default=None,
        help="NIC rate, bit/s (100M, 10G ...); default: the topology's host rate x --rate-scale "
        "when that is given, else the smaller of the topology's rate and the pace $ICE_TARGET's "
        "switches take without loss (embedded 5M, bmv2 20M)",
    )
    ap.add_argument(
        "--rate-scale",
        type=float,
        default=None,
        help="factor between the topology's link rates and the switches' queue rates (INT link "
        "rates are multiplied by it); default 1",
    )
    ap.add_argument(
        "--kind", choices=rate_kinds(), default="ice", help="rate algorithm (default ice)"
    )
    ap.add_argument(
        "--base-rtt-us",
        type=float,
        help="ICE's base RTT T in us (default: scaled from 9 us at 100G)",
    )
    ap.add_argument(
        "--mtu",
        type=int,
        default=DEFAULT_MTU,
        help=f"RoCE payload bytes per packet (default {DEFAULT_MTU})",
    )
    ap.add_argument("--seed", type=int, default=0, help="seeds the QP numbering (default 0)")
    ap.add_argument(
        "--flow",
        action="append",
        default=[],
        type=str,
        metavar="DST:BYTES",
        help="send one message of BYTES to DST (an IP, or a host name with --topology) on a new "
        "QP (repeatable)",
    )
    ap.add_argument(
        "--schedule",
        type=Path,
        help="a workload schedule (JSON, Schedule.to_dict) of which this host runs its share; needs --topology and --host",
    )
    ap.add_argument(
        "--expect", type=int, default=0, metavar="N", help="also wait until N messages arrived"
    )
    ap.add_argument(
        "--start-at",
        type=float,
        help="start sending at this wall-clock time (time.time()), to start hosts together",
    )
    ap.add_argument(
        "--linger",
        type=float,
        default=0.2,
        metavar="S",
        help="stay this long after the work is done (late CNPs, feedback; the controller keeps "
        "seeing the agent); default 0.2",
    )
    ap.add_argument("--duration", type=float, help="stop after this many seconds")
    ap.add_argument(
        "--controller",
        action="append",
        default=[],
        metavar="ADDR",
        help="controller's agent channel: a Unix socket path or tcp:HOST:PORT (repeat for a "
        "backup); default: icectl run's default agent socket when it exists; 'off': none",
    )
    ap.add_argument(
        "--controller-store",
        metavar="URL",
        help="etcd://HOST:2379[,...] where controller replicas publish their agent channels: "
        "the agent follows the primary (needs --topology-name)",
    )
    ap.add_argument(
        "--topology-name", help="with --controller-store: the topology's name (its spec's name:)"
    )
    ap.add_argument(
        "--token-file",
        type=Path,
        help="file holding this host's agent token (TCP; icectl agent-token HOST)",
    )
    ap.add_argument(
        "--stats", type=Path, help="write the host's figures here as JSON (mode 0600) at exit"
    )
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="log every message and connection event"
    )
    ap.add_argument("-q", "--quiet", action="store_true", help="no summary lines (exit code only)")
    import icefabric

    ap.add_argument("--version", action="version", version=f"%(prog)s {icefabric.__version__}")
    return ap


@dataclass(slots=True)
class HostConfig:
    """Resolved options."""

    name: str
    ip: str
    mac: str
    gateway_mac: str
    line_rate_bps: float
    iface: str = ""
    rate_scale: float = 1.0
    rate_note: str = ""  # how the pace was chosen, for the summary line
    host_names: dict[str, str] | None = None  # ip -> host name (topology)
    switch_names: dict[int, str] | None = None  # switch id -> name (topology)


def _find_host(spec: Any, what: str, topology: Path) -> Any:
    """A host of ``spec`` by name or by address."""
    try:
        return spec.host(what)
    except KeyError:
        pass
    for h in spec.hosts:
        if h.address == what:
            return h
    raise UsageError(f"--host {what}: no host of that name or address in {topology}")


def resolve(args: argparse.Namespace) -> HostConfig:
    """Fill the host's addresses and rate from the options and the topology (UsageError)."""
    iface = args.iface or default_iface()
    name, ip, gw, line = args.host, args.ip, args.gateway_mac, None
    scale = args.rate_scale if args.rate_scale is not None else 1.0
    note = ""
    host_names = switch_names = None
    if args.topology is not None:
        from icefabric.control.fabric import switch_mac
        from icefabric.topo.spec import SpecError, load_topology

        try:
            spec = load_topology(args.topology)
        except SpecError as exc:
            raise UsageError(f"{args.topology}: {str(exc).splitlines()[0]}") from None
        except OSError as exc:
            raise UsageError(f"{args.topology}: {exc.strerror}") from None
        if args.host:
            h = _find_host(spec, args.host, args.topology)
        else:
            mine = args.ip or iface_ipv4(iface)
            h = _find_host(spec, mine, args.topology) if mine else None
            if h is None:
                raise UsageError(
                    f"--host is needed: {iface} has no IPv4 address of a host in {args.topology}"
                )
        name = h.name
        ip = ip or h.address
        gw = gw or switch_mac(spec.switch(h.leaf).switch_id)
        topo_bps = spec.host_rate(h) * 1e9
        if args.rate_scale is not None:
            line = topo_bps * scale
        else:
            target = os.environ.get("ICE_TARGET", "embedded")
            pace = TARGET_PACE_BPS.get(target, DEFAULT_PACE_BPS)
            line = min(topo_bps, pace)
            if pace < topo_bps:
                note = f" (paced for {target} switches; --line-rate to change)"
        args.mac = args.mac or h.mac
        host_names = {x.address: x.name for x in spec.hosts}
        switch_names = {s.switch_id: s.name for s in spec.switches}
    elif args.host:
        name = args.host
    if not ip:
        raise UsageError("--ip is required (or --topology with --host)")
    try:
        ip_bytes(ip)
    except ValueError:
        raise UsageError(f"--ip {ip!r}: expected an IPv4 address") from None
    if not gw:
        raise UsageError("--gateway-mac is required (or --topology with --host)")
    for opt, value in (("--gateway-mac", gw), ("--mac", args.mac)):
        if value:
            try:
                mac_bytes(value)
            except ValueError as exc:
                raise UsageError(f"{opt}: {exc}") from None
    if args.line_rate is not None:
        line, note = parse_rate(args.line_rate), ""
    if line is None:
        line, note = DEFAULT_PACE_BPS, ""
    mac = args.mac or iface_mac(iface)
    return HostConfig(
        name=name or iface,
        ip=ip,
        mac=mac,
        gateway_mac=gw,
        line_rate_bps=line,
        iface=iface,
        rate_scale=scale,
        rate_note=note,
        host_names=host_names,
        switch_names=switch_names,
    )


def resolve_flow(text: str, host_names: dict[str, str] | None) -> FlowArg:
    """``--flow DST:BYTES`` where DST is an IP or (with a topology) a host name."""
    dst, sep, size = text.rpartition(":")
    if host_names:
        by_name = {v: k for k, v in host_names.items()}
        if dst in by_name:
            return parse_flow(f"{by_name[dst]}{sep}{size}")
    return parse_flow(text)


def _load_schedule(path: Path) -> Any:
    from icefabric.files import DataFileError, JsonError, parse_json, read_input
    from icefabric.traffic.workload import Schedule

    try:
        data = parse_json(read_input(path, limit=MAX_SCHEDULE_BYTES, what="a schedule"))
        return Schedule.from_dict(data)
    except DataFileError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    except JsonError as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: {str(exc).splitlines()[0]}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``icefabric-host``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        cfg = resolve(args)
        flows = [resolve_flow(f, cfg.host_names) for f in args.flow]
        schedule = None
        if args.schedule is not None:
            if args.topology is None:
                raise UsageError("--schedule needs --topology")
            schedule = _load_schedule(args.schedule)
        if args.mtu < 64 or args.mtu > 9000:
            raise UsageError(f"--mtu {args.mtu}: expected 64..9000")
        token = None
        if args.token_file is not None:
            from icefabric.control.agents.auth import read_token

            try:  # this host's token (icectl agent-token HOST), a file only its owner reads
                token = read_token(args.token_file)
            except ValueError as exc:
                raise UsageError(f"--token-file: {exc}") from None
        agent = Agent(
            cfg.name,
            cfg.ip,
            line_rate_bps=cfg.line_rate_bps,
            kind=args.kind,
            base_rtt_us=args.base_rtt_us,
            seed=args.seed,
        )
        endpoint = Endpoint(
            agent,
            mac=cfg.mac,
            gateway_mac=cfg.gateway_mac,
            mtu=args.mtu,
            cnp_interval_us=DcqcnParams().scaled(cfg.line_rate_bps).cnp_interval_us,
            link_rate_scale=cfg.rate_scale,
            granularity_us=100.0,
        )
    except (UsageError, ValueError) as exc:
        print(f"icefabric-host: {exc}", file=sys.stderr)
        return 2
    try:
        from icefabric.target.ports import open_raw_socket

        sock = open_raw_socket(cfg.iface)
    except OSError as exc:
        print(f"icefabric-host: --iface {cfg.iface}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    client = None
    host = RealTimeHost(endpoint, sock, expect_messages=args.expect)
    if not args.controller and not args.controller_store:
        args.controller = default_controller()
    args.controller = [c for c in (args.controller or []) if c != "off"]
    if args.controller or args.controller_store:
        from icefabric.control.agents.client import AgentClient

        try:
            discover = None
            addresses = list(args.controller or [])
            if args.controller_store:
                from icefabric.control.store.etcd import agent_discovery

                if not args.topology_name:
                    raise ValueError("--controller-store needs --topology-name")
                discover = agent_discovery(args.controller_store, args.topology_name)
                try:
                    addresses = discover() or addresses
                except Exception as exc:  # etcd down at start: the given addresses, or fail
                    if not addresses:
                        raise ValueError(f"--controller-store: {exc}") from None
            if not addresses:
                raise ValueError("no controller address (none published in etcd yet?)")
            client = AgentClient(
                addresses, cfg.name, token=token, on_caps=host.on_caps, discover=discover
            )
        except ValueError as exc:
            print(f"icefabric-host: --controller: {exc}", file=sys.stderr)
            sock.close()
            return 2
        client.start()
        host.controller = client
    if schedule is not None:
        from icefabric.topo.spec import load_topology
        from icefabric.traffic.workload import WorkloadExecutor

        spec = load_topology(args.topology)
        ips = {h.name: h.address for h in spec.hosts}

        def post(m: Any, _now: float) -> None:
            host.post(ips[m.dst_host], m.nbytes, m.id, job=schedule.job, flow_id=m.flow_id or "")

        host.executor = WorkloadExecutor(schedule=schedule, post=post, host=cfg.name)
        # Connect every QP of this host's share up front (reported at once), so the controller
        # can install the real keys before the first message.
        for m in schedule.messages:
            if m.src_host == cfg.name and m.flow_id is not None:
                host.open_flow(ips[m.dst_host], job=schedule.job, flow_id=m.flow_id)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: host.stop.set())
    log.info("%s ready on %s (%s, %s)", cfg.name, cfg.iface, cfg.ip, args.kind)
    if args.start_at is not None:
        host.stop.wait(max(0.0, args.start_at - time.time()))
    keys = [host.open_flow(f.dst_ip) for f in flows]  # reported to the controller at once
    # As a CCL connects its QPs before it sends: give the controller the time to bind the flows
    # to planned ones and install their paths (it then caps them); a path that changed under a
    # running flow reorders it, which RoCE counts as loss.
    if client is not None and keys and client.wait_connected(FLOW_SETUP_S):
        host.wait_for_cap(keys, FLOW_SETUP_S)
    for i, (f, key) in enumerate(zip(flows, keys, strict=True)):
        host.endpoint.post_send(key, f.nbytes, i + 1, now_us=host.now_us())
        host.posted_bytes[key] = host.posted_bytes.get(key, 0) + f.nbytes
    rc = 0
    try:
        host.run(duration_s=args.duration, linger_s=args.linger)
        rc, why = outcome(host, scheduled=schedule is not None)
        if why:
            print(f"icefabric-host: {cfg.name}: {why}", file=sys.stderr)
        if not args.quiet:
            for line in host.summary_lines(cfg.host_names, cfg.switch_names, cfg.rate_note):
                print(line, flush=True)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.report_flows(host.agent.flow_reports())
            client.close()
        sock.close()
        if args.stats is not None:
            _write_stats(args.stats, host.stats())
    return rc


def _write_stats(path: Path, data: dict[str, Any]) -> None:
    from icefabric.files import write_output

    write_output(path, json.dumps(data, indent=1, default=str), mode=0o600)


if __name__ == "__main__":
    raise SystemExit(main())
