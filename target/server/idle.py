"""Idle timeouts: IdleTimeoutNotification for entries not hit within their idle_timeout_ns."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from icefabric.target.server.entity_tables import encode_entry
from icefabric.target.server.state import PipelineState

NOTIFY = p4info_pb2.Table.NOTIFY_CONTROL
Send = Callable[[p4runtime_pb2.StreamMessageResponse], bool]


def enable_hit_tracking(state: PipelineState, clock: Any) -> None:
    """Make tables whose P4Info asks for NOTIFY_CONTROL record their entries' last hits."""
    for info in state.index.tables.values():
        if info.proto.idle_timeout_behavior == NOTIFY:
            state.runtime("tables", info.name).track_hits(clock)


def scan(state: PipelineState, clock: Any, send: Send) -> int:
    """Notify (once per idle period) about entries idle for their timeout; returns how many."""
    now = clock.now_us()
    count = 0
    for info in state.index.tables.values():
        if info.proto.idle_timeout_behavior != NOTIFY:
            continue
        table = state.runtime("tables", info.name)
        expired = [
            e
            for e in table.entries()
            if e.idle_timeout_ns > 0
            and not e.idle_notified
            and (now - e.last_hit_us) * 1000 >= e.idle_timeout_ns
        ]
        if not expired:
            continue
        note = p4runtime_pb2.IdleTimeoutNotification(timestamp=time.time_ns())
        for e in expired:
            e.idle_notified = True
            note.table_entry.append(encode_entry(state, info, table, e, with_counters=False))
        if send(p4runtime_pb2.StreamMessageResponse(idle_timeout_notification=note)):
            count += len(expired)
    return count


class IdleScanner:
    """A thread that scans for idle entries every `period` seconds."""

    def __init__(
        self,
        get_state: Callable[[], PipelineState | None],
        clock: Any,
        send: Send,
        period: float = 0.1,
    ) -> None:
        self.get_state = get_state
        self.clock = clock
        self.send = send
        self.period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def start(self) -> None:
        """Start scanning."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="p4rt-idle", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop scanning."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None

    def scan_now(self) -> int:
        """One scan (also what the thread does each period)."""
        state = self.get_state()
        if state is None:
            return 0
        with self.lock:
            return scan(state, self.clock, self.send)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.scan_now()
