"""Connections striped over several QPs: E-ECMP's k QPs and per-packet spraying.

``stripe(w, k)`` turns every row of a workload into ``k`` rows, one per QP of the connection:
each carries ``1/k`` of the bytes (a message striped over the QPs), has its own flow id
(``<flow>/qp<j>``) and so its own UDP source port and QP number (``Flow.entropy_sport`` /
``entropy_qp``: what ice.p4 hashes), and waits for the same stripe of its ring / tree
predecessors (a stripe forwards what the same stripe delivered; the slack unit shrinks by k).

* **E-ECMP** (``eecmp`` modes, Meta): ECMP routes each QP by ice.p4's hash of its own key.
* **Spraying** (``spray`` routing, Spectrum-X / Ultra Ethernet): the first switch sends
  consecutive packets of a connection over its uplinks in turn; in the fluid model stripe j of
  ``k`` takes the path of bucket ``j * PATH_BUCKETS // k`` of the connection's ECMP buckets sorted
  by path (the controller spreads the buckets over the live candidates in proportion to their rate), so a
  connection's bytes are spread evenly over every path, and the receiver reorders perfectly (the
  message is complete when every stripe is). Each stripe keeps its own rate-control state (a
  per-path window, as UEC's multipath transport does); ``k`` is the most live candidate paths
  between any two leaves, at most ``MAX_SPRAY_STRIPES``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from icefabric.control.topology import Topology
from icefabric.p4src import ice_p4 as n
from icefabric.sim.workload import Workload

MAX_SPRAY_STRIPES = 16


def stripe(w: Workload, k: int) -> Workload:
    """``w`` with every connection striped over ``k`` QPs (see the module docstring)."""
    if k < 1:
        raise ValueError(f"stripes: expected >= 1, got {k}")
    if k == 1:
        return w
    if w.windows:
        raise ValueError("striped QPs: the windowed all-to-all is not modelled (give no window)")
    if w.stripes != 1:
        raise ValueError("striped QPs: the workload is striped already")
    f0 = len(w)
    rows = np.repeat(np.arange(f0), k)
    j = np.tile(np.arange(k), f0)
    flows = tuple(
        replace(
            f,
            flow_id=f"{f.flow_id}/qp{q}",
            bytes=f.bytes / k,
            udp_sport=None,  # each QP its own source port and QP number (stand-ins by id)
            qp=None,
        )
        for f in w.flows
        for q in range(k)
    )
    pred = np.where(w.pred[rows] >= 0, w.pred[rows] * k + j[:, None], -1)
    return replace(
        w,
        flows=flows,
        group=w.group[rows],
        size=w.size[rows] / k,
        pred=pred,
        chunk=w.chunk[rows] / k,
        lead=w.lead[rows],
        stripe=j,
        stripes=k,
        unplanned=None if w.unplanned is None else w.unplanned[rows],
    )


def spray_stripes(topo: Topology, *, failures: int = 0) -> int:
    """Stripes a sprayed connection needs: the most live candidate paths P between two leaves
    (at most ``MAX_SPRAY_STRIPES``); with ``failures`` links to lose mid-run, P (P - 1) (at
    most ice.p4's buckets) so the stripes still spread evenly over the P - 1 paths left."""
    most = 1
    for a, b in topo.leaf_pairs():
        most = max(most, len(topo.candidate_paths(a, b)))
    if failures and most > 1:
        return min(most * (most - 1), n.PATH_BUCKETS)
    return min(most, MAX_SPRAY_STRIPES, n.PATH_BUCKETS)
