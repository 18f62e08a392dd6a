"""Unit tests of icefabric.traffic.packets: layouts, round trips, and agreement with defines.p4."""

from __future__ import annotations

from typing import Any

import pytest
from scapy.fields import PacketListField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from icefabric.p4src import ice_p4
from icefabric.traffic import packets as P

LAYERS = {
    "ice_shim_t": P.IceShim,
    "int_hop_t": P.IntHop,
    "ice_feedback_t": P.IceFeedback,
    "telemetry_report_t": P.TelemetryReport,
    "packet_in_t": P.IcePacketIn,
    "packet_out_t": P.IcePacketOut,
}


def _bits(fld: Any) -> int:
    # BitField and BitEnumField carry their width in bits; the byte fields in bytes
    return int(fld.size) if "Bit" in type(fld).__name__ else int(fld.sz) * 8


def test_scapy_layers_have_the_p4_header_layouts() -> None:
    # field widths in wire order, as ice.p4 declares them (icefabric.p4src.ice_p4.HEADERS)
    for header, layer in LAYERS.items():
        fixed = [f for f in layer.fields_desc if not isinstance(f, PacketListField)]
        assert [_bits(f) for f in fixed] == [w for _, w in ice_p4.HEADERS[header]], header


def test_constants_are_the_generated_ones() -> None:
    # packets.py re-exports ice.p4's constants; it defines none of its own
    for name in ("ETHERTYPE_ICE", "CPU_PORT", "INT_HOP_BYTES", "DROP_REASONS", "LB_MODE_ECMP"):
        assert getattr(P, name) is getattr(ice_p4, name)
    assert set(P.DROP_REASONS) == {
        v
        for k, v in vars(ice_p4).items()
        if k.startswith("DROP_REASON_") and v and k not in ("DROP_REASONS", "DROP_REASON_SLOTS")
    }


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
