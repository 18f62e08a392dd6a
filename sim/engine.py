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
   when the controller knew the job before it started: caps are computed at the start of a
   step, before the flows inject (computed at its end, the first step ran uncapped at the
   line rate, and the queue it left behind threw ICE's anchored flows off their caps).

A windowed all-to-all (``window.py``) re-arms its rows after each step: a row whose last flow has
left the fabric takes the next peer's flow (its path, a new QP's rate state, no cap).

A link failure (``LinkFailure``) stops the link at once; ``detect_us`` later the routing is
recomputed on the live links and the unfinished rows whose path changed move.

This module routes the flows and drives the loop; the arrays of a run and one method per phase
of a step are ``fluid.FluidRun`` (a new phase or a new rate control is a method there and one
line in ``Simulator.run``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from icefabric.control.planner.state import PlanState
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.fluid import AUTO_DT_BITS, FluidRun
from icefabric.sim.network import Routes, SimNetwork, route
from icefabric.sim.results import CollectiveResult, SimResult
from icefabric.sim.workload import Workload

log = logging.getLogger(__name__)

ProgressHook = Callable[[float, float], None]  # (fraction of bytes delivered, sim time us)
HOOK_EVERY = 500  # steps between calls of the progress hook
__all__ = ["AUTO_DT_BITS", "LinkFailure", "ProgressHook", "Simulator", "busbw_factor"]


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
            routes, self.state = self.route_on(topo)
        self.routes = routes
        self.route_s = time.perf_counter() - t0

    def route_on(self, topo: Topology) -> tuple[Routes, PlanState]:
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
        wall0 = time.perf_counter()
        st = FluidRun(self)
        max_t = self.cfg.max_time_us
        while not st.done:
            if st.t >= max_t:
                log.warning("stopped at max_time_us=%g with flows unfinished", max_t)
                break
            st.cap()
            inj, active = st.inject()
            x = st.serve(inj)
            st.mark(inj, x)
            st.feedback(active)
            st.pause()
            st.rearm(inj, x)
            st.fail()
            st.complete()
            st.record(x, active)
            if progress is not None and st.steps % HOOK_EVERY == 0:
                progress(st.delivered_fraction(), st.t)
        if progress is not None:
            progress(st.delivered_fraction(), st.t)
        return self._result(st, time.perf_counter() - wall0)

    # ------------------------------------------------------------------ helpers

    def _result(self, st: FluidRun, wall: float) -> SimResult:
        t = st.t
        g_start, g_end, tx = st.g_start, st.g_end, st.tx
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
            steps=st.steps,
            collectives=colls,
            fabric_util=util[fab],
            fabric_names=[self.topo.link_name(i) for i in np.flatnonzero(fab).tolist()],
            queue_hist=st.qhist,
            fabric_qmax=st.q_max[:-1][fab],
            pause_us=st.pause_us[:-1],
            cnps=st.cnps,
            unfinished=int(np.isnan(st.finish).sum()),
            trace=st.trace,
            base_rtt_us=st.rtt,
            flowlet_moves=st.flowlet_moves,
            dt_us=st.dt,
            flow_finish_us=st.finish,
            reroutes=st.reroutes,
        )

    def _nic_rate(self, g: int) -> float:
        """The slowest NIC among the collective's senders (the non-blocking bound's B)."""
        rows = np.flatnonzero(self.work.group == g)
        if rows.size == 0:
            return 0.0
        return float(self.net.cap_bps[self.routes.path[rows, 0]].min())
