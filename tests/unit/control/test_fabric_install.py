"""Plans as flow_path entries on the first hop, explained, and diffs as P4Runtime updates."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from _jobs import ring_job

from icefabric.control import fabric
from icefabric.control.ccl.demand import Flow, demand_from_job
from icefabric.control.ccl.job import parse_job
from icefabric.control.install import diff_updates, explain, flow_key, flow_qp, plan_entries
from icefabric.control.p4rt import TableEntry
from icefabric.control.planner.planner import Planner
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import load_topology

ROOT = Path(__file__).resolve().parents[3]


def _setup(hosts: list[str]) -> tuple[Topology, Planner, dict[str, Flow]]:
    topo = Topology(load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"))
    job = parse_job(ring_job("j", tuple(hosts)))
    demand = demand_from_job(job)
    planner = Planner(topo)
    planner.add(demand)
    return topo, planner, {f.flow_id: f for f in demand.flows}


def test_one_entry_per_inter_leaf_flow_on_its_first_hop_with_the_planned_tag() -> None:
    # h1, h2 share leaf1: their ring hop needs no entry
    topo, planner, flows = _setup(["h1", "h2", "h3", "h5"])
    tags = fabric.allocate_tags(topo)
    plan = planner.plan()
    out = plan_entries(topo, plan, flows, tags)
    inter = [pf for pf in plan.flows if pf.src_leaf != pf.dst_leaf]
    assert 0 < len(inter) < len(plan.flows)
    assert sum(len(v) for v in out.values()) == len(inter)
    for pf in inter:
        key = flow_key(topo, flows[pf.flow_id])
        (entry,) = [
            e
            for e in out[pf.src_leaf]
            if isinstance(e, TableEntry)
            and e.match["src_addr"] == key.src_ip
            and e.match["udp_src_port"] == key.udp_sport
            and e.match["dst_qp"] == key.dst_qp
        ]
        assert entry.table == n.TABLE_FLOW_PATH and entry.action == n.ACTION_SET_PLANNED_PATH
        assert entry.match["dst_addr"] == key.dst_ip
        path = tags.path(int(entry.params["path_tag"]))
        assert (path.src_leaf, path.dst_leaf, path.index) == (
            pf.src_leaf,
            pf.dst_leaf,
            pf.path_index,
        )


def test_explain_names_first_hop_tag_path_and_key() -> None:
    topo, planner, flows = _setup(["h1", "h3", "h5", "h7"])
    tags = fabric.allocate_tags(topo)
    rows = explain(topo, planner.plan(), flows, tags)
    assert len(rows) == len(flows)
    for r in rows:
        assert r["path"][0] == r["src"] and r["path"][-1] == r["dst"]
        assert r["first_hop"] == r["path"][1]
        assert tags.path(r["tag"]).src_leaf == r["first_hop"]
        assert r["key"]["dst_qp"] == flow_qp(flows[r["flow"]])


def test_stand_in_qp_is_deterministic_24_bit_and_explicit_qp_wins() -> None:
    f = Flow(
        flow_id="a/b/c0/r0->r1",
        job="a",
        phase="b",
        channel=0,
        src_host="h1",
        dst_host="h3",
        src_rank=0,
        dst_rank=1,
        bytes=1.0,
    )
    assert flow_qp(f) == flow_qp(f) and 0x100 <= flow_qp(f) < 1 << 24
    assert flow_qp(replace(f, qp=77)) == 77
    assert flow_qp(replace(f, flow_id="a/b/c1/r0->r1")) != flow_qp(f)


def test_diff_updates_inserts_modifies_and_deletes_in_safe_order() -> None:
    a = TableEntry(table="t", match={"k": 1}, action="x", params={"p": 1})
    b = TableEntry(table="t", match={"k": 2}, action="x", params={"p": 1})
    b2 = TableEntry(table="t", match={"k": 2}, action="x", params={"p": 9})
    c = TableEntry(table="t", match={"k": 3}, action="x", params={"p": 1})
    d = TableEntry(table="cfg", action="y", params={"m": 1}, is_default_action=True)
    ups = diff_updates([a, b], [b2, c, d])
    assert [(u.type, u.entity) for u in ups] == [
        ("MODIFY", b2),
        ("INSERT", c),
        ("MODIFY", d),  # a default entry is always modified, never inserted
        ("DELETE", a),
    ]
    assert diff_updates([a, b], [b, a]) == []


def test_a_default_entry_that_is_no_longer_wanted_is_reset_not_deleted() -> None:
    d = TableEntry(table="cfg", action="y", params={"m": 1}, is_default_action=True)
    ups = diff_updates([d], [])
    assert [(u.type, u.entity) for u in ups] == [
        ("MODIFY", TableEntry(table="cfg", is_default_action=True))  # no action: program default
    ]
