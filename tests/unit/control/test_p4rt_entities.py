"""Entities encode to and decode from P4Runtime protobufs, tested as data (no switch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2

from icefabric.control.p4rt import (
    LPM,
    ActionProfileGroup,
    ActionProfileMember,
    CloneSessionEntry,
    CounterData,
    CounterEntry,
    DigestEntry,
    DigestList,
    DirectCounterEntry,
    DirectMeterEntry,
    EncodeError,
    Exact,
    GroupMember,
    IdleTimeoutNotification,
    MeterConfig,
    MeterEntry,
    MulticastGroupEntry,
    Optional,
    P4InfoError,
    P4InfoIndex,
    PacketIn,
    PacketOut,
    Range,
    RegisterEntry,
    Replica,
    TableEntry,
    Ternary,
    Update,
    decode_entity,
    encode_entity,
)
from icefabric.control.p4rt.packets import ArbitrationUpdate, StreamErrorMessage

FIXTURE = Path(__file__).parent / "p4" / "l3_fixture.p4info.txtpb"


@pytest.fixture(scope="module")
def p4info() -> P4InfoIndex:
    return P4InfoIndex.load(FIXTURE)


def as_text(msg: object) -> str:
    return text_format.MessageToString(msg, as_one_line=True)  # type: ignore[arg-type]


def parse(cls: type, text: str) -> object:
    return text_format.Parse(text, cls())


def test_lpm_entry_encodes_as_expected(p4info: P4InfoIndex) -> None:
    entry = TableEntry(
        table="MyIngress.ipv4_lpm",
        match={"hdr.ipv4.dstAddr": ("10.0.1.0", 24)},
        action="MyIngress.set_nhop",
        params={"dmac": "00:00:00:00:01:01", "port": 2},
    )
    expected = parse(
        p4runtime_pb2.TableEntry,
        r"""
        table_id: 37375156
        match { field_id: 1 lpm { value: "\n\000\001\000" prefix_len: 24 } }
        action { action { action_id: 28792405
            params { param_id: 1 value: "\001\001" }
            params { param_id: 2 value: "\002" } } }
        """,
    )
    assert entry.encode(p4info) == expected
    # the same entry spelled with aliases, a CIDR string and an explicit LPM object
    for match in ("10.0.1.0/24", LPM("10.0.1.0", 24), LPM(0x0A000100, 24)):
        other = TableEntry(
            table="ipv4_lpm",
            match={"hdr.ipv4.dstAddr": match},
            action="set_nhop",
            params={"port": 2, "dmac": 0x0101},
        )
        assert other.encode(p4info) == expected


def test_lpm_clears_host_bits_and_omits_zero_prefix(p4info: P4InfoIndex) -> None:
    e = TableEntry(table="ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.1.7/24"}, action="drop")
    assert e.encode(p4info).match[0].lpm.value == bytes([10, 0, 1, 0])
    default_route = TableEntry(
        table="ipv4_lpm", match={"hdr.ipv4.dstAddr": "0.0.0.0/0"}, action="drop"
    )
    assert len(default_route.encode(p4info).match) == 0
    full = TableEntry(table="ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.0.1"}, action="drop")
    assert full.encode(p4info).match[0].lpm.prefix_len == 32


def test_acl_entry_with_ternary_range_optional_exact(p4info: P4InfoIndex) -> None:
    entry = TableEntry(
        table="acl",
        match={
            "hdr.ipv4.srcAddr": ("10.1.2.3", "255.255.0.0"),
            "hdr.tcp.dstPort": (4791, 4800),
            "standard_metadata.ingress_port": 3,
            "hdr.ipv4.protocol": 17,
        },
        action="to_cpu",
        priority=10,
    )
    expected = parse(
        p4runtime_pb2.TableEntry,
        r"""
        table_id: 44506256
        match { field_id: 1 ternary { value: "\n\001\000\000" mask: "\377\377\000\000" } }
        match { field_id: 2 range { low: "\022\267" high: "\022\300" } }
        match { field_id: 3 optional { value: "\003" } }
        match { field_id: 4 exact { value: "\021" } }
        action { action { action_id: 23479876 } }
        priority: 10
        """,
    )
    assert entry.encode(p4info) == expected
    explicit = TableEntry(
        table="MyIngress.acl",
        match={
            "hdr.ipv4.protocol": Exact(17),
            "standard_metadata.ingress_port": Optional(3),
            "hdr.tcp.dstPort": Range(4791, 4800),
            "hdr.ipv4.srcAddr": Ternary(0x0A010203, 0xFFFF0000),
        },
        action="MyIngress.to_cpu",
        priority=10,
    )
    assert explicit.encode(p4info) == expected
    spelled = TableEntry(
        table="acl",
        match={
            "hdr.ipv4.srcAddr": "10.1.2.3 &&& 255.255.0.0",
            "hdr.tcp.dstPort": (4791, 4800),
            "standard_metadata.ingress_port": 3,
            "hdr.ipv4.protocol": 17,
        },
        action="to_cpu",
        priority=10,
    )
    assert spelled.encode(p4info) == expected


def test_dont_care_matches_are_omitted(p4info: P4InfoIndex) -> None:
    entry = TableEntry(
        table="acl",
        match={
            "hdr.ipv4.srcAddr": (0, 0),
            "hdr.tcp.dstPort": (0, 65535),
            "hdr.ipv4.protocol": 6,
        },
        action="drop",
        priority=1,
    )
    msg = entry.encode(p4info)
    assert [m.field_id for m in msg.match] == [4]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"match": {"hdr.ipv4.dstAddr": ("10.0.0.0", 33)}},
            "match field hdr.ipv4.dstAddr: prefix length 33",
        ),
        (
            {"match": {"hdr.ipv4.dst": "10.0.0.0/8"}},
            r"no match field of table MyIngress.ipv4_lpm 'hdr.ipv4.dst'",
        ),
        ({"match": {"hdr.ipv4.dstAddr": "10.0.0.0/x"}}, "bad prefix length"),
        (
            {"match": {"hdr.ipv4.dstAddr": "2001::/16"}},
            "table MyIngress.ipv4_lpm match field hdr.ipv4.dstAddr.*does not fit in 32",
        ),
        (
            {"action": "to_cpu"},
            r"action MyIngress.to_cpu is not allowed \(allowed: MyIngress.set_nhop, MyIngress.drop, NoAction\)",
        ),
        ({"action": "set_nhop", "params": {"dmac": 1}}, "needs parameter 'port'"),
        (
            {"action": "set_nhop", "params": {"dmac": 1, "port": 2, "vlan": 3}},
            "has no parameter 'vlan'",
        ),
        (
            {"action": "set_nhop", "params": {"dmac": 1, "port": 512}},
            r"MyIngress.set_nhop.port: 512 .* does not fit in 9 bits",
        ),
        ({"action": "drop", "member_id": 3}, "give one of action, member_id, group_id"),
        ({"match": {"hdr.ipv4.dstAddr": Range(1, 2)}}, "the field is lpm match, got Range"),
        ({"match": {"hdr.ipv4.dstAddr": (1, 2, 3)}}, "expected a pair"),
    ],
)
def test_bad_entries_raise_errors_naming_table_and_field(
    p4info: P4InfoIndex, kwargs: dict, message: str
) -> None:
    entry = TableEntry(table="ipv4_lpm", **kwargs)
    with pytest.raises((EncodeError, P4InfoError), match=message):
        entry.encode(p4info)


def test_range_low_above_high(p4info: P4InfoIndex) -> None:
    e = TableEntry(table="acl", match={"hdr.tcp.dstPort": (10, 5)}, action="drop", priority=1)
    with pytest.raises(EncodeError, match="range low 10 is above high 5"):
        e.encode(p4info)


def test_unknown_table_lists_known_tables(p4info: P4InfoIndex) -> None:
    with pytest.raises(P4InfoError, match=r"no table 'l2'.*MyIngress\.acl"):
        TableEntry(table="l2").encode(p4info)


def test_wildcard_reads_and_default_entry(p4info: P4InfoIndex) -> None:
    assert as_text(TableEntry().encode(p4info)) == ""
    assert as_text(TableEntry(table="acl").encode(p4info)) == "table_id: 44506256"
    default = TableEntry(table="ipv4_lpm", is_default_action=True, action="drop")
    assert as_text(default.encode(p4info)) == (
        "table_id: 37375156 action { action { action_id: 25652968 } } is_default_action: true"
    )
    with pytest.raises(EncodeError, match="without a table name"):
        TableEntry(action="drop").encode(p4info)


def test_indirect_entries_and_extras(p4info: P4InfoIndex) -> None:
    member = TableEntry(table="ecmp_group", match={"hdr.ipv4.dstAddr": "10.0.0.1"}, member_id=7)
    group = TableEntry(table="ecmp_group", match={"hdr.ipv4.dstAddr": "10.0.0.2"}, group_id=3)
    assert member.encode(p4info).action.action_profile_member_id == 7
    assert group.encode(p4info).action.action_profile_group_id == 3
    rich = TableEntry(
        table="ipv4_lpm",
        match={"hdr.ipv4.dstAddr": "10.0.0.0/8"},
        action="drop",
        counter_data=CounterData(byte_count=100, packet_count=2),
        meter_config=MeterConfig(cir=1, cburst=2, pir=3, pburst=4),
        idle_timeout_ns=5_000,
        metadata=b"cookie",
        controller_metadata=9,
    )
    msg = rich.encode(p4info)
    assert msg.counter_data.byte_count == 100 and msg.meter_config.pburst == 4
    assert TableEntry.decode(msg, p4info) == TableEntry(
        table="MyIngress.ipv4_lpm",
        match={"hdr.ipv4.dstAddr": LPM(0x0A000000, 8)},
        action="MyIngress.drop",
        counter_data=CounterData(byte_count=100, packet_count=2),
        meter_config=MeterConfig(cir=1, cburst=2, pir=3, pburst=4),
        idle_timeout_ns=5_000,
        metadata=b"cookie",
        controller_metadata=9,
    )


def test_decode_gives_ints_and_match_objects(p4info: P4InfoIndex) -> None:
    msg = parse(
        p4runtime_pb2.TableEntry,
        r"""
        table_id: 44506256
        match { field_id: 1 ternary { value: "\000\n\001\000\000" mask: "\000\377\377\000\000" } }
        match { field_id: 2 range { low: "\022\267" high: "\022\300" } }
        match { field_id: 3 optional { value: "\000\003" } }
        match { field_id: 4 exact { value: "\021" } }
        action { action { action_id: 23479876 } }
        priority: 10
        """,
    )
    entry = TableEntry.decode(msg, p4info)  # type: ignore[arg-type]
    assert entry.table == "MyIngress.acl"
    assert entry.match == {
        "hdr.ipv4.srcAddr": Ternary(0x0A010000, 0xFFFF0000),
        "hdr.ipv4.protocol": 17,
        "hdr.tcp.dstPort": Range(4791, 4800),
        "standard_metadata.ingress_port": Optional(3),
    }
    assert entry.action == "MyIngress.to_cpu" and entry.priority == 10
    # re-encoding gives the canonical form (no leading zero bytes)
    again = entry.encode(p4info)
    assert again.match[0].ternary.value == b"\n\x01\x00\x00"
    assert again.match[2].optional.value == b"\x03"


def test_entities_are_hashable_values() -> None:
    a = TableEntry(table="t", match={"f": 1}, action="a", params={"p": 2})
    b = TableEntry(table="t", match={"f": 1}, action="a", params={"p": 2})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(TypeError):
        a.match["f"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        a.table = "x"  # type: ignore[misc]


def test_action_profile_member_and_group(p4info: P4InfoIndex) -> None:
    member = ActionProfileMember(
        action_profile="ecmp_selector",
        member_id=1,
        action="set_nhop",
        params={"dmac": "00:00:00:00:00:02", "port": 2},
    )
    assert as_text(member.encode(p4info)) == (
        "action_profile_id: 297808402 member_id: 1 action { action_id: 28792405 "
        'params { param_id: 1 value: "\\002" } params { param_id: 2 value: "\\002" } }'
    )
    group = ActionProfileGroup(
        action_profile="ecmp_selector", group_id=5, members=[1, (2, 3)], max_size=8
    )
    assert as_text(group.encode(p4info)) == (
        "action_profile_id: 297808402 group_id: 5 members { member_id: 1 weight: 1 } "
        "members { member_id: 2 weight: 3 } max_size: 8"
    )
    assert group.members == (GroupMember(1, 1), GroupMember(2, 3))
    assert ActionProfileMember.decode(member.encode(p4info), p4info) == ActionProfileMember(
        action_profile="MyIngress.ecmp_selector",
        member_id=1,
        action="MyIngress.set_nhop",
        params={"dmac": 2, "port": 2},
    )
    assert ActionProfileGroup.decode(group.encode(p4info), p4info) == ActionProfileGroup(
        action_profile="MyIngress.ecmp_selector", group_id=5, members=[1, (2, 3)], max_size=8
    )
    assert as_text(ActionProfileMember(action_profile="ecmp_selector").encode(p4info)) == (
        "action_profile_id: 297808402"
    )


def test_pre_entries(p4info: P4InfoIndex) -> None:
    mc = MulticastGroupEntry(multicast_group_id=1, replicas=[1, (2, 1), Replica(3, 2)])
    assert as_text(mc.encode()) == (
        "multicast_group_entry { multicast_group_id: 1 replicas { egress_port: 1 } "
        "replicas { egress_port: 2 instance: 1 } replicas { egress_port: 3 instance: 2 } }"
    )
    assert MulticastGroupEntry.decode(mc.encode()) == mc
    clone = CloneSessionEntry(session_id=100, replicas=[(255, 0)], packet_length_bytes=128)
    assert as_text(clone.encode()) == (
        "clone_session_entry { session_id: 100 replicas { egress_port: 255 } "
        "packet_length_bytes: 128 }"
    )
    assert CloneSessionEntry.decode(clone.encode()) == clone
    # a 1.4 server may answer with the bytes `port` form
    msg = parse(
        p4runtime_pb2.PacketReplicationEngineEntry,
        r'multicast_group_entry { multicast_group_id: 4 replicas { port: "\001\002" instance: 1 } }',
    )
    assert MulticastGroupEntry.decode(msg).replicas == (Replica(0x102, 1),)  # type: ignore[arg-type]


def test_counter_meter_register_digest_entries(p4info: P4InfoIndex) -> None:
    assert as_text(CounterEntry(counter="port_counter", index=3).encode(p4info)) == (
        "counter_id: 302055013 index { index: 3 }"
    )
    assert as_text(CounterEntry(counter="port_counter").encode(p4info)) == "counter_id: 302055013"
    decoded = CounterEntry.decode(
        parse(
            p4runtime_pb2.CounterEntry,
            "counter_id: 302055013 index { index: 3 } data { byte_count: 64 packet_count: 1 }",
        ),  # type: ignore[arg-type]
        p4info,
    )
    assert decoded == CounterEntry(
        counter="MyIngress.port_counter", index=3, data=CounterData(byte_count=64, packet_count=1)
    )
    dc = DirectCounterEntry(table_entry=TableEntry(table="ipv4_lpm"))
    assert as_text(dc.encode(p4info)) == "table_entry { table_id: 37375156 }"
    meter = MeterEntry(
        meter="port_meter", index=1, config=MeterConfig(cir=10, cburst=20, pir=30, pburst=40)
    )
    assert MeterEntry.decode(meter.encode(p4info), p4info) == MeterEntry(
        meter="MyIngress.port_meter",
        index=1,
        config=MeterConfig(cir=10, cburst=20, pir=30, pburst=40),
    )
    dm = DirectMeterEntry(
        table_entry=TableEntry(table="ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.0.0/8"}),
        config=MeterConfig(cir=1, cburst=1, pir=2, pburst=2),
    )
    assert DirectMeterEntry.decode(dm.encode(p4info), p4info).config == dm.config
    reg = RegisterEntry(register="flow_bytes", index=7, value=2**40)
    assert as_text(reg.encode(p4info)) == (
        'register_id: 376716449 index { index: 7 } data { bitstring: "\\001\\000\\000\\000\\000\\000" }'
    )
    assert RegisterEntry.decode(reg.encode(p4info), p4info) == RegisterEntry(
        register="MyIngress.flow_bytes", index=7, value=2**40
    )
    with pytest.raises(
        EncodeError, match=r"register MyIngress.flow_bytes: index 1024 outside 0..1023"
    ):
        RegisterEntry(register="flow_bytes", index=1024).encode(p4info)
    with pytest.raises(EncodeError, match="does not fit in 64 bits"):
        RegisterEntry(register="flow_bytes", index=0, value=2**64).encode(p4info)
    digest = DigestEntry(digest="learn_t", max_list_size=10, max_timeout_ns=1000)
    assert as_text(digest.encode(p4info)) == (
        "digest_id: 401827287 config { max_timeout_ns: 1000 max_list_size: 10 ack_timeout_ns: 1000000000 }"
    )


def test_entity_wrapping_round_trip(p4info: P4InfoIndex) -> None:
    objs = [
        TableEntry(
            table="MyIngress.ipv4_lpm",
            match={"hdr.ipv4.dstAddr": LPM(0x0A000000, 8)},
            action="MyIngress.drop",
        ),
        ActionProfileMember(
            action_profile="MyIngress.ecmp_selector", member_id=2, action="NoAction"
        ),
        ActionProfileGroup(action_profile="MyIngress.ecmp_selector", group_id=1, members=[2]),
        MulticastGroupEntry(multicast_group_id=3, replicas=[1, 2]),
        CloneSessionEntry(session_id=5, replicas=[(64, 0)]),
        CounterEntry(counter="MyIngress.port_counter", index=1),
        MeterEntry(meter="MyIngress.port_meter", index=2),
        RegisterEntry(register="MyIngress.flow_bytes", index=3, value=4),
        DigestEntry(digest="learn_t", max_list_size=1, max_timeout_ns=0, ack_timeout_ns=5),
    ]
    for obj in objs:
        msg = encode_entity(obj, p4info)
        assert msg.WhichOneof("entity") == obj.ENTITY_FIELD
        assert decode_entity(msg, p4info) == obj
    with pytest.raises(EncodeError, match="not a P4Runtime entity: str"):
        encode_entity("x", p4info)  # type: ignore[arg-type]
    update = Update("DELETE", objs[0]).encode(p4info)
    assert update.type == p4runtime_pb2.Update.DELETE
    with pytest.raises(EncodeError, match="update type 'UPSERT'"):
        Update("UPSERT", objs[0]).encode(p4info)  # type: ignore[arg-type]


def test_packet_out_and_in_metadata(p4info: P4InfoIndex) -> None:
    out = PacketOut(payload=b"\x01\x02", metadata={"egress_port": 3})
    assert (
        as_text(out.encode(p4info))
        == 'payload: "\\001\\002" metadata { metadata_id: 1 value: "\\003" }'
    )
    with pytest.raises(
        EncodeError, match=r"no metadata field 'port' \(fields: egress_port, _pad\)"
    ):
        PacketOut(payload=b"", metadata={"port": 1}).encode(p4info)
    with pytest.raises(EncodeError, match="egress_port: 512"):
        PacketOut(payload=b"", metadata={"egress_port": 512}).encode(p4info)
    msg = parse(
        p4runtime_pb2.PacketIn,
        r'payload: "abc" metadata { metadata_id: 1 value: "\001\000" } metadata { metadata_id: 2 value: "\000" }',
    )
    pin = PacketIn.decode(msg, p4info)  # type: ignore[arg-type]
    assert pin == PacketIn(payload=b"abc", metadata={"ingress_port": 256, "_pad": 0})
    assert PacketIn.decode(pin.encode(p4info), p4info) == pin


def test_digest_list_members_by_name(p4info: P4InfoIndex) -> None:
    msg = parse(
        p4runtime_pb2.DigestList,
        r"""
        digest_id: 401827287 list_id: 9 timestamp: 123
        data { struct { members { bitstring: "\000\001\002\003\004\005" } members { bitstring: "\002" } } }
        data { struct { members { bitstring: "\012" } members { bitstring: "\001\000" } } }
        """,
    )
    dl = DigestList.decode(msg, p4info)  # type: ignore[arg-type]
    assert dl.digest == "learn_t" and dl.list_id == 9 and dl.timestamp == 123
    assert dl.data == (
        {"srcAddr": 0x0102030405, "ingress_port": 2},
        {"srcAddr": 10, "ingress_port": 256},
    )
    assert as_text(dl.ack(p4info)) == "digest_id: 401827287 list_id: 9"


def test_arbitration_and_stream_error_decode() -> None:
    primary = ArbitrationUpdate.decode(
        parse(
            p4runtime_pb2.MasterArbitrationUpdate,
            "device_id: 1 election_id { high: 1 low: 2 } status { code: 0 }",
        )  # type: ignore[arg-type]
    )
    assert primary.is_primary and primary.election_id == (1 << 64) + 2
    backup = ArbitrationUpdate.decode(
        parse(
            p4runtime_pb2.MasterArbitrationUpdate,
            'device_id: 1 election_id { low: 9 } status { code: 6 message: "backup" }',
        )  # type: ignore[arg-type]
    )
    assert not backup.is_primary and backup.code.name == "ALREADY_EXISTS"
    err = StreamErrorMessage.decode(
        parse(p4runtime_pb2.StreamError, 'canonical_code: 3 message: "bad port" packet_out { }')  # type: ignore[arg-type]
    )
    assert err.code.name == "INVALID_ARGUMENT" and err.kind == "packet_out"
    assert "bad port" in str(err)


def test_describe_names_the_table(p4info: P4InfoIndex) -> None:
    e = TableEntry(
        table="MyIngress.ipv4_lpm",
        match={"hdr.ipv4.dstAddr": LPM("10.0.0.0", 8)},
        action="MyIngress.set_nhop",
        params={"dmac": 1, "port": 2},
    )
    text = e.describe(p4info)
    assert "MyIngress.ipv4_lpm" in text and "set_nhop(dmac=1,port=2)" in text
    assert (
        MulticastGroupEntry(multicast_group_id=1, replicas=[1]).describe()
        == "multicast_group 1 replicas=[1/0]"
    )


def test_idle_timeout_notification_decodes_its_entries(p4info: P4InfoIndex) -> None:
    msg = p4runtime_pb2.IdleTimeoutNotification(timestamp=42)
    msg.table_entry.append(
        TableEntry(table="ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.0.0/8"}).encode(p4info)
    )
    note = IdleTimeoutNotification.decode(msg, p4info)
    assert note.timestamp == 42
    assert note.table_entries == (
        TableEntry(table="MyIngress.ipv4_lpm", match={"hdr.ipv4.dstAddr": LPM(0x0A000000, 8)}),
    )
