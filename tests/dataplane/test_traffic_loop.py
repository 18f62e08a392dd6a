"""The control loop in the virtual-time fabric: feedback, sharing, CNPs, caps (ice.p4 switches)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from icefabric.control.controller import Controller
from icefabric.control.fabric import FabricOptions
from icefabric.control.flowkey import FlowKey
from icefabric.control.p4rt import PipelineConfig
from icefabric.experiment.virtual_fabric import VirtualConfig, VirtualFabric
from icefabric.topo.spec import TopologySpec, load_topology
from icefabric.traffic.rate import Dcqcn, IceRate

pytestmark = pytest.mark.dataplane

ROOT = Path(__file__).resolve().parents[2]
LINE = 100e6  # the 2x4 example's 100 Gbit/s links at rate_scale 1e-3
OPTIONS = FabricOptions(
    mode="ice", feedback_every_n=1, report_every_n=0, flowlet_timeout_us=100_000
)
UPLINK = ("leaf1", 3)  # leaf1 -> spine1: the one uplink left once leaf1-spine2 has failed

Build = Callable[..., tuple[VirtualFabric, Controller]]


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return PipelineConfig.for_embedded(ROOT / "p4src" / "ice.p4")


@pytest.fixture(scope="module")
def spec() -> TopologySpec:
    return load_topology(ROOT / "topo" / "examples" / "leaf_spine_2x4.yaml")


@pytest.fixture
def build(pipeline: PipelineConfig, spec: TopologySpec) -> Iterator[Build]:
    made: list[tuple[VirtualFabric, Controller]] = []

    def make(kind: str) -> tuple[VirtualFabric, Controller]:
        vf = VirtualFabric(spec, VirtualConfig(rate_scale=1e-3, kind=kind))
        vf.start()
        ctl = Controller(
            spec, pipeline, addresses=vf.addresses, options=OPTIONS, probe_interval_s=0
        )
        made.append((vf, ctl))
        ctl.start()
        return vf, ctl

    try:
        yield make
    finally:
        for vf, ctl in made:
            ctl.stop()
            vf.stop()


def _two_flows_on_one_link(
    vf: VirtualFabric, ctl: Controller, nbytes: int
) -> tuple[FlowKey, FlowKey]:
    ctl.fail_link("leaf1", "spine2")  # replanned base forwarding: leaf1's traffic all via spine1
    k1 = vf.open_flow("h1", "h3", job="j", flow_id="j/a")
    k2 = vf.open_flow("h2", "h4", job="j", flow_id="j/b")
    vf.post(k1, nbytes, tag=1)
    vf.post(k2, nbytes, tag=2)
    return k1, k2


def _received(vf: VirtualFabric, keys: tuple[FlowKey, ...]) -> list[int]:
    stats = vf.flow_stats()
    return [stats[k].bytes_received for k in keys]


def test_ice_feedback_moves_the_rate_and_two_flows_share_one_link(build: Build) -> None:
    vf, ctl = build("ice")
    keys = _two_flows_on_one_link(vf, ctl, 3_000_000)
    vf.run_until(80_000)  # 80 ms: ~190 base RTTs
    for host, key in zip(("h1", "h2"), keys, strict=True):
        flow = vf.host(host).agent.flows[key]
        assert isinstance(flow.control, IceRate)
        assert flow.feedbacks > 100  # feedback reached the agent ...
        assert flow.rate_bps() < 0.9 * LINE  # ... and moved its rate off the line rate
    before = _received(vf, keys)
    vf.run_until(120_000)
    got = [b - a for a, b in zip(before, _received(vf, keys), strict=True)]
    rates = [g * 8 / 40e-3 for g in got]  # goodput over the 40 ms window
    assert min(rates) >= 0.8 * max(rates), f"unfair share: {rates}"
    assert sum(rates) >= 0.8 * LINE, f"link underused: {rates}"
    assert vf.port_stats()[UPLINK].queue_percentile(0.99) <= 20
    assert sum(d.get("queue_full", 0) for d in vf.drops().values()) == 0
    vf.run_until_idle(max_us=10**7)
    assert _received(vf, keys) == [3_000_000, 3_000_000]


def test_dcqcn_cnps_from_ecn_marks_cut_the_rate(build: Build) -> None:
    vf, ctl = build("dcqcn")
    keys = _two_flows_on_one_link(vf, ctl, 2_000_000)
    vf.run_until(60_000)
    stats = vf.flow_stats()
    assert vf.port_stats()[UPLINK].ce_packets > 0  # ice.p4's ECN marking on the shared uplink
    for host, key in zip(("h1", "h2"), keys, strict=True):
        st = stats[key]
        assert st.ecn_marks > 0 and st.cnps_sent > 0  # the receiver turned marks into CNPs
        assert st.cnps_received == st.cnps_sent  # all of them reached the sender
        control = vf.host(host).agent.flows[key].control
        assert isinstance(control, Dcqcn)
        assert control.decreases > 0
        assert control.rate_bps() < LINE
    # CNPs at most one per flow per interval (50 us scaled to 100 Mbit/s = 20 ms).
    assert all(stats[k].cnps_sent <= 1 + 60_000 // 20_000 for k in keys)


@pytest.mark.parametrize("kind", ["ice", "dcqcn"])
def test_caps_are_obeyed(build: Build, kind: str) -> None:
    vf, _ = build(kind)
    key = vf.open_flow("h1", "h3")
    cap = 30e6
    vf.apply_caps({key: cap})
    vf.post(key, 400_000, tag=1)
    agent = vf.host("h1").agent
    for t in range(5_000, 100_001, 5_000):
        vf.run_until(t)
        assert agent.rate_bps(key) <= cap
    vf.run_until_idle(max_us=10**7)
    st = vf.flow_stats()[key]
    frame = vf.host("h1").endpoint.frame_bytes
    payload_share = 1024 / (frame - 4)  # payload bytes per data frame on the wire
    goodput = st.goodput_bps()
    assert goodput <= cap * payload_share * 1.01
    assert goodput >= cap * payload_share * 0.95
    # Released: the flow runs at its own rate again.
    vf.apply_caps({})
    assert agent.flows[key].cap_bps is None


def test_a_flow_reported_with_its_real_key_moves_onto_its_planned_path(build: Build) -> None:
    from icefabric.experiment.linkdemo import interleaved_hosts, ring_job
    from icefabric.traffic.packets import PATH_KIND_FLOWLET, PATH_KIND_PLANNED

    vf, ctl = build("ice")
    ctl.add_job(ring_job(interleaved_hosts(ctl.topo), channels=2))
    row = next(r for r in ctl.paths() if r["src"] == "h1")
    assert row["key_source"] == "stand-in"
    ids = {s.name: s.switch_id for s in ctl.spec.switches}
    planned = tuple(ids[n] for n in row["path"] if n in ids)  # the path lists hosts too
    key = vf.open_flow("h1", row["dst"], job=row["job"], flow_id=row["flow"])
    assert (key.udp_sport, key.dst_qp) != (
        row["key"]["udp_sport"],
        row["key"]["dst_qp"],
    )  # the NIC chose
    vf.post(key, 2_000_000, tag=1)
    vf.run_until(20_000)
    st = vf.flow_stats()[key]
    # Before the report: the real key matches no flow_path entry: flowlet path, no planned tag.
    assert st.path_kind == PATH_KIND_FLOWLET
    # The agent reports the real key (what the agent channel carries); the controller installs it.
    with ctl.lock:
        changed: list[str] = []
        for name, host in vf.hosts.items():
            changed += ctl.agents.flows.update(
                name, host.agent.flow_reports(), ctl.flows, lambda h: ctl.spec.host(h).address
            )
        assert changed == [row["flow"]]
        assert ctl.agents.install_keys("test", len(changed)) > 0
    assert next(r for r in ctl.paths() if r["flow"] == row["flow"])["key_source"] == "agent"
    vf.run_until(40_000)
    st = vf.flow_stats()[key]
    assert st.path_kind == PATH_KIND_PLANNED
    assert st.path_tag == row["tag"]
    assert st.path_switches == planned  # INT records: the switches of the planned path
    vf.run_until_idle(max_us=10**7)
    assert vf.flow_stats()[key].bytes_received == 2_000_000
