"""DCQCN and ICE over arrays of flows: the same algorithms as :class:`Dcqcn` and :class:`IceRate`,
one numpy array per state variable, for the fluid simulator (``sim/``) where thousands of flows
step together and per-flow objects would cost a Python call per flow per step. Any other
registered algorithm runs there as one object per flow behind the same interface
(:class:`RateObjects`).

Same parameters (:class:`DcqcnParams`, :class:`IceParams`, already scaled), same rules, same
order of updates; ``tests/unit/traffic/test_rate_vector.py`` drives a scalar object per flow and
one array with the same random event sequences and checks every rate after every event. A flow's
"no cap" is ``inf`` here (``None`` there); "no timer" / "never" is ``nan``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from icefabric.traffic.rate.base import HopSample, RateControl
from icefabric.traffic.rate.dcqcn import DcqcnParams
from icefabric.traffic.rate.ice import IceParams

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class DcqcnArray:
    """DCQCN reaction points of ``n`` flows (see :mod:`icefabric.traffic.rate.dcqcn`)."""

    def __init__(self, n: int, params: DcqcnParams | None = None) -> None:
        p = params if params is not None else DcqcnParams()
        self.params = p
        self.n = n
        self.cap = np.full(n, np.inf)
        self.rc = np.full(n, p.line_rate_bps * min(1.0, p.initial_rate_fraction))
        self.rt = self.rc.copy()
        self.alpha = np.full(n, p.initial_alpha)
        self.period_start = np.full(n, np.nan)
        self.cnp_in_period = np.zeros(n, dtype=bool)
        self.last_decrease = np.full(n, -np.inf)
        self.timer_stage = np.zeros(n, dtype=np.int64)
        self.byte_stage = np.zeros(n, dtype=np.int64)
        self.bytes = np.zeros(n)
        self.next_timer = np.full(n, np.nan)
        self.cnps = np.zeros(n, dtype=np.int64)
        self.decreases = np.zeros(n, dtype=np.int64)

    def ceiling(self) -> FloatArray:
        """min(line rate, cap) per flow."""
        out: FloatArray = np.minimum(self.params.line_rate_bps, self.cap)
        return out

    def rates(self) -> FloatArray:
        """Current rate Rc per flow, never above the cap."""
        out: FloatArray = np.minimum(self.rc, self.ceiling())
        return out

    def set_caps(self, caps: FloatArray, rows: IntArray | None = None) -> None:
        """Set caps (``inf``: none) of ``rows`` (all by default); Rc and Rt are pulled down."""
        r = np.arange(self.n) if rows is None else rows
        if np.any(~(caps > 0)):
            raise ValueError("DcqcnArray.set_caps: caps must be > 0 (inf for none)")
        self.cap[r] = caps
        c = np.minimum(self.params.line_rate_bps, self.cap[r])
        self.rc[r] = np.minimum(self.rc[r], c)
        self.rt[r] = np.minimum(self.rt[r], c)

    def at_ceiling(self, rows: IntArray) -> BoolArray:
        """Rc and Rt both at the ceiling."""
        c = np.minimum(self.params.line_rate_bps, self.cap[rows])
        out: BoolArray = (self.rc[rows] >= c) & (self.rt[rows] >= c)
        return out

    def on_cnp(self, rows: IntArray, now_us: float) -> None:
        """A CNP for each of ``rows`` (distinct flows) at ``now_us``."""
        if rows.size == 0:
            return
        p = self.params
        self._advance_alpha(rows, now_us)
        self.cnps[rows] += 1
        fresh = np.isnan(self.period_start[rows])
        self.period_start[rows[fresh]] = now_us
        self.cnp_in_period[rows] = True
        r = rows[now_us - self.last_decrease[rows] >= p.decrease_interval_us]
        if r.size == 0:
            return
        self.last_decrease[r] = now_us
        self.decreases[r] += 1
        rc = self.rc[r]
        self.rt[r] = rc
        cut = rc * (1.0 - self.alpha[r] / 2.0)
        new = np.maximum(np.maximum(cut, rc * p.min_decrease_factor), p.min_rate_bps)
        self.rc[r] = np.minimum(new, np.minimum(p.line_rate_bps, self.cap[r]))
        self.timer_stage[r] = 0
        self.byte_stage[r] = 0
        self.bytes[r] = 0.0
        self.next_timer[r] = now_us + p.timer_us

    def on_bytes_sent(self, rows: IntArray, nbytes: FloatArray) -> None:
        """``rows`` put ``nbytes`` on the wire; every ``byte_counter_bytes`` is an increase."""
        if rows.size == 0:
            return
        b = float(self.params.byte_counter_bytes)
        live = ~self.at_ceiling(rows)
        r = rows[live]
        self.bytes[r] += nbytes[live]
        while r.size:
            r = r[self.bytes[r] >= b]
            if r.size == 0:
                break
            self.bytes[r] -= b
            self.byte_stage[r] += 1
            self._increase(r)

    def on_timer(self, now_us: float) -> None:
        """Run every increase-timer expiry due by ``now_us``."""
        while True:
            due = np.flatnonzero(self.next_timer <= now_us)  # nan compares False
            if due.size == 0:
                return
            self.timer_stage[due] += 1
            self._increase(due)
            top = self.at_ceiling(due)
            self.next_timer[due[top]] = np.nan
            self.next_timer[due[~top]] += self.params.timer_us

    def _advance_alpha(self, rows: IntArray, now_us: float) -> None:
        start = self.period_start[rows]
        k = self.params.alpha_interval_us
        with np.errstate(invalid="ignore"):
            periods = np.floor((now_us - start) / k)
        sel = ~np.isnan(start) & (periods > 0)
        if not sel.any():
            return
        r = rows[sel]
        per = periods[sel]
        g = self.params.g
        hit = self.cnp_in_period[r]
        a = self.alpha[r]
        a = np.where(hit, (1.0 - g) * a + g, a)
        per = per - hit
        self.cnp_in_period[r] = False
        self.alpha[r] = a * (1.0 - g) ** per
        self.period_start[r] = start[sel] + np.floor((now_us - start[sel]) / k) * k

    def _increase(self, r: IntArray) -> None:
        p = self.params
        f = p.fast_recovery_steps
        low = np.minimum(self.timer_stage[r], self.byte_stage[r])
        high = np.maximum(self.timer_stage[r], self.byte_stage[r])
        step = np.where(
            high < f, 0.0, np.where(low < f, p.ai_rate_bps, (low - f + 1) * p.hai_rate_bps)
        )
        c = np.minimum(p.line_rate_bps, self.cap[r])
        rt = np.minimum(self.rt[r] + step, c)
        rc = np.minimum((rt + self.rc[r]) / 2.0, c)
        rc = np.where(c - rc < 1e-9 * c, c, rc)
        self.rt[r] = rt
        self.rc[r] = rc


class IceArray:
    """ICE's HPCC-style rate control of ``n`` flows with paths of up to ``hops`` hops."""

    def __init__(self, n: int, hops: int, params: IceParams | None = None) -> None:
        p = params if params is not None else IceParams()
        self.params = p
        self.n = n
        self.hops = hops
        self.cap = np.full(n, np.inf)
        self.rate = np.full(n, p.line_rate_bps * min(1.0, p.initial_rate_fraction))
        self.ref = self.rate.copy()
        self.u = np.zeros(n)
        self.stage = np.zeros(n, dtype=np.int64)
        self.anchored = np.zeros(n, dtype=bool)
        self.queued = np.zeros(n, dtype=bool)  # the last record showed a standing queue
        self.last_ref_update = np.full(n, np.nan)
        self.prev_hop = np.full((n, hops), -1, dtype=np.int64)  # (switch, port) as one id
        self.prev_tx = np.zeros((n, hops))
        self.prev_ts = np.zeros((n, hops))
        self.prev_q = np.zeros((n, hops))
        self.feedbacks = np.zeros(n, dtype=np.int64)

    def ceiling(self) -> FloatArray:
        """min(line rate, cap) per flow."""
        out: FloatArray = np.minimum(self.params.line_rate_bps, self.cap)
        return out

    def rates(self) -> FloatArray:
        """Current rate per flow, never above the cap."""
        out: FloatArray = np.minimum(self.rate, self.ceiling())
        return out

    def set_caps(self, caps: FloatArray, rows: IntArray | None = None) -> None:
        """Set caps (``inf``: none) of ``rows`` (all by default): anchored rows go to their cap,
        the others are pulled down to it; a row's unchanged cap changes nothing (as
        :meth:`IceRate.set_cap`)."""
        r = np.arange(self.n) if rows is None else rows
        if np.any(~(caps > 0)):
            raise ValueError("IceArray.set_caps: caps must be > 0 (inf for none)")
        changed = self.cap[r] != caps  # the cap a row already has changes nothing
        r = r[changed]
        self.cap[r] = np.broadcast_to(caps, changed.shape)[changed]
        c = np.minimum(self.params.line_rate_bps, self.cap[r])
        # a cap never lifts a flow over a standing queue (IceRate.set_cap)
        anchored = np.isfinite(self.cap[r]) & self.params.anchor & ~self.queued[r]
        self.anchored[r] = anchored
        self.rate[r] = np.where(anchored, c, np.minimum(self.rate[r], c))
        self.ref[r] = np.where(anchored, c, np.minimum(self.ref[r], c))
        self.stage[r] = np.where(anchored, 0, self.stage[r])

    def on_feedback(
        self,
        rows: IntArray,
        now_us: float,
        hop_id: IntArray,
        link_bps: FloatArray,
        tx_bytes: FloatArray,
        ts_us: FloatArray,
        qdepth_bytes: FloatArray,
    ) -> None:
        """One INT path record per flow of ``rows`` (distinct, ascending); hop arrays are
        [len(rows), hops] with ``hop_id`` < 0 where a path has no such hop."""
        if rows.size == 0:
            return
        p = self.params
        t = p.base_rtt_us
        # every flow at once (the simulator's usual case): views instead of gathered copies
        sel: IntArray | slice = slice(None) if rows.size == self.n else rows
        present = hop_id >= 0
        valid = present & (link_bps > 0)
        same = present & (self.prev_hop[sel] == hop_id)
        dt = ts_us - self.prev_ts[sel]
        ok = valid & same & (dt > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            tx_bps = (tx_bytes - self.prev_tx[sel]) * 8.0 / (dt * 1e-6)
            # records a base RTT or more apart: the current queue (IceRate.on_feedback)
            queue = np.where(dt >= t, qdepth_bytes, np.minimum(qdepth_bytes, self.prev_q[sel]))
            q_term = queue * 8.0 / (link_bps * t * 1e-6)
            u = q_term + tx_bps / link_bps
        u[~ok] = -1.0
        ceiling = np.minimum(p.line_rate_bps, self.cap[sel])
        burst = p.frame_bytes * 8.0 / (ceiling * t * 1e-6)  # IceParams.anchor_threshold
        threshold = np.maximum(p.anchor_queue_bdp, burst)
        queued_all = np.any(ok & (q_term > threshold[:, None]), axis=1)
        # remember this record (every present hop; absent hops forget theirs, as the scalar)
        self.prev_hop[sel] = np.where(present, hop_id, -1)
        self.prev_tx[sel] = np.where(present, tx_bytes, 0.0)
        self.prev_ts[sel] = np.where(present, ts_us, 0.0)
        self.prev_q[sel] = np.where(present, qdepth_bytes, 0.0)
        best = np.argmax(u, axis=1)
        k = np.arange(rows.size)
        u_max = u[k, best]
        upd = u_max >= 0
        if not upd.any():
            return
        tau = np.where(ok[k, best], dt[k, best], t)
        r = rows[upd]
        queued = queued_all[upd]
        self.feedbacks[r] += 1
        self.queued[r] = queued
        tau = np.minimum(tau[upd], t)
        self.u[r] = (1.0 - tau / t) * self.u[r] + (tau / t) * u_max[upd]
        # anchored rows: stay at the cap as planned, or leave for HPCC's rule on a standing queue
        was = self.anchored[r]
        leave = was & queued
        self.anchored[r[leave]] = False
        self.stage[r[leave]] = 0
        go = ~was | leave
        r = r[go]
        queued = queued[go]
        last = self.last_ref_update[r]
        update_ref = leave[go] | np.isnan(last) | (now_us - last >= t)
        ramp = np.isfinite(self.cap[r]) & ~queued if p.anchor else np.zeros(r.size, dtype=bool)
        rtts = np.where(np.isnan(last), 1.0, np.maximum(1.0, (now_us - last) / t))
        self._compute(r, update_ref, ramp, rtts)
        self.last_ref_update[r[update_ref]] = now_us
        if p.anchor:  # back at the plan's rate with no queue left
            c = np.minimum(p.line_rate_bps, self.cap[r])
            back = r[np.isfinite(self.cap[r]) & ~queued & (self.rate[r] >= c)]
            self.anchored[back] = True
            self.ref[back] = self.rate[back]
            self.stage[back] = 0

    def _compute(
        self, r: IntArray, update_ref: BoolArray, ramp: BoolArray, rtts: FloatArray
    ) -> None:
        p = self.params
        u = self.u[r]
        c = np.minimum(p.line_rate_bps, self.cap[r])
        capped = np.isfinite(self.cap[r])
        ai = np.where(capped, (1.0 - p.eta) * c, p.ai_rate_bps) if p.derived_ai else p.ai_rate_bps
        mult = ~ramp & ((u >= p.eta) | (self.stage[r] >= p.max_stage))
        rate = np.where(
            mult,
            self.ref[r] / np.maximum(u / p.eta, 1e-9) + ai,
            self.ref[r] + np.where(ramp, ai * rtts, ai),
        )
        stage = self.stage[r]
        self.stage[r] = np.where(update_ref, np.where(mult | ramp, 0, stage + 1), stage)
        rate = np.minimum(np.maximum(rate, p.min_rate_bps), c)
        self.rate[r] = rate
        self.ref[r] = np.where(update_ref, rate, self.ref[r])


class RateObjects:
    """Any registered rate algorithm without an array form: one object per flow behind the
    arrays' interface (the simulator calls it as it calls :class:`DcqcnArray` /
    :class:`IceArray`).

    A Python call per flow per event, so for a new algorithm's first runs and tests rather than
    100,000-flow runs; an array form (as the two above) is the way to scale one. INT records
    reach the objects as :class:`HopSample` with the simulator's link id as ``switch_id`` and
    port 0 (one id per hop, which is all a per-hop algorithm keys on).
    """

    def __init__(self, n: int, make: Callable[[], RateControl], *, needs_int: bool) -> None:
        self.n = n
        self.needs_int = needs_int
        self._make = make
        self.flows = [make() for _ in range(n)]
        self.cap = np.full(n, np.inf)

    def rates(self) -> FloatArray:
        """Every flow's rate (bit/s), never above its cap."""
        return np.fromiter((f.rate_bps() for f in self.flows), dtype=np.float64, count=self.n)

    def set_caps(self, caps: FloatArray, rows: IntArray | None = None) -> None:
        """Set caps (``inf``: none) of ``rows`` (all by default)."""
        r = np.arange(self.n) if rows is None else rows
        if np.any(~(caps > 0)):
            raise ValueError("RateObjects.set_caps: caps must be > 0 (inf for none)")
        self.cap[r] = caps
        for i in r.tolist():
            c = float(self.cap[i])
            self.flows[i].set_cap(c if np.isfinite(c) else None)

    def on_cnp(self, rows: IntArray, now_us: float) -> None:
        """A CNP for each flow of ``rows``."""
        for i in rows.tolist():
            self.flows[i].on_cnp(now_us)

    def on_bytes_sent(self, rows: IntArray, nbytes: FloatArray, now_us: float) -> None:
        """Each flow of ``rows`` put ``nbytes`` on the wire."""
        for i, b in zip(rows.tolist(), nbytes.tolist(), strict=True):
            self.flows[i].on_bytes_sent(now_us, int(b))

    def on_timer(self, now_us: float) -> None:
        """Run every flow's timer that is due."""
        for f in self.flows:
            due = f.next_timer_us()
            if due is not None and due <= now_us:
                f.on_timer(now_us)

    def on_feedback(
        self,
        rows: IntArray,
        now_us: float,
        hop_id: IntArray,
        link_bps: FloatArray,
        tx_bytes: FloatArray,
        ts_us: FloatArray,
        qdepth_bytes: FloatArray,
    ) -> None:
        """One INT path record per flow of ``rows`` (as :meth:`IceArray.on_feedback`)."""
        for k, i in enumerate(rows.tolist()):
            hops = [
                HopSample(
                    switch_id=int(hop_id[k, h]),
                    port=0,
                    link_bps=float(link_bps[k, h]),
                    tx_bytes=int(tx_bytes[k, h]),
                    ts_us=float(ts_us[k, h]),
                    qdepth_bytes=int(qdepth_bytes[k, h]),
                )
                for h in np.flatnonzero(hop_id[k] >= 0).tolist()
            ]
            self.flows[i].on_feedback(now_us, hops)

    def renew(self, rows: IntArray) -> None:
        """``rows`` start over as new queue pairs: fresh objects, no cap."""
        for i in rows.tolist():
            self.flows[i] = self._make()
        self.cap[rows] = np.inf
