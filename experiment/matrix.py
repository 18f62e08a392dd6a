"""The peers matrix at packet level: ``icectl experiment matrix --engine virtual``.

The simulator's scenarios (sim/scenarios.py) that have a small packet-level preset run as that
preset: its topology, job(s), unplanned background flows and link failure, every scheme in one
``icectl experiment run`` per seed (ice.p4 on embedded switches in virtual time; the same
topology, job, seed and code path in every mode except what the mode changes). A scheme that
fails, or a run that loses packets, is counted and shown, never dropped: a failed mode scores 0.

The **ceiling** of each scheme is the best any rate allocation could do on that run's paths
(``experiment.versus.ceiling`` -> ``sim/bound.py``: the job's bytes over the busiest link, the
background deferred, a linear programme around a link failure) on the paths the switches took
for ECMP and planned paths when no link went down; else on the simulator's own routing of the
scheme's balance (spraying's stripes, which also bound flowlet switching; after a failure the
re-hashed or replanned paths). The document has the simulator
matrix's schema (sim/matrix.py; ``engine`` is ``virtual``, ``presets`` names each scenario's
preset) plus, per scheme, ``queue_p99`` (packets, median [p10, p90]), ``losses`` (drops + PSN
gaps over every seed) and ``errors``; per seed, ``ceiling_paths`` says where each ceiling's
paths came from.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from icefabric.sim.matrix import Progress, collect, distribution, summarise
from icefabric.traffic.modes import get_mode

# scenario of the simulator's matrix -> the packet-level preset that plays it (small fabrics);
# (f) oversubscription and (g) mixed NICs have no packet-level preset
PACKET_PRESETS = {
    "collisions": "ecmp-collides",
    "two-jobs": "two-jobs",
    "incast": "incast",
    "background": "background",
    "failure": "link-down",
    # no simulator counterpart: a second job arriving mid-collective; its ceiling, as with
    # two-jobs, is the mean of each job's alone on its paths, which the arrival does not change
    "job-arrives": "job-arrives",
    # no simulator counterpart either: unplanned writes converging on a ring member
    "incast-storage": "incast-storage",
}
DEFAULT_PACKET_SCHEMES = ("ecmp+dcqcn", "ecmp+hpcc", "spray+hpcc", "ice")


def run_seed(scenario: str, seed: int, schemes: tuple[str, ...], engine: str) -> dict[str, Any]:
    """One preset at one seed, every scheme in one run: each scheme's busbw / bound, the ceiling
    of its paths, its queue p99, losses and error (and the CPU seconds, ``cpu_s``)."""
    from icefabric.experiment.presets import load_preset
    from icefabric.experiment.runner import run_experiment
    from icefabric.experiment.versus import ceiling, load_run

    if engine != "virtual":
        raise ValueError(f"engine: the packet-level matrix runs on engine virtual, not {engine!r}")
    cpu0 = time.process_time()
    exp = replace(load_preset(PACKET_PRESETS[scenario]), modes=tuple(schemes), seed=seed)
    doc = run_experiment(exp, out_base=None, plot=False).doc
    run = load_run(doc, f"preset {exp.name} seed {seed}")
    out: dict[str, Any] = {
        "scheme": {},
        "ceiling": {},
        "ceiling_paths": {},
        "queue_p99": {},
        "losses": {},
        "errors": {},
    }
    for name in schemes:
        m = run.modes[name]
        ok = bool(m.get("ok"))
        out["scheme"][name] = float(m["busbw_over_bound"]) if ok else 0.0
        if not ok:
            out["errors"][name] = str(m.get("error") or "did not complete")
        c, source = ceiling(run, name)
        out["ceiling"][name] = round(c, 6)
        out["ceiling_paths"][name] = source
        out["queue_p99"][name] = float((m.get("queue_packets") or {}).get("p99") or 0.0)
        out["losses"][name] = int(m.get("drops") or 0) + int(m.get("psn_losses") or 0)
    out["cpu_s"] = round(time.process_time() - cpu0, 2)
    return out


def run_packet_matrix(
    *,
    scenarios: tuple[str, ...] = tuple(PACKET_PRESETS),
    schemes: tuple[str, ...] = DEFAULT_PACKET_SCHEMES,
    seeds: int = 10,
    progress: Progress | None = None,
    workers: int = 1,
    cluster: str | None = None,
    tasks_dir: Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """The packet-level matrix as a sweep of scenario-seed tasks (``sim.matrix.collect``:
    checkpointed in ``tasks_dir``, ``resume`` goes on where a stopped run stopped); the
    matrix.json doc."""
    for s in scenarios:
        if s not in PACKET_PRESETS:
            raise ValueError(
                f"scenarios: expected names from {', '.join(PACKET_PRESETS)} at packet level "
                f"(engine virtual), got {s!r}"
            )
    for s in schemes:
        if "virtual" not in get_mode(s).engines:
            raise ValueError(f"schemes: {s} does not run at packet level (engine virtual)")
    if seeds < 1:
        raise ValueError(f"seeds: expected >= 1, got {seeds}")
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    # seed by seed, so a stopped run has every scenario at its first seeds (--resume, or a
    # smaller --seeds, then summarises them)
    tasks = [
        (sc, seed, tuple(schemes), "virtual") for seed in range(1, seeds + 1) for sc in scenarios
    ]
    got = collect(
        run_seed,
        tasks,
        progress=progress,
        workers=workers,
        cluster=cluster,
        tasks_dir=tasks_dir,
        resume=resume,
    )
    per_seed = {sc: [got[(sc, seed)] for seed in range(1, seeds + 1)] for sc in scenarios}
    cells = summarise(per_seed, schemes)
    for sc, runs in per_seed.items():
        for name in schemes:
            cell = cells[sc]["schemes"][name]
            cell["queue_p99"] = distribution([r["queue_p99"][name] for r in runs])
            cell["losses"] = sum(r["losses"][name] for r in runs)
            cell["errors"] = sorted({r["errors"][name] for r in runs if name in r["errors"]})
    return {
        "engine": "virtual",
        "presets": {sc: PACKET_PRESETS[sc] for sc in scenarios},
        "seeds": list(range(1, seeds + 1)),
        "schemes_order": list(schemes),
        "cpu_s": round(sum(r["cpu_s"] for r in got.values()), 1),  # every task's own CPU
        "scenarios": cells,
        "per_seed": per_seed,
    }
