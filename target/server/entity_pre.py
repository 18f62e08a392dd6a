"""PacketReplicationEngineEntry: multicast groups and clone sessions on the device."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from p4.v1 import p4runtime_pb2

from icefabric.target.device import CloneSession, Device, Replica
from icefabric.target.server.bytestrings import decode_port
from icefabric.target.server.errors import P4RTError, invalid, not_found

Update = p4runtime_pb2.Update


def _replicas(replicas: list[p4runtime_pb2.Replica], where: str) -> tuple[Replica, ...]:
    out: list[Replica] = []
    seen: set[tuple[int, int]] = set()
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        port = decode_port(r.port, where) if kind == "port" else r.egress_port
        if port >= 1 << 9:
            raise invalid(f"{where}: egress port {port} does not fit in 9 bits")
        key = (port, r.instance)
        if key in seen:
            raise invalid(f"{where}: replica (port {port}, instance {r.instance}) listed twice")
        seen.add(key)
        out.append(Replica(port, r.instance))
    return tuple(out)


class PreStore:
    """The PRE entries as written (so reads echo the client's port encoding)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.groups: dict[int, p4runtime_pb2.MulticastGroupEntry] = {}
        self.sessions: dict[int, p4runtime_pb2.CloneSessionEntry] = {}

    def clear(self) -> None:
        """Forget everything (the device clears its own PRE on a new pipeline)."""
        self.groups.clear()
        self.sessions.clear()

    def write(self, update_type: int, pre: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
        """Apply one PRE update."""
        which = pre.WhichOneof("type")
        if which == "multicast_group_entry":
            self._write_group(update_type, pre.multicast_group_entry)
        elif which == "clone_session_entry":
            self._write_session(update_type, pre.clone_session_entry)
        else:
            raise invalid("PacketReplicationEngineEntry without an entry")

    def _check(self, update_type: int, exists: bool, what: str) -> None:
        if update_type == Update.INSERT and exists:
            raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"{what} already exists")
        if update_type in (Update.MODIFY, Update.DELETE) and not exists:
            raise not_found(f"{what} does not exist")
        if update_type not in (Update.INSERT, Update.MODIFY, Update.DELETE):
            raise invalid(f"{what}: unknown update type {update_type}")

    def _write_group(self, update_type: int, g: p4runtime_pb2.MulticastGroupEntry) -> None:
        gid = g.multicast_group_id
        what = f"multicast group {gid}"
        if not 0 < gid < 1 << 16:
            raise invalid(f"{what}: id must be in [1, 65535]")
        self._check(update_type, gid in self.groups, what)
        if update_type == Update.DELETE:
            self.device.delete_multicast_group(gid)
            del self.groups[gid]
            return
        replicas = _replicas(list(g.replicas), what)
        self.device.set_multicast_group(gid, replicas)
        self.groups[gid] = p4runtime_pb2.MulticastGroupEntry()
        self.groups[gid].CopyFrom(g)

    def _write_session(self, update_type: int, s: p4runtime_pb2.CloneSessionEntry) -> None:
        sid = s.session_id
        what = f"clone session {sid}"
        if not 0 < sid < 1 << 16:
            raise invalid(f"{what}: id must be in [1, 65535]")
        self._check(update_type, sid in self.sessions, what)
        if update_type == Update.DELETE:
            self.device.delete_clone_session(sid)
            del self.sessions[sid]
            return
        replicas = _replicas(list(s.replicas), what)
        session = CloneSession(replicas, s.class_of_service, s.packet_length_bytes)
        self.device.set_clone_session(sid, session)
        self.sessions[sid] = p4runtime_pb2.CloneSessionEntry()
        self.sessions[sid].CopyFrom(s)

    def read(
        self, pre: p4runtime_pb2.PacketReplicationEngineEntry
    ) -> Iterator[p4runtime_pb2.PacketReplicationEngineEntry]:
        """Entries matching a read request (id 0 = all)."""
        which = pre.WhichOneof("type")
        if which == "multicast_group_entry":
            want = pre.multicast_group_entry.multicast_group_id
            for gid in sorted(self.groups):
                if not want or want == gid:
                    yield p4runtime_pb2.PacketReplicationEngineEntry(
                        multicast_group_entry=self.groups[gid]
                    )
        elif which == "clone_session_entry":
            want = pre.clone_session_entry.session_id
            for sid in sorted(self.sessions):
                if not want or want == sid:
                    yield p4runtime_pb2.PacketReplicationEngineEntry(
                        clone_session_entry=self.sessions[sid]
                    )
        else:
            raise invalid("PacketReplicationEngineEntry read without an entry type")
