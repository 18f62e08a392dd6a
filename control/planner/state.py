"""The planner's working state: flows, their chosen candidate paths and per-link loads.

Loads are in seconds of line rate (bytes / link capacity in bytes/s) so links of different
rates compare directly; the objective is the maximum over all directed links (host links
included), then the total. Paths are rows of ``Topology.candidate_array``; a flow's choice is
the stable row index (the path tag). The fabric part of every flow's path sits in one padded
matrix so "which flows cross link e" is one vectorised comparison.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from icefabric.control.ccl.demand import Flow
from icefabric.control.topology import Topology, TopologyError

log = logging.getLogger(__name__)

MAX_HOPS = 8
_CACHE = 8192


class PlanState:
    """Mutable assignment of flows to candidate paths with incremental load bookkeeping."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        n = topo.n_links
        self.pad = n  # a dummy link id with no load and no capacity cost
        self.invcap = np.zeros(n + 1)
        self.invcap[:n] = 1.0 / topo.capacity
        self.load = np.zeros(n + 1)
        self.flows: list[Flow] = []
        self.index: dict[str, int] = {}
        self.size = np.zeros(0)
        self.src_leaf = np.zeros(0, dtype=np.int64)
        self.dst_leaf = np.zeros(0, dtype=np.int64)
        self.host_up = np.zeros(0, dtype=np.int64)
        self.host_down = np.zeros(0, dtype=np.int64)
        self.choice = np.zeros(0, dtype=np.int64)  # -1: unplaced / unroutable
        self.paths = np.zeros((0, MAX_HOPS), dtype=np.int64)  # fabric links, padded with pad
        self.alive = np.zeros(0, dtype=bool)  # False for removed rows
        self.unrouted: dict[str, str] = {}
        self._leaf_ids = {name: i for i, name in enumerate(topo.leaves)}
        self._cand: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.width = 0  # the longest candidate seen: columns of ``paths`` beyond it are all pad
        self._halves: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    # ------------------------------------------------------------------ flows

    def add_flows(self, flows: Sequence[Flow]) -> np.ndarray:
        """Append flows (unplaced, host links loaded); returns their row numbers."""
        rows: list[int] = []
        sl, dl, hu, hd, sz = [], [], [], [], []
        new_ids: dict[str, int] = {}
        hosts: dict[str, tuple[int, int]] = {}  # host: (its uplink, its leaf's id), looked up once
        for f in flows:  # check everything before changing anything
            if f.flow_id in self.index or f.flow_id in new_ids:
                raise ValueError(f"flow {f.flow_id!r} is already planned")
            try:
                src = hosts.get(f.src_host)
                if src is None:
                    src = hosts[f.src_host] = self._host(f.src_host)
                dst = hosts.get(f.dst_host)
                if dst is None:
                    dst = hosts[f.dst_host] = self._host(f.dst_host)
            except TopologyError as e:
                raise TopologyError(f"flow {f.flow_id}: {e}") from None
            if not f.bytes >= 0:
                raise ValueError(f"flow {f.flow_id}: bytes must be >= 0, got {f.bytes}")
            new_ids[f.flow_id] = len(self.flows) + len(rows)
            rows.append(len(self.flows) + len(rows))
            sl.append(src[1])
            dl.append(dst[1])
            hu.append(src[0])
            hd.append(dst[0] + 1)  # Topology.host_downlink: the uplink's reverse
            sz.append(float(f.bytes))
        self.index.update(new_ids)
        self.flows.extend(flows)
        k = len(rows)
        self.size = np.concatenate([self.size, np.array(sz)])
        self.src_leaf = np.concatenate([self.src_leaf, np.array(sl, dtype=np.int64)])
        self.dst_leaf = np.concatenate([self.dst_leaf, np.array(dl, dtype=np.int64)])
        self.host_up = np.concatenate([self.host_up, np.array(hu, dtype=np.int64)])
        self.host_down = np.concatenate([self.host_down, np.array(hd, dtype=np.int64)])
        self.choice = np.concatenate([self.choice, np.full(k, -1, dtype=np.int64)])
        self.paths = np.concatenate([self.paths, np.full((k, MAX_HOPS), self.pad, dtype=np.int64)])
        self.alive = np.concatenate([self.alive, np.ones(k, dtype=bool)])
        r = np.array(rows, dtype=np.int64)
        if k:
            np.add.at(self.load, self.host_up[r], self.size[r] * self.invcap[self.host_up[r]])
            np.add.at(self.load, self.host_down[r], self.size[r] * self.invcap[self.host_down[r]])
        return r

    def _host(self, host: str) -> tuple[int, int]:
        """A host's uplink and its leaf's id (TopologyError for a host not in the topology)."""
        t = self.topo
        return t.host_uplink(host), self._leaf_ids[t.leaf_of[host]]

    def remove_rows(self, rows: np.ndarray) -> None:
        """Take flows out of the plan and their load off every link."""
        for i in rows.tolist():
            if not self.alive[i]:
                continue
            self._unplace(i)
            s = self.size[i]
            self.load[self.host_up[i]] -= s * self.invcap[self.host_up[i]]
            self.load[self.host_down[i]] -= s * self.invcap[self.host_down[i]]
            self.alive[i] = False
            self.unrouted.pop(self.flows[i].flow_id, None)
            del self.index[self.flows[i].flow_id]
        np.maximum(self.load, 0.0, out=self.load)

    def rows_on(self, link: int) -> np.ndarray:
        """Rows of live, placed flows whose fabric path crosses directed link ``link``."""
        w = max(self.width, 1)
        hit = self.paths[:, 0] == link
        for j in range(1, w):
            hit |= self.paths[:, j] == link
        return np.flatnonzero(hit & self.alive)

    def compact(self) -> bool:
        """Drop removed rows when they are the majority (row numbers change); True if done."""
        dead = len(self.flows) - int(self.alive.sum())
        if dead == 0 or dead * 2 < len(self.flows):
            return False
        keep = np.flatnonzero(self.alive)
        self.flows = [self.flows[i] for i in keep.tolist()]
        for name in (
            "size",
            "src_leaf",
            "dst_leaf",
            "host_up",
            "host_down",
            "choice",
            "paths",
            "alive",
        ):
            setattr(self, name, getattr(self, name)[keep])
        self.index = {f.flow_id: k for k, f in enumerate(self.flows)}
        return True

    def live_rows(self) -> np.ndarray:
        """Rows of flows currently in the plan."""
        return np.nonzero(self.alive)[0]

    # ------------------------------------------------------------------ candidates

    def candidates(self, i: int) -> np.ndarray:
        """All candidate fabric paths of row ``i`` (failed included) as link ids [P, hops]."""
        return self.candidates_t(i)[0].T

    def candidates_t(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Row ``i``'s candidates transposed, [hops, P], and 1/capacity of their links [hops, P].

        Transposed so that "the most loaded link of every path" is a reduction over a few
        contiguous rows (several times faster than over the last axis of [P, hops]).
        """
        key = (int(self.src_leaf[i]), int(self.dst_leaf[i]))
        got = self._cand.get(key)
        if got is not None:
            self._cand.move_to_end(key)
            return got
        leaves = self.topo.leaves
        arr = self.topo.candidate_array(leaves[key[0]], leaves[key[1]])
        if arr.shape[1] > MAX_HOPS:
            raise TopologyError(f"paths of {arr.shape[1]} hops exceed the planner's {MAX_HOPS}")
        cand_t = np.ascontiguousarray(arr.T, dtype=np.int64)
        out = (cand_t, self.invcap.take(cand_t))
        self.width = max(self.width, cand_t.shape[0])
        self._cand[key] = out
        if len(self._cand) > _CACHE:
            self._cand.popitem(last=False)
        return out

    def halves_t(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Row ``i``'s candidates as two transposed halves with 1/capacity: (up [t, P], 1/cap,
        down [t, P], 1/cap), when candidate c is up[:, c] + down[:, c]; else None."""
        leaves = self.topo.leaves
        halves = self.topo.candidate_halves(
            leaves[int(self.src_leaf[i])], leaves[int(self.dst_leaf[i])]
        )
        if halves is None:
            return None
        up = self._half(halves[0])
        down = self._half(halves[1])
        return up[1], up[2], down[1], down[2]

    def _half(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = self._halves.get(id(arr))
        if got is None:  # keyed by identity: the topology keeps ``arr`` alive, so does this entry
            t = np.ascontiguousarray(arr.T, dtype=np.int64)
            got = (arr, t, self.invcap.take(t))
            self._halves[id(arr)] = got
            self.width = max(self.width, 2 * t.shape[0])
        return got

    def live_mask(self, cand: np.ndarray) -> np.ndarray:
        """Which candidate rows ([P, hops]) avoid every failed link."""
        return self.live_mask_t(cand.T)

    def live_mask_t(self, cand_t: np.ndarray) -> np.ndarray:
        """Which candidate columns ([hops, P]) avoid every failed link."""
        failed = self.topo.failed
        if not failed.any() or cand_t.shape[0] == 0:
            return np.ones(cand_t.shape[1], dtype=bool)
        f = np.concatenate([failed, [False]])
        live: np.ndarray = ~np.logical_or.reduce(f.take(cand_t), axis=0)
        return live

    # ------------------------------------------------------------------ placing

    def place(self, i: int, c: int, row: np.ndarray | None = None) -> None:
        """Put row ``i`` on candidate ``c`` (moving it if it was placed); ``row``: its links."""
        if self.choice[i] >= 0:
            self._unplace(i)
        if row is None:
            row = self.candidates_t(i)[0][:, c]
        self.paths[i] = self.pad
        self.paths[i, : row.shape[0]] = row
        self.choice[i] = c
        self.load[row] += self.size[i] * self.invcap[row]
        self.load[self.pad] = 0.0

    def _unplace(self, i: int) -> None:
        if self.choice[i] < 0:
            return
        row = self.paths[i]
        self.load[row] -= self.size[i] * self.invcap[row]
        self.load[self.pad] = 0.0
        self.paths[i] = self.pad
        self.choice[i] = -1

    def unplace(self, i: int) -> None:
        """Take row ``i`` off its path (it stays in the plan, unplaced)."""
        self._unplace(i)

    def full_path(self, i: int) -> list[int]:
        """Host uplink, fabric links, host downlink of row ``i``."""
        fab = [x for x in self.paths[i].tolist() if x != self.pad]
        return [int(self.host_up[i]), *fab, int(self.host_down[i])]

    def max_load(self) -> float:
        """The largest link load in seconds of line rate."""
        return float(self.load[: self.pad].max()) if self.pad else 0.0

    def recompute_load(self) -> np.ndarray:
        """Loads rebuilt from scratch from the current placement (for checks)."""
        load = np.zeros_like(self.load)
        rows = self.live_rows()
        if rows.size:
            s = self.size[rows]
            np.add.at(load, self.host_up[rows], s * self.invcap[self.host_up[rows]])
            np.add.at(load, self.host_down[rows], s * self.invcap[self.host_down[rows]])
            placed = rows[self.choice[rows] >= 0]
            p = self.paths[placed]
            np.add.at(load, p.ravel(), (self.size[placed][:, None] * self.invcap[p]).ravel())
        load[self.pad] = 0.0
        return load
