"""RoCEv2 frames and ICE feedback packets with ``struct`` on preallocated bytes (no scapy).

The per-packet path of the endpoints: :class:`FrameBuilder` keeps one flow's Ethernet / IPv4 /
UDP 4791 / BTH header in a preallocated buffer and patches length, id, checksum, opcode and PSN
into it for every packet; :func:`parse_roce` reads those headers back; :func:`build_cnp` makes a
RoCEv2 CNP (BTH opcode 0x81, BECN set, 16 reserved bytes); :func:`parse_feedback` decodes the
feedback packets ``p4src/`` returns to senders into :class:`HopSample` lists.  Every frame ends in
the 4-byte RoCEv2 ICRC (CRC-32 over the masked pseudo-header, as the IBTA annex A17 and scapy's
``BTH`` compute it).  Layouts are in ``p4src/common/headers.p4``; tests compare with scapy.

Malformed input raises :class:`MalformedFrame` (a ``ValueError`` naming what was wrong); the
endpoints count and drop such frames.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from icefabric.control.flowkey import ROCE_UDP_PORT
from icefabric.p4src import ice_p4
from icefabric.traffic.rate import HopSample

# ice.p4's header sizes and ports (generated from it), under the names this module always used
ETH_BYTES = ice_p4.ETHERNET_BYTES
IPV4_BYTES = ice_p4.IPV4_BYTES
UDP_BYTES = ice_p4.UDP_BYTES
BTH_BYTES = ice_p4.BTH_BYTES
FEEDBACK_BYTES = ice_p4.ICE_FEEDBACK_BYTES
HOP_BYTES = ice_p4.INT_HOP_BYTES
ETHERTYPE_IPV4 = ice_p4.ETHERTYPE_IPV4
IPPROTO_UDP = ice_p4.IP_PROTO_UDP
FEEDBACK_PORT = ice_p4.UDP_PORT_ICE_FEEDBACK
ICRC_BYTES = 4
HEADER_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES  # 54
CNP_PAD_BYTES = 16
MAX_QP = (1 << 24) - 1
PSN_MOD = 1 << 24

# BTH opcodes (RC transport) and the RoCEv2 CNP.
OP_SEND_FIRST = 0x00
OP_SEND_MIDDLE = 0x01
OP_SEND_LAST = 0x02
OP_SEND_ONLY = 0x04
OP_CNP = 0x81
SEND_OPCODES = frozenset({OP_SEND_FIRST, OP_SEND_MIDDLE, OP_SEND_LAST, OP_SEND_ONLY})

# IPv4 ECN codepoints.
ECN_NOT_ECT = 0
ECN_ECT1 = 1
ECN_ECT0 = 2
ECN_CE = 3

_ETH = struct.Struct("!6s6sH")
_IP = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
_BTH = struct.Struct(
    "!BBHBBHBBH"
)  # opcode, flags, pkey, resv8a, qp hi8, qp lo16, ack, psn hi8, lo16
_FB = struct.Struct("!BBHI4s4sHHI I Q")
_HOP = struct.Struct("!IHHIIQQI")
_ICRC = struct.Struct("<I")
_PSEUDO_LRH = b"\xff" * 8


class MalformedFrame(ValueError):
    """A frame that is not what the decoder expected (the message says what and where)."""


def mac_bytes(mac: str) -> bytes:
    """``"aa:bb:cc:dd:ee:ff"`` -> 6 bytes (MalformedFrame-free: ValueError on bad text)."""
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"MAC address {mac!r}: expected six hex octets separated by ':'")
    return bytes(int(p, 16) for p in parts)


def ip_bytes(ip: str) -> bytes:
    """Dotted IPv4 -> 4 bytes (ValueError on bad text)."""
    parts = ip.split(".")
    if len(parts) != 4 or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
        raise ValueError(f"IPv4 address {ip!r}: expected four decimal octets")
    return bytes(int(p) for p in parts)


def ip_text(raw: bytes) -> str:
    """4 bytes -> dotted IPv4."""
    return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"


def _checksum(header: bytes | bytearray | memoryview) -> int:
    """The IPv4 header checksum of ``header`` (its checksum field must be zero)."""
    total: int = sum(struct.unpack("!10H", header))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def icrc(ip_udp_bth: bytes | bytearray | memoryview, payload: bytes | memoryview) -> bytes:
    """The RoCEv2 ICRC of IPv4 + UDP + BTH headers (28 + 12 bytes) and payload."""
    masked = bytearray(ip_udp_bth)
    masked[1] = 0xFF  # TOS
    masked[8] = 0xFF  # TTL
    masked[10:12] = b"\xff\xff"  # IP checksum
    masked[26:28] = b"\xff\xff"  # UDP checksum
    masked[IPV4_BYTES + UDP_BYTES + 4] = 0xFF  # BTH FECN/BECN/resv6
    crc = zlib.crc32(_PSEUDO_LRH)
    crc = zlib.crc32(masked, crc)
    crc = zlib.crc32(payload, crc)
    return _ICRC.pack(crc & 0xFFFFFFFF)


@dataclass(frozen=True, slots=True)
class RoceHeader:
    """What a receiver reads from a RoCEv2 frame."""

    src_mac: bytes
    dst_mac: bytes
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    ecn: int
    opcode: int
    qp: int
    psn: int
    becn: bool
    payload_bytes: int
    frame_bytes: int


class FrameBuilder:
    """One flow's RoCEv2 frames from a preallocated header (SEND opcodes, ECT(0))."""

    __slots__ = ("_buf", "_ip_id", "_payload", "_with_icrc", "dst_ip", "qp", "sport", "src_ip")

    def __init__(
        self,
        *,
        src_mac: str,
        dst_mac: str,
        src_ip: str,
        dst_ip: str,
        sport: int,
        qp: int,
        max_payload: int,
        ttl: int = 64,
        ecn: int = ECN_ECT0,
        with_icrc: bool = True,
    ) -> None:
        if not 0 <= qp <= MAX_QP:
            raise ValueError(f"FrameBuilder: QP {qp} is not a 24-bit number")
        if not 0 < sport < 1 << 16:
            raise ValueError(f"FrameBuilder: UDP source port {sport} out of range")
        if not 0 < max_payload <= 9000:
            raise ValueError(f"FrameBuilder: max_payload {max_payload} out of range 1..9000")
        self.src_ip, self.dst_ip, self.sport, self.qp = src_ip, dst_ip, sport, qp
        self._with_icrc = with_icrc
        self._ip_id = 0
        self._buf = bytearray(HEADER_BYTES)
        _ETH.pack_into(self._buf, 0, mac_bytes(dst_mac), mac_bytes(src_mac), ETHERTYPE_IPV4)
        _IP.pack_into(
            self._buf,
            ETH_BYTES,
            0x45,
            ecn & 3,
            0,
            0,
            0x4000,
            ttl,
            IPPROTO_UDP,
            0,
            ip_bytes(src_ip),
            ip_bytes(dst_ip),
        )
        _UDP.pack_into(self._buf, ETH_BYTES + IPV4_BYTES, sport, ROCE_UDP_PORT, 0, 0)
        _BTH.pack_into(
            self._buf,
            ETH_BYTES + IPV4_BYTES + UDP_BYTES,
            0,
            0,
            0xFFFF,
            0,
            qp >> 16,
            qp & 0xFFFF,
            0,
            0,
            0,
        )
        # A deterministic payload pattern, sliced for every packet (no per-packet allocation
        # beyond the frame itself).
        self._payload = bytes((i * 7) & 0xFF for i in range(max_payload))

    def frame(
        self, opcode: int, psn: int, payload_bytes: int, immediate: int | None = None
    ) -> bytes:
        """One frame: ``payload_bytes`` of payload at ``psn`` with ``opcode``.

        ``immediate`` (32 bits) fills the first 4 payload bytes (the ImmDt header of the
        *_WITH_IMMEDIATE opcodes).
        """
        buf = self._buf
        ip_len = (
            IPV4_BYTES
            + UDP_BYTES
            + BTH_BYTES
            + payload_bytes
            + (ICRC_BYTES if self._with_icrc else 0)
        )
        self._ip_id = (self._ip_id + 1) & 0xFFFF
        struct.pack_into("!HH", buf, ETH_BYTES + 2, ip_len, self._ip_id)
        struct.pack_into("!H", buf, ETH_BYTES + 10, 0)
        struct.pack_into(
            "!H",
            buf,
            ETH_BYTES + 10,
            _checksum(memoryview(buf)[ETH_BYTES : ETH_BYTES + IPV4_BYTES]),
        )
        struct.pack_into("!H", buf, ETH_BYTES + IPV4_BYTES + 4, ip_len - IPV4_BYTES)
        bth = ETH_BYTES + IPV4_BYTES + UDP_BYTES
        buf[bth] = opcode
        struct.pack_into("!I", buf, bth + 8, psn & 0xFFFFFF)
        payload: bytes | memoryview
        if immediate is None:
            payload = memoryview(self._payload)[:payload_bytes]
        else:
            payload = struct.pack("!I", immediate) + self._payload[: payload_bytes - 4]
        if not self._with_icrc:
            return bytes(buf) + payload
        return b"".join((buf, payload, icrc(memoryview(buf)[ETH_BYTES:], payload)))


def build_cnp(
    *,
    src_mac: str,
    dst_mac: str,
    src_ip: str,
    dst_ip: str,
    qp: int,
    sport: int = ROCE_UDP_PORT,
    ttl: int = 64,
) -> bytes:
    """A RoCEv2 CNP to ``dst_ip``'s QP ``qp`` (opcode 0x81, BECN, 16 reserved bytes, ICRC).

    DSCP 0 and not-ECT: a CNP is never marked itself.  NICs send CNPs in a high-priority class;
    here ice.p4 picks the queue, not DSCP: it puts a CNP (this opcode, 60-byte IPv4 packet) in
    the feedback queue from its first switch on (p4src/README.md, *Egress queue priorities*).
    """
    buf = bytearray(HEADER_BYTES)
    ip_len = IPV4_BYTES + UDP_BYTES + BTH_BYTES + CNP_PAD_BYTES + ICRC_BYTES
    _ETH.pack_into(buf, 0, mac_bytes(dst_mac), mac_bytes(src_mac), ETHERTYPE_IPV4)
    _IP.pack_into(
        buf,
        ETH_BYTES,
        0x45,
        0,
        ip_len,
        0,
        0x4000,
        ttl,
        IPPROTO_UDP,
        0,
        ip_bytes(src_ip),
        ip_bytes(dst_ip),
    )
    struct.pack_into(
        "!H", buf, ETH_BYTES + 10, _checksum(memoryview(buf)[ETH_BYTES : ETH_BYTES + IPV4_BYTES])
    )
    _UDP.pack_into(buf, ETH_BYTES + IPV4_BYTES, sport, ROCE_UDP_PORT, ip_len - IPV4_BYTES, 0)
    _BTH.pack_into(
        buf,
        ETH_BYTES + IPV4_BYTES + UDP_BYTES,
        OP_CNP,
        0,
        0xFFFF,
        0x40,
        qp >> 16,
        qp & 0xFFFF,
        0,
        0,
        0,
    )
    pad = bytes(CNP_PAD_BYTES)
    return b"".join((buf, pad, icrc(memoryview(buf)[ETH_BYTES:], pad)))


def udp_dport(frame: bytes) -> int | None:
    """The UDP destination port of an Ethernet/IPv4/UDP frame, else None (cheap dispatch)."""
    if len(frame) < ETH_BYTES + IPV4_BYTES + UDP_BYTES:
        return None
    if frame[12] != 0x08 or frame[13] != 0x00 or frame[ETH_BYTES + 9] != IPPROTO_UDP:
        return None
    ihl = (frame[ETH_BYTES] & 0x0F) * 4
    off = ETH_BYTES + ihl + 2
    if len(frame) < off + 2:
        return None
    return (frame[off] << 8) | frame[off + 1]


def _ip_udp(frame: bytes, what: str) -> tuple[int, int]:
    """(IPv4 header offset, UDP header offset), checked."""
    if len(frame) < ETH_BYTES + IPV4_BYTES + UDP_BYTES:
        raise MalformedFrame(f"{what}: {len(frame)}-byte frame is shorter than Ethernet+IPv4+UDP")
    (ether_type,) = struct.unpack_from("!H", frame, 12)
    if ether_type != ETHERTYPE_IPV4:
        raise MalformedFrame(f"{what}: EtherType 0x{ether_type:04x}, expected IPv4 0x0800")
    vihl = frame[ETH_BYTES]
    ihl = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or ihl < IPV4_BYTES:
        raise MalformedFrame(f"{what}: bad IPv4 version/IHL byte 0x{vihl:02x}")
    if frame[ETH_BYTES + 9] != IPPROTO_UDP:
        raise MalformedFrame(f"{what}: IP protocol {frame[ETH_BYTES + 9]}, expected UDP 17")
    udp = ETH_BYTES + ihl
    if len(frame) < udp + UDP_BYTES:
        raise MalformedFrame(f"{what}: frame ends inside the UDP header")
    return ETH_BYTES, udp


def parse_roce(frame: bytes) -> RoceHeader:
    """Decode a RoCEv2 frame's headers (MalformedFrame when it is not one)."""
    ip, udp = _ip_udp(frame, "RoCEv2")
    sport, dport, _udp_len, _ = _UDP.unpack_from(frame, udp)
    if dport != ROCE_UDP_PORT:
        raise MalformedFrame(f"RoCEv2: UDP destination port {dport}, expected {ROCE_UDP_PORT}")
    bth = udp + UDP_BYTES
    if len(frame) < bth + BTH_BYTES + ICRC_BYTES:
        raise MalformedFrame(f"RoCEv2: {len(frame)}-byte frame ends inside BTH/ICRC")
    opcode, _flags, _pkey, resv8a, qp_hi, qp_lo, _ack, psn_hi, psn_lo = _BTH.unpack_from(frame, bth)
    (total_len,) = struct.unpack_from("!H", frame, ip + 2)
    end = ip + total_len
    if total_len < (udp - ip) + UDP_BYTES + BTH_BYTES + ICRC_BYTES or end > len(frame):
        raise MalformedFrame(
            f"RoCEv2: IPv4 total length {total_len} does not fit the {len(frame)}-byte frame"
        )
    return RoceHeader(
        src_mac=frame[6:12],
        dst_mac=frame[0:6],
        src_ip=ip_text(frame[ip + 12 : ip + 16]),
        dst_ip=ip_text(frame[ip + 16 : ip + 20]),
        sport=sport,
        dport=dport,
        ecn=frame[ip + 1] & 3,
        opcode=opcode,
        qp=(qp_hi << 16) | qp_lo,
        psn=(psn_hi << 16) | psn_lo,
        becn=bool(resv8a & 0x40),
        payload_bytes=end - (bth + BTH_BYTES) - ICRC_BYTES,
        frame_bytes=len(frame),
    )


@dataclass(frozen=True, slots=True)
class Feedback:
    """An ICE feedback packet: the data flow it is about and its INT path (first hop first)."""

    switch_id: int
    path_kind: int
    path_tag: int
    flow_src_ip: str
    flow_dst_ip: str
    flow_sport: int
    flow_dport: int
    flow_qp: int
    psn: int
    timestamp_us: int
    hops: tuple[HopSample, ...]


def parse_feedback(
    frame: bytes, *, link_rate_scale: float = 1.0, qdepth_unit_bytes: int = 1024
) -> Feedback:
    """Decode an ICE feedback frame (Ethernet/IPv4/UDP 4792/ice_feedback_t/int_hop_t*).

    ``link_rate_scale`` multiplies the records' link rates (the controller writes the
    topology's rates; a scaled-down fabric drains its ports slower); ``qdepth_unit_bytes``
    turns the records' queue depth in packets into bytes (the endpoints' frame size).
    """
    _, udp = _ip_udp(frame, "feedback")
    (dport,) = struct.unpack_from("!H", frame, udp + 2)
    if dport != FEEDBACK_PORT:
        raise MalformedFrame(f"feedback: UDP destination port {dport}, expected {FEEDBACK_PORT}")
    off = udp + UDP_BYTES
    if len(frame) < off + FEEDBACK_BYTES:
        raise MalformedFrame(
            f"feedback: {len(frame)}-byte frame ends inside the 36-byte feedback header"
        )
    (b0, count, tag, switch_id, src, dst, sport, fdport, qp_word, op_psn, ts) = _FB.unpack_from(
        frame, off
    )
    if b0 >> 4 != 1:
        raise MalformedFrame(f"feedback: version {b0 >> 4}, expected 1")
    off += FEEDBACK_BYTES
    if len(frame) < off + count * HOP_BYTES:
        raise MalformedFrame(
            f"feedback: hop_count {count} needs {count * HOP_BYTES} bytes of records, "
            f"{len(frame) - off} present"
        )
    hops: list[HopSample] = []
    for i in range(count):
        sid, _in_port, eg_port, enq, _deq, tx, ets, mbps = _HOP.unpack_from(
            frame, off + i * HOP_BYTES
        )
        hops.append(
            HopSample(
                switch_id=sid,
                port=eg_port,
                link_bps=mbps * 1e6 * link_rate_scale,
                tx_bytes=tx,
                ts_us=float(ets),
                qdepth_bytes=enq * qdepth_unit_bytes,
            )
        )
    hops.reverse()  # records arrive newest (last hop) first; algorithms want path order
    return Feedback(
        switch_id=switch_id,
        path_kind=(b0 >> 2) & 3,
        path_tag=tag,
        flow_src_ip=ip_text(src),
        flow_dst_ip=ip_text(dst),
        flow_sport=sport,
        flow_dport=fdport,
        flow_qp=qp_word & 0xFFFFFF,
        psn=op_psn & 0xFFFFFF,
        timestamp_us=ts,
        hops=tuple(hops),
    )


def hop_switches(hops: Sequence[HopSample]) -> list[int]:
    """The switch ids of a path record, first hop first."""
    return [h.switch_id for h in hops]
