"""ECMP: hash() with crc16 over the 5-tuple, and an action_selector group."""

from __future__ import annotations

import ipaddress
import random

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

from icefabric.target.runtime import ActionCall, Match, TableEntry

from .conftest import add_entry, send

pytestmark = pytest.mark.dataplane


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (BMv2's crc16), bit by bit: an independent reference."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def _flow(src: str, sport: int, ttl: int = 64) -> bytes:
    return raw(
        Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01")
        / IP(src=src, dst="10.0.0.1", ttl=ttl)
        / UDP(sport=sport, dport=4791)
        / Raw(b"p" * 8)
    )


def test_hash_selects_next_hop_as_crc16_mod_count(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("ecmp")
    add_entry(dev, "Ing.ecmp_group", (Match.lpm(0x0A000000, 8),), "Ing.set_ecmp", 0, 4)
    for i in range(4):
        add_entry(dev, "Ing.ecmp_nhop", (Match.exact(i),), "Ing.set_port", 10 + i)
    rng = random.Random(7)
    used = set()
    for _ in range(40):
        src = str(ipaddress.IPv4Address(rng.getrandbits(32)))
        sport = rng.randrange(1024, 65535)
        data = _flow(src, sport)
        key = (
            ipaddress.IPv4Address(src).packed
            + ipaddress.IPv4Address("10.0.0.1").packed
            + bytes([17])
            + sport.to_bytes(2, "big")
            + (4791).to_bytes(2, "big")
        )
        expected_port = 10 + crc16_arc(key) % 4
        out = send(dev, 1, data)
        assert out == [(expected_port, data)]
        used.add(expected_port)
    assert used == {10, 11, 12, 13}


def test_action_selector_spreads_flows_and_is_sticky(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("ecmp")
    prof = dev.pipeline.action_profiles["Ing.selector"]
    for member, port in ((1, 5), (2, 6), (3, 7)):
        prof.add_member(member, ActionCall("Ing.set_port", (port,)))
    prof.add_group(100, [(1, 1), (2, 1), (3, 1)])
    table = dev.pipeline.tables["Ing.ecmp_selector"]
    table.insert(TableEntry(match=(Match.exact(0x0A000001),), group_id=100))
    seen: dict[tuple[str, int], int] = {}
    for i in range(60):
        key = (f"192.168.{i}.{i}", 1000 + i)
        out = send(dev, 1, _flow(*key, ttl=99))
        assert len(out) == 1
        seen[key] = out[0][0]
    assert set(seen.values()) == {5, 6, 7}
    for key, port in list(seen.items())[:10]:
        assert send(dev, 1, _flow(*key, ttl=99))[0][0] == port


def test_switch_on_action_run_skips_second_table_on_drop(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("ecmp")
    add_entry(dev, "Ing.ecmp_nhop", (Match.exact(0),), "Ing.set_port", 3)
    # ecmp_group misses -> drop(); ecmp_nhop (which would forward select 0) is not applied.
    assert send(dev, 1, _flow("1.2.3.4", 5)) == []
