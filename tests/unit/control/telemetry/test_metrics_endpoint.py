"""The controller's /metrics endpoint and the icectl views (int, top, agents, caps) against a
controller without switches behind a real API socket."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from icefabric.control.controller import Controller
from icefabric.control.daemon.api import ApiServer
from icefabric.control.daemon.service import api_handlers
from icefabric.control.telemetry.metrics import MetricsServer
from icefabric.icectl import main
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[4]
SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
JOB = {
    "name": "fanin",
    "hosts": ["h1", "h3", "h5"],
    "phases": [
        {"name": "p1", "collective": "send-recv", "pairs": [[0, 2], [1, 2]], "message_bytes": 1024}
    ],
}


@pytest.fixture
def ctl(offline_controller: Callable[..., Controller], tmp_path: Path) -> Iterator[Controller]:
    c = offline_controller(SPEC, tmp_path / "state.json")
    c.start_worker()
    c.agents.listen(tmp_path / "agents.sock", heartbeat_s=0.2)
    c.add_job(JOB)
    # one INT report of h1 -> h5 as the last hop decoded it: two records 1 ms apart
    for ts, tx, q in ((0, 0, 1), (1000, 2_500_000, 5)):
        c.telemetry.add_report(
            {
                "flow": "fanin/p1/c0/r0->r2",
                "tag": 1,
                "hops": [
                    {
                        "switch_id": 1,
                        "egress_port": 3,
                        "qdepth": q,
                        "deq_qdepth": 0,
                        "tx_bytes": tx,
                        "egress_ts": ts,
                        "link_rate_mbps": 100_000,
                    },
                ],
            }
        )
    try:
        yield c
    finally:
        c.stop()


def test_metrics_endpoint_answers_with_every_family(ctl: Controller) -> None:
    srv = MetricsServer(ctl.metrics_source(), "127.0.0.1", 0)
    srv.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/metrics", timeout=5) as r:
            body = r.read().decode()
    finally:
        srv.stop()
    link = 'dst="spine1",link="leaf1:3->spine1:1",src="leaf1"'
    assert f"icefabric_link_utilisation_ratio{{{link}}} 0.2" in body  # 20 Gbit/s of 100
    assert f"icefabric_queue_depth_packets{{{link}}} 5.0" in body
    assert f"icefabric_queue_depth_max_packets{{{link}}} 5.0" in body
    assert f"icefabric_link_capacity_bps{{{link}}} 1e+11" in body
    assert 'icefabric_flows{kind="planned"} 2.0' in body
    assert 'icefabric_flows{kind="active"} 2.0' in body
    assert "icefabric_replans_total 1.0" in body
    assert "icefabric_path_checks_total 2.0" in body  # the synthetic report has one hop only
    assert "icefabric_path_mismatches_total 2.0" in body
    assert "icefabric_install_latency_seconds_count 1.0" in body
    assert "icefabric_rate_allocations_total" in body
    for name in (
        "icefabric_link_drops_total",
        "icefabric_int_reports_total 2.0",
        "icefabric_path_mismatches_total",
        "icefabric_agents_connected 0.0",
        "icefabric_key_install_latency_seconds_bucket",
        "icefabric_controller_active 1.0",
    ):
        assert name in body, name


def test_metrics_endpoint_refuses_a_taken_port(ctl: Controller) -> None:
    a = MetricsServer(ctl.metrics_source(), "127.0.0.1", 0)
    a.start()
    try:
        with pytest.raises(OSError):
            MetricsServer(ctl.metrics_source(), "127.0.0.1", a.port).start()
    finally:
        a.stop()


def test_icectl_int_top_caps_agents(
    ctl: Controller, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = ApiServer(tmp_path / "api.sock", api_handlers(ctl))
    api.start()
    sock = str(api.path)
    try:
        assert main(["--socket", sock, "int"]) == 0
        out = capsys.readouterr().out
        assert "leaf1:3->spine1:1" in out and "20.0" in out and "2 report(s)" in out
        assert main(["--socket", sock, "int", "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["links"][0]["utilisation"] == pytest.approx(0.2)
        assert main(["--socket", sock, "top", "--count", "2", "--interval", "0.01"]) == 0
        out = capsys.readouterr().out
        assert "primary controller" in out and "leaf1:3->spine1:1" in out
        assert main(["--socket", sock, "top", "--count", "1", "--json"]) == 0
        snap = json.loads(capsys.readouterr().out)
        assert snap["status"]["role"] == "primary" and len(snap["caps"]["flows"]) == 2
        assert main(["--socket", sock, "caps"]) == 0
        out = capsys.readouterr().out
        assert "fanin/p1/c0/r0->r2" in out and "47.500" in out and "planned" in out
        assert main(["--socket", sock, "agents"]) == 0
        out = capsys.readouterr().out
        assert "0 agent(s) connected" in out and "agents.sock" in out
        assert main(["--socket", sock, "jobs", "phase", "fanin", "nope"]) == 2
        assert "no phase 'nope'" in capsys.readouterr().err
    finally:
        api.stop()


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (["--metrics", "nowhere"], "--metrics: expected HOST:PORT"),
        (["--counter-poll", "0.001"], "--counter-poll: expected 0 or 0.05..3600"),
        (["--agent-heartbeat", "0"], "--agent-heartbeat: expected 0.05..60"),
        (["--rate-target", "1.5"], "--rate-target: expected a utilisation in (0, 1]"),
        (["--agent-listen", "127.0.0.1:0"], "--agent-listen needs --agent-token-file"),
        (["--agent-listen", "nope"], "--agent-listen: expected HOST:PORT"),
    ],
)
def test_run_rejects_bad_agent_and_telemetry_options(
    opts: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    topo = str(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
    args = ["run", "--topo", topo, "--state", str(tmp_path / "s.json"), *opts]
    assert main(["--socket", str(tmp_path / "api.sock"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
