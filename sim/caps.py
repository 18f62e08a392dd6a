"""The controller in the simulator: max-min caps over the unfinished planned rows, computed
every ``cap_interval_us`` and reaching the senders ``cap_delay_us`` later (the first ones at once
with ``caps_ahead``: the job was known before it started), each set with its start table, the
rate an unplanned row that has not sent yet starts at (control/congestion/starts.py: the
smallest residual the caps leave over its host's uplink and every live candidate path between
its leaves)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from icefabric.control.ccl.demand import Flow
from icefabric.control.congestion import max_min_fill
from icefabric.control.congestion.starts import pair_residuals
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig

#: rows of unplanned flows and the rates they start at
StartTable = tuple[np.ndarray, np.ndarray]


class UnplannedStarts:
    """The start rates of a workload's unplanned rows for a given allocation."""

    def __init__(self, topo: Topology, flows: Sequence[Flow], unplanned: np.ndarray) -> None:
        self.topo = topo
        self.rows = np.flatnonzero(unplanned)
        picked = [flows[i] for i in self.rows.tolist()]
        self.uplink = np.array([topo.host_uplink(f.src_host) for f in picked], dtype=np.int64)
        self.pairs = [(topo.leaf_of[f.src_host], topo.leaf_of[f.dst_host]) for f in picked]

    def rates(self, capacity_bps: np.ndarray, allocated_bps: np.ndarray) -> np.ndarray:
        """Per row of :attr:`rows`: its start rate in bit/s when the caps put
        ``allocated_bps`` on links of ``capacity_bps`` (both per directed link)."""
        res = np.maximum(capacity_bps - allocated_bps, 0.0)
        pair = pair_residuals(self.topo, res, self.pairs)
        fabric = np.array([pair[p] for p in self.pairs], dtype=np.float64)
        out: np.ndarray = np.minimum(res[self.uplink], fabric)
        return out


class CapSchedule:
    """Cap sets (and start tables) computed and in flight to the senders."""

    def __init__(
        self,
        cfg: SimConfig,
        capacity_bps: np.ndarray,
        starts: UnplannedStarts | None,
    ) -> None:
        self.cfg = cfg
        self.capacity = capacity_bps  # per directed link (no pad), what caps may fill
        self.starts = starts
        self.next = 0.0
        self.first = cfg.caps_ahead
        self.queue: deque[tuple[float, np.ndarray, StartTable | None]] = deque()

    def compute(
        self, t: float, act: np.ndarray, paths: np.ndarray, pad: int, sent: np.ndarray, n_rows: int
    ) -> None:
        """At the cap interval: caps for the active planned rows ``act`` on ``paths`` (rows of
        link ids, ``pad`` for none), and the start table while an unplanned row has not sent."""
        if t < self.next:
            return
        self.next = t + self.cfg.cap_interval_us
        if not act.size:
            return
        ok = paths != pad
        fe = np.repeat(np.arange(act.size), ok.sum(axis=1))
        le = paths[ok]
        rates = max_min_fill(fe, le, self.capacity, act.size)
        caps = np.full(n_rows, np.inf)
        caps[act] = np.maximum(rates, 1.0)
        table = None
        if self.starts is not None and (sent[self.starts.rows] == 0).any():
            n = self.capacity.size
            alloc = np.bincount(le, rates[fe], minlength=n)[:n]
            table = (self.starts.rows, self.starts.rates(self.capacity, alloc))
        self.queue.append((t if self.first else t + self.cfg.cap_delay_us, caps, table))
        self.first = False

    def due(self, t: float) -> list[tuple[np.ndarray, StartTable | None]]:
        """The cap sets (with their start tables) that reach the senders by ``t``, in order."""
        out = []
        while self.queue and self.queue[0][0] <= t:
            _, caps, table = self.queue.popleft()
            out.append((caps, table))
        return out
