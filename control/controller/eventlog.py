"""The controller's event history: what happened to the fabric, when, in order (``icectl events``).

Switch up/down/reprogrammed, link up/down, jobs added and removed, replans and installs, agents
joining and leaving, cap pushes: one JSON object per line, ``{"seq", "t", "kind", "what", ...}``
(``t``: Unix time). Kept in memory (the last :data:`MEMORY_EVENTS`) and, when the controller
has a state file, appended to ``<state file stem>.events.jsonl`` next to it (0600, never through
a link) so the history survives a restart. Bounded on disk: past :data:`MAX_FILE_BYTES` the file
becomes ``.1`` (the previous ``.1`` is dropped), so at most twice that is kept.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from icefabric.files import DataFileError, parse_json, read_input

log = logging.getLogger(__name__)

MEMORY_EVENTS = 2000
MAX_FILE_BYTES = 1 << 20
MAX_LINE_BYTES = 4096  # longer lines in the file are skipped when read back

KINDS = (
    "controller_start",
    "controller_stop",
    "switch_down",
    "switch_up",
    "switch_failed",
    "switch_reprogrammed",
    "link_down",
    "link_up",
    "job_add",
    "job_remove",
    "replan",
    "install",
    "agent_join",
    "agent_leave",
    "caps_pushed",
)


def events_path(state_file: Path) -> Path:
    """The event file that goes with a state file: ``fabric.state.json`` -> ``fabric.events.jsonl``."""
    name = state_file.name
    stem = name[: -len(".state.json")] if name.endswith(".state.json") else state_file.stem
    return state_file.with_name(f"{stem}.events.jsonl")


class EventLog:
    """A bounded, ordered, optionally persistent list of fabric events (thread-safe)."""

    def __init__(self, path: Path | None = None, *, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.path = path
        self.max_file_bytes = max_file_bytes
        self._lock = threading.Lock()
        self._recent: deque[dict[str, Any]] = deque(maxlen=MEMORY_EVENTS)
        self.write_errors = 0
        self.seq = 0
        self.counts: dict[str, int] = {}  # events recorded by this process, by kind (/metrics)
        self.last_t: dict[str, float] = {}  # time of the last one, by kind
        if path is not None:
            for ev in read_events(path):
                self._recent.append(ev)
            if self._recent:
                self.seq = max(int(e.get("seq", 0)) for e in self._recent)

    def record(self, kind: str, what: str, **fields: Any) -> dict[str, Any]:
        """Add one event (``what``: the one-line text people read) and return it."""
        with self._lock:
            self.seq += 1
            ev: dict[str, Any] = {"seq": self.seq, "t": round(time.time(), 3), "kind": kind}
            ev["what"] = what
            ev.update(fields)
            self._recent.append(ev)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.last_t[kind] = ev["t"]
            if self.path is not None:
                self._append(ev)
        return ev

    def since(self, seq: int = 0, limit: int = MEMORY_EVENTS) -> list[dict[str, Any]]:
        """Events after ``seq`` (oldest first), at most the last ``limit``."""
        with self._lock:
            out = [e for e in self._recent if int(e["seq"]) > seq]
        return out[-limit:] if limit > 0 else []

    def _append(self, ev: dict[str, Any]) -> None:
        assert self.path is not None
        line = (json.dumps(ev, separators=(",", ":"), default=str) + "\n").encode()
        try:
            self._rotate_if_full(len(line))
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.path, flags, 0o600)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                    raise OSError(f"{self.path}: not a regular file of yours")
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            self.write_errors += 1
            if self.write_errors == 1:
                log.error("event log %s: %s (events kept in memory only)", self.path, exc)

    def _rotate_if_full(self, adding: int) -> None:
        assert self.path is not None
        try:
            size = os.lstat(self.path).st_size
        except FileNotFoundError:
            return
        if size + adding > self.max_file_bytes:
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))


def _read_lines(path: Path, *, strict: bool) -> list[bytes]:
    try:
        data = read_input(path, limit=MAX_FILE_BYTES + MAX_LINE_BYTES, what="event file")
    except (DataFileError, OSError):
        if strict:
            raise
        return []
    return data.splitlines()


def read_events(path: Path, *, strict: bool = False) -> list[dict[str, Any]]:
    """The events kept in ``path`` and its ``.1`` (oldest first); bad lines are skipped.

    ``strict`` (a file a user named): DataFileError when ``path`` cannot be read (missing, a
    device or FIFO, too large); otherwise an unreadable file is an empty history."""
    out: list[dict[str, Any]] = []
    older = path.with_name(path.name + ".1")
    for p, must in ((older, False), (path, strict)):
        for raw in _read_lines(p, strict=must):
            if len(raw) > MAX_LINE_BYTES:
                continue
            try:
                ev = parse_json(raw)
            except ValueError:
                continue
            if isinstance(ev, dict) and isinstance(ev.get("seq"), int) and "kind" in ev:
                out.append(ev)
    out.sort(key=lambda e: int(e["seq"]))
    return out[-MEMORY_EVENTS:]


def format_event(ev: dict[str, Any]) -> str:
    """``2026-12-02 02:10:03.120  switch_down  switch spine1 is down: ...``."""
    t = float(ev.get("t", 0.0))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"
    return f"{stamp}  {ev.get('kind', '?')!s:<19} {ev.get('what', '')}"
