"""Table entries and action profile members/groups as typed value objects with P4Info names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from p4.v1 import p4runtime_pb2

from .codec import Value, decode_int, encode_value, format_value, parse_value
from .errors import EncodeError
from .frozen import empty, freeze
from .match import (
    LPM,
    Exact,
    MatchObject,
    MatchValue,
    Optional,
    Range,
    Ternary,
    decode_field_match,
    encode_field_match,
)
from .p4info import P4InfoIndex


@dataclass(slots=True, frozen=True, kw_only=True)
class CounterData:
    """Byte and packet counts of a counter cell."""

    byte_count: int = 0
    packet_count: int = 0

    def encode(self) -> p4runtime_pb2.CounterData:
        """The p4.v1.CounterData message."""
        return p4runtime_pb2.CounterData(byte_count=self.byte_count, packet_count=self.packet_count)

    @classmethod
    def decode(cls, msg: p4runtime_pb2.CounterData) -> CounterData:
        """From a p4.v1.CounterData message."""
        return cls(byte_count=msg.byte_count, packet_count=msg.packet_count)


@dataclass(slots=True, frozen=True, kw_only=True)
class MeterConfig:
    """A two-rate three-colour meter configuration (rates per second, bursts)."""

    cir: int
    cburst: int
    pir: int
    pburst: int

    def encode(self) -> p4runtime_pb2.MeterConfig:
        """The p4.v1.MeterConfig message."""
        return p4runtime_pb2.MeterConfig(
            cir=self.cir, cburst=self.cburst, pir=self.pir, pburst=self.pburst
        )

    @classmethod
    def decode(cls, msg: p4runtime_pb2.MeterConfig) -> MeterConfig:
        """From a p4.v1.MeterConfig message."""
        return cls(cir=msg.cir, cburst=msg.cburst, pir=msg.pir, pburst=msg.pburst)


def encode_action(
    p4info: P4InfoIndex, action: str, params: Mapping[str, Value], *, where: str
) -> p4runtime_pb2.Action:
    """Encode an action call, checking every parameter is given once and fits its width."""
    info = p4info.action(action)
    msg = p4runtime_pb2.Action(action_id=info.id)
    known = {p.name for p in info.params}
    extra = sorted(set(params) - known)
    if extra:
        raise EncodeError(
            f"{where}: action {info.name} has no parameter {extra[0]!r} "
            f"(parameters: {', '.join(p.name for p in info.params) or 'none'})"
        )
    for p in info.params:
        if p.name not in params:
            raise EncodeError(f"{where}: action {info.name} needs parameter {p.name!r}")
        value = encode_value(params[p.name], p.bitwidth, what=f"{where} {info.name}.{p.name}")
        msg.params.add(param_id=p.id, value=value)
    return msg


def decode_action(p4info: P4InfoIndex, msg: p4runtime_pb2.Action) -> tuple[str, dict[str, int]]:
    """Decode an action call to (action name, {param name: int})."""
    info = p4info.action(msg.action_id)
    params = {info.param(p.param_id).name: decode_int(p.value) for p in msg.params}
    return info.name, params


@dataclass(slots=True, frozen=True, kw_only=True)
class TableEntry:
    """A table entry; with only `table` set (or nothing) it is a wildcard read."""

    ENTITY_FIELD: ClassVar[str] = "table_entry"

    table: str = ""
    match: Mapping[str, MatchValue] = field(default_factory=empty)
    action: str | None = None
    params: Mapping[str, Value] = field(default_factory=empty)
    member_id: int | None = None  # action profile member (indirect table)
    group_id: int | None = None  # action selector group (indirect table)
    priority: int = 0
    is_default_action: bool = False
    counter_data: CounterData | None = None
    meter_config: MeterConfig | None = None
    idle_timeout_ns: int = 0
    metadata: bytes = b""
    controller_metadata: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "match", freeze(self.match))
        object.__setattr__(self, "params", freeze(self.params))

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.TableEntry:
        """The p4.v1.TableEntry message (raises EncodeError/P4InfoError naming the field)."""
        msg = p4runtime_pb2.TableEntry()
        if not self.table:
            if self.match or self.action or self.member_id or self.group_id:
                raise EncodeError("table entry: match/action given without a table name")
            return msg
        t = p4info.table(self.table)
        msg.table_id = t.id
        where = f"table {t.name}"
        encoded = []
        for name, value in self.match.items():
            fm = encode_field_match(t.field(name), value, table=t.name)
            if fm is not None:
                encoded.append(fm)
        msg.match.extend(sorted(encoded, key=lambda m: m.field_id))
        chosen = [x is not None for x in (self.action, self.member_id, self.group_id)]
        if sum(chosen) > 1:
            raise EncodeError(f"{where}: give one of action, member_id, group_id")
        if self.action is not None:
            a = p4info.action(self.action)
            if t.action_ids and a.id not in t.action_ids:
                allowed = ", ".join(p4info.action(i).name for i in t.action_ids)
                raise EncodeError(f"{where}: action {a.name} is not allowed (allowed: {allowed})")
            msg.action.action.CopyFrom(encode_action(p4info, a.name, self.params, where=where))
        elif self.member_id is not None:
            msg.action.action_profile_member_id = self.member_id
        elif self.group_id is not None:
            msg.action.action_profile_group_id = self.group_id
        msg.priority = self.priority
        msg.is_default_action = self.is_default_action
        if self.counter_data is not None:
            msg.counter_data.CopyFrom(self.counter_data.encode())
        if self.meter_config is not None:
            msg.meter_config.CopyFrom(self.meter_config.encode())
        msg.idle_timeout_ns = self.idle_timeout_ns
        msg.metadata = self.metadata
        msg.controller_metadata = self.controller_metadata
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.TableEntry, p4info: P4InfoIndex) -> TableEntry:
        """From a p4.v1.TableEntry message (names looked up in the P4Info)."""
        if not msg.table_id:
            return cls()
        t = p4info.table(msg.table_id)
        match: dict[str, int | MatchObject] = {
            t.field(fm.field_id).name: decode_field_match(fm) for fm in msg.match
        }
        action: str | None = None
        params: dict[str, int] = {}
        member_id = group_id = None
        which = msg.action.WhichOneof("type") if msg.HasField("action") else None
        if which == "action":
            action, params = decode_action(p4info, msg.action.action)
        elif which == "action_profile_member_id":
            member_id = msg.action.action_profile_member_id
        elif which == "action_profile_group_id":
            group_id = msg.action.action_profile_group_id
        elif which == "action_profile_action_set":
            raise EncodeError(f"table {t.name}: one-shot action sets are not supported")
        return cls(
            table=t.name,
            match=match,
            action=action,
            params=params,
            member_id=member_id,
            group_id=group_id,
            priority=msg.priority,
            is_default_action=msg.is_default_action,
            counter_data=(
                CounterData.decode(msg.counter_data) if msg.HasField("counter_data") else None
            ),
            meter_config=(
                MeterConfig.decode(msg.meter_config) if msg.HasField("meter_config") else None
            ),
            idle_timeout_ns=msg.idle_timeout_ns,
            metadata=msg.metadata,
            controller_metadata=msg.controller_metadata,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary: table, match and action."""
        if not self.table:
            return "table_entry (all tables)"
        parts = [f"table_entry {self.table}"]
        if self.is_default_action:
            parts.append("(default)")
        if self.match:
            parts.append(" ".join(f"{k}={_fmt(v, p4info, self, k)}" for k, v in self.match.items()))
        if self.priority:
            parts.append(f"priority={self.priority}")
        if self.action is not None:
            args = ",".join(f"{k}={v!r}" for k, v in self.params.items())
            parts.append(f"-> {self.action}({args})")
        elif self.member_id is not None:
            parts.append(f"-> member {self.member_id}")
        elif self.group_id is not None:
            parts.append(f"-> group {self.group_id}")
        return " ".join(parts)


def _fmt(value: object, p4info: P4InfoIndex | None, entry: TableEntry, name: str) -> str:
    """A match value for people: addresses in their usual notation where the width says so."""
    if p4info is None:
        return str(value)
    try:
        f = p4info.table(entry.table).field(name)
        w = f.bitwidth

        def one(v: object) -> str:
            return (
                format_value(parse_value(v, w), w) if isinstance(v, int | str | bytes) else str(v)
            )

        if isinstance(value, LPM) or (isinstance(value, tuple) and f.match_type == "lpm"):
            v, plen = (value.value, value.prefix_len) if isinstance(value, LPM) else value
            return f"{one(v)}/{plen}"
        if isinstance(value, Ternary) or (isinstance(value, tuple) and f.match_type == "ternary"):
            v, m = (value.value, value.mask) if isinstance(value, Ternary) else value
            return f"{one(v)}&&&{one(m)}"
        if isinstance(value, Range) or (isinstance(value, tuple) and f.match_type == "range"):
            lo, hi = (value.low, value.high) if isinstance(value, Range) else value
            return f"{one(lo)}..{one(hi)}"
        if isinstance(value, Exact | Optional):
            return one(value.value)
        return one(value)
    except Exception:  # a summary must never raise
        return str(value)


@dataclass(slots=True, frozen=True, kw_only=True)
class ActionProfileMember:
    """A member of an action profile: an action call with an id (member_id 0 reads all)."""

    ENTITY_FIELD: ClassVar[str] = "action_profile_member"

    action_profile: str = ""
    member_id: int = 0
    action: str | None = None
    params: Mapping[str, Value] = field(default_factory=empty)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", freeze(self.params))

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.ActionProfileMember:
        """The p4.v1.ActionProfileMember message."""
        msg = p4runtime_pb2.ActionProfileMember(member_id=self.member_id)
        if not self.action_profile:
            return msg
        prof = p4info.action_profile(self.action_profile)
        msg.action_profile_id = prof.id
        if self.action is not None:
            where = f"action profile {prof.name} member {self.member_id}"
            msg.action.CopyFrom(encode_action(p4info, self.action, self.params, where=where))
        return msg

    @classmethod
    def decode(
        cls, msg: p4runtime_pb2.ActionProfileMember, p4info: P4InfoIndex
    ) -> ActionProfileMember:
        """From a p4.v1.ActionProfileMember message."""
        name = p4info.action_profile(msg.action_profile_id).name if msg.action_profile_id else ""
        action: str | None = None
        params: dict[str, int] = {}
        if msg.HasField("action"):
            action, params = decode_action(p4info, msg.action)
        return cls(action_profile=name, member_id=msg.member_id, action=action, params=params)

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        args = ",".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"action_profile_member {self.action_profile} #{self.member_id} -> {self.action}({args})"


@dataclass(slots=True, frozen=True)
class GroupMember:
    """A member of an action selector group with its weight."""

    member_id: int
    weight: int = 1


@dataclass(slots=True, frozen=True, kw_only=True)
class ActionProfileGroup:
    """A group of an action selector (group_id 0 reads all); members as ids or GroupMember."""

    ENTITY_FIELD: ClassVar[str] = "action_profile_group"

    action_profile: str = ""
    group_id: int = 0
    members: Sequence[int | tuple[int, int] | GroupMember] = ()
    max_size: int = 0

    def __post_init__(self) -> None:
        norm: list[GroupMember] = []
        for m in self.members:
            if isinstance(m, GroupMember):
                norm.append(m)
            elif isinstance(m, tuple):
                norm.append(GroupMember(m[0], m[1]))
            else:
                norm.append(GroupMember(m))
        object.__setattr__(self, "members", tuple(norm))

    def encode(self, p4info: P4InfoIndex) -> p4runtime_pb2.ActionProfileGroup:
        """The p4.v1.ActionProfileGroup message."""
        msg = p4runtime_pb2.ActionProfileGroup(group_id=self.group_id, max_size=self.max_size)
        if self.action_profile:
            msg.action_profile_id = p4info.action_profile(self.action_profile).id
        for m in self.members:
            assert isinstance(m, GroupMember)
            msg.members.add(member_id=m.member_id, weight=m.weight)
        return msg

    @classmethod
    def decode(
        cls, msg: p4runtime_pb2.ActionProfileGroup, p4info: P4InfoIndex
    ) -> ActionProfileGroup:
        """From a p4.v1.ActionProfileGroup message."""
        name = p4info.action_profile(msg.action_profile_id).name if msg.action_profile_id else ""
        return cls(
            action_profile=name,
            group_id=msg.group_id,
            members=tuple(GroupMember(m.member_id, m.weight or 1) for m in msg.members),
            max_size=msg.max_size,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        ids = ",".join(str(m.member_id) for m in self.members if isinstance(m, GroupMember))
        return f"action_profile_group {self.action_profile} #{self.group_id} members=[{ids}]"
