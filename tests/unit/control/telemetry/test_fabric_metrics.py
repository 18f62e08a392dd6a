"""The fabric's Prometheus metrics against a controller with no switch behind it, and the
Grafana dashboard and scrape config in the repository checked against what is served."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from icefabric.control.controller import Controller
from icefabric.control.telemetry.fabric_metrics import FabricCollector
from icefabric.control.telemetry.metrics import ControllerCollector
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[4]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
GRAFANA = ROOT / "control" / "telemetry" / "grafana"
JOB = {
    "name": "fanin",
    "hosts": ["h1", "h3", "h5"],
    "phases": [
        {"name": "p1", "collective": "send-recv", "pairs": [[0, 2], [1, 2]], "message_bytes": 1024}
    ],
}
FLOW = "fanin/p1/c0/r0->r2"  # h1 -> h5


@pytest.fixture
def ctl(offline_controller: Callable[..., Controller], tmp_path: Path) -> Iterator[Controller]:
    c = offline_controller(SPEC, tmp_path / "state.json")
    c.start_worker()
    c.add_job(JOB)
    try:
        yield c
    finally:
        c.stop()


def _scrape(ctl: Controller) -> str:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ControllerCollector(ctl.metrics_source()))
    reg.register(FabricCollector(ctl.metrics_source()))
    return generate_latest(reg).decode()


def test_switch_flow_event_and_health_metrics(ctl: Controller) -> None:
    planned = ctl.agents.planned_path(FLOW)
    assert planned is not None
    wrong = [planned[0], "spine2" if "spine1" in planned else "spine1", planned[-1]]
    ids = {s.name: s.switch_id for s in SPEC.switches}
    ctl.telemetry.add_report(
        {
            "flow": FLOW,
            "tag": 1,
            "hops": [
                {
                    "switch_id": ids[sw],
                    "egress_port": 1,
                    "qdepth": 0,
                    "deq_qdepth": 0,
                    "tx_bytes": 0,
                    "egress_ts": 0,
                    "link_rate_mbps": 100_000,
                }
                for sw in wrong
            ],
        }
    )
    body = _scrape(ctl)
    assert 'icefabric_switch_up{switch="spine1"} 0.0' in body  # nothing behind it
    assert 'icefabric_switch_primary{switch="leaf1"} 0.0' in body
    assert "icefabric_health 2.0" in body  # no switch held: down
    assert f'icefabric_flow_path_mismatches_total{{flow="{FLOW}",job="fanin"}} 1.0' in body
    assert 'icefabric_flow_path_mismatches_total{flow="fanin/p1/c0/r1->r2",job="fanin"} 0.0' in body
    assert 'icefabric_events_total{kind="job_add"} 1.0' in body
    assert 'icefabric_build_info{version="' in body
    assert "# TYPE icefabric_port_rx_bytes_total counter" in body
    assert "# TYPE icefabric_port_ecn_marked_packets_total counter" in body
    assert "# TYPE icefabric_port_cnp_rx_packets_total counter" in body


def _served_names(ctl: Controller) -> set[str]:
    names = set()
    for line in _scrape(ctl).splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            names.add(name)
            if kind == "counter":
                names.add(name + "_total")
            if kind == "histogram":
                names |= {name + "_bucket", name + "_sum", name + "_count"}
            if kind == "info":
                names.add(name + "_info")
    return names


def test_the_grafana_dashboard_uses_the_schema_and_only_served_metrics(ctl: Controller) -> None:
    dash = json.loads((GRAFANA / "ice-fabric.json").read_text())
    # the dashboard-model fields Grafana's import needs and this file uses
    assert isinstance(dash["title"], str) and re.fullmatch(r"[a-z0-9-]{1,40}", dash["uid"])
    assert isinstance(dash["schemaVersion"], int) and dash["schemaVersion"] >= 36
    assert set(dash["time"]) == {"from", "to"}
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource"]
    served = _served_names(ctl)
    ids = set()
    exprs = []
    for p in dash["panels"]:
        assert p["type"] in {"stat", "timeseries", "heatmap", "table", "gauge"}
        assert p["id"] not in ids
        ids.add(p["id"])
        g = p["gridPos"]
        assert set(g) == {"x", "y", "w", "h"} and g["x"] >= 0 and g["x"] + g["w"] <= 24
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        exprs += [t["expr"] for t in p["targets"]]
    annotations = [a for a in dash["annotations"]["list"] if "expr" in a]
    assert annotations, "events as annotations"
    exprs += [a["expr"] for a in annotations]
    for expr in exprs:
        used = set(re.findall(r"\bicefabric_[a-z_]+", expr))
        assert used and used <= served, f"{expr}: {sorted(used - served)} not served"


def test_the_scrape_config_targets_the_default_metrics_address() -> None:
    from icefabric.control.telemetry.metrics import DEFAULT_METRICS

    cfg = yaml.safe_load((GRAFANA / "prometheus.yml").read_text())
    (job,) = cfg["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [DEFAULT_METRICS]
