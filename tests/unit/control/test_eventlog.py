"""The controller's event history: ordered, bounded on disk, kept across a restart, 0600,
never written through a link, bad lines skipped on reading."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from icefabric.control.controller.eventlog import (
    EventLog,
    events_path,
    format_event,
    read_events,
)


def test_events_are_ordered_and_kept_across_a_restart(tmp_path: Path) -> None:
    path = events_path(tmp_path / "fabric.state.json")
    assert path.name == "fabric.events.jsonl"
    first = EventLog(path)
    first.record("job_add", "job j1 added", job="j1")
    first.record("switch_down", "switch spine1 is down", switch="spine1")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = EventLog(path)  # a restarted controller
    again.record("switch_up", "switch spine1 reconnected", switch="spine1")
    evs = again.since(0)
    assert [e["kind"] for e in evs] == ["job_add", "switch_down", "switch_up"]
    assert [e["seq"] for e in evs] == [1, 2, 3]
    assert again.since(2) == evs[2:] and again.since(0, limit=1) == evs[2:]
    assert [e["kind"] for e in read_events(path)] == ["job_add", "switch_down", "switch_up"]
    assert "switch_down" in format_event(evs[1]) and "spine1 is down" in format_event(evs[1])


def test_the_file_is_bounded_and_bad_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "f.events.jsonl"
    log = EventLog(path, max_file_bytes=2000)
    for i in range(100):
        log.record("replan", f"change {i}", moved=i)
    size = path.stat().st_size + path.with_name(path.name + ".1").stat().st_size
    assert size <= 4000
    with path.open("a") as f:
        f.write("not json\n" + "[" * 3000 + "\n" + json.dumps({"seq": "x"}) + "\n")
    kept = read_events(path)
    assert kept and kept[-1]["what"] == "change 99"
    assert [e["seq"] for e in kept] == sorted(e["seq"] for e in kept)


def test_a_link_in_place_of_the_file_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("keep\n")
    path = tmp_path / "f.events.jsonl"
    path.symlink_to(target)
    log = EventLog(path)
    log.record("job_add", "job j added")
    assert target.read_text() == "keep\n"
    assert log.write_errors == 1 and log.since(0)[0]["kind"] == "job_add"
