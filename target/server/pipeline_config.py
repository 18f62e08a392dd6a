"""SetForwardingPipelineConfig helpers: load the device config, check the client's P4Info."""

from __future__ import annotations

from typing import Any

from p4.config.v1 import p4info_pb2

from icefabric.target.server.errors import P4RTError, invalid

_KINDS = (
    "tables",
    "actions",
    "action_profiles",
    "counters",
    "direct_counters",
    "meters",
    "direct_meters",
    "controller_packet_metadata",
    "value_sets",
    "registers",
    "digests",
)


def load_program(data: bytes) -> Any:
    """Compile p4_device_config (bundle or P4 source); INVALID_ARGUMENT on any error."""
    from icefabric.target.bundle import BundleError, load_device_config

    try:
        return load_device_config(data)
    except BundleError as exc:
        raise invalid(str(exc)) from exc
    except P4RTError:
        raise
    except Exception as exc:  # P4CompileError and friends: report the compiler's message
        name = type(exc).__name__
        if name == "P4CompileError":
            raise invalid(f"P4 compile error:\n{exc}") from exc
        raise invalid(f"cannot load p4_device_config: {name}: {exc}") from exc


def _is_empty(p4info: p4info_pb2.P4Info) -> bool:
    return not any(len(getattr(p4info, k)) for k in _KINDS)


def p4info_differences(client: p4info_pb2.P4Info, program: p4info_pb2.P4Info) -> list[str]:
    """Differences in ids, names and shapes between two P4Infos (empty = consistent)."""
    diffs: list[str] = []
    for kind in _KINDS:
        mine = {o.preamble.id: o for o in getattr(program, kind)}
        theirs = {o.preamble.id: o for o in getattr(client, kind)}
        for oid in sorted(set(mine) | set(theirs)):
            a, b = mine.get(oid), theirs.get(oid)
            if a is None:
                assert b is not None
                diffs.append(f"{kind}: id {oid:#x} ({b.preamble.name}) is not in the program")
                continue
            if b is None:
                diffs.append(f"{kind}: id {oid:#x} ({a.preamble.name}) missing from the P4Info")
                continue
            if a.preamble.name != b.preamble.name:
                diffs.append(
                    f"{kind}: id {oid:#x} is {a.preamble.name} in the program, {b.preamble.name} in the P4Info"
                )
                continue
            diffs += _shape(kind, a, b)
    return diffs


def _shape(kind: str, a: Any, b: Any) -> list[str]:
    name = a.preamble.name
    if kind == "tables":
        fa = [(m.id, m.name, m.bitwidth, m.match_type) for m in a.match_fields]
        fb = [(m.id, m.name, m.bitwidth, m.match_type) for m in b.match_fields]
        if fa != fb:
            return [f"table {name}: match fields differ: program {fa}, P4Info {fb}"]
        if {r.id for r in a.action_refs} != {r.id for r in b.action_refs}:
            return [f"table {name}: action lists differ"]
        if a.implementation_id != b.implementation_id:
            return [f"table {name}: implementation differs"]
    elif kind == "actions":
        pa = [(p.id, p.name, p.bitwidth) for p in a.params]
        pb = [(p.id, p.name, p.bitwidth) for p in b.params]
        if pa != pb:
            return [f"action {name}: params differ: program {pa}, P4Info {pb}"]
    elif kind == "controller_packet_metadata":
        ma = [(m.id, m.name, m.bitwidth) for m in a.metadata]
        mb = [(m.id, m.name, m.bitwidth) for m in b.metadata]
        if ma != mb:
            return [f"controller header {name}: metadata differ: program {ma}, P4Info {mb}"]
    elif kind == "registers" and a.size != b.size:
        return [f"register {name}: size {a.size} in the program, {b.size} in the P4Info"]
    return []


def check_p4info(client: p4info_pb2.P4Info, program: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """The P4Info to serve: the client's when consistent with the program, else INVALID_ARGUMENT."""
    if _is_empty(client):
        return program
    diffs = p4info_differences(client, program)
    if diffs:
        more = f" (and {len(diffs) - 8} more)" if len(diffs) > 8 else ""
        raise invalid("P4Info does not match the P4 program: " + "; ".join(diffs[:8]) + more)
    return client
