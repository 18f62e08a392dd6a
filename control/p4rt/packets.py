"""Stream messages: packet-out/in with metadata, digest lists, arbitration and stream errors."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc
from google.rpc import code_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from .codec import Value, decode_int, encode_value
from .errors import EncodeError, code_name
from .frozen import FrozenDict, empty, freeze
from .p4info import P4InfoIndex, StructInfo
from .tables import TableEntry

LOG = logging.getLogger(__name__)


def _encode_metadata(
    info: StructInfo | None, metadata: Mapping[str, Value], what: str
) -> list[p4runtime_pb2.PacketMetadata]:
    if info is None:
        if metadata:
            raise EncodeError(f"{what}: the P4Info has no controller header for metadata")
        return []
    unknown = sorted(set(metadata) - {m.name for m in info.members})
    if unknown:
        names = ", ".join(m.name for m in info.members)
        raise EncodeError(f"{what}: no metadata field {unknown[0]!r} (fields: {names})")
    out = []
    for m in info.members:
        if m.name in metadata:
            value = encode_value(metadata[m.name], m.bitwidth, what=f"{what} {m.name}")
            out.append(p4runtime_pb2.PacketMetadata(metadata_id=m.id, value=value))
    return out


def _decode_metadata(
    info: StructInfo | None, items: list[p4runtime_pb2.PacketMetadata]
) -> dict[str, int]:
    out: dict[str, int] = {}
    for md in items:
        name = info.member(md.metadata_id).name if info is not None else str(md.metadata_id)
        out[name] = decode_int(md.value)
    return out


def _header(p4info: P4InfoIndex | None, name: str) -> StructInfo | None:
    if p4info is None or name not in p4info.packet_metadata:
        return None
    return p4info.controller_metadata(name)


@dataclass(slots=True, frozen=True, kw_only=True)
class PacketOut:
    """A packet from the controller: payload plus the P4 program's packet_out header fields."""

    payload: bytes
    metadata: Mapping[str, Value] = field(default_factory=empty)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", freeze(self.metadata))

    def encode(self, p4info: P4InfoIndex | None) -> p4runtime_pb2.PacketOut:
        """The p4.v1.PacketOut message."""
        msg = p4runtime_pb2.PacketOut(payload=bytes(self.payload))
        msg.metadata.extend(
            _encode_metadata(_header(p4info, "packet_out"), self.metadata, "packet_out")
        )
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.PacketOut, p4info: P4InfoIndex | None) -> PacketOut:
        """From a p4.v1.PacketOut message."""
        md = _decode_metadata(_header(p4info, "packet_out"), list(msg.metadata))
        return cls(payload=msg.payload, metadata=md)


@dataclass(slots=True, frozen=True, kw_only=True)
class PacketIn:
    """A packet sent to the controller: payload plus the packet_in header fields."""

    payload: bytes
    metadata: Mapping[str, int] = field(default_factory=empty)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", freeze(self.metadata))

    def encode(self, p4info: P4InfoIndex | None) -> p4runtime_pb2.PacketIn:
        """The p4.v1.PacketIn message (used by test servers)."""
        msg = p4runtime_pb2.PacketIn(payload=bytes(self.payload))
        msg.metadata.extend(
            _encode_metadata(_header(p4info, "packet_in"), self.metadata, "packet_in")
        )
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.PacketIn, p4info: P4InfoIndex | None) -> PacketIn:
        """From a p4.v1.PacketIn message."""
        md = _decode_metadata(_header(p4info, "packet_in"), list(msg.metadata))
        return cls(payload=msg.payload, metadata=md)


def _p4data_values(data: p4data_pb2.P4Data) -> list[int]:
    which = data.WhichOneof("data")
    if which == "bitstring":
        return [decode_int(data.bitstring)]
    if which == "bool":
        return [int(data.bool)]
    if which == "struct":
        return [v for m in data.struct.members for v in _p4data_values(m)]
    if which == "tuple":
        return [v for m in data.tuple.members for v in _p4data_values(m)]
    if which == "header":
        return [decode_int(b) for b in data.header.bitstrings]
    raise EncodeError(f"digest data of kind {which!r} is not supported")


@dataclass(slots=True, frozen=True, kw_only=True)
class DigestList:
    """A list of digest messages; each message is a {member name: int} mapping."""

    digest: str
    list_id: int
    data: tuple[Mapping[str, int], ...] = ()
    timestamp: int = 0

    @classmethod
    def decode(cls, msg: p4runtime_pb2.DigestList, p4info: P4InfoIndex | None) -> DigestList:
        """From a p4.v1.DigestList message (member names from the P4Info type_info)."""
        info = p4info.digest(msg.digest_id) if p4info is not None else None
        name = info.name if info is not None else str(msg.digest_id)
        rows: list[Mapping[str, int]] = []
        for item in msg.data:
            values = _p4data_values(item)
            names = [m.name for m in info.members] if info is not None else []
            if len(names) != len(values):
                names = [f"f{i}" for i in range(len(values))]
            rows.append(FrozenDict(dict(zip(names, values, strict=True))))
        return cls(digest=name, list_id=msg.list_id, data=tuple(rows), timestamp=msg.timestamp)

    def ack(self, p4info: P4InfoIndex) -> p4runtime_pb2.DigestListAck:
        """The DigestListAck message that acknowledges this list."""
        return p4runtime_pb2.DigestListAck(
            digest_id=p4info.digest(self.digest).id, list_id=self.list_id
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class IdleTimeoutNotification:
    """Table entries whose idle timeout expired."""

    table_entries: tuple[TableEntry, ...]
    timestamp: int = 0

    @classmethod
    def decode(
        cls, msg: p4runtime_pb2.IdleTimeoutNotification, p4info: P4InfoIndex
    ) -> IdleTimeoutNotification:
        """From a p4.v1.IdleTimeoutNotification message."""
        entries = tuple(TableEntry.decode(e, p4info) for e in msg.table_entry)
        return cls(table_entries=entries, timestamp=msg.timestamp)


@dataclass(slots=True, frozen=True, kw_only=True)
class ArbitrationUpdate:
    """A master arbitration response: whether this client is primary and the primary's id."""

    device_id: int
    election_id: int  # the highest election id known to the switch (the primary's)
    is_primary: bool
    code: grpc.StatusCode
    message: str = ""

    @classmethod
    def decode(cls, msg: p4runtime_pb2.MasterArbitrationUpdate) -> ArbitrationUpdate:
        """From a p4.v1.MasterArbitrationUpdate (status OK means this client is primary)."""
        code = msg.status.code
        return cls(
            device_id=msg.device_id,
            election_id=(msg.election_id.high << 64) | msg.election_id.low,
            is_primary=msg.HasField("status") and code == code_pb2.OK,
            code=_status_code(code),
            message=msg.status.message,
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class StreamErrorMessage:
    """An error the switch reported on the stream (e.g. a packet-out it could not send)."""

    code: grpc.StatusCode
    message: str
    kind: str = ""  # "packet_out" | "digest_list_ack" | "other"

    @classmethod
    def decode(cls, msg: p4runtime_pb2.StreamError) -> StreamErrorMessage:
        """From a p4.v1.StreamError message."""
        return cls(
            code=_status_code(msg.canonical_code),
            message=msg.message,
            kind=msg.WhichOneof("details") or "",
        )

    def __str__(self) -> str:
        return f"stream error {self.code.name} ({self.kind or 'no details'}): {self.message}"


def _status_code(code: int) -> grpc.StatusCode:
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status
    LOG.debug("unknown status code %s (%s)", code, code_name(code))
    return grpc.StatusCode.UNKNOWN
