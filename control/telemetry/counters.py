"""The one reader of a switch's P4 counters: per-port rx/tx packets and bytes, ECN marks and
CNPs, drops by reason.

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
    ecn_marked: int = 0  # packets this switch marked CE on their way out of the port
    cnp_rx: int = 0  # DCQCN CNPs that arrived on the port


@dataclass(slots=True)
class SwitchCounters:
    """One read of a switch: ``ports`` (port -> PortCount) and ``drops`` (reason -> packets,
    reasons with none left out)."""

    ports: dict[int, PortCount] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)


def read_switch_counters(conn: SwitchConnection, ports: Iterable[int]) -> SwitchCounters:
    """Read ``ports``' rx/tx, ECN-mark and CNP counters and the drop-reason counter of one
    switch (5 reads; a program without the ECN-mark or CNP counter reads them as 0)."""
    rx = {c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_RX_COUNTER)}
    tx = {c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_TX_COUNTER)}
    marked = _packets(conn, n.COUNTER_ECN_MARKED_COUNTER)
    cnps = _packets(conn, n.COUNTER_CNP_RX_COUNTER)
    out = SwitchCounters()
    for p in sorted(set(ports)):
        r, t = rx.get(p), tx.get(p)
        out.ports[p] = PortCount(
            rx_packets=int(r.packet_count) if r is not None else 0,
            rx_bytes=int(r.byte_count) if r is not None else 0,
            tx_packets=int(t.packet_count) if t is not None else 0,
            tx_bytes=int(t.byte_count) if t is not None else 0,
            ecn_marked=marked.get(p, 0),
            cnp_rx=cnps.get(p, 0),
        )
    for c in conn.read_counters(n.COUNTER_DROP_REASON_COUNTER):
        if c.data is not None and c.data.packet_count:
            reason = n.DROP_REASONS.get(c.index or 0, str(c.index))
            out.drops[reason] = int(c.data.packet_count)
    return out


def _packets(conn: SwitchConnection, counter: str) -> dict[int, int]:
    """{index: packets} of a packet counter; {} when the program has no such counter (the
    Tofino port may lack one the v1model program has)."""
    if not conn.has_p4info or counter not in conn.p4info.counters:
        return {}
    return {
        c.index: int(c.data.packet_count)
        for c in conn.read_counters(counter)
        if c.index is not None and c.data is not None
    }
