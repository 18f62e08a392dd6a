"""A throwaway etcd cluster on loopback ports in a folder: for tests, ``make bench`` and trying
``icectl run --store etcd://...`` on one machine (Debian's ``etcd-server``: ``etcd`` on PATH).

``LocalEtcdCluster(folder, members=3).start()`` runs ``members`` etcd processes on 127.0.0.1
(free ports picked at start), each with its data directory in ``folder``; ``stop_member(i)`` /
``start_member(i)`` take one down and bring it back (same data), ``close()`` stops them all.
Timing: heartbeat 100 ms, election timeout 500 ms, so etcd's minimum lease TTL is 1 s
(1.5 x the election timeout, rounded up) and the default 1 s controller lease is granted as is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from icefabric.control.store.etcd_client import EtcdClient, EtcdError
from icefabric.files import read_text
from icefabric.waiting import poll_until

log = logging.getLogger(__name__)

HEARTBEAT_MS = 100
ELECTION_MS = 500


def etcd_binary() -> str | None:
    """The etcd server binary on PATH (Debian's etcd-server package), or None."""
    return shutil.which("etcd")


def _free_ports(n: int, host: str) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalEtcdCluster:
    """``members`` etcd processes on ``host`` (loopback), data in ``folder``."""

    def __init__(self, folder: str | Path, *, members: int = 3, host: str = "127.0.0.1") -> None:
        if not 1 <= members <= 7:
            raise ValueError(f"etcd cluster: expected 1..7 members, got {members}")
        self.folder = Path(folder)
        self.host = host
        self.n = members
        ports = _free_ports(2 * members, host)
        self.client_ports = ports[:members]
        self.peer_ports = ports[members:]
        self.names = [f"m{i}" for i in range(members)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * members
        self._started = [False] * members

    @property
    def endpoints(self) -> list[str]:
        """Every member's client URL."""
        return [f"http://{self.host}:{p}" for p in self.client_ports]

    @property
    def url(self) -> str:
        """The ``etcd://h:p,h:p,...`` form ``icectl run --store`` takes."""
        return "etcd://" + ",".join(f"{self.host}:{p}" for p in self.client_ports)

    def _cmd(self, i: int) -> list[str]:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("etcd not on PATH (Debian: apt-get install etcd-server)")
        cluster = ",".join(
            f"{n}=http://{self.host}:{p}" for n, p in zip(self.names, self.peer_ports, strict=True)
        )
        return [
            binary,
            "--name", self.names[i],
            "--data-dir", str(self.folder / self.names[i]),
            "--listen-client-urls", self.endpoints[i],
            "--advertise-client-urls", self.endpoints[i],
            "--listen-peer-urls", f"http://{self.host}:{self.peer_ports[i]}",
            "--initial-advertise-peer-urls", f"http://{self.host}:{self.peer_ports[i]}",
            "--initial-cluster", cluster,
            "--initial-cluster-state", "existing" if self._started[i] else "new",
            "--initial-cluster-token", f"icefabric-{self.peer_ports[0]}",
            "--heartbeat-interval", str(HEARTBEAT_MS),
            "--election-timeout", str(ELECTION_MS),
            "--log-level", "warn",
            "--logger", "zap",
        ]  # fmt: skip

    def start(self, timeout: float = 30.0) -> LocalEtcdCluster:
        """Start every member and wait until the cluster answers reads and writes."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for i in range(self.n):
            self.start_member(i, wait=False)
        if not self.wait_healthy(timeout):
            logs = "; ".join(self.log_tail(i) for i in range(self.n))
            self.close()
            raise RuntimeError(
                f"etcd cluster in {self.folder} not healthy in {timeout:g} s: {logs}"
            )
        return self

    def start_member(self, i: int, *, wait: bool = True, timeout: float = 20.0) -> None:
        """Start (or restart, with its data) member ``i``."""
        if self.procs[i] is not None and self.procs[i].poll() is None:  # type: ignore[union-attr]
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        logfd = os.open(self.folder / f"{self.names[i]}.log", flags, 0o600)
        try:
            self.procs[i] = subprocess.Popen(
                self._cmd(i), stdout=logfd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            os.close(logfd)
        self._started[i] = True
        if wait and not self.wait_healthy(timeout, members=[i]):
            raise RuntimeError(f"etcd member {self.names[i]} not answering: {self.log_tail(i)}")

    def stop_member(self, i: int, *, kill: bool = True) -> None:
        """Stop member ``i`` (SIGKILL by default: a lost server)."""
        p = self.procs[i]
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        self.procs[i] = None

    def wait_healthy(self, timeout: float, members: list[int] | None = None) -> bool:
        """Until each of ``members`` (default all) answers a linearizable read."""
        which = list(range(self.n)) if members is None else members
        clients = [EtcdClient([self.endpoints[i]], timeout_s=0.5) for i in which]

        def ok() -> bool:
            for c in clients:
                try:
                    c.range(b"health")
                except EtcdError:
                    return False
            return True

        try:
            return poll_until(ok, timeout, interval=0.1)
        finally:
            for c in clients:
                c.close()

    def log_tail(self, i: int, lines: int = 3) -> str:
        """The last lines of member ``i``'s log (for error messages)."""
        try:
            text = read_text(self.folder / f"{self.names[i]}.log", what="etcd log")
        except (OSError, ValueError):
            return f"{self.names[i]}: no log"
        return f"{self.names[i]}: " + " | ".join(text.strip().splitlines()[-lines:])[:400]

    def close(self) -> None:
        """Stop every member."""
        for i in range(self.n):
            self.stop_member(i)

    def __enter__(self) -> LocalEtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
