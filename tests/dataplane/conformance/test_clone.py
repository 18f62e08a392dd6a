"""Clones: I2E (original packet, preserved field list) and E2E (packet as egress left it)."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from icefabric.target.device import CloneSession, Replica

from .conftest import send

pytestmark = pytest.mark.dataplane


def test_i2e_and_e2e_clones(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("clone")
    dev.set_clone_session(5, CloneSession((Replica(8, 0),)))
    dev.set_clone_session(6, CloneSession((Replica(9, 0),)))
    frame = raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / (b"c" * 30))
    modified = raw(Ether(src="ff:ff:ff:ff:ff:ff", dst="00:00:00:00:00:02") / (b"c" * 30))
    out = sorted(send(dev, 1, frame))
    assert out == [
        (3, modified),
        (8, bytes([1, 1]) + frame),  # I2E: original bytes, orig_port preserved, scratch reset
        (9, bytes([2, 1]) + modified),  # E2E: egress output headers, field list preserved
    ]
    out = sorted(send(dev, 2, frame))
    assert out == [(4, modified), (8, bytes([1, 2]) + frame)]


def test_clone_to_missing_session_does_not_stop_the_original(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("clone")
    frame = raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / (b"c" * 30))
    out = send(dev, 2, frame)
    assert [p for p, _ in out] == [4]
