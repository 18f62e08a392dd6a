"""Canonical P4Runtime bytestrings (P4Runtime spec 8.4) from ints and address strings."""

from __future__ import annotations

import ipaddress
import re

from .errors import EncodeError

_MAC_RE = re.compile(r"^[0-9a-fA-F]{1,2}([:-])(?:[0-9a-fA-F]{1,2}\1){4}[0-9a-fA-F]{1,2}$")

Value = int | str | bytes


def encode_int(value: int, bitwidth: int, *, what: str = "value") -> bytes:
    """Encode a non-negative int of `bitwidth` bits: minimal big-endian, 0 -> b"\\x00"."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"{what}: expected an int, got {type(value).__name__} {value!r}")
    if value < 0:
        raise EncodeError(f"{what}: expected a non-negative int, got {value}")
    if bitwidth > 0 and value >> bitwidth:
        raise EncodeError(f"{what}: {value} (0x{value:x}) does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_int(data: bytes) -> int:
    """Decode a big-endian bytestring (canonical or padded) to an int."""
    return int.from_bytes(data, "big")


def canonical(data: bytes) -> bytes:
    """Strip leading zero bytes (keeping one byte for zero): the canonical form of `data`."""
    stripped = data.lstrip(b"\x00")
    return stripped or b"\x00"


def parse_value(value: Value, bitwidth: int, *, what: str = "value") -> int:
    """Turn an int, an IPv4/IPv6/MAC string, a decimal/hex string or bytes into an int."""
    if isinstance(value, bool):
        raise EncodeError(f"{what}: expected an int or an address string, got a bool")
    if isinstance(value, int):
        return value
    if isinstance(value, bytes | bytearray):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        return _parse_string(value.strip(), bitwidth, what)
    raise EncodeError(
        f"{what}: expected an int, bytes or an address string, got {type(value).__name__}"
    )


def _parse_string(text: str, bitwidth: int, what: str) -> int:
    if _MAC_RE.match(text):
        return int(_mac_pad(text), 16)
    if ":" in text:
        try:
            return int(ipaddress.IPv6Address(text))
        except ValueError as exc:
            raise EncodeError(f"{what}: {text!r} is not an IPv6 or MAC address") from exc
    if text.count(".") == 3:
        try:
            return int(ipaddress.IPv4Address(text))
        except ValueError as exc:
            raise EncodeError(f"{what}: {text!r} is not an IPv4 address") from exc
    try:
        return int(text, 0)
    except ValueError as exc:
        raise EncodeError(
            f"{what}: {text!r} is not an int, IPv4/IPv6 or MAC address ({bitwidth} bits expected)"
        ) from exc


def _mac_pad(text: str) -> str:
    return "".join(part.zfill(2) for part in re.split(r"[:-]", text))


def encode_value(value: Value, bitwidth: int, *, what: str = "value") -> bytes:
    """Canonical bytestring of an int / address string / bytes checked against `bitwidth`."""
    return encode_int(parse_value(value, bitwidth, what=what), bitwidth, what=what)


def mask_of_prefix(prefix_len: int, bitwidth: int, *, what: str = "value") -> int:
    """The int mask of the first `prefix_len` bits of a `bitwidth`-bit value."""
    if not 0 <= prefix_len <= bitwidth:
        raise EncodeError(f"{what}: prefix length {prefix_len} is outside 0..{bitwidth}")
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len)


def format_value(value: int, bitwidth: int) -> str:
    """Human form: dotted IPv4 for 32 bits, MAC for 48, IPv6 for 128, else decimal/hex."""
    if bitwidth == 32:
        return str(ipaddress.IPv4Address(value))
    if bitwidth == 48:
        raw = value.to_bytes(6, "big")
        return ":".join(f"{b:02x}" for b in raw)
    if bitwidth == 128:
        return str(ipaddress.IPv6Address(value))
    return str(value) if value < 10 else f"0x{value:x}"
