"""Malformed frames of every kind are counted and dropped by the endpoint, never fatal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from icefabric.traffic import packets as pk
from icefabric.traffic.agent import Agent
from icefabric.traffic.endpoint import Endpoint
from icefabric.traffic.roce import FrameBuilder, build_cnp


def _endpoint() -> tuple[Endpoint, bytes, bytes, bytes]:
    ep = Endpoint(
        Agent("h1", "10.0.1.1", line_rate_bps=1e9, kind="dcqcn"),
        mac="02:00:00:00:00:01",
        gateway_mac="02:1c:e0:00:00:01",
    )
    key = ep.open_flow("10.0.2.1")
    data = FrameBuilder(
        src_mac="02:00:00:00:00:02",
        dst_mac="02:00:00:00:00:01",
        src_ip="10.0.2.1",
        dst_ip="10.0.1.1",
        sport=50000,
        qp=7,
        max_payload=256,
    ).frame(0x05, 1, 64, immediate=3)
    cnp = build_cnp(
        src_mac="02:00:00:00:00:02",
        dst_mac="02:00:00:00:00:01",
        src_ip="10.0.2.1",
        dst_ip="10.0.1.1",
        qp=key.dst_qp,
    )
    hop = pk.IntHop(switch_id=2, egress_port=3, tx_bytes=100, egress_ts=10, link_rate_mbps=1000)
    fb = bytes(
        Ether()
        / IP(dst="10.0.1.1")
        / UDP(sport=4792, dport=4792)
        / pk.IceFeedback(
            flow_src_addr=key.src_ip,
            flow_dst_addr=key.dst_ip,
            flow_src_port=key.udp_sport,
            flow_dst_qp=key.dst_qp,
            hops=[hop, hop],
        )
    )
    return ep, data, cnp, fb


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    which=st.integers(0, 2),
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6),
)
def test_mutated_frames_never_raise(which: int, cut: int, flips: list[tuple[int, int]]) -> None:
    ep, data, cnp, fb = _endpoint()
    frame = bytearray((data, cnp, fb)[which])
    for pos, value in flips:
        if pos < len(frame):
            frame[pos] = value
    # A frame is either taken (data/CNP/feedback) or counted and dropped: never an exception.
    replies = ep.receive(5.0, bytes(frame[: max(cut, 0)] if cut < len(frame) else frame))
    assert all(isinstance(r, bytes) for r in replies)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(blob: bytes) -> None:
    ep, *_ = _endpoint()
    assert ep.receive(1.0, blob) == []  # random bytes are never a CE-marked RoCEv2 packet to us


def test_truncated_feedback_and_cnp_are_counted() -> None:
    ep, _, cnp, fb = _endpoint()
    ep.receive(1.0, fb[:-5])
    ep.receive(1.0, cnp[:50])
    assert ep.counters.malformed_feedback == 1
    assert ep.counters.malformed_roce == 1
    ep.receive(1.0, fb)
    ep.receive(1.0, cnp)
    key = next(iter(ep.tx))
    assert ep.tx[key].stats.feedback_received == 1 and ep.tx[key].stats.cnps_received == 1
