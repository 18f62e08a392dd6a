"""One invocation: every mode of an experiment on the same topology, workload and seed.

The runner builds the workload's dependency schedule once (``icefabric.traffic.workload``), asks
the engine to run it under each mode (same code path, only the :class:`Mode` differs), turns
what the engine observed into measures, and writes ``results.json`` and ``comparison.png`` into
``results/<name>-<timestamp>/``. Engines implement :class:`Engine`: ``virtual`` (in-process,
deterministic; ``virtual.py``) and ``mininet`` (real time, root; ``mininet.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from icefabric.experiment import measures, results
from icefabric.experiment.config import Experiment, Mode
from icefabric.traffic.modes import get_mode
from icefabric.traffic.workload import (
    Schedule,
    build_schedule,
    check_against_demand,
    merge_schedules,
)

log = logging.getLogger(__name__)

Progress = Callable[[str, float], None]  # (mode, fraction of messages arrived)


class Engine(Protocol):
    """Runs a schedule under one mode and reports what it observed."""

    def run_mode(
        self, exp: Experiment, mode: Mode, schedule: Schedule, progress: Progress
    ) -> measures.Observed:
        """Run ``schedule`` under ``mode`` to completion (or the experiment's limits)."""
        ...


def make_engine(exp: Experiment) -> Engine:
    """The engine the experiment names."""
    if exp.engine == "mininet":
        from icefabric.experiment.mininet import MininetEngine

        return MininetEngine(target=exp.target)
    from icefabric.experiment.virtual import VirtualEngine

    return VirtualEngine()


@dataclass(slots=True)
class Outcome:
    """What one invocation produced."""

    doc: dict[str, Any]
    directory: Path | None

    @property
    def ok(self) -> bool:
        """Every mode completed."""
        return bool(self.doc["comparison"]["all_ok"])


def run_experiment(
    exp: Experiment,
    *,
    out_base: Path | None,
    engine: Engine | None = None,
    progress: Progress | None = None,
    plot: bool = True,
) -> Outcome:
    """Run every mode; write results.json (and comparison.png) under ``out_base`` if given."""
    schedules = []
    for job, slices in exp.jobs:
        one = build_schedule(job, slices=slices)
        bad = check_against_demand(one, job)
        if bad:  # the hosts would send other flows than the controller plans
            raise RuntimeError(f"{exp.name}: schedule and planned demand disagree: {bad[:3]}")
        schedules.append(one)
    schedule = merge_schedules(schedules)  # several jobs: side by side from the same start
    eng = engine if engine is not None else make_engine(exp)
    started = time.time()
    mode_docs = []
    wall: dict[str, float] = {}
    for name in exp.modes:
        t0 = time.perf_counter()
        try:
            obs = eng.run_mode(exp, get_mode(name), schedule, progress or (lambda m, f: None))
        except Exception as exc:  # one mode failing must not hide the others' results
            log.exception("%s: mode %s failed", exp.name, name)
            from icefabric.traffic.workload import WorkloadExecutor

            obs = measures.Observed(
                mode=name,
                executor=WorkloadExecutor(schedule, lambda m, t: None),
                ok=False,
                error=f"{type(exc).__name__}: {exc}",
            )
        wall[name] = time.perf_counter() - t0
        mode_docs.append(measures.measure(obs, schedule, exp.topology, exp.rates.scale))
    doc = results.build(exp.to_dict(), mode_docs, wall_s=wall, started=started)
    directory = None
    if out_base is not None:
        directory = results.results_dir(out_base, exp.name, started)
        results.write(doc, directory)
        if plot:
            from icefabric.experiment.report import write_plot

            write_plot(doc, directory / "comparison.png")
    return Outcome(doc=doc, directory=directory)
