"""Exceptions of the P4Runtime client: one project exception per failure, gRPC wrapped once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

LOG = logging.getLogger(__name__)

_STATUS_DETAILS_KEY = "grpc-status-details-bin"


class P4RtError(Exception):
    """Base class of every error raised by icefabric.control.p4rt."""


class P4InfoError(P4RtError, LookupError):
    """A name or id is not in the P4Info (the message names the kind and what exists)."""


class EncodeError(P4RtError, ValueError):
    """A value cannot be encoded for P4Runtime (names the entity, field and what was expected)."""


class SwitchUnavailableError(P4RtError):
    """The switch cannot be reached (channel not ready by the deadline, stream closed)."""


class NotPrimaryError(P4RtError):
    """The operation needs this connection to be the primary controller and it is not."""


def code_name(code: int) -> str:
    """Name of a google.rpc.Code number ("OK", "ALREADY_EXISTS", ...), or the number."""
    try:
        return str(code_pb2.Code.Name(code))
    except ValueError:
        return str(code)


def _grpc_code(code: int) -> grpc.StatusCode:
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status
    return grpc.StatusCode.UNKNOWN


@dataclass(slots=True, frozen=True, kw_only=True)
class UpdateError:
    """The failure of one update in a batch (P4Runtime spec 12.3: one p4.v1.Error per update)."""

    index: int  # position in the batch the caller passed to write()
    code: grpc.StatusCode
    message: str
    space: str = ""
    target_code: int = 0
    entity: str = ""  # human summary of the update, e.g. "INSERT table_entry MyIngress.ipv4_lpm"
    table: str = ""  # the P4Info name of the table / profile / extern, when there is one

    def __str__(self) -> str:
        where = f" [{self.entity}]" if self.entity else ""
        return f"update #{self.index}: {self.code.name}: {self.message}{where}"


class P4RuntimeError(P4RtError):
    """A failed P4Runtime RPC: the gRPC status code, message and the per-update errors."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        details: Sequence[UpdateError] = (),
        *,
        operation: str = "",
        switch: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.details: list[UpdateError] = list(details)
        self.operation = operation
        self.switch = switch
        super().__init__(self._text())

    def _text(self) -> str:
        head = " ".join(x for x in (self.switch, self.operation) if x)
        lines = [f"{head + ': ' if head else ''}{self.code.name}: {self.message}"]
        lines += [f"  {d}" for d in self.details]
        return "\n".join(lines)

    @property
    def tables(self) -> list[str]:
        """The P4Info names of the tables (or other objects) named by the failed updates."""
        return sorted({d.table for d in self.details if d.table})

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_p4runtime_error,
            (self.code, self.message, self.details, self.operation, self.switch),
        )

    @classmethod
    def from_rpc_error(
        cls,
        err: grpc.RpcError,
        *,
        operation: str = "",
        switch: str = "",
        describe: Callable[[int], tuple[str, str]] | None = None,
        index_offset: int = 0,
    ) -> P4RuntimeError:
        """Build from a grpc.RpcError, decoding google.rpc.Status with p4.v1.Error details.

        `describe(i)` returns (entity summary, table name) for the i-th update of the request;
        `index_offset` is added to every index (a chunk of a larger batch).
        """
        code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
        message = (err.details() if isinstance(err, grpc.Call) else str(err)) or ""
        details: list[UpdateError] = []
        trailing = err.trailing_metadata() if isinstance(err, grpc.Call) else None
        status = _status_from_metadata(trailing)
        if status is not None:
            message = status.message or message
            for i, any_msg in enumerate(status.details):
                error = p4runtime_pb2.Error()
                if not any_msg.Unpack(error):
                    LOG.debug("status detail %d is %s, not p4.v1.Error", i, any_msg.type_url)
                    continue
                if error.canonical_code == code_pb2.OK:
                    continue
                entity, table = describe(i) if describe is not None else ("", "")
                details.append(
                    UpdateError(
                        index=i + index_offset,
                        code=_grpc_code(error.canonical_code),
                        message=error.message,
                        space=error.space,
                        target_code=error.code,
                        entity=entity,
                        table=table,
                    )
                )
        return cls(
            code or grpc.StatusCode.UNKNOWN, message, details, operation=operation, switch=switch
        )


def _rebuild_p4runtime_error(
    code: grpc.StatusCode,
    message: str,
    details: list[UpdateError],
    operation: str,
    switch: str,
) -> P4RuntimeError:
    return P4RuntimeError(code, message, details, operation=operation, switch=switch)


def _status_from_metadata(
    trailing: Sequence[tuple[str, str | bytes]] | None,
) -> status_pb2.Status | None:
    for key, value in trailing or ():
        if key == _STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:  # a malformed trailer must not hide the original error
                LOG.warning("undecodable %s trailer (%d bytes)", key, len(value))
                return None
            return status
    return None
