"""Switch processes end with the bring-up that started them, even when it is SIGKILLed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from icefabric.topo import switches
from icefabric.waiting import poll_until

# The bring-up stand-in: starts a long sleeper the way topo/switches.py starts a switch (a
# session of its own, wrapped by die_with_parent), prints its pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
from icefabric.topo.switches import die_with_parent
child = subprocess.Popen(
    die_with_parent([sys.executable, "-c", "import time; time.sleep(300)"]),
    start_new_session=True,
)
print(child.pid, flush=True)
time.sleep(300)
"""


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an orphan may wait for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
def test_child_gets_sigterm_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    try:
        pid = int(parent.stdout.readline())
        # setpriv asks for the signal, then execs: wait for the exec (a parent killed before
        # the request would leave no one to signal, a race a switch's start-up wait covers).
        assert poll_until(lambda: b"time.sleep(300)" in _cmdline(pid), timeout=30.0)
        assert _running(pid), "the child should run while its parent lives"
        parent.kill()
        parent.wait(timeout=10)
        assert poll_until(lambda: not _running(pid), timeout=10.0), f"child {pid} outlived it"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_command_is_wrapped_and_kept_whole() -> None:
    cmd = ["ice-switch", "-i", "1@veth1", "--device-id", "1"]
    wrapped = switches.die_with_parent(cmd)
    if shutil.which("setpriv") is None:
        assert wrapped == cmd
    else:
        assert wrapped[1:4] == ["--pdeathsig", "TERM", "--"] and wrapped[4:] == cmd


def test_without_setpriv_the_command_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(switches.shutil, "which", lambda name: None)
    assert switches.die_with_parent(["tcpdump", "-i", "x"]) == ["tcpdump", "-i", "x"]
