"""Resync's notion of identity and content, tested as data (no switch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2

from icefabric.control.p4rt import (
    ActionProfileGroup,
    CloneSessionEntry,
    CounterEntry,
    EncodeError,
    MulticastGroupEntry,
    P4InfoIndex,
    TableEntry,
    resync,
)
from icefabric.control.p4rt.resync import ResyncSummary, key_and_value, message_key

FIXTURE = Path(__file__).parent / "p4" / "l3_fixture.p4info.txtpb"


@pytest.fixture(scope="module")
def p4info() -> P4InfoIndex:
    return P4InfoIndex.load(FIXTURE)


def entity(text: str) -> p4runtime_pb2.Entity:
    return text_format.Parse(text, p4runtime_pb2.Entity())


def test_padded_bytes_from_a_switch_key_like_canonical_ones(p4info: P4InfoIndex) -> None:
    desired = TableEntry(
        table="MyIngress.ipv4_lpm",
        match={"hdr.ipv4.dstAddr": "10.0.1.0/24"},
        action="MyIngress.set_nhop",
        params={"dmac": 0x0101, "port": 2},
    )
    padded = entity(
        r"""table_entry { table_id: 37375156
            match { field_id: 1 lpm { value: "\n\000\001\000" prefix_len: 24 } }
            action { action { action_id: 28792405
              params { param_id: 2 value: "\000\002" }
              params { param_id: 1 value: "\000\000\000\000\001\001" } } }
            counter_data { byte_count: 99 packet_count: 1 } }"""
    )
    assert message_key(padded) == key_and_value(desired, p4info)
    other_port = TableEntry(
        table="MyIngress.ipv4_lpm",
        match={"hdr.ipv4.dstAddr": "10.0.1.0/24"},
        action="MyIngress.set_nhop",
        params={"dmac": 0x0101, "port": 3},
    )
    k1, v1 = key_and_value(desired, p4info)
    k2, v2 = key_and_value(other_port, p4info)
    assert k1 == k2 and v1 != v2
    # priority and the default flag are part of the identity
    assert (
        key_and_value(TableEntry(table="acl", priority=1), p4info)[0]
        != key_and_value(TableEntry(table="acl", priority=2), p4info)[0]
    )


def test_pre_and_group_content_ignore_order_and_port_spelling(p4info: P4InfoIndex) -> None:
    mc = MulticastGroupEntry(multicast_group_id=1, replicas=[2, 1])
    as_bytes = entity(
        r"""packet_replication_engine_entry { multicast_group_entry { multicast_group_id: 1
            replicas { port: "\001" } replicas { port: "\000\002" } } }"""
    )
    assert message_key(as_bytes) == key_and_value(mc, p4info)
    clone = CloneSessionEntry(session_id=3, replicas=[(5, 1)])
    assert key_and_value(clone, p4info)[0] == ("clone", 3)
    group = ActionProfileGroup(action_profile="ecmp_selector", group_id=2, members=[1, 2])
    unweighted = entity(
        """action_profile_group { action_profile_id: 297808402 group_id: 2
           members { member_id: 2 } members { member_id: 1 } }"""
    )
    assert message_key(unweighted) == key_and_value(group, p4info)


def test_resync_rejects_what_it_cannot_reconcile(p4info: P4InfoIndex) -> None:
    class NoSwitch:
        name = "none"

        @property
        def p4info(self) -> P4InfoIndex:
            return p4info

    with pytest.raises(EncodeError, match="got CounterEntry"):
        resync(NoSwitch(), [CounterEntry(counter="port_counter", index=1)])  # type: ignore[arg-type]
    route = TableEntry(table="ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.0.0/8"}, action="drop")
    with pytest.raises(EncodeError, match="duplicate desired entity"):
        resync(NoSwitch(), [route, route])  # type: ignore[arg-type]


def test_summary_counts_per_kind() -> None:
    s = ResyncSummary()
    s._count("table_entry", "inserted", 3)
    s._count("multicast", "deleted")
    assert (s.inserted, s.deleted, s.writes) == (3, 1, 4)
    assert s.by_kind["table_entry"] == {"inserted": 3, "modified": 0, "deleted": 0, "unchanged": 0}
