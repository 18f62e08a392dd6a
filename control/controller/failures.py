"""Failures and restores of links and switches: replan the flows concerned, install, save.

Every path (``icectl link``, a port-down event, the link probes, a switch that died or came back)
replans with the planner, writes the state file, then installs through
:meth:`ChangeInstaller.install` (moved flows first, then groups and routes without the dead
links). When the state file cannot be written the change is rolled back before any switch saw
it (StateWriteError): the file, the controller and the switches keep agreeing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from icefabric.control.controller.statefile import StateFile, StateWriteError
from icefabric.control.topology import Topology, TopologyError

if TYPE_CHECKING:
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.install import ChangeReport
    from icefabric.control.planner.planner import Planner
    from icefabric.topo.spec import TopologySpec


class FailureHandling:
    """Link and switch failures for the Controller that owns it: handed the topology, the
    lock, the failure sets and the event log explicitly, the planner as a callable (a
    takeover replaces it), the state file (a change is rolled back when its save fails) and
    the Controller's install path."""

    def __init__(
        self,
        *,
        spec: TopologySpec,
        topo: Topology,
        lock: threading.RLock,
        failed_switches: set[str],
        probe_down: set[int],
        events: EventLog,
        planner: Callable[[], Planner],
        statefile: StateFile,
        install_change: Callable[[str, float], ChangeReport],
    ) -> None:
        self.spec = spec
        self.topo = topo
        self.lock = lock
        self.failed_switches = failed_switches
        self.probe_down = probe_down
        self.events = events
        self.planner = planner
        self.statefile = statefile
        self.install_change = install_change

    def link_between(self, a: str, b: str) -> int:
        """The directed link id from switch a to switch b (TopologyError if none)."""
        ids = self.topo.links_between(a, b)
        if not ids:
            raise TopologyError(f"no link between {a!r} and {b!r} in topology {self.spec.name!r}")
        return ids[0]

    def _change(self, what: str, mutate: Callable[[], object]) -> ChangeReport:
        """Replan (``mutate``), then save and install; rolled back when the save fails."""
        with self.lock:
            snap = self.statefile.mark()
            t0 = time.perf_counter()
            try:
                mutate()
                return self.install_change(what, time.perf_counter() - t0)
            except StateWriteError:
                self.statefile.rollback(snap)
                raise

    def fail_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b down, replan the flows that crossed it and install the result."""
        return self.fail_link_id(self.link_between(a, b), what=f"link {a}-{b} down")

    def fail_link_id(self, lid: int, *, what: str, by_probes: bool = False) -> ChangeReport:
        """The failure path of one link (either directed id): replan its flows, install
        (``by_probes``: the link probes own it, and restore it when probes come back)."""

        def mutate() -> None:
            if by_probes:
                self.probe_down.add(lid & ~1)
            self.events.record("link_down", what, link=self.topo.link_name(lid))
            self.planner().replan_after_failure(links=[lid])

        return self._change(what, mutate)

    def port_down(self, switch: str, port: int) -> ChangeReport:
        """A port-down event from the data plane: the link on that port failed."""

        def mutate() -> None:
            self.events.record("link_down", f"{switch} port {port} down", switch=switch)
            self.planner().replan_after_failure(ports=[(switch, port)])

        return self._change(f"{switch} port {port} down", mutate)

    def fail_switch(self, switch: str) -> ChangeReport:
        """A switch died: every link of it is down; replan and install."""

        def mutate() -> None:
            self.failed_switches.add(switch)
            self.events.record(
                "switch_failed", f"switch {switch} failed: replanning around it", switch=switch
            )
            self.planner().replan_after_failure(switches=[switch])

        return self._change(f"switch {switch} down", mutate)

    def restore_switch(self, switch: str) -> ChangeReport:
        """A failed switch is back: its links are up again; rebalance every flow and install."""
        ids = [ln.id for ln in self.topo.links if switch in (ln.src, ln.dst)]

        def mutate() -> None:
            self.failed_switches.discard(switch)
            self.events.record(
                "switch_up", f"switch {switch} back: its links in use again", switch=switch
            )
            self.planner().restore(ids)

        return self._change(f"switch {switch} up", mutate)

    def restore_link(self, a: str, b: str) -> ChangeReport:
        """Mark the link a-b up again and rebalance every flow over the larger fabric."""
        return self.restore_link_id(self.link_between(a, b), what=f"link {a}-{b} up")

    def restore_link_id(self, lid: int, *, what: str, by_probes: bool = False) -> ChangeReport:
        """Both directions of one link up again; rebalance every flow and install."""

        def mutate() -> None:
            if by_probes:
                self.probe_down.discard(lid & ~1)
            self.events.record("link_up", what, link=self.topo.link_name(lid))
            self.planner().restore(Topology.both_directions(lid))

        return self._change(what, mutate)
