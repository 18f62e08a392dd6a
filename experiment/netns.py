"""BMv2 switches in a private network namespace: whether they can run here, commands in the
namespace, and AF_PACKET I/O on the far ends of its veth pairs.

Shared by the BMv2 fabric of the controller tests (:mod:`icefabric.experiment.bmv2_wire`) and
the data-plane test harness's BMv2 target (``tests/dataplane/harness.py``). Linux only, root
only (``ip netns``, ``setns``); :func:`bmv2_unavailable_reason` says why not.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import subprocess
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from icefabric.target import bmv2

CLONE_NEWNET = 0x40000000
THRIFT_BASE_PORT = 9090
ETH_P_ALL = 0x0003


class TargetUnavailable(Exception):
    """The requested target cannot run here (missing tool, not root); the message says why."""


def bmv2_unavailable_reason() -> str | None:
    """Why the BMv2 target cannot run here, or None when it can."""
    missing = bmv2.missing_tools(("ip",))
    if missing:
        return f"ICE_TARGET=bmv2 needs {', '.join(missing)} on PATH"
    if os.geteuid() != 0:
        return "ICE_TARGET=bmv2 needs root (network namespaces and veth pairs)"
    return None


def run_checked(cmd: list[str], what: str) -> None:
    """Run ``cmd``; RuntimeError naming ``what``, the command and its stderr when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what}: {' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}"
        )


class NetnsSockets:
    """AF_PACKET sockets on the host ends of veth pairs inside a namespace (one I/O thread)."""

    def __init__(self, netns: str, on_frame: Callable[[str, bytes], bool] | None = None) -> None:
        self.netns = netns
        # Called on the I/O thread for every frame received; True: consumed, not queued.
        self._on_frame = on_frame
        self._socks: dict[str, socket.socket] = {}
        self._rx: dict[str, deque[bytes]] = defaultdict(deque)
        self._jobs: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"netns-{netns}", daemon=True)
        self._thread.start()
        self._ready.wait(5.0)
        if self._error is not None:
            raise RuntimeError(f"cannot enter netns {netns}: {self._error}")

    def _main(self) -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/var/run/netns/{self.netns}") as f:
                if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        while not self._stop.is_set():
            with self._lock:
                jobs = list(self._jobs)
                self._jobs.clear()
            for job in jobs:
                job()
            socks = list(self._socks.items())
            if not socks:
                time.sleep(0.002)
                continue
            ready, _, _ = select.select([s for _, s in socks], [], [], 0.01)
            for iface, sock in socks:
                if sock in ready:
                    data, addr = sock.recvfrom(65535)
                    if addr[2] == socket.PACKET_OUTGOING:
                        continue
                    if self._on_frame is not None and self._on_frame(iface, data):
                        continue
                    with self._lock:
                        self._rx[iface].append(data)

    def _call(self, fn: Callable[[], Any]) -> Any:
        done = threading.Event()
        box: list[Any] = []

        def job() -> None:
            try:
                box.append(fn())
            except BaseException as exc:
                box.append(exc)
            done.set()

        with self._lock:
            self._jobs.append(job)
        if not done.wait(5.0):
            raise RuntimeError("netns I/O thread did not answer")
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def open(self, iface: str) -> None:
        def make() -> None:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((iface, 0))
            self._socks[iface] = s

        self._call(make)

    def send(self, iface: str, data: bytes) -> None:
        # From the caller's thread: the socket was made inside the namespace (open), sending
        # needs no setns. Handing each frame to the I/O thread instead cost up to one select
        # timeout per frame, which spread back-to-back bursts out too far to queue anywhere.
        self._socks[iface].send(data)

    def send_here(self, iface: str, data: bytes) -> None:
        """Send from the I/O thread itself (inside an ``on_frame`` hook)."""
        self._socks[iface].send(data)

    def take(self, iface: str) -> list[bytes]:
        with self._lock:
            q = self._rx[iface]
            out = list(q)
            q.clear()
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        for s in self._socks.values():
            s.close()
