"""Resubmit and recirculate: preserved field lists, instance types, pass counts."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from .conftest import send

pytestmark = pytest.mark.dataplane

INSTANCE_RECIRC = 4


def test_two_resubmits_then_one_recirculation(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("recirculate")
    eth = raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02", type=0x9999))
    out = send(dev, 1, eth + bytes(4) + b"payload")
    # After the recirculation the packet is resubmitted twice again (resubmits is field
    # list 1, not preserved across recirculation), then leaves: recircs=1 (list 2 kept),
    # instance = RESUBMIT(6) on the last ingress pass, not_preserved reset to 0.
    assert out == [(2, eth + bytes([2, 1, 6, 0]) + b"payload")]


def test_plain_packets_pass_once(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("recirculate")
    frame = raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / (b"x" * 30))
    assert send(dev, 1, frame) == [(2, frame)]
