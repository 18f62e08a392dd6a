"""Restore a switch after a reconnection or a takeover: push the pipeline if lost, resync."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .entities import Entity
from .packets import ArbitrationUpdate
from .pipeline import PipelineConfig
from .resync import ResyncSummary
from .stream import ConnectionEvent

if TYPE_CHECKING:
    from .client import SwitchConnection

LOG = logging.getLogger(__name__)

Outcome = ResyncSummary | BaseException


class AutoRestore:
    """Runs `ensure_pipeline` + `resync(desired())` in a worker thread whenever the stream
    comes back after a drop, and whenever this connection turns from backup into primary.

    Runs never overlap: a trigger during a run schedules one more run after it.
    """

    def __init__(
        self,
        conn: SwitchConnection,
        desired: Callable[[], Iterable[Entity]],
        *,
        pipeline: PipelineConfig | None = None,
        on_done: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.conn = conn
        self.desired = desired
        self.pipeline = pipeline
        self.on_done = on_done
        self._cond = threading.Condition()
        self._running = False
        self._pending = False
        self._was_primary: bool | None = conn.is_primary if conn.is_connected else None
        self.runs = 0
        self.last: Outcome | None = None
        conn.on("connection", self._on_connection)
        conn.on("arbitration", self._on_arbitration)

    def _on_connection(self, event: ConnectionEvent) -> None:
        if event.connected and event.attempt > 0:
            self.trigger(f"reconnected (attempt {event.attempt})")

    def _on_arbitration(self, update: ArbitrationUpdate) -> None:
        was, self._was_primary = self._was_primary, update.is_primary
        if was is False and update.is_primary:
            self.trigger("became primary")

    def trigger(self, reason: str = "requested") -> None:
        """Schedule a restore run (in a worker thread)."""
        with self._cond:
            if self._running:
                self._pending = True
                return
            self._running = True
        LOG.info("%s: restoring switch state: %s", self.conn.name, reason)
        worker = threading.Thread(
            target=self._work, name=f"p4rt-restore-{self.conn.name}", daemon=True
        )
        worker.start()

    def _work(self) -> None:
        while True:
            outcome: Outcome
            try:
                if not self.conn.is_primary:
                    raise RuntimeError(f"{self.conn.name}: not primary; nothing restored")
                if self.pipeline is not None:
                    self.conn.ensure_pipeline(self.pipeline)
                elif not self.conn.refresh_p4info():
                    raise RuntimeError(f"{self.conn.name}: the switch runs no pipeline")
                outcome = self.conn.resync(self.desired())
            except Exception as exc:  # reported through on_done / last, never lost
                LOG.error("%s: restore failed: %s", self.conn.name, exc)
                outcome = exc
            if self.on_done is not None:
                try:
                    self.on_done(outcome)
                except Exception:
                    LOG.exception("%s: restore on_done callback failed", self.conn.name)
            with self._cond:
                self.last = outcome
                self.runs += 1
                self._cond.notify_all()
                if not self._pending:
                    self._running = False
                    return
                self._pending = False

    def wait_runs(self, runs: int, timeout: float | None = None) -> bool:
        """Wait until at least `runs` restore runs finished."""
        with self._cond:
            return self._cond.wait_for(lambda: self.runs >= runs, timeout)


def restore_on_reconnect(
    conn: SwitchConnection,
    desired: Callable[[], Iterable[Entity]],
    *,
    pipeline: PipelineConfig | None = None,
    on_done: Callable[[Outcome], None] | None = None,
) -> AutoRestore:
    """Keep `conn`'s switch at desired() across restarts, reconnections and takeovers."""
    return AutoRestore(conn, desired, pipeline=pipeline, on_done=on_done)
