"""The real-time host loop over a socket pair, with the controller's agent channel; CLI errors."""

from __future__ import annotations

import argparse
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from icefabric.control.agents.client import AgentClient
from icefabric.control.agents.server import AgentServer
from icefabric.traffic.agent import Agent
from icefabric.traffic.endpoint import Endpoint
from icefabric.traffic.host import build_parser, main
from icefabric.traffic.hostconfig import TARGET_PACE_BPS, resolve, resolve_flow
from icefabric.traffic.realtime import STALL_S, RealTimeHost, outcome
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


def _pair() -> tuple[RealTimeHost, RealTimeHost]:
    a_sock, b_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    return _host("h1", "10.0.1.1", a_sock), _host("h3", "10.0.2.1", b_sock, expect=1)


def _deliver(a: RealTimeHost, b: RealTimeHost, drop: set[int]) -> None:
    """Every frame ``a`` sends reaches ``b`` except the ``drop``-th ones (0-based)."""
    sent = 0
    now = 0.0
    while a.endpoint.backlog_bytes() > 0:
        now += 1000.0
        for frame in a.endpoint.poll(now):
            if sent not in drop:
                b.endpoint.receive(now, frame)
            sent += 1


def test_a_message_with_a_packet_missing_fails_the_receiver_and_its_summary_says_so() -> None:
    a, b = _pair()
    key = a.post("10.0.2.1", 20_000, tag=1)
    _deliver(a, b, drop={3})
    assert b.done()  # the last packet arrived: the message "completed" short
    rc, why = outcome(b, scheduled=False)
    assert rc == 1 and why is not None and "1 packet(s) lost" in why
    (line,) = b.summary_lines({"10.0.1.1": "h1", "10.0.2.1": "h3"})
    assert line.startswith(f"h3 <- h1 qp {key.dst_qp:#x}: received ")
    assert "lost 1 (" in line and "INCOMPLETE" in line
    # An experiment's schedule run measures losses instead of failing on them.
    assert outcome(b, scheduled=True) == (0, None)


def test_a_whole_message_exits_0_and_both_ends_print_an_iperf_like_line() -> None:
    a, b = _pair()
    key = a.post("10.0.2.1", 20_000, tag=1)
    _deliver(a, b, drop=set())
    assert outcome(b, scheduled=False) == (0, None) and outcome(a, scheduled=False) == (0, None)
    a.cap_applied[key] = 47.5e9
    a.endpoint.tx[key].stats.path_switches = (1, 5, 2)
    names = {"10.0.1.1": "h1", "10.0.2.1": "h3"}
    (tx,) = a.summary_lines(names, {1: "leaf1", 5: "spine1", 2: "leaf2"})
    assert tx.startswith(f"h1 -> h3 qp {key.dst_qp:#x}: sent 20000 bytes (")
    assert "cap 47.5 Gbit/s applied, path leaf1>spine1>leaf2" in tx
    (rx,) = b.summary_lines(names)
    assert "received 20000 bytes (20 of 20 packets)" in rx and "lost 0 (0.0 %)" in rx
    assert "1 message(s) complete" in rx and "goodput " in rx


TOPO = Path(__file__).resolve().parents[3] / "topo" / "examples" / "leaf_spine_2x4.yaml"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_the_host_is_found_by_name_by_address_or_by_the_interface_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ICE_TARGET", raising=False)
    by_name = resolve(_args("--iface", "lo", "--topology", str(TOPO), "--host", "h3"))
    # Mininet's CLI turns `h3` into its address before the program sees it.
    by_ip = resolve(_args("--iface", "lo", "--topology", str(TOPO), "--host", by_name.ip))
    assert (by_ip.name, by_ip.ip) == ("h3", by_name.ip)
    monkeypatch.setattr("icefabric.traffic.hostconfig.iface_ipv4", lambda iface: by_name.ip)
    monkeypatch.setattr("icefabric.traffic.hostconfig.namespace_interfaces", lambda: ["h3-eth0"])
    monkeypatch.setattr("icefabric.traffic.hostconfig.iface_mac", lambda iface: "02:00:00:00:00:09")
    monkeypatch.setenv("ICE_TOPOLOGY", str(TOPO))
    auto = resolve(_args())  # inside a Mininet host: nothing to say
    assert (auto.name, auto.iface, auto.ip) == ("h3", "h3-eth0", by_name.ip)
    flow = resolve_flow("h1:1000", auto.host_names)
    assert flow.dst_ip == resolve(_args("--host", "h1")).ip and flow.nbytes == 1000


def test_default_pace_is_what_the_target_forwards_not_the_topology_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = ("--iface", "lo", "--topology", str(TOPO), "--host", "h1")
    monkeypatch.setenv("ICE_TARGET", "embedded")
    assert resolve(_args(*base)).line_rate_bps == TARGET_PACE_BPS["embedded"] < 100e9
    monkeypatch.setenv("ICE_TARGET", "bmv2")
    assert resolve(_args(*base)).line_rate_bps == TARGET_PACE_BPS["bmv2"]
    # an explicit scale (the experiment engines) or rate wins
    assert resolve(_args(*base, "--rate-scale", "1e-3")).line_rate_bps == pytest.approx(100e6)
    assert resolve(_args(*base, "--line-rate", "7M")).line_rate_bps == 7e6


def test_an_unknown_host_name_or_address_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--iface", "lo", "--topology", str(TOPO), "--host", "10.9.9.9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"icefabric-host: --host 10.9.9.9: no host of that name or address in {TOPO}"


def test_packets_lost_before_the_first_one_seen_count_as_lost() -> None:
    """QPs start at PSN 0: a receiver whose first packet is PSN 3 lost three (it used to call
    the short message complete with nothing lost)."""
    a, b = _pair()
    a.post("10.0.2.1", 20_000, tag=1)
    _deliver(a, b, drop={0, 1, 2})
    assert b.lost_packets() == 3
    assert outcome(b, scheduled=False)[0] == 1
    (line,) = b.summary_lines()
    assert "(17 of 20 packets)" in line and "INCOMPLETE" in line


def test_a_message_whose_last_packet_is_lost_fails_after_the_stall_not_never() -> None:
    """The last packet ends a message: lost, the receiver of --expect 1 waited for ever (the
    README tour on a loaded BMv2 host). Silent for STALL_S, the message is given up: exit 1."""
    a, b = _pair()
    key = a.post("10.0.2.1", 20_000, tag=1)
    _deliver(a, b, drop={19})
    assert not b.done() and b.lost_packets() == 0
    got = b.endpoint.rx_stats()[key]
    last, nbytes = got.last_rx_us, got.bytes_received
    assert last is not None and 0 < nbytes < 20_000
    assert not b.give_up_stalled(last + STALL_S * 1e6 / 2)  # a slow sender: keep waiting
    assert b.cut_short == {}
    assert b.give_up_stalled(last + STALL_S * 1e6)
    assert b.cut_short == {key: nbytes}
    rc, why = outcome(b, scheduled=False)
    assert rc == 1 and why is not None and f"{nbytes} bytes from 10.0.1.1" in why
    (line,) = b.summary_lines({"10.0.1.1": "h1"})
    assert "INCOMPLETE" in line and f"1 cut short ({nbytes} bytes" in line
    # a host with nothing to wait for gives nothing up
    c, d = _pair()
    d.expect_messages = 0
    c.post("10.0.2.1", 20_000, tag=1)
    _deliver(c, d, drop={19})
    assert not d.give_up_stalled(1e12)
