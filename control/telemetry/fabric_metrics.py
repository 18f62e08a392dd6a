"""Prometheus metrics of the fabric as operators chart it: ports, switches, links, flows, events.

Beside :class:`~icefabric.control.telemetry.metrics.ControllerCollector` on the same
``/metrics``; every value is read when the endpoint is scraped (port counters through the one
counters reader, :mod:`icefabric.control.telemetry.counters`, from every connected switch).
Names and labels are listed in ``control/README.md``; ``control/telemetry/grafana/`` charts them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

import icefabric
from icefabric.control.telemetry.counters import read_switch_counters
from icefabric.control.telemetry.poller import switch_ports

if TYPE_CHECKING:
    from icefabric.control.telemetry.source import MetricsSource

log = logging.getLogger(__name__)

LINK_STATES = ("up", "down", "unknown")
HEALTH_VALUE = {"ok": 0, "degraded": 1, "down": 2}


class FabricCollector(Collector):
    """Per port, switch, link and planned flow; events by kind; the health summary."""

    def __init__(self, src: MetricsSource) -> None:
        self.src = src
        self.ports = switch_ports(src.topo)
        self.peer = {(ln.src, ln.src_port): ln.dst for ln in src.topo.links}

    def collect(self) -> Iterator[Metric]:
        """Every metric of this collector (see the module docstring)."""
        yield InfoMetricFamily(
            "icefabric_build", "icectl version", value={"version": icefabric.__version__}
        )
        yield from self._ports()
        st = self.src.status()
        yield from self._switches(st)
        yield from self._links(st)
        yield from self._flows()
        yield from self._events()
        health = st.get("health", {})
        yield GaugeMetricFamily(
            "icefabric_health",
            "Health summary of icectl status: 0 ok, 1 degraded, 2 down",
            value=HEALTH_VALUE.get(str(health.get("state")), 2),
        )

    def _ports(self) -> Iterator[Metric]:
        src = self.src
        live = [name for name, c in src.pool.items() if c.is_connected]
        read = src.pool.run_all(
            lambda c: read_switch_counters(c, self.ports.get(c.name, set())),
            names=live,
            operation="metrics counters",
            raise_errors=False,
        )
        lab = ["switch", "port", "peer"]
        fams = {
            attr: CounterMetricFamily(f"icefabric_port_{name}", doc, labels=lab)
            for attr, name, doc in (
                (
                    "rx_bytes",
                    "rx_bytes",
                    "Bytes received on a switch port (ice.p4 port_rx_counter)",
                ),
                ("rx_packets", "rx_packets", "Packets received on a switch port"),
                (
                    "tx_bytes",
                    "tx_bytes",
                    "Bytes sent out of a switch port (ice.p4 port_tx_counter)",
                ),
                ("tx_packets", "tx_packets", "Packets sent out of a switch port"),
                (
                    "ecn_marked",
                    "ecn_marked_packets",
                    "Packets the switch marked CE (ECN) leaving the port (ecn_marked_counter)",
                ),
                (
                    "cnp_rx",
                    "cnp_rx_packets",
                    "DCQCN CNPs (RoCEv2 opcode 0x81) received on the port (cnp_rx_counter)",
                ),
            )
        }
        for sw in sorted(read):
            for port, count in sorted(read[sw].ports.items()):
                values = [sw, str(port), self.peer.get((sw, port), "")]
                for attr, fam in fams.items():
                    fam.add_metric(values, getattr(count, attr))
        yield from fams.values()

    def _switches(self, st: dict) -> Iterator[Metric]:  # type: ignore[type-arg]
        up = GaugeMetricFamily(
            "icefabric_switch_up",
            "1 when the switch's P4Runtime connection is up",
            labels=["switch"],
        )
        primary = GaugeMetricFamily(
            "icefabric_switch_primary",
            "1 when this controller is the switch's primary (master arbitration)",
            labels=["switch"],
        )
        failed = GaugeMetricFamily(
            "icefabric_switch_failed",
            "1 when the controller failed the switch over (flows routed around it)",
            labels=["switch"],
        )
        dead = set(self.src.failed_switches)
        for name, s in sorted(st["switches"].items()):
            up.add_metric([name], 1.0 if s["connected"] else 0.0)
            primary.add_metric([name], 1.0 if s["connected"] and s["primary"] else 0.0)
            failed.add_metric([name], 1.0 if name in dead else 0.0)
        yield from (up, primary, failed)

    def _links(self, st: dict) -> Iterator[Metric]:  # type: ignore[type-arg]
        fam = GaugeMetricFamily(
            "icefabric_link_state",
            "LLDP probe state of a fabric link: 1 for its current state (up, down, unknown)",
            labels=["link", "a", "b", "state"],
        )
        planned_down = GaugeMetricFamily(
            "icefabric_link_failed",
            "1 when the planner routes around the link (failed by probes, icectl or a switch)",
            labels=["link", "a", "b"],
        )
        probes = st.get("link_probes", {})
        for row in probes.get("links", []):
            for state in LINK_STATES:
                fam.add_metric(
                    [row["link"], row["a"], row["b"], state], 1.0 if row["state"] == state else 0.0
                )
            planned_down.add_metric(
                [row["link"], row["a"], row["b"]], 1.0 if row.get("failed") else 0.0
            )
        yield from (fam, planned_down)

    def _flows(self) -> Iterator[Metric]:
        src = self.src
        by_flow = src.telemetry.snapshot().get("mismatches_by_flow", {})
        with src.lock:
            planned = {fid: f.job for fid, f in src.flows.items()}
            rates = dict(src.rates.rates)
        mism = CounterMetricFamily(
            "icefabric_flow_path_mismatches",
            "INT reports of a planned flow whose switches differ from its planned path",
            labels=["flow", "job"],
        )
        cap = GaugeMetricFamily(
            "icefabric_flow_cap_bps",
            "The max-min fair rate cap of a planned flow, bit/s",
            labels=["flow", "job"],
        )
        for fid in sorted(planned):
            mism.add_metric([fid, planned[fid]], by_flow.get(fid, 0))
            if fid in rates:
                cap.add_metric([fid, planned[fid]], rates[fid])
        yield from (mism, cap)

    def _events(self) -> Iterator[Metric]:
        counts = dict(self.src.events.counts)
        last = dict(self.src.events.last_t)
        total = CounterMetricFamily(
            "icefabric_events",
            "Fabric events (icectl events) by kind, since the controller started",
            labels=["kind"],
        )
        when = GaugeMetricFamily(
            "icefabric_event_last_timestamp_seconds",
            "Unix time of the last event of a kind (Grafana annotations)",
            labels=["kind"],
        )
        for k in sorted(counts):
            total.add_metric([k], counts[k])
            when.add_metric([k], last[k])
        yield from (total, when)
