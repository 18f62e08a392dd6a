"""A small in-process P4Runtime server following the spec's rules, for client tests.

It keeps table entries, action profile members/groups and PRE entries by their P4Runtime
identity, arbitrates by election id (highest connected id is primary, everybody is told),
rejects writes from non-primaries, answers failed batches with per-update p4.v1.Error details
in `grpc-status-details-bin`, and loops packet-outs back as packet-ins. The client tests run
against it and, when it is available, against the embedded target's server.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def _ser(msg: object) -> bytes:
    return msg.SerializeToString(deterministic=True)  # type: ignore[attr-defined, no-any-return]


def entity_key(e: p4runtime_pb2.Entity) -> tuple[object, ...]:
    """The P4Runtime identity of an entity (what INSERT/MODIFY/DELETE match on)."""
    which = e.WhichOneof("entity")
    if which == "table_entry":
        t = e.table_entry
        match = tuple(sorted(_ser(m) for m in t.match))
        return ("table", t.table_id, match, t.priority, t.is_default_action)
    if which == "action_profile_member":
        m = e.action_profile_member
        return ("member", m.action_profile_id, m.member_id)
    if which == "action_profile_group":
        g = e.action_profile_group
        return ("group", g.action_profile_id, g.group_id)
    if which == "packet_replication_engine_entry":
        pre = e.packet_replication_engine_entry
        if pre.WhichOneof("type") == "clone_session_entry":
            return ("clone", pre.clone_session_entry.session_id)
        return ("mcast", pre.multicast_group_entry.multicast_group_id)
    raise ValueError(which)


def _matches(want: p4runtime_pb2.Entity, have: p4runtime_pb2.Entity) -> bool:
    """Whether a stored entity answers a (wildcard) read request entity."""
    kind = want.WhichOneof("entity")
    if kind != have.WhichOneof("entity"):
        return False
    if kind == "table_entry":
        w, h = want.table_entry, have.table_entry
        if w.table_id and w.table_id != h.table_id:
            return False
        if w.is_default_action != h.is_default_action:
            return False
        return not w.match or entity_key(want) == entity_key(have)
    if kind in ("action_profile_member", "action_profile_group"):
        w2, h2 = getattr(want, kind), getattr(have, kind)
        ident = "member_id" if kind == "action_profile_member" else "group_id"
        if w2.action_profile_id and w2.action_profile_id != h2.action_profile_id:
            return False
        return not getattr(w2, ident) or getattr(w2, ident) == getattr(h2, ident)
    wp, hp = want.packet_replication_engine_entry, have.packet_replication_engine_entry
    if wp.WhichOneof("type") != hp.WhichOneof("type"):
        return False
    wk, hk = entity_key(want), entity_key(have)
    return not wk[1] or wk == hk


@dataclass
class _Client:
    election_id: int = -1
    claimed: bool = True  # False after the primary left, until it sends arbitration again
    out: queue.Queue[p4runtime_pb2.StreamMessageResponse | None] = field(
        default_factory=queue.Queue
    )


class FakeP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The servicer: all state on the object, guarded by one lock."""

    def __init__(self, device_id: int = 0, *, auto_promote: bool = True) -> None:
        self.device_id = device_id
        # auto_promote=False: when the primary leaves, everybody is told NOT_FOUND (no primary)
        # and a backup becomes primary only by sending its arbitration again.
        self.auto_promote = auto_promote
        self.lock = threading.Lock()
        self.config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self.store: dict[tuple[object, ...], p4runtime_pb2.Entity] = {}
        self.clients: dict[int, _Client] = {}
        self.applied: list[tuple[str, str]] = []  # (update type, entity kind) per applied update
        self._ids = itertools.count(1)

    # -- arbitration ---------------------------------------------------------------------------
    def _primary_id(self) -> int:
        ids = [c.election_id for c in self.clients.values() if c.election_id >= 0 and c.claimed]
        return max(ids) if ids else -1

    def _notify_all(self) -> None:
        primary = self._primary_id()
        for c in self.clients.values():
            if c.election_id < 0:
                continue
            resp = p4runtime_pb2.StreamMessageResponse()
            arb = resp.arbitration
            arb.device_id = self.device_id
            if primary >= 0:
                arb.election_id.high = primary >> 64
                arb.election_id.low = primary & ((1 << 64) - 1)
            if primary < 0:
                arb.status.code = code_pb2.NOT_FOUND
                arb.status.message = "no primary"
            elif c.election_id == primary:
                arb.status.code = code_pb2.OK
                arb.status.message = "is primary"
            else:
                arb.status.code = code_pb2.ALREADY_EXISTS
                arb.status.message = "is backup"
            c.out.put(resp)

    def StreamChannel(
        self,
        request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        sid = next(self._ids)
        client = _Client()
        with self.lock:
            self.clients[sid] = client
        context.add_callback(lambda: client.out.put(None))

        def reader() -> None:
            try:
                for req in request_iterator:
                    which = req.WhichOneof("update")
                    if which == "arbitration":
                        arb = req.arbitration
                        if arb.device_id != self.device_id:
                            client.out.put(None)
                            return
                        with self.lock:
                            client.election_id = (arb.election_id.high << 64) | arb.election_id.low
                            client.claimed = True
                            self._notify_all()
                    elif which == "packet":
                        with self.lock:
                            primary = client.election_id == self._primary_id()
                        if primary:
                            resp = p4runtime_pb2.StreamMessageResponse()
                            resp.packet.payload = req.packet.payload
                            for md in req.packet.metadata:  # egress_port -> ingress_port
                                resp.packet.metadata.add(metadata_id=md.metadata_id, value=md.value)
                            client.out.put(resp)
            except grpc.RpcError:
                pass  # the client closed its stream
            finally:
                client.out.put(None)

        threading.Thread(target=reader, daemon=True).start()
        try:
            while True:
                item = client.out.get()
                if item is None:
                    return
                yield item
        finally:
            with self.lock:
                was_primary = client.election_id == self._primary_id()
                self.clients.pop(sid, None)
                if was_primary and not self.auto_promote:
                    for c in self.clients.values():
                        c.claimed = False
                self._notify_all()

    # -- unary ---------------------------------------------------------------------------------
    def _check_primary(
        self, election: p4runtime_pb2.Uint128, context: grpc.ServicerContext
    ) -> None:
        eid = (election.high << 64) | election.low
        with self.lock:
            primary = self._primary_id()
        if eid != primary:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"election id {eid} is not primary")

    def Capabilities(self, request, context):  # type: ignore[no-untyped-def]
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.4.1")

    def SetForwardingPipelineConfig(self, request, context):  # type: ignore[no-untyped-def]
        self._check_primary(request.election_id, context)
        with self.lock:
            self.config = p4runtime_pb2.ForwardingPipelineConfig()
            self.config.CopyFrom(request.config)
            self.store.clear()
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):  # type: ignore[no-untyped-def]
        with self.lock:
            config = self.config
        if config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config")
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        resp.config.CopyFrom(config)
        if request.response_type == request.P4INFO_AND_COOKIE:
            resp.config.ClearField("p4_device_config")
        return resp

    def Write(self, request, context):  # type: ignore[no-untyped-def]
        if request.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {request.device_id}")
        self._check_primary(request.election_id, context)
        errors: list[p4runtime_pb2.Error] = []
        with self.lock:
            for u in request.updates:
                errors.append(self._apply(u))
        if any(e.canonical_code != code_pb2.OK for e in errors):
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="write failure")
            for e in errors:
                packed = any_pb2.Any()
                packed.Pack(e)
                status.details.append(packed)
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),)
            )
            context.abort(grpc.StatusCode.UNKNOWN, "write failure")
        return p4runtime_pb2.WriteResponse()

    def _apply(self, u: p4runtime_pb2.Update) -> p4runtime_pb2.Error:
        key = entity_key(u.entity)
        kind = u.entity.WhichOneof("entity")
        typ = p4runtime_pb2.Update.Type.Name(u.type)
        if u.type == u.INSERT and key in self.store:
            return p4runtime_pb2.Error(
                canonical_code=code_pb2.ALREADY_EXISTS, message="entry exists"
            )
        if u.type in (u.MODIFY, u.DELETE) and key not in self.store:
            return p4runtime_pb2.Error(canonical_code=code_pb2.NOT_FOUND, message="no such entry")
        if u.type == u.DELETE:
            del self.store[key]
        else:
            stored = p4runtime_pb2.Entity()
            stored.CopyFrom(u.entity)
            self.store[key] = stored
        self.applied.append((typ, kind or ""))
        return p4runtime_pb2.Error(canonical_code=code_pb2.OK)

    def Read(self, request, context):  # type: ignore[no-untyped-def]
        with self.lock:
            found = [
                e for want in request.entities for e in self.store.values() if _matches(want, e)
            ]
        resp = p4runtime_pb2.ReadResponse()
        resp.entities.extend(found)
        yield resp


class FakeSwitch:
    """A FakeP4Runtime served on 127.0.0.1 (a free port, kept across restarts)."""

    def __init__(self, device_id: int = 0, *, auto_promote: bool = True) -> None:
        self.device_id = device_id
        self.auto_promote = auto_promote
        self.port = 0
        self.servicer = FakeP4Runtime(device_id, auto_promote=auto_promote)
        self._server: grpc.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, fresh: bool = False) -> FakeSwitch:
        """Serve (again, on the same port); fresh=True forgets all state like a reboot."""
        if fresh:
            self.servicer = FakeP4Runtime(self.device_id, auto_promote=self.auto_promote)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, server)
        self.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None


@pytest.fixture
def fake_switch() -> Iterator[FakeSwitch]:
    sw = FakeSwitch().start()
    try:
        yield sw
    finally:
        sw.stop()


def test_fake_switch_keys_entities_by_identity() -> None:
    a = p4runtime_pb2.Entity()
    a.table_entry.table_id = 1
    a.table_entry.match.add(field_id=1).exact.value = b"\x01"
    b = p4runtime_pb2.Entity()
    b.CopyFrom(a)
    b.table_entry.action.action.action_id = 5  # the action is not part of the identity
    assert entity_key(a) == entity_key(b)
    wildcard = p4runtime_pb2.Entity()
    wildcard.table_entry.SetInParent()
    assert _matches(wildcard, a)
    other = p4runtime_pb2.Entity()
    other.table_entry.table_id = 2
    assert not _matches(other, a)


def test_fake_switch_serves_capabilities(fake_switch: FakeSwitch) -> None:
    with grpc.insecure_channel(fake_switch.address) as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        resp = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=5)
    assert resp.p4runtime_api_version == "1.4.1"
