"""Helpers the generated code calls at run time (errors, checksums, lookahead, log formatting)."""

from __future__ import annotations

from collections.abc import Sequence

from icefabric.target.runtime.hashes import hash_bytes


class ParserError(Exception):
    """Raised by generated parser code: ``code`` is the P4 error (-1: reject, keep the error)."""

    def __init__(self, code: int, pos: int) -> None:
        super().__init__(code, pos)
        self.code = code
        self.pos = pos


class ExitControl(Exception):
    """``exit;`` ends the current top-level control."""


class AssertFailed(Exception):
    """A v1model assert()/assume() failed."""


def csum16_int(value: int, nbits: int, payload: bytes = b"") -> int:
    """RFC 1071 checksum of the bits of ``value`` (plus payload), zero padded to 16 bits."""
    if payload:
        value = (value << (len(payload) * 8)) | int.from_bytes(payload, "big")
        nbits += len(payload) * 8
    pad = -nbits % 16
    if pad:
        value <<= pad
    if value == 0:
        return 0xFFFF
    s = value % 0xFFFF
    if s == 0:
        s = 0xFFFF
    return (~s) & 0xFFFF


def hash_int(algo: str, value: int, nbits: int, payload: bytes = b"") -> int:
    """A v1model hash algorithm over the bits of ``value`` (zero padded to bytes) + payload."""
    pad = -nbits % 8
    data = (value << pad).to_bytes((nbits + pad) // 8, "big") + payload
    return hash_bytes(algo, data)


def lookahead_bits(data: bytes, pos: int, nbits: int, width: int) -> int:
    """The next ``width`` bits at bit position ``pos`` without consuming them."""
    end = pos + width
    if end > nbits:
        raise ParserError(1, pos)
    v = int.from_bytes(data[pos >> 3 : (end + 7) >> 3], "big") >> (-end & 7)
    return v & ((1 << width) - 1)


def format_log(fmt: str, values: Sequence[int]) -> str:
    """Replace each ``{}`` in a log_msg format string by the next value (as BMv2 does)."""
    parts = fmt.split("{}")
    out = [parts[0]]
    for i, p in enumerate(parts[1:]):
        out.append(str(values[i]) if i < len(values) else "{}")
        out.append(p)
    return "".join(out)
