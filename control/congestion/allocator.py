"""The controller's :class:`RateAllocator`: max-min fair rates for the active flows over their
planned paths, scaled to a target utilisation, less the traffic telemetry sees that no active
flow accounts for; and a record of every recomputation (why, how long, how many flows)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from icefabric.control.congestion.waterfill import max_min_fill
from icefabric.control.planner.plan import Plan
from icefabric.control.topology import Topology

DEFAULT_TARGET = 0.95  # caps fill links to 95 %: headroom to drain queues (as HPCC's eta)


@dataclass(slots=True, frozen=True, kw_only=True)
class Allocation:
    """One recomputation."""

    reason: str
    at: float  # wall clock
    ms: float
    flows: int
    full_links: int  # links at the target
    min_bps: float
    max_bps: float

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON."""
        return {
            "reason": self.reason,
            "at": self.at,
            "ms": round(self.ms, 3),
            "flows": self.flows,
            "full_links": self.full_links,
            "min_bps": self.min_bps,
            "max_bps": self.max_bps,
        }


class RateAllocator:
    """Max-min fair rates (bit/s) of the active flows over the planned paths."""

    def __init__(self, topo: Topology, *, target: float = DEFAULT_TARGET, history: int = 100):
        if not 0.0 < target <= 1.0:
            raise ValueError(f"rate target: expected a utilisation in (0, 1], got {target}")
        self.topo = topo
        self.target = target
        self.rates: dict[str, float] = {}
        self.link_bps: dict[int, float] = {}  # allocated bit/s per directed link
        # per directed link: what the last computation's caps leave at the target (bit/s;
        # the whole target before the first one)
        self.residual_bps: np.ndarray = self.capacity_bps() * target
        self.history: deque[Allocation] = deque(maxlen=history)
        self.count = 0

    def capacity_bps(self) -> np.ndarray:
        """Every directed link's capacity in bit/s (0 for failed links)."""
        cap = np.asarray(self.topo.capacity, dtype=np.float64) * 8.0
        return np.where(self.topo.failed[: cap.size], 0.0, cap)

    def compute(
        self,
        plan: Plan,
        active: Iterable[str],
        *,
        reason: str,
        background: Mapping[int, float] | None = None,
    ) -> dict[str, float]:
        """Rates for the ``active`` flows of ``plan`` (flows without a path get none).

        ``background``: bit/s per directed link that telemetry measured beyond what the
        allocation put there (traffic of flows the controller does not know); it is taken off
        the link's capacity first.
        """
        t0 = time.perf_counter()
        want = set(active)
        chosen = [pf for pf in plan.flows if pf.flow_id in want and pf.links]
        cap = self.capacity_bps() * self.target
        if background:
            for lk, bps in background.items():
                if 0 <= lk < cap.size:
                    cap[lk] = max(0.0, cap[lk] - max(0.0, float(bps)))
        lengths = np.fromiter((len(pf.links) for pf in chosen), dtype=np.int64, count=len(chosen))
        fe = np.repeat(np.arange(len(chosen), dtype=np.int64), lengths)
        le = np.fromiter(
            (lk for pf in chosen for lk in pf.links), dtype=np.int64, count=int(lengths.sum())
        )
        rates = max_min_fill(fe, le, cap, len(chosen)) if chosen else np.zeros(0)
        self.rates = {pf.flow_id: float(r) for pf, r in zip(chosen, rates.tolist(), strict=True)}
        per_link = np.bincount(le, weights=rates[fe], minlength=cap.size) if chosen else None
        self.link_bps = (
            {int(i): float(per_link[i]) for i in np.flatnonzero(per_link)}
            if per_link is not None
            else {}
        )
        self.residual_bps = cap - per_link if per_link is not None else cap
        full = (
            int(np.count_nonzero((per_link > 0) & (per_link >= cap * (1 - 1e-6))))
            if per_link is not None
            else 0
        )
        self.count += 1
        self.history.append(
            Allocation(
                reason=reason,
                at=time.time(),
                ms=(time.perf_counter() - t0) * 1e3,
                flows=len(chosen),
                full_links=full,
                min_bps=float(rates.min()) if chosen else 0.0,
                max_bps=float(rates.max()) if chosen else 0.0,
            )
        )
        return dict(self.rates)
