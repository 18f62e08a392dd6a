"""TableEntry (and DirectCounterEntry / DirectMeterEntry) <-> run-time tables."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from icefabric.target.runtime import ActionCall, Match, MeterConfig, Table, TableEntry
from icefabric.target.server.bytestrings import decode, encode
from icefabric.target.server.errors import P4RTError, invalid, not_found
from icefabric.target.server.p4info_index import TableInfo
from icefabric.target.server.state import OneShot, PipelineState

Update = p4runtime_pb2.Update
MF = p4info_pb2.MatchField
_KIND = {
    MF.EXACT: "exact",
    MF.LPM: "lpm",
    MF.TERNARY: "ternary",
    MF.RANGE: "range",
    MF.OPTIONAL: "optional",
}


def decode_action(state: PipelineState, action: p4runtime_pb2.Action, where: str) -> ActionCall:
    """Action proto -> ActionCall with every parameter present and in range."""
    info = state.index.action(action.action_id)
    given: dict[int, int] = {}
    widths = {pid: (name, bw) for pid, name, bw in info.params}
    for p in action.params:
        if p.param_id not in widths:
            raise invalid(f"{where}: action {info.name} has no param id {p.param_id}")
        if p.param_id in given:
            raise invalid(f"{where}: action {info.name} param id {p.param_id} given twice")
        name, bw = widths[p.param_id]
        given[p.param_id] = decode(p.value, bw, f"{where}: param {info.name}.{name}")
    missing = [name for pid, name, _ in info.params if pid not in given]
    if missing:
        raise invalid(f"{where}: action {info.name} misses params {', '.join(missing)}")
    return ActionCall(info.name, tuple(given[pid] for pid, _, _ in info.params))


def encode_action(state: PipelineState, call: ActionCall) -> p4runtime_pb2.Action:
    """ActionCall -> Action proto with canonical param bytestrings."""
    info = state.index.action_by_name.get(call.name)
    if info is None:
        raise not_found(f"action {call.name} is not in the P4Info")
    out = p4runtime_pb2.Action(action_id=info.id)
    for (pid, _, _), value in zip(info.params, call.params, strict=False):
        out.params.add(param_id=pid, value=encode(value))
    return out


def decode_match(info: TableInfo, matches: list[p4runtime_pb2.FieldMatch]) -> tuple[Match, ...]:
    """FieldMatch list -> Match per key field in P4Info order (missing = don't care)."""
    by_id: dict[int, p4runtime_pb2.FieldMatch] = {}
    for fm in matches:
        if fm.field_id not in info.fields:
            raise invalid(f"table {info.name}: unknown match field id {fm.field_id}")
        if fm.field_id in by_id:
            raise invalid(f"table {info.name}: match field id {fm.field_id} given twice")
        by_id[fm.field_id] = fm
    out: list[Match] = []
    for fid in info.field_order:
        mf = info.fields[fid]
        kind = _KIND.get(mf.match_type, "other")
        where = f"table {info.name}: field {mf.name}"
        fm = by_id.get(fid)
        bw = mf.bitwidth
        if fm is None:
            if kind == "exact":
                raise invalid(f"{where}: exact field missing")
            out.append(Match.dont_care())
            continue
        which = fm.WhichOneof("field_match_type")
        if which != kind:
            raise invalid(f"{where}: {which} match given for a {kind} field")
        if kind == "exact":
            out.append(Match.exact(decode(fm.exact.value, bw, where)))
        elif kind == "lpm":
            plen = fm.lpm.prefix_len
            value = decode(fm.lpm.value, bw, where)
            if not 0 < plen <= bw:
                raise invalid(f"{where}: prefix length {plen} not in [1, {bw}] (omit for 0)")
            if value & ((1 << (bw - plen)) - 1):
                raise invalid(f"{where}: value has bits set beyond the /{plen} prefix")
            out.append(Match.lpm(value, plen))
        elif kind == "ternary":
            value = decode(fm.ternary.value, bw, where)
            mask = decode(fm.ternary.mask, bw, where + " mask")
            if mask == 0:
                raise invalid(f"{where}: all-zero mask (omit the field for don't care)")
            if value & ~mask:
                raise invalid(f"{where}: value has bits set outside the mask")
            out.append(Match.ternary(value, mask))
        elif kind == "range":
            low = decode(fm.range.low, bw, where + " low")
            high = decode(fm.range.high, bw, where + " high")
            if low > high:
                raise invalid(f"{where}: range low {low} > high {high}")
            if low == 0 and high == (1 << bw) - 1:  # P4Runtime: a don't-care range is omitted
                raise invalid(f"{where}: range covers the whole field (omit it for don't care)")
            out.append(Match.range(low, high))
        elif kind == "optional":
            out.append(Match.optional(decode(fm.optional.value, bw, where)))
        else:
            raise invalid(f"{where}: match kind {kind} is not supported")
    return tuple(out)


def encode_match(
    info: TableInfo, table: Table, entry: TableEntry
) -> list[p4runtime_pb2.FieldMatch]:
    """Stored entry -> canonical FieldMatch list (don't-care fields omitted)."""
    out = []
    for fid, kf, (a, b) in zip(info.field_order, table.match_keys, entry.key, strict=True):
        full = (1 << kf.bitwidth) - 1
        kind = kf.match_kind
        fm = p4runtime_pb2.FieldMatch(field_id=fid)
        if kind == "exact":
            fm.exact.value = encode(a)
        elif kind == "lpm":
            if b == 0:
                continue
            fm.lpm.value = encode(a)
            fm.lpm.prefix_len = bin(b).count("1")
        elif kind == "ternary":
            if b == 0:
                continue
            fm.ternary.value = encode(a)
            fm.ternary.mask = encode(b)
        elif kind == "range":
            if (a, b) == (0, full):
                continue
            fm.range.low = encode(a)
            fm.range.high = encode(b)
        elif kind == "optional":
            if b == 0:
                continue
            fm.optional.value = encode(a)
        out.append(fm)
    return out


def _resolve(state: PipelineState, te: p4runtime_pb2.TableEntry) -> tuple[TableInfo, Table]:
    info = state.index.table(te.table_id)
    table = state.runtime("tables", info.name)
    if len(info.field_order) != len(table.match_keys):
        raise invalid(f"table {info.name}: P4Info and program disagree on the key")
    return info, table


def _meter_config(mc: p4runtime_pb2.MeterConfig) -> MeterConfig:
    return MeterConfig(mc.cir, mc.cburst, mc.pir, mc.pburst)


def _build_entry(
    state: PipelineState,
    info: TableInfo,
    table: Table,
    te: p4runtime_pb2.TableEntry,
    update_type: int,
) -> TableEntry:
    entry = TableEntry(
        match=decode_match(info, list(te.match)),
        priority=te.priority,
        controller_metadata=te.controller_metadata,
        metadata=te.metadata,
        idle_timeout_ns=te.idle_timeout_ns,
    )
    if te.HasField("meter_config"):
        if state.index.direct_meter_by_table.get(info.id) is None:
            raise invalid(f"table {info.name} has no direct meter")
        entry.meter_config = _meter_config(te.meter_config)
    if update_type == Update.DELETE:
        return entry
    which = te.action.WhichOneof("type")
    where = f"table {info.name}"
    has_profile = info.proto.implementation_id != 0
    if which is None:
        raise invalid(f"{where}: entry has no action")
    if which == "action":
        if has_profile:
            raise invalid(f"{where}: uses an action profile; give a member or group")
        if te.action.action.action_id not in info.action_ids:
            raise invalid(f"{where}: action id {te.action.action.action_id} is not in the table")
        entry.action = decode_action(state, te.action.action, where)
        return entry
    if not has_profile:
        raise invalid(f"{where}: has no action profile; {which} not allowed")
    if which == "action_profile_member_id":
        entry.member_id = te.action.action_profile_member_id
    elif which == "action_profile_group_id":
        entry.group_id = te.action.action_profile_group_id
    else:  # one-shot action set: programmed through hidden members and a group
        entry.group_id = -1
    return entry


def _program_oneshot(
    state: PipelineState,
    table: Table,
    info: TableInfo,
    action_set: p4runtime_pb2.ActionProfileActionSet,
) -> OneShot:
    prof = table.action_profile
    if prof is None or not prof.has_selector:
        raise invalid(f"table {info.name}: one-shot programming needs an action selector")
    calls = []
    for a in action_set.action_profile_actions:
        if a.action.action_id not in info.action_ids:
            raise invalid(f"table {info.name}: action id {a.action.action_id} is not in the table")
        calls.append((decode_action(state, a.action, f"table {info.name}"), max(1, a.weight)))
    if not calls:
        raise invalid(f"table {info.name}: empty one-shot action set")
    members = []
    try:
        for call, _ in calls:
            mid = state.hidden_id()
            prof.add_member(mid, call)
            members.append(mid)
        gid = state.hidden_id()
        prof.add_group(gid, [(m, w) for m, (_, w) in zip(members, calls, strict=True)])
    except Exception:
        for m in members:
            prof.delete_member(m)
        raise
    return OneShot(gid, members, action_set)


def _release_oneshot(table: Table, shot: OneShot) -> None:
    prof = table.action_profile
    assert prof is not None
    prof.delete_group(shot.group_id)
    for m in shot.member_ids:
        prof.delete_member(m)


def write_table_entry(state: PipelineState, update_type: int, te: p4runtime_pb2.TableEntry) -> None:
    """Apply one INSERT / MODIFY / DELETE of a table entry (or a default-entry MODIFY)."""
    info, table = _resolve(state, te)
    if te.is_default_action:
        _write_default(state, info, table, te, update_type)
        return
    if not info.field_order:  # P4Runtime: a keyless table has only its default entry
        raise invalid(
            f"table {info.name} has no match fields: only its default entry may be modified"
        )
    entry = _build_entry(state, info, table, te, update_type)
    ident = table.entry_identity(entry.match, entry.priority)
    key = (info.id, ident)
    if update_type == Update.DELETE:
        table.delete(entry.match, entry.priority)
        shot = state.oneshots.pop(key, None)
        if shot is not None:
            _release_oneshot(table, shot)
        return
    if update_type not in (Update.INSERT, Update.MODIFY):
        raise invalid(f"table {info.name}: unknown update type {update_type}")
    if update_type == Update.INSERT and table.get(entry.match, entry.priority) is not None:
        raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"table {info.name}: entry already exists")
    if update_type == Update.MODIFY and table.get(entry.match, entry.priority) is None:
        raise not_found(f"table {info.name}: entry not found")
    shot = None
    if entry.group_id == -1:
        shot = _program_oneshot(state, table, info, te.action.action_profile_action_set)
        entry.group_id = shot.group_id
    try:
        if update_type == Update.INSERT:
            table.insert(entry)
        else:
            stored = table.modify(entry)
            if te.HasField("counter_data"):
                stored.byte_count = te.counter_data.byte_count
                stored.packet_count = te.counter_data.packet_count
    except Exception:
        if shot is not None:
            _release_oneshot(table, shot)
        raise
    if update_type == Update.INSERT and te.HasField("counter_data"):
        entry.byte_count = te.counter_data.byte_count
        entry.packet_count = te.counter_data.packet_count
    old = state.oneshots.pop(key, None)
    if old is not None:
        _release_oneshot(table, old)
    if shot is not None:
        state.oneshots[key] = shot


def _write_default(
    state: PipelineState,
    info: TableInfo,
    table: Table,
    te: p4runtime_pb2.TableEntry,
    update_type: int,
) -> None:
    if update_type != Update.MODIFY:
        raise invalid(f"table {info.name}: the default entry can only be modified")
    if te.match or te.priority:
        raise invalid(f"table {info.name}: default entry must have no match and no priority")
    if not te.HasField("action"):
        table.reset_default()
        return
    if te.action.WhichOneof("type") != "action":
        raise invalid(f"table {info.name}: default entry needs a direct action")
    if te.action.action.action_id not in info.action_ids:
        raise invalid(
            f"table {info.name}: action id {te.action.action.action_id} is not in the table"
        )
    table.set_default(decode_action(state, te.action.action, f"table {info.name}"))


def encode_entry(
    state: PipelineState,
    info: TableInfo,
    table: Table,
    entry: TableEntry,
    with_counters: bool,
    with_hit_time: bool = False,
) -> p4runtime_pb2.TableEntry:
    """Stored entry -> TableEntry proto as a Read returns it."""
    te = p4runtime_pb2.TableEntry(table_id=info.id, priority=entry.priority)
    te.match.extend(encode_match(info, table, entry))
    shot = state.oneshots.get((info.id, table.entry_identity_from_key(entry)))
    if shot is not None:
        te.action.action_profile_action_set.CopyFrom(shot.action_set)
    elif entry.action is not None:
        te.action.action.CopyFrom(encode_action(state, entry.action))
    elif entry.member_id is not None:
        te.action.action_profile_member_id = entry.member_id
    elif entry.group_id is not None:
        te.action.action_profile_group_id = entry.group_id
    te.controller_metadata = entry.controller_metadata
    te.metadata = entry.metadata
    te.idle_timeout_ns = entry.idle_timeout_ns
    te.is_const = entry.is_const
    if entry.meter_config is not None:
        mc = entry.meter_config
        te.meter_config.CopyFrom(
            p4runtime_pb2.MeterConfig(cir=mc.cir, cburst=mc.cburst, pir=mc.pir, pburst=mc.pburst)
        )
    if with_hit_time and table.hit_clock is not None:
        elapsed = max(0, table.hit_clock.now_us() - entry.last_hit_us)
        te.time_since_last_hit.elapsed_ns = elapsed * 1000
    if with_counters and table.direct_counter is not None:
        te.counter_data.byte_count = entry.byte_count
        te.counter_data.packet_count = entry.packet_count
    return te


def read_table_entries(
    state: PipelineState, te: p4runtime_pb2.TableEntry
) -> Iterator[p4runtime_pb2.TableEntry]:
    """Entries matching a (possibly wildcard) TableEntry read request."""
    infos = [state.index.table(te.table_id)] if te.table_id else list(state.index.tables.values())
    with_counters = te.HasField("counter_data")
    with_hit = te.HasField("time_since_last_hit")
    for info in infos:
        table = state.runtime("tables", info.name)
        if te.is_default_action:
            out = p4runtime_pb2.TableEntry(table_id=info.id, is_default_action=True)
            out.action.action.CopyFrom(encode_action(state, table.default_action))
            yield out
            continue
        if te.table_id and te.match:
            match = decode_match(info, list(te.match))
            entry = table.get(match, te.priority)
            if entry is not None:
                yield encode_entry(state, info, table, entry, with_counters, with_hit)
            continue
        for entry in table.entries():
            if te.priority and entry.priority != te.priority:
                continue
            yield encode_entry(state, info, table, entry, with_counters, with_hit)


def find_entry(
    state: PipelineState, te: p4runtime_pb2.TableEntry
) -> tuple[TableInfo, Table, TableEntry]:
    """The stored entry a DirectCounterEntry / DirectMeterEntry names (NOT_FOUND if none)."""
    info, table = _resolve(state, te)
    entry = table.get(decode_match(info, list(te.match)), te.priority)
    if entry is None:
        raise not_found(f"table {info.name}: entry not found")
    return info, table, entry
