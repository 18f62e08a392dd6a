"""INT reports and switch counters as per-link and per-queue time series with bounded memory.

Each INT hop record names a switch (``switch_id``) and the port the packet left by, which is one
directed link of the topology (the last hop's is the leaf's host port, the link to the host).
For every such link the store keeps:

* **utilisation**: bits sent between two hop records of the same port (``tx_bytes`` difference)
  over the time between them (``egress_ts``, microseconds), divided by the port's rate
  (``link_rate_mbps``); computed once at least ``min_interval_us`` passed since the reference
  record, so back-to-back records do not give noise;
* **queue depth** of the port's egress queue, in packets, when the packet was enqueued and
  dequeued (the queue the data traffic uses: INT records the packet's own queue);
* **drops** on the wire: from the switches' port counters (``add_counters``), packets sent out of
  A's port minus packets received at B's port since the first poll (tail drops inside a switch's
  traffic manager are not visible through P4Runtime counters); and per switch the program's
  drops by reason.

Samples are kept in a ring per link (``samples`` each), and only links of the topology are
kept (a record naming an unknown switch or port is counted and dropped), so memory is bounded
by links x samples whatever arrives. A report of a known flow is also checked against its
planned path (switch by switch): mismatches are counted with the latest examples.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from icefabric.control.topology import Topology, TopologyError

log = logging.getLogger(__name__)

OverTarget = Callable[[dict[int, float]], None]  # link id -> measured bit/s


@dataclass(slots=True, frozen=True)
class Sample:
    """One point of a link's series."""

    t: float  # wall clock when the report arrived
    util: float | None  # None until a rate could be computed
    enq_qdepth: int
    deq_qdepth: int


@dataclass(slots=True)
class LinkSeries:
    """Everything the store knows about one directed link."""

    link: int
    name: str
    capacity_bps: float
    samples: deque[Sample]
    ref_tx: int | None = None  # tx_bytes / egress_ts of the reference hop record
    ref_ts: int | None = None
    util: float | None = None
    enq_qdepth: int = 0
    deq_qdepth: int = 0
    records: int = 0
    last_seen: float = 0.0
    drops: int = 0  # packets lost on the wire (port counters), cumulative

    def current(self) -> dict[str, Any]:
        """The link's current state as plain data."""
        enq = [s.enq_qdepth for s in self.samples]
        return {
            "link": self.link,
            "name": self.name,
            "capacity_bps": self.capacity_bps,
            "utilisation": self.util,
            "qdepth": self.enq_qdepth,
            "deq_qdepth": self.deq_qdepth,
            "max_qdepth": max(enq) if enq else 0,
            "drops": self.drops,
            "records": self.records,
            "samples": len(self.samples),
            "last_seen": self.last_seen,
        }


@dataclass(slots=True)
class _PortCounters:
    rx0: int
    tx0: int
    rx: int
    tx: int


@dataclass(slots=True)
class StoreCounters:
    """How many reports and hop records the store saw and what it did with them."""

    reports: int = 0
    hop_records: int = 0
    unknown_hops: int = 0  # switch id / port not in the topology: not stored
    path_checked: int = 0
    path_mismatches: int = 0
    over_target_events: int = 0
    counter_polls: int = 0


class TelemetryStore:
    """Per-link and per-queue series from INT reports and port counters (thread-safe)."""

    def __init__(
        self,
        topo: Topology,
        *,
        samples: int = 256,
        min_interval_us: int = 1000,
        target: float = 0.95,
        planned_path: Callable[[str], tuple[str, ...] | None] | None = None,
        on_over_target: OverTarget | None = None,
        over_target_every_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if samples < 1:
            raise ValueError(f"telemetry samples per link: expected >= 1, got {samples}")
        self.topo = topo
        self.samples = samples
        self.min_interval_us = min_interval_us
        self.target = target
        self._planned_path = planned_path
        self._on_over_target = on_over_target
        self._over_every = over_target_every_s
        self._last_over = float("-inf")
        self._clock = clock
        self._lock = threading.Lock()
        self._switch_by_id = {s.switch_id: s.name for s in topo.spec.switches}
        self._series: dict[int, LinkSeries] = {}
        self._ports: dict[tuple[str, int], _PortCounters] = {}
        self.switch_drops: dict[str, dict[str, int]] = {}  # switch -> reason -> packets
        self.counters = StoreCounters()
        self.mismatch_examples: deque[dict[str, Any]] = deque(maxlen=10)
        self.mismatches_by_flow: dict[str, int] = {}  # planned flows only: bounded by the plan

    # -- input -----------------------------------------------------------------------------

    def add_report(self, rep: Mapping[str, Any]) -> None:
        """Take one decoded report (``telemetry.reports.decode_report`` plus ``flow``)."""
        now = self._clock()
        over: dict[int, float] = {}
        actual: list[str] = []
        with self._lock:
            self.counters.reports += 1
            for hop in rep.get("hops", []):
                self.counters.hop_records += 1
                sw = self._switch_by_id.get(int(hop.get("switch_id", -1)))
                if sw is None:
                    self.counters.unknown_hops += 1
                    continue
                actual.append(sw)
                try:
                    lid = self.topo.link_at(sw, int(hop.get("egress_port", -1)))
                except TopologyError:
                    self.counters.unknown_hops += 1
                    continue
                s = self._series_of(lid)
                util = self._update(s, hop, now)
                if util is not None and util > self.target:
                    over[lid] = util * s.capacity_bps
            self._check_path(rep, actual, now)
        if over:
            self._over_target(over, now)

    def _series_of(self, lid: int) -> LinkSeries:
        s = self._series.get(lid)
        if s is None:
            ln = self.topo.links[lid]
            s = LinkSeries(
                link=lid,
                name=self.topo.link_name(lid),
                capacity_bps=ln.rate_gbps * 1e9,
                samples=deque(maxlen=self.samples),
            )
            self._series[lid] = s
        return s

    def _update(self, s: LinkSeries, hop: Mapping[str, Any], now: float) -> float | None:
        tx, ts = int(hop.get("tx_bytes", 0)), int(hop.get("egress_ts", 0))
        rate_mbps = int(hop.get("link_rate_mbps", 0)) or s.capacity_bps / 1e6
        s.records += 1
        s.last_seen = now
        s.enq_qdepth = int(hop.get("qdepth", 0))
        s.deq_qdepth = int(hop.get("deq_qdepth", 0))
        util = None
        if s.ref_ts is None or s.ref_tx is None or ts < s.ref_ts or tx < s.ref_tx:
            s.ref_tx, s.ref_ts = tx, ts  # first record, or a switch restart reset the counters
        elif ts - s.ref_ts >= self.min_interval_us:
            util = (tx - s.ref_tx) * 8.0 / (ts - s.ref_ts) / rate_mbps  # bits/us = Mbit/s
            s.util = util
            s.ref_tx, s.ref_ts = tx, ts
        s.samples.append(Sample(now, util, s.enq_qdepth, s.deq_qdepth))
        return util

    def _check_path(self, rep: Mapping[str, Any], actual: list[str], now: float) -> None:
        flow = rep.get("flow")
        if self._planned_path is None or not isinstance(flow, str):
            return
        planned = self._planned_path(flow)
        if planned is None:
            return
        self.counters.path_checked += 1
        if tuple(actual) != planned:
            self.counters.path_mismatches += 1
            self.mismatches_by_flow[flow] = self.mismatches_by_flow.get(flow, 0) + 1
            self.mismatch_examples.append(
                {
                    "flow": flow,
                    "planned": list(planned),
                    "actual": actual,
                    "tag": rep.get("tag"),
                    "time": now,
                }
            )

    def _over_target(self, over: dict[int, float], now: float) -> None:
        with self._lock:
            self.counters.over_target_events += 1
            if self._on_over_target is None or now - self._last_over < self._over_every:
                return
            self._last_over = now
        try:
            self._on_over_target(over)
        except Exception:  # telemetry must keep flowing whatever the consumer does
            log.exception("telemetry: over-target handler failed")

    def add_counters(
        self,
        ports: Mapping[str, Mapping[int, tuple[int, int]]],
        drops: Mapping[str, Mapping[str, int]],
    ) -> None:
        """One poll of the switches: ``{switch: {port: (rx packets, tx packets)}}`` and
        ``{switch: {drop reason: packets}}`` (cumulative counters)."""
        with self._lock:
            self.counters.counter_polls += 1
            for sw, per_port in ports.items():
                for port, (rx, tx) in per_port.items():
                    pc = self._ports.get((sw, port))
                    if pc is None or rx < pc.rx or tx < pc.tx:  # new, or counters were reset
                        self._ports[(sw, port)] = _PortCounters(rx0=rx, tx0=tx, rx=rx, tx=tx)
                    else:
                        pc.rx, pc.tx = rx, tx
            for sw, by_reason in drops.items():
                self.switch_drops[sw] = {r: int(v) for r, v in by_reason.items() if v}
            for ln in self.topo.links:
                if ln.kind != "fabric":
                    continue
                a = self._ports.get((ln.src, ln.src_port))
                b = self._ports.get((ln.dst, ln.dst_port))
                if a is None or b is None:
                    continue
                lost = (a.tx - a.tx0) - (b.rx - b.rx0)
                s = self._series_of(ln.id)
                s.drops = max(s.drops, lost)

    # -- views -----------------------------------------------------------------------------

    def links(self) -> list[dict[str, Any]]:
        """The current state of every link the store has data for, by link id."""
        with self._lock:
            return [self._series[k].current() for k in sorted(self._series)]

    def series(self, link: int) -> list[dict[str, Any]]:
        """The samples of one link, oldest first."""
        with self._lock:
            s = self._series.get(link)
            return [
                {
                    "t": x.t,
                    "utilisation": x.util,
                    "qdepth": x.enq_qdepth,
                    "deq_qdepth": x.deq_qdepth,
                }
                for x in (s.samples if s is not None else ())
            ]

    def snapshot(self) -> dict[str, Any]:
        """Everything for ``icectl int`` / ``top``: links, counters, drops, mismatches."""
        links = self.links()
        with self._lock:
            c = self.counters
            return {
                "links": links,
                "switch_drops": {k: dict(v) for k, v in sorted(self.switch_drops.items())},
                "counters": {
                    "reports": c.reports,
                    "hop_records": c.hop_records,
                    "unknown_hops": c.unknown_hops,
                    "path_checked": c.path_checked,
                    "path_mismatches": c.path_mismatches,
                    "over_target_events": c.over_target_events,
                    "counter_polls": c.counter_polls,
                },
                "mismatches": list(self.mismatch_examples),
                "mismatches_by_flow": dict(sorted(self.mismatches_by_flow.items())),
                "target": self.target,
            }
