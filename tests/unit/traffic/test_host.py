"""The real-time host loop over a socket pair, with the controller's agent channel; CLI errors."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from icefabric.control.agents.client import AgentClient
from icefabric.control.agents.server import AgentServer
from icefabric.traffic.agent import Agent
from icefabric.traffic.endpoint import Endpoint
from icefabric.traffic.host import RealTimeHost, main
from icefabric.waiting import poll_until


def _wait(pred: Callable[[], bool], timeout: float = 20.0) -> bool:
    return poll_until(pred, timeout, 0.01)


def _host(name: str, ip: str, sock: socket.socket, *, expect: int = 0) -> RealTimeHost:
    agent = Agent(name, ip, line_rate_bps=50e6, kind="dcqcn", seed=3)
    ep = Endpoint(agent, mac="02:00:00:00:00:01", gateway_mac="02:00:00:00:00:02")
    return RealTimeHost(ep, sock, expect_messages=expect)


def test_hosts_exchange_a_message_report_the_real_key_and_obey_pushed_caps(tmp_path: Path) -> None:
    a_sock, b_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    server = AgentServer(tmp_path / "agents.sock", heartbeat_s=0.2)
    server.start()
    a = _host("h1", "10.0.1.1", a_sock)
    b = _host("h2", "10.0.2.1", b_sock, expect=1)
    client = AgentClient(tmp_path / "agents.sock", "h1", on_caps=a.on_caps)
    client.start()
    a.controller = client
    threads = [threading.Thread(target=h.run, kwargs={"duration_s": 60}) for h in (a, b)]
    try:
        assert client.wait_connected(10)
        key = a.post("10.0.2.1", 2_000_000, tag=5, job="j", flow_id="j/p/c0/r0->r1")
        for t in threads:
            t.start()
        # The controller learns the flow's real key (QP and source port the agent chose) ...
        assert _wait(lambda: [r.key for r in server.flows("h1").get("h1", [])] == [key])
        report = server.flows("h1")["h1"][0]
        assert (report.job, report.flow_id, report.state) == ("j", "j/p/c0/r0->r1", "active")
        # ... and its cap reaches the agent, which paces the flow below it.
        assert server.push_caps("h1", {key: 10e6})
        assert _wait(lambda: a.agent.flows[key].cap_bps == 10e6)
        assert a.agent.rate_bps(key) <= 10e6
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    finally:
        a.stop.set()
        b.stop.set()
        client.close()
        server.stop()
        a_sock.close()
        b_sock.close()
    assert [(ip, tag, n) for ip, tag, n, _ in b.messages] == [("10.0.1.1", 5, 2_000_000)]
    rx = b.endpoint.rx_stats()[key]
    assert rx.psn_gap_losses == 0 and rx.bytes_received == 2_000_000
    stats = a.stats()
    assert stats["tx"][0]["bytes_sent"] > 2_000_000 and stats["send_errors"] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--iface", "lo"], "--ip is required"),
        (
            ["--iface", "lo", "--ip", "10.0.0", "--gateway-mac", "02:00:00:00:00:01"],
            "expected an IPv4",
        ),
        (
            ["--iface", "nope0", "--ip", "10.0.0.1", "--gateway-mac", "02:00:00:00:00:01"],
            "no such interface",
        ),
        (
            [
                "--iface",
                "lo",
                "--ip",
                "10.0.0.1",
                "--gateway-mac",
                "02:00:00:00:00:01",
                "--line-rate",
                "fast",
            ],
            "rate 'fast'",
        ),
        (
            [
                "--iface",
                "lo",
                "--ip",
                "10.0.0.1",
                "--gateway-mac",
                "02:00:00:00:00:01",
                "--flow",
                "10.0.0.2",
            ],
            "DST_IP:BYTES",
        ),
        (["--iface", "lo", "--topology", "/nonexistent.yaml", "--host", "h1"], "/nonexistent.yaml"),
        (["--iface", "lo", "--ip", "10.0.0.1", "--gateway-mac", "zz"], "MAC address"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("icefabric-host: ") and message in err
    assert "\n" not in err
