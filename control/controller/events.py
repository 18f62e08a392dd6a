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
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from icefabric.control.p4rt import ArbitrationUpdate, ConnectionEvent, P4RtError, PacketIn
from icefabric.p4src import ice_p4 as n
from icefabric.waiting import poll_until

if TYPE_CHECKING:
    from icefabric.control.controller.eventlog import EventLog
    from icefabric.control.controller.installer import Installer
    from icefabric.control.controller.linkfail import LinkProbing
    from icefabric.control.install import ChangeReport
    from icefabric.control.p4rt import Entity, SwitchConnection, SwitchPool
    from icefabric.control.telemetry.reports import ReportLog
    from icefabric.control.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)


class Worker:
    """The controller's worker thread: runs queued work one item at a time."""

    def __init__(self) -> None:
        self.queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread that runs queued events (switch, link and agent events)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="icectl-worker", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Run what is queued, then end the thread."""
        self.queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the worker thread (events from other threads)."""
        self.queue.put(fn)

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                self.queue.task_done()
                return
            try:
                item()
            except P4RtError as exc:  # switches refused a change: said in one line, no traceback
                log.error("controller event failed: %s", str(exc).replace("\n", "; "))
            except Exception:  # one failed event must not stop the next
                log.exception("controller event failed")
            finally:
                self.queue.task_done()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until queued work (resyncs, takeovers) is done."""
        return poll_until(lambda: not self.queue.unfinished_tasks, timeout, 0.005)


class SwitchEvents:
    """Switch events for the Controller that owns it: connections, arbitration, packet-in and
    the resyncs they lead to, run on the worker. Handed the pool, installer, report log,
    telemetry store, link probing, lock, event log and the down/failed/resyncing sets
    explicitly, and the Controller's lifecycle, desired state and failure paths as callables."""

    def __init__(
        self,
        *,
        pool: SwitchPool,
        installer: Installer,
        reports: ReportLog,
        telemetry: TelemetryStore,
        probing: LinkProbing,
        lock: threading.RLock,
        events: EventLog,
        post: Callable[[Callable[[], None]], None],
        failed_switches: AbstractSet[str],
        down_since: dict[str, float],
        resyncing: set[str],
        backup: bool,
        connect_timeout: float,
        switch_dead_s: float | None,
        election_id: Callable[[], int],
        is_active: Callable[[], bool],
        is_stopping: Callable[[], bool],
        take_over: Callable[[], None],
        check_fence: Callable[[], None],
        ensure_pipeline: Callable[[SwitchConnection], bool],
        desired: Callable[[], dict[str, list[Entity]]],
        fail_switch: Callable[[str], ChangeReport],
        restore_switch: Callable[[str], ChangeReport],
    ) -> None:
        self.pool = pool
        self.installer = installer
        self.reports = reports
        self.telemetry = telemetry
        self.probing = probing
        self.lock = lock
        self.events = events
        self.post = post
        self.failed_switches = failed_switches
        self.down_since = down_since
        self.resyncing = resyncing
        self.backup = backup
        self.connect_timeout = connect_timeout
        self.switch_dead_s = switch_dead_s
        self.election_id = election_id
        self.is_active = is_active
        self.is_stopping = is_stopping
        self.take_over = take_over
        self.check_fence = check_fence
        self.ensure_pipeline = ensure_pipeline
        self.desired = desired
        self.fail_switch = fail_switch
        self.restore_switch = restore_switch
        self.takeover_retry_s = 1.0  # a failed takeover is retried after this long

    def resync_switch(self, name: str) -> dict[str, Any]:
        """Make one switch hold exactly the desired state (after a restart): read back, write
        only the difference; push the pipeline first when the switch lost it."""
        with self.lock:
            conn = self.pool[name]
            t0 = time.perf_counter()
            self.check_fence()
            pushed = self.ensure_pipeline(conn)
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

    def resync_out_of_step(self, switch: str) -> None:
        """A switch that refused a write, resynced to the plan (the installer queues this)."""
        if not (self.is_active() and self.pool[switch].is_connected):
            return  # the reconnection's resync does it
        try:
            res = self.resync_switch(switch)
        except Exception as exc:  # e.g. it died meanwhile: its reconnection resyncs it
            log.error("%s: resync after a failed write failed: %s", switch, exc)
            return
        log.warning("%s: resynced after a failed write: %s", switch, res)

    def on_connection(self, switch: str, ev: ConnectionEvent) -> None:
        """A switch's stream went down or came back (its connection's thread)."""
        if not ev.connected:
            if self.is_stopping():
                return
            if switch in self.down_since:
                return  # still down: a failed reconnection attempt
            self.down_since[switch] = time.monotonic()
            then = (
                f"failing over in {self.switch_dead_s:g} s"
                if self.switch_dead_s is not None and self.is_active()
                else "no failover (--switch-dead off)"
                if self.is_active()
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
        was_down = self.down_since.pop(switch, None) is not None
        if was_down:
            log.warning("switch %s is back (reconnection %d)", switch, ev.attempt)
            self.events.record("switch_up", f"switch {switch} reconnected", switch=switch)
        if ev.attempt > 0 and self.is_active():
            log.info("%s: back after a reconnection; resyncing", switch)
            self.resyncing.add(switch)
            self.post(lambda: self._after_restart(switch))

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
            self.resyncing.discard(switch)

    def _check_dead(self, switch: str) -> None:
        since = self.down_since.get(switch)
        if since is not None and self.is_active() and switch not in self.failed_switches:

            def fail() -> None:
                self.fail_switch(switch)

            self.post(fail)

    def on_arbitration(self, switch: str, update: ArbitrationUpdate) -> None:
        """A switch's arbitration changed (a backup becomes primary when the primary is gone)."""
        if (
            update.is_primary
            and not self.is_active()
            and self.backup
            and len(self.pool.primaries()) == len(self.pool)
        ):
            log.warning("primary controller gone: backup %d takes over", self.election_id())
            self.post(self.take_over_once)

    def take_over_once(self) -> None:
        """Take over now; a failed try is retried after ``takeover_retry_s`` (the worker)."""
        if self.is_active() or self.is_stopping():
            return
        try:
            self.take_over()
        except Exception:
            # A standby that gave up here would stay a headless backup for ever: retry.
            log.exception("takeover failed; retrying in %.1f s", self.takeover_retry_s)
            timer = threading.Timer(self.takeover_retry_s, lambda: self.post(self.take_over_once))
            timer.daemon = True
            timer.start()

    def on_packet(self, switch: str, pkt: PacketIn) -> None:
        """A packet-in: a telemetry report, a link probe, or something ignored."""
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
