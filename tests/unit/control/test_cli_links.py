"""icectl links / status with link probes, and icectl run's probe options (exit codes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _icectl import EXAMPLE, run
from test_linkmon import SPEC, Wires  # the fake-clock fabric of the LinkMonitor tests

from icefabric.control.daemon.api import ApiServer
from icefabric.control.daemon.service import api_handlers
from icefabric.control.lldp import LldpProbe


@pytest.fixture
def controller(offline_controller: Callable[..., Any], tmp_path: Path) -> Any:
    c = offline_controller(SPEC, tmp_path / "state.json")
    return c


@pytest.fixture
def daemon(controller: Any, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    srv = ApiServer(tmp_path / "l.sock", api_handlers(controller))
    srv.start()
    try:
        yield str(tmp_path / "l.sock"), controller
    finally:
        srv.stop()


def test_links_when_probing_is_off(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any]
) -> None:
    sock, _ctl = daemon
    code, out, _ = run(capsys, "--socket", sock, "links")
    assert code == 0 and "link probing is off" in out
    code, out, _ = run(capsys, "--socket", sock, "links", "--json")
    assert code == 0 and json.loads(out)["enabled"] is False
    code, out, _ = run(capsys, "--socket", sock, "status")
    assert code == 0 and "link probes off" in out


def test_links_table_json_and_status_after_a_cut(
    capsys: pytest.CaptureFixture[str], daemon: tuple[str, Any]
) -> None:
    sock, ctl = daemon
    w = Wires()
    ctl.probing.monitor = w.mon
    w.mon._on_change = ctl.probing.apply
    w.round(2)
    w.cut.add(frozenset(("leaf2", "spine1")))
    w.round(4)
    w.mon.on_probe("spine2", 1, LldpProbe(chassis="leaf1", port=3).encode())

    code, out, _ = run(capsys, "--socket", sock, "links", "--json")
    assert code == 0
    res = json.loads(out)
    assert res["enabled"] and res["down"] == ["leaf2:3-spine1:2"]
    row = next(r for r in res["links"] if r["link"] == "leaf2:3-spine1:2")
    assert row["state"] == "down" and row["failed"] is True and row["events"] == 1
    assert row["last_seen_ms"] is not None and row["last_seen_ms"] > 0
    (ev,) = res["events"]
    assert ev["kind"] == "down" and ev["plan_ms"] is not None and ev["detection_ms"] > 0
    assert res["miswired"][0]["seen"] == "leaf1:3->spine2:1"

    code, out, _ = run(capsys, "--socket", sock, "links")
    assert code == 0
    assert "leaf2:3-spine1:2" in out and "down" in out and "miswiring" in out
    assert "last seen ms ago" in out and "detection ms" in out
    assert "0 misses outweighed by traffic" in " ".join(out.split())
    assert res["alive_by_traffic"] == 0

    code, out, _ = run(capsys, "--socket", sock, "status", "--json")
    assert code == 0 and json.loads(out)["link_probes"]["down"] == ["leaf2:3-spine1:2"]
    code, out, _ = run(capsys, "--socket", sock, "status")
    assert code == 0 and "1 down (leaf2:3-spine1:2)" in out and "1 miswiring" in out


def test_links_without_a_daemon_exits_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "--socket", str(tmp_path / "none.sock"), "links")
    assert code == 1 and "none.sock" in err


@pytest.mark.parametrize(("option", "value"), [("--probe-interval", "-1"), ("--probe-misses", "0")])
def test_run_rejects_bad_probe_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str
) -> None:
    sock = str(tmp_path / "r.sock")
    code, _, err = run(capsys, "run", "--topo", EXAMPLE, option, value, "--socket", sock)
    assert code == 2 and option in err


def test_run_help_describes_the_probe_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "--help")
    assert code == 0
    assert "--probe-interval MS" in out and "0 disables probing" in out
    assert "--probe-misses N" in out
