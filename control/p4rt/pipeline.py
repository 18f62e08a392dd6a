"""Forwarding pipeline configs: P4Info plus the target's device config (BMv2 JSON or embedded)."""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from .errors import P4RtError
from .p4info import P4InfoIndex, load_p4info

TargetKind = Literal["bmv2", "embedded"]


class PipelineConfigError(P4RtError, ValueError):
    """A pipeline config cannot be built (missing file, unknown target kind)."""


@dataclass(slots=True, frozen=True, kw_only=True)
class PipelineConfig:
    """What SetForwardingPipelineConfig pushes: P4Info, opaque device config and a cookie."""

    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: int = 0
    kind: str = ""  # "bmv2" | "embedded" | "" (read back from a switch)
    source: str = ""  # file the config was built from, for messages
    _index: list[P4InfoIndex] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def index(self) -> P4InfoIndex:
        """The P4InfoIndex of this config's P4Info (built once)."""
        if not self._index:
            self._index.append(P4InfoIndex(self.p4info))
        return self._index[0]

    @classmethod
    def for_bmv2(
        cls, json_path: str | Path, p4info_path: str | Path, *, cookie: int | None = None
    ) -> PipelineConfig:
        """p4c's BMv2 JSON as device config, with the P4Info p4c wrote beside it."""
        jp = Path(json_path)
        try:
            device_config = jp.read_bytes()
        except OSError as exc:
            raise PipelineConfigError(f"{jp}: cannot read the BMv2 JSON: {exc.strerror}") from exc
        p4info = load_p4info(p4info_path)
        return cls(
            p4info=p4info,
            device_config=device_config,
            cookie=_cookie(device_config) if cookie is None else cookie,
            kind="bmv2",
            source=str(jp),
        )

    @classmethod
    def for_embedded(cls, p4_main_path: str | Path, *, cookie: int | None = None) -> PipelineConfig:
        """The embedded target's source bundle as device config, P4Info from its compiler."""
        path = Path(p4_main_path)
        if not path.is_file():
            raise PipelineConfigError(f"{path}: no such P4 program")
        bundle = importlib.import_module("icefabric.target.bundle")
        compiler = importlib.import_module("icefabric.target.compiler")
        device_config = bundle.make_bundle(path)
        program = compiler.load_program(path)
        p4info = program.p4info
        if not isinstance(p4info, p4info_pb2.P4Info):  # a differently generated P4Info class
            converted = p4info_pb2.P4Info()
            converted.ParseFromString(p4info.SerializeToString())
            p4info = converted
        return cls(
            p4info=p4info,
            device_config=device_config,
            cookie=_cookie(device_config) if cookie is None else cookie,
            kind="embedded",
            source=str(path),
        )

    @classmethod
    def from_target(
        cls,
        kind: str,
        *,
        p4_main: str | Path | None = None,
        bmv2_json: str | Path | None = None,
        p4info: str | Path | None = None,
    ) -> PipelineConfig:
        """The config for one switch's target kind: "embedded" needs p4_main, "bmv2" the
        JSON and P4Info files."""
        if kind == "embedded":
            if p4_main is None:
                raise PipelineConfigError("target 'embedded' needs p4_main (the P4 program)")
            return cls.for_embedded(p4_main)
        if kind == "bmv2":
            if bmv2_json is None or p4info is None:
                raise PipelineConfigError("target 'bmv2' needs bmv2_json and p4info (p4c outputs)")
            return cls.for_bmv2(bmv2_json, p4info)
        raise PipelineConfigError(f"unknown target kind {kind!r} (expected 'embedded' or 'bmv2')")

    def encode(self) -> p4runtime_pb2.ForwardingPipelineConfig:
        """The p4.v1.ForwardingPipelineConfig message."""
        msg = p4runtime_pb2.ForwardingPipelineConfig()
        msg.p4info.CopyFrom(self.p4info)
        msg.p4_device_config = self.device_config
        msg.cookie.cookie = self.cookie
        return msg

    @classmethod
    def decode(cls, msg: p4runtime_pb2.ForwardingPipelineConfig) -> PipelineConfig:
        """From a p4.v1.ForwardingPipelineConfig (as GetForwardingPipelineConfig returns)."""
        p4info = p4info_pb2.P4Info()
        p4info.CopyFrom(msg.p4info)
        return cls(p4info=p4info, device_config=msg.p4_device_config, cookie=msg.cookie.cookie)


def _cookie(data: bytes) -> int:
    """A stable 64-bit cookie from the device config, so a controller can tell configs apart."""
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
