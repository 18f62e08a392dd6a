"""Internet (ones' complement) checksum as BMv2's csum16."""

from __future__ import annotations

import struct
from collections.abc import Sequence


def csum16_bytes(data: bytes) -> int:
    """Ones' complement of the ones' complement sum of 16-bit words; odd tail padded with 0."""
    if len(data) % 2:
        data = data + b"\x00"
    s: int = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def pack_fields(data_fields: Sequence[tuple[int, int]]) -> bytes:
    """Concatenate (value, bitwidth) pairs MSB-first and zero-pad to whole bytes (as BMv2)."""
    acc = 0
    total = 0
    for value, width in data_fields:
        if width <= 0:
            continue
        acc = (acc << width) | (value & ((1 << width) - 1))
        total += width
    pad = -total % 8
    return (acc << pad).to_bytes((total + pad) // 8, "big")


def csum16(data_fields: Sequence[tuple[int, int]]) -> int:
    """csum16 over (value, bitwidth) fields packed MSB-first and zero-padded to bytes."""
    return csum16_bytes(pack_fields(data_fields))
