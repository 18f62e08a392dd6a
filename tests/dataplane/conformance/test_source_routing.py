"""Source routing: header stack parsing with next/last, pop_front, emit of a stack."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

from .conftest import send

pytestmark = pytest.mark.dataplane


def _routes(ports: list[int]) -> bytes:
    out = b""
    for i, p in enumerate(ports):
        bos = 1 if i == len(ports) - 1 else 0
        out += ((bos << 15) | p).to_bytes(2, "big")
    return out


def _eth(ether_type: int) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=ether_type))


def test_each_hop_pops_one_entry(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("source_routing")
    inner = raw(IP(src="1.1.1.1", dst="2.2.2.2", ttl=20) / Raw(b"z" * 10))
    pkt = _eth(0x1234) + _routes([3, 5, 7]) + inner
    out = send(dev, 1, pkt)
    assert out == [(3, _eth(0x1234) + _routes([5, 7]) + inner)]
    out = send(dev, 1, out[0][1])
    assert out == [(5, _eth(0x1234) + _routes([7]) + inner)]
    out = send(dev, 1, out[0][1])
    expected_ip = raw(IP(src="1.1.1.1", dst="2.2.2.2", ttl=19) / Raw(b"z" * 10))
    assert out == [(7, _eth(0x0800) + expected_ip)]


def test_too_many_hops_is_stack_out_of_bounds(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("source_routing")
    pkt = _eth(0x1234) + _routes([1] * 9) + b"\x00" * 20
    res = dev.pipeline.ingress(pkt, 1)
    assert res.parser_error == 3  # error.StackOutOfBounds
    assert res.drop
    assert send(dev, 1, pkt) == []


def test_truncated_route_list_is_packet_too_short(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("source_routing")
    pkt = _eth(0x1234) + _routes([2, 3])[:3]
    res = dev.pipeline.ingress(pkt, 1)
    assert res.parser_error == 1  # error.PacketTooShort
    assert send(dev, 1, pkt) == []
