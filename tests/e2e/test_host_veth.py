"""The real-time host (icefabric-host) on both ends of a veth pair: a flow completes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

if os.geteuid() != 0 or shutil.which("ip") is None:
    pytest.skip("needs root and the `ip` command for network namespaces", allow_module_level=True)

from _output import wait_for_text  # noqa: E402

from icefabric.target.ports import VethLab  # noqa: E402
from icefabric.waiting import Deadline  # noqa: E402


@pytest.fixture
def lab() -> Iterator[VethLab]:
    try:
        with VethLab(f"ice-host-{os.getpid()}", pairs=1) as lab:
            yield lab
    except OSError as exc:
        pytest.skip(f"cannot create a network namespace: {exc}")


def _mac(lab: VethLab, iface: str) -> str:
    out = subprocess.run(
        ["ip", "netns", "exec", lab.name, "cat", f"/sys/class/net/{iface}/address"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _host(lab: VethLab, iface: str, ip: str, peer_mac: str, *extra: str) -> list[str]:
    return [
        "ip",
        "netns",
        "exec",
        lab.name,
        sys.executable,
        "-m",
        "icefabric.traffic.host",
        "--iface",
        iface,
        "--ip",
        ip,
        "--gateway-mac",
        peer_mac,
        "--line-rate",
        "20M",
        "--duration",
        "60",
        *extra,
    ]


def _wait_ready(proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """Read the host's log until it says its socket is open (deadline, no fixed sleep)."""
    wait_for_text(proc, " ready on ", deadline=Deadline(timeout))


@pytest.mark.parametrize("kind", ["ice", "dcqcn"])
def test_a_flow_completes_between_two_real_time_hosts(
    lab: VethLab, tmp_path: Path, kind: str
) -> None:
    h1, s1 = _mac(lab, "h1"), _mac(lab, "s1")
    rx_stats, tx_stats = tmp_path / "rx.json", tmp_path / "tx.json"
    receiver = subprocess.Popen(
        _host(lab, "s1", "10.9.0.2", h1, "--expect", "1", "--stats", str(rx_stats), "-v"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_ready(receiver)
        sender = subprocess.run(
            _host(
                lab,
                "h1",
                "10.9.0.1",
                s1,
                "--kind",
                kind,
                "--flow",
                "10.9.0.2:300000",
                "--stats",
                str(tx_stats),
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sender.returncode == 0, sender.stdout + sender.stderr
        out, _ = receiver.communicate(timeout=60)
        assert receiver.returncode == 0, out
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    rx = json.loads(rx_stats.read_text())
    tx = json.loads(tx_stats.read_text())
    assert [(m["tag"], m["bytes"]) for m in rx["messages"]] == [(1, 300_000)]
    (flow,) = rx["rx"]
    assert flow["bytes_received"] == 300_000 and flow["psn_gap_losses"] == 0
    (sent,) = tx["tx"]
    assert sent["packets_sent"] == flow["packets_received"] == 293  # ceil(300000 / 1024)
    assert flow["key"]["sport"] == sent["key"]["sport"] >= 0xC000  # the NIC-chosen port
    # Paced at the 20 Mbit/s line rate: 300 KB (plus headers) takes at least ~125 ms.
    assert flow["last_rx_us"] - flow["first_rx_us"] >= 0.9 * 292 * 1082 * 8 / 20e6 * 1e6
    assert oct(rx_stats.stat().st_mode & 0o777) == "0o600"
