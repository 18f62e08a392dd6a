"""p4src/README.md documents every control-plane object of ice.p4 (checked against its P4Info)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harness import program_path

pytestmark = pytest.mark.dataplane

README = Path(__file__).resolve().parents[2] / "p4src" / "README.md"


@pytest.fixture(scope="module")
def p4info() -> object:
    from icefabric.target.compiler import load_program

    return load_program(program_path()).p4info


def _documented() -> set[str]:
    return set(re.findall(r"`((?:IceIngress|IceEgress)\.[\w.]+)", README.read_text()))


def test_every_table_extern_and_table_action_is_documented(p4info: object) -> None:
    documented = _documented()
    info = p4info
    names = {
        t.preamble.name
        for kind in ("tables", "counters", "direct_counters", "registers")
        for t in getattr(info, kind)
    }
    by_id = {a.preamble.id: a.preamble.name for a in info.actions}  # type: ignore[attr-defined]
    for table in info.tables:  # type: ignore[attr-defined]
        for ref in table.action_refs:
            if by_id[ref.id] != "NoAction":
                names.add(by_id[ref.id])
    missing = sorted(names - documented)
    assert not missing, f"p4src/README.md does not mention: {missing}"
    stale = sorted(n for n in documented - names if "." in n and not n.endswith(".p4"))
    assert not stale, f"p4src/README.md names objects ice.p4 does not have: {stale}"


def test_match_fields_and_params_in_readme_exist(p4info: object) -> None:
    text = README.read_text()
    actions = {a.preamble.id: a for a in p4info.actions}  # type: ignore[attr-defined]
    for table in p4info.tables:  # type: ignore[attr-defined]
        for field in table.match_fields:
            assert f"`{field.name}`" in text, (
                f"{table.preamble.name}: key {field.name} undocumented"
            )
        for ref in table.action_refs:
            action = actions[ref.id]
            for param in action.params:
                assert f"{param.name}:{param.bitwidth}" in text, (
                    f"{action.preamble.name}: param {param.name}:{param.bitwidth} undocumented"
                )


def test_controller_headers(p4info: object) -> None:
    headers = {
        h.preamble.name: [(m.name, m.bitwidth) for m in h.metadata]
        for h in p4info.controller_packet_metadata  # type: ignore[attr-defined]
    }
    assert headers["packet_in"] == [
        ("ingress_port", 9),
        ("_pad0", 7),
        ("egress_port", 9),
        ("_pad1", 7),
        ("reason", 8),
    ]
    assert headers["packet_out"] == [("egress_port", 9), ("_pad0", 7)]


def test_p4info_agrees_with_p4c(p4info: object) -> None:
    """Every table, action (with its parameters), counter, register and packet-metadata entry
    of the embedded target's P4Info is what p4c-bm2-ss generates, ids included."""
    import shutil

    from google.protobuf import text_format
    from harness import _bmv2_build
    from p4.config.v1 import p4info_pb2

    if shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not on PATH")
    path = program_path()
    _json, p4info_path = _bmv2_build(str(path), path.stat().st_mtime)
    theirs = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())

    def summary(info: object) -> dict[str, object]:
        out: dict[str, object] = {}
        for t in info.tables:  # type: ignore[attr-defined]
            out[f"table {t.preamble.name}"] = (
                t.preamble.id,
                [(m.name, m.bitwidth, m.match_type) for m in t.match_fields],
                sorted(r.id for r in t.action_refs),
                t.size,
            )
        for a in info.actions:  # type: ignore[attr-defined]
            out[f"action {a.preamble.name}"] = (
                a.preamble.id,
                [(p.name, p.bitwidth) for p in a.params],
            )
        for kind in ("counters", "direct_counters", "registers"):
            for x in getattr(info, kind):
                out[f"{kind} {x.preamble.name}"] = x.preamble.id
        for h in info.controller_packet_metadata:  # type: ignore[attr-defined]
            out[f"header {h.preamble.name}"] = [(m.name, m.bitwidth) for m in h.metadata]
        return out

    ours, want = summary(p4info), summary(theirs)
    assert set(ours) == set(want), sorted(set(ours) ^ set(want))
    differ = {k: (ours[k], want[k]) for k in want if ours[k] != want[k]}
    assert not differ, differ
