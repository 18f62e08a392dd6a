"""Forwarding pipeline configs: P4Info plus the target's device config (BMv2 JSON or embedded)."""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from icefabric.files import DataFileError, read_input

from .errors import P4RtError
from .p4info import P4InfoIndex, load_p4info

TargetKind = Literal["bmv2", "embedded", "tofino"]

# Where bf-p4c --p4runtime-files usually puts the P4Info inside its output folder.
TOFINO_P4INFO_NAMES = ("p4info.txt", "p4info.txtpb", "p4info.pb.txt")


MAX_BMV2_JSON_BYTES = 512 * 1024 * 1024  # p4c's BMv2 JSON (ice.p4's: about 1 MiB)


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
            device_config = read_input(jp, limit=MAX_BMV2_JSON_BYTES, what="p4c's BMv2 JSON")
        except DataFileError as exc:
            msg = str(exc).splitlines()[0]
            raise PipelineConfigError(
                msg.replace(": cannot read:", ": cannot read the BMv2 JSON:", 1)
            ) from None
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
    def for_tofino(
        cls,
        out_dir: str | Path,
        p4info_path: str | Path | None = None,
        *,
        fmt: str = "bfrt",
        program: str | None = None,
        cookie: int | None = None,
    ) -> PipelineConfig:
        """bf-p4c's output folder packed for Stratum (``bfrt``: BfPipelineConfig, or ``legacy``:
        PI's packing; see control/p4rt/tofino.py), with the P4Info bf-p4c wrote (``p4info_path``,
        else ``p4info.txt``/``.txtpb`` in the folder)."""
        from .tofino import TofinoConfigError, load_bf_p4c_output

        root = Path(out_dir)
        if not root.is_dir():
            raise PipelineConfigError(f"{root}: not a folder (expected bf-p4c's output folder)")
        if p4info_path is None:
            found = [root / n for n in TOFINO_P4INFO_NAMES if (root / n).is_file()]
            if not found:
                raise PipelineConfigError(
                    f"{root}: no P4Info ({', '.join(TOFINO_P4INFO_NAMES)}); give the file "
                    "bf-p4c --p4runtime-files wrote with --p4info"
                )
            p4info_path = found[0]
        try:
            device_config = load_bf_p4c_output(root, program=program).pack(fmt)
        except TofinoConfigError as exc:
            raise PipelineConfigError(str(exc)) from exc
        p4info = load_p4info(p4info_path)
        return cls(
            p4info=p4info,
            device_config=device_config,
            cookie=_cookie(device_config) if cookie is None else cookie,
            kind="tofino",
            source=str(root),
        )

    @classmethod
    def from_target(
        cls,
        kind: str,
        *,
        p4_main: str | Path | None = None,
        bmv2_json: str | Path | None = None,
        p4info: str | Path | None = None,
        tofino_out: str | Path | None = None,
        tofino_format: str = "bfrt",
    ) -> PipelineConfig:
        """The config for one switch's target kind: "embedded" needs p4_main, "bmv2" the
        JSON and P4Info files, "tofino" bf-p4c's output folder (and its P4Info)."""
        if kind == "embedded":
            if p4_main is None:
                raise PipelineConfigError("target 'embedded' needs p4_main (the P4 program)")
            return cls.for_embedded(p4_main)
        if kind == "bmv2":
            if bmv2_json is None or p4info is None:
                raise PipelineConfigError("target 'bmv2' needs bmv2_json and p4info (p4c outputs)")
            return cls.for_bmv2(bmv2_json, p4info)
        if kind == "tofino":
            if tofino_out is None:
                raise PipelineConfigError("target 'tofino' needs tofino_out (bf-p4c's output)")
            return cls.for_tofino(tofino_out, p4info, fmt=tofino_format)
        raise PipelineConfigError(
            f"unknown target kind {kind!r} (expected 'embedded', 'bmv2' or 'tofino')"
        )

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
