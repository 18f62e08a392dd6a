"""Leaf-spine and fat-tree generators: counts, ports, rates, oversubscription, validity."""

from __future__ import annotations

from collections import Counter

import pytest

from icefabric.topo.generators import fat_tree, leaf_spine, oversubscription
from icefabric.topo.model import P4RUNTIME_BASE_PORT
from icefabric.topo.spec import SpecError, TopologySpec, parse_topology


def _ports(t: TopologySpec) -> Counter[str]:
    c: Counter[str] = Counter()
    for h in t.hosts:
        c[h.leaf] += 1
    for ln in t.links:
        c[ln.a.node] += 1
        c[ln.b.node] += 1
    return c


@pytest.mark.parametrize(
    ("leaves", "spines", "hosts", "links"), [(4, 2, 2, 1), (6, 3, 4, 2), (1, 1, 1, 1)]
)
def test_leaf_spine_counts_and_ports(leaves: int, spines: int, hosts: int, links: int) -> None:
    t = leaf_spine(leaves=leaves, spines=spines, hosts_per_leaf=hosts, links_per_spine=links)
    assert parse_topology(t.to_dict()) == t  # the generated spec passes validation
    assert sum(s.role == "leaf" for s in t.switches) == leaves
    assert sum(s.role == "spine" for s in t.switches) == spines
    assert len(t.hosts) == leaves * hosts
    assert len(t.links) == leaves * spines * links
    ports = _ports(t)
    for i in range(leaves):
        assert ports[f"leaf{i + 1}"] == hosts + spines * links
    for j in range(spines):
        assert ports[f"spine{j + 1}"] == leaves * links


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0])
def test_leaf_spine_oversubscription(ratio: float) -> None:
    t = leaf_spine(leaves=4, spines=4, hosts_per_leaf=8, host_rate_gbps=100, oversubscription=ratio)
    assert oversubscription(t, "leaf1") == pytest.approx(ratio)
    assert t.link_rate(t.links[0]) == pytest.approx(800 / 4 / ratio)


def test_leaf_spine_explicit_uplink_rate() -> None:
    t = leaf_spine(leaves=2, spines=2, hosts_per_leaf=4, host_rate_gbps=25, uplink_rate_gbps=100)
    assert oversubscription(t, "leaf2") == pytest.approx(0.5)


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_counts(k: int) -> None:
    t = fat_tree(k)
    assert parse_topology(t.to_dict()) == t
    half = k // 2
    roles = Counter(s.role for s in t.switches)
    assert roles == {"tor": k * half, "agg": k * half, "core": half * half}
    assert len(t.hosts) == k**3 // 4
    assert len(t.links) == k**3 // 2
    ports = _ports(t)
    assert all(n == k for n in ports.values())  # every switch uses exactly k ports
    for c in range(half * half):  # each core reaches every pod exactly once
        pods = [ln.a.node.split("_")[0] for ln in t.links if ln.b.node == f"core{c}"]
        assert sorted(pods) == sorted(f"agg{p}" for p in range(k))
    assert oversubscription(t, "tor0_0") == pytest.approx(1.0)


def test_fat_tree_hosts_per_tor_oversubscribes() -> None:
    t = fat_tree(4, hosts_per_tor=4)
    assert oversubscription(t, "tor1_1") == pytest.approx(2.0)


def test_addresses_and_ids_are_unique_at_scale() -> None:
    t = fat_tree(16)
    assert len({h.ip for h in t.hosts}) == len(t.hosts) == 1024
    assert len({h.mac for h in t.hosts}) == 1024
    assert len({s.grpc_port for s in t.switches}) == len(t.switches)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: fat_tree(5), r"fat_tree.k: expected an even integer 2\.\.114 .*got 5"),
        # issue 26 item 13: the bound in the message was computed as 1..-499491
        (
            lambda: fat_tree(1_000_000),
            r"fat_tree.k: expected an even integer 2\.\.114 .*got 1000000",
        ),
        (lambda: fat_tree(4, hosts_per_tor=600), r"hosts_per_tor: expected 1\.\.507 .*got 600"),
        (
            lambda: leaf_spine(leaves=0, spines=2, hosts_per_leaf=1),
            "leaf_spine.leaves: expected >= 1, got 0",
        ),
        (
            lambda: leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, oversubscription=0),
            "must be positive",
        ),
        (lambda: leaf_spine(leaves=2, spines=600, hosts_per_leaf=1), "more than 509 ports"),
    ],
)
def test_generator_errors(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=match):
        call()


def test_generated_ports_skip_the_cpu_port_and_pass_validation() -> None:
    from icefabric.topo.spec import parse_topology

    spec = leaf_spine(leaves=260, spines=2, hosts_per_leaf=1)  # spines need ports 1..261
    ports = {ln.b.port for ln in spec.links if ln.b.node == "spine1"}
    assert 255 not in ports and max(ports) == 261 and len(ports) == 260
    assert parse_topology(spec.to_dict(), source="gen").links == spec.links


def test_default_p4runtime_ports_stay_below_the_ephemeral_range() -> None:
    # Linux's default ip_local_port_range starts at 32768: a port there can be taken by any
    # outgoing connection before the switch binds it.
    assert P4RUNTIME_BASE_PORT == 9559
    for spec in (leaf_spine(leaves=4, spines=2, hosts_per_leaf=2), fat_tree(16)):
        ports = [s.grpc_port for s in spec.switches]
        assert ports[0] == P4RUNTIME_BASE_PORT and max(ports) < 32768
