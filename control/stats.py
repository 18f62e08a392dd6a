"""Counters of one switch read over P4Runtime: ports, path tags, drops by reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from icefabric.control.p4rt import SwitchConnection
from icefabric.control.telemetry.counters import read_switch_counters
from icefabric.p4src import ice_p4 as n


def read_stats(conn: SwitchConnection, ports: Mapping[int, str]) -> dict[str, Any]:
    """Per port (of ``ports``: number -> kind) rx/tx, per tag packets, drops by reason."""
    counted = read_switch_counters(conn, ports)
    drops = [{"reason": r, "packets": v} for r, v in counted.drops.items()]
    tags = []
    for d in conn.read_direct_counters(n.TABLE_TAG_FORWARD):
        if d.data is not None and d.data.packet_count:
            tag = d.table_entry.match.get("path_tag")
            tags.append(
                {"tag": _match_int(tag), "packets": d.data.packet_count, "bytes": d.data.byte_count}
            )
    tags.sort(key=lambda t: t["tag"])
    return {
        "ports": [
            {"port": p, "kind": kind, **asdict(counted.ports[p])}
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
