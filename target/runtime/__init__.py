"""Run-time state objects the compiled P4 code calls: tables, externs, hashes, digests."""

from icefabric.target.runtime.checksum import csum16, csum16_bytes, pack_fields
from icefabric.target.runtime.clock import Clock, ManualClock
from icefabric.target.runtime.digest import DigestType
from icefabric.target.runtime.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    RuntimeStateError,
)
from icefabric.target.runtime.externs import (
    GREEN,
    RED,
    YELLOW,
    Counter,
    DirectCounter,
    DirectMeter,
    Meter,
    MeterConfig,
    MeterState,
    Register,
)
from icefabric.target.runtime.hashes import HASH_ALGORITHMS, compute_hash
from icefabric.target.runtime.model import ActionCall, KeyField, Match, TableEntry
from icefabric.target.runtime.profiles import ActionProfile
from icefabric.target.runtime.tables import Table

__all__ = [
    "GREEN",
    "HASH_ALGORITHMS",
    "RED",
    "YELLOW",
    "ActionCall",
    "ActionProfile",
    "AlreadyExistsError",
    "Clock",
    "Counter",
    "DigestType",
    "DirectCounter",
    "DirectMeter",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "KeyField",
    "ManualClock",
    "Match",
    "Meter",
    "MeterConfig",
    "MeterState",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "Register",
    "ResourceExhaustedError",
    "RuntimeStateError",
    "Table",
    "TableEntry",
    "compute_hash",
    "csum16",
    "csum16_bytes",
    "pack_fields",
]
