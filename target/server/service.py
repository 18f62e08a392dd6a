"""The P4Runtime gRPC service of the embedded target."""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from icefabric.target.device import Device
from icefabric.target.server.arbitration import Arbitration, Session
from icefabric.target.server.digests import DigestStreamer
from icefabric.target.server.dispatch import apply_update, read_entity
from icefabric.target.server.entity_pre import PreStore
from icefabric.target.server.errors import P4RTError, invalid, write_error_status
from icefabric.target.server.idle import IdleScanner, enable_hit_tracking
from icefabric.target.server.p4info_index import P4InfoIndex
from icefabric.target.server.packetio import build_packet_out, split_packet_in
from icefabric.target.server.pipeline_config import check_p4info, load_program
from icefabric.target.server.reconcile import migrate
from icefabric.target.server.state import PipelineState, check_error
from icefabric.target.server.streams import (
    ARBITRATION_TIMEOUT_S,
    MAX_STREAMS,
    MAX_STREAMS_PER_PEER,
    UNARY_RESERVE,
    StreamLimiter,
)

API_VERSION = "1.4.1"
COMPILE_TIMEOUT_S = 60.0  # a pushed program that takes longer to compile is abandoned
Req = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetReq = p4runtime_pb2.GetForwardingPipelineConfigRequest

log = logging.getLogger(__name__)


def _abort(context: grpc.ServicerContext, err: P4RTError) -> None:
    context.abort(err.code, err.message)


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):  # type: ignore[misc]
    """P4Runtime over one Device: pipeline config, Write/Read, StreamChannel."""

    def __init__(
        self,
        device: Device,
        *,
        loader: Callable[[bytes], Any] | None = None,
        compile_timeout_s: float = COMPILE_TIMEOUT_S,
    ) -> None:
        self.device = device
        self.loader = loader or load_program
        self.compile_timeout_s = compile_timeout_s
        self._compiling = threading.Semaphore(1)  # one compile at a time, held until it ends
        self.streams = StreamLimiter()
        self.arbitration_timeout_s = ARBITRATION_TIMEOUT_S
        self.arbitration = Arbitration(device.device_id)
        self.pre = PreStore(device)
        self.state: PipelineState | None = None
        self.saved: tuple[Any, Any, bytes, int] | None = None  # VERIFY_AND_SAVE result
        self.lock = threading.RLock()
        self.digests = DigestStreamer(self._send_primary)
        self.idle = IdleScanner(lambda: self.state, device.clock, self._send_primary)
        device.packet_in_handlers.append(self._on_packet_in)

    # --- helpers -----------------------------------------------------------------------------
    def _check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RTError(grpc.StatusCode.NOT_FOUND, f"unknown device id {device_id}")

    def _check_primary(self, election_id: p4runtime_pb2.Uint128, what: str) -> None:
        eid = (election_id.high, election_id.low)
        if not self.arbitration.is_primary(eid):
            raise P4RTError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{what}: election id {eid} is not the primary's (open a StreamChannel and win arbitration)",
            )

    def _need_state(self) -> PipelineState:
        if self.state is None:
            raise P4RTError(
                grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config set"
            )
        return self.state

    # --- RPCs --------------------------------------------------------------------------------
    def Capabilities(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The P4Runtime API version."""
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        """VERIFY / VERIFY_AND_SAVE / VERIFY_AND_COMMIT / COMMIT / RECONCILE_AND_COMMIT."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request.election_id, "SetForwardingPipelineConfig")
            # Compile outside the lock: Read/Write of every client go on meanwhile.
            loaded = self._load(request)
            with self.lock:
                self._check_primary(request.election_id, "SetForwardingPipelineConfig")
                self._set_pipeline(request, loaded)
        except P4RTError as err:
            _abort(context, err)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _load(self, request: Any) -> tuple[Any, bytes] | None:
        """Compile the request's device config (None for COMMIT), bounded in time."""
        if request.action not in (
            Req.VERIFY,
            Req.VERIFY_AND_SAVE,
            Req.VERIFY_AND_COMMIT,
            Req.RECONCILE_AND_COMMIT,
        ):
            return None
        data = bytes(request.config.p4_device_config)
        state = self.state
        if not data and request.action == Req.RECONCILE_AND_COMMIT and state is not None:
            data = state.device_config
        return self._compile_bounded(data), data

    def _compile_bounded(self, data: bytes) -> Any:
        """Run the loader in its own daemon thread; give up after ``compile_timeout_s``."""
        limit = self.compile_timeout_s
        if not self._compiling.acquire(timeout=limit):
            raise P4RTError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"another pipeline config is still being compiled (over {limit:g} s); try later",
            )
        box: list[Any] = []
        log.info("compiling p4_device_config (%d bytes)", len(data))

        def work() -> None:
            try:
                box.append(("ok", self.loader(data)))
            except BaseException as exc:  # reported to the RPC below
                box.append(("err", exc))
            finally:
                self._compiling.release()

        worker = threading.Thread(target=work, name="p4rt-compile", daemon=True)
        worker.start()
        worker.join(limit)
        if not box:
            log.warning("p4_device_config: compile abandoned after %.3g s", limit)
            raise P4RTError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"compiling p4_device_config took longer than {limit:g} s; abandoned",
            )
        kind, value = box[0]
        if kind == "err":
            raise value
        return value

    def _set_pipeline(self, request: Any, loaded: tuple[Any, bytes] | None) -> None:
        action = request.action
        cfg = request.config
        if action == Req.COMMIT:
            if self.saved is None:
                raise P4RTError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "COMMIT: no saved config (use VERIFY_AND_SAVE first)",
                )
            program, p4info, data, cookie = self.saved
            self.saved = None
            self._commit(program, p4info, data, cookie)
            return
        if action not in (
            Req.VERIFY,
            Req.VERIFY_AND_SAVE,
            Req.VERIFY_AND_COMMIT,
            Req.RECONCILE_AND_COMMIT,
        ):
            raise invalid(f"unsupported action {action}")
        assert loaded is not None
        program, data = loaded
        p4info = check_p4info(cfg.p4info, program.p4info)
        cookie = cfg.cookie.cookie
        if action == Req.VERIFY:
            return
        if action == Req.VERIFY_AND_SAVE:
            self.saved = (program, p4info, data, cookie)
            return
        if action == Req.RECONCILE_AND_COMMIT and self.state is not None:
            if self.state.device_config == data and self.state.p4info == p4info:
                self.state.cookie = cookie  # same program: forwarding state is kept
                return
            self._reconcile(program, p4info, data, cookie)
            return
        self._commit(program, p4info, data, cookie)

    def _reconcile(self, program: Any, p4info: Any, data: bytes, cookie: int) -> None:
        old = self.state
        assert old is not None
        index = P4InfoIndex(program.p4info)
        pipeline = self.device.make_pipeline(program)
        migrate(old.index, old.pipeline, index, pipeline)
        self.device.set_pipeline(pipeline, program=program, keep_pre=True)
        state = PipelineState(p4info, index, program, pipeline, data, cookie)
        state.oneshots = {k: v for k, v in old.oneshots.items() if k[0] in index.tables}
        state.next_hidden_id = old.next_hidden_id
        state.digest_configs = {
            did: cfg for did, cfg in old.digest_configs.items() if did in index.digests
        }
        self._install_state(state)
        log.info("pipeline reconciled: %s (cookie %d)", getattr(program, "name", "?"), cookie)

    def commit_program(self, program: Any, device_config: bytes, cookie: int = 0) -> None:
        """Install `program` as if a client had committed it (ice-switch --p4)."""
        with self.lock:
            self._commit(program, program.p4info, device_config, cookie)

    def _commit(self, program: Any, p4info: Any, data: bytes, cookie: int) -> None:
        self.device.set_program(program)
        self.pre.clear()
        pipeline = self.device.pipeline
        self._install_state(
            PipelineState(p4info, P4InfoIndex(program.p4info), program, pipeline, data, cookie)
        )
        log.info("pipeline committed: %s (cookie %d)", getattr(program, "name", "?"), cookie)

    def _install_state(self, state: PipelineState) -> None:
        enable_hit_tracking(state, self.device.clock)
        self.state = state
        self.digests.reset(state)
        for digest in (getattr(state.pipeline, "digests", None) or {}).values():
            digest.listeners.append(self.digests.on_push)

    def GetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The committed config, shaped by response_type."""
        try:
            self._check_device(request.device_id)
        except P4RTError as err:
            _abort(context, err)
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        state = self.state
        if state is None:
            return resp
        rt = request.response_type
        resp.config.cookie.cookie = state.cookie
        if rt in (GetReq.ALL, GetReq.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(state.p4info)
        if rt in (GetReq.ALL, GetReq.DEVICE_CONFIG_AND_COOKIE):
            resp.config.p4_device_config = state.device_config
        return resp

    def Write(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Apply updates in order; per-update errors come back as UNKNOWN with details."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request.election_id, "Write")
            state = self._need_state()
            if request.role:
                raise P4RTError(grpc.StatusCode.UNIMPLEMENTED, "roles are not supported")
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RTError(
                    grpc.StatusCode.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported"
                )
        except P4RTError as err:
            _abort(context, err)
        results: list[P4RTError | None] = []
        with self.lock:
            for update in request.updates:
                try:
                    apply_update(state, self.pre, update)
                    results.append(None)
                except Exception as exc:
                    if (
                        not isinstance(exc, P4RTError)
                        and type(exc).__module__.startswith("icefabric") is False
                    ):
                        log.exception("unexpected error applying an update")
                    results.append(check_error(exc))
        if any(r is not None for r in results):
            status = write_error_status(results)
            context.abort_with_status(_RpcStatus(status))
        return p4runtime_pb2.WriteResponse()

    def Read(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        """Stream the entities matching each (wildcard) read entity."""
        try:
            self._check_device(request.device_id)
            state = self._need_state()
            with self.lock:
                resp = p4runtime_pb2.ReadResponse()
                for entity in request.entities:
                    resp.entities.extend(read_entity(state, self.pre, entity))
        except Exception as exc:
            _abort(context, check_error(exc))
        yield resp

    # --- stream ------------------------------------------------------------------------------
    def StreamChannel(
        self, request_iterator: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        """Arbitration, PacketOut/PacketIn and digests for one client."""
        peer = context.peer() or ""
        refused = self.streams.acquire(peer)
        if refused is not None:
            log.warning("StreamChannel from %s refused: %s", peer, refused)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"StreamChannel refused: {refused}")
        try:
            yield from self._stream(request_iterator, context)
        finally:
            self.streams.release(peer)

    def _stream(
        self, request_iterator: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        session = Session()
        context.add_callback(session.close)
        reader = threading.Thread(
            target=self._read_stream,
            args=(session, request_iterator),
            name=f"p4rt-stream-{session.id}",
            daemon=True,
        )
        reader.start()
        opened = time.monotonic()
        try:
            while True:
                try:
                    item = session.out.get(timeout=0.5 if session.election_id is None else None)
                except queue.Empty:
                    if time.monotonic() - opened > self.arbitration_timeout_s:
                        log.info("StreamChannel %d: no arbitration; closed", session.id)
                        context.abort(
                            grpc.StatusCode.DEADLINE_EXCEEDED,
                            f"no MasterArbitrationUpdate within {self.arbitration_timeout_s:g} s",
                        )
                    continue
                if Session.is_close(item):
                    return
                if isinstance(item, P4RTError):
                    context.abort(item.code, item.message)
                yield item
        finally:
            session.close()
            self.arbitration.remove(session)

    def _read_stream(self, session: Session, requests: Iterator[Any]) -> None:
        try:
            for req in requests:
                which = req.WhichOneof("update")
                if which == "arbitration":
                    try:
                        self.arbitration.update(session, req.arbitration)
                    except P4RTError as err:
                        session.send(err)
                        return
                elif which == "packet":
                    self._packet_out(session, req.packet)
                elif which == "digest_ack":
                    if self.arbitration.primary() is session:
                        self.digests.ack(req.digest_ack.digest_id, req.digest_ack.list_id)
                else:
                    log.debug("ignoring stream message %s", which)
        except grpc.RpcError as exc:  # the client went away: the session ends below
            log.debug(
                "stream closed by the client: %s", exc.code() if hasattr(exc, "code") else exc
            )
        except Exception:
            log.exception("stream reader failed")
        finally:
            session.close()

    def _packet_out(self, session: Session, msg: p4runtime_pb2.PacketOut) -> None:
        primary = self.arbitration.primary()
        if primary is not session:
            self._stream_error(
                session, code_pb2.PERMISSION_DENIED, "PacketOut from a non-primary client", msg
            )
            return
        state = self.state
        if state is None:
            self._stream_error(session, code_pb2.FAILED_PRECONDITION, "no pipeline config", msg)
            return
        if self.device.cpu_port is None:
            self._stream_error(
                session, code_pb2.FAILED_PRECONDITION, "the switch has no CPU port", msg
            )
            return
        try:
            data = build_packet_out(state.index.controller_headers.get("packet_out"), msg)
            if len(data) > self.device.max_packet_bytes:
                raise P4RTError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"PacketOut of {len(data)} bytes exceeds the switch's "
                    f"{self.device.max_packet_bytes}-byte limit",
                )
        except P4RTError as err:
            self._reject_packet_out(session, err, msg)
            return
        self.device.packet_out(data)

    def _reject_packet_out(
        self, session: Session, err: P4RTError, msg: p4runtime_pb2.PacketOut
    ) -> None:
        """Drop a bad PacketOut: count it, log it (the first and every 1000th), tell the client."""
        self.device.drops["packet_out_invalid"] += 1
        n = self.device.drops["packet_out_invalid"]
        if n == 1 or n % 1000 == 0:
            log.warning("PacketOut dropped (%d so far): %s", n, err.message)
        self._stream_error(session, err.rpc_code, err.message, msg)

    @staticmethod
    def _stream_error(
        session: Session, code: int, message: str, msg: p4runtime_pb2.PacketOut
    ) -> None:
        resp = p4runtime_pb2.StreamMessageResponse()
        resp.error.canonical_code = code
        resp.error.message = message
        resp.error.packet_out.packet_out.CopyFrom(msg)
        session.send(resp)

    def _on_packet_in(self, data: bytes) -> None:
        state = self.state
        primary = self.arbitration.primary()
        if primary is None or state is None:
            return
        msg = split_packet_in(state.index.controller_headers.get("packet_in"), data)
        primary.send(p4runtime_pb2.StreamMessageResponse(packet=msg))

    def close(self) -> None:
        """Stop the service's own threads (the idle-timeout scanner)."""
        self.idle.stop()

    def _send_primary(self, msg: p4runtime_pb2.StreamMessageResponse) -> bool:
        primary = self.arbitration.primary()
        if primary is None:
            return False
        primary.send(msg)
        return True


def _unix_listening(path: str) -> bool:
    """Whether a server already accepts connections on the Unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


class _RpcStatus(grpc.Status):  # type: ignore[misc]
    """grpc.Status carrying a google.rpc.Status in the binary trailer."""

    def __init__(self, status: Any) -> None:
        self.code = grpc.StatusCode.UNKNOWN
        self.details = status.message
        self.trailing_metadata = (("grpc-status-details-bin", status.SerializeToString()),)


def serve(
    device: Device,
    addr: str = "127.0.0.1:0",
    *,
    max_workers: int | None = None,
    loader: Callable[[bytes], Any] | None = None,
    max_streams: int = MAX_STREAMS,
    max_streams_per_peer: int = MAX_STREAMS_PER_PEER,
    program: Any = None,
    device_config: bytes = b"",
) -> tuple[grpc.Server, int, P4RuntimeService]:
    """Start a P4Runtime server for `device` on `addr`; returns (server, bound port, service).

    `program` (with its `device_config`) is committed before the server takes its first call,
    so no client ever sees the switch without it (ice-switch --p4).

    The port is bound exclusively (no SO_REUSEPORT): a second switch on the same address fails
    with OSError instead of silently sharing the connections.
    """
    workers = max_workers if max_workers is not None else max_streams + UNARY_RESERVE
    if workers <= max_streams:  # a small pool: streams may take at most half of it
        max_streams = max(1, workers // 2)
        max_streams_per_peer = min(max_streams_per_peer, max_streams)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt"),
        options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.so_reuseport", 0),
        ],
    )
    service = P4RuntimeService(device, loader=loader)
    service.streams = StreamLimiter(max_streams, max_streams_per_peer)
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(service, server)
    why = "the address is in use (another switch?) or not available here"
    if addr.startswith("unix:") and _unix_listening(addr[len("unix:") :]):
        port = 0  # gRPC would unlink the live socket of another server and take its path
    else:
        try:
            port = server.add_insecure_port(addr)
        except RuntimeError:  # newer grpcio raises instead of returning 0
            port = 0
    if port == 0:
        service.close()
        raise OSError(f"cannot bind P4Runtime server to {addr}: {why}")
    if program is not None:
        try:
            service.commit_program(program, device_config)
        except BaseException:
            service.close()
            server.stop(None)
            raise
    server.start()
    service.idle.start()
    return server, port, service
