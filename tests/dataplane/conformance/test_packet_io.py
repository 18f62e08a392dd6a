"""Packet-out (from the CPU port) and packet-in (to it) with @controller_header headers."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from .conftest import program, send

pytestmark = pytest.mark.dataplane

CPU = 64


def test_packet_out_is_sent_on_the_requested_port(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("packet_io", cpu_port=CPU)
    frame = raw(Ether(dst="00:00:00:00:00:09", type=0x0800) / (b"o" * 30))
    header = (5 << 7).to_bytes(2, "big")  # egress_port=5, pad=0
    dev.packet_out(header + frame)
    dev.run_until_idle()
    assert dev.collect() == [(5, frame)]


def test_lldp_goes_to_cpu_with_packet_in_header(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("packet_io", cpu_port=CPU)
    frame = raw(Ether(dst="01:80:c2:00:00:0e", type=0x88CC) / (b"l" * 30))
    out = send(dev, 7, frame)
    assert out == [(CPU, (7 << 7).to_bytes(2, "big") + frame)]


def test_controller_packet_metadata_in_p4info() -> None:
    prog = program("packet_io")
    cpm = {m.preamble.name: m for m in prog.p4info.controller_packet_metadata}
    assert set(cpm) == {"packet_in", "packet_out"}
    assert [(f.id, f.name, f.bitwidth) for f in cpm["packet_in"].metadata] == [
        (1, "ingress_port", 9),
        (2, "_pad", 7),
    ]
    assert cpm["packet_in"].preamble.id >> 24 == 0x04
    assert prog.cpu_port_metadata["packet_out"] == [("egress_port", 1, 9), ("_pad", 2, 7)]
