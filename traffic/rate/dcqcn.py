"""DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015).

The reaction point (sender NIC) of DCQCN as a pure class.  Every constant is a field of
:class:`DcqcnParams`; the defaults are the paper's (g, K, T, B, F, R_AI, the 50 us CNP interval)
and the Mellanox ConnectX firmware's where the paper gives none (R_HAI, minimum rate, maximal
decrease per event, rate-reduce monitor period), all for the paper's 40 Gbit/s links.
:meth:`DcqcnParams.scaled` rescales them to another link rate (traffic/README.md).

State: current rate Rc, target rate Rt, alpha, the rate-increase timer and byte counter.

* CNP: ``Rt = Rc; Rc = Rc * (1 - alpha/2)`` (at most once per ``decrease_interval_us``, never
  below ``min_decrease_factor * Rc`` nor ``min_rate_bps``); the timer and byte counter restart.
* alpha: updated once per ``alpha_interval_us`` period: ``alpha = (1-g)*alpha + g`` if a CNP
  arrived in the period, ``alpha = (1-g)*alpha`` if none did (evaluated lazily, exactly).
* Increase events: every ``timer_us`` (timer) and every ``byte_counter_bytes`` sent (byte
  counter), each counting its stage.  Fast recovery ``Rc = (Rt + Rc)/2`` while both stages are
  below F; additive increase ``Rt += R_AI`` once either reaches F; hyper increase
  ``Rt += i * R_HAI`` (i = min stage - F + 1) once both have; then ``Rc = (Rt + Rc)/2``.
* Rates never exceed min(line rate, cap); the timer stops once Rc and Rt sit at that ceiling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from icefabric.traffic.rate.base import HopSample, check_positive

#: The link rate the default constants were chosen for (the DCQCN paper's testbed).
DCQCN_REFERENCE_BPS = 40e9


@dataclass(frozen=True, slots=True, kw_only=True)
class DcqcnParams:
    """DCQCN's constants (defaults: paper / Mellanox, for 40 Gbit/s links)."""

    line_rate_bps: float = DCQCN_REFERENCE_BPS
    #: alpha gain g (paper: 1/256).
    g: float = 1.0 / 256.0
    #: alpha update period K (paper: 55 us).
    alpha_interval_us: float = 55.0
    #: alpha before the first CNP (Mellanox initial_alpha_value 1023/1024, i.e. ~1).
    initial_alpha: float = 1.0
    #: rate-increase timer T (paper: 55 us).
    timer_us: float = 55.0
    #: byte counter B (paper: 10 MB).
    byte_counter_bytes: int = 10 * 1024 * 1024
    #: stages of fast recovery F (paper: 5).
    fast_recovery_steps: int = 5
    #: additive increase step R_AI (paper: 40 Mbit/s).
    ai_rate_bps: float = 40e6
    #: hyper increase step R_HAI (Mellanox rpg_hai_rate / rpg_ai_rate = 10, so 10 x R_AI).
    hai_rate_bps: float = 400e6
    #: minimum rate (Mellanox rpg_min_rate: 1 Mbit/s).
    min_rate_bps: float = 1e6
    #: one decrease never goes below this fraction of Rc (Mellanox rpg_min_dec_fac: 50 %).
    min_decrease_factor: float = 0.5
    #: at most one decrease per period (Mellanox rate_reduce_monitor_period: 4 us).
    decrease_interval_us: float = 4.0
    #: receiver side: at most one CNP per flow per interval (paper N: 50 us).
    cnp_interval_us: float = 50.0
    #: the rate a flow starts at, as a fraction of the line rate (NICs start at line rate).
    initial_rate_fraction: float = 1.0

    def __post_init__(self) -> None:
        check_positive(
            "DcqcnParams",
            line_rate_bps=self.line_rate_bps,
            g=self.g,
            alpha_interval_us=self.alpha_interval_us,
            timer_us=self.timer_us,
            byte_counter_bytes=self.byte_counter_bytes,
            fast_recovery_steps=self.fast_recovery_steps,
            ai_rate_bps=self.ai_rate_bps,
            hai_rate_bps=self.hai_rate_bps,
            min_rate_bps=self.min_rate_bps,
            cnp_interval_us=self.cnp_interval_us,
            initial_rate_fraction=self.initial_rate_fraction,
        )
        if not 0 < self.g < 1:
            raise ValueError(f"DcqcnParams: g must be in (0, 1), got {self.g!r}")
        if not 0 <= self.initial_alpha <= 1:
            raise ValueError(
                f"DcqcnParams: initial_alpha must be in [0, 1], got {self.initial_alpha!r}"
            )
        if not 0 <= self.min_decrease_factor <= 1:
            raise ValueError(
                f"DcqcnParams: min_decrease_factor must be in [0, 1], got {self.min_decrease_factor!r}"
            )
        if self.decrease_interval_us < 0:
            raise ValueError(
                f"DcqcnParams: decrease_interval_us must be >= 0, got {self.decrease_interval_us!r}"
            )

    def scaled(self, line_rate_bps: float) -> DcqcnParams:
        """These constants for a link of ``line_rate_bps``: time x s, rate steps / s.

        s = line_rate_bps(self) / line_rate_bps: a packet takes s times longer, so every timer
        keeps the same number of packets per period and every rate step the same fraction of the
        line; byte counts and dimensionless constants stay.
        """
        check_positive("DcqcnParams.scaled", line_rate_bps=line_rate_bps)
        s = self.line_rate_bps / line_rate_bps
        return replace(
            self,
            line_rate_bps=line_rate_bps,
            alpha_interval_us=self.alpha_interval_us * s,
            timer_us=self.timer_us * s,
            decrease_interval_us=self.decrease_interval_us * s,
            cnp_interval_us=self.cnp_interval_us * s,
            ai_rate_bps=self.ai_rate_bps / s,
            hai_rate_bps=self.hai_rate_bps / s,
            min_rate_bps=self.min_rate_bps / s,
        )


class Dcqcn:
    """DCQCN reaction point for one flow (see the module docstring)."""

    NEEDS_INT: ClassVar[bool] = False  # reacts to ECN's CNPs: the fabric carries no INT for it

    def __init__(self, params: DcqcnParams | None = None) -> None:
        p = params if params is not None else DcqcnParams()
        self.params = p
        self._cap: float | None = None
        self._rc = p.line_rate_bps * min(1.0, p.initial_rate_fraction)
        self._rt = self._rc
        self._alpha = p.initial_alpha
        self._alpha_period_start: float | None = None  # periods start at the first CNP
        self._cnp_in_period = False
        self._last_decrease_us = -math.inf
        self._timer_stage = 0
        self._byte_stage = 0
        self._bytes = 0
        self._next_timer_us: float | None = None
        self.cnps = 0
        self.decreases = 0

    @classmethod
    def for_line(cls, line_rate_bps: float, *, base_rtt_us: float | None = None) -> Dcqcn:
        """The reference parameters scaled to ``line_rate_bps`` (DCQCN needs no RTT)."""
        return cls(DcqcnParams().scaled(line_rate_bps))

    # ---- RateControl ------------------------------------------------------------------------
    def rate_bps(self) -> float:
        """Current rate Rc, never above the cap."""
        return min(self._rc, self._ceiling())

    def set_cap(self, cap_bps: float | None) -> None:
        """Set the controller's cap; Rc and Rt are pulled down to it (no wind-up above it)."""
        if cap_bps is not None and not cap_bps > 0:
            raise ValueError(f"Dcqcn.set_cap: cap must be > 0 or None, got {cap_bps!r}")
        self._cap = cap_bps
        ceiling = self._ceiling()
        self._rc = min(self._rc, ceiling)
        self._rt = min(self._rt, ceiling)

    def start_at(self, rate_bps: float) -> None:
        """Rc and Rt to ``rate_bps`` (within [min rate, line]) while no CNP has come."""
        if not rate_bps >= 0:
            raise ValueError(f"Dcqcn.start_at: rate must be >= 0, got {rate_bps!r}")
        if self.cnps:
            return
        p = self.params
        self._rc = self._rt = min(p.line_rate_bps, max(p.min_rate_bps, rate_bps))

    def on_feedback(
        self, now_us: float, hops: Sequence[HopSample], *, sent_us: float | None = None
    ) -> None:
        """DCQCN ignores INT feedback."""

    def on_cnp(self, now_us: float) -> None:
        """Cut the rate (alpha/2 of it) and restart the increase counters."""
        p = self.params
        self._advance_alpha(now_us)
        self.cnps += 1
        if self._alpha_period_start is None:
            self._alpha_period_start = now_us
        self._cnp_in_period = True
        if now_us - self._last_decrease_us < p.decrease_interval_us:
            return
        self._last_decrease_us = now_us
        self.decreases += 1
        self._rt = self._rc
        cut = self._rc * (1.0 - self._alpha / 2.0)
        self._rc = max(cut, self._rc * p.min_decrease_factor, p.min_rate_bps)
        self._rc = min(self._rc, self._ceiling())
        self._timer_stage = 0
        self._byte_stage = 0
        self._bytes = 0
        self._next_timer_us = now_us + p.timer_us

    def on_bytes_sent(self, now_us: float, nbytes: int) -> None:
        """Count bytes; every ``byte_counter_bytes`` is a rate-increase event."""
        if self._at_ceiling():
            return
        self._bytes += nbytes
        while self._bytes >= self.params.byte_counter_bytes:
            self._bytes -= self.params.byte_counter_bytes
            self._byte_stage += 1
            self._increase()

    def on_timer(self, now_us: float) -> None:
        """Run every increase-timer expiry due by ``now_us``."""
        while self._next_timer_us is not None and self._next_timer_us <= now_us:
            self._timer_stage += 1
            self._increase()
            if self._at_ceiling():
                self._next_timer_us = None
            else:
                self._next_timer_us += self.params.timer_us

    def next_timer_us(self) -> float | None:
        """The next increase-timer expiry (``None`` while at the ceiling)."""
        return self._next_timer_us

    # ---- introspection ----------------------------------------------------------------------
    @property
    def alpha(self) -> float:
        """alpha as of the last event."""
        return self._alpha

    @property
    def target_bps(self) -> float:
        """Target rate Rt."""
        return self._rt

    # ---- internals --------------------------------------------------------------------------
    def _ceiling(self) -> float:
        line = self.params.line_rate_bps
        return line if self._cap is None else min(line, self._cap)

    def _at_ceiling(self) -> bool:
        ceiling = self._ceiling()
        return self._rc >= ceiling and self._rt >= ceiling

    def _advance_alpha(self, now_us: float) -> None:
        """Apply every alpha period that ended by ``now_us`` (closed form, exact)."""
        start = self._alpha_period_start
        if start is None:
            return
        k = self.params.alpha_interval_us
        periods = math.floor((now_us - start) / k)
        if periods <= 0:
            return
        g = self.params.g
        if self._cnp_in_period:
            self._alpha = (1.0 - g) * self._alpha + g
            periods -= 1
            self._cnp_in_period = False
        self._alpha *= (1.0 - g) ** periods
        self._alpha_period_start = start + math.floor((now_us - start) / k) * k

    def _increase(self) -> None:
        p = self.params
        f = p.fast_recovery_steps
        low, high = sorted((self._timer_stage, self._byte_stage))
        if high < f:
            pass  # fast recovery: Rt stays
        elif low < f:
            self._rt += p.ai_rate_bps
        else:
            self._rt += (low - f + 1) * p.hai_rate_bps
        ceiling = self._ceiling()
        self._rt = min(self._rt, ceiling)
        self._rc = min((self._rt + self._rc) / 2.0, ceiling)
        if ceiling - self._rc < 1e-9 * ceiling:
            self._rc = ceiling
