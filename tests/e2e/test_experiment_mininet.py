"""icectl experiment in real time: the mininet-small preset (a 4-rank ring all-reduce) under ECMP
+ DCQCN and ICE in Mininet, switches with queue rates from the link rates, icefabric-host on every
host. ``ICE_TARGET`` picks the switches: ice-switch (default) or BMv2's simple_switch_grpc
(``--target bmv2``: ice.p4 compiled by p4c-bm2-ss into the build cache, set_queue_rate)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

from _mininet import TARGET, require_mininet, require_target_tools  # noqa: E402

require_mininet()

from icefabric.icectl import main  # noqa: E402

PRESET = "mininet-small"
NODES = ("leaf1", "leaf2", "spine1", "spine2", "h1", "h2", "h3", "h4")


def _ours() -> tuple[list[str], list[str]]:
    """Interfaces of this topology's nodes, and processes of its switches, hosts and node
    shells. Mininet's namespaces are unnamed (not in ``ip netns``): each lives as long as its
    node's ``mininet:NAME`` shell and the processes started in it, so no process left means no
    namespace left. Other tests' BMv2 switches (the data-plane harness) are not ours: a switch
    process is ours when it holds one of this topology's interfaces."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    intfs = [
        ln.split(":")[1].strip().split("@")[0]
        for ln in links.splitlines()
        if any(ln.split(":")[1].strip().startswith(f"{n}-eth") for n in NODES)
    ]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    procs = [
        p
        for p in ps.splitlines()
        if f"ice-{PRESET}-" in p
        or "mininet:" in p
        or any(f"@{n}-eth" in p for n in NODES)  # ice-switch / simple_switch_grpc -i PORT@IFACE
    ]
    return intfs, procs


def test_small_allreduce_under_both_modes_in_mininet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_target_tools()
    assert _ours() == ([], []), "leftovers of an earlier run"
    out = tmp_path / "r"
    args = ["--preset", PRESET, "--engine", "mininet", "--target", TARGET, "--out", str(out)]
    rc = main(["experiment", "run", *args, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"]["target"] == TARGET and doc["experiment"]["engine"] == "mininet"
    (written,) = out.glob(f"{PRESET}-*/results.json")
    assert json.loads(written.read_text())["modes"] == doc["modes"]
    assert rc == 0, [m["error"] for m in doc["modes"]]
    by = {m["mode"]: m for m in doc["modes"]}
    for mode in ("ecmp+dcqcn", "ice"):
        m = by[mode]
        assert m["ok"] and m["busbw_gbps"] > 0, m
        assert m["messages"]["arrived"] == m["messages"]["total"]
        assert m["psn_losses"] == 0
        assert 0 < m["busbw_over_bound"] <= 1.0
        assert sum(ln["bytes"] for ln in m["links"]) > 0  # switch counters over P4Runtime
    assert by["ice"]["engine"]["feedback_received"] > 0  # ICE senders got INT feedback
    assert by["ecmp+dcqcn"]["engine"]["feedback_received"] == 0
    print(
        f"mininet ({TARGET}) busbw: "
        + ", ".join(f"{k} {v['busbw_gbps_full']:.1f} Gbit/s (scaled back)" for k, v in by.items())
    )
    # teardown: no interface, node shell (namespace) or process of the run is left
    assert _ours() == ([], [])
