"""The peers matrix in the simulator: schemes (traffic/modes.py) x scenarios (scenarios.py) x seeds.

For every scenario and seed the scenario is built once; every scheme runs on it, and so does the
**ceiling** of every distinct set of paths the schemes used (the same routing and QP striping:
the best any rate allocation could do on those paths, ``sim/bound.py``). A cell is the median of the seeds
with p10 and p90 (numpy's linear interpolation); ICE ÷ best peer is computed per seed against the
peer with the best median, and reported as its median, p10 and p90.

``DIR/matrix.json`` (schema in sim/README.md, "The peers matrix")::

    {"engine": "sim", "gpus": 128, "message_bytes": ..., "seeds": [1, ...], "cpu_s": ...,
     "scenarios": {NAME: {
        "schemes": {NAME: {"busbw_over_bound": {"median", "p10", "p90"}, "seeds": N,
                           "ceiling": {"median", "p10", "p90"}}},
        "ceiling": {"median", "p10", "p90"},     # the best ceiling of any scheme's paths, per seed
        "best_peer": NAME, "ice_over_best_peer": X,
        "ice_over_best_peer_dist": {"median", "p10", "p90"},
        "ice_over_ecmp_dcqcn": {"median", "p10", "p90"}}}}
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from icefabric.control.topology import Topology
from icefabric.files import write_output
from icefabric.sim.bound import paths_ceiling
from icefabric.sim.config import config_for
from icefabric.sim.engine import Simulator
from icefabric.sim.matrix_report import markdown, markdown_spread, plot_matrix
from icefabric.sim.scenarios import (
    DEFAULT_LAYOUT,
    SCENARIOS,
    Layout,
    ScenarioCase,
    build,
    ring_step_cap,
)
from icefabric.sim.stripes import spray_stripes, stripe
from icefabric.sim.sweep import run_tasks
from icefabric.sim.workload import Workload
from icefabric.traffic.modes import MODES, Mode, get_mode

DEFAULT_SCHEMES = (
    "ecmp+dcqcn",
    "ecmp+hpcc",
    "ecmp+pfc",
    "eecmp4+dcqcn",
    "eecmp16+dcqcn",
    "flowlet+hpcc",
    "spray+hpcc",
    "ice",
)
DEFAULT_MESSAGE = 32 << 20
CEILING = "paths-bound"  # sim/bound.py; the earlier tasks ran the paths with no control
Progress = Callable[[int, int, str], None]  # (done, total, what)
Upgrade = Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]  # (task, old result)


def stripes_for(mode: Mode, topo: Topology, failures: int) -> int:
    """QPs per connection the mode's simulation uses (E-ECMP's k, spraying's stripes, else 1)."""
    if mode.balance == "eecmp":
        return mode.qps
    if mode.balance == "spray":
        return spray_stripes(topo, failures=failures)
    return 1


def _score(case: ScenarioCase, cfg: Any, work: Workload) -> float:
    topo = Topology(case.spec)
    res = Simulator(topo, work, cfg, failures=case.failures).run()
    if res.unfinished:
        return 0.0  # did not finish within max_time_us: counted as nothing delivered in time
    return float(np.mean([res.collectives[i].busbw_over_bound for i in case.measured]))


def ceiling_mode(mode: Mode) -> Mode:
    """The mode whose paths bound ``mode``'s: itself, or spraying's stripes for flowlet
    switching, whose paths move in the run (``sim/bound.py``)."""
    return get_mode("spray+hpcc") if mode.balance == "flowlet" else mode


def run_seed(
    scenario: str,
    seed: int,
    schemes: Sequence[str],
    gpus: int,
    message: int,
    partial: str | None = None,
    layout: Layout = DEFAULT_LAYOUT,
) -> dict[str, Any]:
    """One scenario at one seed (and ``layout``): every scheme's score and the ceiling of its paths
    (``sim/bound.py``: the best any rate allocation could do on them), and the CPU seconds it
    took, ``cpu_s``.

    ``partial``: a file where the scores found so far are kept as each run ends, and taken
    from first when it holds this task's (a stopped task goes on from its last finished run;
    the scores come back from JSON bit for bit, ``cpu_s`` adds the earlier runs' CPU)."""
    cpu0 = time.process_time()
    key = {
        "scenario": scenario,
        "seed": seed,
        "schemes": list(schemes),
        "gpus": gpus,
        "message": message,
        **_layout_key(layout),
    }
    done = _read_partial(partial, key)
    case = build(scenario, gpus, seed, message, layout)
    topo = Topology(case.spec)
    striped = _Striped(case.workload)
    scores: dict[str, float] = done["scheme"]
    for name in schemes:
        m = get_mode(name)
        k = stripes_for(m, topo, len(case.failures))
        if name not in scores:
            scores[name] = _score(case, config_for(m, seed=seed), striped(k))
            _write_partial(partial, key, done, cpu0)
    out: dict[str, Any] = {"scheme": {name: scores[name] for name in schemes}}
    out["ceiling"] = _ceilings(case, topo, schemes, seed, striped)
    out["cpu_s"] = round(done["cpu_s"] + time.process_time() - cpu0, 2)
    return out


def upgrade_ceilings(task: tuple[Any, ...], result: dict[str, Any]) -> dict[str, Any]:
    """A task result of the ceiling's earlier definition (the paths run with no control) with
    its ceilings computed again as ``sim/bound.py`` has them (seconds; the schemes' scores are
    the same runs and are kept)."""
    scenario, seed, schemes, gpus, message = task[:5]
    cpu0 = time.process_time()
    case = build(scenario, gpus, seed, message, task[6] if len(task) > 6 else DEFAULT_LAYOUT)
    topo = Topology(case.spec)
    ceil = _ceilings(case, topo, schemes, seed, _Striped(case.workload))
    cpu = round(float(result.get("cpu_s", 0.0)) + time.process_time() - cpu0, 2)
    return {**result, "ceiling": ceil, "cpu_s": cpu}


def _layout_key(layout: Layout) -> dict[str, Any]:
    """A task's layout fields, only where they differ from the default (so that the task
    files of matrices made before there was a layout still match)."""
    out: dict[str, Any] = {}
    if layout.channels != DEFAULT_LAYOUT.channels:
        out["channels"] = layout.channels
    if layout.placement != DEFAULT_LAYOUT.placement:
        out["placement"] = layout.placement
    return out


class _Striped:
    """The workload over k QPs, built once per k."""

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.by_k: dict[int, Workload] = {}

    def __call__(self, k: int) -> Workload:
        if k not in self.by_k:
            self.by_k[k] = stripe(self.w, k)
        return self.by_k[k]


def _ceilings(
    case: ScenarioCase, topo: Topology, schemes: Sequence[str], seed: int, striped: _Striped
) -> dict[str, float]:
    """Each scheme's ceiling, computed once per distinct set of paths (routing x stripes)."""
    out: dict[str, float] = {}
    by_paths: dict[tuple[str, int], float] = {}
    for name in schemes:
        cm = ceiling_mode(get_mode(name))
        k = stripes_for(cm, topo, len(case.failures))
        key = (cm.sim_routing, k)
        if key not in by_paths:
            cfg = config_for(cm, seed=seed)
            value = paths_ceiling(topo, striped(k), cfg, case.measured, case.failures)
            by_paths[key] = round(value, 6)
        out[name] = by_paths[key]
    return out


def _read_partial(partial: str | None, key: dict[str, Any]) -> dict[str, Any]:
    """The runs of task ``key`` done so far, kept in ``partial`` (none: a fresh start)."""
    from icefabric.files import DataFileError, JsonError, parse_json, read_text

    fresh: dict[str, Any] = {"scheme": {}, "cpu_s": 0.0}
    p = Path(partial) if partial is not None else None
    if p is None or not p.is_file() or p.is_symlink():
        return fresh
    try:
        doc = parse_json(read_text(p, what="a matrix task's partial results"))
    except (DataFileError, JsonError):
        return fresh
    if not isinstance(doc, dict) or doc.get("task") != key:
        return fresh
    got = {k: doc.get(k) for k in fresh}
    if not isinstance(got["scheme"], dict):
        return fresh
    if not isinstance(got["cpu_s"], int | float):
        return fresh
    return got


def _write_partial(
    partial: str | None, key: dict[str, Any], done: dict[str, Any], cpu0: float
) -> None:
    if partial is None:
        return
    doc = {**done, "task": key, "cpu_s": done["cpu_s"] + time.process_time() - cpu0}
    path = Path(partial)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_output(path, json.dumps(doc) + "\n")


def distribution(xs: Sequence[float]) -> dict[str, float]:
    """Median, p10 and p90 (numpy's linear interpolation), 4 decimals."""
    a = np.asarray(xs, dtype=np.float64)
    return {
        "median": round(float(np.median(a)), 4),
        "p10": round(float(np.percentile(a, 10)), 4),
        "p90": round(float(np.percentile(a, 90)), 4),
    }


def summarise(per_seed: dict[str, list[dict[str, Any]]], schemes: Sequence[str]) -> dict[str, Any]:
    """Per scenario: distributions per scheme, ceiling, best peer and ICE ÷ best peer."""
    out: dict[str, Any] = {}
    for sc, runs in per_seed.items():
        cell: dict[str, Any] = {"schemes": {}}
        for name in schemes:
            cell["schemes"][name] = {
                "busbw_over_bound": distribution([r["scheme"][name] for r in runs]),
                "seeds": len(runs),
                "ceiling": distribution([r["ceiling"][name] for r in runs]),
            }
        cell["ceiling"] = distribution([max(r["ceiling"].values()) for r in runs])
        peers = [s for s in schemes if MODES[s].peer]
        if peers:
            best = max(peers, key=lambda s: cell["schemes"][s]["busbw_over_bound"]["median"])
            cell["best_peer"] = best
            if "ice" in schemes:
                ratio = [r["scheme"]["ice"] / max(r["scheme"][best], 1e-9) for r in runs]
                cell["ice_over_best_peer_dist"] = distribution(ratio)
                cell["ice_over_best_peer"] = cell["ice_over_best_peer_dist"]["median"]
        if "ice" in schemes and "ecmp+dcqcn" in schemes:
            cell["ice_over_ecmp_dcqcn"] = distribution(
                [r["scheme"]["ice"] / max(r["scheme"]["ecmp+dcqcn"], 1e-9) for r in runs]
            )
        out[sc] = cell
    return out


def run_matrix(
    *,
    scenarios: Sequence[str] = tuple(SCENARIOS),
    schemes: Sequence[str] = DEFAULT_SCHEMES,
    seeds: int = 20,
    gpus: int = 128,
    message: int = DEFAULT_MESSAGE,
    progress: Progress | None = None,
    workers: int = 1,
    cluster: str | None = None,
    tasks_dir: Path | None = None,
    resume: bool = False,
    layout: Layout = DEFAULT_LAYOUT,
) -> dict[str, Any]:
    """Run the matrix as a sweep of scenario-seed tasks (``sweep.run_tasks``): in this process
    with ``workers`` 1 and no ``cluster``, else on a local Dask cluster of ``workers`` processes
    or on the Dask scheduler at ``cluster`` (each task is deterministic, so the document is the
    same either way); the matrix.json doc.

    ``tasks_dir``: each finished task's result is written there at once
    (``SCENARIO-seedN.json``, with the GPUs, message and schemes it ran with), and, without
    ``cluster``, each task's finished runs as they end (``SCENARIO-seedN.partial.json``,
    removed when the matrix is done); ``resume`` takes the ones there that match instead of
    running them again (a stopped run goes on where it stopped, inside a task from its last
    finished run; more seeds add to fewer)."""
    for s in scenarios:
        if s not in SCENARIOS:
            raise ValueError(f"scenarios: expected names from {', '.join(SCENARIOS)}, got {s!r}")
    for s in schemes:
        if "sim" not in get_mode(s).engines:
            raise ValueError(f"schemes: {s} does not run in the simulator")
    if seeds < 1:
        raise ValueError(f"seeds: expected >= 1, got {seeds}")
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    # each task keeps its finished runs in tasks/SCENARIO-seedN.partial.json (not on a user's
    # cluster, whose workers may not share this directory)
    parts = {
        (sc, seed): str(tasks_dir / f"{sc}-seed{seed}.partial.json")
        if tasks_dir is not None and cluster is None
        else None
        for sc in scenarios
        for seed in range(1, seeds + 1)
    }
    if not resume:  # a fresh run takes no earlier run's partial results
        for part in parts.values():
            if part is not None:
                Path(part).unlink(missing_ok=True)
    tasks = [
        (sc, seed, tuple(schemes), gpus, message, parts[(sc, seed)], layout)
        for sc in scenarios
        for seed in range(1, seeds + 1)
    ]
    got = collect(
        run_seed,
        tasks,
        progress=progress,
        workers=workers,
        cluster=cluster,
        tasks_dir=tasks_dir,
        resume=resume,
        upgrade=upgrade_ceilings,
    )
    for part in parts.values():  # every task's result is in its own file now
        if part is not None:
            Path(part).unlink(missing_ok=True)
    per_seed: dict[str, list[dict[str, Any]]] = {
        sc: [got[(sc, seed)] for seed in range(1, seeds + 1)] for sc in scenarios
    }
    return {
        "engine": "sim",
        "gpus": gpus,
        "message_bytes": message,
        "channels": layout.channels,
        "placement": layout.placement,
        "seeds": list(range(1, seeds + 1)),
        "schemes_order": list(schemes),
        "cpu_s": round(sum(r["cpu_s"] for r in got.values()), 1),  # every task's own CPU
        # below 1 the ring scenarios are latency-bound at this size (scenarios.ring_step_cap)
        "ring_step_cap": round(ring_step_cap(gpus, message, channels=layout.channels), 4),
        "scenarios": summarise(per_seed, schemes),
        "per_seed": per_seed,
    }


def collect(
    run: Callable[..., dict[str, Any]],
    tasks: Sequence[tuple[Any, ...]],
    *,
    progress: Progress | None = None,
    workers: int = 1,
    cluster: str | None = None,
    tasks_dir: Path | None = None,
    resume: bool = False,
    upgrade: Upgrade | None = None,
) -> dict[tuple[str, int], dict[str, Any]]:
    """``run(*task)`` for every task (a tuple that starts with scenario and seed) as a sweep
    (``sweep.run_tasks``), each result written to ``tasks_dir`` as it finishes and, with
    ``resume``, taken from there instead of run again; the results by (scenario, seed)."""
    got: dict[tuple[str, int], dict[str, Any]] = {}
    if tasks_dir is not None and resume:
        for t in tasks:
            earlier = _read_task(tasks_dir, t, upgrade)
            if earlier is not None:
                got[(t[0], t[1])] = earlier
    todo = [t for t in tasks if (t[0], t[1]) not in got]
    if progress is not None:
        progress(
            len(got), len(tasks), f"starting ({len(got)} from {tasks_dir})" if got else "starting"
        )

    def on_done(i: int, result: dict[str, Any]) -> None:
        t = todo[i]
        if tasks_dir is not None:
            _write_task(tasks_dir, t, result)
        got[(t[0], t[1])] = result
        if progress is not None:
            progress(len(got), len(tasks), f"{t[0]} seed {t[1]} ({result['cpu_s']:.0f} CPU s)")

    run_tasks(
        run,
        todo,
        cluster=cluster,
        workers=workers,
        serial=workers == 1 and cluster is None,
        progress=False,
        label="matrix",
        on_done=on_done,
    )
    return got


def _task_key(t: tuple[Any, ...]) -> dict[str, Any]:
    if len(t) >= 5:  # the simulator's: (scenario, seed, schemes, gpus, message, partial, layout)
        return {
            "scenario": t[0],
            "seed": t[1],
            "schemes": list(t[2]),
            "gpus": t[3],
            "message": t[4],
            **_layout_key(t[6] if len(t) > 6 else DEFAULT_LAYOUT),
            "ceiling": CEILING,  # tasks of an earlier ceiling: upgrade_ceilings
        }
    # the packet level's: (scenario, seed, schemes, engine)
    return {
        "scenario": t[0],
        "seed": t[1],
        "schemes": list(t[2]),
        "engine": t[3],
        "ceiling": CEILING,
    }


def _task_path(tasks_dir: Path, t: tuple[Any, ...]) -> Path:
    return tasks_dir / f"{t[0]}-seed{t[1]}.json"


def _write_task(tasks_dir: Path, t: tuple[Any, ...], result: dict[str, Any]) -> None:
    tasks_dir.mkdir(parents=True, exist_ok=True)
    doc = {"task": _task_key(t), "result": result}
    write_output(_task_path(tasks_dir, t), json.dumps(doc) + "\n")


def _read_task(
    tasks_dir: Path, t: tuple[Any, ...], upgrade: Upgrade | None = None
) -> dict[str, Any] | None:
    """An earlier run's result of task ``t`` (None: none there, or one of another task); one
    written before the ceiling's definition changed goes through ``upgrade`` (None: run again)."""
    from icefabric.files import DataFileError, JsonError, parse_json, read_text

    p = _task_path(tasks_dir, t)
    if not p.is_file() or p.is_symlink():
        return None
    try:
        doc = parse_json(read_text(p, what="a matrix task"))
    except (DataFileError, JsonError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("result"), dict):
        return None
    key = _task_key(t)
    result: dict[str, Any] = doc["result"]
    if doc.get("task") == key:
        return result
    legacy = {k: v for k, v in key.items() if k != "ceiling"}
    if upgrade is not None and doc.get("task") == legacy:  # the same runs, the old ceiling
        new = upgrade(t, result)
        _write_task(tasks_dir, t, new)  # under the current key from now on
        return new
    return None


def write_matrix(doc: dict[str, Any], out: Path) -> None:
    """``out/matrix.json`` and ``out/matrix.png`` (``icefabric.files.write_output``: never
    through a link, never over another user's file)."""
    out.mkdir(parents=True, exist_ok=True)
    write_output(out / "matrix.json", json.dumps(doc, indent=1) + "\n")
    plot_matrix(doc, out / "matrix.png")


def main(argv: Sequence[str] | None = None) -> int:
    """``make bench``: the 128-GPU matrix (every scenario and default scheme) over ``--seeds``
    seeds (default 20, the issue's run) on a local Dask cluster of ``--workers`` processes;
    prints the CPU time of its tasks (the target: under 30 CPU minutes) and the wall time."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m icefabric.sim.matrix", description=main.__doc__)
    ap.add_argument("--seeds", type=int, default=20, help="seeds to time (default 20)")
    ap.add_argument(
        "--workers", type=int, default=2, help="local Dask worker processes (default 2)"
    )
    ap.add_argument("--gpus", type=int, default=128, help="GPUs (default 128)")
    ap.add_argument(
        "--markdown", metavar="MATRIX_JSON", default=None, help="print a matrix.json as Markdown"
    )
    ap.add_argument(
        "--spread",
        action="store_true",
        help="with --markdown: schemes x scenarios, every cell median [p10, p90]",
    )
    args = ap.parse_args(argv)
    if args.markdown:
        from icefabric.files import DataFileError, JsonError, parse_json, read_text

        try:
            doc = parse_json(read_text(args.markdown, what="a matrix.json"))
            print((markdown_spread if args.spread else markdown)(doc), end="")
        except (DataFileError, JsonError, KeyError, TypeError) as e:
            print(f"matrix: {args.markdown}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 2
        return 0
    wall0 = time.perf_counter()
    doc = run_matrix(seeds=args.seeds, gpus=args.gpus, workers=args.workers)
    wall = time.perf_counter() - wall0
    per = doc["cpu_s"] / args.seeds
    print(
        f"matrix {args.gpus} GPUs, {len(doc['scenarios'])} scenarios x "
        f"{len(doc['schemes_order'])} schemes (+ ceilings) x {args.seeds} seeds: "
        f"{doc['cpu_s']:.1f} s CPU ({doc['cpu_s'] / 60:.1f} CPU min, target < 30 for 20 seeds), "
        f"{wall:.1f} s wall on {args.workers} workers; {per:.1f} s CPU per seed"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
