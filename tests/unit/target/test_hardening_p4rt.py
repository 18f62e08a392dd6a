"""The P4Runtime error model (issue 11, items 14 and 15): keyless tables, don't-care ranges,
empty bytestrings, bad PacketOuts, and per-update errors that fit in a gRPC trailer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeWriteException
from test_server import ACL, DROP, Update, acl_entry, client, exact_entry, files, switch, write

from icefabric.target.device import Device
from icefabric.target.server import serve
from icefabric.waiting import poll_until

__all__ = ["client", "files", "switch"]  # fixtures shared with test_server
ROOT = Path(__file__).resolve().parents[3]


def codes(exc: P4RuntimeWriteException) -> list[int]:
    return [e.canonical_code for _, e in exc.errors]


# ---------------------------------------------------------------- item 14: entries


def test_range_covering_the_whole_field_is_invalid(client: P4RuntimeClient) -> None:
    e = acl_entry(10)
    e.table_entry.match[1].range.low = b"\x00"
    e.table_entry.match[1].range.high = b"\xff\xff"
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, e))
    assert codes(err.value) == [code_pb2.INVALID_ARGUMENT]
    e.table_entry.match[1].range.high = b"\xff\xfe"  # not the whole field: fine
    write(client, (Update.INSERT, e))


def test_empty_bytestring_is_out_of_range(client: P4RuntimeClient) -> None:
    e = exact_entry(1)
    e.table_entry.match[0].exact.value = b""
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, e))
    assert codes(err.value) == [code_pb2.OUT_OF_RANGE]


@pytest.fixture
def ice_switch() -> Iterator[tuple[P4RuntimeClient, Device]]:
    from icefabric.target.compiler import load_program

    device = Device(device_id=1, cpu_port=255)
    server, port, service = serve(device, "127.0.0.1:0")
    program = load_program(ROOT / "p4src" / "ice.p4")
    service.commit_program(program, b"ice")
    c = P4RuntimeClient(1, f"127.0.0.1:{port}", (0, 1))
    try:
        yield c, device
    finally:
        c.tear_down()
        server.stop(0)
        service.close()


def test_insert_into_a_keyless_table_is_invalid(
    ice_switch: tuple[P4RuntimeClient, Device],
) -> None:
    c, _ = ice_switch
    p4info = c.get_p4info()
    (table,) = [t for t in p4info.tables if t.preamble.name == "IceIngress.config.lb_config"]
    assert not table.match_fields
    e = p4runtime_pb2.Entity()
    e.table_entry.table_id = table.preamble.id
    e.table_entry.action.action.action_id = table.action_refs[0].id
    action = next(a for a in p4info.actions if a.preamble.id == table.action_refs[0].id)
    for prm in action.params:
        e.table_entry.action.action.params.add(param_id=prm.id, value=b"\x00")
    for kind in (Update.INSERT, Update.MODIFY, Update.DELETE):
        with pytest.raises(P4RuntimeWriteException) as err:
            write(c, (kind, e))
        assert codes(err.value) == [code_pb2.INVALID_ARGUMENT]
        assert "only its default entry" in err.value.errors[0][1].message


def _packet_out(client: P4RuntimeClient, msg: p4runtime_pb2.PacketOut) -> None:
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.CopyFrom(msg)
    client.stream_out_q.put(req)


@pytest.mark.parametrize(
    ("metadata", "payload", "words"),
    [
        ([], b"\xaa" * 30, "no metadata"),
        ([(1, b"\x03"), (1, b"\x04")], b"\xaa" * 30, "given twice"),
        ([(1, b"\x03")], b"\xaa" * 70_000, "exceeds"),
    ],
)
def test_bad_packet_outs_are_dropped_counted_and_reported(
    client: P4RuntimeClient,
    switch: tuple[Device, str],
    metadata: list[tuple[int, bytes]],
    payload: bytes,
    words: str,
) -> None:
    device = switch[0]
    msg = p4runtime_pb2.PacketOut(payload=payload)
    for mid, value in metadata:
        msg.metadata.add(metadata_id=mid, value=value)
    _packet_out(client, msg)
    err = client.get_stream_packet("unknown", timeout=5)  # p4runtime-shell files errors there
    assert err is not None and err.WhichOneof("update") == "error"
    assert err.error.canonical_code == code_pb2.INVALID_ARGUMENT
    assert words in err.error.message
    assert device.drop_counts().get("packet_out_invalid") == 1
    # a good one after it still goes out (the bad one never reached the wire)
    good = p4runtime_pb2.PacketOut(payload=b"\xcc" * 30)
    good.metadata.add(metadata_id=1, value=b"\x03")
    _packet_out(client, good)
    out: list[tuple[int, bytes]] = []

    def sent() -> bool:
        out.extend(device.collect())
        return bool(out)

    poll_until(sent, 5, 0.01)
    assert out == [(3, b"\xcc" * 30)]


# ---------------------------------------------------------------- item 15: big batches


def test_failing_10000_update_batch_reports_within_the_trailer_limit(
    client: P4RuntimeClient, switch: tuple[Device, str]
) -> None:
    write(client, (Update.INSERT, exact_entry(1)))
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.election_id.low = 1
    for i in range(10_000):
        # every one fails: MODIFY of an entry that is not there
        req.updates.add(type=Update.MODIFY, entity=exact_entry(2 + i % 400))
    ch = grpc.insecure_channel(switch[1])  # gRPC's default limits, as any client has them
    try:
        with pytest.raises(grpc.RpcError) as err:
            p4runtime_pb2_grpc.P4RuntimeStub(ch).Write(req, timeout=60)
    finally:
        ch.close()
    assert err.value.code() == grpc.StatusCode.UNKNOWN  # not RESOURCE_EXHAUSTED
    (raw,) = [v for k, v in err.value.trailing_metadata() if k == "grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    assert 0 < len(status.details) < 10_000
    for anydetail in status.details:
        e = p4runtime_pb2.Error()
        anydetail.Unpack(e)
        assert e.canonical_code == code_pb2.NOT_FOUND
    msg = err.value.details()
    assert "10000 of 10000 updates failed" in msg
    assert f"cover updates 0..{len(status.details) - 1} only" in msg
    assert "beyond them" in msg and "NOT_FOUND" in msg


def test_small_batch_still_reports_every_update(client: P4RuntimeClient) -> None:
    e = acl_entry(5)
    e.table_entry.table_id = ACL
    e.table_entry.action.action.action_id = DROP
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.election_id.low = 1
    req.updates.add(type=Update.INSERT, entity=e)
    req.updates.add(type=Update.INSERT, entity=e)
    with pytest.raises(grpc.RpcError) as err:
        client.stub.Write(req)
    (raw,) = [v for k, v in err.value.trailing_metadata() if k == "grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    got = []
    for anydetail in status.details:
        d = p4runtime_pb2.Error()
        anydetail.Unpack(d)
        got.append(d.canonical_code)
    assert got == [code_pb2.OK, code_pb2.ALREADY_EXISTS]
    assert "cover" not in status.message
