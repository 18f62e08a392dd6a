"""Endpoint and agent back to back (no switch): pacing, messages, losses, CNPs, feedback, caps."""

from __future__ import annotations

import itertools
import math

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from icefabric.control.flowkey import FlowKey
from icefabric.traffic import packets as pk
from icefabric.traffic.agent import Agent, rdma_udp_sport
from icefabric.traffic.endpoint import Endpoint
from icefabric.traffic.rate import Dcqcn, IceRate
from icefabric.traffic.roce import ECN_CE, ETH_BYTES, OP_SEND_FIRST, OP_SEND_MIDDLE, parse_roce

LINE = 1e9
GW = "02:1c:e0:00:00:01"


def _pair(
    kind: str = "dcqcn", mtu: int = 1024
) -> tuple[Endpoint, Endpoint, list[tuple[FlowKey, int, int, float]]]:
    got: list[tuple[FlowKey, int, int, float]] = []
    a = Endpoint(
        Agent("h1", "10.0.1.1", line_rate_bps=LINE, kind=kind, seed=1),
        mac="00:00:00:00:01:01",
        gateway_mac=GW,
        mtu=mtu,
    )
    b = Endpoint(
        Agent("h2", "10.0.2.1", line_rate_bps=LINE, kind=kind, seed=1),
        mac="00:00:00:00:02:01",
        gateway_mac=GW,
        mtu=mtu,
        cnp_interval_us=100.0,
        on_message=lambda k, tag, n, t: got.append((k, tag, n, t)),
    )
    return a, b, got


def _mark_ce(frame: bytes) -> bytes:
    raw = bytearray(frame)
    raw[ETH_BYTES + 1] = (raw[ETH_BYTES + 1] & 0xFC) | ECN_CE  # the ICRC masks TOS: still valid
    return bytes(raw)


def _drain(a: Endpoint, until_us: float) -> list[tuple[float, bytes]]:
    out: list[tuple[float, bytes]] = []
    t = a.next_send_us()
    while t is not None and t <= until_us:
        out.extend((t, f) for f in a.poll(t))
        t = a.next_send_us()
    return out


def test_agent_picks_keys_like_a_nic_seeded() -> None:
    k1 = Agent("h1", "10.0.1.1", line_rate_bps=LINE, seed=7).open_flow("10.0.2.1")
    k2 = Agent("h1", "10.0.1.1", line_rate_bps=LINE, seed=7).open_flow("10.0.2.1")
    k3 = Agent("h1", "10.0.1.1", line_rate_bps=LINE, seed=8).open_flow("10.0.2.1")
    assert k1 == k2 and k1 != k3
    assert 0xC000 <= k1.udp_sport <= 0xFFFF and k1.udp_sport == rdma_udp_sport(k1.dst_qp, k1.dst_qp)
    agent = Agent("h1", "10.0.1.1", line_rate_bps=LINE, seed=7)
    a, b = (
        agent.open_flow("10.0.2.1", job="j", flow_id="j/p/c0/r0->r1"),
        agent.open_flow("10.0.3.1"),
    )
    assert b.dst_qp == a.dst_qp + 1
    reports = agent.flow_reports()
    assert (reports[0].job, reports[0].flow_id, reports[0].key, reports[0].state) == (
        "j",
        "j/p/c0/r0->r1",
        a,
        "active",
    )
    assert [r.key for r in agent.take_changes()] == [a, b]
    agent.close_flow(a)
    assert [(r.key, r.state) for r in agent.take_changes()] == [(a, "done")]


def test_caps_are_a_complete_set_and_bound_the_rate() -> None:
    agent = Agent("h1", "10.0.1.1", line_rate_bps=LINE, kind="ice", seed=1)
    a, b = agent.open_flow("10.0.2.1"), agent.open_flow("10.0.3.1")
    stranger = FlowKey(src_ip="10.9.9.9", dst_ip="10.0.2.1", udp_sport=50000, dst_qp=5)
    agent.apply_caps({a: 200e6, b: 300e6, stranger: 1e6})
    assert (agent.rate_bps(a), agent.rate_bps(b)) == (200e6, 300e6)
    assert agent.stats.caps_unknown_flow == 1
    agent.apply_caps({b: 100e6, a: -5.0})  # a's bad cap is ignored: a has none now
    assert (agent.flows[a].cap_bps, agent.flows[b].cap_bps) == (None, 100e6)
    # ICE's reference was pulled down to the old cap (no wind-up): it climbs back on feedback.
    assert (agent.rate_bps(a), agent.rate_bps(b)) == (200e6, 100e6)
    assert agent.stats.caps_invalid == 1
    assert isinstance(agent.flows[a].control, IceRate)


def test_message_becomes_first_middle_last_and_completes_with_its_tag() -> None:
    a, b, got = _pair()
    key = a.open_flow(b.ip)
    a.post_send(key, 5000, tag=0xDEADBEEF, now_us=0.0)
    frames = _drain(a, 1e6)
    ops = [parse_roce(f).opcode for _, f in frames]
    assert ops == [OP_SEND_FIRST, OP_SEND_MIDDLE, OP_SEND_MIDDLE, OP_SEND_MIDDLE, 0x03]
    assert [parse_roce(f).psn for _, f in frames] == [0, 1, 2, 3, 4]
    for t, f in frames:
        assert b.receive(t, f) == []
    assert len(got) == 1
    rkey, tag, n, when = got[0]
    assert (rkey, tag, n, when) == (key, 0xDEADBEEF, 5000, frames[-1][0])
    rx = b.rx_stats()[key]
    assert (rx.bytes_received, rx.packets_received, rx.messages_received, rx.psn_gap_losses) == (
        5000,
        5,
        1,
        0,
    )
    a.post_send(key, 10, tag=2, now_us=1e6)
    ((t, only),) = _drain(a, 2e6)
    assert parse_roce(only).opcode == 0x05
    b.receive(t, only)
    assert got[-1][1:3] == (2, 10)


def test_pacing_follows_the_agent_rate_and_the_cap() -> None:
    a, _, _ = _pair()
    key = a.open_flow("10.0.2.1")
    a.post_send(key, 1024 * 10, tag=1, now_us=0.0)
    times = [t for t, _ in _drain(a, 1e6)]
    gap = a.frame_bytes * 8 / LINE * 1e6  # a full frame at line rate, us
    assert times[1] - times[0] == gap
    a.agent.apply_caps({key: LINE / 4})
    a.post_send(key, 1024 * 10, tag=2, now_us=1000.0)
    times = [t for t, _ in _drain(a, 1e7)]
    assert times[2] - times[1] == pytest.approx(4 * gap)


def test_a_rate_changed_mid_gap_acts_at_once() -> None:
    """A NIC's rate limiter applies a new rate to the gap it is pacing: the rest of the gap
    at the old rate is sent at the new one (``repace``); without it the flow waits the old gap
    out, however long it was."""
    a, _, _ = _pair("ice")  # anchored: a flow takes a new cap at once, up or down
    key = a.open_flow("10.0.2.1")
    gap = a.frame_bytes * 8 / LINE * 1e6  # a full frame at line rate, us
    a.agent.apply_caps({key: LINE / 100})  # a slow flow: 100 line-rate gaps per frame
    a.post_send(key, 1024 * 10, tag=1, now_us=0.0)
    ((t0, _),) = _drain(a, 0.0)
    assert a.next_send_us() == pytest.approx(t0 + 100 * gap)
    # a quarter of the gap later the cap goes (the rate is back at the line): 75 line-rate
    # gaps' worth of the frame's tokens were still missing at 1/100 of the line, 0.75 at the line
    now = t0 + 25 * gap
    a.agent.apply_caps({key: LINE})
    a.repace(now)
    assert a.next_send_us() == pytest.approx(now + 0.75 * gap)
    a.repace(now)  # the same rate again changes nothing
    assert a.next_send_us() == pytest.approx(now + 0.75 * gap)
    # and down: a cut mid-gap stretches what is left of it
    ((t1, _),) = _drain(a, now + 0.75 * gap)
    a.agent.apply_caps({key: LINE / 2})
    a.repace(t1)
    assert a.next_send_us() == pytest.approx(t1 + 2 * gap)


def test_nic_line_rate_is_shared_round_robin() -> None:
    a, _, _ = _pair()
    k1, k2 = a.open_flow("10.0.2.1"), a.open_flow("10.0.3.1")
    a.post_send(k1, 4096, tag=1, now_us=0.0)
    a.post_send(k2, 4096, tag=2, now_us=0.0)
    frames = _drain(a, 1e6)
    dsts = [parse_roce(f).dst_ip for _, f in frames]
    assert dsts[:4] == ["10.0.2.1", "10.0.3.1", "10.0.2.1", "10.0.3.1"]
    span = frames[-1][0] - frames[0][0]
    assert span >= 7 * a.frame_bytes * 8 / LINE * 1e6 * 0.99  # 8 frames at line rate, no faster


def test_a_frame_that_waited_for_the_nic_does_not_slow_its_flow() -> None:
    """Two flows capped just under half the line each, with messages whose last frames are
    short (their frames then fall out of step and wait for each other at the NIC): each still
    sends at its cap, a per-QP limiter's tokens accruing on the flow's own schedule, and never
    faster than its cap plus one frame over any window."""
    a, _, _ = _pair()
    k1, k2 = a.open_flow("10.0.2.1"), a.open_flow("10.0.3.1")
    cap = 0.499 * LINE
    a.agent.apply_caps({k1: cap, k2: cap})
    size = 1024 * 10 + 300  # ten full frames and a short one per message
    for tag in range(30):
        a.post_send(k1, size, tag=tag, now_us=0.0)
        a.post_send(k2, size, tag=100 + tag, now_us=0.0)
    frames = _drain(a, 1e9)
    for dst in ("10.0.2.1", "10.0.3.1"):
        mine = [(t, len(f)) for t, f in frames if parse_roce(f).dst_ip == dst]
        t_last = mine[-1][0]
        paced_us = sum(n for _, n in mine[:-1]) * 8 / cap * 1e6  # tokens for all but the last
        frame_us = a.frame_bytes * 8 / cap * 1e6
        # on its cap to within the one frame the limiter may hold (it was 3 % late)
        assert paced_us - frame_us <= t_last - mine[0][0] <= paced_us * 1.001
        for i, (t0, _) in enumerate(mine):  # bytes sent in [t0, t0 + w) <= cap x w + a frame
            for t1, _ in mine[i + 1 : i + 40]:
                sent = sum(n for t, n in mine[i:] if t0 <= t <= t1)
                assert sent * 8 <= cap * (t1 - t0) * 1e-6 + 2 * a.frame_bytes * 8 + 1e-6
    # after idle time the schedule restarts from now: no burst of saved-up tokens
    assert a.next_send_us() is None
    a.post_send(k1, 4096, tag=999, now_us=frames[-1][0] + 1e5)
    late = _drain(a, 1e10)
    assert late[1][0] - late[0][0] == pytest.approx(a.frame_bytes * 8 / cap * 1e6)


def test_psn_gaps_count_losses_and_messages_still_complete() -> None:
    a, b, got = _pair()
    key = a.open_flow(b.ip)
    a.post_send(key, 4096, tag=9, now_us=0.0)
    frames = _drain(a, 1e6)
    for i, (t, f) in enumerate(frames):
        if i != 1:
            b.receive(t, f)
    rx = b.rx_stats()[key]
    assert rx.psn_gap_losses == 1
    assert got[0][1:3] == (9, 3072)  # short by the lost packet
    b.receive(5.0, frames[1][1])  # the late packet: out of order, not counted twice
    assert (rx.out_of_order, rx.bytes_received) == (1, 3072)


def test_ce_marks_make_cnps_at_most_one_per_interval_and_cut_dcqcn() -> None:
    a, b, _ = _pair("dcqcn")
    key = a.open_flow(b.ip)
    a.post_send(key, 1024 * 20, tag=1, now_us=0.0)
    frames = _drain(a, 1e6)
    cnps: list[tuple[float, bytes]] = []
    for t, f in frames:
        cnps.extend((t, c) for c in b.receive(t, _mark_ce(f)))
    span = frames[-1][0] - frames[0][0]
    assert len(cnps) == 1 + int(span // 100.0)  # every frame marked, one CNP per 100 us
    rx = b.rx_stats()[key]
    assert rx.ecn_marks == 20 and rx.cnps_sent == len(cnps)
    before = a.agent.rate_bps(key)
    a.receive(cnps[0][0], cnps[0][1])
    assert a.agent.rate_bps(key) == before / 2  # DCQCN, alpha = 1
    assert a.tx_stats()[key].cnps_received == 1
    assert isinstance(a.agent.flows[key].control, Dcqcn)


def test_feedback_reaches_the_agent_and_moves_the_ice_rate() -> None:
    a, _, _ = _pair("ice")
    key = a.open_flow("10.0.2.1")

    def fb(tx: int, ts: int, q: int) -> bytes:
        hop = pk.IntHop(
            switch_id=2, egress_port=3, enq_qdepth=q, tx_bytes=tx, egress_ts=ts, link_rate_mbps=1000
        )
        body = pk.IceFeedback(
            flow_src_addr=key.src_ip,
            flow_dst_addr=key.dst_ip,
            flow_src_port=key.udp_sport,
            flow_dst_qp=key.dst_qp,
            hops=[hop],
        )
        return bytes(
            Ether() / IP(src="10.0.2.254", dst=key.src_ip) / UDP(sport=4792, dport=4792) / body
        )

    for i in range(40):  # the port at 1 Gbit/s with a standing queue, for 4 base RTTs (900 us)
        a.receive(100.0 * i, fb(12_500 * i, 100 * i, 20))
    assert a.tx_stats()[key].feedback_received == 40
    assert a.agent.rate_bps(key) < LINE * 0.95
    # Malformed feedback, unknown flows and foreign frames are counted, never fatal.
    a.receive(1.0, fb(0, 0, 0)[:50])
    other = FlowKey(src_ip=key.src_ip, dst_ip="10.0.9.9", udp_sport=1, dst_qp=1)
    hop = pk.IntHop(switch_id=2)
    a.receive(
        1.0,
        bytes(
            Ether()
            / IP(dst=key.src_ip)
            / UDP(dport=4792)
            / pk.IceFeedback(flow_src_addr=other.src_ip, flow_dst_addr=other.dst_ip, hops=[hop])
        ),
    )
    a.receive(1.0, b"\x00" * 20)
    c = a.counters
    assert (c.malformed_feedback, c.feedback_unknown_flow, c.other) == (1, 1, 1)


def test_nic_quantum_never_outruns_a_switch_draining_in_whole_microseconds() -> None:
    ep = Endpoint(
        Agent("h1", "10.0.1.1", line_rate_bps=100e6, kind="dcqcn"),
        mac="02:00:00:00:00:01",
        gateway_mac=GW,
        mtu=4096,
        nic_quantum_us=1.0,
    )
    key = ep.open_flow("10.0.2.1")
    ep.post_send(key, 4096 * 6, tag=1, now_us=0.0)
    times = [t for t, _ in _drain(ep, 1e6)]
    exact = ep.frame_bytes * 8 / 100e6 * 1e6  # 332.96 us: a switch port drains one per 333 us
    assert [b - a for a, b in itertools.pairwise(times)] == [math.ceil(exact)] * 5


def test_closed_flows_leave_the_round_robin_and_are_reported_done() -> None:
    a, _, _ = _pair()
    k1, k2 = a.open_flow("10.0.2.1"), a.open_flow("10.0.3.1")
    a.post_send(k1, 4096, tag=1, now_us=0.0)
    a.post_send(k2, 4096, tag=2, now_us=0.0)
    a.agent.take_changes()
    stats = a.close_flow(k1)
    assert stats.key == k1
    assert [parse_roce(f).dst_ip for _, f in _drain(a, 1e6)] == ["10.0.3.1"] * 4
    assert [(r.key, r.state) for r in a.agent.take_changes()] == [(k1, "done")]
    assert [r.key for r in a.agent.flow_reports()] == [k2]
    with pytest.raises(KeyError, match="no open flow"):
        a.close_flow(k1)


def _pair_reorder() -> tuple[Endpoint, Endpoint, list[tuple[FlowKey, int, int, float]]]:
    got: list[tuple[FlowKey, int, int, float]] = []
    a = Endpoint(
        Agent("h1", "10.0.1.1", line_rate_bps=LINE, seed=1), mac="00:00:00:00:01:01", gateway_mac=GW
    )
    b = Endpoint(
        Agent("h2", "10.0.2.1", line_rate_bps=LINE, seed=1),
        mac="00:00:00:00:02:01",
        gateway_mac=GW,
        on_message=lambda k, tag, n, t: got.append((k, tag, n, t)),
        reorder=True,
    )
    return a, b, got


def test_reorder_tolerant_receiver_places_out_of_order_packets_without_loss() -> None:
    a, b, got = _pair_reorder()
    key = a.open_flow(b.ip)
    a.post_send(key, 5000, tag=7, now_us=0.0)  # 5 packets: PSN 0..4
    a.post_send(key, 3000, tag=8, now_us=0.0)  # 3 packets: PSN 5..7
    frames = [f for _, f in _drain(a, 1e6)]
    assert [parse_roce(f).psn for f in frames] == list(range(8))
    order = [2, 0, 4, 1, 7, 3, 6, 5]  # as two sprayed paths with different queues deliver them
    for i, k in enumerate(order):
        b.receive(float(i), frames[k])
        if k == 3:  # PSN 0..4 all in: the first message completes, not before
            assert [g[1:3] for g in got] == [(7, 5000)]
    assert [g[1:3] for g in got] == [(7, 5000), (8, 3000)]
    rx = b.rx_stats()[key]
    assert rx.psn_gap_losses == 0 and rx.bytes_received == 8000 and rx.messages_received == 2
    assert rx.out_of_order == 4  # 2, 4, 7 and 6 arrived ahead and waited for an earlier PSN
    b.receive(9.0, frames[1])  # a duplicate of a delivered packet: counted, dropped
    assert rx.out_of_order == 5 and rx.bytes_received == 8000


def test_without_reordering_the_same_order_is_loss() -> None:
    a, b, _ = _pair()
    key = a.open_flow(b.ip)
    a.post_send(key, 5000, tag=7, now_us=0.0)
    frames = [f for _, f in _drain(a, 1e6)]
    for i, k in enumerate([2, 0, 4, 1, 3]):
        b.receive(float(i), frames[k])
    rx = b.rx_stats()[key]
    assert rx.psn_gap_losses > 0 and rx.bytes_received < 5000
