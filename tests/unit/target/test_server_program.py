"""P4Runtime server with a compiled program: config as P4 source and as bundle, packet I/O, digests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2
from p4runtime_sh.p4runtime import P4RuntimeClient

from icefabric.target.device import Device
from icefabric.target.server import serve
from icefabric.waiting import poll_until

compiler = pytest.importorskip("icefabric.target.compiler")

Update = p4runtime_pb2.Update
CPU = 255

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { packet_in_t pin; packet_out_t pout; ethernet_t eth; }
struct learn_t { bit<48> src; bit<9> port; }
struct meta_t { learn_t learn; }

parser P(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {
    state start {
        transition select(s.ingress_port) { 255: parse_out; default: parse_eth; }
    }
    state parse_out { p.extract(h.pout); transition parse_eth; }
    state parse_eth { p.extract(h.eth); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    counter(8, CounterType.packets_and_bytes) rx;
    register<bit<32>>(16) last_len;
    action fwd(bit<9> port) { s.egress_spec = port; }
    action to_cpu() { s.egress_spec = 255; }
    action drop() { mark_to_drop(s); }
    action learn() {
        m.learn.src = h.eth.src;
        m.learn.port = s.ingress_port;
        digest<learn_t>(1, m.learn);
    }
    table l2 {
        key = { h.eth.dst: exact; }
        actions = { fwd; to_cpu; drop; }
        default_action = drop();
        size = 64;
    }
    table smac {
        key = { h.eth.src: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }
    apply {
        if (h.pout.isValid()) {
            s.egress_spec = h.pout.egress_port;
            h.pout.setInvalid();
            return;
        }
        rx.count((bit<32>)s.ingress_port);
        last_len.write((bit<32>)s.ingress_port, s.packet_length);
        smac.apply();
        l2.apply();
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {
    apply {
        if (s.egress_port == 255) {
            h.pin.setValid();
            h.pin.ingress_port = s.ingress_port;
        }
    }
}
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out p, in headers_t h) { apply { p.emit(h.pin); p.emit(h.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.fixture
def switch() -> Iterator[tuple[Device, str]]:
    device = Device(device_id=0, cpu_port=CPU)
    device.start()
    server, port, _ = serve(device, "127.0.0.1:0")
    try:
        yield device, f"127.0.0.1:{port}"
    finally:
        server.stop(0)
        device.stop()


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    src = tmp_path / "l2.p4"
    src.write_text(PROGRAM)
    program = compiler.load_program(src)
    p4info = tmp_path / "l2.p4info.txt"
    p4info.write_text(program.p4info_text())
    return str(p4info), str(src)


def ids(p4info: object) -> dict[str, int]:
    out = {}
    for kind in ("tables", "actions", "digests", "counters", "registers"):
        for o in getattr(p4info, kind):
            out[o.preamble.name] = o.preamble.id
    return out


def l2_entry(
    n: dict[str, int], dst: bytes, action: str, port: int | None = None
) -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    e.table_entry.table_id = n["I.l2"]
    e.table_entry.match.add(field_id=1).exact.value = dst
    e.table_entry.action.action.action_id = n[action]
    if port is not None:
        e.table_entry.action.action.params.add(param_id=1, value=bytes([port]))
    return e


def frame(dst: int, src: int) -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + b"\x88\xb5" + b"hello"


def wait_for(fn, timeout: float = 5.0):  # type: ignore[no-untyped-def]
    """``fn()``'s first truthy value within ``timeout`` (else its value at the deadline)."""
    got: list[object] = [None]

    def holds() -> bool:
        got[0] = fn()
        return bool(got[0])

    poll_until(holds, timeout, 0.01)
    return got[0]


def test_source_config_packet_io_digest_counters(
    switch: tuple[Device, str], files: tuple[str, str]
) -> None:
    device, addr = switch
    c = P4RuntimeClient(0, addr, (0, 1))
    try:
        c.set_fwd_pipe_config(*files)  # device config = plain P4 source
        n = ids(c.get_p4info())
        req = p4runtime_pb2.WriteRequest()
        req.updates.add(
            type=Update.INSERT, entity=l2_entry(n, b"\x00\x00\x00\x00\x00\x02", "I.fwd", 2)
        )
        req.updates.add(
            type=Update.INSERT, entity=l2_entry(n, b"\x00\x00\x00\x00\x00\xcc", "I.to_cpu")
        )
        d = req.updates.add(type=Update.INSERT).entity.digest_entry
        d.digest_id = n["learn_t"]
        d.config.max_list_size = 1
        c.write(req)
        device.inject(1, frame(2, 0xA1))
        assert wait_for(lambda: device.collect(2)) == [(2, frame(2, 0xA1))]
        msg = c.get_stream_packet("digest", timeout=5)
        assert msg is not None and msg.digest.digest_id == n["learn_t"]
        assert [m.bitstring for m in msg.digest.data[0].struct.members] == [b"\xa1", b"\x01"]
        device.inject(3, frame(0xCC, 0xA3))
        pin = c.get_stream_packet("packet", timeout=5)
        assert pin is not None and pin.packet.payload == frame(0xCC, 0xA3)
        assert {m.metadata_id: m.value for m in pin.packet.metadata} == {1: b"\x03", 2: b"\x00"}
        out = p4runtime_pb2.StreamMessageRequest()
        out.packet.payload = frame(9, 9)
        out.packet.metadata.add(metadata_id=1, value=b"\x04")
        c.stream_out_q.put(out)
        assert wait_for(lambda: device.collect(4)) == [(4, frame(9, 9))]
        ctr = p4runtime_pb2.Entity()
        ctr.counter_entry.counter_id = n["I.rx"]
        ctr.counter_entry.index.index = 1
        (resp,) = list(c.read_one(ctr))
        assert resp.entities[0].counter_entry.data.packet_count == 1
        reg = p4runtime_pb2.Entity()
        reg.register_entry.register_id = n["I.last_len"]
        reg.register_entry.index.index = 3
        (resp,) = list(c.read_one(reg))
        assert resp.entities[0].register_entry.data.bitstring == bytes([len(frame(0, 0))])
    finally:
        c.tear_down()


def test_bundle_config_and_get(
    switch: tuple[Device, str], files: tuple[str, str], tmp_path: Path
) -> None:
    from icefabric.target.bundle import make_bundle

    bundle = tmp_path / "l2.bundle.json"
    bundle.write_bytes(make_bundle(files[1]))
    c = P4RuntimeClient(0, switch[1], (0, 1))
    try:
        c.set_fwd_pipe_config(files[0], str(bundle))
        get = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=0, response_type=0)
        resp = c.stub.GetForwardingPipelineConfig(get)
        assert resp.config.p4_device_config == bundle.read_bytes()
        assert any(t.preamble.name == "I.l2" for t in resp.config.p4info.tables)
    finally:
        c.tear_down()


def test_compile_error_in_device_config(
    switch: tuple[Device, str], files: tuple[str, str], tmp_path: Path
) -> None:
    import grpc
    from p4runtime_sh.p4runtime import P4RuntimeException

    bad = tmp_path / "bad.p4"
    bad.write_text(PROGRAM.replace("size = 64;", "size = 64"))
    c = P4RuntimeClient(0, switch[1], (0, 1))
    try:
        with pytest.raises(P4RuntimeException) as err:
            c.set_fwd_pipe_config(files[0], str(bad))
        assert err.value.grpc_error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "p4_device_config.p4:" in err.value.grpc_error.details()
    finally:
        c.tear_down()


def _set_config(c: P4RuntimeClient, source: str, action: int) -> None:
    program = compiler.compile_source(source, filename="l2.p4")
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=0, action=action)
    req.election_id.low = 1
    req.config.p4info.CopyFrom(program.p4info)
    req.config.p4_device_config = source.encode()
    c.stub.SetForwardingPipelineConfig(req)


def test_reconcile_and_commit_keeps_state(switch: tuple[Device, str]) -> None:
    import grpc

    Req = p4runtime_pb2.SetForwardingPipelineConfigRequest
    device, addr = switch
    c = P4RuntimeClient(0, addr, (0, 1))
    try:
        _set_config(c, PROGRAM, Req.VERIFY_AND_COMMIT)
        n = ids(c.get_p4info())
        req = p4runtime_pb2.WriteRequest()
        req.updates.add(
            type=Update.INSERT, entity=l2_entry(n, b"\x00\x00\x00\x00\x00\x02", "I.fwd", 2)
        )
        reg = req.updates.add(type=Update.MODIFY).entity.register_entry
        reg.register_id = n["I.last_len"]
        reg.index.index = 5
        reg.data.bitstring = b"\x2a"
        c.write(req)
        grown = PROGRAM.replace(
            "register<bit<32>>(16) last_len;",
            "register<bit<32>>(16) last_len;\n    counter(4, CounterType.packets) extra;",
        )
        _set_config(c, grown, Req.RECONCILE_AND_COMMIT)
        assert any(x.preamble.name == "I.extra" for x in c.get_p4info().counters)
        entries = [
            e
            for r in c.read_one(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
            for e in r.entities
        ]
        assert len(entries) == 1
        (resp,) = list(c.read_one(p4runtime_pb2.Entity(register_entry=reg)))
        assert resp.entities[0].register_entry.data.bitstring == b"\x2a"
        device.inject(1, frame(2, 0xA1))
        assert wait_for(lambda: device.collect(2)) == [(2, frame(2, 0xA1))]
        changed = grown.replace("key = { h.eth.dst: exact; }", "key = { h.eth.dst: ternary; }")
        with pytest.raises(grpc.RpcError) as err:
            _set_config(c, changed, Req.RECONCILE_AND_COMMIT)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "I.l2" in err.value.details()
        device.inject(1, frame(2, 0xA1))  # the old pipeline still forwards
        assert wait_for(lambda: device.collect(2)) == [(2, frame(2, 0xA1))]
    finally:
        c.tear_down()


def test_idle_timeout_notification_and_time_since_last_hit() -> None:
    from icefabric.target.runtime import ManualClock

    clock = ManualClock(1_000_000)
    device = Device(device_id=0, cpu_port=CPU, clock=clock)
    device.start()
    server, port, service = serve(device, "127.0.0.1:0")
    source = PROGRAM.replace("size = 64;", "size = 64;\n        support_timeout = true;")
    c = P4RuntimeClient(0, f"127.0.0.1:{port}", (0, 1))
    try:
        _set_config(c, source, p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        n = ids(c.get_p4info())
        stale = l2_entry(n, b"\x00\x00\x00\x00\x00\x02", "I.fwd", 2)
        stale.table_entry.idle_timeout_ns = 1_000_000_000
        busy = l2_entry(n, b"\x00\x00\x00\x00\x00\x03", "I.fwd", 3)
        busy.table_entry.idle_timeout_ns = 1_000_000_000
        req = p4runtime_pb2.WriteRequest()
        req.updates.add(type=Update.INSERT, entity=stale)
        req.updates.add(type=Update.INSERT, entity=busy)
        c.write(req)
        clock.advance(600_000)
        device.inject(1, frame(3, 0xA1))  # keeps the second entry alive
        assert wait_for(lambda: device.collect(3))
        clock.advance(600_000)
        note = c.get_stream_packet("idle_timeout_notification", timeout=5)
        assert note is not None
        (entry,) = note.idle_timeout_notification.table_entry
        assert entry.match[0].exact.value == b"\x02"
        assert c.get_stream_packet("idle_timeout_notification", timeout=0.3) is None  # once only
        query = p4runtime_pb2.Entity()
        query.table_entry.table_id = n["I.l2"]
        query.table_entry.time_since_last_hit.elapsed_ns = 0
        got = {
            e.table_entry.match[0].exact.value: e.table_entry.time_since_last_hit.elapsed_ns
            for r in c.read_one(query)
            for e in r.entities
        }
        assert got == {b"\x02": 1_200_000_000, b"\x03": 600_000_000}
    finally:
        c.tear_down()
        service.close()
        server.stop(0)
        device.stop()


def test_wildcard_reads_of_counter_and_register_cells(
    switch: tuple[Device, str], files: tuple[str, str]
) -> None:
    """Id 0 reads every counter/register, no index reads every cell, a bad index is refused."""
    device, addr = switch
    c = P4RuntimeClient(0, addr, (0, 1))
    try:
        c.set_fwd_pipe_config(*files)
        n = ids(c.get_p4info())
        device.inject(5, frame(2, 0xA5))
        assert wait_for(lambda: device.drop_counts())

        def read(entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
            return [e for resp in c.read_one(entity) for e in resp.entities]

        all_counters = p4runtime_pb2.Entity()
        all_counters.counter_entry.SetInParent()
        cells = read(all_counters)
        assert [e.counter_entry.index.index for e in cells] == list(range(8))
        assert {e.counter_entry.counter_id for e in cells} == {n["I.rx"]}
        assert [e.counter_entry.data.packet_count for e in cells] == [0] * 5 + [1, 0, 0]

        all_registers = p4runtime_pb2.Entity()
        all_registers.register_entry.register_id = n["I.last_len"]
        cells = read(all_registers)
        assert len(cells) == 16
        assert cells[5].register_entry.data.bitstring == bytes([len(frame(0, 0))])

        bad = p4runtime_pb2.Entity()
        bad.register_entry.register_id = n["I.last_len"]
        bad.register_entry.index.index = 16
        with pytest.raises(grpc.RpcError) as err:
            read(bad)
        assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE
    finally:
        c.tear_down()
