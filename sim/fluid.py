"""One run's state and the phases of one time step (``engine.Simulator.run`` drives them).

``FluidRun`` holds every per-flow and per-link array of a run; each phase of a step is one
method, in the order ``engine.py``'s docstring gives:

* ``inject``: what each flow may put on its first link (ring dependency, rate, NIC share, PFC);
* ``serve``: the positions of the aligned paths served in order (fluid FIFO per link);
* ``mark``: ECN on the enqueue depth, CNPs, DCQCN's reaction;
* ``feedback``: ICE's INT records one base RTT late (the history ring);
* ``pause``: PFC XOFF / XON per link;
* ``rearm``: windowed all-to-all rows that take their next peer;
* ``fail``: link failures (the link stops; after the detection delay the routing is recomputed
  and the rows whose path changed move);
* ``complete``: flow and collective completions, collectives that become ready;
* ``cap``: the controller's water-filling caps every ``cap_interval_us``, applied
  ``cap_delay_us`` later;
* ``record``: trace and progress.

Every array is built once in ``__init__`` and updated in place where the arithmetic allows, so
a step allocates little; the order of the floating-point operations is the model's definition
(a refactor that reorders them changes results in the last bits, and tests compare runs
exactly).
"""

from __future__ import annotations

import copy
import functools
import logging
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from icefabric.sim.caps import CapSchedule, UnplannedStarts
from icefabric.sim.config import check_run_size
from icefabric.sim.marks import EnqueueDepth
from icefabric.sim.nic import nic_share
from icefabric.sim.results import QUEUE_EDGES, Trace
from icefabric.sim.window import WindowRun, reset_rows
from icefabric.traffic.rate import DcqcnParams, IceParams, make_rate_control, rate_needs_int
from icefabric.traffic.rate.vector import DcqcnArray, IceArray, RateObjects

if TYPE_CHECKING:
    from icefabric.sim.engine import LinkFailure, Simulator

log = logging.getLogger(__name__)

AUTO_DT_BITS = 1.6e6  # default step: the time a sender's line takes for 200 KB (4 us at 400G)
HIST_EVERY = 4  # steps between samples of the fabric queue histogram
# Marked packets already counted towards a flow's next CNP when its CNP interval starts (and
# when a flow or a windowed row's QP starts): half a packet, the expected distance to the packet
# in progress. The receiver answers the first marked packet after the interval; the fluid model
# does not know the packet boundaries, and counting from 0 put every CNP a whole packet late
# (at packet level a flow cut every 21-22 ms escaped DCQCN's 22 ms increase timer more often).
CNP_PHASE = 0.5


def prev_links(path: np.ndarray, pad: int) -> np.ndarray:
    """Per aligned path position: the link before it on the flow's path (``pad``: none)."""
    prev = np.full_like(path, pad)
    last = np.full(path.shape[0], pad, dtype=np.int64)
    for h in range(path.shape[1]):
        prev[:, h] = last
        last = np.where(path[:, h] != pad, path[:, h], last)
    return prev


class FluidRun:
    """The arrays of one run of ``sim`` and one method per phase of a step."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.cfg = sim.cfg
        self.net = sim.net
        self.work = sim.work
        self._init_rows()
        self._init_links()
        self._init_control()
        self._init_history()
        self._init_state()
        self.start_ready()

    def _init_rows(self) -> None:
        """The flows' paths and sizes; windowed all-to-all rows on their first peers."""
        sim, net, cfg, w = self.sim, self.net, self.cfg, self.work
        self.path = path = sim.routes.path
        self.size = size = w.size.copy() if w.windows else w.size
        self.wins = wins = [WindowRun(wd, net, cfg.routing) for wd in w.windows]
        for wr in wins:  # every row idle on its own host, then each slot's first peer
            path[wr.spec.rows.ravel()] = wr.idle
            z = np.zeros(path.shape[0])
            rows0, paths0 = wr.advance(size, z, z, z, z)
            path[rows0] = paths0
            size[rows0] = wr.spec.pair_bytes
        self.retired = 0.0  # bytes of windowed flows whose rows were re-armed
        # windowed rows carry a peer for tens of microseconds, less than a cap interval: the
        # controller's caps leave them alone (ICE's end-side control still governs them)
        self.windowed = np.zeros(path.shape[0], dtype=bool)
        for wr in wins:
            self.windowed[wr.spec.rows.ravel()] = True
        if w.unplanned is not None:  # background traffic: the controller cannot cap what it
            self.windowed |= w.unplanned  # does not know

    def _init_links(self) -> None:
        """Per link: payload capacity, ECN and PFC thresholds; the step, RTT and hop columns."""
        sim, net, cfg, path, wins = self.sim, self.net, self.cfg, self.path, self.wins
        self.n_f, self.n_h = n_f, n_h = path.shape
        self.nl = net.n_links + 1
        self.pad = pad = net.pad
        cap_bps = net.cap_bps
        if cfg.wire_overhead > 0:  # what the fabric links carry of payload
            cap_bps = np.where(net.is_fabric, cap_bps / (1.0 + cfg.wire_overhead), cap_bps)
        self.cap_bps = cap_bps  # per link: what it carries of payload
        scale100 = np.where(np.isfinite(cap_bps), cap_bps / 100e9, 0.0)
        self.kmin = cfg.ecn_kmin_kb * 1e3 * scale100
        kmax = cfg.ecn_kmax_kb * 1e3 * scale100
        self.kmax = kmax
        self.kspan = np.maximum(kmax - self.kmin, 1e-9)
        self.xoff = cfg.pfc_xoff_kb * 1e3 * scale100
        self.xon = cfg.pfc_xon_kb * 1e3 * scale100
        self.fab = net.is_fabric
        self.src_host = net.host_of_link[path[:, 0]] if n_f else np.zeros(0, dtype=np.int64)
        n_hosts = len(sim.topo.spec.hosts)
        self.line = line = float(cap_bps[path[:, 0]].max()) if n_f else 100e9
        self.dt = dt = cfg.dt_us if cfg.dt_us is not None else AUTO_DT_BITS / line * 1e6
        self.cap_step = cap_bps / 8.0 * dt * 1e-6  # bytes a link serves per step (inf for pad)
        self.failing = list(sim.failures)  # not yet failed
        self.detecting: list[LinkFailure] = []  # failed, the routing not yet recomputed
        self.failed_topo = copy.deepcopy(sim.topo) if self.failing else sim.topo
        self.nic_step = np.zeros(max(n_hosts, 1))
        first_host_link = 2 * len(sim.topo.spec.links)
        for j in range(n_hosts):
            self.nic_step[j] = self.cap_step[first_host_link + 2 * j]
        self.rtt = cfg.base_rtt_us or net.base_rtt_us(path, cfg.mtu_bytes, cfg.switch_latency_us)
        self.real = real = path != pad
        self.hop_id = np.where(real, path, -1)
        self.link_bps_fh = cap_bps[path]
        # columns that carry some flow's link (all-pad positions are skipped)
        self.cols = [h for h in range(n_h) if real[:, h].any() or wins]
        self.prev_link = prev_links(path, pad)

    def _init_control(self) -> None:
        """The end-host rate control in array form (or one object per flow) and the caps."""
        cfg, n_f, n_h, line, rtt = self.cfg, self.n_f, self.n_h, self.line, self.rtt
        dcqcn_p = DcqcnParams().scaled(line)
        self.cnp_int = (
            cfg.cnp_interval_us if cfg.cnp_interval_us is not None else dcqcn_p.cnp_interval_us
        )
        self.dc = DcqcnArray(n_f, dcqcn_p) if cfg.control == "dcqcn" else None
        self.ice = (
            IceArray(n_f, n_h, IceParams().scaled(line, rtt)) if cfg.control == "ice" else None
        )
        # any other registered algorithm: one object per flow (traffic/rate/vector.py)
        self.other = (
            RateObjects(
                n_f,
                functools.partial(make_rate_control, cfg.control, line, base_rtt_us=rtt),
                needs_int=rate_needs_int(cfg.control),
            )
            if cfg.control not in ("dcqcn", "ice", "none")
            else None
        )
        # who gets CNPs, bytes sent and timers; who gets INT records
        self.cnp_rc: DcqcnArray | RateObjects | None = self.dc or self.other
        self.int_rc: IceArray | RateObjects | None = self.ice or (
            self.other if self.other is not None and self.other.needs_int else None
        )
        self.ctrl = self.dc or self.ice or self.other
        self.pristine = (
            copy.deepcopy(self.ctrl)
            if (self.wins or self.failing) and self.ctrl is not None
            else None
        )
        self.caps = np.full(n_f, np.inf)

    def _init_history(self) -> None:
        """The feedback delay line (one RTT of per-link bytes and queues), its size checked."""
        cfg, dt, nl = self.cfg, self.dt, self.nl
        self.delay_steps = ds = max(1, round(self.rtt / dt))
        check_run_size(  # steps and memory bounded before anything is allocated or run
            dt_us=dt,
            max_time_us=cfg.max_time_us,
            delay_steps=ds,
            links=nl,
            flows=self.n_f,
            hops=self.n_h,
        )
        self.hist_tx = np.zeros((ds, nl))
        self.hist_q = np.zeros((ds, nl))
        self.hist_t = np.zeros(ds)

    def _init_state(self) -> None:
        """The collectives' dependencies and every per-flow and per-link counter of the run."""
        cfg, w, path, n_f, n_h, nl = self.cfg, self.work, self.path, self.n_f, self.n_h, self.nl
        rtt, dt, line = self.rtt, self.dt, self.line
        pred = w.pred if w.pred.ndim == 2 else w.pred[:, None]
        has_cols = pred >= 0
        self.has_pred = has_cols.any(axis=1)
        self.pred_cols = [
            (np.where(has_cols[:, j], pred[:, j], 0), has_cols[:, j]) for j in range(pred.shape[1])
        ]
        self.chunk = np.maximum(w.chunk, 1e-9)
        self.lead = w.lead
        self.group = w.group
        self.colls = w.collectives
        n_g = len(self.colls)
        self.g_start = np.full(n_g, np.nan)
        self.g_end = np.full(n_g, np.nan)
        self.g_flows = (
            np.bincount(self.group, minlength=n_g) if n_f else np.zeros(n_g, dtype=np.int64)
        )
        self.started = np.zeros(n_f, dtype=bool)

        self.sent = np.zeros(n_f)
        self.deliv = np.zeros(n_f)
        self.finish = np.full(n_f, np.nan)
        self.path_t = np.ascontiguousarray(path.T)
        # per served column: the links found there so far (sorted) and each row's index among
        # them, so a column's link arithmetic runs over its own links, not all nl
        self.col_links = [np.zeros(0, dtype=np.int64) for _ in range(n_h)]
        self.col_of = np.full((n_h, nl), -1, dtype=np.int64)
        self.col_idx = np.zeros((n_h, n_f), dtype=np.int64)
        self.index_cols(None)
        self.q_t = np.zeros((n_h, n_f))
        self.q_link = np.zeros(nl)
        self.fab_ids = np.flatnonzero(self.fab[:-1])
        self.tx = np.zeros(nl)
        self.paused_egress = np.zeros(nl, dtype=bool)
        self.paused = np.zeros(nl, dtype=bool)
        self.pause_us = np.zeros(nl)
        self.mark_acc = np.full(n_f, CNP_PHASE)
        self.enq = EnqueueDepth(nl, cfg.ecn_history_steps) if self.cnp_rc is not None else None
        self.last_cnp = np.full(n_f, -np.inf)
        self.cnp_queue: deque[tuple[float, np.ndarray]] = deque()  # (arrival at sender, rows)
        self.cnp_delay = rtt if cfg.cnp_delay_us is None else cfg.cnp_delay_us
        self.cnps = 0
        self.qhist = np.zeros(len(QUEUE_EDGES) + 1, dtype=np.int64)
        self.q_max = np.zeros(nl)
        unplanned = w.unplanned if cfg.starts and self.ice is not None else None
        starts = (
            None
            if unplanned is None or not unplanned.any()
            else UnplannedStarts(self.sim.topo, w.flows, unplanned)
        )
        self.caps_ctl = CapSchedule(cfg, self.cap_bps[: self.net.n_links], starts)
        self.total = w.total_bytes
        self.trace = Trace.empty()
        self.steps = 0
        self.last_idle = np.zeros(n_f)  # flowlet: when each flow last injected
        self.flowlet_moves = 0
        self.reroutes = 0  # rows moved by a failure's rerouting
        self.rng = np.random.default_rng(cfg.seed)
        self.t = 0.0
        est_end = max(1.0, self.total * 8 / max(line, 1.0) * 1e6)
        self.trace_every = max(1, int(est_end / dt / 1500))

    # ------------------------------------------------------------------ phases

    @property
    def done(self) -> bool:
        """Every collective has ended."""
        return bool(np.all(~np.isnan(self.g_end)))

    def start_ready(self) -> None:
        """Start the collectives whose predecessors have ended and whose delay has passed."""
        now = self.t
        g_start, g_end = self.g_start, self.g_end
        for g, c in enumerate(self.colls):
            if not np.isnan(g_start[g]):
                continue
            if any(np.isnan(g_end[a]) for a in c.after):
                continue
            ready = max((g_end[a] for a in c.after), default=0.0) + c.delay_us
            if ready <= now + 1e-9:
                g_start[g] = now
                if self.g_flows[g] == 0:
                    g_end[g] = now
        if self.n_f:
            self.started[:] = ~np.isnan(g_start[self.group])

    def inject(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes each flow puts on its first link in this step; also which flows are active."""
        active = self.started & (self.sent < self.size)
        dep = np.full(self.n_f, np.inf)
        for idx, col in self.pred_cols:
            dep = np.minimum(dep, np.where(col, self.deliv[idx], np.inf))
        allowed = np.where(
            self.has_pred, np.minimum(self.size, dep + self.lead * self.chunk), self.size
        )
        want = np.maximum(allowed - self.sent, 0.0)
        if self.dc is not None:
            rate = self.dc.rates()
        elif self.ice is not None:
            rate = self.ice.rates()
        elif self.other is not None:
            rate = self.other.rates()
        else:
            rate = np.minimum(self.line, self.caps)
        inj = np.where(active, np.minimum(rate / 8.0 * self.dt * 1e-6, want), 0.0)
        if self.n_f:
            nic_share(inj, self.src_host, self.nic_step)
            if self.cfg.pfc:
                inj[self.paused[self.path_t[0]]] = 0.0
        if self.sim.routes.routing == "flowlet" and self.n_f:
            moved = self.flowlet_move(inj)
            if moved:
                self.flowlet_moves += moved
                self.prev_link = prev_links(self.path, self.pad)
                self.path_t = np.ascontiguousarray(self.path.T)
                self.index_cols(None)
        self.sent += inj
        return inj, active

    def index_cols(self, rows: np.ndarray | None) -> None:
        """Bring the columns' link indices up to date after the paths of ``rows`` (all when
        None) changed; a column that meets a link new to it re-indexes all its rows."""
        for h in self.cols:
            lk = self.path_t[h] if rows is None else self.path_t[h, rows]
            idx = self.col_of[h, lk]
            if (idx >= 0).all():
                if rows is None:
                    self.col_idx[h] = idx
                else:
                    self.col_idx[h, rows] = idx
                continue
            links = np.union1d(self.col_links[h], lk)
            self.col_links[h] = links
            self.col_of[h, links] = np.arange(links.size)
            self.col_idx[h] = self.col_of[h, self.path_t[h]]

    def serve(self, inj: np.ndarray) -> np.ndarray:
        """Serve the path positions in order; returns the bytes each flow delivered.

        Each column works on its own links (``index_cols``): the same sums in the same order
        as over all links, so the same bits, with a fraction of the arithmetic."""
        q_t, tx = self.q_t, self.tx
        q_link = np.zeros(self.nl)
        x = inj
        for h in self.cols:
            links = self.col_links[h]
            lc = self.col_idx[h]
            m = links.size
            backlog = q_t[h] + x
            b = np.bincount(lc, weights=backlog, minlength=m)
            serve = np.minimum(b, self.cap_step[links])
            if self.cfg.pfc:
                serve[self.paused[links]] = 0.0
            frac = np.divide(serve, b, out=np.ones(m), where=b > 0)
            x = backlog * frac[lc]
            q_t[h] = backlog - x
            q_link[links] += np.bincount(lc, weights=q_t[h], minlength=m)
            tx[links] += serve
        tx[self.pad] = 0.0
        self.deliv += x
        self.q_link = q_link
        self.q_link[self.pad] = 0.0
        np.maximum(self.q_max, self.q_link, out=self.q_max)
        if self.steps % HIST_EVERY == 0:
            self.qhist += np.bincount(
                np.searchsorted(QUEUE_EDGES, self.q_link[self.fab_ids]), minlength=self.qhist.size
            )
        self.t += self.dt
        self.steps += 1
        return x

    def mark(self, inj: np.ndarray, x: np.ndarray) -> None:
        """ECN marks on the enqueue depth, CNPs one per interval, DCQCN's reaction."""
        dc, enq, cfg, t = self.cnp_rc, self.enq, self.cfg, self.t
        if dc is None:
            return
        assert enq is not None
        q_enq = enq.update(self.q_link, self.tx, self.kmin)
        over = q_enq > self.kmin
        if over.any():
            kmin, kmax = self.kmin, self.kmax
            p_l = np.zeros(self.nl)
            ramp = cfg.ecn_pmax * (q_enq[over] - kmin[over]) / self.kspan[over]
            p_l[over] = np.where(q_enq[over] > kmax[over], 1.0, ramp)
            keep = np.log1p(-np.minimum(p_l, 1.0 - 1e-12))
            cols = self.cols
            lsum = keep[self.path_t[cols[0]]].copy()
            for h in cols[1:]:
                lsum += keep[self.path_t[h]]
            eligible = t - self.last_cnp >= self.cnp_int
            self.mark_acc += np.where(eligible, x * (-np.expm1(lsum) / cfg.mtu_bytes), 0.0)
            rows = np.flatnonzero(eligible & (self.mark_acc >= 1.0))
            if rows.size:
                self.last_cnp[rows] = t
                self.mark_acc[rows] = CNP_PHASE
                self.cnps += rows.size
                self.cnp_queue.append((t + self.cnp_delay, rows))
        while self.cnp_queue and self.cnp_queue[0][0] <= t + 1e-9:
            dc.on_cnp(self.cnp_queue.popleft()[1], t)
        sending = np.flatnonzero(inj > 0)
        if isinstance(dc, RateObjects):
            dc.on_bytes_sent(sending, inj[sending], t)
        else:
            dc.on_bytes_sent(sending, inj[sending])
        dc.on_timer(t)

    def feedback(self, active: np.ndarray) -> None:
        """ICE (or another algorithm that reads INT): one INT record per hop from the link
        history one base RTT back; then this step's transmit counters and queues join the
        history."""
        steps, ds = self.steps, self.delay_steps
        slot = steps % ds
        ice = self.int_rc
        if ice is not None:
            old = (slot + 1) % ds if steps >= ds else 0
            rows = np.flatnonzero(active)
            if rows.size and steps >= ds and isinstance(ice, IceArray):
                ice.on_link_feedback(
                    rows,
                    self.t,
                    self.hop_id if rows.size == self.n_f else self.hop_id[rows],
                    self.cap_bps,
                    self.hist_tx[old],
                    self.hist_q[old],
                    float(self.hist_t[old]),
                )
            elif rows.size and steps >= ds:
                every = rows.size == self.n_f
                pr = self.path if every else self.path[rows]
                re = self.real if every else self.real[rows]
                ice.on_feedback(
                    rows,
                    self.t,
                    self.hop_id if every else self.hop_id[rows],
                    self.link_bps_fh if every else self.link_bps_fh[rows],
                    self.hist_tx[old][pr],
                    np.where(re, self.hist_t[old], 0.0),
                    self.hist_q[old][pr],
                )
        self.hist_tx[slot] = self.tx
        self.hist_q[slot] = self.q_link
        self.hist_t[slot] = self.t

    def pause(self) -> None:
        """PFC: a queue above XOFF pauses the links feeding it until it falls below XON."""
        if not self.cfg.pfc:
            return
        q_link, pad = self.q_link, self.pad
        self.paused_egress = np.where(
            q_link > self.xoff, True, np.where(q_link < self.xon, False, self.paused_egress)
        )
        self.paused_egress[pad] = False
        self.paused[:] = False
        pe = self.paused_egress[self.path] & self.real
        if pe.any():
            self.paused[self.prev_link[pe]] = True
            self.paused[pad] = False
        self.pause_us[self.paused] += self.dt

    def rearm(self, inj: np.ndarray, x: np.ndarray) -> None:
        """Windowed all-to-all: slots start their next peers on re-armed rows."""
        for wr in self.wins:
            rows, new = wr.advance(self.size, self.sent, self.deliv, inj, x)
            if rows.size == 0:
                continue
            self.retired += float(self.size[rows].sum())
            self.size[rows] = wr.spec.pair_bytes
            self.sent[rows] = self.deliv[rows] = 0.0
            self.mark_acc[rows] = CNP_PHASE
            self.finish[rows] = np.nan
            self.last_cnp[rows] = -np.inf
            self.q_t[:, rows] = 0.0
            self.path[rows] = new
            self.path_t[:, rows] = new.T
            self.index_cols(rows)
            self.real[rows] = new != self.pad
            self.hop_id[rows] = np.where(self.real[rows], new, -1)
            self.link_bps_fh[rows] = self.cap_bps[new]
            self.prev_link[rows] = prev_links(new, self.pad)
            if self.ctrl is not None and self.pristine is not None:
                reset_rows(self.ctrl, self.pristine, rows)
            gone = np.zeros(self.n_f, dtype=bool)
            gone[rows] = True
            for k, (when, r) in enumerate(self.cnp_queue):  # CNPs of the old QPs
                self.cnp_queue[k] = (when, r[~gone[r]])

    def fail(self) -> None:
        """Link failures: the link stops at once; after the detection delay the routing is
        recomputed on the live links and every unfinished row whose path changed moves (its
        bytes in flight are lost and sent again: go-back-N)."""
        t = self.t
        while self.failing and t >= self.failing[0].at_us - 1e-9:
            fl = self.failing.pop(0)
            self.cap_step[self.failed_topo.fail_link(fl.link)] = 0.0
            self.detecting.append(fl)
        if not (
            self.detecting and t >= self.detecting[0].at_us + self.detecting[0].detect_us - 1e-9
        ):
            return
        self.detecting.pop(0)
        sim = self.sim
        new_routes, sim.state = sim.route_on(self.failed_topo)
        new = new_routes.path
        path, pad = self.path, self.pad
        shifted = np.flatnonzero(
            (new != path).any(axis=1) & ~(self.deliv >= self.size * (1 - 1e-9) - 1e-6)
        )
        self.reroutes += int(shifted.size)
        if shifted.size:
            lost = self.q_t[:, shifted].sum(axis=0)
            self.sent[shifted] -= lost
            self.q_t[:, shifted] = 0.0
            path[shifted] = new[shifted]
            self.path_t[:, shifted] = new[shifted].T
            self.index_cols(shifted)
            self.real[shifted] = new[shifted] != pad
            self.hop_id[shifted] = np.where(self.real[shifted], new[shifted], -1)
            self.link_bps_fh[shifted] = self.cap_bps[new[shifted]]
            self.prev_link[shifted] = prev_links(new[shifted], pad)
            if self.ice is not None and self.pristine is not None:
                reset_rows(self.ice, self.pristine, shifted)
                self.ice.set_caps(self.caps)
        if new_routes.bucket_table is not None:
            sim.routes.bucket_table = new_routes.bucket_table
            sim.routes.aligned_table = new_routes.aligned_table

    def complete(self) -> None:
        """Flows that delivered everything finish; collectives whose flows all did end."""
        newly = np.isnan(self.finish) & (self.deliv >= self.size * (1 - 1e-9) - 1e-6)
        newly &= self.started
        if newly.any():
            self.finish[newly] = self.t
            for g in np.unique(self.group[newly]).tolist():
                fl = self.group == g
                if not np.isnan(self.finish[fl]).any():
                    self.g_end[g] = self.t
            self.start_ready()
        elif np.isnan(self.g_start).any():
            self.start_ready()

    def cap(self) -> None:
        """The controller's caps and start tables (sim/caps.py), applied as they arrive."""
        if self.cfg.use_caps:
            act = np.flatnonzero(self.started & np.isnan(self.finish) & ~self.windowed)
            self.caps_ctl.compute(self.t, act, self.path[act], self.pad, self.sent, self.n_f)
        for caps, table in self.caps_ctl.due(self.t):
            self.caps = caps
            if table is not None and self.ice is not None:  # rows that have not sent yet
                keep = self.sent[table[0]] == 0
                self.ice.start_at(table[0][keep], table[1][keep])
            for rc in (self.dc, self.ice, self.other):
                if rc is not None:
                    rc.set_caps(caps)

    def record(self, x: np.ndarray, active: np.ndarray) -> None:
        """A trace sample every ``trace_every`` steps."""
        if self.steps % self.trace_every:
            return
        fab = self.fab
        self.trace.add(
            self.t,
            goodput_bps=float(x.sum()) * 8 / (self.dt * 1e-6),
            max_queue=float(self.q_link[:-1][fab[:-1]].max()) if fab.any() else 0.0,
            active=int(active.sum()),
            paused=int(self.paused.sum()),
        )

    def flowlet_move(self, inj: np.ndarray) -> int:
        """Flows that resume after an idle gap >= flowlet_gap draw a new bucket (ice.p4's
        flowlet mode); their queued bytes stay where they are. Returns how many moved."""
        t, last_sent, sim = self.t, self.last_idle, self.sim
        r = sim.routes
        assert r.bucket_table is not None and r.aligned_table is not None
        resume = np.flatnonzero((inj > 0) & (t - last_sent >= self.cfg.flowlet_gap_us))
        last_sent[inj > 0] = t
        if resume.size == 0 or sim.state is None:
            return 0
        buckets = self.rng.integers(0, r.bucket_table.shape[1], size=resume.size)
        pid = r.bucket_table[resume, buckets]
        moved = 0
        for i, p in zip(resume.tolist(), pid.tolist(), strict=True):
            new = self.net.host_path(sim.state, i, r.aligned_table[p])
            if not np.array_equal(new, r.path[i]):
                r.path[i] = new
                moved += 1
        if moved:
            self.real[:] = r.path != self.pad
            self.hop_id[:] = np.where(self.real, r.path, -1)
            self.link_bps_fh[:] = self.cap_bps[r.path]
        return moved

    def delivered_fraction(self) -> float:
        """The share of the workload's bytes delivered so far."""
        return (self.retired + float(self.deliv.sum())) / self.total if self.total else 1.0
