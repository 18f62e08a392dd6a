"""INT-style hop records pushed onto a header stack in egress; const entries; |-|."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from .conftest import send

pytestmark = pytest.mark.dataplane


def _shim(count: int, remaining: int) -> bytes:
    return bytes([count, remaining]) + (0x0800).to_bytes(2, "big")


def _hop(switch_id: int, port: int, qdepth: int, latency: int) -> bytes:
    return ((switch_id << 80) | (port << 64) | (qdepth << 32) | latency).to_bytes(12, "big")


def _eth() -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B5))


def test_records_are_pushed_in_front_until_remaining_is_zero(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("int_hops")
    payload = b"\xab" * 12
    out = send(dev, 1, _eth() + _shim(0, 2) + payload)
    first = _hop(0x0A0A, 2, 0, 0)
    assert out == [(2, _eth() + _shim(1, 1) + first + payload)]
    out = send(dev, 2, out[0][1])
    second = _hop(0x0A0A, 1, 0, 0)
    assert out == [(1, _eth() + _shim(2, 0) + second + first + payload)]
    # remaining == 0: no more records
    out = send(dev, 1, out[0][1])
    assert out == [(2, _eth() + _shim(2, 0) + second + first + payload)]


def test_const_entries_drop_unknown_port(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("int_hops")
    assert send(dev, 7, _eth() + _shim(0, 2)) == []
    table = dev.pipeline.tables["Ing.fwd"]
    assert len(table.entries()) == 2
