"""A real Prometheus (Debian's ``prometheus``, installed by ``make setup``) on loopback scrapes
``icectl run``'s /metrics while a flow crosses a Mininet fabric, with the repository's scrape
configuration as an operator runs it (``control/telemetry/grafana/prometheus.yml``, only its
target changed: its 5 s interval, the dashboard's 1 m rate windows); PromQL queries return the
series the Grafana dashboard charts: the flow's bytes on the receiver's port and their rate,
every switch up and primary, every link's probe state; and no scrape of the run failed."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import time
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
        src, dst = spec.hosts[0], spec.hosts[1]
        # the receiver's host port: no link probe leaves by it, so what it sends is the flow's
        at_dst = f'switch="{dst.leaf}",port="{dst.port}"'

        def rx_host_bytes() -> float:
            rows = _query(port, f"icefabric_port_tx_bytes_total{{{at_dst}}}")
            return float(rows[0]["value"][1]) if rows else -1.0

        assert poll_until(lambda: rx_host_bytes() >= 0, 60, 0.5), "no scrape of the controller"
        before = rx_host_bytes()
        t_before = time.monotonic()
        # the experiment: one RoCEv2 flow across the fabric while Prometheus scrapes
        topo = tmp_path / "topo.yaml"
        agents = sock.with_name("icectl-agents.sock")
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
        # the flow's bytes out of the receiver's port, seen by Prometheus (next scrape, 5 s)
        assert poll_until(lambda: rx_host_bytes() >= before + FLOW_BYTES, 60, 0.5), (
            before,
            rx_host_bytes(),
        )
        up = _query(port, "sum(icefabric_switch_up) and sum(icefabric_switch_primary)")
        assert float(up[0]["value"][1]) == len(spec.switches)
        links = _query(port, 'icefabric_link_state{state="up"} == 1')
        assert len(links) == len(spec.links), links
        # the dashboard's query (1 m window), widened to reach back to the sample before the
        # flow where the flow took longer than that (a loaded host)
        window = max(60, math.ceil(time.monotonic() - t_before) + 10)
        rate = _query(port, f"rate(icefabric_port_tx_bytes_total{{{at_dst}}}[{window}s]) > 0")
        assert len(rate) == 1 and rate[0]["metric"]["job"] == "icefabric", rate
        assert {r["metric"]["switch"] for r in rate} == {dst.leaf}
        # every scrape of the run answered within the timeout (a slow one is a gap in the charts)
        scrapes = _query(port, 'count_over_time(up{job="icefabric"}[10m])')
        ok = _query(port, 'min_over_time(up{job="icefabric"}[10m])')
        took = _query(port, 'max_over_time(scrape_duration_seconds{job="icefabric"}[10m])')
        assert float(ok[0]["value"][1]) == 1.0, (scrapes, took)
        print(
            f"\n{scrapes[0]['value'][1]} scrapes every {cfg['global']['scrape_interval']}, all up; "
            f"slowest {float(took[0]['value'][1]) * 1e3:.0f} ms; rate over {window} s"
        )
    finally:
        prom.terminate()
        prom.wait(timeout=30)
