"""P4Runtime server against p4runtime-shell's client as a real peer (fake program)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeException, P4RuntimeWriteException
from test_server_fake import CPU_PORT, P4INFO_TEXT, loader

from icefabric.target.device import Device
from icefabric.target.server import serve
from icefabric.waiting import Deadline, poll_until

Update = p4runtime_pb2.Update
FWD, ACL, ECMP, ROUTES = 33554433, 33554434, 33554435, 33554436
SET_PORT, TO_CPU, DROP, NOACTION = 16777217, 16777218, 16777219, 16777220
SEL = 285212673


@pytest.fixture
def switch() -> Iterator[tuple[Device, str]]:
    device = Device(device_id=1, cpu_port=CPU_PORT)
    device.start()
    server, port, _ = serve(device, "127.0.0.1:0", loader=loader)
    try:
        yield device, f"127.0.0.1:{port}"
    finally:
        server.stop(0)
        device.stop()


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    p4info = tmp_path / "p4info.txt"
    p4info.write_text(P4INFO_TEXT)
    cfg = tmp_path / "fake.bin"
    cfg.write_bytes(b"fake-program")
    return str(p4info), str(cfg)


@pytest.fixture
def client(switch: tuple[Device, str], files: tuple[str, str]) -> Iterator[P4RuntimeClient]:
    c = P4RuntimeClient(1, switch[1], (0, 1))
    c.set_fwd_pipe_config(*files)
    try:
        yield c
    finally:
        c.tear_down()


def exact_entry(port: int, action: int = SET_PORT, out: bytes = b"\x02") -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    te = e.table_entry
    te.table_id = FWD
    te.match.add(field_id=1).exact.value = port.to_bytes(2, "big")
    te.action.action.action_id = action
    if action == SET_PORT:
        te.action.action.params.add(param_id=1, value=out)
    return e


def write(c: P4RuntimeClient, *updates: tuple[int, p4runtime_pb2.Entity]) -> None:
    req = p4runtime_pb2.WriteRequest()
    for t, ent in updates:
        req.updates.add(type=t, entity=ent)
    c.write(req)


def codes(exc: P4RuntimeWriteException) -> list[int]:
    return [e.canonical_code for _, e in exc.errors]


def read(c: P4RuntimeClient, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
    return [e for resp in c.read_one(entity) for e in resp.entities]


def test_capabilities_and_get_config(client: P4RuntimeClient) -> None:
    assert client.api_version() == "1.4.1"
    p4info = client.get_p4info()
    assert {t.preamble.name for t in p4info.tables} >= {"MyIngress.fwd", "MyIngress.acl"}


def test_write_before_pipeline_and_without_arbitration(switch: tuple[Device, str]) -> None:
    c = P4RuntimeClient(1, switch[1], (0, 1))
    try:
        with pytest.raises(grpc.RpcError) as err:
            write(c, (Update.INSERT, exact_entry(1)))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        c.tear_down()
    stub_channel = grpc.insecure_channel(switch[1])
    from p4.v1 import p4runtime_pb2_grpc

    stub = p4runtime_pb2_grpc.P4RuntimeStub(stub_channel)
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.election_id.low = 9  # nobody holds this election id
    with pytest.raises(grpc.RpcError) as rpc:
        stub.Write(req)
    assert rpc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    stub_channel.close()


def test_wrong_device_id_and_bad_config(
    switch: tuple[Device, str], files: tuple[str, str], tmp_path: Path
) -> None:
    c = P4RuntimeClient(1, switch[1], (0, 1))
    try:
        bad = tmp_path / "bad.bin"
        bad.write_bytes(b"not a program")
        with pytest.raises(P4RuntimeException) as err:
            c.set_fwd_pipe_config(files[0], str(bad))
        assert err.value.grpc_error.code() == grpc.StatusCode.INVALID_ARGUMENT
        wrong = tmp_path / "wrong.txt"
        wrong.write_text(P4INFO_TEXT.replace('name: "MyIngress.fwd"', 'name: "MyIngress.other"'))
        with pytest.raises(P4RuntimeException) as err:
            c.set_fwd_pipe_config(str(wrong), files[1])
        assert "does not match" in err.value.grpc_error.details()
    finally:
        c.tear_down()


def test_table_entry_insert_read_modify_delete(client: P4RuntimeClient) -> None:
    write(client, (Update.INSERT, exact_entry(1)))
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, exact_entry(1)))
    assert codes(err.value) == [code_pb2.ALREADY_EXISTS]
    (got,) = read(client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD)))
    assert got.table_entry.match[0].exact.value == b"\x01"  # canonical (sent padded)
    assert got.table_entry.action.action.params[0].value == b"\x02"
    write(client, (Update.MODIFY, exact_entry(1, out=b"\x00\x03")))
    (got,) = read(client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert got.table_entry.action.action.params[0].value == b"\x03"
    write(client, (Update.DELETE, exact_entry(1)))
    assert (
        read(client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD))) == []
    )
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.DELETE, exact_entry(1)))
    assert codes(err.value) == [code_pb2.NOT_FOUND]


def test_batch_reports_each_update(client: P4RuntimeClient) -> None:
    # p4runtime-shell 0.0.6 loops forever on an OK detail before an error, so decode by hand
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.election_id.low = 1
    for ent in (
        exact_entry(1),
        exact_entry(1),
        exact_entry(2, out=b"\x02\x00"),  # 512 does not fit 9 bits
        exact_entry(3, action=NOACTION),  # not an action of the table
        exact_entry(4),
    ):
        req.updates.add(type=Update.INSERT, entity=ent)
    with pytest.raises(grpc.RpcError) as err:
        client.stub.Write(req)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    (raw,) = [v for k, v in err.value.trailing_metadata() if k == "grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    details = []
    for anydetail in status.details:
        e = p4runtime_pb2.Error()
        anydetail.Unpack(e)
        details.append(e.canonical_code)
    assert details == [
        code_pb2.OK,
        code_pb2.ALREADY_EXISTS,
        code_pb2.OUT_OF_RANGE,
        code_pb2.INVALID_ARGUMENT,
        code_pb2.OK,
    ]
    assert (
        len(read(client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD))))
        == 2
    )


def test_table_full_is_resource_exhausted(client: P4RuntimeClient) -> None:
    for port in range(4):
        write(client, (Update.INSERT, exact_entry(port)))
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, exact_entry(9)))
    assert codes(err.value) == [code_pb2.RESOURCE_EXHAUSTED]


def acl_entry(priority: int, mask: bytes = b"\xff\xff") -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    te = e.table_entry
    te.table_id = ACL
    te.priority = priority
    fm = te.match.add(field_id=1)
    fm.ternary.value = b"\x08\x00"
    fm.ternary.mask = mask
    r = te.match.add(field_id=2)
    r.range.low = b"\x00\x10"
    r.range.high = b"\x00\x20"
    te.action.action.action_id = DROP
    return e


def test_ternary_range_priority_rules(client: P4RuntimeClient) -> None:
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, acl_entry(0)))
    assert codes(err.value) == [code_pb2.INVALID_ARGUMENT]
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, acl_entry(5, mask=b"\xf0\x00")))  # value bits outside mask
    assert codes(err.value) == [code_pb2.INVALID_ARGUMENT]
    write(client, (Update.INSERT, acl_entry(10)), (Update.INSERT, acl_entry(20)))
    got = read(client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=ACL)))
    assert sorted(e.table_entry.priority for e in got) == [10, 20]
    m = got[0].table_entry.match
    assert (m[0].ternary.value, m[0].ternary.mask, m[1].range.low) == (
        b"\x08\x00",
        b"\xff\xff",
        b"\x10",
    )


def test_lpm_canonical_rules(client: P4RuntimeClient) -> None:
    def route(value: bytes, plen: int) -> p4runtime_pb2.Entity:
        e = p4runtime_pb2.Entity()
        e.table_entry.table_id = ROUTES
        lpm = e.table_entry.match.add(field_id=1).lpm
        lpm.value, lpm.prefix_len = value, plen
        e.table_entry.action.action.action_id = NOACTION
        return e

    with pytest.raises(P4RuntimeWriteException) as err:
        write(
            client,
            (Update.INSERT, route(b"\x0a\x00\x00\x01", 8)),
            (Update.INSERT, route(b"\x0a", 33)),
        )
    assert codes(err.value) == [code_pb2.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT]
    write(client, (Update.INSERT, route(b"\x0a\x00\x00\x00", 8)))
    (got,) = read(
        client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=ROUTES))
    )
    assert got.table_entry.match[0].lpm.prefix_len == 8


def test_default_entry_modify_and_read(client: P4RuntimeClient, switch: tuple[Device, str]) -> None:
    e = exact_entry(0, out=b"\x05")
    e.table_entry.ClearField("match")
    e.table_entry.is_default_action = True
    write(client, (Update.MODIFY, e))
    (got,) = read(
        client,
        p4runtime_pb2.Entity(
            table_entry=p4runtime_pb2.TableEntry(table_id=FWD, is_default_action=True)
        ),
    )
    assert got.table_entry.action.action.action_id == SET_PORT
    device = switch[0]
    device.inject(7, b"\x00" * 20)
    out: list[tuple[int, bytes]] = []

    def collected() -> bool:
        out.extend(device.collect())
        return bool(out)

    poll_until(collected, 5.0, 0.01)
    assert out and out[0][0] == 5
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, e))
    assert codes(err.value) == [code_pb2.INVALID_ARGUMENT]


def test_action_profile_members_groups_and_oneshot(client: P4RuntimeClient) -> None:
    ents = []
    for mid in (1, 2):
        m = p4runtime_pb2.Entity()
        m.action_profile_member.action_profile_id = SEL
        m.action_profile_member.member_id = mid
        m.action_profile_member.action.action_id = SET_PORT
        m.action_profile_member.action.params.add(param_id=1, value=bytes([mid]))
        ents.append((Update.INSERT, m))
    g = p4runtime_pb2.Entity()
    g.action_profile_group.action_profile_id = SEL
    g.action_profile_group.group_id = 7
    g.action_profile_group.members.add(member_id=1, weight=1)
    g.action_profile_group.members.add(member_id=2, weight=1)
    ents.append((Update.INSERT, g))
    te = p4runtime_pb2.Entity()
    te.table_entry.table_id = ECMP
    te.table_entry.match.add(field_id=1).exact.value = b"\x01"
    te.table_entry.action.action_profile_group_id = 7
    ents.append((Update.INSERT, te))
    write(client, *ents)
    groups = read(
        client, p4runtime_pb2.Entity(action_profile_group=p4runtime_pb2.ActionProfileGroup())
    )
    assert [len(x.action_profile_group.members) for x in groups] == [2]
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.DELETE, ents[0][1]))
    assert codes(err.value) == [code_pb2.FAILED_PRECONDITION]
    one = p4runtime_pb2.Entity()
    one.table_entry.table_id = ECMP
    one.table_entry.match.add(field_id=1).exact.value = b"\x02"
    aset = one.table_entry.action.action_profile_action_set
    for port in (3, 4):
        a = aset.action_profile_actions.add(weight=1)
        a.action.action_id = SET_PORT
        a.action.params.add(param_id=1, value=bytes([port]))
    write(client, (Update.INSERT, one))
    entries = read(
        client, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=ECMP))
    )
    kinds = sorted(e.table_entry.action.WhichOneof("type") for e in entries)
    assert kinds == ["action_profile_action_set", "action_profile_group_id"]
    members = read(
        client, p4runtime_pb2.Entity(action_profile_member=p4runtime_pb2.ActionProfileMember())
    )
    assert [m.action_profile_member.member_id for m in members] == [1, 2]  # hidden ones not listed
    write(client, (Update.DELETE, one))


def test_pre_entries(client: P4RuntimeClient, switch: tuple[Device, str]) -> None:
    mg = p4runtime_pb2.Entity()
    grp = mg.packet_replication_engine_entry.multicast_group_entry
    grp.multicast_group_id = 3
    grp.replicas.add(egress_port=1, instance=1)
    grp.replicas.add(egress_port=2, instance=1)
    cs = p4runtime_pb2.Entity()
    sess = cs.packet_replication_engine_entry.clone_session_entry
    sess.session_id = 100
    sess.replicas.add(egress_port=CPU_PORT, instance=0)
    sess.packet_length_bytes = 128
    write(client, (Update.INSERT, mg), (Update.INSERT, cs))
    assert switch[0].mcast_groups[3][1].egress_port == 2
    assert switch[0].clone_sessions[100].packet_length_bytes == 128
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.INSERT, mg))
    assert codes(err.value) == [code_pb2.ALREADY_EXISTS]
    q = p4runtime_pb2.Entity()
    q.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    (got,) = read(client, q)
    assert len(got.packet_replication_engine_entry.multicast_group_entry.replicas) == 2
    write(client, (Update.DELETE, mg))
    assert 3 not in switch[0].mcast_groups


def test_registers_counters_meters(client: P4RuntimeClient, switch: tuple[Device, str]) -> None:
    r = p4runtime_pb2.Entity()
    r.register_entry.register_id = 385875969
    r.register_entry.index.index = 2
    r.register_entry.data.bitstring = b"\x00\x00\x12\x34"
    write(client, (Update.MODIFY, r))
    (got,) = read(client, r)
    assert got.register_entry.data.bitstring == b"\x12\x34"
    allr = p4runtime_pb2.Entity()
    allr.register_entry.register_id = 385875969
    assert len(read(client, allr)) == 4
    r.register_entry.index.index = 4
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.MODIFY, r))
    assert codes(err.value) == [code_pb2.OUT_OF_RANGE]
    write(client, (Update.INSERT, exact_entry(1, out=b"\x02")))
    device = switch[0]
    for _ in range(3):
        device.inject(1, bytes(60))
    assert poll_until(lambda: len(device.collect(2)) >= 3, 5, 0.01)
    c = p4runtime_pb2.Entity()
    c.counter_entry.counter_id = 302055425
    c.counter_entry.index.index = 1
    (got,) = read(client, c)
    assert (got.counter_entry.data.packet_count, got.counter_entry.data.byte_count) == (3, 180)
    d = p4runtime_pb2.Entity()
    d.direct_counter_entry.table_entry.table_id = FWD
    (got,) = read(client, d)
    assert got.direct_counter_entry.data.packet_count == 3
    m = p4runtime_pb2.Entity()
    m.meter_entry.meter_id = 335544321
    m.meter_entry.index.index = 1
    m.meter_entry.config.cir, m.meter_entry.config.cburst = 100, 10
    m.meter_entry.config.pir, m.meter_entry.config.pburst = 200, 20
    write(client, (Update.MODIFY, m))
    (got,) = read(client, m)
    assert got.meter_entry.config.pir == 200
    m.meter_entry.config.cir = 500  # cir > pir
    with pytest.raises(P4RuntimeWriteException) as err:
        write(client, (Update.MODIFY, m))
    assert codes(err.value) == [code_pb2.INVALID_ARGUMENT]


def test_arbitration_primary_backup_and_failover(
    switch: tuple[Device, str], files: tuple[str, str]
) -> None:
    a = P4RuntimeClient(1, switch[1], (0, 5))
    b = P4RuntimeClient(1, switch[1], (0, 3))
    try:
        a.set_fwd_pipe_config(*files)
        with pytest.raises(P4RuntimeException) as err:
            b.set_fwd_pipe_config(*files)
        assert err.value.grpc_error.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as werr:
            write(b, (Update.INSERT, exact_entry(1)))
        assert werr.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # b can read
        assert read(b, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())) == []
        a.tear_down()
        msg = b.get_stream_packet("arbitration", timeout=5)
        assert msg is not None and msg.arbitration.status.code == code_pb2.OK
        write(b, (Update.INSERT, exact_entry(1)))
    finally:
        b.tear_down()


def test_new_higher_election_id_takes_over(switch: tuple[Device, str]) -> None:
    a = P4RuntimeClient(1, switch[1], (0, 1))
    try:
        b = P4RuntimeClient(1, switch[1], (0, 2))
        try:
            msg = a.get_stream_packet("arbitration", timeout=5)
            assert msg is not None and msg.arbitration.status.code == code_pb2.ALREADY_EXISTS
            assert msg.arbitration.election_id.low == 2
        finally:
            b.tear_down()
    finally:
        a.tear_down()


def test_packet_out_and_packet_in(client: P4RuntimeClient, switch: tuple[Device, str]) -> None:
    device = switch[0]
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = b"\xaa" * 30
    req.packet.metadata.add(metadata_id=1, value=b"\x03")
    client.stream_out_q.put(req)
    out: list[tuple[int, bytes]] = []

    def sent() -> bool:
        out.extend(device.collect(3))
        return bool(out)

    poll_until(sent, 5, 0.01)
    assert out == [(3, b"\xaa" * 30)]
    write(client, (Update.INSERT, exact_entry(5, action=TO_CPU)))
    device.inject(5, b"\xbb" * 20)
    msg = client.get_stream_packet("packet", timeout=5)
    assert msg is not None
    assert msg.packet.payload == b"\xbb" * 20
    meta = {m.metadata_id: m.value for m in msg.packet.metadata}
    assert meta == {1: b"\x05", 2: b"\x00"}


def test_digest_list_after_digest_entry(
    client: P4RuntimeClient, switch: tuple[Device, str]
) -> None:
    d = p4runtime_pb2.Entity()
    d.digest_entry.digest_id = 402653185
    d.digest_entry.config.max_list_size = 1
    write(client, (Update.INSERT, d), (Update.INSERT, exact_entry(1)))
    switch[0].inject(1, b"\xdd\x00\x00\x00\x00\x00\x07" + bytes(20))
    msg = client.get_stream_packet("digest", timeout=5)
    assert msg is not None
    (data,) = msg.digest.data
    assert [m.bitstring for m in data.struct.members] == [b"\x07", b"\x01"]
    ack = p4runtime_pb2.StreamMessageRequest()
    ack.digest_ack.digest_id = msg.digest.digest_id
    ack.digest_ack.list_id = msg.digest.list_id
    client.stream_out_q.put(ack)


def test_verify_save_commit_and_cookie(switch: tuple[Device, str], files: tuple[str, str]) -> None:
    from p4.config.v1 import p4info_pb2

    c = P4RuntimeClient(1, switch[1], (0, 1))
    try:
        p4info = text_format.Parse(Path(files[0]).read_text(), p4info_pb2.P4Info())
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = b"fake-program"
        req.config.cookie.cookie = 42
        req.action = req.VERIFY
        c.stub.SetForwardingPipelineConfig(req)
        assert switch[0].pipeline is None
        req.action = req.COMMIT
        with pytest.raises(grpc.RpcError) as err:
            c.stub.SetForwardingPipelineConfig(req)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        req.action = req.VERIFY_AND_SAVE
        c.stub.SetForwardingPipelineConfig(req)
        assert switch[0].pipeline is None
        commit = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=req.COMMIT)
        commit.election_id.low = 1
        c.stub.SetForwardingPipelineConfig(commit)
        assert switch[0].pipeline is not None
        get = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=1, response_type=1
        )  # COOKIE_ONLY
        resp = c.stub.GetForwardingPipelineConfig(get)
        assert resp.config.cookie.cookie == 42 and not resp.config.p4_device_config
        get.response_type = 3  # DEVICE_CONFIG_AND_COOKIE
        assert c.stub.GetForwardingPipelineConfig(get).config.p4_device_config == b"fake-program"
        write(c, (Update.INSERT, exact_entry(1)))
        req.action = req.RECONCILE_AND_COMMIT
        c.stub.SetForwardingPipelineConfig(req)
        assert len(read(c, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))) == 1
    finally:
        c.tear_down()


def test_digest_batching_timeout_and_duplicate_suppression(
    client: P4RuntimeClient, switch: tuple[Device, str]
) -> None:
    device = switch[0]
    d = p4runtime_pb2.Entity()
    d.digest_entry.digest_id = 402653185
    d.digest_entry.config.max_list_size = 3
    d.digest_entry.config.max_timeout_ns = 200_000_000
    d.digest_entry.config.ack_timeout_ns = 60_000_000_000
    write(
        client, (Update.INSERT, d), (Update.INSERT, exact_entry(1)), (Update.INSERT, exact_entry(2))
    )
    learn = b"\xdd\x00\x00\x00\x00\x00\x07" + bytes(20)
    device.inject(1, learn)
    device.inject(2, learn)
    device.inject(1, learn)  # duplicate of the first: suppressed until acked
    msg = client.get_stream_packet("digest", timeout=5)
    assert msg is not None
    assert [[m.bitstring for m in x.struct.members] for x in msg.digest.data] == [
        [b"\x07", b"\x01"],
        [b"\x07", b"\x02"],
    ]
    assert client.get_stream_packet("digest", timeout=0.5) is None
    ack = p4runtime_pb2.StreamMessageRequest()
    ack.digest_ack.digest_id = msg.digest.digest_id
    ack.digest_ack.list_id = msg.digest.list_id
    client.stream_out_q.put(ack)
    again = None
    deadline = Deadline(5.0)
    while again is None and not deadline.expired:  # suppressed until the ack lands
        device.inject(1, learn)
        again = client.get_stream_packet("digest", timeout=0.25)
    assert again is not None and again.digest.list_id > msg.digest.list_id
    got = read(client, d)
    assert got[0].digest_entry.config.max_list_size == 3
