"""The simulated fabric: directed links from the topology spec and every flow's path on them.

Links are the controller's directed links (``control/topology.py``: ids, rates, host links) plus
one pad link (id ``n_links``) of infinite capacity that fills unused path positions.

Paths are *aligned by tier*: a path host -> leaf -> ... -> leaf -> host of 2t + 2 links puts its
first t + 1 links (host uplink and the up links) at positions 0..t and its last t + 1 links at
the end of a row of ``2 * (tiers + 1)`` positions. In a Clos every directed link then sits at one
position for every flow (a leaf->spine link is always position 1), so the simulator serves the
positions in order, each link once per step.

Routes (never copied, always imported): ``ecmp`` is ice.p4's ECMP (``EcmpModel``: the flows'
keys hashed into the controller's buckets), ``ice`` the planner's paths (``Planner``),
``flowlet`` ice.p4's flowlet switching (a new bucket drawn when a flow resumes after an idle gap,
over the same buckets ECMP uses).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.demand import Demand, Flow
from icefabric.control.planner.ecmp import EcmpModel
from icefabric.control.planner.planner import DEFAULT_WORK_BUDGET, Planner
from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class Routes:
    """Every flow's aligned path ([F, H] link ids, pad where unused) and what chose it."""

    path: np.ndarray
    routing: str
    # flowlet routing: per flow its 64 bucket path ids and the path table (aligned)
    bucket_table: np.ndarray | None = None
    aligned_table: np.ndarray | None = None


class SimNetwork:
    """Link arrays of one topology for the fluid model."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.n_links = topo.n_links
        self.pad = self.n_links
        self.cap_bps = np.append(topo.capacity * 8.0, np.inf)
        self.cap_bps.flags.writeable = False
        delay = np.zeros(self.n_links + 1)
        spec = topo.spec
        for i, ln in enumerate(spec.links):
            delay[2 * i] = delay[2 * i + 1] = spec.link_delay(ln)
        base = 2 * len(spec.links)
        delay[base : self.n_links] = spec.defaults.link_delay_us
        self.delay_us = delay
        self.is_fabric = np.array([ln.kind == "fabric" for ln in topo.links] + [False])
        tiers = [s.tier for s in spec.switches]
        self.tiers = max(tiers) + 1 if tiers else 1
        self.width = 2 * self.tiers
        self.host_of_link = np.full(self.n_links + 1, -1, dtype=np.int64)
        for j in range(len(spec.hosts)):
            self.host_of_link[base + 2 * j] = j

    def align(self, full: Sequence[int] | np.ndarray) -> np.ndarray:
        """One host-to-host path (link ids) as an aligned row of ``width`` positions."""
        links = [int(x) for x in full if int(x) != self.pad]
        row = np.full(self.width, self.pad, dtype=np.int64)
        k = len(links)
        if k % 2 or k > self.width:
            raise ValueError(f"path of {k} links does not fit a {self.tiers}-tier Clos")
        half = k // 2
        row[:half] = links[:half]
        row[self.width - half :] = links[half:]
        return row

    def host_path(self, state: PlanState, i: int, fabric: Sequence[int] | np.ndarray) -> np.ndarray:
        """Row ``i``'s aligned path: its host uplink, ``fabric`` links, its host downlink."""
        return self.align(
            [int(state.host_up[i]), *[int(x) for x in fabric], int(state.host_down[i])]
        )

    def host_paths(
        self, state: PlanState, rows: np.ndarray, fabric: Sequence[Sequence[int]], which: np.ndarray
    ) -> np.ndarray:
        """``host_path`` of every row of ``rows`` with the fabric links ``fabric[which[j]]`` for
        ``rows[j]``: each distinct fabric path is aligned once (a row's host links always take
        the first and the last position), the same rows as one ``host_path`` per row."""
        tmpl = np.empty((len(fabric), self.width), dtype=np.int64)
        for k, f in enumerate(fabric):  # -1 and -2 hold the host links' places (ids are >= 0)
            tmpl[k] = self.align([-1, *[int(x) for x in f], -2])
        out = tmpl[np.asarray(which, dtype=np.int64)]
        out[:, 0] = state.host_up[rows]
        out[:, self.width - 1] = state.host_down[rows]
        return out

    def base_rtt_us(self, path: np.ndarray, mtu_bytes: int, switch_latency_us: float) -> float:
        """The longest round trip over ``path`` rows: propagation, one packet's serialisation
        and ``switch_latency_us`` per switch, both ways (the ICE algorithm's T)."""
        if path.size == 0:
            return 1.0
        real = path != self.pad
        prop = np.where(real, self.delay_us[path], 0.0).sum(axis=1)
        ser = np.where(real, mtu_bytes * 8.0 / self.cap_bps[path] * 1e6, 0.0).sum(axis=1)
        switches = np.maximum(real.sum(axis=1) - 1, 0) * switch_latency_us
        return float(max((2 * (prop + ser + switches)).max(), 1.0))


def route(
    net: SimNetwork,
    flows: Sequence[Flow],
    routing: str,
    *,
    plan_work_budget: int = DEFAULT_WORK_BUDGET,
    stripe: np.ndarray | None = None,
    stripes: int = 1,
    unplanned: np.ndarray | None = None,
) -> tuple[Routes, PlanState]:
    """Paths of ``flows`` under ``routing`` (ecmp / ice / flowlet / spray); also the plan state.

    ``spray``: row i takes bucket ``stripe[i] * PATH_BUCKETS // stripes`` of its ECMP buckets
    sorted by path (``stripes.py``). ``unplanned`` rows (traffic the controller does not know) take ice.p4's
    fallback under ``ice`` routing: the hash of their key (a flowlet of a flow that never pauses
    keeps its first bucket).
    """
    if routing not in ("ecmp", "ice", "flowlet", "spray"):
        raise ValueError(f"routing: expected ecmp, ice, flowlet or spray, got {routing!r}")
    if routing == "ice" and unplanned is not None and unplanned.any():
        planned_rows = np.flatnonzero(~unplanned)
        other_rows = np.flatnonzero(unplanned)
        sub, state = route(
            net, [flows[i] for i in planned_rows.tolist()], "ice", plan_work_budget=plan_work_budget
        )
        bg, _ = route(net, [flows[i] for i in other_rows.tolist()], "ecmp")
        path = np.zeros((len(flows), net.width), dtype=np.int64)
        path[planned_rows] = sub.path
        path[other_rows] = bg.path
        return Routes(path=path, routing=routing), state
    topo = net.topo
    if routing == "ice":
        # counted repair steps, not the wall clock: the same seed gives the same paths under load
        planner = Planner(
            topo, method="auto" if len(flows) <= 64 else "heuristic", work_budget=plan_work_budget
        )
        planner.add(Demand(tuple(flows)))
        state = planner.state
        if state.unrouted:
            fid, why = next(iter(state.unrouted.items()))
            raise ValueError(f"flow {fid}: {why}")
        n_f = len(state.flows)
        uniq, which = np.unique(state.paths[:n_f], axis=0, return_inverse=True)
        path = net.host_paths(state, np.arange(n_f), list(uniq), which.reshape(-1))
        return Routes(path=path, routing=routing), state
    state = PlanState(topo)
    state.add_flows(list(flows))
    model = EcmpModel(topo)
    rows = np.arange(len(state.flows))
    if rows.size == 0:
        return Routes(path=np.zeros((0, net.width), dtype=np.int64), routing=routing), state
    table, parr = model.bucket_paths(state, rows)
    if (table == parr.shape[0] - 1).any():
        bad = int(np.flatnonzero((table == parr.shape[0] - 1).any(axis=1))[0])
        raise ValueError(f"flow {state.flows[bad].flow_id}: no live path between the leaves")
    if routing == "spray":
        if stripe is None:
            raise ValueError("spray routing needs striped connections: use the mode spray+hpcc")
        # evenly spaced picks from the row's buckets in path order: each path gets the share
        # of the stripes the controller gave it of the buckets (in proportion to its rate)
        bucket = (np.asarray(stripe, dtype=np.int64) * n.PATH_BUCKETS) // max(stripes, 1)
        pid = np.sort(table[rows], axis=1)[rows, bucket]
    else:
        pid = table[rows, model.row_buckets(state, rows)]
    uniq, which = np.unique(pid, return_inverse=True)
    path = net.host_paths(state, rows, [parr[p] for p in uniq.tolist()], which.reshape(-1))
    out = Routes(path=path, routing=routing)
    if routing == "flowlet":
        out.bucket_table = table
        out.aligned_table = parr
    return out, state
