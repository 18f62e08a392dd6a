"""An index over a P4Info: names <-> ids, bitwidths and aliases for every P4 object."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Generic, TypeVar

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from p4.config.v1 import p4info_pb2, p4types_pb2

from icefabric.files import DataFileError, read_input

from .errors import P4InfoError

LOG = logging.getLogger(__name__)
MAX_P4INFO_BYTES = 64 * 1024 * 1024  # a P4Info file (text or binary)

_MATCH_TYPES: Mapping[int, str] = MappingProxyType(
    {
        p4info_pb2.MatchField.EXACT: "exact",
        p4info_pb2.MatchField.LPM: "lpm",
        p4info_pb2.MatchField.TERNARY: "ternary",
        p4info_pb2.MatchField.RANGE: "range",
        p4info_pb2.MatchField.OPTIONAL: "optional",
    }
)


@dataclass(slots=True, frozen=True, eq=False)
class FieldInfo:
    """One match field, action parameter, packet metadata field or digest member."""

    id: int
    name: str
    bitwidth: int
    match_type: str = ""  # tables only: exact | lpm | ternary | range | optional | other name


@dataclass(slots=True, frozen=True, eq=False)
class ObjectInfo:
    """A named P4 object: id, fully-qualified name, alias and its P4Info message."""

    kind: str
    id: int
    name: str
    alias: str
    msg: object

    @property
    def size(self) -> int:
        """Declared size (table, counter, meter, register, action profile); 0 if none."""
        return int(getattr(self.msg, "size", 0))


@dataclass(slots=True, frozen=True, eq=False)
class ActionInfo(ObjectInfo):
    """An action and its parameters in declaration order."""

    params: tuple[FieldInfo, ...] = ()

    def param(self, key: str | int) -> FieldInfo:
        """The parameter named or numbered `key` (raises P4InfoError listing the others)."""
        return _find_field(self.params, key, f"parameter of action {self.name}")


@dataclass(slots=True, frozen=True, eq=False)
class TableInfo(ObjectInfo):
    """A table: match fields in key order, the allowed actions and attached resources."""

    match_fields: tuple[FieldInfo, ...] = ()
    action_ids: tuple[int, ...] = ()
    implementation_id: int = 0  # action profile / selector, 0 for direct tables
    direct_resource_ids: tuple[int, ...] = ()
    const_default_action_id: int = 0
    is_const: bool = False

    def field(self, key: str | int) -> FieldInfo:
        """The match field named or numbered `key` (raises P4InfoError listing the others)."""
        return _find_field(self.match_fields, key, f"match field of table {self.name}")

    @property
    def needs_priority(self) -> bool:
        """Whether entries need a priority (a ternary, range or optional field)."""
        return any(f.match_type in ("ternary", "range", "optional") for f in self.match_fields)


@dataclass(slots=True, frozen=True, eq=False)
class StructInfo(ObjectInfo):
    """A digest or controller packet metadata header: its members in order."""

    members: tuple[FieldInfo, ...] = ()

    def member(self, key: str | int) -> FieldInfo:
        """The member named or numbered `key`."""
        return _find_field(self.members, key, f"member of {self.kind} {self.name}")


def _find_field(fields: tuple[FieldInfo, ...], key: str | int, what: str) -> FieldInfo:
    for f in fields:
        if (isinstance(key, int) and f.id == key) or f.name == key:
            return f
    names = ", ".join(f.name for f in fields) or "none"
    raise P4InfoError(f"no {what} {key!r} (known: {names})")


T = TypeVar("T", bound=ObjectInfo)


class _Namespace(Generic[T]):
    """Objects of one kind, found by id, fully-qualified name or alias."""

    def __init__(self, kind: str, items: Iterable[T]) -> None:
        self.kind = kind
        self._by_id: dict[int, T] = {}
        self._by_name: dict[str, T] = {}
        for item in items:
            self._by_id[item.id] = item
            self._by_name[item.name] = item
        for item in self._by_id.values():
            if item.alias and item.alias not in self._by_name:
                self._by_name[item.alias] = item

    def get(self, key: str | int) -> T:
        """The object named or numbered `key`; raises P4InfoError naming the known ones."""
        found = self._by_id.get(key) if isinstance(key, int) else self._by_name.get(key)
        if found is None:
            known = ", ".join(sorted(i.name for i in self._by_id.values())) or "none"
            raise P4InfoError(f"no {self.kind} {key!r} in the P4Info (known: {known})")
        return found

    def __contains__(self, key: object) -> bool:
        return key in self._by_id or key in self._by_name

    def __iter__(self) -> Iterator[T]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)


def _bitwidth(type_spec: p4types_pb2.P4DataTypeSpec) -> int:
    kind = type_spec.WhichOneof("type_spec")
    if kind == "bitstring":
        bs = type_spec.bitstring
        which = bs.WhichOneof("type_spec")
        if which == "bit":
            return int(bs.bit.bitwidth)
        if which == "int":
            return int(bs.int.bitwidth)
        if which == "varbit":
            return int(bs.varbit.max_bitwidth)
    if kind == "bool":
        return 1
    return 0


class P4InfoIndex:
    """Read-only lookups over one P4Info message (tables, actions, externs, metadata)."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.tables: _Namespace[TableInfo] = _Namespace("table", map(_table, p4info.tables))
        self.actions: _Namespace[ActionInfo] = _Namespace("action", map(_action, p4info.actions))
        self.action_profiles: _Namespace[ObjectInfo] = _Namespace(
            "action profile", (_obj("action profile", m) for m in p4info.action_profiles)
        )
        self.counters: _Namespace[ObjectInfo] = _Namespace(
            "counter", (_obj("counter", m) for m in p4info.counters)
        )
        self.direct_counters: _Namespace[ObjectInfo] = _Namespace(
            "direct counter", (_obj("direct counter", m) for m in p4info.direct_counters)
        )
        self.meters: _Namespace[ObjectInfo] = _Namespace(
            "meter", (_obj("meter", m) for m in p4info.meters)
        )
        self.direct_meters: _Namespace[ObjectInfo] = _Namespace(
            "direct meter", (_obj("direct meter", m) for m in p4info.direct_meters)
        )
        self.registers: _Namespace[ObjectInfo] = _Namespace(
            "register", (_obj("register", m) for m in p4info.registers)
        )
        self.digests: _Namespace[StructInfo] = _Namespace(
            "digest", (self._digest(m) for m in p4info.digests)
        )
        self.packet_metadata: _Namespace[StructInfo] = _Namespace(
            "controller packet metadata",
            (_packet_metadata(m) for m in p4info.controller_packet_metadata),
        )

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str, *, source: str = "<text>") -> P4InfoIndex:
        """Index a P4Info given in protobuf text format."""
        return cls(parse_p4info_text(text, source=source))

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> P4InfoIndex:
        """Index a P4Info given as binary protobuf or UTF-8 text format (detected)."""
        return cls(parse_p4info(data, source=source))

    @classmethod
    def load(cls, path: str | Path) -> P4InfoIndex:
        """Index the P4Info in a file (.txt/.txtpb text format or binary .bin/.pb)."""
        return cls(load_p4info(path))

    # -- lookups ---------------------------------------------------------------------------
    def table(self, key: str | int) -> TableInfo:
        """The table named (full name or alias) or numbered `key`."""
        return self.tables.get(key)

    def action(self, key: str | int) -> ActionInfo:
        """The action named or numbered `key`."""
        return self.actions.get(key)

    def action_profile(self, key: str | int) -> ObjectInfo:
        """The action profile (or selector) named or numbered `key`."""
        return self.action_profiles.get(key)

    def counter(self, key: str | int) -> ObjectInfo:
        """The indexed counter named or numbered `key`."""
        return self.counters.get(key)

    def direct_counter(self, key: str | int) -> ObjectInfo:
        """The direct counter named or numbered `key`."""
        return self.direct_counters.get(key)

    def meter(self, key: str | int) -> ObjectInfo:
        """The indexed meter named or numbered `key`."""
        return self.meters.get(key)

    def direct_meter(self, key: str | int) -> ObjectInfo:
        """The direct meter named or numbered `key`."""
        return self.direct_meters.get(key)

    def register(self, key: str | int) -> ObjectInfo:
        """The register named or numbered `key`."""
        return self.registers.get(key)

    def digest(self, key: str | int) -> StructInfo:
        """The digest named or numbered `key` (members from the P4Info type_info)."""
        return self.digests.get(key)

    def controller_metadata(self, key: str | int) -> StructInfo:
        """The controller packet metadata header ("packet_in" / "packet_out")."""
        return self.packet_metadata.get(key)

    def register_bitwidth(self, key: str | int) -> int:
        """Bit width of the register's cells."""
        msg = self.register(key).msg
        assert isinstance(msg, p4info_pb2.Register)
        return _bitwidth(msg.type_spec)

    def direct_counter_of(self, table: str | int) -> ObjectInfo | None:
        """The direct counter attached to a table, if any."""
        t = self.table(table)
        return next((c for c in self.direct_counters if c.id in t.direct_resource_ids), None)

    def direct_meter_of(self, table: str | int) -> ObjectInfo | None:
        """The direct meter attached to a table, if any."""
        t = self.table(table)
        return next((m for m in self.direct_meters if m.id in t.direct_resource_ids), None)

    def name_of(self, id_: int) -> str:
        """Fully-qualified name of any object by id (P4 ids carry their kind in the top byte)."""
        for ns in self._namespaces():
            if id_ in ns:
                return ns.get(id_).name
        raise P4InfoError(f"no P4 object with id {id_} (0x{id_:08x}) in the P4Info")

    def _namespaces(self) -> tuple[_Namespace[ObjectInfo], ...]:
        return (
            self.tables,  # type: ignore[return-value]
            self.actions,
            self.action_profiles,
            self.counters,
            self.direct_counters,
            self.meters,
            self.direct_meters,
            self.registers,
            self.digests,
            self.packet_metadata,
        )

    def _digest(self, m: p4info_pb2.Digest) -> StructInfo:
        members: tuple[FieldInfo, ...] = ()
        spec = m.type_spec
        kind = spec.WhichOneof("type_spec")
        if kind == "struct" and spec.struct.name in self.p4info.type_info.structs:
            struct = self.p4info.type_info.structs[spec.struct.name]
            members = tuple(
                FieldInfo(i + 1, mem.name, _bitwidth(mem.type_spec))
                for i, mem in enumerate(struct.members)
            )
        elif kind == "bitstring":
            members = (FieldInfo(1, "value", _bitwidth(spec)),)
        else:
            LOG.debug("digest %s: no member layout in the P4Info type_info", m.preamble.name)
        return StructInfo("digest", m.preamble.id, m.preamble.name, m.preamble.alias, m, members)


def _table(m: p4info_pb2.Table) -> TableInfo:
    fields = tuple(
        FieldInfo(
            f.id,
            f.name,
            f.bitwidth,
            _MATCH_TYPES.get(f.match_type, "")
            if f.WhichOneof("match") == "match_type"
            else f.other_match_type,
        )
        for f in m.match_fields
    )
    return TableInfo(
        "table",
        m.preamble.id,
        m.preamble.name,
        m.preamble.alias,
        m,
        match_fields=fields,
        action_ids=tuple(a.id for a in m.action_refs),
        implementation_id=m.implementation_id,
        direct_resource_ids=tuple(m.direct_resource_ids),
        const_default_action_id=m.const_default_action_id,
        is_const=m.is_const_table,
    )


def _action(m: p4info_pb2.Action) -> ActionInfo:
    params = tuple(FieldInfo(p.id, p.name, p.bitwidth) for p in m.params)
    return ActionInfo("action", m.preamble.id, m.preamble.name, m.preamble.alias, m, params)


def _obj(kind: str, m: object) -> ObjectInfo:
    pre = m.preamble  # type: ignore[attr-defined]
    return ObjectInfo(kind, pre.id, pre.name, pre.alias, m)


def _packet_metadata(m: p4info_pb2.ControllerPacketMetadata) -> StructInfo:
    members = tuple(FieldInfo(f.id, f.name, f.bitwidth) for f in m.metadata)
    pre = m.preamble
    return StructInfo("controller packet metadata", pre.id, pre.name, pre.alias, m, members)


def parse_p4info_text(text: str, *, source: str = "<text>") -> p4info_pb2.P4Info:
    """Parse a P4Info in protobuf text format; errors name the source and line."""
    msg = p4info_pb2.P4Info()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        raise P4InfoError(f"{source}: not a P4Info in text format: {exc}") from exc
    return msg


def parse_p4info(data: bytes, *, source: str = "<bytes>") -> p4info_pb2.P4Info:
    """Parse a P4Info from binary protobuf or UTF-8 text format, whichever it is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not text.strip():
        raise P4InfoError(f"{source}: empty P4Info")
    if text is not None:
        try:
            return parse_p4info_text(text, source=source)
        except P4InfoError as text_error:
            binary = _parse_binary(data)
            if binary is None:
                raise text_error from None
            return binary
    binary = _parse_binary(data)
    if binary is None:
        raise P4InfoError(f"{source}: neither a binary nor a text-format P4Info")
    return binary


def _parse_binary(data: bytes) -> p4info_pb2.P4Info | None:
    msg = p4info_pb2.P4Info()
    try:
        msg.ParseFromString(data)
    except DecodeError:
        return None
    return msg if msg.ByteSize() else None


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info file (text or binary format, detected)."""
    p = Path(path)
    try:
        data = read_input(p, limit=MAX_P4INFO_BYTES, what="a P4Info file")
    except DataFileError as exc:
        msg = str(exc).splitlines()[0]
        raise P4InfoError(
            msg.replace(": cannot read:", ": cannot read the P4Info file:", 1)
        ) from None
    return parse_p4info(data, source=str(p))
