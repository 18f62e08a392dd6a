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


DETAILS_BUDGET = 6 * 1024  # bytes of serialized details: gRPC clients refuse trailers over 8 KiB
MESSAGE_CHARS = 160  # of one update's error message in the details
SUMMARY_FAILURES = 5  # failures named in the status message when details are cut


def write_error_status(
    results: Sequence[P4RTError | None], budget: int = DETAILS_BUDGET
) -> status_pb2.Status:
    """google.rpc.Status UNKNOWN with one p4.v1.Error per update (OK for the good ones).

    The details travel in a gRPC trailer, which clients refuse over 8 KiB by default (a batch of
    10,000 failures is 770 KB): past ``budget`` bytes they stop, so they cover updates 0..N-1
    in order, and the status message says so and names the first failures beyond them.
    """
    status = status_pb2.Status(code=code_pb2.UNKNOWN)
    used = 0
    covered = 0
    for err in results:
        detail = p4runtime_pb2.Error()
        if err is None:
            detail.canonical_code = code_pb2.OK
        else:
            detail.canonical_code = err.rpc_code
            detail.message = err.message[:MESSAGE_CHARS]
        size = detail.ByteSize() + 40  # the Any's type URL and framing
        if used + size > budget:
            break
        status.details.add().Pack(detail)
        used += size
        covered += 1
    failed = sum(1 for r in results if r is not None)
    status.message = f"Write failure: {failed} of {len(results)} updates failed"
    if covered < len(results):
        beyond = [(i, r) for i, r in enumerate(results) if r is not None and i >= covered]
        named = "; ".join(
            f"#{i} {r.code.name}: {r.message[:80]}" for i, r in beyond[:SUMMARY_FAILURES]
        )
        status.message += (
            f"; per-update details cover updates 0..{covered - 1} only (gRPC trailer limit), "
            f"{len(beyond)} failure(s) beyond them, first: {named}"
        )
    return status
