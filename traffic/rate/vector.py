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
        self.moved = np.zeros(n, dtype=bool)  # a capped flow's path moved since its cap came
        self.last_ref_update = np.full(n, np.nan)
        self.prev_hop = np.full((n, hops), -1, dtype=np.int64)  # (switch, port) as one id
        self.prev_tx = np.zeros((n, hops))
        self.prev_ts = np.zeros((n, hops))
        self.prev_q = np.zeros((n, hops))
        # True: the row's previous record is the last one given to on_link_feedback (kept in
        # ``_rec``, on the links of ``prev_hop``) and its prev_tx / prev_ts / prev_q are stale
        self.prev_in_rec = np.zeros(n, dtype=bool)
        self._rec: tuple[FloatArray, FloatArray, float] | None = None  # (tx, queue, ts) per link
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
        # the cap a row already has changes nothing, unless its path moved since (IceRate)
        changed = (self.cap[r] != caps) | self.moved[r]
        r = r[changed]
        self.cap[r] = np.broadcast_to(caps, changed.shape)[changed]
        self.moved[r] = False
        c = np.minimum(self.params.line_rate_bps, self.cap[r])
        # a cap never lifts a flow over a standing queue (IceRate.set_cap)
        anchored = np.isfinite(self.cap[r]) & self.params.anchor & ~self.queued[r]
        self.anchored[r] = anchored
        self.rate[r] = np.where(anchored, c, np.minimum(self.rate[r], c))
        self.ref[r] = np.where(anchored, c, np.minimum(self.ref[r], c))
        self.stage[r] = np.where(anchored, 0, self.stage[r])

    def start_at(self, rows: IntArray, rates: FloatArray) -> None:
        """Rate and reference of ``rows`` that have had no feedback to ``rates`` (within
        [min rate, line]), as :meth:`IceRate.start_at`."""
        p = self.params
        fresh = rows[self.feedbacks[rows] == 0]
        r = np.clip(
            np.asarray(rates, dtype=np.float64)[self.feedbacks[rows] == 0],
            p.min_rate_bps,
            p.line_rate_bps,
        )
        self.rate[fresh] = r
        self.ref[fresh] = r

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
        self._unrecord(self.prev_in_rec)
        # every flow at once (the simulator's usual case): views instead of gathered copies
        sel: IntArray | slice = slice(None) if rows.size == self.n else rows
        u_max, tau, queued = self._hop_terms(sel, hop_id, link_bps, tx_bytes, ts_us, qdepth_bytes)
        self._react(rows, now_us, u_max, tau, queued)

    def on_link_feedback(
        self,
        rows: IntArray,
        now_us: float,
        hop_id: IntArray,
        link_bps: FloatArray,
        tx_bytes: FloatArray,
        qdepth_bytes: FloatArray,
        ts_us: float,
    ) -> None:
        """INT records where every hop is a link of one table (the fluid simulator's): as
        :meth:`on_feedback` with ``hop_id`` [len(rows), hops] holding link ids (< 0: no such
        hop) and each present hop's record gathered from the per-link ``link_bps``,
        ``tx_bytes``, ``qdepth_bytes``, all taken at ``ts_us``; the same state bit for bit
        (tested), but a row whose previous record was the last call's, on the same links,
        reads its hops' utilisation from one computation per link instead of one per hop."""
        if rows.size == 0:
            return
        sel: IntArray | slice = slice(None) if rows.size == self.n else rows
        fresh = self.prev_in_rec[sel].copy()
        prev_hop = self.prev_hop[sel]
        for h in range(hop_id.shape[1]):  # column by column: numpy's row reductions are slow
            fresh &= prev_hop[:, h] == hop_id[:, h]
        # rows that keep the last record as their previous one: those that get none now, and
        # those whose links changed (the per-hop arithmetic below takes them)
        keep = self.prev_in_rec.copy()
        keep[rows[fresh]] = False
        self._unrecord(keep)
        f = np.flatnonzero(fresh)
        o = np.flatnonzero(~fresh)
        if f.size == rows.size:
            u_max, tau, queued = self._link_terms(
                sel, hop_id, link_bps, tx_bytes, qdepth_bytes, ts_us
            )
        else:
            u_max = np.empty(rows.size)
            tau = np.empty(rows.size)
            queued = np.empty(rows.size, dtype=bool)
            if f.size:
                u_max[f], tau[f], queued[f] = self._link_terms(
                    rows[f], hop_id[f], link_bps, tx_bytes, qdepth_bytes, ts_us
                )
        if o.size:  # the per-hop arithmetic, on the hop arrays on_feedback would be given
            ho = hop_id[o]
            u_max[o], tau[o], queued[o] = self._hop_terms(
                rows[o],
                ho,
                link_bps[ho],
                tx_bytes[ho],
                np.where(ho >= 0, ts_us, 0.0),
                qdepth_bytes[ho],
            )
        self.prev_in_rec[sel] = True
        self._rec = (tx_bytes.copy(), qdepth_bytes.copy(), ts_us)
        self._react(rows, now_us, u_max, tau, queued)

    def _link_terms(
        self,
        sel: IntArray | slice,
        hop_id: IntArray,
        link_bps: FloatArray,
        tx_bytes: FloatArray,
        qdepth_bytes: FloatArray,
        ts_us: float,
    ) -> tuple[FloatArray, FloatArray, BoolArray]:
        """:meth:`_hop_terms` of rows whose previous record is ``_rec`` on the same links:
        each link's u and queue term computed once, with the same operands, so the same
        bits; the most loaded hop is the first of the largest u, as np.argmax (u is never
        nan: a hop without a comparable record has -1)."""
        assert self._rec is not None
        prev_tx, prev_q, prev_ts = self._rec
        t = self.params.base_rtt_us
        dt = ts_us - prev_ts
        nl = link_bps.size
        ok_l = np.zeros(nl + 1, dtype=bool)  # [-1]: the absent hops' id -1
        ok_l[:nl] = (link_bps > 0) & (dt > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            tx_bps = (tx_bytes - prev_tx) * 8.0 / (dt * 1e-6)
            queue = qdepth_bytes if dt >= t else np.minimum(qdepth_bytes, prev_q)
            q_term = queue * 8.0 / (link_bps * t * 1e-6)
            u = q_term + tx_bps / link_bps
        u_l = np.full(nl + 1, -1.0)
        u_l[:nl] = np.where(ok_l[:nl], u, -1.0)
        qt_l = np.full(nl + 1, -np.inf)
        qt_l[:nl] = np.where(ok_l[:nl], q_term, -np.inf)
        best = hop_id[:, 0].copy()
        u_max = u_l[best]
        q_max = qt_l[best]
        for h in range(1, hop_id.shape[1]):
            col = hop_id[:, h]
            v = u_l[col]
            more = v > u_max
            best = np.where(more, col, best)
            u_max = np.where(more, v, u_max)
            q_max = np.maximum(q_max, qt_l[col])
        tau: FloatArray = np.where(ok_l[best], dt, t)
        queued: BoolArray = q_max > self._threshold(sel)
        return u_max, tau, queued

    def _unrecord(self, rows: BoolArray) -> None:
        """Write the last link record into prev_tx / prev_ts / prev_q of ``rows`` (a mask),
        as on_feedback would have stored it."""
        if self._rec is None or not rows.any():
            return
        tx, q, ts = self._rec
        hop = self.prev_hop[rows]
        present = hop >= 0
        self.prev_tx[rows] = np.where(present, tx[hop], 0.0)
        self.prev_ts[rows] = np.where(present, ts, 0.0)
        self.prev_q[rows] = np.where(present, q[hop], 0.0)
        self.prev_in_rec[rows] = False

    def _threshold(self, sel: IntArray | slice) -> FloatArray:
        """Per row: the queue term over which a row leaves the anchored regime
        (IceParams.anchor_threshold)."""
        p = self.params
        ceiling = np.minimum(p.line_rate_bps, self.cap[sel])
        burst = p.frames_per_flow * p.frame_bytes * 8.0 / (ceiling * p.base_rtt_us * 1e-6)
        out: FloatArray = np.maximum(p.anchor_queue_bdp, burst)
        return out

    def _hop_terms(
        self,
        sel: IntArray | slice,
        hop_id: IntArray,
        link_bps: FloatArray,
        tx_bytes: FloatArray,
        ts_us: FloatArray,
        qdepth_bytes: FloatArray,
    ) -> tuple[FloatArray, FloatArray, BoolArray]:
        """Per row: the most loaded hop's u (-1: no hop to compare), the interval tau it
        covers, and whether a hop's queue stands; each hop's record replaces its previous."""
        t = self.params.base_rtt_us
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
        threshold = self._threshold(sel)[:, None]
        queued_all: BoolArray = np.any(ok & (q_term > threshold), axis=1)
        # a planned flow's path moved: its new hops' own queues count, a standing one with the
        # port at its line rate (IceRate.on_feedback); rows on the same links never get here
        # from on_link_feedback, so its per-link path needs no such rule
        planned = np.isfinite(self.cap[sel]) & self.params.anchor
        planned &= np.any(self.prev_hop[sel] >= 0, axis=1)
        new = valid & ~same & planned[:, None]
        if new.any():
            with np.errstate(divide="ignore", invalid="ignore"):
                q_new = qdepth_bytes * 8.0 / (link_bps * t * 1e-6)
            new_queued = new & (q_new > threshold)
            u = np.where(new_queued, q_new + 1.0, u)
            queued_all |= np.any(new_queued, axis=1)
            self.moved[sel] = self.moved[sel] | np.any(new, axis=1)
        # remember this record (every present hop; absent hops forget theirs, as the scalar)
        self.prev_hop[sel] = np.where(present, hop_id, -1)
        self.prev_tx[sel] = np.where(present, tx_bytes, 0.0)
        self.prev_ts[sel] = np.where(present, ts_us, 0.0)
        self.prev_q[sel] = np.where(present, qdepth_bytes, 0.0)
        best = np.argmax(u, axis=1)
        k = np.arange(u.shape[0])
        tau: FloatArray = np.where(ok[k, best], dt[k, best], t)  # (a new hop: a whole T)
        u_max: FloatArray = u[k, best]
        return u_max, tau, queued_all

    def _react(
        self,
        rows: IntArray,
        now_us: float,
        u_max: FloatArray,
        tau: FloatArray,
        queued_all: BoolArray,
    ) -> None:
        """HPCC's update (IceRate.on_feedback) of the rows whose record had a hop to compare
        (every row at once, the simulator's usual case: views, not gathered copies)."""
        p = self.params
        t = p.base_rtt_us
        upd = u_max >= 0
        if not upd.all():
            if not upd.any():
                return
            rows, u_max, tau, queued_all = rows[upd], u_max[upd], tau[upd], queued_all[upd]
        r = rows
        ix: IntArray | slice = slice(None) if r.size == self.n else r
        queued = queued_all
        self.feedbacks[ix] += 1
        self.queued[ix] = queued
        tau = np.minimum(tau, t)
        self.u[ix] = (1.0 - tau / t) * self.u[ix] + (tau / t) * u_max
        # anchored rows: stay at the cap as planned, or leave for HPCC's rule on a standing queue
        was = self.anchored[ix].copy()
        leave = was & queued
        if leave.any():
            self.anchored[r[leave]] = False
            self.stage[r[leave]] = 0
        go = ~was | leave
        if not go.all():
            r, queued, leave = r[go], queued[go], leave[go]
            ix = slice(None) if r.size == self.n else r
        last = self.last_ref_update[ix].copy()
        update_ref = leave | np.isnan(last) | (now_us - last >= t)
        cap = self.cap[ix]
        # a moved row follows HPCC's rule below its stale cap until its next caps (IceRate)
        ramp = (
            np.isfinite(cap) & ~queued & ~self.moved[ix]
            if p.anchor
            else np.zeros(r.size, dtype=bool)
        )
        rtts = np.where(np.isnan(last), 1.0, np.maximum(1.0, (now_us - last) / t))
        self._compute(ix, update_ref, ramp, rtts)
        self.last_ref_update[r[update_ref]] = now_us
        if p.anchor:  # back at the plan's rate with no queue left
            c = np.minimum(p.line_rate_bps, cap)
            back = r[ramp & (self.rate[ix] >= c)]
            self.anchored[back] = True
            self.ref[back] = self.rate[back]
            self.stage[back] = 0

    def _compute(
        self, r: IntArray | slice, update_ref: BoolArray, ramp: BoolArray, rtts: FloatArray
    ) -> None:
        p = self.params
        u = self.u[r]
        cap = self.cap[r]
        c = np.minimum(p.line_rate_bps, cap)
        capped = np.isfinite(cap)
        ai = np.where(capped, (1.0 - p.eta) * c, p.ai_rate_bps) if p.derived_ai else p.ai_rate_bps
        stage = self.stage[r]
        ref = self.ref[r]
        mult = ~ramp & ((u >= p.eta) | (stage >= p.max_stage))
        rate = np.where(
            mult,
            ref / np.maximum(u / p.eta, 1e-9) + ai,
            ref + np.where(ramp, ai * rtts, ai),
        )
        self.stage[r] = np.where(update_ref, np.where(mult | ramp, 0, stage + 1), stage)
        rate = np.minimum(np.maximum(rate, p.min_rate_bps), c)
        self.rate[r] = rate
        self.ref[r] = np.where(update_ref, rate, ref)


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
