"""Topology spec loading, saving and validation (errors name file, key and what was expected)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from icefabric.topo import spec as S
from icefabric.topo.spec import SpecError, load_topology, parse_topology, save_topology

EXAMPLES = Path(S.__file__).parent / "examples"


def _base() -> dict[str, Any]:
    return {
        "name": "t",
        "defaults": {"link_rate_gbps": 40},
        "switches": [
            {"name": "leaf1", "role": "leaf", "device_id": 1, "grpc_port": 50001, "switch_id": 1},
            {"name": "leaf2", "role": "leaf", "device_id": 2, "grpc_port": 50002, "switch_id": 2},
            {"name": "spine1", "role": "spine", "device_id": 3, "grpc_port": 50003, "switch_id": 3},
        ],
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
            {
                "a": {"node": "leaf2", "port": 2},
                "b": {"node": "spine1", "port": 2},
                "rate_gbps": 25,
            },
        ],
    }


def _errors(data: Any, source: str = "x.yaml") -> list[str]:
    with pytest.raises(SpecError) as ei:
        parse_topology(data, source=source)
    return ei.value.errors


def test_examples_load_and_are_connected_leaf_spines() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 2
    for f in files:
        t = load_topology(f)
        assert t.hosts and t.links
        leaves = {s.name for s in t.switches if s.role == "leaf"}
        assert {h.leaf for h in t.hosts} <= leaves


def test_demo_example_has_two_spines_four_leaves_two_hosts_each() -> None:
    t = load_topology(EXAMPLES / "leaf_spine_2x4.yaml")
    roles = [s.role for s in t.switches]
    assert roles.count("spine") == 2 and roles.count("leaf") == 4
    assert len(t.hosts) == 8 and len(t.links) == 8


def test_defaults_apply_and_explicit_rates_win() -> None:
    t = parse_topology(_base())
    assert t.link_rate(t.links[0]) == 40.0
    assert t.link_rate(t.links[1]) == 25.0
    assert t.host_rate(t.hosts[0]) == 100.0
    assert t.switch("spine1").grpc_addr == "127.0.0.1:50003"
    assert t.host("h2").address == "10.0.2.1"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_load_round_trip(tmp_path: Path, suffix: str) -> None:
    t = parse_topology(_base())
    p = tmp_path / f"t{suffix}"
    save_topology(t, p)
    assert load_topology(p) == t
    if suffix == ".json":
        json.loads(p.read_text())


def test_port_reused_by_two_links_names_file_key_and_first_user() -> None:
    d = _base()
    d["links"].append({"a": {"node": "leaf1", "port": 3}, "b": {"node": "spine1", "port": 3}})
    d["links"].append({"a": {"node": "leaf1", "port": 3}, "b": {"node": "spine1", "port": 4}})
    errs = _errors(d, "topo/examples/x.yaml")
    assert errs == [
        "topo/examples/x.yaml: links[3].a.port: port 3 of leaf1 is already used by links[2]"
    ]


def test_port_used_by_host_and_link() -> None:
    d = _base()
    d["links"][0]["a"]["port"] = 1
    assert _errors(d) == ["x.yaml: links[0].a.port: port 1 of leaf1 is already used by hosts[0]"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["switches"][0].update(role="router"),
            "x.yaml: switches[0].role: expected one of leaf, spine, core, tor, agg, got 'router'",
        ),
        (
            lambda d: d["switches"][1].update(device_id=1),
            "x.yaml: switches[1].device_id: device_id 1 is already used by switches[0]",
        ),
        (
            lambda d: d["switches"][1].update(grpc_port=50001),
            "x.yaml: switches[1].grpc_port: grpc port 50001 is already used by switches[0]",
        ),
        (
            lambda d: d["switches"][2].update(name="leaf1"),
            "x.yaml: switches[2].name: name 'leaf1' is already used by switches[0]",
        ),
        (
            lambda d: d["hosts"][1].update(ip="10.0.1.1/24"),
            "x.yaml: hosts[1].ip: address '10.0.1.1' is already used by hosts[0]",
        ),
        (
            lambda d: d["hosts"][0].update(ip="10.0.1.300/24"),
            "x.yaml: hosts[0].ip: expected an IPv4 address with prefix (10.0.1.1/24), got '10.0.1.300/24'",
        ),
        (
            lambda d: d["hosts"][0].update(mac="00:00"),
            "x.yaml: hosts[0].mac: expected a MAC like 00:00:0a:00:01:01, got '00:00'",
        ),
        (
            lambda d: d["hosts"][0].update(leaf="spine1"),
            "x.yaml: hosts[0].leaf: hosts attach to a leaf or tor, 'spine1' is a spine",
        ),
        (
            lambda d: d["hosts"][0].update(leaf="leaf9"),
            "x.yaml: hosts[0].leaf: expected the name of a leaf/tor switch, no switch 'leaf9'",
        ),
        (lambda d: d["hosts"][0].pop("leaf"), "x.yaml: hosts[0].leaf: missing (expected a string)"),
        (
            lambda d: d["hosts"][0].update(name="spine1"),
            "x.yaml: hosts[0].name: name 'spine1' is already used by switches",
        ),
        (
            lambda d: d["links"][0].update(rate_gbps=0),
            "x.yaml: links[0].rate_gbps: expected a positive number, got 0",
        ),
        (
            lambda d: d["links"][0].update(rate_gbps="fast"),
            "x.yaml: links[0].rate_gbps: expected a number, got string 'fast'",
        ),
        (
            lambda d: d["links"][0]["b"].update(node="h2"),
            "x.yaml: links[0].b.node: 'h2' is a host: hosts attach via hosts[].leaf/port",
        ),
        (
            lambda d: d["links"][0]["b"].update(node="leaf1", port=7),
            "x.yaml: links[0].b.node: a link joins two different switches, both ends are 'leaf1'",
        ),
        (
            lambda d: d["links"][0]["a"].update(port=0),
            "x.yaml: links[0].a.port: expected an integer 1..510, got 0",
        ),
        (
            lambda d: d["links"][0].update(speed=10),
            "x.yaml: links[0].speed: unknown key (expected one of a, b, delay_us, rate_gbps)",
        ),
        (
            lambda d: d["defaults"].update(link_rate_gbps=-1),
            "x.yaml: defaults.link_rate_gbps: expected a positive number, got -1",
        ),
        (lambda d: d.update(switches={}), "x.yaml: switches: expected a list, got dict"),
    ],
)
def test_validation_messages(mutate: Any, expected: str) -> None:
    d = copy.deepcopy(_base())
    mutate(d)
    assert expected in _errors(d)


def test_every_error_is_reported_at_once() -> None:
    d = _base()
    d["switches"][0]["role"] = "x"
    d["hosts"][1]["mac"] = "zz"
    d["links"][1]["rate_gbps"] = -3
    errs = _errors(d)
    assert len(errs) == 3
    assert str(SpecError(errs)).splitlines() == errs


def test_disconnected_switch_is_an_error() -> None:
    d = _base()
    d["switches"].append({"name": "spine2", "role": "spine"})
    assert _errors(d) == [
        "x.yaml: switches[3]: spine2 is not connected to leaf1 (expected links joining every switch)"
    ]


def test_unreadable_and_invalid_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nope\.yaml: cannot read"):
        load_topology(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match=r"bad\.yaml: not valid YAML"):
        load_topology(bad)
    top = tmp_path / "list.yaml"
    top.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(SpecError, match=r"list\.yaml: \(top level\): expected a mapping"):
        load_topology(top)


def test_unquoted_yaml_mac_read_as_a_number_gets_a_hint(tmp_path: Path) -> None:
    d = _base()
    text = yaml.safe_dump(d).replace("00:00:0a:00:01:01", "10:20:30:40:50:11")
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(
        SpecError, match=r"m\.yaml: hosts\[0\]\.mac: expected a MAC string, YAML read a number"
    ):
        load_topology(p)


def test_readme_example_is_a_valid_spec() -> None:
    import re

    readme = (Path(S.__file__).parent / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert block is not None
    t = parse_topology(yaml.safe_load(block.group(1)), source="topo/README.md")
    assert len(t.switches) == 4 and t.link_rate(t.links[0]) == 50.0


def test_priority_queues_default_to_one_and_are_validated() -> None:
    assert parse_topology(_base()).defaults.priority_queues == 1  # what BMv2 runs by default
    data = _base()
    data["defaults"]["priority_queues"] = 8
    assert parse_topology(data).defaults.priority_queues == 8
    for bad in (0, 9, "8"):
        data["defaults"]["priority_queues"] = bad
        errs = _errors(data)
        assert any(
            e.startswith("x.yaml: defaults.priority_queues: expected an integer 1..8") for e in errs
        ), errs


def test_every_switch_gets_its_own_thrift_port() -> None:
    from icefabric.topo.generators import leaf_spine
    from icefabric.topo.spec import THRIFT_BASE_PORT

    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1)
    ports = [spec.thrift_port(s.name) for s in spec.switches]
    assert ports == list(range(THRIFT_BASE_PORT, THRIFT_BASE_PORT + 4))
    with pytest.raises(KeyError):
        spec.thrift_port("nope")
