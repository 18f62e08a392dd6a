"""The Controller's worker thread and switch events: connections, arbitration, packet-in.

Callbacks of the P4Runtime streams only queue work; the worker runs it one item at a time, so a
resync, a takeover or a failure change never runs on a stream thread or next to another change.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from icefabric.control.flowkey import FlowKey
from icefabric.control.p4rt import ArbitrationUpdate, ConnectionEvent, P4RtError, PacketIn
from icefabric.p4src import ice_p4 as n
from icefabric.waiting import poll_until

if TYPE_CHECKING:
    from icefabric.control.agents.hub import AgentHub
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.controller.installer import Installer
    from icefabric.control.controller.linkfail import LinkProbing
    from icefabric.control.install import ChangeReport
    from icefabric.control.p4rt import Entity, SwitchConnection, SwitchPool
    from icefabric.control.planner.plan import Plan
    from icefabric.control.telemetry.reports import ReportLog
    from icefabric.control.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)


class SwitchEvents:
    """Switch events and the worker that runs them for the Controller (mixed in)."""

    pool: SwitchPool
    agents: AgentHub
    reports: ReportLog
    telemetry: TelemetryStore
    probing: LinkProbing
    installer: Installer
    failed_switches: set[str]
    election_id: int
    backup: bool
    active: bool
    lock: threading.RLock
    connect_timeout: float
    switch_dead_s: float | None
    events: EventLog
    takeover_retry_s: float
    _keys: dict[FlowKey, str]
    _events: queue.Queue[Callable[[], None] | None]
    _worker: threading.Thread | None
    _down_since: dict[str, float]
    _resyncing: set[str]
    _stopping: bool

    if TYPE_CHECKING:  # the Controller's lifecycle, desired state and failure paths

        def take_over(self) -> None: ...

        def check_fence(self) -> None: ...

        def _ensure_pipeline(self, conn: SwitchConnection) -> bool: ...

        def desired(self, plan: Plan | None = None) -> dict[str, list[Entity]]: ...

        def fail_switch(self, switch: str) -> ChangeReport: ...

        def restore_switch(self, switch: str) -> ChangeReport: ...

    def start_worker(self) -> None:
        """Start the thread that runs queued events (switch, link and agent events)."""
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="icectl-worker", daemon=True)
            self._worker.start()

    def resync_switch(self, name: str) -> dict[str, Any]:
        """Make one switch hold exactly the desired state (after a restart): read back, write
        only the difference; push the pipeline first when the switch lost it."""
        with self.lock:
            conn = self.pool[name]
            t0 = time.perf_counter()
            self.check_fence()
            pushed = self._ensure_pipeline(conn)
            desired = self.desired().get(name, [])
            summary = conn.resync(desired, scope="all")
            self.installer.holds(name, desired)
            return {
                "switch": name,
                "pipeline_pushed": pushed,
                "inserted": summary.inserted,
                "modified": summary.modified,
                "deleted": summary.deleted,
                "unchanged": summary.unchanged,
                "ms": (time.perf_counter() - t0) * 1e3,
            }

    def _on_connection(self, switch: str, ev: ConnectionEvent) -> None:
        if not ev.connected:
            if self._stopping:
                return
            if switch in self._down_since:
                return  # still down: a failed reconnection attempt
            self._down_since[switch] = time.monotonic()
            then = (
                f"failing over in {self.switch_dead_s:g} s"
                if self.switch_dead_s is not None and self.active
                else "no failover (--switch-dead off)"
                if self.active
                else "standby: no failover"
            )
            log.error(
                "switch %s is DOWN: P4Runtime connection lost (%s); %s", switch, ev.reason, then
            )
            self.events.record(
                "switch_down", f"switch {switch} is down: {ev.reason}; {then}", switch=switch
            )
            if self.switch_dead_s is not None:
                timer = threading.Timer(self.switch_dead_s, self._check_dead, args=(switch,))
                timer.daemon = True
                timer.start()
            return
        was_down = self._down_since.pop(switch, None) is not None
        if was_down:
            log.warning("switch %s is back (reconnection %d)", switch, ev.attempt)
            self.events.record("switch_up", f"switch {switch} reconnected", switch=switch)
        if ev.attempt > 0 and self.active:
            log.info("%s: back after a reconnection; resyncing", switch)
            self._resyncing.add(switch)
            self._events.put(lambda: self._after_restart(switch))

    def _after_restart(self, switch: str) -> None:
        try:
            if self.pool[switch].wait_primary(self.connect_timeout):
                res = self.resync_switch(switch)
                log.info("%s: resync %s", switch, res)
                self.events.record(
                    "switch_reprogrammed",
                    f"switch {switch} reprogrammed: pipeline "
                    f"{'pushed' if res['pipeline_pushed'] else 'kept'}, {res['inserted']} "
                    f"inserted, {res['modified']} modified, {res['deleted']} deleted",
                    switch=switch,
                )
                if switch in self.failed_switches:
                    self.restore_switch(switch)
        finally:
            self._resyncing.discard(switch)

    def _check_dead(self, switch: str) -> None:
        since = self._down_since.get(switch)
        if since is not None and self.active and switch not in self.failed_switches:

            def fail() -> None:
                self.fail_switch(switch)

            self._events.put(fail)

    def _on_arbitration(self, switch: str, update: ArbitrationUpdate) -> None:
        if (
            update.is_primary
            and not self.active
            and self.backup
            and len(self.pool.primaries()) == len(self.pool)
        ):
            log.warning("primary controller gone: backup %d takes over", self.election_id)
            self._events.put(self._take_over_once)

    def _take_over_once(self) -> None:
        if self.active or self._stopping:
            return
        try:
            self.take_over()
        except Exception:
            # A standby that gave up here would stay a headless backup for ever: retry.
            log.exception("takeover failed; retrying in %.1f s", self.takeover_retry_s)
            timer = threading.Timer(
                self.takeover_retry_s, lambda: self._events.put(self._take_over_once)
            )
            timer.daemon = True
            timer.start()

    def _on_packet(self, switch: str, pkt: PacketIn) -> None:
        reason = int(pkt.metadata.get("reason", 0))
        if reason == n.PUNT_REASON_TELEMETRY:
            rep = self.reports.add(switch, pkt.payload, pkt.metadata)
            if rep is not None:
                self.telemetry.add_report(rep)
        elif reason == n.PUNT_REASON_LINK_PROBE:
            mon = self.probing.monitor
            if mon is not None:
                mon.on_probe(switch, int(pkt.metadata.get("ingress_port", 0)), pkt.payload)
        else:
            log.debug(
                "%s: packet-in reason %d (%d bytes) ignored", switch, reason, len(pkt.payload)
            )

    def _flow_of_key(self, key: FlowKey) -> str | None:
        return self.agents.flow_of(key) or self._keys.get(key)

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the controller's worker thread (events from other threads)."""
        self._events.put(fn)

    def _work(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                self._events.task_done()
                return
            try:
                item()
            except P4RtError as exc:  # switches refused a change: said in one line, no traceback
                log.error("controller event failed: %s", str(exc).replace("\n", "; "))
            except Exception:  # one failed event must not stop the next
                log.exception("controller event failed")
            finally:
                self._events.task_done()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until queued switch events (resyncs, takeovers) are processed."""
        return poll_until(lambda: not self._events.unfinished_tasks, timeout, 0.005)
