"""Mininet bring-up from a topology spec: every switch process serves P4Runtime on its port."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

pytestmark = pytest.mark.e2e

if os.geteuid() != 0:
    pytest.skip("Mininet needs root (network namespaces, veth pairs)", allow_module_level=True)
if shutil.which("mnexec") is None:
    pytest.skip(
        "Mininet is not installed (mnexec missing); run `make setup`", allow_module_level=True
    )

from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402

from icefabric.topo.generators import leaf_spine  # noqa: E402
from icefabric.topo.mininet import start_network  # noqa: E402
from icefabric.topo.spec import save_topology  # noqa: E402

TARGET = os.environ.get("ICE_TARGET", "embedded")


def _free_port_base(count: int) -> int:
    rng = random.Random(os.getpid())
    for _ in range(50):
        base = rng.randrange(20000, 40000)
        ok = True
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free block of TCP ports")


@pytest.fixture
def network(tmp_path: Any) -> Iterator[tuple[Any, Any]]:
    if TARGET == "bmv2" and shutil.which("simple_switch_grpc") is None:
        pytest.skip("ICE_TARGET=bmv2 but simple_switch_grpc is not on PATH")
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, grpc_base_port=_free_port_base(4))
    net = start_network(spec, target=TARGET, log_dir=str(tmp_path))
    try:
        yield spec, net
    finally:
        net.stop()


def test_every_switch_serves_p4runtime_and_owns_its_ports(network: tuple[Any, Any]) -> None:
    spec, net = network
    for sw in spec.switches:
        node = net.get(sw.name)
        assert node.proc is not None and node.proc.poll() is None, f"{sw.name} process died"
        # One -i PORT@IFACE per link end: hosts on leaves plus fabric links.
        expected = sum(h.leaf == sw.name for h in spec.hosts) + sum(
            sw.name in (ln.a.node, ln.b.node) for ln in spec.links
        )
        assert len(node.port_args()) == 2 * expected
        with grpc.insecure_channel(sw.grpc_addr) as channel:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            caps = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=10)
            assert caps.p4runtime_api_version


def test_hosts_get_addresses_and_on_link_default_route(network: tuple[Any, Any]) -> None:
    spec, net = network
    for h in spec.hosts:
        node = net.get(h.name)
        assert h.address in node.cmd("ip -4 addr show")
        assert "default dev" in node.cmd("ip route show default")


@pytest.fixture
def controller(network: tuple[Any, Any], tmp_path: Any) -> Iterator[Path]:
    """`icectl run` against the Mininet switches, primary, until the test ends."""
    spec, _net = network
    topo = tmp_path / "topo.yaml"
    save_topology(spec, topo)
    sock = tmp_path / "icectl.sock"
    icectl = str(Path(sys.executable).parent / "icectl")
    cmd = [icectl, "run", "--topo", str(topo), "--socket", str(sock)]
    cmd += ["--state", str(tmp_path / "state.json"), "--target", TARGET]
    with (tmp_path / "icectl.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            status = subprocess.run(
                [icectl, "--socket", str(sock), "status", "--json"], capture_output=True, text=True
            )
            if status.returncode == 0 and json.loads(status.stdout).get("role") == "primary":
                break
            assert proc.poll() is None, (tmp_path / "icectl.log").read_text()
            assert time.monotonic() < deadline, "controller did not become primary in time"
            time.sleep(0.2)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_controller_makes_every_host_reach_every_other(
    network: tuple[Any, Any], controller: Path
) -> None:
    spec, net = network
    for src in spec.hosts:
        for dst in spec.hosts:
            if src.name == dst.name:
                continue
            out = net.get(src.name).cmd(f"ping -c 1 -W 3 {dst.address}")
            assert " 0% packet loss" in out, f"{src.name} -> {dst.name}:\n{out}"
