"""Errors raised by run-time objects; each maps onto one P4Runtime/gRPC status code."""

from __future__ import annotations


class RuntimeStateError(Exception):
    """Base class: `code` is the google.rpc code name the P4Runtime server reports."""

    code = "UNKNOWN"


class AlreadyExistsError(RuntimeStateError):
    """The entity (entry, member, group) is already present."""

    code = "ALREADY_EXISTS"


class NotFoundError(RuntimeStateError):
    """The entity to modify, delete or reference does not exist."""

    code = "NOT_FOUND"


class InvalidArgumentError(RuntimeStateError):
    """The request is malformed for this object (bad width, unknown action, ...)."""

    code = "INVALID_ARGUMENT"


class OutOfRangeError(RuntimeStateError):
    """An index is outside an array extern (register, counter, meter)."""

    code = "OUT_OF_RANGE"


class ResourceExhaustedError(RuntimeStateError):
    """The table, profile or group is full."""

    code = "RESOURCE_EXHAUSTED"


class PermissionDeniedError(RuntimeStateError):
    """The object is const (const entries, const default action)."""

    code = "PERMISSION_DENIED"


class FailedPreconditionError(RuntimeStateError):
    """The operation conflicts with current state (member still used by a group, ...)."""

    code = "FAILED_PRECONDITION"
