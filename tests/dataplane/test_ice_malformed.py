"""Malformed packets are dropped and counted by reason, and the next packet is unharmed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from leaf_spine import (
    C_DROP_REASON,
    C_PORT_RX,
    HOSTS,
    SPINE_TEST_PORT,
    SWITCH_MACS,
    TAG_L1_L2_S1,
    LeafSpine,
)
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

H1, H3 = HOSTS["h1"], HOSTS["h3"]


def _ping(seq: int) -> bytes:
    return bytes(
        Ether(src=H1.mac, dst=SWITCH_MACS["L1"]) / IP(src=H1.ip, dst=H3.ip) / ICMP(seq=seq) / b"ok"
    )


def _roce(ls: LeafSpine, **kw: int) -> bytes:
    return ls.roce("h1", "h3", sport=53000, qp=0x42, **kw)


def _ip_udp() -> bytes:
    return bytes(
        Ether(src=H1.mac, dst=SWITCH_MACS["L1"])
        / IP(src=H1.ip, dst=H3.ip)
        / UDP(sport=1234, dport=5678)
        / Raw(b"x" * 20)
    )


def _with_checksum(frame: bytes) -> bytes:
    """Recompute the IPv4 header checksum of a hand-edited frame (so only the defect remains)."""
    pkt = Ether(frame)
    ip = pkt[IP]
    hdr = bytearray(bytes(ip)[: ip.ihl * 4])
    hdr[10:12] = b"\x00\x00"
    total = sum(int.from_bytes(hdr[i : i + 2], "big") for i in range(0, len(hdr), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    hdr[10:12] = (~total & 0xFFFF).to_bytes(2, "big")
    return frame[:14] + bytes(hdr) + frame[14 + len(hdr) :]


def _edit(frame: bytes, offset: int, value: bytes) -> bytes:
    return frame[:offset] + value + frame[offset + len(value) :]


def _shimmed(ls: LeafSpine, *, tag: int, hop_limit: int = 8, **shim: Any) -> bytes:
    inner = Ether(_roce(ls, psn=5))
    return bytes(
        Ether(src=SWITCH_MACS["L1"], dst=SWITCH_MACS["S1"], type=P.ETHERTYPE_ICE)
        / P.IceShim(path_tag=tag, hop_limit=hop_limit, **shim)
        / inner[IP]
    )


CASES: dict[str, tuple[int, Callable[[LeafSpine], bytes]]] = {
    "truncated_ipv4": (P.DROP_REASON_TRUNCATED, lambda ls: _ping(1)[: 14 + 12]),
    "truncated_udp": (P.DROP_REASON_TRUNCATED, lambda ls: _ip_udp()[: 14 + 20 + 5]),
    "truncated_bth": (P.DROP_REASON_TRUNCATED, lambda ls: _roce(ls)[: 14 + 20 + 8 + 7]),
    "ihl_below_5": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _with_checksum(_edit(_ping(1), 14, b"\x44")),
    ),
    "ip_version_6_in_ipv4_type": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _with_checksum(_edit(_ping(1), 14, b"\x65")),
    ),
    "total_len_below_header": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _with_checksum(_edit(_ping(1), 16, (12).to_bytes(2, "big"))),
    ),
    "total_len_beyond_frame": (
        P.DROP_REASON_BAD_LENGTH,
        lambda ls: _with_checksum(_edit(_ping(1), 16, (400).to_bytes(2, "big"))),
    ),
    "udp_len_beyond_ip": (
        P.DROP_REASON_BAD_LENGTH,
        lambda ls: _edit(_ip_udp(), 14 + 20 + 4, (200).to_bytes(2, "big")),
    ),
    "udp_len_below_8": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _edit(_ip_udp(), 14 + 20 + 4, (4).to_bytes(2, "big")),
    ),
    "bad_ipv4_checksum": (
        P.DROP_REASON_BAD_CHECKSUM,
        lambda ls: _edit(_ping(1), 14 + 10, b"\xde\xad"),
    ),
    "ipv6": (
        P.DROP_REASON_UNSUPPORTED,
        lambda ls: bytes(Ether(src=H1.mac, dst=SWITCH_MACS["L1"]) / IPv6() / ICMP()),
    ),
    "shim_from_host": (P.DROP_REASON_SHIM_FROM_HOST, lambda ls: _shimmed(ls, tag=TAG_L1_L2_S1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_from_host_is_dropped_and_counted(fabric: LeafSpine, case: str) -> None:
    reason, make = CASES[case]
    l1 = fabric.fabric["L1"]
    before = l1.counter(C_DROP_REASON, reason)[0]
    rx_before = l1.counter(C_PORT_RX, H1.port)[0]
    fabric.send("h1", make(fabric))
    fabric.fabric.run()
    assert fabric.received("h3") == [] and fabric.received("h1") == []
    assert l1.counter(C_DROP_REASON, reason)[0] == before + 1
    assert l1.counter(C_PORT_RX, H1.port)[0] == rx_before + 1
    # the next packet is unharmed
    fabric.send("h1", _ping(2))
    fabric.fabric.run()
    got = fabric.received("h3")
    assert len(got) == 1 and Ether(got[0])[ICMP].seq == 2


SPINE_CASES: dict[str, tuple[int, Callable[[LeafSpine], bytes]]] = {
    "unknown_tag": (P.DROP_REASON_UNKNOWN_TAG, lambda ls: _shimmed(ls, tag=0x999)),
    "hop_limit_exhausted": (
        P.DROP_REASON_HOP_LIMIT,
        lambda ls: _shimmed(ls, tag=TAG_L1_L2_S1, hop_limit=1),
    ),
    "too_many_int_hops": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _shimmed(ls, tag=TAG_L1_L2_S1, int_enabled=1, hops=[P.IntHop()] * 6),
    ),
    "int_count_beyond_frame": (
        P.DROP_REASON_TRUNCATED,
        lambda ls: _shimmed(ls, tag=TAG_L1_L2_S1, int_hop_count=3)[: 14 + 8 + 36 + 10],
    ),
    "bad_shim_version": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _shimmed(ls, tag=TAG_L1_L2_S1, version=2),
    ),
    "shim_inner_not_ipv4": (
        P.DROP_REASON_PARSER_ERROR,
        lambda ls: _shimmed(ls, tag=TAG_L1_L2_S1, orig_ether_type=0x86DD),
    ),
}


@pytest.mark.parametrize("case", sorted(SPINE_CASES))
def test_malformed_fabric_traffic_is_dropped_and_counted(fabric: LeafSpine, case: str) -> None:
    reason, make = SPINE_CASES[case]
    s1 = fabric.fabric["S1"]
    before = s1.counter(C_DROP_REASON, reason)[0]
    fabric.fabric.send("S1", SPINE_TEST_PORT, make(fabric))
    fabric.fabric.run()
    assert fabric.received("h3") == []
    assert s1.counter(C_DROP_REASON, reason)[0] == before + 1
    # the next, well-formed tagged packet goes through and arrives without its shim
    good = _shimmed(fabric, tag=TAG_L1_L2_S1)
    fabric.fabric.send("S1", SPINE_TEST_PORT, good)
    fabric.fabric.run()
    got = fabric.received("h3")
    assert len(got) == 1
    assert Ether(got[0]).type == P.ETHERTYPE_IPV4 and got[0][14:] == good[14 + 8 :]


def test_hop_limit_is_decremented_by_transit(fabric: LeafSpine) -> None:
    # A spine forwards a tag with hop limit 2 (arrives with 2, leaves with 1): L2 is the last hop
    # and does not check it, so it is delivered; with 1 the spine drops it (above).
    fabric.fabric.send("S1", SPINE_TEST_PORT, _shimmed(fabric, tag=TAG_L1_L2_S1, hop_limit=2))
    fabric.fabric.run()
    assert len(fabric.received("h3")) == 1


def test_ipv4_options_are_kept_and_checksummed(fabric: LeafSpine) -> None:
    opts = b"\x94\x04\x00\x00"  # Router Alert
    pkt = (
        Ether(src=H1.mac, dst=SWITCH_MACS["L1"])
        / IP(src=H1.ip, dst=H3.ip, options=[opts])
        / ICMP(seq=9)
    )
    frame = bytes(pkt)
    assert Ether(frame)[IP].ihl == 6
    fabric.send("h1", frame)
    fabric.fabric.run()
    got = fabric.received("h3")
    assert len(got) == 1
    ip = Ether(got[0])[IP]
    assert ip.ihl == 6 and bytes(ip)[20:24] == opts and ip[ICMP].seq == 9
    assert ip.ttl == Ether(frame)[IP].ttl - 3
    check = IP(bytes(ip))
    del check.chksum
    assert IP(bytes(check)).chksum == ip.chksum


def test_unplanned_roce_with_options_gets_a_path(fabric: LeafSpine) -> None:
    frame = Ether(_roce(fabric))
    frame[IP].options = [b"\x94\x04\x00\x00"]
    del frame[IP].chksum, frame[IP].len, frame[IP].ihl
    raw = bytes(frame)
    fabric.send("h1", raw)
    fabric.fabric.run()
    got = fabric.received("h3")
    assert len(got) == 1 and got[0][14:] == raw[14:]
