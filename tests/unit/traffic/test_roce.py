"""RoCEv2 frames, CNPs and feedback decoding against scapy's layers."""

from __future__ import annotations

import pytest
from scapy.contrib.roce import BTH, cnp
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from icefabric.traffic import packets as pk
from icefabric.traffic.roce import (
    ECN_ECT0,
    OP_CNP,
    OP_SEND_FIRST,
    OP_SEND_LAST,
    OP_SEND_ONLY,
    FrameBuilder,
    MalformedFrame,
    build_cnp,
    parse_feedback,
    parse_roce,
    udp_dport,
)

SRC_MAC, DST_MAC = "00:00:00:00:00:01", "02:1c:e0:00:00:01"


def _builder(**kw: object) -> FrameBuilder:
    args: dict[str, object] = dict(
        src_mac=SRC_MAC,
        dst_mac=DST_MAC,
        src_ip="10.0.1.1",
        dst_ip="10.0.2.1",
        sport=49152,
        qp=0x123456,
        max_payload=1024,
    )
    args.update(kw)
    return FrameBuilder(**args)


@pytest.mark.parametrize(
    ("opcode", "psn", "n"),
    [(OP_SEND_FIRST, 0, 1024), (OP_SEND_LAST, 0xFFFFFF, 7), (OP_SEND_ONLY, 5, 0)],
)
def test_frame_matches_scapy_byte_for_byte(opcode: int, psn: int, n: int) -> None:
    b = _builder()
    frame = b.frame(opcode, psn, n)
    payload = bytes((i * 7) & 0xFF for i in range(n))
    ref = (
        Ether(src=SRC_MAC, dst=DST_MAC)
        / IP(src="10.0.1.1", dst="10.0.2.1", tos=ECN_ECT0, id=1, ttl=64, flags="DF")
        / UDP(sport=49152, dport=4791, chksum=0)
        / BTH(opcode=opcode, dqpn=0x123456, psn=psn)
        / Raw(payload)
    )
    assert frame == bytes(ref)  # headers, IPv4 checksum and the ICRC scapy computes


def test_ip_id_advances_and_checksum_stays_valid() -> None:
    b = _builder()
    for i in range(1, 4):
        frame = b.frame(OP_SEND_ONLY, i, 100)
        ip = Ether(frame)[IP]
        assert ip.id == i
        chk = ip.chksum
        del ip.chksum
        assert IP(bytes(ip)).chksum == chk


def test_parse_roce_reads_back_what_was_built() -> None:
    frame = _builder().frame(OP_SEND_FIRST, 77, 500)
    h = parse_roce(frame)
    assert (h.src_ip, h.dst_ip, h.sport, h.qp, h.psn, h.opcode) == (
        "10.0.1.1",
        "10.0.2.1",
        49152,
        0x123456,
        77,
        OP_SEND_FIRST,
    )
    assert (h.ecn, h.payload_bytes, h.frame_bytes, h.becn) == (ECN_ECT0, 500, len(frame), False)
    assert udp_dport(frame) == 4791


def test_parse_roce_of_a_scapy_packet_with_ce() -> None:
    pkt = pk.rocev2_packet(
        src_mac=SRC_MAC,
        dst_mac=DST_MAC,
        src_ip="10.0.0.9",
        dst_ip="10.0.0.8",
        src_port=50000,
        dst_qp=42,
        psn=3,
        payload_len=64,
        ecn=3,
    )
    h = parse_roce(bytes(pkt))
    assert (h.src_ip, h.sport, h.qp, h.psn, h.ecn, h.payload_bytes) == (
        "10.0.0.9",
        50000,
        42,
        3,
        3,
        64,
    )


def test_cnp_matches_scapy() -> None:
    frame = build_cnp(
        src_mac=DST_MAC, dst_mac=SRC_MAC, src_ip="10.0.2.1", dst_ip="10.0.1.1", qp=0x123456
    )
    ref = (
        Ether(src=DST_MAC, dst=SRC_MAC)
        / IP(src="10.0.2.1", dst="10.0.1.1", tos=0, id=0, ttl=64, flags="DF")
        / UDP(sport=4791, dport=4791, chksum=0)
        / cnp(0x123456)
    )
    assert frame == bytes(ref)
    h = parse_roce(frame)
    assert (h.opcode, h.qp, h.becn, h.payload_bytes) == (OP_CNP, 0x123456, True, 16)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\x00" * 10, "shorter than"),
        (bytes(Ether() / IP() / UDP(dport=4791)), "ends inside BTH"),
        (bytes(Ether(type=0x86DD) / Raw(b"\x00" * 80)), "EtherType 0x86dd"),
        (bytes(Ether() / IP() / UDP(dport=53) / Raw(b"\x00" * 40)), "port 53"),
        (bytes(Ether() / IP(proto=6) / Raw(b"\x00" * 40)), "protocol 6"),
    ],
)
def test_malformed_roce_is_named(frame: bytes, message: str) -> None:
    with pytest.raises(MalformedFrame, match=message):
        parse_roce(frame)


def _feedback_frame(hops: list[pk.IntHop], **kw: object) -> bytes:
    fb = pk.IceFeedback(
        path_kind=pk.PATH_KIND_PLANNED,
        path_tag=7,
        switch_id=3,
        flow_src_addr="10.0.1.1",
        flow_dst_addr="10.0.2.1",
        flow_src_port=49152,
        flow_dst_qp=0x123456,
        bth_opcode=4,
        bth_psn=99,
        timestamp=12345,
        hops=hops,
        **kw,
    )
    return bytes(Ether() / IP(src="10.0.2.254", dst="10.0.1.1") / UDP(sport=4792, dport=4792) / fb)


def test_feedback_decodes_into_hop_samples_in_path_order() -> None:
    # Records arrive last hop first (leaf 3 <- spine 2 <- leaf 1).
    hops = [
        pk.IntHop(
            switch_id=3,
            ingress_port=2,
            egress_port=1,
            enq_qdepth=0,
            deq_qdepth=0,
            tx_bytes=300,
            egress_ts=30,
            link_rate_mbps=100_000,
        ),
        pk.IntHop(
            switch_id=2,
            ingress_port=1,
            egress_port=3,
            enq_qdepth=5,
            deq_qdepth=4,
            tx_bytes=2**64 - 1,
            egress_ts=20,
            link_rate_mbps=100_000,
        ),
        pk.IntHop(
            switch_id=1,
            ingress_port=3,
            egress_port=2,
            enq_qdepth=1,
            deq_qdepth=0,
            tx_bytes=100,
            egress_ts=10,
            link_rate_mbps=40_000,
        ),
    ]
    fb = parse_feedback(_feedback_frame(hops), link_rate_scale=1e-3, qdepth_unit_bytes=1000)
    assert (
        fb.switch_id,
        fb.path_tag,
        fb.flow_src_ip,
        fb.flow_dst_ip,
        fb.flow_sport,
        fb.flow_qp,
        fb.psn,
        fb.timestamp_us,
    ) == (
        3,
        7,
        "10.0.1.1",
        "10.0.2.1",
        49152,
        0x123456,
        99,
        12345,
    )
    assert [h.switch_id for h in fb.hops] == [1, 2, 3]
    first = fb.hops[0]
    assert (first.port, first.link_bps, first.tx_bytes, first.ts_us, first.qdepth_bytes) == (
        2,
        40e6,
        100,
        10.0,
        1000,
    )
    assert fb.hops[1].tx_bytes == 2**64 - 1
    assert fb.hops[1].qdepth_bytes == 5000


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda f: f[:60], "ends inside the 36-byte feedback header"),
        (lambda f: f[:-10], "hop_count 1 needs 36 bytes"),
        (lambda f: f[:42] + bytes([0x20]) + f[43:], "version 2"),
        (lambda f: f[:36] + b"\x12\xb7" + f[38:], "port 4791"),
    ],
)
def test_malformed_feedback_is_named(mangle: object, message: str) -> None:
    hop = pk.IntHop(switch_id=1, egress_port=1, tx_bytes=1, egress_ts=1, link_rate_mbps=1)
    frame = _feedback_frame([hop])
    with pytest.raises(MalformedFrame, match=message):
        parse_feedback(mangle(frame))  # type: ignore[operator]


def test_builder_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="24-bit"):
        _builder(qp=1 << 24)
    with pytest.raises(ValueError, match="MAC address"):
        _builder(src_mac="zz")
    with pytest.raises(ValueError, match="IPv4 address"):
        _builder(dst_ip="10.0.0")


def test_ice_overhead_bytes_of_each_frame_kind() -> None:
    from icefabric.experiment.virtual_stats import ice_overhead_bytes

    hop = pk.IntHop(switch_id=1, ingress_port=1, egress_port=2)
    data = bytes(Ether() / IP() / UDP(sport=49152, dport=4791) / Raw(b"\x00" * 100))
    tagged = bytes(Ether() / pk.IceShim(path_tag=3, hops=[hop, hop]) / IP() / UDP() / Raw(b"x"))
    untagged_int = bytes(Ether() / pk.IceShim(path_tag=3) / IP() / UDP() / Raw(b"x"))
    feedback = _feedback_frame([hop, hop, hop])
    assert ice_overhead_bytes(data) == 0
    assert ice_overhead_bytes(tagged) == 8 + 2 * 36
    assert ice_overhead_bytes(untagged_int) == 8
    assert ice_overhead_bytes(feedback) == len(feedback)
    assert ice_overhead_bytes(b"\x00" * 10) == 0
