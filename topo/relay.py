"""A TCP-to-Unix-socket relay: P4Runtime on 127.0.0.1 for a switch in its own network namespace.

A BMv2 switch in Mininet runs in a network namespace of its own (so its thrift server, which
listens on every address, is reachable only inside it) and serves P4Runtime on a Unix socket;
the filesystem is shared, so the relay, in the root namespace, accepts on ``127.0.0.1:PORT`` and
copies bytes both ways to that socket. gRPC does not care what carries its HTTP/2 stream.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading

log = logging.getLogger(__name__)

CHUNK = 65536


class TcpToUnixRelay:
    """Accept on ``host:port`` (loopback), relay every connection to the Unix socket ``path``."""

    def __init__(self, host: str, port: int, path: str) -> None:
        self.path = path
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._listener.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._peer: dict[socket.socket, socket.socket] = {}
        self._unreachable = False  # the switch's socket refused the last connection
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"relay-{port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting and close every relayed connection."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(5.0)
        for s in [self._listener, self._wake_r, self._wake_w, *self._peer]:
            with contextlib.suppress(OSError):
                s.close()
        self._peer.clear()
        self._sel.close()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.path)
        except OSError as e:
            # once per outage: the controller retries a dead switch every few hundred ms, and
            # a line each time flooded the Mininet CLI (the README tour's next prompt was lost)
            if not self._unreachable:
                log.warning(
                    "relay: cannot reach %s: %s (again at DEBUG until it answers)", self.path, e
                )
            else:
                log.debug("relay: cannot reach %s: %s", self.path, e)
            self._unreachable = True
            client.close()
            upstream.close()
            return
        if self._unreachable:
            log.info("relay: %s answers again", self.path)
            self._unreachable = False
        for s in (client, upstream):
            s.setblocking(False)
        self._peer[client], self._peer[upstream] = upstream, client
        self._sel.register(client, selectors.EVENT_READ, None)
        self._sel.register(upstream, selectors.EVENT_READ, None)

    def _drop(self, s: socket.socket) -> None:
        other = self._peer.pop(s, None)
        for x in (s, other):
            if x is None:
                continue
            self._peer.pop(x, None)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(x)
            x.close()

    def _pump(self, s: socket.socket) -> None:
        try:
            data = s.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        other = self._peer.get(s)
        if not data or other is None:
            self._drop(s)
            return
        try:
            other.setblocking(True)  # a short blocking write keeps the stream in order
            other.sendall(data)
            other.setblocking(False)
        except OSError:
            self._drop(s)

    def _main(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.5):
                s = key.fileobj
                if s is self._listener:
                    self._accept()
                elif s is self._wake_r:
                    return
                elif isinstance(s, socket.socket) and s in self._peer:
                    self._pump(s)
