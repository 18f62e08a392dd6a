"""Malformed packets: parser errors reach ingress in parser_error; nothing crashes."""

from __future__ import annotations

import random

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from .conftest import send

pytestmark = pytest.mark.dataplane


def _udp() -> bytes:
    return raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP() / UDP() / (b"u" * 4))


def test_good_packet_passes_unchanged(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("parser_errors")
    assert send(dev, 1, _udp()) == [(2, _udp())]


def test_truncated_udp_keeps_parsed_headers_and_rest(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("parser_errors")
    pkt = _udp()[: 14 + 20 + 5]
    out = send(dev, 1, pkt)
    assert out == [(3, bytes([1, 1]) + pkt)]


def test_no_match_and_reject_and_verify(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("parser_errors")
    arp = raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02", type=0x0806) / bytes(28))
    assert send(dev, 1, arp) == [(3, bytes([2, 0]) + arp)]
    rej = raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02", type=0x0801) / bytes(28))
    assert send(dev, 1, rej) == [(2, rej)]  # reject without an error: NoError
    bad = bytearray(_udp())
    bad[14] = 0x65  # version 6, ihl 5
    assert send(dev, 1, bytes(bad)) == [(3, bytes([3, 1]) + bytes(bad))]


def test_random_garbage_never_crashes(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("parser_errors")
    rng = random.Random(1234)
    base = _udp()
    for i in range(300):
        n = rng.randrange(0, 80)
        if i % 2:
            data = bytes(rng.getrandbits(8) for _ in range(n))
        else:
            data = base[:n]
        dev.inject(1, data)
    dev.run_until_idle()
    out = dev.collect()
    assert len(out) + sum(dev.drop_counts().values()) >= 300
    assert dev.drop_counts().get("pipeline_error", 0) == 0
