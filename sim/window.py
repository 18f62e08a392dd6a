"""Windowed all-to-all: NCCL-like rounds of shifted peers with a bounded window of peers in flight.

An all-to-all over n ranks has n (n - 1) rank pairs: 1 M at 1,024 GPUs, 16.8 M at 4,096, too many
to hold as flow rows. NCCL does not send to every peer at once either: its grouped send/recv
schedules rounds of a shifted pattern (round s: rank i sends to i + s and receives from i - s)
and works on a bounded number of rounds at a time (its p2p channels); a send moves only into a
receive the peer has posted. The model:

* every rank takes rounds s = 1 ... n - 1 in order into ``window`` slots; a round is done when
  its send is injected and its receive has arrived (a part whose peer is on the same host is done
  at once: NVLink, no network flow, as in ``demand.py``), which frees the slot for the next round;
* a round's send starts once the receiver has taken that round (its receive is posted), so no
  rank is sent more than ``window`` rounds ahead of its own progress;
* to keep the fluid step's granularity from idling the NIC, a send counts as injected and a
  receive as arrived when at most one step's worth is left; the send's flow keeps its row until
  its last bytes leave the fabric, so each slot has two rows (the next send takes the other one,
  waiting while that row still has bytes in flight);
* a new peer is a new queue pair: its row takes that pair's own path (ECMP: ice.p4's hash of the
  very key ``demand.py`` gives the pair, so every QP hashes separately; ICE: the planner's path)
  and fresh rate-control state (DCQCN and ICE start a new QP at line rate). The controller's
  water-filling caps leave these rows alone: a peer's flow lives for microseconds, far less than
  a cap interval; ICE's end-side control governs them;
* ICE's planner places each shift's flows beside those of the ``window - 1`` shifts before it
  (what is in flight together while ranks keep pace), with its greedy and no repair budget
  (repair over 16.8 M placements would take hours).

Rows: ``2 * window * n`` per channel instead of n (n - 1); the rank pairs, bytes and flow keys are
the same. On a non-blocking fabric the completion time is the all-at-once model's and the NIC
bound (tested within 1 %, with a window of at least the ranks per NIC: smaller windows idle the
NIC through rounds whose peers are local). A row's per-flow finish time is its last flow's.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.demand import Flow, flow_id, stand_in_qp, stand_in_sport
from icefabric.control.planner.ecmp import EcmpModel, crc32_rows, hash_inputs
from icefabric.control.planner.heuristic import greedy
from icefabric.control.planner.state import PlanState
from icefabric.p4src import ice_p4 as names
from icefabric.sim.network import SimNetwork
from icefabric.traffic.rate.vector import DcqcnArray, IceArray, RateObjects


@dataclass(slots=True, frozen=True, kw_only=True)
class A2aWindow:
    """One channel of one windowed all-to-all phase: its ranks and the rows it may use."""

    group: int  # the collective's index
    job: str
    phase: str
    channel: int
    ranks: tuple[int, ...]  # rank ids in phase order
    hosts: tuple[str, ...]  # each rank's host
    pair_bytes: float  # bytes from one rank to one peer
    window: int  # peers in flight per rank
    rows: np.ndarray  # [n, window, 2] workload rows: per slot, the current and the next flow

    @property
    def pairs(self) -> int:
        """Rank pairs on different hosts (the network flows of the all-to-all)."""
        n = len(self.hosts)
        _, per_host = np.unique(np.array(self.hosts), return_counts=True)
        return int(n * n - (per_host.astype(np.int64) ** 2).sum())

    @property
    def total_bytes(self) -> float:
        """Bytes the phase's channel puts on the network."""
        return self.pairs * self.pair_bytes


def align_rows(net: SimNetwork, up: np.ndarray, fabric: np.ndarray, down: np.ndarray) -> np.ndarray:
    """``SimNetwork.align`` for many paths: host uplinks [k], fabric links [k, H] (pad-filled
    from the end) and host downlinks [k] as aligned rows [k, width]."""
    pad = net.pad
    k = up.shape[0]
    width = net.width
    out = np.full((k, width), pad, dtype=np.int64)
    out[:, 0] = up
    out[:, width - 1] = down
    lengths = (fabric != pad).sum(axis=1) if fabric.size else np.zeros(k, dtype=np.int64)
    for lf in np.unique(lengths).tolist():
        if lf % 2 or lf + 2 > width:
            raise ValueError(f"path of {lf + 2} links does not fit a {net.tiers}-tier Clos")
        m = lengths == lf
        h = lf // 2
        out[m, 1 : 1 + h] = fabric[m, :h]
        out[m, width - 1 - h : width - 1] = fabric[m, h:lf]
    return out


class RoundPaths:
    """Aligned paths of every shift's flows (i -> i + s), computed when first needed."""

    def __init__(self, spec: A2aWindow, net: SimNetwork, routing: str) -> None:
        if routing not in ("ecmp", "ice"):
            raise ValueError(f"windowed all-to-all: routing {routing!r} is not modelled")
        topo = net.topo
        self.spec = spec
        self.net = net
        self.routing = routing
        self.n = len(spec.hosts)
        self.host_ids = np.unique(np.array(spec.hosts), return_inverse=True)[1]
        self.up = np.array([topo.host_uplink(h) for h in spec.hosts], dtype=np.int64)
        self.down = np.array([topo.host_downlink(h) for h in spec.hosts], dtype=np.int64)
        leaf_ids = {name: i for i, name in enumerate(topo.leaves)}
        self.leaf = np.array([leaf_ids[topo.leaf_of[h]] for h in spec.hosts], dtype=np.int64)
        self.addr = np.array(
            [int(ipaddress.IPv4Address(topo.spec.host(h).address)) for h in spec.hosts],
            dtype=np.uint64,
        )
        self.cache: dict[int, np.ndarray] = {}
        self.model = EcmpModel(topo)
        n_leaves = len(topo.leaves)
        self._tmpl = np.zeros((n_leaves, n_leaves, names.PATH_BUCKETS, net.width), dtype=np.int64)
        self._built = np.zeros((n_leaves, n_leaves), dtype=bool)
        self.state = PlanState(topo)
        self.planned = 0  # ICE: shifts planned so far (in order)
        self._inflight: deque[list[str]] = deque()

    def flows(self, s: int) -> tuple[np.ndarray, np.ndarray, list[Flow]]:
        """(source positions, destination positions, flows) of shift ``s``'s network flows."""
        sp = self.spec
        src = np.flatnonzero(self.host_ids[(np.arange(self.n) + s) % self.n] != self.host_ids)
        dst = (src + s) % self.n
        out = [
            Flow(
                flow_id=flow_id(sp.job, sp.phase, sp.channel, sp.ranks[i], sp.ranks[d]),
                job=sp.job,
                phase=sp.phase,
                channel=sp.channel,
                src_host=sp.hosts[i],
                dst_host=sp.hosts[d],
                src_rank=sp.ranks[i],
                dst_rank=sp.ranks[d],
                bytes=sp.pair_bytes,
            )
            for i, d in zip(src.tolist(), dst.tolist(), strict=True)
        ]
        return src, dst, out

    def get(self, pos: np.ndarray, shifts: np.ndarray) -> np.ndarray:
        """The aligned paths [k, width] of the flows from ranks at ``pos`` with ``shifts``."""
        out = np.empty((pos.size, self.net.width), dtype=np.int64)
        for s in np.unique(shifts).tolist():
            if s not in self.cache:
                if self.routing == "ice":
                    while self.planned < s:
                        self.planned += 1
                        self.cache[self.planned] = self._plan(self.planned)
                else:
                    self.cache[s] = self._hash(s)
            m = shifts == s
            out[m] = self.cache[s][pos[m]]
        return out

    def evict(self, below: int) -> None:
        """Forget the paths of shifts below ``below`` (no rank will start one again)."""
        for s in [s for s in self.cache if s < below]:
            del self.cache[s]

    def _rows(self, src: np.ndarray, dst: np.ndarray, fabric: np.ndarray) -> np.ndarray:
        out = np.full((self.n, self.net.width), self.net.pad, dtype=np.int64)
        out[src] = align_rows(self.net, self.up[src], fabric, self.down[dst])
        return out

    def _hash(self, s: int) -> np.ndarray:
        """ECMP: ice.p4's hash of each flow's key into its leaf pair's buckets (``EcmpModel``);
        the keys are those ``Flow.entropy_sport`` / ``entropy_qp`` give the pair's flow id."""
        sp = self.spec
        src = np.flatnonzero(self.host_ids[(np.arange(self.n) + s) % self.n] != self.host_ids)
        dst = (src + s) % self.n
        ids = [
            flow_id(sp.job, sp.phase, sp.channel, sp.ranks[i], sp.ranks[d])
            for i, d in zip(src.tolist(), dst.tolist(), strict=True)
        ]
        sport = np.fromiter(map(stand_in_sport, ids), dtype=np.uint64, count=len(ids))
        qp = np.fromiter(map(stand_in_qp, ids), dtype=np.uint64, count=len(ids))
        data = hash_inputs(
            self.addr[src], self.addr[dst], sport, qp, use_qp_in_hash=self.model.use_qp_in_hash
        )
        bucket = (crc32_rows(data) % np.uint32(names.PATH_BUCKETS)).astype(np.int64)
        sl, dl = self.leaf[src], self.leaf[dst]
        for a, b in {(int(x), int(y)) for x, y in zip(sl.tolist(), dl.tolist(), strict=True)}:
            if not self._built[a, b]:
                self._build(a, b)
        full = self._tmpl[sl, dl, bucket]
        full[:, 0] = self.up[src]
        full[:, -1] = self.down[dst]
        out = np.full((self.n, self.net.width), self.net.pad, dtype=np.int64)
        out[src] = full
        return out

    def _build(self, a: int, b: int) -> None:
        topo = self.net.topo
        la, lb = topo.leaves[a], topo.leaves[b]
        members = self.model.members(la, lb)
        if members.size == 0:
            raise ValueError(f"windowed all-to-all: no live path from {la} to {lb}")
        cand = topo.candidate_array(la, lb)
        fabric = np.full((members.size, max(cand.shape[1], 1)), self.net.pad, dtype=np.int64)
        fabric[:, : cand.shape[1]] = cand[members]
        pad = np.full(members.size, self.net.pad, dtype=np.int64)
        self._tmpl[a, b] = align_rows(self.net, pad, fabric, pad)
        self._built[a, b] = True

    def _plan(self, s: int) -> np.ndarray:
        """ICE: the planner's greedy places shift ``s`` beside the window's earlier shifts."""
        st = self.state
        src, dst, flows = self.flows(s)
        if len(self._inflight) >= max(self.spec.window, 1):
            old = self._inflight.popleft()
            st.remove_rows(np.array([st.index[x] for x in old], dtype=np.int64))
            st.compact()
        rows = st.add_flows(flows)
        stuck = greedy(st, rows)
        if stuck:
            raise ValueError(f"flow {st.flows[stuck[0]].flow_id}: no live path between the leaves")
        self._inflight.append([f.flow_id for f in flows])
        return self._rows(src, dst, st.paths[rows])


class WindowRun:
    """The slots of one windowed all-to-all during a run: rounds, their sends and receives."""

    def __init__(self, spec: A2aWindow, net: SimNetwork, routing: str) -> None:
        self.spec = spec
        self.paths = RoundPaths(spec, net, routing)
        n, w = len(spec.hosts), spec.window
        self.n = n
        ids = self.paths.host_ids
        self.host_ids = ids
        self.nxt = np.zeros(n, dtype=np.int64)  # per rank: the last round (shift) it took
        self.rnd = np.zeros((n, w), dtype=np.int64)  # per slot: its round's shift, 0: free
        self.send = np.zeros((n, w), dtype=np.int64)  # 0 waiting, 1 on a row, 2 sent / local
        self.recv = np.zeros((n, w), dtype=bool)  # the round's incoming flow (nearly) arrived
        self.cur = np.zeros((n, w), dtype=np.int64)  # per slot: the row of its latest send
        self.first = int(spec.rows.min()) if spec.rows.size else 0
        k = spec.rows.size
        self.row_dst = np.zeros(k, dtype=np.int64)  # per row (from ``first``): receiving rank
        self.row_shift = np.zeros(k, dtype=np.int64)
        self.row_told = np.ones(k, dtype=bool)  # the receiver knows the flow (nearly) arrived
        self.idle = np.full((k, net.width), net.pad, dtype=np.int64)
        pos = np.repeat(np.arange(n), 2 * w)
        self.idle[:, 0] = self.paths.up[pos]
        self.idle[:, -1] = self.paths.down[pos]

    def advance(
        self,
        size: np.ndarray,
        sent: np.ndarray,
        deliv: np.ndarray,
        inj: np.ndarray,
        arrived: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One step of the schedule after the fluid step (``inj``: bytes each row injected,
        ``arrived``: bytes each row delivered). Returns (rows to arm, their aligned paths)."""
        n, w = self.n, self.spec.window
        rows = self.spec.rows.reshape(n * w, 2)
        lo = self.first
        flat = self.spec.rows.ravel()
        # receivers learn of flows that arrive (or will within a step)
        pend = np.flatnonzero(~self.row_told)
        if pend.size:
            g = flat[pend]
            near = size[g] - deliv[g] <= arrived[g] + 1e-6
            pend = pend[near]
            if pend.size:
                dst, sh = self.row_dst[pend], self.row_shift[pend]
                hit = self.rnd[dst] == sh[:, None]
                slot = hit.argmax(axis=1)
                if not hit[np.arange(pend.size), slot].all():
                    raise RuntimeError("windowed all-to-all: a flow to a rank not expecting it")
                self.recv[dst, slot] = True
                self.row_told[pend] = True
        # sends that are injected (or will be within a step)
        on = self.send.ravel() == 1
        if on.any():
            idx = np.flatnonzero(on)
            r = rows[idx, self.cur.ravel()[idx]]
            done = size[r] - sent[r] <= inj[r] + 1e-6
            self.send.ravel()[idx[done]] = 2
        # completed rounds free their slots; free slots take the rank's next rounds in order
        for _ in range(self.n):
            fin = (self.rnd > 0) & (self.send == 2) & self.recv
            self.rnd[fin] = 0
            free = self.rnd == 0
            c = np.cumsum(free, axis=1)
            take = free & (c <= (self.n - 1 - self.nxt)[:, None])
            if not take.any():
                break
            ii, jj = np.nonzero(take)
            s = self.nxt[ii] + c[ii, jj]
            self.nxt += take.sum(axis=1)
            self.rnd[ii, jj] = s
            ids = self.host_ids
            self.send[ii, jj] = np.where(ids[(ii + s) % n] == ids[ii], 2, 0)  # local: NVLink
            self.recv[ii, jj] = ids[(ii - s) % n] == ids[ii]
            if not ((self.send[ii, jj] == 2) & self.recv[ii, jj]).any():
                break  # no round that was all NVLink (done at once)
        # waiting sends start once the receiver has taken that round and a row of theirs is free
        wait = np.flatnonzero(self.send.ravel() == 0)
        if wait.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.idle.shape[1]), dtype=np.int64)
        si, sj = wait // w, wait % w
        sh = self.rnd[si, sj]
        dst = (si + sh) % n
        other = rows[wait, 1 - self.cur[si, sj]]
        ok = (self.nxt[dst] >= sh) & (deliv[other] >= size[other] * (1 - 1e-9) - 1e-6)
        ok &= self.row_told[other - lo]
        if not ok.any():
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.idle.shape[1]), dtype=np.int64)
        wait, si, sj, sh, dst, other = wait[ok], si[ok], sj[ok], sh[ok], dst[ok], other[ok]
        self.send[si, sj] = 1
        self.cur[si, sj] ^= 1
        loc = other - lo
        self.row_dst[loc] = dst
        self.row_shift[loc] = sh
        self.row_told[loc] = False
        new = self.paths.get(si, sh)
        need = self.rnd[self.send == 0]
        self.paths.evict(int(min(need.min() if need.size else n, self.nxt.min() + 1)))
        return other, new


def reset_rows(
    ctrl: DcqcnArray | IceArray | RateObjects,
    pristine: DcqcnArray | IceArray | RateObjects,
    rows: np.ndarray,
) -> None:
    """Put ``rows`` of a rate-control array back to the state a new queue pair starts in: every
    per-flow array copied from an untouched twin (per-flow objects: new ones)."""
    if isinstance(ctrl, RateObjects):
        ctrl.renew(rows)
        return
    n = ctrl.n
    for name, val in vars(ctrl).items():
        if isinstance(val, np.ndarray) and val.shape[:1] == (n,):
            val[rows] = getattr(pristine, name)[rows]
