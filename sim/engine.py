"""The time-stepped fluid model: flows inject, per-link queues serve, ECN / INT / caps steer rates.

One step of ``dt``:

1. Each unfinished flow of a started collective may inject ``rate * dt`` bytes, bounded by what
   its ring predecessor has delivered (workload.py) and by its NIC: the flows of one host share the
   host's line rate in proportion to what they ask (a NIC's QP scheduler). With PFC, a host whose
   uplink is paused injects nothing.
2. The positions of the aligned paths are served in order (network.py). At every link the flows'
   backlog (queued + arriving) is served up to ``capacity * dt``, every flow getting the same
   fraction of its backlog (FIFO in the fluid limit); what leaves goes on to the next position in
   the same step (propagation enters only the control loops' feedback delay). With PFC a link
   whose downstream switch has a queue above XOFF serves nothing (pause; XON resumes it), which
   propagates hop by hop and blocks every flow of the paused port (head-of-line blocking).
3. ECN: every link marks as ice.p4's ECN table (Kmin, Kmax, Pmax) on the depth the bytes leaving
   it met at enqueue, as ice.p4 marks on ``enq_qdepth`` (``marks.py``: marks lag the queue by its
   drain time); a flow's delivered packets carry marks with the path's marking probability; the
   receiver sends
   at most one CNP per ``cnp_interval`` once a whole marked packet's worth has arrived, and the
   sender acts on it one base RTT later (``cnp_delay_us``).
4. Rate control (the classes of ``icefabric.traffic.rate`` in array form): DCQCN gets CNPs, bytes
   sent and its timer; ICE gets an INT path record per flow per step, read from the links' transmit
   counters and queues one base RTT earlier. The controller's water-filling caps
   (``icefabric.control.congestion.max_min_fill`` over the flows that have not finished) are
   recomputed every ``cap_interval_us`` and reach the senders ``cap_delay_us`` later (the agent
   channel), so flows that start in between run on their end-side control until then; with
   ``caps_ahead`` the first caps (for the flows that start first) are in place at once, as
   when the controller knew the job before it started.

A windowed all-to-all (``window.py``) re-arms its rows after each step: a row whose last flow has
left the fabric takes the next peer's flow (its path, a new QP's rate state, no cap).
"""

from __future__ import annotations

import copy
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from icefabric.control.congestion import max_min_fill
from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig, check_run_size
from icefabric.sim.marks import EnqueueDepth
from icefabric.sim.network import Routes, SimNetwork, route
from icefabric.sim.results import QUEUE_EDGES, CollectiveResult, SimResult, Trace
from icefabric.sim.window import WindowRun, reset_rows
from icefabric.sim.workload import Workload
from icefabric.traffic.rate import DcqcnParams, IceParams
from icefabric.traffic.rate.vector import DcqcnArray, IceArray

log = logging.getLogger(__name__)

ProgressHook = Callable[[float, float], None]  # (fraction of bytes delivered, sim time us)
AUTO_DT_BITS = 1.6e6  # default step: the time a sender's line takes for 200 KB (4 us at 400G)


@dataclass(slots=True, frozen=True, kw_only=True)
class LinkFailure:
    """A fabric link (both directions) that fails at ``at_us``; the controller recomputes the
    paths ``detect_us`` later (port-down event + new table entries)."""

    link: int  # directed link id (control/topology.py); its reverse fails with it
    at_us: float
    detect_us: float = 200.0


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw for a collective over ``n`` ranks."""
    if collective == "all-reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1.0


class Simulator:
    """One run: a workload on a topology under one configuration."""

    def __init__(
        self,
        topo: Topology,
        workload: Workload,
        config: SimConfig,
        *,
        routes: Routes | None = None,
        failures: Sequence[LinkFailure] = (),
    ) -> None:
        self.topo = topo
        self.work = workload
        self.cfg = config
        self.failures = tuple(sorted(failures, key=lambda f: f.at_us))
        for fl in self.failures:
            if not 0 <= fl.link < topo.n_links or topo.links[fl.link].kind != "fabric":
                raise ValueError(f"failure: link {fl.link}: expected a fabric link id")
        if self.failures and routes is not None:
            raise ValueError("failure: the routing must be recomputed, so give no fixed routes")
        self.net = SimNetwork(topo)
        self._payload_bps = self.net.cap_bps  # per link: what it carries of payload (run())
        self.state: PlanState | None = None  # the routing's plan state (flowlet moves use it)
        t0 = time.perf_counter()
        if routes is None and workload.windows:
            # windowed all-to-all rows get their paths round by round in the run (window.py)
            if config.routing == "flowlet":
                raise ValueError("windowed all-to-all: routing flowlet is not modelled")
            win = np.zeros(len(workload), dtype=bool)
            for wd in workload.windows:
                win[wd.rows.ravel()] = True
            others = np.flatnonzero(~win)
            full = np.full((len(workload), self.net.width), self.net.pad, dtype=np.int64)
            if others.size:
                sub, self.state = route(
                    self.net,
                    [workload.flows[i] for i in others.tolist()],
                    config.routing,
                    unplanned=None if workload.unplanned is None else workload.unplanned[others],
                )
                full[others] = sub.path
            routes = Routes(path=full, routing=config.routing)
        elif routes is None:
            routes, self.state = self._route(topo)
        self.routes = routes
        self.route_s = time.perf_counter() - t0

    def _route(self, topo: Topology) -> tuple[Routes, PlanState]:
        """Every row's path on ``topo`` (with its failed links) under the configured routing."""
        w = self.work
        return route(
            SimNetwork(topo) if topo is not self.topo else self.net,
            w.flows,
            self.cfg.routing,
            stripe=w.stripe,
            stripes=w.stripes,
            unplanned=w.unplanned,
        )

    def run(self, progress: ProgressHook | None = None) -> SimResult:
        """Simulate until every collective has finished or ``max_time_us``."""
        cfg = self.cfg
        net = self.net
        w = self.work
        wall0 = time.perf_counter()
        path = self.routes.path
        size = w.size.copy() if w.windows else w.size
        wins = [WindowRun(wd, net, cfg.routing) for wd in w.windows]
        for wr in wins:  # every row idle on its own host, then each slot's first peer
            path[wr.spec.rows.ravel()] = wr.idle
            z = np.zeros(path.shape[0])
            rows0, paths0 = wr.advance(size, z, z, z, z)
            path[rows0] = paths0
            size[rows0] = wr.spec.pair_bytes
        retired = 0.0  # bytes of windowed flows whose rows were re-armed
        # windowed rows carry a peer for tens of microseconds, less than a cap interval: the
        # controller's caps leave them alone (ICE's end-side control still governs them)
        windowed = np.zeros(path.shape[0], dtype=bool)
        for wr in wins:
            windowed[wr.spec.rows.ravel()] = True
        if w.unplanned is not None:  # background traffic: the controller cannot cap what it
            windowed |= w.unplanned  # does not know
        n_f, n_h = path.shape
        nl = net.n_links + 1
        pad = net.pad
        cap_bps = net.cap_bps
        if cfg.wire_overhead > 0:  # what the fabric links carry of payload
            cap_bps = np.where(net.is_fabric, cap_bps / (1.0 + cfg.wire_overhead), cap_bps)
        self._payload_bps = cap_bps
        scale100 = np.where(np.isfinite(cap_bps), cap_bps / 100e9, 0.0)
        kmin = cfg.ecn_kmin_kb * 1e3 * scale100
        kmax = cfg.ecn_kmax_kb * 1e3 * scale100
        kspan = np.maximum(kmax - kmin, 1e-9)
        xoff = cfg.pfc_xoff_kb * 1e3 * scale100
        xon = cfg.pfc_xon_kb * 1e3 * scale100
        fab = net.is_fabric
        src_host = net.host_of_link[path[:, 0]] if n_f else np.zeros(0, dtype=np.int64)
        n_hosts = len(self.topo.spec.hosts)
        ones_h = np.ones(max(n_hosts, 1))
        line = float(cap_bps[path[:, 0]].max()) if n_f else 100e9
        dt = cfg.dt_us if cfg.dt_us is not None else AUTO_DT_BITS / line * 1e6
        cap_step = cap_bps / 8.0 * dt * 1e-6  # bytes a link serves per step (inf for pad)
        failing = list(self.failures)  # not yet failed
        detecting: list[LinkFailure] = []  # failed, the routing not yet recomputed
        failed_topo = copy.deepcopy(self.topo) if failing else self.topo
        nic_step = np.zeros(max(n_hosts, 1))
        for j in range(n_hosts):
            nic_step[j] = cap_step[2 * len(self.topo.spec.links) + 2 * j]
        rtt = cfg.base_rtt_us or net.base_rtt_us(path, cfg.mtu_bytes, cfg.switch_latency_us)
        real = path != pad
        hop_id = np.where(real, path, -1)
        link_bps_fh = cap_bps[path]
        # columns that carry some flow's link (all-pad positions are skipped)
        cols = [h for h in range(n_h) if real[:, h].any() or wins]
        prev_link = np.full_like(path, pad)
        last = np.full(n_f, pad, dtype=np.int64)
        for h in range(n_h):
            prev_link[:, h] = last
            last = np.where(real[:, h], path[:, h], last)

        dcqcn_p = DcqcnParams().scaled(line)
        cnp_int = (
            cfg.cnp_interval_us if cfg.cnp_interval_us is not None else dcqcn_p.cnp_interval_us
        )
        dc = DcqcnArray(n_f, dcqcn_p) if cfg.control == "dcqcn" else None
        ice = IceArray(n_f, n_h, IceParams().scaled(line, rtt)) if cfg.control == "ice" else None
        ctrl = dc if dc is not None else ice
        pristine = copy.deepcopy(ctrl) if (wins or failing) and ctrl is not None else None
        caps = np.full(n_f, np.inf)

        delay_steps = max(1, round(rtt / dt))
        check_run_size(  # steps and memory bounded before anything is allocated or run
            dt_us=dt,
            max_time_us=cfg.max_time_us,
            delay_steps=delay_steps,
            links=nl,
            flows=n_f,
            hops=n_h,
        )
        hist_tx = np.zeros((delay_steps, nl))
        hist_q = np.zeros((delay_steps, nl))
        hist_t = np.zeros(delay_steps)

        pred = w.pred if w.pred.ndim == 2 else w.pred[:, None]
        has_cols = pred >= 0
        has_pred = has_cols.any(axis=1)
        pred_cols = [
            (np.where(has_cols[:, j], pred[:, j], 0), has_cols[:, j]) for j in range(pred.shape[1])
        ]
        chunk = np.maximum(w.chunk, 1e-9)
        lead = w.lead
        group = w.group
        colls = w.collectives
        n_g = len(colls)
        g_start = np.full(n_g, np.nan)
        g_end = np.full(n_g, np.nan)
        g_flows = np.bincount(group, minlength=n_g) if n_f else np.zeros(n_g, dtype=np.int64)
        started = np.zeros(n_f, dtype=bool)

        sent = np.zeros(n_f)
        deliv = np.zeros(n_f)
        finish = np.full(n_f, np.nan)
        path_t = np.ascontiguousarray(path.T)
        q_t = np.zeros((n_h, n_f))
        q_link = np.zeros(nl)
        q_link_cols = np.zeros((n_h, nl))
        ones_nl = np.ones(nl)
        fab_ids = np.flatnonzero(fab[:-1])
        nq = len(QUEUE_EDGES) + 1
        hist_every = 4
        tx = np.zeros(nl)
        paused_egress = np.zeros(nl, dtype=bool)
        paused = np.zeros(nl, dtype=bool)
        pause_us = np.zeros(nl)
        mark_acc = np.zeros(n_f)
        enq = EnqueueDepth(nl, cfg.ecn_history_steps) if dc is not None else None
        last_cnp = np.full(n_f, -np.inf)
        cnp_queue: deque[tuple[float, np.ndarray]] = deque()  # (arrival at the sender, rows)
        cnp_delay = rtt if cfg.cnp_delay_us is None else cfg.cnp_delay_us
        cnps = 0
        qhist = np.zeros(nq, dtype=np.int64)
        q_max = np.zeros(nl)
        next_cap = 0.0
        cap_queue: deque[tuple[float, np.ndarray]] = deque()  # (reaches the senders, caps)
        first_caps = cfg.caps_ahead  # the first flows' caps were pushed ahead of their start
        total = w.total_bytes
        trace = Trace.empty()
        trace_every = 1
        steps = 0
        last_idle = np.zeros(n_f)  # flowlet: when each flow last injected
        flowlet_moves = 0
        reroutes = 0  # rows moved by a failure's rerouting
        rng = np.random.default_rng(cfg.seed)
        t = 0.0
        hook_every = 500

        def start_ready(now: float) -> None:
            for g, c in enumerate(colls):
                if not np.isnan(g_start[g]):
                    continue
                if any(np.isnan(g_end[a]) for a in c.after):
                    continue
                ready = max((g_end[a] for a in c.after), default=0.0) + c.delay_us
                if ready <= now + 1e-9:
                    g_start[g] = now
                    if g_flows[g] == 0:
                        g_end[g] = now
            started[:] = ~np.isnan(g_start[group]) if n_f else started

        start_ready(0.0)
        est_end = max(1.0, total * 8 / max(line, 1.0) * 1e6)
        trace_every = max(1, int(est_end / dt / 1500))
        while True:
            if np.all(~np.isnan(g_end)):
                break
            if t >= cfg.max_time_us:
                log.warning("stopped at max_time_us=%g with flows unfinished", cfg.max_time_us)
                break
            # ---- 1. injection
            active = started & (sent < size)
            dep = np.full(n_f, np.inf)
            for idx, col in pred_cols:
                dep = np.minimum(dep, np.where(col, deliv[idx], np.inf))
            allowed = np.where(has_pred, np.minimum(size, dep + lead * chunk), size)
            want = np.maximum(allowed - sent, 0.0)
            if dc is not None:
                rate = dc.rates()
            elif ice is not None:
                rate = ice.rates()
            else:
                rate = np.minimum(line, caps)
            inj = np.where(active, np.minimum(rate / 8.0 * dt * 1e-6, want), 0.0)
            if n_f:
                tot = np.bincount(src_host, weights=inj, minlength=nic_step.size)
                sc = np.divide(nic_step, tot, out=ones_h.copy(), where=tot > nic_step)
                inj *= sc[src_host]
                if cfg.pfc:
                    inj[paused[path_t[0]]] = 0.0
            if self.routes.routing == "flowlet" and n_f:
                moved = self._flowlet(t, inj, last_idle, rng, hop_id, link_bps_fh, real)
                if moved:
                    flowlet_moves += moved
                    prev_link = self._prev_links(path, pad)
                    path_t = np.ascontiguousarray(path.T)
            sent += inj
            # ---- 2. queues, position by position
            x = inj
            for h in cols:
                lk = path_t[h]
                backlog = q_t[h] + x
                b = np.bincount(lk, weights=backlog, minlength=nl)
                serve = np.minimum(b, cap_step)
                if cfg.pfc:
                    serve[paused] = 0.0
                frac = np.divide(serve, b, out=ones_nl.copy(), where=b > 0)
                x = backlog * frac[lk]
                q_t[h] = backlog - x
                q_link = q_link_cols[h]
                q_link[:] = np.bincount(lk, weights=q_t[h], minlength=nl)
                tx += serve
            tx[pad] = 0.0
            deliv += x
            q_link = q_link_cols[cols].sum(axis=0) if len(cols) > 1 else q_link_cols[cols[0]]
            q_link[pad] = 0.0
            np.maximum(q_max, q_link, out=q_max)
            if steps % hist_every == 0:
                qhist += np.bincount(np.searchsorted(QUEUE_EDGES, q_link[fab_ids]), minlength=nq)
            t += dt
            steps += 1
            # ---- 3. ECN marks and CNPs
            if dc is not None:
                assert enq is not None
                q_enq = enq.update(q_link, tx, kmin)
                over = q_enq > kmin
                if over.any():
                    p_l = np.zeros(nl)
                    ramp = cfg.ecn_pmax * (q_enq[over] - kmin[over]) / kspan[over]
                    p_l[over] = np.where(q_enq[over] > kmax[over], 1.0, ramp)
                    keep = np.log1p(-np.minimum(p_l, 1.0 - 1e-12))
                    lsum = keep[path_t[cols[0]]].copy()
                    for h in cols[1:]:
                        lsum += keep[path_t[h]]
                    eligible = t - last_cnp >= cnp_int
                    mark_acc += np.where(eligible, x * (-np.expm1(lsum) / cfg.mtu_bytes), 0.0)
                    rows = np.flatnonzero(eligible & (mark_acc >= 1.0))
                    if rows.size:
                        last_cnp[rows] = t
                        mark_acc[rows] = 0.0
                        cnps += rows.size
                        cnp_queue.append((t + cnp_delay, rows))
                while cnp_queue and cnp_queue[0][0] <= t + 1e-9:
                    dc.on_cnp(cnp_queue.popleft()[1], t)
                sending = np.flatnonzero(inj > 0)
                dc.on_bytes_sent(sending, inj[sending])
                dc.on_timer(t)
            # ---- INT feedback (ICE)
            slot = steps % delay_steps
            if ice is not None:
                old = (slot + 1) % delay_steps if steps >= delay_steps else 0
                rows = np.flatnonzero(active)
                if rows.size and steps >= delay_steps:
                    every = rows.size == n_f
                    pr = path if every else path[rows]
                    re = real if every else real[rows]
                    ice.on_feedback(
                        rows,
                        t,
                        hop_id if every else hop_id[rows],
                        link_bps_fh if every else link_bps_fh[rows],
                        hist_tx[old][pr],
                        np.where(re, hist_t[old], 0.0),
                        hist_q[old][pr],
                    )
            hist_tx[slot] = tx
            hist_q[slot] = q_link
            hist_t[slot] = t
            # ---- PFC
            if cfg.pfc:
                paused_egress = np.where(
                    q_link > xoff, True, np.where(q_link < xon, False, paused_egress)
                )
                paused_egress[pad] = False
                paused[:] = False
                pe = paused_egress[path] & real
                if pe.any():
                    paused[prev_link[pe]] = True
                    paused[pad] = False
                pause_us[paused] += dt
            # ---- windowed all-to-all: slots start their next peers on re-armed rows
            for wr in wins:
                rows, new = wr.advance(size, sent, deliv, inj, x)
                if rows.size == 0:
                    continue
                retired += float(size[rows].sum())
                size[rows] = wr.spec.pair_bytes
                sent[rows] = deliv[rows] = mark_acc[rows] = 0.0
                finish[rows] = np.nan
                last_cnp[rows] = -np.inf
                q_t[:, rows] = 0.0
                path[rows] = new
                path_t[:, rows] = new.T
                real[rows] = new != pad
                hop_id[rows] = np.where(real[rows], new, -1)
                link_bps_fh[rows] = cap_bps[new]
                prev_link[rows] = self._prev_links(new, pad)
                if ctrl is not None and pristine is not None:
                    reset_rows(ctrl, pristine, rows)
                gone = np.zeros(n_f, dtype=bool)
                gone[rows] = True
                for k, (when, r) in enumerate(cnp_queue):  # CNPs of the old QPs
                    cnp_queue[k] = (when, r[~gone[r]])
            # ---- link failures: the link stops at once; after the detection delay the routing
            # is recomputed on the live links and every unfinished row whose path changed moves
            # (its bytes in flight are lost and sent again: go-back-N)
            while failing and t >= failing[0].at_us - 1e-9:
                fl = failing.pop(0)
                cap_step[failed_topo.fail_link(fl.link)] = 0.0
                detecting.append(fl)
            if detecting and t >= detecting[0].at_us + detecting[0].detect_us - 1e-9:
                detecting.pop(0)
                new_routes, self.state = self._route(failed_topo)
                new = new_routes.path
                shifted = np.flatnonzero(
                    (new != path).any(axis=1) & ~(deliv >= size * (1 - 1e-9) - 1e-6)
                )
                reroutes += int(shifted.size)
                if shifted.size:
                    lost = q_t[:, shifted].sum(axis=0)
                    sent[shifted] -= lost
                    q_t[:, shifted] = 0.0
                    path[shifted] = new[shifted]
                    path_t[:, shifted] = new[shifted].T
                    real[shifted] = new[shifted] != pad
                    hop_id[shifted] = np.where(real[shifted], new[shifted], -1)
                    link_bps_fh[shifted] = cap_bps[new[shifted]]
                    prev_link[shifted] = self._prev_links(new[shifted], pad)
                    if ice is not None and pristine is not None:
                        reset_rows(ice, pristine, shifted)
                        ice.set_caps(caps)
                if new_routes.bucket_table is not None:
                    self.routes.bucket_table = new_routes.bucket_table
                    self.routes.aligned_table = new_routes.aligned_table
            # ---- completions and starts
            newly = np.isnan(finish) & (deliv >= size * (1 - 1e-9) - 1e-6) & started
            if newly.any():
                finish[newly] = t
                for g in np.unique(group[newly]).tolist():
                    fl = group == g
                    if not np.isnan(finish[fl]).any():
                        g_end[g] = t
                start_ready(t)
            elif np.isnan(g_start).any():
                start_ready(t)
            # ---- controller caps
            if cfg.use_caps and t >= next_cap:
                next_cap = t + cfg.cap_interval_us
                act = np.flatnonzero(started & np.isnan(finish) & ~windowed)
                if act.size:
                    rp = path[act]
                    ok = rp != pad
                    fe = np.repeat(np.arange(act.size), ok.sum(axis=1))
                    le = rp[ok]
                    rates = max_min_fill(fe, le, cap_bps[: net.n_links], act.size)
                    new_caps = np.full(n_f, np.inf)
                    new_caps[act] = np.maximum(rates, 1.0)
                    cap_queue.append((t if first_caps else t + cfg.cap_delay_us, new_caps))
                    first_caps = False
            while cap_queue and cap_queue[0][0] <= t:
                caps = cap_queue.popleft()[1]
                if dc is not None:
                    dc.set_caps(caps)
                if ice is not None:
                    ice.set_caps(caps)
            if steps % trace_every == 0:
                trace.add(
                    t,
                    goodput_bps=float(x.sum()) * 8 / (dt * 1e-6),
                    max_queue=float(q_link[:-1][fab[:-1]].max()) if fab.any() else 0.0,
                    active=int(active.sum()),
                    paused=int(paused.sum()),
                )
            if progress is not None and steps % hook_every == 0:
                progress((retired + float(deliv.sum())) / total if total else 1.0, t)
        if progress is not None:
            progress((retired + float(deliv.sum())) / total if total else 1.0, t)
        wall = time.perf_counter() - wall0
        return self._result(
            t=t,
            wall=wall,
            steps=steps,
            finish=finish,
            g_start=g_start,
            g_end=g_end,
            tx=tx,
            q_max=q_max,
            qhist=qhist,
            pause_us=pause_us,
            cnps=cnps,
            trace=trace,
            rtt=rtt,
            flowlet_moves=flowlet_moves,
            dt=dt,
            reroutes=reroutes,
        )

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _prev_links(path: np.ndarray, pad: int) -> np.ndarray:
        prev = np.full_like(path, pad)
        last = np.full(path.shape[0], pad, dtype=np.int64)
        for h in range(path.shape[1]):
            prev[:, h] = last
            last = np.where(path[:, h] != pad, path[:, h], last)
        return prev

    def _flowlet(
        self,
        t: float,
        inj: np.ndarray,
        last_sent: np.ndarray,
        rng: np.random.Generator,
        hop_id: np.ndarray,
        link_bps: np.ndarray,
        real: np.ndarray,
    ) -> int:
        """Flows that resume after an idle gap >= flowlet_gap draw a new bucket (ice.p4's
        flowlet mode); their queued bytes stay where they are. Returns how many moved."""
        r = self.routes
        assert r.bucket_table is not None and r.aligned_table is not None
        resume = np.flatnonzero((inj > 0) & (t - last_sent >= self.cfg.flowlet_gap_us))
        last_sent[inj > 0] = t
        if resume.size == 0 or self.state is None:
            return 0
        buckets = rng.integers(0, r.bucket_table.shape[1], size=resume.size)
        pid = r.bucket_table[resume, buckets]
        moved = 0
        for i, p in zip(resume.tolist(), pid.tolist(), strict=True):
            new = self.net.host_path(self.state, i, r.aligned_table[p])
            if not np.array_equal(new, r.path[i]):
                r.path[i] = new
                moved += 1
        if moved:
            real[:] = r.path != self.net.pad
            hop_id[:] = np.where(real, r.path, -1)
            link_bps[:] = self._payload_bps[r.path]
        return moved

    def _result(
        self,
        *,
        t: float,
        wall: float,
        steps: int,
        finish: np.ndarray,
        g_start: np.ndarray,
        g_end: np.ndarray,
        tx: np.ndarray,
        q_max: np.ndarray,
        qhist: np.ndarray,
        pause_us: np.ndarray,
        cnps: int,
        trace: Trace,
        rtt: float,
        flowlet_moves: int,
        dt: float,
        reroutes: int = 0,
    ) -> SimResult:
        net = self.net
        w = self.work
        colls = []
        for c in w.collectives:
            s, e = float(g_start[c.index]), float(g_end[c.index])
            done = not (np.isnan(s) or np.isnan(e))
            dur = e - s if done else float("nan")
            nic = self._nic_rate(c.index)
            algbw = c.message_bytes * 8 / (dur * 1e-6) if done and dur > 0 else 0.0
            factor = busbw_factor(c.collective, max(c.ranks, 1))
            busbw = algbw * factor
            colls.append(
                CollectiveResult(
                    index=c.index,
                    job=c.job,
                    phase=c.phase,
                    iteration=c.iteration,
                    collective=c.collective,
                    algorithm=c.algorithm,
                    ranks=c.ranks,
                    flows=int((w.group == c.index).sum()),
                    message_bytes=c.message_bytes,
                    start_us=s,
                    end_us=e,
                    time_us=dur,
                    algbw_bps=algbw,
                    busbw_bps=busbw,
                    nic_bps=nic,
                    busbw_over_bound=busbw / nic if nic > 0 else 0.0,
                )
            )
        fab = net.is_fabric[:-1]
        capb = net.cap_bps[:-1] / 8.0
        util = tx[:-1] / (capb * max(t, 1e-9) * 1e-6)
        return SimResult.build(
            topology=self.topo.spec.name,
            config=self.cfg,
            flows=len(w),
            sim_time_us=t,
            wall_s=wall,
            route_s=self.route_s,
            steps=steps,
            collectives=colls,
            fabric_util=util[fab],
            fabric_names=[self.topo.link_name(i) for i in np.flatnonzero(fab).tolist()],
            queue_hist=qhist,
            fabric_qmax=q_max[:-1][fab],
            pause_us=pause_us[:-1],
            cnps=cnps,
            unfinished=int(np.isnan(finish).sum()),
            trace=trace,
            base_rtt_us=rtt,
            flowlet_moves=flowlet_moves,
            dt_us=dt,
            flow_finish_us=finish,
            reroutes=reroutes,
        )

    def _nic_rate(self, g: int) -> float:
        """The slowest NIC among the collective's senders (the non-blocking bound's B)."""
        rows = np.flatnonzero(self.work.group == g)
        if rows.size == 0:
            return 0.0
        return float(self.net.cap_bps[self.routes.path[rows, 0]].min())
