"""Telemetry reports from the last-hop switches (packet-ins), decoded and kept in a ring buffer."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from icefabric.control import ice_names as n

log = logging.getLogger(__name__)

REASONS = {1: "sampled", 2: "queue-alarm", 3: "sampled+queue-alarm"}


def decode_report(payload: bytes, metadata: Mapping[str, int]) -> dict[str, Any]:
    """One telemetry report packet-in as plain data (ValueError when it is not one)."""
    from icefabric.traffic.packets import decode_report_payload

    reason = int(metadata.get("reason", n.PUNT_REASON_TELEMETRY))
    if reason != n.PUNT_REASON_TELEMETRY:
        raise ValueError(f"packet-in reason {reason} is not a telemetry report")
    rep = decode_report_payload(payload)
    hops = [
        {
            "switch_id": int(h.switch_id),
            "ingress_port": int(h.ingress_port),
            "egress_port": int(h.egress_port),
            "qdepth": int(h.enq_qdepth),
            "deq_qdepth": int(h.deq_qdepth),
            "tx_bytes": int(h.tx_bytes),
            "egress_ts": int(h.egress_ts),
            "link_rate_mbps": int(h.link_rate_mbps),
        }
        for h in rep.hops
    ]
    return {
        "reason": REASONS.get(int(rep.reason), str(int(rep.reason))),
        "tag": int(rep.path_tag),
        "switch_id": int(rep.switch_id),
        "src_ip": str(rep.flow_src_addr),
        "dst_ip": str(rep.flow_dst_addr),
        "udp_sport": int(rep.flow_src_port),
        "dst_qp": int(rep.flow_dst_qp),
        "psn": int(rep.bth_psn),
        "timestamp_us": int(rep.timestamp),
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
        flow_of: Callable[[str, str, int, int], str | None] | None = None,
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
            flow = self._flow_of(rep["src_ip"], rep["dst_ip"], rep["udp_sport"], rep["dst_qp"])
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
