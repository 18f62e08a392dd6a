"""Reads the switches' port and drop counters every interval into the TelemetryStore (wire
losses per link, drops by reason per switch), while the controller is primary."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from icefabric.control.p4rt import SwitchConnection, SwitchPool
from icefabric.control.telemetry.store import PollResult, TelemetryStore
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n

log = logging.getLogger(__name__)


def switch_ports(topo: Topology) -> dict[str, set[int]]:
    """Every switch's ports that carry a link of the topology."""
    switches = {s.name for s in topo.spec.switches}
    out: dict[str, set[int]] = {name: set() for name in switches}
    for ln in topo.links:
        if ln.src in switches:
            out[ln.src].add(ln.src_port)
        if ln.dst in switches:
            out[ln.dst].add(ln.dst_port)
    return out


def read_counters(conn: SwitchConnection, ports: set[int]) -> PollResult:
    """One switch's rx/tx packets of ``ports`` and its drops by reason."""
    res = PollResult()
    rx = {c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_RX_COUNTER)}
    tx = {c.index: c.data for c in conn.read_counters(n.COUNTER_PORT_TX_COUNTER)}
    for p in ports:
        r, t = rx.get(p), tx.get(p)
        res.ports[p] = (
            int(r.packet_count) if r is not None else 0,
            int(t.packet_count) if t is not None else 0,
        )
    for c in conn.read_counters(n.COUNTER_DROP_REASON_COUNTER):
        if c.data is not None and c.data.packet_count:
            reason = n.DROP_REASONS.get(c.index or 0, str(c.index))
            res.drops[reason] = int(c.data.packet_count)
    return res


class CounterPoller:
    """A thread polling every connected switch's counters every ``interval_s`` seconds."""

    def __init__(
        self,
        pool: SwitchPool,
        store: TelemetryStore,
        ports: Mapping[str, set[int]],
        *,
        interval_s: float,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self.pool = pool
        self.store = store
        self.ports = {k: set(v) for k, v in ports.items()}
        self.interval_s = interval_s
        self._enabled = enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    def start(self) -> None:
        """Start polling (nothing when the interval is 0)."""
        if self.interval_s <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="icectl-counters", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self._enabled():
                try:
                    self.poll_once()
                except Exception:  # a failed poll is retried next interval
                    self.errors += 1
                    log.exception("counter poll failed")

    def poll_once(self) -> None:
        """Read every connected switch once and hand the counters to the store."""
        live = [name for name, c in self.pool.items() if c.is_connected]
        results = self.pool.run_all(
            lambda c: read_counters(c, self.ports.get(c.name, set())),
            names=live,
            operation="counters",
            raise_errors=False,
        )
        got = results
        self.store.add_counters(
            {k: v.ports for k, v in got.items()}, {k: v.drops for k, v in got.items()}
        )
