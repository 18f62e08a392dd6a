"""varbit: IPv4 options extracted with a size from ihl, emitted, covered by the checksum."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP, IPOption_NOP, IPOption_RR
from scapy.layers.l2 import Ether
from scapy.packet import raw

from .conftest import send

pytestmark = pytest.mark.dataplane

ETH = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02")


def _pkt(ttl: int, options: list[object]) -> bytes:
    return raw(ETH / IP(src="1.2.3.4", dst="5.6.7.8", ttl=ttl, options=options) / UDP() / b"v")


@pytest.mark.parametrize(
    "options",
    [
        [],
        [IPOption_NOP()] * 4,
        [IPOption_RR(routers=["9.9.9.9", "8.8.8.8"])],
        [IPOption_NOP()] * 40,
    ],
)
def test_options_round_trip_with_checksum(make_switch, options) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("ipv4_options")
    pkt = _pkt(30, options)
    opt_bytes = (IP(pkt[14:]).ihl - 5) * 4
    out = send(dev, 1, pkt)
    assert out == [(2, bytes([opt_bytes]) + _pkt(29, options))]


def test_bad_ihl_is_dropped(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("ipv4_options")
    bad = bytearray(_pkt(30, []))
    bad[14] = 0x44  # ihl 4 < 5: verify() fails
    assert send(dev, 1, bytes(bad)) == []
    short = _pkt(30, [IPOption_NOP()] * 8)[: 14 + 24]  # options cut short
    assert send(dev, 1, short) == []
    assert dev.pipeline.ingress(short, 1).parser_error == 1  # PacketTooShort
