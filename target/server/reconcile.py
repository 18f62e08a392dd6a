"""RECONCILE_AND_COMMIT: carry forwarding state into a new program where nothing changed."""

from __future__ import annotations

from typing import Any

import grpc
from p4.config.v1 import p4info_pb2

from icefabric.target.runtime import TableEntry
from icefabric.target.server.errors import P4RTError
from icefabric.target.server.p4info_index import P4InfoIndex


def _by_name(p4info: p4info_pb2.P4Info, kind: str) -> dict[str, Any]:
    return {o.preamble.name: o for o in getattr(p4info, kind)}


def _actions_of(p4info: p4info_pb2.P4Info, table: Any) -> list[bytes]:
    actions = {a.preamble.id: a for a in p4info.actions}
    return sorted(
        actions[r.id].SerializeToString(deterministic=True)
        for r in table.action_refs
        if r.id in actions
    )


def _same_table(old: p4info_pb2.P4Info, new: p4info_pb2.P4Info, a: Any, b: Any) -> bool:
    ka = [(m.id, m.name, m.bitwidth, m.match_type) for m in a.match_fields]
    kb = [(m.id, m.name, m.bitwidth, m.match_type) for m in b.match_fields]
    return (
        a.preamble.id == b.preamble.id
        and ka == kb
        and a.implementation_id == b.implementation_id
        and b.size >= a.size
        and _actions_of(old, a) == _actions_of(new, b)
    )


def migrate(
    old_index: P4InfoIndex, old_pipeline: Any, new_index: P4InfoIndex, new_pipeline: Any
) -> None:
    """Copy tables, profiles, registers, counters and meters into `new_pipeline`.

    FAILED_PRECONDITION (and nothing changed on the device) when some state cannot be kept:
    a non-empty table, profile or extern whose definition changed or that the new program lacks.
    """
    old, new = old_index.p4info, new_index.p4info
    problems: list[str] = []
    plan: list[tuple[str, str]] = []
    new_tables = _by_name(new, "tables")
    for name, t_old in _by_name(old, "tables").items():
        rt_old = old_pipeline.tables[name]
        has_state = (
            any(not e.is_const for e in rt_old.entries())
            or rt_old.default_action != rt_old.initial_default
        )
        t_new = new_tables.get(name)
        if t_new is None or not _same_table(old, new, t_old, t_new):
            if has_state:
                problems.append(f"table {name} changed or was removed and holds entries")
            continue
        plan.append(("tables", name))
    for kind, attr in (
        ("action_profiles", "action_profiles"),
        ("registers", "registers"),
        ("counters", "counters"),
        ("meters", "meters"),
    ):
        new_objs = _by_name(new, kind)
        for name, o_old in _by_name(old, kind).items():
            o_new = new_objs.get(name)
            same = o_new is not None and o_old.SerializeToString(
                deterministic=True
            ) == o_new.SerializeToString(deterministic=True)
            if same:
                plan.append((attr, name))
            elif _has_state(attr, getattr(old_pipeline, attr)[name]):
                problems.append(
                    f"{kind[:-1].replace('_', ' ')} {name} changed or was removed and holds state"
                )
    if problems:
        raise P4RTError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "RECONCILE_AND_COMMIT cannot keep the forwarding state: " + "; ".join(problems),
        )
    # profiles first: table entries refer to their members and groups
    order = sorted(plan, key=lambda p: p[0] != "action_profiles")
    for attr, name in order:
        src = getattr(old_pipeline, attr)[name]
        dst = getattr(new_pipeline, attr)[name]
        _COPY[attr](src, dst)


def _has_state(attr: str, obj: Any) -> bool:
    if attr == "action_profiles":
        return bool(obj.members)
    if attr == "registers":
        return any(obj.values)
    if attr == "counters":
        return any(obj.packets) or any(obj.bytes)
    return any(obj.get_config(i) is not None for i in range(obj.size))


def _copy_table(src: Any, dst: Any) -> None:
    for e in src.entries():
        if e.is_const:
            continue
        copy = TableEntry(
            match=e.match,
            priority=e.priority,
            action=e.action,
            member_id=e.member_id,
            group_id=e.group_id,
            byte_count=e.byte_count,
            packet_count=e.packet_count,
            meter_config=e.meter_config,
            idle_timeout_ns=e.idle_timeout_ns,
            controller_metadata=e.controller_metadata,
            metadata=e.metadata,
        )
        dst.insert(copy)
    if src.default_action != src.initial_default:
        dst.set_default(src.default_action)


def _copy_profile(src: Any, dst: Any) -> None:
    with src.lock:
        members = sorted(src.members.items(), key=lambda kv: src._member_seq[kv[0]])
        groups = [(gid, list(m.items()), src.group_max_size[gid]) for gid, m in src.groups.items()]
    for mid, action in members:
        dst.add_member(mid, action)
    for gid, mem, max_size in groups:
        dst.add_group(gid, mem, max_size)


def _copy_register(src: Any, dst: Any) -> None:
    dst.values = list(src.values)


def _copy_counter(src: Any, dst: Any) -> None:
    dst.bytes = list(src.bytes)
    dst.packets = list(src.packets)


def _copy_meter(src: Any, dst: Any) -> None:
    for i in range(src.size):
        cfg = src.get_config(i)
        if cfg is not None:
            dst.set_config(i, cfg)


_COPY = {
    "tables": _copy_table,
    "action_profiles": _copy_profile,
    "registers": _copy_register,
    "counters": _copy_counter,
    "meters": _copy_meter,
}
