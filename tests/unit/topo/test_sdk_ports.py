"""Tofino port numbering: sdk_ports in the topology spec and the device-port view of a spec."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from icefabric.control import fabric, fabric_targets
from icefabric.control.p4rt import CloneSessionEntry, TableEntry
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n
from icefabric.topo.sdk_ports import to_device_ports
from icefabric.topo.spec import SpecError, parse_topology

# Front panel 1 -> device 132, 2 -> 140, ... as a Tofino 1 pipe-1 port map would have it.
LEAF1 = {1: 132, 2: 140}
LEAF2 = {1: 4, 2: 12}


def _data(**sdk: dict[int, int]) -> dict[str, Any]:
    switches: list[dict[str, Any]] = [
        {"name": "leaf1", "role": "leaf", "device_id": 1, "grpc_port": 50001},
        {"name": "leaf2", "role": "leaf", "device_id": 2, "grpc_port": 50002},
        {"name": "spine1", "role": "spine", "device_id": 3, "grpc_port": 50003},
    ]
    for s in switches:
        if s["name"] in sdk:
            s["sdk_ports"] = sdk[s["name"]]
    return {
        "name": "t",
        "switches": switches,
        "hosts": [
            {
                "name": "h1",
                "ip": "10.0.1.1/24",
                "mac": "00:00:0a:00:01:01",
                "leaf": "leaf1",
                "port": 1,
            },
            {
                "name": "h2",
                "ip": "10.0.2.1/24",
                "mac": "00:00:0a:00:02:01",
                "leaf": "leaf2",
                "port": 1,
            },
        ],
        "links": [
            {"a": {"node": "leaf1", "port": 2}, "b": {"node": "spine1", "port": 1}},
            {"a": {"node": "leaf2", "port": 2}, "b": {"node": "spine1", "port": 2}},
        ],
    }


def test_sdk_ports_map_every_port_of_their_switch_and_only_theirs() -> None:
    spec = parse_topology(_data(leaf1=LEAF1, leaf2=LEAF2))
    dev = to_device_ports(spec)
    assert [(h.name, h.port) for h in dev.hosts] == [("h1", 132), ("h2", 4)]
    assert [((ln.a.node, ln.a.port), (ln.b.node, ln.b.port)) for ln in dev.links] == [
        (("leaf1", 140), ("spine1", 1)),  # spine1 has no map: its numbers are device ports
        (("leaf2", 12), ("spine1", 2)),
    ]
    assert to_device_ports(parse_topology(_data())) == parse_topology(_data())


def test_sdk_ports_round_trip_through_the_file_format() -> None:
    spec = parse_topology(_data(leaf1=LEAF1))
    again = parse_topology(copy.deepcopy(spec.to_dict()))
    assert again == spec and dict(again.switch("leaf1").sdk_ports) == LEAF1


@pytest.mark.parametrize(
    ("sdk", "message"),
    [
        ({1: 132}, "no device port for front-panel port 2 (link to spine1)"),
        ({1: 132, 2: 132}, "device port 132 is already the port of front-panel 1"),
        ({1: 132, 2: 600}, "expected a device port 0..511, got 600"),
        ({1: "132", 2: 140}, "expected a device port 0..511, got '132'"),
        ([132, 140], "expected a mapping of front-panel port to device port"),
    ],
)
def test_bad_sdk_ports_are_named_errors(sdk: Any, message: str) -> None:
    with pytest.raises(SpecError) as ei:
        parse_topology(_data(leaf1=sdk), source="fabric.yaml")
    assert any("switches[0].sdk_ports" in e and message in e for e in ei.value.errors), (
        ei.value.errors
    )


def test_base_forwarding_of_a_mapped_spec_names_device_ports_only() -> None:
    dev = to_device_ports(parse_topology(_data(leaf1=LEAF1, leaf2=LEAF2)))
    out = fabric.base_entries(Topology(dev), fabric.FabricOptions(cpu_port=64))
    kinds = {
        e.match["ingress_port"]
        for e in out["leaf1"]
        if isinstance(e, TableEntry) and e.table == n.TABLE_PORT_KIND
    }
    assert kinds == {132, 140}
    sessions = {e.session_id: e for e in out["leaf1"] if isinstance(e, CloneSessionEntry)}
    ports = {r.port for r in sessions[n.ICE_SESSION_FEEDBACK_REPORT].replicas}
    assert ports == {140, 64}  # the uplink's device port and the Tofino CPU port


def test_tofino_clone_sessions_cut_the_copy() -> None:
    topo = Topology(parse_topology(_data()))
    opts = fabric.FabricOptions(clone_packet_length=fabric_targets.TOFINO_CLONE_PACKET_LENGTH)
    sessions = [
        e for e in fabric.base_entries(topo, opts)["leaf1"] if isinstance(e, CloneSessionEntry)
    ]
    assert sessions and {s.packet_length_bytes for s in sessions} == {272}
    default = [e for e in fabric.base_entries(topo)["leaf1"] if isinstance(e, CloneSessionEntry)]
    assert {s.packet_length_bytes for s in default} == {0}
