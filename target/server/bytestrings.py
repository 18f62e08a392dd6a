"""P4Runtime bytestrings: canonical encoding out, canonical or padded encoding in."""

from __future__ import annotations

from icefabric.target.server.errors import P4RTError, invalid, out_of_range


def encode(value: int, bitwidth: int | None = None) -> bytes:
    """Canonical bytestring: big-endian, no leading zero bytes, at least one byte."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes, bitwidth: int, what: str) -> int:
    """Decode a bytestring for a `bitwidth`-bit field; OUT_OF_RANGE if it does not fit."""
    if not data:  # P4Runtime "Bytestrings": a zero-length string is always OUT_OF_RANGE
        raise out_of_range(f"{what}: empty bytestring (expected at least one byte)")
    value = int.from_bytes(data, "big")
    if bitwidth > 0 and value >> bitwidth:
        raise out_of_range(f"{what}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def decode_port(data: bytes, what: str) -> int:
    """Decode a port (P4Runtime Replica.port is a bytestring of the port number)."""
    try:
        return decode(data, 32, what)
    except P4RTError:
        raise invalid(f"{what}: bad port bytestring 0x{data.hex()}") from None
