"""Planner benchmark: ``python -m icefabric.control.planner.bench``.

Two scenarios, both a ring all-reduce with 8 channels whose ranks a scheduler scattered over the
fabric (a seeded shuffle of the hosts: the case where hashing hurts most and planning matters):

* leaf-spine: 1,024 GPUs, one per host (NIC): 32 leaves x 32 hosts at 100G, 16 spines, 200G
  uplinks (1:1); 8,192 flows.
* fat-tree: ~100k GPUs in a three-tier fat-tree(k=38): 12,500 servers of 8 GPUs (the 8 ranks of
  a server talk over NVLink, so each channel's ring crosses the network once per server);
  100,000 flows over 361 equal-cost paths between pods.

The heuristic runs on the deterministic work budget (``DEFAULT_WORK_BUDGET`` counted repair
steps, not the wall clock), so the plan and its gap are the same on a loaded machine; only the
time column varies. Targets (issue 5): plan in <= 1 s and <= 30 s on one core, max link load within 5 % of the
lower bound (the load a perfect fractional split would give). Beside it, ECMP's busiest fabric
link as ice.p4's ECMP places the flows (control/planner/ecmp.py): for the flows' stand-in keys,
and the median / p99 / worst over seeded random UDP source-port draws with the fraction of draws
where some fabric link exceeds the fabric lower bound.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass

import numpy as np

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.ccl.job import JobSpec, Phase, Rank
from icefabric.control.cli.common import int_range
from icefabric.control.planner.ecmp import EcmpDraws, EcmpModel
from icefabric.control.planner.exact import cut_lower_bound
from icefabric.control.planner.heuristic import fabric_mask
from icefabric.control.planner.planner import DEFAULT_WORK_BUDGET, Planner
from icefabric.control.topology import Topology
from icefabric.topo.generators import fat_tree, leaf_spine
from icefabric.topo.spec import TopologySpec


@dataclass(slots=True, frozen=True)
class BenchResult:
    """One scenario's figures."""

    name: str
    gpus: int
    flows: int
    plan_s: float
    max_load_s: float
    lower_bound_s: float
    fabric_max_s: float
    fabric_bound_s: float
    ecmp_max_load_s: float | None
    target_s: float
    ecmp_draws: EcmpDraws | None = None
    ecmp_s: float = 0.0  # time spent on the ECMP figures
    steps: int = 0  # repair steps the planner spent (of its work budget)

    @property
    def gap(self) -> float:
        """max load / lower bound - 1."""
        return self.max_load_s / self.lower_bound_s - 1.0

    @property
    def fabric_gap(self) -> float:
        """max fabric-link load / fabric lower bound - 1."""
        return self.fabric_max_s / self.fabric_bound_s - 1.0

    @property
    def ok(self) -> bool:
        """Both targets met: time and gap <= 5 %."""
        return self.plan_s <= self.target_s and self.gap <= 0.05 and self.fabric_gap <= 0.05


def scattered_ring_job(
    spec: TopologySpec, *, servers: int, gpus_per_server: int, channels: int, size: int, seed: int
) -> JobSpec:
    """A ring all-reduce whose servers are a seeded random sample of the topology's hosts."""
    rng = np.random.default_rng(seed)
    hosts = [spec.hosts[i].name for i in rng.permutation(len(spec.hosts))[:servers]]
    ranks = tuple(
        Rank(rank=k, host=hosts[k // gpus_per_server], device="H100")
        for k in range(servers * gpus_per_server)
    )
    phase = Phase(
        name="allreduce",
        collective="all-reduce",
        algorithm="ring",
        channels=channels,
        message_bytes=size,
        ranks=tuple(range(len(ranks))),
    )
    return JobSpec(name="bench", ranks=ranks, phases=(phase,))


def run_scenario(
    name: str,
    spec: TopologySpec,
    job: JobSpec,
    *,
    target_s: float,
    ecmp: bool,
    draws: int = 100,
    seed: int = 1,
) -> BenchResult:
    """Plan one scenario and measure it."""
    demand = demand_from_job(job)
    topo = Topology(spec)
    planner = Planner(topo, method="heuristic", work_budget=DEFAULT_WORK_BUDGET)
    t0 = time.perf_counter()
    plan = planner.add(demand)
    plan_s = time.perf_counter() - t0
    mask = fabric_mask(planner.state)
    fab = mask[: topo.n_links]
    fabric_bound = cut_lower_bound(planner.state, fabric_only=True)
    e = None
    dist = None
    t1 = time.perf_counter()
    if ecmp:
        model = EcmpModel(topo)
        e = float(model.loads(planner.state)[: topo.n_links][fab].max())
        if draws > 0:
            dist = model.draws(
                planner.state, n_draws=draws, seed=seed, fabric=mask, bound_s=fabric_bound
            )
    ecmp_s = time.perf_counter() - t1
    return BenchResult(
        name=name,
        gpus=len(job.ranks),
        flows=len(demand),
        plan_s=plan_s,
        max_load_s=plan.max_load_s,
        lower_bound_s=plan.lower_bound_s,
        fabric_max_s=float(planner.state.load[: topo.n_links][fab].max()),
        fabric_bound_s=fabric_bound,
        ecmp_max_load_s=e,
        target_s=target_s,
        ecmp_draws=dist,
        ecmp_s=ecmp_s,
        steps=planner.last_steps,
    )


def leaf_spine_scenario(seed: int, ecmp: bool, draws: int = 100) -> BenchResult:
    """1,024-GPU leaf-spine ring all-reduce, 8 channels."""
    spec = leaf_spine(leaves=32, spines=16, hosts_per_leaf=32, host_rate_gbps=100.0)
    job = scattered_ring_job(
        spec, servers=1024, gpus_per_server=1, channels=8, size=1 << 30, seed=seed
    )
    return run_scenario(
        "leaf-spine 32x16", spec, job, target_s=1.0, ecmp=ecmp, draws=draws, seed=seed
    )


def fat_tree_scenario(seed: int, ecmp: bool, draws: int = 20) -> BenchResult:
    """~100k-GPU fat-tree(38) ring all-reduce, 8 channels."""
    spec = fat_tree(38, rate_gbps=100.0)
    job = scattered_ring_job(
        spec, servers=12_500, gpus_per_server=8, channels=8, size=1 << 30, seed=seed
    )
    return run_scenario(
        "fat-tree k=38", spec, job, target_s=30.0, ecmp=ecmp, draws=draws, seed=seed
    )


def _pct(gap: float) -> str:
    """A gap in percent; float noise around zero shows as 0.0 %."""
    return f"{max(gap, 0.0) * 100 if gap > -1e-9 else gap * 100:.1f}%"


def format_table(results: list[BenchResult]) -> str:
    """A plain-text table of the results."""
    head = (
        f"{'scenario':<16}{'GPUs':>7}{'flows':>8}{'time s':>8}{'target':>7}"
        f"{'steps':>7}{'max ms':>8}{'bound':>8}{'gap':>7}{'fabric':>8}{'bound':>8}{'gap':>7}"
        f"{'ECMP':>8}  ok"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        e = f"{r.ecmp_max_load_s * 1e3:8.1f}" if r.ecmp_max_load_s is not None else f"{'-':>8}"
        lines.append(
            f"{r.name:<16}{r.gpus:>7}{r.flows:>8}{r.plan_s:>8.2f}{r.target_s:>7.0f}{r.steps:>7}"
            f"{r.max_load_s * 1e3:>8.1f}{r.lower_bound_s * 1e3:>8.1f}{_pct(r.gap):>7}"
            f"{r.fabric_max_s * 1e3:>8.1f}{r.fabric_bound_s * 1e3:>8.1f}{_pct(r.fabric_gap):>7}"
            f"{e}  {'yes' if r.ok else 'NO'}"
        )
    lines.append(
        f"steps: repair steps used of the deterministic work budget ({DEFAULT_WORK_BUDGET:,});"
        " loads in ms: the busiest link's planned bytes at line rate (1 GiB all-reduce); max/bound over"
        " all links, fabric/bound over switch-to-switch links; ECMP = fabric max as ice.p4's ECMP"
        " hashes the flows' stand-in keys (model: control/planner/ecmp.py)"
    )
    drawn = [r for r in results if r.ecmp_draws is not None]
    if drawn:
        lines.append("")
        lines.append(
            f"{'ECMP, random UDP source ports':<30}{'draws':>6}{'median':>8}{'p99':>8}"
            f"{'worst':>8}{'bound':>8}{'P(>bound)':>10}{'time s':>8}"
        )
        for r in drawn:
            d = r.ecmp_draws
            assert d is not None
            lines.append(
                f"{r.name:<30}{d.n:>6}{d.median_s * 1e3:>8.1f}{d.p99_s * 1e3:>8.1f}"
                f"{d.worst_s * 1e3:>8.1f}{d.bound_s * 1e3:>8.1f}{d.p_above_bound * 100:>9.1f}%"
                f"{r.ecmp_s:>8.2f}"
            )
        lines.append(
            "busiest fabric link (ms) when every flow's UDP source port is drawn at random "
            "(seeded); bound = fabric lower bound; P = fraction of draws above it"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table; exit status 1 when a target is missed."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.control.planner.bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--only", choices=("leaf-spine", "fat-tree"), help="run one scenario")
    ap.add_argument("--seed", type=int_range(0), default=1)
    ap.add_argument(
        "--no-ecmp", dest="ecmp", action="store_false", help="skip ECMP's max load (saves ~10 s)"
    )
    ap.add_argument(
        "--draws",
        type=int_range(0, 1_000_000),
        default=None,
        help="random source-port draws for ECMP (default 100 leaf-spine, 20 fat-tree; 0: none)",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    results = []
    if args.only in (None, "leaf-spine"):
        results.append(
            leaf_spine_scenario(args.seed, args.ecmp, 100 if args.draws is None else args.draws)
        )
    if args.only in (None, "fat-tree"):
        results.append(
            fat_tree_scenario(args.seed, args.ecmp, 20 if args.draws is None else args.draws)
        )
    sys.stdout.write(format_table(results) + "\n")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
