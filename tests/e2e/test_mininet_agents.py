"""Mininet end to end, the controller's side of the host agents: hosts run the real-time
endpoint + rate agent (`python -m icefabric.traffic.host`) connected to `icectl run`'s agent
socket; a flow crosses the fabric and completes; the controller sees the agents, caps the job's
flow and releases the cap when its host's agent leaves; the telemetry store shows the flow's
links from INT; the Prometheus endpoint answers. (`test_host_mininet.py` covers the hosts'
side: a ring's share with real keys installed.)"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

from _mininet import (  # noqa: E402
    TARGET,
    controller,
    free_port_base,
    icectl_json,
    require_mininet,
    require_target_tools,
    target_args,
)

require_mininet()

from icefabric.topo.generators import leaf_spine  # noqa: E402
from icefabric.topo.mininet import start_network  # noqa: E402
from icefabric.topo.spec import TopologySpec, save_topology  # noqa: E402
from icefabric.waiting import poll_until  # noqa: E402

FLOW_BYTES = 100_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    assert poll_until(cond, timeout, 0.1), f"timed out waiting for {what}"


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[TopologySpec, Any, Path, int]]:
    """A 2x2 leaf-spine in Mininet and `icectl run` with agents and /metrics on free ports."""
    require_target_tools()
    metrics_port = _free_port()
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, grpc_base_port=free_port_base(4))
    topo = tmp_path / "topo.yaml"
    save_topology(spec, topo)
    h1, h2 = spec.hosts[0].name, spec.hosts[1].name  # one per leaf
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {
                "name": "pair",
                "hosts": [h1, h2],
                "phases": [
                    {
                        "name": "p",
                        "collective": "send-recv",
                        "pairs": [[0, 1]],
                        "message_bytes": "1MiB",
                    }
                ],
            }
        )
    )
    net = start_network(spec, target=TARGET, log_dir=str(tmp_path))
    sock = tmp_path / "icectl.sock"
    args = ["--topo", str(topo), "--job", str(job), "--state", str(tmp_path / "state.json")]
    args += target_args()
    args += ["--metrics", f"127.0.0.1:{metrics_port}", "--agent-heartbeat", "1"]
    # The test's flow is no job's (icefabric-host --flow): in planned-ecmp mode it is hashed
    # onto one path; flowlets would reorder it across spines in this slow emulation, and a
    # RoCE receiver counts reordered packets as lost.
    args += ["--mode", "planned-ecmp"]
    try:
        with controller(args, sock, tmp_path / "icectl.log"):
            yield spec, net, sock, metrics_port
    finally:
        net.stop()


def _host_cmd(topo: Path, spec: TopologySpec, name: str, agents: Path, stats: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "icefabric.traffic.host",
        "--topology",
        str(topo),
        "--host",
        name,
        "--iface",
        f"{name}-eth0",
        "--line-rate",
        "2M",
        "--controller",
        str(agents),
        "--stats",
        str(stats),
        "--duration",
        "60",
    ]


def test_hosts_with_agents_complete_a_flow_and_metrics_answer(
    fabric: tuple[TopologySpec, Any, Path, int], tmp_path: Path
) -> None:
    spec, net, sock, metrics_port = fabric
    topo = tmp_path / "topo.yaml"
    agents = sock.with_name("icectl-agents.sock")
    assert agents.exists(), "icectl run did not open its agent socket"
    src, dst = spec.hosts[0], spec.hosts[1]
    # the receiver first: it stays connected until the message has arrived
    rx = net.get(dst.name).popen(
        [*_host_cmd(topo, spec, dst.name, agents, tmp_path / "rx.json"), "--expect", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _until(
            lambda: dst.name in [a["host"] for a in icectl_json(sock, "agents")["agents"]],
            30,
            f"the controller to see {dst.name}'s agent",
        )
        # the job's flow src -> dst is active (its first phase): the controller caps it
        caps = icectl_json(sock, "caps")
        assert [r["host"] for r in caps["flows"]] == [src.name]
        tx = net.get(src.name).popen(
            [
                *_host_cmd(topo, spec, src.name, agents, tmp_path / "tx.json"),
                "--flow",
                f"{dst.address}:{FLOW_BYTES}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        tx_out, _ = tx.communicate(timeout=90)
        assert tx.returncode == 0, tx_out.decode(errors="replace")
        rx_out, _ = rx.communicate(timeout=90)
        assert rx.returncode == 0, rx_out.decode(errors="replace")
    finally:
        for p in (rx,):
            if p.poll() is None:
                p.kill()
    rx_stats = json.loads((tmp_path / "rx.json").read_text())
    tx_stats = json.loads((tmp_path / "tx.json").read_text())
    assert [(m["src_ip"], m["bytes"]) for m in rx_stats["messages"]] == [
        (src.address, FLOW_BYTES)
    ], json.dumps({"rx": rx_stats["rx"], "tx": tx_stats["tx"]})
    assert [f["psn_gap_losses"] for f in rx_stats["rx"]] == [0], rx_stats["rx"]
    assert sum(t["bytes_sent"] for t in tx_stats["tx"]) >= FLOW_BYTES, tx_stats["tx"]
    view = icectl_json(sock, "agents")
    assert view["counters"]["accepted"] >= 2 and view["counters"]["malformed"] == 0
    # both agents said bye: their hosts are lost, the job's flow from src has no cap now
    _until(
        lambda: set(icectl_json(sock, "agents")["lost"]) == {src.name, dst.name},
        30,
        "agents to leave",
    )
    assert icectl_json(sock, "caps")["flows"] == []
    # INT reports of the flow's packets: the source leaf's uplink it used has records
    tel = icectl_json(sock, "int", "--limit", "1")
    src_leaf_up = [r for r in tel["links"] if r["name"].startswith(f"{src.leaf}:") and r["records"]]
    assert src_leaf_up, tel["links"]
    assert tel["counters"]["reports"] > 0 and tel["counters"]["unknown_hops"] == 0
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        body = r.read().decode()
    for name in (
        "icefabric_agents_connected 0.0",
        "icefabric_link_utilisation_ratio{",
        "icefabric_queue_depth_max_packets{",
        'icefabric_flows{kind="planned"} 1.0',
        "icefabric_int_reports_total",
        "icefabric_replans_total",
        "icefabric_controller_active 1.0",
    ):
        assert name in body, name
