"""Lookups into a P4Info by id and by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4.config.v1 import p4info_pb2

from icefabric.target.server.errors import not_found


@dataclass(slots=True)
class ActionInfo:
    """An action: id, name and its params in declaration order (id, name, bitwidth)."""

    id: int
    name: str
    params: list[tuple[int, str, int]]


@dataclass(slots=True)
class TableInfo:
    """A table as P4Info describes it."""

    id: int
    name: str
    proto: p4info_pb2.Table
    fields: dict[int, p4info_pb2.MatchField] = field(default_factory=dict)
    field_order: list[int] = field(default_factory=list)
    action_ids: set[int] = field(default_factory=set)


class P4InfoIndex:
    """Ids and names of every P4Info object, plus the controller header layouts."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.actions: dict[int, ActionInfo] = {}
        for a in p4info.actions:
            params = [(p.id, p.name, p.bitwidth) for p in a.params]
            self.actions[a.preamble.id] = ActionInfo(a.preamble.id, a.preamble.name, params)
        self.action_by_name = {a.name: a for a in self.actions.values()}
        self.tables: dict[int, TableInfo] = {}
        for t in p4info.tables:
            info = TableInfo(t.preamble.id, t.preamble.name, t)
            for mf in t.match_fields:
                info.fields[mf.id] = mf
                info.field_order.append(mf.id)
            info.action_ids = {ar.id for ar in t.action_refs}
            self.tables[t.preamble.id] = info
        self.table_by_name = {t.name: t for t in self.tables.values()}
        self.action_profiles = {p.preamble.id: p for p in p4info.action_profiles}
        self.counters = {c.preamble.id: c for c in p4info.counters}
        self.direct_counters = {c.preamble.id: c for c in p4info.direct_counters}
        self.meters = {m.preamble.id: m for m in p4info.meters}
        self.direct_meters = {m.preamble.id: m for m in p4info.direct_meters}
        self.registers = {r.preamble.id: r for r in p4info.registers}
        self.digests = {d.preamble.id: d for d in p4info.digests}
        self.digest_by_name = {d.preamble.name: d for d in p4info.digests}
        self.controller_headers: dict[str, list[tuple[int, str, int]]] = {}
        for cpm in p4info.controller_packet_metadata:
            self.controller_headers[cpm.preamble.name] = [
                (m.id, m.name, m.bitwidth) for m in cpm.metadata
            ]
        self.direct_counter_by_table = {c.direct_table_id: c for c in p4info.direct_counters}
        self.direct_meter_by_table = {m.direct_table_id: m for m in p4info.direct_meters}

    def table(self, table_id: int) -> TableInfo:
        """Table by id, NOT_FOUND if unknown."""
        try:
            return self.tables[table_id]
        except KeyError:
            raise not_found(f"unknown table id {table_id}") from None

    def action(self, action_id: int) -> ActionInfo:
        """Action by id, NOT_FOUND if unknown."""
        try:
            return self.actions[action_id]
        except KeyError:
            raise not_found(f"unknown action id {action_id}") from None

    def get(self, kind: str, obj_id: int) -> Any:
        """One of counters/meters/registers/... by id, NOT_FOUND if unknown."""
        table: dict[int, Any] = getattr(self, kind)
        try:
            return table[obj_id]
        except KeyError:
            raise not_found(f"unknown {kind[:-1].replace('_', ' ')} id {obj_id}") from None


def counter_unit(spec: Any) -> str:
    """'packets', 'bytes' or 'packets_and_bytes' from a CounterSpec."""
    unit = spec.unit
    if unit == p4info_pb2.CounterSpec.BYTES:
        return "bytes"
    if unit == p4info_pb2.CounterSpec.PACKETS:
        return "packets"
    return "packets_and_bytes"
