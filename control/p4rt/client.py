"""SwitchConnection: one P4Runtime client per switch (arbitration, pipeline, writes, reads, stream)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from .codec import Value
from .entities import (
    CounterEntry,
    DirectCounterEntry,
    Entity,
    RegisterEntry,
    TableEntry,
    Update,
    UpdateType,
    decode_entity,
    describe_entity,
    encode_entity,
    entity_table_name,
)
from .errors import NotPrimaryError, P4RtError, P4RuntimeError, SwitchUnavailableError
from .p4info import P4InfoIndex
from .packets import DigestList, PacketOut
from .pipeline import PipelineConfig
from .stream import StreamKind, StreamSession

if TYPE_CHECKING:
    from .restore import AutoRestore
    from .resync import ResyncSummary

LOG = logging.getLogger(__name__)

Atomicity = Literal["CONTINUE_ON_ERROR", "ROLLBACK_ON_ERROR", "DATAPLANE_ATOMIC"]
PipelineAction = Literal[
    "VERIFY", "VERIFY_AND_SAVE", "VERIFY_AND_COMMIT", "COMMIT", "RECONCILE_AND_COMMIT"
]
E = TypeVar("E")


class SwitchConnection:
    """A P4Runtime client for one switch; every piece of state lives on the object.

    Usage: ``with SwitchConnection("leaf1", "127.0.0.1:9559", election_id=10) as sw: ...``
    """

    def __init__(
        self,
        name: str,
        address: str,
        *,
        device_id: int = 0,
        election_id: int = 1,
        role: str = "",
        p4info: P4InfoIndex | p4info_pb2.P4Info | None = None,
        connect_timeout: float = 5.0,
        rpc_timeout: float = 30.0,
        reconnect: bool = True,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        max_batch: int = 500,
        inbox_size: int = 10_000,
        auto_ack_digests: bool = True,
        channel_options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if not 0 <= election_id < 1 << 128:
            raise ValueError(f"election_id must be in 0..2**128-1, got {election_id}")
        self.name = name
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.role = role
        self.connect_timeout = connect_timeout
        self.rpc_timeout = rpc_timeout
        self.max_batch = max_batch
        self._p4info: P4InfoIndex | None = (
            P4InfoIndex(p4info) if isinstance(p4info, p4info_pb2.P4Info) else p4info
        )
        # gRPC's own reconnect back-off (1 s doubling to 120 s by default) would hold the
        # channel in TRANSIENT_FAILURE long after the switch is back: bound it like ours.
        self._options = [
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            # a batch with many failed updates carries one p4.v1.Error each in the status
            # trailer; the 16 KiB default would drop them all
            ("grpc.max_metadata_size", 8 * 1024 * 1024),
            ("grpc.absolute_max_metadata_size", 16 * 1024 * 1024),
            ("grpc.initial_reconnect_backoff_ms", max(1, int(backoff_initial * 1000))),
            ("grpc.min_reconnect_backoff_ms", max(1, int(backoff_initial * 1000))),
            ("grpc.max_reconnect_backoff_ms", max(1, int(backoff_max * 1000))),
            *channel_options,
        ]
        self._reconnect = reconnect
        self._backoff = (backoff_initial, backoff_max)
        self._inbox_size = inbox_size
        self._auto_ack = auto_ack_digests
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._stream: StreamSession | None = None
        self._pending_callbacks: list[tuple[StreamKind, Callable[[Any], None]]] = []

    def __repr__(self) -> str:
        state = "primary" if self.is_primary else ("backup" if self.is_connected else "down")
        return f"SwitchConnection({self.name!r}, {self.address!r}, device_id={self.device_id}, {state})"

    # -- lifecycle -----------------------------------------------------------------------------
    def connect(self, timeout: float | None = None) -> SwitchConnection:
        """Open the channel (ready by the deadline), start the stream and arbitrate."""
        deadline = self.connect_timeout if timeout is None else timeout
        with self._lock:
            if self._stream is not None:
                return self
            channel = grpc.insecure_channel(self.address, options=self._options)
            try:
                grpc.channel_ready_future(channel).result(timeout=deadline)
            except grpc.FutureTimeoutError:
                channel.close()
                raise SwitchUnavailableError(
                    f"{self.name}: no P4Runtime server at {self.address} within {deadline:g}s"
                ) from None
            self._channel = channel
            self._stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            stream = StreamSession(
                name=self.name,
                stub_factory=self._get_stub,
                device_id=self.device_id,
                election_id=self.election_id,
                role=self.role,
                p4info=lambda: self._p4info,
                reconnect=self._reconnect,
                backoff_initial=self._backoff[0],
                backoff_max=self._backoff[1],
                inbox_size=self._inbox_size,
                auto_ack_digests=self._auto_ack,
            )
            for kind, cb in self._pending_callbacks:
                stream.add_callback(kind, cb)
            self._stream = stream
        stream.start()
        if not stream.wait_arbitrated(1, deadline):
            reason = stream.last_error or "no arbitration answer"
            self.close()
            raise SwitchUnavailableError(
                f"{self.name}: stream to {self.address} failed arbitration: {reason}"
            )
        LOG.info(
            "%s: connected to %s (device %d, election id %d, %s)",
            self.name,
            self.address,
            self.device_id,
            self.election_id,
            "primary" if self.is_primary else "backup",
        )
        if self._p4info is None:
            self._load_p4info_from_switch()
        return self

    def close(self) -> None:
        """Close the stream and the channel (idempotent)."""
        with self._lock:
            stream, channel = self._stream, self._channel
            self._stream = None
            self._channel = None
            self._stub = None
        if stream is not None:
            stream.stop()
        if channel is not None:
            channel.close()

    def __enter__(self) -> SwitchConnection:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get_stub(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        stub = self._stub
        if stub is None:
            raise SwitchUnavailableError(f"{self.name}: not connected (call connect())")
        return stub

    def _load_p4info_from_switch(self) -> None:
        try:
            self.refresh_p4info()
        except P4RuntimeError as err:
            LOG.debug("%s: no pipeline on the switch yet (%s)", self.name, err.code.name)

    def refresh_p4info(self) -> bool:
        """Use the P4Info of the pipeline the switch runs; False when it runs none."""
        config = self.get_pipeline(response_type="P4INFO_AND_COOKIE")
        if config.p4info.tables or config.p4info.actions:
            self._p4info = config.index
            return True
        return False

    # -- state ---------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        """Whether the stream is up and arbitrated."""
        stream = self._stream
        return stream is not None and stream.is_connected

    @property
    def is_primary(self) -> bool:
        """Whether this connection is the switch's primary controller right now."""
        stream = self._stream
        return stream is not None and stream.is_primary

    @property
    def primary_election_id(self) -> int:
        """The primary's election id as the switch last reported it."""
        stream = self._stream
        return stream.primary_election_id if stream is not None else 0

    @property
    def sessions(self) -> int:
        """How many stream sessions were arbitrated (1 + the reconnections)."""
        stream = self._stream
        return stream.sessions if stream is not None else 0

    @property
    def stream_failures(self) -> int:
        """How many stream sessions ended (drops and refused reconnection attempts)."""
        stream = self._stream
        return stream.failures if stream is not None else 0

    @property
    def p4info(self) -> P4InfoIndex:
        """The P4Info in use (from set_pipeline, the constructor or the switch)."""
        if self._p4info is None:
            raise P4RtError(
                f"{self.name}: no P4Info (pass p4info=, call set_pipeline() or get_pipeline())"
            )
        return self._p4info

    @property
    def has_p4info(self) -> bool:
        """Whether a P4Info is known."""
        return self._p4info is not None

    def wait_primary(self, timeout: float | None = None) -> bool:
        """Wait until this connection is primary (e.g. a backup after the primary died)."""
        stream = self._stream
        return stream is not None and stream.wait_primary(timeout)

    def wait_connected(self, timeout: float | None = None, *, min_sessions: int = 1) -> bool:
        """Wait until the stream is up and arbitrated for the `min_sessions`-th time."""
        stream = self._stream
        if stream is None:
            return False
        return stream.wait(lambda: stream._connected and stream._sessions >= min_sessions, timeout)

    def require_primary(self) -> None:
        """Raise NotPrimaryError unless this connection is primary."""
        if not self.is_primary:
            raise NotPrimaryError(
                f"{self.name}: not the primary controller (election id {self.election_id}, "
                f"primary's {self.primary_election_id})"
            )

    # -- unary RPCs ----------------------------------------------------------------------------
    def _rpc_error(
        self,
        err: grpc.RpcError,
        operation: str,
        describe: Callable[[int], tuple[str, str]] | None = None,
        offset: int = 0,
    ) -> P4RuntimeError:
        return P4RuntimeError.from_rpc_error(
            err, operation=operation, switch=self.name, describe=describe, index_offset=offset
        )

    def capabilities(self) -> str:
        """The P4Runtime API version the switch implements."""
        try:
            resp = self._get_stub().Capabilities(
                p4runtime_pb2.CapabilitiesRequest(), timeout=self.rpc_timeout
            )
        except grpc.RpcError as err:
            raise self._rpc_error(err, "Capabilities") from err
        return str(resp.p4runtime_api_version)

    def set_pipeline(
        self, config: PipelineConfig, *, action: PipelineAction = "VERIFY_AND_COMMIT"
    ) -> None:
        """Push a forwarding pipeline (P4Info + device config); afterwards its P4Info is used."""
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.Action.Value(action),
        )
        req.election_id.CopyFrom(_uint128(self.election_id))
        if self.role:
            req.role = self.role
        req.config.CopyFrom(config.encode())
        t0 = time.monotonic()
        try:
            self._get_stub().SetForwardingPipelineConfig(req, timeout=self.rpc_timeout)
        except grpc.RpcError as err:
            raise self._rpc_error(err, f"SetForwardingPipelineConfig({config.source})") from err
        LOG.info(
            "%s: pipeline %s pushed in %.3fs (%s)",
            self.name,
            config.source or "(config)",
            time.monotonic() - t0,
            action,
        )
        if action in ("VERIFY_AND_COMMIT", "VERIFY_AND_SAVE", "RECONCILE_AND_COMMIT"):
            self._p4info = config.index

    def ensure_pipeline(self, config: PipelineConfig) -> bool:
        """Push `config` unless the switch already runs it (same cookie); True if pushed."""
        try:
            current = self.get_pipeline(response_type="COOKIE_ONLY").cookie
        except P4RuntimeError as err:
            if err.code != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            current = None
        if current == config.cookie and current:
            self._p4info = config.index
            return False
        self.set_pipeline(config)
        return True

    def get_pipeline(
        self,
        *,
        response_type: Literal[
            "ALL", "COOKIE_ONLY", "P4INFO_AND_COOKIE", "DEVICE_CONFIG_AND_COOKIE"
        ] = "ALL",
    ) -> PipelineConfig:
        """Read the forwarding pipeline config back from the switch."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.ResponseType.Value(
                response_type
            ),
        )
        try:
            resp = self._get_stub().GetForwardingPipelineConfig(req, timeout=self.rpc_timeout)
        except grpc.RpcError as err:
            raise self._rpc_error(err, "GetForwardingPipelineConfig") from err
        return PipelineConfig.decode(resp.config)

    # -- writes --------------------------------------------------------------------------------
    def write(
        self,
        updates: Iterable[Update | tuple[UpdateType, Entity]],
        *,
        atomicity: Atomicity = "CONTINUE_ON_ERROR",
    ) -> int:
        """Send updates in batches of max_batch (one batch unless CONTINUE_ON_ERROR).

        Returns the number of updates written. On failure raises one P4RuntimeError whose
        details hold every failed update (index in `updates`, code, message, entity, table).
        """
        p4info = self.p4info
        items = [u if isinstance(u, Update) else Update(u[0], u[1]) for u in updates]
        if not items:
            return 0
        size = self.max_batch if atomicity == "CONTINUE_ON_ERROR" else len(items)
        errors: list[tuple[P4RuntimeError, grpc.RpcError]] = []
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            req = p4runtime_pb2.WriteRequest(
                device_id=self.device_id,
                atomicity=p4runtime_pb2.WriteRequest.Atomicity.Value(atomicity),
            )
            req.election_id.CopyFrom(_uint128(self.election_id))
            if self.role:
                req.role = self.role
            req.updates.extend(u.encode(p4info) for u in chunk)

            def describe(i: int, chunk: list[Update] = chunk) -> tuple[str, str]:
                if i >= len(chunk):
                    return "", ""
                u = chunk[i]
                return (
                    f"{u.type} {describe_entity(u.entity, p4info)}",
                    entity_table_name(u.entity),
                )

            try:
                self._get_stub().Write(req, timeout=self.rpc_timeout)
            except grpc.RpcError as err:
                wrapped = self._rpc_error(err, "Write", describe, start)
                if atomicity != "CONTINUE_ON_ERROR" or wrapped.code not in (
                    grpc.StatusCode.UNKNOWN,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    grpc.StatusCode.ALREADY_EXISTS,
                    grpc.StatusCode.NOT_FOUND,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    grpc.StatusCode.OUT_OF_RANGE,
                    grpc.StatusCode.FAILED_PRECONDITION,
                ):
                    raise wrapped from err
                errors.append((wrapped, err))
        if errors:
            first, cause = errors[0]
            details = [d for e, _ in errors for d in e.details]
            what = (
                f"{len(details)} of {len(items)} updates failed"
                if details
                else f"{len(errors)} of {-(-len(items) // size)} batches failed"
            )
            raise P4RuntimeError(
                first.code,
                f"{what}: {first.message}",
                details,
                operation="Write",
                switch=self.name,
            ) from cause
        return len(items)

    def insert(self, entities: Entity | Iterable[Entity], **kwargs: Any) -> int:
        """INSERT one entity or many."""
        return self.write((Update("INSERT", e) for e in _many(entities)), **kwargs)

    def modify(self, entities: Entity | Iterable[Entity], **kwargs: Any) -> int:
        """MODIFY one entity or many."""
        return self.write((Update("MODIFY", e) for e in _many(entities)), **kwargs)

    def delete(self, entities: Entity | Iterable[Entity], **kwargs: Any) -> int:
        """DELETE one entity or many."""
        return self.write((Update("DELETE", e) for e in _many(entities)), **kwargs)

    # -- reads ---------------------------------------------------------------------------------
    def read_raw(self, entities: Entity | Iterable[Entity]) -> Iterator[p4runtime_pb2.Entity]:
        """Stream the p4.v1.Entity messages matching the (wildcard) read request."""
        p4info = self.p4info
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        if self.role:
            req.role = self.role
        wanted = list(_many(entities))
        req.entities.extend(encode_entity(e, p4info) for e in wanted)
        what = ", ".join(describe_entity(e, p4info) for e in wanted[:3])
        try:
            for resp in self._get_stub().Read(req, timeout=self.rpc_timeout):
                yield from resp.entities
        except grpc.RpcError as err:
            raise self._rpc_error(err, f"Read({what})") from err

    def read_iter(self, entities: Entity | Iterable[Entity]) -> Iterator[Entity]:
        """Stream the entities matching the (wildcard) read request, decoded."""
        p4info = self.p4info
        for msg in self.read_raw(entities):
            yield decode_entity(msg, p4info)

    def read(self, entities: Entity | Iterable[Entity]) -> list[Entity]:
        """All entities matching the (wildcard) read request, decoded."""
        return list(self.read_iter(entities))

    def read_table(self, table: str = "") -> list[TableEntry]:
        """Every entry of one table ("" for every table), without default entries."""
        return [e for e in self.read(TableEntry(table=table)) if isinstance(e, TableEntry)]

    def read_counters(self, counter: str, index: int | None = None) -> list[CounterEntry]:
        """The cells of an indexed counter (one cell when index is given)."""
        return _only(self.read(CounterEntry(counter=counter, index=index)), CounterEntry)

    def read_direct_counters(self, table: str) -> list[DirectCounterEntry]:
        """The direct counters of every entry of a table."""
        return _only(
            self.read(DirectCounterEntry(table_entry=TableEntry(table=table))), DirectCounterEntry
        )

    def read_registers(self, register: str, index: int | None = None) -> list[RegisterEntry]:
        """The cells of a register (one cell when index is given)."""
        return _only(self.read(RegisterEntry(register=register, index=index)), RegisterEntry)

    def register_values(self, register: str) -> dict[int, int]:
        """{index: value} of every cell of a register."""
        return {
            e.index: int(e.value)
            for e in self.read_registers(register)
            if e.index is not None and isinstance(e.value, int)
        }

    # -- stream --------------------------------------------------------------------------------
    def _live_stream(self) -> StreamSession:
        stream = self._stream
        if stream is None:
            raise SwitchUnavailableError(f"{self.name}: not connected (call connect())")
        return stream

    def packet_out(self, payload: bytes | PacketOut, **metadata: Value) -> None:
        """Send a packet through the switch's CPU port (metadata: packet_out header fields)."""
        pkt = (
            payload
            if isinstance(payload, PacketOut)
            else PacketOut(payload=payload, metadata=metadata)
        )
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.CopyFrom(pkt.encode(self._p4info))
        if not self._live_stream().send(req):
            raise SwitchUnavailableError(f"{self.name}: stream is down; packet-out not sent")

    def ack_digest(self, digest: DigestList) -> None:
        """Acknowledge a digest list (only needed with auto_ack_digests=False)."""
        req = p4runtime_pb2.StreamMessageRequest()
        req.digest_ack.CopyFrom(digest.ack(self.p4info))
        if not self._live_stream().send(req):
            raise SwitchUnavailableError(f"{self.name}: stream is down; digest ack not sent")

    def on(self, kind: StreamKind, callback: Callable[[Any], None]) -> None:
        """Call `callback(message)` in the stream thread for each message of `kind`:
        "packet" (PacketIn), "digest" (DigestList), "arbitration" (ArbitrationUpdate),
        "error" (StreamErrorMessage), "idle_timeout", "connection" (ConnectionEvent)."""
        with self._lock:
            stream = self._stream
            self._pending_callbacks.append((kind, callback))
        if stream is not None:
            stream.add_callback(kind, callback)

    def receive(self, kind: StreamKind, timeout: float | None = None) -> Any:
        """The next queued stream message of `kind` (kinds without callbacks), or None."""
        return self._live_stream().receive(kind, timeout)

    def messages(self, kind: StreamKind, timeout: float = 1.0) -> Iterator[Any]:
        """Yield queued messages of `kind` until none arrives for `timeout` seconds."""
        return self._live_stream().iter_messages(kind, timeout)

    # -- resync --------------------------------------------------------------------------------
    def resync(self, desired: Iterable[Entity], **kwargs: Any) -> ResyncSummary:
        """Make the switch hold exactly `desired`; see resync.resync for the options."""
        from .resync import resync

        return resync(self, desired, **kwargs)

    def restore_on_reconnect(
        self,
        desired: Callable[[], Iterable[Entity]],
        *,
        pipeline: PipelineConfig | None = None,
        on_done: Callable[[ResyncSummary | BaseException], None] | None = None,
    ) -> AutoRestore:
        """After each reconnection or takeover: ensure_pipeline(pipeline), resync(desired())."""
        from .restore import AutoRestore

        return AutoRestore(self, desired, pipeline=pipeline, on_done=on_done)


def _uint128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


def _many(entities: Any) -> Iterable[Any]:
    if isinstance(entities, list | tuple | set | frozenset) or (
        hasattr(entities, "__iter__") and not hasattr(entities, "encode")
    ):
        return entities  # type: ignore[no-any-return]
    return (entities,)


def _only(items: list[Entity], kind: type[E]) -> list[E]:
    return [e for e in items if isinstance(e, kind)]
