"""ActionProfileMember / ActionProfileGroup <-> run-time action profiles."""

from __future__ import annotations

from collections.abc import Iterator

from p4.v1 import p4runtime_pb2

from icefabric.target.runtime import ActionProfile
from icefabric.target.server.entity_tables import decode_action, encode_action
from icefabric.target.server.errors import invalid
from icefabric.target.server.state import ONESHOT_BASE_ID, PipelineState

Update = p4runtime_pb2.Update


def _profile(state: PipelineState, profile_id: int) -> tuple[str, ActionProfile, set[int]]:
    spec = state.index.get("action_profiles", profile_id)
    prof = state.runtime("action_profiles", spec.preamble.name)
    action_ids: set[int] = set()
    for tid in spec.table_ids:
        info = state.index.tables.get(tid)
        if info is not None:
            action_ids |= info.action_ids
    return spec.preamble.name, prof, action_ids


def write_member(
    state: PipelineState, update_type: int, m: p4runtime_pb2.ActionProfileMember
) -> None:
    """INSERT / MODIFY / DELETE one action profile member."""
    name, prof, action_ids = _profile(state, m.action_profile_id)
    if m.member_id >= ONESHOT_BASE_ID:
        raise invalid(
            f"{name}: member ids >= {ONESHOT_BASE_ID:#x} are reserved for one-shot entries"
        )
    if update_type == Update.DELETE:
        prof.delete_member(m.member_id)
        return
    if m.action.action_id not in action_ids:
        raise invalid(f"{name}: action id {m.action.action_id} is not an action of its tables")
    call = decode_action(state, m.action, f"action profile {name} member {m.member_id}")
    if update_type == Update.INSERT:
        prof.add_member(m.member_id, call)
    elif update_type == Update.MODIFY:
        prof.modify_member(m.member_id, call)
    else:
        raise invalid(f"{name}: unknown update type {update_type}")


def write_group(
    state: PipelineState, update_type: int, g: p4runtime_pb2.ActionProfileGroup
) -> None:
    """INSERT / MODIFY / DELETE one action profile group."""
    name, prof, _ = _profile(state, g.action_profile_id)
    if g.group_id >= ONESHOT_BASE_ID:
        raise invalid(
            f"{name}: group ids >= {ONESHOT_BASE_ID:#x} are reserved for one-shot entries"
        )
    if update_type == Update.DELETE:
        prof.delete_group(g.group_id)
        return
    members = [(m.member_id, m.weight or 1) for m in g.members]
    if update_type == Update.INSERT:
        prof.add_group(g.group_id, members, g.max_size)
    elif update_type == Update.MODIFY:
        prof.modify_group(g.group_id, members, g.max_size)
    else:
        raise invalid(f"{name}: unknown update type {update_type}")


def read_members(
    state: PipelineState, m: p4runtime_pb2.ActionProfileMember
) -> Iterator[p4runtime_pb2.ActionProfileMember]:
    """Members matching a (wildcard) read request; one-shot members are not listed."""
    ids = [m.action_profile_id] if m.action_profile_id else list(state.index.action_profiles)
    for pid in ids:
        _, prof, _ = _profile(state, pid)
        with prof.lock:
            items = sorted(prof.members.items())
        for mid, call in items:
            if mid >= ONESHOT_BASE_ID or (m.member_id and mid != m.member_id):
                continue
            out = p4runtime_pb2.ActionProfileMember(action_profile_id=pid, member_id=mid)
            out.action.CopyFrom(encode_action(state, call))
            yield out


def read_groups(
    state: PipelineState, g: p4runtime_pb2.ActionProfileGroup
) -> Iterator[p4runtime_pb2.ActionProfileGroup]:
    """Groups matching a (wildcard) read request; one-shot groups are not listed."""
    ids = [g.action_profile_id] if g.action_profile_id else list(state.index.action_profiles)
    for pid in ids:
        _, prof, _ = _profile(state, pid)
        with prof.lock:
            items = sorted(
                (gid, dict(mem), prof.group_max_size[gid]) for gid, mem in prof.groups.items()
            )
        for gid, members, max_size in items:
            if gid >= ONESHOT_BASE_ID or (g.group_id and gid != g.group_id):
                continue
            out = p4runtime_pb2.ActionProfileGroup(
                action_profile_id=pid, group_id=gid, max_size=max_size
            )
            for mid, weight in members.items():
                out.members.add(member_id=mid, weight=weight)
            yield out
