"""Waiting for a line in a child process's output, with a deadline."""

from __future__ import annotations

import os
import select
import subprocess

from icefabric.waiting import Deadline


def wait_for_text(proc: subprocess.Popen[str], text: str, *, deadline: Deadline) -> str:
    """Read ``proc``'s stdout until ``text`` shows (what was read, returned), it exits, or the
    deadline passes (AssertionError with what it printed).

    Reads the pipe's file descriptor itself: select() on the descriptor with the text wrapper's
    readline() hangs when two lines come in one read, the second left in the wrapper's buffer
    where select() cannot see it (the README's "ready on" line after "connected", under load)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    seen = b""
    while not deadline.expired:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        seen += chunk
        if text.encode() in seen:
            return seen.decode(errors="replace")
        if not chunk and proc.poll() is not None:
            break
    raise AssertionError(
        f"{text.strip()!r} not seen in time (exit code {proc.poll()}): "
        f"{seen.decode(errors='replace')}"
    )
