"""ECN marking on queue depth (egress, enq_qdepth), with the checksum updated."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from .conftest import program

pytestmark = pytest.mark.dataplane


def _pkt(tos: int) -> bytes:
    return raw(Ether() / IP(src="1.1.1.1", dst="2.2.2.2", tos=tos) / UDP() / (b"e" * 10))


def test_marks_ce_at_threshold_only_for_ect() -> None:
    pipeline = program("ecn").instantiate()
    pipeline.registers["Eg.threshold"].write(0, 5)
    for qdepth, tos, expected_tos in ((4, 0x02, 0x02), (5, 0x02, 0x03), (9, 0x01, 0x03),
                                      (9, 0x00, 0x00), (9, 0xB9, 0xBB)):  # fmt: skip
        res = pipeline.ingress(_pkt(tos), 1)
        out = pipeline.egress(res.ctx, egress_port=2, enq_qdepth=qdepth)
        assert out.data == _pkt(expected_tos), (qdepth, tos)


def test_queue_builds_up_on_a_rate_limited_port(make_switch) -> None:  # type: ignore[no-untyped-def]
    dev = make_switch("ecn")
    dev.pipeline.registers["Eg.threshold"].write(0, 3)
    dev.set_queue_rate(2, pps=1000)
    for _ in range(6):
        dev.inject(1, _pkt(0x02))
    for _ in range(50):
        dev.run_until_idle()
        dev.clock.advance(1000)
    out = dev.collect(2)
    assert len(out) == 6
    tos = [IP(data[14:]).tos for _, data in out]
    assert tos[0] == 0x02
    assert tos.count(0x03) >= 2
    for _, data in out:
        ip = IP(data[14:])
        sent = ip.chksum
        del ip.chksum
        assert IP(raw(ip)).chksum == sent
