"""What the virtual-time fabric (``virtual_fabric.py``) measures, and the frame inspection behind
it: per-port statistics, the agent channel's counters, CE marks and the bytes ICE adds to the
wire (shim, INT records, feedback frames)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icefabric.p4src.ice_p4 import (
    ETHERNET_BYTES,
    ICE_SHIM_BYTES,
    INT_HOP_BYTES,
    IP_PROTO_UDP,
    UDP_PORT_ICE_FEEDBACK,
)
from icefabric.traffic.roce import ECN_CE


@dataclass(slots=True)
class PortStats:
    """What left one switch port: packets, bytes, CE-marked frames, queue depth at departures."""

    switch: str
    port: int
    rate_bps: float
    tx_packets: int = 0
    tx_bytes: int = 0
    #: bytes of ICE's own on the wire: the shim and INT records of tagged packets, whole
    #: feedback frames (what ``wire_overhead`` in results.json counts)
    overhead_bytes: int = 0
    ce_packets: int = 0
    max_queue: int = 0
    queue_hist: dict[int, int] = field(default_factory=dict)  # depth after a departure -> count

    def utilisation(self, elapsed_us: float) -> float:
        """Fraction of the port's rate used over ``elapsed_us``."""
        if elapsed_us <= 0 or self.rate_bps <= 0:
            return 0.0
        return self.tx_bytes * 8e6 / (elapsed_us * self.rate_bps)

    def queue_percentile(self, q: float) -> int:
        """Depth (packets) at quantile ``q`` in [0, 1] of the departures (0 when none)."""
        total = sum(self.queue_hist.values())
        if total == 0:
            return 0
        need = q * total
        seen = 0
        for depth in sorted(self.queue_hist):
            seen += self.queue_hist[depth]
            if seen >= need:
                return depth
        return max(self.queue_hist)

    def to_dict(self, elapsed_us: float) -> dict[str, Any]:
        """Plain data (JSON)."""
        return {
            "switch": self.switch,
            "port": self.port,
            "rate_bps": self.rate_bps,
            "tx_packets": self.tx_packets,
            "tx_bytes": self.tx_bytes,
            "overhead_bytes": self.overhead_bytes,
            "ce_packets": self.ce_packets,
            "max_queue": self.max_queue,
            "queue_p50": self.queue_percentile(0.5),
            "queue_p99": self.queue_percentile(0.99),
            "utilisation": self.utilisation(elapsed_us),
        }


@dataclass(slots=True)
class ChannelStats:
    """The agent channel of the virtual engine: cap sets pushed and applied, bytes, bad frames."""

    pushes: int = 0  # cap sets sent (one per host per push)
    applied: int = 0  # complete cap sets the agents applied
    frames: int = 0
    bytes: int = 0
    malformed: int = 0


def ice_overhead_bytes(frame: bytes) -> int:
    """Bytes of ``frame`` that ICE adds to the wire: shim + INT records of a tagged packet, or
    the whole frame of an INT feedback packet (IPv4/UDP to the feedback port); 0 otherwise."""
    if len(frame) < ETHERNET_BYTES + 4:
        return 0
    if frame[12] == 0x88 and frame[13] == 0xB5:
        return int(ICE_SHIM_BYTES + frame[ETHERNET_BYTES + 2] * INT_HOP_BYTES)
    if (
        frame[12] == 0x08
        and frame[13] == 0x00
        and len(frame) >= ETHERNET_BYTES + 28
        and frame[ETHERNET_BYTES + 9] == IP_PROTO_UDP
    ):
        ihl = (frame[ETHERNET_BYTES] & 0x0F) * 4
        off = ETHERNET_BYTES + ihl + 2
        if len(frame) >= off + 2 and (frame[off] << 8 | frame[off + 1]) == UDP_PORT_ICE_FEEDBACK:
            return len(frame)
    return 0


def is_ce(frame: bytes) -> bool:
    """Whether the IPv4 packet in ``frame`` (plain, or behind ICE's shim and INT) is CE-marked."""
    if len(frame) < ETHERNET_BYTES + 20:
        return False
    off = ETHERNET_BYTES
    if frame[12] == 0x88 and frame[13] == 0xB5:  # ICE shim: 8 bytes + 36 per INT record
        off += ICE_SHIM_BYTES + frame[ETHERNET_BYTES + 2] * INT_HOP_BYTES
    elif not (frame[12] == 0x08 and frame[13] == 0x00):
        return False
    return len(frame) > off + 1 and frame[off + 1] & 3 == ECN_CE
