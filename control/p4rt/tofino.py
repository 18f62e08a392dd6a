"""Tofino device configs: bf-p4c's output folder packed as P4Runtime ``p4_device_config``.

Two packings exist, both described by the Stratum project (stratum/hal/bin/barefoot/
README.pipeline.md and stratum/hal/lib/barefoot/bf.proto):

* ``bfrt`` (Stratum-bfrt, the default): a serialized ``stratum.hal.barefoot.BfPipelineConfig``::

      message BfPipelineConfig {
        message Profile {
          string profile_name = 1;         // the pipeline's name in bf-p4c's output ("pipe")
          bytes context = 2;               // <pipeline>/context.json
          bytes binary = 3;                // <pipeline>/tofino.bin (tofino2.bin on Tofino 2)
          repeated uint32 pipe_scope = 4;  // hardware pipes this profile runs on (packed)
        }
        string p4_name = 1;                // the program's name
        bytes bfruntime_info = 2;          // bf-rt.json
        repeated Profile profiles = 3;
      }

* ``legacy`` (PI / Stratum-bf): three little-endian length-prefixed fields back to back:
  u32 len + program name, u32 len + tofino.bin, u32 len + context.json (one pipeline only).

The protobuf is encoded here by hand (a few length-delimited fields) so that no generated code
from Stratum is needed; :func:`decode_bf_pipeline_config` reads it back for tests and tools.
The P4Info is the one bf-p4c writes with ``--p4runtime-files``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from icefabric.files import DataFileError, JsonError, parse_json, read_input

# The packings pack() knows, the default first.
TOFINO_FORMATS = ("bfrt", "legacy")

# bf-p4c output files are large but bounded; refuse anything absurd before reading it whole.
MAX_FILE_BYTES = 512 * 1024 * 1024


class TofinoConfigError(ValueError):
    """A bf-p4c output folder that cannot be packed (missing or malformed file)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TofinoProfile:
    """One compiled pipeline (bf-p4c "p4_pipeline"): context, binary and the pipes it runs on."""

    name: str
    context: bytes
    binary: bytes
    pipe_scope: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TofinoProgram:
    """What bf-p4c produced for one program: its name, bf-rt.json and its pipelines."""

    name: str
    bfrt: bytes
    profiles: tuple[TofinoProfile, ...] = field(default_factory=tuple)

    def pack(self, fmt: str = "bfrt") -> bytes:
        """The ``p4_device_config`` bytes in the given packing."""
        if fmt == "bfrt":
            return encode_bf_pipeline_config(self)
        if fmt == "legacy":
            return encode_legacy(self)
        raise TofinoConfigError(f"unknown Tofino config format {fmt!r} (expected bfrt or legacy)")


# ---------------------------------------------------------------------------- protobuf wire


def _varint(n: int) -> bytes:
    if n < 0:
        raise ValueError(f"varint: negative value {n}")
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_bf_pipeline_config(program: TofinoProgram) -> bytes:
    """``BfPipelineConfig`` in protobuf binary form (fields in number order, proto3 rules:
    empty strings/bytes are omitted, repeated uint32 is packed)."""
    out = bytearray()
    if program.name:
        out += _field(1, program.name.encode("utf-8"))
    if program.bfrt:
        out += _field(2, program.bfrt)
    for prof in program.profiles:
        body = bytearray()
        if prof.name:
            body += _field(1, prof.name.encode("utf-8"))
        if prof.context:
            body += _field(2, prof.context)
        if prof.binary:
            body += _field(3, prof.binary)
        if prof.pipe_scope:
            body += _field(4, b"".join(_varint(p) for p in prof.pipe_scope))
        out += _field(3, bytes(body))
    return bytes(out)


def _read_varint(data: bytes, pos: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise TofinoConfigError(f"{what}: truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise TofinoConfigError(f"{what}: varint longer than 10 bytes at byte {pos}")


def _fields(data: bytes, what: str) -> Iterator[tuple[int, int, bytes | int]]:
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos, what)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos, what)
            yield number, wire, value
        elif wire == 2:
            length, pos = _read_varint(data, pos, what)
            if pos + length > len(data):
                raise TofinoConfigError(f"{what}: field {number} runs past the end")
            yield number, wire, data[pos : pos + length]
            pos += length
        else:
            raise TofinoConfigError(f"{what}: unsupported wire type {wire} (field {number})")


def decode_bf_pipeline_config(data: bytes) -> TofinoProgram:
    """Read a ``BfPipelineConfig`` (unknown fields are skipped, as protobuf does)."""
    name, bfrt, profiles = "", b"", []
    for number, _wire, value in _fields(data, "BfPipelineConfig"):
        if number == 1 and isinstance(value, bytes):
            name = value.decode("utf-8")
        elif number == 2 and isinstance(value, bytes):
            bfrt = value
        elif number == 3 and isinstance(value, bytes):
            profiles.append(_decode_profile(value))
    return TofinoProgram(name=name, bfrt=bfrt, profiles=tuple(profiles))


def _decode_profile(data: bytes) -> TofinoProfile:
    name, context, binary, scope = "", b"", b"", []
    for number, _wire, value in _fields(data, "BfPipelineConfig.Profile"):
        if number == 1 and isinstance(value, bytes):
            name = value.decode("utf-8")
        elif number == 2 and isinstance(value, bytes):
            context = value
        elif number == 3 and isinstance(value, bytes):
            binary = value
        elif number == 4:
            if isinstance(value, int):  # unpacked encoding is legal too
                scope.append(value)
            else:
                pos = 0
                while pos < len(value):
                    v, pos = _read_varint(value, pos, "pipe_scope")
                    scope.append(v)
    return TofinoProfile(name=name, context=context, binary=binary, pipe_scope=tuple(scope))


# ---------------------------------------------------------------------------- legacy packing


def encode_legacy(program: TofinoProgram) -> bytes:
    """PI's packing: name, tofino.bin, context.json, each behind a little-endian u32 length."""
    if len(program.profiles) != 1:
        raise TofinoConfigError(
            f"legacy format holds exactly one pipeline; {program.name!r} has "
            f"{len(program.profiles)} (use the bfrt format)"
        )
    prof = program.profiles[0]
    out = bytearray()
    for part in (program.name.encode("utf-8"), prof.binary, prof.context):
        out += struct.pack("<I", len(part)) + part
    return bytes(out)


def decode_legacy(data: bytes) -> tuple[str, bytes, bytes]:
    """(program name, tofino.bin, context.json) from PI's packing."""
    parts: list[bytes] = []
    pos = 0
    for what in ("program name", "tofino.bin", "context.json"):
        if pos + 4 > len(data):
            raise TofinoConfigError(f"legacy config: truncated before the {what} length")
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + n > len(data):
            raise TofinoConfigError(f"legacy config: {what} runs past the end")
        parts.append(data[pos : pos + n])
        pos += n
    if pos != len(data):
        raise TofinoConfigError(f"legacy config: {len(data) - pos} bytes after the context.json")
    return parts[0].decode("utf-8"), parts[1], parts[2]


# ---------------------------------------------------------------------------- bf-p4c output


def _read(path: Path) -> bytes:
    try:
        return read_input(path, limit=MAX_FILE_BYTES, what="a bf-p4c output file")
    except DataFileError as exc:
        raise TofinoConfigError(str(exc).splitlines()[0]) from None


def _resolve(out_dir: Path, listed: str, pipeline: str | None) -> Path:
    """A file the .conf names: as written, else relative to the output folder, else by its
    base name in the output folder (or the pipeline's sub-folder).  The .conf bf-p4c writes names
    paths as installed under the SDE (share/tofinopd/<prog>/...), not as in the folder."""
    p = Path(listed)
    candidates = [p] if p.is_absolute() else [out_dir / p]
    if pipeline:
        candidates.append(out_dir / pipeline / p.name)
    candidates.append(out_dir / p.name)
    for c in candidates:
        if c.is_file():
            return c
    raise TofinoConfigError(
        f"{out_dir}: file {listed!r} named by the .conf not found (looked at "
        + ", ".join(str(c) for c in candidates)
        + ")"
    )


def load_bf_p4c_output(out_dir: str | Path, *, program: str | None = None) -> TofinoProgram:
    """The program in a bf-p4c output folder: from its ``<name>.conf`` when there is one, else
    from the layout (``bfrt.json`` or ``bf-rt.json`` + one sub-folder per pipeline holding
    ``context.json`` and ``tofino.bin`` / ``tofino2.bin``)."""
    root = Path(out_dir)
    if not root.is_dir():
        raise TofinoConfigError(f"{root}: not a folder (expected bf-p4c's output folder)")
    confs = sorted(root.glob("*.conf"))
    if confs:
        return _from_conf(root, confs[0], program)
    return _from_layout(root, program)


def _from_conf(root: Path, conf: Path, program: str | None) -> TofinoProgram:
    try:
        doc = parse_json(_read(conf))
        progs = [p for dev in doc["p4_devices"] for p in dev["p4_programs"]]
    except JsonError as exc:
        raise TofinoConfigError(f"{conf}: not JSON: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise TofinoConfigError(
            f"{conf}: expected p4_devices[].p4_programs[] (bf-p4c's .conf layout)"
        ) from exc
    if program is not None:
        progs = [p for p in progs if p.get("program-name") == program]
    if len(progs) != 1:
        names = [p.get("program-name") for p in progs]
        raise TofinoConfigError(
            f"{conf}: expected one program{'' if program is None else f' named {program!r}'}, "
            f"found {names}"
        )
    prog = progs[0]
    try:
        name = str(prog["program-name"])
        bfrt = _read(_resolve(root, str(prog["bfrt-config"]), None))
        profiles = []
        for pipe in prog["p4_pipelines"]:
            pname = str(pipe["p4_pipeline_name"])
            profiles.append(
                TofinoProfile(
                    name=pname,
                    context=_read(_resolve(root, str(pipe["context"]), pname)),
                    binary=_read(_resolve(root, str(pipe["config"]), pname)),
                    pipe_scope=tuple(int(x) for x in pipe.get("pipe_scope", ())),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, TofinoConfigError):
            raise
        raise TofinoConfigError(
            f"{conf}: program {prog.get('program-name')!r}: missing or bad field ({exc})"
        ) from exc
    if not profiles:
        raise TofinoConfigError(f"{conf}: program {name!r} has no p4_pipelines")
    return TofinoProgram(name=name, bfrt=bfrt, profiles=tuple(profiles))


# BF-RT schema names: bf-p4c's driver writes <out>/bfrt.json unless --bf-rt-schema says otherwise;
# the SDE installs it as bf-rt.json.
BFRT_NAMES = ("bfrt.json", "bf-rt.json")


def _from_layout(root: Path, program: str | None) -> TofinoProgram:
    bfrt_path = next((root / n for n in BFRT_NAMES if (root / n).is_file()), None)
    if bfrt_path is None:
        raise TofinoConfigError(
            f"{root}: no <program>.conf and no {' or '.join(BFRT_NAMES)} "
            "(is this bf-p4c's output folder?)"
        )
    profiles = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        ctx = sub / "context.json"
        bins = [sub / "tofino.bin", sub / "tofino2.bin"]
        binary = next((b for b in bins if b.is_file()), None)
        if ctx.is_file() and binary is not None:
            profiles.append(TofinoProfile(name=sub.name, context=_read(ctx), binary=_read(binary)))
    if not profiles:
        raise TofinoConfigError(
            f"{root}: no pipeline folder with context.json and tofino.bin/tofino2.bin"
        )
    name = program or _manifest_program(root) or root.name
    return TofinoProgram(name=name, bfrt=_read(bfrt_path), profiles=tuple(profiles))


def _manifest_program(root: Path) -> str | None:
    """The program's name from bf-p4c's ``manifest.json`` (``programs[0].program_name``,
    ``ice.p4`` -> ``ice``): bf-p4c (p4c 34b86e9) names the ``.conf`` there but does not always
    write it, and the output folder's own name is the user's."""
    path = root / "manifest.json"
    if not path.is_file():
        return None
    try:
        doc = parse_json(_read(path))
    except JsonError as exc:
        raise TofinoConfigError(f"{path}: not JSON: {exc}") from None
    programs = doc.get("programs") if isinstance(doc, dict) else None
    first = programs[0] if isinstance(programs, list) and programs else None
    name = first.get("program_name") if isinstance(first, dict) else None
    if not isinstance(name, str) or not name:
        raise TofinoConfigError(f"{path}: expected programs[0].program_name (bf-p4c's manifest)")
    return name.removesuffix(".p4")
