"""ICE end-side control: an HPCC-style rate from INT hop records (Li et al., SIGCOMM 2019).

Every feedback packet carries one INT record per hop of the flow's path.  For each hop the
algorithm compares the record with the previous record of the same hop (same switch and port):

* tx rate   = (tx_bytes - tx_bytes') * 8 / (ts - ts')          (bytes the port sent meanwhile)
* u_hop     = min(qdepth, qdepth') * 8 / (link_bps * T) + tx rate / link_bps
  (HPCC's min over two records a packet apart; records a base RTT or more apart, as sampled
  INT gives them, are separate samples and the current queue counts: the min would report
  the queue of one sampling interval ago and hide a queue that grew meanwhile)

T is the base round-trip time.  The path's utilisation is the most loaded hop's, smoothed over the
interval it covers: ``U = (1 - tau/T) * U + tau/T * u`` with ``tau = min(ts - ts', T)``.  The rate
then follows HPCC's rule, written for rates instead of windows:

* ``U >= eta`` or ``max_stage`` increase stages done:  ``R = Rc / (U / eta) + R_AI``
  (multiplicative: down when the path is over target, up when it has stayed under it),
* otherwise:                                           ``R = Rc + R_AI``  (additive),

where the reference rate Rc is updated to R at most once per T (the first feedback after T has
passed), so a decrease happens at the first feedback that shows the queue, i.e. within one RTT,
and is not compounded by the feedback of the same round trip.  Rates stay within
[min_rate, min(line rate, cap)]; the reference never winds up above the cap.

**Anchored on the plan.**  The controller's caps come from a plan that leaves no link over its
capacity (max-min fair over the planned paths), so a flow with a cap sends at the cap (eta = 1
relative to the cap: HPCC's headroom would only leave planned capacity idle) and reads INT for
what the plan did not foresee: a hop whose queue stands (the queue of u_hop above: over two
consecutive records a packet apart, or in one record of sampled INT) over
``anchor_queue_bdp x B x T`` and more than ``frames_per_flow`` x B / cap frames (the planned
flows of a hop, about B / cap of them, may each have frames arrive at once from different
input ports, a queue the plan allows: its own and the one its pacer's one-frame token bucket
lets it send ahead after a wait at the NIC, traffic/endpoint.py; an incast receiver's 11
senders left their caps 84 times in one run on such 3-5 frame bursts while the threshold was
2.8 frames).  Then HPCC's rule above takes over, starting from
the cap as its reference, until the queue is gone (no hop's queue over the threshold); from
there the flow ramps back to its cap by
R_AI per reference update (HPCC's multiplicative step would approach the cap only
geometrically on a link the plan fills) and is anchored again once there.  A cap arriving
while its last record showed a standing queue does not lift the flow (caps come a control delay
after the change they answer, e.g. a replan that already moved paths): the rate is only pulled
down to a lower cap, and the ramp takes it to the cap once the queue is gone.
**A path move (make-before-break at the end side).**  A failure replan moves paths at once
(the link is going away), while the new caps reach the agents one control delay later: a
planned flow can run on its new path at a cap computed for the old one.  The record that
first names a hop its previous record did not have at that place tells the flow its path
moved; then (capped flows under the anchor only; an uncapped flow keeps HPCC's rule, which
only primes a new hop):

* the new hop's own queue counts at once, and a standing one (over the anchored regime's
  threshold) with the port at its line rate, ``u = q x 8 / (B T) + 1`` (the tx rate needs
  two records of the hop, but a port with a standing queue sends at its line rate): the flow
  leaves its cap in that record, where it used to wait for a second record of the new hop;
* the cap it holds is stale (*moved*): it stays the ceiling, but the flow follows HPCC's
  rule below it (eta's headroom, no ramp to the cap, not anchored there) until the
  controller's next cap set arrives; that set answers the move and anchors the flow again,
  even with the same value (a cap set sent before the move and still in flight would be
  taken too: the channel carries no plan generation).

R_AI of a capped flow is derived from the plan: HPCC bounds the additive steps of the N flows on
a link by its headroom, N x W_AI <= (1 - eta) B; the plan's caps of a link's flows sum to at
most B, so W_AI = (1 - eta) x cap meets the bound for every flow without guessing N, and HPCC's
steady state ``U = eta R / (R - W_AI)`` is then U = 1 exactly at R = cap; and the planned
flows of a link ramping back together add at most (1 - eta) B per RTT, half the standing queue
that ends the anchored regime, so a persisting unplanned flow is met again before its queue
grows far past it.  Flows without a cap (no plan)
keep HPCC's W_AI = (1 - eta) B / N with N = ``ai_flows``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from icefabric.traffic.rate.base import HopSample, check_positive

#: The link rate the default time constants were chosen for (HPCC's 100 Gbit/s evaluation).
ICE_REFERENCE_BPS = 100e9


@dataclass(frozen=True, slots=True, kw_only=True)
class IceParams:
    """Constants of ICE's end-side control (defaults for 100 Gbit/s links)."""

    line_rate_bps: float = ICE_REFERENCE_BPS
    #: target utilisation eta (HPCC: 95 %).
    eta: float = 0.95
    #: base round-trip time T (HPCC's testbed: ~9 us at 100 Gbit/s with 1 KB packets).
    base_rtt_us: float = 9.0
    #: additive step R_AI of a flow without a cap, as a fraction of the line rate (HPCC:
    #: W_AI = W_init (1 - eta) / N with N the expected concurrent flows; 0.5 % is N = 10).
    ai_fraction: float = 0.005
    #: a capped flow sends at its cap and leaves it only for a standing queue (module docstring)
    anchor: bool = True
    #: a capped flow's R_AI is (1 - eta) x cap (derived from the plan); False: ``ai_fraction``
    derived_ai: bool = True
    #: the standing queue (the queue term of u_hop, module docstring) that ends the anchored regime, as
    #: a fraction of the hop's bandwidth-delay product B x T (0.1: 11 KB at 100 Gbit/s, 9 us)
    anchor_queue_bdp: float = 0.1
    #: the data frame's bytes on the wire (0: not known, no burst allowance): the plan lets
    #: ``frames_per_flow`` frames of each of the B / cap planned flows a hop can carry arrive at
    #: once from different input ports, so the anchored regime also tolerates that many queued
    #: (module docstring)
    frame_bytes: int = 0
    #: frames a planned flow may have arrive at once: its own and the one its pacer may send
    #: ahead (the endpoint's token bucket is one frame deep, traffic/endpoint.py)
    frames_per_flow: int = 2
    #: consecutive under-target reference updates before a multiplicative increase (HPCC: 5).
    max_stage: int = 5
    #: lowest rate, as a fraction of the line rate.
    min_rate_fraction: float = 0.001
    #: start rate as a fraction of the line rate (HPCC starts at line rate).
    initial_rate_fraction: float = 1.0

    def __post_init__(self) -> None:
        check_positive(
            "IceParams",
            line_rate_bps=self.line_rate_bps,
            eta=self.eta,
            base_rtt_us=self.base_rtt_us,
            ai_fraction=self.ai_fraction,
            max_stage=self.max_stage,
            min_rate_fraction=self.min_rate_fraction,
            initial_rate_fraction=self.initial_rate_fraction,
            anchor_queue_bdp=self.anchor_queue_bdp,
        )
        if self.eta > 1:
            raise ValueError(f"IceParams: eta must be in (0, 1], got {self.eta!r}")
        if self.frame_bytes < 0:
            raise ValueError(f"IceParams: frame_bytes must be >= 0, got {self.frame_bytes!r}")
        if self.frames_per_flow < 1:
            raise ValueError(
                f"IceParams: frames_per_flow must be >= 1, got {self.frames_per_flow!r}"
            )

    def anchor_threshold(self, ceiling_bps: float) -> float:
        """The queue term (queue x 8 / (B T)) above which a flow whose rate ceiling is
        ``ceiling_bps`` leaves the anchored regime: ``anchor_queue_bdp``, or ``frames_per_flow``
        x B / cap frames where that is more (a queue of B / cap frames is B x frame x 8 / cap
        bits: its term is frame x 8 / (cap T), whatever B)."""
        frames = self.frames_per_flow * self.frame_bytes
        burst = frames * 8.0 / (ceiling_bps * self.base_rtt_us * 1e-6)
        return max(self.anchor_queue_bdp, burst)

    @property
    def ai_rate_bps(self) -> float:
        """R_AI in bit/s."""
        return self.ai_fraction * self.line_rate_bps

    def capped_ai_bps(self, ceiling_bps: float) -> float:
        """R_AI of a flow whose ceiling (min(line, cap)) is ``ceiling_bps`` under a cap."""
        return (1.0 - self.eta) * ceiling_bps if self.derived_ai else self.ai_rate_bps

    @property
    def min_rate_bps(self) -> float:
        """The floor in bit/s."""
        return self.min_rate_fraction * self.line_rate_bps

    def scaled(self, line_rate_bps: float, base_rtt_us: float | None = None) -> IceParams:
        """These constants for a link of ``line_rate_bps``: T x (old rate / new rate).

        Rate steps are fractions of the line rate already.  Pass ``base_rtt_us`` when the
        fabric's base RTT is known (it then wins over the scaled default).
        """
        check_positive("IceParams.scaled", line_rate_bps=line_rate_bps)
        s = self.line_rate_bps / line_rate_bps
        rtt = self.base_rtt_us * s if base_rtt_us is None else base_rtt_us
        return replace(self, line_rate_bps=line_rate_bps, base_rtt_us=rtt)


class IceRate:
    """HPCC-style rate control of one flow from INT feedback (see the module docstring)."""

    NEEDS_INT: ClassVar[bool] = True  # reads every hop's INT record

    def __init__(self, params: IceParams | None = None) -> None:
        p = params if params is not None else IceParams()
        self.params = p
        self._cap: float | None = None
        self._rate = p.line_rate_bps * min(1.0, p.initial_rate_fraction)
        self._ref = self._rate
        self._u = 0.0
        self._stage = 0
        self._anchored = False  # at the cap, as planned (module docstring)
        self._queued = False  # the last record showed a standing queue (over the threshold)
        self._moved = False  # a capped flow's path moved since its cap came (module docstring)
        self._last_ref_update_us: float | None = None
        self._prev: dict[int, HopSample] = {}  # hop index -> previous record of that hop
        self.feedbacks = 0
        self.ignored_hops = 0

    @classmethod
    def for_line(cls, line_rate_bps: float, *, base_rtt_us: float | None = None) -> IceRate:
        """The reference parameters scaled to ``line_rate_bps`` (T = ``base_rtt_us`` if given)."""
        return cls(IceParams().scaled(line_rate_bps, base_rtt_us))

    # ---- RateControl ------------------------------------------------------------------------
    def rate_bps(self) -> float:
        """Current rate, never above the cap."""
        return min(self._rate, self._ceiling())

    def set_cap(self, cap_bps: float | None) -> None:
        """Set the controller's cap.  Anchored (the default): the flow goes to the cap at once;
        otherwise rate and reference are only pulled down to it.  ``None``: HPCC's rule from
        the current rate.  The cap it already has changes nothing (the regime stays)."""
        if cap_bps is not None and not cap_bps > 0:
            raise ValueError(f"IceRate.set_cap: cap must be > 0 or None, got {cap_bps!r}")
        if cap_bps == self._cap and not self._moved:
            return  # the same cap again (a controller re-sends whole cap sets): no news
        self._cap = cap_bps
        self._moved = False  # the controller's cap set after the move: it answers the move
        ceiling = self._ceiling()
        # a cap never lifts a flow over a queue that stands (its last record): the flow is only
        # pulled down to it and returns to it by the ramp once the queue is gone
        self._anchored = cap_bps is not None and self.params.anchor and not self._queued
        if self._anchored:
            self._rate = self._ref = ceiling
            self._stage = 0
        else:
            self._rate = min(self._rate, ceiling)
            self._ref = min(self._ref, ceiling)

    def start_at(self, rate_bps: float) -> None:
        """Rate and reference to ``rate_bps`` (within [min rate, line]) while no feedback has
        come: the controller's start rate for a flow no plan covers (control/congestion/
        starts.py); a flow that has had feedback keeps HPCC's rule."""
        if not rate_bps >= 0:
            raise ValueError(f"IceRate.start_at: rate must be >= 0, got {rate_bps!r}")
        if self.feedbacks:
            return
        p = self.params
        self._rate = self._ref = min(p.line_rate_bps, max(p.min_rate_bps, rate_bps))

    def on_feedback(
        self, now_us: float, hops: Sequence[HopSample], *, sent_us: float | None = None
    ) -> None:
        """Update utilisation from the hop records and recompute the rate.

        With ``sent_us`` the reference moves when the record reports on a packet sent after
        the last reference update (once per actual RTT, queueing included: HPCC's
        ``ack.seq > lastUpdateSeq``); without it, once per base RTT T of arrival time.
        """
        p = self.params
        t = p.base_rtt_us
        u_max = -1.0
        tau = t
        queued = False  # a hop's queue stood over both records (above anchor_threshold)
        threshold = p.anchor_threshold(self._ceiling())
        # a planned flow's path moved (a hop its previous record did not have at that place):
        # its cap was computed for the old path (module docstring, "make-before-break")
        planned = p.anchor and self._cap is not None
        had_record = bool(self._prev)
        for i, hop in enumerate(hops):
            prev = self._prev.get(i)
            self._prev[i] = hop
            if hop.link_bps <= 0:
                self.ignored_hops += 1
                continue
            if prev is None or prev.switch_id != hop.switch_id or prev.port != hop.port:
                if not (planned and had_record):
                    continue  # first record of this hop: nothing to compare with
                self._moved = True
                # the new hop's own queue is a sample; its tx rate needs two records, but a
                # port with a standing queue sends at its line rate
                q_term = hop.qdepth_bytes * 8.0 / (hop.link_bps * t * 1e-6)
                if q_term > threshold:
                    queued = True
                    if q_term + 1.0 > u_max:
                        u_max = q_term + 1.0
                        tau = t
                continue
            dt = hop.ts_us - prev.ts_us
            if dt <= 0:
                continue
            sent = (hop.tx_bytes - prev.tx_bytes) % (1 << 64)
            tx_bps = sent * 8.0 / (dt * 1e-6)
            # HPCC's min(q, q') filters a queue only one of two records a packet apart saw;
            # records a base RTT or more apart (sampled INT) are separate samples: the older
            # one would hide a queue that grew meanwhile for a whole sampling interval
            queue = hop.qdepth_bytes if dt >= t else min(hop.qdepth_bytes, prev.qdepth_bytes)
            q_term = queue * 8.0 / (hop.link_bps * t * 1e-6)
            if q_term > threshold:
                queued = True
            u = q_term + tx_bps / hop.link_bps
            if u > u_max:
                u_max = u
                tau = dt
        for stale in [k for k in self._prev if k >= len(hops)]:
            del self._prev[stale]
        if u_max < 0:
            return  # no hop had a previous record yet
        self.feedbacks += 1
        self._queued = queued
        tau = min(tau, t)
        self._u = (1.0 - tau / t) * self._u + (tau / t) * u_max
        if self._anchored:
            if not queued:
                return  # as planned: stay at the cap
            # the plan did not foresee this: HPCC's rule from the cap, reacting now
            self._anchored = False
            self._stage = 0
            update_ref = True
        else:
            last = self._last_ref_update_us
            if last is None:
                update_ref = True
            elif sent_us is not None:
                update_ref = sent_us >= last
            else:
                update_ref = now_us - last >= t
        # a capped flow whose queue is gone ramps back to its cap by W_AI per RTT elapsed; one
        # whose path moved follows HPCC's rule below its cap until the controller's next caps
        ramp = p.anchor and self._cap is not None and not queued and not self._moved
        last = self._last_ref_update_us
        rtts = 1.0 if last is None else max(1.0, (now_us - last) / t)
        self._compute(update_ref, ramp=ramp, rtts=rtts)
        if update_ref:
            self._last_ref_update_us = now_us
        if ramp and self._rate >= self._ceiling():
            self._anchored = True  # back at the plan's rate with no queue left
            self._ref = self._rate
            self._stage = 0

    def on_cnp(self, now_us: float) -> None:
        """ICE reads INT, not ECN: CNPs are ignored."""

    def on_bytes_sent(self, now_us: float, nbytes: int) -> None:
        """ICE needs no byte counter."""

    def on_timer(self, now_us: float) -> None:
        """ICE has no timer."""

    def next_timer_us(self) -> float | None:
        """ICE has no timer."""
        return None

    # ---- introspection ----------------------------------------------------------------------
    @property
    def utilisation(self) -> float:
        """The smoothed path utilisation U."""
        return self._u

    @property
    def anchored(self) -> bool:
        """Whether the flow sends at its cap as planned (no unforeseen queue being handled)."""
        return self._anchored

    @property
    def queued(self) -> bool:
        """Whether the last record showed a standing queue (a cap then does not lift the flow)."""
        return self._queued

    @property
    def moved(self) -> bool:
        """Whether a capped flow's path moved since its cap came (it then holds HPCC's rule below
        the cap until the controller's next cap set)."""
        return self._moved

    # ---- internals --------------------------------------------------------------------------
    def _ceiling(self) -> float:
        line = self.params.line_rate_bps
        return line if self._cap is None else min(line, self._cap)

    def _compute(self, update_ref: bool, *, ramp: bool = False, rtts: float = 1.0) -> None:
        p = self.params
        ai = p.ai_rate_bps if self._cap is None else p.capped_ai_bps(self._ceiling())
        if ramp:  # W_AI per RTT: feedback of a slow flow may come less often than once per T
            rate = self._ref + ai * rtts
            if update_ref:
                self._stage = 0
        elif self._u >= p.eta or self._stage >= p.max_stage:
            rate = self._ref / max(self._u / p.eta, 1e-9) + ai
            if update_ref:
                self._stage = 0
        else:
            rate = self._ref + ai
            if update_ref:
                self._stage += 1
        rate = min(max(rate, p.min_rate_bps), self._ceiling())
        self._rate = rate
        if update_ref:
            self._ref = rate
