"""The controller side of the agent channel: :class:`AgentServer` accepts host agents on a
Unix-domain socket (peers checked with SO_PEERCRED) and optionally on TCP (each host's token,
bound to its name: :func:`~icefabric.control.agents.auth.host_token`),
keeps each connected host's flow reports, sends heartbeats and cap sets, and tells its owner
when a host joins, reports or is lost.

One selector thread serves every connection (non-blocking sockets, bounded output buffers);
the owner's callback runs on that thread and must be quick (the controller queues the work on
its own worker).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from icefabric.control.agents.auth import host_token_matches, peer_pid
from icefabric.control.agents.protocol import (
    MAX_FRAME,
    AgentAddress,
    Bye,
    FlowReport,
    Flows,
    FrameReader,
    Heartbeat,
    Hello,
    Message,
    ProtocolError,
    Welcome,
    caps_frames,
    decode_body,
    encode,
    parse_address,
)
from icefabric.control.daemon.paths import PeerRejected, check_peer, is_listening
from icefabric.control.flowkey import FlowKey

log = logging.getLogger(__name__)

EventKind = Literal["joined", "flows", "lost"]
EventCallback = Callable[[str, EventKind], None]
SILENT_HEARTBEATS = 3  # heartbeats without a frame before an agent counts as lost
HANDSHAKE_S = 5.0  # a connection must say hello within this
MAX_OUTBUF = 16 * 1024 * 1024  # an agent that does not read is dropped past this
MAX_CONNECTIONS = 8192
MAX_HELLO_FRAME = 4096  # before its hello a connection may send only small frames
MAX_FLOWS_PER_HOST = 65_536


class AgentServerError(Exception):
    """The agent channel cannot listen (one-line reason)."""


@dataclass(slots=True)
class ServerStats:
    """Counters of the agent channel."""

    accepted: int = 0
    refused: int = 0  # peer credentials, token, version, standby, limits
    malformed: int = 0  # frames that were not a valid message, ignored
    lost: int = 0  # sessions that ended without a bye (connection broke, heartbeats missed)
    frames_received: int = 0
    frames_sent: int = 0
    caps_pushed: int = 0


@dataclass(slots=True)
class _Conn:
    sock: socket.socket
    peer: str
    is_unix: bool
    opened: float
    reader: FrameReader = field(default_factory=lambda: FrameReader(MAX_HELLO_FRAME))
    out: bytearray = field(default_factory=bytearray)
    host: str | None = None
    session: int = 0
    last_rx: float = 0.0
    next_hb: float = 0.0
    hb_seq: int = 0
    closing: bool = False  # close once ``out`` is flushed


@dataclass(slots=True)
class AgentSession:
    """One connected host agent as the controller sees it."""

    host: str
    session: int
    peer: str
    since: float  # wall clock
    flows: dict[FlowKey, FlowReport] = field(default_factory=dict)
    malformed: int = 0
    caps: dict[FlowKey, float] = field(default_factory=dict)
    caps_sent: int = 0
    last_rx: float = 0.0  # monotonic

    def to_dict(self, now: float) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "host": self.host,
            "session": self.session,
            "peer": self.peer,
            "since": self.since,
            "flows": len(self.flows),
            "caps": len(self.caps),
            "caps_sent": self.caps_sent,
            "malformed": self.malformed,
            "last_seen_ms": round((now - self.last_rx) * 1e3, 1),
        }


class AgentServer:
    """Accepts host agents and keeps their sessions (thread-safe)."""

    def __init__(
        self,
        unix_path: str | Path | None,
        *,
        tcp: str | AgentAddress | None = None,
        token: str | None = None,
        heartbeat_s: float = 1.0,
        on_event: EventCallback | None = None,
        accepting: Callable[[], bool] = lambda: True,
        known_host: Callable[[str], bool] = lambda h: True,
        name: str = "icectl",
    ) -> None:
        self.unix_path = Path(unix_path) if unix_path is not None else None
        self.tcp = parse_address(tcp) if tcp is not None else None
        if self.tcp is not None and self.tcp.is_unix:
            raise AgentServerError(f"agent TCP address {tcp}: expected HOST:PORT")
        if self.tcp is not None and not token:
            raise AgentServerError("agents on TCP need a token (--agent-token-file)")
        if self.unix_path is None and self.tcp is None:
            raise AgentServerError("agent channel: give a Unix socket path or a TCP address")
        self._token = token
        self.heartbeat_s = heartbeat_s
        self._on_event = on_event
        self._accepting = accepting
        self._known_host = known_host
        self.name = name
        self.stats = ServerStats()
        self._lock = threading.Lock()  # guards _conns' out buffers, _sessions, _by_host
        self._sel = selectors.DefaultSelector()
        self._listeners: list[socket.socket] = []
        self._conns: dict[int, _Conn] = {}
        self._sessions: dict[str, AgentSession] = {}
        self._by_host: dict[str, _Conn] = {}
        self._session_seq = 0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.tcp_port: int | None = None  # the bound port (useful with port 0)

    # -- lifetime --------------------------------------------------------------------------

    def start(self) -> None:
        """Bind the listeners and start serving (AgentServerError when it cannot)."""
        try:
            if self.unix_path is not None:
                self._listeners.append(self._bind_unix(self.unix_path))
            if self.tcp is not None:
                self._listeners.append(self._bind_tcp(self.tcp))
        except AgentServerError:
            for s in self._listeners:
                s.close()
            self._listeners.clear()
            raise
        for s in self._listeners:
            s.setblocking(False)
            self._sel.register(s, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._loop, name="agent-server", daemon=True)
        self._thread.start()
        log.info(
            "agent channel on %s",
            ", ".join(
                str(x)
                for x in (
                    f"unix:{self.unix_path}" if self.unix_path else None,
                    f"tcp:{self.tcp.host}:{self.tcp_port}" if self.tcp else None,
                )
                if x
            ),
        )

    def stop(self) -> None:
        """Say bye to every agent, close everything and remove the socket file."""
        with self._lock:
            for c in self._conns.values():
                if c.host is not None:
                    c.out += encode(Bye(reason="controller stopping"))
        self._wake()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
            self._sessions.clear()
            self._by_host.clear()
        for c in conns:
            with contextlib.suppress(OSError):
                c.sock.send(bytes(c.out[:65536]))
            c.sock.close()
        for s in self._listeners:
            s.close()
        self._listeners.clear()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
        if self.unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_path.unlink()

    def _bind_unix(self, path: Path) -> socket.socket:
        if path.is_symlink() or path.exists():
            try:
                st = path.lstat()
            except OSError as exc:
                raise AgentServerError(f"{path}: {exc.strerror}") from None
            if not stat.S_ISSOCK(st.st_mode):
                raise AgentServerError(f"{path}: exists and is not a socket; refusing to replace")
            if is_listening(path):
                raise AgentServerError(f"{path}: another controller already listens for agents")
            if st.st_uid not in (os.geteuid(), 0):
                raise AgentServerError(f"{path}: stale socket owned by uid {st.st_uid}")
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is 0600 from the start: no window for others
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise AgentServerError(f"{path}: cannot bind: {exc.strerror}") from None
        finally:
            os.umask(old)
        sock.listen(256)
        return sock

    def _bind_tcp(self, addr: AgentAddress) -> socket.socket:
        try:
            infos = socket.getaddrinfo(addr.host, addr.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise AgentServerError(f"agent address {addr}: {exc}") from None
        family, _, _, _, sockaddr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            sock.close()
            raise AgentServerError(f"agent address {addr}: cannot bind: {exc.strerror}") from None
        sock.listen(256)
        self.tcp_port = int(sock.getsockname()[1])
        return sock

    # -- the owner's view ------------------------------------------------------------------

    def push_caps(
        self, host: str, caps: Mapping[FlowKey, float], starts: tuple[tuple[str, float], ...] = ()
    ) -> bool:
        """Send ``host`` its complete cap set (with its start table); False when the host is
        not connected."""
        frames = caps_frames(caps, starts)
        with self._lock:
            conn = self._by_host.get(host)
            sess = self._sessions.get(host)
            if conn is None or sess is None:
                return False
            conn.out += frames
            sess.caps = dict(caps)
            sess.caps_sent += 1
            self.stats.caps_pushed += 1
        self._wake()
        return True

    def hosts(self) -> list[str]:
        """The hosts connected now."""
        with self._lock:
            return sorted(self._sessions)

    def sessions(self) -> list[dict[str, Any]]:
        """Every connected agent as plain data."""
        now = time.monotonic()
        with self._lock:
            return [self._sessions[h].to_dict(now) for h in sorted(self._sessions)]

    def flows(self, host: str | None = None) -> dict[str, list[FlowReport]]:
        """The flows each connected host reports (one host, or all)."""
        with self._lock:
            hosts = [host] if host is not None else list(self._sessions)
            return {h: list(self._sessions[h].flows.values()) for h in hosts if h in self._sessions}

    def caps(self, host: str | None = None) -> dict[str, dict[FlowKey, float]]:
        """The cap set last pushed to each connected host."""
        with self._lock:
            hosts = [host] if host is not None else list(self._sessions)
            return {h: dict(self._sessions[h].caps) for h in hosts if h in self._sessions}

    def disconnect_all(self, reason: str) -> None:
        """Say bye to every agent and close (a controller that stops being active)."""
        with self._lock:
            for c in self._conns.values():
                if c.host is not None:
                    c.out += encode(Bye(reason=reason))
                    c.closing = True
        self._wake()

    # -- the loop --------------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._sel.select(timeout=min(0.1, self.heartbeat_s / 2))
            except OSError:
                return
            for key, mask in events:
                if key.data == "listen":
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                else:
                    conn: _Conn = key.data
                    try:
                        if mask & selectors.EVENT_READ:
                            self._read(conn)
                        if mask & selectors.EVENT_WRITE and conn.sock.fileno() >= 0:
                            self._flush(conn)
                    except Exception:  # one connection's bug must not end the channel
                        log.exception("agent channel: dropping %s after an error", conn.peer)
                        self.stats.malformed += 1
                        with contextlib.suppress(Exception):
                            self._close(conn, lost=True, why="internal error")
            try:
                self._housekeeping()
            except Exception:
                log.exception("agent channel: housekeeping failed")

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.warning("agent channel: accept failed: %s", exc)
            return
        is_unix = sock.family == socket.AF_UNIX
        peer = "unix" if is_unix else f"{addr[0]}:{addr[1]}"
        if len(self._conns) >= MAX_CONNECTIONS:
            self.stats.refused += 1
            log.warning("agent channel: %d connections, refusing %s", MAX_CONNECTIONS, peer)
            sock.close()
            return
        if is_unix:
            try:
                check_peer(sock, "agent socket")
                peer = f"unix pid {peer_pid(sock)}"
            except (PeerRejected, OSError) as exc:
                self.stats.refused += 1
                log.warning("agent channel: %s", exc)
                sock.close()
                return
        sock.setblocking(False)
        now = time.monotonic()
        conn = _Conn(sock=sock, peer=peer, is_unix=is_unix, opened=now, last_rx=now)
        with self._lock:
            self._conns[sock.fileno()] = conn
        self._sel.register(sock, selectors.EVENT_READ, conn)
        self.stats.accepted += 1

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn, lost=True, why="connection closed")
            return
        conn.last_rx = time.monotonic()
        try:
            bodies = conn.reader.feed(data)
        except ProtocolError as exc:
            self.stats.malformed += 1
            self._close(conn, lost=True, why=str(exc))
            return
        for body in bodies:
            self.stats.frames_received += 1
            try:
                msg = decode_body(body)
            except ProtocolError as exc:
                self._malformed(conn, str(exc))
                if conn.host is None:  # a bad hello ends the connection
                    self._refuse(conn, f"expected a hello: {exc}")
                    return
                continue
            if conn.host is None:
                if not self._hello(conn, msg):
                    return
            else:
                self._message(conn, msg)
                if conn.sock.fileno() < 0:
                    return

    def _malformed(self, conn: _Conn, why: str) -> None:
        self.stats.malformed += 1
        with self._lock:
            sess = self._sessions.get(conn.host) if conn.host else None
            if sess is not None:
                sess.malformed += 1
        log.warning("agent %s (%s): ignoring a malformed frame: %s", conn.host, conn.peer, why)

    def _hello(self, conn: _Conn, msg: Message) -> bool:
        if not isinstance(msg, Hello):
            self._refuse(conn, f"expected a hello first, got {msg.type}")
            return False
        if not conn.is_unix and not host_token_matches(self._token, msg.host, msg.token):
            # Refused before anything is touched: the session of the host named stays up.
            self._refuse(conn, f"bad or missing token for host {msg.host!r}")
            return False
        if not self._accepting():
            self._refuse(conn, "standby controller: not active")
            return False
        if not self._known_host(msg.host):
            self._refuse(conn, f"no host {msg.host!r} in the topology")
            return False
        now = time.monotonic()
        with self._lock:
            old = self._by_host.pop(msg.host, None)
            self._session_seq += 1
            conn.host = msg.host
            conn.reader.allow(MAX_FRAME)
            conn.session = self._session_seq
            conn.next_hb = now + self.heartbeat_s
            self._by_host[msg.host] = conn
            self._sessions[msg.host] = AgentSession(
                host=msg.host,
                session=conn.session,
                peer=conn.peer,
                since=time.time(),
                last_rx=now,
            )
            conn.out += encode(
                Welcome(heartbeat_s=self.heartbeat_s, controller=self.name, session=conn.session)
            )
        if old is not None:
            log.info("agent %s: new session replaces the old one", msg.host)
            old.host = None  # its end is not a loss: the host is connected again
            self._close(old, lost=False, why="replaced")
        log.info("agent %s connected (%s, session %d)", msg.host, conn.peer, conn.session)
        self._flush(conn)
        self._emit(msg.host, "joined")
        return True

    def _message(self, conn: _Conn, msg: Message) -> None:
        host = conn.host
        assert host is not None
        if isinstance(msg, Flows):
            with self._lock:
                sess = self._sessions.get(host)
                if sess is None:
                    return
                if msg.replace:
                    sess.flows.clear()
                for r in msg.flows:
                    if r.state == "done":
                        sess.flows.pop(r.key, None)
                    elif r.key in sess.flows or len(sess.flows) < MAX_FLOWS_PER_HOST:
                        sess.flows[r.key] = r
                    else:
                        sess.malformed += 1
                        self.stats.malformed += 1
                        log.warning("agent %s: more than %d flows", host, MAX_FLOWS_PER_HOST)
                sess.last_rx = conn.last_rx
            self._emit(host, "flows")
        elif isinstance(msg, Heartbeat):
            with self._lock:
                sess = self._sessions.get(host)
                if sess is not None:
                    sess.last_rx = conn.last_rx
        elif isinstance(msg, Bye):
            log.info("agent %s said bye: %s", host, msg.reason)
            self._close(conn, lost=False, why=msg.reason or "bye")
        else:
            self._malformed(conn, f"unexpected {msg.type} from an agent")

    def _refuse(self, conn: _Conn, reason: str) -> None:
        self.stats.refused += 1
        log.warning("agent channel: refusing %s: %s", conn.peer, reason)
        with contextlib.suppress(OSError):
            conn.sock.send(encode(Bye(reason=reason)))
        self._close(conn, lost=False, why=reason)

    def _close(self, conn: _Conn, *, lost: bool, why: str) -> None:
        host = conn.host
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        with self._lock:
            self._conns.pop(conn.sock.fileno(), None)
            ended = host is not None and self._by_host.get(host) is conn
            if ended:
                assert host is not None
                del self._by_host[host]
                self._sessions.pop(host, None)
        conn.sock.close()
        if ended and host is not None:
            if lost:
                self.stats.lost += 1
                log.warning("agent %s lost: %s", host, why)
            self._emit(host, "lost")

    def _flush(self, conn: _Conn) -> None:
        with self._lock:
            if conn.out:
                try:
                    sent = conn.sock.send(conn.out)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    sent = -1
                if sent > 0:
                    del conn.out[:sent]
            else:
                sent = 0
            pending = len(conn.out)
        if sent < 0:
            self._close(conn, lost=True, why="send failed")
            return
        if pending > MAX_OUTBUF:
            self._close(conn, lost=True, why=f"{pending} bytes unread by the agent")
            return
        if conn.closing and not pending:
            self._close(conn, lost=False, why="closed by the controller")
            return
        with contextlib.suppress(KeyError, ValueError):
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if pending else 0)
            self._sel.modify(conn.sock, events, conn)

    def _housekeeping(self) -> None:
        now = time.monotonic()
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            if c.host is None:
                if now - c.opened > HANDSHAKE_S:
                    self._refuse(c, f"no hello within {HANDSHAKE_S:.0f} s")
                continue
            if now - c.last_rx > SILENT_HEARTBEATS * self.heartbeat_s:
                self._close(c, lost=True, why=f"silent for {now - c.last_rx:.1f} s")
                continue
            if now >= c.next_hb:
                c.hb_seq += 1
                c.next_hb = now + self.heartbeat_s
                with self._lock:
                    c.out += encode(Heartbeat(seq=c.hb_seq))
            if c.out or c.closing:
                self._flush(c)

    def _emit(self, host: str, kind: EventKind) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(host, kind)
        except Exception:  # the channel must outlive its owner's bugs
            log.exception("agent channel: event handler failed for %s %s", host, kind)
