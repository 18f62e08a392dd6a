"""The ECMP model (control/planner/ecmp.py) against ice.p4 in ECMP mode, packet by packet.

A fabric of the target ICE_TARGET selects is built from a topology spec and programmed with the
controller's own base entries (``base_entries`` with ``FabricOptions(mode="ecmp")``). Every flow
sends one RoCEv2 packet; the per-tag direct counter of ``tag_forward`` on its first leaf says
which candidate path the switch took, and that must be the model's prediction for every flow:
the README example's flows (with the stand-in keys ``icectl run`` installs and the demo sends)
and seeded random keys, with and without the QP in the hash, with a failed link and with
unequal path weights. The per-link load the packets put on the fabric must equal what
``EcmpModel.loads`` (the figure ``icectl plan`` prints) says.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from harness import Fabric, TargetUnavailable, make_fabric

from icefabric.control.ccl.demand import Flow, demand_from_jobs
from icefabric.control.ccl.job import load_job, parse_job
from icefabric.control.fabric import FabricOptions, TagMap, allocate_tags, base_entries, switch_mac
from icefabric.control.flowkey import FlowKey
from icefabric.control.p4rt import TableEntry
from icefabric.control.planner.ecmp import EcmpModel
from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology
from icefabric.experiment.linkdemo import interleaved_hosts, ring_job
from icefabric.p4src import ice_p4 as n
from icefabric.topo.spec import Link, TopologySpec, load_topology
from icefabric.traffic import packets as P

pytestmark = pytest.mark.dataplane

ROOT = Path(__file__).resolve().parents[2]
README_TOPO = ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml"
README_JOB = ROOT / "control" / "ccl" / "examples" / "mixed_dp_allreduce.yaml"


class EcmpFabric:
    """A spec's fabric on the test target, programmed in ECMP mode as the controller does."""

    def __init__(self, topo: Topology, options: FabricOptions) -> None:
        self.topo = topo
        self.spec = topo.spec
        self.tags: TagMap = allocate_tags(topo)
        ports: dict[str, set[int]] = {s.name: set() for s in self.spec.switches}
        for h in self.spec.hosts:
            ports[h.leaf].add(h.port)
        for ln in self.spec.links:
            ports[ln.a.node].add(ln.a.port)
            ports[ln.b.node].add(ln.b.port)
        self.fab: Fabric = make_fabric()
        try:
            for s in self.spec.switches:
                self.fab.add_switch(s.name, sorted(ports[s.name]))
            for ln in self.spec.links:
                self.fab.link(ln.a.node, ln.a.port, ln.b.node, ln.b.port)
            self.fab.start()
            for sw, ents in base_entries(topo, options, self.tags).items():
                conn = self.fab[sw].conn
                defaults = [e for e in ents if isinstance(e, TableEntry) and e.is_default_action]
                others = [e for e in ents if e not in defaults]
                if defaults:
                    conn.modify(defaults)
                if others:
                    conn.insert(others)
        except BaseException:
            self.fab.close()
            raise

    def taken_tag(self, flow: Flow) -> int:
        """Send one packet of ``flow``; the tag its first leaf forwarded it with."""
        src = self.spec.host(flow.src_host)
        dst = self.spec.host(flow.dst_host)
        key = FlowKey.of_flow(self.topo, flow)
        leaf = self.fab[src.leaf]
        before = leaf.direct_counters(n.TABLE_TAG_FORWARD, "path_tag")
        pkt = P.rocev2_packet(
            src_mac=src.mac,
            dst_mac=switch_mac(self.spec.switch(src.leaf).switch_id),
            src_ip=key.src_ip,
            dst_ip=key.dst_ip,
            src_port=key.udp_sport,
            dst_qp=key.dst_qp,
        )
        self.fab.send(src.leaf, src.port, bytes(pkt))
        got = self.fab.wait_received(dst.leaf, dst.port, 1)
        assert len(got) == 1, f"{flow.flow_id}: {len(got)} frames delivered"
        after = leaf.direct_counters(n.TABLE_TAG_FORWARD, "path_tag")
        moved = [int(t) for t, c in after.items() if c != before.get(t, 0)]
        assert len(moved) == 1, f"{flow.flow_id}: tag counters moved for {moved}"
        return moved[0]

    def close(self) -> None:
        """Tear the fabric down."""
        self.fab.close()


def build(topo: Topology, options: FabricOptions) -> EcmpFabric:
    try:
        return EcmpFabric(topo, options)
    except TargetUnavailable as exc:
        pytest.skip(str(exc))


def random_flows(spec: TopologySpec, count: int, seed: int) -> list[Flow]:
    """Cross-leaf flows between random hosts with random source ports and QPs."""
    rng = random.Random(seed)
    flows = []
    while len(flows) < count:
        a, b = rng.sample(list(spec.hosts), 2)
        if a.leaf == b.leaf:
            continue
        k = len(flows)
        flows.append(
            Flow(
                flow_id=f"rand{k}",
                job="rand",
                phase="p",
                channel=0,
                src_host=a.name,
                dst_host=b.name,
                src_rank=0,
                dst_rank=1,
                bytes=1.0,
                udp_sport=rng.randrange(1024, 65536),
                qp=rng.randrange(1, 1 << 24),
            )
        )
    return flows


def check_flows(ef: EcmpFabric, model: EcmpModel, flows: list[Flow]) -> dict[str, int]:
    """Every flow's taken tag equals the model's; returns {flow id: candidate index}."""
    taken: dict[str, int] = {}
    wrong = []
    for f in flows:
        src_leaf, dst_leaf = ef.topo.leaf_of[f.src_host], ef.topo.leaf_of[f.dst_host]
        want = ef.tags.tag(src_leaf, dst_leaf, model.flow_path_index(f))
        got = ef.taken_tag(f)
        path = ef.tags.path(got)
        taken[f.flow_id] = path.index
        if got != want:
            wrong.append(f"{f.flow_id}: switch took tag {got}, model says {want}")
    assert not wrong, "\n".join(wrong)
    return taken


@pytest.mark.parametrize("which", ["readme", "demo"])
def test_example_flows_take_the_modelled_paths_and_loads(which: str) -> None:
    """The README's `icectl plan` example and experiment/demo.py's ring (same fabric)."""
    spec = load_topology(README_TOPO)
    topo = Topology(spec)
    options = FabricOptions(mode="ecmp")
    if which == "readme":
        job = load_job(README_JOB)
    else:
        job = parse_job(ring_job(interleaved_hosts(topo), channels=2))
    demand = demand_from_jobs([job])
    model = EcmpModel(topo, use_qp_in_hash=options.use_qp_in_hash)
    ef = build(topo, options)
    try:
        taken = check_flows(ef, model, list(demand))
    finally:
        ef.close()
    # same keys -> same per-link load: the switches' paths put exactly the model's loads
    state = PlanState(topo)
    state.add_flows(list(demand))
    measured = np.zeros(topo.n_links)
    for i, f in enumerate(state.flows):
        measured[list(state.host_up[i : i + 1]) + list(state.host_down[i : i + 1])] += (
            f.bytes / topo.capacity[[state.host_up[i], state.host_down[i]]]
        )
        links = topo.candidate_array(topo.leaf_of[f.src_host], topo.leaf_of[f.dst_host])
        for lid in links[taken[f.flow_id]].tolist():
            measured[lid] += f.bytes / topo.capacity[lid]
    np.testing.assert_allclose(model.loads(state)[: topo.n_links], measured, rtol=1e-12)
    # and the model is not trivially "all on one path": the ring's flows use both spines
    assert len(set(taken.values())) == 2


@pytest.mark.parametrize("use_qp", [True, False], ids=["qp-hashed", "5-tuple"])
def test_random_keys_take_the_modelled_paths(use_qp: bool) -> None:
    spec = load_topology(README_TOPO)
    topo = Topology(spec)
    options = FabricOptions(mode="ecmp", use_qp_in_hash=use_qp)
    model = EcmpModel(topo, use_qp_in_hash=use_qp)
    flows = random_flows(spec, 48, seed=15 + use_qp)
    ef = build(topo, options)
    try:
        taken = check_flows(ef, model, flows)
    finally:
        ef.close()
    assert len(set(taken.values())) == 2


def test_failed_link_and_unequal_weights_follow_the_controller_buckets() -> None:
    base = load_topology(README_TOPO)
    # leaf1's uplink to spine2 at 400G, every other link 100G: leaf1 -> spine2 -> x paths are
    # bottlenecked at 100G too, so weights stay equal there; spine2's downlink to leaf4 at 25G
    # makes every path into leaf4 via spine2 weigh 1/4 of the spine1 path.
    links = []
    for ln in base.links:
        if {ln.a.node, ln.b.node} == {"leaf4", "spine2"}:
            links.append(replace(ln, rate_gbps=25.0))
        else:
            links.append(ln)
    spec = replace(base, links=tuple(links))
    topo = Topology(spec)
    failed = [
        lid
        for lid, ln in enumerate(topo.links)
        if ln.kind == "fabric" and {ln.src, ln.dst} == {"leaf2", "spine1"}
    ]
    for lid in failed:
        topo.fail_link(lid)
    options = FabricOptions(mode="ecmp")
    model = EcmpModel(topo, use_qp_in_hash=True)
    assert isinstance(spec.links[0], Link)
    flows = random_flows(spec, 48, seed=7)
    ef = build(topo, options)
    try:
        taken = check_flows(ef, model, flows)
    finally:
        ef.close()
    for f in flows:  # nothing uses the failed link
        path = topo.candidate_array(topo.leaf_of[f.src_host], topo.leaf_of[f.dst_host])
        assert not set(path[taken[f.flow_id]].tolist()) & set(failed)
