"""Role-less primary/backup arbitration over StreamChannel sessions."""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from typing import Any

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from icefabric.target.server.errors import P4RTError

_CLOSE = object()


class Session:
    """One StreamChannel: the client's election id and a queue of messages to send."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)
        self.election_id: tuple[int, int] | None = None
        self.out: queue.Queue[Any] = queue.Queue(maxsize=10000)
        self.closed = False

    def send(self, msg: p4runtime_pb2.StreamMessageResponse | P4RTError) -> None:
        """Queue a message (dropped with a full queue: a stuck client must not stall the switch)."""
        if self.closed:
            return
        with contextlib.suppress(queue.Full):
            self.out.put_nowait(msg)

    def close(self) -> None:
        """End the stream."""
        if not self.closed:
            self.closed = True
            self.out.put(_CLOSE)

    @staticmethod
    def is_close(item: Any) -> bool:
        """True for the end-of-stream marker."""
        return item is _CLOSE


class Arbitration:
    """Tracks sessions; the one with the highest election id is the primary."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.sessions: dict[int, Session] = {}

    def primary(self) -> Session | None:
        """The session that currently holds the primary role."""
        with self.lock:
            return self._primary()

    def _primary(self) -> Session | None:
        best: Session | None = None
        for s in self.sessions.values():
            if s.election_id is not None and (best is None or s.election_id > best.election_id):  # type: ignore[operator]
                best = s
        return best

    def is_primary(self, election_id: tuple[int, int]) -> bool:
        """Whether a request carrying `election_id` comes from the primary."""
        p = self.primary()
        return p is not None and p.election_id == election_id

    def update(self, session: Session, msg: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        """Handle a MasterArbitrationUpdate; notify everyone when the primary changes."""
        if msg.device_id != self.device_id:
            raise P4RTError(grpc.StatusCode.NOT_FOUND, f"unknown device id {msg.device_id}")
        if msg.role.name:
            raise P4RTError(
                grpc.StatusCode.UNIMPLEMENTED, "roles are not supported (role-less only)"
            )
        eid = (msg.election_id.high, msg.election_id.low)
        with self.lock:
            for other in self.sessions.values():
                if other is not session and other.election_id == eid:
                    raise P4RTError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"election id {eid} is already used by another client",
                    )
            before = self._primary()
            session.election_id = eid
            self.sessions[session.id] = session
            after = self._primary()
            targets = list(self.sessions.values()) if after is not before else [session]
            for s in targets:
                s.send(self._response(s, after))

    def remove(self, session: Session) -> None:
        """Forget a closed session; promote the next highest and notify if it was primary."""
        with self.lock:
            before = self._primary()
            self.sessions.pop(session.id, None)
            after = self._primary()
            if before is session and after is not None:
                for s in self.sessions.values():
                    s.send(self._response(s, after))

    def _response(self, s: Session, primary: Session | None) -> p4runtime_pb2.StreamMessageResponse:
        resp = p4runtime_pb2.StreamMessageResponse()
        arb = resp.arbitration
        arb.device_id = self.device_id
        if primary is not None and primary.election_id is not None:
            arb.election_id.high, arb.election_id.low = primary.election_id
        if primary is s:
            arb.status.code = code_pb2.OK
            arb.status.message = "Is primary"
        elif primary is None:
            arb.status.code = code_pb2.NOT_FOUND
            arb.status.message = "No primary"
        else:
            arb.status.code = code_pb2.ALREADY_EXISTS
            arb.status.message = "Is backup"
        return resp
