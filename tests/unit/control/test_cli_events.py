"""icectl events (text, --json, --file, --follow) and icectl status's first line against a
controller with no switch behind a real API socket; icectl tables' decoding as data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _icectl import ROOT, run

from icefabric.control.daemon.api import ApiServer
from icefabric.control.controller.eventlog import events_path
from icefabric.control.daemon.service import api_handlers
from icefabric.topo.spec import load_topology

SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
JOB = {
    "name": "pair",
    "hosts": ["h1", "h3"],
    "phases": [{"name": "p", "collective": "send-recv", "pairs": [[0, 1]], "message_bytes": 64}],
}


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    from icefabric.control.controller import Controller
    from icefabric.control.fabric import entity_key
    from icefabric.control.p4rt import PipelineConfig

    compiler = pytest.importorskip("icefabric.target.compiler")
    program = compiler.load_program(ROOT / "p4src" / "ice.p4")
    pipeline = PipelineConfig(p4info=program.p4info, device_config=b"{}", cookie=1, kind="embedded")
    c = Controller(SPEC, pipeline, state_file=tmp_path / "fabric.state.json")
    c.installed = {sw: {entity_key(e): e for e in ents} for sw, ents in c.desired().items()}
    c.active = True
    c.start_worker()
    srv = ApiServer(tmp_path / "e.sock", api_handlers(c))
    srv.start()
    try:
        yield str(tmp_path / "e.sock"), c
    finally:
        srv.stop()
        c.stop()


def test_events_in_order_as_text_json_and_from_the_file(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any], tmp_path: Path
) -> None:
    sock, ctl = daemon
    ctl.add_job(JOB)
    ctl.fail_link("leaf1", "spine1")
    code, out, _ = run(capsys, "--socket", sock, "events", "--json")
    assert code == 0
    evs = json.loads(out)
    kinds = [e["kind"] for e in evs]
    assert kinds == ["job_add", "replan", "link_down", "replan"]
    assert evs[2]["what"] == "link leaf1-spine1 down"
    code, out, _ = run(capsys, "--socket", sock, "events", "--last", "2")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert "link_down" in lines[0] and "link leaf1-spine1 down" in lines[0]
    path = events_path(tmp_path / "fabric.state.json")
    code, out, _ = run(capsys, "events", "--file", str(path), "--json")
    assert code == 0 and [e["kind"] for e in json.loads(out)] == kinds


def test_events_follow_prints_new_ones_as_json_lines(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, ctl = daemon
    ctl.add_job(JOB)
    polls = {"n": 0}
    import icefabric.control.cli.ops as ops

    def tick(_s: float) -> None:  # each poll: one new event, then Ctrl-C after the second
        polls["n"] += 1
        if polls["n"] == 1:
            ctl.fail_link("leaf1", "spine1")
        if polls["n"] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(ops.time, "sleep", tick)
    code, out, _ = run(capsys, "--socket", sock, "events", "--follow", "--json")
    assert code == 0
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds == ["job_add", "replan", "link_down", "replan"]


def test_status_first_line_says_what_is_wrong(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any]
) -> None:
    sock, _ctl = daemon
    code, out, _ = run(capsys, "--socket", sock, "status")
    first = out.splitlines()[0]
    # no switch behind this controller: every one is down, and it says so before any table
    assert code == 0 and first.startswith("DOWN: switch leaf1 DOWN (unreachable")


def test_table_entries_are_decoded_by_name() -> None:
    from icefabric.control.controller.tables_view import decode_entries, resolve_table
    from icefabric.control.p4rt import P4InfoIndex, TableEntry
    from icefabric.control.p4rt.match import LPM

    compiler = pytest.importorskip("icefabric.target.compiler")
    p4 = P4InfoIndex(compiler.load_program(ROOT / "p4src" / "ice.p4").p4info)
    fp = resolve_table(p4, "flow_path")
    t = p4.table(fp)
    fields = {f.name: f for f in t.match_fields}
    match: dict[str, Any] = {}
    for name, f in fields.items():
        match[name] = 0x0A000201 if f.bitwidth == 32 else 7
    action = p4.action(t.action_ids[0])
    params = {p.name: 3 for p in action.params}
    (row,) = decode_entries(
        p4, [TableEntry(table=fp, match=match, action=action.name, params=params)]
    )
    assert row["table"].endswith("flow_path")
    addr_fields = [n for n, f in fields.items() if f.bitwidth == 32 and "addr" in n]
    assert addr_fields and all(row["match"][n] == "10.0.2.1" for n in addr_fields)
    assert row["action"] == ".".join(action.name.split(".")[1:])
    assert set(row["params"]) == set(params)
    with pytest.raises(KeyError, match="no table 'nope' \\(tables: "):
        resolve_table(p4, "nope")
    lpm = [t for t in p4.tables if any(f.match_type == "lpm" for f in t.match_fields)]
    if lpm:
        t2 = lpm[0]
        f = next(f for f in t2.match_fields if f.match_type == "lpm")
        a2 = p4.action(t2.action_ids[0])
        (r2,) = decode_entries(
            p4,
            [
                TableEntry(
                    table=t2.name,
                    match={f.name: LPM(0x0A000200, 24)},
                    action=a2.name,
                    params={p.name: 1 for p in a2.params},
                )
            ],
        )
        if f.bitwidth == 32:
            assert r2["match"][f.name] == "10.0.2.0/24"
