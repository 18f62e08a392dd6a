"""Multicast flood through the replication engine: pruning and egress_rid per copy."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from icefabric.target.runtime import Match

from .conftest import add_entry, send

pytestmark = pytest.mark.dataplane


def test_flood_to_group_members_except_ingress(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("multicast")
    dev.set_multicast_group(7, [(1, 100), (2, 101), (3, 102), (4, 103)])
    add_entry(dev, "Ing.vlan_flood", (Match.exact(2),), "Ing.flood", 7)
    frame = raw(Ether(src="00:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") / (b"m" * 30))
    out = sorted(send(dev, 2, frame))
    assert out == [
        (p, frame[:14] + rid.to_bytes(2, "big") + p.to_bytes(2, "big") + frame[14:])
        for p, rid in ((1, 100), (3, 102), (4, 103))
    ]


def test_no_group_drops(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("multicast")
    frame = raw(Ether(src="00:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") / (b"m" * 30))
    assert send(dev, 5, frame) == []
