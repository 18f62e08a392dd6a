"""ICE end-side control: an HPCC-style rate from INT hop records (Li et al., SIGCOMM 2019).

Every feedback packet carries one INT record per hop of the flow's path.  For each hop the
algorithm compares the record with the previous record of the same hop (same switch and port):

* tx rate   = (tx_bytes - tx_bytes') * 8 / (ts - ts')          (bytes the port sent meanwhile)
* u_hop     = min(qdepth, qdepth') * 8 / (link_bps * T) + tx rate / link_bps

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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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
    #: additive step R_AI as a fraction of the line rate (HPCC: W_AI = W_init (1 - eta) / N
    #: with N the expected concurrent flows; 0.5 % is N = 10).
    ai_fraction: float = 0.005
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
        )
        if self.eta > 1:
            raise ValueError(f"IceParams: eta must be in (0, 1], got {self.eta!r}")

    @property
    def ai_rate_bps(self) -> float:
        """R_AI in bit/s."""
        return self.ai_fraction * self.line_rate_bps

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

    def __init__(self, params: IceParams | None = None) -> None:
        p = params if params is not None else IceParams()
        self.params = p
        self._cap: float | None = None
        self._rate = p.line_rate_bps * min(1.0, p.initial_rate_fraction)
        self._ref = self._rate
        self._u = 0.0
        self._stage = 0
        self._last_ref_update_us: float | None = None
        self._prev: dict[int, HopSample] = {}  # hop index -> previous record of that hop
        self.feedbacks = 0
        self.ignored_hops = 0

    # ---- RateControl ------------------------------------------------------------------------
    def rate_bps(self) -> float:
        """Current rate, never above the cap."""
        return min(self._rate, self._ceiling())

    def set_cap(self, cap_bps: float | None) -> None:
        """Set the controller's cap; rate and reference are pulled down to it."""
        if cap_bps is not None and not cap_bps > 0:
            raise ValueError(f"IceRate.set_cap: cap must be > 0 or None, got {cap_bps!r}")
        self._cap = cap_bps
        ceiling = self._ceiling()
        self._rate = min(self._rate, ceiling)
        self._ref = min(self._ref, ceiling)

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
        for i, hop in enumerate(hops):
            prev = self._prev.get(i)
            self._prev[i] = hop
            if hop.link_bps <= 0:
                self.ignored_hops += 1
                continue
            if prev is None or prev.switch_id != hop.switch_id or prev.port != hop.port:
                continue  # first record of this hop: nothing to compare with
            dt = hop.ts_us - prev.ts_us
            if dt <= 0:
                continue
            sent = (hop.tx_bytes - prev.tx_bytes) % (1 << 64)
            tx_bps = sent * 8.0 / (dt * 1e-6)
            queue = min(hop.qdepth_bytes, prev.qdepth_bytes)
            u = queue * 8.0 / (hop.link_bps * t * 1e-6) + tx_bps / hop.link_bps
            if u > u_max:
                u_max = u
                tau = dt
        for stale in [k for k in self._prev if k >= len(hops)]:
            del self._prev[stale]
        if u_max < 0:
            return  # no hop had a previous record yet
        self.feedbacks += 1
        tau = min(tau, t)
        self._u = (1.0 - tau / t) * self._u + (tau / t) * u_max
        last = self._last_ref_update_us
        if last is None:
            update_ref = True
        elif sent_us is not None:
            update_ref = sent_us >= last
        else:
            update_ref = now_us - last >= t
        self._compute(update_ref)
        if update_ref:
            self._last_ref_update_us = now_us

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

    # ---- internals --------------------------------------------------------------------------
    def _ceiling(self) -> float:
        line = self.params.line_rate_bps
        return line if self._cap is None else min(line, self._cap)

    def _compute(self, update_ref: bool) -> None:
        p = self.params
        if self._u >= p.eta or self._stage >= p.max_stage:
            rate = self._ref / max(self._u / p.eta, 1e-9) + p.ai_rate_bps
            if update_ref:
                self._stage = 0
        else:
            rate = self._ref + p.ai_rate_bps
            if update_ref:
                self._stage += 1
        rate = min(max(rate, p.min_rate_bps), self._ceiling())
        self._rate = rate
        if update_ref:
            self._ref = rate
