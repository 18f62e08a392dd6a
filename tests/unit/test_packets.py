"""Unit tests of icefabric.traffic.packets: layouts, round trips, and agreement with defines.p4."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from icefabric.traffic import packets as P

P4SRC = Path(__file__).resolve().parents[2] / "p4src"


def _p4_constants() -> dict[str, int]:
    """Every `const <type> NAME = <int>;` and `#define NAME <int>` of defines.p4 and sizes.p4."""
    out: dict[str, int] = {}
    for name in ("common/defines.p4", "common/sizes.p4", "v1model/metadata.p4"):
        text = (P4SRC / name).read_text()
        for m in re.finditer(r"const\s+\w+(?:<\d+>)?\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)\s*;", text):
            out[m.group(1)] = int(m.group(2), 0)
        for m in re.finditer(r"^#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\s*$", text, re.M):
            out[m.group(1)] = int(m.group(2), 0)
    return out


def test_python_constants_match_defines_p4() -> None:
    consts = _p4_constants()
    checked = 0
    for name, value in consts.items():
        if hasattr(P, name):
            assert getattr(P, name) == value, f"{name}: packets.py {getattr(P, name)} != P4 {value}"
            checked += 1
    # The ones every consumer relies on must be present on both sides.
    for name in (
        "ETHERTYPE_ICE",
        "UDP_PORT_ICE_FEEDBACK",
        "CPU_PORT",
        "INT_MAX_HOPS",
        "PATH_BUCKETS",
        "DROP_REASON_UNKNOWN_TAG",
        "ICE_SESSION_FEEDBACK_REPORT",
        "LB_MODE_PLANNED_FLOWLET",
        "PUNT_REASON_TELEMETRY",
    ):
        assert name in consts, f"{name} missing from defines.p4/sizes.p4"
        assert hasattr(P, name), f"{name} missing from packets.py"
    assert checked >= 40


def test_drop_reason_names_cover_every_reason() -> None:
    consts = _p4_constants()
    reasons = {
        v for k, v in consts.items() if k.startswith("DROP_REASON_") and k != "DROP_REASON_NONE"
    }
    reasons.discard(consts["DROP_REASON_SLOTS"])
    assert reasons == set(P.DROP_REASON_NAMES)


def _hop(i: int) -> P.IntHop:
    return P.IntHop(
        switch_id=100 + i,
        ingress_port=i,
        egress_port=i + 1,
        enq_qdepth=3 * i,
        deq_qdepth=2 * i,
        tx_bytes=(1 << 40) + i,
        egress_ts=1_000_000 + i,
        link_rate_mbps=100_000,
    )


def test_header_sizes() -> None:
    assert len(bytes(P.IntHop())) == P.INT_HOP_BYTES
    assert len(bytes(P.IceShim(int_hop_count=0))) == P.ICE_SHIM_BYTES
    assert len(bytes(P.IceFeedback(hop_count=0))) == P.ICE_FEEDBACK_BYTES
    assert len(bytes(P.TelemetryReport(hop_count=0))) == P.TELEMETRY_REPORT_BYTES
    assert len(bytes(P.IcePacketIn())) == P.PACKET_IN_BYTES
    assert len(bytes(P.IcePacketOut())) == P.PACKET_OUT_BYTES


def test_shim_byte_layout() -> None:
    shim = P.IceShim(
        version=1, path_kind=P.PATH_KIND_ECMP, int_enabled=1, hop_limit=7, path_tag=0x1234
    )
    raw = bytes(shim)
    assert raw == bytes([0x1 << 4 | 2 << 2 | 1 << 1, 7, 0, 0, 0x12, 0x34, 0x08, 0x00])


def test_shimmed_frame_round_trip() -> None:
    inner = P.rocev2_packet(
        src_mac="02:00:00:00:00:01",
        dst_mac="02:00:00:00:00:02",
        src_ip="10.0.1.1",
        dst_ip="10.0.2.1",
        src_port=49152,
        dst_qp=0xABCDE,
        psn=77,
    )
    frame = (
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=P.ETHERTYPE_ICE)
        / P.IceShim(path_tag=9, int_enabled=1, hops=[_hop(1), _hop(0)])
        / inner[IP]
    )
    raw = bytes(frame)
    assert len(raw) == len(bytes(inner)) + P.ICE_SHIM_BYTES + 2 * P.INT_HOP_BYTES
    parsed = Ether(raw)
    shim = parsed[P.IceShim]
    assert shim.int_hop_count == 2
    assert [h.switch_id for h in shim.hops] == [101, 100]
    assert shim.hops[0].tx_bytes == (1 << 40) + 1
    assert parsed[P.BTH].dqpn == 0xABCDE
    assert parsed[P.BTH].psn == 77
    assert bytes(parsed[IP]) == bytes(inner[IP])


def test_feedback_round_trip_and_decode() -> None:
    fb = (
        Ether()
        / IP(src="10.0.2.1", dst="10.0.1.1")
        / UDP(sport=P.UDP_PORT_ICE_FEEDBACK, dport=P.UDP_PORT_ICE_FEEDBACK)
        / P.IceFeedback(
            path_tag=3,
            switch_id=12,
            flow_src_addr="10.0.1.1",
            flow_dst_addr="10.0.2.1",
            flow_src_port=49152,
            flow_dst_qp=0x10,
            bth_psn=5,
            hops=[_hop(2), _hop(1), _hop(0)],
        )
    )
    decoded = P.decode_feedback(bytes(fb))
    assert decoded.hop_count == 3
    assert decoded.flow_src_addr == "10.0.1.1"
    assert [h.switch_id for h in decoded.hops] == [102, 101, 100]
    assert decoded.flow_dst_qp == 0x10


def test_decode_feedback_rejects_other_packets() -> None:
    with pytest.raises(ValueError, match="not an ICE feedback"):
        P.decode_feedback(bytes(Ether() / IP() / UDP(dport=53)))


def test_packet_in_telemetry_and_punt() -> None:
    report = P.IcePacketIn(ingress_port=3, egress_port=5, reason=P.PUNT_REASON_TELEMETRY) / (
        P.TelemetryReport(reason=P.REPORT_REASON_QUEUE_ALARM, switch_id=7, hops=[_hop(0)])
    )
    decoded = P.decode_packet_in(bytes(report))
    assert decoded.ingress_port == 3 and decoded.egress_port == 5
    assert decoded[P.TelemetryReport].reason == P.REPORT_REASON_QUEUE_ALARM
    assert decoded[P.TelemetryReport].hops[0].switch_id == 100
    assert P.decode_report_payload(bytes(report)[P.PACKET_IN_BYTES :]).switch_id == 7
    punt = P.IcePacketIn(ingress_port=1, reason=P.PUNT_REASON_ARP) / Ether(src="02:00:00:00:00:09")
    assert P.decode_packet_in(bytes(punt))[Ether].src == "02:00:00:00:00:09"
    with pytest.raises(ValueError, match="shorter"):
        P.decode_packet_in(b"\x00")


def test_packet_out_layout() -> None:
    raw = bytes(P.IcePacketOut(egress_port=258) / Ether())
    assert raw[:2] == bytes([258 >> 1, (258 & 1) << 7])


def test_rocev2_packet_validates() -> None:
    with pytest.raises(ValueError, match="24-bit QP"):
        P.rocev2_packet(
            src_mac="02:00:00:00:00:01",
            dst_mac="02:00:00:00:00:02",
            src_ip="10.0.0.1",
            dst_ip="10.0.0.2",
            src_port=1,
            dst_qp=1 << 24,
        )
