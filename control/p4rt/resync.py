"""Resync: read back what a switch holds and write only the difference to a desired state."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from p4.v1 import p4runtime_pb2

from .codec import canonical, decode_int
from .entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSessionEntry,
    Entity,
    MulticastGroupEntry,
    TableEntry,
    Update,
    decode_entity,
    encode_entity,
)
from .errors import EncodeError
from .p4info import P4InfoIndex

if TYPE_CHECKING:
    from .client import SwitchConnection

LOG = logging.getLogger(__name__)

Kind = Literal["table_entry", "member", "group", "multicast", "clone"]
_KINDS: tuple[Kind, ...] = ("member", "group", "table_entry", "multicast", "clone")
_Key = tuple[object, ...]


@dataclass(slots=True, kw_only=True)
class ResyncSummary:
    """What a resync changed, in total and per kind of entity."""

    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    unchanged: int = 0
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def writes(self) -> int:
        """Number of updates sent (or that would be sent on a dry run)."""
        return self.inserted + self.modified + self.deleted

    def _count(self, kind: str, what: str, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)
        per = self.by_kind.setdefault(
            kind, {"inserted": 0, "modified": 0, "deleted": 0, "unchanged": 0}
        )
        per[what] += n


def _ser(msg: object) -> bytes:
    return msg.SerializeToString(deterministic=True)  # type: ignore[attr-defined, no-any-return]


def _classify(obj: Entity) -> Kind:
    if isinstance(obj, TableEntry):
        return "table_entry"
    if isinstance(obj, ActionProfileMember):
        return "member"
    if isinstance(obj, ActionProfileGroup):
        return "group"
    if isinstance(obj, MulticastGroupEntry):
        return "multicast"
    if isinstance(obj, CloneSessionEntry):
        return "clone"
    raise EncodeError(
        f"resync handles table entries, action profile members/groups, multicast groups and "
        f"clone sessions; got {type(obj).__name__}"
    )


def key_and_value(obj: Entity, p4info: P4InfoIndex) -> tuple[_Key, object]:
    """The identity of an entity (what P4Runtime matches on) and its comparable content."""
    return message_key(encode_entity(obj, p4info))


def _match_key(f: p4runtime_pb2.FieldMatch) -> tuple[object, ...]:
    kind = f.WhichOneof("field_match_type")
    if kind == "exact":
        return (f.field_id, kind, canonical(f.exact.value))
    if kind == "lpm":
        return (f.field_id, kind, canonical(f.lpm.value), f.lpm.prefix_len)
    if kind == "ternary":
        return (f.field_id, kind, canonical(f.ternary.value), canonical(f.ternary.mask))
    if kind == "range":
        return (f.field_id, kind, canonical(f.range.low), canonical(f.range.high))
    if kind == "optional":
        return (f.field_id, kind, canonical(f.optional.value))
    return (f.field_id, kind, _ser(f))


def _action_key(a: p4runtime_pb2.Action) -> tuple[object, ...]:
    return (a.action_id, tuple(sorted((p.param_id, canonical(p.value)) for p in a.params)))


def _replicas_key(replicas: Iterable[p4runtime_pb2.Replica]) -> tuple[tuple[int, int], ...]:
    out = []
    for r in replicas:
        port = decode_int(r.port) if r.WhichOneof("port_kind") == "port" else r.egress_port
        out.append((port, r.instance))
    return tuple(sorted(out))


def message_key(msg: p4runtime_pb2.Entity) -> tuple[_Key, object]:
    """Key and comparable content of an encoded entity, whatever byte padding it carries."""
    which = msg.WhichOneof("entity")
    if which == "table_entry":
        m = msg.table_entry
        match = tuple(sorted(_match_key(f) for f in m.match))
        key: _Key = ("table_entry", m.table_id, match, m.priority, m.is_default_action)
        act = m.action.WhichOneof("type") if m.HasField("action") else None
        action: object = None
        if act == "action":
            action = _action_key(m.action.action)
        elif act is not None:
            action = (act, getattr(m.action, act))
        meter = (
            (m.meter_config.cir, m.meter_config.cburst, m.meter_config.pir, m.meter_config.pburst)
            if m.HasField("meter_config")
            else None
        )
        return key, (action, m.metadata, m.idle_timeout_ns, m.controller_metadata, meter)
    if which == "action_profile_member":
        am = msg.action_profile_member
        return ("member", am.action_profile_id, am.member_id), _action_key(am.action)
    if which == "action_profile_group":
        ag = msg.action_profile_group
        members = tuple(sorted((x.member_id, x.weight or 1) for x in ag.members))
        return ("group", ag.action_profile_id, ag.group_id), members
    if which == "packet_replication_engine_entry":
        pre = msg.packet_replication_engine_entry
        if pre.WhichOneof("type") == "clone_session_entry":
            s = pre.clone_session_entry
            content = (_replicas_key(s.replicas), s.class_of_service, s.packet_length_bytes)
            return ("clone", s.session_id), content
        g = pre.multicast_group_entry
        return ("multicast", g.multicast_group_id), (_replicas_key(g.replicas), g.metadata)
    raise EncodeError(f"resync cannot key a {which} entity")


def _read_requests(
    p4info: P4InfoIndex, wanted: dict[Kind, list[Entity]], scope: str
) -> list[Entity]:
    full = scope == "all"
    reqs: list[Entity] = []
    tables = (
        [t.name for t in p4info.tables if not t.is_const]
        if full
        else sorted({e.table for e in wanted["table_entry"] if isinstance(e, TableEntry)})
    )
    reqs += [TableEntry(table=t) for t in tables]
    reqs += [
        TableEntry(table=e.table, is_default_action=True)
        for e in wanted["table_entry"]
        if isinstance(e, TableEntry) and e.is_default_action
    ]
    profiles: set[str] = set()
    if full:
        profiles = {p.name for p in p4info.action_profiles}
    else:
        for e in (*wanted["member"], *wanted["group"]):
            profiles.add(e.action_profile)  # type: ignore[union-attr]
    for prof in sorted(profiles):
        reqs.append(ActionProfileMember(action_profile=prof))
        reqs.append(ActionProfileGroup(action_profile=prof))
    if full or wanted["multicast"]:
        reqs.append(MulticastGroupEntry())
    if full or wanted["clone"]:
        reqs.append(CloneSessionEntry())
    return reqs


def resync(
    conn: SwitchConnection,
    desired: Iterable[Entity],
    *,
    scope: Literal["all", "touched"] = "all",
    dry_run: bool = False,
) -> ResyncSummary:
    """Insert what is missing, modify what differs, delete what is extra; return the counts.

    scope "all": the desired list is the whole state of every non-const table, every action
    profile, the multicast groups and clone sessions; "touched": only the tables/profiles (and
    PRE kinds) that appear in `desired` are compared. Default entries are modified, never
    deleted. Writes go in dependency order: members, groups, tables (insert/modify), then the
    deletions in reverse, each phase a separate Write.
    """
    p4info = conn.p4info
    wanted: dict[Kind, list[Entity]] = {k: [] for k in _KINDS}
    want: dict[_Key, tuple[Entity, object]] = {}
    for obj in desired:
        kind = _classify(obj)
        key, value = key_and_value(obj, p4info)
        if key in want:
            raise EncodeError(f"resync: duplicate desired entity {obj!r}")
        wanted[kind].append(obj)
        want[key] = (obj, value)
    have: dict[_Key, tuple[p4runtime_pb2.Entity, object]] = {}
    requests = _read_requests(p4info, wanted, scope)
    if requests:
        for got in conn.read_raw(requests):
            key, value = message_key(got)
            have[key] = (got, value)
    summary = ResyncSummary(dry_run=dry_run)
    phases: dict[str, list[Update]] = {f"{op}:{k}": [] for op in ("put", "del") for k in _KINDS}
    for key, (obj, value) in want.items():
        k = str(key[0])
        if key not in have:
            if isinstance(obj, TableEntry) and obj.is_default_action:
                phases[f"put:{k}"].append(Update("MODIFY", obj))
                summary._count(k, "modified")
            else:
                phases[f"put:{k}"].append(Update("INSERT", obj))
                summary._count(k, "inserted")
        elif have[key][1] != value:
            phases[f"put:{k}"].append(Update("MODIFY", obj))
            summary._count(k, "modified")
        else:
            summary._count(k, "unchanged")
    for key, (msg, _value) in have.items():
        if key in want:
            continue
        obj = decode_entity(msg, p4info)
        if isinstance(obj, TableEntry) and obj.is_default_action:
            continue  # a default entry cannot be deleted; only modified when desired
        k = str(key[0])
        phases[f"del:{k}"].append(Update("DELETE", _deletable(obj)))
        summary._count(k, "deleted")
    order = [f"put:{k}" for k in _KINDS] + [
        f"del:{k}" for k in ("table_entry", "group", "member", "multicast", "clone")
    ]
    if not dry_run:
        for phase in order:
            if phases[phase]:
                LOG.debug("%s: resync %s: %d updates", conn.name, phase, len(phases[phase]))
                conn.write(phases[phase])
    LOG.info(
        "%s: resync%s: +%d ~%d -%d =%d",
        conn.name,
        " (dry run)" if dry_run else "",
        summary.inserted,
        summary.modified,
        summary.deleted,
        summary.unchanged,
    )
    return summary


def _deletable(obj: Entity) -> Entity:
    """Strip read-only data (counters) that a DELETE must not carry."""
    if isinstance(obj, TableEntry) and (obj.counter_data is not None or obj.meter_config):
        return TableEntry(
            table=obj.table,
            match=obj.match,
            priority=obj.priority,
            action=obj.action,
            params=obj.params,
            member_id=obj.member_id,
            group_id=obj.group_id,
        )
    return obj
