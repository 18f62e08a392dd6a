"""Link liveness from the data plane: LLDP probes over packet-out / packet-in.

P4Runtime has no port-status message, so the controller learns that a link died the way fabric
controllers discover links: every ``interval_s`` it sends, out of every fabric port of every
switch, an IEEE 802.1AB LLDP frame naming the sender (Chassis ID = switch name, Port ID = port
number). ``p4src/ice.p4`` punts LLDP arriving on any data port to the controller as a packet-in
with reason ``PUNT_REASON_LINK_PROBE`` and the ingress port, and never forwards it. A probe from
switch A port p received by switch B on port q proves the direction A:p -> B:q alive.

State machine, per link, evaluated once per interval (:meth:`LinkMonitor.tick`):

* a direction that saw no probe during an interval has *missed* it; a link that is up is
  declared **down** when either direction has missed ``misses`` consecutive intervals;
* a link that is down is declared **up** again when both directions have seen probes in
  ``misses`` consecutive intervals;
* **traffic is evidence too**: while a direction misses probes, the receiving port's rx packet
  counter (ice.p4's ``port_rx_counter``, through ``rx_packets``) is read each round; at
  ``misses`` it stays up if that counter grew over the last ``misses - 1`` intervals: the port
  is receiving packets, so its probes were dropped or held up with the data of a busy switch,
  not lost by the link (100 ms x 3 probes flapped loaded links). A dead direction receives
  nothing and goes down at the same round as without counters; once its data stops too, a
  direction kept up goes down ``misses`` rounds later. Without a reading (no callback, a
  failed read) the probes alone decide;
* links of a switch the controller cannot reach (or is resyncing) are frozen: with no stream
  there is no evidence either way, and switch death is the business of ``--switch-dead``;
* a probe that does not match the topology (sender port wired elsewhere, a non-fabric chassis on
  a fabric port) is kept as a miswiring warning in :meth:`LinkMonitor.status`; foreign LLDP on a
  host port (a server running lldpd) is counted per port.

The monitor only decides; the owner (:class:`icefabric.control.controller.Controller`) gets
:class:`LinkEvent` objects through ``on_change`` and runs the failure path, then fills in the
replan and install times with :meth:`LinkMonitor.complete`. Frames are built once per port
(bytes and :class:`PacketOut` precomputed); the hot path decodes TLVs with plain slicing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from icefabric.control.linkstate import (
    DirectionState,
    LinkEvent,
    LinkState,
    Miswire,
    MonitorOptions,
    ProbeCounters,
)
from icefabric.control.lldp import LldpError, LldpProbe
from icefabric.control.p4rt import PacketOut
from icefabric.control.topology import Topology
from icefabric.waiting import poll_until

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.1
DEFAULT_MISSES = 3
EVENTS_KEPT = 100


# ---------------------------------------------------------------------------------------------
# the monitor


class LinkMonitor:
    """Sends LLDP probes on every fabric port and declares links down/up from their arrival."""

    def __init__(
        self,
        topo: Topology,
        *,
        send: Callable[[str, PacketOut], None],
        on_change: Callable[[LinkEvent], None],
        interval_s: float = DEFAULT_INTERVAL_S,
        misses: int = DEFAULT_MISSES,
        reachable: Callable[[str], bool] | None = None,
        rx_packets: Callable[[str, int], int | None] | None = None,
        macs: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        initially_down: Iterable[int] = (),
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"probe interval: expected > 0 seconds, got {interval_s}")
        if misses < 1:
            raise ValueError(f"probe misses: expected >= 1, got {misses}")
        self.topo = topo
        self.opts = MonitorOptions(
            interval_s=interval_s,
            misses=misses,
            ttl_s=max(1, math.ceil(interval_s * (misses + 1))),
        )
        self._send = send
        self._on_change = on_change
        self._reachable = reachable or (lambda _s: True)
        self._rx_packets = rx_packets
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.counters = ProbeCounters()
        self._links: list[LinkState] = []
        self._by_dir: dict[tuple[str, int, str, int], tuple[LinkState, DirectionState]] = {}
        self._peer: dict[tuple[str, int], tuple[str, int]] = {}
        down_at_start = {lid & ~1 for lid in initially_down}
        for ln in topo.links:
            if ln.kind != "fabric" or ln.id % 2:
                continue
            back = topo.links[ln.id + 1]
            fwd = DirectionState(ln.id, topo.link_name(ln.id), ln.src, ln.dst, rx_port=ln.dst_port)
            rev = DirectionState(
                back.id, topo.link_name(back.id), back.src, back.dst, rx_port=ln.src_port
            )
            link = LinkState(
                name=f"{ln.src}:{ln.src_port}-{ln.dst}:{ln.dst_port}",
                lid=ln.id,
                a=ln.src,
                a_port=ln.src_port,
                b=ln.dst,
                b_port=ln.dst_port,
                dirs=(fwd, rev),
            )
            if ln.id in down_at_start:
                link.state = "down"  # e.g. taken down by the probes of a controller we replace
            self._links.append(link)
            self._by_dir[(ln.src, ln.src_port, ln.dst, ln.dst_port)] = (link, fwd)
            self._by_dir[(ln.dst, ln.dst_port, ln.src, ln.src_port)] = (link, rev)
            self._peer[(ln.src, ln.src_port)] = (ln.dst, ln.dst_port)
            self._peer[(ln.dst, ln.dst_port)] = (ln.src, ln.src_port)
        self._host_ports = {(ln.src, ln.src_port) for ln in topo.links if ln.kind == "host-down"}
        self._switches = set(topo.switches)
        macs = macs or {}
        # Precomputed: one PacketOut (frame bytes + metadata) per fabric port.
        self._probes: list[tuple[str, PacketOut]] = [
            (
                sw,
                PacketOut(
                    payload=LldpProbe(
                        chassis=sw,
                        port=port,
                        ttl_s=self.opts.ttl_s,
                        src_mac=macs.get(sw, "02:00:00:00:00:00"),
                    ).encode(),
                    metadata={"egress_port": port, "_pad0": 0},
                ),
            )
            for (sw, port) in sorted(self._peer)
        ]
        self._was_reachable: dict[str, bool] = {}
        self._last_tick: float | None = None
        self._sent_round = 0  # probes sent at the last tick
        self._rx_round = 0  # expected probes received since the last tick
        # Per switch, since the last tick: probes it received / probes it sent that arrived.
        self._rx_by: dict[str, int] = {}
        self._tx_by: dict[str, int] = {}
        self._degree: dict[str, int] = {}
        for sw, _port in self._peer:
            self._degree[sw] = self._degree.get(sw, 0) + 1
        self._miswired: dict[tuple[str, str], Miswire] = {}
        self._foreign: dict[str, int] = {}
        self._events: deque[LinkEvent] = deque(maxlen=EVENTS_KEPT)

    # ------------------------------------------------------------------ options

    @property
    def interval_s(self) -> float:
        """Seconds between probe rounds."""
        return self.opts.interval_s

    @property
    def misses(self) -> int:
        """Consecutive missed intervals that declare a link down (and seen ones that restore)."""
        return self.opts.misses

    # ------------------------------------------------------------------ thread

    def start(self) -> None:
        """Probe every interval in a thread of its own until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="icectl-linkmon", daemon=True)
        self._thread.start()
        log.info(
            "link monitor: %d links, %d probes every %.0f ms, down after %d misses",
            len(self._links),
            len(self._probes),
            self.opts.interval_s * 1e3,
            self.opts.misses,
        )

    def stop(self) -> None:
        """Stop probing (idempotent)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None

    @property
    def running(self) -> bool:
        """True while the probe thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        interval = self.opts.interval_s
        next_t = self.clock()
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # the monitor must outlive one bad round
                log.exception("link monitor round failed")
            next_t += interval
            delay = next_t - self.clock()
            if delay < -interval:  # fell more than a round behind: do not burst to catch up
                with self._lock:
                    self.counters.late_ticks += 1
                next_t = self.clock()
                delay = 0.0
            if self._stop.wait(max(0.0, delay)):
                return

    # ------------------------------------------------------------------ one round

    def tick(self, now: float | None = None) -> list[LinkEvent]:
        """Close the current interval (count misses, declare changes), then send the probes."""
        now = self.clock() if now is None else now
        fired: list[LinkEvent] = []
        suspects: list[LinkState] = []
        with self._lock:
            reach = {sw: bool(self._reachable(sw)) for sw in self._switches}
            self.counters.ticks += 1
            # A round where no probe at all came back, or that started late, says more about
            # this host (a stalled controller or switch process) than about any link: it does
            # not count, neither as a miss nor as a sighting.
            late = (
                self._last_tick is not None and now - self._last_tick > 1.5 * self.opts.interval_s
            )
            stalled = late or (self._rx_round == 0 and self._sent_round > 0)
            if stalled:
                self.counters.stalled += 1
            # A link counts only when both ends were reachable for the whole interval (on the
            # first round nothing was sent yet, so every link is still frozen).
            for link in self._links:
                ev = self._evaluate(link, reach, now, stalled=stalled)
                if ev is not None:
                    fired.append(ev)
                elif self._suspect(link):
                    suspects.append(link)
            self._was_reachable = reach
            self._last_tick = now
            self._rx_round = 0
            self._rx_by.clear()
            self._tx_by.clear()
        if suspects:
            fired += self._check_traffic(suspects, now)
        for ev in fired:
            self._on_change(ev)
        self._send_probes(reach)
        return fired

    def _suspect(self, link: LinkState) -> bool:
        """Whether ``link`` needs its rx counters read: a direction of a link that is up is
        missing probes (caller holds the lock)."""
        if self._rx_packets is None or link.frozen or link.state != "up":
            return False
        return any(d.missed >= 1 for d in link.dirs)

    def _check_traffic(self, links: list[LinkState], now: float) -> list[LinkEvent]:
        """Read the rx counters of the receiving ports of ``links``' missing directions
        (outside the lock: a switch read); a direction at its misses stays up while its
        counter grew over the last misses - 1 intervals; the others go down."""
        assert self._rx_packets is not None
        wanted = {(d.dst, d.rx_port) for link in links for d in link.dirs if d.missed >= 1}
        counts: dict[tuple[str, int], int | None] = {}
        for sw, port in sorted(wanted):
            try:
                counts[(sw, port)] = self._rx_packets(sw, port)
            except Exception as exc:  # no reading: the probes alone decide
                log.debug("%s: rx counter of port %d not read: %s", sw, port, exc)
                counts[(sw, port)] = None
        fired: list[LinkEvent] = []
        m = self.opts.misses
        with self._lock:
            for link in links:
                if link.frozen or link.state != "up":
                    continue
                dead = []
                for d in link.dirs:
                    if d.missed < 1:
                        continue
                    window = d.rx_window
                    window.append(counts.get((d.dst, d.rx_port)))
                    del window[:-m]
                    if d.missed < m:
                        continue
                    first, last = window[0], window[-1]
                    if len(window) > 1 and first is not None and last is not None and last > first:
                        self.counters.alive_by_traffic += 1
                        if d.missed == m:
                            log.info("%s: probes lost but packets arriving: kept up", d.name)
                    else:
                        dead.append(d)
                if dead:
                    fired.append(self._declare_down(link, dead, now))
        return fired

    def _evaluate(
        self, link: LinkState, reach: Mapping[str, bool], now: float, *, stalled: bool = False
    ) -> LinkEvent | None:
        ends = (link.a, link.b)
        if not all(reach[s] and self._was_reachable.get(s, False) for s in ends):
            link.frozen = True
            for d in link.dirs:
                d.seen, d.missed, d.streak, d.first_back = False, 0, 0, None
                d.round_count = 0  # else its probes while frozen outweigh the first thawed round
                d.probed_since = None
                d.rx_window.clear()
            return None
        link.frozen = False
        for d in link.dirs:
            if d.probed_since is None:  # both ends were reachable at the last tick: probed since
                d.probed_since = self._last_tick
        if stalled:
            return None  # keep the flags: probes of this round may still arrive late
        for d in link.dirs:
            if d.seen:
                d.missed = 0
                d.rx_window.clear()
                d.streak += 1
            elif self._has_evidence(d):
                d.missed += 1
                d.streak = 0
                d.first_back = None
            d.seen = False
            d.round_count = 0
        m = self.opts.misses
        if link.state == "up" and any(d.missed >= m for d in link.dirs):
            if self._rx_packets is not None:
                return None  # the data plane's counters decide first (_check_traffic)
            return self._declare_down(link, [d for d in link.dirs if d.missed >= m], now)
        if link.state == "down" and all(d.streak >= m for d in link.dirs):
            backs = [d.first_back for d in link.dirs if d.first_back is not None]
            return self._declare(
                link,
                "up",
                now,
                detection_ms=(now - min(backs)) * 1e3 if backs else None,
                reason=f"probes back in both directions for {m} interval(s)",
            )
        return None

    def _declare_down(self, link: LinkState, dead: list[DirectionState], now: float) -> LinkEvent:
        # Detection counts from the last sign of life: a direction's last probe, or, for one
        # that has received none since it was last probed (cut before its first probe came
        # back, or frozen while a switch was away), the round its probes were first sent.
        alive = [t for t in (d.alive_since() for d in dead) if t is not None]
        m = self.opts.misses
        return self._declare(
            link,
            "down",
            now,
            detection_ms=(now - max(alive)) * 1e3 if alive else None,
            reason=" and ".join(
                d.name + ("" if d.seen_while_probed() else " (no probe since probing began)")
                for d in dead
            )
            + f": no probe in {m} interval(s) of {self.opts.interval_s * 1e3:.0f} ms",
        )

    def _has_evidence(self, d: DirectionState) -> bool:
        """Whether a missing probe of ``d`` this round says something about the link.

        The receiver must have passed other probes to the controller and the sender's other
        probes must have arrived somewhere: then both switches were processing probes, and only
        this link lost them. Without that (a switch busy with a burst of traffic delays every
        probe it handles, and the embedded target shares the host's CPU) the round does not
        count. A switch with a single fabric link cannot offer the evidence and is not asked.
        """
        rx_ok = self._degree.get(d.dst, 0) <= 1 or self._rx_by.get(d.dst, 0) > d.round_count
        tx_ok = self._degree.get(d.src, 0) <= 1 or self._tx_by.get(d.src, 0) > d.round_count
        return rx_ok and tx_ok

    def _declare(
        self, link: LinkState, kind: str, now: float, *, detection_ms: float | None, reason: str
    ) -> LinkEvent:
        link.state = kind
        link.since = now
        link.events += 1
        ev = LinkEvent(
            link=link.name,
            lid=link.lid,
            a=link.a,
            b=link.b,
            kind=kind,
            at=now,
            wall=time.time(),
            detection_ms=detection_ms,
            reason=reason,
        )
        self._events.append(ev)
        log.warning(
            "link %s %s (%s)%s",
            link.name,
            kind,
            reason,
            f"; detected {detection_ms:.0f} ms after the last sign of life"
            if kind == "down" and detection_ms is not None
            else "",
        )
        return ev

    def _send_probes(self, reach: Mapping[str, bool]) -> None:
        sent = errors = 0
        for sw, pkt in self._probes:
            if not reach.get(sw, False):
                continue
            try:
                self._send(sw, pkt)
                sent += 1
            except Exception as exc:  # a stream that just went down: the next round retries
                errors += 1
                log.debug("%s: probe on port %s not sent: %s", sw, pkt.metadata["egress_port"], exc)
        with self._lock:
            self.counters.sent += sent
            self.counters.send_errors += errors
            self._sent_round = sent

    # ------------------------------------------------------------------ probes back

    def on_probe(
        self, switch: str, ingress_port: int, payload: bytes, now: float | None = None
    ) -> None:
        """A LINK_PROBE packet-in: ``switch`` received ``payload`` on ``ingress_port``."""
        now = self.clock() if now is None else now
        try:
            probe = LldpProbe.decode(payload)
        except LldpError as exc:
            with self._lock:
                self.counters.undecodable += 1
                self._miswire(
                    f"{switch}:{ingress_port} received undecodable LLDP ({exc})",
                    self._expected_text(switch, ingress_port),
                    now,
                )
            return
        with self._lock:
            self.counters.received += 1
            hit = self._by_dir.get((probe.chassis, probe.port, switch, ingress_port))
            if hit is not None:
                self._rx_round += 1
                self._rx_by[switch] = self._rx_by.get(switch, 0) + 1
                self._tx_by[probe.chassis] = self._tx_by.get(probe.chassis, 0) + 1
                _link, d = hit
                d.round_count += 1
                d.seen = True
                d.received += 1
                d.last_seen = now
                if d.first_back is None:
                    d.first_back = now
                return
            receiver = (switch, ingress_port)
            if probe.chassis not in self._switches and receiver in self._host_ports:
                key = f"{switch}:{ingress_port}"
                self._foreign[key] = self._foreign.get(key, 0) + 1
                if self._foreign[key] == 1:
                    log.info("%s: LLDP from %r on a host port (counted)", key, probe.chassis)
                return
            self._miswire(
                f"{probe.chassis}:{probe.port}->{switch}:{ingress_port}",
                self._expected_text(switch, ingress_port, probe.chassis, probe.port),
                now,
            )

    def _expected_text(
        self, switch: str, port: int, sender: str | None = None, sender_port: int | None = None
    ) -> str:
        parts = []
        peer = self._peer.get((switch, port))
        if peer is not None:
            parts.append(f"{switch}:{port} is wired to {peer[0]}:{peer[1]}")
        elif (switch, port) in self._host_ports:
            parts.append(f"{switch}:{port} is a host port")
        else:
            parts.append(f"{switch}:{port} is not in the topology")
        if sender is not None and sender_port is not None:
            speer = self._peer.get((sender, sender_port))
            if speer is not None:
                parts.append(f"{sender}:{sender_port} is wired to {speer[0]}:{speer[1]}")
            elif sender not in self._switches:
                parts.append(f"{sender!r} is not a switch of the topology")
            else:
                parts.append(f"{sender}:{sender_port} is not a fabric port")
        return "; ".join(parts)

    def _miswire(self, seen: str, expected: str, now: float) -> None:
        """Record a probe the topology does not explain (caller holds the lock)."""
        rec = self._miswired.get((seen, expected))
        if rec is None:
            rec = self._miswired[(seen, expected)] = Miswire(seen, expected, first=now)
            log.warning("miswiring: %s (topology: %s)", seen, expected)
        rec.count += 1
        rec.last = now

    # ------------------------------------------------------------------ results

    def complete(
        self,
        ev: LinkEvent,
        report: Any | None = None,
        *,
        paths_installed_at: float | None = None,
        done_at: float | None = None,
        note: str | None = None,
    ) -> None:
        """Record what the controller did for ``ev`` (a ChangeReport, or a note why nothing)."""
        with self._lock:
            if report is not None:
                ev.moved = int(report.moved)
                ev.plan_ms = float(report.plan_ms)
                ev.install_ms = float(report.install_ms)
                ev.base_ms = float(report.base_ms)
            ev.paths_installed_at = paths_installed_at
            ev.done_at = done_at
            ev.note = note

    def events(self, limit: int | None = None) -> list[LinkEvent]:
        """The most recent events, oldest first."""
        with self._lock:
            evs = list(self._events)
        return evs if limit is None else evs[-limit:] if limit else []

    def wait_handled(
        self, seen: int, kind: str, a: str, b: str, timeout: float
    ) -> LinkEvent | None:
        """The first ``kind`` event of link a-b after the first ``seen`` events, once the
        controller has acted on it (its consequence installed, or a note why not); None at the
        deadline."""
        found: list[LinkEvent] = []

        def handled() -> bool:
            for ev in self.events()[seen:]:
                if {ev.a, ev.b} == {a, b} and ev.kind == kind:
                    if ev.done_at is not None or ev.note is not None:
                        found.append(ev)
                        return True
                    break
            return False

        return found[0] if poll_until(handled, timeout, 0.005) else None

    def link_state(self, name: str) -> str:
        """ "up", "down" or "unknown" (an end switch unreachable) for a link name or 'a-b'."""
        with self._lock:
            for link in self._links:
                if name in (link.name, f"{link.a}-{link.b}", f"{link.b}-{link.a}"):
                    return "unknown" if link.frozen else link.state
        raise KeyError(name)

    def status(self, now: float | None = None) -> dict[str, Any]:
        """Everything icectl links shows: options, counters, links, events, miswirings."""
        now = self.clock() if now is None else now
        with self._lock:
            links = [link.to_status(now) for link in self._links]
            c = self.counters
            return {
                "enabled": True,
                "running": self.running,
                "interval_ms": self.opts.interval_s * 1e3,
                "misses": self.opts.misses,
                "rounds": c.ticks,
                "probes_sent": c.sent,
                "probes_received": c.received,
                "send_errors": c.send_errors,
                "undecodable": c.undecodable,
                "late_rounds": c.late_ticks,
                "stalled_rounds": c.stalled,
                "alive_by_traffic": c.alive_by_traffic,
                "links": links,
                "down": [x["link"] for x in links if x["state"] == "down"],
                "events": [e.to_dict() for e in self._events],
                "miswired": [m.to_status(now) for m in self._miswired.values()],
                "foreign_lldp": dict(self._foreign),
            }
