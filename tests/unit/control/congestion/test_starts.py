"""Start tables for flows no plan covers: the smallest residual over the source's uplink and
every live candidate path's links, per destination leaf prefix, against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from icefabric.control.congestion.starts import leaf_prefixes, unplanned_starts
from icefabric.control.topology import Topology
from icefabric.topo.generators import leaf_spine

G = 1e9


def _topo() -> Topology:
    # 3 leaves x 2 spines x 2 hosts, every link 100 Gbit/s
    return Topology(leaf_spine(leaves=3, spines=2, hosts_per_leaf=2))


def _link(topo: Topology, src: str, dst: str) -> int:
    (lid,) = topo.links_between(src, dst)
    return lid


def test_nothing_allocated_gives_an_empty_table() -> None:
    topo = _topo()
    full = topo.capacity * 8.0
    assert unplanned_starts(topo, full) == {h.name: () for h in topo.spec.hosts}


def test_the_smallest_residual_over_uplink_and_every_candidate_path() -> None:
    topo = _topo()
    res = topo.capacity * 8.0  # 100 G everywhere
    res[_link(topo, "leaf1", "spine1")] = 40 * G  # one of leaf1's two uplinks
    res[_link(topo, "spine2", "leaf3")] = 30 * G  # one of leaf3's two downlinks
    res[topo.host_uplink("h2")] = 20 * G  # h2's own NIC
    table = unplanned_starts(topo, res)
    nets = {leaf: str(p[0]) for leaf, p in leaf_prefixes(topo).items()}
    # h1 -> leaf2 may be hashed onto either spine: leaf1>spine1's 40 counts; -> leaf3 also
    # spine2>leaf3's 30; listed lowest first
    assert table["h1"] == ((nets["leaf3"], 30 * G), (nets["leaf2"], 40 * G))
    # h2's NIC is the smallest for every destination, its own leaf included
    for h in topo.spec.hosts:
        if h.name != "h2":
            assert _rate(table["h2"], _ip(h)) == 20 * G
    # leaf2's hosts only meet leaf3's downlink; leaf3's hosts meet none of the three
    assert table["h3"] == table["h4"] == ((nets["leaf3"], 30 * G),)
    assert table["h5"] == table["h6"] == ()


def test_failed_links_do_not_count_and_a_full_link_starts_at_zero() -> None:
    topo = _topo()
    res = topo.capacity * 8.0
    down = _link(topo, "leaf1", "spine1")
    res[down] = 0.0  # leaf1's spine1 uplink failed (its capacity is 0 then)
    topo.fail_link(down)
    res[_link(topo, "leaf1", "spine2")] = -5 * G  # over the target: starts at 0
    table = dict(unplanned_starts(topo, res, ["h1"])["h1"])
    assert set(table.values()) == {0.0}
    topo.restore()
    res[down] = 60 * G
    table = dict(unplanned_starts(topo, res, ["h1"])["h1"])
    assert set(table.values()) == {0.0}  # min(60, 0)


def test_prefixes_are_leaf_subnets_or_host_addresses() -> None:
    topo = _topo()
    nets = leaf_prefixes(topo)
    for leaf, prefixes in nets.items():
        hosts = [h for h in topo.spec.hosts if h.leaf == leaf]
        assert len(prefixes) == 1 and all(_ip(h) in prefixes[0] for h in hosts)
        others = [h for h in topo.spec.hosts if h.leaf != leaf]
        assert not any(_ip(h) in prefixes[0] for h in others)


def test_unknown_host_is_an_error() -> None:
    topo = _topo()
    with pytest.raises(Exception, match="h99"):
        unplanned_starts(topo, np.zeros(topo.n_links), ["h99"])


def _rate(table, ip):
    import ipaddress

    rates = [bps for net, bps in table if ip in ipaddress.IPv4Network(net)]
    assert len(rates) == 1, (ip, table)
    return rates[0]


def _ip(h):
    import ipaddress

    return ipaddress.IPv4Interface(str(h.ip)).ip
