"""Demand from job descriptions: flows and volumes per collective and algorithm."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from icefabric.control.ccl.demand import Demand, default_tree, demand_from_job, demand_from_jobs
from icefabric.control.ccl.job import parse_job

S = 1 << 24


def _job(phase: dict[str, Any], hosts: int = 4, per_host: int = 1, name: str = "j") -> Any:
    return parse_job(
        {
            "name": name,
            "hosts": [f"h{i + 1}" for i in range(hosts)],
            "ranks_per_host": per_host,
            "phases": [{"message_bytes": S, **phase}],
        }
    )


def test_ring_all_reduce_volumes_per_channel() -> None:
    d = demand_from_job(_job({"collective": "all-reduce", "algorithm": "ring", "channels": 4}))
    assert len(d) == 16
    assert [f.bytes for f in d] == pytest.approx([2 * 3 / 4 * S / 4] * 16)
    assert sorted({(f.src_host, f.dst_host) for f in d}) == [
        ("h1", "h2"),
        ("h2", "h3"),
        ("h3", "h4"),
        ("h4", "h1"),
    ]
    assert d.total_bytes == pytest.approx(4 * 2 * 3 / 4 * S)  # n * 2(n-1)/n * S


def test_intra_host_hops_make_no_flow() -> None:
    d = demand_from_job(_job({"collective": "all-reduce", "channels": 2}, hosts=2, per_host=4))
    # each ring crosses hosts twice (rank 3 -> 4 and 7 -> 0) per channel
    assert len(d) == 4
    assert {(f.src_rank, f.dst_rank) for f in d} == {(3, 4), (7, 0)}


@pytest.mark.parametrize("coll", ["all-gather", "reduce-scatter"])
def test_ring_all_gather_reduce_scatter(coll: str) -> None:
    d = demand_from_job(_job({"collective": coll, "channels": 1}, hosts=8))
    assert [f.bytes for f in d] == pytest.approx([7 / 8 * S] * 8)


def test_tree_all_reduce_both_directions_every_edge() -> None:
    d = demand_from_job(
        _job({"collective": "all-reduce", "algorithm": "tree", "channels": 2}, hosts=7)
    )
    assert len(d) == 2 * 2 * 6  # channels * directions * edges
    assert {f.bytes for f in d} == {S / 2}
    t0, t1 = default_tree(tuple(range(7)), 0), default_tree(tuple(range(7)), 1)
    assert t0[0] == -1 and t1[1] == -1 and t0 != t1


def test_halving_doubling_partners_and_volumes() -> None:
    d = demand_from_job(
        _job({"collective": "all-reduce", "algorithm": "halving-doubling"}, hosts=8)
    )
    by_pair = {(f.src_rank, f.dst_rank): f.bytes for f in d}
    assert by_pair[(0, 4)] == pytest.approx(2 * S / 2)
    assert by_pair[(0, 2)] == pytest.approx(2 * S / 4)
    assert by_pair[(0, 1)] == pytest.approx(2 * S / 8)
    assert len(by_pair) == 8 * 3
    assert d.total_bytes == pytest.approx(8 * 2 * 7 / 8 * S)  # same bytes as a ring all-reduce


def test_all_to_all_and_send_recv() -> None:
    a2a = demand_from_job(_job({"collective": "all-to-all", "channels": 2}))
    assert len(a2a) == 2 * 12 and {f.bytes for f in a2a} == {S / 4 / 2}
    pp = demand_from_job(_job({"collective": "send-recv", "pairs": [[0, 3], [3, 1]]}))
    assert [(f.src_host, f.dst_host, f.bytes) for f in pp] == [("h1", "h4", S), ("h4", "h2", S)]
    chain = demand_from_job(_job({"collective": "send-recv", "channels": 2}))
    assert Counter(f.channel for f in chain) == {0: 3, 1: 3}


def test_flow_ids_sports_and_merge() -> None:
    a = demand_from_job(_job({"collective": "all-reduce"}, name="a"))
    b = demand_from_job(_job({"collective": "all-reduce"}, name="b"))
    both = a.merge(b)
    assert both.jobs == ("a", "b") and len(both.of_job("b")) == 4
    ids = [f.flow_id for f in both]
    assert len(set(ids)) == len(ids) and ids[0] == "a/phase0/c0/r0->r1"
    sports = {f.entropy_sport() for f in both}
    assert all(49152 <= p < 65536 for p in sports) and len(sports) > 1
    with pytest.raises(ValueError, match="appears twice"):
        a.merge(a)
    assert Demand.from_dict(both.to_dict()) == both
    assert demand_from_jobs([_job({"collective": "all-reduce"}, name="a")]) == a
