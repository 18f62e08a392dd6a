"""Streaming digests to the primary client: batching, timeouts and duplicate suppression."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from p4.v1 import p4runtime_pb2

from icefabric.target.runtime.digest import DigestType
from icefabric.target.server.packetio import digest_list
from icefabric.target.server.state import PipelineState

Send = Callable[[p4runtime_pb2.StreamMessageResponse], bool]


class DigestStreamer:
    """Turns digest queue pushes into DigestList messages as DigestEntry.Config asks.

    A list leaves when it holds max_list_size messages (0 = no limit) or max_timeout_ns after
    its first message (0 = at once).  Until a list is acked, or ack_timeout_ns has passed, a
    message equal to one in that list is suppressed (as PI does).
    """

    def __init__(self, send: Send) -> None:
        self.send = send
        self.lock = threading.Lock()
        self.state: PipelineState | None = None
        self._list_id = 0
        self._timers: dict[int, threading.Timer] = {}
        self._pending: dict[int, dict[tuple[int, ...], int]] = {}  # digest id -> msg -> expiry ns
        self._lists: dict[tuple[int, int], list[tuple[int, ...]]] = {}  # (digest, list) -> msgs

    def reset(self, state: PipelineState | None) -> None:
        """Forget everything (new pipeline)."""
        with self.lock:
            for t in self._timers.values():
                t.cancel()
            self._timers.clear()
            self._pending.clear()
            self._lists.clear()
            self.state = state

    def on_push(self, digest: DigestType) -> None:
        """Digest queue listener: send now, or arm the timeout."""
        state = self.state
        if state is None:
            return
        spec = state.index.digest_by_name.get(digest.name)
        if spec is None:
            return
        cfg = state.digest_configs.get(spec.preamble.id)
        if cfg is None:
            return
        if cfg.max_timeout_ns == 0 or (cfg.max_list_size and len(digest) >= cfg.max_list_size):
            self.flush(digest, spec.preamble.id)
            return
        with self.lock:
            if spec.preamble.id in self._timers:
                return
            timer = threading.Timer(
                cfg.max_timeout_ns / 1e9, self._expire, (digest, spec.preamble.id)
            )
            timer.daemon = True
            self._timers[spec.preamble.id] = timer
        timer.start()

    def _expire(self, digest: DigestType, digest_id: int) -> None:
        with self.lock:
            self._timers.pop(digest_id, None)
        self.flush(digest, digest_id)

    def flush(self, digest: DigestType, digest_id: int) -> None:
        """Send everything queued for `digest`, in lists of at most max_list_size."""
        state = self.state
        if state is None or digest_id not in state.digest_configs:
            return
        cfg = state.digest_configs[digest_id]
        while True:
            items = digest.pop(cfg.max_list_size or None)
            if not items:
                return
            now = time.monotonic_ns()
            with self.lock:
                pending = self._pending.setdefault(digest_id, {})
                fresh = []
                for msg in items:
                    expiry = pending.get(msg)
                    if expiry is not None and expiry > now:
                        continue
                    fresh.append(msg)
                    if cfg.ack_timeout_ns:
                        pending[msg] = now + cfg.ack_timeout_ns
                if not fresh:
                    continue
                self._list_id += 1
                list_id = self._list_id
                if cfg.ack_timeout_ns:
                    self._lists[(digest_id, list_id)] = fresh
            msg_out = digest_list(digest_id, list_id, fresh, time.time_ns())
            self.send(p4runtime_pb2.StreamMessageResponse(digest=msg_out))

    def ack(self, digest_id: int, list_id: int) -> None:
        """A DigestListAck: its messages may be reported again."""
        with self.lock:
            msgs = self._lists.pop((digest_id, list_id), [])
            pending = self._pending.get(digest_id, {})
            for m in msgs:
                pending.pop(m, None)
