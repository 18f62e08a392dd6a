"""The published comparison at scale: ``python -m icefabric.sim.scale --write sim/README.md``.

ICE (planned paths, water-filling caps, ICE end-side control) against ECMP (ice.p4's hash) +
DCQCN, same workloads and seed, on 400G fabrics: ring all-reduce (1 GiB, 8 channels) and
all-to-all (one channel) over 128 ... 4,096 GPUs whose ranks a scheduler scattered over a 1:1
leaf-spine (seeded shuffle, one GPU per NIC), and one all-reduce on a fat-tree(k=16). Mixed
training is ``hetero_report.py``.

Every run is a task of one sweep (``sweep.py``): a local Dask cluster of ``--workers`` processes
by default, ``--cluster tcp://SCHEDULER:8786`` for a user's, ``--serial`` for none. It prints a
Markdown report and, with ``--write FILE``, replaces the part of FILE between
``<!-- scale:begin -->`` and ``<!-- scale:end -->`` with it. Every figure is measured by this run.
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from icefabric.control.ccl.job import JobSpec, Phase, Rank, parse_job
from icefabric.control.topology import Topology
from icefabric.sim.config import SimConfig
from icefabric.sim.engine import Simulator
from icefabric.sim.sweep import SweepError, run_tasks
from icefabric.sim.workload import workload_from_jobs
from icefabric.topo.generators import fat_tree, leaf_spine
from icefabric.topo.spec import TopologySpec

BEGIN = "<!-- scale:begin -->"
END = "<!-- scale:end -->"
CONFIGS = (
    SimConfig(routing="ecmp", control="dcqcn"),
    SimConfig(routing="ice", control="ice"),
)


A2A_WINDOW = 16  # peers in flight per rank: of the order of NCCL's p2p channels per rank


@dataclass(slots=True, frozen=True, kw_only=True)
class Case:
    """One workload on one fabric."""

    name: str
    gpus: int
    topo: str  # "leaf-spine" or "fat-tree"
    collective: str
    message_bytes: int
    channels: int
    window: int | None = None  # all-to-all: peers in flight per rank (window.py); None: all


CASES: tuple[Case, ...] = (
    *(
        Case(
            name=f"all-reduce {n}",
            gpus=n,
            topo="leaf-spine",
            collective="all-reduce",
            message_bytes=1 << 30,
            channels=8,
        )
        for n in (128, 512, 1024, 4096)
    ),
    Case(
        name="all-reduce 1024 fat-tree",
        gpus=1024,
        topo="fat-tree",
        collective="all-reduce",
        message_bytes=1 << 30,
        channels=8,
    ),
    Case(
        name="all-to-all 128 all peers at once",
        gpus=128,
        topo="leaf-spine",
        collective="all-to-all",
        message_bytes=256 << 20,
        channels=1,
    ),
    *(
        Case(
            name=f"all-to-all {n}",
            gpus=n,
            topo="leaf-spine",
            collective="all-to-all",
            message_bytes=256 << 20,
            channels=1,
            window=A2A_WINDOW,
        )
        for n in (128, 512, 1024, 4096)
    ),
)


def fabric(case: Case) -> TopologySpec:
    """The 400G fabric of a case."""
    if case.topo == "fat-tree":
        return fat_tree(16, rate_gbps=400.0)  # 1,024 hosts
    side = 16 if case.gpus <= 128 else 32 if case.gpus <= 1024 else 64
    return leaf_spine(
        leaves=case.gpus // side, spines=side // 2, hosts_per_leaf=side, host_rate_gbps=400.0
    )


def run_case(case: Case, config: SimConfig, seed: int) -> dict[str, float | str | int]:
    """One case under one configuration."""
    spec = fabric(case)
    rng = np.random.default_rng(seed)
    hosts = [spec.hosts[i].name for i in rng.permutation(len(spec.hosts))[: case.gpus]]
    phase: dict[str, object] = {
        "name": case.collective,
        "collective": case.collective,
        "channels": case.channels,
        "message_bytes": case.message_bytes,
    }
    if case.collective != "all-to-all":
        phase["algorithm"] = "ring"
    if case.window is None:
        job = parse_job({"name": "scale", "hosts": hosts, "phases": [phase]})
    else:
        # built directly: a job file's bound on flow rows (MAX_FLOWS) does not apply to the
        # windowed model, which holds 2 W n rows however many rank pairs there are
        job = JobSpec(
            name="scale",
            ranks=tuple(Rank(rank=r, host=h) for r, h in enumerate(hosts)),
            phases=(
                Phase(
                    name=case.collective,
                    collective=case.collective,
                    algorithm="",
                    channels=case.channels,
                    message_bytes=case.message_bytes,
                    ranks=tuple(range(len(hosts))),
                ),
            ),
        )
    cpu0 = time.process_time()
    w = workload_from_jobs([job], a2a_window=case.window)
    res = Simulator(Topology(spec), w, config).run()
    c = res.collectives[0]
    pairs = sum(x.pairs for x in w.windows)
    return {
        "busbw_over_bound": c.busbw_over_bound,
        "time_ms": c.time_us / 1e3,
        "flows": f"{pairs} in {res.flows} rows" if w.windows else str(res.flows),
        "unfinished": res.unfinished,
        "queue_p99_kb": res.queue_p99_bytes / 1e3,
        "cpu_s": time.process_time() - cpu0,
        "topology": spec.name,
    }


def report(cases: list[Case], seed: int, *, cluster: str | None, workers: int, serial: bool) -> str:
    """Run everything through one sweep; the Markdown section."""
    tasks = [(case, cfg, seed) for case in cases for cfg in CONFIGS]
    wall0 = time.perf_counter()
    out = run_tasks(run_case, tasks, cluster=cluster, workers=workers, serial=serial, label="scale")
    wall = time.perf_counter() - wall0
    where = "serially" if serial else f"on {cluster}" if cluster else f"on {workers} local workers"
    lines = [
        BEGIN,
        "",
        f"Generated by `python -m icefabric.sim.scale --write sim/README.md` (seed {seed}, "
        f"{len(tasks)} runs {where}, {wall / 60:.1f} min wall; {platform.machine()}, Python "
        f"{platform.python_version()}). busbw ÷ bound: nccl-tests "
        "busbw over the NIC rate (400G), 1.0 = the non-blocking bound. ECMP = ice.p4's hash of the "
        "flows' stand-in keys + DCQCN; ICE = planned paths + water-filling caps + ICE control.",
        "",
        "| workload | fabric | flows | ECMP+DCQCN busbw/bound | ICE busbw/bound | ICE ÷ ECMP "
        "| ECMP p99 queue KB | ICE p99 queue KB | CPU s (ECMP, ICE) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k, case in enumerate(cases):
        e, i = out[2 * k], out[2 * k + 1]
        ratio = float(e["time_ms"]) / float(i["time_ms"])
        note = "" if not (e["unfinished"] or i["unfinished"]) else " (unfinished flows!)"
        lines.append(
            f"| {case.name} | {e['topology']} | {e['flows']} | {float(e['busbw_over_bound']):.3f} "
            f"| {float(i['busbw_over_bound']):.3f} | {ratio:.2f}x{note} "
            f"| {float(e['queue_p99_kb']):.0f} | {float(i['queue_p99_kb']):.0f} "
            f"| {float(e['cpu_s']):.0f}, {float(i['cpu_s']):.0f} |"
        )
    lines += ["", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; print it, or write it into a file between the markers."""
    ap = argparse.ArgumentParser(prog="python -m icefabric.sim.scale", description=__doc__)
    ap.add_argument("--write", default=None, help="file whose marked section to replace")
    ap.add_argument("--only", action="append", help="case name(s) to run (default all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cluster", default=None, help="Dask scheduler address, tcp://HOST:8786")
    ap.add_argument("--workers", type=int, default=2, help="local Dask worker processes")
    ap.add_argument("--serial", action="store_true", help="no Dask: one run after another")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines drown the bar
    cases = [c for c in CASES if not args.only or c.name in args.only]
    if args.only and not cases:
        names = ", ".join(c.name for c in CASES)
        sys.stderr.write(f"scale: --only: no case named {args.only}; expected one of {names}\n")
        return 2
    try:
        text = report(
            cases, args.seed, cluster=args.cluster, workers=args.workers, serial=args.serial
        )
    except SweepError as e:
        sys.stderr.write(f"scale: {e}\n")
        return 2
    if args.write:
        path = Path(args.write)
        old = path.read_text()
        if BEGIN not in old or END not in old:
            sys.stderr.write(f"scale: {path}: no {BEGIN} ... {END} section to replace\n")
            return 2
        head, rest = old.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        path.write_text(head + text + tail)
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
