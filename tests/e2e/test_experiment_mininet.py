"""icectl experiment in real time: a small all-reduce under ECMP + DCQCN and ICE in Mininet,
ice-switch processes with queue rates from the link rates, icefabric-host on every host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

if os.geteuid() != 0:
    pytest.skip("Mininet needs root (network namespaces, veth pairs)", allow_module_level=True)
if shutil.which("mnexec") is None:
    pytest.skip(
        "Mininet is not installed (mnexec missing); run `make setup`", allow_module_level=True
    )

from icefabric.control.cli import main  # noqa: E402

EXPERIMENT = {
    "name": "mn-small",
    "topology": {"leaf_spine": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2, "name": "ls-mn"}},
    "workload": {
        "collective": "all-reduce",
        "channels": 1,
        "message_bytes": "128KiB",
        "hosts": "interleaved",
        "name": "ring",
    },
    "modes": ["ecmp+dcqcn", "ice"],
    "rates": {"scale": 5e-5, "mtu_bytes": 1024},  # 100 Gbit/s -> 5 Mbit/s
    "engine": "mininet",
    "limits": {"wall_s": 120},
}
NODES = ("leaf1", "leaf2", "spine1", "spine2", "h1", "h2", "h3", "h4")


def _ours() -> tuple[list[str], list[str]]:
    """Interfaces of this topology's nodes and processes of its switches and hosts."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    intfs = [
        ln.split(":")[1].strip().split("@")[0]
        for ln in links.splitlines()
        if any(ln.split(":")[1].strip().startswith(f"{n}-eth") for n in NODES)
    ]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    procs = [p for p in ps.splitlines() if "ice-mn-small-" in p or "mininet:h" in p]
    return intfs, procs


def test_small_allreduce_under_both_modes_in_mininet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _ours() == ([], []), "leftovers of an earlier run"
    f = tmp_path / "mn.yaml"
    f.write_text(yaml.safe_dump(EXPERIMENT))
    rc = main(["experiment", "run", str(f), "--out", str(tmp_path / "r"), "--json"])
    doc = json.loads(capsys.readouterr().out)
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
        "mininet busbw: "
        + ", ".join(f"{k} {v['busbw_gbps_full']:.1f} Gbit/s (scaled back)" for k, v in by.items())
    )
    # teardown: no interface, namespace shell or process of the run is left
    assert _ours() == ([], [])
