"""Scapy layers for ICE's own packet formats, and the constants of ``p4src/common/defines.p4``.

Layers (byte layouts in ``p4src/README.md``):

* :class:`IceShim` — the path shim after Ethernet (EtherType ``ETHERTYPE_ICE``), followed by its
  INT hop records (``hops``) and the original IPv4 packet.
* :class:`IntHop` — one 36-byte INT hop record.
* :class:`IceFeedback` — the body of the feedback packet a last hop returns to the sender
  (IPv4 / UDP port ``UDP_PORT_ICE_FEEDBACK``), followed by its records.
* :class:`TelemetryReport` — the body of a telemetry packet-in, followed by its records.
* :class:`IcePacketIn` / :class:`IcePacketOut` — the CPU-port headers as the switch emits /
  expects them on its CPU port (a P4Runtime server strips and adds them).

Importing this module binds the layers, so ``Ether(raw_bytes)`` decodes shimmed frames and
``IP(raw_bytes)`` decodes feedback packets.  Scapy's own RoCEv2 ``BTH`` is bound to UDP 4791.
"""

from __future__ import annotations

from typing import Any

from scapy.contrib.roce import BTH
from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    IntField,
    IPField,
    LongField,
    PacketListField,
    ShortField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

# ---- the constants of p4src/ice.p4, generated from it (icefabric.p4src.ice_p4) --------------------
from icefabric.p4src.ice_p4 import (  # re-exported: packets.X is the same object
    CPU_PORT,
    DROP_REASON_BAD_CHECKSUM,
    DROP_REASON_BAD_LENGTH,
    DROP_REASON_HOP_LIMIT,
    DROP_REASON_NO_ROUTE,
    DROP_REASON_NONE,
    DROP_REASON_PARSER_ERROR,
    DROP_REASON_ROUTE_DROP,
    DROP_REASON_SHIM_FROM_HOST,
    DROP_REASON_TRUNCATED,
    DROP_REASON_TTL_EXPIRED,
    DROP_REASON_UNKNOWN_TAG,
    DROP_REASON_UNSUPPORTED,
    DROP_REASONS,
    ETHERTYPE_ARP,
    ETHERTYPE_ICE,
    ETHERTYPE_IPV4,
    ETHERTYPE_LLDP,
    ICE_DEFAULT_HOP_LIMIT,
    ICE_FEEDBACK_BYTES,
    ICE_FEEDBACK_DSCP,
    ICE_SESSION_FEEDBACK,
    ICE_SESSION_FEEDBACK_REPORT,
    ICE_SESSION_REPORT,
    ICE_SHIM_BYTES,
    ICE_VERSION,
    INT_HOP_BYTES,
    INT_MAX_HOPS,
    LB_MODE_ECMP,
    LB_MODE_PLANNED_ECMP,
    LB_MODE_PLANNED_FLOWLET,
    LB_MODE_SPRAY,
    PACKET_IN_BYTES,
    PACKET_OUT_BYTES,
    PATH_BUCKETS,
    PATH_KIND_ECMP,
    PATH_KIND_FLOWLET,
    PATH_KIND_PLANNED,
    PATH_KIND_SPRAY,
    PORT_KIND_FABRIC,
    PORT_KIND_HOST,
    PORT_KIND_UNSET,
    PRIORITY_DATA,
    PUNT_REASON_ARP,
    PUNT_REASON_LINK_PROBE,
    PUNT_REASON_ROUTE,
    PUNT_REASON_TELEMETRY,
    REPORT_REASON_QUEUE_ALARM,
    REPORT_REASON_SAMPLED,
    SWITCH_ROLE_LEAF,
    SWITCH_ROLE_SPINE,
    SWITCH_ROLE_UNSET,
    TELEMETRY_REPORT_BYTES,
    UDP_PORT_ICE_FEEDBACK,
    UDP_PORT_ROCEV2,
)

_PATH_KINDS = {
    PATH_KIND_PLANNED: "planned",
    PATH_KIND_FLOWLET: "flowlet",
    PATH_KIND_ECMP: "ecmp",
    PATH_KIND_SPRAY: "spray",
}
_PUNT_REASONS = {
    PUNT_REASON_ARP: "arp",
    PUNT_REASON_TELEMETRY: "telemetry",
    PUNT_REASON_ROUTE: "route",
    PUNT_REASON_LINK_PROBE: "link_probe",
}


class IntHop(Packet):
    """One INT hop record (36 bytes), as pushed by every hop of a shimmed packet."""

    name = "IntHop"
    fields_desc = [
        IntField("switch_id", 0),
        ShortField("ingress_port", 0),
        ShortField("egress_port", 0),
        IntField("enq_qdepth", 0),
        IntField("deq_qdepth", 0),
        LongField("tx_bytes", 0),
        LongField("egress_ts", 0),
        IntField("link_rate_mbps", 0),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        """Records carry no payload: the rest belongs to the next record or layer."""
        return b"", s


def _hop_count(name: str) -> Any:
    def count(pkt: Packet) -> int:
        value = getattr(pkt, name)
        return int(value) if value is not None else 0

    return count


class IceShim(Packet):
    """The ICE path shim (8 bytes) and the INT hop records that follow it, newest first."""

    name = "IceShim"
    fields_desc = [
        BitField("version", ICE_VERSION, 4),
        BitEnumField("path_kind", PATH_KIND_PLANNED, 2, _PATH_KINDS),
        BitField("int_enabled", 0, 1),
        BitField("reserved0", 0, 1),
        ByteField("hop_limit", ICE_DEFAULT_HOP_LIMIT),
        ByteField("int_hop_count", None),
        ByteField("reserved1", 0),
        ShortField("path_tag", 0),
        XShortField("orig_ether_type", ETHERTYPE_IPV4),
        PacketListField("hops", [], IntHop, count_from=_hop_count("int_hop_count")),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        """Fill int_hop_count from the records when it was left unset."""
        if self.int_hop_count is None:
            pkt = pkt[:2] + bytes([len(self.hops)]) + pkt[3:]
        return pkt + pay

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """The packet inside is whatever orig_ether_type says (IPv4 in practice)."""
        if self.orig_ether_type == ETHERTYPE_IPV4:
            return IP
        return Raw


def _flow_record_fields() -> list[Any]:
    """Fields after the first byte shared by feedback and report: flow key, records."""
    return [
        ByteField("hop_count", None),
        ShortField("path_tag", 0),
        IntField("switch_id", 0),
        IPField("flow_src_addr", "0.0.0.0"),
        IPField("flow_dst_addr", "0.0.0.0"),
        ShortField("flow_src_port", 0),
        ShortField("flow_dst_port", UDP_PORT_ROCEV2),
        ByteField("reserved1", 0),
        BitField("flow_dst_qp", 0, 24),
        ByteField("bth_opcode", 0),
        BitField("bth_psn", 0, 24),
        LongField("timestamp", 0),
        PacketListField("hops", [], IntHop, count_from=_hop_count("hop_count")),
    ]


def _fill_hop_count(p: Packet, pkt: bytes) -> bytes:
    """Write the number of hop records into byte 1 when hop_count was left unset."""
    if p.hop_count is None:
        pkt = pkt[:1] + bytes([len(p.hops)]) + pkt[2:]
    return pkt


class IceFeedback(Packet):
    """Feedback body (36 bytes) followed by ``hop_count`` INT records, last hop first."""

    name = "IceFeedback"
    fields_desc = [
        BitField("version", ICE_VERSION, 4),
        BitEnumField("path_kind", PATH_KIND_PLANNED, 2, _PATH_KINDS),
        BitField("reserved0", 0, 2),
        *_flow_record_fields(),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        """Fill hop_count from the records when it was left unset."""
        return _fill_hop_count(self, pkt) + pay


class TelemetryReport(Packet):
    """Telemetry report body (36 bytes) followed by ``hop_count`` INT records."""

    name = "TelemetryReport"
    fields_desc = [
        BitField("version", ICE_VERSION, 4),
        BitField("reason", REPORT_REASON_SAMPLED, 4),
        *_flow_record_fields(),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        """Fill hop_count from the records when it was left unset."""
        return _fill_hop_count(self, pkt) + pay


class IcePacketIn(Packet):
    """The packet_in controller header (5 bytes) as the switch sends it to its CPU port."""

    name = "IcePacketIn"
    fields_desc = [
        BitField("ingress_port", 0, 9),
        BitField("pad0", 0, 7),
        BitField("egress_port", 0, 9),
        BitField("pad1", 0, 7),
        ByteEnumField("reason", 0, _PUNT_REASONS),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """Telemetry punts carry a report, every other punt the original frame."""
        if self.reason == PUNT_REASON_TELEMETRY:
            return TelemetryReport
        return Ether


class IcePacketOut(Packet):
    """The packet_out controller header (2 bytes) the switch expects on its CPU port."""

    name = "IcePacketOut"
    fields_desc = [
        BitField("egress_port", 0, 9),
        BitField("pad0", 0, 7),
    ]


bind_layers(Ether, IceShim, type=ETHERTYPE_ICE)
bind_layers(UDP, IceFeedback, dport=UDP_PORT_ICE_FEEDBACK)
bind_layers(IcePacketOut, Ether)


def rocev2_packet(
    *,
    src_mac: str,
    dst_mac: str,
    src_ip: str,
    dst_ip: str,
    src_port: int,
    dst_qp: int,
    psn: int = 0,
    opcode: int = 4,
    payload_len: int = 64,
    ecn: int = 2,
    ip_id: int = 1,
    ttl: int = 64,
) -> Packet:
    """A RoCEv2 packet (default: RC SEND-only, ECT(0)) as a host NIC would send it."""
    if not 0 <= dst_qp < 1 << 24:
        raise ValueError(f"rocev2_packet: dst_qp {dst_qp} is not a 24-bit QP number")
    if not 0 <= psn < 1 << 24:
        raise ValueError(f"rocev2_packet: psn {psn} is not a 24-bit PSN")
    payload = bytes((i * 7 + psn) & 0xFF for i in range(payload_len))
    return (
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, tos=ecn & 0x3, id=ip_id, ttl=ttl, flags="DF")
        / UDP(sport=src_port, dport=UDP_PORT_ROCEV2, chksum=0)
        / BTH(opcode=opcode, dqpn=dst_qp, psn=psn)
        / Raw(payload)
    )


def decode_feedback(data: bytes) -> IceFeedback:
    """Decode an Ethernet frame holding an ICE feedback packet; ValueError when it is not one."""
    frame = Ether(data)
    if IceFeedback not in frame:
        raise ValueError(
            f"decode_feedback: {len(data)}-byte frame is not an ICE feedback packet "
            f"(expected Ethernet/IPv4/UDP dport {UDP_PORT_ICE_FEEDBACK}): {frame.summary()}"
        )
    feedback: IceFeedback = frame[IceFeedback]
    return feedback


def decode_packet_in(data: bytes) -> IcePacketIn:
    """Decode bytes that left the switch on its CPU port (packet_in header first)."""
    if len(data) < PACKET_IN_BYTES:
        raise ValueError(
            f"decode_packet_in: {len(data)} bytes is shorter than the "
            f"{PACKET_IN_BYTES}-byte packet_in header"
        )
    return IcePacketIn(data)


def decode_report_payload(payload: bytes) -> TelemetryReport:
    """Decode a telemetry report from a P4Runtime PacketIn payload (packet_in header removed)."""
    if len(payload) < TELEMETRY_REPORT_BYTES:
        raise ValueError(
            f"decode_report_payload: {len(payload)} bytes is shorter than the "
            f"{TELEMETRY_REPORT_BYTES}-byte telemetry report"
        )
    return TelemetryReport(payload)


__all__ = [
    "BTH",
    "CPU_PORT",
    "DROP_REASONS",
    "DROP_REASON_BAD_CHECKSUM",
    "DROP_REASON_BAD_LENGTH",
    "DROP_REASON_HOP_LIMIT",
    "DROP_REASON_NONE",
    "DROP_REASON_NO_ROUTE",
    "DROP_REASON_PARSER_ERROR",
    "DROP_REASON_ROUTE_DROP",
    "DROP_REASON_SHIM_FROM_HOST",
    "DROP_REASON_TRUNCATED",
    "DROP_REASON_TTL_EXPIRED",
    "DROP_REASON_UNKNOWN_TAG",
    "DROP_REASON_UNSUPPORTED",
    "ETHERTYPE_ARP",
    "ETHERTYPE_ICE",
    "ETHERTYPE_IPV4",
    "ETHERTYPE_LLDP",
    "ICE_DEFAULT_HOP_LIMIT",
    "ICE_FEEDBACK_BYTES",
    "ICE_FEEDBACK_DSCP",
    "ICE_SESSION_FEEDBACK",
    "ICE_SESSION_FEEDBACK_REPORT",
    "ICE_SESSION_REPORT",
    "ICE_SHIM_BYTES",
    "ICE_VERSION",
    "INT_HOP_BYTES",
    "INT_MAX_HOPS",
    "LB_MODE_ECMP",
    "LB_MODE_PLANNED_ECMP",
    "LB_MODE_PLANNED_FLOWLET",
    "LB_MODE_SPRAY",
    "PACKET_IN_BYTES",
    "PACKET_OUT_BYTES",
    "PATH_BUCKETS",
    "PATH_KIND_ECMP",
    "PATH_KIND_FLOWLET",
    "PATH_KIND_PLANNED",
    "PATH_KIND_SPRAY",
    "PORT_KIND_FABRIC",
    "PORT_KIND_HOST",
    "PORT_KIND_UNSET",
    "PRIORITY_DATA",
    "PUNT_REASON_ARP",
    "PUNT_REASON_LINK_PROBE",
    "PUNT_REASON_ROUTE",
    "PUNT_REASON_TELEMETRY",
    "REPORT_REASON_QUEUE_ALARM",
    "REPORT_REASON_SAMPLED",
    "SWITCH_ROLE_LEAF",
    "SWITCH_ROLE_SPINE",
    "SWITCH_ROLE_UNSET",
    "TELEMETRY_REPORT_BYTES",
    "UDP_PORT_ICE_FEEDBACK",
    "UDP_PORT_ROCEV2",
    "IceFeedback",
    "IcePacketIn",
    "IcePacketOut",
    "IceShim",
    "IntHop",
    "TelemetryReport",
    "decode_feedback",
    "decode_packet_in",
    "decode_report_payload",
    "rocev2_packet",
]
