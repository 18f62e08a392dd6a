"""icefabric-host in Mininet: hosts run a ring all-reduce's share through ice-switch processes
programmed by `icectl run`, report their real keys over the agent channel, and finish."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

from _mininet import controller, free_port_base, icectl_json, require_mininet  # noqa: E402
from _output import wait_for_text  # noqa: E402

require_mininet()

from icefabric.control.ccl.job import parse_job  # noqa: E402
from icefabric.experiment.linkdemo import ring_job  # noqa: E402
from icefabric.topo.generators import leaf_spine  # noqa: E402
from icefabric.topo.mininet import start_network  # noqa: E402
from icefabric.topo.spec import save_topology  # noqa: E402
from icefabric.traffic.workload import build_schedule  # noqa: E402
from icefabric.waiting import Deadline, poll_until  # noqa: E402


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[Any, Any, Path, Path]]:
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, grpc_base_port=free_port_base(4))
    topo = tmp_path / "topo.yaml"
    save_topology(spec, topo)
    job = ring_job([h.name for h in spec.hosts], channels=1, name="ring")
    job["phases"][0]["message_bytes"] = "256KiB"
    (tmp_path / "job.json").write_text(json.dumps(job))
    net = start_network(spec, target="embedded", log_dir=str(tmp_path))
    sock = tmp_path / "icectl.sock"
    args = ["--topo", str(topo), "--job", str(tmp_path / "job.json")]
    args += ["--state", str(tmp_path / "state.json"), "--target", "embedded"]
    try:
        with controller(args, sock, tmp_path / "icectl.log"):
            schedule = build_schedule(parse_job(job))
            (tmp_path / "schedule.json").write_text(json.dumps(schedule.to_dict()))
            yield spec, net, sock, topo
    finally:
        net.stop()


def test_hosts_run_their_share_report_real_keys_and_finish(
    fabric: tuple[Any, Any, Path, Path], tmp_path: Path
) -> None:
    spec, net, sock, topo = fabric
    agents = sock.parent / "icectl-agents.sock"
    start_at = time.time() + 20
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for h in spec.hosts:
            node = net.get(h.name)
            cmd = [
                sys.executable,
                "-m",
                "icefabric.traffic.host",
                "--topology",
                str(topo),
                "--host",
                h.name,
            ]
            cmd += [
                "--iface",
                node.defaultIntf().name,
                "--schedule",
                str(tmp_path / "schedule.json"),
            ]
            cmd += ["--line-rate", "2M", "--kind", "ice", "--controller", str(agents)]
            cmd += ["--start-at", str(start_at), "--linger", "5", "--duration", "120"]
            cmd += ["--stats", str(tmp_path / f"{h.name}.json"), "-v"]
            procs[h.name] = node.popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        ready_by = Deadline(start_at - 1 - time.time())
        for p in procs.values():  # every host's socket is open before anyone sends
            wait_for_text(p, " ready on ", deadline=ready_by)
        # The controller sees both agents and installs their flows' real keys.
        seen: set[str] = set()
        rows: list[dict[str, Any]] = []

        def keys_installed() -> bool:
            nonlocal seen, rows
            seen = {a["host"] for a in icectl_json(sock, "agents")["agents"]}
            rows = icectl_json(sock, "paths")
            return seen == {h.name for h in spec.hosts} and all(
                r["key_source"] == "agent" for r in rows
            )

        poll_until(keys_installed, 60, 0.3)
        assert seen == {h.name for h in spec.hosts}
        assert rows and all(r["key_source"] == "agent" for r in rows), rows
        for name, p in procs.items():
            out, _ = p.communicate(timeout=150)
            assert p.returncode == 0, f"{name}:\n{out}"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for h in spec.hosts:
        st = json.loads((tmp_path / f"{h.name}.json").read_text())
        assert st["messages"] and all(m["bytes"] > 0 for m in st["messages"])
        # QPs open (and real keys reported) before --start-at: no path moves mid-flow, no loss.
        rx = [(f["psn_gap_losses"], f["out_of_order"]) for f in st["rx"]]
        assert all(r == (0, 0) for r in rx), json.dumps(st, indent=1)
        assert all(f["feedback_received"] > 0 for f in st["tx"])  # ICE feedback from the last hop
