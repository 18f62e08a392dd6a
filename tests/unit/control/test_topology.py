"""The controller's topology graph: directed link ids, candidate paths, hops, failures."""

from __future__ import annotations

import numpy as np
import pytest

from icefabric.control.topology import Topology, TopologyError
from icefabric.topo.generators import fat_tree, leaf_spine


@pytest.fixture
def ls() -> Topology:
    return Topology(leaf_spine(leaves=4, spines=3, hosts_per_leaf=2, links_per_spine=1))


def test_link_ids_pair_directions(ls: Topology) -> None:
    for ln in ls.links:
        rev = ls.links[ln.id ^ 1]
        assert (rev.src, rev.src_port, rev.dst, rev.dst_port) == (
            ln.dst,
            ln.dst_port,
            ln.src,
            ln.src_port,
        )
    up = ls.host_uplink("h3")
    assert ls.links[up].src == "h3" and ls.links[up].dst == "leaf2" and ls.links[up].dst_port == 1
    assert ls.link_at("leaf1", 3) == ls.links_between("leaf1", "spine1")[0]
    assert ls.graph.number_of_nodes() == 4 + 3 + 8
    with pytest.raises(TopologyError, match="no link leaves 'leaf1' by port 99"):
        ls.link_at("leaf1", 99)


def test_leaf_spine_candidates_one_per_spine_with_ports(ls: Topology) -> None:
    paths = ls.candidate_paths("leaf1", "leaf4")
    assert [p.index for p in paths] == [0, 1, 2]
    for p in paths:
        assert p.hops[0].switch == "leaf1" and p.hops[-1].switch == "leaf4"
        spine = p.hops[1]
        assert spine.switch.startswith("spine")
        # spine port towards leaf4 is 4, from leaf1 is 1 (generator numbering)
        assert (spine.in_port, spine.out_port) == (1, 4)
        assert p.hops[0].out_port == 2 + 1 + int(spine.switch[-1]) - 1
    assert ls.candidate_array("leaf2", "leaf2").shape == (1, 0)


def test_fat_tree_candidates_intra_and_inter_pod() -> None:
    t = Topology(fat_tree(4))
    assert t.candidate_array("tor0_0", "tor0_1").shape == (2, 2)
    inter = t.candidate_array("tor0_0", "tor3_1")
    assert inter.shape == (4, 4)
    assert len({tuple(r) for r in inter.tolist()}) == 4
    for row in inter.tolist():  # paths chain and never repeat a node
        hops = t.hops(row)
        names = [h.switch for h in hops]
        assert names[0] == "tor0_0" and names[-1] == "tor3_1" and len(set(names)) == 5


def test_failures_keep_stable_indices(ls: Topology) -> None:
    ls.fail_port("spine2", 1)  # the spine2 <-> leaf1 link
    live = ls.candidate_paths("leaf1", "leaf3")
    assert [p.index for p in live] == [0, 2]
    allp = ls.candidate_paths("leaf1", "leaf3", include_failed=True)
    assert [p.live for p in allp] == [True, False, True]
    assert [p.index for p in ls.candidate_paths("leaf2", "leaf3")] == [0, 1, 2]
    ls.fail_switch("spine1")
    paths, idx = ls.live_candidates("leaf1", "leaf3")
    assert idx.tolist() == [2] and paths.shape == (1, 2)
    ls.fail_switch("spine3")
    assert ls.check_connected()  # leaf1 is now cut off
    ls.restore()
    assert not ls.failed.any() and not ls.check_connected()


def test_unknown_names_raise(ls: Topology) -> None:
    with pytest.raises(TopologyError, match="no switch 'leafX'"):
        ls.candidate_array("leafX", "leaf1")
    with pytest.raises(TopologyError, match="no host 'h99'"):
        ls.host_uplink("h99")
    with pytest.raises(TopologyError, match="no switch 'spine9'"):
        ls.fail_switch("spine9")


def test_capacity_in_bytes_per_second(ls: Topology) -> None:
    assert ls.capacity.shape == (ls.n_links,)
    assert np.all(ls.capacity > 0)
    up = ls.host_uplink("h1")
    assert ls.capacity[up] == pytest.approx(100e9 / 8)


def test_parallel_links_multiply_candidates() -> None:
    t = Topology(leaf_spine(leaves=3, spines=2, hosts_per_leaf=1, links_per_spine=2))
    arr = t.candidate_array("leaf1", "leaf3")
    assert arr.shape == (8, 2) and len({tuple(r) for r in arr.tolist()}) == 8
    outs = {(p.hops[0].out_port, p.hops[1].out_port) for p in t.candidate_paths("leaf1", "leaf3")}
    assert len(outs) == 8


@pytest.mark.parametrize(
    "spec", [fat_tree(4), leaf_spine(leaves=3, spines=2, hosts_per_leaf=1, links_per_spine=2)]
)
def test_hop_sets_are_the_distinct_links_per_position(spec) -> None:  # type: ignore[no-untyped-def]
    t = Topology(spec)
    for a, b in t.leaf_pairs():
        arr = t.candidate_array(a, b)
        want = [sorted(set(arr[:, j].tolist())) for j in range(arr.shape[1])]
        got = [np.frombuffer(x, dtype=np.int64).tolist() for x in t.hop_sets(a, b)]
        assert got == want
    assert t.hop_sets(t.leaves[0], t.leaves[0]) == []
