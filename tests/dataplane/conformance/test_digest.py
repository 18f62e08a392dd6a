"""Digests: a learning switch reports unknown source MACs; multicast flood with pruning."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from icefabric.target.runtime import Match

from .conftest import add_entry, program, send

pytestmark = pytest.mark.dataplane


def test_unknown_source_is_digested_and_flooded(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("digest")
    dev.set_multicast_group(1, [(1, 0), (2, 0), (3, 0)])
    frame = raw(Ether(src="00:00:00:00:00:11", dst="00:00:00:00:00:22") / (b"d" * 40))
    out = send(dev, 2, frame)
    assert sorted(out) == [(1, frame), (3, frame)]  # flooded, not back to port 2
    digest = dev.pipeline.digests["learn_t"]
    assert digest.pop() == [(0x11, 2)]
    add_entry(dev, "Ing.smac", (Match.exact(0x11),), "NoAction")
    add_entry(dev, "Ing.dmac", (Match.exact(0x22),), "Ing.forward", 3)
    assert send(dev, 2, frame) == [(3, frame)]
    assert digest.pop() == []


def test_digest_in_p4info_is_named_after_the_struct() -> None:
    info = program("digest").p4info
    (dg,) = info.digests
    assert dg.preamble.name == "learn_t"
    assert dg.preamble.id >> 24 == 0x17
    assert dg.type_spec.struct.name == "learn_t"
    members = info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("src_mac", 48),
        ("ingress_port", 9),
    ]
