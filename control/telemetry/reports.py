"""Telemetry reports from the last-hop switches (packet-ins), decoded and kept in a ring buffer."""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from icefabric.control.flowkey import FlowKey
from icefabric.p4src import ice_p4 as n
from icefabric.p4src import layout

log = logging.getLogger(__name__)

REASONS = {1: "sampled", 2: "queue-alarm", 3: "sampled+queue-alarm"}


def decode_report(payload: bytes, metadata: Mapping[str, int]) -> dict[str, Any]:
    """One telemetry report packet-in as plain data (ValueError when it is not one).

    Decoded by ice.p4's own header layouts (icefabric.p4src.layout): telemetry_report_t, then
    hop_count int_hop_t records, the last hop's first."""
    reason = int(metadata.get("reason", n.PUNT_REASON_TELEMETRY))
    if reason != n.PUNT_REASON_TELEMETRY:
        raise ValueError(f"packet-in reason {reason} is not a telemetry report")
    rep = layout.unpack("telemetry_report_t", payload)
    count = rep["hop_count"]
    if count > n.INT_MAX_HOPS:
        raise ValueError(f"telemetry report: {count} hop records, at most {n.INT_MAX_HOPS}")
    hops = [
        {
            "switch_id": h["switch_id"],
            "ingress_port": h["ingress_port"],
            "egress_port": h["egress_port"],
            "qdepth": h["enq_qdepth"],
            "deq_qdepth": h["deq_qdepth"],
            "tx_bytes": h["tx_bytes"],
            "egress_ts": h["egress_ts"],
            "link_rate_mbps": h["link_rate_mbps"],
        }
        for h in layout.unpack_records(payload, n.TELEMETRY_REPORT_BYTES, count)
    ]
    return {
        "reason": REASONS.get(rep["reason"], str(rep["reason"])),
        "tag": rep["path_tag"],
        "switch_id": rep["switch_id"],
        "src_ip": str(ipaddress.IPv4Address(rep["flow_src_addr"])),
        "dst_ip": str(ipaddress.IPv4Address(rep["flow_dst_addr"])),
        "udp_sport": rep["flow_src_port"],
        "dst_qp": rep["flow_dst_qp"],
        "psn": rep["bth_psn"],
        "timestamp_us": rep["timestamp"],
        "ingress_port": int(metadata.get("ingress_port", 0)),
        "host_port": int(metadata.get("egress_port", 0)),
        "hops": hops,
    }


class ReportLog:
    """The last ``size`` telemetry reports, thread-safe; ``flow_of`` names the flow of a key."""

    def __init__(
        self,
        size: int = 1000,
        *,
        flow_of: Callable[[FlowKey], str | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._buf: deque[dict[str, Any]] = deque(maxlen=size)
        self._lock = threading.Lock()
        self._flow_of = flow_of
        self._clock = clock
        self.received = 0
        self.undecodable = 0

    def add(
        self, switch: str, payload: bytes, metadata: Mapping[str, int]
    ) -> dict[str, Any] | None:
        """Decode and keep one report; None (and counted) when it cannot be decoded."""
        try:
            rep = decode_report(payload, metadata)
        except Exception as exc:  # scapy raises many kinds on garbage
            with self._lock:
                self.undecodable += 1
            log.debug("%s: undecodable report (%d bytes): %s", switch, len(payload), exc)
            return None
        rep["switch"] = switch
        rep["time"] = self._clock()
        flow = None
        if self._flow_of is not None:
            flow = self._flow_of(
                FlowKey(
                    src_ip=rep["src_ip"],
                    dst_ip=rep["dst_ip"],
                    udp_sport=rep["udp_sport"],
                    dst_qp=rep["dst_qp"],
                )
            )
        rep["flow"] = (
            flow or f"{rep['src_ip']}:{rep['udp_sport']}->{rep['dst_ip']} qp {rep['dst_qp']}"
        )
        with self._lock:
            self._buf.append(rep)
            self.received += 1
        return rep

    def recent(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The newest reports, oldest first (all when limit is None)."""
        with self._lock:
            items = list(self._buf)
        return items if limit is None or limit <= 0 else items[-limit:]
