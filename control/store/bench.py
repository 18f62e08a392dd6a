"""etcd store benchmark: ``python -m icefabric.control.store.bench`` (part of ``make bench``).

The planner bench's ~100k-GPU scenario (fat-tree k=38, 12,500 servers x 8 GPUs, a scattered
ring all-reduce with 8 channels: 100,000 flows) planned once, then on a local 3-member etcd
cluster (``LocalEtcdCluster``, loopback, data on disk in a temporary folder):

* **write**: the primary saves the whole state (the 100,000-rank job, every flow's path
  choice, phases): blob chunks + one term-guarded transaction; then a save after one flow moved
  (the plan document is rewritten, the job is not);
* **takeover**: a standby reads every document at one revision and rebuilds the plan on the
  saved paths (parse the job, its demand, every flow straight onto the primary's choice:
  ``Planner.add_pinned``, no search). Checked: the
  standby's choices equal the primary's.

A switch resync is not part of it: a fabric of 1,805 switches cannot run on one machine (the
e2e test measures the takeover of a whole fabric, control/README.md "Replicas").
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from icefabric.control.ccl.demand import demand_from_job
from icefabric.control.planner.bench import scattered_ring_job
from icefabric.control.planner.planner import DEFAULT_WORK_BUDGET, Planner
from icefabric.control.store.base import Snapshot
from icefabric.control.store.etcd import EtcdStore
from icefabric.control.store.localcluster import LocalEtcdCluster, etcd_binary
from icefabric.control.topology import Topology
from icefabric.topo.generators import fat_tree
from icefabric.waiting import poll_until


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the figures."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.control.store.bench", description=__doc__
    )
    ap.add_argument("--repeat", type=int, default=3, help="measured repetitions (default 3)")
    ap.add_argument("--k", type=int, default=38, help="fat-tree k (default 38: ~100k GPUs)")
    ap.add_argument(
        "--lease",
        type=int,
        default=5,
        help="the primary's lease in seconds (default 5: a 6 MB write keeps a loaded etcd busy "
        "long enough to miss a 1 s lease's keepalives, control/README.md 'Replicas')",
    )
    args = ap.parse_args(argv)
    logging.getLogger("icefabric").setLevel(logging.ERROR)
    if etcd_binary() is None:
        print("store bench: skipped, etcd not on PATH (make setup installs etcd-server)")
        return 0
    spec = fat_tree(args.k, rate_gbps=100.0)
    servers = min(12_500, len(spec.hosts))
    job = scattered_ring_job(
        spec, servers=servers, gpus_per_server=8, channels=8, size=1 << 30, seed=1
    )
    demand = demand_from_job(job)
    topo = Topology(spec)
    planner = Planner(topo, method="heuristic", work_budget=DEFAULT_WORK_BUDGET)
    t0 = time.perf_counter()
    planner.add(demand)
    plan_s = time.perf_counter() - t0
    by_flow = planner.choices()
    choices = [by_flow.get(f.flow_id, -1) for f in demand.flows]
    snap = Snapshot(
        topology=spec.name,
        jobs=[job],
        choices={job.name: choices},
        phases={job.name: job.phases[0].name},
    )
    sizes = {k: len(v) for k, v in EtcdStore.documents(snap).items()}
    print(
        f"scenario: fat-tree k={args.k}, {len(job.ranks):,} GPUs, {len(demand.flows):,} flows "
        f"(planned in {plan_s:.1f} s, not counted); documents: "
        + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items() if v > 1000)
    )
    writes: list[float] = []
    moves: list[float] = []
    takeovers: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="ice-etcd-bench-") as tmp:
        cluster = LocalEtcdCluster(Path(tmp), members=3).start()
        try:
            for r in range(args.repeat):
                primary = EtcdStore(
                    cluster.url, f"{spec.name}-{r}", name="primary", lease_s=args.lease
                )
                primary.start(lambda _t: None, lambda _w: None)
                if not poll_until(lambda p=primary: p.term > 0, 10):  # type: ignore[misc]
                    print("store bench: no primary elected", file=sys.stderr)
                    return 1
                t0 = time.perf_counter()
                primary.save(snap)
                writes.append(time.perf_counter() - t0)
                moved = list(choices)
                moved[0] = (moved[0] + 1) % 2
                t0 = time.perf_counter()
                primary.save(
                    Snapshot(
                        topology=spec.name,
                        jobs=[job],
                        choices={job.name: moved},
                        phases=snap.phases,
                    )
                )
                moves.append(time.perf_counter() - t0)
                primary.save(snap)
                standby = EtcdStore(cluster.url, f"{spec.name}-{r}", name="standby")
                t0 = time.perf_counter()
                state = standby.load(spec.name)
                t1 = time.perf_counter()
                if state.errors or len(state.jobs) != 1:
                    print(f"store bench: read back {state.errors[:2]}", file=sys.stderr)
                    return 1
                again = Planner(topo, method="heuristic", work_budget=DEFAULT_WORK_BUDGET)
                d2 = demand_from_job(state.jobs[0])
                saved = zip((f.flow_id for f in d2.flows), state.choices[job.name], strict=True)
                again.add_pinned(d2, dict(saved))  # what a takeover does (statefile.py)
                t2 = time.perf_counter()
                if again.choices() != by_flow:
                    print(
                        "store bench: the standby's plan differs from the primary's",
                        file=sys.stderr,
                    )
                    return 1
                takeovers.append((t1 - t0, t2 - t1, t2 - t0))
                standby.client.close()
                primary.close()
        finally:
            cluster.close()
    med = statistics.median
    print(
        f"write the whole state: median {med(writes):.2f} s (worst {max(writes):.2f}); "
        f"after one flow moved: median {med(moves):.2f} s"
    )
    print(
        f"take it over: read {med(t[0] for t in takeovers):.2f} s + rebuild the plan on the saved "
        f"paths {med(t[1] for t in takeovers):.2f} s = {med(t[2] for t in takeovers):.2f} s median "
        f"(worst {max(t[2] for t in takeovers):.2f}); the standby's plan equals the primary's "
        f"({args.repeat} runs, 3-member etcd on loopback)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
