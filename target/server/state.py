"""The committed forwarding pipeline as the server sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from icefabric.target.server.errors import P4RTError, not_found
from icefabric.target.server.p4info_index import P4InfoIndex

ONESHOT_BASE_ID = 0x8000_0000  # member/group ids the server allocates for one-shot entries


@dataclass(slots=True)
class OneShot:
    """Hidden group and members that implement one one-shot action-selector entry."""

    group_id: int
    member_ids: list[int]
    action_set: p4runtime_pb2.ActionProfileActionSet


@dataclass(slots=True)
class PipelineState:
    """Program, P4Info (as the client sent it), pipeline objects and server-side extras."""

    p4info: p4info_pb2.P4Info
    index: P4InfoIndex
    program: Any
    pipeline: Any
    device_config: bytes
    cookie: int = 0
    oneshots: dict[tuple[int, object], OneShot] = field(default_factory=dict)
    next_hidden_id: int = ONESHOT_BASE_ID
    digest_configs: dict[int, p4runtime_pb2.DigestEntry.Config] = field(default_factory=dict)

    def runtime(self, kind: str, name: str) -> Any:
        """The run-time object (pipeline.tables/registers/...) named `name`."""
        objects = getattr(self.pipeline, kind, None) or {}
        obj = objects.get(name)
        if obj is None:
            raise not_found(f"{name}: no such object in the running pipeline ({kind})")
        return obj

    def hidden_id(self) -> int:
        """A fresh member/group id for one-shot programming."""
        self.next_hidden_id += 1
        return self.next_hidden_id


def check_error(exc: Exception) -> P4RTError:
    """Turn any exception from a run-time object into a P4RTError."""
    from icefabric.target.runtime.errors import RuntimeStateError
    from icefabric.target.server.errors import from_runtime, invalid

    if isinstance(exc, P4RTError):
        return exc
    if isinstance(exc, RuntimeStateError):
        return from_runtime(exc)
    return invalid(str(exc))
