"""The interface every rate algorithm implements, and the INT hop sample it reads.

Pure: no clock, no I/O, no threads.  Time comes in as ``now_us`` (microseconds, float); rates are
bit/s (float).  The same classes serve the virtual-time engine, the real-time host and the
fluid simulator (``sim/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class HopSample:
    """One INT hop record as the algorithms see it (one egress port of one switch).

    ``tx_bytes`` is the port's running transmit counter (it may wrap at 2**64), ``ts_us`` the
    egress timestamp in microseconds, ``qdepth_bytes`` the egress queue depth (the decoder turns
    the switch's packet count into bytes), ``link_bps`` the port's link rate.
    """

    switch_id: int
    port: int
    link_bps: float
    tx_bytes: int
    ts_us: float
    qdepth_bytes: int


@runtime_checkable
class RateControl(Protocol):
    """A per-flow sending-rate algorithm (DCQCN, ICE ...)."""

    def rate_bps(self) -> float:
        """The current sending rate, never above the cap."""
        ...

    def set_cap(self, cap_bps: float | None) -> None:
        """Set the controller's cap (``None``: no cap)."""
        ...

    def start_at(self, rate_bps: float) -> None:
        """Start at ``rate_bps`` instead of the initial rate (the controller's start rate for
        an unplanned flow); nothing once the algorithm has reacted to the fabric."""
        ...

    def on_feedback(
        self, now_us: float, hops: Sequence[HopSample], *, sent_us: float | None = None
    ) -> None:
        """An INT path record arrived (hops in path order, first hop first).

        ``sent_us``: when the data packet it reports on was sent, if the caller knows (lets ICE
        update its reference once per actual round trip, as HPCC does with sequence numbers).
        """
        ...

    def on_cnp(self, now_us: float) -> None:
        """A congestion notification packet arrived for this flow."""
        ...

    def on_bytes_sent(self, now_us: float, nbytes: int) -> None:
        """The flow put ``nbytes`` on the wire."""
        ...

    def on_timer(self, now_us: float) -> None:
        """Run every timer event due at or before ``now_us``."""
        ...

    def next_timer_us(self) -> float | None:
        """When :meth:`on_timer` next wants to run (``None``: no timer pending)."""
        ...


class RateAlgorithm(RateControl, Protocol):
    """A rate algorithm's class as the registry (``RATE_CLASSES``) holds it."""

    NEEDS_INT: ClassVar[bool]  # reads INT hop records: a mode that uses it turns INT on

    @classmethod
    def for_line(cls, line_rate_bps: float, *, base_rtt_us: float | None = None) -> RateControl:
        """A fresh controller for one flow on a ``line_rate_bps`` NIC (``base_rtt_us``: the
        fabric's base RTT, when the caller knows it)."""
        ...


def check_positive(owner: str, **values: float) -> None:
    """Raise ValueError naming the first parameter that is not > 0."""
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{owner}: {name} must be > 0, got {value!r}")
