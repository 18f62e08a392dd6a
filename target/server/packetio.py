"""PacketIn / PacketOut headers (controller_packet_metadata) and DigestList building."""

from __future__ import annotations

from collections.abc import Sequence

from p4.v1 import p4data_pb2, p4runtime_pb2

from icefabric.target.server.bytestrings import decode, encode
from icefabric.target.server.errors import invalid

Layout = list[tuple[int, str, int]]  # (metadata id, name, bitwidth)


def build_packet_out(layout: Layout | None, msg: p4runtime_pb2.PacketOut) -> bytes:
    """packet_out header bytes (fields in P4Info order, missing ones 0) + payload.

    INVALID_ARGUMENT (the packet is dropped) for a PacketOut without any metadata when the
    program has a packet_out header, a metadata id given twice, or an unknown one."""
    if not layout:
        return bytes(msg.payload)
    given: dict[int, bytes] = {}
    for m in msg.metadata:
        if m.metadata_id in given:
            raise invalid(f"PacketOut: metadata id {m.metadata_id} given twice")
        given[m.metadata_id] = m.value
    known = {mid for mid, _, _ in layout}
    unknown = set(given) - known
    if unknown:
        raise invalid(f"PacketOut: unknown metadata id(s) {sorted(unknown)}")
    if not given:
        names = ", ".join(name for _, name, _ in layout)
        raise invalid(f"PacketOut: no metadata (the packet_out header needs {names})")
    acc = 0
    total = 0
    for mid, name, width in layout:
        value = decode(given[mid], width, f"PacketOut metadata {name}") if mid in given else 0
        acc = (acc << width) | value
        total += width
    pad = -total % 8
    return (acc << pad).to_bytes((total + pad) // 8, "big") + bytes(msg.payload)


def split_packet_in(layout: Layout | None, data: bytes) -> p4runtime_pb2.PacketIn:
    """Split a packet sent to the CPU port into packet_in metadata and payload."""
    msg = p4runtime_pb2.PacketIn()
    if not layout:
        msg.payload = data
        return msg
    total = sum(w for _, _, w in layout)
    nbytes = (total + 7) // 8
    if len(data) < nbytes:
        msg.payload = data
        return msg
    acc = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - total)
    shift = total
    for mid, _, width in layout:
        shift -= width
        msg.metadata.add(metadata_id=mid, value=encode((acc >> shift) & ((1 << width) - 1)))
    msg.payload = data[nbytes:]
    return msg


def digest_list(
    digest_id: int, list_id: int, items: Sequence[tuple[int, ...]], timestamp_ns: int
) -> p4runtime_pb2.DigestList:
    """A DigestList with each message as a P4Data struct of bitstrings."""
    out = p4runtime_pb2.DigestList(digest_id=digest_id, list_id=list_id, timestamp=timestamp_ns)
    for values in items:
        data = p4data_pb2.P4Data()
        for v in values:
            data.struct.members.add(bitstring=encode(v))
        out.data.append(data)
    return out
