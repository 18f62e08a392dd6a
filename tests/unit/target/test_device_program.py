"""Device with real compiled programs (the bench's 3-table pipeline and a replication program)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefabric.target.bench import PROGRAM, ipv4_packet, populate
from icefabric.target.device import CloneSession, Device, Replica
from icefabric.target.runtime import ManualClock, csum16_bytes

compiler = pytest.importorskip("icefabric.target.compiler")


@pytest.fixture(scope="module")
def forward3() -> object:
    return compiler.load_program(PROGRAM)


def test_three_table_forwarding_rewrites_and_fixes_checksum(forward3: object) -> None:
    dev = Device(clock=ManualClock())
    dev.set_program(forward3)
    populate(dev.pipeline)
    pkt = ipv4_packet(0x0B000507, ttl=10)
    dev.inject(1, pkt)
    dev.inject(1, ipv4_packet(0x0C000001))  # no route: dropped
    dev.inject(1, ipv4_packet(0x0B000507, ttl=1))  # ttl expired: dropped
    dev.inject(1, b"\x01\x02")  # runt: parser error, no ipv4 -> dropped, no crash
    dev.run_until_idle()
    ((port, out),) = dev.collect()
    assert port == 2  # route 5 -> next hop 5 -> ports[5 % 2]
    assert out[:6] == (0xA5).to_bytes(6, "big")
    assert out[6:12] == (0xFF00).to_bytes(6, "big")
    ip = out[14:34]
    assert ip[8] == 9
    assert csum16_bytes(ip) == 0  # checksum verifies
    assert out[34:] == pkt[34:]
    # the runt fails the parser (ethernet extract): counted apart from ordinary drops
    assert dev.drop_counts() == {"ingress_drop": 2, "parser_error": 1}


REPLICATION_P4 = r"""
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { ethernet_t eth; }
struct meta_t { @field_list(1) bit<8> tag; }
parser P(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {
    state start { p.extract(h.eth); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    apply {
        if (h.eth.type == 0x0001) { s.mcast_grp = 1; }
        else if (h.eth.type == 0x0002) { m.tag = 7; clone_preserving_field_list(CloneType.I2E, 5, 1); s.egress_spec = 2; }
        else if (h.eth.type == 0x0003 && s.instance_type == 0) { m.tag = 9; resubmit_preserving_field_list(1); }
        else if (h.eth.type == 0x0003 && s.instance_type == 6) { m.tag = m.tag + 1; s.egress_spec = 3; }
        else { s.egress_spec = 3; }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    apply {
        h.eth.src = (bit<48>)s.egress_rid;
        h.eth.dst = ((bit<48>)s.instance_type << 8) | (bit<48>)m.tag;
    }
}
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out p, in headers_t h) { apply { p.emit(h.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.fixture(scope="module")
def replication() -> object:
    return compiler.compile_source(REPLICATION_P4, filename="replication.p4")


def frame(ethertype: int) -> bytes:
    return bytes(12) + ethertype.to_bytes(2, "big") + b"payload"


def test_multicast_clone_resubmit_with_real_program(replication: object) -> None:
    dev = Device(clock=ManualClock())
    dev.set_program(replication)
    dev.set_multicast_group(1, [Replica(4, 10), Replica(5, 11)])
    dev.set_clone_session(5, CloneSession((Replica(6, 0),)))
    dev.inject(1, frame(1))
    dev.run_until_idle()
    out = dev.collect()
    assert [(p, int.from_bytes(d[6:12], "big")) for p, d in out] == [(4, 10), (5, 11)]
    assert all(d[:6] == bytes([0, 0, 0, 0, 5, 0]) for _, d in out)  # REPLICATION, tag 0
    dev.inject(1, frame(2))
    dev.run_until_idle()
    by_port = dict(dev.collect())
    assert by_port[2][:6] == bytes([0, 0, 0, 0, 0, 7])  # NORMAL, tag 7
    assert by_port[6][:6] == bytes([0, 0, 0, 0, 1, 7])  # INGRESS_CLONE, preserved tag
    dev.inject(1, frame(3))
    dev.run_until_idle()
    ((port, data),) = dev.collect()
    # ingress saw RESUBMIT with the preserved tag; egress of a unicast copy sees NORMAL (BMv2)
    assert port == 3 and data[:6] == bytes([0, 0, 0, 0, 0, 10])


def test_program_bundle_roundtrip(tmp_path: Path) -> None:
    from icefabric.target.bundle import BundleError, load_bundle, make_bundle, parse_bundle

    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "headers.p4").write_text(
        "header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }\n"
    )
    main = REPLICATION_P4.replace(
        "header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }",
        '#include "include/headers.p4"',
    )
    (tmp_path / "main.p4").write_text(main)
    data = make_bundle(tmp_path / "main.p4")
    name, files = parse_bundle(data)
    assert name == "main.p4" and sorted(files) == ["include/headers.p4", "main.p4"]
    prog = load_bundle(data)
    assert any(t.preamble.name == "I.x" for t in prog.p4info.tables) is False
    with pytest.raises(BundleError, match="format"):
        parse_bundle(b'{"format": "other"}')
    with pytest.raises(BundleError, match="main"):
        parse_bundle(b'{"format": "icefabric-p4/1", "main": "x.p4", "files": {}}')


QUEUE_P4 = r"""
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { ethernet_t eth; }
struct meta_t { }
parser P(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {
    state start { p.extract(h.eth); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t s) { apply { s.egress_spec = 2; } }
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    apply {
        h.eth.dst = (bit<48>)s.enq_timestamp;
        h.eth.src = (bit<48>)s.deq_timedelta;
        h.eth.type = (bit<16>)s.enq_qdepth << 8 | (bit<16>)s.deq_qdepth;
    }
}
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out p, in headers_t h) { apply { p.emit(h.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_queueing_metadata_with_rate_limit() -> None:
    clock = ManualClock(5000)
    dev = Device(clock=clock)
    dev.set_program(compiler.compile_source(QUEUE_P4, filename="queue.p4"))
    dev.set_queue_rate(2, pps=1000)
    for _ in range(3):
        dev.inject(1, bytes(14) + b"data")
    dev.run_until_idle()
    clock.advance(2500)
    dev.run_until_idle()
    rows = []
    for _, d in dev.collect():
        rows.append((int.from_bytes(d[0:6], "big"), int.from_bytes(d[6:12], "big"), d[12], d[13]))
    # (enq_timestamp, deq_timedelta, enq_qdepth, deq_qdepth): one packet per millisecond
    assert rows == [(5000, 0, 0, 0), (5000, 2500, 0, 1), (5000, 2500, 1, 0)]


def test_bench_in_process_measures_every_packet(forward3: object) -> None:
    from icefabric.target.bench import bench_in_process, format_table

    result = bench_in_process(forward3, 500)
    assert result.received == 500 and result.pps > 0
    assert "in-process" in format_table([result])


def test_large_bundle_with_format_key_last_is_still_a_bundle() -> None:
    """A bundle is recognised by being JSON, wherever its "format" key lands."""
    import json

    from icefabric.p4src import ICE_P4
    from icefabric.target.bundle import is_bundle, load_device_config, make_bundle

    doc = json.loads(make_bundle(ICE_P4))
    reordered = json.dumps({"files": doc["files"], "main": doc["main"], "format": doc["format"]})
    data = reordered.encode()
    assert len(data) > 4096 and data.index(b'"format"') > 4096
    assert is_bundle(data)
    assert load_device_config(data).p4info.tables
