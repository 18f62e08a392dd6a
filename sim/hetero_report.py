"""Mixed training under each network scheme, as distributions over seeds:
``python -m icefabric.sim.hetero_report --write sim/README.md --plot sim/hetero.svg``.

Two parts, every run a task of one sweep (``sweep.py``: a local Dask cluster by default,
``--cluster tcp://SCHEDULER:8786`` for a user's, ``--serial`` for none):

* **The study's three scenarios** (``hetero.STUDY_SCENARIOS``) under each scheme, and the data
  parallel one also as the earlier model ran it (one NIC per server, no overlap), beside the
  study's figures and the efficiency with an infinitely fast network.
* **The network's effect with scale**: NVIDIA + Biren (half the servers each) in data parallel
  and in pipeline parallel (one stage per group) at 128 ... 4,096 GPUs, the global batch growing
  with the job (16 samples per server, the study scenarios' 256 over 16 servers).

A seed places the servers on the fabric's slots (``railnet.place``), so ECMP's collisions differ
from seed to seed; medians with p10 / p90 over the seeds.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import platform
import resource
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from icefabric.files import DataFileError, JsonError, parse_json, read_text, write_output
from icefabric.sim.config import config_for
from icefabric.sim.hetero import STUDY_SCENARIOS, Cluster, Group, Scenario, Training, run_scenario
from icefabric.sim.sweep import SweepError, run_tasks
from icefabric.traffic.modes import MODES, get_mode, modes_for

BEGIN = "<!-- hetero:begin -->"
END = "<!-- hetero:end -->"
# the schemes are the peers issue's modes (traffic/modes.py, one definition shared with the
# matrix): ecmp+hpcc is ICE's end-side control (HPCC-style, INT-driven) on ECMP's paths, without
# the planner or the controller's caps; --mode adds any other mode the simulator carries
DEFAULT_MODES = ("ecmp+dcqcn", "ecmp+hpcc", "ice")
GPUS = (128, 256, 512, 1024, 2048, 4096)
SAMPLES_PER_SERVER = 16  # the study scenarios' 256 samples over 16 servers


@dataclass(slots=True, frozen=True, kw_only=True)
class Outcome:
    """One scenario under one scheme and seed (what a sweep task returns)."""

    scenario: str
    parallel: str
    scheme: str
    gpus: int
    seed: int
    efficiency: float
    compute_efficiency: float
    step_s: float
    comm_s: float
    cpu_s: float = field(compare=False)  # differs from run to run; results compare without
    # the worker process's peak resident set after the task (MB; the largest task it ran so far)
    peak_mb: float = field(compare=False, default=0.0)


def sim_modes() -> tuple[str, ...]:
    """The modes of ``traffic/modes.py`` the simulator carries (``--mode``'s choices)."""
    names: tuple[str, ...] = modes_for("sim")
    return names


def task(scenario: Scenario, scheme: str, seed: int, cluster: Cluster) -> Outcome:
    """One sweep task: ``run_scenario`` under the mode called ``scheme`` (``traffic/modes.py``;
    E-ECMP's QPs and spraying's stripes applied), reduced to plain figures."""
    cpu0 = time.process_time()
    mode = get_mode(scheme)
    r = run_scenario(scenario, config_for(mode, seed=seed), seed=seed, cluster=cluster, mode=mode)
    return Outcome(
        scenario=scenario.name,
        parallel=scenario.parallel,
        scheme=scheme,
        gpus=r.gpus,
        seed=seed,
        efficiency=r.efficiency,
        compute_efficiency=r.compute_efficiency,
        step_s=r.mixed.step_s,
        comm_s=r.mixed.comm_s,
        cpu_s=time.process_time() - cpu0,
        peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


def scaled(parallel: str, gpus: int, cluster: Cluster) -> Scenario:
    """NVIDIA + Biren over ``gpus`` GPUs, half the servers each, 16 samples per server."""
    servers = gpus // cluster.gpus
    if servers < 2 or servers % 2:
        raise ValueError(f"gpus: expected an even number of {cluster.gpus}-GPU servers, got {gpus}")
    half = servers // 2
    return Scenario(
        name=f"NVIDIA + Biren, {parallel}, {gpus} GPUs",
        parallel=parallel,
        groups=(Group(device="A100", servers=half), Group(device="BR104", servers=half)),
        training=Training(global_batch=SAMPLES_PER_SERVER * servers),
    )


def _stats(xs: list[float]) -> tuple[float, float, float]:
    a = np.array(xs)
    return float(np.median(a)), float(np.percentile(a, 10)), float(np.percentile(a, 90))


def _pct(x: tuple[float, float, float]) -> str:
    return f"{x[0] * 100:.2f} % ({x[1] * 100:.2f}-{x[2] * 100:.2f})"


def study_rows(cluster: Cluster) -> list[tuple[str, Scenario, Cluster]]:
    """The study scenarios, and the data parallel one as the earlier model ran it."""
    rows = [(sc.name, sc, cluster) for sc in STUDY_SCENARIOS]
    dp = STUDY_SCENARIOS[2]
    old = replace(dp, training=replace(dp.training, overlap=False))
    rows.append((f"{dp.name}: 1 NIC per server, no overlap", old, replace(cluster, nics=1)))
    return rows


def save_outcomes(path: str, done: Mapping[str, Outcome]) -> None:
    """Every outcome so far, keyed by row, mode and seed (``--resume``'s file, JSON)."""
    doc = {"hetero_outcomes": {k: asdict(o) for k, o in done.items()}}
    write_output(path, json.dumps(doc, indent=1) + "\n", mode=0o600)


def load_outcomes(path: str) -> dict[str, Outcome]:
    """The outcomes a ``--resume`` file holds (none when it does not exist yet); a one-line
    ValueError naming the file and the entry when it is not such a file."""
    if not Path(path).exists():
        return {}
    try:
        doc = parse_json(read_text(path, what="a hetero_report resume file"))
    except (DataFileError, JsonError) as e:
        raise ValueError(f"--resume: {path}: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("hetero_outcomes"), dict):
        raise ValueError(f"--resume: {path}: expected an object with 'hetero_outcomes'")
    out = {}
    for k, v in doc["hetero_outcomes"].items():
        if not isinstance(v, dict) or not all(isinstance(x, int | float | str) for x in v.values()):
            raise ValueError(f"--resume: {path}: entry {k!r}: expected an object of numbers")
        try:
            out[k] = Outcome(**v)
        except TypeError as e:
            raise ValueError(f"--resume: {path}: entry {k!r}: {e}") from None
    return out


def report(
    seeds: list[int],
    gpus: tuple[int, ...],
    *,
    modes: tuple[str, ...] = DEFAULT_MODES,
    cluster: str | None,
    workers: int,
    serial: bool,
    plot: str | None,
    resume: str | None = None,
) -> str:
    """Run both parts through one sweep (with ``resume``: one sweep per scale point, each
    point's outcomes saved to that file as it ends, and those already in it not run again); the
    Markdown section."""
    base = Cluster()
    study = study_rows(base)
    tasks: list[tuple[object, ...]] = []
    keys: list[str] = []  # the row label, mode and seed: what a resume file is keyed by
    batches: list[list[int]] = [[]]
    for label, sc, cl in study:
        for name in modes:
            for s in seeds:
                batches[0].append(len(tasks))
                tasks.append((sc, name, s, cl))
                keys.append(f"{label}|{name}|{s}")
    for n in gpus:
        for parallel in ("dp", "pp"):
            sc = scaled(parallel, n, base)
            batches.append([])
            for name in modes:
                for s in seeds:
                    batches[-1].append(len(tasks))
                    tasks.append((sc, name, s, base))
                    keys.append(f"{sc.name}|{name}|{s}")
    done = load_outcomes(resume) if resume else {}
    resumed = sum(k in done for k in keys)
    wall0 = time.perf_counter()
    if resume is None:
        out: list[Outcome] = run_tasks(
            task, tasks, cluster=cluster, workers=workers, serial=serial, label="hetero"
        )
    else:
        for b, batch in enumerate(batches):
            todo = [i for i in batch if keys[i] not in done]
            if not todo:
                continue
            first = tasks[todo[0]][0]
            assert isinstance(first, Scenario)
            got = run_tasks(
                task,
                [tasks[i] for i in todo],
                cluster=cluster,
                workers=workers,
                serial=serial,
                label=f"hetero: {first.name}" if b else "hetero: the study's scenarios",
            )
            done.update({keys[i]: o for i, o in zip(todo, got, strict=True)})
            save_outcomes(resume, done)
        out = [done[k] for k in keys]
    wall = time.perf_counter() - wall0
    cpu = sum(o.cpu_s for o in out)
    peak = max((o.peak_mb for o in out), default=0.0)
    by: dict[tuple[str, str], list[Outcome]] = {}
    for k, o in zip(keys, out, strict=True):
        by.setdefault((k.split("|")[0], o.scheme), []).append(o)
    names = list(modes)
    gpu_args = "" if gpus == GPUS else "".join(f" --gpus {n}" for n in gpus)
    if modes != DEFAULT_MODES:
        gpu_args += "".join(f" --mode {m}" for m in modes)
    run_args = " --serial" if serial else f" --workers {workers}" if workers != 2 else ""
    where = "serially" if serial else f"on {cluster}" if cluster else f"on {workers} local workers"
    lines = [
        BEGIN,
        "",
        f"Generated by `python -m icefabric.sim.hetero_report --write sim/README.md --plot "
        f"sim/hetero.svg --seeds {len(seeds)}{gpu_args}{run_args}` ({len(tasks)} runs {where}, "
        + (f"{resumed} of them in earlier invocations resumed from a file, " if resumed else "")
        + f"{wall / 60:.1f} min wall{' in this invocation' if resumed else ''}, "
        f"{cpu / 60:.1f} CPU min in the tasks, {peak:.0f} MB peak resident per worker; "
        f"{platform.machine()}, Python "
        f"{platform.python_version()}). Efficiency: median (p10-p90) over seeds "
        f"{seeds[0]}-{seeds[-1]} (server placement); ideal net: with an infinitely fast network.",
        "",
        "| case | " + " | ".join(names) + " | ideal net | the study |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for label, sc, _ in study:
        effs = [_pct(_stats([o.efficiency for o in by[(label, n)]])) for n in names]
        ideal = by[(label, names[0])][0].compute_efficiency
        st = f"{sc.study_efficiency * 100:.2f} %" if sc.study_efficiency else "-"
        lines.append(f"| {label} | " + " | ".join(effs) + f" | {ideal * 100:.2f} % | {st} |")
    lines += [
        "",
        "NVIDIA + Biren at scale (half the servers each, 16 samples per server; pipeline parallel: "
        "one stage per group):",
        "",
        "| parallel | GPUs | " + " | ".join(names) + " | ideal net | CPU s per run |",
        "|---|---|" + "---|" * (len(names) + 2),
    ]
    curves: dict[tuple[str, str], list[tuple[int, tuple[float, float, float]]]] = {}
    for parallel in ("dp", "pp"):
        for n in gpus:
            key = scaled(parallel, n, base).name
            stats = {m: _stats([o.efficiency for o in by[(key, m)]]) for m in names}
            for m in names:
                curves.setdefault((parallel, m), []).append((n, stats[m]))
            ideal = by[(key, names[0])][0].compute_efficiency
            cpus = [o.cpu_s for m in names for o in by[(key, m)]]
            lines.append(
                f"| {parallel} | {n} | "
                + " | ".join(_pct(stats[m]) for m in names)
                + f" | {ideal * 100:.2f} % | {float(np.median(cpus)):.0f} |"
            )
    lines += ["", END]
    if plot:
        _plot(curves, names, plot)
    return "\n".join(lines)


def _plot(
    curves: dict[tuple[str, str], list[tuple[int, tuple[float, float, float]]]],
    names: list[str],
    path: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for ax, parallel, title in zip(
        axes, ("dp", "pp"), ("data parallel", "pipeline parallel"), strict=True
    ):
        for m in names:
            pts = curves.get((parallel, m), [])
            if not pts:
                continue
            x = [p[0] for p in pts]
            med = [p[1][0] * 100 for p in pts]
            ax.plot(x, med, marker="o", label=m)
            ax.fill_between(
                x, [p[1][1] * 100 for p in pts], [p[1][2] * 100 for p in pts], alpha=0.2
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.set_ylabel("mixed-training efficiency %")
        ax.set_title(f"NVIDIA + Biren, {title}")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("median and p10-p90 over seeds (hetero_report.py)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg" if path.endswith(".svg") else "png", dpi=110)
    plt.close(fig)
    write_output(path, buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    """Run the report; print it, or write it into a file between the markers."""
    ap = argparse.ArgumentParser(
        prog="python -m icefabric.sim.hetero_report", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--write", default=None, help="file whose marked section to replace")
    ap.add_argument("--plot", default=None, help="PNG of efficiency vs GPUs per scheme")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    ap.add_argument(
        "--gpus", type=int, action="append", help=f"scale points (default {list(GPUS)})"
    )
    ap.add_argument(
        "--mode",
        action="append",
        metavar="MODE",
        help=f"a scheme (traffic/modes.py), repeatable: one of {', '.join(sim_modes())} "
        f"(default {' '.join(DEFAULT_MODES)})",
    )
    ap.add_argument("--cluster", default=None, help="Dask scheduler address, tcp://HOST:8786")
    ap.add_argument("--workers", type=int, default=2, help="local Dask worker processes")
    ap.add_argument("--serial", action="store_true", help="no Dask: one task after another")
    ap.add_argument(
        "--resume",
        metavar="FILE",
        default=None,
        help="save each scale point's outcomes to FILE as it ends and skip those already "
        "there (a sweep stopped part-way goes on where it stopped; same code and options)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines drown the bar
    if args.seeds < 1:
        sys.stderr.write(f"hetero_report: --seeds: expected >= 1, got {args.seeds}\n")
        return 2
    if args.write and not Path(args.write).is_file():
        sys.stderr.write(f"hetero_report: --write: no file {args.write}\n")
        return 2
    try:
        gpus = tuple(args.gpus or GPUS)
        for n in gpus:
            scaled("dp", n, Cluster())
        modes = tuple(dict.fromkeys(args.mode or DEFAULT_MODES))
        for m in modes:
            if m not in sim_modes():
                raise ValueError(
                    f"--mode: expected one of {', '.join(sim_modes())}, got {m!r}"
                    if m not in MODES
                    else f"--mode: {m} has no simulator model (engines {MODES[m].engines})"
                )
        text = report(
            list(range(1, args.seeds + 1)),
            gpus,
            modes=modes,
            cluster=args.cluster,
            workers=args.workers,
            serial=args.serial,
            plot=args.plot,
            resume=args.resume,
        )
    except (SweepError, ValueError) as e:
        sys.stderr.write(f"hetero_report: {e}\n")
        return 2
    if args.write:
        path = Path(args.write)
        try:
            old = read_text(path, what="a README to update")
        except DataFileError as e:
            sys.stderr.write(f"hetero_report: {str(e).splitlines()[0]}\n")
            return 2
        if BEGIN not in old or END not in old:
            sys.stderr.write(f"hetero_report: {path}: no {BEGIN} ... {END} section to replace\n")
            return 2
        head, rest = old.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        write_output(path, head + text + tail)
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
