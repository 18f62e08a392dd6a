"""The controller's local API: length-prefixed JSON requests over a Unix-domain socket.

Wire format (both directions): a 4-byte big-endian unsigned length, then that many bytes of UTF-8
JSON. A request is ``{"op": "jobs.add", "args": {...}}``; the reply is ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": {"kind": "...", "message": "..."}}``. One connection may carry many
requests; the server answers them in order. ``kind`` is ``"usage"`` for a request the caller got
wrong (unknown op, bad arguments, validation failure) and ``"runtime"`` for a failure on the
controller's side, so a CLI can map them onto exit codes 2 and 1.

Trust: the socket lives in the caller's private runtime directory (``paths.default_socket()``) and
is mode 0600; both ends check the other's uid with ``SO_PEERCRED`` (same uid or root) before a
byte of a request is read or sent, so another local user can neither squat the path nor talk to
the controller. Frames are bounded (``MAX_FRAME`` bytes, ``MAX_DEPTH`` levels of JSON nesting).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from icefabric.control.daemon.paths import PeerRejected, check_peer, default_socket, is_listening
from icefabric.files import JsonError, parse_json
from icefabric.private import UnsafePathError, ensure_private_dir, runtime_dir
from icefabric.waiting import Deadline

log = logging.getLogger(__name__)

MAX_FRAME = 16 * 1024 * 1024
MAX_DEPTH = 64  # JSON nesting of one frame
BACKLOG = 1024  # pending connections (a burst of icectl calls must not see EAGAIN)
CONNECT_RETRY_S = (0.005, 0.25)  # first and longest pause between connect attempts
_HEADER = struct.Struct("!I")

Handler = Callable[[dict[str, Any]], Any]


class ApiError(Exception):
    """An error reply from the controller (kind ``usage`` or ``runtime``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class ApiUnavailable(Exception):
    """The controller's socket cannot be reached or the connection broke."""


class RequestError(Exception):
    """Raised by a handler for a request the caller got wrong (reported as kind ``usage``)."""


class OperationFailed(Exception):
    """Raised by a handler whose operation failed and changed nothing (kind ``runtime``; the
    message is shown as it is, without an exception name)."""


class FrameError(Exception):
    """A frame on the wire is malformed (too long, not JSON, not an object)."""


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """Encode one message as a length-prefixed JSON frame."""
    body = json.dumps(message, separators=(",", ":"), sort_keys=True).encode()
    if len(body) > MAX_FRAME:
        raise FrameError(f"frame of {len(body)} bytes exceeds the limit of {MAX_FRAME}")
    return _HEADER.pack(len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """Read exactly n bytes; None on a clean end of stream before the first byte."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            if got == 0:
                return None
            raise FrameError(f"connection closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> dict[str, Any] | None:
    """Read one frame and decode it; None when the peer closed the connection between frames."""
    header = _recv_exact(sock, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameError(f"frame length {length} exceeds the limit of {MAX_FRAME}")
    body = _recv_exact(sock, length) if length else b""
    if body is None:
        raise FrameError(f"connection closed before a body of {length} bytes")
    if _nesting(body) > MAX_DEPTH:
        raise FrameError(f"frame nests JSON deeper than {MAX_DEPTH} levels")
    try:  # bounded integers too: a 5000-digit one raised Python's ValueError here
        message = parse_json(body, max_depth=MAX_DEPTH)
    except JsonError as exc:
        raise FrameError(f"frame is not UTF-8 JSON: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"frame must hold a JSON object, got {type(message).__name__}")
    return message


def _nesting(body: bytes) -> int:
    """The deepest bracket nesting of a JSON text (strings skipped), in one linear pass."""
    depth = deepest = 0
    in_str = escape = False
    for c in body:
        if in_str:
            if escape:
                escape = False
            elif c == 0x5C:  # backslash
                escape = True
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif c in (0x5D, 0x7D):
            depth -= 1
    return deepest


class ApiServer:
    """Serves named operations on a Unix-domain socket, one thread per connection."""

    def __init__(self, path: str | Path, handlers: Mapping[str, Handler]) -> None:
        self.path = Path(path)
        self._handlers = dict(handlers)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Bind the socket (replacing a stale one of ours nobody listens on), mode 0600, and
        start accepting."""
        try:
            if self.path.parent == runtime_dir():
                ensure_private_dir(self.path.parent)
            if self.path.exists() or self.path.is_symlink():
                st = os.lstat(self.path)
                if not stat.S_ISSOCK(st.st_mode):
                    raise UnsafePathError(
                        f"{self.path}: exists and is not a socket; refusing to replace it "
                        "(choose another --socket)"
                    )
                if st.st_uid != os.geteuid():
                    raise UnsafePathError(
                        f"{self.path}: owned by uid {st.st_uid}, not by you; refusing to use it "
                        "(choose another --socket)"
                    )
                if is_listening(self.path):
                    raise ApiUnavailable(f"{self.path}: another controller is already listening")
                self.path.unlink()
        except OSError as exc:
            raise ApiUnavailable(str(exc)) from exc
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is created 0600: no window for others
        try:
            sock.bind(str(self.path))
        except OSError as exc:
            sock.close()
            raise ApiUnavailable(f"{self.path}: cannot bind: {exc.strerror}") from exc
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(BACKLOG)
        sock.settimeout(0.2)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept_loop, name="icectl-api", daemon=True)
        self._thread.start()
        log.info("API listening on %s", self.path)

    def stop(self) -> None:
        """Stop accepting, close open connections and remove the socket file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            conn.settimeout(None)
            with self._lock:
                self._conns.add(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name="icectl-api-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            try:
                check_peer(conn, f"API client on {self.path}")
            except PeerRejected as exc:
                log.warning("%s", exc)
                return
            while not self._stop.is_set():
                try:
                    request = read_frame(conn)
                except FrameError as exc:
                    conn.sendall(encode_frame(_error("usage", str(exc))))
                    return
                if request is None:
                    return
                conn.sendall(encode_frame(self.dispatch(request)))
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def dispatch(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Run one request through its handler and build the reply."""
        op = request.get("op")
        args = request.get("args", {})
        if not isinstance(op, str) or op not in self._handlers:
            known = ", ".join(sorted(self._handlers))
            return _error("usage", f"unknown op {op!r}; expected one of: {known}")
        if not isinstance(args, dict):
            return _error("usage", f"op {op}: 'args' must be a JSON object")
        try:
            result = self._handlers[op](args)
        except RequestError as exc:
            return _error("usage", f"{op}: {exc}")
        except OperationFailed as exc:
            return _error("runtime", f"{op}: {exc}")
        except Exception as exc:  # the daemon must survive any handler failure
            log.exception("API op %s failed", op)
            return _error("runtime", f"{op}: {type(exc).__name__}: {exc}")
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            log.error("API op %s returned a result that is not JSON: %s", op, exc)
            return _error("runtime", f"{op}: result is not JSON-serialisable: {exc}")
        return {"ok": True, "result": result}


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message}}


class ApiClient:
    """A connection to the controller's API socket; use as a context manager."""

    def __init__(self, path: str | Path | None = None, *, timeout: float = 10.0) -> None:
        self.path = Path(path) if path is not None else default_socket()
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = self._connect_retrying()
            try:
                check_peer(sock, f"controller socket {self.path}")
            except OSError as exc:
                sock.close()
                raise ApiUnavailable(str(exc)) from exc
            self._sock = sock
        return self._sock

    def _connect_retrying(self) -> socket.socket:
        """Connect, retrying with a growing pause while the listen backlog is full (EAGAIN)."""
        deadline = Deadline(self.timeout)
        pause = CONNECT_RETRY_S[0]
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(str(self.path))
                return sock
            except OSError as exc:
                sock.close()
                busy = exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
                if busy and pause < deadline.left():
                    time.sleep(pause)
                    pause = min(pause * 2, CONNECT_RETRY_S[1])
                    continue
                reason = exc.strerror or str(exc)
                raise ApiUnavailable(
                    f"cannot reach the controller at {self.path}: {reason} "
                    "(is `icectl run` running with this --socket?)"
                ) from exc

    def call(self, op: str, **args: Any) -> Any:
        """Send one request and return its result; ApiError on an error reply."""
        sock = self._connect()
        try:
            sock.sendall(encode_frame({"op": op, "args": args}))
            reply = read_frame(sock)
        except (OSError, FrameError) as exc:
            self.close()
            raise ApiUnavailable(f"connection to {self.path} failed: {exc}") from exc
        if reply is None:
            self.close()
            raise ApiUnavailable(f"controller at {self.path} closed the connection")
        if reply.get("ok") is True:
            return reply.get("result")
        err = reply.get("error") or {}
        raise ApiError(str(err.get("kind", "runtime")), str(err.get("message", "unknown error")))

    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
