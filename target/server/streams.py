"""Bounds on StreamChannels, so idle streams cannot take every worker thread of the server.

The gRPC server runs each RPC on a worker of a fixed pool and a StreamChannel holds its worker
for as long as it is open. At most ``MAX_STREAMS`` streams are open at once and at most
``MAX_STREAMS_PER_PEER`` from one peer (one TCP connection of a client); a further stream is
answered with RESOURCE_EXHAUSTED, as P4Runtime says. The pool has ``UNARY_RESERVE`` workers more
than ``MAX_STREAMS``, so Read, Write, Capabilities and the pipeline RPCs always find one. A
stream that has not sent its MasterArbitrationUpdate within ``ARBITRATION_TIMEOUT_S`` is closed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

MAX_STREAMS = 16
MAX_STREAMS_PER_PEER = 4
UNARY_RESERVE = 16
ARBITRATION_TIMEOUT_S = 10.0


@dataclass(slots=True)
class StreamLimiter:
    """Counts open streams in total and per peer."""

    max_streams: int = MAX_STREAMS
    max_per_peer: int = MAX_STREAMS_PER_PEER
    _open: dict[str, int] = field(default_factory=dict)
    _total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(self, peer: str) -> str | None:
        """Count a new stream from ``peer``; None when admitted, else why not."""
        key = per_peer_key(peer)
        with self._lock:
            if self._total >= self.max_streams:
                return f"{self._total} StreamChannels are open, the switch's limit"
            if key and self._open.get(key, 0) >= self.max_per_peer:
                return f"{self.max_per_peer} StreamChannels are open from {peer}, the limit"
            self._total += 1
            if key:
                self._open[key] = self._open.get(key, 0) + 1
            return None

    def release(self, peer: str) -> None:
        """Forget one stream of ``peer``."""
        key = per_peer_key(peer)
        with self._lock:
            self._total -= 1
            if key:
                left = self._open.get(key, 0) - 1
                if left > 0:
                    self._open[key] = left
                else:
                    self._open.pop(key, None)

    @property
    def total(self) -> int:
        """Streams open now."""
        return self._total


def per_peer_key(peer: str) -> str:
    """The client a stream is counted against: its TCP connection (``ipv4:host:port``); Unix
    socket peers cannot be told apart, so they count only towards the total ("")."""
    return "" if peer.startswith("unix") else peer
