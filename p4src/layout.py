"""Unpack ice.p4's headers from bytes by their generated layouts (``ice_p4.HEADERS``), no scapy.

The controller's telemetry decoder and anything else that reads ICE's own formats without the
host-side packet library use this; the layouts are the P4 declarations themselves, so a field
added to ``p4src/common/headers.p4`` (and regenerated) is decoded here with no other change.
"""

from __future__ import annotations

from icefabric.p4src import ice_p4


class LayoutError(ValueError):
    """Bytes too short for the header asked for (the message names header, offset and sizes)."""


def header_bytes(header: str) -> int:
    """Size in bytes of a fixed-size header of ice.p4 (``KeyError`` for an unknown one)."""
    return sum(w for _, w in ice_p4.HEADERS[header]) // 8


def unpack(header: str, data: bytes, offset: int = 0) -> dict[str, int]:
    """The fields of ``header`` (e.g. ``"int_hop_t"``) at ``data[offset:]``, as integers."""
    size = header_bytes(header)
    if offset < 0 or len(data) - offset < size:
        raise LayoutError(
            f"{header}: {max(len(data) - offset, 0)} bytes at offset {offset}, "
            f"the header needs {size}"
        )
    value = int.from_bytes(data[offset : offset + size], "big")
    out: dict[str, int] = {}
    left = size * 8
    for name, bits in ice_p4.HEADERS[header]:
        left -= bits
        out[name] = (value >> left) & ((1 << bits) - 1)
    return out


def unpack_records(data: bytes, offset: int, count: int) -> list[dict[str, int]]:
    """``count`` INT hop records (``int_hop_t``) one after another from ``offset``."""
    size = ice_p4.INT_HOP_BYTES
    return [unpack("int_hop_t", data, offset + i * size) for i in range(count)]
