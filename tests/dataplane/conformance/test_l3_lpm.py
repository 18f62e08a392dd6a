"""L3 LPM forwarding with TTL decrement and IPv4 checksum verify/update."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

from icefabric.target.runtime import Match

from .conftest import add_entry, send

pytestmark = pytest.mark.dataplane

ROUTER_MAC = "00:00:00:00:aa:01"


def _pkt(dst: str, ttl: int = 64) -> bytes:
    return raw(
        Ether(dst=ROUTER_MAC, src="00:00:00:00:00:01")
        / IP(src="192.168.0.1", dst=dst, ttl=ttl, id=7)
        / UDP(sport=1234, dport=4791)
        / Raw(b"x" * 20)
    )


def _expected(dst: str, dmac: str, ttl: int) -> bytes:
    return raw(
        Ether(dst=dmac, src=ROUTER_MAC)
        / IP(src="192.168.0.1", dst=dst, ttl=ttl, id=7)
        / UDP(sport=1234, dport=4791)
        / Raw(b"x" * 20)
    )


@pytest.fixture
def router(make_switch):  # type: ignore[no-untyped-def]
    dev = make_switch("l3_lpm")
    add_entry(dev, "Ing.routes", (Match.lpm(0x0A000000, 8),), "Ing.forward",
              0x000000000B01, 0x00000000AA01, 2)  # fmt: skip
    add_entry(dev, "Ing.routes", (Match.lpm(0x0A010000, 16),), "Ing.forward",
              0x000000000B02, 0x00000000AA01, 3)  # fmt: skip
    return dev


def test_longest_prefix_wins_and_checksum_is_recomputed(router) -> None:  # type: ignore[no-untyped-def]
    out = send(router, 1, _pkt("10.1.2.3"))
    assert out == [(3, _expected("10.1.2.3", "00:00:00:00:0b:02", 63))]
    out = send(router, 1, _pkt("10.9.9.9", ttl=10))
    assert out == [(2, _expected("10.9.9.9", "00:00:00:00:0b:01", 9))]
    # scapy recomputes the checksum from scratch: the switch's incremental result must match.
    assert IP(out[0][1][14:]).chksum == IP(raw(IP(out[0][1][14:])))[IP].chksum


def test_miss_and_ttl_expiry_drop(router) -> None:  # type: ignore[no-untyped-def]
    assert send(router, 1, _pkt("11.0.0.1")) == []
    assert send(router, 1, _pkt("10.1.2.3", ttl=1)) == []


def test_bad_checksum_sets_checksum_error_and_is_dropped(router) -> None:  # type: ignore[no-untyped-def]
    data = bytearray(_pkt("10.1.2.3"))
    data[24] ^= 0xFF  # corrupt the IPv4 header checksum
    assert send(router, 1, bytes(data)) == []
    pipeline = router.pipeline
    ctx = pipeline.ingress(bytes(data), 1).ctx
    assert ctx.field("standard_metadata.checksum_error") == 1


def test_non_ip_is_dropped(router) -> None:  # type: ignore[no-untyped-def]
    assert send(router, 1, raw(Ether(dst=ROUTER_MAC, type=0x88CC) / Raw(b"l" * 30))) == []
