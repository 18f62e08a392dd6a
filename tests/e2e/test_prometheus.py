"""A real Prometheus (Debian's ``prometheus``, installed by ``make setup``) on loopback scrapes
``icectl run``'s /metrics while a flow crosses a Mininet fabric, with the repository's scrape
configuration (``control/telemetry/grafana/prometheus.yml``, only its target and interval
changed); PromQL queries return the series the Grafana dashboard charts: per-port counters that
grew with the flow, every switch up and primary, every link's probe state."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

# a loaded 2-core machine: bring-up, compile, pingall and teardown take minutes
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

from _mininet import require_mininet  # noqa: E402

require_mininet()
if shutil.which("prometheus") is None:
    pytest.skip("prometheus is not installed (make setup installs it)", allow_module_level=True)

from test_mininet_agents import FLOW_BYTES, _host_cmd, fabric  # noqa: E402, F401

from icefabric.topo.spec import TopologySpec  # noqa: E402
from icefabric.waiting import poll_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRAPE = ROOT / "control" / "telemetry" / "grafana" / "prometheus.yml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_prometheus_scrapes_the_controller_during_traffic(
    fabric: tuple[TopologySpec, Any, Path, int],  # noqa: F811
    tmp_path: Path,
) -> None:
    spec, net, sock, metrics_port = fabric
    cfg = yaml.safe_load(SCRAPE.read_text())
    cfg["global"]["scrape_interval"] = "1s"
    cfg["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{metrics_port}"]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    port = _free_port()
    with (tmp_path / "prometheus.log").open("wb") as log:
        prom = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        assert poll_until(lambda: _ready(port), 60, 0.2), (tmp_path / "prometheus.log").read_text()
        leaf = spec.hosts[0].leaf

        def tx_packets() -> float:
            rows = _query(port, f'sum(icefabric_port_tx_packets_total{{switch="{leaf}"}})')
            return float(rows[0]["value"][1]) if rows else -1.0

        assert poll_until(lambda: tx_packets() >= 0, 60, 0.5), "no scrape of the controller"
        before = tx_packets()
        # the experiment: one RoCEv2 flow across the fabric while Prometheus scrapes
        topo = tmp_path / "topo.yaml"
        agents = sock.with_name("icectl-agents.sock")
        src, dst = spec.hosts[0], spec.hosts[1]
        rx = net.get(dst.name).popen(
            [*_host_cmd(topo, spec, dst.name, agents, tmp_path / "rx.json"), "--expect", "1"]
        )
        tx = net.get(src.name).popen(
            [
                *_host_cmd(topo, spec, src.name, agents, tmp_path / "tx.json"),
                "--flow",
                f"{dst.address}:{FLOW_BYTES}",
            ]
        )
        try:
            assert tx.wait(timeout=120) == 0
            rx.wait(timeout=120)
        finally:
            for p in (tx, rx):
                if p.poll() is None:
                    p.kill()
        # the flow's ~100 packets out of the source leaf, seen by Prometheus
        assert poll_until(lambda: tx_packets() >= before + FLOW_BYTES // 1024, 60, 0.5), (
            before,
            tx_packets(),
        )
        up = _query(port, "sum(icefabric_switch_up) and sum(icefabric_switch_primary)")
        assert float(up[0]["value"][1]) == len(spec.switches)
        links = _query(port, 'icefabric_link_state{state="up"} == 1')
        assert len(links) == len(spec.links), links
        rate = _query(port, "rate(icefabric_port_tx_bytes_total[30s]) > 0")
        assert {r["metric"]["switch"] for r in rate} >= {leaf}
        assert all(r["metric"]["job"] == "icefabric" for r in rate)
    finally:
        prom.terminate()
        prom.wait(timeout=30)
