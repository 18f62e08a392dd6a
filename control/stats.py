"""Counters of one switch read over P4Runtime: ports, path tags, drops by reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icefabric.control.p4rt import SwitchConnection
from icefabric.p4src import ice_p4 as n


def read_stats(conn: SwitchConnection, ports: Mapping[int, str]) -> dict[str, Any]:
    """Per port (of ``ports``: number -> kind) rx/tx, per tag packets, drops by reason."""
    rx = {
        c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_RX_COUNTER) if c.index in ports
    }
    tx = {
        c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_TX_COUNTER) if c.index in ports
    }
    drops = [
        {"reason": n.DROP_REASONS.get(c.index or 0, str(c.index)), "packets": c.data.packet_count}
        for c in conn.read_counters(n.COUNTER_DROP_REASON_COUNTER)
        if c.data is not None and c.data.packet_count
    ]
    tags = []
    for d in conn.read_direct_counters(n.TABLE_TAG_FORWARD):
        if d.data is not None and d.data.packet_count:
            tag = d.table_entry.match.get("path_tag")
            tags.append(
                {"tag": _match_int(tag), "packets": d.data.packet_count, "bytes": d.data.byte_count}
            )
    tags.sort(key=lambda t: t["tag"])

    def pkts(m: Mapping[int | None, Any], p: int, attr: str) -> int:
        d = m.get(p)
        return int(getattr(d, attr)) if d is not None else 0

    return {
        "ports": [
            {
                "port": p,
                "kind": kind,
                "rx_packets": pkts(rx, p, "packet_count"),
                "rx_bytes": pkts(rx, p, "byte_count"),
                "tx_packets": pkts(tx, p, "packet_count"),
                "tx_bytes": pkts(tx, p, "byte_count"),
            }
            for p, kind in sorted(ports.items())
        ],
        "tags": tags,
        "drops": drops,
    }


def _match_int(value: Any) -> int:
    if isinstance(value, int):
        return value
    inner = getattr(value, "value", value)
    if isinstance(inner, bytes):
        return int.from_bytes(inner, "big")
    return int(inner)
