"""Mininet bring-up from a topology spec: every switch process serves P4Runtime on its port."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

pytestmark = pytest.mark.e2e

import _mininet  # noqa: E402
from _mininet import (  # noqa: E402
    TARGET,
    free_port_base,
    icectl_json,
    require_mininet,
    require_target_tools,
    target_args,
)

require_mininet()

from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402

from icefabric.control.fabric import switch_mac  # noqa: E402
from icefabric.experiment.linkdemo import ring_job  # noqa: E402
from icefabric.topo.generators import leaf_spine  # noqa: E402
from icefabric.topo.mininet import start_network  # noqa: E402
from icefabric.topo.spec import save_topology  # noqa: E402
from icefabric.waiting import poll_until  # noqa: E402


@pytest.fixture
def network(tmp_path: Any) -> Iterator[tuple[Any, Any]]:
    require_target_tools()
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, grpc_base_port=free_port_base(4))
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
    job = tmp_path / "ring.json"
    # ring neighbours on different leaves: every flow crosses a spine (same-leaf flows are
    # untagged, without INT)
    per_leaf: dict[str, list[str]] = {}
    for h in spec.hosts:
        per_leaf.setdefault(h.leaf, []).append(h.name)
    depth = max(len(names) for names in per_leaf.values())
    order = [ns[i] for i in range(depth) for ns in per_leaf.values() if i < len(ns)]
    ring = ring_job(order, channels=1, name="ring")
    job.write_text(json.dumps(ring))
    sock = tmp_path / "icectl.sock"
    args = ["--topo", str(topo), "--job", str(job), "--state", str(tmp_path / "state.json")]
    with _mininet.controller(args + target_args(), sock, tmp_path / "icectl.log"):
        yield sock


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


SEND_ROCE = """
import sys
from scapy.sendrecv import sendp
from icefabric.traffic.packets import rocev2_packet
a = sys.argv[1:]
pkt = rocev2_packet(src_mac=a[1], dst_mac=a[2], src_ip=a[3], dst_ip=a[4],
                    src_port=int(a[5]), dst_qp=int(a[6]), psn=int(a[7]))
sendp(pkt, iface=a[0], verbose=False)
"""


def test_planned_paths_show_in_int_reports(
    network: tuple[Any, Any], controller: Path, tmp_path: Path
) -> None:
    """A RoCEv2 packet of every planned flow, sent by its source host, is reported to the
    controller with the planned tag and one INT record from every switch of the planned path."""
    spec, net = network
    switch_ids = {s.name: s.switch_id for s in spec.switches}
    rows = icectl_json(controller, "paths")
    assert rows, "the ring job planned no flows"
    script = tmp_path / "send_roce.py"
    script.write_text(SEND_ROCE)
    for psn, row in enumerate(rows):
        src = spec.host(row["src"])
        node = net.get(src.name)
        k = row["key"]
        gw = switch_mac(spec.switch(src.leaf).switch_id)
        args = [node.defaultIntf().name, src.mac, gw, k["src_ip"], k["dst_ip"]]
        args += [str(k["udp_sport"]), str(k["dst_qp"]), str(psn)]
        out = node.cmd(" ".join([sys.executable, str(script), *args]))
        assert "Error" not in out and "Traceback" not in out, out
    want = {(r["key"]["src_ip"], r["key"]["udp_sport"], r["key"]["dst_qp"]): r for r in rows}
    seen: dict[tuple[str, int, int], dict[str, Any]] = {}

    def all_reported() -> bool:
        for rep in icectl_json(controller, "int", "--limit", "500")["reports"]:
            key = (rep["src_ip"], rep["udp_sport"], rep["dst_qp"])
            if key in want:
                seen[key] = rep
        return len(seen) >= len(want)

    poll_until(all_reported, 30, 0.2)
    assert set(seen) == set(want), f"no INT report of {sorted(set(want) - set(seen))}"
    for key, rep in seen.items():
        row = want[key]
        assert rep["tag"] == row["tag"], row["flow"]
        planned = {switch_ids[n] for n in row["path"] if n in switch_ids}
        assert {h["switch_id"] for h in rep["hops"]} == planned, row["flow"]


def test_bmv2_switches_have_their_own_thrift_port_reachable_only_inside(
    network: tuple[Any, Any],
) -> None:
    """Each BMv2 switch runs in a namespace of its own with its own --thrift-port:
    simple_switch_CLI (set_queue_rate) works there, the root namespace cannot reach it."""
    if TARGET != "bmv2":
        pytest.skip("the embedded switch has no thrift server")
    spec, net = network
    ports = []
    for sw in spec.switches:
        node = net.get(sw.name)
        port = spec.thrift_port(sw.name)
        ports.append(port)
        assert node.command()[node.command().index("--thrift-port") + 1] == str(port)
        node.set_queue_rate(1000, port=1)  # raises with the CLI's output when it fails
        with socket.socket() as s:
            s.settimeout(1.0)
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"{sw.name}: thrift reachable"
    assert len(set(ports)) == len(ports)
