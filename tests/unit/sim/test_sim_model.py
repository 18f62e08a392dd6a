"""Checks of the fluid model against closed forms: fair share at one bottleneck, a ring all-reduce
at the non-blocking bound, two ECMP-colliding elephants at half rate."""

from __future__ import annotations

import numpy as np
import pytest

from icefabric.control.ccl.demand import Flow
from icefabric.control.ccl.job import JobSpec, parse_job
from icefabric.control.planner.ecmp import EcmpModel
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig, SimConfigError
from icefabric.sim.engine import Simulator
from icefabric.sim.workload import Collective, Workload, workload_from_jobs
from icefabric.topo.generators import leaf_spine

MB = 1_000_000


def flows_workload(flows: list[Flow]) -> Workload:
    """Independent flows, one collective (send-recv), all starting at t = 0."""
    return Workload(
        flows=tuple(flows),
        group=np.zeros(len(flows), dtype=np.int64),
        size=np.array([f.bytes for f in flows]),
        pred=np.full((len(flows), 1), -1, dtype=np.int64),
        chunk=np.array([f.bytes for f in flows]),
        lead=np.ones(len(flows)),
        collectives=(
            Collective(
                index=0,
                job="t",
                phase="p",
                iteration=0,
                collective="send-recv",
                algorithm="",
                ranks=2,
                channels=1,
                message_bytes=int(sum(f.bytes for f in flows)),
                after=(),
                delay_us=0.0,
            ),
        ),
    )


def flow(k: int, src: str, dst: str, nbytes: float, **kw: int) -> Flow:
    return Flow(
        flow_id=f"f{k}",
        job="t",
        phase="p",
        channel=0,
        src_host=src,
        dst_host=dst,
        src_rank=k,
        dst_rank=100 + k,
        bytes=nbytes,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("control", ["dcqcn", "ice", "none"])
def test_one_bottleneck_gives_the_fair_share(control: str) -> None:
    # four senders on leaf 1 into one receiver on leaf 2: its 100G downlink is the bottleneck
    spec = leaf_spine(leaves=2, spines=4, hosts_per_leaf=4, host_rate_gbps=100.0)
    topo = Topology(spec)
    hosts = [h.name for h in spec.hosts]
    flows = [flow(k, hosts[k], hosts[4], 20 * MB) for k in range(4)]
    cfg = SimConfig(routing="ice", control=control, caps=False, dt_us=1.0)
    res = Simulator(topo, flows_workload(flows), cfg).run()
    assert res.unfinished == 0
    # fair: every flow gets the same share (they finish together, within 3 %)
    fin = np.array(res.flow_finish_us)
    assert fin.max() <= fin.min() * 1.03
    # and the shares add up to the link: 4 x 20 MB over 100G is 6.4 ms when it never idles.
    # DCQCN's synchronised cuts (all four flows see the same queue, marked at enqueue so the
    # marks lag it, and react one RTT late) leave it idle a while: in this model 69 % busy with
    # the default thresholds (recorded in sim/README.md); ICE
    # aims at eta = 95 % of the link; with no control the queue keeps the link busy.
    ideal_us = 4 * 20 * MB * 8 / 100e9 * 1e6
    floor = {"dcqcn": 0.65, "ice": 0.94, "none": 0.99}[control]
    assert ideal_us / fin.max() >= floor
    assert fin.max() >= ideal_us * (1 - 1e-6)  # never faster than the link


def ring_job(hosts: list[str], message: int, channels: int) -> JobSpec:
    return parse_job(
        {
            "name": "ring",
            "ranks": [{"host": h} for h in hosts],
            "phases": [
                {
                    "name": "ar",
                    "collective": "all-reduce",
                    "algorithm": "ring",
                    "channels": channels,
                    "message_bytes": message,
                }
            ],
        }
    )


@pytest.mark.parametrize("control", ["none", "dcqcn"])
def test_ring_all_reduce_on_a_non_blocking_fabric_meets_the_bound(control: str) -> None:
    # (ICE's end-side control aims at eta = 95 % of every link, so it stays ~3 % off the
    # bound by design; the model itself is checked without it and with DCQCN, which sees no
    # marks on a planned non-blocking fabric)
    spec = leaf_spine(leaves=4, spines=4, hosts_per_leaf=4, host_rate_gbps=100.0)
    topo = Topology(spec)
    hosts = [h.name for h in spec.hosts]
    rng = np.random.default_rng(3)
    order = [hosts[i] for i in rng.permutation(len(hosts))]
    size = 64 << 20
    w = workload_from_jobs([ring_job(order, size, 4)])
    cfg = SimConfig(routing="ice", control=control, dt_us=1.0)
    res = Simulator(topo, w, cfg).run()
    n = len(hosts)
    bound_us = 2 * (n - 1) / n * size * 8 / 100e9 * 1e6
    c = res.collectives[0]
    assert res.unfinished == 0
    assert c.time_us == pytest.approx(bound_us, rel=0.02)
    assert c.busbw_over_bound == pytest.approx(1.0, rel=0.02)


def colliding_pair(topo: Topology) -> tuple[Flow, Flow]:
    """Two flows from different hosts of leaf 1 to different hosts of leaf 2 that ice.p4's
    ECMP puts on the same spine (found by the model, so the switches would do the same)."""
    spec = topo.spec
    l1 = [h.name for h in spec.hosts if h.leaf == topo.leaves[0]]
    l2 = [h.name for h in spec.hosts if h.leaf == topo.leaves[1]]
    model = EcmpModel(topo)
    first = flow(0, l1[0], l2[0], 40 * MB, udp_sport=50000, qp=0x100)
    want = model.flow_path_index(first)
    for sport in range(50001, 50100):
        other = flow(1, l1[1], l2[1], 40 * MB, udp_sport=sport, qp=0x101)
        if model.flow_path_index(other) == want:
            return first, other
    raise AssertionError("no colliding source port in 99 tries")


def test_two_ecmp_colliding_elephants_halve_their_rate() -> None:
    spec = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, host_rate_gbps=100.0)
    topo = Topology(spec)
    assert spec.link_rate(spec.links[0]) == pytest.approx(100.0)  # 1:1, 100G uplinks
    a, b = colliding_pair(topo)
    w = flows_workload([a, b])
    alone_us = 40 * MB * 8 / 100e9 * 1e6
    ecmp = Simulator(topo, w, SimConfig(routing="ecmp", control="none", dt_us=1.0)).run()
    assert ecmp.unfinished == 0
    # both share one 100G uplink: each at 50G, so twice as long as alone
    assert ecmp.completion_us == pytest.approx(2 * alone_us, rel=0.05)
    # DCQCN on the shared uplink is never faster than its half (measured 1.49x the halved
    # time: the marks of the queue the two line-rate starts built keep cutting while it drains,
    # to 6.25G delivered each, and additive increase takes ~8 ms back; sim/README.md)
    dcqcn = Simulator(topo, w, SimConfig(routing="ecmp", control="dcqcn", dt_us=1.0)).run()
    assert dcqcn.unfinished == 0 and dcqcn.completion_us >= 2 * alone_us
    planned = Simulator(topo, w, SimConfig(routing="ice", control="dcqcn", dt_us=1.0)).run()
    assert planned.completion_us == pytest.approx(alone_us, rel=0.05)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(SimConfigError, match="routing"):
        SimConfig(routing="valiant")
    with pytest.raises(SimConfigError, match="dt_us"):
        SimConfig(dt_us=0.0)


def test_tree_all_reduce_broadcasts_only_what_was_reduced() -> None:
    spec = leaf_spine(leaves=4, spines=2, hosts_per_leaf=2, host_rate_gbps=100.0)
    topo = Topology(spec)
    hosts = [h.name for h in spec.hosts]
    job = parse_job(
        {
            "name": "tree",
            "hosts": hosts,
            "phases": [
                {
                    "name": "ar",
                    "collective": "all-reduce",
                    "algorithm": "tree",
                    "channels": 1,
                    "message_bytes": 16 << 20,
                }
            ],
        }
    )
    w = workload_from_jobs([job])
    assert w.pred.shape[1] == 2  # an interior rank waits for both children
    # caps without a control delay: stale caps would let a waiting flow run ahead of its
    # predecessor by up to a slice (the dependency, not the caps, is what this checks)
    cfg = SimConfig(routing="ice", control="none", dt_us=1.0, cap_delay_us=0.0)
    res = Simulator(topo, w, cfg).run()
    assert res.unfinished == 0
    fin = np.array(res.flow_finish_us)
    root = 0  # default_tree puts the phase's first rank at the root of channel 0
    into_root = [k for k, f in enumerate(w.flows) if f.dst_rank == root]
    from_root = [k for k, f in enumerate(w.flows) if f.src_rank == root]
    assert into_root and from_root
    # the root broadcasts only what it has reduced: its sends end after its receives
    assert fin[from_root].min() >= fin[into_root].max() - 1.0
    # and every flow that waits finishes no earlier than what it waits for
    for k in range(len(w)):
        for p in w.pred[k]:
            if p >= 0:
                assert fin[k] >= fin[p] - 1.0


@pytest.mark.parametrize("delay_us", [50.0, 200.0])
def test_caps_reach_the_senders_one_control_delay_after_they_are_computed(delay_us: float) -> None:
    # a job learned as it starts: four hosts of leaf 1 send to four of leaf 2 over one 100G uplink; with no end-side
    # control only the caps (25G each) stop the uplink's queue: until they arrive it grows at
    # 4 x 100G - 100G, so it peaks at 300 Gbit/s x the control delay
    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=4, uplink_rate_gbps=100.0)
    hosts = [h.name for h in spec.hosts]
    flows = [flow(k, hosts[k], hosts[4 + k], 20 * MB) for k in range(4)]

    def peak(d: float, ahead: bool = False) -> float:
        cfg = SimConfig(
            routing="ice", control="none", caps=True, dt_us=1.0, cap_delay_us=d, caps_ahead=ahead
        )
        res = Simulator(Topology(spec), flows_workload(flows), cfg).run()
        assert res.unfinished == 0
        return float(res.to_dict()["queue_max_bytes"])

    assert peak(0.0) <= 1.0  # caps computed before the first step's injection: no queue
    assert peak(delay_us) == pytest.approx(300e9 / 8 * delay_us * 1e-6, rel=1e-3)
    # a job known before it starts has its first caps in place at once, before its first step
    # (computed after it, the first step ran at the line rate: a 37.5 KB queue)
    assert peak(delay_us, ahead=True) <= 1.0
    with pytest.raises(SimConfigError, match="cap_delay_us"):
        SimConfig(cap_delay_us=-1.0)


def test_wire_overhead_takes_its_share_of_the_fabric_links_only() -> None:
    # four flows of 20 MB over one 100G uplink: 6.4 ms of payload; with ICE's bytes at 25 % of
    # the payload the uplink carries 80 % payload (8 ms); a host link alone is not slowed
    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=4, uplink_rate_gbps=100.0)
    hosts = [h.name for h in spec.hosts]
    flows = [flow(k, hosts[k], hosts[4 + k], 20 * MB) for k in range(4)]

    def finish(o: float, fl: list[Flow]) -> float:
        cfg = SimConfig(routing="ice", control="none", caps=False, dt_us=1.0, wire_overhead=o)
        res = Simulator(Topology(spec), flows_workload(fl), cfg).run()
        assert res.unfinished == 0
        return float(np.nanmax(res.flow_finish_us))

    assert finish(0.25, flows) == pytest.approx(1.25 * finish(0.0, flows), rel=0.01)
    same_leaf = [flow(0, hosts[0], hosts[1], 20 * MB)]
    assert finish(0.25, same_leaf) == pytest.approx(finish(0.0, same_leaf))
    with pytest.raises(SimConfigError, match="wire_overhead"):
        SimConfig(wire_overhead=1.0)


def test_the_next_cnp_comes_half_a_packet_after_the_interval() -> None:
    """A receiver answers the first marked packet once its CNP interval is over. The fluid
    model does not know where in its packet a flow stands when the interval ends, so it counts
    the expected half packet already marked (``CNP_PHASE``): with every packet marked, the next
    CNP comes half a packet's time after the interval, the first one half a packet in. From 0
    it came a whole packet late, and at packet level a flow cut every 21-22 ms escaped DCQCN's
    22 ms increase timer less often than the simulator's (experiment/README.md, all-to-all)."""
    from icefabric.sim.fluid import CNP_PHASE, FluidRun

    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, host_rate_gbps=100.0)
    hosts = [h.name for h in spec.hosts]
    cfg = SimConfig(routing="ecmp", control="dcqcn", dt_us=1.0, cnp_interval_us=50.0)
    sim = Simulator(Topology(spec), flows_workload([flow(0, hosts[0], hosts[1], 20 * MB)]), cfg)
    st = FluidRun(sim)
    assert CNP_PHASE == 0.5 and st.mark_acc.tolist() == [0.5]
    # every link's queue far above Kmax: every byte marked; the flow delivers a quarter of a
    # packet per 1 us step, so a packet takes 4 steps and half a packet 2
    deep = np.full(st.nl, 1e12)
    st.enq = type("Deep", (), {"update": staticmethod(lambda q, tx, kmin: deep)})()
    x = np.array([cfg.mtu_bytes / 4])
    cnp_at = []
    for _ in range(200):
        st.t += 1.0
        before = st.cnps
        st.mark(x, x)
        if st.cnps > before:
            cnp_at.append(st.t)
    # the first after half a packet (2 steps); then the step that ends the interval (50 us
    # after the last CNP) and the next deliver half a packet: every 51 us (from 0: 53)
    assert cnp_at[:4] == [2.0, 53.0, 104.0, 155.0]
