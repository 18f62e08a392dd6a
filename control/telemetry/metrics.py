"""The controller's Prometheus endpoint: ``/metrics`` (prometheus-client) on 127.0.0.1 by default.

Every value is read from the controller when the endpoint is scraped (a collector on a registry
of this controller's own; nothing global). Metric names are listed in ``control/README.md``.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from icefabric.httpserve import BoundedWSGIServer, serve_wsgi

if TYPE_CHECKING:
    from icefabric.control.telemetry.source import MetricsSource

log = logging.getLogger(__name__)

DEFAULT_METRICS = "127.0.0.1:9479"
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(slots=True)
class LatencyTally:
    """A cumulative latency histogram in constant memory (seconds)."""

    buckets: Sequence[float] = LATENCY_BUCKETS_S
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    total: int = 0
    sum_s: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one latency."""
        self.counts[bisect.bisect_left(self.buckets, seconds)] += 1
        self.total += 1
        self.sum_s += seconds

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        """As a Prometheus histogram."""
        cum, out = 0, []
        for le, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append((repr(float(le)), cum))
        out.append(("+Inf", self.total))
        return HistogramMetricFamily(name, doc, buckets=out, sum_value=self.sum_s)


class ControllerCollector(Collector):
    """Reads one controller's telemetry, flows, agents, replans and latencies on each scrape
    (from the :class:`~icefabric.control.telemetry.source.MetricsSource` it is handed)."""

    def __init__(self, src: MetricsSource) -> None:
        self.src = src

    def collect(self) -> Iterator[Metric]:
        """Every icefabric_* metric (see control/README.md)."""
        src = self.src
        snap = src.telemetry.snapshot()
        lab = ["link", "src", "dst"]
        util = GaugeMetricFamily(
            "icefabric_link_utilisation_ratio",
            "Link utilisation from the last two INT records of its egress port (0..1)",
            labels=lab,
        )
        cap = GaugeMetricFamily(
            "icefabric_link_capacity_bps", "Link rate from the topology, bit/s", labels=lab
        )
        q = GaugeMetricFamily(
            "icefabric_queue_depth_packets",
            "Egress queue depth (packets) in the link's last INT record",
            labels=lab,
        )
        qmax = GaugeMetricFamily(
            "icefabric_queue_depth_max_packets",
            "Deepest egress queue (packets) among the link's kept INT samples",
            labels=lab,
        )
        drops = CounterMetricFamily(
            "icefabric_link_drops",
            "Packets lost on the wire: sent by one end, not received by the other",
            labels=lab,
        )
        for row in snap["links"]:
            ln = src.topo.links[row["link"]]
            values = [row["name"], ln.src, ln.dst]
            if row["utilisation"] is not None:
                util.add_metric(values, row["utilisation"])
            cap.add_metric(values, row["capacity_bps"])
            q.add_metric(values, row["qdepth"])
            qmax.add_metric(values, row["max_qdepth"])
            drops.add_metric(values, row["drops"])
        yield from (util, cap, q, qmax, drops)
        sd = CounterMetricFamily(
            "icefabric_switch_drops",
            "Packets the P4 program dropped, by switch and reason",
            labels=["switch", "reason"],
        )
        for sw, by_reason in snap["switch_drops"].items():
            for reason, v in sorted(by_reason.items()):
                sd.add_metric([sw, reason], v)
        yield sd
        c = snap["counters"]
        yield _counter("icefabric_int_reports", "INT reports decoded", c["reports"])
        yield _counter(
            "icefabric_int_reports_undecodable",
            "Report packet-ins that did not decode",
            src.reports.undecodable,
        )
        yield _counter(
            "icefabric_int_unknown_hops",
            "INT hop records naming a switch or port not in the topology",
            c["unknown_hops"],
        )
        yield _counter(
            "icefabric_path_checks",
            "Reports of planned flows checked against the plan",
            c["path_checked"],
        )
        yield _counter(
            "icefabric_path_mismatches",
            "Reports whose switches differ from the flow's planned path",
            c["path_mismatches"],
        )
        yield from self._flows()
        yield from self._agents()
        yield from self._changes()

    def _flows(self) -> Iterator[Metric]:
        src = self.src
        with src.lock:
            planned = len(src.flows)
            active = len(src.agents.active_flows())
            capped = len(src.rates.rates)
            reported = sum(len(r) for r in src.agents.flows.reported.values())
            jobs = len(src.jobs)
        flows = GaugeMetricFamily("icefabric_flows", "Flows by kind", labels=["kind"])
        flows.add_metric(["planned"], planned)
        flows.add_metric(["active"], active)
        flows.add_metric(["capped"], capped)
        flows.add_metric(["agent_reported"], reported)
        yield flows
        yield GaugeMetricFamily("icefabric_jobs", "Jobs the controller runs", value=jobs)
        yield GaugeMetricFamily(
            "icefabric_controller_active",
            "1 when this controller is primary",
            value=src.is_active(),
        )

    def _agents(self) -> Iterator[Metric]:
        src = self.src
        server = src.agents.server
        st = server.stats if server is not None else None
        yield GaugeMetricFamily(
            "icefabric_agents_connected",
            "Host agents connected now",
            value=len(server.hosts()) if server is not None else 0,
        )
        for name, doc, attr in (
            ("icefabric_agents_lost", "Agent sessions lost (no bye)", "lost"),
            ("icefabric_agents_refused", "Agent connections refused", "refused"),
            ("icefabric_agent_frames_malformed", "Agent frames ignored as malformed", "malformed"),
            ("icefabric_caps_pushes", "Cap sets pushed to agents", "caps_pushed"),
        ):
            yield _counter(name, doc, getattr(st, attr) if st is not None else 0)

    def _changes(self) -> Iterator[Metric]:
        src = self.src
        with src.lock:
            history = list(src.history)
            allocs = src.rates.count
            last_alloc = src.rates.history[-1].ms / 1e3 if src.rates.history else 0.0
            keys = src.agents.key_latency
        yield _counter("icefabric_replans", "Changes replanned and installed", len(history))
        plan, inst = LatencyTally(), LatencyTally()
        for h in history:
            plan.observe(h.plan_ms / 1e3)
            inst.observe(h.install_ms / 1e3)
        yield plan.family("icefabric_plan_latency_seconds", "Planning time of each change")
        yield inst.family(
            "icefabric_install_latency_seconds",
            "Time to write each change's moved flow entries (new paths live)",
        )
        yield keys.family(
            "icefabric_key_install_latency_seconds",
            "Time to install real flow keys after agents reported them",
        )
        yield _counter("icefabric_rate_allocations", "Max-min rate recomputations", allocs)
        yield GaugeMetricFamily(
            "icefabric_rate_allocation_seconds", "Time of the last recomputation", value=last_alloc
        )


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


class MetricsServer:
    """``/metrics`` for one controller on HOST:PORT (port 0: any free port), reading what
    ``src`` hands it (:meth:`Controller.metrics_source`)."""

    def __init__(self, src: MetricsSource, host: str = "127.0.0.1", port: int = 9479) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ControllerCollector(src))
        from icefabric.control.telemetry.fabric_metrics import FabricCollector

        self.registry.register(FabricCollector(src))
        self.host = host
        self.port = port
        self._server: BoundedWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve in a thread (OSError when the address cannot be bound): a bounded
        pool of workers, idle clients dropped, no request open for long
        (:mod:`icefabric.httpserve`)."""
        app = make_wsgi_app(self.registry)
        server, self._thread = serve_wsgi(self.host, self.port, app, name="icectl-metrics")
        self._server = server
        self.port = int(server.server_port)
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
