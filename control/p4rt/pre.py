"""Packet replication engine entities: multicast groups and clone sessions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from p4.v1 import p4runtime_pb2

from .codec import decode_int
from .p4info import P4InfoIndex


@dataclass(slots=True, frozen=True, order=True)
class Replica:
    """One copy of a replicated packet: egress port and instance (egress_rid)."""

    port: int
    instance: int = 0


ReplicaSpec = int | tuple[int, int] | Replica


def _replicas(items: Sequence[ReplicaSpec]) -> tuple[Replica, ...]:
    out: list[Replica] = []
    for r in items:
        if isinstance(r, Replica):
            out.append(r)
        elif isinstance(r, tuple):
            out.append(Replica(r[0], r[1]))
        else:
            out.append(Replica(r))
    return tuple(out)


def _encode_replicas(replicas: Sequence[ReplicaSpec]) -> list[p4runtime_pb2.Replica]:
    # egress_port (not the 1.4 `port` bytes) keeps BMv2/PI servers of every version happy.
    return [
        p4runtime_pb2.Replica(egress_port=r.port, instance=r.instance) for r in _replicas(replicas)
    ]


def _decode_replica(r: p4runtime_pb2.Replica) -> Replica:
    port = decode_int(r.port) if r.WhichOneof("port_kind") == "port" else r.egress_port
    return Replica(port, r.instance)


@dataclass(slots=True, frozen=True, kw_only=True)
class MulticastGroupEntry:
    """A multicast group (id 0 reads all groups); replicas as ports or (port, instance)."""

    ENTITY_FIELD: ClassVar[str] = "packet_replication_engine_entry"

    multicast_group_id: int = 0
    replicas: Sequence[ReplicaSpec] = ()
    metadata: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", _replicas(self.replicas))

    def encode(
        self, p4info: P4InfoIndex | None = None
    ) -> p4runtime_pb2.PacketReplicationEngineEntry:
        """The p4.v1.PacketReplicationEngineEntry message holding the group."""
        msg = p4runtime_pb2.PacketReplicationEngineEntry()
        g = msg.multicast_group_entry
        g.multicast_group_id = self.multicast_group_id
        g.replicas.extend(_encode_replicas(self.replicas))
        g.metadata = self.metadata
        return msg

    @classmethod
    def decode(
        cls, msg: p4runtime_pb2.PacketReplicationEngineEntry, p4info: P4InfoIndex | None = None
    ) -> MulticastGroupEntry:
        """From a PacketReplicationEngineEntry holding a multicast group."""
        g = msg.multicast_group_entry
        return cls(
            multicast_group_id=g.multicast_group_id,
            replicas=tuple(_decode_replica(r) for r in g.replicas),
            metadata=g.metadata,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        reps = ",".join(f"{r.port}/{r.instance}" for r in _replicas(self.replicas))
        return f"multicast_group {self.multicast_group_id} replicas=[{reps}]"


@dataclass(slots=True, frozen=True, kw_only=True)
class CloneSessionEntry:
    """A clone session (id 0 reads all sessions)."""

    ENTITY_FIELD: ClassVar[str] = "packet_replication_engine_entry"

    session_id: int = 0
    replicas: Sequence[ReplicaSpec] = ()
    class_of_service: int = 0
    packet_length_bytes: int = 0  # 0: clone the whole packet

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", _replicas(self.replicas))

    def encode(
        self, p4info: P4InfoIndex | None = None
    ) -> p4runtime_pb2.PacketReplicationEngineEntry:
        """The p4.v1.PacketReplicationEngineEntry message holding the session."""
        msg = p4runtime_pb2.PacketReplicationEngineEntry()
        s = msg.clone_session_entry
        s.session_id = self.session_id
        s.replicas.extend(_encode_replicas(self.replicas))
        s.class_of_service = self.class_of_service
        s.packet_length_bytes = self.packet_length_bytes
        return msg

    @classmethod
    def decode(
        cls, msg: p4runtime_pb2.PacketReplicationEngineEntry, p4info: P4InfoIndex | None = None
    ) -> CloneSessionEntry:
        """From a PacketReplicationEngineEntry holding a clone session."""
        s = msg.clone_session_entry
        return cls(
            session_id=s.session_id,
            replicas=tuple(_decode_replica(r) for r in s.replicas),
            class_of_service=s.class_of_service,
            packet_length_bytes=s.packet_length_bytes,
        )

    def describe(self, p4info: P4InfoIndex | None = None) -> str:
        """Short human summary."""
        reps = ",".join(f"{r.port}/{r.instance}" for r in _replicas(self.replicas))
        return f"clone_session {self.session_id} replicas=[{reps}]"
