"""Simulator speed: ``python -m icefabric.sim.bench`` (part of ``make bench``).

A 1 GiB ring all-reduce with 8 channels whose ranks a scheduler scattered over a 400G leaf-spine
(seeded shuffle of the hosts, one GPU per NIC), under ECMP + DCQCN (ice.p4's hash, the most
eventful configuration: collisions, queues, CNPs):

* 1,024 GPUs: 32 leaves x 32 hosts, 16 spines (1:1); 8,192 flows. Target <= 30 s on one core.
* 4,096 GPUs: 64 leaves x 64 hosts, 32 spines (1:1); 32,768 flows. Target <= 5 min.
* 16,384 GPUs: 128 leaves x 128 hosts, 64 spines (1:1); 131,072 flows. Target <= 30 min.
* A 16,384-GPU data-parallel mixed-training step (``hetero.py``): NVIDIA + Biren, 1,024
  servers each, 8 x 400G NICs per server on a rail-optimised fabric (64-server units:
  ``rail_cluster``), 16 samples per server; the
  mixed job's and each group's bucketed gradient all-reduces simulated (ECMP + DCQCN) and the
  efficiency computed. Target <= 30 min.

``--quick`` runs the first two only.

Both the wall time and the process's CPU time are printed: on a shared machine the CPU time is
what one core spent; the target is judged on it. The peak memory column is the process's peak
resident set (``ru_maxrss``) when the scenario ended: scenarios run smallest first, so each
row's figure is that scenario's peak unless an earlier one's was higher.
"""

from __future__ import annotations

import argparse
import logging
import math
import resource
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from icefabric.control.ccl.job import JobSpec, parse_job
from icefabric.control.cli.common import int_range
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import Simulator
from icefabric.sim.hetero import Cluster, run_scenario
from icefabric.sim.workload import workload_from_jobs
from icefabric.topo.generators import MAX_PORTS, leaf_spine
from icefabric.topo.spec import TopologySpec

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True, kw_only=True)
class SimBench:
    """One scenario's measurement."""

    name: str
    gpus: int
    flows: int
    label: str
    steps: int
    sim_ms: float
    busbw_over_bound: float
    wall_s: float
    cpu_s: float
    peak_mb: float  # the process's peak resident set when the scenario ended
    target_s: float

    @property
    def ok(self) -> bool:
        """Within the target on one core (CPU time)."""
        return self.cpu_s <= self.target_s


def ring_job(spec: TopologySpec, *, gpus: int, size: int, channels: int, seed: int) -> JobSpec:
    """A ring all-reduce over a seeded shuffle of the hosts (one rank per host)."""
    rng = np.random.default_rng(seed)
    hosts = [spec.hosts[i].name for i in rng.permutation(len(spec.hosts))[:gpus]]
    return parse_job(
        {
            "name": "bench",
            "hosts": hosts,
            "phases": [
                {
                    "name": "allreduce",
                    "collective": "all-reduce",
                    "algorithm": "ring",
                    "channels": channels,
                    "message_bytes": size,
                }
            ],
        }
    )


def run(gpus: int, *, target_s: float, config: SimConfig, seed: int = 1) -> SimBench:
    """Simulate the scenario of ``gpus`` GPUs and time it."""
    side = 32 if gpus <= 1024 else 64 if gpus <= 4096 else 128
    spec = leaf_spine(
        leaves=gpus // side, spines=side // 2, hosts_per_leaf=side, host_rate_gbps=400.0
    )
    job = ring_job(spec, gpus=gpus, size=1 << 30, channels=8, seed=seed)
    w = workload_from_jobs([job])
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = Simulator(Topology(spec), w, config).run()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return SimBench(
        name=f"ring all-reduce {gpus}",
        gpus=gpus,
        flows=len(w),
        label=res.label,
        steps=res.steps,
        sim_ms=res.sim_time_us / 1e3,
        busbw_over_bound=res.collectives[0].busbw_over_bound,
        wall_s=wall,
        cpu_s=cpu,
        peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        target_s=target_s,
    )


def rail_cluster(gpus: int) -> Cluster:
    """The default servers (8 GPUs, 8 NICs) in scalable units large enough that the two-tier
    rail fabric fits the generator's ports per switch: a spine has a port per rail leaf (units x
    8), at most ``MAX_PORTS``, so 2,048 servers take 64-server units (256 leaves, 32 spines of
    256 ports, 800G uplinks) instead of the SuperPOD's 32 (512 leaves)."""
    base = Cluster()
    servers = gpus // base.gpus
    per_leaf = base.servers_per_leaf
    while math.ceil(servers / per_leaf) * base.nics > MAX_PORTS:
        per_leaf *= 2
    return replace(base, servers_per_leaf=per_leaf)


def run_dp(gpus: int, *, target_s: float, config: SimConfig, seed: int = 1) -> SimBench:
    """A data-parallel mixed-training step over ``gpus`` GPUs (NVIDIA + Biren), timed."""
    from icefabric.sim.hetero_report import scaled

    cluster = rail_cluster(gpus)
    scenario = scaled("dp", gpus, cluster)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = run_scenario(scenario, config, seed=seed, cluster=cluster)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    log.info(
        "dp %d: efficiency %.4f (ideal net %.4f)", gpus, res.efficiency, res.compute_efficiency
    )
    return SimBench(
        name=f"DP mixed step {gpus}",
        gpus=gpus,
        flows=gpus * cluster.channels_per_nic,  # the mixed job's all-reduce: 2 rings per NIC
        label=res.label,
        steps=0,
        sim_ms=res.mixed.step_s * 1e3,
        busbw_over_bound=res.efficiency,
        wall_s=wall,
        cpu_s=cpu,
        peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        target_s=target_s,
    )


def format_table(rows: list[SimBench]) -> str:
    """A plain-text table."""
    head = (
        f"{'scenario':<26}{'flows':>7}{'config':>12}{'steps':>7}{'sim ms':>8}{'busbw/B':>8}"
        f"{'wall s':>8}{'cpu s':>7}{'peak MB':>8}{'target':>7}  ok"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.name:<26}{r.flows:>7}{r.label:>12}{r.steps:>7}{r.sim_ms:>8.1f}"
            f"{r.busbw_over_bound:>8.3f}{r.wall_s:>8.1f}{r.cpu_s:>7.1f}{r.peak_mb:>8.0f}"
            f"{r.target_s:>7.0f}"
            f"  {'yes' if r.ok else 'NO'}"
        )
    lines.append(
        "ring: 1 GiB all-reduce, 8 channels, ranks scattered over a 400G leaf-spine (1:1), "
        "busbw/B = busbw / NIC rate; DP mixed step: sim ms = the training step, busbw/B column = "
        "mixed-training efficiency, steps not counted; target on CPU time (one core)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table; exit status 1 when a target is missed."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.sim.bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--only", choices=("1024", "4096", "16384", "dp16384"), help="run one scenario")
    ap.add_argument("--quick", action="store_true", help="1,024 and 4,096 GPUs only")
    ap.add_argument("--seed", type=int_range(0), default=1)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    cfg = SimConfig(routing="ecmp", control="dcqcn")
    rows = []
    big = not args.quick
    if args.only in (None, "1024"):
        rows.append(run(1024, target_s=30.0, config=cfg, seed=args.seed))
    if args.only in (None, "4096"):
        rows.append(run(4096, target_s=300.0, config=cfg, seed=args.seed))
    if args.only == "16384" or (args.only is None and big):
        rows.append(run(16384, target_s=1800.0, config=cfg, seed=args.seed))
    if args.only == "dp16384" or (args.only is None and big):
        rows.append(run_dp(16384, target_s=1800.0, config=cfg, seed=args.seed))
    sys.stdout.write(format_table(rows) + "\n")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
