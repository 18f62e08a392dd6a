"""The one reader of a switch's P4 counters: per-port rx/tx packets and bytes, drops by reason.

``icectl stats`` (:mod:`icefabric.control.stats`), the counter poller (wire losses for
telemetry) and the Prometheus endpoint all read through :func:`read_switch_counters`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from icefabric.control.p4rt import SwitchConnection
from icefabric.p4src import ice_p4 as n


@dataclass(slots=True, frozen=True)
class PortCount:
    """One port's cumulative counters (ice.p4's port_rx_counter / port_tx_counter)."""

    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0


@dataclass(slots=True)
class SwitchCounters:
    """One read of a switch: ``ports`` (port -> PortCount) and ``drops`` (reason -> packets,
    reasons with none left out)."""

    ports: dict[int, PortCount] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)


def read_switch_counters(conn: SwitchConnection, ports: Iterable[int]) -> SwitchCounters:
    """Read ``ports``' rx/tx counters and the drop-reason counter of one switch (3 reads)."""
    rx = {c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_RX_COUNTER)}
    tx = {c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_TX_COUNTER)}
    out = SwitchCounters()
    for p in sorted(set(ports)):
        r, t = rx.get(p), tx.get(p)
        out.ports[p] = PortCount(
            rx_packets=int(r.packet_count) if r is not None else 0,
            rx_bytes=int(r.byte_count) if r is not None else 0,
            tx_packets=int(t.packet_count) if t is not None else 0,
            tx_bytes=int(t.byte_count) if t is not None else 0,
        )
    for c in conn.read_counters(n.COUNTER_DROP_REASON_COUNTER):
        if c.data is not None and c.data.packet_count:
            reason = n.DROP_REASONS.get(c.index or 0, str(c.index))
            out.drops[reason] = int(c.data.packet_count)
    return out
