"""Route Write updates and Read entities to the per-entity codecs."""

from __future__ import annotations

from collections.abc import Iterator

from p4.v1 import p4runtime_pb2

from icefabric.target.server import entity_externs as ext
from icefabric.target.server import entity_profiles as prof
from icefabric.target.server import entity_tables as tables
from icefabric.target.server.entity_pre import PreStore
from icefabric.target.server.errors import invalid, unimplemented
from icefabric.target.server.state import PipelineState

Entity = p4runtime_pb2.Entity


def apply_update(state: PipelineState, pre: PreStore, update: p4runtime_pb2.Update) -> None:
    """Apply one Update; raises P4RTError / RuntimeStateError on failure."""
    if update.type == p4runtime_pb2.Update.UNSPECIFIED:
        raise invalid("update type UNSPECIFIED")
    e = update.entity
    which = e.WhichOneof("entity")
    t = update.type
    if which == "table_entry":
        tables.write_table_entry(state, t, e.table_entry)
    elif which == "action_profile_member":
        prof.write_member(state, t, e.action_profile_member)
    elif which == "action_profile_group":
        prof.write_group(state, t, e.action_profile_group)
    elif which == "packet_replication_engine_entry":
        pre.write(t, e.packet_replication_engine_entry)
    elif which == "register_entry":
        ext.write_register(state, t, e.register_entry)
    elif which == "counter_entry":
        ext.write_counter(state, t, e.counter_entry)
    elif which == "direct_counter_entry":
        ext.write_direct_counter(state, t, e.direct_counter_entry)
    elif which == "meter_entry":
        ext.write_meter(state, t, e.meter_entry)
    elif which == "direct_meter_entry":
        ext.write_direct_meter(state, t, e.direct_meter_entry)
    elif which == "digest_entry":
        ext.write_digest(state, t, e.digest_entry)
    elif which is None:
        raise invalid("update without an entity")
    else:
        raise unimplemented(f"writing {which} is not supported")


def read_entity(
    state: PipelineState, pre: PreStore, e: p4runtime_pb2.Entity
) -> Iterator[p4runtime_pb2.Entity]:
    """Every entity matching one (possibly wildcard) read entity."""
    which = e.WhichOneof("entity")
    if which == "table_entry":
        for x in tables.read_table_entries(state, e.table_entry):
            yield Entity(table_entry=x)
    elif which == "action_profile_member":
        for m in prof.read_members(state, e.action_profile_member):
            yield Entity(action_profile_member=m)
    elif which == "action_profile_group":
        for g in prof.read_groups(state, e.action_profile_group):
            yield Entity(action_profile_group=g)
    elif which == "packet_replication_engine_entry":
        for p in pre.read(e.packet_replication_engine_entry):
            yield Entity(packet_replication_engine_entry=p)
    elif which == "register_entry":
        for r in ext.read_registers(state, e.register_entry):
            yield Entity(register_entry=r)
    elif which == "counter_entry":
        for c in ext.read_counters(state, e.counter_entry):
            yield Entity(counter_entry=c)
    elif which == "direct_counter_entry":
        for d in ext.read_direct_counters(state, e.direct_counter_entry):
            yield Entity(direct_counter_entry=d)
    elif which == "meter_entry":
        for m in ext.read_meters(state, e.meter_entry):
            yield Entity(meter_entry=m)
    elif which == "direct_meter_entry":
        for d in ext.read_direct_meters(state, e.direct_meter_entry):
            yield Entity(direct_meter_entry=d)
    elif which == "digest_entry":
        for d in ext.read_digests(state, e.digest_entry):
            yield Entity(digest_entry=d)
    elif which is None:
        raise invalid("read entity without a type")
    else:
        raise unimplemented(f"reading {which} is not supported")
