"""The host side of the agent channel: :class:`AgentClient` keeps one connection to the
controller, reports the host's flows and hands the caps it receives to a callback.

Given several addresses (a primary's and its backup's) it tries them in turn; a standby
controller refuses agents until it takes over. It connects in a thread of its own, reconnects with exponential backoff (with jitter) when the
connection breaks or the controller stays silent for three heartbeats, and after every
(re)connect sends the complete set of flows it knows, so a restarted controller or a backup that
took over re-learns them. On a Unix-domain socket it checks the listener's credentials (same
user or root) before sending anything.
"""

from __future__ import annotations

import contextlib
import logging
import random
import select
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from icefabric.control.agents.protocol import (
    MAX_FLOWS_PER_FRAME,
    AgentAddress,
    Bye,
    Caps,
    CapsAssembler,
    FlowReport,
    Flows,
    FrameReader,
    Heartbeat,
    Hello,
    Message,
    ProtocolError,
    Welcome,
    decode_body,
    encode,
    parse_address,
)
from icefabric.control.daemon.paths import PeerRejected, check_peer
from icefabric.control.flowkey import FlowKey
from icefabric.waiting import Deadline

log = logging.getLogger(__name__)

CapsCallback = Callable[[dict[FlowKey, float]], None]
StartsCallback = Callable[[tuple[tuple[str, float], ...]], None]
SILENT_HEARTBEATS = 3  # heartbeats without a frame before a connection counts as dead


@dataclass(slots=True, frozen=True, kw_only=True)
class Backoff:
    """Reconnect delays: initial, times factor per failed attempt, at most max, +- jitter."""

    initial_s: float = 0.05
    factor: float = 2.0
    max_s: float = 5.0
    jitter: float = 0.25  # fraction of the delay drawn uniformly either side

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The wait before reconnect attempt ``attempt`` (0-based)."""
        base = min(self.max_s, self.initial_s * self.factor ** min(attempt, 64))
        return max(0.0, base * (1.0 + self.jitter * (2.0 * rng.random() - 1.0)))


@dataclass(slots=True)
class ClientStats:
    """Counters of one client (read them for logs and tests)."""

    connects: int = 0
    connect_failures: int = 0
    refusals: int = 0  # the controller said bye during the handshake
    frames_sent: int = 0
    frames_received: int = 0
    malformed: int = 0  # frames that were not a valid message, ignored
    caps_received: int = 0  # complete cap sets delivered to the callback
    callback_errors: int = 0
    heartbeat_timeouts: int = 0


class AgentClient:
    """One host agent's connection to the controller (thread-safe)."""

    def __init__(
        self,
        address: str | Path | AgentAddress | Sequence[str | Path | AgentAddress],
        host: str,
        *,
        token: str | None = None,
        on_caps: CapsCallback,
        on_starts: StartsCallback | None = None,
        heartbeat_s: float = 1.0,
        connect_timeout_s: float = 2.0,
        backoff: Backoff | None = None,
        discover: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        given = [address] if isinstance(address, str | Path | AgentAddress) else list(address)
        self.addresses = [parse_address(a) for a in given]
        if not self.addresses:
            raise ValueError("AgentClient: no controller address given")
        self.address = self.addresses[0]  # the one tried next / connected to
        self.host = host
        self._token = token
        self._on_caps = on_caps
        self._on_starts = on_starts  # the start table of each complete set, after on_caps
        self.heartbeat_s = heartbeat_s  # the controller's welcome overrides it
        self._connect_timeout = connect_timeout_s
        self._backoff = backoff or Backoff()
        # asked for fresh addresses after every address failed once (the etcd store lists
        # every replica's channel, the primary's first): agents follow replicas that move
        self._discover = discover
        self._rng = random.Random(zlib.crc32(host.encode()))
        self.stats = ClientStats()
        self.session: int | None = None
        self._flows: dict[FlowKey, FlowReport] = {}
        self._caps: dict[FlowKey, float] = {}
        self._starts: tuple[tuple[str, float], ...] = ()
        self._lock = threading.Lock()  # guards _sock, _flows and every send
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._thread: threading.Thread | None = None
        self._seq = 0

    # -- public API ------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (in a background thread) and keep reconnecting until :meth:`close`."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"agent-client-{self.host}", daemon=True
        )
        self._thread.start()

    def report_flows(self, reports: Iterable[FlowReport]) -> None:
        """Report flows (new, changed or ``done``); sent now when connected, else on connect."""
        batch = list(reports)
        with self._lock:
            for r in batch:
                if r.state == "done":
                    self._flows.pop(r.key, None)
                else:
                    self._flows[r.key] = r
            if self._sock is not None and batch:
                self._send_flows_locked(batch, replace=False)

    def close(self, timeout: float = 2.0) -> None:
        """Say bye, stop reconnecting and wait for the thread."""
        self._stop.set()
        with self._lock:
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.sendall(encode(Bye(reason="agent closing")))
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def connected(self) -> bool:
        """True while a session with the controller is up."""
        return self._connected.is_set()

    def wait_connected(self, timeout: float) -> bool:
        """Block until connected (True) or ``timeout`` seconds passed (False)."""
        return self._connected.wait(timeout)

    def caps(self) -> dict[FlowKey, float]:
        """The last complete cap set received."""
        with self._lock:
            return dict(self._caps)

    def starts(self) -> tuple[tuple[str, float], ...]:
        """The start table of the last complete cap set ((prefix, bit/s) pairs)."""
        with self._lock:
            return self._starts

    def flows(self) -> list[FlowReport]:
        """The flows this client reports (not done)."""
        with self._lock:
            return list(self._flows.values())

    # -- connection ------------------------------------------------------------------------

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                sock, reader, rest = self._handshake()
            except (OSError, ProtocolError, PeerRejected) as exc:
                self.stats.connect_failures += 1
                level = logging.WARNING if attempt in (0, 5) else logging.DEBUG
                log.log(level, "agent %s: cannot connect to %s: %s", self.host, self.address, exc)
                nxt = (self.addresses.index(self.address) + 1) % len(self.addresses)
                self.address = self.addresses[nxt]
                if nxt == 0:  # back off once every address was tried
                    self._rediscover()
                    self._stop.wait(self._backoff.delay(attempt, self._rng))
                    attempt += 1
                continue
            attempt = 0
            try:
                self._serve(sock, reader, rest)
            finally:
                self._connected.clear()
                with self._lock:
                    self._sock = None
                sock.close()
            if not self._stop.is_set():
                log.warning(
                    "agent %s: connection to %s lost; reconnecting", self.host, self.address
                )
                self._stop.wait(self._backoff.delay(0, self._rng))

    def _rediscover(self) -> None:
        if self._discover is None:
            return
        try:
            fresh = [parse_address(a) for a in self._discover()]
        except Exception as exc:  # the store may be down too: keep the addresses we have
            log.debug("agent %s: discovering controllers failed: %s", self.host, exc)
            return
        if fresh:
            self.addresses = fresh
            self.address = fresh[0]

    def _open(self) -> socket.socket:
        addr = self.address
        if addr.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self._connect_timeout)
            try:
                sock.connect(str(addr.path))
                check_peer(sock, f"controller at {addr.path}")
            except BaseException:
                sock.close()
                raise
            return sock
        sock = socket.create_connection((addr.host, addr.port), timeout=self._connect_timeout)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _handshake(self) -> tuple[socket.socket, FrameReader, list[bytes]]:
        """Hello, then frames up to the welcome; frames that came with it are returned."""
        sock = self._open()
        reader = FrameReader()
        try:
            sock.sendall(encode(Hello(host=self.host, token=self._token)))
            deadline = Deadline(self._connect_timeout)
            while True:
                left = deadline.left()
                if left <= 0:
                    raise ProtocolError("no welcome from the controller in time")
                sock.settimeout(left)
                data = sock.recv(65536)
                if not data:
                    raise ProtocolError("controller closed the connection during the handshake")
                bodies = reader.feed(data)
                for i, body in enumerate(bodies):
                    msg = self._decode(body)
                    if isinstance(msg, Bye):
                        self.stats.refusals += 1
                        raise ProtocolError(f"controller refused the agent: {msg.reason}")
                    if isinstance(msg, Welcome):
                        self._welcomed(sock, msg)
                        return sock, reader, bodies[i + 1 :]
        except BaseException:
            sock.close()
            raise

    def _welcomed(self, sock: socket.socket, msg: Welcome) -> None:
        self.heartbeat_s = msg.heartbeat_s
        self.session = msg.session
        sock.settimeout(None)
        with self._lock:
            self._sock = sock
            self._send_flows_locked(list(self._flows.values()), replace=True)
        self.stats.connects += 1
        self._connected.set()
        log.info("agent %s: connected to %s (session %d)", self.host, self.address, msg.session)

    def _serve(self, sock: socket.socket, reader: FrameReader, rest: list[bytes]) -> None:
        pending_caps = CapsAssembler()
        if not self._handle(rest, pending_caps):
            return
        last_rx = time.monotonic()
        next_hb = last_rx + self.heartbeat_s
        while not self._stop.is_set():
            now = time.monotonic()
            if now - last_rx > SILENT_HEARTBEATS * self.heartbeat_s:
                self.stats.heartbeat_timeouts += 1
                log.warning("agent %s: controller silent for %.1f s", self.host, now - last_rx)
                return
            if now >= next_hb:
                self._seq += 1
                if not self._send(Heartbeat(seq=self._seq)):
                    return
                next_hb = now + self.heartbeat_s
            wait = max(0.0, min(next_hb - now, 0.2))
            try:
                ready, _, _ = select.select([sock], [], [], wait)
                if not ready:
                    continue
                data = sock.recv(65536)
            except (OSError, ValueError):
                return
            if not data:
                return
            last_rx = time.monotonic()
            try:
                bodies = reader.feed(data)
            except ProtocolError as exc:
                self.stats.malformed += 1
                log.warning("agent %s: %s; reconnecting", self.host, exc)
                return
            if not self._handle(bodies, pending_caps):
                return

    def _handle(self, bodies: list[bytes], pending_caps: CapsAssembler) -> bool:
        """Act on frames from the controller; False when it said bye."""
        for body in bodies:
            msg = self._decode(body)
            if isinstance(msg, Caps):
                complete = pending_caps.add(msg)
                if complete is not None:
                    self._deliver_caps(complete, pending_caps.starts)
            elif isinstance(msg, Bye):
                log.info("agent %s: controller said bye: %s", self.host, msg.reason)
                return False
        return True

    def _decode(self, body: bytes) -> Message | None:
        self.stats.frames_received += 1
        try:
            return decode_body(body)
        except ProtocolError as exc:
            self.stats.malformed += 1
            log.warning(
                "agent %s: ignoring a malformed frame from the controller: %s", self.host, exc
            )
            return None

    def _deliver_caps(
        self, caps: dict[FlowKey, float], starts: tuple[tuple[str, float], ...] = ()
    ) -> None:
        with self._lock:
            self._caps = dict(caps)
            self._starts = starts
        self.stats.caps_received += 1
        try:
            self._on_caps(dict(caps))
            if self._on_starts is not None:
                self._on_starts(starts)
        except Exception:  # the channel must outlive a faulty callback
            self.stats.callback_errors += 1
            log.exception("agent %s: on_caps callback failed", self.host)

    def _send(self, msg: Message) -> bool:
        with self._lock:
            return self._send_locked(msg)

    def _send_locked(self, msg: Message) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.sendall(encode(msg))
        except OSError as exc:
            log.debug("agent %s: send failed: %s", self.host, exc)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # the reader sees it and reconnects
            return False
        self.stats.frames_sent += 1
        return True

    def _send_flows_locked(self, reports: list[FlowReport], *, replace: bool) -> None:
        for i in range(0, max(len(reports), 1), MAX_FLOWS_PER_FRAME):
            chunk = tuple(reports[i : i + MAX_FLOWS_PER_FRAME])
            if not self._send_locked(Flows(flows=chunk, replace=replace and i == 0)):
                return
