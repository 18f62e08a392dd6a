"""Water-filling benchmark: ``python -m icefabric.control.congestion.bench``.

The planner benchmark's fat-tree scenario (``control/planner/bench.py``): ~100k GPUs in a
fat-tree(k=38), a ring all-reduce with 8 channels over 12,500 scattered servers, 100,000 flows,
planned by the heuristic; then max-min fair rates for all 100,000 flows over their planned paths
(host links included) and the topology's link capacities. Timed: the array core
(:func:`max_min_fill`) and the dict API (:func:`max_min_rates`, which also builds the arrays),
best of ``--repeat``. Target (issue 8): <= 1 s.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.congestion.waterfill import max_min_fill, max_min_rates
from icefabric.control.planner.bench import scattered_ring_job
from icefabric.control.planner.planner import Planner
from icefabric.control.topology import Topology
from icefabric.topo.generators import fat_tree

TARGET_S = 1.0


@dataclass(slots=True, frozen=True)
class WaterfillResult:
    """One run's figures."""

    flows: int
    entries: int
    links: int
    plan_s: float
    fill_s: float  # array core
    rates_s: float  # dict API, arrays built from the paths included
    min_gbps: float
    max_gbps: float
    levels: int  # distinct rates

    @property
    def ok(self) -> bool:
        """The dict API meets the target."""
        return self.rates_s <= TARGET_S


def run(seed: int = 1, repeat: int = 3) -> WaterfillResult:
    """Plan the fat-tree scenario, then time water-filling over its planned paths."""
    spec = fat_tree(38, rate_gbps=100.0)
    job = scattered_ring_job(
        spec, servers=12_500, gpus_per_server=8, channels=8, size=1 << 30, seed=seed
    )
    demand = demand_from_job(job)
    topo = Topology(spec)
    planner = Planner(topo, method="heuristic", time_budget_s=24.0)
    t0 = time.perf_counter()
    plan = planner.add(demand)
    plan_s = time.perf_counter() - t0
    paths = {pf.flow_id: pf.links for pf in plan.flows}
    cap = np.asarray(topo.capacity, dtype=np.float64) * 8.0  # bytes/s -> bit/s
    capacity = {i: float(c) for i, c in enumerate(cap.tolist())}
    lengths = np.array([len(p) for p in paths.values()], dtype=np.int64)
    fe = np.repeat(np.arange(len(paths), dtype=np.int64), lengths)
    le = np.fromiter((lk for p in paths.values() for lk in p), dtype=np.int64, count=len(fe))
    fill_s = rates_s = float("inf")
    rates: dict[str, float] = {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        arr = max_min_fill(fe, le, cap, len(paths))
        fill_s = min(fill_s, time.perf_counter() - t0)
        t0 = time.perf_counter()
        rates = max_min_rates(paths, capacity)
        rates_s = min(rates_s, time.perf_counter() - t0)
    values = np.array(list(rates.values()))
    assert np.allclose(values, arr)
    return WaterfillResult(
        flows=len(paths),
        entries=len(fe),
        links=len(cap),
        plan_s=plan_s,
        fill_s=fill_s,
        rates_s=rates_s,
        min_gbps=float(values.min()) / 1e9,
        max_gbps=float(values.max()) / 1e9,
        levels=len(np.unique(np.round(values, 3))),
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its line; exit status 1 when the target is missed."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.control.congestion.bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    r = run(args.seed, args.repeat)
    sys.stdout.write(
        f"water-filling, fat-tree k=38 (~100k GPUs): {r.flows} flows, {r.entries} flow-link "
        f"entries, {r.links} links (planned in {r.plan_s:.1f} s)\n"
        f"  max_min_fill (arrays) {r.fill_s * 1e3:.0f} ms, max_min_rates (dicts) "
        f"{r.rates_s * 1e3:.0f} ms, target {TARGET_S * 1e3:.0f} ms: {'ok' if r.ok else 'MISSED'}\n"
        f"  rates {r.min_gbps:.2f}..{r.max_gbps:.2f} Gbit/s, {r.levels} distinct levels\n"
    )
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
