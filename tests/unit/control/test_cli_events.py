"""icectl events (text, --json, --file, --follow) and icectl status's first line against a
controller with no switch behind a real API socket; icectl tables' decoding as data."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _icectl import ROOT, run

from icefabric.control.controller.eventlog import events_path
from icefabric.control.daemon.api import ApiServer
from icefabric.control.daemon.service import api_handlers
from icefabric.topo.spec import load_topology

SPEC = load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")
JOB = {
    "name": "pair",
    "hosts": ["h1", "h3"],
    "phases": [{"name": "p", "collective": "send-recv", "pairs": [[0, 1]], "message_bytes": 64}],
}


@pytest.fixture
def daemon(offline_controller: Callable[..., Any], tmp_path: Path) -> Iterator[tuple[str, Any]]:
    c = offline_controller(SPEC, tmp_path / "fabric.state.json")
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


def test_int_says_rate_and_capacity_apart_and_explains_drops(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any]
) -> None:
    sock, ctl = daemon
    for ts, tx in ((0, 0), (1000, 2_500_000)):  # 20 Gbit/s on leaf1's port 3 (100G)
        ctl.telemetry.add_report(
            {
                "flow": "x",
                "tag": 1,
                "hops": [
                    {
                        "switch_id": 1,
                        "egress_port": 3,
                        "qdepth": 2,
                        "deq_qdepth": 0,
                        "tx_bytes": tx,
                        "egress_ts": ts,
                        "link_rate_mbps": 100_000,
                    }
                ],
            }
        )
    ctl.telemetry.add_counters({}, {"leaf1": {"unsupported": 7}})
    code, out, _ = run(capsys, "--socket", sock, "int")
    assert code == 0
    assert "rate Gbit/s" in out and "capacity Gbit/s" in out
    row = next(line for line in out.splitlines() if "leaf1:3->spine1:1" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[1:4] == ["20.0", "20", "100"]
    assert "drops unsupported: 7 (leaf1 7): neither IPv4, ARP nor ICE" in out


def test_report_hops_name_their_switches_and_times_are_clock_times() -> None:
    from icefabric.control.cli.daemon import _clock, _hops_text

    rep = {
        "hops": [
            {"switch_id": 2, "ingress_port": 1, "egress_port": 4, "qdepth": 0},
            {"switch_id": 5, "ingress_port": 2, "egress_port": 3, "qdepth": 7},
        ]
    }
    assert _hops_text(rep, {"5": "spine1", "2": "leaf2"}) == "spine1:2>3 q=7 leaf2:1>4 q=0"
    assert _hops_text(rep) == "5:2>3 q=7 2:1>4 q=0"
    assert re_clock(_clock(1_764_640_000.25))


def re_clock(text: str) -> bool:
    import re

    return re.fullmatch(r"\d\d:\d\d:\d\d\.250", text) is not None


def test_link_takes_the_name_icectl_links_shows(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any]
) -> None:
    from icefabric.control.cli.links import link_ends

    assert link_ends("leaf1:3-spine1:1", None) == ("leaf1", "spine1")
    assert link_ends("leaf1-spine1", None) == ("leaf1", "spine1")
    assert link_ends("leaf1", "spine1") == ("leaf1", "spine1")
    sock, ctl = daemon
    code, out, _ = run(capsys, "--socket", sock, "link", "down", "leaf1:3-spine1:1")
    assert code == 0 and out.startswith("link leaf1-spine1 down: ")
    assert ctl.topo.failed[ctl.link_between("leaf1", "spine1")]
    code, _, err = run(capsys, "--socket", sock, "link", "down", "leaf1")
    assert code == 2 and "expected SWITCH_A SWITCH_B" in err


def test_version_and_help_name_the_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("icectl ")
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "rm (remove), ls (list)" in " ".join(out.split())


def test_events_file_that_is_a_device_or_missing_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for bad in ("/dev/zero", str(tmp_path / "nope.events.jsonl")):
        code, _, err = run(capsys, "events", "--file", bad)
        assert code == 2 and err.startswith("icectl: events --file: ") and "\n" not in err.strip()
