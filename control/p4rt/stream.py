"""The StreamChannel of one switch connection: a background thread, arbitration, inbound queues."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from .p4info import P4InfoIndex
from .packets import (
    ArbitrationUpdate,
    DigestList,
    IdleTimeoutNotification,
    PacketIn,
    StreamErrorMessage,
)

LOG = logging.getLogger(__name__)

StreamKind = Literal["packet", "digest", "arbitration", "error", "idle_timeout", "connection"]
STREAM_KINDS: tuple[StreamKind, ...] = (
    "packet",
    "digest",
    "arbitration",
    "error",
    "idle_timeout",
    "connection",
)


@dataclass(slots=True, frozen=True, kw_only=True)
class ConnectionEvent:
    """The stream came up (arbitrated) or went down, with the reason when it went down."""

    connected: bool
    attempt: int = 0  # 0 for the first connection, n for the n-th reconnection
    reason: str = ""


def election_uint128(election_id: int) -> p4runtime_pb2.Uint128:
    """A 128-bit election id as p4.v1.Uint128."""
    if not 0 <= election_id < 1 << 128:
        raise ValueError(f"election id {election_id} is outside 0..2**128-1")
    return p4runtime_pb2.Uint128(high=election_id >> 64, low=election_id & ((1 << 64) - 1))


class StreamSession:
    """The StreamChannel RPC with reconnection: runs in its own thread until stopped.

    Owned by a SwitchConnection; every piece of state lives on this object (no module state).
    """

    def __init__(
        self,
        *,
        name: str,
        stub_factory: Callable[[], Any],
        device_id: int,
        election_id: int,
        role: str,
        p4info: Callable[[], P4InfoIndex | None],
        reconnect: bool,
        backoff_initial: float,
        backoff_max: float,
        inbox_size: int,
        auto_ack_digests: bool,
    ) -> None:
        self.name = name
        self._stub_factory = stub_factory
        self.device_id = device_id
        self.election_id = election_id
        self.role = role
        self._p4info = p4info
        self._reconnect = reconnect
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._auto_ack = auto_ack_digests
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._outbox: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] | None = None
        self._call: Any = None
        self._connected = False
        self._primary = False
        self._primary_election_id = 0
        self._sessions = 0  # sessions that reached arbitration
        self._failures = 0  # sessions that ended
        self.last_error = ""
        self._callbacks: dict[str, list[Callable[[Any], None]]] = {k: [] for k in STREAM_KINDS}
        self._inbox: dict[str, queue.Queue[Any]] = {
            k: queue.Queue(maxsize=inbox_size) for k in STREAM_KINDS
        }
        self.dropped = dict.fromkeys(STREAM_KINDS, 0)
        self._thread = threading.Thread(target=self._run, name=f"p4rt-stream-{name}", daemon=True)

    # -- state -------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        """Whether the stream is up and arbitration answered."""
        with self._lock:
            return self._connected

    @property
    def is_primary(self) -> bool:
        """Whether the switch last told this client it is the primary."""
        with self._lock:
            return self._connected and self._primary

    @property
    def primary_election_id(self) -> int:
        """The election id the switch last reported (the primary's)."""
        with self._lock:
            return self._primary_election_id

    @property
    def sessions(self) -> int:
        """How many stream sessions reached arbitration (1 + reconnections)."""
        with self._lock:
            return self._sessions

    @property
    def failures(self) -> int:
        """How many stream sessions ended (dropped, refused or closed)."""
        with self._lock:
            return self._failures

    def start(self) -> None:
        """Start the stream thread."""
        self._thread.start()

    def wait(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until predicate() (called under the lock) holds; False on timeout or stop."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate() or self._stop.is_set(), timeout) and (
                predicate()
            )

    def wait_arbitrated(self, min_sessions: int, timeout: float | None) -> bool:
        """Wait for arbitration of session number `min_sessions`, or for the first failure."""
        with self._cond:
            self._cond.wait_for(
                lambda: (
                    self._sessions >= min_sessions
                    or self._failures >= min_sessions
                    or self._stop.is_set()
                ),
                timeout,
            )
            return self._sessions >= min_sessions and self._connected

    def wait_primary(self, timeout: float | None) -> bool:
        """Wait until this client is the primary."""
        return self.wait(lambda: self._connected and self._primary, timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """End the stream (closing it tells the switch this client left) and join the thread."""
        self._stop.set()
        with self._cond:
            outbox, call = self._outbox, self._call
            self._cond.notify_all()
        if outbox is not None:
            outbox.put(None)
        if call is not None:
            call.cancel()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- outbound ---------------------------------------------------------------------------
    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> bool:
        """Queue a message on the current stream; False when no stream is up."""
        with self._lock:
            outbox = self._outbox if self._connected else None
        if outbox is None:
            return False
        outbox.put(msg)
        return True

    def _arbitration_request(self) -> p4runtime_pb2.StreamMessageRequest:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(election_uint128(self.election_id))
        if self.role:
            req.arbitration.role.name = self.role
        return req

    # -- inbound ----------------------------------------------------------------------------
    def add_callback(self, kind: StreamKind, callback: Callable[[Any], None]) -> None:
        """Deliver messages of `kind` to `callback` (in the stream thread) instead of the queue."""
        with self._lock:
            self._callbacks[kind].append(callback)

    def remove_callback(self, kind: StreamKind, callback: Callable[[Any], None]) -> None:
        """Stop delivering `kind` to `callback`."""
        with self._lock:
            if callback in self._callbacks[kind]:
                self._callbacks[kind].remove(callback)

    def receive(self, kind: StreamKind, timeout: float | None) -> Any:
        """The next queued message of `kind`, or None after `timeout` seconds."""
        try:
            return self._inbox[kind].get(timeout=timeout)
        except queue.Empty:
            return None

    def iter_messages(self, kind: StreamKind, timeout: float) -> Iterator[Any]:
        """Yield queued messages of `kind` until none arrives for `timeout` seconds."""
        while True:
            msg = self.receive(kind, timeout)
            if msg is None:
                return
            yield msg

    def _deliver(self, kind: StreamKind, item: Any) -> None:
        with self._lock:
            callbacks = list(self._callbacks[kind])
        if callbacks:
            for cb in callbacks:
                try:
                    cb(item)
                except Exception:  # one faulty callback must not kill the stream thread
                    LOG.exception("%s: %s callback failed", self.name, kind)
            return
        box = self._inbox[kind]
        while True:
            try:
                box.put_nowait(item)
                return
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    box.get_nowait()
                    self.dropped[kind] += 1
                    if self.dropped[kind] in (1, 100, 10000):
                        LOG.warning(
                            "%s: %s queue full, dropped %d", self.name, kind, self.dropped[kind]
                        )

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        delay = self._backoff_initial
        attempt = 0
        while not self._stop.is_set():
            reached = self._run_once(attempt)
            if self._stop.is_set() or not self._reconnect:
                break
            attempt += 1
            if reached:
                delay = self._backoff_initial
            # once per outage at INFO (icectl run logs at INFO); each retry after it at DEBUG
            LOG.log(
                logging.INFO if reached else logging.DEBUG,
                "%s: stream down (%s); reconnecting in %.2fs",
                self.name,
                self.last_error,
                delay,
            )
            if self._stop.wait(delay):
                break
            delay = min(delay * 2, self._backoff_max)
        with self._cond:
            self._connected = False
            self._primary = False
            self._cond.notify_all()

    def _run_once(self, attempt: int) -> bool:
        """One StreamChannel session; True when it reached arbitration."""
        outbox: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        outbox.put(self._arbitration_request())
        reached = False

        def requests() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
            while True:
                item = outbox.get()
                if item is None:
                    return
                yield item

        try:
            call = self._stub_factory().StreamChannel(requests())
        except Exception as exc:  # a channel that cannot even start a call
            self.last_error = str(exc)
            self._ended(attempt, reached)
            return False
        with self._cond:
            self._outbox, self._call = outbox, call
        if self._stop.is_set():
            call.cancel()
        try:
            for resp in call:
                if resp.WhichOneof("update") == "arbitration" and not reached:
                    reached = True
                    with self._cond:
                        self._connected = True
                        self._sessions += 1
                    self._on_arbitration(resp.arbitration)
                    self._deliver("connection", ConnectionEvent(connected=True, attempt=attempt))
                    continue
                self._dispatch(resp)
            self.last_error = "stream closed by the switch"
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else None
            details = err.details() if isinstance(err, grpc.Call) else str(err)
            self.last_error = f"{code.name if code else 'UNKNOWN'}: {details}"
        except Exception as exc:  # never let the stream thread die silently
            LOG.exception("%s: stream thread error", self.name)
            self.last_error = f"{type(exc).__name__}: {exc}"
        finally:
            outbox.put(None)
            call.cancel()
        self._ended(attempt, reached)
        return reached

    def _ended(self, attempt: int, reached: bool) -> None:
        with self._cond:
            was_connected = self._connected
            self._connected = False
            self._primary = False
            self._outbox = self._call = None
            self._failures += 1
            self._cond.notify_all()
        if was_connected and not self._stop.is_set():
            LOG.warning("%s: stream lost: %s", self.name, self.last_error)
        if reached or was_connected:
            self._deliver(
                "connection",
                ConnectionEvent(connected=False, attempt=attempt, reason=self.last_error),
            )

    def _dispatch(self, resp: p4runtime_pb2.StreamMessageResponse) -> None:
        which = resp.WhichOneof("update")
        p4info = self._p4info()
        try:
            if which == "arbitration":
                self._on_arbitration(resp.arbitration)
            elif which == "packet":
                self._deliver("packet", PacketIn.decode(resp.packet, p4info))
            elif which == "digest":
                digest = DigestList.decode(resp.digest, p4info)
                if self._auto_ack:
                    ack = p4runtime_pb2.StreamMessageRequest()
                    ack.digest_ack.digest_id = resp.digest.digest_id
                    ack.digest_ack.list_id = resp.digest.list_id
                    self.send(ack)
                self._deliver("digest", digest)
            elif which == "idle_timeout_notification" and p4info is not None:
                note = IdleTimeoutNotification.decode(resp.idle_timeout_notification, p4info)
                self._deliver("idle_timeout", note)
            elif which == "error":
                err = StreamErrorMessage.decode(resp.error)
                LOG.warning("%s: %s", self.name, err)
                self._deliver("error", err)
            else:
                LOG.debug("%s: ignored stream message %s", self.name, which)
        except Exception:  # an undecodable message is logged, the stream goes on
            LOG.exception("%s: cannot decode stream message %s", self.name, which)

    def _on_arbitration(self, msg: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        update = ArbitrationUpdate.decode(msg)
        with self._cond:
            was = self._primary
            self._primary = update.is_primary
            self._primary_election_id = update.election_id
            self._cond.notify_all()
        if update.is_primary != was:
            LOG.info(
                "%s: %s (election id %d, primary's %d)",
                self.name,
                "now primary" if update.is_primary else "backup",
                self.election_id,
                update.election_id,
            )
        self._deliver("arbitration", update)
        if msg.status.code == code_pb2.NOT_FOUND and not update.is_primary:
            # No primary any more: claim the role again; the switch picks the highest id.
            LOG.info("%s: switch has no primary; re-sending arbitration", self.name)
            self.send(self._arbitration_request())
