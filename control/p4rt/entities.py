"""P4Runtime entities as typed value objects, and their p4.v1.Entity wrapping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from p4.v1 import p4runtime_pb2

from .errors import EncodeError
from .externs import (
    CounterEntry,
    DigestEntry,
    DirectCounterEntry,
    DirectMeterEntry,
    MeterEntry,
    RegisterEntry,
)
from .match import LPM, Exact, Optional, OptionalMatch, Range, Ternary
from .p4info import P4InfoIndex
from .packets import (
    ArbitrationUpdate,
    DigestList,
    IdleTimeoutNotification,
    PacketIn,
    PacketOut,
    StreamErrorMessage,
)
from .pre import CloneSessionEntry, MulticastGroupEntry, Replica
from .tables import (
    ActionProfileGroup,
    ActionProfileMember,
    CounterData,
    GroupMember,
    MeterConfig,
    TableEntry,
)

__all__ = [
    "LPM",
    "ActionProfileGroup",
    "ActionProfileMember",
    "ArbitrationUpdate",
    "CloneSessionEntry",
    "CounterData",
    "CounterEntry",
    "DigestEntry",
    "DigestList",
    "DirectCounterEntry",
    "DirectMeterEntry",
    "Entity",
    "Exact",
    "GroupMember",
    "IdleTimeoutNotification",
    "MeterConfig",
    "MeterEntry",
    "MulticastGroupEntry",
    "Optional",
    "OptionalMatch",
    "PacketIn",
    "PacketOut",
    "Range",
    "RegisterEntry",
    "Replica",
    "StreamErrorMessage",
    "TableEntry",
    "Ternary",
    "Update",
    "UpdateType",
    "decode_entity",
    "describe_entity",
    "encode_entity",
    "entity_table_name",
]

Entity = (
    TableEntry
    | ActionProfileMember
    | ActionProfileGroup
    | MulticastGroupEntry
    | CloneSessionEntry
    | CounterEntry
    | DirectCounterEntry
    | MeterEntry
    | DirectMeterEntry
    | RegisterEntry
    | DigestEntry
)

UpdateType = Literal["INSERT", "MODIFY", "DELETE"]


@dataclass(slots=True, frozen=True)
class Update:
    """One update of a Write batch: INSERT, MODIFY or DELETE of an entity."""

    type: UpdateType
    entity: Entity

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.Update:
        """The p4.v1.Update message."""
        if self.type not in ("INSERT", "MODIFY", "DELETE"):
            raise EncodeError(f"update type {self.type!r}: expected INSERT, MODIFY or DELETE")
        return p4runtime_pb2.Update(
            type=p4runtime_pb2.Update.Type.Value(self.type),
            entity=encode_entity(self.entity, p4info),
        )


_ENTITY_TYPES = (
    TableEntry,
    ActionProfileMember,
    ActionProfileGroup,
    MulticastGroupEntry,
    CloneSessionEntry,
    CounterEntry,
    DirectCounterEntry,
    MeterEntry,
    DirectMeterEntry,
    RegisterEntry,
    DigestEntry,
)


def encode_entity(obj: Entity, p4info: P4InfoIndex) -> p4runtime_pb2.Entity:
    """Wrap an entity object's encoding in a p4.v1.Entity."""
    if not isinstance(obj, _ENTITY_TYPES):
        raise EncodeError(f"not a P4Runtime entity: {type(obj).__name__}")
    msg = p4runtime_pb2.Entity()
    getattr(msg, obj.ENTITY_FIELD).CopyFrom(obj.encode(p4info))
    return msg


def decode_entity(msg: p4runtime_pb2.Entity, p4info: P4InfoIndex) -> Entity:
    """Decode a p4.v1.Entity into the matching entity object."""
    which = msg.WhichOneof("entity")
    if which == "table_entry":
        return TableEntry.decode(msg.table_entry, p4info)
    if which == "action_profile_member":
        return ActionProfileMember.decode(msg.action_profile_member, p4info)
    if which == "action_profile_group":
        return ActionProfileGroup.decode(msg.action_profile_group, p4info)
    if which == "packet_replication_engine_entry":
        pre = msg.packet_replication_engine_entry
        if pre.WhichOneof("type") == "clone_session_entry":
            return CloneSessionEntry.decode(pre)
        return MulticastGroupEntry.decode(pre)
    if which == "counter_entry":
        return CounterEntry.decode(msg.counter_entry, p4info)
    if which == "direct_counter_entry":
        return DirectCounterEntry.decode(msg.direct_counter_entry, p4info)
    if which == "meter_entry":
        return MeterEntry.decode(msg.meter_entry, p4info)
    if which == "direct_meter_entry":
        return DirectMeterEntry.decode(msg.direct_meter_entry, p4info)
    if which == "register_entry":
        return RegisterEntry.decode(msg.register_entry, p4info)
    if which == "digest_entry":
        return DigestEntry.decode(msg.digest_entry, p4info)
    raise EncodeError(f"unsupported P4Runtime entity kind {which!r}")


def describe_entity(obj: object, p4info: P4InfoIndex | None = None) -> str:
    """A one-line human summary of an entity object (never raises)."""
    describe = getattr(obj, "describe", None)
    if describe is None:
        return type(obj).__name__
    try:
        return str(describe(p4info))
    except Exception:  # a summary is for error messages and logs: never fail there
        return type(obj).__name__


def entity_table_name(obj: object) -> str:
    """The P4Info name of the table / profile / extern an entity is about ("" for PRE)."""
    for attr in ("table", "action_profile", "counter", "meter", "register", "digest"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    inner = getattr(obj, "table_entry", None)
    if isinstance(inner, TableEntry):
        return inner.table
    return ""
