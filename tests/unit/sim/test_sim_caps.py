"""The simulator's controller (sim/caps.py): the start table of unplanned rows, by hand and in
a run where a planned flow's cap fills the uplink an unplanned flow is hashed onto."""

from __future__ import annotations

import numpy as np

from icefabric.control.ccl.demand import Flow
from icefabric.control.ccl.job import parse_job
from icefabric.control.topology import Topology
from icefabric.sim.caps import UnplannedStarts
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import Simulator
from icefabric.sim.scenarios import with_background
from icefabric.sim.workload import workload_from_jobs
from icefabric.topo.generators import leaf_spine

G = 1e9


def flow(k: int, src: str, dst: str, nbytes: float, job: str = "t") -> Flow:
    """A flow of ``job`` (named f<k>, or bg<k> for the unplanned job "background")."""
    name = f"bg{k}" if job == "background" else f"f{k}"
    ends = {"src_host": src, "dst_host": dst, "src_rank": k, "dst_rank": 100 + k}
    return Flow(flow_id=name, job=job, phase="p", channel=0, bytes=nbytes, **ends)


def _unplanned(k: int, src: str, dst: str, nbytes: float) -> Flow:
    return flow(k, src, dst, nbytes, job="background")


def test_start_rates_are_the_smallest_residual_over_uplink_and_candidates() -> None:
    topo = Topology(leaf_spine(leaves=2, spines=2, hosts_per_leaf=2))
    flows = [
        flow(0, "h1", "h3", 1e6),
        _unplanned(1, "h2", "h4", 1e6),
        _unplanned(2, "h4", "h2", 1e6),
    ]
    st = UnplannedStarts(topo, flows, np.array([False, True, True]))
    assert st.rows.tolist() == [1, 2]
    cap = topo.capacity * 8.0
    alloc = np.zeros_like(cap)
    (up,) = topo.links_between("leaf1", "spine2")
    alloc[up] = 70 * G  # h1 -> h3's cap on one of leaf1's uplinks
    alloc[topo.host_uplink("h4")] = 90 * G
    rates = st.rates(cap, alloc)
    # h2 -> h4 may be hashed onto leaf1>spine2: 30 G; h4 -> h2: h4's own NIC leaves 10 G
    assert rates.tolist() == [30 * G, 10 * G]


def test_an_unplanned_flow_starts_under_the_cap_that_fills_its_uplink() -> None:
    spec = leaf_spine(leaves=2, spines=1, hosts_per_leaf=2, uplink_rate_gbps=100.0)
    job = parse_job(
        {
            "name": "t",
            "hosts": ["h1", "h3"],
            "phases": [
                {"name": "p", "collective": "send-recv", "pairs": [[0, 1]], "message_bytes": 20e6}
            ],
        }
    )
    w = with_background(workload_from_jobs([job]), [_unplanned(1, "h2", "h4", 20e6)])
    out = {}
    for starts in (True, False):
        cfg = SimConfig(routing="ice", control="ice", starts=starts, seed=1)
        out[starts] = Simulator(Topology(spec), w, cfg).run().to_dict()
    on, off = out[True], out[False]
    # without the table the unplanned flow joins at the line rate: leaf1's uplink queues
    assert off["queue_max_bytes"] > 0
    assert on["queue_max_bytes"] < 0.5 * off["queue_max_bytes"]
