"""LLDP link probes (IEEE 802.1AB) as the controller sends and receives them.

A probe names its sender: Chassis ID = switch name (subtype "locally assigned"), Port ID = port
number, TTL, End; sent to the nearest-bridge group address so that no bridge forwards it. The
bytes are built once per port; decoding is plain slicing, since it runs for every probe.
"""

from __future__ import annotations

from dataclasses import dataclass

from icefabric.p4src.ice_p4 import ETHERTYPE_LLDP

#: Nearest-bridge group address: no 802.1D bridge forwards it (IEEE 802.1AB-2016 7.1).
LLDP_DST_MAC = "01:80:c2:00:00:0e"
TLV_END = 0
TLV_CHASSIS_ID = 1
TLV_PORT_ID = 2
TLV_TTL = 3
#: Chassis ID and Port ID subtype 7, "locally assigned": the switch name and port number as text.
SUBTYPE_LOCAL = 7
ETH_MIN_FRAME = 60  # bytes without FCS; shorter frames are padded after the End TLV


class LldpError(ValueError):
    """Bytes that are not an LLDP frame of the expected shape."""


def _mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise LldpError(f"MAC address {mac!r}: expected six hex bytes separated by ':'")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise LldpError(f"MAC address {mac!r}: expected six hex bytes separated by ':'") from None


def _mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _tlv(kind: int, value: bytes) -> bytes:
    if len(value) > 0x1FF:
        raise LldpError(f"LLDP TLV type {kind}: value of {len(value)} bytes exceeds 511")
    return ((kind << 9) | len(value)).to_bytes(2, "big") + value


@dataclass(slots=True, frozen=True, kw_only=True)
class LldpProbe:
    """One link probe: who sent it (switch name, port) and the LLDP time-to-live."""

    chassis: str
    port: int
    ttl_s: int = 1
    src_mac: str = "02:00:00:00:00:00"

    def encode(self) -> bytes:
        """The Ethernet frame: dst 01:80:c2:00:00:0e, type 0x88CC, Chassis/Port/TTL/End TLVs."""
        name = self.chassis.encode()
        if not 1 <= len(name) <= 255:
            raise LldpError(f"chassis id {self.chassis!r}: expected 1..255 bytes")
        if not 0 <= self.port < 1 << 16:
            raise LldpError(f"port {self.port}: expected 0..65535")
        if not 0 <= self.ttl_s < 1 << 16:
            raise LldpError(f"ttl {self.ttl_s}: expected 0..65535 seconds")
        frame = (
            _mac_bytes(LLDP_DST_MAC)
            + _mac_bytes(self.src_mac)
            + ETHERTYPE_LLDP.to_bytes(2, "big")
            + _tlv(TLV_CHASSIS_ID, bytes([SUBTYPE_LOCAL]) + name)
            + _tlv(TLV_PORT_ID, bytes([SUBTYPE_LOCAL]) + str(self.port).encode())
            + _tlv(TLV_TTL, self.ttl_s.to_bytes(2, "big"))
            + _tlv(TLV_END, b"")
        )
        return frame + bytes(max(0, ETH_MIN_FRAME - len(frame)))

    @classmethod
    def decode(cls, frame: bytes) -> LldpProbe:
        """Parse a frame (LldpError naming the problem when it is not a probe of this shape)."""
        if len(frame) < 14:
            raise LldpError(f"{len(frame)}-byte frame is shorter than an Ethernet header")
        etype = int.from_bytes(frame[12:14], "big")
        if etype != ETHERTYPE_LLDP:
            raise LldpError(f"EtherType 0x{etype:04x} is not LLDP (0x{ETHERTYPE_LLDP:04X})")
        off = 14
        values: dict[int, bytes] = {}
        while True:
            if off + 2 > len(frame):
                raise LldpError(f"TLV header at byte {off}: frame ends (no End TLV)")
            head = int.from_bytes(frame[off : off + 2], "big")
            kind, length = head >> 9, head & 0x1FF
            off += 2
            if off + length > len(frame):
                raise LldpError(
                    f"TLV type {kind} at byte {off - 2}: length {length} runs past the frame"
                )
            if kind == TLV_END:
                break
            values.setdefault(kind, frame[off : off + length])
            off += length
        for kind, what in ((TLV_CHASSIS_ID, "Chassis ID"), (TLV_PORT_ID, "Port ID")):
            v = values.get(kind)
            if v is None:
                raise LldpError(f"no {what} TLV")
            if len(v) < 2 or v[0] != SUBTYPE_LOCAL:
                sub = v[0] if v else None
                raise LldpError(
                    f"{what} TLV: expected subtype {SUBTYPE_LOCAL} (locally assigned) and a "
                    f"value, got subtype {sub} and {max(0, len(v) - 1)} byte(s)"
                )
        ttl = values.get(TLV_TTL)
        if ttl is None or len(ttl) != 2:
            raise LldpError("no 2-byte TTL TLV")
        try:
            chassis = values[TLV_CHASSIS_ID][1:].decode()
            port_text = values[TLV_PORT_ID][1:].decode()
        except UnicodeDecodeError as exc:
            raise LldpError(f"Chassis/Port ID is not UTF-8 text: {exc}") from None
        if not port_text.isdigit():
            raise LldpError(f"Port ID {port_text!r}: expected a decimal port number")
        return cls(
            chassis=chassis,
            port=int(port_text),
            ttl_s=int.from_bytes(ttl, "big"),
            src_mac=_mac_text(frame[6:12]),
        )
