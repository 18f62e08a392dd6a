"""A WSGI server for scrape endpoints (``/metrics``) that a client cannot exhaust.

prometheus-client's ``ThreadingWSGIServer`` starts one thread per connection with no cap and no
timeout: 400 idle half-sent requests hold 400 threads for ever. :class:`BoundedWSGIServer`
serves from a fixed pool of ``workers`` threads; a connection that finds every worker busy is
answered ``503`` at once and closed; a worker gives up on a client silent for ``idle_s`` (socket
timeout) and the accept loop cuts any request still open after ``request_s`` (a client that
trickles one byte at a time). Memory and threads are bounded by ``workers`` + the listen
backlog, whatever the clients do.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

log = logging.getLogger(__name__)

WORKERS = 4  # scrapes served at once
IDLE_S = 5.0  # a client silent this long is dropped
REQUEST_S = 15.0  # no request stays open longer
BACKLOG = 64  # connections waiting to be accepted
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass(slots=True)
class HttpStats:
    """Counters of one endpoint."""

    served: int = 0
    busy: int = 0  # answered 503: every worker was busy
    cut: int = 0  # open past the request deadline


class BoundedWSGIServer(WSGIServer):
    """WSGIServer with a bounded worker pool and per-connection timeouts (see the module)."""

    request_queue_size = BACKLOG
    allow_reuse_address = True

    def __init__(
        self,
        server_address: tuple[str, int],
        handler: type[WSGIRequestHandler],
        *,
        workers: int = WORKERS,
        idle_s: float = IDLE_S,
        request_s: float = REQUEST_S,
    ) -> None:
        self.workers = workers
        self.idle_s = idle_s
        self.request_s = request_s
        self.stats = HttpStats()
        self._slots = threading.BoundedSemaphore(self.workers)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="http-worker")
        self._open: dict[socket.socket, float] = {}  # request -> deadline
        self._lock = threading.Lock()
        super().__init__(server_address, handler)  # binds: server_close() on failure needs the pool

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the connection to a free worker, or answer 503 when none is free."""
        if not self._slots.acquire(blocking=False):
            self.stats.busy += 1
            with contextlib.suppress(OSError):
                request.settimeout(0.1)
                request.sendall(_BUSY)
            self.shutdown_request(request)
            return
        request.settimeout(self.idle_s)
        with self._lock:
            self._open[request] = time.monotonic() + self.request_s
        self._pool.submit(self._work, request, client_address)

    def _work(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
            self.stats.served += 1
        except Exception:  # a client's broken request must not end the worker
            log.debug("http: request from %s failed", client_address, exc_info=True)
        finally:
            with self._lock:
                self._open.pop(request, None)
            self.shutdown_request(request)
            self._slots.release()

    def service_actions(self) -> None:
        """Run by serve_forever between polls: cut requests open past their deadline."""
        now = time.monotonic()
        with self._lock:
            late = [r for r, t in self._open.items() if t < now]
            for r in late:
                del self._open[r]
        for r in late:
            self.stats.cut += 1
            with contextlib.suppress(OSError):
                r.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        """Close the listener and let the workers finish."""
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class QuietHandler(WSGIRequestHandler):
    """Request lines go to the debug log, not stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: " + format, *args)


def serve_wsgi(
    host: str,
    port: int,
    app: Any,
    *,
    name: str,
    workers: int = WORKERS,
    idle_s: float = IDLE_S,
    request_s: float = REQUEST_S,
) -> tuple[BoundedWSGIServer, threading.Thread]:
    """Bind ``app`` on HOST:PORT with the bounds above and serve it in a daemon thread
    (OSError when the address cannot be bound). Stop with ``shutdown()`` + ``server_close()``."""
    server = BoundedWSGIServer(
        (host, port), QuietHandler, workers=workers, idle_s=idle_s, request_s=request_s
    )
    server.set_app(app)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.25}, name=name, daemon=True
    )
    thread.start()
    return server, thread
