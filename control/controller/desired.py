"""What every switch should hold and how a change reaches it: desired state, installs, mode.

The switches hold base forwarding (a pure function of the topology, its failures and the
options, cached) plus the planned flows. A change writes only the difference against what the
controller knows each switch holds: after the planner moved flows, the planned flows first, then
the rest of base forwarding.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import grpc

from icefabric.control import fabric
from icefabric.control.fabric import FabricOptions, TagMap, entity_key
from icefabric.control.install import ChangeReport, diff_updates, merge, plan_entries
from icefabric.control.p4rt import Entity, FabricError, P4RuntimeError, TableEntry
from icefabric.p4src import ice_p4 as n

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.ccl.demand import Flow
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.p4rt import SwitchPool
    from icefabric.control.planner.plan import Plan
    from icefabric.control.planner.planner import Planner
    from icefabric.control.topology import Topology

log = logging.getLogger(__name__)

# gRPC codes of a write that reached no working switch (it died, its server is stopping)
_TRANSPORT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
)


class DesiredState:
    """Desired entities, diffs and installs for the Controller (mixed in; it owns the state)."""

    topo: Topology
    options: FabricOptions
    tags: TagMap
    planner: Planner
    pool: SwitchPool
    agents: AgentHub
    flows: dict[str, Flow]
    installed: dict[str, dict[tuple[object, ...], Entity]]
    history: list[ChangeReport]
    events: EventLog
    active: bool
    lock: threading.RLock
    _install_marks: tuple[float, float]
    _base_cache: tuple[tuple[bytes, FabricOptions], dict[str, list[Entity]]] | None
    _applied_base: tuple[bytes, FabricOptions] | None

    if TYPE_CHECKING:  # the Controller's fencing (its store), its worker queue

        def check_fence(self) -> None: ...

        def post(self, fn: Callable[[], None]) -> None: ...

        def resync_switch(self, name: str) -> dict[str, Any]: ...

    def desired(self, plan: Plan | None = None) -> dict[str, list[Entity]]:
        """Every switch's entities: base forwarding plus the planned flows."""
        return merge(self._base(), self._flow_entries(plan))

    def _base_key(self) -> tuple[bytes, FabricOptions]:
        return (self.topo.failed.tobytes(), self.options)

    def _base(self) -> dict[str, list[Entity]]:
        """Base forwarding, recomputed only when failures or options changed."""
        key = self._base_key()
        if self._base_cache is None or self._base_cache[0] != key:
            self._base_cache = (key, fabric.base_entries(self.topo, self.options, self.tags))
        return self._base_cache[1]

    def _flow_entries(self, plan: Plan | None = None) -> dict[str, list[Entity]]:
        p = plan if plan is not None else self.planner.plan()
        return plan_entries(self.topo, p, self.flows, self.tags, self.agents.flows.install_keys())

    def apply_flow_entries(self) -> int:
        """Write the flow_path difference only (real keys reported, plan unchanged)."""
        with self.lock:
            return self._apply(self._flow_entries(), tables={n.TABLE_FLOW_PATH})

    def _apply(
        self, desired: Mapping[str, Iterable[Entity]], *, tables: set[str] | None = None
    ) -> int:
        """Write the difference between what is installed and ``desired`` on every switch.

        With ``tables`` only entries of those tables are compared (the others stay as they are).
        """
        plans: dict[str, tuple[list[Any], dict[tuple[object, ...], Entity]]] = {}
        for sw in self.installed:
            new = list(desired.get(sw, []))
            old = list(self.installed[sw].values())
            if tables is not None:
                new = [e for e in new if _table_of(e) in tables]
                old = [e for e in old if _table_of(e) in tables]
            updates = diff_updates(old, new)
            if not updates:
                continue
            after = dict(self.installed[sw])
            for u in updates:
                if u.type == "DELETE":
                    after.pop(entity_key(u.entity), None)
                else:
                    after[entity_key(u.entity)] = u.entity
            plans[sw] = (updates, after)
        if not plans:
            return 0
        # A switch that is down gets everything by resync when it returns.
        live = [sw for sw in plans if self.pool[sw].is_connected]
        failed: FabricError | None = None
        if self.active and live:
            self.check_fence()  # an etcd replica whose lease may end writes nothing
            try:
                self.pool.run_all(
                    lambda c: c.write(plans[c.name][0]), names=live, operation="write"
                )
            except FabricError as exc:
                failed = exc
        # what every switch must hold now, the ones whose write failed too: a resync (below,
        # or when a lost switch returns) brings each of those to exactly this
        for sw, (_, after) in plans.items():
            self.installed[sw] = after
        if failed is not None:
            self._out_of_step(failed)
        return sum(len(u) for u, _ in plans.values())

    def _out_of_step(self, failed: FabricError) -> None:
        """Switches whose write failed: one ERROR line each and a resync on the worker. A switch
        that died meanwhile (Mininet's exit stops every switch; its connection is gone or the
        write found no server) is the down path's business, so only a switch still answering
        makes the change fail (FabricError, after the other switches' bookkeeping)."""
        rejected = {}
        for sw, err in sorted(failed.errors.items()):
            gone = not self.pool[sw].is_connected or (
                isinstance(err, P4RuntimeError) and err.code in _TRANSPORT_CODES
            )
            first = str(err).splitlines()[0]
            if gone:
                log.error("%s: write failed, the switch is gone (%s); resynced when it returns",
                          sw, first)  # fmt: skip
                continue
            log.error("%s: write failed (%s); resyncing it to the plan", sw, first)
            rejected[sw] = err
            self.post(lambda sw=sw: self._resync_out_of_step(sw))  # type: ignore[misc]
        if rejected:
            raise FabricError(failed.operation, rejected)

    def _resync_out_of_step(self, switch: str) -> None:
        if not (self.active and self.pool[switch].is_connected):
            return  # the reconnection's resync does it
        try:
            res = self.resync_switch(switch)
        except Exception as exc:  # e.g. it died meanwhile: its reconnection resyncs it
            log.error("%s: resync after a failed write failed: %s", switch, exc)
            return
        log.warning("%s: resynced after a failed write: %s", switch, res)

    if TYPE_CHECKING:  # the Controller's state file (statefile.StateFile)

        def _save_state(self, *, without_job: str | None = None) -> None: ...

    def _install_change(self, what: str, plan_s: float) -> ChangeReport:
        """After the planner changed: the state written first (StateWriteError, nothing
        written to a switch, when it cannot be), then the planned flows, then the rest of
        base forwarding."""
        self._save_state()  # before any switch sees the change: the file never lags behind
        t1 = time.perf_counter()
        plan = self.planner.plan()
        written = self._apply(self._flow_entries(plan), tables={n.TABLE_FLOW_PATH})
        t2 = time.perf_counter()
        flows_at = time.monotonic()
        if self._applied_base != self._base_key():  # failures changed groups and routes
            written += self._apply(self.desired(plan))
            self._applied_base = self._base_key()
        t3 = time.perf_counter()
        self._install_marks = (flows_at, time.monotonic())
        rep = ChangeReport(
            what=what,
            moved=len(self.planner.changed),
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

    def set_mode(self, mode: str) -> dict[str, Any]:
        """Switch every leaf to ICE ("ice", "planned-ecmp"), the ECMP baseline ("ecmp") or spray."""
        with self.lock:
            self.options = replace(self.options, mode=mode)
            t0 = time.perf_counter()
            written = self._apply(self.desired())
            self._applied_base = self._base_key()
            return {
                "mode": mode,
                "switches": len(self.topo.leaves),
                "entries": written,
                "ms": (time.perf_counter() - t0) * 1e3,
            }


def _table_of(e: Entity) -> str:
    return e.table if isinstance(e, TableEntry) else "clone_session"
