"""P4Runtime errors: a gRPC status code plus message, and per-update Write error details."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from icefabric.target.runtime.errors import RuntimeStateError


class P4RTError(Exception):
    """An error to report to the client with status `code` (a grpc.StatusCode)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def rpc_code(self) -> int:
        """google.rpc.Code number of `code`."""
        return int(self.code.value[0])


def invalid(message: str) -> P4RTError:
    """INVALID_ARGUMENT."""
    return P4RTError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RTError:
    """NOT_FOUND."""
    return P4RTError(grpc.StatusCode.NOT_FOUND, message)


def out_of_range(message: str) -> P4RTError:
    """OUT_OF_RANGE."""
    return P4RTError(grpc.StatusCode.OUT_OF_RANGE, message)


def unimplemented(message: str) -> P4RTError:
    """UNIMPLEMENTED."""
    return P4RTError(grpc.StatusCode.UNIMPLEMENTED, message)


def from_runtime(exc: RuntimeStateError) -> P4RTError:
    """Map a run-time state error onto its status code."""
    return P4RTError(grpc.StatusCode[exc.code], str(exc))


def write_error_status(results: Sequence[P4RTError | None]) -> status_pb2.Status:
    """google.rpc.Status UNKNOWN with one p4.v1.Error per update (OK for the good ones)."""
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure")
    for err in results:
        detail = p4runtime_pb2.Error()
        if err is None:
            detail.canonical_code = code_pb2.OK
        else:
            detail.canonical_code = err.rpc_code
            detail.message = err.message
        status.details.add().Pack(detail)
    failed = sum(1 for r in results if r is not None)
    status.message = f"Write failure: {failed} of {len(results)} updates failed"
    return status
