"""TelemetryStore: utilisation and queue depth per link from INT hop records, bounded memory,
unknown hops, planned-vs-actual path checks, over-target events, wire drops from counters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icefabric.control.telemetry.store import TelemetryStore
from icefabric.control.topology import Topology
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[4]
TOPO = Topology(load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"))
# leaf1 is switch id 1, spine1 5, leaf2 2; leaf1 port 3 -> spine1 port 1; spine1 port 2 -> leaf2


def hop(sw: int, port: int, tx: int, ts_us: int, q: int = 0, rate: int = 100_000) -> dict[str, Any]:
    return {
        "switch_id": sw,
        "ingress_port": 1,
        "egress_port": port,
        "qdepth": q,
        "deq_qdepth": max(0, q - 1),
        "tx_bytes": tx,
        "egress_ts": ts_us,
        "link_rate_mbps": rate,
    }


def report(*hops: dict[str, Any], flow: str = "j/p/c0/r0->r1") -> dict[str, Any]:
    return {"hops": list(hops), "flow": flow, "tag": 7}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_utilisation_and_queue_depth_per_link() -> None:
    clock = Clock()
    st = TelemetryStore(TOPO, min_interval_us=1000, clock=clock)
    lid = TOPO.link_at("leaf1", 3)
    st.add_report(report(hop(1, 3, 0, 0, q=2)))
    # 6,250,000 bytes in 1,000 us = 50 Gbit/s on a 100G link: 0.5
    st.add_report(report(hop(1, 3, 6_250_000, 1000, q=9)))
    (row,) = st.links()
    assert row["link"] == lid and row["name"] == "leaf1:3->spine1:1"
    assert row["utilisation"] == pytest.approx(0.5)
    assert (row["qdepth"], row["deq_qdepth"], row["max_qdepth"]) == (9, 8, 9)
    # closer than min_interval_us to the reference: no new rate (no noise), depth updates
    st.add_report(report(hop(1, 3, 6_300_000, 1100, q=1)))
    (row,) = st.links()
    assert row["utilisation"] == pytest.approx(0.5) and row["qdepth"] == 1
    st.add_report(report(hop(1, 3, 6_250_000 + 12_500_000, 2000)))  # 100 Gbit/s
    assert st.links()[0]["utilisation"] == pytest.approx(1.0)
    assert [s["utilisation"] for s in st.series(lid)] == [None, 0.5, None, pytest.approx(1.0)]


def test_counters_reset_restarts_the_reference() -> None:
    st = TelemetryStore(TOPO, min_interval_us=1)
    st.add_report(report(hop(1, 3, 5_000_000, 5000)))
    st.add_report(report(hop(1, 3, 100, 10)))  # the switch restarted
    assert st.links()[0]["utilisation"] is None
    st.add_report(report(hop(1, 3, 100 + 1250, 110)))  # 1250 B in 100 us = 100 Mbit/s
    assert st.links()[0]["utilisation"] == pytest.approx(0.001)


def test_memory_is_bounded_and_unknown_hops_are_counted() -> None:
    st = TelemetryStore(TOPO, samples=8)
    for i in range(1000):
        st.add_report(report(hop(1, 3, i * 100, i * 10), hop(99, 1, 0, 0), hop(5, 77, 0, 0)))
    assert len(st.series(TOPO.link_at("leaf1", 3))) == 8
    c = st.snapshot()["counters"]
    assert c["reports"] == 1000 and c["hop_records"] == 3000 and c["unknown_hops"] == 2000
    assert [r["link"] for r in st.links()] == [TOPO.link_at("leaf1", 3)]


def test_reports_are_checked_against_the_planned_path() -> None:
    planned = {"f": ("leaf1", "spine1", "leaf2")}
    st = TelemetryStore(TOPO, planned_path=planned.get)
    st.add_report(report(hop(1, 3, 0, 0), hop(5, 2, 0, 0), hop(2, 1, 0, 0), flow="f"))
    st.add_report(report(hop(1, 4, 0, 0), hop(6, 2, 0, 0), hop(2, 1, 0, 0), flow="f"))
    st.add_report(report(hop(1, 3, 0, 0), flow="unplanned"))
    c = st.snapshot()["counters"]
    assert (c["path_checked"], c["path_mismatches"]) == (2, 1)
    (m,) = st.snapshot()["mismatches"]
    assert m["actual"] == ["leaf1", "spine2", "leaf2"] and m["planned"] == list(planned["f"])


def test_links_above_target_call_back_at_most_once_per_interval() -> None:
    clock = Clock()
    calls: list[dict[int, float]] = []
    st = TelemetryStore(
        TOPO, min_interval_us=1, target=0.9, on_over_target=calls.append, clock=clock
    )
    st.add_report(report(hop(1, 3, 0, 0)))
    st.add_report(report(hop(1, 3, 1_250_000, 100)))  # 100 Gbit/s > 90 %
    st.add_report(report(hop(1, 3, 2_500_000, 200)))
    assert calls == [{TOPO.link_at("leaf1", 3): pytest.approx(100e9)}]
    clock.t += 1.5
    st.add_report(report(hop(1, 3, 3_750_000, 300)))
    assert len(calls) == 2 and st.snapshot()["counters"]["over_target_events"] == 3
    st.add_report(report(hop(1, 3, 3_760_000, 400)))  # 0.8 %: not above target
    assert len(calls) == 2


def test_wire_drops_from_port_counters() -> None:
    st = TelemetryStore(TOPO)
    # leaf1:3 -> spine1:1 ; first poll is the baseline
    st.add_counters({"leaf1": {3: (0, 100)}, "spine1": {1: (50, 0)}}, {"leaf1": {}})
    st.add_counters({"leaf1": {3: (0, 200)}, "spine1": {1: (147, 0)}}, {"spine1": {"no-route": 4}})
    row = next(r for r in st.links() if r["name"] == "leaf1:3->spine1:1")
    assert row["drops"] == 3  # 100 sent, 97 received
    snap = st.snapshot()
    assert snap["switch_drops"] == {"leaf1": {}, "spine1": {"no-route": 4}}
    assert snap["counters"]["counter_polls"] == 2
