"""Failures and restores of links and switches: replan the flows concerned, install, save.

Every path (``icectl link``, a port-down event, the link probes, a switch that died or came back)
replans with the planner, installs through :meth:`DesiredState._install_change` (moved flows
first, then groups and routes without the dead links) and writes the state file.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from icefabric.control.topology import TopologyError

if TYPE_CHECKING:
    from icefabric.control.install import ChangeReport
    from icefabric.control.planner.planner import Planner
    from icefabric.control.topology import Topology
    from icefabric.topo.spec import TopologySpec


class FailureHandling:
    """Link and switch failures for the Controller (mixed in; it owns the state)."""

    spec: TopologySpec
    topo: Topology
    planner: Planner
    lock: threading.RLock
    failed_switches: set[str]

    if TYPE_CHECKING:  # the Controller's install path and state file

        def _install_change(self, what: str, plan_s: float) -> ChangeReport: ...

        def _save_state(self) -> None: ...

    def link_between(self, a: str, b: str) -> int:
        """The directed link id from switch a to switch b (TopologyError if none)."""
        ids = self.topo.links_between(a, b)
        if not ids:
            raise TopologyError(f"no link between {a!r} and {b!r} in topology {self.spec.name!r}")
        return ids[0]

    def fail_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b down, replan the flows that crossed it and install the result."""
        return self.fail_link_id(self.link_between(a, b), what=f"link {a}-{b} down")

    def fail_link_id(self, lid: int, *, what: str) -> ChangeReport:
        """The failure path of one link (either directed id): replan its flows, install."""
        with self.lock:
            t0 = time.perf_counter()
            self.planner.replan_after_failure(links=[lid])
            rep = self._install_change(what, time.perf_counter() - t0)
            self._save_state()
            return rep

    def port_down(self, switch: str, port: int) -> ChangeReport:
        """A port-down event from the data plane: the link on that port failed."""
        with self.lock:
            t0 = time.perf_counter()
            self.planner.replan_after_failure(ports=[(switch, port)])
            rep = self._install_change(f"{switch} port {port} down", time.perf_counter() - t0)
            self._save_state()
            return rep

    def fail_switch(self, switch: str) -> ChangeReport:
        """A switch died: every link of it is down; replan and install."""
        with self.lock:
            t0 = time.perf_counter()
            self.failed_switches.add(switch)
            self.planner.replan_after_failure(switches=[switch])
            rep = self._install_change(f"switch {switch} down", time.perf_counter() - t0)
            self._save_state()
            return rep

    def restore_switch(self, switch: str) -> ChangeReport:
        """A failed switch is back: its links are up again; rebalance every flow and install."""
        ids = [ln.id for ln in self.topo.links if switch in (ln.src, ln.dst)]
        with self.lock:
            t0 = time.perf_counter()
            self.failed_switches.discard(switch)
            self.planner.restore(ids)
            rep = self._install_change(f"switch {switch} up", time.perf_counter() - t0)
            self._save_state()
            return rep

    def restore_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b up again and rebalance every flow over the larger fabric."""
        return self.restore_link_id(self.link_between(a, b), what=f"link {a}-{b} up")

    def restore_link_id(self, lid: int, *, what: str) -> ChangeReport:
        """Both directions of one link up again; rebalance every flow and install."""
        with self.lock:
            t0 = time.perf_counter()
            self.planner.restore([lid & ~1, lid | 1])
            rep = self._install_change(what, time.perf_counter() - t0)
            self._save_state()
            return rep
