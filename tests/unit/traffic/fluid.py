"""A tiny deterministic fluid model of N flows through one bottleneck link (test helper).

Time advances in fixed steps of ``dt_us``.  Each step every active flow offers ``rate * dt`` bits
to one FIFO queue drained at ``capacity_bps``; the queue marks ECN with a RED ramp (kmin..kmax,
pmax) on the expected number of packets, and a receiver per flow turns marks into CNPs (at most
one per ``cnp_interval_us``) that reach the sender half an RTT later.  Every step the link also
produces one INT hop record (tx counter, timestamp, queue depth) that reaches every flow one RTT
later.  Nothing is random: the same inputs give the same trajectory.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from icefabric.traffic.rate import HopSample, RateControl


@dataclass
class FluidFlow:
    """One flow of the model: its controller and what the model measured."""

    control: RateControl
    start_us: float = 0.0
    stop_us: float = float("inf")  # the flow sends nothing from here on
    sent_bytes: float = 0.0
    marks: float = 0.0
    last_cnp_us: float = -1e18
    cnps: int = 0
    rates: list[float] = field(default_factory=list)  # rate_bps() after every step


@dataclass
class FluidBottleneck:
    """N flows, one link; see the module docstring."""

    capacity_bps: float
    flows: list[FluidFlow]
    dt_us: float
    rtt_us: float
    mtu_bytes: int = 1000
    kmin_bytes: float = 5_000.0
    kmax_bytes: float = 200_000.0
    pmax: float = 0.01
    cnp_interval_us: float = 50.0
    now_us: float = 0.0
    queue_bytes: float = 0.0
    tx_bytes: float = 0.0
    queue_trace: list[float] = field(default_factory=list)
    _feedback: deque[tuple[float, HopSample]] = field(default_factory=deque)
    _cnps: deque[tuple[float, int]] = field(default_factory=deque)

    def step(self) -> None:
        """Advance one ``dt_us``."""
        dt = self.dt_us
        self.now_us += dt
        now = self.now_us
        offered = 0.0
        active = [f for f in self.flows if f.start_us <= now < f.stop_us]
        sent_now: list[float] = []
        for f in active:
            nbytes = f.control.rate_bps() * dt * 1e-6 / 8.0
            sent_now.append(nbytes)
            offered += nbytes
        drain = self.capacity_bps * dt * 1e-6 / 8.0
        backlog = self.queue_bytes + offered
        out = min(backlog, drain)
        self.tx_bytes += out
        self.queue_bytes = backlog - out
        self.queue_trace.append(self.queue_bytes)
        p = self._mark_probability(self.queue_bytes)
        for f, nbytes in zip(active, sent_now, strict=True):
            f.sent_bytes += nbytes
            f.control.on_bytes_sent(now, round(nbytes))
            f.marks += p * nbytes / self.mtu_bytes
            if f.marks >= 1.0 and now - f.last_cnp_us >= self.cnp_interval_us:
                f.marks = 0.0
                f.last_cnp_us = now
                self._cnps.append((now + self.rtt_us / 2.0, self.flows.index(f)))
        self._feedback.append(
            (
                now + self.rtt_us,
                HopSample(
                    switch_id=1,
                    port=1,
                    link_bps=self.capacity_bps,
                    tx_bytes=int(self.tx_bytes),
                    ts_us=now,
                    qdepth_bytes=int(self.queue_bytes),
                ),
            )
        )
        while self._cnps and self._cnps[0][0] <= now:
            _, index = self._cnps.popleft()
            self.flows[index].control.on_cnp(now)
            self.flows[index].cnps += 1
        while self._feedback and self._feedback[0][0] <= now:
            _, hop = self._feedback.popleft()
            for f in active:
                f.control.on_feedback(now, [hop])
        for f in self.flows:
            due = f.control.next_timer_us()
            if due is not None and due <= now:
                f.control.on_timer(now)
            f.rates.append(f.control.rate_bps())

    def run(self, duration_us: float) -> None:
        """Advance ``duration_us``."""
        steps = round(duration_us / self.dt_us)
        for _ in range(steps):
            self.step()

    def mean_rates(self, window_us: float) -> list[float]:
        """Each flow's mean rate over the last ``window_us``."""
        n = max(1, round(window_us / self.dt_us))
        return [sum(f.rates[-n:]) / len(f.rates[-n:]) for f in self.flows]

    def _mark_probability(self, queue: float) -> float:
        if queue <= self.kmin_bytes:
            return 0.0
        if queue >= self.kmax_bytes:
            return 1.0
        return self.pmax * (queue - self.kmin_bytes) / (self.kmax_bytes - self.kmin_bytes)
