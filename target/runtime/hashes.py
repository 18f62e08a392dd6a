"""Hash algorithms of v1model with BMv2's exact byte packing and arithmetic.

BMv2 (bm_sim/calculations.cpp) packs the field list MSB-first into a bit string, rounds the
total up to whole bytes with zero padding at the end, and runs the algorithm over the bytes.
"""

from __future__ import annotations

import random as _random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from icefabric.target.runtime.checksum import csum16_bytes, pack_fields

HASH_ALGORITHMS = (
    "crc32",
    "crc32_custom",
    "crc16",
    "crc16_custom",
    "random",
    "identity",
    "csum16",
    "xor16",
)


@dataclass(frozen=True, slots=True)
class CrcParams:
    """A CRC definition as BMv2's crc_custom configures it."""

    width: int
    polynomial: int
    initial_remainder: int
    final_xor_value: int
    data_reflected: bool
    remainder_reflected: bool


CRC16_DEFAULT = CrcParams(16, 0x8005, 0x0000, 0x0000, True, True)
CRC32_DEFAULT = CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


@lru_cache(maxsize=32)
def _crc_table(width: int, polynomial: int) -> tuple[int, ...]:
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for dividend in range(256):
        rem = (dividend << (width - 8)) & mask
        for _ in range(8):
            rem = ((rem << 1) ^ polynomial) & mask if rem & top else (rem << 1) & mask
        table.append(rem)
    return tuple(table)


_REFLECT8 = tuple(_reflect(b, 8) for b in range(256))


def crc_custom(data: bytes, params: CrcParams) -> int:
    """BMv2 crc_custom<T>: table-driven CRC with optional data/remainder reflection."""
    width = params.width
    mask = (1 << width) - 1
    table = _crc_table(width, params.polynomial)
    shift = width - 8
    rem = params.initial_remainder & mask
    refl = params.data_reflected
    for byte in data:
        b = _REFLECT8[byte] if refl else byte
        rem = (table[b ^ (rem >> shift)] ^ (rem << 8)) & mask
    if params.remainder_reflected:
        rem = _reflect(rem, width)
    return (rem ^ params.final_xor_value) & mask


# CRC-16/ARC (BMv2 "crc16") computed in reflected form: same result, one table lookup per byte.
def _arc_table() -> tuple[int, ...]:
    table = []
    for b in range(256):
        crc = b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC16_ARC = _arc_table()


def crc16(data: bytes) -> int:
    """BMv2 "crc16": CRC-16/ARC (poly 0x8005, reflected, init 0, xorout 0)."""
    crc = 0
    table = _CRC16_ARC
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def crc32(data: bytes) -> int:
    """BMv2 "crc32": the IEEE 802.3 CRC-32 (same as zlib)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def identity(data: bytes) -> int:
    """BMv2 "identity": the first (up to) 8 bytes read as a big-endian integer."""
    return int.from_bytes(data[:8], "big")


def xor16(data: bytes) -> int:
    """BMv2 "xor16": XOR of 16-bit big-endian words, a short tail padded with zeros."""
    if len(data) % 2:
        data = data + b"\x00"
    out = 0
    for i in range(0, len(data), 2):
        out ^= (data[i] << 8) | data[i + 1]
    return out


def compute_hash(
    algo: str,
    data_fields: Sequence[tuple[int, int]],
    *,
    crc16_params: CrcParams = CRC16_DEFAULT,
    crc32_params: CrcParams = CRC32_DEFAULT,
    rng: _random.Random | None = None,
) -> int:
    """Hash (value, bitwidth) fields with the named v1model algorithm, exactly as BMv2 does."""
    if algo == "random":
        return (rng or _random).getrandbits(32)
    data = pack_fields(data_fields)
    return hash_bytes(algo, data, crc16_params=crc16_params, crc32_params=crc32_params)


def hash_bytes(
    algo: str,
    data: bytes,
    *,
    crc16_params: CrcParams = CRC16_DEFAULT,
    crc32_params: CrcParams = CRC32_DEFAULT,
) -> int:
    """Hash an already packed byte string with the named algorithm."""
    if algo == "crc16":
        return crc16(data)
    if algo == "crc32":
        return crc32(data)
    if algo == "identity":
        return identity(data)
    if algo == "csum16":
        return csum16_bytes(data)
    if algo == "xor16":
        return xor16(data)
    if algo == "crc16_custom":
        return crc_custom(data, crc16_params)
    if algo == "crc32_custom":
        return crc_custom(data, crc32_params)
    raise ValueError(
        f"unknown hash algorithm {algo!r}; expected one of {', '.join(HASH_ALGORITHMS)}"
    )
