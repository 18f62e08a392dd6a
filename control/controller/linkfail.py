"""The controller's side of link probing: run the LinkMonitor, turn its verdicts into changes.

A link the probes declare down goes through the same failure path as ``icectl link down``
(:meth:`FailureHandling.fail_link_id`: replan the flows that crossed it, install the moved flows,
then candidate groups and routes); a link the probes took down is restored the same way as
``icectl link up`` once probes come back in both directions. Links marked down by the operator
or by a switch failure are never restored by the probes. Which links the probes took down is
kept in the shared state file, so a backup that takes over restores them when they heal. The work runs on the controller's
worker thread, so the probe thread keeps its rhythm while a change is installed.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from icefabric.control import fabric
from icefabric.control.linkmon import LinkMonitor
from icefabric.control.linkstate import LinkEvent, disabled_status
from icefabric.p4src import ice_p4 as n

if TYPE_CHECKING:
    from icefabric.control.controller.failures import FailureHandling
    from icefabric.control.controller.installer import Installer
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


class LinkProbing:
    """Link probing for the Controller that owns it: runs the LinkMonitor (``monitor``) while
    the Controller is primary, handed the topology, pool, lock, failure sets, the switches
    being resynced and the installer explicitly, the worker's ``post``, whether the Controller
    is active, and the failure path it runs a verdict through."""

    def __init__(
        self,
        *,
        spec: TopologySpec,
        topo: Topology,
        pool: SwitchPool,
        lock: threading.RLock,
        failed_switches: AbstractSet[str],
        probe_down: AbstractSet[int],
        resyncing: AbstractSet[str],
        installer: Installer,
        failures: FailureHandling,
        post: Callable[[Callable[[], None]], None],
        is_active: Callable[[], bool],
        interval_s: float,
        misses: int,
    ) -> None:
        self.spec = spec
        self.topo = topo
        self.pool = pool
        self.lock = lock
        self.failed_switches = failed_switches
        self.probe_down = probe_down
        self.resyncing = resyncing
        self.installer = installer
        self.failures = failures
        self.post = post
        self.is_active = is_active
        self.interval_s = interval_s  # 0: no link probing
        self.misses = misses
        self.monitor: LinkMonitor | None = None  # runs while the Controller is primary

    def start(self) -> None:
        """Probe every fabric link (primary only; a probe interval of 0 disables it)."""
        if self.interval_s <= 0 or self.monitor is not None:
            return
        self.monitor = LinkMonitor(
            self.topo,
            send=lambda sw, pkt: self.pool[sw].packet_out(pkt),
            on_change=self._on_link_change,
            interval_s=self.interval_s,
            misses=self.misses,
            reachable=self._probe_reachable,
            rx_packets=self._port_rx_packets,
            macs={s.name: fabric.switch_mac(s.switch_id) for s in self.spec.switches},
            initially_down=self.probe_down,
        )
        self.monitor.start()

    def stop(self) -> None:
        """Stop probing and forget the monitor (this controller stopped being primary)."""
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None

    def _probe_reachable(self, switch: str) -> bool:
        """Whether probes to/from ``switch`` mean anything now (stream up, primary, synced)."""
        conn = self.pool[switch]
        return conn.is_connected and conn.is_primary and switch not in self.resyncing

    def _port_rx_packets(self, switch: str, port: int) -> int | None:
        """Packets ``switch`` has received on ``port`` (ice.p4's port_rx_counter), for the link
        monitor's traffic evidence; None when unreadable."""
        conn = self.pool[switch]
        if not conn.is_connected:
            return None
        for cell in conn.read_counters(n.COUNTER_PORT_RX_COUNTER, index=port):
            if cell.data is not None:
                return int(cell.data.packet_count)
        return None

    def _on_link_change(self, ev: LinkEvent) -> None:
        """From the link monitor's thread: run the failure/restore path on the worker."""
        self.post(functools.partial(self.apply, ev))

    def apply(self, ev: LinkEvent) -> None:
        """Run one verdict of the monitor through the failure or restore path (the worker)."""
        mon = self.monitor
        if mon is None or not self.is_active():
            return
        pair = ev.lid & ~1
        try:
            with self.lock:
                if ev.kind == "down" and self.topo.failed[pair]:
                    mon.complete(ev, note="already marked down (operator or switch failure)")
                    return
                if ev.kind == "up" and (
                    pair not in self.probe_down
                    or {ev.a, ev.b} & self.failed_switches
                    or not self.topo.failed[pair]
                ):
                    mon.complete(ev, note="not taken down by the probes: left as it is")
                    return
                # The state file (saved before the switches change) says which links the
                # probes own, so a standby restores them too.
                if ev.kind == "down":
                    rep = self.failures.fail_link_id(
                        ev.lid, what=f"link {ev.link} down (probes lost)", by_probes=True
                    )
                else:
                    rep = self.failures.restore_link_id(
                        ev.lid, what=f"link {ev.link} up (probes back)", by_probes=True
                    )
                flows_at, done_at = self.installer.marks
            mon.complete(ev, rep, paths_installed_at=flows_at, done_at=done_at)
        except Exception as exc:
            mon.complete(ev, note=f"{type(exc).__name__}: {exc}")
            raise

    def status(self) -> dict[str, Any]:
        """Link probing for icectl links / status: per link state, last probe, events."""
        mon = self.monitor
        out = disabled_status() if mon is None else mon.status()
        with self.lock:
            for row in out["links"]:
                row["failed"] = bool(self.topo.failed[self.topo.link_at(row["a"], row["a_port"])])
        return out
