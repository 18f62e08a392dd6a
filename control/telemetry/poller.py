"""Reads the switches' port and drop counters every interval into the TelemetryStore (wire
losses per link, drops by reason per switch), while the controller is primary."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from icefabric.control.p4rt import SwitchPool
from icefabric.control.telemetry.counters import read_switch_counters
from icefabric.control.telemetry.store import TelemetryStore
from icefabric.control.topology import Topology

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
            lambda c: read_switch_counters(c, self.ports.get(c.name, set())),
            names=live,
            operation="counters",
            raise_errors=False,
        )
        self.store.add_counters(
            {
                sw: {p: (c.rx_packets, c.tx_packets) for p, c in got.ports.items()}
                for sw, got in results.items()
            },
            {sw: got.drops for sw, got in results.items()},
        )
