"""One change installed: after the planner changed, the state first, the caps the change
lowers next (make-before-break: :meth:`AgentHub.lower_first`), then the moved flows, then the
rest of base forwarding; recorded in the history and the event log, the other caps after.

:class:`ChangeInstaller` is the install path every change takes (a job added or removed, a
link or switch failed or back): handed the shared state, the installer, the agent hub, the
event log and the history explicitly, the planner and the desired state as callables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from icefabric.control.controller.installer import FLOW_TABLES
from icefabric.control.install import ChangeReport

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.controller.installer import Installer
    from icefabric.control.controller.statefile import StateFile
    from icefabric.control.p4rt import Entity
    from icefabric.control.planner.plan import Plan
    from icefabric.control.planner.planner import Planner

log = logging.getLogger(__name__)


class ChangeInstaller:
    """The install path of every change of the Controller that owns it."""

    def __init__(
        self,
        *,
        statefile: StateFile,
        installer: Installer,
        agents: AgentHub,
        events: EventLog,
        history: list[ChangeReport],
        planner: Callable[[], Planner],
        flow_entries: Callable[[Plan], dict[str, list[Entity]]],
        desired: Callable[[Plan], dict[str, list[Entity]]],
    ) -> None:
        self.statefile = statefile
        self.installer = installer
        self.agents = agents
        self.events = events
        self.history = history
        self.planner = planner
        self.flow_entries = flow_entries
        self.desired = desired

    def install(self, what: str, plan_s: float) -> ChangeReport:
        """After the planner changed: the state written first (StateWriteError, nothing
        written to a switch, when it cannot be), then the caps that go down pushed to the
        agents, then the planned flows, then the rest of base forwarding, then every cap."""
        self.statefile.save()  # before any switch sees the change: the file never lags behind
        try:  # make-before-break: the caps that go down reach the agents before the writes
            self.agents.lower_first(what)
        except Exception:  # the change goes on; the caps follow after the writes
            log.exception("%s: lowering the caps before the writes failed", what)
        t1 = time.perf_counter()
        plan = self.planner().plan()
        written = self.installer.apply(self.flow_entries(plan), tables=FLOW_TABLES)
        t2 = time.perf_counter()
        flows_at = time.monotonic()
        if self.installer.base_stale:  # failures changed groups and routes
            written += self.installer.apply(self.desired(plan))
            self.installer.base_written()
        t3 = time.perf_counter()
        self.installer.marks = (flows_at, time.monotonic())
        rep = ChangeReport(
            what=what,
            moved=len(self.planner().changed),
            entries=written,
            plan_ms=plan_s * 1e3,
            install_ms=(t2 - t1) * 1e3,
            base_ms=(t3 - t2) * 1e3,
            max_load=plan.max_load_s,
        )
        self.history.append(rep)
        self.events.record(
            "replan",
            f"{what}: {rep.moved} flow(s) moved, {rep.entries} entries written in "
            f"{rep.install_ms + rep.base_ms:.1f} ms",
            moved=rep.moved,
            entries=rep.entries,
            plan_ms=round(rep.plan_ms, 3),
            install_ms=round(rep.install_ms + rep.base_ms, 3),
        )
        try:
            self.agents.reallocate(what)
        except Exception:  # the new paths are installed; caps follow on the next change
            log.exception("%s: rate allocation failed", what)
        log.info(
            "%s: %d flow(s) moved, %d entries; plan %.1f ms, install %.1f ms, base %.1f ms",
            what,
            rep.moved,
            rep.entries,
            rep.plan_ms,
            rep.install_ms,
            rep.base_ms,
        )
        return rep
